/* The command line: options (opts.c), the command table (commands.c), help texts and
 * did-you-mean (help.c), one file a
 * subcommand (cmd_check.c, cmd_run.c, cmd_env.c, cmd_log.c, cmd_watch.c, cmd_install.c,
 * cmd_version.c, cmd_explain.c, cmd_inject.c, cmd_report.c) calling pkg/run and the library, and
 * what they share (session.c: the session, progress lines, printing the verdict). Exit codes are
 * decided here; the library never prints and never exits. */
#ifndef PF_CLI_H
#define PF_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "../../pkg/identity/identity.h"
#include "../../pkg/run/run.h"
#include "../../pkg/verdict/verdict.h"

enum pf_format { PF_FORMAT_AUTO = 0, PF_FORMAT_HUMAN, PF_FORMAT_YAML, PF_FORMAT_JSON };

enum { PF_EXIT_PASS = 0, PF_EXIT_FAIL = 1, PF_EXIT_USAGE = 2 };
/* `preflight log` read no NCCL line: nothing judged, neither pass nor a class of failure */
enum { PF_EXIT_UNKNOWN = 6 };

struct pf_options {
    const char *config_path;  /* NULL: none */
    const char *verdict_path; /* NULL: the default for the command */
    const char *root;         /* NULL: "/" */
    enum pf_format format;
    bool strict;
    double timeout_s;     /* 0: none */
    const char *env_file; /* `env --env-file` */
    struct pf_identity_opts identity;
    char **environ_; /* the process's environment */
    FILE *out;       /* stdout */
    FILE *err;       /* stderr */
    bool out_is_tty;
    int width;                   /* the human form's line width: COLUMNS, the terminal's, else 80 */
    bool verbose;                /* -v: every check with its findings in the human form */
    const char *pushgateway;     /* --pushgateway URL: over report.pushgateway */
    const char *results;         /* --results FILE: over report.resultsFile */
    const char *termination_log; /* --termination-log; NULL: PREFLIGHT_TERMINATION_LOG, default */
    bool dry_run;                /* run --dry-run: print the identity, join nothing */
    const char *inject_file;     /* inject -f FILE ("-": stdin) */
    const char *image;           /* inject --image */
    bool watch;                  /* inject --watch */
    const char *html;            /* report --html FILE ("-": stdout) */
};

void pf_options_init(struct pf_options *o);

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

/* What positional arguments a command takes after its name. */
enum pf_cli_args {
    PF_CLI_ARGS_NONE,
    PF_CLI_ARGS_ONE,  /* one, in cli->arg */
    PF_CLI_ARGS_MANY, /* up to PF_CLI_MAX_ARGS, in cli->args */
};

/* Which commands an option belongs to (a command's group, an option's groups). */
enum {
    G_RUN = 1 << 0,
    G_CHECK = 1 << 1,
    G_ENV = 1 << 2,
    G_LOG = 1 << 3,
    G_EXPLAIN = 1 << 4,
    G_VERSION = 1 << 5,
    G_WATCH = 1 << 6,
    G_INJECT = 1 << 7,
    G_REPORT = 1 << 8,
    G_OUT = G_RUN | G_CHECK | G_ENV | G_LOG, /* commands that print a verdict */
};

/* One row of the command table (commands.c's pf_cli_cmds[]): main() looks the command up and calls
 * fn; pf_cli_parse reads the arguments by args; the help is built from the rest. */
struct pf_cli_cmd {
    const char *name;
    int (*fn)(const struct pf_options *o, const struct pf_cli *cli); /* NULL: help */
    enum pf_cli_args args;
    const char *needs; /* the usage error when the one argument is missing; NULL: optional */
    unsigned group;    /* the options it takes (help.c) */
    const char *synopsis;
    const char *summary;
    const char *about;
    const char *examples;
};

/* The commands an option belongs to (help.c's option table, which the help is printed from
 * and pf_cli_parse refuses an option by): long_name without "--" ("rank"); 0 when unknown,
 * ~0u for one every command takes (--help). */
unsigned pf_cli_option_groups(const char *long_name);

/* The row of a subcommand; NULL when name is none. */
const struct pf_cli_cmd *pf_cli_find(const char *name);
/* The command table (commands.c), pf_cli_ncmds rows, at most PF_CLI_CMDS_MAX. */
#define PF_CLI_CMDS_MAX 32
extern const struct pf_cli_cmd pf_cli_cmds[];
extern const size_t pf_cli_ncmds;
/* The help of one command (NULL or unknown: the overview) on f. */
void pf_cli_help(FILE *f, const char *cmd);
/* The subcommand nearest to word, or NULL when none is near. */
const char *pf_cli_suggest_command(const char *word);
/* The long option nearest to word ("--formt" -> "--format"), or NULL. */
const char *pf_cli_suggest_option(const char *word);
/* The version line: "preflight 0.1.0 (git abc1234)". */
void pf_cli_version(FILE *f);

/* ---- the subcommands (the fn column of pf_cli_cmds[]): each returns the exit code */
int pf_cmd_check(const struct pf_options *o, const struct pf_cli *cli);
int pf_cmd_run(const struct pf_options *o, const struct pf_cli *cli);
int pf_cmd_env(const struct pf_options *o, const struct pf_cli *cli);
/* `preflight log FILE...`: NCCL_DEBUG=INFO logs of a past run (check nccl.log). */
int pf_cmd_log(const struct pf_options *o, const struct pf_cli *cli);
/* `preflight watch DIR`: the sidecar that follows the trainer's NCCL_DEBUG_FILE files (check
 * watch). */
int pf_cmd_watch(const struct pf_options *o, const struct pf_cli *cli);
/* `preflight install DIR`: copies this binary to DIR/preflight (mode 0755, atomically). */
int pf_cmd_install(const struct pf_options *o, const struct pf_cli *cli);
int pf_cmd_version(const struct pf_options *o, const struct pf_cli *cli);
/* `preflight explain ID|CODE` and `preflight explain --list`: the docs rendered for a terminal
 * (ANSI) or as plain text. */
int pf_cmd_explain(const struct pf_options *o, const struct pf_cli *cli);
/* `preflight inject [-f FILE]`: the gate added to a job's YAML, stdin (or FILE) to stdout. */
int pf_cmd_inject(const struct pf_options *o, const struct pf_cli *cli);
/* `preflight report VERDICT --html FILE`: one self-contained HTML page of a verdict. */
int pf_cmd_report(const struct pf_options *o, const struct pf_cli *cli);

/* ---- session.c: what the subcommands share */
/* pf_run_open with the command line's options and the verdict's path (NULL: none); flags:
 * PF_CMD_GUARD (a guard writes the verdict on a signal or at the deadline), PF_CMD_COUNTERS
 * (`check`'s counters window). Progress lines go to o->err. ro must live as long as R. */
enum { PF_CMD_GUARD = 1, PF_CMD_COUNTERS = 2 };
int pf_cmd_session_open(struct pf_run *R, struct pf_run_opts *ro, const struct pf_options *o,
                        const char *verdict_path, unsigned flags);
/* The human form unless --format yaml or json. */
bool pf_cmd_human(const struct pf_options *o);
/* A document (--format yaml or json, as o->format says) on o->out. */
int pf_cmd_print_node(const struct pf_options *o, const struct pf_node *doc);
/* Finalizes the verdict, hands it to the guard, writes it to path (NULL: no file; "-":
 * stdout as YAML) and prints it in the chosen form. A negative code when the file could not
 * be written (said on o->err). */
int pf_cmd_deliver(struct pf_run *R, const struct pf_options *o, const char *path);
/* Says on o->err which report.* keys the config file sets that cmd does not act on (pushes:
 * it pushes to report.pushgateway and writes report.resultsFile, as check does); nothing
 * when none. */
void pf_cmd_config_unused(const struct pf_run *R, const struct pf_options *o, const char *cmd,
                          bool pushes);
/* "preflight: <the error message>" on o->err; returns PF_EXIT_USAGE. */
int pf_cmd_usage(const struct pf_options *o);

#endif
