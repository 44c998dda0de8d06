/* Steps: a gather or a barrier. Every rank sends its part, rank 0 answers with the parts or
 * with the decision to stop (naming who was lost or failed), so every rank takes the same
 * path. */
#define _GNU_SOURCE
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rdv_handle_step(struct rdv_stage *S, size_t i, struct pf_rdv_msg *msg)
{
    int r = S->sc[i].rank;
    struct rdv_member *m = &S->m[r];
    long long no = -1, ok = 0;
    pf_rdv_fields_int(&no, &msg->f, "step");
    pf_rdv_fields_int(&ok, &msg->f, "ok");
    if (no != (long long)S->step_no && no != (long long)S->step_no + 1) {
        rdv_member_lost(S, r, "protocol error: a step out of order");
        return;
    }
    m->step_got = (uint32_t)no;
    m->step_ok = ok == 1;
    pf_rdv_fields_str(m->step_err, sizeof(m->step_err), &msg->f, "err");
    free(m->blob);
    m->blob = NULL;
    m->bloblen = 0;
    const struct pf_rdv_field *b = pf_rdv_fields_get(&msg->f, "b");
    if (b && b->vlen) {
        m->blob = pf_xmalloc(b->vlen);
        memcpy(m->blob, b->val, b->vlen);
        m->bloblen = b->vlen;
    }
}

void rdv_step_res_free(struct rdv_stage *S, struct rdv_step_res *r)
{
    if (r->blobs)
        for (int i = 0; i < S->n; i++)
            free(r->blobs[i]);
    free(r->blobs);
    free(r->lens);
    memset(r, 0, sizeof(*r));
}

static bool step_done(struct rdv_stage *S)
{
    for (int i = 1; i < S->n; i++) {
        struct rdv_member *m = &S->m[S->rk[i]];
        if (m->state == M_JOINED && m->step_got != S->step_no) return false;
    }
    return true;
}

bool rdv_flushed(struct rdv_stage *S)
{
    for (int i = 1; i < S->n; i++) {
        struct rdv_member *m = &S->m[S->rk[i]];
        if (m->state == M_JOINED && m->conn >= 0 && pf_rdv_conn_pending(&S->sc[m->conn].c))
            return false;
    }
    return true;
}

/* The lost and failed ranks rank 0 names in a RESULT: records {rank, why}. */
static void step_record(struct rdv_stage *S, const struct pf_rdv_fields *f)
{
    for (size_t i = 0; i < f->n; i++) {
        bool lost = pf_rdv_field_is(&f->v[i], "lost");
        if (!lost && !pf_rdv_field_is(&f->v[i], "failed")) continue;
        struct pf_rdv_fields x;
        if (pf_rdv_fields_decode(&x, f->v[i].val, f->v[i].vlen) < 0) continue;
        long long rank = -1;
        char why[384] = "";
        if (pf_rdv_fields_int(&rank, &x, "rank") == 0 && rank >= 0 && rank < (1 << 24) &&
            pf_rdv_fields_str(why, sizeof(why), &x, "why") == 0)
            pf_fleet_mark(lost ? &S->lost : &S->failed, (int)rank, why);
        pf_rdv_fields_free(&x);
    }
}

static void put_marks(struct pf_buf *b, const char *key, const struct pf_fleet_marks *l)
{
    struct pf_buf r;
    pf_buf_init(&r, 4096);
    for (size_t i = 0; i < l->n; i++) {
        pf_buf_reset(&r);
        pf_rdv_put_int(&r, "rank", l->v[i].rank);
        pf_rdv_put_str(&r, "why", l->v[i].why);
        pf_rdv_put(b, key, r.data, r.len);
    }
    pf_buf_free(&r);
}

static int root_step(struct rdv_stage *S, const char *kind, bool ok, const char *err,
                     const void *blob, size_t len, int mode, double timeout,
                     struct rdv_step_res *res)
{
    S->step_no++;
    double deadline = pf_now() + timeout;
    if (deadline > S->cutoff) deadline = S->cutoff;
    rdv_serve(S, deadline, step_done);
    for (int i = 1; i < S->n; i++) {
        struct rdv_member *m = &S->m[S->rk[i]];
        if (m->state == M_JOINED && m->step_got != S->step_no) {
            char why[160];
            snprintf(why, sizeof(why),
                     "no answer within %.0f s during the %s step (frozen, or "
                     "its network is cut)",
                     timeout, kind);
            rdv_member_lost(S, S->rk[i], why);
        }
    }
    struct pf_buf b;
    pf_buf_init(&b, PF_RDV_MAX_PAYLOAD);
    bool go = ok;
    if (!ok) pf_fleet_mark(&S->failed, 0, err && *err ? err : "failed");
    for (int i = 1; i < S->n; i++) {
        struct rdv_member *m = &S->m[S->rk[i]];
        if (m->state != M_JOINED) {
            go = false;
            continue;
        }
        if (!m->step_ok) {
            go = false;
            pf_fleet_mark(&S->failed, S->rk[i], m->step_err[0] ? m->step_err : "failed");
        }
    }
    pf_rdv_put_int(&b, "step", S->step_no);
    pf_rdv_put_str(&b, "kind", kind);
    pf_rdv_put_int(&b, "go", go);
    put_marks(&b, "lost", &S->lost);
    put_marks(&b, "failed", &S->failed);
    if (mode != STEP_BARRIER) {
        res->blobs = pf_xcalloc((size_t)S->n, sizeof(uint8_t *));
        res->lens = pf_xcalloc((size_t)S->n, sizeof(size_t));
        for (int i = 0; i < S->n; i++) {
            struct rdv_member *m = &S->m[S->rk[i]];
            const void *p = i == 0 ? blob : m->blob;
            size_t l = i == 0 ? len : m->bloblen;
            if (i > 0 && m->state != M_JOINED) l = 0;
            if (l) {
                res->blobs[i] = pf_xmalloc(l);
                memcpy(res->blobs[i], p, l);
            }
            res->lens[i] = l;
            if (mode == STEP_ALLGATHER && go) pf_rdv_put(&b, "b", p, l);
        }
    }
    for (int i = 1; i < S->n; i++) {
        struct rdv_member *m = &S->m[S->rk[i]];
        if (m->state == M_JOINED && m->conn >= 0)
            pf_rdv_conn_queue(&S->sc[m->conn].c, PF_RDV_RESULT, b.data, b.len);
    }
    pf_buf_free(&b);
    double fl = pf_now() + 10;
    rdv_serve(S, fl < S->cutoff ? fl : S->cutoff, rdv_flushed);
    res->go = go;
    if (!go) S->stopped = true;
    return go ? 0 : PF_ERR;
}

static int client_step(struct rdv_stage *S, const char *kind, bool ok, const char *err,
                       const void *blob, size_t len, int mode, double timeout,
                       struct rdv_step_res *res)
{
    S->step_no++;
    struct pf_buf b;
    pf_buf_init(&b, PF_RDV_MAX_PAYLOAD);
    pf_rdv_put_int(&b, "step", S->step_no);
    pf_rdv_put_str(&b, "kind", kind);
    pf_rdv_put_int(&b, "ok", ok);
    if (err && *err) pf_rdv_put_str(&b, "err", err);
    if (len) pf_rdv_put(&b, "b", blob, len);
    double d = pf_now() + 15;
    int r = pf_rdv_conn_send(&S->ctl, PF_RDV_STEP, b.data, b.len, d < S->cutoff ? d : S->cutoff);
    pf_buf_free(&b);
    struct pf_rdv_msg msg = {0};
    if (r == 0) {
        d = pf_now() + timeout + 15;
        r = pf_rdv_conn_recv(&S->ctl, &msg, S->auth, d < S->cutoff ? d : S->cutoff);
    }
    if (r < 0 || msg.type != PF_RDV_RESULT) {
        if (!S->root_lost) {
            S->root_lost = true;
            snprintf(S->root_why, sizeof(S->root_why), "%s",
                     r < 0 ? pf_err_msg() : "rank 0 sent an unexpected frame");
            pf_fleet_mark(&S->lost, 0, S->root_why);
            pf_ctx_progress(S->ctx, "lost rank 0 during the %s step: %s", kind, S->root_why);
        }
        pf_rdv_msg_free(&msg);
        S->stopped = true;
        return PF_ERR;
    }
    long long go = 0;
    pf_rdv_fields_int(&go, &msg.f, "go");
    step_record(S, &msg.f);
    res->go = go == 1;
    if (mode == STEP_ALLGATHER && res->go) {
        res->blobs = pf_xcalloc((size_t)S->n, sizeof(uint8_t *));
        res->lens = pf_xcalloc((size_t)S->n, sizeof(size_t));
        int k = 0;
        for (size_t i = 0; i < msg.f.n && k < S->n; i++) {
            if (!pf_rdv_field_is(&msg.f.v[i], "b")) continue;
            res->lens[k] = msg.f.v[i].vlen;
            if (msg.f.v[i].vlen) {
                res->blobs[k] = pf_xmalloc(msg.f.v[i].vlen);
                memcpy(res->blobs[k], msg.f.v[i].val, msg.f.v[i].vlen);
            }
            k++;
        }
        if (k != S->n) res->go = false;
    }
    pf_rdv_msg_free(&msg);
    if (!res->go) S->stopped = true;
    return res->go ? 0 : PF_ERR;
}

int rdv_step(struct rdv_stage *S, const char *kind, bool ok, const char *err, const void *blob,
             size_t len, int mode, double timeout, struct rdv_step_res *res)
{
    memset(res, 0, sizeof(*res));
    if (S->stopped && strcmp(kind, "report") != 0) return PF_ERR;
    if (S->rank == 0) return root_step(S, kind, ok, err, blob, len, mode, timeout, res);
    if (S->root_lost) return PF_ERR;
    return client_step(S, kind, ok, err, blob, len, mode, timeout, res);
}
