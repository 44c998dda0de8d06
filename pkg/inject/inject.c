/* `preflight inject`: the gate of manifests/ added to any supported launcher's pod templates,
 * by insertion only (inject.h says why and how). The launchers and where their pod templates
 * are: docs/kubernetes.md "preflight inject", read from each launcher's API types
 * (kubernetes-sigs/jobset api/jobset/v1alpha2/jobset_types.go, kubeflow/training-operator
 * pkg/apis/kubeflow.org/v1/pytorch_types.go v1.9.0, kubeflow/trainer
 * pkg/apis/trainer/v1alpha1/trainingruntime_types.go, kubeflow/mpi-operator
 * pkg/apis/kubeflow/v2beta1/types.go, kubernetes-sigs/lws
 * api/leaderworkerset/v1/leaderworkerset_types.go, volcano-sh/apis
 * pkg/apis/batch/v1alpha1/job.go). */
#include <ctype.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

/* ---- what is added: a small tree of keys and values, written in block or flow style */

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

static struct cn *cn_new(enum cn_kind k)
{
    struct cn *c = pf_xcalloc(1, sizeof(*c));
    c->kind = k;
    return c;
}
static struct cn *cn_add(struct cn *parent, const char *key, struct cn *kid)
{
    kid->key = key;
    if (parent->n == parent->cap) {
        parent->cap = parent->cap ? parent->cap * 2 : 8;
        parent->kids = pf_xrealloc(parent->kids, parent->cap * sizeof(*parent->kids));
    }
    parent->kids[parent->n++] = kid;
    return kid;
}
static struct cn *cn_str(struct cn *parent, const char *key, const char *s)
{
    struct cn *c = cn_new(CN_STR);
    c->s = pf_xstrdup(s);
    return cn_add(parent, key, c);
}
static struct cn *cn_raw(struct cn *parent, const char *key, const char *s)
{
    struct cn *c = cn_new(CN_RAW);
    c->s = pf_xstrdup(s);
    return cn_add(parent, key, c);
}
static struct cn *cn_map(struct cn *parent, const char *key, bool compact)
{
    struct cn *c = cn_new(CN_MAP);
    c->compact = compact;
    return parent ? cn_add(parent, key, c) : c;
}
static struct cn *cn_seq(struct cn *parent, const char *key, bool compact)
{
    struct cn *c = cn_new(CN_SEQ);
    c->compact = compact;
    return parent ? cn_add(parent, key, c) : c;
}
static void cn_free(struct cn *c)
{
    if (!c) return;
    for (size_t i = 0; i < c->n; i++)
        cn_free(c->kids[i]);
    free(c->kids);
    free(c->s);
    free(c->okey);
    free(c);
}

/* A string that reads back as the same string under YAML 1.1 and 1.2 when plain; else in
 * double quotes. */
static bool plain_ok(const char *s)
{
    static const char *const words[] = {"y",   "n",    "yes",   "no",   "on",
                                        "off", "true", "false", "null", "~"};
    if (!*s || !(isalpha((unsigned char)*s) || *s == '/' || *s == '_')) return false;
    for (size_t i = 0; i < PF_ARRAY_LEN(words); i++)
        if (strcasecmp(s, words[i]) == 0) return false;
    for (const char *p = s; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '/') continue;
        if (c == ':' && p[1] && p[1] != ' ' && !isdigit((unsigned char)s[0])) continue;
        return false;
    }
    return true;
}
static void put_scalar(struct pf_buf *b, const struct cn *c, bool json)
{
    if (c->kind == CN_RAW || (!json && plain_ok(c->s))) {
        pf_buf_add(b, c->s, strlen(c->s));
        return;
    }
    pf_buf_add(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)c->s; *p; p++) {
        if (*p == '"' || *p == '\\')
            pf_buf_addf(b, "\\%c", *p);
        else if (*p < 0x20 || *p == 0x7f)
            pf_buf_addf(b, "\\u%04x", *p); /* YAML and JSON both */
        else
            pf_buf_add(b, p, 1);
    }
    pf_buf_add(b, "\"", 1);
}

/* Flow style; json: every string and key in double quotes, so that JSON input (kubectl get
 * -o json) stays JSON. */
static void put_flow(struct pf_buf *b, const struct cn *c, bool json)
{
    if (c->kind == CN_STR || c->kind == CN_RAW) {
        put_scalar(b, c, json);
        return;
    }
    bool map = c->kind == CN_MAP;
    pf_buf_add(b, map ? "{" : "[", 1);
    for (size_t i = 0; i < c->n; i++) {
        if (i) pf_buf_add(b, ", ", 2);
        if (map && json && c->kids[i]->key[0] != '"')
            pf_buf_addf(b, "\"%s\": ", c->kids[i]->key);
        else if (map)
            pf_buf_addf(b, "%s: ", c->kids[i]->key);
        put_flow(b, c->kids[i], json);
    }
    pf_buf_add(b, map ? "}" : "]", 1);
}

static void put_indent(struct pf_buf *b, int n)
{
    for (int i = 0; i < n; i++)
        pf_buf_add(b, " ", 1);
}

static void put_block(struct pf_buf *b, const struct cn *c, int indent, bool first_inline);

/* "key: value" or "key:" and the collection below it, at indent (the first line's indent
 * already written when first_inline). */
static void put_entry(struct pf_buf *b, const struct cn *kid, int indent, bool first_inline)
{
    if (!first_inline) put_indent(b, indent);
    if (kid->key) pf_buf_addf(b, "%s:", kid->key);
    bool coll = kid->kind == CN_MAP || kid->kind == CN_SEQ;
    if (!coll || kid->compact || kid->n == 0) {
        if (kid->key) pf_buf_add(b, " ", 1);
        put_flow(b, kid, false);
        pf_buf_add(b, "\n", 1);
        return;
    }
    pf_buf_add(b, "\n", 1);
    put_block(b, kid, indent + 2, false);
}

/* A block collection, every line at indent (the first one's indent already written when
 * first_inline: after "- "). */
static void put_block(struct pf_buf *b, const struct cn *c, int indent, bool first_inline)
{
    for (size_t i = 0; i < c->n; i++) {
        const struct cn *kid = c->kids[i];
        bool inl = first_inline && i == 0;
        if (c->kind == CN_MAP) {
            put_entry(b, kid, indent, inl);
            continue;
        }
        if (!inl) put_indent(b, indent);
        pf_buf_add(b, "- ", 2);
        if (kid->kind == CN_MAP && !kid->compact && kid->n)
            put_block(b, kid, indent + 2, true);
        else {
            put_flow(b, kid, false);
            pf_buf_add(b, "\n", 1);
        }
    }
}

/* ---- the edits: text inserted at offsets of the input */

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

static void edit_add(struct plan *P, size_t at, int rank, char *text)
{
    if (P->n == P->cap) {
        P->cap = P->cap ? P->cap * 2 : 16;
        P->e = pf_xrealloc(P->e, P->cap * sizeof(*P->e));
    }
    P->e[P->n] = (struct edit){at, 0, rank, (int)P->n, text};
    P->n++;
}

/* Deletes [from, to): after any insertion at from. */
static void edit_del(struct plan *P, size_t from, size_t to)
{
    edit_add(P, from, -1000, pf_xstrdup(""));
    P->e[P->n - 1].del_end = to;
}

static int refuse(struct plan *P, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int refuse(struct plan *P, const char *fmt, ...)
{
    char msg[PF_BUF_MESSAGE];
    PF_FORMAT_ARGS(msg, fmt);
    if (P->rc == 0) P->rc = pf_err_set(PF_EINVAL, "%s: cannot gate: %s", P->where, msg);
    return -1;
}

static void note(struct plan *P, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(struct plan *P, const char *fmt, ...)
{
    char msg[PF_BUF_MESSAGE];
    PF_FORMAT_ARGS(msg, fmt);
    if (P->res) pf_strlist_addf(&P->res->notes, "%s: %s", P->where, msg);
}

/* The offset where a new line after the one holding off begins (a trailing comment stays on
 * its line); the end of the input when it ends without a line break there (pf_inject then
 * writes one before the first insertion). */
static size_t line_after(const struct plan *P, size_t off)
{
    const char *in = P->t->in;
    if (off > 0 && (in[off - 1] == '\n' || in[off - 1] == '\r')) return off;
    for (size_t i = off; i < P->t->len; i++)
        if (in[i] == '\n') return i + 1;
    return P->t->len;
}

static bool only_spaces(const struct plan *P, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++)
        if (P->t->in[i] != ' ') return false;
    return true;
}

static void map_add(struct plan *P, const struct pf_ynode *map, const char *key, struct cn *val)
{
    struct pf_buf b;
    pf_buf_init(&b, PF_INJECT_MAX);
    val->key = key;
    if (map->flow) {
        if (map->n) pf_buf_add(&b, ", ", 2);
        pf_buf_addf(&b, "\"%s\": ", key);
        put_flow(&b, val, true);
        edit_add(P, map->close, 0, pf_buf_detach(&b));
        return;
    }
    /* before the first key when it begins its line: nothing the user wrote after the mapping
     * (a block scalar's last line, a comment, the end of the input) is touched; else (a
     * mapping after "- ") after its last line */
    size_t ls = map->n ? pf_ytree_line_start(P->t, map->kids[0]->start) : 0;
    size_t at = map->n && only_spaces(P, ls, map->kids[0]->start) ? ls : line_after(P, map->end);
    put_entry(&b, val, map->col, false);
    edit_add(P, at, 2 * map->col, pf_buf_detach(&b));
}

/* The items of list (a CN_SEQ) at the start (first) or the end of a sequence. */
static void seq_add(struct plan *P, const struct pf_ynode *seq, const struct cn *list, bool first)
{
    struct pf_buf b;
    pf_buf_init(&b, PF_INJECT_MAX);
    const struct cn wrap = *list;
    if (seq->flow) {
        if (!first && seq->n) pf_buf_add(&b, ", ", 2);
        for (size_t i = 0; i < list->n; i++) {
            if (i) pf_buf_add(&b, ", ", 2);
            put_flow(&b, list->kids[i], true);
        }
        if (first && seq->n) pf_buf_add(&b, ", ", 2);
        edit_add(P, first ? seq->start + 1 : seq->close, 0, pf_buf_detach(&b));
        return;
    }
    size_t ls = pf_ytree_line_start(P->t, seq->start);
    if (first && only_spaces(P, ls, seq->start)) {
        put_block(&b, &wrap, seq->col, false);
        edit_add(P, ls, 2 * seq->col + 1, pf_buf_detach(&b));
        return;
    }
    size_t at = line_after(P, seq->end);
    put_block(&b, &wrap, seq->col, false);
    edit_add(P, at, 2 * seq->col + 1, pf_buf_detach(&b));
}

/* ---- reading the input */

static const struct pf_ynode *named(const struct pf_ynode *seq, const char *name)
{
    if (!seq || seq->kind != PF_Y_SEQ) return NULL;
    for (size_t i = 0; i < seq->n; i++) {
        const char *s = pf_ynode_str(seq->kids[i], "name");
        if (s && strcmp(s, name) == 0) return seq->kids[i];
    }
    return NULL;
}

/* A field that must be a mapping or a sequence (or absent): else refused, with the path. */
static int want(struct plan *P, const struct pf_ynode *n, enum pf_ykind kind, const char *path)
{
    if (!n) return 0;
    if (n->kind == PF_Y_ALIAS)
        return refuse(P, "%s is an alias (*name): inject edits only what is written out", path);
    if (n->kind != kind)
        return refuse(P, "%s is not a %s", path, kind == PF_Y_MAP ? "mapping" : "sequence");
    if (n->anchored)
        return refuse(P, "%s has an anchor (&name): an edit would change its aliases too", path);
    return 0;
}

/* A count field: its value, def when absent, -1 when it is not a plain integer. */
static long count_of(const struct pf_ynode *map, const char *key, long def)
{
    const struct pf_ynode *v = pf_ynode_get(map, key);
    if (!v) return def;
    if (v->kind != PF_Y_SCALAR || !*v->val) return -1;
    char *end;
    long n = strtol(v->val, &end, 10);
    return *end || n < 0 || n > (1 << 20) ? -1 : n;
}

/* ---- the gate */

struct pod {
    const char *label; /* "pod template spec.template" */
    long world;        /* PREFLIGHT_WORLD_SIZE; -1: the launcher's own variables say it */
    const char *coordinator;
    bool job; /* a batch/v1 Job's pod: restartPolicy Never for its podFailurePolicy */
};

static void env_field(struct cn *env, const char *name, const char *path)
{
    struct cn *e = cn_map(env, NULL, false);
    cn_str(e, "name", name);
    struct cn *vf = cn_map(e, "valueFrom", true);
    cn_str(cn_map(vf, "fieldRef", true), "fieldPath", path);
}
static void env_value(struct cn *env, const char *name, const char *value)
{
    struct cn *e = cn_map(env, NULL, false);
    cn_str(e, "name", name);
    cn_str(e, "value", value);
}
static void mount(struct cn *mounts, const char *name, const char *path, bool ro)
{
    struct cn *m = cn_map(mounts, NULL, true);
    cn_str(m, "name", name);
    cn_str(m, "mountPath", path);
    if (ro) cn_raw(m, "readOnly", "true");
}

/* The name of the trainer's volume mounted at /dev/shm, or NULL. */
static const char *shm_volume(const struct pf_ynode *trainer)
{
    const struct pf_ynode *m = pf_ynode_get(trainer, "volumeMounts");
    for (size_t i = 0; m && m->kind == PF_Y_SEQ && i < m->n; i++) {
        const char *p = pf_ynode_str(m->kids[i], "mountPath");
        if (p && (strcmp(p, "/dev/shm") == 0 || strcmp(p, "/dev/shm/") == 0))
            return pf_ynode_str(m->kids[i], "name");
    }
    return NULL;
}

/* The initContainer `preflight`: manifests/indexed-job.yaml's, with what this pod gives. */
static struct cn *gate_container(const struct plan *P, const struct pod *pod,
                                 const struct pf_ynode *trainer)
{
    struct cn *c = cn_map(NULL, NULL, false);
    cn_str(c, "name", "preflight");
    cn_str(c, "image", P->o->image ? P->o->image : PF_INJECT_IMAGE);
    cn_str(cn_seq(c, "args", true), NULL, "run");
    cn_str(c, "terminationMessagePolicy", "FallbackToLogsOnError");
    /* the trainer's NCCL variables: its envFrom sources and its NCCL_* values */
    const struct pf_ynode *ef = pf_ynode_get(trainer, "envFrom");
    struct cn *envfrom = NULL;
    for (size_t i = 0; ef && ef->kind == PF_Y_SEQ && i < ef->n; i++) {
        static const char *const refs[] = {"configMapRef", "secretRef"};
        for (size_t k = 0; k < PF_ARRAY_LEN(refs); k++) {
            const char *name = pf_ynode_str(pf_ynode_get(ef->kids[i], refs[k]), "name");
            if (!name) continue;
            if (!envfrom) envfrom = cn_seq(c, "envFrom", false);
            struct cn *src = cn_map(envfrom, NULL, false);
            const char *prefix = pf_ynode_str(ef->kids[i], "prefix");
            if (prefix) cn_str(src, "prefix", prefix);
            struct cn *ref = cn_map(src, refs[k], true);
            cn_str(ref, "name", name);
            const char *opt = pf_ynode_str(pf_ynode_get(ef->kids[i], refs[k]), "optional");
            if (opt && (strcmp(opt, "true") == 0 || strcmp(opt, "false") == 0))
                cn_raw(ref, "optional", opt);
        }
    }
    struct cn *env = cn_seq(c, "env", false);
    env_field(env, "POD_NAME", "metadata.name");
    env_field(env, "POD_NAMESPACE", "metadata.namespace");
    env_field(env, "POD_UID", "metadata.uid");
    env_field(env, "NODE_NAME", "spec.nodeName");
    if (pod->world > 0) {
        char w[32];
        snprintf(w, sizeof(w), "%ld", pod->world);
        env_value(env, "PREFLIGHT_WORLD_SIZE", w);
    }
    if (pod->coordinator) env_value(env, "PREFLIGHT_COORDINATOR", pod->coordinator);
    env_value(env, "PREFLIGHT_CONFIG", "/etc/preflight/config.yaml");
    env_value(env, "PREFLIGHT_TIMEOUT", "900");
    struct cn *tok = cn_map(env, NULL, false);
    cn_str(tok, "name", "PREFLIGHT_TOKEN");
    struct cn *skr = cn_map(cn_map(tok, "valueFrom", true), "secretKeyRef", true);
    /* each job its own token (docs/kubernetes.md, "One token per job") */
    char secret[320];
    snprintf(secret, sizeof(secret), "%s-preflight-token", P->name ? P->name : "preflight");
    cn_str(skr, "name", secret);
    cn_str(skr, "key", "token");
    const struct pf_ynode *tenv = pf_ynode_get(trainer, "env");
    for (size_t i = 0; tenv && tenv->kind == PF_Y_SEQ && i < tenv->n; i++) {
        const char *name = pf_ynode_str(tenv->kids[i], "name");
        const char *value = pf_ynode_str(tenv->kids[i], "value");
        if (name && value && pf_str_starts(name, "NCCL_")) env_value(env, name, value);
    }
    /* Pod Security "restricted": preflight needs no capability (docs/kubernetes.md) */
    struct cn *sc = cn_map(c, "securityContext", false);
    cn_raw(sc, "runAsNonRoot", "true");
    cn_raw(sc, "runAsUser", "65532");
    cn_raw(sc, "allowPrivilegeEscalation", "false");
    cn_str(cn_seq(cn_map(sc, "capabilities", false), "drop", true), NULL, "ALL");
    cn_str(cn_map(sc, "seccompProfile", false), "type", "RuntimeDefault");
    /* an initContainer must request the devices to see them: the trainer's extended resources
     * (vendor/name) and its DRA claims */
    const struct pf_ynode *res = pf_ynode_get(trainer, "resources");
    const struct pf_ynode *lim = pf_ynode_get(res, "limits");
    const struct pf_ynode *claims = pf_ynode_get(res, "claims");
    struct cn *rc = NULL, *lc = NULL;
    for (size_t i = 0; lim && lim->kind == PF_Y_MAP && i + 1 < lim->n; i += 2) {
        const struct pf_ynode *k = lim->kids[i], *v = lim->kids[i + 1];
        if (k->kind != PF_Y_SCALAR || v->kind != PF_Y_SCALAR || !strchr(k->val, '/')) continue;
        if (!rc) rc = cn_map(c, "resources", false);
        if (!lc) lc = cn_map(rc, "limits", false);
        struct cn *q = cn_new(CN_STR);
        q->s = pf_xstrdup(v->val);
        /* the key as a plain or quoted scalar: vendor names are [a-z0-9.-]/[a-z0-9_.-] */
        char *key = plain_ok(k->val) ? pf_xstrdup(k->val) : pf_xasprintf("\"%s\"", k->val);
        q->okey = key;
        cn_add(lc, key, q);
    }
    for (size_t i = 0; claims && claims->kind == PF_Y_SEQ && i < claims->n; i++) {
        const char *name = pf_ynode_str(claims->kids[i], "name");
        if (!name) continue;
        if (!rc) rc = cn_map(c, "resources", false);
        struct cn *cl = NULL;
        for (size_t j = 0; j < rc->n; j++)
            if (strcmp(rc->kids[j]->key, "claims") == 0) cl = rc->kids[j];
        if (!cl) cl = cn_seq(rc, "claims", false);
        cn_str(cn_map(cl, NULL, true), "name", name);
    }
    struct cn *mounts = cn_seq(c, "volumeMounts", false);
    mount(mounts, "podinfo", "/etc/podinfo", true);
    mount(mounts, "preflight-config", "/etc/preflight", true);
    mount(mounts, "preflight-verdict", "/run/preflight", false);
    mount(mounts, "preflight-sa", "/var/run/secrets/kubernetes.io/serviceaccount", true);
    const char *shm = shm_volume(trainer);
    if (shm) mount(mounts, shm, "/dev/shm", false);
    return c;
}

/* The native sidecar `preflight watch` (a restartPolicy Always initContainer) sharing the
 * verdict's emptyDir with the trainer, whose NCCL writes its log there. */
#define WATCH_DIR "/run/preflight"
#define WATCH_FILE WATCH_DIR "/nccl.%h.%p.log"
static struct cn *watch_container(const struct plan *P)
{
    struct cn *c = cn_map(NULL, NULL, false);
    cn_str(c, "name", "preflight-watch");
    cn_str(c, "image", P->o->image ? P->o->image : PF_INJECT_IMAGE);
    cn_str(cn_seq(c, "args", true), NULL, "watch");
    cn_str(c, "restartPolicy", "Always");
    struct cn *env = cn_seq(c, "env", false);
    env_field(env, "POD_NAME", "metadata.name");
    env_field(env, "POD_NAMESPACE", "metadata.namespace");
    env_field(env, "NODE_NAME", "spec.nodeName");
    env_value(env, "PREFLIGHT_CONFIG", "/etc/preflight/config.yaml");
    struct cn *sc = cn_map(c, "securityContext", false);
    cn_raw(sc, "runAsNonRoot", "true");
    cn_raw(sc, "runAsUser", "65532");
    cn_raw(sc, "allowPrivilegeEscalation", "false");
    cn_str(cn_seq(cn_map(sc, "capabilities", false), "drop", true), NULL, "ALL");
    cn_str(cn_map(sc, "seccompProfile", false), "type", "RuntimeDefault");
    struct cn *r = cn_map(c, "resources", false);
    struct cn *req = cn_map(r, "requests", true);
    cn_str(req, "cpu", "50m");
    cn_str(req, "memory", "64Mi");
    struct cn *lim = cn_map(r, "limits", true);
    cn_str(lim, "memory", "128Mi");
    struct cn *mounts = cn_seq(c, "volumeMounts", false);
    mount(mounts, "podinfo", "/etc/podinfo", true);
    mount(mounts, "preflight-config", "/etc/preflight", true);
    mount(mounts, "preflight-verdict", WATCH_DIR, false);
    mount(mounts, "preflight-sa", "/var/run/secrets/kubernetes.io/serviceaccount", true);
    return c;
}

static struct cn *volume(const char *name)
{
    struct cn *v = cn_map(NULL, NULL, false);
    cn_str(v, "name", name);
    if (strcmp(name, "preflight-sa") == 0) {
        /* the API token for preflight alone (manifests/indexed-job.yaml) */
        struct cn *src = cn_seq(cn_map(v, "projected", false), "sources", false);
        struct cn *tok = cn_map(cn_map(src, NULL, false), "serviceAccountToken", true);
        cn_str(tok, "path", "token");
        cn_raw(tok, "expirationSeconds", "3600");
        struct cn *cm = cn_map(cn_map(src, NULL, false), "configMap", false);
        cn_str(cm, "name", "kube-root-ca.crt");
        struct cn *it = cn_map(cn_seq(cm, "items", true), NULL, true);
        cn_str(it, "key", "ca.crt");
        cn_str(it, "path", "ca.crt");
        struct cn *da =
            cn_seq(cn_map(cn_map(src, NULL, false), "downwardAPI", false), "items", true);
        struct cn *ns = cn_map(da, NULL, true);
        cn_str(ns, "path", "namespace");
        cn_str(cn_map(ns, "fieldRef", true), "fieldPath", "metadata.namespace");
    } else if (strcmp(name, "podinfo") == 0) {
        struct cn *items = cn_seq(cn_map(v, "downwardAPI", false), "items", false);
        static const char *const what[] = {"annotations", "labels"};
        for (size_t i = 0; i < PF_ARRAY_LEN(what); i++) {
            struct cn *it = cn_map(items, NULL, false);
            cn_str(it, "path", what[i]);
            cn_str(cn_map(it, "fieldRef", true), "fieldPath",
                   i == 0 ? "metadata.annotations" : "metadata.labels");
        }
    } else if (strcmp(name, "preflight-config") == 0) {
        cn_str(cn_map(v, "configMap", true), "name", "preflight-config");
    } else {
        cn_map(v, "emptyDir", true);
    }
    return v;
}

static void add_env_if_absent(struct plan *P, const struct pf_ynode *c, const char *name,
                              const char *value, struct cn **pending)
{
    const struct pf_ynode *env = pf_ynode_get(c, "env");
    if (named(env, name)) return;
    struct cn *e = cn_map(NULL, NULL, false);
    cn_str(e, "name", name);
    cn_str(e, "value", value);
    if (env) {
        struct cn *l = cn_seq(NULL, NULL, false);
        cn_add(l, NULL, e);
        seq_add(P, env, l, false);
        cn_free(l);
    } else {
        if (!*pending) *pending = cn_seq(NULL, NULL, false);
        cn_add(*pending, NULL, e);
    }
}

/* The trainer's part of the watch: its NCCL log into the shared folder. */
static void watch_trainer(struct plan *P, const struct pf_ynode *trainer)
{
    if (want(P, pf_ynode_get(trainer, "env"), PF_Y_SEQ, "the trainer's env") < 0 ||
        want(P, pf_ynode_get(trainer, "volumeMounts"), PF_Y_SEQ, "the trainer's volumeMounts") < 0)
        return;
    struct cn *pending = NULL;
    add_env_if_absent(P, trainer, "NCCL_DEBUG", "INFO", &pending);
    add_env_if_absent(P, trainer, "NCCL_DEBUG_SUBSYS", "INIT,NET", &pending);
    add_env_if_absent(P, trainer, "NCCL_DEBUG_FILE", WATCH_FILE, &pending);
    if (pending) map_add(P, trainer, "env", pending);
    cn_free(pending);
    const struct pf_ynode *vm = pf_ynode_get(trainer, "volumeMounts");
    if (!named(vm, "preflight-verdict")) {
        struct cn *m = cn_seq(NULL, NULL, false);
        mount(m, "preflight-verdict", WATCH_DIR, false);
        if (vm)
            seq_add(P, vm, m, false);
        else
            map_add(P, trainer, "volumeMounts", m);
        cn_free(m);
    }
}

/* The gate in one pod template (a mapping with metadata and spec). */
static int gate_pod(struct plan *P, const struct pf_ynode *tpl, const struct pod *pod)
{
    if (!tpl) return refuse(P, "no pod template at %s", pod->label);
    if (want(P, tpl, PF_Y_MAP, pod->label) < 0) return -1;
    const struct pf_ynode *spec = pf_ynode_get(tpl, "spec");
    if (!spec) return refuse(P, "the pod template %s has no spec", pod->label);
    if (want(P, spec, PF_Y_MAP, "the pod template's spec") < 0) return -1;
    const struct pf_ynode *cs = pf_ynode_get(spec, "containers");
    if (want(P, cs, PF_Y_SEQ, "spec.containers") < 0) return -1;
    if (!cs || cs->n == 0 || cs->kids[0]->kind != PF_Y_MAP)
        return refuse(P, "the pod template %s has no containers", pod->label);
    const struct pf_ynode *trainer = cs->kids[0];
    const struct pf_ynode *inits = pf_ynode_get(spec, "initContainers");
    const struct pf_ynode *vols = pf_ynode_get(spec, "volumes");
    if (want(P, inits, PF_Y_SEQ, "spec.initContainers") < 0 ||
        want(P, vols, PF_Y_SEQ, "spec.volumes") < 0)
        return -1;
    size_t before = P->n;
    bool gate = named(inits, "preflight") != NULL;
    bool watch = P->o->watch && !named(inits, "preflight-watch");
    struct cn *add = cn_seq(NULL, NULL, false);
    if (!gate) cn_add(add, NULL, gate_container(P, pod, trainer));
    if (watch) cn_add(add, NULL, watch_container(P));
    /* the gate first: nothing else starts before the node and the job are known good; the
     * watch after it, as it reads the gate's verdict (appended when the gate is there) */
    if (add->n && !inits)
        map_add(P, spec, "initContainers", add);
    else if (add->n)
        seq_add(P, inits, add, !gate);
    cn_free(add);
    if (watch) watch_trainer(P, trainer);
    static const char *const need[] = {"preflight-sa", "podinfo", "preflight-config",
                                       "preflight-verdict"};
    struct cn *vadd = cn_seq(NULL, NULL, false);
    for (size_t i = 0; i < PF_ARRAY_LEN(need); i++)
        if (!named(vols, need[i])) cn_add(vadd, NULL, volume(need[i]));
    if (vadd->n && !vols)
        map_add(P, spec, "volumes", vadd);
    else if (vadd->n)
        seq_add(P, vols, vadd, false);
    cn_free(vadd);
    if (pod->job) {
        const char *rp = pf_ynode_str(spec, "restartPolicy");
        if (!rp) {
            struct cn *v = cn_new(CN_STR);
            v->s = pf_xstrdup("Never");
            map_add(P, spec, "restartPolicy", v);
            cn_free(v);
        }
    }
    const char *sa = pf_ynode_str(spec, "serviceAccountName");
    if (!gate)
        note(P,
             "%s: the pods run as service account %s: it needs manifests/rbac.yaml's Role (create "
             "events), and the namespace the ConfigMap preflight-config and the Secret "
             "%s-preflight-token (this job's own token: docs/kubernetes.md)",
             pod->label, sa ? sa : "default", P->name ? P->name : "preflight");
    if (gate && P->n == before)
        P->res->already++;
    else
        P->res->gated++;
    return P->rc;
}

static int map_del(struct plan *P, const struct pf_ynode *map, const char *const *keys, size_t n);

/* A batch/v1 JobSpec's failure policy: preflight's exit codes (docs/scheduling.md). */
static void job_policy(struct plan *P, const struct pf_ynode *jobspec, const char *label,
                       bool in_jobset)
{
    const struct pf_ynode *tspec = pf_ynode_get(pf_ynode_get(jobspec, "template"), "spec");
    const char *rp = pf_ynode_str(tspec, "restartPolicy");
    if (rp && strcmp(rp, "Never") != 0) {
        note(P,
             "%s: restartPolicy %s: the kubelet retries a failed preflight in place and the pod "
             "never fails, so no podFailurePolicy was added (set restartPolicy: Never)",
             label, rp);
        return;
    }
    const struct pf_ynode *pfp = pf_ynode_get(jobspec, "podFailurePolicy");
    const char *prp = pf_ynode_str(jobspec, "podReplacementPolicy");
    if (!pfp && prp && strcmp(prp, "Failed") != 0) {
        /* the API server refuses a podFailurePolicy beside any other podReplacementPolicy
         * (kubernetes pkg/apis/batch/validation); it writes TerminatingOrFailed itself as the
         * default of a Job without one, so from an object read back that default goes */
        static const char *const key[] = {"podReplacementPolicy"};
        if (!P->from_server || map_del(P, jobspec, key, 1) < 0) {
            note(P,
                 "%s: podReplacementPolicy %s cannot go with a podFailurePolicy (the API "
                 "server allows only Failed there): no podFailurePolicy was added",
                 label, prp);
            return;
        }
    }
    if (pfp) {
        const struct pf_ynode *rules = pf_ynode_get(pfp, "rules");
        bool ours = false;
        for (size_t i = 0; rules && rules->kind == PF_Y_SEQ && i < rules->n; i++) {
            const char *cn =
                pf_ynode_str(pf_ynode_get(rules->kids[i], "onExitCodes"), "containerName");
            if (cn && strcmp(cn, "preflight") == 0) ours = true;
        }
        if (!ours)
            note(P,
                 "%s: its podFailurePolicy has no rule for the container preflight: kept as it "
                 "is (preflight exits 3 on a spec fault, 4 on a node fault, 5 on a peer fault)",
                 label);
        return;
    }
    struct cn *p = cn_map(NULL, NULL, false);
    struct cn *rules = cn_seq(p, "rules", false);
    static const struct {
        const char *action, *codes;
    } r[] = {{"FailJob", "[1, 2, 3]"}, {"Count", "[4]"}, {"Count", "[5]"}};
    for (size_t i = 0; i < PF_ARRAY_LEN(r); i++) {
        struct cn *rule = cn_map(rules, NULL, false);
        cn_str(rule, "action", r[i].action);
        struct cn *oc = cn_map(rule, "onExitCodes", true);
        cn_str(oc, "containerName", "preflight");
        cn_str(oc, "operator", "In");
        cn_raw(oc, "values", r[i].codes);
    }
    struct cn *ig = cn_map(rules, NULL, false);
    cn_str(ig, "action", "Ignore");
    struct cn *cond = cn_map(cn_seq(ig, "onPodConditions", true), NULL, true);
    cn_str(cond, "type", "DisruptionTarget");
    cn_str(cond, "status", "True");
    map_add(P, jobspec, "podFailurePolicy", p);
    cn_free(p);
    if (in_jobset && !pf_ynode_get(jobspec, "backoffLimit")) {
        struct cn *v = cn_new(CN_RAW);
        v->s = pf_xstrdup("0"); /* any counted failure fails the Job: the JobSet decides */
        map_add(P, jobspec, "backoffLimit", v);
        cn_free(v);
    }
}

/* A JobSet's failurePolicy (the JobSet of a JobSet or of a TrainingRuntime's template). */
static void jobset_policy(struct plan *P, const struct pf_ynode *jsspec)
{
    if (pf_ynode_get(jsspec, "failurePolicy")) return;
    struct cn *p = cn_map(NULL, NULL, false);
    cn_raw(p, "maxRestarts", "3");
    struct cn *rules = cn_seq(p, "rules", false);
    struct cn *a = cn_map(rules, NULL, false);
    cn_str(a, "name", "stopOnSpecFault");
    cn_str(a, "action", "FailJobSet");
    cn_str(cn_seq(a, "onJobFailureReasons", true), NULL, "PodFailurePolicy");
    struct cn *b = cn_map(rules, NULL, false);
    cn_str(b, "name", "restartOnNodeOrPeerFault");
    cn_str(b, "action", "RestartJobSet");
    cn_str(cn_seq(b, "onJobFailureReasons", true), NULL, "BackoffLimitExceeded");
    map_add(P, jsspec, "failurePolicy", p);
    cn_free(p);
}

/* ---- one launcher a function: where its pod templates are */

static int do_job(struct plan *P, const struct pf_ynode *obj, const char *name)
{
    const struct pf_ynode *spec = pf_ynode_get(obj, "spec");
    if (want(P, spec, PF_Y_MAP, "spec") < 0) return -1;
    const char *mode = pf_ynode_str(spec, "completionMode");
    if (!mode || strcmp(mode, "Indexed") != 0)
        return refuse(P,
                      "completionMode is %s, not Indexed: its pods have no rank "
                      "(JOB_COMPLETION_INDEX) and no stable hostname; set completionMode: "
                      "Indexed",
                      mode ? mode : "NonIndexed (the default)");
    const struct pf_ynode *tspec = pf_ynode_get(pf_ynode_get(spec, "template"), "spec");
    if (!pf_ynode_get(tspec, "subdomain") && tspec && tspec->kind == PF_Y_MAP) {
        struct cn *v = cn_new(CN_STR);
        v->s = pf_xstrdup(name);
        map_add(P, tspec, "subdomain", v);
        cn_free(v);
        note(P,
             "spec.template: subdomain %s added: the pods meet through a headless Service of "
             "that name, which a Job does not create: apply manifests/service.yaml with name %s, "
             "selector batch.kubernetes.io/job-name: %s and publishNotReadyAddresses: true",
             name, name, name);
    }
    struct pod pod = {"spec.template", count_of(spec, "completions", -1), NULL, true};
    if (gate_pod(P, pf_ynode_get(spec, "template"), &pod) < 0) return -1;
    job_policy(P, spec, "spec", false);
    return P->rc;
}

/* The pods of a JobSet's replicatedJobs (all, or only the one named only). */
static int jobset_jobs(struct plan *P, const struct pf_ynode *jsspec, const char *only,
                       const char *path)
{
    const struct pf_ynode *rjs = pf_ynode_get(jsspec, "replicatedJobs");
    if (want(P, rjs, PF_Y_SEQ, "replicatedJobs") < 0) return -1;
    if (!rjs || rjs->n == 0) return refuse(P, "%s.replicatedJobs: none, so no pod template", path);
    long world = 0;
    for (size_t i = 0; i < rjs->n; i++) {
        const struct pf_ynode *js = pf_ynode_get(pf_ynode_get(rjs->kids[i], "template"), "spec");
        long r = count_of(rjs->kids[i], "replicas", 1), c = count_of(js, "completions", -1);
        if (c < 0) c = count_of(js, "parallelism", -1);
        world = world < 0 || r < 0 || c < 0 ? -1 : world + r * c;
    }
    int gated = 0;
    for (size_t i = 0; i < rjs->n; i++) {
        const char *rname = pf_ynode_str(rjs->kids[i], "name");
        if (only && (!rname || strcmp(rname, only) != 0)) {
            note(P, "%s.replicatedJobs[%zu] (%s): not the trainer's Job %s, left as it is", path, i,
                 rname ? rname : "?", only);
            continue;
        }
        const struct pf_ynode *js = pf_ynode_get(rjs->kids[i], "template");
        if (want(P, js, PF_Y_MAP, "replicatedJobs[].template") < 0) return -1;
        const struct pf_ynode *jspec = pf_ynode_get(js, "spec");
        if (want(P, jspec, PF_Y_MAP, "replicatedJobs[].template.spec") < 0) return -1;
        char label[PF_BUF_LINE];
        snprintf(label, sizeof(label), "%s.replicatedJobs[%zu].template.spec.template", path, i);
        /* a TrainJob's node count comes with PET_NNODES (envInjection), not from the runtime */
        struct pod pod = {label, only ? -1 : world, NULL, true};
        if (gate_pod(P, jspec ? pf_ynode_get(jspec, "template") : NULL, &pod) < 0) return -1;
        snprintf(label, sizeof(label), "%s.replicatedJobs[%zu].template.spec", path, i);
        job_policy(P, jspec, label, true);
        gated++;
    }
    if (!gated) return refuse(P, "%s.replicatedJobs: no Job named %s", path, only);
    jobset_policy(P, jsspec);
    return P->rc;
}

static int do_jobset(struct plan *P, const struct pf_ynode *obj, const char *name)
{
    (void)name;
    const struct pf_ynode *spec = pf_ynode_get(obj, "spec");
    if (want(P, spec, PF_Y_MAP, "spec") < 0) return -1;
    return jobset_jobs(P, spec, NULL, "spec");
}

static int do_runtime(struct plan *P, const struct pf_ynode *obj, const char *name)
{
    /* the token is the job's: the one TrainJob of the input on this runtime names it, else the
     * runtime does, and every TrainJob on it shares that Secret (docs/kubernetes.md, "One token
     * per job") */
    const char *job = NULL;
    size_t njobs = 0, nl = strlen(name);
    for (size_t i = 0; i < P->trainjobs.n; i++) {
        const char *pair = P->trainjobs.v[i];
        if (strncmp(pair, name, nl) == 0 && pair[nl] == '\t') {
            job = pair + nl + 1;
            njobs++;
        }
    }
    if (njobs == 1)
        P->name = job;
    else
        note(P,
             "the TrainJobs on runtime %s share its Secret %s-preflight-token: give each TrainJob "
             "a runtime of its own for a token of its own",
             name, name);
    const struct pf_ynode *spec = pf_ynode_get(obj, "spec");
    if (want(P, spec, PF_Y_MAP, "spec") < 0) return -1;
    const struct pf_ynode *js = pf_ynode_get(pf_ynode_get(spec, "template"), "spec");
    if (!js) return refuse(P, "spec.template.spec: no JobSet template");
    if (want(P, js, PF_Y_MAP, "spec.template.spec") < 0) return -1;
    /* the PET_* variables into the init container (kubeflow/trainer v2.3+ envInjection) */
    const struct pf_ynode *torch = pf_ynode_get(pf_ynode_get(spec, "mlPolicy"), "torch");
    if (torch && torch->kind == PF_Y_MAP && !pf_ynode_get(torch, "envInjection")) {
        struct cn *ei = cn_map(NULL, NULL, false);
        struct cn *t = cn_map(cn_seq(ei, "targets", false), NULL, false);
        cn_str(t, "jobName", "node");
        cn_str(cn_seq(t, "containerNames", true), NULL, "preflight");
        map_add(P, torch, "envInjection", ei);
        cn_free(ei);
    } else if (!torch) {
        note(P, "spec.mlPolicy.torch: none, so no PET_NNODES for preflight: set "
                "PREFLIGHT_WORLD_SIZE in its env to the number of nodes");
    }
    return jobset_jobs(P, js, "node", "spec.template.spec");
}

/* The pod templates under a map of replica specs (PyTorchJob, MPIJob). */
static int replica_specs(struct plan *P, const struct pf_ynode *specs, const char *path,
                         const char *only, long world, const char *coordinator)
{
    if (want(P, specs, PF_Y_MAP, path) < 0) return -1;
    if (!specs || specs->n == 0) return refuse(P, "%s: none, so no pod template", path);
    int gated = 0;
    for (size_t i = 0; i + 1 < specs->n; i += 2) {
        const char *role = specs->kids[i]->val ? specs->kids[i]->val : "?";
        if (only && strcmp(role, only) != 0) {
            note(P, "%s.%s: runs no rank, left as it is", path, role);
            continue;
        }
        char label[PF_BUF_LINE];
        snprintf(label, sizeof(label), "%s.%s.template", path, role);
        struct pod pod = {label, world, coordinator, false};
        if (gate_pod(P, pf_ynode_get(specs->kids[i + 1], "template"), &pod) < 0) return -1;
        gated++;
    }
    if (!gated) return refuse(P, "%s: no %s", path, only);
    return P->rc;
}

static int do_pytorchjob(struct plan *P, const struct pf_ynode *obj, const char *name)
{
    const struct pf_ynode *specs = pf_ynode_get(pf_ynode_get(obj, "spec"), "pytorchReplicaSpecs");
    long world = 0;
    for (size_t i = 0; specs && specs->kind == PF_Y_MAP && i + 1 < specs->n; i += 2) {
        long r = count_of(specs->kids[i + 1], "replicas", 1);
        world = world < 0 || r < 0 ? -1 : world + r;
    }
    note(P,
         "the operator gives each pod a Service of its own name but no subdomain: for "
         "<job>-master-0.<subdomain> set spec.template.spec.subdomain: %s in each replica spec "
         "and apply a headless Service %s with publishNotReadyAddresses: true "
         "(manifests/pytorchjob.yaml)",
         name, name);
    return replica_specs(P, specs, "spec.pytorchReplicaSpecs", NULL, world, NULL);
}

static int do_mpijob(struct plan *P, const struct pf_ynode *obj, const char *name)
{
    const struct pf_ynode *specs = pf_ynode_get(pf_ynode_get(obj, "spec"), "mpiReplicaSpecs");
    long world = count_of(pf_ynode_get(specs, "Worker"), "replicas", 1);
    char *coord = pf_xasprintf("%s-rank0:29400", name);
    note(P,
         "worker 0 is not in DNS while preflight runs (no publishNotReadyAddresses on the "
         "operator's Service): apply the headless Service %s-rank0 of manifests/mpijob.yaml "
         "(selector training.kubeflow.org/job-name: %s, replica-index: \"0\", job-role: worker; "
         "publishNotReadyAddresses: true)",
         name, name);
    int r = replica_specs(P, specs, "spec.mpiReplicaSpecs", "Worker", world, coord);
    free(coord);
    return r;
}

static int do_statefulset(struct plan *P, const struct pf_ynode *obj, const char *name)
{
    (void)name;
    const struct pf_ynode *spec = pf_ynode_get(obj, "spec");
    if (want(P, spec, PF_Y_MAP, "spec") < 0) return -1;
    const char *svc = pf_ynode_str(spec, "serviceName");
    const char *pmp = pf_ynode_str(spec, "podManagementPolicy");
    if (!pmp || strcmp(pmp, "Parallel") != 0)
        note(P,
             "spec.podManagementPolicy is %s: pod N+1 starts only once pod N is Ready, which "
             "a pod waiting in its init phase for the others never is: set Parallel",
             pmp ? pmp : "OrderedReady (the default)");
    note(P,
         "the pods meet through the headless Service %s (spec.serviceName): it must have "
         "publishNotReadyAddresses: true (manifests/service.yaml)",
         svc ? svc : "(none: set spec.serviceName)");
    struct pod pod = {"spec.template", count_of(spec, "replicas", 1), NULL, false};
    return gate_pod(P, pf_ynode_get(spec, "template"), &pod);
}

static int do_lws(struct plan *P, const struct pf_ynode *obj, const char *name)
{
    (void)name;
    const struct pf_ynode *lwt = pf_ynode_get(pf_ynode_get(obj, "spec"), "leaderWorkerTemplate");
    if (want(P, lwt, PF_Y_MAP, "spec.leaderWorkerTemplate") < 0) return -1;
    if (!lwt) return refuse(P, "spec.leaderWorkerTemplate: none, so no pod template");
    /* the world is the group: LWS_GROUP_SIZE, in init containers too */
    struct pod pod = {"spec.leaderWorkerTemplate.workerTemplate", -1, NULL, false};
    if (gate_pod(P, pf_ynode_get(lwt, "workerTemplate"), &pod) < 0) return -1;
    if (pf_ynode_get(lwt, "leaderTemplate")) {
        pod.label = "spec.leaderWorkerTemplate.leaderTemplate";
        if (gate_pod(P, pf_ynode_get(lwt, "leaderTemplate"), &pod) < 0) return -1;
    }
    return P->rc;
}

static int do_volcano(struct plan *P, const struct pf_ynode *obj, const char *name)
{
    (void)name;
    const struct pf_ynode *spec = pf_ynode_get(obj, "spec");
    if (want(P, spec, PF_Y_MAP, "spec") < 0) return -1;
    const struct pf_ynode *tasks = pf_ynode_get(spec, "tasks");
    if (want(P, tasks, PF_Y_SEQ, "spec.tasks") < 0) return -1;
    if (!tasks || tasks->n == 0) return refuse(P, "spec.tasks: none, so no pod template");
    /* the svc plugin: hostnames, the headless Service and VC_<TASK>_NUM (the world size); the
     * env plugin: VC_TASK_INDEX (the rank) */
    const struct pf_ynode *plugins = pf_ynode_get(spec, "plugins");
    if (!plugins) {
        struct cn *p = cn_map(NULL, NULL, false);
        cn_str(cn_seq(p, "svc", true), NULL, "--publish-not-ready-addresses=true");
        cn_seq(p, "env", true);
        map_add(P, spec, "plugins", p);
        cn_free(p);
    } else if (!pf_ynode_get(plugins, "svc") || !pf_ynode_get(plugins, "env")) {
        note(P, "spec.plugins: without both svc (with --publish-not-ready-addresses=true) and "
                "env the pods have no peers' names or no rank");
    }
    if (!pf_ynode_get(spec, "policies")) {
        struct cn *p = cn_seq(NULL, NULL, false);
        static const char *const ev[] = {"PodFailed", "PodEvicted"};
        for (size_t i = 0; i < PF_ARRAY_LEN(ev); i++) {
            struct cn *r = cn_map(p, NULL, false);
            cn_str(r, "event", ev[i]);
            cn_str(r, "action", "RestartJob");
        }
        map_add(P, spec, "policies", p);
        cn_free(p);
    }
    for (size_t i = 0; i < tasks->n; i++) {
        char label[PF_BUF_LINE];
        snprintf(label, sizeof(label), "spec.tasks[%zu].template", i);
        struct pod pod = {label, -1, NULL, false};
        if (gate_pod(P, pf_ynode_get(tasks->kids[i], "template"), &pod) < 0) return -1;
    }
    return P->rc;
}

/* Deletes the entries of a mapping whose key is one of keys[0..n): whole lines in block style
 * (when the key begins its line); in flow style each run of deleted entries with one comma,
 * so that what is left is JSON when the input was. 0, or -1 when one cannot be deleted. */
static int map_del(struct plan *P, const struct pf_ynode *map, const char *const *keys, size_t n)
{
    if (!map || map->kind != PF_Y_MAP) return 0;
    size_t entries = map->n / 2;
    bool *del = pf_xcalloc(entries ? entries : 1, sizeof(*del));
    for (size_t e = 0; e < entries; e++)
        for (size_t k = 0; k < n; k++)
            if (map->kids[2 * e]->kind == PF_Y_SCALAR &&
                strcmp(map->kids[2 * e]->val, keys[k]) == 0)
                del[e] = true;
    int r = 0;
    for (size_t a = 0; a < entries; a++) {
        if (!del[a]) continue;
        size_t b = a;
        while (b + 1 < entries && del[b + 1])
            b++;
        const struct pf_ynode *ka = map->kids[2 * a], *vb = map->kids[2 * b + 1];
        if (map->flow) {
            if (b + 1 < entries)
                edit_del(P, ka->start, map->kids[2 * (b + 1)]->start);
            else if (a > 0)
                edit_del(P, map->kids[2 * a - 1]->end, vb->end);
            else
                edit_del(P, ka->start, vb->end);
        } else {
            for (size_t e = a; e <= b; e++) {
                const struct pf_ynode *k = map->kids[2 * e], *v = map->kids[2 * e + 1];
                size_t ls = pf_ytree_line_start(P->t, k->start);
                if (!only_spaces(P, ls, k->start)) {
                    r = -1;
                    continue;
                }
                edit_del(P, ls, line_after(P, v->end > k->end ? v->end : k->end));
            }
        }
        P->res->removed += (int)(b - a + 1);
        a = b;
    }
    free(del);
    return r;
}

/* An object as the API server returns it (kubectl get -o yaml): what the server wrote, which
 * a create of the injected object would refuse (resourceVersion, uid) or which would tie it to
 * the old object (a Job's generated selector and controller-uid labels, kubernetes
 * pkg/registry/batch/job/strategy.go generateSelector), is removed, so that the object can be
 * created again. Nothing is removed from an object the user wrote. */
static void server_fields(struct plan *P, const struct pf_ynode *obj, const char *group,
                          const char *kind)
{
    const struct pf_ynode *md = pf_ynode_get(obj, "metadata");
    if (!pf_ynode_get(md, "uid") && !pf_ynode_get(md, "resourceVersion")) return;
    static const char *const meta[] = {"uid",        "resourceVersion", "creationTimestamp",
                                       "generation", "managedFields",   "selfLink"};
    static const char *const status[] = {"status"}, *const selector[] = {"selector"};
    static const char *const uids[] = {"controller-uid", "batch.kubernetes.io/controller-uid"};
    int bad = map_del(P, md, meta, PF_ARRAY_LEN(meta));
    bad |= map_del(P, obj, status, 1);
    if (strcmp(group, "batch") == 0 && strcmp(kind, "Job") == 0) {
        const struct pf_ynode *spec = pf_ynode_get(obj, "spec");
        const char *manual = pf_ynode_str(spec, "manualSelector");
        if (!manual || strcmp(manual, "true") != 0) {
            bad |= map_del(P, spec, selector, 1);
            const struct pf_ynode *labels =
                pf_ynode_get(pf_ynode_get(pf_ynode_get(spec, "template"), "metadata"), "labels");
            bad |= map_del(P, labels, uids, PF_ARRAY_LEN(uids));
        }
    }
    note(P,
         "read from the API server: its uid, resourceVersion, status%s removed, so that the "
         "object can be created again (a Job's pod template cannot be updated: kubectl "
         "delete it first, or kubectl replace --force)%s",
         strcmp(kind, "Job") == 0 && strcmp(group, "batch") == 0
             ? " and the Job's generated selector and controller-uid labels"
             : "",
         bad ? "; some could not be removed (not in block style), remove them by hand" : "");
}

/* ---- the kinds */

struct launcher {
    const char *group; /* apiVersion before the "/" ("" for the core group) */
    const char *kind;
    int (*fn)(struct plan *P, const struct pf_ynode *obj, const char *name);
    const char *why; /* when fn is NULL: why it is refused */
};

static const struct launcher launchers[] = {
    {"batch", "Job", do_job, NULL},
    {"jobset.x-k8s.io", "JobSet", do_jobset, NULL},
    {"apps", "StatefulSet", do_statefulset, NULL},
    {"kubeflow.org", "PyTorchJob", do_pytorchjob, NULL},
    {"kubeflow.org", "MPIJob", do_mpijob, NULL},
    {"trainer.kubeflow.org", "TrainingRuntime", do_runtime, NULL},
    {"trainer.kubeflow.org", "ClusterTrainingRuntime", do_runtime, NULL},
    {"leaderworkerset.x-k8s.io", "LeaderWorkerSet", do_lws, NULL},
    {"batch.volcano.sh", "Job", do_volcano, NULL},
    {"trainer.kubeflow.org", "TrainJob", NULL,
     "a TrainJob has no pod template: its pods come from the runtime it names "
     "(spec.runtimeRef): run preflight inject on that TrainingRuntime or "
     "ClusterTrainingRuntime"},
    {"apps", "Deployment", NULL,
     "a Deployment's pods restart for ever, start one by one in a rollout and have no rank or "
     "world size: there is no job to gate (Job, JobSet, StatefulSet, PyTorchJob, "
     "TrainingRuntime, MPIJob, LeaderWorkerSet or Volcano Job)"},
    {"apps", "ReplicaSet", NULL, "a ReplicaSet's pods have no rank or stable name"},
    {"apps", "DaemonSet", NULL,
     "a DaemonSet's pods have no rank and no world size (one a node, as nodes come and go)"},
    {"", "Pod", NULL,
     "a bare Pod has no launcher: no rank, no world size, no peers; wrap it in an Indexed Job"},
    {"", "ReplicationController", NULL, "a ReplicationController's pods have no rank"},
    {"batch", "CronJob", NULL,
     "every run of a CronJob is a Job with a generated name, so the pods' subdomain cannot be "
     "named in advance; gate the Job template as an Indexed Job instead"},
};

/* Kinds passed through untouched: they run no pod. */
static const char *const passive[] = {
    "Service",
    "ConfigMap",
    "Secret",
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "ClusterRole",
    "ClusterRoleBinding",
    "Namespace",
    "PersistentVolumeClaim",
    "PersistentVolume",
    "NetworkPolicy",
    "PodDisruptionBudget",
    "PriorityClass",
    "NetworkAttachmentDefinition",
    "ResourceClaim",
    "ResourceClaimTemplate",
    "PodGroup",
    "Queue",
    "LimitRange",
    "ResourceQuota",
    "CustomResourceDefinition",
    "StorageClass",
    "Endpoints",
    "EndpointSlice",
    "Ingress",
    "HorizontalPodAutoscaler",
};

static int object(struct plan *P, const struct pf_ynode *obj, const char *doc_label)
{
    if (!obj || (obj->kind == PF_Y_SCALAR && obj->plain && obj->vlen == 0))
        return 0; /* an empty document: "---" and nothing, or only comments */
    if (obj->kind != PF_Y_MAP) {
        snprintf(P->where, sizeof(P->where), "%s: %s", P->o->name, doc_label);
        return refuse(P, "not a Kubernetes object (a mapping with apiVersion and kind)");
    }
    const char *kind = pf_ynode_str(obj, "kind"), *api = pf_ynode_str(obj, "apiVersion");
    const char *name = pf_ynode_str(pf_ynode_get(obj, "metadata"), "name");
    if (!name) name = pf_ynode_str(pf_ynode_get(obj, "metadata"), "generateName");
    snprintf(P->where, sizeof(P->where), "%s: %s (%s %s)", P->o->name, doc_label,
             kind ? kind : "no kind", name ? name : "without a name");
    if (!kind || !api) return refuse(P, "no %s", !kind ? "kind" : "apiVersion");
    if (strcmp(kind, "List") == 0 ||
        (strlen(kind) > 4 && !strcmp(kind + strlen(kind) - 4, "List"))) {
        const struct pf_ynode *items = pf_ynode_get(obj, "items");
        if (want(P, items, PF_Y_SEQ, "items") < 0) return -1;
        for (size_t i = 0; items && i < items->n; i++) {
            char label[PF_BUF_LINE];
            snprintf(label, sizeof(label), "%s, item %zu", doc_label, i + 1);
            P->res->documents++;
            if (object(P, items->kids[i], label) < 0) return -1;
        }
        return 0;
    }
    char group[256];
    const char *slash = strchr(api, '/');
    snprintf(group, sizeof(group), "%.*s", slash ? (int)(slash - api) : 0, api);
    for (size_t i = 0; i < PF_ARRAY_LEN(launchers); i++) {
        const struct launcher *l = &launchers[i];
        if (strcmp(l->kind, kind) != 0 || strcmp(l->group, group) != 0) continue;
        if (!l->fn && strcmp(kind, "TrainJob") == 0) {
            const char *rt =
                pf_ynode_str(pf_ynode_get(pf_ynode_get(obj, "spec"), "runtimeRef"), "name");
            if (rt && pf_strlist_has(&P->runtimes, rt)) {
                note(P, "runs on the runtime %s of this input, gated there", rt);
                P->res->passed++;
                return 0;
            }
        }
        if (!l->fn) return refuse(P, "%s", l->why);
        if (!name) return refuse(P, "metadata.name: none (a generateName cannot name peers)");
        size_t before = P->n;
        const struct pf_ynode *md = pf_ynode_get(obj, "metadata");
        P->from_server = pf_ynode_get(md, "uid") || pf_ynode_get(md, "resourceVersion");
        P->name = name;
        int r = l->fn(P, obj, name);
        if (r == 0 && P->n > before) server_fields(P, obj, group, kind);
        return r;
    }
    for (size_t i = 0; i < PF_ARRAY_LEN(passive); i++)
        if (strcmp(passive[i], kind) == 0) {
            P->res->passed++;
            return 0;
        }
    return refuse(
        P,
        "unknown kind %s of %s: preflight inject gates batch/v1 Job, JobSet, StatefulSet, "
        "PyTorchJob, MPIJob, TrainingRuntime, ClusterTrainingRuntime, LeaderWorkerSet "
        "and Volcano Job (batch.volcano.sh), and passes Services, ConfigMaps, Secrets and "
        "RBAC through",
        kind, api);
}

static int edit_cmp(const void *a, const void *b)
{
    const struct edit *x = a, *y = b;
    if (x->at != y->at) return x->at < y->at ? -1 : 1;
    if (x->rank != y->rank) return y->rank - x->rank;
    return x->seq - y->seq;
}

static void plan_free(struct plan *P)
{
    pf_strlist_free(&P->runtimes);
    pf_strlist_free(&P->trainjobs);
    for (size_t i = 0; i < P->n; i++)
        free(P->e[i].text);
    free(P->e);
    P->e = NULL;
    P->n = P->cap = 0;
}

/* Plans the edits of in; 0 or -1 (pf_err_msg). */
static int plan_run(struct plan *P, struct pf_ytree *t, const char *in, size_t len)
{
    if (pf_ytree_parse(t, in, len, P->o->name) < 0) return -1;
    P->t = t;
    for (int d = 0; d < t->ndocs; d++) { /* the runtimes a TrainJob may name */
        const struct pf_ynode *o = t->docs[d], *items = pf_ynode_get(o, "items");
        size_t n = items && items->kind == PF_Y_SEQ ? items->n : 1;
        for (size_t i = 0; i < n; i++) {
            const struct pf_ynode *x = items && items->kind == PF_Y_SEQ ? items->kids[i] : o;
            const char *kind = pf_ynode_str(x, "kind");
            const char *name = pf_ynode_str(pf_ynode_get(x, "metadata"), "name");
            if (kind && name && strstr(kind, "TrainingRuntime")) pf_strlist_add(&P->runtimes, name);
            const char *rt =
                pf_ynode_str(pf_ynode_get(pf_ynode_get(x, "spec"), "runtimeRef"), "name");
            if (kind && name && rt && strcmp(kind, "TrainJob") == 0) {
                char pair[PF_BUF_LINE];
                snprintf(pair, sizeof(pair), "%s\t%s", rt, name);
                pf_strlist_add(&P->trainjobs, pair);
            }
        }
    }
    for (int d = 0; d < t->ndocs && P->rc == 0; d++) {
        char label[64];
        snprintf(label, sizeof(label), "document %d", d + 1);
        P->res->documents++;
        object(P, t->docs[d], label);
    }
    return P->rc;
}

int pf_inject(const struct pf_inject_opts *o, const char *in, size_t len, char **out,
              size_t *out_len, struct pf_inject_result *res)
{
    memset(res, 0, sizeof(*res));
    *out = NULL;
    *out_len = 0;
    if (len > PF_INJECT_MAX)
        return pf_err_set(PF_ETOOBIG, "%s: larger than %u bytes", o->name, PF_INJECT_MAX);
    if (memchr(in, '\0', len)) return pf_err_set(PF_EINVAL, "%s: not text (a NUL byte)", o->name);
    if (len >= 2 && ((in[0] == '\xFE' && in[1] == '\xFF') || (in[0] == '\xFF' && in[1] == '\xFE')))
        return pf_err_set(PF_EINVAL, "%s: UTF-16: convert it to UTF-8 first", o->name);
    struct plan P = {.o = o, .res = res};
    struct pf_ytree *t = pf_xcalloc(1, sizeof(*t));
    int r = plan_run(&P, t, in, len);
    if (r == 0) {
        if (P.n) qsort(P.e, P.n, sizeof(*P.e), edit_cmp);
        const char *nl = memchr(in, '\n', len);
        bool crlf = nl && nl > in && nl[-1] == '\r';
        struct pf_buf b;
        pf_buf_init(&b, 2 * (size_t)PF_INJECT_MAX);
        size_t at = 0;
        for (size_t i = 0; i < P.n; i++) {
            if (P.e[i].at < at) { /* inside a deleted range: deletions overlapping it merge */
                if (P.e[i].del_end > at) at = P.e[i].del_end;
                continue; /* an insertion there is lost: the check below refuses the input */
            }
            pf_buf_add(&b, in + at, P.e[i].at - at);
            if (P.e[i].at == len && len && in[len - 1] != '\n' && (i == 0 || P.e[i - 1].at != len))
                pf_buf_add(&b, crlf ? "\r\n" : "\n", crlf ? 2 : 1); /* the last line had none */
            for (const char *c = P.e[i].text; *c; c++)              /* the input's line breaks */
                pf_buf_add(&b, *c == '\n' && crlf ? "\r\n" : c, *c == '\n' && crlf ? 2 : 1);
            at = P.e[i].del_end > P.e[i].at ? P.e[i].del_end : P.e[i].at;
        }
        pf_buf_add(&b, in + at, len - at);
        if (pf_buf_check(&b, "the output") < 0) {
            r = -1;
            pf_buf_free(&b);
        } else {
            *out_len = b.len;
            *out = pf_buf_detach(&b);
        }
    }
    pf_ytree_free(t);
    plan_free(&P);
    if (r == 0 && res->gated) {
        /* the result must read back as YAML and need no edit: else the input had a shape the
         * edits do not fit (refused rather than written wrong) */
        struct pf_inject_result again = {0};
        struct plan Q = {.o = o, .res = &again};
        char *msg = NULL;
        if (plan_run(&Q, t, *out, *out_len) < 0)
            msg = pf_xasprintf("%s", pf_err_msg());
        else if (Q.n) {
            size_t line = 1;
            for (size_t i = 0; i < Q.e[0].at; i++)
                line += (*out)[i] == '\n';
            const char *txt = Q.e[0].text + strspn(Q.e[0].text, " \n");
            msg = pf_xasprintf("a second pass would add %zu more, the first at line %zu: %.*s", Q.n,
                               line, (int)strcspn(txt, "\n"), txt);
        }
        pf_ytree_free(t);
        plan_free(&Q);
        pf_inject_result_free(&again);
        if (msg) {
            r = pf_err_set(PF_EINVAL,
                           "%s: cannot gate: the edits do not fit this input's layout (%s); "
                           "write it in block style (kubectl get -o yaml does)",
                           o->name, msg);
            free(msg);
            free(*out);
            *out = NULL;
            *out_len = 0;
        }
    }
    free(t);
    if (r < 0) pf_strlist_free(&res->notes);
    return r < 0 ? -1 : 0;
}

void pf_inject_result_free(struct pf_inject_result *res)
{
    pf_strlist_free(&res->notes);
}
