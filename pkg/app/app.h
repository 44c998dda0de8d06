/* app: the subcommands, as the command line calls them. Returns exit codes; never exits. */
#ifndef PF_APP_H
#define PF_APP_H

#include <stdbool.h>
#include <stdio.h>

#include "../rendezvous/rendezvous.h"

enum pf_format { PF_FORMAT_AUTO = 0, PF_FORMAT_HUMAN, PF_FORMAT_YAML };

enum { PF_EXIT_PASS = 0, PF_EXIT_FAIL = 1, PF_EXIT_USAGE = 2 };

struct pf_options {
    const char *config_path;  /* NULL: none */
    const char *verdict_path; /* NULL: the default for the command */
    const char *root;         /* NULL: "/" */
    enum pf_format format;
    bool strict;
    double timeout_s;     /* 0: none */
    const char *env_file; /* `env --env-file` */
    struct pf_rdv_opts rdv;
    char **environ_; /* the process's environment */
    FILE *out;       /* stdout */
    FILE *err;       /* stderr */
    bool out_is_tty;
    int width;                   /* the human form's line width: COLUMNS, the terminal's, else 80 */
    bool verbose;                /* -v: every check with its findings in the human form */
    const char *termination_log; /* --termination-log; NULL: PREFLIGHT_TERMINATION_LOG, default */
    bool dry_run;                /* run --dry-run: print the identity, join nothing */
};

void pf_options_init(struct pf_options *o);

int pf_app_check(const struct pf_options *o);
int pf_app_run(const struct pf_options *o);
int pf_app_env(const struct pf_options *o);
int pf_app_explain(const struct pf_options *o, const char *what);
int pf_app_version(const struct pf_options *o);
/* `preflight log FILE...`: NCCL_DEBUG=INFO logs of a past run (check nccl.log). */
int pf_app_log(const struct pf_options *o, const char *const *files, int nfiles);
/* `preflight install DIR`: copies this binary to DIR/preflight (mode 0755, atomically). */
int pf_app_install(const struct pf_options *o, const char *dir);

#endif
