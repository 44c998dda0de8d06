/* rdma.verbs: what only a real device can answer, through the image's own libibverbs: open
 * every device, query its ports, allocate a protection domain, register 1 MiB (where a low
 * RLIMIT_MEMLOCK or a missing IPC_LOCK shows), and probe dma-buf registration the way NCCL
 * does (ibv_reg_dmabuf_mr with fd -1). The inventory itself comes from sysfs (ctx->hcas). */
#define _GNU_SOURCE
#include "checks.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "../dl/dl.h"

#define MR_BYTES (1u << 20)

static void memlock_text(char *out, size_t n)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_MEMLOCK, &rl) != 0)
        snprintf(out, n, "unknown");
    else if (rl.rlim_cur == RLIM_INFINITY)
        snprintf(out, n, "unlimited");
    else
        snprintf(out, n, "%llu KiB", (unsigned long long)rl.rlim_cur / 1024);
}

static const char *port_state_name(unsigned s)
{
    static const char *const names[] = {"NOP", "DOWN", "INIT", "ARMED", "ACTIVE", "ACTIVE_DEFER"};
    return s < PF_ARRAY_LEN(names) ? names[s] : "unknown";
}

static const char *link_layer_name(unsigned l)
{
    return l == 1 ? "InfiniBand" : l == 2 ? "Ethernet" : "Unspecified";
}

/* Port numbers of an HCA from sysfs; port 1 when sysfs does not say. */
static void port_numbers(struct pf_strlist *out, struct pf_ctx *ctx, const char *hca)
{
    if (pf_host_list(out, &ctx->host, "/sys/class/infiniband/%s/ports", hca) < 0 || out->n == 0) {
        pf_strlist_free(out);
        pf_strlist_add(out, "1");
    }
}

/* One device: open, ports, PD, MR, dma-buf. Returns true when dma-buf looked supported. */
static bool probe_device(struct pf_check *out, struct pf_ctx *ctx, const struct pf_dl_verbs *v,
                         struct ibv_device *dev, struct pf_node *devs, int *opened)
{
    const char *name = v->get_device_name(dev);
    if (!name) name = "?";
    struct pf_node *d = pf_node_add_map(devs);
    pf_node_set_str(d, "name", name);
    if (ctx->hcas.n && !pf_strlist_has(&ctx->hcas, name))
        pf_node_set_str(d, "note", "not under /sys/class/infiniband of the root prefix");
    errno = 0;
    struct ibv_context *c = v->open_device(dev);
    if (!c) {
        int e = errno;
        pf_node_set_strf(d, "open", "failed: %s", strerror(e ? e : EIO));
        pf_check_add_finding(out, "open-failed", PF_FAIL,
                             e == EACCES || e == EPERM || e == ENOENT || e == ENODEV || e == ENXIO
                                 ? "give the pod the uverbs device node of this HCA: request the "
                                   "RDMA device plugin's resource (it mounts "
                                   "/dev/infiniband/uverbsN) rather than mounting /dev by hand"
                                 : NULL,
                             "ibv_open_device(%s) failed: %s (errno %d)", name,
                             strerror(e ? e : EIO), e);
        return false;
    }
    (*opened)++;
    pf_node_set_str(d, "open", "ok");
    struct pf_strlist ports = {0};
    port_numbers(&ports, ctx, name);
    struct pf_node *ps = pf_node_set_seq(d, "ports");
    for (size_t i = 0; i < ports.n; i++) {
        int pn = atoi(ports.v[i]);
        if (pn <= 0 || pn > 255) continue;
        union pf_ibv_port_attr_buf a;
        memset(&a, 0, sizeof(a));
        errno = 0;
        int rc = v->query_port(c, (uint8_t)pn, &a);
        struct pf_node *p = pf_node_add_map(ps);
        pf_node_set_int(p, "port", pn);
        if (rc != 0) {
            int e = rc > 0 ? rc : (errno ? errno : EIO);
            pf_node_set_strf(p, "query", "failed: %s", strerror(e));
            pf_check_add_finding(out, "open-failed", PF_FAIL, NULL,
                                 "ibv_query_port(%s, %d) failed: %s", name, pn, strerror(e));
            continue;
        }
        pf_node_set_str(p, "state", port_state_name(a.attr.state));
        pf_node_set_str(p, "linkLayer", link_layer_name(a.attr.link_layer));
        pf_node_set_int(p, "activeMtu",
                        a.attr.active_mtu >= 1 && a.attr.active_mtu <= 5 ? 128 << a.attr.active_mtu
                                                                         : 0);
        pf_node_set_int(p, "lid", a.attr.lid);
    }
    pf_strlist_free(&ports);

    bool dmabuf = false;
    errno = 0;
    struct ibv_pd *pd = v->alloc_pd(c);
    if (!pd) {
        int e = errno ? errno : EIO;
        pf_node_set_strf(d, "pd", "failed: %s", strerror(e));
        pf_check_add_finding(out, "open-failed", PF_FAIL, NULL,
                             "ibv_alloc_pd(%s) failed: %s (errno %d)", name, strerror(e), e);
        goto close;
    }
    void *buf = aligned_alloc(4096, MR_BYTES);
    if (buf) {
        memset(buf, 0, MR_BYTES);
        errno = 0;
        struct ibv_mr *mr = v->reg_mr(pd, buf, MR_BYTES, PF_IBV_ACCESS_LOCAL_WRITE);
        if (mr) {
            pf_node_set_str(d, "regMr", "1 MiB registered");
            v->dereg_mr(mr);
        } else {
            int e = errno ? errno : EIO;
            char ml[64];
            memlock_text(ml, sizeof(ml));
            pf_node_set_strf(d, "regMr", "failed: %s", strerror(e));
            bool memlock = e == ENOMEM || e == EPERM || e == EAGAIN || e == EFAULT;
            pf_check_add_finding(
                out, "reg-mr-failed", PF_FAIL,
                memlock ? "raise the locked-memory limit to unlimited for the container (the "
                          "container runtime's default ulimit memlock, e.g. containerd's "
                          "LimitMEMLOCK=infinity on the node) and add the IPC_LOCK capability "
                          "to the container's securityContext"
                        : NULL,
                "ibv_reg_mr of 1 MiB on %s failed: %s (errno %d); RLIMIT_MEMLOCK is %s%s", name,
                strerror(e), e, ml,
                memlock ? ": NCCL will fail the same way (ibv_reg_mr failed / ibv_create_qp "
                          "failed)"
                        : "");
        }
        free(buf);
    }
    /* dma-buf, as NCCL probes it: fd -1 gives EOPNOTSUPP/EPROTONOSUPPORT when unsupported
     * (EBADF otherwise) */
    if (v->reg_dmabuf_mr) {
        errno = 0;
        struct ibv_mr *mr = v->reg_dmabuf_mr(pd, 0, 0, 0, -1, 0);
        int e = errno;
        if (mr) {
            v->dereg_mr(mr);
            dmabuf = true;
        } else {
            dmabuf = e != EOPNOTSUPP && e != EPROTONOSUPPORT;
        }
        pf_node_set_strf(d, "dmabuf", "%s (ibv_reg_dmabuf_mr(fd=-1): %s)",
                         dmabuf ? "supported" : "unsupported", mr ? "ok" : strerror(e));
    } else {
        pf_node_set_str(d, "dmabuf",
                        "unsupported (this libibverbs has no ibv_reg_dmabuf_mr: "
                        "rdma-core older than 34)");
    }
    v->dealloc_pd(pd);
close:
    v->close_device(c);
    return dmabuf;
}

void pf_check_rdma_verbs(struct pf_check *out, struct pf_ctx *ctx)
{
    if (ctx->hcas.n == 0) {
        pf_check_skip(out, "no RDMA devices under /sys/class/infiniband");
        return;
    }
    char hcas[512];
    pf_strlist_join(hcas, sizeof(hcas), &ctx->hcas, ", ");
    const struct pf_dl_verbs *v = NULL;
    if (pf_dl_verbs(&v) < 0) {
#ifdef PF_STATIC
        pf_check_skip(out, "static binary: no dlopen (libibverbs not probed; %s present)", hcas);
#else
        pf_check_add_finding(out, "verbs-unavailable", PF_FAIL, NULL,
                             "libibverbs does not load (%s) while /sys/class/infiniband has %s",
                             pf_err_msg(), hcas);
#endif
        return;
    }
    pf_node_set_str(out->evidence, "library", v->path);
    errno = 0;
    int num = 0;
    struct ibv_device **list = v->get_device_list(&num);
    if (!list || num <= 0) {
        int e = errno;
        if (ctx->host.root[0]) {
            /* the inventory came from the root prefix; libibverbs reads the real /sys and
             * /dev over netlink, so its empty list says nothing about that tree */
            pf_check_skip(out,
                          "libibverbs lists no device (%s), and the HCAs (%s) are those of the "
                          "root prefix %s, which libibverbs does not read: rdma.verbs needs the "
                          "real /sys and /dev",
                          list ? "0 devices" : strerror(e ? e : ENODEV), hcas, ctx->host.root);
            if (list) v->free_device_list(list);
            return;
        }
        /* rdma-core installs each provider as libibverbs/lib<name>-rdmav<N>.so */
        struct pf_rdma_ident id;
        pf_rdma_identify(&id, &ctx->host, ctx->hcas.v[0]);
        const char *prov = id.provider->name;
        bool known = strcmp(prov, "unknown") != 0;
        pf_check_add_finding(out, "verbs-unavailable", PF_FAIL, NULL,
                             "libibverbs lists no device (%s) while /sys/class/infiniband has %s: "
                             "the provider library for these HCAs (%s%s%s from "
                             "ibverbs-providers) is missing from the image, or "
                             "/dev/infiniband/uverbs* is not in the pod",
                             list ? "0 devices" : strerror(e ? e : ENODEV), hcas,
                             known ? "lib" : "e.g. libmlx5", known ? prov : "",
                             known ? (strcmp(prov, "hfi1") == 0 ? "verbs-rdmav*.so" : "-rdmav*.so")
                                   : "");
        if (list) v->free_device_list(list);
        return;
    }
    struct pf_node *devs = pf_node_set_seq(out->evidence, "devices");
    int opened = 0, dmabuf = 0;
    for (int i = 0; i < num && list[i]; i++)
        dmabuf += probe_device(out, ctx, v, list[i], devs, &opened);
    v->free_device_list(list);
    /* for rdma.gpudirect and humans: can these NICs register dma-buf (GPU) memory? */
    pf_node_set_bool(ctx->verdict->environment, "rdmaDmabuf", dmabuf > 0);
    pf_node_set_bool(out->evidence, "dmabuf", dmabuf > 0);
    pf_check_set_message(out, "%d of %d device%s opened through libibverbs; dma-buf %s", opened,
                         num, num == 1 ? "" : "s", dmabuf ? "supported" : "not supported");
}
