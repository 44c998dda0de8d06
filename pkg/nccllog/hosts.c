/* From processes to hosts and the job: inter-node traffic is decided from the ranks' hosts
 * (several hosts, NET channel lines, or NCCL's own nNodes > 1); a host's transport comes
 * from its NET channel lines first, then from what its init lines declared. */
#define _GNU_SOURCE
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void host_name(char *out, size_t n, const struct pf_nccllog *log,
                      const struct pf_nccllog_proc *p)
{
    if (strcmp(p->host, "-") != 0) {
        snprintf(out, n, "%s", p->host);
        return;
    }
    /* lines without NCCL's prefix: the pod or the file they came from */
    const char *f = p->file >= 0 && (size_t)p->file < log->nfiles ? log->files[p->file].name : "";
    const char *base = strrchr(f, '/');
    snprintf(out, n, "%s", p->pod[0] ? p->pod : base ? base + 1 : f[0] ? f : "-");
}

static struct pf_nccllog_host *host_for(struct pf_nccllog *log, const char *name)
{
    for (size_t i = 0; i < log->nhosts; i++)
        if (strcmp(log->hosts[i].name, name) == 0) return &log->hosts[i];
    log->hosts = pf_xrealloc(log->hosts, (log->nhosts + 1) * sizeof(*log->hosts));
    struct pf_nccllog_host *h = &log->hosts[log->nhosts++];
    memset(h, 0, sizeof(*h));
    snprintf(h->name, sizeof(h->name), "%s", name);
    h->gdr = -1;
    return h;
}

/* What a process's init lines say it uses between nodes ("" nothing). ib_absent: no process
 * of the job listed an HCA and some found none, so NCCL <= 2.5's socket plugin carried it. */
static const char *declared(const struct pf_nccllog_proc *p, bool ib_absent)
{
    if (p->network[0]) return p->network;
    if (p->ofi_provider[0]) return "Libfabric";
    if (p->hcas.n && !p->ib_no_device) return "IB"; /* NCCL <= 2.5 prefers IB when found */
    if (p->ib_completion) return "IB";              /* net_ib.cc's completion path ran */
    /* "NET/IB : No device found." (net_ib.cc's init): NCCL takes the next net, Socket. An ibverbs
     * WARN alone (a failed ibv_ call) proves no fallback: what NCCL did next is not logged. */
    if (p->ib_no_device) return "Socket";
    /* NCCL <= 2.5 with NCCL_IB_DISABLE=1 logs no "Using network": NET/Socket came up instead */
    if (p->socket_up && (ib_absent || p->ib_disabled)) return "Socket";
    return "";
}

static void add_all(struct pf_strlist *to, const struct pf_strlist *from)
{
    for (size_t i = 0; i < from->n; i++)
        nl_list_add(to, from->v[i]);
}

static void host_add_proc(struct pf_nccllog_host *h, const struct pf_nccllog_proc *p, size_t idx)
{
    h->procs = pf_xrealloc(h->procs, (h->nprocs + 1) * sizeof(*h->procs));
    h->procs[h->nprocs++] = idx;
    add_all(&h->hcas, &p->hcas);
    add_all(&h->ifaces, &p->ifaces);
    add_all(&h->ranks, &p->ranks);
    if (p->version[0]) nl_list_add(&h->versions, p->version);
    if (p->pod[0] && p->pid) nl_list_add(&h->pods, p->pod);
    h->net_channels += p->net_channels;
    h->gdr_channels += p->gdr_channels;
    h->p2p_channels += p->p2p_channels;
    h->shm_channels += p->shm_channels;
    h->nvls |= p->nvls;
    h->collnet |= nl_proc_collnet(p);
    h->sharp |= p->sharp;
    h->ib_no_device |= p->ib_no_device;
    for (int k = 0; k < PF_NCCLLOG_W_KINDS; k++)
        h->warns_by_kind[k] += p->warns_by_kind[k];
    h->nwarns += p->nwarns;
}

/* The name seen most (weighted by channels for channel names). */
static void pick_transport(struct pf_nccllog_host *h, const struct pf_nccllog *log, bool ib_absent)
{
    const char *best = NULL, *provider = "";
    int best_n = 0;
    for (size_t i = 0; i < h->nprocs; i++) {
        const struct pf_nccllog_proc *p = &log->v[h->procs[i]];
        if (p->ofi_provider[0]) provider = p->ofi_provider;
        if (!p->chan_net[0]) continue;
        int n = 0;
        for (size_t j = 0; j < h->nprocs; j++)
            if (!strcmp(log->v[h->procs[j]].chan_net, p->chan_net))
                n += log->v[h->procs[j]].net_channels;
        if (n > best_n) best = p->chan_net, best_n = n;
    }
    h->from_channels = best != NULL;
    for (size_t i = 0; !best && i < h->nprocs; i++) {
        const char *d = declared(&log->v[h->procs[i]], ib_absent);
        if (d[0]) best = d;
    }
    snprintf(h->transport, sizeof(h->transport), "%s", best ? best : "");
    h->cls = pf_nccllog_classify(h->transport, provider);
}

static void host_gdr(struct pf_nccllog_host *h, const struct pf_nccllog *log)
{
    int en = 0, dis = 0;
    for (size_t i = 0; i < h->nprocs; i++) {
        en += log->v[h->procs[i]].gdr_enabled;
        dis += log->v[h->procs[i]].gdr_disabled;
    }
    h->gdr = h->gdr_channels > 0 ? 1 : h->net_channels > 0 ? 0 : en > 0 ? 1 : dis > 0 ? 0 : -1;
}

void pf_nccllog_finish(struct pf_nccllog *log)
{
    if (log->finished) return;
    for (size_t i = 0; i < log->nhosts; i++)
        nl_host_free(&log->hosts[i]);
    free(log->hosts);
    log->hosts = NULL;
    log->nhosts = 0;
    log->nranks = log->nnodes = 0;
    size_t real_hosts = 0;
    int net = 0, local = 0;
    bool said_nodes = false, all_hostid = true, one_hostid = true;
    const char *hostid = NULL;
    char name[256];
    for (size_t i = 0; i < log->n; i++) {
        const struct pf_nccllog_proc *p = &log->v[i];
        host_name(name, sizeof(name), log, p);
        size_t before = log->nhosts;
        host_add_proc(host_for(log, name), p, i);
        if (log->nhosts > before && strcmp(p->host, "-") != 0) real_hosts++;
        if (p->nranks > log->nranks) log->nranks = p->nranks;
        if (p->nnodes > log->nnodes) log->nnodes = p->nnodes;
        said_nodes |= p->nnodes > 0;
        if (p->local_ranks > local) local = p->local_ranks;
        if (strcmp(p->host, "-") != 0) {
            all_hostid &= p->hostid[0] != '\0';
            if (p->hostid[0] && !hostid) hostid = p->hostid;
            if (p->hostid[0] && strcmp(p->hostid, hostid) != 0) one_hostid = false;
        }
        net += p->net_channels;
    }
    /* a process's own log that names more ranks than all hosts here hold (one file a pod) */
    size_t seen = 0;
    for (size_t i = 0; i < log->nhosts; i++)
        seen += log->hosts[i].ranks.n;
    bool more_ranks = seen > 0 && log->nranks > (int)seen && log->nnodes != 1;
    bool any_hca = false, none_found = false;
    for (size_t i = 0; i < log->n; i++) {
        any_hca |= log->v[i].hcas.n > 0;
        none_found |= log->v[i].ib_no_device || log->v[i].ib_disabled;
    }
    bool ib_absent = !any_hca && none_found;
    /* What NCCL states outranks host names: nNodes (2.20+), all ranks local to one node
     * (localRanks == nranks), or one NCCL_HOSTID for every process (NCCL's node identity); a
     * single-node job may still use NET channels (P2P and SHM off). */
    log->one_node = (said_nodes && log->nnodes == 1) ||
                    (!said_nodes && local > 0 && log->nranks > 0 && local >= log->nranks) ||
                    (!said_nodes && hostid && all_hostid && one_hostid);
    log->multi_node =
        !log->one_node && (real_hosts > 1 || net > 0 || log->nnodes > 1 || more_ranks);
    for (size_t i = 0; i < log->nhosts; i++) {
        struct pf_nccllog_host *h = &log->hosts[i];
        pick_transport(h, log, ib_absent);
        host_gdr(h, log);
        if (!log->multi_node) h->cls = PF_NCCLLOG_NONE; /* one host: nothing inter-node */
        pf_strlist_sort(&h->versions);
    }
    log->finished = true;
}

/* ---- logs of several jobs given together */

static const struct pf_nccllog *sort_log; /* qsort has no argument */

static int by_world_rank(const void *a, const void *b)
{
    const struct pf_nccllog_proc *p = &sort_log->v[*(const size_t *)a],
                                 *q = &sort_log->v[*(const size_t *)b];
    if (p->nranks != q->nranks) return p->nranks < q->nranks ? -1 : 1;
    if (p->world_rank1 != q->world_rank1) return p->world_rank1 < q->world_rank1 ? -1 : 1;
    return p->file - q->file;
}

static const char *file_name(const struct pf_nccllog *log, int f)
{
    return f >= 0 && (size_t)f < log->nfiles ? log->files[f].name : "?";
}

int pf_nccllog_several_runs(const struct pf_nccllog *log, char *why, size_t n)
{
    if (log->nfiles < 2) return 0;
    /* each file's world: the largest communicator its processes logged */
    int *size = pf_xcalloc(log->nfiles, sizeof(*size));
    for (size_t i = 0; i < log->n; i++) {
        const struct pf_nccllog_proc *p = &log->v[i];
        if (p->world_rank1 && p->file >= 0 && (size_t)p->file < log->nfiles &&
            p->nranks > size[p->file])
            size[p->file] = p->nranks;
    }
    int fa = -1;
    for (size_t f = 0; f < log->nfiles; f++) {
        if (!size[f]) continue;
        if (fa < 0) {
            fa = (int)f;
        } else if (size[f] != size[fa]) {
            snprintf(why, n,
                     "%s is of a job of %d ranks and %s of a job of %d ranks (the largest "
                     "communicator each logged)",
                     file_name(log, fa), size[fa], file_name(log, (int)f), size[f]);
            free(size);
            return 1;
        }
    }
    free(size);
    size_t *ix = pf_xmalloc((log->n ? log->n : 1) * sizeof(*ix));
    size_t m = 0;
    for (size_t i = 0; i < log->n; i++)
        if (log->v[i].world_rank1) ix[m++] = i;
    sort_log = log;
    qsort(ix, m, sizeof(*ix), by_world_rank);
    int found = 0;
    for (size_t i = 1; i < m && !found; i++) {
        const struct pf_nccllog_proc *p = &log->v[ix[i - 1]], *q = &log->v[ix[i]];
        if (p->nranks != q->nranks || p->world_rank1 != q->world_rank1 || p->file == q->file)
            continue;
        char a[300], b[300];
        nl_proc_name(a, sizeof(a), p);
        nl_proc_name(b, sizeof(b), q);
        snprintf(why, n,
                 "rank %d of a %d-rank communicator is held by %s in %s and by %s in %s: "
                 "two processes cannot hold one rank of one job",
                 p->world_rank1 - 1, p->nranks, a, file_name(log, p->file), b,
                 file_name(log, q->file));
        found = 1;
    }
    free(ix);
    return found;
}
