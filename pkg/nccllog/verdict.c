/* Check `nccl.log`: evidence (job, hosts, processes) and findings (docs/checks.md). */
#define _GNU_SOURCE
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define EVIDENCE_PROCS_MAX 256

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

void nl_ranks_text(char *out, size_t n, const struct pf_strlist *l)
{
    out[0] = '\0';
    if (l->n == 0 || n == 0) return;
    int *v = pf_xmalloc(l->n * sizeof(int));
    for (size_t i = 0; i < l->n; i++)
        v[i] = atoi(l->v[i]);
    qsort(v, l->n, sizeof(int), cmp_int);
    size_t used = 0;
    for (size_t i = 0; i < l->n && used + 1 < n;) {
        size_t j = i;
        while (j + 1 < l->n && v[j + 1] <= v[j] + 1)
            j++;
        int k = v[j] > v[i] ? snprintf(out + used, n - used, "%s%d-%d", used ? "," : "", v[i], v[j])
                            : snprintf(out + used, n - used, "%s%d", used ? "," : "", v[i]);
        if (k < 0 || (size_t)k >= n - used) break;
        used += (size_t)k;
        i = j + 1;
    }
    free(v);
}

static void add_list(struct pf_node *map, const char *key, const struct pf_strlist *l)
{
    struct pf_node *s = pf_node_set_seq(map, key);
    for (size_t i = 0; i < l->n; i++)
        pf_node_add_str(s, l->v[i]);
}

static void add_warn_kinds(struct pf_node *map, const int *by_kind)
{
    struct pf_node *w = NULL;
    for (int k = 0; k < PF_NCCLLOG_W_KINDS; k++) {
        if (!by_kind[k]) continue;
        if (!w) w = pf_node_set_map(map, "warningsByKind");
        pf_node_set_int(w, pf_nccllog_warn_kind_name(k), by_kind[k]);
    }
}

static void proc_evidence(struct pf_node *m, const struct pf_nccllog_proc *p)
{
    pf_node_set_str(m, "host", p->host);
    if (p->pid) pf_node_set_int(m, "pid", p->pid);
    if (p->pod[0]) pf_node_set_str(m, "pod", p->pod);
    if (p->devs.n) add_list(m, "cudaDevs", &p->devs);
    if (p->version[0]) pf_node_set_str(m, "ncclVersion", p->version);
    if (p->cuda[0]) pf_node_set_str(m, "cuda", p->cuda);
    if (p->network[0])
        pf_node_set_str(m, "network", p->network);
    else if (p->chan_net[0])
        pf_node_set_str(m, "network", p->chan_net);
    if (p->ofi_provider[0]) pf_node_set_str(m, "ofiProvider", p->ofi_provider);
    if (p->ib_completion) pf_node_set_bool(m, "ibCompletionWarn", true);
    if (p->hcas.n) add_list(m, "hcas", &p->hcas);
    if (p->ifaces.n) add_list(m, "interfaces", &p->ifaces);
    if (p->bootstrap[0]) pf_node_set_str(m, "bootstrap", p->bootstrap);
    if (p->hostid[0]) pf_node_set_str(m, "ncclHostId", p->hostid);
    char r[256];
    nl_ranks_text(r, sizeof(r), &p->ranks);
    if (r[0]) pf_node_set_str(m, "ranks", r);
    int g = pf_nccllog_gdr(p);
    if (g >= 0) pf_node_set_bool(m, "gpuDirectRdma", g == 1);
    if (p->net_channels)
        pf_node_set_strf(m, "netChannels", "%d (%d GDRDMA)", p->net_channels, p->gdr_channels);
    if (p->nvls) pf_node_set_bool(m, "nvls", true);
    if (nl_proc_collnet(p)) pf_node_set_bool(m, "collnet", true);
    if (p->init_seconds > 0) pf_node_set_dbl(m, "initSeconds", p->init_seconds);
    if (p->nwarns) {
        add_list(m, "warnings", &p->warns);
        if (p->nwarns > p->warns.n)
            pf_node_set_int(m, "warningsNotShown", (long long)(p->nwarns - p->warns.n));
    }
}

static void host_evidence(struct pf_node *m, const struct pf_nccllog *log,
                          const struct pf_nccllog_host *h)
{
    pf_node_set_str(m, "name", h->name);
    pf_node_set_int(m, "processes", (long long)h->nprocs);
    if (h->pods.n) add_list(m, "pods", &h->pods);
    char r[512];
    nl_ranks_text(r, sizeof(r), &h->ranks);
    if (r[0]) pf_node_set_str(m, "ranks", r);
    pf_node_set_str(m, "transport", h->cls == PF_NCCLLOG_NONE ? "none" : h->transport);
    pf_node_set_str(m, "transportClass", pf_nccllog_class_name(h->cls));
    if (h->transport[0]) pf_node_set_str(m, "network", h->transport);
    pf_node_set_str(m, "transportFrom",
                    h->from_channels  ? "channels"
                    : h->transport[0] ? "init"
                                      : "none");
    if (h->cls == PF_NCCLLOG_NONE || h->gdr < 0)
        pf_node_set_null(m, "gpuDirectRdma");
    else
        pf_node_set_bool(m, "gpuDirectRdma", h->gdr == 1);
    if (h->hcas.n) add_list(m, "hcas", &h->hcas);
    if (h->ifaces.n) add_list(m, "interfaces", &h->ifaces);
    struct pf_strlist on = {0}, off = {0};
    for (size_t i = 0; i < h->nprocs; i++) {
        for (size_t j = 0; j < log->v[h->procs[i]].gdr_on.n; j++)
            nl_list_add(&on, log->v[h->procs[i]].gdr_on.v[j]);
        for (size_t j = 0; j < log->v[h->procs[i]].gdr_off.n; j++)
            nl_list_add(&off, log->v[h->procs[i]].gdr_off.v[j]);
    }
    if (on.n) add_list(m, "gdrEnabledHcas", &on);
    if (off.n) add_list(m, "gdrDisabledHcas", &off);
    pf_strlist_free(&on);
    pf_strlist_free(&off);
    if (h->versions.n) add_list(m, "ncclVersions", &h->versions);
    pf_node_set_strf(m, "channels", "net %d (%d GDRDMA), p2p %d, shm %d", h->net_channels,
                     h->gdr_channels, h->p2p_channels, h->shm_channels);
    pf_node_set_bool(m, "nvls", h->nvls);
    pf_node_set_bool(m, "collnet", h->collnet);
    if (h->sharp) pf_node_set_bool(m, "sharp", true);
    if (h->nwarns) pf_node_set_int(m, "warnings", (long long)h->nwarns);
    add_warn_kinds(m, h->warns_by_kind);
}

/* Every version any process or file logged, sorted. */
static void versions(struct pf_strlist *out, const struct pf_nccllog *log)
{
    for (size_t i = 0; i < log->n; i++)
        nl_list_add(out, log->v[i].version);
    for (size_t i = 0; i < log->nfiles; i++) {
        nl_list_add(out, log->files[i].version);
        nl_list_add(out, log->files[i].pending_version);
    }
    pf_strlist_sort(out);
}

static void job_evidence(struct pf_node *j, const struct pf_nccllog *log)
{
    if (log->nranks) pf_node_set_int(j, "ranks", log->nranks);
    size_t real = 0;
    for (size_t i = 0; i < log->nhosts; i++)
        real += log->hosts[i].nprocs > 0;
    pf_node_set_int(j, "hosts", (long long)(log->nnodes > (int)real ? (size_t)log->nnodes : real));
    pf_node_set_bool(j, "multiNode", log->multi_node);
    struct pf_strlist t = {0}, v = {0};
    bool nvls = false, collnet = false;
    int complete = 0, kinds[PF_NCCLLOG_W_KINDS] = {0};
    double init = 0;
    for (size_t i = 0; i < log->nhosts; i++) {
        if (log->hosts[i].cls != PF_NCCLLOG_NONE) nl_list_add(&t, log->hosts[i].transport);
        nvls |= log->hosts[i].nvls;
        collnet |= log->hosts[i].collnet;
        for (int k = 0; k < PF_NCCLLOG_W_KINDS; k++)
            kinds[k] += log->hosts[i].warns_by_kind[k];
    }
    for (size_t i = 0; i < log->n; i++) {
        complete += log->v[i].init_complete;
        if (log->v[i].init_seconds > init) init = log->v[i].init_seconds;
    }
    add_list(j, "transports", &t);
    versions(&v, log);
    add_list(j, "ncclVersions", &v);
    pf_node_set_bool(j, "nvls", nvls);
    pf_node_set_bool(j, "collnet", collnet);
    if (complete) pf_node_set_int(j, "initComplete", complete);
    if (init > 0) pf_node_set_dbl(j, "initSecondsMax", init);
    add_warn_kinds(j, kinds);
    pf_strlist_free(&t);
    pf_strlist_free(&v);
}

void pf_nccllog_evidence(struct pf_node *evidence, struct pf_nccllog *log)
{
    pf_nccllog_finish(log);
    pf_node_set_int(evidence, "lines", (long long)log->lines);
    pf_node_set_int(evidence, "ncclLines", (long long)log->nccl_lines);
    if (log->cut_lines) pf_node_set_int(evidence, "linesCut", (long long)log->cut_lines);
    job_evidence(pf_node_set_map(evidence, "job"), log);
    struct pf_node *hs = pf_node_set_seq(evidence, "hosts");
    for (size_t i = 0; i < log->nhosts; i++)
        host_evidence(pf_node_add_map(hs), log, &log->hosts[i]);
    struct pf_node *seq = pf_node_set_seq(evidence, "processes");
    for (size_t i = 0; i < log->n && i < EVIDENCE_PROCS_MAX; i++)
        proc_evidence(pf_node_add_map(seq), &log->v[i]);
    if (log->n > EVIDENCE_PROCS_MAX)
        pf_node_set_int(evidence, "processesNotShown", (long long)(log->n - EVIDENCE_PROCS_MAX));
}

static void host_who(char *out, size_t n, const struct pf_nccllog *log,
                     const struct pf_nccllog_host *h)
{
    if (h->nprocs == 1)
        nl_proc_name(out, n, &log->v[h->procs[0]]);
    else
        snprintf(out, n, "%s (%zu processes)", h->name, h->nprocs);
}

static const char *provider_of(const struct pf_nccllog *log, const struct pf_nccllog_host *h)
{
    for (size_t i = 0; i < h->nprocs; i++)
        if (log->v[h->procs[i]].ofi_provider[0]) return log->v[h->procs[i]].ofi_provider;
    return "";
}

static void socket_finding(struct pf_check *out, const struct pf_nccllog *log,
                           const struct pf_nccllog_host *h, bool expect_rdma, bool any_rdma)
{
    char who[300], ifs[256] = "", hcas[256] = "", what[160];
    host_who(who, sizeof(who), log, h);
    pf_strlist_join(ifs, sizeof(ifs), &h->ifaces, ", ");
    pf_strlist_join(hcas, sizeof(hcas), &h->hcas, " ");
    const char *prov = provider_of(log, h);
    if (strcasecmp(h->transport, "Socket") == 0)
        snprintf(what, sizeof(what), "NET/Socket");
    else
        snprintf(what, sizeof(what), "NET/%s over libfabric provider %s", h->transport, prov);
    bool unused_hcas = h->hcas.n > 0;
    enum pf_status st = (expect_rdma || any_rdma || unused_hcas) ? PF_FAIL : PF_WARN;
    char why[400];
    if (expect_rdma)
        snprintf(why, sizeof(why), "expect.transport says RDMA");
    else if (any_rdma)
        snprintf(why, sizeof(why), "other ranks of this job use RDMA");
    else if (unused_hcas)
        snprintf(why, sizeof(why), "NET/IB found %s but NCCL did not use it", hcas);
    else if (h->ib_no_device)
        snprintf(why, sizeof(why), "NET/IB found no device");
    else if (prov[0])
        snprintf(why, sizeof(why), "the libfabric provider %s is not RDMA", prov);
    else
        snprintf(why, sizeof(why), "no RDMA network in this log");
    if (st == PF_WARN) {
        /* the host used sockets, but nothing in the log says RDMA was meant for it (NET/IB's
         * "No device found" is what net_ib.cc prints on every host without HCAs): whether this
         * is a fallback is unknown */
        pf_check_unknown(out, "socket-fallback",
                         "%s used %s (%s) for inter-node traffic: %s; whether RDMA was meant: no "
                         "rank of the log used it and expect.transport is not set",
                         who, what, ifs[0] ? ifs : "interfaces not logged", why);
        return;
    }
    pf_check_add_finding(out, "socket-fallback", st, NULL,
                         "%s used %s (%s) for inter-node traffic: %s", who, what,
                         ifs[0] ? ifs : "interfaces not logged", why);
}

static void warn_finding(struct pf_check *out, const struct pf_nccllog *log,
                         const struct pf_nccllog_host *h)
{
    char who[300], kinds[256] = "";
    host_who(who, sizeof(who), log, h);
    size_t used = 0;
    for (int k = 0; k < PF_NCCLLOG_W_KINDS; k++) {
        if (!h->warns_by_kind[k]) continue;
        int r = snprintf(kinds + used, sizeof(kinds) - used, "%s%d %s", used ? ", " : "",
                         h->warns_by_kind[k], pf_nccllog_warn_kind_name(k));
        if (r < 0 || (size_t)r >= sizeof(kinds) - used) break;
        used += (size_t)r;
    }
    const char *first = "";
    for (size_t i = 0; i < h->nprocs && !first[0]; i++)
        if (log->v[h->procs[i]].warns.n) first = log->v[h->procs[i]].warns.v[0];
    pf_check_add_finding(out, "nccl-warn", PF_WARN, NULL, "%s logged %zu NCCL WARN (%s): %s", who,
                         h->nwarns, kinds, first);
}

static void version_finding(struct pf_check *out, const struct pf_nccllog *log,
                            const struct pf_strlist *vs)
{
    char list[256], where[512] = "", who[300];
    pf_strlist_join(list, sizeof(list), vs, ", ");
    size_t used = 0;
    for (size_t i = 0; i < log->n + log->nfiles && used + 1 < sizeof(where); i++) {
        const char *v;
        if (i < log->n) {
            v = log->v[i].version;
            nl_proc_name(who, sizeof(who), &log->v[i]);
        } else {
            const struct pf_nccllog_file *f = &log->files[i - log->n];
            v = f->version[0] ? f->version : f->pending_version;
            snprintf(who, sizeof(who), "%s", f->name[0] ? f->name : "(input)");
        }
        if (!v[0]) continue;
        int k = snprintf(where + used, sizeof(where) - used, "%s%s %s", used ? ", " : "", who, v);
        if (k < 0 || (size_t)k >= sizeof(where) - used) break;
        used += (size_t)k;
    }
    pf_check_add_finding(out, "nccl-version-mismatch", PF_FAIL, NULL,
                         "ranks run different NCCL versions (%s): %s", list, where);
}

void pf_nccllog_findings(struct pf_check *out, struct pf_nccllog *log, const char *expect_transport)
{
    pf_nccllog_finish(log);
    const char *et = expect_transport ? expect_transport : "";
    bool expect_rdma = !strcasecmp(et, "IB") || !strcasecmp(et, "OFI");
    bool expect_socket = !strcasecmp(et, "Socket");
    bool any_rdma = false;
    for (size_t i = 0; i < log->nhosts; i++)
        any_rdma |= log->hosts[i].cls == PF_NCCLLOG_RDMA;
    size_t nsocket = 0, nnogdr = 0;
    char who[300];
    for (size_t i = 0; i < log->nhosts; i++) {
        const struct pf_nccllog_host *h = &log->hosts[i];
        if (h->cls == PF_NCCLLOG_SOCKET && !expect_socket) {
            nsocket++;
            socket_finding(out, log, h, expect_rdma, any_rdma);
        }
        if (h->cls == PF_NCCLLOG_RDMA && h->gdr < 0) {
            /* neither channel lines (src/transport.cc, "via NET/IB/0[/GDRDMA]") nor NET/IB's
             * "GPU Direct RDMA Enabled/Disabled for HCA" line: nothing says either way */
            host_who(who, sizeof(who), log, h);
            pf_check_unknown(out, "no-gdr",
                             "%s used %s, and logged no channel line and no \"GPU Direct RDMA\" "
                             "line",
                             who, h->transport);
        }
        if (h->cls == PF_NCCLLOG_RDMA && h->gdr == 0) {
            nnogdr++;
            host_who(who, sizeof(who), log, h);
            pf_check_add_finding(out, "no-gdr", PF_WARN, NULL,
                                 "%s used %s without GPUDirect RDMA (%d of %d network channels "
                                 "via GDRDMA)",
                                 who, h->transport, h->gdr_channels, h->net_channels);
        }
        if (h->nwarns) warn_finding(out, log, h);
    }
    struct pf_strlist vs = {0};
    versions(&vs, log);
    if (vs.n > 1) version_finding(out, log, &vs);
    char vtext[128] = "", ttext[128] = "";
    pf_strlist_join(vtext, sizeof(vtext), &vs, ", ");
    struct pf_strlist ts = {0};
    for (size_t i = 0; i < log->nhosts; i++)
        if (log->hosts[i].cls != PF_NCCLLOG_NONE) nl_list_add(&ts, log->hosts[i].transport);
    pf_strlist_join(ttext, sizeof(ttext), &ts, ", ");
    char ranks[32] = "";
    if (log->nranks) snprintf(ranks, sizeof(ranks), "%d ranks on ", log->nranks);
    pf_check_set_message(out,
                         "%s%zu host%s, NCCL %s; inter-node: %s; %zu host%s on sockets, %zu "
                         "without GDR",
                         ranks, log->nhosts, log->nhosts == 1 ? "" : "s",
                         vtext[0] ? vtext : "version not logged",
                         !log->multi_node ? "none (one node)"
                         : ttext[0]       ? ttext
                                          : "not logged",
                         nsocket, nsocket == 1 ? "" : "s", nnogdr);
    pf_strlist_free(&ts);
    pf_strlist_free(&vs);
}

void pf_nccllog_check(struct pf_verdict *v, struct pf_check *c, struct pf_nccllog *log,
                      const char *expect_transport)
{
    struct pf_node *fl = pf_node_set_seq(c->evidence, "files");
    for (size_t i = 0; i < log->nfiles; i++)
        if (log->files[i].name[0]) pf_node_add_str(fl, log->files[i].name);
    if (log->nccl_lines == 0) {
        /* nothing NCCL wrote: no finding can be judged, and none is a pass */
        pf_check_unknown(c, "socket-fallback",
                         "no NCCL line found in %zu line%s of %zu file%s (NCCL_DEBUG=INFO writes "
                         "\"host:pid:tid [dev] NCCL INFO\" lines, src/debug.cc)",
                         log->lines, log->lines == 1 ? "" : "s", log->nfiles,
                         log->nfiles == 1 ? "" : "s");
        pf_check_skip(c,
                      "no NCCL line found in %zu file%s: unknown (was the job run with "
                      "NCCL_DEBUG=INFO?)",
                      log->nfiles, log->nfiles == 1 ? "" : "s");
        return;
    }
    pf_nccllog_findings(c, log, expect_transport);
    pf_nccllog_evidence(c->evidence, log);
    struct pf_strlist vs = {0};
    versions(&vs, log);
    if (v) {
        add_list(v->environment, "ncclVersions", &vs);
        if (vs.n == 1) pf_node_set_str(v->environment, "ncclVersion", vs.v[0]);
    }
    pf_strlist_free(&vs);
}
