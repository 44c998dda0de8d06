/* The link probes of stage collective.tcp: pf_coll_rounds_run (pkg/collective/rounds.c) over
 * this run's sockets and steps. A round's barrier is a scatter step: every rank sends rank
 * 0 what it received in the round before, rank 0 plans the next round (struct
 * pf_coll_coord) and answers each rank with its own probes only, so no rank holds more than
 * its own part. The survey rounds use the data mesh, which connects exactly the survey's
 * shifts (pf_coll_probe_shifts), each connection in one round only; a confirmation probe gets
 * a connection of its own (pf_rdv_probe_connect), closed after its round. Rank 0 judges
 * every sample at the end (pf_coll_judge). */
#define _GNU_SOURCE
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct probe_run {
    struct pf_run *R;
    struct pf_coll_coord co; /* rank 0 */
    bool more;               /* rank 0: the round planned runs */
    double step_s, probe_s;
    int own[2];              /* connections opened for this round */
    int fail_peer;           /* the position a failed probe was with (-1: none) */
    struct pf_host_cpu cpu0; /* this rank's CPU counters when its round began */
    double cpu0_t;
};

static double share01(double x)
{
    return x < 0 ? 0 : x > 1 ? 1 : x;
}

static double pct(double share)
{
    return share < 0 ? 0 : share * 100;
}

/* This rank's CPU since the last barrier (the round just run), as shares of that time. */
static void cpu_round(struct probe_run *P, struct pf_coll_cpu *out)
{
    struct pf_host_cpu now;
    pf_host_cpu_read(&now, &P->R->ctx.host);
    double t = pf_now(), wall = t - P->cpu0_t;
    const struct pf_host_cpu *a = &P->cpu0;
    *out = (struct pf_coll_cpu){-1, -1, -1, now.psi_avg10};
    if (wall > 0 && a->wait_ns >= 0 && now.wait_ns >= a->wait_ns)
        out->wait = share01((double)(now.wait_ns - a->wait_ns) / 1e9 / wall);
    if (a->total >= 0 && now.total > a->total && now.steal >= a->steal)
        out->steal = (double)(now.steal - a->steal) / (double)(now.total - a->total);
    /* the host's pressure counts other tenants' tasks: evidence only, never a verdict */
    if (wall > 0 && now.psi_own && a->psi_own && now.psi_us >= a->psi_us && a->psi_us >= 0)
        out->psi = share01((double)(now.psi_us - a->psi_us) / 1e6 / wall);
    P->cpu0 = now;
    P->cpu0_t = t;
}

static void probe_ready(void *arg, uint8_t **blobs, size_t *lens, int nb)
{
    struct probe_run *P = arg;
    /* every rank's CPU in the round first: a sample carries the starvation of both ends */
    for (int i = 0; i < nb; i++) {
        struct pf_coll_cpu cpu;
        if (blobs[i] && pf_fleet_cpu_decode(&cpu, blobs[i], lens[i]) == 0)
            pf_coll_coord_cpu(&P->co, i, &cpu);
    }
    for (int i = 0; i < nb; i++) {
        struct pf_coll_sample s[PF_COLL_TASKS_MAX];
        size_t ns = 0;
        if (blobs[i] && pf_fleet_samples_decode(s, &ns, PF_COLL_TASKS_MAX, blobs[i], lens[i]) == 0)
            pf_coll_coord_add(&P->co, i, s, ns);
        free(blobs[i]);
        blobs[i] = NULL;
        lens[i] = 0;
    }
    P->more = pf_coll_coord_plan(&P->co, P->co.round + 1) > 0;
}

static void probe_part(void *arg, int pos, struct pf_buf *out)
{
    struct probe_run *P = arg;
    struct pf_coll_task t[PF_COLL_TASKS_MAX] = {{0}};
    size_t nt = P->more ? pf_coll_coord_tasks(&P->co, pos, t) : 0;
    pf_fleet_tasks_encode(out, P->more, t, nt);
    /* a rank's roster has the addresses of its mesh and grid partners only: the peer it
     * dials comes with the task */
    for (size_t i = 0; i < nt; i++)
        if (t[i].send && pf_rdv_addr_put(P->R->pods->rdv, out, t[i].peer) < 0)
            pf_ctx_progress(&P->R->ctx, "probe round %d: %s", P->co.round + 1, pf_err_msg());
}

/* The samples this rank received, kept for its own evidence (by rank). */
static void keep_mine(struct run_pods *Q, const struct pf_coll_sample *s, size_t ns)
{
    const int *rk = pf_rdv_ranks(Q->rdv);
    for (size_t i = 0; i < ns; i++) {
        Q->mylinks = pf_xrealloc(Q->mylinks, (Q->nmylinks + 1) * sizeof(*Q->mylinks));
        Q->mylinks[Q->nmylinks++] =
            (struct pf_coll_link){rk[s[i].src], pf_rdv_rank(Q->rdv), pf_coll_sample_gbps(&s[i])};
    }
}

static int probe_next(void *arg, int round, const struct pf_coll_sample *mine, size_t nmine,
                      const char *err, struct pf_coll_task *tasks, size_t *ntasks)
{
    struct probe_run *P = arg;
    struct run_pods *Q = P->R->pods;
    struct pf_rdv *rdv = Q->rdv;
    *ntasks = 0;
    keep_mine(Q, mine, nmine);
    struct pf_buf b;
    pf_buf_init(&b, PF_BUF_TEXT);
    struct pf_coll_cpu cpu;
    cpu_round(P, &cpu);
    if (pf_fleet_samples_encode(&b, mine, nmine) < 0 || pf_fleet_cpu_encode(&b, &cpu) < 0)
        pf_ctx_progress(&P->R->ctx, "round %d: %s", round + 1, pf_err_msg());
    if (round > 0 && pf_coll_cpu_starved(&cpu)) {
        Q->starved_rounds++;
        pf_ctx_progress(&P->R->ctx,
                        "probe round %d: this pod's CPU was starved (run-queue wait %.0f%%, "
                        "steal %.0f%%, pressure %.0f%%)",
                        round, pct(cpu.wait), pct(cpu.steal), pct(cpu.psi));
    }
    char e2[400] = "";
    if (err) {
        char w[PF_WHO_MAX] = "";
        if (P->fail_peer >= 0) pf_rdv_who(w, sizeof(w), rdv, pf_rdv_ranks(rdv)[P->fail_peer]);
        snprintf(e2, sizeof(e2), "link probe%s%s: %s", w[0] ? " with " : "", w, err);
        snprintf(Q->ar_err, sizeof(Q->ar_err), "%s", e2);
        pf_ctx_progress(&P->R->ctx, "%s", e2);
    }
    run_guard(P->R, "collective.tcp", "probing the links between %d ranks (round %d)",
              pf_rdv_size(rdv), round + 1);
    struct pf_rdv_step_res res;
    int r = pf_rdv_step_scatter(rdv, "probe", !err, err ? e2 : NULL, b.data, b.len, P->step_s,
                                probe_ready, probe_part, P, &res);
    pf_buf_free(&b);
    /* the next round's window starts when the barrier lets it go */
    struct pf_coll_cpu skip;
    cpu_round(P, &skip);
    bool more = false;
    if (r == 0 && pf_rdv_rank(rdv) == 0) {
        more = P->more;
        *ntasks = more ? pf_coll_coord_tasks(&P->co, 0, tasks) : 0;
    } else if (r == 0 && (res.nb < 1 ||
                          pf_fleet_tasks_decode(&more, tasks, ntasks, PF_COLL_TASKS_MAX,
                                                pf_rdv_size(rdv), res.blobs[0], res.lens[0]) < 0)) {
        r = PF_ERR;
    } else if (r == 0 && pf_rdv_addr_take(rdv, res.blobs[0], res.lens[0]) < 0) {
        /* the probe that needs it then fails naming the position */
        pf_ctx_progress(&P->R->ctx, "probe round %d: %s", round + 1, pf_err_msg());
    }
    pf_rdv_step_res_free(rdv, &res);
    if (r < 0) return PF_ERR;
    return more ? 1 : 0;
}

static int probe_link(void *arg, int round, const struct pf_coll_task *t, char *why, size_t nwhy)
{
    struct probe_run *P = arg;
    struct run_pods *Q = P->R->pods;
    int n = pf_rdv_size(Q->rdv), pos = pf_rdv_pos(Q->rdv);
    int d = ((t->send ? t->peer - pos : pos - t->peer) % n + n) % n;
    /* a survey round: the mesh's connection of its shift */
    if (round < pf_coll_survey_rounds(n) && round < Q->mesh.nshifts && d == Q->mesh.shifts[round]) {
        int fd = t->send ? Q->mesh.out_fd[round] : Q->mesh.in_fd[round];
        if (fd >= 0) return fd;
        snprintf(why, nwhy, "the data mesh has no connection for shift %d", d);
        return -1;
    }
    int fd =
        pf_rdv_probe_connect(Q->rdv, round, t->peer, t->send, pf_now() + P->probe_s, why, nwhy);
    if (fd >= 0) P->own[t->send ? 0 : 1] = fd;
    return fd;
}

static void probe_release(void *arg, int round)
{
    struct probe_run *P = arg;
    (void)round;
    for (int k = 0; k < 2; k++) {
        if (P->own[k] >= 0) close(P->own[k]);
        P->own[k] = -1;
    }
}

/* Rank 0: the slow links not named because an end's CPU was starved when they were slow
 * (by rank), so that the reader sees what was left out and why. */
static void starved_evidence(struct pf_run *R, const struct pf_coll_judgement *j, const int *rk)
{
    if (!j->nstarved) return;
    struct pf_node *ev = run_chk(R, "collective.tcp")->evidence;
    pf_node_set_int(ev, "slowWhileCpuStarved", (long long)j->nstarved);
    struct pf_node *l = pf_node_set_seq(ev, "notBlamedCpuStarved");
    for (size_t i = 0; i < j->nstarved && i < PF_COLL_EVIDENCE_MAX; i++) {
        const struct pf_coll_sample *s = &j->starved[i];
        struct pf_node *e = pf_node_add_map(l);
        pf_node_set_int(e, "from", rk[s->src]);
        pf_node_set_int(e, "to", rk[s->dst]);
        pf_node_set_dbl(e, "gbps", round(pf_coll_sample_gbps(s) * 1000) / 1000);
        pf_node_set_str(e, "starved",
                        s->starved == (PF_COLL_STARVED_SRC | PF_COLL_STARVED_DST) ? "both ends"
                        : s->starved & PF_COLL_STARVED_SRC                        ? "sender"
                                                                                  : "receiver");
    }
}

/* Rank 0: the judgement of every sample, and the samples as the links evidence (by rank). */
static void probe_judge(struct probe_run *P)
{
    struct run_pods *Q = P->R->pods;
    const struct pf_coll_coord *co = &P->co;
    const int *rk = pf_rdv_ranks(Q->rdv);
    if (pf_coll_judge(&Q->judg, co->n, co->s, co->ns, PF_COLL_SLOW_RATIO) < 0) return;
    Q->have_judg = true;
    Q->starved_reports = co->nstarved_reports;
    free(Q->links);
    Q->links = pf_xcalloc(co->ns ? co->ns : 1, sizeof(*Q->links));
    Q->nlinks = co->ns;
    for (size_t i = 0; i < co->ns; i++)
        Q->links[i] = (struct pf_coll_link){rk[co->s[i].src], rk[co->s[i].dst],
                                            pf_coll_sample_gbps(&co->s[i])};
    starved_evidence(P->R, &Q->judg, rk);
    pf_ctx_progress(&P->R->ctx,
                    "link probes: %zu samples in %d rounds, reference %.2f Gb/s, %zu culprit%s",
                    co->ns, Q->judg.rounds, Q->judg.median, Q->judg.n, Q->judg.n == 1 ? "" : "s");
}

int run_probe_links(struct pf_run *R)
{
    struct run_pods *Q = R->pods;
    struct probe_run P;
    memset(&P, 0, sizeof(P));
    P.R = R;
    P.own[0] = P.own[1] = -1;
    P.fail_peer = -1;
    P.probe_s = pf_run_wait_s(R, "tcp.probe");
    P.step_s = P.probe_s + PF_RUN_STEP_S;
    pf_host_cpu_read(&P.cpu0, &R->ctx.host);
    P.cpu0_t = pf_now();
    bool root = pf_rdv_rank(Q->rdv) == 0;
    if (root) pf_coll_coord_init(&P.co, pf_rdv_size(Q->rdv), PF_COLL_SLOW_RATIO);
    struct pf_coll_rounds_ops ops = {&P, probe_next, probe_link, probe_release};
    struct pf_coll_fail fail;
    int r = pf_coll_rounds_run(pf_rdv_pos(Q->rdv), pf_rdv_size(Q->rdv), &ops, P.probe_s, &fail,
                               &P.fail_peer);
    probe_release(&P, -1);
    if (Q->starved_rounds)
        pf_node_set_int(run_chk(R, "collective.tcp")->evidence, "cpuStarvedRounds",
                        Q->starved_rounds);
    if (root && r == 0) probe_judge(&P);
    if (root) pf_coll_coord_free(&P.co);
    return r;
}
