#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

#include "../explain/explain.h"
#include "../verdict/verdict.h"

#define CONFIG_MAX_BYTES (1u << 20)
#define CONFIG_MAX_DEPTH 32

void pf_config_defaults(struct pf_config *c)
{
    memset(c, 0, sizeof(*c));
    c->expect_rdma = PF_RDMA_AUTO;
    c->expect_hcas = -1;
    c->expect_min_port_rate_gbps = -1;
    c->expect_gpus_per_pod = -1;
    c->expect_mtu = -1;
    c->expect_busbw_gbps = -1;
    c->expect_line_rate_gbps = -1;
    /* efficiency of an NCCL all-reduce against line rate by node count */
    c->efficiency[0] = (struct pf_curve_point){2, 85};
    c->efficiency[1] = (struct pf_curve_point){8, 68};
    c->efficiency[2] = (struct pf_curve_point){125, 39};
    c->nefficiency = 3;
    strcpy(c->workload, "dense");
    c->message_bytes = 268435456;
    c->rendezvous_port = 29400;
    c->rendezvous_timeout_s = 600;
    c->tcp_message_bytes = 64ll << 20;
    c->tcp_iterations = 5;
    c->tcp_min_busbw_gbps = -1;
    c->nccl_iterations = 20;
    c->nccl_warmup = 5;
    c->nccl_timeout_s = 120;
    c->podinfo_wait_s = 10;
    c->fail_on = PF_FAIL;
    c->watch_window_s = 600;
    c->watch_stall_s = 120;
    c->watch_grace_s = 10;
}

void pf_config_free(struct pf_config *c)
{
    pf_strlist_free(&c->expect_networks);
    pf_strlist_free(&c->collectives);
}

int pf_config_policy(const struct pf_config *c, const char *code, int status)
{
    for (size_t i = 0; i < c->npolicy; i++)
        if (strcmp(c->policy[i].code, code) == 0) return c->policy[i].status;
    return status;
}

/* ---- parsing */

struct ctx {
    struct pf_config *c;
    const char *name;
    yaml_document_t *doc;
};

static int bad(struct ctx *x, yaml_node_t *n, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int bad(struct ctx *x, yaml_node_t *n, const char *key, const char *fmt, ...)
{
    char why[512];
    PF_FORMAT_ARGS(why, fmt);
    return pf_err_set(PF_EUSAGE, "%s:%zu: %s: %s", x->name, n ? n->start_mark.line + 1 : 0, key,
                      why);
}

static const char *node_type(yaml_node_t *n)
{
    switch (n->type) {
    case YAML_SCALAR_NODE:
        return "a scalar";
    case YAML_SEQUENCE_NODE:
        return "a list";
    case YAML_MAPPING_NODE:
        return "a mapping";
    default:
        return "nothing";
    }
}

static int want_scalar(struct ctx *x, yaml_node_t *n, const char *key, const char **out)
{
    if (n->type != YAML_SCALAR_NODE)
        return bad(x, n, key, "expected a scalar, found %s", node_type(n));
    *out = (const char *)n->data.scalar.value;
    return 0;
}

static int get_int(struct ctx *x, yaml_node_t *n, const char *key, long long lo, long long hi,
                   long long *out)
{
    const char *s = "";
    int r = want_scalar(x, n, key, &s);
    if (r < 0) return r;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (!*s || *end || errno) return bad(x, n, key, "expected an integer, found \"%s\"", s);
    if (v < lo || v > hi) return bad(x, n, key, "%lld is out of range (%lld..%lld)", v, lo, hi);
    *out = v;
    return 0;
}

static int get_num(struct ctx *x, yaml_node_t *n, const char *key, double lo, double hi,
                   double *out)
{
    const char *s = "";
    int r = want_scalar(x, n, key, &s);
    if (r < 0) return r;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno || !isfinite(v))
        return bad(x, n, key, "expected a number, found \"%s\"", s);
    if (v < lo || v > hi) return bad(x, n, key, "%g is out of range (%g..%g)", v, lo, hi);
    *out = v;
    return 0;
}

static int get_bool(struct ctx *x, yaml_node_t *n, const char *key, bool *out)
{
    const char *s = "";
    int r = want_scalar(x, n, key, &s);
    if (r < 0) return r;
    if (!strcmp(s, "true") || !strcmp(s, "True") || !strcmp(s, "yes"))
        *out = true;
    else if (!strcmp(s, "false") || !strcmp(s, "False") || !strcmp(s, "no"))
        *out = false;
    else
        return bad(x, n, key, "expected true or false, found \"%s\"", s);
    return 0;
}

static int get_enum(struct ctx *x, yaml_node_t *n, const char *key, const char *const *names,
                    size_t count, int *out)
{
    const char *s = "";
    int r = want_scalar(x, n, key, &s);
    if (r < 0) return r;
    char list[256] = "";
    for (size_t i = 0; i < count; i++) {
        if (strcmp(s, names[i]) == 0) {
            *out = (int)i;
            return 0;
        }
        size_t len = strlen(list);
        snprintf(list + len, sizeof(list) - len, "%s%s", i ? ", " : "", names[i]);
    }
    return bad(x, n, key, "\"%s\" is not one of: %s", s, list);
}

static int get_str(struct ctx *x, yaml_node_t *n, const char *key, char *out, size_t cap)
{
    const char *s = "";
    int r = want_scalar(x, n, key, &s);
    if (r < 0) return r;
    if (pf_strcpy(out, cap, s) < 0) return bad(x, n, key, "longer than %zu characters", cap - 1);
    return 0;
}

static int get_strlist(struct ctx *x, yaml_node_t *n, const char *key, struct pf_strlist *out,
                       size_t max)
{
    if (n->type != YAML_SEQUENCE_NODE)
        return bad(x, n, key, "expected a list, found %s", node_type(n));
    pf_strlist_free(out);
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top;
         it++) {
        yaml_node_t *e = yaml_document_get_node(x->doc, *it);
        const char *s = "";
        int r = want_scalar(x, e, key, &s);
        if (r < 0) return r;
        if (!*s) return bad(x, e, key, "empty entry");
        if (out->n >= max) return bad(x, e, key, "more than %zu entries", max);
        pf_strlist_add(out, s);
    }
    return 0;
}

typedef int (*field_fn)(struct ctx *x, yaml_node_t *value, const char *key);

/* What a key holds, and how its value is read into the struct at base + off. */
enum field_type {
    F_INT,      /* an int or long long (by size), in [lo, hi] */
    F_NUM,      /* a double in [lo, hi] */
    F_BOOL,     /* a bool */
    F_STR,      /* a char[size] */
    F_PATH,     /* a char[size]: "" or an absolute path (a mounted secret, a result file) */
    F_ENUM,     /* an int: values[i] (or i) for names[i] */
    F_ENUM_STR, /* a char[size]: names[i] itself */
    F_MAP,      /* a mapping of the keys in sub[] */
    F_FN,       /* fn reads it (lists, checks across keys) */
};

struct field {
    const char *name;
    enum field_type type;
    size_t off, size;
    double lo, hi;
    const char *const *names; /* NULL-terminated */
    const int *values;
    const struct field *sub;
    size_t nsub;
    field_fn fn;
};

#define AT(T, m) .off = offsetof(T, m), .size = sizeof(((T *)0)->m)
#define CFG(m) AT(struct pf_config, m)
#define INT(k, m, l, h)                                                                            \
    {                                                                                              \
        .name = k, .type = F_INT, CFG(m), .lo = l, .hi = h                                         \
    }
#define NUM(k, m, l, h)                                                                            \
    {                                                                                              \
        .name = k, .type = F_NUM, CFG(m), .lo = l, .hi = h                                         \
    }
#define BOOL(k, m)                                                                                 \
    {                                                                                              \
        .name = k, .type = F_BOOL, CFG(m)                                                          \
    }
#define STR(k, m)                                                                                  \
    {                                                                                              \
        .name = k, .type = F_STR, CFG(m)                                                           \
    }
#define PATH(k, m)                                                                                 \
    {                                                                                              \
        .name = k, .type = F_PATH, CFG(m)                                                          \
    }
#define ENUM(k, m, ...)                                                                            \
    {                                                                                              \
        .name = k, .type = F_ENUM, CFG(m), .names = (const char *const[])                          \
        {                                                                                          \
            __VA_ARGS__, NULL                                                                      \
        }                                                                                          \
    }
#define ENUM_STR(k, m, ...)                                                                        \
    {                                                                                              \
        .name = k, .type = F_ENUM_STR, CFG(m), .names = (const char *const[])                      \
        {                                                                                          \
            __VA_ARGS__, NULL                                                                      \
        }                                                                                          \
    }
#define MAP(k, t)                                                                                  \
    {                                                                                              \
        .name = k, .type = F_MAP, .sub = t, .nsub = PF_ARRAY_LEN(t)                                \
    }
#define FN(k, f)                                                                                   \
    {                                                                                              \
        .name = k, .type = F_FN, .fn = f                                                           \
    }

static int walk_map(struct ctx *x, yaml_node_t *map, const char *prefix, const struct field *fields,
                    size_t nfields, void *base);

/* Reads v, the value of key, into base as f says. */
static int set_field(struct ctx *x, const struct field *f, void *base, yaml_node_t *v,
                     const char *key)
{
    char *p = (char *)base + f->off;
    switch (f->type) {
    case F_INT: {
        long long n = 0;
        int r = get_int(x, v, key, (long long)f->lo, (long long)f->hi, &n);
        if (r < 0) return r;
        if (f->size == sizeof(int))
            *(int *)(void *)p = (int)n;
        else
            *(long long *)(void *)p = n;
        return 0;
    }
    case F_NUM:
        return get_num(x, v, key, f->lo, f->hi, (double *)(void *)p);
    case F_BOOL:
        return get_bool(x, v, key, (bool *)(void *)p);
    case F_STR:
        return get_str(x, v, key, p, f->size);
    case F_PATH: {
        int r = get_str(x, v, key, p, f->size);
        if (r == 0 && p[0] && p[0] != '/') return bad(x, v, key, "must be an absolute path");
        return r;
    }
    case F_ENUM:
    case F_ENUM_STR: {
        size_t count = 0;
        while (f->names[count])
            count++;
        int e;
        int r = get_enum(x, v, key, f->names, count, &e);
        if (r < 0) return r;
        if (f->type == F_ENUM_STR)
            pf_strcpy(p, f->size, f->names[e]);
        else
            *(int *)(void *)p = f->values ? f->values[e] : e;
        return 0;
    }
    case F_MAP:
        return walk_map(x, v, key, f->sub, f->nsub, base);
    case F_FN:
        return f->fn(x, v, key);
    }
    return bad(x, v, key, "no reader for this key");
}

/* Walks a mapping, reading each key's value as its field says; unknown keys are errors with a
 * did-you-mean. */
static int walk_map(struct ctx *x, yaml_node_t *map, const char *prefix, const struct field *fields,
                    size_t nfields, void *base)
{
    char key[128];
    if (map->type != YAML_MAPPING_NODE)
        return bad(x, map, prefix[0] ? prefix : "(top level)", "expected a mapping, found %s",
                   node_type(map));
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
         p++) {
        yaml_node_t *k = yaml_document_get_node(x->doc, p->key);
        yaml_node_t *v = yaml_document_get_node(x->doc, p->value);
        if (k->type != YAML_SCALAR_NODE)
            return bad(x, k, prefix[0] ? prefix : "(top level)", "keys must be plain names");
        const char *name = (const char *)k->data.scalar.value;
        snprintf(key, sizeof(key), "%s%s%s", prefix, prefix[0] ? "." : "", name);
        const struct field *f = NULL;
        for (size_t i = 0; i < nfields; i++)
            if (strcmp(fields[i].name, name) == 0) f = &fields[i];
        if (!f) {
            const char *best = NULL;
            int best_d = 3;
            for (size_t i = 0; i < nfields; i++) {
                int d = pf_edit_distance(name, fields[i].name, 2);
                /* a shortened or lengthened key ("minPortRate") is a near miss too */
                size_t ln = strlen(name), lf = strlen(fields[i].name);
                if (ln >= 3 && lf >= 3 && strncasecmp(name, fields[i].name, ln < lf ? ln : lf) == 0)
                    d = d < 1 ? d : 1;
                if (d < best_d) {
                    best_d = d;
                    best = fields[i].name;
                }
            }
            if (best) return bad(x, k, key, "unknown key (did you mean '%s'?)", best);
            return bad(x, k, key, "unknown key");
        }
        /* a key given twice is almost always a mistake */
        for (yaml_node_pair_t *q = map->data.mapping.pairs.start; q < p; q++) {
            yaml_node_t *k2 = yaml_document_get_node(x->doc, q->key);
            if (k2->type == YAML_SCALAR_NODE &&
                strcmp((const char *)k2->data.scalar.value, name) == 0)
                return bad(x, k, key, "given twice (first on line %zu)", k2->start_mark.line + 1);
        }
        int r = set_field(x, f, base, v, key);
        if (r < 0) return r;
    }
    return 0;
}

#define FIELD(fn_name) static int fn_name(struct ctx *x, yaml_node_t *v, const char *key)

FIELD(f_networks)
{
    int r = get_strlist(x, v, key, &x->c->expect_networks, 64);
    if (r < 0) return r;
    for (size_t i = 0; i < x->c->expect_networks.n; i++) {
        const char *s = x->c->expect_networks.v[i];
        if (strlen(s) > 253 + 1 + 63 || strchr(s, ' '))
            return bad(x, v, key, "\"%s\" is not a network name (namespace/name)", s);
    }
    return 0;
}

FIELD(f_efficiency)
{
    static const struct field point[] = {
        {.name = "nodes", .type = F_NUM, AT(struct pf_curve_point, nodes), .lo = 1, .hi = 1e6},
        {.name = "percent",
         .type = F_NUM,
         AT(struct pf_curve_point, percent),
         .lo = 0.1,
         .hi = 100},
    };
    if (v->type != YAML_SEQUENCE_NODE)
        return bad(x, v, key, "expected a list of {nodes, percent}, found %s", node_type(v));
    x->c->nefficiency = 0;
    for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top;
         it++) {
        yaml_node_t *e = yaml_document_get_node(x->doc, *it);
        if (x->c->nefficiency >= PF_CONFIG_MAX_CURVE)
            return bad(x, e, key, "more than %d points", PF_CONFIG_MAX_CURVE);
        struct pf_curve_point *pt = &x->c->efficiency[x->c->nefficiency];
        *pt = (struct pf_curve_point){-1, -1};
        int r = walk_map(x, e, key, point, PF_ARRAY_LEN(point), pt);
        if (r < 0) return r;
        if (pt->nodes < 0 || pt->percent < 0)
            return bad(x, e, key, "each point needs both nodes and percent");
        if (x->c->nefficiency > 0 && pt->nodes <= pt[-1].nodes)
            return bad(x, e, key, "points must be in increasing order of nodes");
        x->c->nefficiency++;
    }
    if (x->c->nefficiency == 0) return bad(x, v, key, "needs at least one point");
    return 0;
}

static const char *const known_collectives[] = {
    "allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "reduce", "sendrecv"};

FIELD(f_collectives)
{
    int r = get_strlist(x, v, key, &x->c->collectives, 16);
    if (r < 0) return r;
    for (size_t i = 0; i < x->c->collectives.n; i++) {
        bool ok = false;
        for (size_t j = 0; j < PF_ARRAY_LEN(known_collectives); j++)
            ok |= strcmp(x->c->collectives.v[i], known_collectives[j]) == 0;
        if (!ok)
            return bad(x, v, key,
                       "\"%s\" is not one of: allreduce, allgather, reducescatter, alltoall, "
                       "broadcast, reduce, sendrecv",
                       x->c->collectives.v[i]);
    }
    return 0;
}

FIELD(f_policy_findings)
{
    if (v->type != YAML_MAPPING_NODE)
        return bad(x, v, key, "expected a mapping of finding code to fail|warn|ignore, found %s",
                   node_type(v));
    struct pf_strlist codes = {0};
    pf_explain_list(NULL, &codes);
    int r = 0;
    for (yaml_node_pair_t *p = v->data.mapping.pairs.start; p < v->data.mapping.pairs.top; p++) {
        yaml_node_t *k = yaml_document_get_node(x->doc, p->key);
        yaml_node_t *val = yaml_document_get_node(x->doc, p->value);
        const char *code = "";
        char sub[128];
        if ((r = want_scalar(x, k, key, &code)) < 0) break;
        snprintf(sub, sizeof(sub), "%s.%s", key, code);
        bool known = false;
        const char *best = NULL;
        int best_d = 3;
        for (size_t i = 0; i < codes.n; i++) {
            const char *c = strchr(codes.v[i], '/') + 1;
            if (strcmp(c, code) == 0) known = true;
            int d = pf_edit_distance(code, c, 2);
            if (d < best_d) {
                best_d = d;
                best = c;
            }
        }
        if (!known) {
            r = best ? bad(x, k, sub, "unknown finding code (did you mean '%s'?)", best)
                     : bad(x, k, sub, "unknown finding code (see docs/checks.md)");
            break;
        }
        static const char *const names[] = {"fail", "warn", "ignore"};
        int e;
        if ((r = get_enum(x, val, sub, names, 3, &e)) < 0) break;
        if (x->c->npolicy >= PF_CONFIG_MAX_POLICY) {
            r = bad(x, k, sub, "more than %d entries", PF_CONFIG_MAX_POLICY);
            break;
        }
        struct pf_policy_entry *pe = &x->c->policy[x->c->npolicy++];
        snprintf(pe->code, sizeof(pe->code), "%s", code);
        pe->status = e == 0 ? PF_FAIL : e == 1 ? PF_WARN : PF_POLICY_IGNORE;
    }
    pf_strlist_free(&codes);
    return r;
}

FIELD(f_metrics)
{
    int r = get_str(x, v, key, x->c->report_metrics_file, sizeof(x->c->report_metrics_file));
    if (r == 0 && x->c->report_metrics_file[0] != '/')
        return bad(x, v, key, "must be an absolute path");
    return r;
}

FIELD(f_pushgateway)
{
    char *u = x->c->report_pushgateway;
    int r = get_str(x, v, key, u, sizeof(x->c->report_pushgateway));
    if (r == 0 && *u && pf_http_url_check("url", u) < 0) {
        const char *m = strchr(pf_err_msg(), ':');
        return bad(x, v, key, "%s", m ? m + 2 : pf_err_msg());
    }
    return r;
}

FIELD(f_push_auth)
{
    static const struct field fields[] = {
        PATH("bearerTokenFile", report_push_bearer_file),
        PATH("usernameFile", report_push_username_file),
        PATH("passwordFile", report_push_password_file),
        PATH("caFile", report_push_ca_file),
    };
    int r = walk_map(x, v, key, fields, PF_ARRAY_LEN(fields), x->c);
    if (r == 0 && !x->c->report_push_username_file[0] != !x->c->report_push_password_file[0])
        return bad(x, v, key, "usernameFile and passwordFile go together");
    if (r == 0 && x->c->report_push_username_file[0] && x->c->report_push_bearer_file[0])
        return bad(x, v, key, "bearerTokenFile or usernameFile and passwordFile, not both");
    return r;
}

/* A Kubernetes label key (k8s.io/apimachinery, pkg/util/validation: IsQualifiedName): an
 * optional DNS-subdomain prefix of at most 253 bytes and "/", then a name of 1..63
 * alphanumerics, '-', '_' and '.', starting and ending alphanumeric. */
static bool label_name_ok(const char *s, size_t n)
{
    if (n == 0 || n > 63) return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool an = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
        if (!an && ((i == 0 || i == n - 1) || (c != '-' && c != '_' && c != '.'))) return false;
    }
    return true;
}

static bool label_prefix_ok(const char *s, size_t n)
{
    if (n == 0 || n > 253) return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        bool an = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
        if (!an && ((i == 0 || i == n - 1) || (c != '-' && c != '.'))) return false;
    }
    return true;
}

FIELD(f_group_by)
{
    char *g = x->c->gang_group_by;
    int r = get_str(x, v, key, g, sizeof(x->c->gang_group_by));
    if (r < 0 || !*g) return r;
    const char *slash = strchr(g, '/');
    bool ok = slash ? label_prefix_ok(g, (size_t)(slash - g)) &&
                          label_name_ok(slash + 1, strlen(slash + 1))
                    : label_name_ok(g, strlen(g));
    if (!ok)
        return bad(x, v, key,
                   "\"%s\" is not a label key ([prefix/]name: name 1-63 alphanumerics, '-', '_', "
                   "'.'; prefix a DNS subdomain)",
                   g);
    return 0;
}

/* The keys, by section (docs/configuration.md). */
static const struct field expect_fields[] = {
    ENUM("rdma", expect_rdma, "auto", "required", "none"),
    INT("hcas", expect_hcas, 0, 1024),
    NUM("minPortRateGbps", expect_min_port_rate_gbps, 0, 1e6),
    INT("gpusPerPod", expect_gpus_per_pod, 0, 1024),
    FN("networks", f_networks),
    INT("mtu", expect_mtu, 68, 65536),
    ENUM_STR("transport", expect_transport, "IB", "Socket", "OFI", "any"),
    NUM("busbwGBps", expect_busbw_gbps, 0, 1e6),
    NUM("lineRateGbps", expect_line_rate_gbps, 0, 1e7),
    FN("efficiency", f_efficiency),
};
static const struct field rendezvous_fields[] = {
    INT("port", rendezvous_port, 1, 65535),
    INT("timeoutSeconds", rendezvous_timeout_s, 1, 86400),
    STR("interface", rendezvous_interface),
    BOOL("explainMissing", rendezvous_explain_missing),
};
static const struct field tcp_fields[] = {
    INT("messageBytes", tcp_message_bytes, 4, 4ll << 30),
    INT("iterations", tcp_iterations, 1, 1000),
    NUM("minBusbwGBps", tcp_min_busbw_gbps, 0, 1e6),
};
static const struct field nccl_fields[] = {
    INT("iterations", nccl_iterations, 1, 10000),
    INT("warmup", nccl_warmup, 0, 1000),
    INT("timeoutSeconds", nccl_timeout_s, 1, 86400),
};
static const struct field podinfo_fields[] = {
    NUM("waitSeconds", podinfo_wait_s, 0, 3600),
};
static const struct field gang_fields[] = {
    FN("groupBy", f_group_by),
    ENUM("rank0", gang_rank0, "same", "apart"),
};
static const int fail_on_values[] = {PF_FAIL, PF_WARN};
static const struct field policy_fields[] = {
    {.name = "failOn",
     .type = F_ENUM,
     CFG(fail_on),
     .names = (const char *const[]){"fail", "warn", NULL},
     .values = fail_on_values},
    FN("findings", f_policy_findings),
};
static const struct field report_fields[] = {
    BOOL("events", report_events),
    BOOL("annotate", report_annotate),
    FN("metricsFile", f_metrics),
    ENUM("markNode", report_mark_node, "none", "label", "taint"),
    FN("pushgateway", f_pushgateway),
    FN("pushgatewayAuth", f_push_auth),
    PATH("resultsFile", report_results_file),
};
static const struct field watch_fields[] = {
    NUM("windowSeconds", watch_window_s, 1, 86400),
    ENUM("onMismatch", watch_on_mismatch, "warn", "stop"),
    NUM("stallSeconds", watch_stall_s, 1, 86400),
    INT("processes", watch_processes, 0, 4096),
    NUM("stopGraceSeconds", watch_grace_s, 0, 3600),
};
static const struct field top_fields[] = {
    MAP("expect", expect_fields),
    ENUM_STR("workload", workload, "dense", "moe", "fsdp"),
    FN("collectives", f_collectives),
    INT("messageBytes", message_bytes, 4, 16ll << 30),
    MAP("rendezvous", rendezvous_fields),
    MAP("tcp", tcp_fields),
    MAP("nccl", nccl_fields),
    MAP("podinfo", podinfo_fields),
    MAP("gang", gang_fields),
    MAP("policy", policy_fields),
    MAP("report", report_fields),
    MAP("watch", watch_fields),
};

/* A first pass over libyaml's events, before any document is built: nesting deeper than
 * CONFIG_MAX_DEPTH and aliases are usage errors. The config needs neither (its deepest key is
 * three levels down), and they are what makes building a document slow or huge (deep flow
 * nesting costs libyaml quadratic time; aliases expand). Stops at the first offending event,
 * so its cost is bounded by the depth limit. A syntax error is left to the loader. */
static int check_shape(const char *name, const char *text, size_t len)
{
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser))
        return pf_err_set(PF_ERR, "libyaml: cannot initialise the parser");
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    int depth = 0, r = 0;
    bool done = false;
    while (!done && r == 0) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&parser, &ev)) break;
        switch (ev.type) {
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT:
            if (++depth > CONFIG_MAX_DEPTH)
                r = pf_err_set(PF_EUSAGE, "%s:%zu: nested more than %d levels deep", name,
                               ev.start_mark.line + 1, CONFIG_MAX_DEPTH);
            break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT:
            depth--;
            break;
        case YAML_ALIAS_EVENT:
            r = pf_err_set(PF_EUSAGE,
                           "%s:%zu: alias *%.40s: aliases are not allowed in a config "
                           "file (write the value out)",
                           name, ev.start_mark.line + 1, (const char *)ev.data.alias.anchor);
            break;
        case YAML_STREAM_END_EVENT:
            done = true;
            break;
        default:
            break;
        }
        yaml_event_delete(&ev);
    }
    yaml_parser_delete(&parser);
    return r;
}

int pf_config_parse(struct pf_config *c, const char *name, const char *text, size_t len)
{
    int shape = check_shape(name, text, len);
    if (shape < 0) return shape;
    yaml_parser_t parser;
    yaml_document_t doc;
    int r = 0;
    if (!yaml_parser_initialize(&parser))
        return pf_err_set(PF_ERR, "libyaml: cannot initialise the parser");
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);
    if (!yaml_parser_load(&parser, &doc)) {
        r = pf_err_set(PF_EUSAGE, "%s:%zu: not valid YAML: %s", name, parser.problem_mark.line + 1,
                       parser.problem ? parser.problem : "parse error");
        yaml_parser_delete(&parser);
        return r;
    }
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    struct ctx x = {c, name, &doc};
    if (root && !(root->type == YAML_SCALAR_NODE && root->data.scalar.length == 0))
        r = walk_map(&x, root, "", top_fields, PF_ARRAY_LEN(top_fields), c);
    if (r == 0) {
        /* a second document is not allowed: it would be silently ignored otherwise */
        yaml_document_t doc2;
        if (yaml_parser_load(&parser, &doc2)) {
            if (yaml_document_get_root_node(&doc2))
                r = pf_err_set(PF_EUSAGE, "%s:%zu: only one YAML document is allowed", name,
                               parser.mark.line + 1);
            yaml_document_delete(&doc2);
        } else {
            r = pf_err_set(PF_EUSAGE, "%s:%zu: not valid YAML: %s", name,
                           parser.problem_mark.line + 1,
                           parser.problem ? parser.problem : "parse error");
        }
    }
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    return r;
}

int pf_config_load(struct pf_config *c, const char *path, double deadline)
{
    struct pf_buf b;
    pf_buf_init(&b, CONFIG_MAX_BYTES);
    int r = pf_file_read_named(&b, "--config", path, deadline);
    if (r == 0) {
        pf_strcpy(c->path, sizeof(c->path), path);
        r = pf_config_parse(c, path, b.data, b.len);
    }
    pf_buf_free(&b);
    return r;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 1099511628211ull;
    }
    return h;
}

void pf_config_digest(char *out, size_t n, const struct pf_config *c)
{
    struct pf_buf b;
    pf_buf_init(&b, PF_BUF_DOCUMENT);
    pf_buf_addf(&b,
                "rdma=%d hcas=%d rate=%g gpus=%d mtu=%d tr=%s busbw=%g line=%g wl=%s "
                "msg=%lld port=%d to=%d if=%s tcp=%lld/%d/%g nccl=%d/%d/%d failOn=%d",
                (int)c->expect_rdma, c->expect_hcas, c->expect_min_port_rate_gbps,
                c->expect_gpus_per_pod, c->expect_mtu, c->expect_transport, c->expect_busbw_gbps,
                c->expect_line_rate_gbps, c->workload, c->message_bytes, c->rendezvous_port,
                c->rendezvous_timeout_s, c->rendezvous_interface, c->tcp_message_bytes,
                c->tcp_iterations, c->tcp_min_busbw_gbps, c->nccl_iterations, c->nccl_warmup,
                c->nccl_timeout_s, c->fail_on);
    for (size_t i = 0; i < c->expect_networks.n; i++)
        pf_buf_addf(&b, " net=%s", c->expect_networks.v[i]);
    for (size_t i = 0; i < c->collectives.n; i++)
        pf_buf_addf(&b, " coll=%s", c->collectives.v[i]);
    for (size_t i = 0; i < c->nefficiency; i++)
        pf_buf_addf(&b, " eff=%g:%g", c->efficiency[i].nodes, c->efficiency[i].percent);
    for (size_t i = 0; i < c->npolicy; i++)
        pf_buf_addf(&b, " pol=%s:%d", c->policy[i].code, c->policy[i].status);
    uint64_t h = fnv(1469598103934665603ull, b.data, b.len);
    snprintf(out, n, "%016llx", (unsigned long long)h);
    pf_buf_free(&b);
}
