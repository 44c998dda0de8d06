/* This pod's inventory for check `gang` (pkg/fleet/gang.c): what its local checks already
 * read, taken from their evidence in the verdict, so that what rank 0 compares is exactly
 * what each pod's verdict shows. A trait whose check did not run (or could not read it) is
 * left unknown, and an unknown trait is never compared. The sources, by trait:
 *   gpus, gpuModel, driver   gpu.devices: count (the /dev/nvidiaN nodes in the pod),
 *                            gpus[].model, driverVersion
 *   nvlinks                  gpu.health: nvlinksActive (the NVLink links NVML reports
 *                            active over the pod's GPUs), where that check runs
 *   hcas, provider,          rdma.devices: count (the RDMA devices in sysfs), hcas[].provider,
 *   firmware, pcie           hcas[].fwVer, hcas[].pcieLink ("x16 at 32.0 GT/s PCIe")
 *   ports, rate, linkLayer,  rdma.ports: active, ports[].rateGbps of the ACTIVE ports,
 *   portsDown                ports[].linkLayer, ports[].state other than ACTIVE
 *   nics                     net.interfaces: chosen (the interfaces NCCL's socket transport
 *                            would use, by NCCL_SOCKET_IFNAME's rules)
 *   nccl                     nccl.library: version
 *   networks                 net.multus: networks[].name that are not the cluster network
 *   group                    the pod's label gang.groupBy (the downward-API labels file) */
#define _GNU_SOURCE
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../k8s/k8s.h"

static const struct pf_node *evidence_of(struct pf_run *R, const char *check)
{
    struct pf_check *c = pf_verdict_find_check(&R->verdict, check);
    return c ? c->evidence : NULL;
}

/* A scalar as text; false for maps, sequences and null. */
static bool scalar(char *out, size_t n, const struct pf_node *v)
{
    if (!v) return false;
    switch (v->kind) {
    case PF_NODE_STR:
        snprintf(out, n, "%s", v->str);
        return true;
    case PF_NODE_INT:
        snprintf(out, n, "%lld", v->i);
        return true;
    case PF_NODE_DBL:
        snprintf(out, n, "%g", v->d);
        return true;
    default:
        return false;
    }
}

static void set_key(char *out, const struct pf_node *ev, const char *key)
{
    char v[PF_GANG_VALUE];
    if (ev && scalar(v, sizeof(v), pf_node_get(ev, key))) snprintf(out, PF_GANG_VALUE, "%s", v);
}

/* The distinct values of key in the maps of seq (sorted, joined with ", "); only maps for
 * which keep() holds; "" when none. */
static void distinct(char *out, const struct pf_node *seq, const char *key,
                     bool (*keep)(const struct pf_node *m), const char *unit)
{
    if (!seq || seq->kind != PF_NODE_SEQ) return;
    struct pf_strlist l = {0}, u = {0};
    for (const struct pf_node *m = seq->first; m; m = m->next) {
        char v[PF_GANG_VALUE];
        if (m->kind != PF_NODE_MAP || (keep && !keep(m))) continue;
        if (scalar(v, sizeof(v), pf_node_get(m, key)) && v[0]) pf_strlist_addf(&l, "%s%s", v, unit);
    }
    pf_strlist_sort(&l);
    for (size_t i = 0; i < l.n; i++)
        if (i == 0 || strcmp(l.v[i], l.v[i - 1]) != 0) pf_strlist_add(&u, l.v[i]);
    if (u.n) pf_strlist_join(out, PF_GANG_VALUE, &u, ", ");
    pf_strlist_free(&l);
    pf_strlist_free(&u);
}

static bool port_active(const struct pf_node *m)
{
    const char *s = pf_node_get_str(m, "state");
    return s && strcmp(s, "ACTIVE") == 0;
}

/* pcieLink holds "x16 at 32.0 GT/s PCIe" when the link was read, else why not. */
static bool pcie_known(const struct pf_node *m)
{
    const char *s = pf_node_get_str(m, "pcieLink");
    return s && s[0] == 'x' && s[1] >= '0' && s[1] <= '9';
}

/* The names in seq, sorted and joined; "none" for an empty sequence. */
static void names(char *out, const struct pf_node *seq, const char *key, bool skip_default)
{
    if (!seq || seq->kind != PF_NODE_SEQ) return;
    struct pf_strlist l = {0};
    for (const struct pf_node *m = seq->first; m; m = m->next) {
        char v[PF_GANG_VALUE];
        if (key) {
            const struct pf_node *d = m->kind == PF_NODE_MAP ? pf_node_get(m, "default") : NULL;
            if (m->kind != PF_NODE_MAP || (skip_default && d && d->kind == PF_NODE_BOOL && d->b))
                continue;
            if (scalar(v, sizeof(v), pf_node_get(m, key))) pf_strlist_add(&l, v);
        } else if (scalar(v, sizeof(v), m)) {
            pf_strlist_add(&l, v);
        }
    }
    pf_strlist_sort(&l);
    if (l.n)
        pf_strlist_join(out, PF_GANG_VALUE, &l, ",");
    else
        snprintf(out, PF_GANG_VALUE, "none");
    pf_strlist_free(&l);
}

static void group_of(char *out, struct pf_run *R)
{
    const char *key = R->config.gang_group_by;
    if (!key[0]) return;
    struct pf_k8s_podinfo pi;
    (void)pf_k8s_podinfo_read_env(&pi, &R->ctx.host, &R->ctx.env);
    const char *v = pi.have_labels ? pf_k8s_map_get(&pi.labels, key) : NULL;
    if (v) {
        struct pf_buf b;
        pf_buf_init(&b, PF_BUF_LINE);
        pf_buf_addf(&b, "%s=%s", key, v);
        /* over the wire's limit: cut (a label value is at most 63 bytes, its key 317) */
        snprintf(out, PF_GANG_VALUE, "%.*s", PF_GANG_VALUE - 1, pf_buf_str(&b));
        pf_buf_free(&b);
    }
    pf_k8s_podinfo_free(&pi);
    pf_err_clear();
}

void run_inventory(struct pf_fleet_inv *out, struct pf_run *R)
{
    pf_fleet_inv_init(out);
    const struct pf_node *gpu = evidence_of(R, "gpu.devices");
    if (gpu) {
        set_key(out->v[PF_GANG_GPUS], gpu, "count");
        set_key(out->v[PF_GANG_DRIVER], gpu, "driverVersion");
        distinct(out->v[PF_GANG_GPU_MODEL], pf_node_get(gpu, "gpus"), "model", NULL, "");
    }
    set_key(out->v[PF_GANG_NVLINKS], evidence_of(R, "gpu.health"), "nvlinksActive");
    const struct pf_node *dev = evidence_of(R, "rdma.devices");
    if (dev) {
        const struct pf_node *h = pf_node_get(dev, "hcas");
        set_key(out->v[PF_GANG_HCAS], dev, "count");
        distinct(out->v[PF_GANG_PROVIDER], h, "provider", NULL, "");
        distinct(out->v[PF_GANG_FIRMWARE], h, "fwVer", NULL, "");
        distinct(out->v[PF_GANG_PCIE], h, "pcieLink", pcie_known, "");
    }
    const struct pf_node *ports = evidence_of(R, "rdma.ports");
    const struct pf_node *pl = ports ? pf_node_get(ports, "ports") : NULL;
    if (pl && pl->kind == PF_NODE_SEQ) {
        set_key(out->v[PF_GANG_PORTS], ports, "active");
        distinct(out->v[PF_GANG_RATE], pl, "rateGbps", port_active, " Gb/s");
        distinct(out->v[PF_GANG_LINK], pl, "linkLayer", NULL, "");
        out->ports_down = 0;
        for (const struct pf_node *m = pl->first; m; m = m->next)
            if (m->kind == PF_NODE_MAP && !port_active(m)) out->ports_down++;
    }
    const struct pf_node *net = evidence_of(R, "net.interfaces");
    if (net) names(out->v[PF_GANG_NICS], pf_node_get(net, "chosen"), NULL, false);
    set_key(out->v[PF_GANG_NCCL], evidence_of(R, "nccl.library"), "version");
    const struct pf_node *mu = evidence_of(R, "net.multus");
    if (mu) names(out->v[PF_GANG_NETWORKS], pf_node_get(mu, "networks"), "name", true);
    group_of(out->group, R);
}

void run_inventory_evidence(struct pf_node *ev, const struct pf_fleet_inv *inv)
{
    struct pf_node *m = pf_node_set_map(ev, "inventory");
    for (int t = 0; t < PF_GANG_NTRAITS; t++)
        if (inv->v[t][0]) pf_node_set_str(m, pf_gang_traits[t].key, inv->v[t]);
    if (inv->ports_down >= 0) pf_node_set_int(m, "portsDown", inv->ports_down);
    if (inv->group[0]) pf_node_set_str(m, "group", inv->group);
}
