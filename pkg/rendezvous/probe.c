/* The link probes of the run: pf_coll_rounds_run (pkg/collective/rounds.c) over this run's
 * sockets and steps. A round's barrier is a scatter step: every rank sends rank 0 what it
 * received in the round before, rank 0 plans the next round (struct pf_coll_coord) and
 * answers each rank with its own probes only. The survey rounds use the data mesh (it
 * connects exactly the survey's shifts, pf_coll_probe_shifts); a confirmation probe, between
 * positions the mesh does not join, gets a connection of its own, opened with a DHELLO that
 * names the run, both ranks and the round, and closed after the round. Rank 0 judges every
 * sample at the end (pf_coll_judge). */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct probe_run {
    struct rdv_stage *S;
    struct pf_coll_coord co; /* rank 0 */
    bool more;               /* rank 0: the round planned runs */
    double step_s, probe_s;
    struct pf_rdv_auth da;
    int own[2];    /* connections opened for this round */
    int fail_peer; /* the position a failed probe was with (-1: none) */
};

static void probe_ready(void *arg, struct rdv_step_res *res)
{
    struct probe_run *P = arg;
    struct rdv_stage *S = P->S;
    for (int i = 0; i < res->nb && i < S->n; i++) {
        struct pf_coll_sample s[PF_COLL_TASKS_MAX];
        size_t ns = 0;
        if (res->blobs[i] &&
            pf_fleet_samples_decode(s, &ns, PF_COLL_TASKS_MAX, res->blobs[i], res->lens[i]) == 0)
            pf_coll_coord_add(&P->co, i, s, ns);
        free(res->blobs[i]);
        res->blobs[i] = NULL;
        res->lens[i] = 0;
    }
    int np = pf_coll_coord_plan(&P->co, P->co.round + 1);
    P->more = np > 0;
}

static void probe_part(void *arg, int pos, struct pf_buf *out)
{
    struct probe_run *P = arg;
    struct pf_coll_task t[PF_COLL_TASKS_MAX];
    size_t nt = P->more ? pf_coll_coord_tasks(&P->co, pos, t) : 0;
    pf_fleet_tasks_encode(out, P->more, t, nt);
}

/* The samples this rank received, kept for its own evidence (by rank). */
static void keep_mine(struct rdv_stage *S, const struct pf_coll_sample *s, size_t ns)
{
    for (size_t i = 0; i < ns; i++) {
        S->mylinks = pf_xrealloc(S->mylinks, (S->nmylinks + 1) * sizeof(*S->mylinks));
        S->mylinks[S->nmylinks++] =
            (struct pf_coll_link){S->rk[s[i].src], S->rank, pf_coll_sample_gbps(&s[i])};
    }
}

static int probe_next(void *arg, int round, const struct pf_coll_sample *mine, size_t nmine,
                      const char *err, struct pf_coll_task *tasks, size_t *ntasks)
{
    struct probe_run *P = arg;
    struct rdv_stage *S = P->S;
    *ntasks = 0;
    keep_mine(S, mine, nmine);
    struct pf_buf b;
    pf_buf_init(&b, 1 << 16);
    pf_fleet_samples_encode(&b, mine, nmine);
    struct rdv_step_res res;
    rdv_guard(S, "collective.tcp", "probing the links between %d ranks (round %d)", S->n,
              round + 1);
    char e2[400] = "";
    if (err) {
        int peer = P->fail_peer;
        char w[160] = "";
        if (peer >= 0) rdv_who(w, sizeof(w), S, S->rk[peer]);
        snprintf(e2, sizeof(e2), "link probe%s%s: %s", w[0] ? " with " : "", w, err);
        pf_ctx_progress(S->ctx, "%s", e2);
    }
    int r = rdv_step_scatter(S, "probe", !err, err ? e2 : NULL, b.data, b.len, P->step_s,
                             probe_ready, probe_part, P, &res);
    pf_buf_free(&b);
    if (r < 0) {
        rdv_step_res_free(S, &res);
        return PF_ERR;
    }
    bool more = false;
    if (S->rank == 0) {
        more = P->more;
        *ntasks = more ? pf_coll_coord_tasks(&P->co, 0, tasks) : 0;
    } else if (res.nb < 1 || pf_fleet_tasks_decode(&more, tasks, ntasks, PF_COLL_TASKS_MAX, S->n,
                                                   res.blobs[0], res.lens[0]) < 0) {
        rdv_step_res_free(S, &res);
        return PF_ERR;
    }
    rdv_step_res_free(S, &res);
    return more ? 1 : 0;
}

/* A confirmation connection to position q: dial its data port, send the DHELLO. */
static int probe_dial(struct probe_run *P, int round, int q, double deadline, char *why,
                      size_t nwhy)
{
    struct rdv_stage *S = P->S;
    char peer[96];
    int fd;
    if (pf_rdv_dial(&fd, peer, sizeof(peer), S->ro.peer[q].ip, S->ro.peer[q].port, deadline) <
        0) {
        snprintf(why, nwhy, "probe connection to %s:%d: %s", S->ro.peer[q].ip,
                 S->ro.peer[q].port, pf_err_msg());
        return -1;
    }
    struct pf_rdv_conn c;
    pf_rdv_conn_init(&c, fd, peer, true);
    c.auth = P->da;
    c.dir_out = PF_RDV_DIR_DATA;
    struct pf_buf b;
    pf_buf_init(&b, 4096);
    pf_rdv_put(&b, "run", S->ro.run, PF_RDV_NONCE);
    pf_rdv_put_int(&b, "src", S->rank);
    pf_rdv_put_int(&b, "dst", S->rk[q]);
    pf_rdv_put_int(&b, "shift", 0);
    pf_rdv_put_int(&b, "round", round);
    int r = pf_rdv_conn_send(&c, PF_RDV_DHELLO, b.data, b.len, deadline);
    pf_buf_free(&b);
    c.fd = -1; /* keep the socket */
    pf_rdv_conn_close(&c);
    if (r < 0) {
        close(fd);
        snprintf(why, nwhy, "probe connection: %s", pf_err_msg());
        return -1;
    }
    return fd;
}

/* Whether fd's first frame is the DHELLO of this run, from rank src to this rank, for this
 * round. Nothing follows it until this rank sends the ready byte, so reading it whole takes
 * no probe data. */
static bool probe_hello_ok(struct probe_run *P, int fd, int src, int round, double deadline)
{
    struct rdv_stage *S = P->S;
    struct pf_rdv_conn c;
    pf_rdv_conn_init(&c, fd, "probe", false);
    c.auth = P->da;
    c.dir_in = PF_RDV_DIR_DATA;
    c.max_payload = 512;
    struct pf_rdv_msg m = {0};
    double d = pf_now() + 2 < deadline ? pf_now() + 2 : deadline;
    bool ok = false;
    if (pf_rdv_conn_recv(&c, &m, S->auth, d) == 0 && m.type == PF_RDV_DHELLO) {
        const struct pf_rdv_field *run = pf_rdv_fields_get(&m.f, "run");
        long long s = -1, dst = -1, rd = -1;
        pf_rdv_fields_int(&s, &m.f, "src");
        pf_rdv_fields_int(&dst, &m.f, "dst");
        pf_rdv_fields_int(&rd, &m.f, "round");
        ok = run && run->vlen == PF_RDV_NONCE && memcmp(run->val, S->ro.run, PF_RDV_NONCE) == 0 &&
             s == src && dst == S->rank && rd == round;
    }
    pf_rdv_msg_free(&m);
    c.fd = -1;
    pf_rdv_conn_close(&c);
    return ok;
}

/* A confirmation connection from position q, accepted on the data port before deadline;
 * strangers and leftovers are closed. */
static int probe_accept(struct probe_run *P, int round, int q, double deadline, char *why,
                        size_t nwhy)
{
    struct rdv_stage *S = P->S;
    for (;;) {
        double now = pf_now();
        if (now >= deadline) break;
        struct pollfd pfd = {S->data_lfd, POLLIN, 0};
        int pr = poll(&pfd, 1, (int)((deadline - now) * 1000) + 1);
        if (pr <= 0) continue;
        int fd = accept4(S->data_lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) continue;
        if (probe_hello_ok(P, fd, S->rk[q], round, deadline)) return fd;
        close(fd);
    }
    char w[160];
    rdv_who(w, sizeof(w), S, S->rk[q]);
    snprintf(why, nwhy, "no probe connection from %s within the deadline", w);
    return -1;
}

static int probe_link(void *arg, int round, const struct pf_coll_task *t, char *why, size_t nwhy)
{
    struct probe_run *P = arg;
    struct rdv_stage *S = P->S;
    int d = ((t->send ? t->peer - S->pos : S->pos - t->peer) % S->n + S->n) % S->n;
    /* a survey round: the mesh's connection of its shift (each used by one round only) */
    if (round < pf_coll_survey_rounds(S->n) && round < S->nshifts && d == S->shifts[round]) {
        int fd = t->send ? S->out_fd[round] : S->in_fd[round];
        if (fd >= 0) return fd;
        snprintf(why, nwhy, "the data mesh has no connection for shift %d", d);
        return -1;
    }
    double deadline = pf_now() + P->probe_s;
    int fd = t->send ? probe_dial(P, round, t->peer, deadline, why, nwhy)
                     : probe_accept(P, round, t->peer, deadline, why, nwhy);
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

/* Rank 0: the judgement of every sample, and the samples as the links evidence (by rank). */
static void probe_judge(struct probe_run *P)
{
    struct rdv_stage *S = P->S;
    const struct pf_coll_coord *co = &P->co;
    if (pf_coll_judge(&S->judg, S->n, co->s, co->ns, PF_COLL_SLOW_RATIO) < 0) return;
    S->have_judg = true;
    free(S->links);
    S->links = pf_xcalloc(co->ns ? co->ns : 1, sizeof(*S->links));
    S->nlinks = co->ns;
    for (size_t i = 0; i < co->ns; i++)
        S->links[i] = (struct pf_coll_link){S->rk[co->s[i].src], S->rk[co->s[i].dst],
                                            pf_coll_sample_gbps(&co->s[i])};
    pf_ctx_progress(S->ctx,
                    "link probes: %zu samples in %d rounds, median %.2f Gb/s, %zu culprit%s",
                    co->ns, S->judg.rounds, S->judg.median, S->judg.n, S->judg.n == 1 ? "" : "s");
}

int rdv_probe_links(struct rdv_stage *S)
{
    struct probe_run P;
    memset(&P, 0, sizeof(P));
    P.S = S;
    P.own[0] = P.own[1] = -1;
    P.probe_s = pf_clampd(rdv_left_s(S) * 0.03, 2, 10);
    P.step_s = P.probe_s + 15;
    P.da.on = S->auth;
    P.da.token = S->token;
    memcpy(P.da.nonce_s, S->ro.run, PF_RDV_NONCE);
    if (S->rank == 0) pf_coll_coord_init(&P.co, S->n, PF_COLL_SLOW_RATIO);
    struct pf_coll_rounds_ops ops = {&P, probe_next, probe_link, probe_release};
    struct pf_coll_fail fail;
    P.fail_peer = -1;
    int r = pf_coll_rounds_run(S->pos, S->n, &ops, P.probe_s, &fail, &P.fail_peer);
    probe_release(&P, -1);
    if (r < 0 && P.fail_peer >= 0) {
        char w[160];
        rdv_who(w, sizeof(w), S, S->rk[P.fail_peer]);
        snprintf(S->ar_err, sizeof(S->ar_err), "link probe %s %s: %s",
                 fail.on_send ? "to" : "from", w, fail.what);
    }
    if (S->rank == 0 && r == 0) probe_judge(&P);
    if (S->rank == 0) pf_coll_coord_free(&P.co);
    return r;
}
