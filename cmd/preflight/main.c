/* preflight: flags, subcommands and exit codes; everything else lives in pkg/. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

extern char **environ;

#define usage_error(...) pf_cli_usage_error(cmd, __VA_ARGS__)

int main(int argc, char **argv)
{
    struct pf_options o;
    pf_options_init(&o);
    o.environ_ = environ;
    o.out_is_tty = isatty(STDOUT_FILENO);

    /* options, help, did-you-mean and the PREFLIGHT_* variables: cmd/preflight/opts.c */
    static struct pf_cli cli;
    int parsed = pf_cli_parse(&cli, &o, argc, argv);
    if (parsed >= 0) return parsed;
    const char *cmd = cli.cmd;
    const char *explain_what = cli.arg;
    const char *const *log_files = cli.args;
    int nlog = cli.nargs;

    if (o.env_file && strcmp(cmd, "env") != 0)
        return usage_error("--env-file is an option of 'preflight env', not of '%s'", cmd);
    if (strcmp(cmd, "run") == 0) return pf_cmd_run(&o);
    if (strcmp(cmd, "check") == 0) return pf_cmd_check(&o);
    if (strcmp(cmd, "env") == 0) return pf_cmd_env(&o);
    if (strcmp(cmd, "version") == 0) return pf_cmd_version(&o);
    if (strcmp(cmd, "log") == 0) return pf_cmd_log(&o, log_files, nlog);
    if (strcmp(cmd, "install") == 0) {
        if (!explain_what || !*explain_what)
            return usage_error("install needs a folder (preflight install DIR)");
        return pf_cmd_install(&o, explain_what);
    }
    if (strcmp(cmd, "explain") == 0) {
        if (!explain_what && !cli.list)
            return usage_error("explain needs a check id or finding code (or --list)");
        return pf_cli_explain(&o, &cli);
    }
    return usage_error("unknown command '%s'", cmd);
}
