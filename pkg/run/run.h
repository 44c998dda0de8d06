/* run: the stages of `preflight check` and `preflight run` as one table, the way pkg/checks
 * holds the local checks: every stage is one function of one shape, with its id, the check
 * it feeds and the guard's message while it runs. One loop (pf_run_stages) runs a table in
 * order, times every stage, keeps the guard's message current, and at the deadline skips
 * what is left, saying why, so that the verdict is still written in time (docs/design.md,
 * "The stages of `preflight run`").
 *
 * run owns the time: R->deadline is the one clock. The stages' waits are cut from it here
 * (pf_run_waits, pf_run_wait, the PF_RUN_*_S below) and handed down: to the context
 * (ctx.deadline), to the meeting (its setup's deadlines and waits) and to the stages' calls.
 *
 * Also the session every subcommand opens: the config, the verdict, the context and the
 * guard. The library never prints: cmd/preflight delivers the verdict. */
#ifndef PF_RUN_H
#define PF_RUN_H

#include <stdbool.h>
#include <stddef.h>

#include "../context/context.h"
#include "../identity/identity.h"

struct pf_run;
struct pf_counters;

/* 0: go on; a negative PF_E* code (message set) stops the table: the caller reports it. */
typedef int (*pf_run_fn)(struct pf_run *R);

struct pf_run_stage {
    const char *id;    /* "local", "meet", "collective.tcp", ... */
    const char *check; /* the check it feeds; the guard names it on a timeout ("preflight") */
    const char *doing; /* the guard's message while it runs; NULL: the stage sets its own */
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

/* ---- the time: every number `preflight run` waits (docs/design.md, "The waits") */

/* What the guard's deadline leaves the verdict's delivery: R->deadline is the guard's deadline
 * less this, and a stage that would start after R->deadline is skipped. */
#define PF_RUN_DELIVER_S 0.5
/* Every wait inside a stage ends this long before R->deadline (pf_run_waits_end: the
 * context's deadline, the meeting's cutoff, pf_run_wait), so that the quick stages after it
 * (agreement, counters, report) still run. */
#define PF_RUN_AFTER_S 0.5
/* The GPU stage's NCCL deadline ends this long before the waits' end: NCCL's abort and the
 * stage's findings after it. */
#define PF_RUN_NCCL_AFTER_S 1.0
/* A step among pods that follows a wait of its own waits this much longer: the skew between
 * the pods' starts of that wait (the mesh barrier, the all-reduce's gather, the GPU stage's
 * allgather after nccl.timeoutSeconds). */
#define PF_RUN_SKEW_S 5.0
/* The summary stage's gather of every rank's statuses at rank 0. */
#define PF_RUN_REPORT_S 15.0
/* The meeting's fixed waits (struct pf_rdv_waits), each also bounded by its cutoff. */
#define PF_RUN_DIAL_S 5.0     /* one dial of rank 0's address */
#define PF_RUN_FRAME_S 10.0   /* a JOIN or RESULT sent; the HELLO of a new connection read */
#define PF_RUN_FLUSH_S 5.0    /* rank 0: the roster, or the SUMMARY, flushed to every rank */
#define PF_RUN_SUMMARY_S 30.0 /* a rank waits for rank 0's SUMMARY */
/* a step's message sent; its answer: the step's own wait + this (a probe step's: the probe's) */
#define PF_RUN_STEP_S 15.0
#define PF_RUN_CLOSE_S 2.0 /* rank 0 lets a refused connection read why, then closes it */
/* a joiner stops waiting for rank 0's roster this long before the meeting's cutoff */
#define PF_RUN_ROSTER_MARGIN_S 0.5
/* The API server's requests of one check together: the Event and the annotation, the node's
 * label, the ResourceClaims read (ctx.api_s); each also ends by the context's deadline. */
#define PF_RUN_API_S 5.0

/* A wait that is a share of the time left: of what is left before pf_run_waits_end, at least
 * min and at most max seconds. */
struct pf_run_wait {
    const char *id; /* "tcp.allreduce": the docs' name */
    double share, min, max;
};
extern const struct pf_run_wait pf_run_waits[];
extern const size_t pf_run_waits_len;

/* How a subcommand opens its session. */
struct pf_run_opts {
    const char *config_path; /* NULL: none */
    const char *root;        /* NULL: "/" */
    bool strict;             /* warn fails the exit code */
    double timeout_s;        /* the guard's deadline; 0: none */
    char **environ_;
    void (*progress)(void *arg, const char *line); /* progress lines; NULL: none */
    void *progress_arg;
    struct pf_identity_opts identity; /* `run`: how to find the other pods */
    /* where the verdict goes (NULL or "-": no file; ctx.verdict_path), and whether a guard
     * writes it there ("-": stdout) on a signal or at the deadline */
    const char *verdict_path;
    bool guard;
    /* --pushgateway (NULL: PREFLIGHT_PUSHGATEWAY, else report.pushgateway) and --results
     * (NULL: report.resultsFile), over the config */
    const char *pushgateway, *results_file;
    bool counters_window; /* `check`: rdma.counters waits PREFLIGHT_COUNTERS_WINDOW */
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
    double deadline; /* the one clock: the guard's deadline less PF_RUN_DELIVER_S; 0: none */
    const struct pf_run_stage *stage;
    struct pf_run_timing timing[PF_RUN_MAX_STAGES];
    size_t ntiming;
    struct run_pods *pods;
    void *user; /* for a table's own use (tests) */
};

/* Opens the session with everything it needs: config defaults, the verdict, the context;
 * with opts->guard the guard is installed first, before anything slow, with the deadline
 * opts->timeout_s. Then the config file, the host root, the environment, and the command
 * line's values over the config's (Pushgateway, results file; the counters' window). A
 * negative code with the message set on a usage error; close the session either way. */
int pf_run_open(struct pf_run *R, const struct pf_run_opts *o);
void pf_run_close(struct pf_run *R);

/* The config's finding policy, in the verdict's shape (pf_verdict_finalize, the guard). */
int pf_run_policy(void *config, const char *check_id, const char *code, enum pf_status status);

/* When every wait inside a stage ends: R->deadline less PF_RUN_AFTER_S; 0: none. */
double pf_run_waits_end(const struct pf_run *R);
/* The deadline (a pf_now() time) of the wait id of pf_run_waits: pf_deadline_share(
 * pf_run_waits_end(R), share, min, max); with no deadline, now + max. */
double pf_run_wait(const struct pf_run *R, const char *id);
/* The same as seconds from now (0 when past), for the calls that take a timeout. */
double pf_run_wait_s(const struct pf_run *R, const char *id);

/* Runs the table in order. Before each stage: past R->deadline (and not `always`) it is
 * skipped, its check (when it has none yet) skipped with the reason; else the guard names
 * its check and message and the context's deadline is set (pf_run_waits_end). The first negative
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
