/* rdma.ports: each port of the pod's HCAs, its state, rate and link layer, and a RoCE port's GIDs,
 * read from /sys/class/infiniband under the root prefix (docs/checks/20-rdma.md). */
#define _GNU_SOURCE
#include "rdma_hca.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_GID_ENTRIES 1024

/* ---- rdma.ports */

/* Parses "N: NAME" (state and phys_state); false when the text is not of that form. */
static bool parse_num_name(const char *text, int *num, char *name, size_t n)
{
    const char *p = text;
    if (!isdigit((unsigned char)*p)) return false;
    long v = 0;
    while (isdigit((unsigned char)*p) && v < 1000)
        v = v * 10 + (*p++ - '0');
    if (*p++ != ':' || *p++ != ' ' || !*p) return false;
    for (const char *q = p; *q; q++)
        if (!isprint((unsigned char)*q)) return false;
    *num = (int)v;
    snprintf(name, n, "%s", p);
    return true;
}

/* Parses the leading number of "400 Gb/sec (4X NDR)" or "2.5 Gb/sec (1X SDR)". */
static bool parse_rate(const char *text, double *gbps)
{
    if (!isdigit((unsigned char)text[0])) return false;
    char *end = NULL;
    double v = strtod(text, &end);
    if (end == text || strncmp(end, " Gb/sec", 7) != 0 || !(v > 0) || v > 1e6) return false;
    *gbps = v;
    return true;
}

/* Reads a port attribute; on failure fills why with what is wrong with the file. */
static int read_attr(char *out, size_t n, char *why, size_t wn, const struct pf_host *h,
                     const char *hca, const char *port, const char *attr)
{
    int r = pf_host_read(out, n, h, SYS_IB "/%s/ports/%s/%s", hca, port, attr);
    if (r < 0) {
        snprintf(why, wn, "%s file unreadable: %s", attr, pf_err_msg());
        return -1;
    }
    pf_trim(out);
    if (!out[0]) {
        snprintf(why, wn, "%s file " SYS_IB "/%s/ports/%s/%s is empty", attr, hca, port, attr);
        return -1;
    }
    return 0;
}

/* A GID in sysfs form: 8 groups of 4 hex digits. Returns 1 non-zero, 0 all zero, -1 garbage. */
static int gid_kind(const char *g)
{
    bool nonzero = false;
    for (int grp = 0; grp < 8; grp++) {
        for (int k = 0; k < 4; k++, g++) {
            if (!isxdigit((unsigned char)*g)) return -1;
            nonzero = nonzero || *g != '0';
        }
        if (grp < 7 && *g++ != ':') return -1;
    }
    return *g == '\0' ? (nonzero ? 1 : 0) : -1;
}

struct roce_result {
    bool found;
    int index;
    char gid[64];
    char netdev[64];
    bool ipv4;
    int v2_total, v2_zero, v2_no_netdev, entries;
    int no_type;       /* entries without a gid_attrs/types or ndevs file (ENOENT, not the kernel's
                          EINVAL) */
    char garbage[200]; /* the first attribute that did not parse */
};

static void roce_scan(struct roce_result *r, const struct pf_host *h, const char *hca,
                      const char *port)
{
    memset(r, 0, sizeof(*r));
    r->index = -1;
    struct pf_strlist idx = {0};
    (void)pf_host_list(&idx, h, SYS_IB "/%s/ports/%s/gids", hca, port);
    for (size_t i = 0; i < idx.n && i < MAX_GID_ENTRIES; i++) {
        const char *ix = idx.v[i];
        r->entries++;
        char type[64], gid[128], ndev[64];
        /* unused entries fail to read (EINVAL) on a real kernel, and their GID reads as zeros:
         * not a problem; a used entry (a non-zero GID) without the file (a kernel before
         * gid_attrs, a partial copy) says nothing about its type */
        int tr = pf_host_read(type, sizeof(type), h, SYS_IB "/%s/ports/%s/gid_attrs/types/%s", hca,
                              port, ix);
        if (tr == PF_ENOENT &&
            pf_host_read(gid, sizeof(gid), h, SYS_IB "/%s/ports/%s/gids/%s", hca, port, ix) >= 0 &&
            gid_kind(pf_trim(gid)) > 0)
            r->no_type++;
        if (tr < 0) continue;
        pf_trim(type);
        if (strcmp(type, "RoCE v2") != 0) {
            if (strcmp(type, "IB/RoCE v1") != 0 && !r->garbage[0])
                snprintf(r->garbage, sizeof(r->garbage),
                         "gid_attrs/types/%s holds \"%.40s\" (expected \"RoCE v2\" or "
                         "\"IB/RoCE v1\")",
                         ix, type);
            continue;
        }
        r->v2_total++;
        int kind = -1;
        if (pf_host_read(gid, sizeof(gid), h, SYS_IB "/%s/ports/%s/gids/%s", hca, port, ix) >= 0)
            kind = gid_kind(pf_trim(gid));
        if (kind < 0) {
            if (!r->garbage[0])
                snprintf(r->garbage, sizeof(r->garbage), "gids/%s does not hold a GID", ix);
            continue;
        }
        if (kind == 0) {
            r->v2_zero++;
            continue;
        }
        /* reading ndevs fails with EINVAL when the entry has no netdev; without the file
         * (ENOENT) nothing was said */
        int nr = pf_host_read(ndev, sizeof(ndev), h, SYS_IB "/%s/ports/%s/gid_attrs/ndevs/%s", hca,
                              port, ix);
        if (nr == PF_ENOENT) r->no_type++;
        if (nr < 0 || !pf_trim(ndev)[0]) {
            r->v2_no_netdev++;
            continue;
        }
        bool v4 = strncmp(gid, "0000:0000:0000:0000:0000:ffff:", 30) == 0;
        /* NCCL's default address family is AF_INET: prefer an IPv4-mapped GID */
        if (!r->found || (v4 && !r->ipv4)) {
            r->found = true;
            r->index = atoi(ix);
            r->ipv4 = v4;
            snprintf(r->gid, sizeof(r->gid), "%.63s", gid);
            snprintf(r->netdev, sizeof(r->netdev), "%s", ndev);
        }
    }
    pf_strlist_free(&idx);
}

struct port {
    const struct pf_rdma_ident *id;
    char hca[64];
    char port[16];
    bool active;
    bool rate_ok;
    double gbps;
    char rate[64];
    char link_layer[32];
};

static const char *phys_hint(int num)
{
    switch (num) {
    case 1:
        return " (the port is asleep)";
    case 2:
        return " (no link partner: cable, transceiver or the switch port)";
    case 3:
        return " (disabled, e.g. by the switch, the subnet manager or mlxlink)";
    case 4:
        return " (link training in progress)";
    case 6:
        return " (link error recovery: the link is flapping)";
    case 7:
        return " (in a PHY test mode)";
    default:
        return "";
    }
}

static void port_layer_details(struct pf_check *out, struct pf_node *m, const struct port *pt,
                               const struct pf_host *h);

static void check_port(struct pf_check *out, struct pf_node *seq, struct port *pt,
                       const struct pf_host *h, const struct pf_config *cfg)
{
    char text[128], why[PF_HOST_PATH_MAX + 128];
    char down[2048] = "";
    struct pf_node *m = pf_node_add_map(seq);
    pf_node_set_str(m, "hca", pt->hca);
    pf_node_set_int(m, "port", atoi(pt->port));

    /* state */
    int num = 0;
    char name[64];
    /* an attribute that is missing, empty or not in the form core/sysfs.c writes is no
     * evidence of a fault: the port's state is unknown, never a failure */
    if (read_attr(text, sizeof(text), why, sizeof(why), h, pt->hca, pt->port, "state") < 0)
        pf_check_unknown(out, "port-down", "%s port %s: %.900s", pt->hca, pt->port, why);
    else if (!parse_num_name(text, &num, name, sizeof(name))) {
        pf_check_unknown(out, "port-down",
                         "%s port %s: state file holds \"%.40s\" (core/sysfs.c writes like \"4: "
                         "ACTIVE\")",
                         pt->hca, pt->port, text);
        pf_node_set_str(m, "state", text);
    } else {
        pf_node_set_str(m, "state", name);
        pt->active = num == 4 && strcmp(name, "ACTIVE") == 0;
        if (!pt->active)
            snprintf(down, sizeof(down), "state is %s (\"%s\"), should be ACTIVE%s", name, text,
                     num == 2 ? ": the link is up but no subnet manager has configured the port"
                              : "");
    }

    /* link layer */
    if (read_attr(text, sizeof(text), why, sizeof(why), h, pt->hca, pt->port, "link_layer") < 0) {
        pf_check_unknown(out, "port-down", "%s port %s: %.900s", pt->hca, pt->port, why);
        pt->active = false;
    } else {
        pf_node_set_str(m, "linkLayer", text);
        snprintf(pt->link_layer, sizeof(pt->link_layer), "%.31s", text);
        /* what the provider legitimately reports (EFA: Unknown, reached through aws-ofi-nccl,
         * rdma.efa); anything else is a port the driver did not set up */
        const struct pf_rdma_provider *pv = pt->id->provider;
        pf_node_set_str(m, "provider", pv->name);
        if (!pf_rdma_link_layer_ok(pv, text)) {
            /* the driver was named positively (driver link, PCI vendor, parent, node_desc,
             * hca_type: providerFrom), and it never writes this link layer */
            size_t len = strlen(down);
            snprintf(down + len, sizeof(down) - len,
                     "%slink_layer is \"%.40s\" (the %s driver, told by %s, reports %s)",
                     len ? "; " : "", text, pv->name, pt->id->how, pv->link_layers);
            pt->active = false;
        } else if (strcmp(text, "InfiniBand") != 0 && strcmp(text, "Ethernet") != 0)
            pf_node_set_str(m, "note",
                            pf_rdma_nccl_net(pt->id) && strcmp(pf_rdma_nccl_net(pt->id), "OFI") == 0
                                ? "reached through the aws-ofi-nccl plugin, not NCCL's IB transport"
                                : "NCCL's IB transport uses only InfiniBand and Ethernet ports");
    }
    if (down[0])
        pf_check_add_finding(out, "port-down", PF_FAIL, NULL, "%s port %s: %s", pt->hca, pt->port,
                             down);

    /* physical state */
    if (read_attr(text, sizeof(text), why, sizeof(why), h, pt->hca, pt->port, "phys_state") < 0)
        pf_check_unknown(out, "port-not-linkup", "%s port %s: %.900s", pt->hca, pt->port, why);
    else if (!parse_num_name(text, &num, name, sizeof(name))) {
        pf_node_set_str(m, "physState", text);
        pf_check_unknown(out, "port-not-linkup",
                         "%s port %s: phys_state file holds \"%.40s\" (core/sysfs.c writes like "
                         "\"5: LinkUp\")",
                         pt->hca, pt->port, text);
    } else {
        pf_node_set_str(m, "physState", name);
        if (num != 5)
            pf_check_add_finding(out, "port-not-linkup", PF_FAIL, NULL,
                                 "%s port %s: physical state is %s (\"%s\"), should be LinkUp%s",
                                 pt->hca, pt->port, name, text, phys_hint(num));
    }

    /* rate */
    if (read_attr(text, sizeof(text), why, sizeof(why), h, pt->hca, pt->port, "rate") < 0)
        pf_check_unknown(out, "port-rate", "%s port %s: %.900s", pt->hca, pt->port, why);
    else if (!parse_rate(text, &pt->gbps))
        pf_check_unknown(out, "port-rate",
                         "%s port %s: rate file holds \"%.40s\" (core/sysfs.c writes like \"400 "
                         "Gb/sec (4X NDR)\")",
                         pt->hca, pt->port, text);
    else {
        pt->rate_ok = true;
        snprintf(pt->rate, sizeof(pt->rate), "%.63s", text);
        pf_node_set_dbl(m, "rateGbps", pt->gbps);
        pf_node_set_str(m, "rate", text);
        if (pt->active && cfg && cfg->expect_min_port_rate_gbps >= 0 &&
            pt->gbps < cfg->expect_min_port_rate_gbps)
            pf_check_add_finding(out, "port-rate", PF_FAIL, NULL,
                                 "%s port %s runs at %s, expect.minPortRateGbps is %g", pt->hca,
                                 pt->port, text, cfg->expect_min_port_rate_gbps);
    }

    port_layer_details(out, m, pt, h);
}

/* What the port's link layer adds: an InfiniBand port's LIDs, an Ethernet port's RoCE v2 GID
 * (no-roce-gid without one). */
static void port_layer_details(struct pf_check *out, struct pf_node *m, const struct port *pt,
                               const struct pf_host *h)
{
    char text[128];
    if (strcmp(pt->link_layer, "InfiniBand") == 0) {
        if (pf_host_read(text, sizeof(text), h, SYS_IB "/%s/ports/%s/lid", pt->hca, pt->port) > 0)
            pf_node_set_str(m, "lid", pf_trim(text));
        if (pf_host_read(text, sizeof(text), h, SYS_IB "/%s/ports/%s/sm_lid", pt->hca, pt->port) >
            0)
            pf_node_set_str(m, "smLid", pf_trim(text));
    } else if (strcmp(pt->link_layer, "Ethernet") == 0 && !pf_rdma_wants_roce_gid(pt->id)) {
        pf_node_set_str(m, "note", pt->id->iwarp ? "iWARP: no RoCE GID" : "no RoCE GID needed");
    } else if (strcmp(pt->link_layer, "Ethernet") == 0) {
        struct roce_result r;
        roce_scan(&r, h, pt->hca, pt->port);
        struct pf_node *rm = pf_node_set_map(m, "roce");
        pf_node_set_int(rm, "v2Gids", r.v2_total);
        if (r.found) {
            pf_node_set_int(rm, "gidIndex", r.index);
            pf_node_set_str(rm, "gidType", "RoCE v2");
            pf_node_set_str(rm, "gid", r.gid);
            pf_node_set_str(rm, "netdev", r.netdev);
            pf_node_set_bool(rm, "ipv4", r.ipv4);
        } else if (r.entries == 0 || r.no_type > 0 || r.garbage[0]) {
            /* the kernel (drivers/infiniband/core/sysfs.c) lists every GID entry under gids/
             * with its type under gid_attrs/types/: without the table, without an entry's
             * type file, or with an entry not in the kernel's form, the RoCE v2 GID may be the
             * one that could not be read */
            if (r.entries == 0)
                pf_check_unknown(out, "no-roce-gid",
                                 "%s port %s: no GID table under " SYS_IB "/%s/ports/%s/gids",
                                 pt->hca, pt->port, pt->hca, pt->port);
            else if (r.garbage[0])
                pf_check_unknown(out, "no-roce-gid", "%s port %s: %s", pt->hca, pt->port,
                                 r.garbage);
            else
                pf_check_unknown(out, "no-roce-gid",
                                 "%s port %s: %d of %d GID entries lack a gid_attrs/types or "
                                 "gid_attrs/ndevs file",
                                 pt->hca, pt->port, r.no_type, r.entries);
        } else {
            char detail[512];
            snprintf(detail, sizeof(detail),
                     "%d RoCE v2 entr%s among %d GID entries (%d all-zero, %d without a netdev)",
                     r.v2_total, r.v2_total == 1 ? "y" : "ies", r.entries, r.v2_zero,
                     r.v2_no_netdev);
            pf_check_add_finding(out, "no-roce-gid", PF_FAIL, NULL,
                                 "%s port %s (Ethernet) has no usable RoCE v2 GID: %s", pt->hca,
                                 pt->port, detail);
        }
    }
}

void pf_check_rdma_ports(struct pf_check *out, struct pf_ctx *ctx)
{
    const struct pf_host *h = &ctx->host;
    const struct pf_config *cfg = ctx->config;
    if (pf_rdma_expect_none(ctx)) {
        pf_check_skip(out, "expect.rdma is none");
        return;
    }
    if (ctx->hcas.n == 0) {
        pf_check_skip(out, "no RDMA devices");
        return;
    }
    /* The pod's HCAs are those whose uverbs node it has (sysfs shows every HCA of the node in
     * the default shared RDMA mode), or cannot be told apart; with none, look at all. */
    struct hca_set s;
    pf_rdma_hca_scan(&s, ctx, false);
    size_t pf_rdma_hca_in_pod = pf_rdma_hca_count(&s, pf_rdma_hca_in_scope);
    pf_node_set_str(out->evidence, "scope",
                    pf_rdma_hca_in_pod < s.n ? "HCAs with a uverbs node in the pod"
                                             : "every HCA in sysfs");

    struct port *ports = NULL;
    size_t nports = 0, cap = 0;
    struct pf_node *seq = pf_node_set_seq(out->evidence, "ports");
    for (size_t i = 0; i < s.n; i++) {
        if (pf_rdma_hca_in_pod && !pf_rdma_hca_in_scope(&s.v[i])) continue;
        struct pf_strlist pl = {0};
        if (pf_host_list(&pl, h, SYS_IB "/%s/ports", s.v[i].name) < 0 || pl.n == 0) {
            pf_check_unknown(out, "port-down", "%s: no ports listed under " SYS_IB "/%s/ports",
                             s.v[i].name, s.v[i].name);
            pf_strlist_free(&pl);
            continue;
        }
        for (size_t j = 0; j < pl.n && j < 64; j++) {
            if (nports == cap) {
                cap = cap ? cap * 2 : 16;
                ports = pf_xrealloc(ports, cap * sizeof(*ports));
            }
            struct port *pt = &ports[nports++];
            memset(pt, 0, sizeof(*pt));
            snprintf(pt->hca, sizeof(pt->hca), "%s", s.v[i].name);
            pt->id = &s.v[i].id;
            snprintf(pt->port, sizeof(pt->port), "%s", pl.v[j]);
            check_port(out, seq, pt, h, cfg);
        }
        pf_strlist_free(&pl);
    }

    /* Without an expectation, an active port slower than the fastest active port of the same
     * link layer is a degraded cable, transceiver or lane. */
    size_t nactive = 0;
    double fastest_all = 0;
    for (size_t i = 0; i < nports; i++) {
        if (!ports[i].active || !ports[i].rate_ok) continue;
        nactive++;
        if (ports[i].gbps > fastest_all) fastest_all = ports[i].gbps;
        if (cfg && cfg->expect_min_port_rate_gbps >= 0) continue;
        const struct port *best = NULL;
        for (size_t j = 0; j < nports; j++)
            if (ports[j].active && ports[j].rate_ok &&
                strcmp(ports[j].link_layer, ports[i].link_layer) == 0 &&
                (!best || ports[j].gbps > best->gbps))
                best = &ports[j];
        if (best && ports[i].gbps < best->gbps)
            pf_check_add_finding(out, "port-rate", PF_WARN, NULL,
                                 "%s port %s runs at %s, slower than its peers (%s port %s: %s): "
                                 "a degraded cable, transceiver or lane",
                                 ports[i].hca, ports[i].port, ports[i].rate, best->hca, best->port,
                                 best->rate);
    }
    pf_node_set_int(out->evidence, "active", (long long)nactive);
    pf_check_set_message(out, "%zu of %zu port%s ACTIVE, fastest %g Gb/sec", nactive, nports,
                         nports == 1 ? "" : "s", fastest_all);
    free(ports);
    pf_rdma_hca_set_free(&s);
}
