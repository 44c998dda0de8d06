/* topology.locality: where each GPU sits relative to the RDMA NICs the pod can open: NUMA
 * node from sysfs, and the PCIe path between them in nvidia-smi topo -m terms (PIX, PXB, PHB,
 * NODE, SYS), inferred from the device paths under /sys/devices. */
#define _GNU_SOURCE
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../k8s/attach.h"
#include "../k8s/k8s.h"
#include "checks.h"

#define MAX_CHAIN 16

struct pdev {
    char name[64];                         /* "0000:18:00.0" for a GPU, "mlx5_3" for a NIC */
    char bdf[PF_K8S_BDF_MAX];              /* "" when unknown */
    int numa;                              /* -1: unknown */
    char root[64];                         /* "pci0000:c0", "" when the path is unknown */
    char chain[MAX_CHAIN][PF_K8S_BDF_MAX]; /* PCI functions from the root down, device last */
    size_t nchain;
};

/* Path types, closest first (nvidia-smi topo -m legend). */
enum path { P_PIX, P_PXB, P_PHB, P_NODE, P_SYS, P_UNKNOWN };
static const char *const path_names[] = {"PIX", "PXB", "PHB", "NODE", "SYS", "unknown"};

static void fill(struct pdev *d, const struct pf_host *h)
{
    d->numa = -1;
    d->root[0] = '\0';
    d->nchain = 0;
    if (!*d->bdf) return;
    long long numa;
    if (pf_host_read_ll(&numa, h, "/sys/bus/pci/devices/%s/numa_node", d->bdf) == 0 && numa >= 0 &&
        numa < 4096)
        d->numa = (int)numa;
    /* "../../../devices/pci0000:c0/0000:c0:01.1/0000:c1:00.0/.../0000:c3:00.0" */
    char link[PF_HOST_PATH_MAX];
    if (pf_host_readlink(link, sizeof(link), h, "/sys/bus/pci/devices/%s", d->bdf) < 0) {
        pf_err_clear();
        return;
    }
    char *p = strstr(link, "devices/");
    if (!p) return;
    p += strlen("devices/");
    char *save = NULL;
    char *tok = strtok_r(p, "/", &save);
    if (!tok || !pf_str_starts(tok, "pci")) return;
    snprintf(d->root, sizeof(d->root), "%s", tok);
    while ((tok = strtok_r(NULL, "/", &save)) != NULL && d->nchain < MAX_CHAIN) {
        char bdf[PF_K8S_BDF_MAX];
        if (pf_k8s_bdf_parse(bdf, tok) < 0) break;
        snprintf(d->chain[d->nchain++], PF_K8S_BDF_MAX, "%s", bdf);
    }
    pf_err_clear();
    if (d->nchain == 0 || strcmp(d->chain[d->nchain - 1], d->bdf) != 0) {
        d->root[0] = '\0';
        d->nchain = 0;
    }
}

static enum path path_between(const struct pdev *a, const struct pdev *b)
{
    if (!*a->root || !*b->root) {
        if (a->numa >= 0 && b->numa >= 0) return a->numa == b->numa ? P_NODE : P_SYS;
        return P_UNKNOWN;
    }
    if (strcmp(a->root, b->root) != 0) return a->numa == b->numa ? P_NODE : P_SYS;
    /* bridges above each device: chain without the device itself */
    size_t na = a->nchain - 1, nb = b->nchain - 1, k = 0;
    while (k < na && k < nb && strcmp(a->chain[k], b->chain[k]) == 0)
        k++;
    if (k == 0) return P_PHB;
    if (na - k <= 1 && nb - k <= 1) return P_PIX;
    return P_PXB;
}

/* The attachment (pkg/k8s/attach.h: Multus, GKE, device plugin) that gave the pod an HCA: one
 * naming it as an RDMA device or by PCI address, or whose interface is one of its netdevs. */
static const struct pf_k8s_attach *attachment_of(const struct pf_k8s_attachments *att,
                                                 const char *hca, const char *bdf,
                                                 const struct pf_strlist *netdevs)
{
    for (size_t i = 0; i < att->n; i++) {
        const struct pf_k8s_attach *a = &att->v[i];
        if (a->cluster) continue;
        if (pf_strlist_has(&a->rdma, hca) || (*bdf && strcmp(a->pci, bdf) == 0) ||
            (*a->interface && pf_strlist_has(netdevs, a->interface)))
            return a;
    }
    return NULL;
}

/* The RDMA NICs this pod can open: an HCA whose uverbs node is in /dev/infiniband, with the
 * attachment that gave it to the pod when a source says. */
static void list_nics(struct pdev **out, size_t *n, struct pf_node *ev, const struct pf_ctx *ctx)
{
    const struct pf_host *h = &ctx->host;
    struct pf_k8s_podinfo pi;
    (void)pf_k8s_podinfo_read_env(&pi, h, &ctx->env);
    struct pf_k8s_attachments att;
    pf_k8s_attach_gather(&att, NULL, &pi, pf_env_get(&ctx->env, PF_K8S_DEVICE_RESOURCES_ENV));
    pf_k8s_podinfo_free(&pi);
    struct pf_strlist verbs = {0};
    (void)pf_host_list(&verbs, h, "/sys/class/infiniband_verbs");
    *out = NULL;
    *n = 0;
    for (size_t i = 0; i < ctx->hcas.n; i++) {
        const char *hca = ctx->hcas.v[i];
        char uverbs[64] = "";
        for (size_t k = 0; k < verbs.n && !*uverbs; k++) {
            char ibdev[128];
            if (pf_host_read(ibdev, sizeof(ibdev), h, "/sys/class/infiniband_verbs/%s/ibdev",
                             verbs.v[k]) >= 0 &&
                strcmp(pf_trim(ibdev), hca) == 0)
                snprintf(uverbs, sizeof(uverbs), "%s", verbs.v[k]);
        }
        bool usable = *uverbs && pf_host_exists(h, "/dev/infiniband/%s", uverbs);
        struct pdev d;
        memset(&d, 0, sizeof(d));
        snprintf(d.name, sizeof(d.name), "%s", hca);
        char bdf[64];
        if (pf_host_link_basename(bdf, sizeof(bdf), h, "/sys/class/infiniband/%s/device", hca) ==
                0 &&
            pf_k8s_bdf_parse(d.bdf, bdf) < 0)
            d.bdf[0] = '\0';
        fill(&d, h);
        struct pf_node *m = pf_node_add_map(ev);
        pf_node_set_str(m, "name", hca);
        if (*d.bdf) pf_node_set_str(m, "pciAddress", d.bdf);
        pf_node_set_int(m, "numaNode", d.numa);
        pf_node_set_bool(m, "usable", usable);
        struct pf_strlist netdevs = {0};
        (void)pf_host_list(&netdevs, h, "/sys/class/infiniband/%s/device/net", hca);
        const struct pf_k8s_attach *a = attachment_of(&att, hca, d.bdf, &netdevs);
        if (a)
            pf_node_set_strf(m, "attachment", "%s %s%s%s", pf_k8s_attach_src_name(a->src), a->name,
                             *a->interface ? " on " : "", a->interface);
        pf_strlist_free(&netdevs);
        if (usable) {
            *out = pf_xrealloc(*out, (*n + 1) * sizeof(**out));
            (*out)[(*n)++] = d;
        }
    }
    pf_strlist_free(&verbs);
    pf_k8s_attachments_free(&att);
    pf_err_clear();
}

void pf_check_topology_locality(struct pf_check *out, struct pf_ctx *ctx)
{
    if (ctx->gpus.n == 0) {
        pf_check_skip(out, "no GPUs in /proc/driver/nvidia/gpus");
        return;
    }
    if (ctx->hcas.n == 0) {
        pf_check_skip(out, "no RDMA NICs in /sys/class/infiniband");
        return;
    }
    struct pdev *nics = NULL;
    size_t nnics = 0;
    struct pf_node *evn = pf_node_set_seq(out->evidence, "nics");
    list_nics(&nics, &nnics, evn, ctx);
    if (nnics == 0) {
        pf_check_skip(out, "no RDMA NIC this pod can open (no /dev/infiniband/uverbsN for %s%s)",
                      ctx->hcas.v[0], ctx->hcas.n > 1 ? " and the others" : "");
        free(nics);
        return;
    }
    struct pf_node *evg = pf_node_set_seq(out->evidence, "gpus");
    size_t nremote = 0, nknown = 0;
    int best_all = P_UNKNOWN;
    for (size_t g = 0; g < ctx->gpus.n; g++) {
        struct pdev gpu;
        memset(&gpu, 0, sizeof(gpu));
        snprintf(gpu.name, sizeof(gpu.name), "%s", ctx->gpus.v[g]);
        if (pf_k8s_bdf_parse(gpu.bdf, ctx->gpus.v[g]) < 0) gpu.bdf[0] = '\0';
        pf_err_clear();
        fill(&gpu, &ctx->host);
        struct pf_node *m = pf_node_add_map(evg);
        pf_node_set_str(m, "busId", gpu.name);
        pf_node_set_int(m, "numaNode", gpu.numa);
        struct pf_node *paths = pf_node_set_map(m, "paths");
        enum path best = P_UNKNOWN;
        const struct pdev *nearest = NULL;
        bool same_numa = false, numa_known = false;
        for (size_t i = 0; i < nnics; i++) {
            enum path p = path_between(&gpu, &nics[i]);
            pf_node_set_str(paths, nics[i].name, path_names[p]);
            if (!nearest || p < best) {
                best = p;
                nearest = &nics[i];
            }
            if (gpu.numa >= 0 && nics[i].numa >= 0) {
                numa_known = true;
                if (gpu.numa == nics[i].numa) same_numa = true;
            }
        }
        if (nearest) {
            pf_node_set_str(m, "nearestNic", nearest->name);
            pf_node_set_str(m, "path", path_names[best]);
        }
        if ((int)best < best_all) best_all = (int)best;
        if (!numa_known) continue;
        nknown++;
        if (same_numa) continue;
        nremote++;
        struct pf_strlist where = {0};
        for (size_t i = 0; i < nnics; i++)
            if (nics[i].numa >= 0)
                pf_strlist_addf(&where, "%s on node %d", nics[i].name, nics[i].numa);
        char list[512];
        pf_strlist_join(list, sizeof(list), &where, ", ");
        pf_strlist_free(&where);
        pf_check_add_finding(out, "nic-numa-remote", PF_WARN, NULL,
                             "GPU %s is on NUMA node %d, but every RDMA NIC this pod can open is "
                             "on another node (%s): its network traffic crosses the CPU "
                             "interconnect (SYS in nvidia-smi topo -m)",
                             gpu.name, gpu.numa, list);
    }
    if (nremote == 0) {
        if (nknown == 0)
            pf_check_set_message(out,
                                 "%zu GPUs, %zu RDMA NICs; NUMA placement unknown (numa_node is "
                                 "-1), closest path %s",
                                 ctx->gpus.n, nnics, path_names[best_all]);
        else
            pf_check_set_message(out,
                                 "every GPU has an RDMA NIC on its NUMA node (%zu GPUs, %zu "
                                 "NICs)",
                                 ctx->gpus.n, nnics);
    }
    free(nics);
}
