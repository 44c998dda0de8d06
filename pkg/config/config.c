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
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
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

struct field {
    const char *name;
    field_fn fn;
};

/* Walks a mapping, calling the matching field's function; unknown keys are errors with a
 * did-you-mean. */
static int walk_map(struct ctx *x, yaml_node_t *map, const char *prefix, const struct field *fields,
                    size_t nfields)
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
        int r = f->fn(x, v, key);
        if (r < 0) return r;
    }
    return 0;
}

#define FIELD(fn_name) static int fn_name(struct ctx *x, yaml_node_t *v, const char *key)

FIELD(f_rdma)
{
    static const char *const names[] = {"auto", "required", "none"};
    int e;
    int r = get_enum(x, v, key, names, 3, &e);
    x->c->expect_rdma = (enum pf_rdma_expect)e;
    return r;
}

FIELD(f_hcas)
{
    long long n;
    int r = get_int(x, v, key, 0, 1024, &n);
    x->c->expect_hcas = (int)n;
    return r;
}

FIELD(f_min_rate)
{
    return get_num(x, v, key, 0, 1e6, &x->c->expect_min_port_rate_gbps);
}

FIELD(f_gpus)
{
    long long n;
    int r = get_int(x, v, key, 0, 1024, &n);
    x->c->expect_gpus_per_pod = (int)n;
    return r;
}

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

FIELD(f_mtu)
{
    long long n;
    int r = get_int(x, v, key, 68, 65536, &n);
    x->c->expect_mtu = (int)n;
    return r;
}

FIELD(f_transport)
{
    static const char *const names[] = {"IB", "Socket", "OFI", "any"};
    int e;
    int r = get_enum(x, v, key, names, 4, &e);
    if (r == 0) strcpy(x->c->expect_transport, names[e]);
    return r;
}

FIELD(f_busbw)
{
    return get_num(x, v, key, 0, 1e6, &x->c->expect_busbw_gbps);
}

FIELD(f_line_rate)
{
    return get_num(x, v, key, 0, 1e7, &x->c->expect_line_rate_gbps);
}

FIELD(f_eff_nodes)
{
    return get_num(x, v, key, 1, 1e6, &x->c->efficiency[x->c->nefficiency].nodes);
}

FIELD(f_eff_percent)
{
    return get_num(x, v, key, 0.1, 100, &x->c->efficiency[x->c->nefficiency].percent);
}

FIELD(f_efficiency)
{
    static const struct field point[] = {{"nodes", f_eff_nodes}, {"percent", f_eff_percent}};
    if (v->type != YAML_SEQUENCE_NODE)
        return bad(x, v, key, "expected a list of {nodes, percent}, found %s", node_type(v));
    x->c->nefficiency = 0;
    for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top;
         it++) {
        yaml_node_t *e = yaml_document_get_node(x->doc, *it);
        if (x->c->nefficiency >= PF_CONFIG_MAX_CURVE)
            return bad(x, e, key, "more than %d points", PF_CONFIG_MAX_CURVE);
        x->c->efficiency[x->c->nefficiency] = (struct pf_curve_point){-1, -1};
        int r = walk_map(x, e, key, point, PF_ARRAY_LEN(point));
        if (r < 0) return r;
        struct pf_curve_point *pt = &x->c->efficiency[x->c->nefficiency];
        if (pt->nodes < 0 || pt->percent < 0)
            return bad(x, e, key, "each point needs both nodes and percent");
        if (x->c->nefficiency > 0 && pt->nodes <= pt[-1].nodes)
            return bad(x, e, key, "points must be in increasing order of nodes");
        x->c->nefficiency++;
    }
    if (x->c->nefficiency == 0) return bad(x, v, key, "needs at least one point");
    return 0;
}

FIELD(f_expect)
{
    static const struct field fields[] = {
        {"rdma", f_rdma},
        {"hcas", f_hcas},
        {"minPortRateGbps", f_min_rate},
        {"gpusPerPod", f_gpus},
        {"networks", f_networks},
        {"mtu", f_mtu},
        {"transport", f_transport},
        {"busbwGBps", f_busbw},
        {"lineRateGbps", f_line_rate},
        {"efficiency", f_efficiency},
    };
    return walk_map(x, v, key, fields, PF_ARRAY_LEN(fields));
}

static const char *const known_collectives[] = {
    "allreduce", "allgather", "reducescatter", "alltoall", "broadcast", "reduce", "sendrecv"};

FIELD(f_workload)
{
    static const char *const names[] = {"dense", "moe", "fsdp"};
    int e;
    int r = get_enum(x, v, key, names, 3, &e);
    if (r == 0) strcpy(x->c->workload, names[e]);
    return r;
}

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

FIELD(f_message_bytes)
{
    return get_int(x, v, key, 4, 16ll << 30, &x->c->message_bytes);
}

FIELD(f_rdv_port)
{
    long long n;
    int r = get_int(x, v, key, 1, 65535, &n);
    x->c->rendezvous_port = (int)n;
    return r;
}

FIELD(f_rdv_timeout)
{
    long long n;
    int r = get_int(x, v, key, 1, 86400, &n);
    x->c->rendezvous_timeout_s = (int)n;
    return r;
}

FIELD(f_rdv_iface)
{
    return get_str(x, v, key, x->c->rendezvous_interface, sizeof(x->c->rendezvous_interface));
}

FIELD(f_rendezvous)
{
    static const struct field fields[] = {
        {"port", f_rdv_port}, {"timeoutSeconds", f_rdv_timeout}, {"interface", f_rdv_iface}};
    return walk_map(x, v, key, fields, PF_ARRAY_LEN(fields));
}

FIELD(f_tcp_bytes)
{
    return get_int(x, v, key, 4, 4ll << 30, &x->c->tcp_message_bytes);
}

FIELD(f_tcp_iters)
{
    long long n;
    int r = get_int(x, v, key, 1, 1000, &n);
    x->c->tcp_iterations = (int)n;
    return r;
}

FIELD(f_tcp_min_busbw)
{
    return get_num(x, v, key, 0, 1e6, &x->c->tcp_min_busbw_gbps);
}

FIELD(f_tcp)
{
    static const struct field fields[] = {{"messageBytes", f_tcp_bytes},
                                          {"iterations", f_tcp_iters},
                                          {"minBusbwGBps", f_tcp_min_busbw}};
    return walk_map(x, v, key, fields, PF_ARRAY_LEN(fields));
}

FIELD(f_nccl_iters)
{
    long long n;
    int r = get_int(x, v, key, 1, 10000, &n);
    x->c->nccl_iterations = (int)n;
    return r;
}

FIELD(f_nccl_warmup)
{
    long long n;
    int r = get_int(x, v, key, 0, 1000, &n);
    x->c->nccl_warmup = (int)n;
    return r;
}

FIELD(f_nccl_timeout)
{
    long long n;
    int r = get_int(x, v, key, 1, 86400, &n);
    x->c->nccl_timeout_s = (int)n;
    return r;
}

FIELD(f_nccl)
{
    static const struct field fields[] = {{"iterations", f_nccl_iters},
                                          {"warmup", f_nccl_warmup},
                                          {"timeoutSeconds", f_nccl_timeout}};
    return walk_map(x, v, key, fields, PF_ARRAY_LEN(fields));
}

FIELD(f_podinfo_wait)
{
    return get_num(x, v, key, 0, 3600, &x->c->podinfo_wait_s);
}

FIELD(f_podinfo)
{
    static const struct field fields[] = {{"waitSeconds", f_podinfo_wait}};
    return walk_map(x, v, key, fields, PF_ARRAY_LEN(fields));
}

FIELD(f_fail_on)
{
    static const char *const names[] = {"fail", "warn"};
    int e;
    int r = get_enum(x, v, key, names, 2, &e);
    x->c->fail_on = e == 0 ? PF_FAIL : PF_WARN;
    return r;
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

FIELD(f_policy)
{
    static const struct field fields[] = {{"failOn", f_fail_on}, {"findings", f_policy_findings}};
    return walk_map(x, v, key, fields, PF_ARRAY_LEN(fields));
}

FIELD(f_events)
{
    return get_bool(x, v, key, &x->c->report_events);
}

FIELD(f_annotate)
{
    return get_bool(x, v, key, &x->c->report_annotate);
}

FIELD(f_metrics)
{
    int r = get_str(x, v, key, x->c->report_metrics_file, sizeof(x->c->report_metrics_file));
    if (r == 0 && x->c->report_metrics_file[0] != '/')
        return bad(x, v, key, "must be an absolute path");
    return r;
}

FIELD(f_mark_node)
{
    static const char *const names[] = {"none", "label", "taint"};
    return get_enum(x, v, key, names, 3, &x->c->report_mark_node);
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

/* An absolute path to a file (a mounted secret, a result file). */
static int get_abs_path(struct ctx *x, yaml_node_t *v, const char *key, char *out, size_t cap)
{
    int r = get_str(x, v, key, out, cap);
    if (r == 0 && out[0] && out[0] != '/') return bad(x, v, key, "must be an absolute path");
    return r;
}

FIELD(f_push_bearer)
{
    return get_abs_path(x, v, key, x->c->report_push_bearer_file,
                        sizeof(x->c->report_push_bearer_file));
}

FIELD(f_push_username)
{
    return get_abs_path(x, v, key, x->c->report_push_username_file,
                        sizeof(x->c->report_push_username_file));
}

FIELD(f_push_password)
{
    return get_abs_path(x, v, key, x->c->report_push_password_file,
                        sizeof(x->c->report_push_password_file));
}

FIELD(f_push_ca)
{
    return get_abs_path(x, v, key, x->c->report_push_ca_file, sizeof(x->c->report_push_ca_file));
}

FIELD(f_push_auth)
{
    static const struct field fields[] = {{"bearerTokenFile", f_push_bearer},
                                          {"usernameFile", f_push_username},
                                          {"passwordFile", f_push_password},
                                          {"caFile", f_push_ca}};
    int r = walk_map(x, v, key, fields, PF_ARRAY_LEN(fields));
    if (r == 0 && !x->c->report_push_username_file[0] != !x->c->report_push_password_file[0])
        return bad(x, v, key, "usernameFile and passwordFile go together");
    if (r == 0 && x->c->report_push_username_file[0] && x->c->report_push_bearer_file[0])
        return bad(x, v, key, "bearerTokenFile or usernameFile and passwordFile, not both");
    return r;
}

FIELD(f_results)
{
    return get_abs_path(x, v, key, x->c->report_results_file, sizeof(x->c->report_results_file));
}

FIELD(f_report)
{
    static const struct field fields[] = {
        {"events", f_events},      {"annotate", f_annotate},       {"metricsFile", f_metrics},
        {"markNode", f_mark_node}, {"pushgateway", f_pushgateway}, {"pushgatewayAuth", f_push_auth},
        {"resultsFile", f_results}};
    return walk_map(x, v, key, fields, PF_ARRAY_LEN(fields));
}

static const struct field top_fields[] = {
    {"expect", f_expect},
    {"workload", f_workload},
    {"collectives", f_collectives},
    {"messageBytes", f_message_bytes},
    {"rendezvous", f_rendezvous},
    {"tcp", f_tcp},
    {"nccl", f_nccl},
    {"podinfo", f_podinfo},
    {"policy", f_policy},
    {"report", f_report},
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
        r = walk_map(&x, root, "", top_fields, PF_ARRAY_LEN(top_fields));
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

int pf_config_load(struct pf_config *c, const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return pf_err_set(PF_EUSAGE, "--config %s: %s", path, strerror(errno));
    struct pf_buf b;
    pf_buf_init(&b, CONFIG_MAX_BYTES);
    char chunk[4096];
    size_t got;
    int r = 0;
    while ((got = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        if (pf_buf_add(&b, chunk, got) < 0) {
            r = pf_err_set(PF_EUSAGE, "--config %s: larger than %u bytes", path, CONFIG_MAX_BYTES);
            break;
        }
    }
    if (r == 0 && ferror(f)) r = pf_err_set(PF_EUSAGE, "--config %s: read error", path);
    fclose(f);
    if (r == 0) {
        pf_strcpy(c->path, sizeof(c->path), path);
        r = pf_config_parse(c, path, b.data ? b.data : "", b.len);
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
    pf_buf_init(&b, 1 << 20);
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
