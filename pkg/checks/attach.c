/* net.multus, part two: the attachments other sources promise (GKE multi-networking, DRA
 * claims, device-plugin resources; pkg/k8s/attach.h) against what the pod holds, and, when no
 * source describes anything, what the namespace holds. */
#define _GNU_SOURCE
#include "attach.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "../k8s/k8s.h"
#include "../kapi/kapi.h"

#define EFA_VENDOR 0x1d0fu

#define POD_BODY_MAX (4u << 20)

/* GET path into *res; true on HTTP 200. */
static bool api_get(struct pf_kapi_res *res, const struct pf_kapi *api, const char *path,
                    double deadline)
{
    pf_kapi_request_max(res, api, "GET", path, "application/json", "", deadline, POD_BODY_MAX);
    return res->curl_code == PF_CURLE_OK && res->status == 200;
}

static void api_error(char *out, size_t n, const struct pf_kapi_res *res, const char *path)
{
    if (res->curl_code != PF_CURLE_OK)
        snprintf(out, n, "GET %s: %s", path, res->error);
    else if (res->status == 401 || res->status == 403)
        snprintf(out, n,
                 "GET %s: HTTP %ld: the pod's ServiceAccount may not read it (the chart's "
                 "rbac.readClaims grants get on pods and resourceclaims)",
                 path, res->status);
    else
        snprintf(out, n, "GET %s: HTTP %ld", path, res->status);
}

/* DRA: the pod (its claims' names), then each ResourceClaim, through the API server when the
 * pod runs in a cluster and PREFLIGHT_READ_CLAIMS is 1 or true (the chart's rbac.readClaims);
 * evidence "dra" says what was read or why not. resource.k8s.io v1 first (Kubernetes 1.34), then
 * v1beta2 and v1beta1 on 404. */
static void load_claims(struct pf_k8s_attachments *a, struct pf_strlist *errs, struct pf_check *out,
                        const struct pf_ctx *ctx, const struct pf_k8s_podinfo *pi)
{
    const char *on = pf_env_get(&ctx->env, PF_ATTACH_READ_CLAIMS_ENV);
    if (!on || (strcmp(on, "1") != 0 && strcasecmp(on, "true") != 0)) return; /* not asked */
    /* once a run: a later stage (the rails) uses the claims net.multus read, so the API time
     * given to net.multus (ctx->api_s) is the whole run's (docs/security.md, "Reading
     * claims") */
    struct pf_ctx_memo *memo = ctx->memo;
    if (memo && memo->claims_read) {
        for (size_t i = 0; i < memo->claims.n; i++)
            (void)pf_k8s_claim_parse(a, memo->claims.v[i], strlen(memo->claims.v[i]));
        pf_err_clear();
        return;
    }
    if (memo) memo->claims_read = true;
    struct pf_kapi api;
    if (pf_kapi_open(&api, &ctx->env, &ctx->host) == PF_ENOENT) {
        pf_err_clear();
        return; /* not in a cluster: nothing to ask */
    }
    struct pf_node *ev = out ? pf_node_set_map(out->evidence, "dra") : NULL;
    char ns_file[256] = "", err[1400] = "";
    const char *pod = pi->name ? pi->name : pf_env_get(&ctx->env, "POD_NAME");
    const char *ns = pi->namespace_ ? pi->namespace_ : pf_env_get(&ctx->env, "POD_NAMESPACE");
    if ((!ns || !*ns) &&
        pf_host_read(ns_file, sizeof(ns_file), &ctx->host, "%s/namespace", PF_KAPI_SA_DIR) > 0)
        ns = pf_trim(ns_file);
    if (!api.token) {
        snprintf(err, sizeof(err), "%s", pf_err_msg());
    } else if (!pod || !*pod || !ns || !*ns) {
        snprintf(err, sizeof(err),
                 "the pod's name or namespace is unknown (podinfo name and "
                 "namespace, or POD_NAME and POD_NAMESPACE)");
    } else if (pf_kapi_load(&ctx->env) < 0) {
        snprintf(err, sizeof(err), "libcurl cannot be loaded: %s", pf_err_msg());
    }
    if (*err) {
        if (ev) pf_node_set_str(ev, "error", err);
        pf_kapi_close(&api);
        pf_err_clear();
        return;
    }
    double left = pf_ctx_left(ctx, 0);
    double deadline = pf_now() + (ctx->api_s > 0 && ctx->api_s < left ? ctx->api_s : left);
    if (ev) pf_node_set_str(ev, "apiServer", api.base);
    char path[1024];
    snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s", ns, pod);
    struct pf_kapi_res res;
    struct pf_strlist claims = {0};
    if (!api_get(&res, &api, path, deadline)) {
        api_error(err, sizeof(err), &res, path);
    } else if (pf_k8s_pod_claims_parse(&claims, res.body.data, res.body.len) < 0) {
        snprintf(err, sizeof(err), "GET %s: %s", path, pf_err_msg());
        if (errs) pf_strlist_add(errs, err);
        err[0] = '\0';
    }
    pf_buf_free(&res.body);
    struct pf_node *read = ev ? pf_node_set_seq(ev, "claims") : NULL;
    static const char *const versions[] = {"v1", "v1beta2", "v1beta1"};
    for (size_t i = 0; i < claims.n && !*err; i++) {
        for (size_t v = 0; v < PF_ARRAY_LEN(versions); v++) {
            snprintf(path, sizeof(path), "/apis/resource.k8s.io/%s/namespaces/%s/resourceclaims/%s",
                     versions[v], ns, claims.v[i]);
            bool ok = api_get(&res, &api, path, deadline);
            bool again = !ok && res.curl_code == PF_CURLE_OK && res.status == 404;
            if (ok) {
                if (read)
                    pf_node_add_strf(read, "%s (resource.k8s.io/%s)", claims.v[i], versions[v]);
                if (memo) pf_strlist_add(&memo->claims, pf_buf_str(&res.body));
                if (pf_k8s_claim_parse(a, res.body.data, res.body.len) < 0) {
                    char m[1600];
                    snprintf(m, sizeof(m), "GET %s: %s", path, pf_err_msg());
                    if (errs) pf_strlist_add(errs, m);
                }
            } else if (!again || v + 1 == PF_ARRAY_LEN(versions)) {
                api_error(err, sizeof(err), &res, path);
            }
            pf_buf_free(&res.body);
            if (ok || !again) break;
        }
    }
    if (*err && ev) pf_node_set_str(ev, "error", err);
    pf_strlist_free(&claims);
    pf_kapi_close(&api);
    pf_err_clear();
}

void pf_attach_load(struct pf_k8s_attachments *a, struct pf_strlist *errs, struct pf_check *out,
                    const struct pf_ctx *ctx, const struct pf_k8s_podinfo *pi)
{
    pf_k8s_attach_gather(a, errs, pi, pf_env_get(&ctx->env, PF_K8S_DEVICE_RESOURCES_ENV));
    load_claims(a, errs, out, ctx, pi);
}

void pf_checks_attachments(struct pf_k8s_attachments *out, const struct pf_ctx *ctx)
{
    struct pf_k8s_podinfo pi;
    (void)pf_k8s_podinfo_read_env(&pi, &ctx->host, &ctx->env);
    pf_attach_load(out, NULL, NULL, ctx, &pi);
    pf_k8s_podinfo_free(&pi);
    pf_err_clear();
}

bool pf_attach_other_match(const struct pf_k8s_attachments *a, const char *want)
{
    for (size_t i = 0; i < a->n; i++)
        if (a->v[i].src != PF_K8S_SRC_MULTUS && pf_k8s_attach_matches(&a->v[i], want)) return true;
    return false;
}

void pf_attach_other_names(struct pf_strlist *out, const struct pf_k8s_attachments *a)
{
    for (size_t i = 0; i < a->n; i++)
        if (a->v[i].src != PF_K8S_SRC_MULTUS && !a->v[i].cluster)
            pf_strlist_addf(out, "%s (%s)", a->v[i].name, pf_k8s_attach_src_name(a->v[i].src));
}

static void join_ifs(char *out, size_t n, const struct pf_netif_list *ifs)
{
    struct pf_strlist l = {0};
    for (size_t i = 0; i < ifs->n; i++)
        pf_strlist_add(&l, ifs->v[i].name);
    pf_strlist_join(out, n, &l, ", ");
    if (!l.n) snprintf(out, n, "none");
    pf_strlist_free(&l);
}

/* An attachment that names an interface: it must be in the namespace, up, with its addresses. */
static bool check_iface(struct pf_check *out, const struct pf_k8s_attach *a,
                        const struct pf_netif_list *ifs, struct pf_node *m)
{
    const char *src = pf_k8s_attach_src_name(a->src);
    const struct pf_netif *nif = pf_netif_find(ifs, a->interface);
    pf_node_set_bool(m, "present", nif != NULL);
    if (!nif) {
        char have[512];
        join_ifs(have, sizeof(have), ifs);
        pf_check_add_finding(out, "attachment-missing", PF_FAIL, NULL,
                             "%s %s (%s) promises interface %s, which this pod's network namespace "
                             "does not have (have: %s)",
                             src, a->name, pf_k8s_attach_src_where(a->src), a->interface, have);
        return false;
    }
    pf_node_set_bool(m, "up", nif->up);
    if (!nif->up || !nif->carrier) {
        pf_check_add_finding(out, "iface-down", PF_FAIL, NULL, "%s (%s %s) is %s", a->interface,
                             src, a->name, nif->up ? "up but has no carrier" : "down");
        return false;
    }
    bool ok = true;
    for (size_t k = 0; k < a->ips.n; k++) {
        if (pf_netif_has_addr(nif, a->ips.v[k])) continue;
        pf_check_add_finding(out, "ip-missing", PF_FAIL, NULL,
                             "%s (%s %s) does not hold %s, the address %s lists", a->interface, src,
                             a->name, a->ips.v[k], pf_k8s_attach_src_where(a->src));
        ok = false;
    }
    return ok;
}

/* The uverbs nodes of /dev/infiniband the pod was given, as their RDMA devices. */
static void given_devices(struct pf_strlist *out, const struct pf_ctx *ctx)
{
    struct pf_strlist nodes = {0};
    (void)pf_host_list(&nodes, &ctx->host, "/dev/infiniband");
    for (size_t i = 0; i < nodes.n; i++) {
        char ib[64];
        if (strncmp(nodes.v[i], "uverbs", 6) != 0) continue;
        if (pf_host_read(ib, sizeof(ib), &ctx->host, "/sys/class/infiniband_verbs/%s/ibdev",
                         nodes.v[i]) >= 0 &&
            *pf_trim(ib))
            pf_strlist_add(out, ib);
    }
    pf_strlist_free(&nodes);
    pf_err_clear();
}

static bool is_efa_resource(const char *name)
{
    return strcmp(name, "vpc.amazonaws.com/efa") == 0;
}

static bool is_efa(const struct pf_k8s_rdmadev *d)
{
    return strcmp(d->driver, "efa") == 0 || d->vendor == EFA_VENDOR;
}

/* A device-plugin resource: the pod must hold the devices it promises. EFA: one verbs device
 * of the efa driver per unit; an rdma/ resource (shared or exclusive HCAs): at least one
 * verbs device. */
static bool check_resource(struct pf_check *out, const struct pf_ctx *ctx,
                           const struct pf_k8s_attach *a, const struct pf_k8s_rdmadevs *devs,
                           const struct pf_strlist *given, struct pf_node *m)
{
    bool efa = is_efa_resource(a->name);
    struct pf_strlist held = {0};
    for (size_t i = 0; i < given->n; i++)
        for (size_t k = 0; k < devs->n; k++)
            if (strcmp(devs->v[k].name, given->v[i]) == 0 && (!efa || is_efa(&devs->v[k])))
                pf_strlist_add(&held, given->v[i]);
    long want = efa ? a->count : (a->count > 0 ? 1 : 0);
    struct pf_node *s = pf_node_set_seq(m, "devices");
    for (size_t i = 0; i < held.n; i++)
        pf_node_add_str(s, held.v[i]);
    bool ok = (long)held.n >= want;
    if (!ok) {
        char list[512];
        pf_strlist_join(list, sizeof(list), &held, ", ");
        pf_check_add_finding(
            out, "attachment-missing", PF_FAIL, NULL,
            "device-plugin resource %s=%ld (%s) promises %ld %s device%s, the pod holds %zu (%s in "
            "%s/dev/infiniband)",
            a->name, a->count, pf_k8s_attach_src_where(a->src), want, efa ? "EFA" : "RDMA",
            want == 1 ? "" : "s", held.n, held.n ? list : "none", ctx->host.root);
    }
    pf_strlist_free(&held);
    return ok;
}

size_t pf_attach_check_other(struct pf_check *out, const struct pf_ctx *ctx,
                             const struct pf_k8s_attachments *a, const struct pf_netif_list *ifs,
                             struct pf_strlist *okdesc)
{
    size_t n = 0;
    struct pf_k8s_rdmadevs devs = {0};
    struct pf_strlist given = {0};
    bool have_devs = false;
    struct pf_node *ev = NULL;
    for (size_t i = 0; i < a->n; i++) {
        const struct pf_k8s_attach *x = &a->v[i];
        if (x->src == PF_K8S_SRC_MULTUS) continue;
        if (!ev) ev = pf_node_set_seq(out->evidence, "attachments");
        struct pf_node *m = pf_node_add_map(ev);
        pf_node_set_str(m, "source", pf_k8s_attach_src_name(x->src));
        pf_node_set_str(m, "name", x->name);
        if (*x->interface) pf_node_set_str(m, "interface", x->interface);
        if (*x->device) pf_node_set_str(m, "device", x->device);
        if (x->count) pf_node_set_int(m, "count", x->count);
        if (x->ips.n) {
            struct pf_node *s = pf_node_set_seq(m, "ips");
            for (size_t k = 0; k < x->ips.n; k++)
                pf_node_add_str(s, x->ips.v[k]);
        }
        if (x->cluster) {
            pf_node_set_bool(m, "default", true);
            continue;
        }
        bool ok;
        if (x->src == PF_K8S_SRC_DEVPLUGIN) {
            if (!have_devs) {
                (void)pf_k8s_rdma_list(&devs, &ctx->host);
                given_devices(&given, ctx);
                pf_err_clear();
                have_devs = true;
            }
            ok = check_resource(out, ctx, x, &devs, &given, m);
        } else if (x->not_ready[0]) {
            pf_node_set_str(m, "notReady", x->not_ready);
            pf_check_add_finding(out, "attachment-missing", PF_FAIL, NULL,
                                 "%s %s: the driver reports device %s not Ready (%s)",
                                 pf_k8s_attach_src_name(x->src), x->name, x->device, x->not_ready);
            ok = false;
        } else if (*x->interface) {
            ok = check_iface(out, x, ifs, m);
        } else {
            continue; /* a DRA device without network data (a GPU claim): nothing to see */
        }
        n++;
        if (ok)
            pf_strlist_addf(okdesc, "%s%s%s", x->name, *x->interface ? " on " : "", x->interface);
    }
    pf_strlist_free(&given);
    pf_k8s_rdma_free(&devs);
    return n;
}

static bool usable(const struct pf_netif *nif)
{
    if (nif->loopback) return false;
    return true;
}

void pf_attach_list_namespace(struct pf_check *out, const struct pf_ctx *ctx,
                              const struct pf_netif_list *ifs)
{
    struct pf_node *ns = pf_node_set_map(out->evidence, "namespace");
    pf_node_set_str(ns, "note", "no attachment metadata found: what the namespace holds");
    struct pf_node *nd = pf_node_set_seq(ns, "netdevs");
    for (size_t i = 0; ifs && i < ifs->n; i++) {
        const struct pf_netif *nif = &ifs->v[i];
        if (!usable(nif)) continue;
        struct pf_node *m = pf_node_add_map(nd);
        pf_node_set_str(m, "name", nif->name);
        pf_node_set_bool(m, "up", nif->up);
        struct pf_node *s = pf_node_set_seq(m, "addresses");
        for (size_t k = 0; k < nif->naddrs; k++)
            pf_node_add_strf(s, "%s/%d", nif->addrs[k].text, nif->addrs[k].prefix_len);
    }
    struct pf_k8s_rdmadevs devs = {0};
    (void)pf_k8s_rdma_list(&devs, &ctx->host);
    pf_err_clear();
    struct pf_node *rd = pf_node_set_seq(ns, "rdma");
    for (size_t i = 0; i < devs.n; i++) {
        struct pf_node *m = pf_node_add_map(rd);
        pf_node_set_str(m, "name", devs.v[i].name);
        if (*devs.v[i].pci) pf_node_set_str(m, "pciAddress", devs.v[i].pci);
        if (devs.v[i].numa >= 0) pf_node_set_int(m, "numaNode", devs.v[i].numa);
        if (*devs.v[i].netdevs) pf_node_set_str(m, "netdevs", devs.v[i].netdevs);
    }
    pf_k8s_rdma_free(&devs);
}
