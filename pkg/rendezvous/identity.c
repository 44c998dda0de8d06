/* Who am I, how many are we, and where is rank 0: pure functions of the options, the
 * environment and the host name (DESIGN.md "Rank and world size"; REFERENCE.md section 9). */
#define _GNU_SOURCE
#include "rendezvous.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RANK_MAX (1 << 20)

/* A non-negative decimal integer, nothing else. */
static int parse_count(const char *s, long *out)
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

static const char *env_nonempty(const struct pf_env *env, const char *name)
{
    const char *s = env ? pf_env_get(env, name) : NULL;
    return s && *s ? s : NULL;
}

/* "name-12" -> prefix "name", ordinal 12. False when there is no "-<digits>" tail. */
static bool trailing_ordinal(const char *h, char *prefix, size_t n, long *ord)
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

/* PyTorchJob: "<job>-master-0" or "<job>-worker-N". */
static bool pytorch_name(const char *h, char *job, size_t n, long *rank)
{
    char prefix[256];
    long ord;
    if (!trailing_ordinal(h, prefix, sizeof(prefix), &ord)) return false;
    size_t pl = strlen(prefix);
    static const char *const roles[] = {"-master", "-worker"};
    for (int r = 0; r < 2; r++) {
        size_t rl = strlen(roles[r]);
        if (pl <= rl || strcmp(prefix + pl - rl, roles[r]) != 0) continue;
        if (r == 0 && ord != 0) return false;
        if (pl - rl >= n) return false;
        memcpy(job, prefix, pl - rl);
        job[pl - rl] = '\0';
        *rank = r == 0 ? 0 : ord + 1;
        return true;
    }
    return false;
}

int pf_rdv_split_hostport(char *host, size_t n, int *port, const char *text)
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
        if (parse_count(ps, &p) < 0 || p < 1 || p > 65535)
            return pf_err_set(PF_EINVAL, "\"%s\": port must be 1..65535", t);
        *port = (int)p;
    }
    memcpy(host, h, (size_t)(he - h));
    host[he - h] = '\0';
    return 0;
}

int pf_rdv_identify(struct pf_rdv_ident *out, const struct pf_rdv_opts *o, const struct pf_env *env,
                    const char *hostname, const char *fqdn, enum pf_rdv_pytorch_hint hint,
                    int default_port)
{
    memset(out, 0, sizeof(*out));
    out->rank = -1;
    out->world_size = -1;
    out->port = o && o->port > 0 ? o->port : default_port;
    const char *host = hostname ? hostname : "";
    const char *s;
    long v;

    /* naming: how pods of this job are called */
    char job[256];
    long host_rank = -1;
    bool pt = hint != PF_RDV_PT_NO && pytorch_name(host, job, sizeof(job), &host_rank);
    if (pt) {
        out->naming = PF_RDV_NAMING_PYTORCH;
        pf_strcpy(out->prefix, sizeof(out->prefix), job);
    } else if (trailing_ordinal(host, out->prefix, sizeof(out->prefix), &host_rank)) {
        out->naming = PF_RDV_NAMING_ORDINAL;
    } else {
        host_rank = -1;
    }
    /* the domain: what follows the host label in the FQDN (the pod's subdomain and beyond) */
    if (fqdn && *fqdn && *host) {
        size_t hl = strlen(host);
        if (strncmp(fqdn, host, hl) == 0 && fqdn[hl] == '.' && fqdn[hl + 1])
            pf_strcpy(out->domain, sizeof(out->domain), fqdn + hl + 1);
    }
    size_t dl = strlen(out->domain);
    if (dl && out->domain[dl - 1] == '.') out->domain[dl - 1] = '\0';

    /* rank */
    if (o && o->rank >= 0) {
        out->rank = o->rank;
        pf_strcpy(out->rank_from, sizeof(out->rank_from), "--rank (PREFLIGHT_RANK)");
    } else if ((s = env_nonempty(env, "JOB_COMPLETION_INDEX"))) {
        if (parse_count(s, &v) < 0)
            return pf_err_set(PF_EUSAGE, "JOB_COMPLETION_INDEX=%s: expected a non-negative integer",
                              s);
        out->rank = (int)v;
        pf_strcpy(out->rank_from, sizeof(out->rank_from), "JOB_COMPLETION_INDEX");
    } else if ((s = env_nonempty(env, "RANK"))) {
        if (parse_count(s, &v) < 0)
            return pf_err_set(PF_EUSAGE, "RANK=%s: expected a non-negative integer", s);
        out->rank = (int)v;
        pf_strcpy(out->rank_from, sizeof(out->rank_from), "RANK");
    } else if (host_rank >= 0) {
        out->rank = (int)host_rank;
        pf_snprintf(out->rank_from, sizeof(out->rank_from), "hostname %.80s", host);
    } else {
        return pf_err_set(PF_EUSAGE,
                          "rank unknown: hostname \"%s\" has no trailing ordinal (<name>-N) and "
                          "none of PREFLIGHT_RANK, JOB_COMPLETION_INDEX, RANK is set",
                          host);
    }

    /* world size */
    if (o && o->world_size > 0) {
        out->world_size = o->world_size;
        pf_strcpy(out->world_from, sizeof(out->world_from), "--world-size (PREFLIGHT_WORLD_SIZE)");
    } else if ((s = env_nonempty(env, "WORLD_SIZE"))) {
        if (parse_count(s, &v) < 0 || v < 1)
            return pf_err_set(PF_EUSAGE, "WORLD_SIZE=%s: expected a positive integer", s);
        out->world_size = (int)v;
        pf_strcpy(out->world_from, sizeof(out->world_from), "WORLD_SIZE");
    } else {
        return pf_err_set(PF_EUSAGE,
                          "world size unknown: set PREFLIGHT_WORLD_SIZE (or WORLD_SIZE) to the "
                          "number of pods");
    }
    if (out->rank >= out->world_size)
        return pf_err_set(PF_EUSAGE, "rank %d (from %s) is not below the world size %d (from %s)",
                          out->rank, out->rank_from, out->world_size, out->world_from);

    /* rank 0's address */
    const char *coord = NULL;
    if (o && o->coordinator[0]) {
        coord = o->coordinator;
        pf_strcpy(out->coord_from, sizeof(out->coord_from),
                  "--coordinator (PREFLIGHT_COORDINATOR)");
    } else if ((s = env_nonempty(env, "MASTER_ADDR"))) {
        coord = s;
        pf_strcpy(out->coord_from, sizeof(out->coord_from), "MASTER_ADDR");
    }
    if (coord) {
        int port = out->port;
        int r = pf_rdv_split_hostport(out->coordinator, sizeof(out->coordinator), &port, coord);
        if (r < 0) {
            char why[256]; /* pf_err_set writes where pf_err_msg reads: copy it first */
            pf_strcpy(why, sizeof(why), pf_err_msg());
            return pf_err_set(PF_EUSAGE, "%s: %s", out->coord_from, why);
        }
        /* MASTER_PORT is torch's port, not ours: a port only comes from our own flag */
        if (o && o->coordinator[0]) out->port = port;
        return 0;
    }
    char name0[300];
    pf_rdv_pod_name(name0, sizeof(name0), out, 0);
    if (!name0[0]) {
        if (out->rank == 0) return 0; /* rank 0 listens; it needs no address of its own */
        return pf_err_set(PF_EUSAGE,
                          "rank 0's address unknown: hostname \"%s\" does not follow a <name>-N "
                          "pattern; set PREFLIGHT_COORDINATOR or MASTER_ADDR",
                          host);
    }
    if (out->domain[0] && out->naming == PF_RDV_NAMING_ORDINAL)
        pf_snprintf(out->coordinator, sizeof(out->coordinator), "%s.%s", name0, out->domain);
    else
        pf_strcpy(out->coordinator, sizeof(out->coordinator), name0);
    pf_strcpy(out->coord_from, sizeof(out->coord_from),
              out->naming == PF_RDV_NAMING_PYTORCH ? "PyTorchJob master name"
                                                   : "hostname and subdomain");
    return 0;
}

void pf_rdv_pod_name(char *out, size_t n, const struct pf_rdv_ident *id, int rank)
{
    if (n == 0) return;
    out[0] = '\0';
    if (rank < 0) return;
    switch (id->naming) {
    case PF_RDV_NAMING_ORDINAL:
        if (pf_snprintf(out, n, "%s-%d", id->prefix, rank) < 0) out[0] = '\0';
        break;
    case PF_RDV_NAMING_PYTORCH:
        if ((rank == 0 ? pf_snprintf(out, n, "%s-master-0", id->prefix)
                       : pf_snprintf(out, n, "%s-worker-%d", id->prefix, rank - 1)) < 0)
            out[0] = '\0';
        break;
    default:
        break;
    }
}
