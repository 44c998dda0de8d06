/* net.sriov: the PCI functions the SR-IOV device plugin gave the pod (PCIDEVICE_* variables,
 * PCIDEVICE_*_INFO, network-status device-info): present, bound, netdev and RDMA children
 * visible, uverbs nodes mounted; and NCCL_IB_HCA against the RDMA devices given. */
#define _GNU_SOURCE
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <strings.h>

#include "../k8s/k8s.h"
#include "../ncclenv/ncclenv.h"
#include "checks.h"

#define MAX_DEVS 256

struct sdev {
    char id[64]; /* PCI address, or an auxiliary device name */
    bool is_bdf;
    struct pf_strlist sources; /* variables / networks that name it */
    bool rdma_expected;
    char rdma_why[400];
    struct pf_strlist rdma_named; /* RDMA devices the plugin or device-info names for it */
    struct pf_strlist uverbs_named;
    /* a Mellanox function (mlx5_core) with no RDMA device, where nothing made RDMA expected
     * for it: judged after every function is seen (other RDMA devices make it a failure) */
    bool mlx_no_rdma;
    char what[160];
};

struct sriov {
    struct sdev *v;
    size_t n;
    struct pf_strlist given_rdma;  /* every RDMA device this pod was given */
    struct pf_strlist checked;     /* RDMA devices and uverbs paths already reported */
    struct pf_strlist verbs_names; /* uverbsN entries of /sys/class/infiniband_verbs */
    struct pf_strlist verbs_ibdev; /* parallel: their ibdev */
};

static struct sdev *get_dev(struct sriov *s, const char *id, bool is_bdf, const char *source)
{
    struct sdev *d = NULL;
    for (size_t i = 0; i < s->n && !d; i++)
        if (strcmp(s->v[i].id, id) == 0) d = &s->v[i];
    if (!d) {
        if (s->n >= MAX_DEVS) return NULL;
        s->v = pf_xrealloc(s->v, (s->n + 1) * sizeof(*s->v));
        d = &s->v[s->n++];
        memset(d, 0, sizeof(*d));
        snprintf(d->id, sizeof(d->id), "%s", id);
        d->is_bdf = is_bdf;
    }
    if (source && !pf_strlist_has(&d->sources, source)) pf_strlist_add(&d->sources, source);
    return d;
}

static void expect_rdma(struct sdev *d, const char *why)
{
    if (d->rdma_expected) return;
    d->rdma_expected = true;
    snprintf(d->rdma_why, sizeof(d->rdma_why), "%s", why);
}

/* An auxiliary device name as the device plugin hands out for scalable functions
 * ("mlx5_core.sf.4"): no ':' and a '.'. */
static bool aux_name(const char *s)
{
    if (!*s || strchr(s, ':') || !strchr(s, '.') || strlen(s) >= 64) return false;
    for (const char *p = s; *p; p++)
        if (!(isalnum((unsigned char)*p) || *p == '.' || *p == '_' || *p == '-')) return false;
    return true;
}

static void from_env(struct sriov *s, struct pf_check *out, const struct pf_ctx *ctx)
{
    for (size_t i = 0; i < ctx->env.vars.n; i++) {
        const char *kv = ctx->env.vars.v[i];
        if (!pf_str_starts(kv, "PCIDEVICE_")) continue;
        const char *eq = strchr(kv, '=');
        char name[256];
        snprintf(name, sizeof(name), "%.*s", (int)(eq - kv), kv);
        const char *val = eq + 1;
        while (isspace((unsigned char)*val))
            val++;
        if (*val == '{') {
            struct pf_k8s_pciinfo info;
            if (pf_k8s_pciinfo_parse(&info, val, strlen(val)) < 0) {
                pf_check_add_finding(out, "pcidevice-invalid", PF_WARN, NULL, "%s: %s", name,
                                     pf_err_msg());
                continue;
            }
            for (size_t k = 0; k < info.n; k++) {
                const struct pf_k8s_pciinfo_dev *pd = &info.v[k];
                char bdf[PF_K8S_BDF_MAX];
                bool is_bdf = pf_k8s_bdf_parse(bdf, pd->device) == 0;
                struct sdev *d = get_dev(s, is_bdf ? bdf : pd->device, is_bdf, name);
                if (!d || !pd->rdma) continue;
                char why[320];
                snprintf(why, sizeof(why), "%s lists an rdma provider for it", name);
                expect_rdma(d, why);
                if (*pd->rdma_dev && !pf_strlist_has(&d->rdma_named, pd->rdma_dev))
                    pf_strlist_add(&d->rdma_named, pd->rdma_dev);
                if (*pd->uverbs && !pf_strlist_has(&d->uverbs_named, pd->uverbs))
                    pf_strlist_add(&d->uverbs_named, pd->uverbs);
            }
            pf_k8s_pciinfo_free(&info);
            continue;
        }
        char *copy = pf_xstrdup(val);
        for (char *save = NULL, *t = strtok_r(copy, ",", &save); t;
             t = strtok_r(NULL, ",", &save)) {
            pf_trim(t);
            if (!*t) continue;
            char bdf[PF_K8S_BDF_MAX];
            if (pf_k8s_bdf_parse(bdf, t) == 0)
                get_dev(s, bdf, true, name);
            else if (aux_name(t))
                get_dev(s, t, false, name);
            else
                pf_check_add_finding(out, "pcidevice-invalid", PF_WARN, NULL,
                                     "%s holds %.64s, which is neither a PCI address nor an "
                                     "auxiliary device name",
                                     name, t);
        }
        free(copy);
        pf_err_clear();
    }
}

static void from_netstatus(struct sriov *s, const struct pf_ctx *ctx)
{
    struct pf_k8s_podinfo pi;
    (void)pf_k8s_podinfo_read_env(&pi, &ctx->host, &ctx->env);
    struct pf_k8s_netstatus ns;
    if (pi.netstatus && pf_k8s_netstatus_parse(&ns, pi.netstatus, strlen(pi.netstatus)) == 0) {
        for (size_t i = 0; i < ns.n; i++) {
            const struct pf_k8s_network *n = &ns.v[i];
            char bdf[PF_K8S_BDF_MAX];
            if (!*n->pci_address || pf_k8s_bdf_parse(bdf, n->pci_address) < 0) continue;
            char src[300];
            snprintf(src, sizeof(src), "network-status %.200s", n->name);
            struct sdev *d = get_dev(s, bdf, true, src);
            if (!d) continue;
            for (size_t k = 0; k < n->rdma_devices.n; k++) {
                char why[320];
                snprintf(why, sizeof(why),
                         "the network-status device-info of %.200s names an rdma-device", n->name);
                expect_rdma(d, why);
                if (!pf_strlist_has(&d->rdma_named, n->rdma_devices.v[k]))
                    pf_strlist_add(&d->rdma_named, n->rdma_devices.v[k]);
            }
        }
        pf_k8s_netstatus_free(&ns);
    }
    pf_k8s_podinfo_free(&pi);
    pf_err_clear();
}

static void load_verbs(struct sriov *s, const struct pf_host *h)
{
    struct pf_strlist l = {0};
    (void)pf_host_list(&l, h, "/sys/class/infiniband_verbs");
    for (size_t i = 0; i < l.n; i++) {
        char ibdev[128];
        if (!pf_str_starts(l.v[i], "uverbs") ||
            pf_host_read(ibdev, sizeof(ibdev), h, "/sys/class/infiniband_verbs/%s/ibdev", l.v[i]) <
                0)
            continue;
        pf_strlist_add(&s->verbs_names, l.v[i]);
        pf_strlist_add(&s->verbs_ibdev, pf_trim(ibdev));
    }
    pf_strlist_free(&l);
    pf_err_clear();
}

static const char *uverbs_of(const struct sriov *s, const char *ibdev)
{
    for (size_t i = 0; i < s->verbs_ibdev.n; i++)
        if (strcmp(s->verbs_ibdev.v[i], ibdev) == 0) return s->verbs_names.v[i];
    return NULL;
}

/* One RDMA device of function d: in /sys/class/infiniband, with its uverbs node mounted. */
static void check_rdma_dev(struct sriov *s, struct pf_check *out, const struct pf_ctx *ctx,
                           const struct sdev *d, const char *ib, struct pf_node *evr)
{
    if (pf_strlist_has(&s->checked, ib)) return;
    pf_strlist_add(&s->checked, ib);
    struct pf_node *m = pf_node_add_map(evr);
    pf_node_set_str(m, "name", ib);
    if (!pf_host_exists(&ctx->host, "/sys/class/infiniband/%s", ib)) {
        struct stat st;
        if (pf_host_stat(&st, &ctx->host, "/sys/class/infiniband") < 0 || !S_ISDIR(st.st_mode)) {
            /* no listing to be absent from: sysfs not mounted, or not the node's */
            pf_check_unknown(out, "vf-no-rdma",
                             "%s names RDMA device %s for %s, but /sys/class/infiniband cannot "
                             "be read (%s)",
                             d->sources.n ? d->sources.v[0] : "the device plugin", ib, d->id,
                             pf_err_msg());
            pf_err_clear();
            return;
        }
        pf_check_add_finding(out, "vf-no-rdma", PF_FAIL, NULL,
                             "%s names RDMA device %s for %s, but /sys/class/infiniband has no "
                             "%s",
                             d->sources.n ? d->sources.v[0] : "the device plugin", ib, d->id, ib);
        return;
    }
    if (!pf_strlist_has(&s->given_rdma, ib)) pf_strlist_add(&s->given_rdma, ib);
    const char *u = uverbs_of(s, ib);
    if (!u) {
        pf_check_add_finding(out, "vf-no-uverbs", PF_FAIL, NULL,
                             "RDMA device %s (%s) has no uverbs device in "
                             "/sys/class/infiniband_verbs: is ib_uverbs loaded on the node?",
                             ib, d->id);
        return;
    }
    pf_node_set_strf(m, "uverbs", "/dev/infiniband/%s", u);
    bool present = pf_host_exists(&ctx->host, "/dev/infiniband/%s", u);
    pf_node_set_bool(m, "uverbsPresent", present);
    char path[64];
    snprintf(path, sizeof(path), "/dev/infiniband/%s", u);
    pf_strlist_add(&s->checked, path);
    if (!present)
        pf_check_add_finding(out, "vf-no-uverbs", PF_FAIL, NULL,
                             "RDMA device %s (%s) has no /dev/infiniband/%s in this pod: the "
                             "device plugin did not mount it, so verbs cannot open the device",
                             ib, d->id, u);
}

/* The link layer of port 1 of an RDMA device ("InfiniBand", "Ethernet"), or "". */
static void link_layer(char *out, size_t n, const struct pf_host *h, const char *ib)
{
    if (pf_host_read(out, n, h, "/sys/class/infiniband/%s/ports/1/link_layer", ib) < 0)
        out[0] = '\0';
    pf_err_clear();
}

static void check_dev(struct sriov *s, struct pf_check *out, const struct pf_ctx *ctx,
                      struct sdev *d, struct pf_node *ev)
{
    const struct pf_host *h = &ctx->host;
    const char *bus = d->is_bdf ? "pci" : "auxiliary";
    char base[256];
    snprintf(base, sizeof(base), "/sys/bus/%s/devices/%s", bus, d->id);
    char from[512];
    pf_strlist_join(from, sizeof(from), &d->sources, ", ");
    struct pf_node *m = pf_node_add_map(ev);
    pf_node_set_str(m, d->is_bdf ? "pciAddress" : "auxDevice", d->id);
    struct pf_node *src = pf_node_set_seq(m, "from");
    for (size_t i = 0; i < d->sources.n; i++)
        pf_node_add_str(src, d->sources.v[i]);
    if (!pf_host_exists(h, "%s", base)) {
        struct stat st;
        if (pf_host_stat(&st, h, "/sys/bus/%s/devices", bus) < 0 || !S_ISDIR(st.st_mode)) {
            /* no listing to be absent from: sysfs not mounted, or not the node's */
            pf_check_unknown(out, "vf-missing",
                             "%s (from %s): /sys/bus/%s/devices cannot be read (%s)", d->id, from,
                             bus, pf_err_msg());
            pf_err_clear();
            return;
        }
        pf_node_set_bool(m, "present", false);
        pf_check_add_finding(out, "vf-missing", PF_FAIL, NULL,
                             "%s (from %s) is not in /sys/bus/%s/devices: the device plugin "
                             "handed out a function this node does not have (VFs re-created "
                             "since the plugin started?)",
                             d->id, from, bus);
        return;
    }
    pf_node_set_bool(m, "present", true);
    char drv[128] = "", pf[64] = "";
    bool bound = pf_host_link_basename(drv, sizeof(drv), h, "%s/driver", base) == 0;
    bool vf = d->is_bdf && pf_host_link_basename(pf, sizeof(pf), h, "%s/physfn", base) == 0;
    bool is_pf = d->is_bdf && !vf && pf_host_exists(h, "%s/sriov_totalvfs", base);
    pf_err_clear();
    pf_node_set_str(m, "role", vf ? "vf" : is_pf ? "pf" : d->is_bdf ? "function" : "sf");
    if (vf) pf_node_set_str(m, "pf", pf);
    if (bound) pf_node_set_str(m, "driver", drv);
    long long numa;
    if (pf_host_read_ll(&numa, h, "%s/numa_node", base) == 0) pf_node_set_int(m, "numaNode", numa);
    pf_err_clear();
    char what[160];
    if (vf)
        snprintf(what, sizeof(what), "%s (VF of %s)", d->id, pf);
    else
        snprintf(what, sizeof(what), "%s", d->id);
    if (!bound) {
        pf_check_add_finding(out, "vf-unbound", PF_FAIL, NULL,
                             "%s is bound to no driver (no %s/driver link): no netdev or RDMA "
                             "device can exist for it",
                             what, base);
        return;
    }
    if (strcmp(drv, "vfio-pci") == 0) {
        /* a userspace (DPDK) pool: no kernel netdev or RDMA device by design */
        pf_node_set_str(m, "note", "bound to vfio-pci: no kernel netdev or RDMA device");
        if (d->rdma_expected)
            pf_check_add_finding(out, "vf-no-rdma", PF_FAIL, NULL,
                                 "%s is bound to vfio-pci, but %s: an RDMA pool must keep the "
                                 "kernel driver (e.g. mlx5_core)",
                                 what, d->rdma_why);
        return;
    }
    struct pf_strlist net = {0}, ib = {0};
    (void)pf_host_list(&net, h, "%s/net", base);
    (void)pf_host_list(&ib, h, "%s/infiniband", base);
    pf_err_clear();
    struct pf_node *evn = pf_node_set_seq(m, "netdevs");
    for (size_t i = 0; i < net.n; i++)
        pf_node_add_str(evn, net.v[i]);
    struct pf_node *evr = pf_node_set_seq(m, "rdmaDevices");
    for (size_t i = 0; i < ib.n; i++)
        check_rdma_dev(s, out, ctx, d, ib.v[i], evr);

    if (net.n == 0) {
        char ll[32] = "";
        if (ib.n) link_layer(ll, sizeof(ll), h, ib.v[0]);
        bool infiniband = strcmp(ll, "InfiniBand") == 0;
        pf_check_add_finding(
            out, "vf-no-netdev", infiniband ? PF_WARN : PF_FAIL, NULL,
            "%s (%s) has no network interface in this pod's network namespace: "
            "no CNI moved it here (is a NetworkAttachmentDefinition for its "
            "resource in the pod's networks annotation?)%s",
            what, drv, infiniband ? "; its RDMA port is InfiniBand, so verbs may still work" : "");
    }
    if (ib.n == 0 && d->rdma_expected)
        pf_check_add_finding(out, "vf-no-rdma", PF_FAIL, NULL,
                             "%s (%s) has no RDMA device (no infiniband/ child), although %s: "
                             "the RDMA driver (mlx5_ib) is not bound to it, or the RDMA subsystem "
                             "is in exclusive mode and the device sits in another namespace",
                             what, drv, d->rdma_why);
    else if (ib.n == 0 && strcmp(drv, "mlx5_core") == 0) {
        d->mlx_no_rdma = true;
        snprintf(d->what, sizeof(d->what), "%s", what);
    }
    /* the devices the plugin or device-info name, when they are not this function's children */
    for (size_t i = 0; i < d->rdma_named.n; i++)
        if (!pf_strlist_has(&ib, d->rdma_named.v[i]) && (ib.n > 0 || !d->rdma_expected))
            check_rdma_dev(s, out, ctx, d, d->rdma_named.v[i], evr);
    for (size_t i = 0; i < d->uverbs_named.n && (ib.n > 0 || !d->rdma_expected); i++) {
        const char *u = d->uverbs_named.v[i];
        if (pf_strlist_has(&s->checked, u)) continue;
        pf_strlist_add(&s->checked, u);
        if (!pf_host_exists(h, "%s", u))
            pf_check_add_finding(out, "vf-no-uverbs", PF_FAIL, NULL,
                                 "%s names %s for %s, but the pod has no such device node", from, u,
                                 d->id);
    }
    pf_strlist_free(&net);
    pf_strlist_free(&ib);
}

/* Whether anything but the function itself says the pod means to use RDMA: why into out. */
static bool rdma_wanted(char *out, size_t n, const struct sriov *s, const struct pf_ctx *ctx)
{
    const char *hca = pf_env_get(&ctx->env, "NCCL_IB_HCA");
    const char *net = pf_env_get(&ctx->env, "NCCL_NET");
    struct pf_strlist nodes = {0};
    (void)pf_host_list(&nodes, &ctx->host, "/dev/infiniband");
    pf_err_clear();
    size_t uverbs = 0;
    for (size_t i = 0; i < nodes.n; i++)
        uverbs += pf_str_starts(nodes.v[i], "uverbs");
    pf_strlist_free(&nodes);
    char given[300];
    pf_strlist_join(given, sizeof(given), &s->given_rdma, ", ");
    if (hca && *hca)
        snprintf(out, n, "NCCL_IB_HCA=%.100s is set", hca);
    else if (net && strcasecmp(net, "IB") == 0)
        snprintf(out, n, "NCCL_NET=%s is set", net);
    else if (ctx->config && strcasecmp(ctx->config->expect_transport, "IB") == 0)
        snprintf(out, n, "expect.transport is IB");
    else if (s->given_rdma.n)
        snprintf(out, n, "the pod's other functions have RDMA devices (%s)", given);
    else if (uverbs)
        snprintf(out, n, "the pod has %zu uverbs node%s in /dev/infiniband", uverbs,
                 uverbs == 1 ? "" : "s");
    else
        return false;
    return true;
}

/* Mellanox functions without an RDMA device that nothing marked as RDMA functions: a failure
 * when the pod otherwise means to use RDMA, else a warning (a plain netdevice pool is fine). */
static void check_mlx_no_rdma(const struct sriov *s, struct pf_check *out, const struct pf_ctx *ctx)
{
    char why[400];
    bool wanted = rdma_wanted(why, sizeof(why), s, ctx);
    for (size_t i = 0; i < s->n; i++) {
        const struct sdev *d = &s->v[i];
        if (!d->mlx_no_rdma) continue;
        if (wanted)
            pf_check_add_finding(out, "vf-no-rdma", PF_FAIL, NULL,
                                 "%s (mlx5_core) has no RDMA device (no infiniband/ child), "
                                 "although %s: verbs fail on this rail (mlx5_ib is not bound to "
                                 "it, or the RDMA subsystem is in exclusive mode and the device "
                                 "sits in another namespace)",
                                 d->what, why);
        else
            pf_check_add_finding(out, "vf-no-rdma", PF_WARN, NULL,
                                 "%s (mlx5_core) has no RDMA device (no infiniband/ child): "
                                 "verbs cannot use this rail (mlx5_ib is not bound to it, or the "
                                 "RDMA subsystem is in exclusive mode and the device sits in "
                                 "another namespace); nothing else in the pod asks for RDMA, "
                                 "so this is fine only for a TCP-only (netdevice) pool",
                                 d->what);
    }
}

/* NCCL_IB_HCA against the RDMA devices the pod was given. */
static void check_ib_hca(struct sriov *s, struct pf_check *out, const struct pf_ctx *ctx)
{
    const char *hca = pf_env_get(&ctx->env, "NCCL_IB_HCA");
    if (!hca || !*hca || s->given_rdma.n == 0) return;
    struct pf_ncclenv_list l;
    if (pf_ncclenv_list_parse(&l, hca) < 0) {
        pf_err_clear();
        return; /* nccl.env reports a list NCCL would misread */
    }
    char given[512];
    pf_strlist_join(given, sizeof(given), &s->given_rdma, ", ");
    size_t selected = 0;
    for (size_t i = 0; i < s->given_rdma.n; i++)
        if (pf_ncclenv_list_match(&l, s->given_rdma.v[i], -1)) selected++;
    char csv[512], remedy[700];
    pf_strlist_join(csv, sizeof(csv), &s->given_rdma, ",");
    snprintf(remedy, sizeof(remedy),
             "set NCCL_IB_HCA to the devices this pod was given (NCCL_IB_HCA==%s) in the pod "
             "spec's env, or remove it: NCCL then uses every device it can open",
             csv);
    if (l.exclude) {
        if (selected == 0)
            pf_check_add_finding(out, "hca-not-allocated", PF_FAIL, remedy,
                                 "NCCL_IB_HCA=%s excludes every RDMA device this pod was given "
                                 "(%s): NCCL finds no HCA and falls back to TCP sockets",
                                 hca, given);
        return;
    }
    struct pf_strlist unmatched = {0};
    for (size_t e = 0; e < l.n; e++) {
        struct pf_ncclenv_list one = {.exclude = false, .exact = l.exact, .n = 1};
        one.v[0] = l.v[e];
        bool any = false;
        for (size_t i = 0; i < s->given_rdma.n && !any; i++)
            any = pf_ncclenv_list_match(&one, s->given_rdma.v[i], -1);
        if (!any) pf_strlist_add(&unmatched, l.v[e].name);
    }
    if (unmatched.n) {
        char names[512];
        pf_strlist_join(names, sizeof(names), &unmatched, ", ");
        if (selected == 0)
            pf_check_add_finding(out, "hca-not-allocated", PF_FAIL, remedy,
                                 "NCCL_IB_HCA=%s names %s, which this pod was not given (its RDMA "
                                 "devices: %s): NCCL cannot open any of them and falls back to "
                                 "TCP sockets",
                                 hca, names, given);
        else
            pf_check_add_finding(out, "hca-not-allocated", PF_WARN, remedy,
                                 "NCCL_IB_HCA=%s names %s, which this pod was not given (its RDMA "
                                 "devices: %s): NCCL warns and uses fewer HCAs than listed",
                                 hca, names, given);
    }
    pf_strlist_free(&unmatched);
}

void pf_check_net_sriov(struct pf_check *out, struct pf_ctx *ctx)
{
    struct sriov s = {0};
    from_env(&s, out, ctx);
    from_netstatus(&s, ctx);
    if (ctx->config && ctx->config->expect_rdma == PF_RDMA_REQUIRED)
        for (size_t i = 0; i < s.n; i++)
            expect_rdma(&s.v[i], "expect.rdma is required");
    if (s.n == 0) {
        if (out->nfindings == 0)
            pf_check_skip(out, "no SR-IOV devices in this pod (no PCIDEVICE_* variables, no "
                               "device-info in the network-status)");
        goto out;
    }
    load_verbs(&s, &ctx->host);
    struct pf_node *ev = pf_node_set_seq(out->evidence, "devices");
    size_t before = out->nfindings;
    for (size_t i = 0; i < s.n; i++)
        check_dev(&s, out, ctx, &s.v[i], ev);
    check_mlx_no_rdma(&s, out, ctx);
    bool devs_ok = out->nfindings == before;
    if (s.given_rdma.n) {
        struct pf_node *g = pf_node_set_seq(out->evidence, "rdmaDevices");
        for (size_t i = 0; i < s.given_rdma.n; i++)
            pf_node_add_str(g, s.given_rdma.v[i]);
    }
    check_ib_hca(&s, out, ctx);
    static const char *const fallback[] = {"hca-not-allocated", NULL};
    pf_checks_net_remedies(out, ctx, 0, fallback);
    if (devs_ok) {
        char rd[400] = "none";
        if (s.given_rdma.n) pf_strlist_join(rd, sizeof(rd), &s.given_rdma, ", ");
        pf_check_set_message(out, "%zu SR-IOV function%s present and bound; RDMA devices: %s", s.n,
                             s.n == 1 ? "" : "s", rd);
    }
out:
    for (size_t i = 0; i < s.n; i++) {
        pf_strlist_free(&s.v[i].sources);
        pf_strlist_free(&s.v[i].rdma_named);
        pf_strlist_free(&s.v[i].uverbs_named);
    }
    free(s.v);
    pf_strlist_free(&s.given_rdma);
    pf_strlist_free(&s.checked);
    pf_strlist_free(&s.verbs_names);
    pf_strlist_free(&s.verbs_ibdev);
}
