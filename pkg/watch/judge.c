/* Judging each trainer process as its lines arrive, against what the gate measured in this pod
 * (docs/checks.md, `watch`). A fact is decided by the line that settles it:
 *   version    "NCCL version 2.21.5+cuda12.4" (init.cc showVersion, printed at INFO by every
 *              rank; pkg/nccllog reads it)
 *   network    the first "via NET/<name>" channel line, else "Using network <name>" /
 *              "Assigned NET plugin <name> to comm" (the net NCCL picked for the communicator)
 *   NICs       the device list NCCL printed when its net came up ("NET/IB : Using [0]mlx5_0:1/IB
 *              ...", 2.27+ one "NET/IB: [0] ..." line each), read once the network is chosen
 *              (NCCL prints the list before it names the net)
 *   GPUDirect  the first NET channel line ("/GDRDMA" or not), else "Init COMPLETE" with the
 *              per-HCA "GPU Direct RDMA Enabled|Disabled" lines
 * A finding is raised once per process and code, at the line that decides it. */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "internal.h"

enum { D_VERSION = 1, D_NETWORK = 2, D_GDR = 4, D_COMPLETE = 8, D_NICS = 16 };
enum { F_SOCKET = 1, F_NICS = 2, F_GDR = 4, F_VERSION = 8 };

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void proc_label(char *out, size_t n, const struct pf_nccllog_proc *p)
{
    char r[64] = "";
    if (p->ranks.n == 1)
        snprintf(r, sizeof(r), " (rank %s)", p->ranks.v[0]);
    else if (p->ranks.n > 1)
        snprintf(r, sizeof(r), " (ranks %s..)", p->ranks.v[0]);
    if (p->pid)
        snprintf(out, n, "%s:%ld%s", p->host, p->pid, r);
    else
        snprintf(out, n, "%s%s", p->pod[0] ? p->pod : p->host, r);
}

static void grow(struct pf_watch *w)
{
    if (w->nprocs >= w->log.n) return;
    w->procs = pf_xrealloc(w->procs, w->log.n * sizeof(*w->procs));
    memset(w->procs + w->nprocs, 0, (w->log.n - w->nprocs) * sizeof(*w->procs));
    w->nprocs = w->log.n;
}

/* A finding of process i (SIZE_MAX: the job), raised once per bit. */
static void raise_finding(struct pf_watch *w, size_t i, unsigned bit, const char *code,
                          enum pf_status status, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static void raise_finding(struct pf_watch *w, size_t i, unsigned bit, const char *code,
                          enum pf_status status, const char *fmt, ...)
{
    if (i != SIZE_MAX) {
        if (w->procs[i].raised & bit) return;
        w->procs[i].raised |= bit;
    }
    w->findings = pf_xrealloc(w->findings, (w->nfindings + 1) * sizeof(*w->findings));
    struct pf_watch_finding *f = &w->findings[w->nfindings++];
    memset(f, 0, sizeof(*f));
    snprintf(f->code, sizeof(f->code), "%s", code);
    f->status = status;
    if (i != SIZE_MAX) proc_label(f->proc, sizeof(f->proc), &w->log.v[i]);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->message, sizeof(f->message), fmt, ap);
    va_end(ap);
    f->line_at = pf_now();
    f->wall_at = wall_now();
}

static const char *proc_network(const struct pf_nccllog_proc *p)
{
    return p->chan_net[0] ? p->chan_net : p->network;
}

/* Whether the gate measured an RDMA network in this pod. */
static bool gate_rdma(const struct pf_watch_gate *g)
{
    if (g->network[0]) return pf_nccllog_classify(g->network, "") == PF_NCCLLOG_RDMA;
    return false;
}

void pf_watch_judge_proc(struct pf_watch *w, size_t i)
{
    grow(w);
    if (i >= w->nprocs) return;
    struct pf_watch_proc *s = &w->procs[i];
    const struct pf_nccllog_proc *p = &w->log.v[i];
    double now = pf_now();
    if (s->first_at == 0) {
        s->first_at = now;
        s->pid = p->pid;
        w->last_start = now;
    }
    char name[160];
    proc_label(name, sizeof(name), p);
    const struct pf_watch_gate *g = &w->gate;
    if (p->version[0] && !(s->decided & D_VERSION)) s->decided |= D_VERSION;
    if (s->decided & D_VERSION && g->version[0] && strcmp(p->version, g->version) != 0)
        raise_finding(w, i, F_VERSION, "trainer-nccl-version", PF_WARN,
                      "%s runs NCCL %s, the gate loaded NCCL %s in this pod", name, p->version,
                      g->version);
    const char *net = proc_network(p);
    if (net[0] && !(s->decided & D_NETWORK)) s->decided |= D_NETWORK;
    enum pf_nccllog_class cls = pf_nccllog_classify(net, p->ofi_provider);
    if (s->decided & D_NETWORK && cls == PF_NCCLLOG_SOCKET && gate_rdma(g)) {
        char ifs[256] = "";
        pf_strlist_join(ifs, sizeof(ifs), &p->ifaces, ", ");
        raise_finding(w, i, F_SOCKET, "trainer-socket-fallback", PF_FAIL,
                      "%s: NCCL chose network %s%s%s%s where the gate measured %s in this pod",
                      name, net, p->ofi_provider[0] ? " (provider " : "", p->ofi_provider,
                      p->ofi_provider[0] ? ")" : "", g->network);
        (void)ifs;
    }
    if (s->decided & D_NETWORK && !(s->decided & D_NICS)) s->decided |= D_NICS;
    if (s->decided & D_NICS && cls == PF_NCCLLOG_RDMA && g->hcas > 0 && p->hcas.n > 0 &&
        (int)p->hcas.n < g->hcas) {
        char h[512] = "";
        pf_strlist_join(h, sizeof(h), &p->hcas, ", ");
        raise_finding(w, i, F_NICS, "trainer-fewer-nics", PF_WARN,
                      "%s: NCCL set up %zu NIC%s (%s), the gate's NCCL saw %d in this pod", name,
                      p->hcas.n, p->hcas.n == 1 ? "" : "s", h, g->hcas);
    }
    if (p->init_complete > 0 && !(s->decided & D_COMPLETE)) {
        s->decided |= D_COMPLETE;
        s->complete_at = now;
    }
    if ((p->net_channels > 0 || s->decided & D_COMPLETE) && !(s->decided & D_GDR))
        s->decided |= D_GDR;
    int gdr = pf_nccllog_gdr(p);
    if (s->decided & D_GDR && gdr == 0 && g->gdr == 1 && cls == PF_NCCLLOG_RDMA)
        raise_finding(w, i, F_GDR, "trainer-no-gdr", PF_WARN,
                      "%s: NCCL runs %s without GPUDirect RDMA (%d of %d network channels via "
                      "GDRDMA%s), the gate's NCCL used it in this pod",
                      name, net, p->gdr_channels, p->net_channels,
                      p->gdr_off.n ? "; GPU Direct RDMA Disabled for HCA" : "");
}

const char *pf_watch_step_name(const struct pf_nccllog_proc *p)
{
    if (p->init_complete > 0) return "complete";
    if (p->net_channels + p->p2p_channels + p->shm_channels > 0 || p->nvls || p->collnet)
        return "connecting";
    if (p->nranks > 0 || p->ranks.n > 0) return "communicator";
    if (p->network[0] || p->hcas.n || p->socket_up || p->ib_no_device) return "network";
    if (p->bootstrap[0]) return "bootstrap";
    if (p->version[0]) return "version";
    return "started";
}

bool pf_watch_all_complete(const struct pf_watch *w)
{
    if (w->nprocs == 0) return false;
    for (size_t i = 0; i < w->nprocs; i++)
        if (!(w->procs[i].decided & D_COMPLETE)) return false;
    return true;
}

/* "version: 1 (node-a:12), communicator: 3 (ranks 1, 2, 3)". */
static void steps_text(char *out, size_t n, const struct pf_watch *w)
{
    static const char *const order[] = {"started",      "version",    "bootstrap", "network",
                                        "communicator", "connecting", "complete"};
    size_t used = 0;
    out[0] = '\0';
    for (size_t k = 0; k < PF_ARRAY_LEN(order) && used + 1 < n; k++) {
        struct pf_strlist who = {0};
        size_t count = 0;
        for (size_t i = 0; i < w->nprocs; i++) {
            const struct pf_nccllog_proc *p = &w->log.v[i];
            if (strcmp(pf_watch_step_name(p), order[k]) != 0) continue;
            count++;
            if (who.n < 8) {
                char l[160];
                proc_label(l, sizeof(l), p);
                pf_strlist_add(&who, l);
            }
        }
        if (count) {
            char j[1024];
            pf_strlist_join(j, sizeof(j), &who, ", ");
            int k2 = snprintf(out + used, n - used, "%s%s: %zu (%s%s)", used ? "; " : "", order[k],
                              count, j, count > who.n ? ", ..." : "");
            if (k2 > 0) used += (size_t)k2 < n - used ? (size_t)k2 : n - used - 1;
        }
        pf_strlist_free(&who);
    }
}

void pf_watch_judge_clock(struct pf_watch *w)
{
    grow(w);
    if (w->stall_raised || w->o.stall_s <= 0) return;
    size_t started = 0, complete = 0;
    for (size_t i = 0; i < w->nprocs; i++) {
        if (w->procs[i].first_at > 0) started++;
        if (w->procs[i].decided & D_COMPLETE) complete++;
    }
    double now = pf_now();
    size_t expected = w->o.processes > 0 ? (size_t)w->o.processes : started;
    /* nothing started: the trainer has not reached NCCL yet (not a stall of NCCL's init) */
    if (started == 0) return;
    if (complete >= expected) return;
    if (now - w->last_start < w->o.stall_s) return;
    char steps[2048];
    steps_text(steps, sizeof(steps), w);
    w->stall_raised = true;
    if (started < expected)
        raise_finding(w, SIZE_MAX, 0, "init-stall", PF_FAIL,
                      "NCCL init stalled: %zu of %zu expected processes wrote no NCCL line and %zu "
                      "of %zu completed init %.0f s after the last one started; steps reached: %s",
                      expected - started, expected, complete, started, w->o.stall_s, steps);
    else
        raise_finding(w, SIZE_MAX, 0, "init-stall", PF_FAIL,
                      "NCCL init stalled: %zu of %zu processes completed init %.0f s after the "
                      "last one started; steps reached: %s",
                      complete, started, w->o.stall_s, steps);
}

static void add_list(struct pf_node *m, const char *key, const struct pf_strlist *l)
{
    struct pf_node *s = pf_node_set_seq(m, key);
    for (size_t i = 0; i < l->n; i++)
        pf_node_add_str(s, l->v[i]);
}

#define EVIDENCE_PROCS_MAX 256

void pf_watch_check(struct pf_check *c, const struct pf_watch *w)
{
    struct pf_node *g = pf_node_set_map(c->evidence, "gate");
    pf_node_set_str(g, "file", w->gate_path);
    if (w->gate.found) {
        pf_node_set_str(g, "verdict", w->gate.verdict);
        if (w->gate.version[0]) pf_node_set_str(g, "ncclVersion", w->gate.version);
        if (w->gate.network[0]) pf_node_set_str(g, "network", w->gate.network);
        if (w->gate.hcas >= 0) pf_node_set_int(g, "hcas", w->gate.hcas);
        if (w->gate.gdr >= 0) pf_node_set_bool(g, "gpuDirectRdma", w->gate.gdr == 1);
    } else {
        pf_node_set_str(g, "unknown", w->gate.error[0] ? w->gate.error : "no gate verdict");
    }
    struct pf_node *fl = pf_node_set_map(c->evidence, "files");
    pf_node_set_int(fl, "followed", (long long)w->nfiles);
    if (w->files_skipped) pf_node_set_int(fl, "notFollowed", (long long)w->files_skipped);
    pf_node_set_int(fl, "lines", (long long)w->lines);
    pf_node_set_int(fl, "bytes", (long long)w->bytes);
    if (w->cut_lines) pf_node_set_int(fl, "cutLines", (long long)w->cut_lines);
    unsigned rot = 0, trunc = 0;
    for (size_t i = 0; i < w->nfiles; i++) {
        rot += w->files[i].rotations;
        trunc += w->files[i].truncations;
    }
    if (rot) pf_node_set_int(fl, "rotations", rot);
    if (trunc) pf_node_set_int(fl, "truncations", trunc);
    struct pf_node *ps = pf_node_set_seq(c->evidence, "processes");
    size_t complete = 0;
    for (size_t i = 0; i < w->nprocs; i++) {
        const struct pf_nccllog_proc *p = &w->log.v[i];
        if (w->procs[i].decided & D_COMPLETE) complete++;
        if (i >= EVIDENCE_PROCS_MAX) continue;
        struct pf_node *m = pf_node_add_map(ps);
        pf_node_set_str(m, "host", p->host);
        if (p->pid) pf_node_set_int(m, "pid", p->pid);
        if (p->ranks.n) add_list(m, "ranks", &p->ranks);
        pf_node_set_str(m, "step", pf_watch_step_name(p));
        if (p->version[0]) pf_node_set_str(m, "ncclVersion", p->version);
        const char *net = proc_network(p);
        if (net[0]) {
            pf_node_set_str(m, "network", net);
            pf_node_set_str(m, "networkClass",
                            pf_nccllog_class_name(pf_nccllog_classify(net, p->ofi_provider)));
        }
        if (p->hcas.n) add_list(m, "nics", &p->hcas);
        if (p->ifaces.n) add_list(m, "interfaces", &p->ifaces);
        if (p->net_channels)
            pf_node_set_strf(m, "netChannels", "%d (%d GDRDMA)", p->net_channels, p->gdr_channels);
        int gdr = pf_nccllog_gdr(p);
        if (w->procs[i].decided & D_GDR && gdr >= 0) pf_node_set_bool(m, "gpuDirectRdma", gdr == 1);
        if (w->procs[i].complete_at > 0)
            pf_node_set_dbl(m, "initSeconds",
                            (double)(long)((w->procs[i].complete_at - w->procs[i].first_at) * 100) /
                                100);
    }
    if (w->nprocs > EVIDENCE_PROCS_MAX)
        pf_node_set_int(c->evidence, "processesNotShown",
                        (long long)(w->nprocs - EVIDENCE_PROCS_MAX));
    for (size_t i = 0; i < w->nfindings; i++) {
        const struct pf_watch_finding *f = &w->findings[i];
        pf_check_add_finding(c, f->code, f->status, NULL, "%s", f->message);
    }
    if (w->nprocs == 0)
        pf_check_unknown(c, "no-nccl-lines", "no NCCL line in %zu file%s of %s", w->nfiles,
                         w->nfiles == 1 ? "" : "s", w->dir);
    else
        pf_check_set_message(c, "%zu NCCL process%s, %zu completed init; %zu finding%s", w->nprocs,
                             w->nprocs == 1 ? "" : "es", complete, w->nfindings,
                             w->nfindings == 1 ? "" : "s");
}

int pf_watch_metrics_text(struct pf_buf *out, const struct pf_watch *w, const char *pod)
{
    struct pf_buf lab;
    pf_buf_init(&lab, 4096);
    /* label value escaped per the exposition format: \\, \" and \n */
    for (const char *s = pod ? pod : ""; *s; s++) {
        if (*s == '\\' || *s == '"')
            pf_buf_addf(&lab, "\\%c", *s);
        else if (*s == '\n')
            pf_buf_add(&lab, "\\n", 2);
        else
            pf_buf_add(&lab, s, 1);
    }
    const char *pl = pf_buf_str(&lab);
    size_t complete = 0;
    for (size_t i = 0; i < w->nprocs; i++)
        if (w->procs[i].decided & D_COMPLETE) complete++;
    pf_buf_addf(out,
                "# HELP preflight_watch_processes NCCL processes the watch saw in the shared "
                "folder.\n# TYPE preflight_watch_processes gauge\n"
                "preflight_watch_processes{pod=\"%s\"} %zu\n",
                pl, w->nprocs);
    pf_buf_addf(out,
                "# HELP preflight_watch_init_complete_processes NCCL processes whose first "
                "communicator completed init.\n"
                "# TYPE preflight_watch_init_complete_processes gauge\n"
                "preflight_watch_init_complete_processes{pod=\"%s\"} %zu\n",
                pl, complete);
    pf_buf_addf(out,
                "# HELP preflight_watch_lines_total NCCL log lines the watch read.\n"
                "# TYPE preflight_watch_lines_total counter\n"
                "preflight_watch_lines_total{pod=\"%s\"} %llu\n",
                pl, w->lines);
    pf_buf_addf(out,
                "# HELP preflight_watch_bytes_total NCCL log bytes the watch read.\n"
                "# TYPE preflight_watch_bytes_total counter\n"
                "preflight_watch_bytes_total{pod=\"%s\"} %llu\n",
                pl, w->bytes);
    pf_buf_addf(out, "# HELP preflight_watch_findings Findings of the watch, by code.\n"
                     "# TYPE preflight_watch_findings gauge\n");
    static const char *const codes[] = {"trainer-socket-fallback", "trainer-fewer-nics",
                                        "trainer-no-gdr", "trainer-nccl-version", "init-stall"};
    for (size_t k = 0; k < PF_ARRAY_LEN(codes); k++) {
        size_t n = 0;
        for (size_t i = 0; i < w->nfindings; i++)
            if (strcmp(w->findings[i].code, codes[k]) == 0) n++;
        pf_buf_addf(out, "preflight_watch_findings{pod=\"%s\",code=\"%s\"} %zu\n", pl, codes[k], n);
    }
    pf_buf_free(&lab);
    return pf_buf_check(out, "watch metrics");
}
