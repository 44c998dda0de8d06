/* The pod's attachments from every source (k8s/attach.h has the table of writers). */
#define _GNU_SOURCE
#include "attach.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "k8s.h"

const char *pf_k8s_attach_src_name(enum pf_k8s_attach_src s)
{
    switch (s) {
    case PF_K8S_SRC_MULTUS:
        return "multus";
    case PF_K8S_SRC_GKE:
        return "gke";
    case PF_K8S_SRC_DRA:
        return "dra";
    case PF_K8S_SRC_DEVPLUGIN:
        return "device-plugin";
    }
    return "?";
}

const char *pf_k8s_attach_src_where(enum pf_k8s_attach_src s)
{
    switch (s) {
    case PF_K8S_SRC_MULTUS:
        return "the Multus network-status annotation";
    case PF_K8S_SRC_GKE:
        return "annotation " PF_K8S_GKE_INTERFACES_ANNOT;
    case PF_K8S_SRC_DRA:
        return "ResourceClaim status";
    case PF_K8S_SRC_DEVPLUGIN:
        return PF_K8S_DEVICE_RESOURCES_ENV ", the pod's limits";
    }
    return "?";
}

static void truncate_to(struct pf_k8s_attachments *a, size_t keep);

void pf_k8s_attachments_free(struct pf_k8s_attachments *a)
{
    truncate_to(a, 0);
}

struct pf_k8s_attach *pf_k8s_attach_add(struct pf_k8s_attachments *a, enum pf_k8s_attach_src s,
                                        const char *name)
{
    if (a->n >= PF_K8S_MAX_ATTACH) return NULL;
    a->v = pf_xrealloc(a->v, (a->n + 1) * sizeof(*a->v));
    struct pf_k8s_attach *x = &a->v[a->n++];
    memset(x, 0, sizeof(*x));
    x->src = s;
    x->name = pf_xstrdup(name ? name : "");
    x->interface = pf_xstrdup("");
    x->device = pf_xstrdup("");
    x->mac = pf_xstrdup("");
    return x;
}

static void set_str(char **dst, const char *s)
{
    free(*dst);
    *dst = pf_xstrdup(s ? s : "");
}

bool pf_k8s_attach_matches(const struct pf_k8s_attach *a, const char *expected)
{
    if (!*a->name) return false;
    switch (a->src) {
    case PF_K8S_SRC_MULTUS:
        return pf_k8s_network_name_match(expected, a->name);
    case PF_K8S_SRC_DRA: {
        if (strcmp(expected, a->name) == 0) return true;
        const char *slash = strchr(a->name, '/');
        return slash && strlen(expected) == (size_t)(slash - a->name) &&
               strncmp(expected, a->name, (size_t)(slash - a->name)) == 0;
    }
    case PF_K8S_SRC_GKE:
    case PF_K8S_SRC_DEVPLUGIN:
        return strcmp(expected, a->name) == 0;
    }
    return false;
}

/* "10.0.0.1/24" -> "10.0.0.1" */
static void add_ip(struct pf_strlist *l, const char *s)
{
    const char *slash = strchr(s, '/');
    if (slash)
        pf_strlist_addn(l, s, (size_t)(slash - s));
    else
        pf_strlist_add(l, s);
}

/* ---------------------------------------------------------------- Multus */

void pf_k8s_attach_from_netstatus(struct pf_k8s_attachments *out, const struct pf_k8s_netstatus *ns)
{
    for (size_t i = 0; i < ns->n; i++) {
        const struct pf_k8s_network *n = &ns->v[i];
        struct pf_k8s_attach *a = pf_k8s_attach_add(out, PF_K8S_SRC_MULTUS, n->name);
        if (!a) return;
        set_str(&a->interface, n->interface);
        set_str(&a->mac, n->mac);
        a->mtu = n->mtu;
        for (size_t k = 0; k < n->ips.n; k++)
            pf_strlist_add(&a->ips, n->ips.v[k]);
        for (size_t k = 0; k < n->rdma_devices.n; k++)
            pf_strlist_add(&a->rdma, n->rdma_devices.v[k]);
        char bdf[PF_K8S_BDF_MAX];
        if (*n->pci_address && pf_k8s_bdf_parse(bdf, n->pci_address) == 0)
            snprintf(a->pci, sizeof(a->pci), "%s", bdf);
        pf_err_clear();
        a->cluster = pf_k8s_network_is_cluster(ns, i);
        a->reported = true;
    }
}

/* ---------------------------------------------------------------- JSON helpers */

static json_t *load(const char *what, const char *json, size_t len, json_type want)
{
    json_error_t err;
    json_t *root = json_loadb(json, len, 0, &err);
    if (!root) {
        pf_err_set(PF_EINVAL, "%s is not JSON: %s (line %d, column %d)", what, err.text, err.line,
                   err.column);
        return NULL;
    }
    if (json_typeof(root) != want) {
        pf_err_set(PF_EINVAL, "%s is not a JSON %s", what, want == JSON_ARRAY ? "list" : "object");
        json_decref(root);
        return NULL;
    }
    return root;
}

/* An optional string member: its value, "" when absent or null, NULL when another type. */
static const char *opt_str(json_t *obj, const char *key)
{
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v)) return "";
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* Drops what was appended past `keep` (a source that failed to parse appends nothing). */
static void truncate_to(struct pf_k8s_attachments *a, size_t keep)
{
    for (size_t i = keep; i < a->n; i++) {
        struct pf_k8s_attach *x = &a->v[i];
        free(x->name);
        free(x->interface);
        free(x->device);
        free(x->mac);
        pf_strlist_free(&x->ips);
        pf_strlist_free(&x->rdma);
    }
    a->n = keep;
    if (keep == 0) {
        free(a->v);
        a->v = NULL;
    }
}

/* ---------------------------------------------------------------- GKE */

static int gke_status(struct pf_k8s_attachments *out, size_t first, const char *json, size_t len)
{
    json_t *root = load("annotation " PF_K8S_GKE_STATUS_ANNOT, json, len, JSON_ARRAY);
    if (!root) return PF_EINVAL;
    int r = 0;
    size_t i;
    json_t *el;
    json_array_foreach(root, i, el)
    {
        const char *net = json_is_object(el) ? opt_str(el, "networkName") : NULL;
        const char *mac = net ? opt_str(el, "macAddress") : NULL;
        json_t *ips = net ? json_object_get(el, "ipAddresses") : NULL;
        if (!net || !mac || (ips && !json_is_null(ips) && !json_is_array(ips))) {
            r = pf_err_set(PF_EINVAL,
                           "annotation " PF_K8S_GKE_STATUS_ANNOT
                           " element %zu is not {\"networkName\", \"ipAddresses\", "
                           "\"macAddress\"}",
                           i + 1);
            break;
        }
        for (size_t k = first; k < out->n; k++) {
            struct pf_k8s_attach *a = &out->v[k];
            if (a->reported || strcmp(a->name, net) != 0) continue;
            a->reported = true;
            set_str(&a->mac, mac);
            size_t j;
            json_t *ip;
            json_array_foreach(ips, j, ip) if (json_is_string(ip))
                add_ip(&a->ips, json_string_value(ip));
            break;
        }
    }
    json_decref(root);
    return r;
}

int pf_k8s_gke_parse(struct pf_k8s_attachments *out, const char *interfaces, size_t len,
                     const char *status, size_t status_len)
{
    size_t first = out->n;
    json_t *root = load("annotation " PF_K8S_GKE_INTERFACES_ANNOT, interfaces, len, JSON_ARRAY);
    if (!root) return PF_EINVAL;
    int r = 0;
    if (json_array_size(root) > PF_K8S_MAX_NETWORKS) {
        r = pf_err_set(PF_EINVAL,
                       "annotation " PF_K8S_GKE_INTERFACES_ANNOT " lists %zu (at most %d)",
                       json_array_size(root), PF_K8S_MAX_NETWORKS);
        goto out;
    }
    size_t i;
    json_t *el;
    json_array_foreach(root, i, el)
    {
        const char *ifn = json_is_object(el) ? opt_str(el, "interfaceName") : NULL;
        const char *net = ifn ? opt_str(el, "network") : NULL;
        const char *nif = net ? opt_str(el, "interface") : NULL;
        if (!nif || (!*net && !*nif)) {
            r = pf_err_set(PF_EINVAL,
                           "annotation " PF_K8S_GKE_INTERFACES_ANNOT
                           " element %zu is not {\"interfaceName\", \"network\" or "
                           "\"interface\"}",
                           i + 1);
            goto out;
        }
        /* "interface" names a NetworkInterface object; its network is not in the pod */
        struct pf_k8s_attach *a = pf_k8s_attach_add(out, PF_K8S_SRC_GKE, *net ? net : nif);
        if (!a) break;
        set_str(&a->interface, ifn);
        a->cluster = strcmp(net, "default") == 0;
    }
    if (status && status_len) r = gke_status(out, first, status, status_len);
out:
    json_decref(root);
    if (r < 0) truncate_to(out, first);
    return r;
}

/* ---------------------------------------------------------------- DRA */

static int claim_err(const char *claim, const char *what)
{
    return pf_err_set(PF_EINVAL, "ResourceClaim %s: %s", *claim ? claim : "(unnamed)", what);
}

/* status.devices[] entry for driver/pool/device, or NULL */
static json_t *device_status(json_t *devices, const char *driver, const char *pool,
                             const char *device)
{
    size_t i;
    json_t *d;
    json_array_foreach(devices, i, d)
    {
        if (!json_is_object(d)) continue;
        const char *dr = opt_str(d, "driver"), *po = opt_str(d, "pool"), *de = opt_str(d, "device");
        if (dr && po && de && strcmp(dr, driver) == 0 && strcmp(po, pool) == 0 &&
            strcmp(de, device) == 0)
            return d;
    }
    return NULL;
}

/* A condition of type Ready whose status is False (metav1.Condition: type, status, reason,
 * message), as "reason: message". */
static void claim_ready(struct pf_k8s_attach *a, json_t *st)
{
    json_t *conds = json_object_get(st, "conditions");
    size_t i;
    json_t *c;
    json_array_foreach(conds, i, c)
    {
        const char *type = json_is_object(c) ? opt_str(c, "type") : NULL;
        const char *status = type ? opt_str(c, "status") : NULL;
        if (!status || strcmp(type, "Ready") != 0 || strcmp(status, "False") != 0) continue;
        const char *reason = opt_str(c, "reason"), *msg = opt_str(c, "message");
        snprintf(a->not_ready, sizeof(a->not_ready), "%s%s%s", reason ? reason : "",
                 reason && *reason && msg && *msg ? ": " : "", msg ? msg : "");
        if (!a->not_ready[0]) snprintf(a->not_ready, sizeof(a->not_ready), "Ready is False");
    }
}

static int claim_network_data(struct pf_k8s_attach *a, const char *claim, json_t *st)
{
    a->reported = true;
    claim_ready(a, st);
    json_t *nd = json_object_get(st, "networkData");
    if (!nd || json_is_null(nd)) return 0;
    const char *ifn = json_is_object(nd) ? opt_str(nd, "interfaceName") : NULL;
    const char *mac = ifn ? opt_str(nd, "hardwareAddress") : NULL;
    json_t *ips = mac ? json_object_get(nd, "ips") : NULL;
    if (!mac || (ips && !json_is_null(ips) && !json_is_array(ips)))
        return claim_err(claim, "status.devices[].networkData is not {interfaceName, ips, "
                                "hardwareAddress}");
    set_str(&a->interface, ifn);
    set_str(&a->mac, mac);
    size_t j;
    json_t *ip;
    json_array_foreach(ips, j, ip)
    {
        if (!json_is_string(ip))
            return claim_err(claim, "networkData.ips is not a list of strings");
        add_ip(&a->ips, json_string_value(ip));
    }
    return 0;
}

int pf_k8s_claim_parse(struct pf_k8s_attachments *out, const char *json, size_t len)
{
    size_t first = out->n;
    json_t *root = load("ResourceClaim", json, len, JSON_OBJECT);
    if (!root) return PF_EINVAL;
    int r = 0;
    const char *kind = opt_str(root, "kind");
    json_t *meta = json_object_get(root, "metadata");
    const char *claim = json_is_object(meta) ? opt_str(meta, "name") : NULL;
    if (!kind || (*kind && strcmp(kind, "ResourceClaim") != 0)) {
        r = pf_err_set(PF_EINVAL, "not a ResourceClaim (kind %s)", kind ? kind : "not a string");
        goto out;
    }
    if (!claim || !*claim) {
        r = pf_err_set(PF_EINVAL, "ResourceClaim without metadata.name");
        goto out;
    }
    json_t *status = json_object_get(root, "status");
    if (!status || json_is_null(status)) goto out; /* not allocated yet */
    if (!json_is_object(status)) {
        r = claim_err(claim, "status is not an object");
        goto out;
    }
    json_t *alloc = json_object_get(status, "allocation");
    json_t *devs = json_is_object(alloc) ? json_object_get(alloc, "devices") : NULL;
    json_t *results = json_is_object(devs) ? json_object_get(devs, "results") : NULL;
    json_t *dstat = json_object_get(status, "devices");
    if (dstat && !json_is_null(dstat) && !json_is_array(dstat)) {
        r = claim_err(claim, "status.devices is not a list");
        goto out;
    }
    if (!results || json_is_null(results)) goto out;
    if (!json_is_array(results) || json_array_size(results) > PF_K8S_MAX_ATTACH) {
        r = claim_err(claim, "status.allocation.devices.results is not a list (of at most 256)");
        goto out;
    }
    size_t i;
    json_t *res;
    json_array_foreach(results, i, res)
    {
        const char *req = json_is_object(res) ? opt_str(res, "request") : NULL;
        const char *drv = req ? opt_str(res, "driver") : NULL;
        const char *pool = drv ? opt_str(res, "pool") : NULL;
        const char *dev = pool ? opt_str(res, "device") : NULL;
        if (!dev || !*req || !*drv || !*dev) {
            r = claim_err(claim, "an allocation result lacks request, driver, pool or device");
            goto out;
        }
        char name[600];
        snprintf(name, sizeof(name), "%s/%s", claim, req);
        struct pf_k8s_attach *a = pf_k8s_attach_add(out, PF_K8S_SRC_DRA, name);
        if (!a) break;
        char full[800];
        snprintf(full, sizeof(full), "%s/%s/%s", drv, pool, dev);
        set_str(&a->device, full);
        json_t *st = dstat ? device_status(dstat, drv, pool, dev) : NULL;
        if (st && (r = claim_network_data(a, claim, st)) < 0) goto out;
    }
out:
    json_decref(root);
    if (r < 0) truncate_to(out, first);
    return r;
}

static int claim_names(struct pf_strlist *out, json_t *list, const char *what)
{
    if (!list || json_is_null(list)) return 0;
    if (!json_is_array(list) || json_array_size(list) > PF_K8S_MAX_ATTACH)
        return pf_err_set(PF_EINVAL, "Pod: %s is not a list (of at most %d)", what,
                          PF_K8S_MAX_ATTACH);
    size_t i;
    json_t *el;
    json_array_foreach(list, i, el)
    {
        const char *n = json_is_object(el) ? opt_str(el, "resourceClaimName") : NULL;
        if (!n) return pf_err_set(PF_EINVAL, "Pod: %s[%zu] is not an object", what, i);
        if (*n && !pf_strlist_has(out, n)) pf_strlist_add(out, n);
    }
    return 0;
}

/* The claim kube-scheduler makes for a container's extended resource that a DeviceClass backs
 * (DeviceClass spec.extendedResourceName; DRAExtendedResource, GA in Kubernetes 1.37): named
 * nowhere in the spec, only in status.extendedResourceClaimStatus.resourceClaimName
 * (kubernetes/kubernetes staging/src/k8s.io/api/core/v1/types.go at v1.37.2,
 * PodExtendedResourceClaimStatus; the claim is a resource.k8s.io/v1 ResourceClaim like the
 * others, staging/src/k8s.io/api/resource/v1/types.go). */
static int extended_claim(struct pf_strlist *out, json_t *ext)
{
    if (!ext || json_is_null(ext)) return 0;
    const char *n = json_is_object(ext) ? opt_str(ext, "resourceClaimName") : NULL;
    if (!n)
        return pf_err_set(PF_EINVAL, "Pod: status.extendedResourceClaimStatus is not an object "
                                     "with a string resourceClaimName");
    if (*n && !pf_strlist_has(out, n)) pf_strlist_add(out, n);
    return 0;
}

int pf_k8s_pod_claims_parse(struct pf_strlist *out, const char *json, size_t len)
{
    json_t *root = load("Pod", json, len, JSON_OBJECT);
    if (!root) return PF_EINVAL;
    int r = 0;
    const char *kind = opt_str(root, "kind");
    json_t *spec = json_object_get(root, "spec");
    json_t *status = json_object_get(root, "status");
    struct pf_strlist got = {0};
    if (!kind || (*kind && strcmp(kind, "Pod") != 0)) {
        r = pf_err_set(PF_EINVAL, "not a Pod (kind %s)", kind ? kind : "not a string");
    } else if ((spec && !json_is_object(spec)) ||
               (status && !json_is_null(status) && !json_is_object(status))) {
        r = pf_err_set(PF_EINVAL, "Pod: spec or status is not an object");
    } else if ((r = claim_names(&got, json_object_get(status, "resourceClaimStatuses"),
                                "status.resourceClaimStatuses")) == 0 &&
               (r = claim_names(&got, json_object_get(spec, "resourceClaims"),
                                "spec.resourceClaims")) == 0) {
        r = extended_claim(&got, json_object_get(status, "extendedResourceClaimStatus"));
    }
    for (size_t i = 0; r == 0 && i < got.n; i++)
        if (!pf_strlist_has(out, got.v[i])) pf_strlist_add(out, got.v[i]);
    pf_strlist_free(&got);
    json_decref(root);
    return r;
}

/* ---------------------------------------------------------------- device plugins */

int pf_k8s_resources_parse(struct pf_k8s_attachments *out, const char *text)
{
    size_t first = out->n;
    char *copy = pf_xstrdup(text ? text : "");
    int r = 0;
    for (char *save = NULL, *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        pf_trim(t);
        if (!*t) continue;
        char item[96];
        snprintf(item, sizeof(item), "%s", t);
        char *eq = strchr(t, '=');
        char *slash = strchr(t, '/');
        char *end = NULL;
        long n = -1;
        if (eq) {
            *eq = '\0';
            pf_trim(t);
            char *v = pf_trim(eq + 1);
            errno = 0;
            n = strtol(v, &end, 10);
            if (!*v || *end || errno || n < 0 || n > 1 << 20) n = -1;
        }
        if (!eq || n < 0 || !slash || slash > eq || slash == t || !slash[1] ||
            strchr(slash + 1, '/')) {
            r = pf_err_set(PF_EINVAL, "\"%s\" is not resource=count (like vpc.amazonaws.com/efa=4)",
                           item);
            break;
        }
        struct pf_k8s_attach *a = pf_k8s_attach_add(out, PF_K8S_SRC_DEVPLUGIN, t);
        if (!a) break;
        a->count = n;
    }
    free(copy);
    if (r < 0) truncate_to(out, first);
    return r;
}

/* ---------------------------------------------------------------- all of them */

static void note(struct pf_strlist *errs, const char *what)
{
    if (errs) pf_strlist_addf(errs, "%s: %s", what, pf_err_msg());
    pf_err_clear();
}

void pf_k8s_attach_gather(struct pf_k8s_attachments *out, struct pf_strlist *errs,
                          const struct pf_k8s_podinfo *pi, const char *resources)
{
    memset(out, 0, sizeof(*out));
    if (pi->netstatus) {
        struct pf_k8s_netstatus ns;
        if (pf_k8s_netstatus_parse(&ns, pi->netstatus, strlen(pi->netstatus)) == 0) {
            pf_k8s_attach_from_netstatus(out, &ns);
            pf_k8s_netstatus_free(&ns);
        } else {
            note(errs, pi->netstatus_source);
        }
    }
    const struct pf_k8s_kv *gi = pf_k8s_map_find(&pi->annotations, PF_K8S_GKE_INTERFACES_ANNOT);
    if (gi) {
        const struct pf_k8s_kv *gs = pf_k8s_map_find(&pi->annotations, PF_K8S_GKE_STATUS_ANNOT);
        if (pf_k8s_gke_parse(out, gi->value, gi->value_len, gs ? gs->value : NULL,
                             gs ? gs->value_len : 0) < 0)
            note(errs, "annotation " PF_K8S_GKE_INTERFACES_ANNOT);
    }
    if (resources && *resources && pf_k8s_resources_parse(out, resources) < 0)
        note(errs, "variable " PF_K8S_DEVICE_RESOURCES_ENV);
}

/* ---------------------------------------------------------------- RDMA devices */

int pf_k8s_rdma_list(struct pf_k8s_rdmadevs *out, const struct pf_host *h)
{
    memset(out, 0, sizeof(*out));
    struct pf_strlist names = {0};
    int r = pf_host_list(&names, h, "/sys/class/infiniband");
    if (r == PF_ENOENT) {
        pf_err_clear();
        return 0;
    }
    if (r < 0) return r;
    out->v = pf_xcalloc(names.n ? names.n : 1, sizeof(*out->v));
    for (size_t i = 0; i < names.n; i++) {
        struct pf_k8s_rdmadev *d = &out->v[out->n++];
        snprintf(d->name, sizeof(d->name), "%s", names.v[i]);
        d->numa = -1;
        char link[64] = "", bdf[PF_K8S_BDF_MAX];
        if (pf_host_link_basename(link, sizeof(link), h, "/sys/class/infiniband/%s/device",
                                  names.v[i]) == 0 &&
            pf_k8s_bdf_parse(bdf, link) == 0)
            snprintf(d->pci, sizeof(d->pci), "%s", bdf);
        (void)pf_host_link_basename(d->driver, sizeof(d->driver), h,
                                    "/sys/class/infiniband/%s/device/driver", names.v[i]);
        long long numa, vendor;
        if (pf_host_read_ll(&vendor, h, "/sys/class/infiniband/%s/device/vendor", names.v[i]) ==
                0 &&
            vendor > 0 && vendor <= 0xffff)
            d->vendor = (unsigned)vendor;
        if (pf_host_read_ll(&numa, h, "/sys/class/infiniband/%s/device/numa_node", names.v[i]) ==
                0 &&
            numa >= 0 && numa < 1 << 16)
            d->numa = (int)numa;
        struct pf_strlist nets = {0};
        if (pf_host_list(&nets, h, "/sys/class/infiniband/%s/device/net", names.v[i]) == 0)
            pf_strlist_join(d->netdevs, sizeof(d->netdevs), &nets, ",");
        pf_strlist_free(&nets);
        pf_err_clear();
    }
    pf_strlist_free(&names);
    return 0;
}

void pf_k8s_rdma_free(struct pf_k8s_rdmadevs *d)
{
    free(d->v);
    d->v = NULL;
    d->n = 0;
}
