/* rdma.devices, rdma.ports, rdma.gpudirect: the RDMA side of a pod, read from
 * sysfs and /dev/infiniband under the root prefix (docs/checks/20-rdma.md). Only uverbsN nodes are
 * ever opened: never umadN and never issmN (opening issmN sets the port's IsSM bit).
 * rdma.memlock, the process' own limit, is memlock.c. */
#define _GNU_SOURCE
#include "checks.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#define SYS_IB "/sys/class/infiniband"
#define SYS_VERBS "/sys/class/infiniband_verbs"
#define DEV_IB "/dev/infiniband"
#define MAX_GID_ENTRIES 1024

/* ---- inventory shared by the checks */

enum node_state {
    NODE_NO_UVERBS = 0, /* no uverbsN in sysfs names this HCA */
    NODE_MISSING,       /* /dev/infiniband/uverbsN is not in the pod */
    NODE_PRESENT,       /* present (not opened) */
    NODE_OPENABLE,      /* opened and closed */
    NODE_UNOPENABLE,    /* present, open failed */
};

struct hca {
    char name[64];
    char uverbs[32]; /* "uverbs3", "" when none */
    enum node_state node;
    char why[256];           /* for NODE_NO_UVERBS / NODE_UNOPENABLE */
    bool ibdev_unread;       /* NODE_NO_UVERBS while some uverbsN/ibdev could not be read */
    struct pf_rdma_ident id; /* its provider, from sysfs */
};

struct hca_set {
    struct hca *v;
    size_t n;
    bool dev_dir; /* /dev/infiniband exists */
};

static bool rdma_expect_none(const struct pf_ctx *ctx)
{
    return ctx->config && ctx->config->expect_rdma == PF_RDMA_NONE;
}

static const char *errno_name(int e)
{
    switch (e) {
    case ENXIO:
        return "ENXIO";
    case ENODEV:
        return "ENODEV";
    case EACCES:
        return "EACCES";
    case EPERM:
        return "EPERM";
    case ENOENT:
        return "ENOENT";
    case EBUSY:
        return "EBUSY";
    case EIO:
        return "EIO";
    case EINVAL:
        return "EINVAL";
    case EISDIR:
        return "EISDIR";
    default:
        return "errno";
    }
}

/* Opens a uverbs node read-write and closes it again; 0, or the errno. */
static int probe_open(struct hca *hc, const struct pf_host *h)
{
    char path[PF_HOST_PATH_MAX];
    if (pf_host_path(path, sizeof(path), h, DEV_IB "/%s", hc->uverbs) < 0) {
        snprintf(hc->why, sizeof(hc->why), "%s", pf_err_msg());
        return EINVAL;
    }
    struct stat st;
    if (stat(path, &st) != 0) return errno;
    /* a regular file only stands in for a node in trees made without root */
    if (!S_ISCHR(st.st_mode) && !S_ISREG(st.st_mode)) {
        snprintf(hc->why, sizeof(hc->why), DEV_IB "/%s is not a character device", hc->uverbs);
        return ENODEV;
    }
    int fd = open(path, O_RDWR | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        int e = errno;
        const char *hint = "";
        if (e == ENXIO || e == ENODEV)
            hint = ": no driver behind it (the node's major:minor is not a loaded uverbs device)";
        else if (e == EACCES || e == EPERM)
            hint = ": not allowed (the container's device cgroup or the node's mode forbids it)";
        snprintf(hc->why, sizeof(hc->why), "open(" DEV_IB "/%s, O_RDWR) failed with %s (%s)%s",
                 hc->uverbs, errno_name(e), strerror(e), hint);
        return e;
    }
    close(fd);
    return 0;
}

/* Lists the HCAs of ctx, maps each to its uverbsN through sysfs, and looks for its node
 * (opening it when open_nodes). */
static void hca_scan(struct hca_set *s, struct pf_ctx *ctx, bool open_nodes)
{
    const struct pf_host *h = &ctx->host;
    memset(s, 0, sizeof(*s));
    s->n = ctx->hcas.n;
    s->v = s->n ? pf_xcalloc(s->n, sizeof(*s->v)) : NULL;
    struct stat st;
    s->dev_dir = pf_host_stat(&st, h, DEV_IB) == 0 && S_ISDIR(st.st_mode);

    struct pf_strlist verbs = {0};
    (void)pf_host_list(&verbs, h, SYS_VERBS);
    char unreadable[160] = "";
    for (size_t i = 0; i < s->n; i++) {
        snprintf(s->v[i].name, sizeof(s->v[i].name), "%s", ctx->hcas.v[i]);
        pf_rdma_identify(&s->v[i].id, h, s->v[i].name);
    }
    for (size_t j = 0; j < verbs.n; j++) {
        if (strncmp(verbs.v[j], "uverbs", 6) != 0) continue; /* abi_version */
        char ibdev[128];
        if (pf_host_read(ibdev, sizeof(ibdev), h, SYS_VERBS "/%s/ibdev", verbs.v[j]) <= 0) {
            if (!unreadable[0])
                snprintf(unreadable, sizeof(unreadable), SYS_VERBS "/%s/ibdev is %s", verbs.v[j],
                         pf_host_exists(h, SYS_VERBS "/%s/ibdev", verbs.v[j])
                             ? "empty or unreadable"
                             : "missing");
            continue;
        }
        pf_trim(ibdev);
        for (size_t i = 0; i < s->n; i++)
            if (strcmp(s->v[i].name, ibdev) == 0 && !s->v[i].uverbs[0])
                snprintf(s->v[i].uverbs, sizeof(s->v[i].uverbs), "%s", verbs.v[j]);
    }
    pf_strlist_free(&verbs);

    for (size_t i = 0; i < s->n; i++) {
        struct hca *hc = &s->v[i];
        if (!hc->uverbs[0]) {
            hc->node = NODE_NO_UVERBS;
            hc->ibdev_unread = unreadable[0] != '\0';
            snprintf(hc->why, sizeof(hc->why), "no " SYS_VERBS "/uverbsN/ibdev names %s%s%s",
                     hc->name, unreadable[0] ? "; " : " (is ib_uverbs loaded on the node?)",
                     unreadable);
            continue;
        }
        if (!pf_host_exists(h, DEV_IB "/%s", hc->uverbs)) {
            hc->node = NODE_MISSING;
            continue;
        }
        if (!open_nodes) {
            hc->node = NODE_PRESENT;
            continue;
        }
        int e = probe_open(hc, h);
        hc->node = e == 0 ? NODE_OPENABLE : e == ENOENT ? NODE_MISSING : NODE_UNOPENABLE;
    }
}

static void hca_set_free(struct hca_set *s)
{
    free(s->v);
    s->v = NULL;
    s->n = 0;
}

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

/* the pod was given it: its uverbs node is in the pod */
static bool in_pod(const struct hca *h)
{
    return h->node == NODE_PRESENT || h->node == NODE_OPENABLE || h->node == NODE_UNOPENABLE;
}
static bool is_usable(const struct hca *h)
{
    return h->node == NODE_OPENABLE;
}
/* in the pod, or cannot tell (no uverbs mapping in sysfs) */
static bool is_in_scope(const struct hca *h)
{
    return h->node != NODE_MISSING;
}

/* How many HCAs of s pass. */
static size_t hca_count(const struct hca_set *s, bool (*pass)(const struct hca *))
{
    size_t n = 0;
    for (size_t i = 0; i < s->n; i++)
        n += pass(&s->v[i]);
    return n;
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

    if (rdma_expect_none(ctx)) {
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
    hca_scan(&s, ctx, true);
    size_t usable = hca_count(&s, is_usable);
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
        if (!s.dev_dir || !in_pod(&s.v[i])) continue;
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
                         !s.dev_dir || hca_count(&s, in_pod) == 0
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
    hca_set_free(&s);
}

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
    if (rdma_expect_none(ctx)) {
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
    hca_scan(&s, ctx, false);
    size_t in_pod = hca_count(&s, is_in_scope);
    pf_node_set_str(out->evidence, "scope",
                    in_pod < s.n ? "HCAs with a uverbs node in the pod" : "every HCA in sysfs");

    struct port *ports = NULL;
    size_t nports = 0, cap = 0;
    struct pf_node *seq = pf_node_set_seq(out->evidence, "ports");
    for (size_t i = 0; i < s.n; i++) {
        if (in_pod && !is_in_scope(&s.v[i])) continue;
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
    hca_set_free(&s);
}

/* ---- rdma.gpudirect */

static const char *const peermem_paths[] = {
    "/sys/kernel/mm/memory_peers/nv_mem/version",
    "/sys/kernel/mm/memory_peers/nv_mem_nc/version",
    "/sys/module/nvidia_peermem/version",
};

/* Kernel release from the root's /proc/sys/kernel/osrelease, else uname. */
static void kernel_release(char *out, size_t n, const struct pf_host *h)
{
    if (pf_host_read(out, n, h, "/proc/sys/kernel/osrelease") > 0) {
        pf_trim(out);
        return;
    }
    struct utsname u;
    snprintf(out, n, "%s", uname(&u) == 0 ? u.release : "");
}

void pf_check_rdma_gpudirect(struct pf_check *out, struct pf_ctx *ctx)
{
    const struct pf_host *h = &ctx->host;
    if (rdma_expect_none(ctx)) {
        pf_check_skip(out, "expect.rdma is none");
        return;
    }
    if (ctx->gpus.n == 0 || ctx->hcas.n == 0) {
        pf_check_skip(out, "needs both GPUs and RDMA devices (%zu GPU%s, %zu HCA%s)", ctx->gpus.n,
                      ctx->gpus.n == 1 ? "" : "s", ctx->hcas.n, ctx->hcas.n == 1 ? "" : "s");
        return;
    }
    struct pf_node *ev = out->evidence;
    const char *peermem = NULL;
    for (size_t i = 0; i < PF_ARRAY_LEN(peermem_paths) && !peermem; i++)
        if (pf_host_exists(h, "%s", peermem_paths[i])) peermem = peermem_paths[i];
    if (peermem) {
        char ver[64];
        pf_node_set_str(ev, "peermem", peermem);
        if (pf_host_read(ver, sizeof(ver), h, "%s", peermem) > 0)
            pf_node_set_str(ev, "peermemVersion", pf_trim(ver));
    }

    char rel[256];
    kernel_release(rel, sizeof(rel), h);
    int major = 0, minor = 0;
    bool kernel_known = sscanf(rel, "%d.%d", &major, &minor) == 2;
    bool kernel_ok = kernel_known && (major > 5 || (major == 5 && minor >= 12));
    char ver[1024];
    /* the driver writes "NVRM version: NVIDIA UNIX [Open ]Kernel Module ..." (nv.c); a line
     * without "Kernel Module" says neither */
    bool have_ver = pf_host_read(ver, sizeof(ver), h, "/proc/driver/nvidia/version") > 0 &&
                    strstr(ver, "Kernel Module") != NULL;
    bool open_module = have_ver && strstr(ver, "Open Kernel Module") != NULL;
    bool dmabuf = kernel_ok && open_module;
    pf_node_set_str(ev, "kernel", rel);
    pf_node_set_bool(ev, "openKernelModule", open_module);
    pf_node_set_bool(ev, "dmabuf", dmabuf);

    if (peermem && dmabuf)
        pf_check_set_message(out, "peer memory (%s) and dma-buf (kernel %s, open GPU module)",
                             peermem, rel);
    else if (peermem)
        pf_check_set_message(out, "peer memory: %s", peermem);
    else if (dmabuf)
        pf_check_set_message(out, "dma-buf: kernel %s with the open GPU kernel module", rel);
    else if (!kernel_known || (kernel_ok && !have_ver)) {
        /* dma-buf needs both: without the kernel's release or the driver's version line
         * (NVRM version: "... Open Kernel Module ...") it may be there */
        if (!kernel_known)
            pf_check_unknown(out, "no-gpudirect",
                             "nvidia_peermem is not loaded, and whether dma-buf is possible: "
                             "kernel release \"%.64s\" does not parse",
                             rel);
        else
            pf_check_unknown(out, "no-gpudirect",
                             "nvidia_peermem is not loaded, and whether dma-buf is possible: "
                             "/proc/driver/nvidia/version is missing or names no kernel module "
                             "(open or proprietary)");
        pf_check_set_message(out, "no GPUDirect RDMA path found, none ruled out");
    } else {
        char why[320];
        if (!kernel_ok)
            snprintf(why, sizeof(why), "kernel %.64s is older than 5.12%s", rel,
                     open_module ? "" : " and the NVIDIA kernel module is not the open one");
        else
            snprintf(why, sizeof(why), "the NVIDIA kernel module is not the open one");
        pf_check_add_finding(out, "no-gpudirect", PF_WARN, NULL,
                             "no GPUDirect RDMA path: nvidia_peermem is not loaded (none of %s, "
                             "%s, %s) and dma-buf is not possible (%s)",
                             peermem_paths[0], peermem_paths[1], peermem_paths[2], why);
    }
}
