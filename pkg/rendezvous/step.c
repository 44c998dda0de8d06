/* Steps: a gather or a barrier. Every rank sends its part, rank 0 answers with the parts or
 * with the decision to stop (naming who was lost or failed), so every rank takes the same
 * path. */
#define _GNU_SOURCE
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rdv_handle_step(struct rdv_session *S, size_t i, struct pf_rdv_msg *msg)
{
    int r = S->sc[i].rank;
    struct rdv_member *m = &S->m[r];
    long long no = -1, ok = 0;
    pf_wire_fields_int(&no, &msg->f, "step");
    pf_wire_fields_int(&ok, &msg->f, "ok");
    if (no != (long long)S->step_no && no != (long long)S->step_no + 1) {
        rdv_member_lost(S, r, "protocol error: a step out of order");
        return;
    }
    rdv_member_set(S, r, m->state, (uint32_t)no);
    m->step_ok = ok == 1;
    char err[RDV_WHY_MAX] = "";
    pf_wire_fields_str(err, sizeof(err), &msg->f, "err");
    free(m->step_err);
    m->step_err = err[0] ? pf_xstrdup(err) : NULL;
    free(m->blob);
    m->blob = NULL;
    m->bloblen = 0;
    const struct pf_wire_field *b = pf_wire_fields_get(&msg->f, "b");
    if (b && b->vlen) {
        m->blob = pf_xmalloc(b->vlen);
        memcpy(m->blob, b->val, b->vlen);
        m->bloblen = b->vlen;
    }
}

void rdv_step_res_free(struct rdv_session *S, struct pf_rdv_step_res *r)
{
    (void)S;
    if (r->blobs)
        for (int i = 0; i < r->nb; i++)
            free(r->blobs[i]);
    free(r->blobs);
    free(r->lens);
    memset(r, 0, sizeof(*r));
}

/* serve's condition of a gather: every joined rank sent step step_no. Once the roster went
 * out, every joined rank is in it (a JOIN is then too late), so the counters of the member
 * table (server.c) say it without a pass over the ranks. */
static bool step_done(struct rdv_session *S)
{
    return S->n == 0 || S->nstep == S->nlive;
}

bool rdv_flushed(struct rdv_session *S)
{
    return S->n == 0 || S->npend == 0;
}

/* The lost and failed ranks rank 0 names in a RESULT: records {rank, why}. */
static void step_record(struct rdv_session *S, const struct pf_wire_fields *f)
{
    for (size_t i = 0; i < f->n; i++) {
        bool lost = pf_wire_field_is(&f->v[i], "lost");
        if (!lost && !pf_wire_field_is(&f->v[i], "failed")) continue;
        struct pf_wire_fields x;
        if (pf_wire_fields_decode(&x, f->v[i].val, f->v[i].vlen) < 0) continue;
        long long rank = -1;
        char why[384] = "";
        if (pf_wire_fields_int(&rank, &x, "rank") == 0 && rank >= 0 && rank < (1 << 24) &&
            pf_wire_fields_str(why, sizeof(why), &x, "why") == 0)
            pf_wire_mark(lost ? &S->lost : &S->failed, (int)rank, why);
        pf_wire_fields_free(&x);
    }
}

/* The first PF_WIRE_LIST_MAX of the lost (or failed) ranks and their count: a rank needs
 * them only to name who stopped the run when no summary comes, and a list of every rank in
 * every RESULT would be O(N) bytes to each of N ranks. */
static void put_marks(struct pf_buf *b, const char *key, const char *count,
                      const struct pf_wire_marks *l)
{
    struct pf_buf r;
    pf_buf_init(&r, 4096);
    pf_wire_put_int(b, count, (long long)l->n);
    for (size_t i = 0; i < l->n && i < PF_WIRE_LIST_MAX; i++) {
        pf_buf_reset(&r);
        pf_wire_put_int(&r, "rank", l->v[i].rank);
        pf_wire_put_str(&r, "why", l->v[i].why);
        pf_wire_put(b, key, r.data, r.len);
    }
    pf_buf_free(&r);
}

/* ---- sending one frame to every rank, a window at a time */

struct rdv_fanout {
    int type;
    const void *data;
    size_t len;
    rdv_part_fn part;
    void *arg;
    int next;   /* the next roster position to queue */
    size_t per; /* bytes of the last frame queued */
    struct pf_buf b;
    struct pf_rdv_shared *sh; /* the frame, when it has no parts: one copy for every rank */
};

static struct rdv_member *member_at(struct rdv_session *S, int pos)
{
    struct rdv_member *m = &S->m[S->rk[pos]];
    return m->state == PF_RDV_JOINED && m->conn >= 0 ? m : NULL;
}

static void fan_queue(struct rdv_session *S, struct rdv_fanout *F, int pos)
{
    struct rdv_member *m = member_at(S, pos);
    if (!m) return;
    const void *p = F->data;
    size_t l = F->len;
    if (F->part) {
        pf_buf_reset(&F->b);
        if (F->len) pf_buf_add(&F->b, F->data, F->len);
        F->part(F->arg, pos, &F->b);
        p = F->b.data;
        l = F->b.len;
    }
    struct rdv_sconn *c = &S->sc[m->conn];
    if (F->sh)
        pf_rdv_conn_queue_shared(&c->c, F->type, F->sh);
    else
        pf_rdv_conn_queue(&c->c, F->type, p, l);
    F->per = l + PF_WIRE_HDR + PF_WIRE_MACLEN;
    /* in the window until its queue is written or it closes (rdv_sc_sync counts it out) */
    if (c->fan != S->fan_gen) {
        c->fan = S->fan_gen;
        S->fan_win++;
    }
    rdv_sc_write(S, (size_t)m->conn);
}

/* serve's condition: every frame queued and written. Tops the window up as frames go out. */
static bool fan_done(struct rdv_session *S)
{
    struct rdv_fanout *F = S->fan;
    while (F->next < S->n) {
        if (S->fan_win > 0 && (size_t)(S->fan_win + 1) * F->per > RDV_FANOUT_BYTES) break;
        fan_queue(S, F, F->next++);
    }
    return F->next >= S->n && S->fan_win == 0;
}

void rdv_send_all(struct rdv_session *S, int type, const void *data, size_t len, rdv_part_fn part,
                  void *arg, double deadline)
{
    struct rdv_fanout F = {.type = type, .data = data, .len = len, .part = part, .arg = arg};
    F.next = 1;
    /* a new window: connections still holding an earlier fan-out's frame are not in it */
    S->fan_gen++;
    S->fan_win = 0;
    pf_buf_init(&F.b, PF_WIRE_MAX_PAYLOAD);
    if (!part) F.sh = pf_rdv_shared_new(data, len);
    S->fan = &F;
    rdv_serve(S, deadline < S->cutoff ? deadline : S->cutoff, fan_done);
    /* past the deadline: the rest is queued all the same (written by later loops), so that
     * no rank misses a frame the others got */
    while (F.next < S->n)
        fan_queue(S, &F, F.next++);
    S->fan = NULL;
    S->fan_gen++;
    S->fan_win = 0;
    pf_rdv_shared_drop(F.sh);
    pf_buf_free(&F.b);
}

/* ---- steps */

struct scatter {
    pf_rdv_ready_fn ready;
    rdv_part_fn part;
    void *arg;
};

/* Rank 0: waits for every rank's part of step S->step_no; a rank silent past the deadline is
 * lost. */
static void root_gather(struct rdv_session *S, const char *kind, double timeout)
{
    double deadline = pf_now() + timeout;
    if (deadline > S->cutoff) deadline = S->cutoff;
    rdv_serve(S, deadline, step_done);
    for (int i = 1; i < S->n; i++) {
        struct rdv_member *m = &S->m[S->rk[i]];
        if (m->state == PF_RDV_JOINED && m->step_got != S->step_no) {
            char why[160];
            snprintf(why, sizeof(why),
                     "no answer within %.0f s during the %s step (frozen, or "
                     "its network is cut)",
                     timeout, kind);
            rdv_member_lost(S, S->rk[i], why);
        }
    }
}

/* The parts, moved out of the member table (each is freed once, by its consumer). */
static void root_take_parts(struct rdv_session *S, const void *blob, size_t len,
                            struct pf_rdv_step_res *res)
{
    res->nb = S->n;
    res->blobs = pf_xcalloc((size_t)S->n, sizeof(uint8_t *));
    res->lens = pf_xcalloc((size_t)S->n, sizeof(size_t));
    for (int i = 0; i < S->n; i++) {
        struct rdv_member *m = &S->m[S->rk[i]];
        if (i == 0) {
            if (len) {
                res->blobs[0] = pf_xmalloc(len);
                memcpy(res->blobs[0], blob, len);
            }
            res->lens[0] = len;
        } else if (m->state == PF_RDV_JOINED) {
            res->blobs[i] = m->blob;
            res->lens[i] = m->bloblen;
        } else {
            free(m->blob);
        }
        if (i > 0) {
            m->blob = NULL;
            m->bloblen = 0;
        }
    }
}

static void scatter_part(void *arg, int pos, struct pf_buf *out)
{
    const struct scatter *sc = arg;
    struct pf_buf p;
    pf_buf_init(&p, PF_WIRE_MAX_PAYLOAD);
    sc->part(sc->arg, pos, &p);
    pf_wire_put(out, "b", p.data, p.len);
    pf_buf_free(&p);
}

static int root_step(struct rdv_session *S, const char *kind, bool ok, const char *err,
                     const void *blob, size_t len, int mode, double timeout,
                     const struct scatter *sc, struct pf_rdv_step_res *res)
{
    rdv_step_next(S);
    root_gather(S, kind, timeout);
    bool go = ok;
    if (!ok) pf_wire_mark(&S->failed, 0, err && *err ? err : "failed");
    for (int i = 1; i < S->n; i++) {
        struct rdv_member *m = &S->m[S->rk[i]];
        if (m->state != PF_RDV_JOINED) {
            go = false;
            continue;
        }
        if (!m->step_ok) {
            go = false;
            pf_wire_mark(&S->failed, S->rk[i], m->step_err ? m->step_err : "failed");
        }
    }
    if (mode != PF_RDV_BARRIER || sc) root_take_parts(S, blob, len, res);
    if (sc && go && sc->ready) sc->ready(sc->arg, res->blobs, res->lens, res->nb);
    struct pf_buf b;
    pf_buf_init(&b, PF_WIRE_MAX_PAYLOAD);
    pf_wire_put_int(&b, "step", S->step_no);
    pf_wire_put_str(&b, "kind", kind);
    pf_wire_put_int(&b, "go", go);
    put_marks(&b, "lost", "nlost", &S->lost);
    put_marks(&b, "failed", "nfailed", &S->failed);
    if (mode == PF_RDV_ALLGATHER && go)
        for (int i = 0; i < S->n; i++)
            pf_wire_put(&b, "b", res->blobs[i], res->lens[i]);
    if (pf_buf_check(&b, "the RESULT message") < 0) {
        go = false;
        rdv_say(S, "%s step: %s", kind, pf_err_msg());
    }
    rdv_send_all(S, PF_WIRE_RESULT, b.data, b.len, sc && go ? scatter_part : NULL, (void *)sc,
                 rdv_wait_end(S, S->su.waits.frame));
    pf_buf_free(&b);
    res->go = go;
    if (!go) S->stopped = true;
    return go ? 0 : PF_ERR;
}

/* The parts of an ALLGATHER (every "b" field in order), or a scatter's own part. */
static void client_parts(struct rdv_session *S, const struct pf_wire_fields *f, int want,
                         struct pf_rdv_step_res *res)
{
    res->nb = want;
    res->blobs = pf_xcalloc((size_t)want, sizeof(uint8_t *));
    res->lens = pf_xcalloc((size_t)want, sizeof(size_t));
    int k = 0;
    for (size_t i = 0; i < f->n && k < want; i++) {
        if (!pf_wire_field_is(&f->v[i], "b")) continue;
        res->lens[k] = f->v[i].vlen;
        if (f->v[i].vlen) {
            res->blobs[k] = pf_xmalloc(f->v[i].vlen);
            memcpy(res->blobs[k], f->v[i].val, f->v[i].vlen);
        }
        k++;
    }
    (void)S;
    if (k != want) res->go = false;
}

static int client_step(struct rdv_session *S, const char *kind, bool ok, const char *err,
                       const void *blob, size_t len, int mode, double timeout, bool scatter,
                       struct pf_rdv_step_res *res)
{
    rdv_step_next(S);
    struct pf_buf b;
    pf_buf_init(&b, PF_WIRE_MAX_PAYLOAD);
    pf_wire_put_int(&b, "step", S->step_no);
    pf_wire_put_str(&b, "kind", kind);
    pf_wire_put_int(&b, "ok", ok);
    if (err && *err) pf_wire_put_str(&b, "err", err);
    if (len) pf_wire_put(&b, "b", blob, len);
    int r =
        pf_rdv_conn_send(&S->ctl, PF_WIRE_STEP, b.data, b.len, rdv_wait_end(S, S->su.waits.step));
    pf_buf_free(&b);
    struct pf_rdv_msg msg = {0};
    if (r == 0) {
        double d = rdv_wait_end(S, timeout + S->su.waits.step);
        r = pf_rdv_conn_recv(&S->ctl, &msg, S->auth, d);
    }
    if (r < 0 || msg.type != PF_WIRE_RESULT) {
        if (!S->root_lost) {
            S->root_lost = true;
            snprintf(S->root_why, sizeof(S->root_why), "%s",
                     r < 0 ? pf_err_msg() : "rank 0 sent an unexpected frame");
            pf_wire_mark(&S->lost, 0, S->root_why);
            rdv_say(S, "lost rank 0 during the %s step: %s", kind, S->root_why);
        }
        pf_rdv_msg_free(&msg);
        S->stopped = true;
        return PF_ERR;
    }
    long long go = 0;
    pf_wire_fields_int(&go, &msg.f, "go");
    step_record(S, &msg.f);
    res->go = go == 1;
    if (res->go && (mode == PF_RDV_ALLGATHER || scatter))
        client_parts(S, &msg.f, scatter ? 1 : S->n, res);
    pf_rdv_msg_free(&msg);
    if (!res->go) S->stopped = true;
    return res->go ? 0 : PF_ERR;
}

int rdv_step(struct rdv_session *S, const char *kind, bool ok, const char *err, const void *blob,
             size_t len, int mode, double timeout, struct pf_rdv_step_res *res)
{
    memset(res, 0, sizeof(*res));
    if (S->stopped && strcmp(kind, "report") != 0) return PF_ERR;
    if (S->rank == 0) return root_step(S, kind, ok, err, blob, len, mode, timeout, NULL, res);
    if (S->root_lost) return PF_ERR;
    return client_step(S, kind, ok, err, blob, len, mode, timeout, false, res);
}

int rdv_step_scatter(struct rdv_session *S, const char *kind, bool ok, const char *err,
                     const void *blob, size_t len, double timeout, pf_rdv_ready_fn ready,
                     rdv_part_fn part, void *arg, struct pf_rdv_step_res *res)
{
    memset(res, 0, sizeof(*res));
    if (S->stopped || S->root_lost) return PF_ERR;
    struct scatter sc = {ready, part, arg};
    if (S->rank == 0)
        return root_step(S, kind, ok, err, blob, len, PF_RDV_GATHER, timeout, &sc, res);
    return client_step(S, kind, ok, err, blob, len, PF_RDV_GATHER, timeout, true, res);
}
