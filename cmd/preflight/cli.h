/* The command line: options (opts.c), help texts and did-you-mean (help.c), and the explain
 * command's output (explain_cmd.c). The subcommands themselves live in pkg/. */
#ifndef PF_CLI_H
#define PF_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "../../pkg/app/app.h"

#define PF_CLI_MAX_ARGS 256

/* What the command line asked for, besides the options in struct pf_options. */
struct pf_cli {
    const char *cmd;                   /* the subcommand; NULL when none was given */
    const char *arg;                   /* explain's ID|CODE, install's DIR, help's COMMAND */
    const char *args[PF_CLI_MAX_ARGS]; /* log's files */
    int nargs;
    bool list; /* explain --list */
};

/* Parses argv (options anywhere, getopt_long style: --name value, --name=value, -v, --) and
 * then the PREFLIGHT_* variables for what no flag set. Returns -1 when the command should
 * run, else the exit code to end with (help or --version printed, or a usage error printed
 * on stderr). */
int pf_cli_parse(struct pf_cli *cli, struct pf_options *o, int argc, char **argv);

/* "preflight: <message>" and the pointer to --help on stderr; returns PF_EXIT_USAGE. */
int pf_cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The help of one command (NULL or unknown: the overview) on f. */
void pf_cli_help(FILE *f, const char *cmd);
/* True when name is a subcommand. */
bool pf_cli_is_command(const char *name);
/* The subcommand nearest to word, or NULL when none is near. */
const char *pf_cli_suggest_command(const char *word);
/* The long option nearest to word ("--formt" -> "--format"), or NULL. */
const char *pf_cli_suggest_option(const char *word);
/* The version line: "preflight 0.1.0 (git abc1234)". */
void pf_cli_version(FILE *f);

/* `preflight explain ID|CODE` and `preflight explain --list`: the docs rendered for a terminal
 * (ANSI) or as plain text. */
int pf_cli_explain(const struct pf_options *o, const struct pf_cli *cli);

#endif
