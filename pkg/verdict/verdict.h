/* verdict: the in-memory result of a run (checks, findings, evidence, environment), its YAML
 * form (schema preflight/v1, written with libyaml's emitter) and its human form. */
#ifndef PF_VERDICT_H
#define PF_VERDICT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../base/base.h"
#include "../explain/explain.h"

/* Ordered so that the worst status is the largest. */
enum pf_status {
    PF_SKIP = 0,
    PF_PASS = 1,
    PF_WARN = 2,
    PF_FAIL = 3,
};
const char *pf_status_name(enum pf_status s);
/* "pass" -> PF_PASS ...; returns -1 for an unknown name. */
int pf_status_parse(const char *s);

/* ---- A small tree of scalars, maps and sequences (evidence, environment, collectives). */
enum pf_node_kind {
    PF_NODE_STR,
    PF_NODE_INT,
    PF_NODE_DBL,
    PF_NODE_BOOL,
    PF_NODE_NULL,
    PF_NODE_MAP,
    PF_NODE_SEQ
};
struct pf_node {
    enum pf_node_kind kind;
    char *key; /* set when the node is a map member */
    char *str;
    long long i;
    double d;
    bool b;
    struct pf_node *first; /* children of a map or sequence */
    struct pf_node *last;
    struct pf_node *next;
    size_t count;
};
struct pf_node *pf_node_new_map(void);
struct pf_node *pf_node_new_seq(void);
void pf_node_free(struct pf_node *n);
/* Map setters replace an existing key; each returns the child. */
struct pf_node *pf_node_set_str(struct pf_node *map, const char *key, const char *value);
/* Adds key: value at the end of map without looking for key first (a map of thousands of
 * members built in order); the caller knows the key is not there yet. */
struct pf_node *pf_node_append_str(struct pf_node *map, const char *key, const char *value);
struct pf_node *pf_node_set_strf(struct pf_node *map, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
struct pf_node *pf_node_set_int(struct pf_node *map, const char *key, long long v);
struct pf_node *pf_node_set_dbl(struct pf_node *map, const char *key, double v);
struct pf_node *pf_node_set_bool(struct pf_node *map, const char *key, bool v);
struct pf_node *pf_node_set_null(struct pf_node *map, const char *key);
struct pf_node *pf_node_set_map(struct pf_node *map, const char *key);
struct pf_node *pf_node_set_seq(struct pf_node *map, const char *key);
/* Sequence appenders; each returns the new element. */
struct pf_node *pf_node_add_str(struct pf_node *seq, const char *value);
struct pf_node *pf_node_add_strf(struct pf_node *seq, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
struct pf_node *pf_node_add_map(struct pf_node *seq);
/* Lookup in a map; NULL when absent. */
struct pf_node *pf_node_get(const struct pf_node *map, const char *key);
const char *pf_node_get_str(const struct pf_node *map, const char *key);
struct pf_node *pf_node_clone(const struct pf_node *n);

/* ---- Checks and findings. */
#define PF_CODE_MAX 48
struct pf_finding {
    char code[PF_CODE_MAX];
    enum pf_status status;
    char *message;
    char *remedy;
    enum pf_class cls; /* PF_CLASS_NONE: the class docs/checks.md gives the code (finalize) */
    /* a finding of the whole job that every rank's verdict carries (rank 0's agreement and
     * summary): class node only on a pod the culprits name, peer on the others */
    bool fleet;
};

struct pf_check {
    char id[PF_CODE_MAX];
    enum pf_status status; /* PF_SKIP when the check set it; otherwise derived */
    char *message;
    struct pf_finding *findings;
    size_t nfindings;
    struct pf_node *evidence; /* a map, never NULL */
    double seconds;
};

/* Adds a finding. remedy may be NULL: the remedy from docs/checks.md is used then. */
struct pf_finding *pf_check_add_finding(struct pf_check *c, const char *code, enum pf_status status,
                                        const char *remedy, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Sets the one line a human reads first. */
void pf_check_set_message(struct pf_check *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Marks the check skipped with a reason. */
void pf_check_skip(struct pf_check *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool pf_check_has_finding(const struct pf_check *c, const char *code);
/* Records that the check could not decide finding `code` because what it needs is missing or
 * ambiguous: an entry {code, missing} in the check's evidence sequence `unknown` (missing names
 * what was not there or could not be read, and what was read). It adds no finding and never
 * raises the check's status: a check fails or warns only on what it read (docs/checks.md,
 * "Unknown"). finalize says "unknown: ..." in the message of a check that passed. */
void pf_check_unknown(struct pf_check *c, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* How many unknown entries the check has. */
size_t pf_check_unknowns(const struct pf_check *c);

/* ---- The ranks list (rank 0): one flat entry a rank, no node tree, its strings interned
 * once in the list (a pod, node or address each; a check id, status or code shared by every
 * rank that has it), so that a fleet of 16,384 ranks costs a few MiB (docs/performance.md).
 * An entry lists the rank's checks that are neither pass nor skip, with their codes, and how
 * many passed: a passing rank is one short entry (docs/verdict.md). */
struct pf_rank_in_check {
    const char *id, *status;
    char *const *codes;
    size_t ncodes;
};
struct pf_rank_in {
    int rank;
    const char *pod, *node, *address, *state, *verdict; /* NULL or "": left out */
    bool has_tcp;
    double tcp_seconds;
    int passed; /* its checks that passed; -1: it sent no report */
    const struct pf_rank_in_check *checks;
    size_t nchecks;
};
struct pf_rank_row;
struct pf_rank_bad;
struct pf_ranks {
    struct pf_rank_row *row;
    size_t n, cap;
    struct pf_rank_bad *bad;
    size_t nbad, capbad;
    uint32_t *code; /* offsets of the checks' codes in s */
    size_t ncode, capcode;
    char *s; /* the strings, each ending in NUL; offset 0 is "" */
    size_t slen, scap;
    uint32_t *hash; /* the intern table: offsets into s, 0 = a free slot */
    size_t hcap, hn;
    bool brief; /* written without each rank's checks (the guard's snapshots) */
};
void pf_ranks_add(struct pf_ranks *l, const struct pf_rank_in *e);
void pf_ranks_free(struct pf_ranks *l);
void pf_ranks_clone(struct pf_ranks *out, const struct pf_ranks *l);
/* Entry i as pf_ranks_add got it (strings "" when left out; checks NULL: use pf_ranks_check). */
void pf_ranks_get(const struct pf_ranks *l, size_t i, struct pf_rank_in *out);
/* Check k of entry i (k < its nchecks): id, status and its codes (*ncodes of them). */
void pf_ranks_check(const struct pf_ranks *l, size_t i, size_t k, struct pf_rank_in_check *out);
const char *pf_ranks_code(const struct pf_ranks *l, size_t i, size_t k, size_t j);
/* The node of the entry for rank ("" when none). */
const char *pf_ranks_node(const struct pf_ranks *l, long long rank);

/* ---- The verdict. */
struct pf_verdict {
    enum pf_status verdict;
    char summary[512];
    char generated_at[32];
    double duration_seconds;
    struct pf_node *pod;         /* map: name, namespace, node, rank, worldSize */
    struct pf_node *environment; /* map */
    struct pf_check *checks;
    size_t nchecks;
    struct pf_node *collectives; /* seq of maps */
    struct pf_node *culprits;    /* seq of maps: rank, pod, node, reason */
    struct pf_ranks ranks;       /* rank 0: every rank's entry (empty elsewhere) */
    struct pf_node *extra;       /* map: other top-level keys (e.g. logs) */
    bool warn_fails;             /* --strict or policy.failOn: warn (set before finalize) */
    enum pf_class failure_class; /* finalize: the winning class of the failing findings */
};

void pf_verdict_init(struct pf_verdict *v);
void pf_verdict_free(struct pf_verdict *v);
/* Adds (or returns the existing) check with this id. The pointer stays valid until the next
 * pf_verdict_add_check call. */
struct pf_check *pf_verdict_add_check(struct pf_verdict *v, const char *id);
struct pf_check *pf_verdict_find_check(struct pf_verdict *v, const char *id);
void pf_verdict_add_culprit(struct pf_verdict *v, int rank, const char *pod, const char *node,
                            const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* How findings are re-graded: return the new status, or -1 to drop the finding (ignore),
 * or the given status to keep it. */
typedef int (*pf_policy_fn)(void *arg, const char *check_id, const char *code,
                            enum pf_status status);

/* Applies the policy, derives each check's status from its findings, fills remedies from the
 * docs where a check gave none, computes verdict and summary. Call once, before output. */
void pf_verdict_finalize(struct pf_verdict *v, pf_policy_fn policy, void *arg);

/* Sets failure_class from the failing findings (finalize calls it); a `peer` finding counts as
 * `node` on a pod that the culprits name. */
void pf_verdict_classify(struct pf_verdict *v);
/* Exit codes of a failing verdict, by failure class (docs/checks.md). */
enum { PF_EXIT_CLASS_SPEC = 3, PF_EXIT_CLASS_NODE = 4, PF_EXIT_CLASS_PEER = 5 };
/* The exit code a finalized verdict gives: 0 pass or warn (warn fails when warn_fails), else
 * the code of failure_class, 1 when no failing finding has a class. */
int pf_verdict_exit_code(const struct pf_verdict *v);
/* Whether the verdict fails the gate (fail, or warn when warn_fails). */
bool pf_verdict_fails(const struct pf_verdict *v);
/* One line for a termination message or an Event: "fail (node) gpu-17: rdma.ports: mlx5_1
 * port 1 DOWN" (node and class left out when unknown). */
void pf_verdict_reason_line(char *out, size_t n, const struct pf_verdict *v);

/* True for variable names whose values must never appear (TOKEN, SECRET, PASSWORD, KEY). */
bool pf_verdict_is_secret_name(const char *name);

/* YAML form into a fresh string (caller frees). */
int pf_verdict_to_yaml(char **out, size_t *out_len, const struct pf_verdict *v);
/* The same document as JSON (`--format json`): the same keys in the same order, numbers,
 * booleans and nulls as the YAML's, secrets masked alike; .nan and .inf become null. */
int pf_verdict_to_json(char **out, size_t *out_len, const struct pf_verdict *v);
/* How the human form looks: ANSI colours, the line width it wraps to (at least 40), and
 * verbose: every check with its findings (skips with their reasons) instead of one line a
 * pass and one line for all skips. */
struct pf_human_style {
    bool color;
    int width;
    bool verbose;
};
/* Human form: a header line (verdict, counts, pod, node, rank), failures, warnings, passes,
 * skips, collectives; see docs/verdict.md. */
void pf_verdict_render_human_style(FILE *f, const struct pf_verdict *v,
                                   const struct pf_human_style *st);
/* The same, 80 columns wide, not verbose. */
void pf_verdict_render_human(FILE *f, const struct pf_verdict *v, bool color);
/* Writes the YAML form to path atomically (temp file in the same folder + rename), creating
 * the parent folder when missing. "-" writes to stdout. */
int pf_verdict_write_file(const struct pf_verdict *v, const char *path);
/* Emits any node tree as a YAML document (used for sub-documents and tests). */
int pf_node_to_yaml(char **out, size_t *out_len, const struct pf_node *n);
/* The same tree as JSON. */
int pf_node_to_json(char **out, size_t *out_len, const struct pf_node *n);
/* Whether a YAML 1.1 or 1.2 reader reads the plain scalar s back as the string s (false for
 * "0000:07:00.0", "010", "0x1d0f", "yes", "~", "2026-11-21", ".inf", "<<", ...); the
 * emitter double-quotes every string for which this is false. */
bool pf_yaml_plain_is_string(const char *s);

/* Deep copy (for snapshots). */
void pf_verdict_clone(struct pf_verdict *out, const struct pf_verdict *v);

/* ---- The guard: a verdict is never lost. After pf_verdict_guard_install, SIGTERM, SIGINT
 * and the deadline (SIGALRM) write the last snapshot, with the stage in progress marked
 * failed, atomically to the verdict path and end the process with the exit code of its failure
 * class. The handler only writes bytes rendered beforehand (async-signal-safe); when the file
 * system refuses them it removes its temporary file, leaves the file there as it was, says so
 * and exits 1. */
int pf_verdict_guard_install(const char *path, double timeout_s, pf_policy_fn policy, void *arg);
/* Renders a new snapshot: v as it is now, plus check stage_id failed with code "timeout"
 * (deadline) or "interrupted" (signal) and a message saying what was under way. */
void pf_verdict_guard_update(const struct pf_verdict *v, const char *stage_id, const char *doing);
/* Where the handler also writes the snapshot's one-line reason (a termination message);
 * NULL or "" for nowhere. */
void pf_verdict_guard_termination(const char *path);
/* Hands the guard the run's own finalized verdict just before it is written: from here on
 * SIGTERM, SIGINT and the deadline write v itself (not an interrupted one) and end the
 * process with exit_code, so that a signal during the final write still leaves a complete
 * verdict. With --verdict - it only stops the guard from printing a second document. */
void pf_verdict_guard_final(const struct pf_verdict *v, int exit_code);
/* Stops the guard (after the final verdict is written). A signal after it ends the process
 * with the final verdict's exit code, or 1 when its write failed (pf_verdict_write_file
 * tells the guard through pf_verdict_guard_write_failed). */
void pf_verdict_guard_disarm(void);
void pf_verdict_guard_write_failed(void);

#endif
