/* net.multus: the Multus network-status annotation against the pod's real interfaces. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "../k8s/k8s.h"
#include "../ncclenv/ncclenv.h"
#include "../netif/netif.h"
#include "attach.h"
#include "checks.h"

#define POLL_S 0.2
#define PROGRESS_EVERY_S 2.0

static int read_podinfo(struct pf_k8s_podinfo *pi, const struct pf_ctx *ctx)
{
    return pf_k8s_podinfo_read_env(pi, &ctx->host, &ctx->env);
}

static void sleep_s(double s)
{
    if (s <= 0) return;
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

/* Reads the podinfo folder; while the network-status is missing although it is expected (the
 * config lists networks, the pod asked Multus for some, or the key is there but empty: the
 * initContainer's first start, multus-cni #1113), re-reads it for podinfo_wait_s, never past
 * the run's deadline. The downward-API volume is refreshed in place; a variable is not, so
 * only a mounted annotations file is worth waiting for. */
static int load_podinfo(struct pf_k8s_podinfo *pi, struct pf_ctx *ctx, bool expected,
                        double *waited)
{
    *waited = 0;
    int r = read_podinfo(pi, ctx);
    if (r < 0 || pi->netstatus || !pi->have_annotations) return r;
    if (!(expected || pi->networks_requested || pi->netstatus_empty)) return 0;
    double budget = ctx->config ? ctx->config->podinfo_wait_s : 10;
    double left = pf_ctx_left(ctx, 0);
    if (budget > left) budget = left;
    double t0 = pf_now(), next = 0;
    while (budget > 0) {
        double el = pf_now() - t0;
        if (el >= budget) break;
        if (el >= next) {
            pf_ctx_progress(ctx,
                            "waiting for the Multus network-status annotation in %s/annotations "
                            "(%.0f of %.0f s)",
                            pi->dir, el, budget);
            next += PROGRESS_EVERY_S;
        }
        sleep_s(budget - el < POLL_S ? budget - el : POLL_S);
        pf_k8s_podinfo_free(pi);
        r = read_podinfo(pi, ctx);
        if (r < 0 || pi->netstatus || !pi->have_annotations) break;
    }
    *waited = pf_now() - t0;
    if (pi->netstatus)
        pf_ctx_progress(ctx, "the Multus network-status annotation arrived after %.1f s", *waited);
    return r;
}

static void join_names(char *out, size_t n, const struct pf_netif_list *ifs)
{
    struct pf_strlist l = {0};
    for (size_t i = 0; i < ifs->n; i++)
        pf_strlist_add(&l, ifs->v[i].name);
    if (l.n)
        pf_strlist_join(out, n, &l, ", ");
    else
        snprintf(out, n, "none");
    pf_strlist_free(&l);
}

static void join_addrs(char *out, size_t n, const struct pf_netif *nif)
{
    struct pf_strlist l = {0};
    for (size_t i = 0; i < nif->naddrs; i++)
        pf_strlist_add(&l, nif->addrs[i].text);
    if (l.n)
        pf_strlist_join(out, n, &l, ", ");
    else
        snprintf(out, n, "none");
    pf_strlist_free(&l);
}

/* An address NCCL or RoCE can use: IPv4, or IPv6 that is not link-local. */
static bool has_usable_addr(const struct pf_netif *nif)
{
    for (size_t i = 0; i < nif->naddrs; i++) {
        const char *t = nif->addrs[i].text;
        if (!strchr(t, ':') || strncasecmp(t, "fe80", 4) != 0) return true;
    }
    return false;
}

static void network_evidence(struct pf_node *m, const struct pf_k8s_network *n, bool cluster)
{
    pf_node_set_str(m, "name", n->name);
    if (*n->interface) pf_node_set_str(m, "interface", n->interface);
    struct pf_node *ips = pf_node_set_seq(m, "ips");
    for (size_t i = 0; i < n->ips.n; i++)
        pf_node_add_str(ips, n->ips.v[i]);
    if (*n->mac) pf_node_set_str(m, "mac", n->mac);
    if (n->mtu > 0) pf_node_set_int(m, "mtu", n->mtu);
    if (cluster) pf_node_set_bool(m, "default", true);
    if (n->has_device_info) {
        struct pf_node *d = pf_node_set_map(m, "deviceInfo");
        if (*n->di_type) pf_node_set_str(d, "type", n->di_type);
        if (*n->di_version) pf_node_set_str(d, "version", n->di_version);
        if (*n->pci_address) pf_node_set_str(d, "pciAddress", n->pci_address);
        if (*n->pf_pci_address) pf_node_set_str(d, "pfPciAddress", n->pf_pci_address);
        if (n->rdma_devices.n) {
            struct pf_node *s = pf_node_set_seq(d, "rdmaDevices");
            for (size_t i = 0; i < n->rdma_devices.n; i++)
                pf_node_add_str(s, n->rdma_devices.v[i]);
        }
    }
}

/* Checks one secondary network's interface. Returns true when it is healthy. */
static bool check_network(struct pf_check *out, const struct pf_ctx *ctx,
                          const struct pf_k8s_network *n, const struct pf_netif_list *ifs,
                          struct pf_node *ev)
{
    char have[512], addrs[512];
    if (!*n->interface) {
        /* Multus copies "interface" from the delegate's CNI result (pkg/types NetworkStatus);
         * a result without it says nothing about which interface to look for */
        pf_check_unknown(out, "iface-missing",
                         "network %s is listed without an interface name in the network-status "
                         "annotation",
                         n->name);
        return false;
    }
    const struct pf_netif *nif = pf_netif_find(ifs, n->interface);
    struct pf_node *st = pf_node_set_map(ev, "state");
    pf_node_set_bool(st, "present", nif != NULL);
    if (!nif) {
        join_names(have, sizeof(have), ifs);
        pf_check_add_finding(out, "iface-missing", PF_FAIL, NULL,
                             "%s should be attached as %s, but this pod's network namespace has no "
                             "%s (have: %s)",
                             n->name, n->interface, n->interface, have);
        return false;
    }
    pf_node_set_bool(st, "up", nif->up);
    pf_node_set_bool(st, "carrier", nif->carrier);
    pf_node_set_int(st, "mtu", nif->mtu);
    if (*nif->mac) pf_node_set_str(st, "mac", nif->mac);
    struct pf_node *sa = pf_node_set_seq(st, "addresses");
    for (size_t i = 0; i < nif->naddrs; i++)
        pf_node_add_strf(sa, "%s/%d", nif->addrs[i].text, nif->addrs[i].prefix_len);

    bool ok = true;
    if (!nif->up) {
        pf_check_add_finding(out, "iface-down", PF_FAIL, NULL, "%s (%s) is administratively down",
                             n->interface, n->name);
        ok = false;
    } else if (!nif->carrier) {
        pf_check_add_finding(out, "iface-down", PF_FAIL, NULL,
                             "%s (%s) is up but has no carrier: no link on the wire, at the "
                             "switch or on the PF",
                             n->interface, n->name);
        ok = false;
    }
    join_addrs(addrs, sizeof(addrs), nif);
    for (size_t i = 0; i < n->ips.n; i++) {
        if (pf_netif_has_addr(nif, n->ips.v[i])) continue;
        pf_check_add_finding(out, "ip-missing", PF_FAIL, NULL,
                             "%s (%s) does not hold %s, the address IPAM assigned (holds: %s)",
                             n->interface, n->name, n->ips.v[i], addrs);
        ok = false;
    }
    if (n->ips.n == 0 && !has_usable_addr(nif)) {
        pf_check_add_finding(out, "ip-missing", PF_WARN, NULL,
                             "%s (%s) has no IP address and the annotation lists none (IPAM gave "
                             "none): RoCE needs one for its GIDs, NCCL sockets need one",
                             n->interface, n->name);
        ok = false;
    }
    /* compare Ethernet MACs only (IPoIB's are 20 bytes) */
    if (strlen(n->mac) == 17 && strlen(nif->mac) == 17 && strcasecmp(n->mac, nif->mac) != 0) {
        pf_check_add_finding(out, "mac-mismatch", PF_WARN, NULL,
                             "%s has MAC %s, but the annotation says %s for %s: the interface may "
                             "not be the one Multus attached",
                             n->interface, nif->mac, n->mac, n->name);
        ok = false;
    }
    int want = ctx->config && ctx->config->expect_mtu > 0 ? ctx->config->expect_mtu : 0;
    if (want > 0 && nif->mtu != want) {
        char remedy[512];
        snprintf(remedy, sizeof(remedy),
                 "set \"mtu\": %d in the CNI config of NetworkAttachmentDefinition %s (an SR-IOV "
                 "VF cannot exceed its PF's MTU: raise the PF's on the node, and the switch "
                 "port's), or correct expect.mtu",
                 want, n->name);
        if (n->mtu > 0 && n->mtu != nif->mtu)
            pf_check_add_finding(out, "mtu", PF_FAIL, remedy,
                                 "%s (%s) has MTU %d, expect.mtu is %d (the annotation says %d)",
                                 n->interface, n->name, nif->mtu, want, n->mtu);
        else
            pf_check_add_finding(out, "mtu", PF_FAIL, remedy,
                                 "%s (%s) has MTU %d, expect.mtu is %d", n->interface, n->name,
                                 nif->mtu, want);
        ok = false;
    } else if (n->mtu > 0 && nif->mtu != n->mtu) {
        pf_check_add_finding(out, "mtu", PF_FAIL, NULL,
                             "%s (%s) has MTU %d, the annotation says %d: something changed it "
                             "after the CNI plugin set it",
                             n->interface, n->name, nif->mtu, n->mtu);
        ok = false;
    }
    return ok;
}

/* NCCL_SOCKET_IFNAME that leaves NCCL's sockets on the cluster network while a Multus RDMA
 * network is attached. */
static void check_socket_ifname(struct pf_check *out, const struct pf_ctx *ctx,
                                const struct pf_k8s_netstatus *ns, const struct pf_netif_list *ifs)
{
    const char *ifname = pf_env_get(&ctx->env, "NCCL_SOCKET_IFNAME");
    if (!ifname || strlen(ifname) <= 1) return;
    const struct pf_k8s_network *rdma = NULL;
    const char *cluster_if = NULL;
    struct pf_strlist secondary = {0};
    for (size_t i = 0; i < ns->n; i++) {
        const struct pf_k8s_network *n = &ns->v[i];
        if (pf_k8s_network_is_cluster(ns, i)) {
            if (*n->interface) cluster_if = n->interface;
            continue;
        }
        if (*n->interface) pf_strlist_add(&secondary, n->interface);
        if (!rdma && n->rdma_devices.n && *n->interface) rdma = n;
    }
    if (!cluster_if) cluster_if = "eth0";
    struct pf_strlist sel = {0};
    (void)pf_ncclenv_socket_ifaces(&sel, ifs, ifname, pf_env_get(&ctx->env, "NCCL_SOCKET_FAMILY"));
    bool on_cluster = pf_strlist_has(&sel, cluster_if);
    bool on_secondary = false;
    for (size_t i = 0; i < sel.n; i++)
        if (pf_strlist_has(&secondary, sel.v[i])) on_secondary = true;
    if (rdma && on_cluster && !on_secondary) {
        char remedy[256];
        snprintf(remedy, sizeof(remedy),
                 "set NCCL_SOCKET_IFNAME=%s (the RDMA network's interface) in the pod spec's env, "
                 "so bootstrap and any fallback stay off the cluster network",
                 rdma->interface);
        pf_check_add_finding(out, "socket-ifname-cluster", PF_WARN, remedy,
                             "NCCL_SOCKET_IFNAME=%s selects %s, the cluster network's interface, "
                             "while RDMA network %s is attached on %s: if NCCL's IB transport "
                             "does not come up, traffic falls back to TCP over the cluster network",
                             ifname, cluster_if, rdma->name, rdma->interface);
    }
    pf_strlist_free(&sel);
    pf_strlist_free(&secondary);
}

/* network-missing: each network expect.networks lists must be in the network-status, or be
 * a name another source uses (a GKE network, a DRA claim or claim/request, a device-plugin
 * resource) */
static void check_expected(struct pf_check *out, const struct pf_strlist *want,
                           const struct pf_k8s_netstatus *ns, const struct pf_k8s_attachments *att)
{
    for (size_t w = 0; want && w < want->n; w++) {
        bool found = pf_attach_other_match(att, want->v[w]);
        for (size_t i = 0; i < ns->n && !found; i++)
            found = pf_k8s_network_name_match(want->v[w], ns->v[i].name);
        if (found) continue;
        struct pf_strlist names = {0};
        for (size_t i = 0; i < ns->n; i++)
            pf_strlist_add(&names, ns->v[i].name);
        pf_attach_other_names(&names, att);
        char have[512];
        pf_strlist_join(have, sizeof(have), &names, ", ");
        pf_strlist_free(&names);
        const char *slash = strchr(want->v[w], '/');
        char remedy[512];
        if (slash)
            snprintf(remedy, sizeof(remedy),
                     "add %s to the pod's k8s.v1.cni.cncf.io/networks annotation and check that "
                     "the NetworkAttachmentDefinition exists (kubectl get "
                     "network-attachment-definitions -n %.*s %s)",
                     want->v[w], (int)(slash - want->v[w]), want->v[w], slash + 1);
        else
            snprintf(remedy, sizeof(remedy),
                     "add %s to the pod's k8s.v1.cni.cncf.io/networks annotation and check that "
                     "the NetworkAttachmentDefinition exists in the pod's namespace",
                     want->v[w]);
        pf_check_add_finding(out, "network-missing", PF_FAIL, remedy,
                             "network %s is not attached (attached: %s)", want->v[w],
                             have[0] ? have : "none");
    }
}

/* network-missing: each network the pod's request annotation asks for must be in the
 * network-status Multus wrote after attaching (multus-cni pkg/multus/multus.go: a failed
 * delegate fails the pod's sandbox, so a running pod lacking one was attached without it, or
 * its status was written by something else). Networks expect.networks lists are
 * check_expected's. A request that does not parse is unknown: Multus would not have started
 * the pod with it. */
static void check_requested(struct pf_check *out, const struct pf_k8s_podinfo *pi,
                            const struct pf_strlist *want, const struct pf_k8s_netstatus *ns)
{
    const char *asked = pf_k8s_map_get(&pi->annotations, PF_K8S_NETWORKS_ANNOT);
    if (!asked || !*asked) return;
    struct pf_strlist req = {0};
    if (pf_k8s_network_requests_parse(&req, asked, strlen(asked), pi->namespace_) < 0) {
        pf_check_unknown(out, "network-missing", "%s/annotations %s: %s", pi->dir,
                         PF_K8S_NETWORKS_ANNOT, pf_err_msg());
        pf_err_clear();
        return;
    }
    for (size_t i = 0; i < req.n; i++) {
        bool listed = false;
        for (size_t k = 0; want && k < want->n && !listed; k++)
            listed = pf_k8s_network_name_match(want->v[k], req.v[i]) ||
                     pf_k8s_network_name_match(req.v[i], want->v[k]);
        for (size_t k = 0; k < ns->n && !listed; k++)
            listed = pf_k8s_network_name_match(req.v[i], ns->v[k].name);
        if (listed) continue;
        struct pf_strlist names = {0};
        for (size_t k = 0; k < ns->n; k++)
            pf_strlist_add(&names, ns->v[k].name);
        char have[512];
        pf_strlist_join(have, sizeof(have), &names, ", ");
        pf_strlist_free(&names);
        pf_check_add_finding(out, "network-missing", PF_FAIL, NULL,
                             "network %s is requested (%s: \"%.200s\") but not attached (%s in "
                             "%s lists %s)",
                             req.v[i], PF_K8S_NETWORKS_ANNOT, asked, PF_K8S_NETSTATUS_ANNOT,
                             pi->netstatus_source, have[0] ? have : "none");
    }
    pf_strlist_free(&req);
}

void pf_check_net_multus(struct pf_check *out, struct pf_ctx *ctx)
{
    const struct pf_config *cfg = ctx->config;
    const struct pf_strlist *want = cfg ? &cfg->expect_networks : NULL;
    bool expected = want && want->n > 0;
    struct pf_k8s_podinfo pi;
    struct pf_k8s_netstatus ns = {0};
    struct pf_netif_list ifs = {0};
    double waited = 0;
    char wanted[512] = "";
    if (expected) pf_strlist_join(wanted, sizeof(wanted), want, ", ");

    /* the other sources first: an expected network one of them answers to is no reason to
     * wait for Multus */
    struct pf_k8s_attachments att = {0};
    struct pf_strlist okdesc = {0}, atterr = {0};
    {
        struct pf_k8s_podinfo pre;
        (void)read_podinfo(&pre, ctx);
        free(pre.netstatus);
        pre.netstatus = NULL; /* Multus: below, after the wait */
        pf_attach_load(&att, &atterr, out, ctx, &pre);
        pf_k8s_podinfo_free(&pre);
        pf_err_clear();
    }
    bool multus_expected = false;
    for (size_t w = 0; expected && w < want->n; w++)
        if (!pf_attach_other_match(&att, want->v[w])) multus_expected = true;
    size_t nother = 0;

    int r = load_podinfo(&pi, ctx, multus_expected, &waited);
    pf_k8s_podinfo_record(&pi, ctx->verdict->pod);
    pf_node_set_strf(out->evidence, "podinfo", "%s", pi.dir);
    if (pi.netstatus) pf_node_set_str(out->evidence, "source", pi.netstatus_source);
    if (waited > 0)
        pf_node_set_dbl(out->evidence, "waitedSeconds", (double)(long)(waited * 10) / 10);
    if (r < 0) pf_check_add_finding(out, "annotation-invalid", PF_FAIL, NULL, "%s", pf_err_msg());
    for (size_t i = 0; i < atterr.n; i++)
        pf_check_add_finding(out, "annotation-invalid", PF_FAIL, NULL, "%s", atterr.v[i]);
    if (pf_netif_list(&ifs) < 0) {
        pf_check_unknown(out, "iface-missing", "cannot list this pod's network interfaces: %s",
                         pf_err_msg());
        goto out;
    }
    nother = pf_attach_check_other(out, ctx, &att, &ifs, &okdesc);

    if (!pi.netstatus && (nother > 0 || (expected && !multus_expected))) {
        check_expected(out, want, &ns, &att);
        char list[600];
        pf_strlist_join(list, sizeof(list), &okdesc, ", ");
        pf_check_set_message(out, "%zu of %zu attachments present%s%s (no Multus network-status)",
                             okdesc.n, nother, okdesc.n ? ": " : "", list);
        goto out;
    }
    if (!pi.netstatus) {
        if (!expected && !pi.networks_requested && !pi.netstatus_empty) {
            pf_attach_list_namespace(out, ctx, &ifs);
            if (r == 0 && atterr.n == 0)
                pf_check_skip(out,
                              "no attachment metadata found: no Multus network-status (%s/"
                              "annotations %s), no GKE, DRA or device-plugin attachments and no "
                              "expect.networks; evidence lists what the namespace holds",
                              pi.dir,
                              pi.have_annotations ? "has no such annotation" : "does not exist");
            goto out;
        }
        pf_attach_list_namespace(out, ctx, &ifs);
        const char *asked = pf_k8s_map_get(&pi.annotations, PF_K8S_NETWORKS_ANNOT);
        char why[600];
        if (expected)
            snprintf(why, sizeof(why), "expect.networks lists %s", wanted);
        else if (asked && *asked)
            snprintf(why, sizeof(why), "the pod asks for %s", asked);
        else
            snprintf(why, sizeof(why), "the annotation is there but empty");
        if (!pi.have_annotations)
            pf_check_add_finding(out, "annotation-missing", PF_FAIL, NULL,
                                 "no Multus network-status: %s/annotations does not exist and no "
                                 "NETWORK_STATUS variable is set (%s)",
                                 pi.dir, why);
        else if (pi.netstatus_empty)
            pf_check_add_finding(out, "annotation-missing", PF_FAIL, NULL,
                                 "the Multus network-status annotation in %s/annotations is still "
                                 "empty after %.1f s (%s)",
                                 pi.dir, waited, why);
        else
            pf_check_add_finding(out, "annotation-missing", PF_FAIL, NULL,
                                 "%s/annotations has no %s annotation after %.1f s (%s)", pi.dir,
                                 PF_K8S_NETSTATUS_ANNOT, waited, why);
        goto out;
    }

    r = pf_k8s_netstatus_parse(&ns, pi.netstatus, strlen(pi.netstatus));
    if (r < 0) {
        pf_check_add_finding(out, "annotation-invalid", PF_FAIL, NULL, "%s: %s",
                             pi.netstatus_source, pf_err_msg());
        goto out;
    }

    struct pf_node *evn = pf_node_set_seq(out->evidence, "networks");
    size_t nsec = 0, nok = 0;
    for (size_t i = 0; i < ns.n; i++) {
        const struct pf_k8s_network *n = &ns.v[i];
        bool cluster = pf_k8s_network_is_cluster(&ns, i);
        struct pf_node *m = pf_node_add_map(evn);
        network_evidence(m, n, cluster);
        if (cluster) continue;
        nsec++;
        if (check_network(out, ctx, n, &ifs, m)) {
            nok++;
            pf_strlist_addf(&okdesc, "%s on %s", n->name, n->interface);
        }
    }
    check_expected(out, want, &ns, &att);
    check_requested(out, &pi, want, &ns);
    check_socket_ifname(out, ctx, &ns, &ifs);
    nsec += nother;
    nok = okdesc.n;
    if (nsec == 0) {
        pf_check_set_message(out, "only the cluster network is attached (%s)",
                             ns.n ? ns.v[0].name : "none");
    } else {
        char list[600];
        pf_strlist_join(list, sizeof(list), &okdesc, ", ");
        pf_check_set_message(out, "%zu of %zu secondary networks attached and up%s%s", nok, nsec,
                             nok ? ": " : "", list);
    }
out:
    pf_strlist_free(&okdesc);
    pf_strlist_free(&atterr);
    pf_k8s_attachments_free(&att);
    pf_netif_list_free(&ifs);
    pf_k8s_netstatus_free(&ns);
    pf_k8s_podinfo_free(&pi);
}
