/* inject's parts, for one another and the tests: the positioned tree (tree.c), the added text
 * and the edits at its offsets (edit.c), the gate in one pod template (gate.c), the launchers
 * and the table of kinds (launchers.c), the plan of one input (inject.c). */
#ifndef PF_INJECT_INTERNAL_H
#define PF_INJECT_INTERNAL_H

#include "inject.h"

enum pf_ykind { PF_Y_SCALAR, PF_Y_SEQ, PF_Y_MAP, PF_Y_ALIAS };

/* One node: where it starts (byte offset and column in characters), where its content ends
 * (a scalar's end; a flow collection's closing bracket and the byte after it; a block
 * collection's last child's end: trailing comments and blank lines are not its), and for a
 * mapping its keys and values alternating in kids. */
struct pf_ynode {
    enum pf_ykind kind;
    bool flow, plain, tagged, anchored;
    size_t start, end, close;
    int col;
    char *val; /* a scalar's value */
    size_t vlen;
    struct pf_ynode **kids;
    size_t n, cap;
    struct pf_ynode *next_all;
};

#define PF_YTREE_DOCS_MAX 4096

struct pf_ytree {
    const char *in;
    size_t len;
    size_t *lines; /* the byte offset of each line's start */
    size_t nlines;
    struct pf_ynode *docs[PF_YTREE_DOCS_MAX]; /* each document's root (NULL: empty) */
    size_t doc_start[PF_YTREE_DOCS_MAX];
    int ndocs;
    struct pf_ynode *all;
};

/* Parses in[0..len) (UTF-8). -1 with "NAME: not YAML: ... at line L column C". */
int pf_ytree_parse(struct pf_ytree *t, const char *in, size_t len, const char *name);
void pf_ytree_free(struct pf_ytree *t);
/* The value of key in a mapping; NULL when map is no mapping or has no such key. */
struct pf_ynode *pf_ynode_get(const struct pf_ynode *map, const char *key);
/* The value of key when it is a scalar, else NULL. */
const char *pf_ynode_str(const struct pf_ynode *map, const char *key);
/* The offset of the start of the line that holds off. */
size_t pf_ytree_line_start(const struct pf_ytree *t, size_t off);

/* ---- what is added (edit.c): a small tree of keys and values, written in block or flow style */

enum cn_kind { CN_STR, CN_RAW, CN_MAP, CN_SEQ };
struct cn {
    enum cn_kind kind;
    const char *key; /* in a mapping */
    char *okey;      /* key, when it is owned */
    char *s;         /* CN_STR (quoted when needed), CN_RAW (as is) */
    bool compact;    /* a collection written in flow style inside block output */
    struct cn **kids;
    size_t n, cap;
};

struct cn *pf_cn_new(enum cn_kind k);
/* kid under parent (with key in a mapping); kid. */
struct cn *pf_cn_add(struct cn *parent, const char *key, struct cn *kid);
struct cn *pf_cn_str(struct cn *parent, const char *key, const char *s);
struct cn *pf_cn_raw(struct cn *parent, const char *key, const char *s);
/* A new mapping or sequence, under parent when not NULL; compact: in flow style. */
struct cn *pf_cn_map(struct cn *parent, const char *key, bool compact);
struct cn *pf_cn_seq(struct cn *parent, const char *key, bool compact);
void pf_cn_free(struct cn *c);
/* s reads back as the same string under YAML 1.1 and 1.2 when written plain. */
bool pf_cn_plain_ok(const char *s);

/* ---- the edits (edit.c) and the plan of one input (inject.c) */

struct edit {
    size_t at;
    size_t del_end; /* a deletion of [at, del_end) when above at */
    int rank; /* at one offset: the deeper collection's text first (it ends before the outer) */
    int seq;
    char *text;
};

struct plan {
    const struct pf_inject_opts *o;
    struct pf_ytree *t;
    struct edit *e;
    size_t n, cap;
    struct pf_inject_result *res;
    char where[PF_BUF_LINE];    /* "FILE: document N (Kind name)" */
    struct pf_strlist runtimes; /* the TrainingRuntimes of the input, by name */
    struct pf_strlist
        trainjobs;    /* "RUNTIME\tTRAINJOB": which TrainJob of the input runs on which */
    bool from_server; /* the object was read from the API server (server_fields) */
    const char *name; /* the object being gated: its Secret is <name>-preflight-token */
    int rc;
};

/* val (its key set to key) as the last entry of a mapping, block or flow as the mapping is. */
void pf_inject_map_add(struct plan *P, const struct pf_ynode *map, const char *key, struct cn *val);
/* The items of list (a CN_SEQ) at the start (first) or the end of a sequence. */
void pf_inject_seq_add(struct plan *P, const struct pf_ynode *seq, const struct cn *list,
                       bool first);
/* Deletes the entries of a mapping whose key is one of keys[0..n); 0, or -1 when one cannot be
 * deleted (not in block style). */
int pf_inject_map_del(struct plan *P, const struct pf_ynode *map, const char *const *keys,
                      size_t n);

/* The object cannot be gated: P->rc set to "WHERE: cannot gate: MSG" (the first only); -1. */
int pf_inject_refuse(struct plan *P, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A note on the object for the user ("WHERE: MSG"). */
void pf_inject_note(struct plan *P, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The item of a sequence with that name: field, or NULL. */
const struct pf_ynode *pf_inject_named(const struct pf_ynode *seq, const char *name);
/* A field that must be a mapping or a sequence (or absent): else refused, with the path. */
int pf_inject_want(struct plan *P, const struct pf_ynode *n, enum pf_ykind kind, const char *path);
/* A count field: its value, def when absent, -1 when it is not a plain integer. */
long pf_inject_count_of(const struct pf_ynode *map, const char *key, long def);

/* ---- the gate (gate.c) */

struct pod {
    const char *label; /* "pod template spec.template" */
    long world;        /* PREFLIGHT_WORLD_SIZE; -1: the launcher's own variables say it */
    const char *coordinator;
    bool job; /* a batch/v1 Job's pod: restartPolicy Never for its podFailurePolicy */
};

/* The gate in one pod template (a mapping with metadata and spec); P->rc. */
int pf_inject_gate_pod(struct plan *P, const struct pf_ynode *tpl, const struct pod *pod);
/* A batch/v1 JobSpec's failure policy: preflight's exit codes (docs/scheduling.md). */
void pf_inject_job_policy(struct plan *P, const struct pf_ynode *jobspec, const char *label,
                          bool in_jobset);
/* A JobSet's failurePolicy (the JobSet of a JobSet or of a TrainingRuntime's template). */
void pf_inject_jobset_policy(struct plan *P, const struct pf_ynode *jsspec);

/* ---- the kinds (launchers.c) */

/* One object (or the items of a List) of the document doc_label: gated by its launcher's
 * function, refused, or passed through; 0 or -1 (P->rc). */
int pf_inject_object(struct plan *P, const struct pf_ynode *obj, const char *doc_label);

#endif
