/* rdma.devices: the pod's RDMA devices, their device nodes and PCIe links, read from sysfs and
 * /dev/infiniband under the root prefix (docs/checks/20-rdma.md); the HCAs and their nodes are
 * rdma_hca.c's. rdma.ports is rdma_ports.c, rdma.gpudirect rdma_gpudirect.c, rdma.memlock (the
 * process' own limit) memlock.c. */
#define _GNU_SOURCE
#include "rdma_hca.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* "mlx5_0, mlx5_1, ..." of the HCAs whose node state satisfies want. */
static void hca_names(char *out, size_t n, const struct hca_set *s,
                      bool (*want)(const struct hca *))
{
    out[0] = '\0';
    size_t len = 0;
    for (size_t i = 0; i < s->n; i++) {
        if (!want(&s->v[i])) continue;
        int w = snprintf(out + len, n - len, "%s%s", len ? ", " : "", s->v[i].name);
        if (w < 0 || (size_t)w >= n - len) {
            if (n > 4) memcpy(out + n - 4, "...", 4);
            return;
        }
        len += (size_t)w;
    }
}

static bool is_usable(const struct hca *h)
{
    return h->node == NODE_OPENABLE;
}
static bool is_any(const struct hca *h)
{
    (void)h;
    return true;
}

/* ---- rdma.devices */

static void hca_evidence(struct pf_node *m, const struct hca *hc, const struct pf_host *h)
{
    char text[256];
    pf_node_set_str(m, "name", hc->name);
    if (hc->uverbs[0]) pf_node_set_str(m, "uverbs", hc->uverbs);
    static const char *const node_names[] = {"no-uverbs", "missing", "present", "openable",
                                             "unopenable"};
    pf_node_set_str(m, "devNode", node_names[hc->node]);
    if (pf_host_read(text, sizeof(text), h, SYS_IB "/%s/node_type", hc->name) > 0)
        pf_node_set_str(m, "nodeType", pf_trim(text));
    if (pf_host_read(text, sizeof(text), h, SYS_IB "/%s/fw_ver", hc->name) > 0)
        pf_node_set_str(m, "fwVer", pf_trim(text));
    if (pf_host_read(text, sizeof(text), h, SYS_IB "/%s/node_guid", hc->name) > 0)
        pf_node_set_str(m, "nodeGuid", pf_trim(text));
    if (pf_host_link_basename(text, sizeof(text), h, SYS_IB "/%s/device", hc->name) == 0)
        pf_node_set_str(m, "pciAddress", text);
    long long numa;
    if (pf_host_read_ll(&numa, h, SYS_IB "/%s/device/numa_node", hc->name) == 0)
        pf_node_set_int(m, "numaNode", numa);
    pf_node_set_str(m, "provider", hc->id.provider->name);
    pf_node_set_str(m, "providerFrom", hc->id.how);
    if (hc->id.iwarp) pf_node_set_str(m, "transport", "iWARP");
    pf_node_set_str(m, "nccl", pf_rdma_advice(&hc->id));
    pf_err_clear();
}

/* A NIC whose PCIe link trained below what it and its slot can do moves less than its ports'
 * rate: a silent loss of bandwidth (a GPU's link is never judged so: GPUs lower it when idle). */
static void pcie_link(struct pf_check *out, struct pf_node *m, const struct hca *hc,
                      const struct pf_host *h)
{
    struct pf_pcie_link l;
    if (hc->id.provider->software || pf_pcie_link_read(&l, h, hc->name) < 0) return;
    if (!l.known) {
        pf_node_set_str(m, "pcieLink", l.why);
        return;
    }
    pf_node_set_strf(m, "pcieLink", "x%d at %s", l.cur_width, l.cur);
    pf_node_set_strf(m, "pcieCapable", "x%d at %s", l.max_width, l.max);
    if (l.degraded) {
        char pci[64] = "";
        if (pf_host_link_basename(pci, sizeof(pci), h, SYS_IB "/%s/device", hc->name) != 0)
            snprintf(pci, sizeof(pci), "?");
        pf_check_add_finding(out, "pcie-link-degraded", PF_WARN, NULL,
                             "%s (PCI %s): PCIe link x%d at %s, capable of x%d at %s: the NIC "
                             "moves at most %.0f%% of its PCIe bandwidth",
                             hc->name, pci, l.cur_width, l.cur, l.max_width, l.max,
                             100.0 * (l.cur_gts * l.cur_width) / (l.max_gts * l.max_width));
    }
    pf_err_clear();
}

void pf_check_rdma_devices(struct pf_check *out, struct pf_ctx *ctx)
{
    const struct pf_config *cfg = ctx->config;
    const int expect_hcas = cfg ? cfg->expect_hcas : -1;
    const bool required = cfg && cfg->expect_rdma == PF_RDMA_REQUIRED;
    struct pf_node *ev = out->evidence;

    if (pf_rdma_expect_none(ctx)) {
        pf_check_skip(out, "expect.rdma is none (%zu HCA%s present, not checked)", ctx->hcas.n,
                      ctx->hcas.n == 1 ? "" : "s");
        return;
    }
    pf_node_set_int(ev, "count", (long long)ctx->hcas.n);
    if (ctx->hcas.n == 0) {
        if (required)
            pf_check_add_finding(out, "no-rdma-devices", PF_FAIL, NULL,
                                 "no RDMA device under " SYS_IB "; expect.rdma is required");
        else if (expect_hcas > 0)
            pf_check_add_finding(out, "hca-count", PF_FAIL, NULL,
                                 "no RDMA device under " SYS_IB "; expect.hcas is %d", expect_hcas);
        else {
            /* no verbs device is no proof of a TCP-only pod: libfabric providers such as HPE
             * Slingshot's cxi (/sys/class/cxi, ofiwg/libfabric prov/cxi) carry NCCL through
             * an OFI net plugin without any /sys/class/infiniband device */
            char other[200] = "";
            const char *fi = pf_env_get(&ctx->env, "FI_PROVIDER");
            const char *net = pf_env_get(&ctx->env, "NCCL_NET");
            const char *plug = pf_env_get(&ctx->env, "NCCL_NET_PLUGIN");
            if (pf_host_exists(&ctx->host, "/sys/class/cxi"))
                snprintf(other, sizeof(other), "/sys/class/cxi (HPE Slingshot) is there");
            else if (fi && *fi && strcasecmp(fi, "tcp") != 0 && !strcasestr(fi, "sockets"))
                snprintf(other, sizeof(other), "FI_PROVIDER=%.60s", fi);
            else if (net && *net && strcasecmp(net, "Socket") != 0 && strcasecmp(net, "IB") != 0)
                snprintf(other, sizeof(other), "NCCL_NET=%.60s", net);
            else if (plug && *plug && strcasecmp(plug, "none") != 0)
                snprintf(other, sizeof(other), "NCCL_NET_PLUGIN=%.60s", plug);
            pf_err_clear();
            if (other[0]) {
                pf_check_unknown(out, "no-rdma-devices",
                                 "no device under " SYS_IB ", but %s: NCCL may reach the network "
                                 "through a net plugin whose devices are not verbs devices",
                                 other);
                pf_check_skip(out,
                              "no RDMA devices under " SYS_IB "; %s: the network is not "
                              "judged here (unknown), not TCP-only",
                              other);
            } else
                pf_check_skip(out, "no RDMA devices (TCP-only pod)");
        }
        return;
    }

    struct hca_set s;
    pf_rdma_hca_scan(&s, ctx, true);
    size_t usable = pf_rdma_hca_count(&s, is_usable);
    pf_node_set_int(ev, "usable", (long long)usable);
    bool rdma_cm = pf_host_exists(&ctx->host, DEV_IB "/rdma_cm");
    pf_node_set_bool(ev, "rdmaCm", rdma_cm);
    struct pf_node *seq = pf_node_set_seq(ev, "hcas");
    for (size_t i = 0; i < s.n; i++) {
        struct pf_node *m = pf_node_add_map(seq);
        hca_evidence(m, &s.v[i], &ctx->host);
        pcie_link(out, m, &s.v[i], &ctx->host);
    }

    char names[512], ok_names[512];
    hca_names(ok_names, sizeof(ok_names), &s, is_usable);
    /* a pod may legitimately get some HCAs of a node; with none usable RDMA is gone */
    const enum pf_status partial = usable > 0 ? PF_WARN : PF_FAIL;

    if (!s.dev_dir) {
        hca_names(names, sizeof(names), &s, is_any);
        pf_check_add_finding(out, "uverbs-missing", PF_FAIL, NULL,
                             DEV_IB " is not in the pod: none of the %zu HCA%s in " SYS_IB
                                    " (%s) can be used; NCCL would fall back to TCP sockets",
                             s.n, s.n == 1 ? "" : "s", names);
    } else {
        char missing[768] = "";
        size_t nmissing = 0, len = 0;
        for (size_t i = 0; i < s.n; i++) {
            const struct hca *hc = &s.v[i];
            if (hc->node == NODE_NO_UVERBS && hc->ibdev_unread)
                /* the unread ibdev file may be the one naming this HCA (core/uverbs_main.c
                 * writes the device's name there) */
                pf_check_unknown(out, "uverbs-missing", "%s: %s", hc->name, hc->why);
            else if (hc->node == NODE_NO_UVERBS)
                pf_check_add_finding(out, "uverbs-missing", partial, NULL, "%s: %s", hc->name,
                                     hc->why);
            else if (hc->node == NODE_MISSING) {
                int w = snprintf(missing + len, sizeof(missing) - len, "%s" DEV_IB "/%s (%s)",
                                 len ? ", " : "", hc->uverbs, hc->name);
                if (w > 0 && (size_t)w < sizeof(missing) - len) len += (size_t)w;
                nmissing++;
            } else if (hc->node == NODE_UNOPENABLE)
                pf_check_add_finding(out, "uverbs-unopenable", PF_FAIL, NULL, "%s: %s", hc->name,
                                     hc->why);
        }
        if (nmissing)
            pf_check_add_finding(out, "uverbs-missing", partial, NULL,
                                 "%zu of %zu HCAs have no uverbs node in the pod: %s (usable: %s)",
                                 nmissing, s.n, missing, usable ? ok_names : "none");
    }
    /* rdma_cm where a provider uses it: never EFA (libfabric's efa provider opens uverbs
     * only), always iWARP (connections are set up through the CM) */
    const char *cm_user = NULL, *cm_user_how = "";
    bool cm_needed = false;
    size_t cm_unknown = 0;
    for (size_t i = 0; i < s.n; i++) {
        /* only the HCAs the pod was given (its uverbs node is there): the node's others are
         * another pod's business; a driver the table does not know may not use the CM at all */
        if (!s.dev_dir || !pf_rdma_hca_in_pod(&s.v[i])) continue;
        if (s.v[i].id.provider == pf_rdma_provider_unknown() && !s.v[i].id.iwarp) {
            cm_unknown++;
            continue;
        }
        enum pf_rdma_cm cm = s.v[i].id.iwarp ? PF_RDMA_CM_NEEDED : s.v[i].id.provider->rdma_cm;
        if (cm == PF_RDMA_CM_NO || (cm_user && (cm_needed || cm != PF_RDMA_CM_NEEDED))) continue;
        cm_user = s.v[i].name;
        cm_user_how = s.v[i].id.provider->name;
        cm_needed = cm == PF_RDMA_CM_NEEDED;
    }
    if (!rdma_cm && !cm_user && cm_unknown)
        pf_check_unknown(out, "rdma-cm-missing",
                         DEV_IB "/rdma_cm is not in the pod and %zu of its HCAs have a driver "
                                "preflight does not know (providerFrom): whether it uses the "
                                "RDMA CM is unknown",
                         cm_unknown);
    else if (!rdma_cm && !cm_user)
        pf_node_set_strf(ev, "rdmaCmNote", "not needed by %s",
                         !s.dev_dir || pf_rdma_hca_count(&s, pf_rdma_hca_in_pod) == 0
                             ? "the pod: none of the node's HCAs is in it"
                         : strcmp(s.v[0].id.provider->name, "efa") == 0 ? "EFA"
                                                                        : s.v[0].id.provider->name);
    if (!rdma_cm && cm_user)
        pf_check_add_finding(out, "rdma-cm-missing", PF_WARN, NULL,
                             DEV_IB "/rdma_cm is not in the pod, which was given %s (%s; RDMA "
                                    "connection manager: %s)",
                             cm_user, cm_user_how,
                             cm_needed ? "an iWARP device such as this pod's sets up every "
                                         "connection through it"
                                       : "needed by UCX, MPI and libfabric, not by NCCL's IB "
                                         "transport");
    if (expect_hcas > 0 && usable < (size_t)expect_hcas)
        pf_check_add_finding(
            out, "hca-count", PF_FAIL, NULL,
            "%zu HCA%s usable in the pod (%s) of %zu in " SYS_IB "; expect.hcas is %d", usable,
            usable == 1 ? "" : "s", usable ? ok_names : "none", s.n, expect_hcas);

    pf_check_set_message(out, "%zu HCA%s (%s), %zu with an openable uverbs node; rdma_cm %s", s.n,
                         s.n == 1 ? "" : "s", ok_names[0] ? ok_names : "none usable", usable,
                         rdma_cm ? "present" : "missing");
    pf_rdma_hca_set_free(&s);
}
