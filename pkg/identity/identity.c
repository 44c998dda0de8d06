/* Who am I, how many are we, and where is rank 0: pure functions of the options, the
 * environment, the host name and the pod's labels and annotations (docs/launchers.md holds
 * what every launcher gives a pod, read from its source). The launcher rules themselves are in
 * launchers.c; this file holds the order they are tried in (rules[]), the options that
 * override them, and the names of pods by rank. */
#define _GNU_SOURCE
#include "internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RANK_MAX (1 << 20)

int pf_identity_parse_count(const char *s, long *out)
{
    if (!s || !*s) return PF_EINVAL;
    for (const char *p = s; *p; p++)
        if (!isdigit((unsigned char)*p)) return PF_EINVAL;
    errno = 0;
    long v = strtol(s, NULL, 10);
    if (errno || v > RANK_MAX) return PF_EINVAL;
    *out = v;
    return 0;
}

const char *pf_identity_env(const struct pf_env *env, const char *name)
{
    const char *s = env ? pf_env_get(env, name) : NULL;
    return s && *s ? s : NULL;
}

const char *pf_identity_meta(const struct pf_identity_podinfo *pi, const char *key)
{
    const char *s = pi->labels ? pf_k8s_map_get(pi->labels, key) : NULL;
    if (!s && pi->annotations) s = pf_k8s_map_get(pi->annotations, key);
    return s && *s ? s : NULL;
}

bool pf_identity_meta_prefix(const struct pf_identity_podinfo *pi, const char *prefix)
{
    const struct pf_k8s_map *m[2] = {pi->labels, pi->annotations};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; m[k] && i < m[k]->n; i++)
            if (strncmp(m[k]->v[i].key, prefix, strlen(prefix)) == 0) return true;
    return false;
}

void pf_identity_from(struct pf_identity *id, const char *fmt, ...)
{
    if (id->nfrom >= (int)PF_ARRAY_LEN(id->from)) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(id->from[id->nfrom], sizeof(id->from[0]), fmt, ap);
    va_end(ap);
    for (int i = 0; i < id->nfrom; i++) /* each input once */
        if (strcmp(id->from[i], id->from[id->nfrom]) == 0) return;
    id->nfrom++;
}

bool pf_identity_trailing_ordinal(const char *h, char *prefix, size_t n, long *ord)
{
    size_t len = strlen(h);
    size_t i = len;
    while (i > 0 && isdigit((unsigned char)h[i - 1]))
        i--;
    if (i == len || i < 2 || h[i - 1] != '-' || len - i > 7) return false;
    if (len - i > 1 && h[i] == '0') return false; /* "x-007" is not an ordinal Kubernetes writes */
    if (i - 1 >= n) return false;
    memcpy(prefix, h, i - 1);
    prefix[i - 1] = '\0';
    *ord = strtol(h + i, NULL, 10);
    return true;
}

int pf_identity_split_hostport(char *host, size_t n, int *port, const char *text)
{
    const char *t = text ? text : "";
    const char *h = t, *he = NULL, *ps = NULL;
    if (*t == '[') {
        const char *close = strchr(t, ']');
        if (!close) return pf_err_set(PF_EINVAL, "\"%s\": missing ']' after an IPv6 address", t);
        h = t + 1;
        he = close;
        if (close[1] == ':')
            ps = close + 2;
        else if (close[1])
            return pf_err_set(PF_EINVAL, "\"%s\": expected ':PORT' after ']'", t);
    } else {
        const char *c = strchr(t, ':');
        if (c && strchr(c + 1, ':')) {
            he = t + strlen(t); /* a bare IPv6 address */
        } else if (c) {
            he = c;
            ps = c + 1;
        } else {
            he = t + strlen(t);
        }
    }
    if (he == h) return pf_err_set(PF_EINVAL, "\"%s\": expected HOST[:PORT]", t);
    if ((size_t)(he - h) >= n) return pf_err_set(PF_ETOOBIG, "\"%s\": host name too long", t);
    if (ps) {
        long p;
        if (pf_identity_parse_count(ps, &p) < 0 || p < 1 || p > 65535)
            return pf_err_set(PF_EINVAL, "\"%s\": port must be 1..65535", t);
        *port = (int)p;
    }
    memcpy(host, h, (size_t)(he - h));
    host[he - h] = '\0';
    return 0;
}

/* The launcher rules, in the order they are tried: the first that recognises the pod decides
 * (a rule returns 1), or finds the pod's inputs contradictory (< 0). */
static const struct {
    const char *name;
    int (*fn)(struct pf_identity_guess *g, const struct pf_env *env,
              const struct pf_identity_podinfo *pi);
} rules[] = {
    {"lws", pf_identity_rule_lws},
    {"volcano", pf_identity_rule_volcano},
    {"kubeflow", pf_identity_rule_kubeflow}, /* PyTorchJob, MPIJob */
    {"torchrun", pf_identity_rule_torchrun}, /* TrainJob with envInjection, torchrun's PET_* */
    {"jobset", pf_identity_rule_jobset},     /* JobSet, TrainJob without PET_* */
    {"indexed-job", pf_identity_rule_indexed_job},
    {"ordinal", pf_identity_rule_ordinal}, /* RANK, StatefulSet, a hostname's ordinal */
};

static void domain_of(struct pf_identity *out, const char *host, const char *fqdn)
{
    if (fqdn && *fqdn && *host) {
        size_t hl = strlen(host);
        if (strncmp(fqdn, host, hl) == 0 && fqdn[hl] == '.' && fqdn[hl + 1])
            pf_strcpy(out->domain, sizeof(out->domain), fqdn + hl + 1);
    }
    size_t dl = strlen(out->domain);
    if (dl && out->domain[dl - 1] == '.') out->domain[dl - 1] = '\0';
}

/* The options and MASTER_ADDR: each overrides one piece of what the rule found. */
static int apply_overrides(struct pf_identity_guess *g, const struct pf_identity_opts *o,
                           const struct pf_env *env)
{
    struct pf_identity *id = g->id;
    if (o && o->rank >= 0) {
        id->rank = o->rank;
        id->member = true;
        pf_strcpy(id->rank_from, sizeof(id->rank_from), "--rank (PREFLIGHT_RANK)");
        pf_identity_from(id, "PREFLIGHT_RANK=%d", o->rank);
    }
    if (o && o->world_size > 0) {
        id->world_size = o->world_size;
        pf_strcpy(id->world_from, sizeof(id->world_from), "--world-size (PREFLIGHT_WORLD_SIZE)");
        pf_identity_from(id, "PREFLIGHT_WORLD_SIZE=%d", o->world_size);
    }
    const char *coord = NULL, *s;
    if (o && o->coordinator[0]) {
        coord = o->coordinator;
        pf_strcpy(id->coord_from, sizeof(id->coord_from), "--coordinator (PREFLIGHT_COORDINATOR)");
    } else if ((s = pf_identity_env(env, "MASTER_ADDR")) && !g->coord_strong) {
        coord = s;
        pf_strcpy(id->coord_from, sizeof(id->coord_from), "MASTER_ADDR");
    }
    if (!coord) return 0;
    int port = id->port;
    int r = pf_identity_split_hostport(id->coordinator, sizeof(id->coordinator), &port, coord);
    if (r < 0) {
        char why[256]; /* pf_err_set writes where pf_err_msg reads: copy it first */
        pf_strcpy(why, sizeof(why), pf_err_msg());
        return pf_err_set(PF_EUSAGE, "%s: %s", id->coord_from, why);
    }
    pf_identity_from(id, "%s=%s", o && o->coordinator[0] ? "PREFLIGHT_COORDINATOR" : "MASTER_ADDR",
                     coord);
    /* MASTER_PORT is torch's port, not ours: a port only comes from our own flag */
    if (o && o->coordinator[0]) id->port = port;
    g->coord_missing[0] = '\0';
    return 0;
}

/* rank 0's address from the naming and the domain, when no rule or option gave one */
static void derive_coordinator(struct pf_identity_guess *g)
{
    struct pf_identity *id = g->id;
    if (id->coordinator[0] || g->coord_missing[0]) return;
    char name0[300];
    pf_identity_pod_name(name0, sizeof(name0), id, 0);
    if (!name0[0]) return;
    id->wants_fqdn = true;
    if (id->domain[0] && id->naming != PF_IDENTITY_NAMING_PYTORCH)
        pf_snprintf(id->coordinator, sizeof(id->coordinator), "%s.%s", name0, id->domain);
    else if (g->default_domain[0] && id->naming != PF_IDENTITY_NAMING_PYTORCH)
        pf_snprintf(id->coordinator, sizeof(id->coordinator), "%s.%s", name0, g->default_domain);
    else
        pf_strcpy(id->coordinator, sizeof(id->coordinator), name0);
    pf_strcpy(id->coord_from, sizeof(id->coord_from),
              id->naming == PF_IDENTITY_NAMING_PYTORCH ? "PyTorchJob master name"
                                                       : "hostname and subdomain");
}

int pf_identity_derive_pod(struct pf_identity *out, const struct pf_identity_opts *o,
                           const struct pf_env *env, const struct pf_identity_podinfo *pi,
                           int default_port)
{
    memset(out, 0, sizeof(*out));
    out->rank = -1;
    out->world_size = -1;
    out->member = true;
    out->port = o && o->port > 0 ? o->port : default_port;
    struct pf_identity_podinfo none = {0};
    if (!pi) pi = &none;
    const char *host = pi->hostname ? pi->hostname : "";
    domain_of(out, host, pi->fqdn);
    pf_identity_job_of(&out->job, env, pi);
    pf_identity_selector(out->selector, sizeof(out->selector), pi);

    struct pf_identity_guess g;
    memset(&g, 0, sizeof(g));
    g.id = out;
    g.host = host;
    g.opts = o;
    int r = 0;
    for (size_t i = 0; i < PF_ARRAY_LEN(rules) && r == 0; i++) {
        r = rules[i].fn(&g, env, pi);
        if (r < 0) return r;
    }
    if (!out->rule[0]) pf_strcpy(out->rule, sizeof(out->rule), "options");
    r = apply_overrides(&g, o, env);
    if (r < 0) return r;

    if (!out->member) return 0; /* not a rank: nothing to meet, nothing more to know */
    if (out->rank < 0) {
        if (g.rank_missing[0]) return pf_err_set(PF_EUSAGE, "rank unknown: %s", g.rank_missing);
        return pf_err_set(PF_EUSAGE,
                          "rank unknown: hostname \"%s\" has no trailing ordinal (<name>-N) and "
                          "none of PREFLIGHT_RANK, JOB_COMPLETION_INDEX, RANK is set",
                          host);
    }
    if (out->world_size < 0) {
        if (g.world_missing[0])
            return pf_err_set(PF_EUSAGE, "world size unknown: %s", g.world_missing);
        return pf_err_set(PF_EUSAGE,
                          "world size unknown: set PREFLIGHT_WORLD_SIZE (or WORLD_SIZE) to the "
                          "number of pods");
    }
    if (out->rank >= out->world_size)
        return pf_err_set(PF_EUSAGE, "rank %d (from %s) is not below the world size %d (from %s)",
                          out->rank, out->rank_from, out->world_size, out->world_from);
    derive_coordinator(&g);
    if (!out->coordinator[0] && out->rank != 0) {
        if (g.coord_missing[0])
            return pf_err_set(PF_EUSAGE, "rank 0's address unknown: %s", g.coord_missing);
        return pf_err_set(PF_EUSAGE,
                          "rank 0's address unknown: hostname \"%s\" does not follow a <name>-N "
                          "pattern; set PREFLIGHT_COORDINATOR or MASTER_ADDR",
                          host);
    }
    return 0;
}

int pf_identity_derive(struct pf_identity *out, const struct pf_identity_opts *o,
                       const struct pf_env *env, const char *hostname, const char *fqdn,
                       enum pf_identity_pytorch_hint hint, int default_port)
{
    /* the hint stands for a labels file: with Kubeflow's labels, or without */
    struct pf_k8s_kv kv = {.key = (char *)"training.kubeflow.org/operator-name",
                           .value = (char *)"pytorchjob-controller"};
    struct pf_k8s_map labels = {hint == PF_IDENTITY_PT_YES ? &kv : NULL,
                                hint == PF_IDENTITY_PT_YES};
    struct pf_identity_podinfo pi = {.hostname = hostname,
                                     .fqdn = fqdn,
                                     .labels = hint == PF_IDENTITY_PT_UNKNOWN ? NULL : &labels};
    return pf_identity_derive_pod(out, o, env, &pi, default_port);
}

void pf_identity_pod_name(char *out, size_t n, const struct pf_identity *id, int rank)
{
    if (n == 0) return;
    out[0] = '\0';
    if (rank < 0 || (id->named_ranks > 0 && rank >= id->named_ranks)) return;
    int r = 0;
    switch (id->naming) {
    case PF_IDENTITY_NAMING_ORDINAL:
        r = pf_snprintf(out, n, "%s-%d", id->prefix, rank);
        break;
    case PF_IDENTITY_NAMING_PYTORCH:
        r = rank == 0 ? pf_snprintf(out, n, "%s-master-0", id->prefix)
                      : pf_snprintf(out, n, "%s-worker-%d", id->prefix, rank - 1);
        break;
    case PF_IDENTITY_NAMING_JOBSET:
        if (id->per_job > 0)
            r = pf_snprintf(out, n, "%s-%d-%d", id->prefix, rank / id->per_job, rank % id->per_job);
        else /* one Job */
            r = pf_snprintf(out, n, "%s-0-%d", id->prefix, rank);
        break;
    case PF_IDENTITY_NAMING_MPI:
        r = rank < id->per_job
                ? pf_snprintf(out, n, "%s-launcher", id->prefix)
                : pf_snprintf(out, n, "%s-worker-%d", id->prefix, rank - id->per_job);
        break;
    case PF_IDENTITY_NAMING_LWS:
        r = rank == 0 ? pf_snprintf(out, n, "%s", id->prefix)
                      : pf_snprintf(out, n, "%s-%d", id->prefix, rank);
        break;
    default:
        break;
    }
    if (r < 0) out[0] = '\0';
}
