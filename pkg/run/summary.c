/* Stage summary: every rank's statuses gathered at rank 0, the fleet's judgement
 * (pkg/fleet), and the SUMMARY back to every rank, so that every pod's verdict tells the same
 * story; a rank that hears nothing from rank 0 says what it saw itself. */
#define _GNU_SOURCE
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void my_statuses(struct pf_run *R, struct pf_buf *b)
{
    struct pf_verdict copy;
    pf_verdict_clone(&copy, &R->verdict);
    pf_verdict_finalize(&copy, pf_run_policy, &R->config);
    if (pf_fleet_report_encode(b, &copy) < 0)
        pf_ctx_progress(&R->ctx, "report to rank 0: %s", pf_err_msg());
    pf_verdict_free(&copy);
    /* the pod's inventory, for check gang at rank 0 */
    struct pf_fleet_inv inv;
    run_inventory(&inv, R);
    run_inventory_evidence(run_chk(R, "gang")->evidence, &inv);
    struct pf_buf ib;
    pf_buf_init(&ib, PF_BUF_TEXT);
    if (pf_fleet_inv_encode(&ib, &inv) < 0 || pf_wire_put(b, "inv", ib.data, ib.len) < 0)
        pf_ctx_progress(&R->ctx, "inventory to rank 0: %s", pf_err_msg());
    pf_buf_free(&ib);
}

static int gang_policy(void *arg, const char *code, int status)
{
    return pf_run_policy(arg, "gang", code, (enum pf_status)status);
}

/* Rank 0: check gang, every rank's inventory against its group's. */
static void judge_gang(struct pf_run *R, struct pf_fleet *F)
{
    struct pf_check *c = run_chk(R, "gang");
    struct pf_fleet_gang_opts o = {
        .rank0_apart = R->config.gang_rank0 == 1, .policy = gang_policy, .arg = &R->config};
    struct pf_fleet_gang_result res;
    struct pf_node *ev = pf_node_set_map(c->evidence, "gang");
    if (R->config.gang_group_by[0]) pf_node_set_str(ev, "groupBy", R->config.gang_group_by);
    pf_fleet_gang_judge(F, &o, &res, ev);
    if (res.ranks < 2)
        pf_check_skip(c, "fewer than two ranks sent an inventory (%d)", res.ranks);
    else
        pf_check_set_message(c,
                             "the inventories of %d ranks compared in %d group%s: %d rank%s "
                             "differ%s from a majority of their group, %d trait%s without one",
                             res.ranks, res.groups, res.groups == 1 ? "" : "s", res.named,
                             res.named == 1 ? "" : "s", res.named == 1 ? "s" : "", res.undecided,
                             res.undecided == 1 ? "" : "s");
}

#define LINKS_EVIDENCE_MAX 48 /* samples listed; a large fleet lists its slowest */

static int cmp_link_gbps(const void *a, const void *b)
{
    double x = ((const struct pf_coll_link *)a)->gbps, y = ((const struct pf_coll_link *)b)->gbps;
    return x < y ? -1 : x > y;
}

static int cmp_link_src(const void *a, const void *b)
{
    const struct pf_coll_link *x = a, *y = b;
    if (x->src != y->src) return x->src < y->src ? -1 : 1;
    return (x->dst > y->dst) - (x->dst < y->dst);
}

/* Every probed link of a large job, compact (docs/verdict.md, linkRates): one entry a sending
 * rank, "DST=GBPS DST=GBPS ...", about 12 bytes a link where the map of slowestLinks takes 50;
 * a link sampled again (the confirmation rounds) is listed once a sample. */
static void link_rates(struct pf_node *ev, const struct pf_coll_link *links, size_t n)
{
    struct pf_coll_link *s = pf_xmalloc(n * sizeof(*s));
    memcpy(s, links, n * sizeof(*s));
    qsort(s, n, sizeof(*s), cmp_link_src);
    struct pf_node *m = pf_node_set_map(ev, "linkRates");
    struct pf_buf b;
    pf_buf_init(&b, PF_BUF_DOCUMENT);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        pf_buf_reset(&b);
        for (; j < n && s[j].src == s[i].src; j++)
            pf_buf_addf(&b, "%s%d=%.10g", j > i ? " " : "", s[j].dst,
                        round(s[j].gbps * 1000) / 1000);
        char key[24];
        snprintf(key, sizeof(key), "%d", s[i].src);
        pf_node_append_str(m, key, pf_buf_str(&b));
        i = j;
    }
    pf_buf_free(&b);
    free(s);
}

static void links_evidence(struct pf_run *R)
{
    struct run_pods *P = R->pods;
    if (!P->nlinks) return;
    struct pf_node *ev = run_chk(R, "collective.tcp")->evidence;
    size_t n = P->nlinks;
    if (n > LINKS_EVIDENCE_MAX) {
        link_rates(ev, P->links, n);
        /* every sample of a thousand pods would be thousands of lines: the slowest ones */
        qsort(P->links, n, sizeof(*P->links), cmp_link_gbps);
        pf_node_set_int(ev, "linksMeasured", (long long)n);
        n = LINKS_EVIDENCE_MAX;
    }
    struct pf_node *links = pf_node_set_seq(ev, n < P->nlinks ? "slowestLinks" : "links");
    for (size_t i = 0; i < n; i++) {
        struct pf_node *l = pf_node_add_map(links);
        pf_node_set_int(l, "from", P->links[i].src);
        pf_node_set_int(l, "to", P->links[i].dst);
        pf_node_set_dbl(l, "gbps", round(P->links[i].gbps * 1000) / 1000);
    }
}

/* Rank 0: the fleet's judgement (pkg/fleet), then the ranks list and the fleet verdict. */
static void root_summarize(struct pf_run *R, struct pf_fleet *F)
{
    struct run_pods *P = R->pods;
    struct pf_verdict *v = &R->verdict;
    run_sync_fleet(R, F);
    struct pf_fleet_rank *me = &F->r[0];
    me->ar_done = P->ar_ok;
    me->ar_seconds = P->ar_seconds;
    me->ar_wrong = (long long)P->ar_wrong;
    me->ar_first_bad = (long long)P->ar_first_bad;
    struct pf_fleet_tcp t = {
        .ran = P->ar_ran,
        .stopped = pf_rdv_stopped(P->rdv),
        .ok = P->ar_ok,
        .bytes = P->bytes,
        .iterations = P->iters,
        .min_busbw = R->config.tcp_min_busbw_gbps,
        .links = P->links,
        .nlinks = P->nlinks,
        .judgement = P->have_judg ? &P->judg : NULL,
        .lost = pf_rdv_lost(P->rdv),
        .failed = pf_rdv_failed(P->rdv),
    };
    pf_fleet_judge_tcp(F, &t);
    links_evidence(R);
    pf_fleet_judge_reports(F);
    judge_gang(R, F);
    run_apply_fleet(R, &F->out, false);
    pf_fleet_ranks(F, &v->ranks, pf_rdv_my_ip(P->rdv));
    enum pf_status worst = PF_PASS;
    for (size_t i = 0; i < v->nchecks; i++)
        for (size_t k = 0; k < v->checks[i].nfindings; k++) {
            int st = pf_config_policy(&R->config, v->checks[i].findings[k].code,
                                      (int)v->checks[i].findings[k].status);
            if (st > (int)worst) worst = (enum pf_status)st;
        }
    pf_fleet_conclude(F, worst, v->culprits->count, v->culprits->first);
}

static void set_fleet_extra(struct pf_run *R, const struct pf_fleet_summary *s)
{
    if (!s->verdict[0]) return;
    struct pf_node *fl = pf_node_set_map(R->verdict.extra, "fleet");
    pf_node_set_str(fl, "verdict", s->verdict);
    pf_node_set_str(fl, "summary", s->text);
    pf_node_set_int(fl, "ranks", pf_rdv_size(R->pods->rdv));
    pf_node_set_int(fl, "worldSize", pf_rdv_world(R->pods->rdv));
}

static void tcp_entry(struct pf_run *R, struct pf_check *c, const struct pf_fleet_summary *s)
{
    const char *iface = pf_rdv_iface(R->pods->rdv);
    struct pf_node *e = pf_node_add_map(R->verdict.collectives);
    pf_node_set_str(e, "backend", "tcp");
    pf_node_set_str(e, "op", "allreduce");
    pf_node_set_int(e, "bytes", s->bytes);
    pf_node_set_int(e, "ranks", s->ranks);
    pf_node_set_str(e, "transport", "TCP");
    pf_node_set_str(e, "dtype", "float32");
    pf_node_set_dbl(e, "algbwGBps", round(s->algbw * 1000) / 1000);
    pf_node_set_dbl(e, "busbwGBps", round(s->busbw * 1000) / 1000);
    pf_node_set_dbl(e, "timeSeconds", s->seconds);
    pf_node_set_int(e, "iterations", s->iterations);
    if (s->expected >= 0) {
        char rule[96];
        pf_node_set_dbl(e, "expectedMinBusbwGBps", s->expected);
        snprintf(rule, sizeof(rule), "tcp.minBusbwGBps = %g GB/s", s->expected);
        pf_node_set_str(e, "rule", rule);
    }
    pf_node_set_bool(e, "correct", s->correct);
    pf_node_set_str(e, "interface", iface[0] ? iface : "?");
    char links[160] = "";
    if (s->have_links)
        snprintf(links, sizeof(links),
                 "; links: median %.2f Gb/s, slowest %.2f Gb/s (rank %d -> %d)", s->median,
                 s->slow_src >= 0 ? s->slow_gbps : 0.0, s->slow_src, s->slow_dst);
    pf_check_set_message(c,
                         "all-reduce of %.3g MiB among %lld ranks over TCP (%s): busbw %.3f GB/s, "
                         "algbw %.3f GB/s, result %s%s",
                         (double)s->bytes / (1 << 20), s->ranks, iface[0] ? iface : "?", s->busbw,
                         s->algbw, s->correct ? "exact" : "WRONG", links);
}

/* The collective entry and the check's message, from the summary (rank 0: its own). */
static void record_tcp(struct pf_run *R, const struct pf_fleet_summary *s)
{
    struct run_pods *P = R->pods;
    const char *iface = pf_rdv_iface(P->rdv);
    struct pf_check *c = run_chk(R, "collective.tcp");
    pf_node_set_str(c->evidence, "interface", iface[0] ? iface : "?");
    pf_node_set_str(c->evidence, "address", pf_rdv_my_ip(P->rdv));
    if (P->ar_ran) {
        char algo[64];
        pf_coll_algo_name(algo, sizeof(algo), pf_rdv_size(P->rdv));
        pf_node_set_str(c->evidence, "algorithm", algo);
        pf_node_set_int(c->evidence, "bytes", P->bytes);
        pf_node_set_int(c->evidence, "iterations", P->iters);
        if (P->ar_ok)
            pf_node_set_dbl(c->evidence, "secondsThisRank", P->ar_seconds);
        else
            pf_node_set_str(c->evidence, "errorThisRank", P->ar_err);
    }
    for (size_t i = 0; i < P->nmylinks; i++) {
        char key[48];
        snprintf(key, sizeof(key), "linkFromRank%dGbps", P->mylinks[i].src);
        pf_node_set_dbl(c->evidence, key, round(P->mylinks[i].gbps * 1000) / 1000);
    }
    if (s->have_links) pf_node_set_dbl(c->evidence, "medianLinkGbps", s->median);
    if (s->have_links && s->slow_src >= 0) {
        struct pf_node *sl = pf_node_set_map(c->evidence, "slowestLink");
        pf_node_set_int(sl, "from", s->slow_src);
        pf_node_set_int(sl, "to", s->slow_dst);
        pf_node_set_dbl(sl, "gbps", s->slow_gbps);
    }
    if (s->bad[0]) {
        /* a value of rank 0's summary that is not a number: its part is left out, said so */
        pf_node_set_str(c->evidence, "summaryRefused", s->bad);
        pf_ctx_progress(&R->ctx, "the summary from rank 0: %s (left out)", s->bad);
    }
    if (s->have_tcp)
        tcp_entry(R, c, s);
    else if (s->bad[0])
        pf_check_set_message(c, "rank 0's all-reduce result was refused: %s", s->bad);
    else if (c->nfindings == 0 && !P->ar_ran)
        pf_check_skip(c, "the TCP all-reduce did not run (%s)",
                      pf_rdv_size(P->rdv) < 2 ? "only one rank in the run"
                                              : "the run stopped before it");
}

/* Rank 0: gathers every rank's report, judges, and sends the SUMMARY to every rank. */
static void root_final(struct pf_run *R, struct pf_rdv_step_res *res)
{
    struct run_pods *P = R->pods;
    struct pf_rdv *rdv = P->rdv;
    struct pf_fleet *F = run_fleet(R);
    const int *rk = pf_rdv_ranks(rdv);
    for (int i = 0; i < pf_rdv_size(rdv); i++) {
        int r = rk[i];
        struct pf_rdv_member_info m;
        if (i == 0) {
            struct pf_buf me;
            pf_buf_init(&me, PF_BUF_DOCUMENT);
            my_statuses(R, &me);
            (void)pf_fleet_report_decode(F, 0, (const uint8_t *)pf_buf_str(&me), me.len);
            pf_buf_free(&me);
        } else if (res->blobs && res->blobs[i] && pf_rdv_member(rdv, r, &m) == 0 &&
                   m.state == PF_RDV_JOINED) {
            (void)pf_fleet_report_decode(F, r, res->blobs[i], res->lens[i]);
        }
    }
    pf_rdv_step_res_free(rdv, res);
    root_summarize(R, F);
    if (pf_fleet_summary_encode(&P->sum, &F->out) < 0)
        pf_ctx_progress(&R->ctx, "%s: the other ranks get a shortened summary", pf_err_msg());
    /* this rank reads the summary as the others will */
    struct pf_fleet_summary sent;
    if (pf_fleet_summary_decode(&sent, (const uint8_t *)pf_buf_str(&P->sum), P->sum.len) == 0) {
        set_fleet_extra(R, &sent);
        record_tcp(R, &sent);
    }
    pf_fleet_summary_free(&sent);
    pf_rdv_summary_send(rdv, P->sum.data, P->sum.len);
}

/* No word from rank 0: this rank says what it saw itself. */
static void on_my_own(struct pf_run *R)
{
    struct run_pods *P = R->pods;
    struct pf_rdv *rdv = P->rdv;
    const struct pf_wire_marks *lost = pf_rdv_lost(rdv);
    for (size_t i = 0; i < lost->n; i++) {
        int lr = lost->v[i].rank;
        const char *why = lost->v[i].why;
        char w[PF_WHO_MAX];
        pf_rdv_who(w, sizeof(w), rdv, lr);
        char m2[768];
        snprintf(m2, sizeof(m2), "%s was lost after the rendezvous: %s", w, why);
        run_add_finding_text(R, "collective.tcp", "peer-lost", PF_FAIL, NULL, m2);
        char b2[PF_FLEET_NAME];
        pf_verdict_add_culprit(&R->verdict, lr, pf_rdv_pod_of(rdv, lr, b2, sizeof(b2)),
                               pf_rdv_node_of(rdv, lr), "lost during the collectives: %s", why);
    }
    if (P->ar_err[0] && lost->n == 0)
        run_add_finding_text(R, "collective.tcp", "peer-lost", PF_FAIL, NULL, P->ar_err);
    struct pf_fleet_summary none;
    memset(&none, 0, sizeof(none));
    none.expected = -1;
    record_tcp(R, &none);
}

static void final_report(struct pf_run *R)
{
    struct pf_rdv *rdv = R->pods->rdv;
    struct pf_buf b;
    pf_buf_init(&b, PF_BUF_DOCUMENT);
    my_statuses(R, &b);
    struct pf_rdv_step_res res;
    run_guard(R, "collective.tcp", "gathering every rank's results at rank 0");
    pf_rdv_step(rdv, "report", true, NULL, b.data, b.len, PF_RDV_GATHER, PF_RUN_REPORT_S, &res);
    pf_buf_free(&b);
    if (pf_rdv_rank(rdv) == 0) {
        root_final(R, &res);
        return;
    }
    pf_rdv_step_res_free(rdv, &res);
    struct pf_rdv_msg msg;
    int r = pf_rdv_summary_recv(rdv, &msg);
    struct pf_fleet_summary sum;
    if (r >= 0 && pf_fleet_summary_decode(&sum, msg.payload, msg.len) == 0) {
        run_apply_fleet(R, &sum, true);
        struct pf_check *g = run_chk(R, "gang");
        if (!g->message || !*g->message)
            pf_check_set_message(g, "rank 0 compared this pod's inventory with its gang's");
        set_fleet_extra(R, &sum);
        record_tcp(R, &sum);
        pf_fleet_summary_free(&sum);
    } else {
        on_my_own(R);
        pf_check_skip(run_chk(R, "gang"), "no summary from rank 0: this pod was not compared "
                                          "with its gang");
    }
    pf_rdv_msg_free(&msg);
}

/* The final gather and the summary, then the meeting ends: its sockets close before the
 * stages after it. */
int run_stage_summary(struct pf_run *R)
{
    struct run_pods *P = R->pods;
    if (P->met == RUN_MET) final_report(R);
    run_meet_evidence(R); /* its counters as they are at its end */
    pf_rdv_close(P->rdv);
    P->rdv = NULL;
    return 0;
}
