/* The probe rounds over real sockets: each rank runs its tasks of a round at once (one probe
 * out, one in), the coordinator plans the next round from what the ranks received. The
 * sockets and the barrier come from the caller (struct pf_coll_rounds_ops), so the rounds
 * run alike over the rendezvous' data mesh and over socket pairs in a unit test. */
#include "collective.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One round's tasks: gets the sockets, runs the probes at once, records what arrived. */
static int run_round(int pos, int round, const struct pf_coll_rounds_ops *ops,
                     const struct pf_coll_task *t, size_t nt, double probe_s,
                     struct pf_coll_sample *got, size_t *ngot, struct pf_coll_fail *fail,
                     int *fail_peer)
{
    const struct pf_coll_task *snd = NULL, *rcv = NULL;
    for (size_t i = 0; i < nt; i++) {
        if (t[i].send && !snd) snd = &t[i];
        if (!t[i].send && !rcv) rcv = &t[i];
    }
    int sfd = -1, rfd = -1;
    const struct pf_coll_task *order[2] = {snd, rcv};
    for (int k = 0; k < 2; k++) {
        if (!order[k]) continue;
        char why[200] = "";
        int fd = ops->link(ops->arg, round, order[k], why, sizeof(why));
        if (fd < 0) {
            fail->kind = PF_COLL_ERROR;
            fail->on_send = order[k]->send;
            snprintf(fail->what, sizeof(fail->what), "%s", why[0] ? why : "no connection");
            *fail_peer = order[k]->peer;
            return PF_ERR;
        }
        *(k == 0 ? &sfd : &rfd) = fd;
    }
    struct pf_coll_probe_res pr;
    int r = pf_coll_probe_pair(&pr, sfd, snd ? snd->bytes : 0, rfd, rcv ? rcv->bytes : 0,
                               pf_now() + probe_s, fail);
    if (r < 0) {
        *fail_peer = fail->on_send && snd ? snd->peer : rcv ? rcv->peer : -1;
        return PF_ERR;
    }
    if (rcv && pr.bytes && pr.seconds > 0)
        got[(*ngot)++] = (struct pf_coll_sample){rcv->peer, pos, round, pr.bytes, pr.seconds, 0};
    return 0;
}

int pf_coll_rounds_run(int pos, int n, const struct pf_coll_rounds_ops *ops, double probe_s,
                       struct pf_coll_fail *fail, int *fail_peer)
{
    memset(fail, 0, sizeof(*fail));
    *fail_peer = -1;
    struct pf_coll_sample got[PF_COLL_TASKS_MAX];
    size_t ngot = 0;
    int max = pf_coll_plan_max_rounds(n);
    for (int round = 0; round <= max; round++) {
        struct pf_coll_task t[PF_COLL_TASKS_MAX];
        size_t nt = 0;
        int r = ops->next(ops->arg, round, got, ngot, NULL, t, &nt);
        ngot = 0;
        /* every rank is past the round before now: its connections can go (closed earlier,
         * a receiver cut by its deadline would reset a sender still sending) */
        if (ops->release && round > 0) ops->release(ops->arg, round - 1);
        if (r < 0) {
            fail->kind = PF_COLL_ERROR;
            snprintf(fail->what, sizeof(fail->what), "the run stopped before probe round %d",
                     round);
            return PF_ERR;
        }
        if (r == 0) return 0;
        if (nt > PF_COLL_TASKS_MAX) nt = PF_COLL_TASKS_MAX;
        r = run_round(pos, round, ops, t, nt, probe_s, got, &ngot, fail, fail_peer);
        if (r < 0) {
            /* one more barrier, so that every rank stops now rather than at its deadline */
            (void)ops->next(ops->arg, round + 1, got, ngot, fail->what, t, &nt);
            if (ops->release) ops->release(ops->arg, round);
            return r;
        }
    }
    /* the coordinator's plan never runs past max rounds: one that does is broken */
    fail->kind = PF_COLL_ERROR;
    snprintf(fail->what, sizeof(fail->what), "the probe plan ran past %d rounds", max);
    return PF_ERR;
}

/* ---- the coordinator */

void pf_coll_coord_init(struct pf_coll_coord *c, int n, double ratio)
{
    memset(c, 0, sizeof(*c));
    c->n = n;
    c->ratio = ratio;
    c->round = -1;
    size_t un = (size_t)(n > 0 ? n : 1);
    c->to = pf_xmalloc(un * sizeof(int));
    c->from = pf_xmalloc(un * sizeof(int));
    c->bytes = pf_xcalloc(un, sizeof(size_t));
    c->starved = pf_xcalloc(un, sizeof(bool));
    for (int i = 0; i < n; i++)
        c->to[i] = c->from[i] = -1;
}

void pf_coll_coord_free(struct pf_coll_coord *c)
{
    free(c->s);
    free(c->to);
    free(c->from);
    free(c->bytes);
    free(c->starved);
    memset(c, 0, sizeof(*c));
}

size_t pf_coll_coord_add(struct pf_coll_coord *c, int pos, const struct pf_coll_sample *s,
                         size_t ns)
{
    if (pos < 0 || pos >= c->n || c->round < 0) return 0;
    size_t kept = 0;
    for (size_t i = 0; i < ns && kept < 1; i++) {
        const struct pf_coll_sample *x = &s[i];
        int src = c->from[pos];
        if (src < 0 || x->dst != pos || x->src != src || x->round != c->round || x->bytes == 0 ||
            x->bytes > c->bytes[src] || !(x->seconds > 0) || !isfinite(x->seconds))
            continue;
        if (c->ns == c->cap) {
            c->cap = c->cap ? c->cap * 2 : 256;
            c->s = pf_xrealloc(c->s, c->cap * sizeof(*c->s));
        }
        struct pf_coll_sample y = *x;
        /* the ends' CPU in this round, as they reported it (peer input has no say here) */
        y.starved = (c->starved[src] ? PF_COLL_STARVED_SRC : 0) |
                    (c->starved[pos] ? PF_COLL_STARVED_DST : 0);
        c->s[c->ns++] = y;
        kept++;
    }
    return kept;
}

bool pf_coll_cpu_starved(const struct pf_coll_cpu *c)
{
    return c->wait >= PF_COLL_STARVED_SHARE || c->steal >= PF_COLL_STARVED_SHARE ||
           c->psi >= PF_COLL_STARVED_SHARE;
}

void pf_coll_coord_cpu(struct pf_coll_coord *c, int pos, const struct pf_coll_cpu *cpu)
{
    if (pos < 0 || pos >= c->n || c->round < 0 || c->starved[pos]) return;
    c->starved[pos] = pf_coll_cpu_starved(cpu);
    c->nstarved_reports += c->starved[pos];
}

int pf_coll_coord_plan(struct pf_coll_coord *c, int round)
{
    if (round != c->round + 1)
        return pf_err_set(PF_EINVAL, "probe round %d planned after round %d", round, c->round);
    struct pf_coll_pair *p = NULL;
    size_t np = 0;
    if (pf_coll_plan(&p, &np, c->n, round, c->s, c->ns, c->ratio) < 0) return PF_EINVAL;
    c->round = round;
    for (int i = 0; i < c->n; i++)
        c->to[i] = c->from[i] = -1;
    memset(c->bytes, 0, (size_t)c->n * sizeof(size_t));
    memset(c->starved, 0, (size_t)c->n * sizeof(bool));
    c->npairs = 0;
    for (size_t i = 0; i < np; i++) {
        /* the plan never gives a position two probes out or two in: keep the first if so */
        if (c->to[p[i].src] >= 0 || c->from[p[i].dst] >= 0) continue;
        c->to[p[i].src] = p[i].dst;
        c->from[p[i].dst] = p[i].src;
        c->bytes[p[i].src] = p[i].bytes;
        c->npairs++;
    }
    free(p);
    return (int)c->npairs;
}

size_t pf_coll_coord_tasks(const struct pf_coll_coord *c, int pos,
                           struct pf_coll_task out[PF_COLL_TASKS_MAX])
{
    size_t k = 0;
    if (pos < 0 || pos >= c->n) return 0;
    if (c->to[pos] >= 0) out[k++] = (struct pf_coll_task){c->to[pos], true, c->bytes[pos]};
    if (c->from[pos] >= 0)
        out[k++] = (struct pf_coll_task){c->from[pos], false, c->bytes[c->from[pos]]};
    return k;
}
