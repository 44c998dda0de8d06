/* run: the stages of `preflight check` and `preflight run` as one table, the way pkg/checks
 * holds the local checks: every stage is one function of one shape, with its id, the check
 * it feeds, the guard's message while it runs and its share of the time left. One loop
 * (pf_run_stages) runs a table in order, times every stage, keeps the guard's message
 * current, and at the deadline skips what is left, saying why, so that the verdict is still
 * written in time (docs/design.md, "The stages of `preflight run`").
 *
 * Also the session every subcommand opens: the config, the verdict, the context and the
 * guard. The library never prints: cmd/preflight delivers the verdict. */
#ifndef PF_RUN_H
#define PF_RUN_H

#include <stdbool.h>
#include <stddef.h>

#include "../context/context.h"
#include "../rendezvous/rendezvous.h"

struct pf_run;
struct pf_counters;

/* 0: go on; a negative PF_E* code (message set) stops the table: the caller reports it. */
typedef int (*pf_run_fn)(struct pf_run *R);

struct pf_run_stage {
    const char *id;    /* "local", "meet", "collective.tcp", ... */
    const char *check; /* the check it feeds; the guard names it on a timeout ("preflight") */
    const char *doing; /* the guard's message while it runs; NULL: the stage sets its own */
    double share;      /* of the time left when it starts: its soft deadline; 0: the run's */
    bool always;       /* runs after the deadline too (the report) */
    pf_run_fn fn;
};

enum pf_run_state { PF_RUN_PENDING = 0, PF_RUN_DONE, PF_RUN_FAILED, PF_RUN_SKIPPED };

/* What became of one stage. */
struct pf_run_timing {
    const char *id;
    enum pf_run_state state;
    double seconds;
    char why[192]; /* skipped: why */
};

#define PF_RUN_MAX_STAGES 16
/* What the deadline leaves the verdict's delivery: a stage that would start later is skipped.
 * The stages' own waits end a second before the deadline (pkg/rendezvous' cutoff), so the
 * quick stages after them (agreement, counters, report) still run in that second. */
#define PF_RUN_DELIVER_S 0.5

/* How a subcommand opens its session. */
struct pf_run_opts {
    const char *config_path; /* NULL: none */
    const char *root;        /* NULL: "/" */
    bool strict;             /* warn fails the exit code */
    double timeout_s;        /* the guard's deadline; 0: none */
    char **environ_;
    void (*progress)(void *arg, const char *line); /* progress lines; NULL: none */
    void *progress_arg;
    struct pf_identity_opts rdv; /* `run`: how to find the other pods */
};

struct run_pods; /* the stages among pods (pkg/run/internal.h) */

struct pf_run {
    const struct pf_run_opts *opts;
    struct pf_config config;
    struct pf_verdict verdict;
    struct pf_ctx ctx;
    double t0;
    const char *verdict_path; /* what the guard writes; NULL: no guard */
    /* rdma.counters: the snapshot before the checks and traffic, and the window `check` waits */
    struct pf_counters *counters;
    double counters_t, counters_window;
    /* the loop */
    double deadline;       /* the guard's deadline less PF_RUN_DELIVER_S; 0: none */
    double stage_deadline; /* the stage under way: its share of the time left, or deadline */
    const struct pf_run_stage *stage;
    struct pf_run_timing timing[PF_RUN_MAX_STAGES];
    size_t ntiming;
    struct run_pods *pods;
    void *user; /* for a table's own use (tests) */
};

/* Opens the session: config defaults, the verdict, the context; with guard (a verdict path,
 * "-" for stdout) the guard is installed first, before anything slow, with the deadline
 * opts->timeout_s. Then the config file, the host root and the environment. A negative code
 * with the message set on a usage error; close the session either way. */
int pf_run_open(struct pf_run *R, const struct pf_run_opts *o, const char *guard);
void pf_run_close(struct pf_run *R);

/* The config's finding policy, in the verdict's shape (pf_verdict_finalize, the guard). */
int pf_run_policy(void *config, const char *check_id, const char *code, enum pf_status status);

/* Runs the table in order. Before each stage: past R->deadline (and not `always`) it is
 * skipped, its check (when it has none yet) skipped with the reason; else the guard names
 * its check and message and R->stage_deadline is set from its share. The first negative
 * return stops the loop and is returned; else 0. R->timing says what each stage did. */
int pf_run_stages(struct pf_run *R, const struct pf_run_stage *table, size_t n);

/* "local 0.31 s, meet 1.20 s, ..., report skipped": the timing of the last pf_run_stages. */
void pf_run_timing_text(const struct pf_run *R, struct pf_buf *out);

/* The tables of the subcommands. */
extern const struct pf_run_stage pf_run_check_table[];
extern const size_t pf_run_check_table_len;
extern const struct pf_run_stage pf_run_run_table[];
extern const size_t pf_run_run_table_len;

/* `check`'s counter window: PREFLIGHT_COUNTERS_WINDOW seconds (0..60), by default
 * PF_COUNTERS_MIN_INTERVAL_S. PF_EUSAGE naming the variable when it is not a number. */
int pf_run_counters_window(double *out, const struct pf_env *e);

/* The pod's name, namespace and node (POD_NAME, POD_NAMESPACE, NODE_NAME, the hostname). */
void pf_run_record_pod(struct pf_run *R);

/* `preflight env`: the NCCL environment alone (env_file: a file of NAME=VALUE lines in place
 * of the process's variables and nccl.conf). A negative code when env_file cannot be read. */
int pf_run_env(struct pf_run *R, const char *env_file);
/* The advice lines `env` prints after the verdict (pkg/checks). */
void pf_run_advice(const struct pf_run *R, struct pf_strlist *out);

/* `preflight check`: the local checks and rdma.counters after the window. */
int pf_run_check(struct pf_run *R);
/* `preflight run`: every stage, from the local checks to the report. */
int pf_run_run(struct pf_run *R);

/* Who this pod is: gathers what pf_identity_derive_pod reads (the host name, its FQDN when the
 * answer depends on it, the podinfo files under ctx's root, /etc/volcano) and calls it. */
int pf_run_whoami(struct pf_identity *out, const struct pf_identity_opts *o, struct pf_ctx *ctx,
                  int default_port);
/* The identity as evidence: {rule, rank, worldSize, coordinator, member, explain, from}. */
void pf_run_ident_evidence(struct pf_node *map, const struct pf_identity *id);

#endif
