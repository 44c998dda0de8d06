/* preflight: flags, subcommands and exit codes; everything else lives in pkg/. */
#define _GNU_SOURCE
#include <unistd.h>

#include "cli.h"

extern char **environ;

int main(int argc, char **argv)
{
    struct pf_options o;
    pf_options_init(&o);
    o.environ_ = environ;
    o.out_is_tty = isatty(STDOUT_FILENO);

    /* options, help, did-you-mean and the PREFLIGHT_* variables: cmd/preflight/opts.c; the
     * commands and what each takes: cmds[] in cmd/preflight/help.c */
    static struct pf_cli cli;
    int parsed = pf_cli_parse(&cli, &o, argc, argv);
    if (parsed >= 0) return parsed;
    const struct pf_cli_cmd *c = pf_cli_find(cli.cmd); /* pf_cli_parse knows it is one */
    if (c->needs && (!cli.arg || !*cli.arg)) return pf_cli_usage_error(c->name, "%s", c->needs);
    return c->fn(&o, &cli);
}
