/* The run among pods: join rank 0, agree, build the data mesh, run the TCP all-reduce and
 * the link probes, call the GPU stage, gather every rank's results at rank 0 and send the
 * fleet-wide summary back, so that every pod's verdict tells the same story.
 *
 * Rank 0 serves every connection from one poll loop (never one peer at a time); the other
 * ranks hold one control connection to rank 0 and wait on it under deadlines. A gather or a
 * barrier is a "step": every rank sends its part, rank 0 answers with the parts or with the
 * decision to stop (naming who was lost), so every rank takes the same path. */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <math.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../nccl/nccl.h"
#include "../netif/netif.h"

/* ---- small helpers */

double rdv_left_s(const struct rdv_stage *S)
{
    return S->cutoff - pf_now();
}

const char *rdv_pod_of(const struct rdv_stage *S, int rank, char *buf, size_t n)
{
    if (S->m && rank >= 0 && rank < S->world && S->m[rank].pod[0]) return S->m[rank].pod;
    for (int i = 0; i < S->n; i++)
        if (S->rk[i] == rank && S->ro.peer[i].pod[0]) return S->ro.peer[i].pod;
    pf_rdv_pod_name(buf, n, &S->id, rank);
    return buf;
}

const char *rdv_node_of(const struct rdv_stage *S, int rank)
{
    if (S->m && rank >= 0 && rank < S->world && S->m[rank].node[0]) return S->m[rank].node;
    for (int i = 0; i < S->n; i++)
        if (S->rk[i] == rank) return S->ro.peer[i].node;
    return "";
}

/* "rank 5 (trainer-5)" */
void rdv_who(char *out, size_t n, const struct rdv_stage *S, int rank)
{
    char b[NAME_MAX_];
    const char *p = rdv_pod_of(S, rank, b, sizeof(b));
    if (p && *p)
        snprintf(out, n, "rank %d (%s)", rank, p);
    else
        snprintf(out, n, "rank %d", rank);
}

static int ring_rank(const struct rdv_stage *S, int shift)
{
    return S->rk[((S->pos + shift) % S->n + S->n) % S->n];
}

static int policy_cb(void *arg, const char *check_id, const char *code, enum pf_status st)
{
    (void)check_id;
    int s = pf_config_policy(arg, code, (int)st);
    return s == PF_POLICY_IGNORE ? -1 : s;
}

struct pf_check *rdv_chk(struct rdv_stage *S, const char *id)
{
    return pf_verdict_add_check(S->ctx->verdict, id);
}

static bool has_same_finding(const struct pf_check *c, const char *code, const char *msg)
{
    for (size_t i = 0; i < c->nfindings; i++)
        if (strcmp(c->findings[i].code, code) == 0 && c->findings[i].message &&
            strcmp(c->findings[i].message, msg) == 0)
            return true;
    return false;
}

void rdv_add_finding_text(struct rdv_stage *S, const char *check, const char *code,
                          enum pf_status st, const char *remedy, const char *msg)
{
    struct pf_check *c = rdv_chk(S, check);
    if (has_same_finding(c, code, msg)) return;
    pf_check_add_finding(c, code, st, remedy && *remedy ? remedy : NULL, "%s", msg);
}

/* A finding every rank's verdict carries: rank 0 adds it and sends it in the summary. */
void rdv_fleet_finding(struct rdv_stage *S, const char *check, const char *code, enum pf_status st,
                       const char *remedy, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (has_same_finding(rdv_chk(S, check), code, msg)) return;
    rdv_add_finding_text(S, check, code, st, remedy, msg);
    if (S->have_fleet) pf_fleet_finding(&S->F.out, check, code, st, remedy, "%s", msg);
}

/* Appends "5, 11, 12": at most PF_FLEET_LIST_MAX, then "and K more". */
void rdv_list_numbers(struct pf_buf *b, const int *ranks, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (i == PF_FLEET_LIST_MAX) {
            pf_buf_addf(b, " and %zu more", n - i);
            break;
        }
        pf_buf_addf(b, "%s%d", i ? ", " : "", ranks[i]);
    }
}

void rdv_guard(struct rdv_stage *S, const char *stage_id, const char *fmt, ...)
{
    char doing[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(doing, sizeof(doing), fmt, ap);
    va_end(ap);
    pf_verdict_guard_update(S->ctx->verdict, stage_id, doing);
}

/* Copies what rank 0 knows of every rank into the fleet (idempotent). */
static void sync_fleet(struct rdv_stage *S)
{
    for (int r = 0; r < S->world; r++) {
        const struct rdv_member *m = &S->m[r];
        struct pf_fleet_rank *f = &S->F.r[r];
        char b[NAME_MAX_];
        f->state = (enum pf_fleet_state)m->state;
        pf_strcpy(f->pod, sizeof(f->pod), rdv_pod_of(S, r, b, sizeof(b)));
        pf_strcpy(f->node, sizeof(f->node), rdv_node_of(S, r));
        pf_strcpy(f->addr, sizeof(f->addr), m->addr);
        pf_strcpy(f->why, sizeof(f->why), m->why);
        f->world_claimed = m->world_claimed;
        pf_strcpy(f->version, sizeof(f->version), m->version);
        pf_strcpy(f->digest, sizeof(f->digest), m->digest);
        pf_strcpy(f->nccl_version, sizeof(f->nccl_version), m->nccl_version);
        pf_strlist_free(&f->env);
        for (size_t i = 0; i < m->env.n; i++)
            pf_strlist_add(&f->env, m->env.v[i]);
    }
    S->F.n = S->n;
    S->F.roster = S->rk;
}

/* Adds the fleet's findings and culprits to this rank's verdict (again is harmless: the
 * verdict keeps one of each). only_fleet_checks: a SUMMARY from rank 0 may only speak of
 * the checks `rendezvous` and `collective.tcp`. */
static void apply_fleet(struct rdv_stage *S, const struct pf_fleet_summary *s,
                        bool only_fleet_checks)
{
    for (size_t i = 0; i < s->nfindings; i++) {
        const struct pf_fleet_finding *x = &s->findings[i];
        if (only_fleet_checks && strcmp(x->check, "rendezvous") != 0 &&
            strcmp(x->check, "collective.tcp") != 0)
            continue;
        rdv_add_finding_text(S, x->check, x->code, x->status, x->remedy, x->message);
    }
    for (size_t i = 0; i < s->nculprits; i++)
        pf_verdict_add_culprit(S->ctx->verdict, s->culprits[i].rank, s->culprits[i].pod,
                               s->culprits[i].node, "%s", s->culprits[i].reason);
}

static void agreement(struct rdv_stage *S)
{
    sync_fleet(S);
    pf_fleet_agree(&S->F, pf_now() - S->t0);
    apply_fleet(S, &S->F.out, false);
}

/* The GPU stage's allgather (blobs up to 64 KiB per rank). */
static int nccl_allgather(void *rdv, const void *mine, void *out, size_t len)
{
    struct rdv_stage *S = rdv;
    if (len > ALLGATHER_MAX)
        return pf_err_set(PF_EINVAL, "allgather of %zu bytes per rank: the limit is %u", len,
                          ALLGATHER_MAX);
    struct rdv_step_res res;
    double t = S->cfg->nccl_timeout_s > 0 ? S->cfg->nccl_timeout_s : 120;
    int r = rdv_step(S, "allgather", true, NULL, mine, len, STEP_ALLGATHER, t, &res);
    if (r == 0) {
        for (int i = 0; i < S->n; i++) {
            if (res.lens[i] != len) {
                size_t got = res.lens[i];
                rdv_step_res_free(S, &res);
                return pf_err_set(PF_EINVAL, "allgather: rank %d sent %zu bytes, expected %zu",
                                  S->rk[i], got, len);
            }
            memcpy((uint8_t *)out + (size_t)i * len, res.blobs[i], len);
        }
    }
    rdv_step_res_free(S, &res);
    return r < 0 ? pf_err_set(PF_ERR, "allgather among pods failed: a rank was lost") : 0;
}

/* ---- the collectives */

static void do_allreduce(struct rdv_stage *S)
{
    S->ar_ran = true;
    long long bytes = S->cfg->tcp_message_bytes > 0 ? S->cfg->tcp_message_bytes : (64ll << 20);
    bytes -= bytes % 4;
    if (bytes < 4) bytes = 4;
    S->bytes = bytes;
    S->iters = S->cfg->tcp_iterations > 0 ? S->cfg->tcp_iterations : 5;
    size_t count = (size_t)bytes / 4;
    float *data = malloc((size_t)bytes);
    if (!data) {
        snprintf(S->ar_err, sizeof(S->ar_err), "cannot allocate %lld bytes", bytes);
        return;
    }
    double left = rdv_left_s(S);
    double deadline = pf_now() + pf_clampd(left * 0.4, 3, left > 1e8 ? 300 : left - 3);
    char mib[32];
    snprintf(mib, sizeof(mib), "%.3g MiB", (double)bytes / (1 << 20));
    pf_ctx_progress(S->ctx,
                    "tcp all-reduce: %d ranks, %s float32 sum, 1 checked + %d timed "
                    "iterations",
                    S->n, mib, S->iters);
    rdv_guard(S, "collective.tcp", "running the TCP all-reduce among %d ranks", S->n);
    int send_fd = S->out_fd[0], recv_fd = S->in_fd[0];
    struct pf_coll_fail fail;
    pf_coll_seed(data, count, S->rank);
    int r = pf_coll_allreduce(data, count, S->pos, S->n, send_fd, recv_fd, CHUNK_BYTES, deadline,
                              &fail);
    if (r == 0) {
        S->ar_wrong = pf_coll_verify(data, count, S->rk, S->n, &S->ar_first_bad);
        double t0 = pf_now();
        for (int it = 0; it < S->iters && r == 0; it++)
            r = pf_coll_allreduce(data, count, S->pos, S->n, send_fd, recv_fd, CHUNK_BYTES,
                                  deadline, &fail);
        S->ar_seconds = (pf_now() - t0) / S->iters;
    }
    free(data);
    if (r == 0) {
        S->ar_ok = true;
        return;
    }
    int peer = fail.on_send ? ring_rank(S, 1) : ring_rank(S, -1);
    char w[160];
    rdv_who(w, sizeof(w), S, peer);
    snprintf(S->ar_err, sizeof(S->ar_err), "%s %s: %s",
             fail.on_send ? "sending to" : "receiving from", w, fail.what);
    pf_ctx_progress(S->ctx, "tcp all-reduce failed: %s", S->ar_err);
    /* close the ring now so that the neighbours stop at once rather than at their deadline */
    rdv_mesh_close(S);
}

static void run_collectives(struct rdv_stage *S)
{
    struct rdv_step_res res;
    char err[384] = "";
    bool ok = rdv_mesh_connect(S, err, sizeof(err)) == 0;
    if (!ok) pf_ctx_progress(S->ctx, "data mesh: %s", err);
    if (rdv_step(S, "mesh", ok, err, NULL, 0, STEP_BARRIER,
                 pf_clampd(rdv_left_s(S) * 0.2, 3, 30) + 5, &res) < 0) {
        rdv_step_res_free(S, &res);
        rdv_mesh_close(S);
        return;
    }
    rdv_step_res_free(S, &res);
    do_allreduce(S);
    struct pf_buf b;
    pf_buf_init(&b, 1 << 16);
    struct pf_fleet_ar mine = {S->ar_ok, S->ar_seconds, (long long)S->ar_wrong,
                               (long long)S->ar_first_bad, S->iface};
    pf_fleet_ar_encode(&b, &mine);
    double left = rdv_left_s(S);
    double t = pf_clampd(left * 0.4, 3, left > 1e8 ? 300 : left) + 5;
    int r = rdv_step(S, "allreduce", S->ar_ok, S->ar_err, b.data, b.len, STEP_GATHER, t, &res);
    pf_buf_free(&b);
    if (S->rank == 0 && res.blobs)
        for (int i = 0; i < S->n; i++)
            if (res.blobs[i])
                (void)pf_fleet_ar_decode(&S->F.r[S->rk[i]], res.blobs[i], res.lens[i]);
    rdv_step_res_free(S, &res);
    if (r < 0) {
        rdv_mesh_close(S);
        return;
    }
    rdv_guard(S, "collective.tcp", "probing the links between %d ranks", S->n);
    (void)rdv_probe_links(S);
    rdv_mesh_close(S);
}

/* ---- the final gather and the summary */

static void my_statuses(struct rdv_stage *S, struct pf_buf *b)
{
    struct pf_verdict copy;
    pf_verdict_clone(&copy, S->ctx->verdict);
    pf_verdict_finalize(&copy, policy_cb, (void *)S->cfg);
    if (pf_fleet_report_encode(b, &copy) < 0)
        pf_ctx_progress(S->ctx, "report to rank 0: %s", pf_err_msg());
    pf_verdict_free(&copy);
}

static void links_evidence(struct rdv_stage *S)
{
    if (!S->nlinks) return;
    struct pf_node *links = pf_node_set_seq(rdv_chk(S, "collective.tcp")->evidence, "links");
    for (size_t i = 0; i < S->nlinks; i++) {
        struct pf_node *l = pf_node_add_map(links);
        pf_node_set_int(l, "from", S->links[i].src);
        pf_node_set_int(l, "to", S->links[i].dst);
        pf_node_set_dbl(l, "gbps", round(S->links[i].gbps * 1000) / 1000);
    }
}

/* Rank 0: the fleet's judgement (pkg/fleet), then the ranks list and the fleet verdict. */
static void root_summarize(struct rdv_stage *S)
{
    struct pf_verdict *v = S->ctx->verdict;
    sync_fleet(S);
    struct pf_fleet_rank *me = &S->F.r[0];
    me->ar_done = S->ar_ok;
    me->ar_seconds = S->ar_seconds;
    me->ar_wrong = (long long)S->ar_wrong;
    me->ar_first_bad = (long long)S->ar_first_bad;
    struct pf_fleet_tcp t = {
        .ran = S->ar_ran,
        .stopped = S->stopped,
        .ok = S->ar_ok,
        .bytes = S->bytes,
        .iterations = S->iters,
        .min_busbw = S->cfg->tcp_min_busbw_gbps,
        .links = S->links,
        .nlinks = S->nlinks,
        .judgement = S->have_judg ? &S->judg : NULL,
        .lost = &S->lost,
        .failed = &S->failed,
    };
    pf_fleet_judge_tcp(&S->F, &t);
    links_evidence(S);
    pf_fleet_judge_reports(&S->F);
    apply_fleet(S, &S->F.out, false);
    pf_fleet_ranks(&S->F, v->ranks, S->my_ip);
    enum pf_status worst = PF_PASS;
    for (size_t i = 0; i < v->nchecks; i++)
        for (size_t k = 0; k < v->checks[i].nfindings; k++) {
            int st = pf_config_policy(S->cfg, v->checks[i].findings[k].code,
                                      (int)v->checks[i].findings[k].status);
            if (st > (int)worst) worst = (enum pf_status)st;
        }
    pf_fleet_conclude(&S->F, worst, v->culprits->count, v->culprits->first);
}

static void set_fleet_extra(struct rdv_stage *S, const struct pf_fleet_summary *s)
{
    if (!s->verdict[0]) return;
    struct pf_node *fl = pf_node_set_map(S->ctx->verdict->extra, "fleet");
    pf_node_set_str(fl, "verdict", s->verdict);
    pf_node_set_str(fl, "summary", s->text);
    pf_node_set_int(fl, "ranks", S->n);
    pf_node_set_int(fl, "worldSize", S->world);
}

static void tcp_entry(struct rdv_stage *S, struct pf_check *c, const struct pf_fleet_summary *s)
{
    struct pf_node *e = pf_node_add_map(S->ctx->verdict->collectives);
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
    pf_node_set_str(e, "interface", S->iface[0] ? S->iface : "?");
    char links[160] = "";
    if (s->have_links)
        snprintf(links, sizeof(links),
                 "; links: median %.2f Gb/s, slowest %.2f Gb/s (rank %d -> %d)", s->median,
                 s->slow_src >= 0 ? s->slow_gbps : 0.0, s->slow_src, s->slow_dst);
    pf_check_set_message(c,
                         "all-reduce of %.3g MiB among %lld ranks over TCP (%s): busbw %.3f GB/s, "
                         "algbw %.3f GB/s, result %s%s",
                         (double)s->bytes / (1 << 20), s->ranks, S->iface[0] ? S->iface : "?",
                         s->busbw, s->algbw, s->correct ? "exact" : "WRONG", links);
}

/* The collective entry and the check's message, from the summary (rank 0: its own). */
static void record_tcp(struct rdv_stage *S, const struct pf_fleet_summary *s)
{
    struct pf_check *c = rdv_chk(S, "collective.tcp");
    pf_node_set_str(c->evidence, "interface", S->iface[0] ? S->iface : "?");
    pf_node_set_str(c->evidence, "address", S->my_ip);
    if (S->ar_ran) {
        pf_node_set_int(c->evidence, "bytes", S->bytes);
        pf_node_set_int(c->evidence, "iterations", S->iters);
        if (S->ar_ok)
            pf_node_set_dbl(c->evidence, "secondsThisRank", S->ar_seconds);
        else
            pf_node_set_str(c->evidence, "errorThisRank", S->ar_err);
    }
    for (size_t i = 0; i < S->nmylinks; i++) {
        char key[48];
        snprintf(key, sizeof(key), "linkFromRank%dGbps", S->mylinks[i].src);
        pf_node_set_dbl(c->evidence, key, round(S->mylinks[i].gbps * 1000) / 1000);
    }
    if (s->have_links) pf_node_set_dbl(c->evidence, "medianLinkGbps", s->median);
    if (s->have_links && s->slow_src >= 0) {
        struct pf_node *sl = pf_node_set_map(c->evidence, "slowestLink");
        pf_node_set_int(sl, "from", s->slow_src);
        pf_node_set_int(sl, "to", s->slow_dst);
        pf_node_set_dbl(sl, "gbps", s->slow_gbps);
    }
    if (s->have_tcp)
        tcp_entry(S, c, s);
    else if (c->nfindings == 0 && !S->ar_ran)
        pf_check_skip(c, "the TCP all-reduce did not run (%s)",
                      S->n < 2 ? "only one rank in the run" : "the run stopped before it");
}

/* Rank 0: gathers every rank's report, judges, and sends the SUMMARY to every rank. */
static void root_final(struct rdv_stage *S, struct rdv_step_res *res)
{
    for (int i = 0; i < S->n; i++) {
        int r = S->rk[i];
        if (i == 0) {
            struct pf_buf me;
            pf_buf_init(&me, 1 << 20);
            my_statuses(S, &me);
            (void)pf_fleet_report_decode(&S->F.r[0], (const uint8_t *)pf_buf_str(&me), me.len);
            pf_buf_free(&me);
        } else if (res->blobs && res->blobs[i] && S->m[r].state == M_JOINED) {
            (void)pf_fleet_report_decode(&S->F.r[r], res->blobs[i], res->lens[i]);
        }
    }
    rdv_step_res_free(S, res);
    root_summarize(S);
    if (pf_fleet_summary_encode(&S->sum, &S->F.out) < 0)
        pf_ctx_progress(S->ctx, "%s: the other ranks get a shortened summary", pf_err_msg());
    /* this rank reads the summary as the others will */
    struct pf_fleet_summary sent;
    if (pf_fleet_summary_decode(&sent, (const uint8_t *)pf_buf_str(&S->sum), S->sum.len) == 0) {
        set_fleet_extra(S, &sent);
        record_tcp(S, &sent);
    }
    pf_fleet_summary_free(&sent);
    rdv_send_all(S, PF_RDV_SUMMARY, S->sum.data, S->sum.len, NULL, NULL,
                 pf_deadline_in(5, S->cutoff));
    rdv_serve(S, pf_deadline_in(5, S->cutoff), rdv_flushed);
}

/* No word from rank 0: this rank says what it saw itself. */
static void on_my_own(struct rdv_stage *S)
{
    for (size_t i = 0; i < S->lost.n; i++) {
        int lr = S->lost.v[i].rank;
        const char *why = S->lost.v[i].why;
        char w[160];
        rdv_who(w, sizeof(w), S, lr);
        char m2[768];
        snprintf(m2, sizeof(m2), "%s was lost after the rendezvous: %s", w, why);
        rdv_add_finding_text(S, "collective.tcp", "peer-lost", PF_FAIL, NULL, m2);
        char b2[NAME_MAX_];
        pf_verdict_add_culprit(S->ctx->verdict, lr, rdv_pod_of(S, lr, b2, sizeof(b2)),
                               rdv_node_of(S, lr), "lost during the collectives: %s", why);
    }
    if (S->ar_err[0] && S->lost.n == 0)
        rdv_add_finding_text(S, "collective.tcp", "peer-lost", PF_FAIL, NULL, S->ar_err);
    struct pf_fleet_summary none;
    memset(&none, 0, sizeof(none));
    none.expected = -1;
    record_tcp(S, &none);
}

static void final_report(struct rdv_stage *S)
{
    struct pf_buf b;
    pf_buf_init(&b, 1 << 20);
    my_statuses(S, &b);
    struct rdv_step_res res;
    rdv_guard(S, "collective.tcp", "gathering every rank's results at rank 0");
    rdv_step(S, "report", true, NULL, b.data, b.len, STEP_GATHER, 15, &res);
    pf_buf_free(&b);
    if (S->rank == 0) {
        root_final(S, &res);
        return;
    }
    rdv_step_res_free(S, &res);
    struct pf_rdv_msg msg = {0};
    int r = PF_ERR;
    if (!S->root_lost) {
        r = pf_rdv_conn_recv(&S->ctl, &msg, S->auth, pf_deadline_in(30, S->cutoff));
        if (r < 0 && !S->root_lost) {
            S->root_lost = true;
            snprintf(S->root_why, sizeof(S->root_why), "%s", pf_err_msg());
            pf_fleet_mark(&S->lost, 0, S->root_why);
        }
    }
    struct pf_fleet_summary sum;
    if (r >= 0 && msg.type == PF_RDV_SUMMARY &&
        pf_fleet_summary_decode(&sum, msg.payload, msg.len) == 0) {
        S->summary_seen = true;
        apply_fleet(S, &sum, true);
        set_fleet_extra(S, &sum);
        record_tcp(S, &sum);
        pf_fleet_summary_free(&sum);
    } else {
        on_my_own(S);
    }
    pf_rdv_msg_free(&msg);
}

/* ---- the stage */

static void find_iface(struct rdv_stage *S)
{
    struct pf_netif_list l = {0};
    if (pf_netif_list(&l) < 0) return;
    for (size_t i = 0; i < l.n; i++) {
        if (S->cfg->rendezvous_interface[0] &&
            strcmp(l.v[i].name, S->cfg->rendezvous_interface) == 0) {
            for (size_t a = 0; a < l.v[i].naddrs; a++)
                if (l.v[i].addrs[a].family == AF_INET) {
                    pf_strcpy(S->bind_ip, sizeof(S->bind_ip), l.v[i].addrs[a].text);
                    break;
                }
        }
        if (S->my_ip[0] && pf_netif_has_addr(&l.v[i], S->my_ip))
            pf_strcpy(S->iface, sizeof(S->iface), l.v[i].name);
    }
    pf_netif_list_free(&l);
}

static void stage_free(struct rdv_stage *S)
{
    if (S->m) {
        for (int r = 0; r < S->world; r++) {
            pf_strlist_free(&S->m[r].env);
            free(S->m[r].blob);
        }
        free(S->m);
    }
    for (size_t i = 0; i < S->nsc; i++)
        if (S->sc[i].used) pf_rdv_conn_close(&S->sc[i].c);
    free(S->sc);
    if (S->lfd >= 0) close(S->lfd);
    if (S->data_lfd >= 0) close(S->data_lfd);
    if (S->have_ctl) pf_rdv_conn_close(&S->ctl);
    rdv_mesh_close(S);
    rdv_roster_free(S);
    pf_buf_free(&S->sum);
    pf_fleet_marks_free(&S->lost);
    pf_fleet_marks_free(&S->failed);
    if (S->have_fleet) pf_fleet_free(&S->F);
    free(S->links);
    free(S->mylinks);
    pf_coll_judgement_free(&S->judg);
}

static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static void run_gpu_stage(struct rdv_stage *S)
{
    /* every rank decides alike, by rank 0's world size: a rank that claims another one must
     * not skip the GPU stage's steps while the others run them */
    int world = S->ro.world > 0 ? S->ro.world : S->world;
    if (S->stopped || S->n != world) {
        struct pf_check *c = pf_verdict_find_check(S->ctx->verdict, "collective.nccl");
        if (!c) {
            c = rdv_chk(S, "collective.nccl");
            pf_check_skip(c, "not run: %s",
                          S->n != world ? "not every rank joined the rendezvous"
                                        : "a rank was lost during the TCP stage");
        }
        return;
    }
    struct pf_nccl_peers peers;
    memset(&peers, 0, sizeof(peers));
    peers.rank = S->rank;
    peers.world_size = world;
    pf_strcpy(peers.coordinator_ip, sizeof(peers.coordinator_ip),
              S->rank == 0 ? (S->my_ip[0] ? S->my_ip : "127.0.0.1") : S->root_ip);
    peers.port = S->id.port + 1 <= 65535 ? S->id.port + 1 : S->id.port - 1;
    peers.rdv = S;
    peers.allgather = nccl_allgather;
    rdv_guard(S, "collective.nccl", "running the NCCL collectives among %d pods", world);
    pf_nccl_stage(S->ctx, &peers);
}

/* Who am I: the identity and its evidence. PF_ERR when this pod has nothing to meet (the
 * checks are then set). */
static int stage_identity(struct rdv_stage *S, const struct pf_rdv_opts *o)
{
    struct pf_ctx *ctx = S->ctx;
    int port = S->cfg->rendezvous_port > 0 ? S->cfg->rendezvous_port : 29400;
    int r = pf_rdv_whoami(&S->id, o, ctx, port);
    struct pf_check *c = rdv_chk(S, "rendezvous");
    if (r == 0) pf_rdv_ident_evidence(pf_node_set_map(c->evidence, "identity"), &S->id);
    if (r < 0) {
        pf_check_add_finding(c, "identity-unknown", PF_FAIL, NULL, "%s", pf_err_msg());
        pf_check_skip(rdv_chk(S, "collective.tcp"),
                      "no rendezvous: this pod's identity is unknown");
        return PF_ERR;
    }
    if (!S->id.member) {
        pf_check_skip(c, "this pod is no rank: %s", S->id.explain);
        pf_check_skip(rdv_chk(S, "collective.tcp"), "this pod is no rank of the all-reduce");
        return PF_ERR;
    }
    char host[256] = "";
    if (gethostname(host, sizeof(host)) != 0) host[0] = '\0';
    host[sizeof(host) - 1] = '\0';
    S->rank = S->id.rank;
    S->world = S->id.world_size;
    pf_node_set_int(ctx->verdict->pod, "rank", S->rank);
    pf_node_set_int(ctx->verdict->pod, "worldSize", S->world);
    const char *pn = pf_node_get_str(ctx->verdict->pod, "name");
    pf_strcpy(S->pod, sizeof(S->pod), pn ? pn : host);
    const char *nn = pf_node_get_str(ctx->verdict->pod, "node");
    pf_strcpy(S->node, sizeof(S->node), nn ? nn : "");
    struct pf_node *ev = c->evidence;
    pf_node_set_int(ev, "rank", S->rank);
    pf_node_set_str(ev, "rankFrom", S->id.rank_from);
    pf_node_set_int(ev, "worldSize", S->world);
    pf_node_set_str(ev, "worldSizeFrom", S->id.world_from);
    if (S->rank != 0) {
        pf_node_set_str(ev, "coordinator", S->id.coordinator);
        pf_node_set_str(ev, "coordinatorFrom", S->id.coord_from);
    }
    pf_node_set_int(ev, "port", S->id.port);
    pf_node_set_str(ev, "auth", S->auth ? "hmac-sha256" : "none");
    return 0;
}

/* The time budget: the guard's deadline, less a second to write the verdict. */
static void stage_budget(struct rdv_stage *S)
{
    double left = pf_verdict_guard_remaining();
    bool bounded = left < 1e8;
    S->cutoff = bounded ? S->t0 + left - 1.0 : S->t0 + 1e9;
    double rdv_to = S->cfg->rendezvous_timeout_s > 0 ? S->cfg->rendezvous_timeout_s : 600;
    double reserve = bounded ? pf_clampd(left * 0.3, 3, 60) : 0;
    double join = bounded && left - reserve < rdv_to ? left - reserve : rdv_to;
    S->join_deadline = S->t0 + (join > 1 ? join : 1);
}

/* Rank 0: serve JOINs until all came or the join deadline, agree, send the roster. */
static int meet_root(struct rdv_stage *S)
{
    if (rdv_root_listen(S) < 0) return PF_ERR;
    rdv_guard(S, "rendezvous", "waiting for %d rank%s to join", S->world - 1,
              S->world - 1 == 1 ? "" : "s");
    rdv_serve(S, S->join_deadline, rdv_join_done);
    double t_last = S->last_join;
    agreement(S);
    rdv_root_send_roster(S);
    rdv_serve(S, pf_now() + 5 < S->cutoff ? pf_now() + 5 : S->cutoff, rdv_flushed);
    S->roster_at = pf_now();
    struct pf_node *ev = rdv_chk(S, "rendezvous")->evidence;
    if (t_last > 0)
        pf_node_set_dbl(ev, "lastArrivalToRosterSeconds",
                        round((S->roster_at - t_last) * 1e6) / 1e6);
    pf_node_set_int(ev, "droppedConnections", S->dropped);
    if (S->dropped) pf_node_set_str(ev, "lastDropped", S->dropped_last);
    find_iface(S);
    return 0;
}

/* Rank > 0: join rank 0 and take the roster. */
static int meet_client(struct rdv_stage *S)
{
    char b0[NAME_MAX_];
    const char *pod0 = rdv_pod_of(S, 0, b0, sizeof(b0));
    pf_ctx_progress(S->ctx, "rank %d of %d (%s): joining rank 0%s%s%s at %s:%d", S->rank, S->world,
                    S->id.rank_from, pod0[0] ? " (" : "", pod0, pod0[0] ? ")" : "",
                    S->id.coordinator, S->id.port);
    if (rdv_client_join(S) < 0) {
        struct pf_check *t = rdv_chk(S, "collective.tcp");
        if (t->status != PF_SKIP && t->nfindings == 0)
            pf_check_skip(t, "no rendezvous: this pod is not in the run");
        return PF_ERR;
    }
    find_iface(S);
    return 0;
}

/* identity → listen → meet → agree → roster → collectives → GPU stage → final report */
static void stage_run(struct rdv_stage *S, const struct pf_rdv_opts *o)
{
    if (stage_identity(S, o) < 0) return;
    struct pf_check *c = rdv_chk(S, "rendezvous");
    if (S->world == 1) {
        /* a world of one passes without a partner: no socket, no waiting */
        pf_check_set_message(c, "world of one: no other pod to meet");
        pf_check_skip(rdv_chk(S, "collective.tcp"),
                      "world of one: no other pod to all-reduce with");
        rdv_roster_alloc(S, 1);
        S->rk[0] = 0;
        run_gpu_stage(S);
        return;
    }
    raise_nofile();
    stage_budget(S);
    find_iface(S);
    S->data_port = 0;
    if (pf_rdv_listen(&S->data_lfd, S->bind_ip, &S->data_port) < 0) {
        pf_check_add_finding(c, "listen-failed", PF_FAIL, NULL, "data port: %s", pf_err_msg());
        pf_check_skip(rdv_chk(S, "collective.tcp"), "no data port");
        return;
    }
    if ((S->rank == 0 ? meet_root(S) : meet_client(S)) < 0) return;
    double met = pf_now() - S->t0;
    c = rdv_chk(S, "rendezvous");
    pf_node_set_int(c->evidence, "joined", S->n);
    pf_node_set_dbl(c->evidence, "seconds", round(met * 1000) / 1000);
    pf_ctx_progress(S->ctx, "%d of %d ranks in the run after %.1f s", S->n, S->world, met);
    if (S->n == S->world)
        pf_check_set_message(c, "all %d ranks met in %.1f s through %s:%d", S->world, met,
                             S->rank == 0 ? "this pod" : S->id.coordinator, S->id.port);
    else
        pf_check_set_message(c, "%d of %d ranks met in %.1f s", S->n, S->world, met);

    if (S->n >= 2) run_collectives(S);
    run_gpu_stage(S);
    final_report(S);
}

void pf_rendezvous_stage(struct pf_ctx *ctx, const struct pf_rdv_opts *o)
{
    struct rdv_stage st, *S = &st;
    memset(S, 0, sizeof(*S));
    S->ctx = ctx;
    S->cfg = ctx->config;
    S->lfd = S->data_lfd = -1;
    for (int k = 0; k < 3; k++)
        S->out_fd[k] = S->in_fd[k] = -1;
    S->t0 = pf_now();
    pf_buf_init(&S->sum, PF_RDV_MAX_PAYLOAD);
    if (sodium_init() < 0) {
        pf_check_skip(rdv_chk(S, "rendezvous"), "libsodium failed to initialise");
        stage_free(S);
        return;
    }
    S->token = o->token && *o->token ? o->token : NULL;
    S->auth = S->token != NULL;
    (void)pf_verdict_add_check(ctx->verdict, "rendezvous");
    (void)pf_verdict_add_check(ctx->verdict, "collective.tcp");
    stage_run(S, o);
    stage_free(S);
}
