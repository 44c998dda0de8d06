/* rdma.counters: every port's error counters, read from sysfs before and after the
 * collectives; a counter that rose while preflight drove traffic names the HCA and port. */
#define _GNU_SOURCE
#include "checks.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CTR_NAME 64
#define CTRS_MAX 8192
#define CTR_NA LLONG_MIN /* the counter reads "N/A (no PMA)" */

struct ctr {
    char hca[64];
    int port;
    char name[CTR_NAME];
    bool hw;  /* hw_counters/ (driver specific) */
    bool err; /* a hw counter that counts errors on its provider (providers.c) */
    bool na;  /* the file reads "N/A (no PMA)": the kernel's answer when the device has no
               * Performance Management Agent (drivers/infiniband/core/sysfs.c) */
    unsigned long long v;
};

struct pf_counters {
    struct ctr *v;
    size_t n;
    double t;
};

/* PortCounters of the IB PMA (ports/N/counters/) that count errors, with their width: they
 * stop at their maximum, so a saturated one cannot show a rise. */
static const struct {
    const char *name;
    unsigned long long max;
} port_ctrs[] = {
    {"link_downed", 255},
    {"link_error_recovery", 255},
    {"symbol_error", 65535},
    {"port_rcv_errors", 65535},
    {"port_xmit_discards", 65535},
    {"local_link_integrity_errors", 15},
    {"excessive_buffer_overrun_errors", 15},
};

/* hw_counters/ entries count errors by their driver's names (providers.c: mlx5's
 * local_ack_timeout_err, EFA's rdma_read_wr_err, ...); the rest of hw_counters (traffic,
 * congestion notifications, "lifespan") are not errors. */
static bool is_hw_error(const struct ctr *c)
{
    return c->err;
}

static unsigned long long port_ctr_max(const char *name)
{
    for (size_t i = 0; i < PF_ARRAY_LEN(port_ctrs); i++)
        if (strcmp(name, port_ctrs[i].name) == 0) return port_ctrs[i].max;
    return 0;
}

static void add(struct pf_counters *s, const char *hca, int port, const char *name,
                const struct pf_rdma_provider *hw, long long v)
{
    if (s->n >= CTRS_MAX || (v < 0 && v != CTR_NA)) return;
    s->v = pf_xrealloc(s->v, (s->n + 1) * sizeof(*s->v));
    struct ctr *c = &s->v[s->n++];
    memset(c, 0, sizeof(*c));
    snprintf(c->hca, sizeof(c->hca), "%s", hca);
    snprintf(c->name, sizeof(c->name), "%s", name);
    c->port = port;
    c->hw = hw != NULL;
    c->err = hw && pf_rdma_hw_error(hw, name);
    c->na = v == CTR_NA;
    c->v = v < 0 ? 0 : (unsigned long long)v;
}

/* One counter file: its value (0), CTR_NA when it reads "N/A ..." (not available), -2 when it
 * is missing or not a number. */
static int read_ctr(long long *out, const struct pf_host *h, const char *path)
{
    if (pf_host_read_ll(out, h, "%s", path) == 0) return 0;
    char text[64];
    if (pf_host_read(text, sizeof(text), h, "%s", path) >= 0 && strncmp(text, "N/A", 3) == 0) {
        *out = CTR_NA;
        return 0;
    }
    return -2;
}

struct pf_counters *pf_counters_snapshot(struct pf_ctx *ctx)
{
    if (ctx->hcas.n == 0) return NULL;
    struct pf_counters *s = pf_xcalloc(1, sizeof(*s));
    s->t = pf_now();
    for (size_t h = 0; h < ctx->hcas.n; h++) {
        const char *hca = ctx->hcas.v[h];
        struct pf_rdma_ident id;
        pf_rdma_identify(&id, &ctx->host, hca);
        struct pf_strlist ports = {0};
        (void)pf_host_list(&ports, &ctx->host, "/sys/class/infiniband/%s/ports", hca);
        for (size_t p = 0; p < ports.n; p++) {
            int pn = atoi(ports.v[p]);
            for (size_t i = 0; i < PF_ARRAY_LEN(port_ctrs); i++) {
                long long v;
                char path[512];
                snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%s/counters/%s", hca,
                         ports.v[p], port_ctrs[i].name);
                if (read_ctr(&v, &ctx->host, path) == 0)
                    add(s, hca, pn, port_ctrs[i].name, NULL, v);
            }
            struct pf_strlist hw = {0};
            (void)pf_host_list(&hw, &ctx->host, "/sys/class/infiniband/%s/ports/%s/hw_counters",
                               hca, ports.v[p]);
            for (size_t i = 0; i < hw.n; i++) {
                long long v;
                if (strcmp(hw.v[i], "lifespan") == 0) continue; /* a setting (ms), not a counter */
                char path[512];
                snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%s/hw_counters/%s",
                         hca, ports.v[p], hw.v[i]);
                if (read_ctr(&v, &ctx->host, path) == 0) add(s, hca, pn, hw.v[i], id.provider, v);
            }
            pf_strlist_free(&hw);
        }
        pf_strlist_free(&ports);
    }
    pf_err_clear();
    return s;
}

void pf_counters_free(struct pf_counters *s)
{
    if (!s) return;
    free(s->v);
    free(s);
}

static const struct ctr *find(const struct pf_counters *s, const struct ctr *c)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i].port == c->port && s->v[i].hw == c->hw && strcmp(s->v[i].name, c->name) == 0 &&
            strcmp(s->v[i].hca, c->hca) == 0)
            return &s->v[i];
    return NULL;
}

void pf_check_rdma_counters(struct pf_check *out, struct pf_ctx *ctx,
                            const struct pf_counters *before)
{
    if (ctx->hcas.n == 0) {
        pf_check_skip(out, "no RDMA devices under /sys/class/infiniband");
        return;
    }
    if (!before) {
        pf_check_skip(out, "no counter snapshot was taken before the traffic");
        return;
    }
    struct pf_counters *after = pf_counters_snapshot(ctx);
    if (!after || after->n == 0) {
        pf_check_skip(out, "no error counters readable under /sys/class/infiniband/*/ports/*/"
                           "counters");
        pf_counters_free(after);
        return;
    }
    double dt = after->t - before->t;
    pf_node_set_dbl(out->evidence, "intervalSeconds", (double)((long long)(dt * 10)) / 10);
    struct pf_node *since_boot = NULL, *rises = NULL, *saturated = NULL, *na = NULL;
    size_t nports = 0, nrise = 0, nna = 0, nreadable = 0;
    char last_port[96] = "";
    /* per port, the counters that rose (one port-errors finding a port) */
    char port_msg[1024] = "";
    char port_key[96] = "";
    const struct ctr *port_first = NULL;
    size_t pm = 0;
    for (size_t i = 0; i <= after->n; i++) {
        const struct ctr *c = i < after->n ? &after->v[i] : NULL;
        char key[96] = "";
        if (c) snprintf(key, sizeof(key), "%s/%d", c->hca, c->port);
        if (strcmp(key, port_key) != 0) {
            if (pm)
                pf_check_add_finding(out, "port-errors", PF_WARN, NULL,
                                     "%s port %d: %s during the run (%.1f s)", port_first->hca,
                                     port_first->port, port_msg, dt);
            port_first = c;
            pm = 0;
            port_msg[0] = '\0';
            snprintf(port_key, sizeof(port_key), "%s", key);
        }
        if (!c) break;
        if (strcmp(key, last_port) != 0) {
            nports++;
            snprintf(last_port, sizeof(last_port), "%s", key);
        }
        const struct ctr *b = find(before, c);
        if (c->na) { /* not available: counted and listed, never compared */
            nna++;
            if (!na) na = pf_node_set_map(out->evidence, "notAvailable");
            struct pf_node *l = pf_node_get(na, key);
            if (!l) l = pf_node_set_seq(na, key);
            pf_node_add_str(l, c->name);
            continue;
        }
        if (!c->hw || is_hw_error(c)) nreadable++;
        if (b && b->na) continue; /* N/A before, a number now: nothing to compare */
        if (c->v && (!c->hw || is_hw_error(c))) {
            if (!since_boot) since_boot = pf_node_set_map(out->evidence, "errorCountersSinceBoot");
            struct pf_node *m = pf_node_get(since_boot, key);
            if (!m) m = pf_node_set_map(since_boot, key);
            pf_node_set_int(m, c->name, (long long)c->v);
        }
        unsigned long long max = c->hw ? 0 : port_ctr_max(c->name);
        if (max && b && b->v >= max) {
            if (!saturated) saturated = pf_node_set_seq(out->evidence, "saturated");
            pf_node_add_strf(saturated, "%s %s=%llu (at its maximum: a rise cannot show)", key,
                             c->name, b->v);
        }
        if (!b || c->v <= b->v) continue;
        unsigned long long d = c->v - b->v;
        if (!rises) rises = pf_node_set_map(out->evidence, "rose");
        struct pf_node *m = pf_node_get(rises, key);
        if (!m) m = pf_node_set_map(rises, key);
        pf_node_set_int(m, c->name, (long long)d);
        if (c->hw && !is_hw_error(c)) continue; /* traffic and congestion counters: evidence only */
        nrise++;
        if (strcmp(c->name, "link_downed") == 0) {
            pf_check_add_finding(out, "link-downed", PF_FAIL, NULL,
                                 "%s port %d: link_downed rose by %llu (%llu -> %llu) during the "
                                 "run (%.1f s): the link went down and retrained",
                                 c->hca, c->port, d, b->v, c->v, dt);
            continue;
        }
        if (pm < sizeof(port_msg))
            pm += (size_t)snprintf(port_msg + pm, sizeof(port_msg) - pm, "%s%s +%llu",
                                   pm ? ", " : "", c->name, d);
    }
    if (nna) pf_node_set_int(out->evidence, "notAvailableCount", (long long)nna);
    if (nna && nreadable == 0)
        pf_check_skip(out,
                      "every error counter of %zu port%s reads N/A (no PMA): the device has no "
                      "Performance Management Agent, so errors cannot be counted here",
                      nports, nports == 1 ? "" : "s");
    else if (nna)
        pf_check_set_message(out,
                             "%zu port%s, %zu error counter%s rose in %.1f s; %zu counter%s not "
                             "available (N/A, no PMA)",
                             nports, nports == 1 ? "" : "s", nrise, nrise == 1 ? "" : "s", dt, nna,
                             nna == 1 ? "" : "s");
    else
        pf_check_set_message(out, "%zu port%s, %zu error counter%s rose in %.1f s", nports,
                             nports == 1 ? "" : "s", nrise, nrise == 1 ? "" : "s", dt);
    pf_counters_free(after);
}
