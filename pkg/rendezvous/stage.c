/* The run among pods: join rank 0, agree, build the data mesh, run the TCP all-reduce and
 * the link probes, call the GPU stage, gather every rank's results at rank 0 and send the
 * fleet-wide summary back, so that every pod's verdict tells the same story.
 *
 * Rank 0 serves every connection from one poll loop (never one peer at a time); the other
 * ranks hold one control connection to rank 0 and wait on it under deadlines. A gather or a
 * barrier is a "step": every rank sends its part, rank 0 answers with the parts or with the
 * decision to stop (naming who was lost), so every rank takes the same path. */
#define _GNU_SOURCE
#include "rendezvous.h"

#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <poll.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../collective/collective.h"
#include "../fleet/fleet.h"
#include "../nccl/nccl.h"
#include "../netif/netif.h"

#define NAME_MAX_ 128
#define JOIN_WAIT 10.0 /* a new connection must send its JOIN within this */
#define CHUNK_BYTES (512u << 10)
#define ALLGATHER_MAX (64u << 10)
#define PROBE_RUNS 3 /* runs of each link probe; the fastest counts */
#define LIST_MAX 12  /* ranks named in one message before "and N more" */

enum { M_EMPTY = 0, M_JOINED, M_REFUSED, M_LOST };
enum { STEP_BARRIER = 0, STEP_GATHER, STEP_ALLGATHER };

struct member {
    int state;
    int conn; /* server connection index, -1 for none (and for rank 0 itself) */
    char pod[NAME_MAX_], node[NAME_MAX_], addr[64], data_ip[64];
    int data_port;
    long long world_claimed;
    char version[48], digest[96], nccl_version[64];
    struct pf_strlist env; /* "NAME=VALUE" */
    char why[384];         /* refused or lost: why */
    /* the step in progress */
    uint32_t step_got;
    bool step_ok;
    char step_err[320];
    uint8_t *blob;
    size_t bloblen;
};

struct sconn {
    struct pf_rdv_conn c;
    bool used;
    int rank; /* -1 until it joined */
    double deadline;
    bool closing;
    double close_by;
};

struct stage {
    struct pf_ctx *ctx;
    const struct pf_config *cfg;
    struct pf_rdv_ident id;
    const char *token;
    bool auth;
    int rank, world;
    double t0, cutoff, join_deadline;
    char pod[NAME_MAX_], node[NAME_MAX_];
    char my_ip[64], iface[64], bind_ip[64];
    int data_lfd, data_port;
    /* the roster: who is in the run, in rank order */
    int n, pos;
    int roster_world; /* rank 0's world size: every rank decides by it, not by its own claim */
    int *rk;
    char (*ip)[64];
    int *dport;
    char (*pods)[NAME_MAX_];
    char (*nodes)[NAME_MAX_];
    uint8_t run_id[PF_RDV_NONCE];
    /* rank > 0: the control connection */
    struct pf_rdv_conn ctl;
    bool have_ctl;
    char root_ip[64];
    bool root_lost;
    char root_why[384];
    bool summary_seen;
    /* rank 0 */
    int lfd;
    struct sconn *sc;
    size_t nsc;
    struct member *m;
    int dropped;
    char dropped_last[256];
    double last_join, roster_at;
    int last_waiting;
    double last_progress;
    struct pf_fleet F; /* what the ranks claimed and reported; the judgement */
    bool have_fleet;
    struct pf_buf sum; /* the SUMMARY payload */
    struct pf_coll_link *links;
    size_t nlinks;
    /* the flow */
    uint32_t step_no;
    bool stopped;
    struct pf_fleet_marks lost, failed;
    /* data mesh */
    int nshifts, shifts[3], out_fd[3], in_fd[3];
    /* this rank's results */
    bool ar_ran, ar_ok;
    double ar_seconds;
    size_t ar_wrong, ar_first_bad;
    char ar_err[640];
    long long bytes;
    int iters;
    struct pf_coll_link *mylinks;
    size_t nmylinks;
};

/* ---- small helpers */

static double left_s(const struct stage *S)
{
    return S->cutoff - pf_now();
}

static const char *pod_of(const struct stage *S, int rank, char *buf, size_t n)
{
    if (S->m && rank >= 0 && rank < S->world && S->m[rank].pod[0]) return S->m[rank].pod;
    for (int i = 0; i < S->n; i++)
        if (S->rk[i] == rank && S->pods[i][0]) return S->pods[i];
    pf_rdv_pod_name(buf, n, &S->id, rank);
    return buf;
}

static const char *node_of(const struct stage *S, int rank)
{
    if (S->m && rank >= 0 && rank < S->world && S->m[rank].node[0]) return S->m[rank].node;
    for (int i = 0; i < S->n; i++)
        if (S->rk[i] == rank) return S->nodes[i];
    return "";
}

/* "rank 5 (trainer-5)" */
static void who(char *out, size_t n, const struct stage *S, int rank)
{
    char b[NAME_MAX_];
    const char *p = pod_of(S, rank, b, sizeof(b));
    if (p && *p)
        snprintf(out, n, "rank %d (%s)", rank, p);
    else
        snprintf(out, n, "rank %d", rank);
}

static int ring_rank(const struct stage *S, int shift)
{
    return S->rk[((S->pos + shift) % S->n + S->n) % S->n];
}

static int policy_cb(void *arg, const char *check_id, const char *code, enum pf_status st)
{
    (void)check_id;
    int s = pf_config_policy(arg, code, (int)st);
    return s == PF_POLICY_IGNORE ? -1 : s;
}

static struct pf_check *chk(struct stage *S, const char *id)
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

static void add_finding_text(struct stage *S, const char *check, const char *code,
                             enum pf_status st, const char *remedy, const char *msg)
{
    struct pf_check *c = chk(S, check);
    if (has_same_finding(c, code, msg)) return;
    pf_check_add_finding(c, code, st, remedy && *remedy ? remedy : NULL, "%s", msg);
}

/* A finding every rank's verdict carries: rank 0 adds it and sends it in the summary. */
static void fleet_finding(struct stage *S, const char *check, const char *code, enum pf_status st,
                          const char *remedy, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static void fleet_finding(struct stage *S, const char *check, const char *code, enum pf_status st,
                          const char *remedy, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (has_same_finding(chk(S, check), code, msg)) return;
    add_finding_text(S, check, code, st, remedy, msg);
    if (S->have_fleet) pf_fleet_finding(&S->F.out, check, code, st, remedy, "%s", msg);
}

/* Appends "5, 11, 12": at most PF_FLEET_LIST_MAX, then "and K more". */
static void list_numbers(struct pf_buf *b, const int *ranks, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        if (i == PF_FLEET_LIST_MAX) {
            pf_buf_addf(b, " and %zu more", n - i);
            break;
        }
        pf_buf_addf(b, "%s%d", i ? ", " : "", ranks[i]);
    }
}

static void guard(struct stage *S, const char *stage_id, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void guard(struct stage *S, const char *stage_id, const char *fmt, ...)
{
    char doing[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(doing, sizeof(doing), fmt, ap);
    va_end(ap);
    pf_verdict_guard_update(S->ctx->verdict, stage_id, doing);
}

/* ---- rank 0: connections */

static void sc_close(struct stage *S, size_t i)
{
    struct sconn *c = &S->sc[i];
    if (!c->used) return;
    pf_rdv_conn_close(&c->c);
    c->used = false;
    if (c->rank > 0 && c->rank < S->world && S->m[c->rank].conn == (int)i) S->m[c->rank].conn = -1;
}

static void member_lost(struct stage *S, int rank, const char *why)
{
    struct member *m = &S->m[rank];
    if (m->state != M_JOINED) return;
    m->state = M_LOST;
    pf_strcpy(m->why, sizeof(m->why), why);
    pf_fleet_mark(&S->lost, rank, why);
    if (m->conn >= 0) sc_close(S, (size_t)m->conn);
    m->conn = -1;
    char w[160];
    who(w, sizeof(w), S, rank);
    pf_ctx_progress(S->ctx, "lost %s: %s", w, why);
}

static void sc_reject(struct stage *S, size_t i, const char *code, const char *msg)
{
    struct pf_buf b;
    pf_buf_init(&b, 1 << 16);
    pf_rdv_put_str(&b, "code", code);
    pf_rdv_put_str(&b, "message", msg);
    pf_rdv_conn_queue(&S->sc[i].c, PF_RDV_REJECT, b.data, b.len);
    pf_buf_free(&b);
    S->sc[i].closing = true;
    S->sc[i].close_by = pf_now() + 2.0;
    S->sc[i].rank = -1;
}

/* A connection that is not (or no longer) a member: garbage, a scanner, a slow client. */
static void sc_drop(struct stage *S, size_t i, const char *why)
{
    S->dropped++;
    snprintf(S->dropped_last, sizeof(S->dropped_last), "%s: %s", S->sc[i].c.peer, why);
    pf_ctx_progress(S->ctx, "dropped a connection from %s: %s", S->sc[i].c.peer, why);
    sc_close(S, i);
}

static void handle_join(struct stage *S, size_t i, struct pf_rdv_msg *msg)
{
    struct sconn *c = &S->sc[i];
    long long r = -1, world = -1;
    char pod[NAME_MAX_] = "", addr[64];
    pf_rdv_sockaddr_ip(addr, sizeof(addr), c->c.fd, true);
    if (pf_rdv_fields_int(&r, &msg->f, "rank") < 0 ||
        pf_rdv_fields_int(&world, &msg->f, "world") < 0) {
        sc_drop(S, i, "malformed JOIN");
        return;
    }
    pf_rdv_fields_str(pod, sizeof(pod), &msg->f, "pod");
    char claim[256];
    snprintf(claim, sizeof(claim), "a pod at %s claiming rank %lld%s%s%s", addr, r,
             pod[0] ? " (" : "", pod, pod[0] ? ")" : "");
    bool in_range = r > 0 && r < S->world;

    if (S->auth && !msg->mac_ok) {
        fleet_finding(S, "rendezvous", "auth-failed", PF_FAIL, NULL, "%s was refused: %s", claim,
                      msg->had_mac ? "its PREFLIGHT_TOKEN differs from rank 0's"
                                   : "it has no PREFLIGHT_TOKEN, rank 0 has one");
        if (in_range && S->m[r].state == M_EMPTY) {
            S->m[r].state = M_REFUSED;
            pf_strcpy(S->m[r].pod, sizeof(S->m[r].pod), pod);
            pf_strcpy(S->m[r].addr, sizeof(S->m[r].addr), addr);
            snprintf(S->m[r].why, sizeof(S->m[r].why),
                     "refused at the rendezvous: its PREFLIGHT_TOKEN does not match (from %s)",
                     addr);
        }
        sc_reject(S, i, "auth-failed",
                  msg->had_mac ? "rank 0 refused this pod: its PREFLIGHT_TOKEN differs"
                               : "rank 0 refused this pod: rank 0 requires PREFLIGHT_TOKEN");
        return;
    }
    if (!S->auth && msg->had_mac) {
        fleet_finding(S, "rendezvous", "auth-failed", PF_FAIL, NULL,
                      "%s sets PREFLIGHT_TOKEN, rank 0 has none: set the same token in every pod",
                      claim);
        if (in_range && S->m[r].state == M_EMPTY) {
            S->m[r].state = M_REFUSED;
            pf_strcpy(S->m[r].pod, sizeof(S->m[r].pod), pod);
            snprintf(S->m[r].why, sizeof(S->m[r].why),
                     "refused at the rendezvous: it has a PREFLIGHT_TOKEN, rank 0 has none");
        }
        sc_reject(S, i, "auth-failed", "rank 0 has no PREFLIGHT_TOKEN; this pod has one");
        return;
    }
    if (S->n > 0) {
        sc_reject(S, i, "missing-ranks",
                  "too late: rank 0 started the run without this rank (it was declared missing)");
        return;
    }
    if (r == 0) {
        fleet_finding(S, "rendezvous", "duplicate-rank", PF_FAIL, NULL, "%s, but rank 0 is %s",
                      claim, S->pod);
        sc_reject(S, i, "duplicate-rank", "rank 0 is another pod");
        return;
    }
    if (!in_range) {
        fleet_finding(S, "rendezvous", "world-size-mismatch", PF_FAIL, NULL,
                      "%s of world size %lld: outside rank 0's world size %d", claim, world,
                      S->world);
        sc_reject(S, i, "world-size-mismatch", "this rank is outside rank 0's world size");
        return;
    }
    struct member *m = &S->m[r];
    if (m->state == M_JOINED) {
        if (strcmp(m->pod, pod) == 0) {
            /* the same pod again: its initContainer restarted; the new connection wins */
            pf_ctx_progress(S->ctx,
                            "rank %lld (%s) rejoined from %s; its previous connection is "
                            "replaced",
                            r, pod, addr);
            if (m->conn >= 0 && (size_t)m->conn != i) sc_close(S, (size_t)m->conn);
        } else {
            fleet_finding(S, "rendezvous", "duplicate-rank", PF_FAIL, NULL,
                          "rank %lld is claimed by two pods: %s (joined from %s) and %s (from %s)",
                          r, m->pod, m->addr, pod, addr);
            sc_reject(S, i, "duplicate-rank", "another pod already holds this rank");
            return;
        }
    }
    memset(m->why, 0, sizeof(m->why));
    pf_strlist_free(&m->env);
    m->state = M_JOINED;
    m->conn = (int)i;
    pf_strcpy(m->pod, sizeof(m->pod), pod);
    pf_rdv_fields_str(m->node, sizeof(m->node), &msg->f, "node");
    pf_strcpy(m->addr, sizeof(m->addr), addr);
    pf_rdv_fields_str(m->data_ip, sizeof(m->data_ip), &msg->f, "dataIp");
    long long dp = 0;
    pf_rdv_fields_int(&dp, &msg->f, "dataPort");
    m->data_port = (int)dp;
    m->world_claimed = world;
    pf_rdv_fields_str(m->version, sizeof(m->version), &msg->f, "version");
    pf_rdv_fields_str(m->digest, sizeof(m->digest), &msg->f, "digest");
    pf_rdv_fields_str(m->nccl_version, sizeof(m->nccl_version), &msg->f, "ncclVersion");
    for (size_t k = 0; k < msg->f.n; k++) {
        if (!pf_rdv_field_is(&msg->f.v[k], "env")) continue;
        char *e = pf_rdv_field_dup(&msg->f.v[k]);
        if (e && m->env.n < 512) pf_strlist_add(&m->env, e);
        free(e);
    }
    c->rank = (int)r;
    c->deadline = 0;
    c->c.max_payload = PF_RDV_MAX_PAYLOAD;
    S->last_join = pf_now();
    int joined = 1;
    for (int k = 1; k < S->world; k++)
        joined += S->m[k].state == M_JOINED;
    pf_ctx_progress(S->ctx, "rank %lld (%s) joined from %s (%d of %d)", r, pod[0] ? pod : "?", addr,
                    joined, S->world);
}

static void handle_step(struct stage *S, size_t i, struct pf_rdv_msg *msg)
{
    int r = S->sc[i].rank;
    struct member *m = &S->m[r];
    long long no = -1, ok = 0;
    pf_rdv_fields_int(&no, &msg->f, "step");
    pf_rdv_fields_int(&ok, &msg->f, "ok");
    if (no != (long long)S->step_no && no != (long long)S->step_no + 1) {
        member_lost(S, r, "protocol error: a step out of order");
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

static void dispatch(struct stage *S, size_t i, struct pf_rdv_msg *msg)
{
    struct sconn *c = &S->sc[i];
    if (c->rank < 0) {
        if (msg->type == PF_RDV_JOIN)
            handle_join(S, i, msg);
        else
            sc_drop(S, i, "expected JOIN");
        return;
    }
    if (msg->type == PF_RDV_STEP)
        handle_step(S, i, msg);
    else
        member_lost(S, c->rank, "protocol error: unexpected frame");
}

static void sc_failed(struct stage *S, size_t i, bool eof, const char *err)
{
    struct sconn *c = &S->sc[i];
    int r = c->rank;
    if (c->closing || r < 0) {
        if (!c->closing && r < 0)
            sc_drop(S, i, eof ? "closed before joining" : err);
        else
            sc_close(S, i);
        return;
    }
    if (S->n == 0) {
        /* before the run: the slot is free again (a restarting pod comes back) */
        pf_ctx_progress(S->ctx,
                        "rank %d (%s) left before the run started (%s); waiting for it "
                        "to come back",
                        r, S->m[r].pod, eof ? "connection closed" : err);
        S->m[r].state = M_EMPTY;
        sc_close(S, i);
        S->m[r].conn = -1;
        return;
    }
    member_lost(S, r,
                eof ? "its connection closed: the process exited or the pod was deleted" : err);
}

static void accept_all(struct stage *S)
{
    for (int k = 0; k < 256; k++) {
        int fd = accept4(S->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) return;
        size_t i;
        for (i = 0; i < S->nsc; i++)
            if (!S->sc[i].used) break;
        if (i == S->nsc) {
            S->sc = pf_xrealloc(S->sc, (S->nsc + 1) * sizeof(*S->sc));
            S->nsc++;
        }
        struct sconn *c = &S->sc[i];
        memset(c, 0, sizeof(*c));
        char peer[96];
        pf_rdv_sockname(peer, sizeof(peer), fd, true);
        pf_rdv_conn_init(&c->c, fd, peer, false);
        c->c.max_payload = PF_RDV_MAX_JOIN;
        c->used = true;
        c->rank = -1;
        c->deadline = pf_now() + JOIN_WAIT;
        if (!S->my_ip[0]) pf_rdv_sockaddr_ip(S->my_ip, sizeof(S->my_ip), fd, false);
        c->c.auth.on = S->auth;
        c->c.auth.token = S->token;
        pf_rdv_random(c->c.auth.nonce_s, PF_RDV_NONCE);
        struct pf_buf b;
        pf_buf_init(&b, 4096);
        pf_rdv_put(&b, "nonce", c->c.auth.nonce_s, PF_RDV_NONCE);
        pf_rdv_put_int(&b, "proto", PF_RDV_PROTO);
        pf_rdv_put_str(&b, "version", PF_VERSION);
        pf_rdv_put_str(&b, "auth", S->auth ? "hmac-sha256" : "none");
        pf_rdv_put_int(&b, "world", S->world);
        /* HELLO goes out bare: the joiner has no nonce of its own in it yet */
        bool on = c->c.auth.on;
        c->c.auth.on = false;
        pf_rdv_conn_queue(&c->c, PF_RDV_HELLO, b.data, b.len);
        c->c.auth.on = on;
        pf_buf_free(&b);
        pf_rdv_conn_flush_some(&c->c);
    }
}

/* The event loop of rank 0. Returns when done(S) says so or at the deadline. */
static bool serve(struct stage *S, double deadline, bool (*done)(struct stage *))
{
    struct pollfd *pf = NULL;
    size_t *idx = NULL;
    bool fin = false;
    for (;;) {
        double now = pf_now();
        for (size_t i = 0; i < S->nsc; i++) {
            struct sconn *c = &S->sc[i];
            if (!c->used) continue;
            if (c->closing && (!pf_rdv_conn_pending(&c->c) || now > c->close_by))
                sc_close(S, i);
            else if (c->rank < 0 && !c->closing && c->deadline && now > c->deadline)
                sc_drop(S, i, "no JOIN within 10 s (slow or not a preflight client)");
        }
        if (done && done(S)) {
            fin = true;
            break;
        }
        if (now >= deadline) break;
        pf = pf_xrealloc(pf, (S->nsc + 1) * sizeof(*pf));
        idx = pf_xrealloc(idx, (S->nsc + 1) * sizeof(*idx));
        size_t np = 0;
        pf[np++] = (struct pollfd){S->lfd, POLLIN, 0};
        for (size_t i = 0; i < S->nsc; i++) {
            struct sconn *c = &S->sc[i];
            if (!c->used) continue;
            short ev = c->closing ? 0 : POLLIN;
            if (pf_rdv_conn_pending(&c->c)) ev |= POLLOUT;
            idx[np] = i;
            pf[np++] = (struct pollfd){c->c.fd, ev, 0};
        }
        double wait = deadline - now;
        if (wait > 0.25) wait = 0.25;
        int pr = poll(pf, np, (int)(wait * 1000) + 1);
        if (pr < 0 && errno != EINTR) break;
        if (pr <= 0) continue;
        if (pf[0].revents & POLLIN) accept_all(S);
        for (size_t k = 1; k < np; k++) {
            size_t i = idx[k];
            struct sconn *c = &S->sc[i];
            if (!c->used || !pf[k].revents) continue;
            if (pf[k].revents & POLLOUT) {
                if (pf_rdv_conn_flush_some(&c->c) < 0) {
                    sc_failed(S, i, false, pf_err_msg());
                    continue;
                }
            }
            if (!(pf[k].revents & (POLLIN | POLLHUP | POLLERR)) || c->closing) continue;
            int r = pf_rdv_conn_fill(&c->c);
            if (r == PF_ETIMEOUT) continue;
            bool eof = r == 0;
            char err[320] = "";
            if (r < 0) snprintf(err, sizeof(err), "%s", pf_err_msg());
            /* frames that arrived before the end still count */
            for (;;) {
                struct pf_rdv_msg msg;
                int n = pf_rdv_conn_next(&c->c, &msg, S->auth && c->rank >= 0);
                if (n == 0) break;
                if (n < 0) {
                    char why[320];
                    snprintf(why, sizeof(why), "%s", pf_err_msg());
                    if (c->rank < 0) {
                        if (strstr(why, "protocol version"))
                            fleet_finding(S, "rendezvous", "version-mismatch", PF_FAIL, NULL,
                                          "a pod at %s speaks another preflight protocol: %s",
                                          c->c.peer, why);
                        sc_drop(S, i, why);
                    } else {
                        member_lost(S, c->rank, why);
                    }
                    eof = false;
                    err[0] = '\0';
                    break;
                }
                dispatch(S, i, &msg);
                pf_rdv_msg_free(&msg);
                if (!c->used || c->closing) break;
            }
            if (c->used && !c->closing && (eof || err[0])) sc_failed(S, i, eof, err);
        }
    }
    free(pf);
    free(idx);
    return fin;
}

/* ---- rank 0: the join phase */

static int waiting_list(const struct stage *S, int *out)
{
    int k = 0;
    for (int r = 1; r < S->world; r++)
        if (S->m[r].state == M_EMPTY) out[k++] = r;
    return k;
}

static bool join_done(struct stage *S)
{
    int *w = pf_xmalloc((size_t)S->world * sizeof(int));
    int nw = waiting_list(S, w);
    double now = pf_now();
    if (nw && (nw != S->last_waiting || now - S->last_progress > 5)) {
        struct pf_buf b;
        pf_buf_init(&b, 1 << 14);
        list_numbers(&b, w, (size_t)nw);
        /* the guard first: a verdict written on a signal right after the line is seen must
         * already say what was under way */
        guard(S, "rendezvous", "waiting for %d of %d ranks: %s", nw, S->world, pf_buf_str(&b));
        pf_ctx_progress(S->ctx, "waiting for %d of %d ranks: %s", nw, S->world, pf_buf_str(&b));
        pf_buf_free(&b);
        S->last_progress = now;
    }
    S->last_waiting = nw;
    free(w);
    return nw == 0;
}

/* Copies what rank 0 knows of every rank into the fleet (idempotent). */
static void sync_fleet(struct stage *S)
{
    for (int r = 0; r < S->world; r++) {
        const struct member *m = &S->m[r];
        struct pf_fleet_rank *f = &S->F.r[r];
        char b[NAME_MAX_];
        f->state = (enum pf_fleet_state)m->state;
        pf_strcpy(f->pod, sizeof(f->pod), pod_of(S, r, b, sizeof(b)));
        pf_strcpy(f->node, sizeof(f->node), node_of(S, r));
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
static void apply_fleet(struct stage *S, const struct pf_fleet_summary *s, bool only_fleet_checks)
{
    for (size_t i = 0; i < s->nfindings; i++) {
        const struct pf_fleet_finding *x = &s->findings[i];
        if (only_fleet_checks && strcmp(x->check, "rendezvous") != 0 &&
            strcmp(x->check, "collective.tcp") != 0)
            continue;
        add_finding_text(S, x->check, x->code, x->status, x->remedy, x->message);
    }
    for (size_t i = 0; i < s->nculprits; i++)
        pf_verdict_add_culprit(S->ctx->verdict, s->culprits[i].rank, s->culprits[i].pod,
                               s->culprits[i].node, "%s", s->culprits[i].reason);
}

static void agreement(struct stage *S)
{
    sync_fleet(S);
    pf_fleet_agree(&S->F, pf_now() - S->t0);
    apply_fleet(S, &S->F.out, false);
}

/* ---- the roster */

static void roster_alloc(struct stage *S, int n)
{
    S->n = n;
    S->rk = pf_xcalloc((size_t)n, sizeof(int));
    S->ip = pf_xcalloc((size_t)n, sizeof(*S->ip));
    S->dport = pf_xcalloc((size_t)n, sizeof(int));
    S->pods = pf_xcalloc((size_t)n, sizeof(*S->pods));
    S->nodes = pf_xcalloc((size_t)n, sizeof(*S->nodes));
}

static void roster_free(struct stage *S)
{
    free(S->rk);
    free(S->ip);
    free(S->dport);
    free(S->pods);
    free(S->nodes);
}

static void root_send_roster(struct stage *S)
{
    int n = 0;
    for (int r = 0; r < S->world; r++)
        n += r == 0 || S->m[r].state == M_JOINED;
    roster_alloc(S, n);
    S->roster_world = S->world;
    pf_rdv_random(S->run_id, sizeof(S->run_id));
    struct pf_buf b;
    pf_buf_init(&b, PF_RDV_MAX_PAYLOAD);
    pf_rdv_put(&b, "run", S->run_id, sizeof(S->run_id));
    pf_rdv_put_int(&b, "n", n);
    pf_rdv_put_int(&b, "world", S->world);
    int k = 0;
    for (int r = 0; r < S->world; r++) {
        struct member *m = &S->m[r];
        if (!(r == 0 || m->state == M_JOINED)) continue;
        S->rk[k] = r;
        pf_strcpy(S->ip[k], sizeof(S->ip[k]), r == 0 ? "" : (m->data_ip[0] ? m->data_ip : m->addr));
        S->dport[k] = r == 0 ? S->data_port : m->data_port;
        pf_strcpy(S->pods[k], sizeof(S->pods[k]), m->pod);
        pf_strcpy(S->nodes[k], sizeof(S->nodes[k]), m->node);
        char *e = pf_xasprintf("%d\t%s\t%d\t%s\t%s", r, S->ip[k], S->dport[k], m->pod, m->node);
        pf_rdv_put_str(&b, "m", e);
        free(e);
        k++;
    }
    S->pos = 0;
    for (int r = 1; r < S->world; r++)
        if (S->m[r].state == M_JOINED && S->m[r].conn >= 0)
            pf_rdv_conn_queue(&S->sc[S->m[r].conn].c, PF_RDV_ROSTER, b.data, b.len);
    pf_buf_free(&b);
}

static int client_parse_roster(struct stage *S, const struct pf_rdv_msg *msg)
{
    long long n = 0, world = 0;
    const struct pf_rdv_field *run = pf_rdv_fields_get(&msg->f, "run");
    /* rank 0's world size may differ from this pod's claim (world-size-mismatch): the roster
     * follows rank 0's */
    if (pf_rdv_fields_int(&world, &msg->f, "world") < 0 || world < 1 || world > (1 << 20) ||
        pf_rdv_fields_int(&n, &msg->f, "n") < 0 || n < 1 || n > world || !run ||
        run->vlen != PF_RDV_NONCE)
        return pf_err_set(PF_EINVAL, "malformed roster from rank 0");
    S->roster_world = (int)world;
    memcpy(S->run_id, run->val, PF_RDV_NONCE);
    roster_alloc(S, (int)n);
    int k = 0;
    S->pos = -1;
    for (size_t i = 0; i < msg->f.n && k < n; i++) {
        if (!pf_rdv_field_is(&msg->f.v[i], "m")) continue;
        char *e = pf_rdv_field_dup(&msg->f.v[i]);
        if (!e) continue;
        /* fields may be empty: split by hand */
        char *parts[5] = {0};
        char *p = e;
        for (int j = 0; j < 5 && p; j++) {
            parts[j] = p;
            char *tab = strchr(p, '\t');
            if (tab) *tab = '\0';
            p = tab ? tab + 1 : NULL;
        }
        if (parts[0] && parts[1] && parts[2]) {
            S->rk[k] = atoi(parts[0]);
            pf_strcpy(S->ip[k], sizeof(S->ip[k]), parts[1][0] ? parts[1] : S->root_ip);
            S->dport[k] = atoi(parts[2]);
            pf_strcpy(S->pods[k], sizeof(S->pods[k]), parts[3] ? parts[3] : "");
            pf_strcpy(S->nodes[k], sizeof(S->nodes[k]), parts[4] ? parts[4] : "");
            if (S->rk[k] == S->rank) S->pos = k;
            k++;
        }
        free(e);
    }
    S->n = k;
    if (S->pos < 0) return pf_err_set(PF_EINVAL, "rank 0's roster does not list this rank");
    return 0;
}

/* ---- steps: gather at rank 0, answer to all */

struct step_res {
    bool go;
    uint8_t **blobs; /* per roster position (ALLGATHER everywhere, GATHER at rank 0) */
    size_t *lens;
};

static void step_res_free(struct stage *S, struct step_res *r)
{
    if (r->blobs)
        for (int i = 0; i < S->n; i++)
            free(r->blobs[i]);
    free(r->blobs);
    free(r->lens);
    memset(r, 0, sizeof(*r));
}

static bool step_done(struct stage *S)
{
    for (int i = 1; i < S->n; i++) {
        struct member *m = &S->m[S->rk[i]];
        if (m->state == M_JOINED && m->step_got != S->step_no) return false;
    }
    return true;
}

static bool flushed(struct stage *S)
{
    for (int i = 1; i < S->n; i++) {
        struct member *m = &S->m[S->rk[i]];
        if (m->state == M_JOINED && m->conn >= 0 && pf_rdv_conn_pending(&S->sc[m->conn].c))
            return false;
    }
    return true;
}

/* The lost and failed ranks rank 0 names in a RESULT: records {rank, why}. */
static void step_record(struct stage *S, const struct pf_rdv_fields *f)
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

static int root_step(struct stage *S, const char *kind, bool ok, const char *err, const void *blob,
                     size_t len, int mode, double timeout, struct step_res *res)
{
    S->step_no++;
    double deadline = pf_now() + timeout;
    if (deadline > S->cutoff) deadline = S->cutoff;
    serve(S, deadline, step_done);
    for (int i = 1; i < S->n; i++) {
        struct member *m = &S->m[S->rk[i]];
        if (m->state == M_JOINED && m->step_got != S->step_no) {
            char why[160];
            snprintf(why, sizeof(why),
                     "no answer within %.0f s during the %s step (frozen, or "
                     "its network is cut)",
                     timeout, kind);
            member_lost(S, S->rk[i], why);
        }
    }
    struct pf_buf b;
    pf_buf_init(&b, PF_RDV_MAX_PAYLOAD);
    bool go = ok;
    if (!ok) pf_fleet_mark(&S->failed, 0, err && *err ? err : "failed");
    for (int i = 1; i < S->n; i++) {
        struct member *m = &S->m[S->rk[i]];
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
            struct member *m = &S->m[S->rk[i]];
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
        struct member *m = &S->m[S->rk[i]];
        if (m->state == M_JOINED && m->conn >= 0)
            pf_rdv_conn_queue(&S->sc[m->conn].c, PF_RDV_RESULT, b.data, b.len);
    }
    pf_buf_free(&b);
    double fl = pf_now() + 10;
    serve(S, fl < S->cutoff ? fl : S->cutoff, flushed);
    res->go = go;
    if (!go) S->stopped = true;
    return go ? 0 : PF_ERR;
}

static int client_step(struct stage *S, const char *kind, bool ok, const char *err,
                       const void *blob, size_t len, int mode, double timeout, struct step_res *res)
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

static int step(struct stage *S, const char *kind, bool ok, const char *err, const void *blob,
                size_t len, int mode, double timeout, struct step_res *res)
{
    memset(res, 0, sizeof(*res));
    if (S->stopped && strcmp(kind, "report") != 0) return PF_ERR;
    if (S->rank == 0) return root_step(S, kind, ok, err, blob, len, mode, timeout, res);
    if (S->root_lost) return PF_ERR;
    return client_step(S, kind, ok, err, blob, len, mode, timeout, res);
}

/* The GPU stage's allgather (blobs up to 64 KiB per rank). */
static int nccl_allgather(void *rdv, const void *mine, void *out, size_t len)
{
    struct stage *S = rdv;
    if (len > ALLGATHER_MAX)
        return pf_err_set(PF_EINVAL, "allgather of %zu bytes per rank: the limit is %u", len,
                          ALLGATHER_MAX);
    struct step_res res;
    double t = S->cfg->nccl_timeout_s > 0 ? S->cfg->nccl_timeout_s : 120;
    int r = step(S, "allgather", true, NULL, mine, len, STEP_ALLGATHER, t, &res);
    if (r == 0) {
        for (int i = 0; i < S->n; i++) {
            if (res.lens[i] != len) {
                size_t got = res.lens[i];
                step_res_free(S, &res);
                return pf_err_set(PF_EINVAL, "allgather: rank %d sent %zu bytes, expected %zu",
                                  S->rk[i], got, len);
            }
            memcpy((uint8_t *)out + (size_t)i * len, res.blobs[i], len);
        }
    }
    step_res_free(S, &res);
    return r < 0 ? pf_err_set(PF_ERR, "allgather among pods failed: a rank was lost") : 0;
}

/* ---- the data mesh: one connection per probed shift, each direction */

static int mesh_connect(struct stage *S, char *err, size_t nerr)
{
    S->nshifts = pf_coll_probe_shifts(S->n, S->shifts);
    for (int k = 0; k < 3; k++)
        S->out_fd[k] = S->in_fd[k] = -1;
    double deadline = pf_now() + pf_clampd(left_s(S) * 0.2, 3, 30);
    struct pf_rdv_auth da = {0};
    da.on = S->auth;
    da.token = S->token;
    memcpy(da.nonce_s, S->run_id, PF_RDV_NONCE);
    for (int k = 0; k < S->nshifts; k++) {
        int p = ((S->pos + S->shifts[k]) % S->n);
        char peer[96];
        int fd;
        if (pf_rdv_dial(&fd, peer, sizeof(peer), S->ip[p], S->dport[p], deadline) < 0) {
            char w[160];
            who(w, sizeof(w), S, S->rk[p]);
            snprintf(err, nerr, "data connection to %s at %s:%d: %s", w, S->ip[p], S->dport[p],
                     pf_err_msg());
            return PF_ERR;
        }
        struct pf_rdv_conn c;
        pf_rdv_conn_init(&c, fd, peer, true);
        c.auth = da;
        c.dir_out = PF_RDV_DIR_DATA;
        struct pf_buf b;
        pf_buf_init(&b, 4096);
        pf_rdv_put(&b, "run", S->run_id, PF_RDV_NONCE);
        pf_rdv_put_int(&b, "src", S->rank);
        pf_rdv_put_int(&b, "dst", S->rk[p]);
        pf_rdv_put_int(&b, "shift", S->shifts[k]);
        int r = pf_rdv_conn_send(&c, PF_RDV_DHELLO, b.data, b.len, deadline);
        pf_buf_free(&b);
        c.fd = -1; /* keep the socket */
        pf_rdv_conn_close(&c);
        if (r < 0) {
            close(fd);
            snprintf(err, nerr, "data connection to rank %d: %s", S->rk[p], pf_err_msg());
            return PF_ERR;
        }
        S->out_fd[k] = fd;
    }
    /* accept one connection per shift; strangers and garbage are dropped */
    struct pend {
        int fd;
        uint8_t buf[PF_RDV_HDR + 512 + PF_RDV_MACLEN];
        size_t got;
    } pend[32];
    int npend = 0, have = 0;
    while (have < S->nshifts) {
        double now = pf_now();
        if (now >= deadline) break;
        struct pollfd pfd[33];
        pfd[0] = (struct pollfd){S->data_lfd, POLLIN, 0};
        for (int i = 0; i < npend; i++)
            pfd[i + 1] = (struct pollfd){pend[i].fd, POLLIN, 0};
        int pr = poll(pfd, (nfds_t)npend + 1, (int)((deadline - now) * 1000) + 1);
        if (pr <= 0) continue;
        if ((pfd[0].revents & POLLIN) && npend < 32) {
            int fd = accept4(S->data_lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd >= 0) {
                pend[npend].fd = fd;
                pend[npend].got = 0;
                npend++;
            }
        }
        for (int i = 0; i < npend; i++) {
            if (!(pfd[i + 1].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            struct pend *q = &pend[i];
            /* read exactly one frame: the data that follows is not ours to take */
            size_t need = PF_RDV_HDR;
            if (q->got >= PF_RDV_HDR) {
                struct pf_rdv_frame f;
                int n = pf_rdv_frame_decode(&f, q->buf, q->got, 512);
                need =
                    n < 0 ? 0 : PF_RDV_HDR + f.len + ((f.flags & PF_RDV_F_MAC) ? PF_RDV_MACLEN : 0);
            }
            ssize_t r = need > q->got ? recv(q->fd, q->buf + q->got, need - q->got, 0) : -1;
            bool drop = r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR) || need == 0;
            if (r > 0) q->got += (size_t)r;
            struct pf_rdv_frame f;
            int n = drop ? -1 : pf_rdv_frame_decode(&f, q->buf, q->got, 512);
            if (n < 0) drop = true;
            if (n > 0) {
                drop = true;
                struct pf_rdv_fields fl;
                long long src = -1, dst = -1, shift = -1;
                bool mac = !S->auth || pf_rdv_mac_ok(&da, PF_RDV_DIR_DATA, &f);
                if (f.type == PF_RDV_DHELLO && mac &&
                    pf_rdv_fields_decode(&fl, f.payload, f.len) == 0) {
                    const struct pf_rdv_field *run = pf_rdv_fields_get(&fl, "run");
                    pf_rdv_fields_int(&src, &fl, "src");
                    pf_rdv_fields_int(&dst, &fl, "dst");
                    pf_rdv_fields_int(&shift, &fl, "shift");
                    if (run && run->vlen == PF_RDV_NONCE &&
                        memcmp(run->val, S->run_id, PF_RDV_NONCE) == 0 && dst == S->rank) {
                        for (int k = 0; k < S->nshifts; k++) {
                            int p = ((S->pos - S->shifts[k]) % S->n + S->n) % S->n;
                            if (shift == S->shifts[k] && src == S->rk[p] && S->in_fd[k] < 0) {
                                S->in_fd[k] = q->fd;
                                have++;
                                drop = false;
                                q->fd = -1;
                            }
                        }
                    }
                    pf_rdv_fields_free(&fl);
                }
                if (!drop) {
                    pend[i] = pend[--npend];
                    i--;
                    continue;
                }
            }
            if (drop) {
                if (q->fd >= 0) close(q->fd);
                pend[i] = pend[--npend];
                i--;
            }
        }
    }
    for (int i = 0; i < npend; i++)
        close(pend[i].fd);
    if (have < S->nshifts) {
        for (int k = 0; k < S->nshifts; k++) {
            if (S->in_fd[k] >= 0) continue;
            int p = ((S->pos - S->shifts[k]) % S->n + S->n) % S->n;
            char w[160];
            who(w, sizeof(w), S, S->rk[p]);
            snprintf(err, nerr, "no data connection from %s within the deadline", w);
            break;
        }
        return PF_ERR;
    }
    return 0;
}

static void mesh_close(struct stage *S)
{
    for (int k = 0; k < 3; k++) {
        if (S->out_fd[k] >= 0) close(S->out_fd[k]);
        if (S->in_fd[k] >= 0) close(S->in_fd[k]);
        S->out_fd[k] = S->in_fd[k] = -1;
    }
}

/* ---- the collectives */

static void do_allreduce(struct stage *S)
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
    double left = left_s(S);
    double deadline = pf_now() + pf_clampd(left * 0.4, 3, left > 1e8 ? 300 : left - 3);
    char mib[32];
    snprintf(mib, sizeof(mib), "%.3g MiB", (double)bytes / (1 << 20));
    pf_ctx_progress(S->ctx,
                    "tcp all-reduce: %d ranks, %s float32 sum, 1 checked + %d timed "
                    "iterations",
                    S->n, mib, S->iters);
    guard(S, "collective.tcp", "running the TCP all-reduce among %d ranks", S->n);
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
    who(w, sizeof(w), S, peer);
    snprintf(S->ar_err, sizeof(S->ar_err), "%s %s: %s",
             fail.on_send ? "sending to" : "receiving from", w, fail.what);
    pf_ctx_progress(S->ctx, "tcp all-reduce failed: %s", S->ar_err);
    /* close the ring now so that the neighbours stop at once rather than at their deadline */
    mesh_close(S);
}

static void do_probes(struct stage *S)
{
    long long nbytes = S->bytes;
    /* at least 4 MiB: a few milliseconds of scheduling noise must not make a link look slow */
    if (nbytes < (4 << 20)) nbytes = 4 << 20;
    for (int k = 0; k < S->nshifts; k++) {
        /* PROBE_RUNS runs, each after a barrier, keeping the fastest: a moment of scheduling
         * noise on a busy host makes one run slow, a slow link is slow every time */
        double best = 0;
        int from = ring_rank(S, -S->shifts[k]);
        for (int rep = 0; rep < PROBE_RUNS; rep++) {
            struct step_res res;
            if (step(S, "probe", true, NULL, NULL, 0, STEP_BARRIER, 15, &res) < 0) {
                step_res_free(S, &res);
                return;
            }
            step_res_free(S, &res);
            double deadline = pf_now() + pf_clampd(left_s(S) * 0.04, 1, 10);
            struct pf_coll_probe_res pr;
            struct pf_coll_fail fail;
            int r = pf_coll_probe(&pr, S->out_fd[k], S->in_fd[k], (size_t)nbytes, deadline, &fail);
            if (r < 0) {
                char w[160];
                who(w, sizeof(w), S, fail.on_send ? ring_rank(S, S->shifts[k]) : from);
                snprintf(S->ar_err, sizeof(S->ar_err), "link probe %s %s: %s",
                         fail.on_send ? "to" : "from", w, fail.what);
                mesh_close(S);
                return;
            }
            if (pr.gbps > best) best = pr.gbps;
        }
        S->mylinks = pf_xrealloc(S->mylinks, (S->nmylinks + 1) * sizeof(*S->mylinks));
        S->mylinks[S->nmylinks++] = (struct pf_coll_link){from, S->rank, best};
    }
}

static void run_collectives(struct stage *S)
{
    struct step_res res;
    char err[384] = "";
    bool ok = mesh_connect(S, err, sizeof(err)) == 0;
    if (!ok) pf_ctx_progress(S->ctx, "data mesh: %s", err);
    if (step(S, "mesh", ok, err, NULL, 0, STEP_BARRIER, pf_clampd(left_s(S) * 0.2, 3, 30) + 5,
             &res) < 0) {
        step_res_free(S, &res);
        mesh_close(S);
        return;
    }
    step_res_free(S, &res);
    do_allreduce(S);
    struct pf_buf b;
    pf_buf_init(&b, 1 << 16);
    struct pf_fleet_ar mine = {S->ar_ok, S->ar_seconds, (long long)S->ar_wrong,
                               (long long)S->ar_first_bad, S->iface};
    pf_fleet_ar_encode(&b, &mine);
    double left = left_s(S);
    double t = pf_clampd(left * 0.4, 3, left > 1e8 ? 300 : left) + 5;
    int r = step(S, "allreduce", S->ar_ok, S->ar_err, b.data, b.len, STEP_GATHER, t, &res);
    pf_buf_free(&b);
    if (S->rank == 0 && res.blobs)
        for (int i = 0; i < S->n; i++)
            if (res.blobs[i])
                (void)pf_fleet_ar_decode(&S->F.r[S->rk[i]], res.blobs[i], res.lens[i]);
    step_res_free(S, &res);
    if (r < 0) {
        mesh_close(S);
        return;
    }
    guard(S, "collective.tcp", "probing the links between %d ranks", S->n);
    do_probes(S);
    pf_buf_init(&b, 1 << 20);
    pf_fleet_links_encode(&b, S->mylinks, S->nmylinks);
    bool pok = !S->stopped && S->nmylinks == (size_t)S->nshifts;
    r = step(S, "links", pok, pok ? NULL : S->ar_err, b.data, b.len, STEP_GATHER, 15, &res);
    pf_buf_free(&b);
    if (S->rank == 0 && res.blobs)
        for (int i = 0; i < S->n; i++)
            if (res.blobs[i])
                (void)pf_fleet_links_decode(&S->links, &S->nlinks, S->rk[i], res.blobs[i],
                                            res.lens[i]);
    step_res_free(S, &res);
    mesh_close(S);
}

/* ---- the final gather and the summary */

static void my_statuses(struct stage *S, struct pf_buf *b)
{
    struct pf_verdict copy;
    pf_verdict_clone(&copy, S->ctx->verdict);
    pf_verdict_finalize(&copy, policy_cb, (void *)S->cfg);
    if (pf_fleet_report_encode(b, &copy) < 0)
        pf_ctx_progress(S->ctx, "report to rank 0: %s", pf_err_msg());
    pf_verdict_free(&copy);
}

static void links_evidence(struct stage *S)
{
    if (!S->nlinks) return;
    struct pf_node *links = pf_node_set_seq(chk(S, "collective.tcp")->evidence, "links");
    for (size_t i = 0; i < S->nlinks; i++) {
        struct pf_node *l = pf_node_add_map(links);
        pf_node_set_int(l, "from", S->links[i].src);
        pf_node_set_int(l, "to", S->links[i].dst);
        pf_node_set_dbl(l, "gbps", round(S->links[i].gbps * 1000) / 1000);
    }
}

/* Rank 0: the fleet's judgement (pkg/fleet), then the ranks list and the fleet verdict. */
static void root_summarize(struct stage *S)
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

static void set_fleet_extra(struct stage *S, const struct pf_fleet_summary *s)
{
    if (!s->verdict[0]) return;
    struct pf_node *fl = pf_node_set_map(S->ctx->verdict->extra, "fleet");
    pf_node_set_str(fl, "verdict", s->verdict);
    pf_node_set_str(fl, "summary", s->text);
    pf_node_set_int(fl, "ranks", S->n);
    pf_node_set_int(fl, "worldSize", S->world);
}

static void tcp_entry(struct stage *S, struct pf_check *c, const struct pf_fleet_summary *s)
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
static void record_tcp(struct stage *S, const struct pf_fleet_summary *s)
{
    struct pf_check *c = chk(S, "collective.tcp");
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
static void root_final(struct stage *S, struct step_res *res)
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
    step_res_free(S, res);
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
    for (int i = 1; i < S->n; i++) {
        struct member *m = &S->m[S->rk[i]];
        if (m->state == M_JOINED && m->conn >= 0)
            pf_rdv_conn_queue(&S->sc[m->conn].c, PF_RDV_SUMMARY, S->sum.data, S->sum.len);
    }
    serve(S, pf_deadline_in(5, S->cutoff), flushed);
}

/* No word from rank 0: this rank says what it saw itself. */
static void on_my_own(struct stage *S)
{
    for (size_t i = 0; i < S->lost.n; i++) {
        int lr = S->lost.v[i].rank;
        const char *why = S->lost.v[i].why;
        char w[160];
        who(w, sizeof(w), S, lr);
        char m2[768];
        snprintf(m2, sizeof(m2), "%s was lost after the rendezvous: %s", w, why);
        add_finding_text(S, "collective.tcp", "peer-lost", PF_FAIL, NULL, m2);
        char b2[NAME_MAX_];
        pf_verdict_add_culprit(S->ctx->verdict, lr, pod_of(S, lr, b2, sizeof(b2)), node_of(S, lr),
                               "lost during the collectives: %s", why);
    }
    if (S->ar_err[0] && S->lost.n == 0)
        add_finding_text(S, "collective.tcp", "peer-lost", PF_FAIL, NULL, S->ar_err);
    struct pf_fleet_summary none;
    memset(&none, 0, sizeof(none));
    none.expected = -1;
    record_tcp(S, &none);
}

static void final_report(struct stage *S)
{
    struct pf_buf b;
    pf_buf_init(&b, 1 << 20);
    my_statuses(S, &b);
    struct step_res res;
    guard(S, "collective.tcp", "gathering every rank's results at rank 0");
    step(S, "report", true, NULL, b.data, b.len, STEP_GATHER, 15, &res);
    pf_buf_free(&b);
    if (S->rank == 0) {
        root_final(S, &res);
        return;
    }
    step_res_free(S, &res);
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

/* ---- joining (rank > 0) */

static void sleep_s(double s)
{
    if (s <= 0) return;
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
}

static void join_payload(struct stage *S, struct pf_buf *b, const uint8_t nonce[PF_RDV_NONCE])
{
    pf_rdv_put(b, "nonce", nonce, PF_RDV_NONCE);
    pf_rdv_put_int(b, "rank", S->rank);
    pf_rdv_put_int(b, "world", S->world);
    pf_rdv_put_int(b, "proto", PF_RDV_PROTO);
    pf_rdv_put_str(b, "version", PF_VERSION);
    pf_rdv_put_str(b, "pod", S->pod);
    pf_rdv_put_str(b, "node", S->node);
    pf_rdv_put_str(b, "dataIp", S->bind_ip);
    pf_rdv_put_int(b, "dataPort", S->data_port);
    char digest[96];
    pf_config_digest(digest, sizeof(digest), S->cfg);
    pf_rdv_put_str(b, "digest", digest);
    const char *nv = pf_node_get_str(S->ctx->verdict->environment, "ncclVersion");
    pf_rdv_put_str(b, "ncclVersion", nv ? nv : "");
    const struct pf_env *e = &S->ctx->env;
    for (size_t i = 0; i < e->vars.n; i++) {
        const char *kv = e->vars.v[i];
        const char *eq = strchr(kv, '=');
        if (!pf_str_starts(kv, "NCCL_") || !eq) continue;
        char name[128];
        snprintf(name, sizeof(name), "%.*s", (int)(eq - kv), kv);
        if (pf_verdict_is_secret_name(name)) {
            /* compare secrets by hash, never send them */
            uint8_t h[crypto_hash_sha256_BYTES];
            crypto_hash_sha256(h, (const unsigned char *)eq + 1, strlen(eq + 1));
            char *x = pf_xasprintf("%s=sha256:%02x%02x%02x%02x%02x%02x%02x%02x", name, h[0], h[1],
                                   h[2], h[3], h[4], h[5], h[6], h[7]);
            pf_rdv_put_str(b, "env", x);
            free(x);
        } else {
            pf_rdv_put_str(b, "env", kv);
        }
    }
}

/* Joins rank 0 and waits for the roster: 0, or PF_ERR with findings recorded. */
static int client_join(struct stage *S)
{
    double backoff = 0.25;
    char last[512] = "";
    char b0[NAME_MAX_];
    const char *pod0 = pod_of(S, 0, b0, sizeof(b0));
    double last_say = 0;
    for (int attempt = 1;; attempt++) {
        double now = pf_now();
        if (now >= S->join_deadline) break;
        int fd;
        char peer[96];
        double dd = now + 5 < S->join_deadline ? now + 5 : S->join_deadline;
        if (pf_rdv_dial(&fd, peer, sizeof(peer), S->id.coordinator, S->id.port, dd) < 0) {
            snprintf(last, sizeof(last), "%s", pf_err_msg());
            if (attempt <= 2 || (attempt & (attempt - 1)) == 0 || now - last_say > 10) {
                pf_ctx_progress(S->ctx, "%s %s:%d (attempt %d): %s",
                                strstr(last, "connect") ? "connecting to" : "resolving",
                                S->id.coordinator, S->id.port, attempt, last);
                last_say = now;
            }
            guard(S, "rendezvous", "joining rank 0 at %s:%d (attempt %d: %s)", S->id.coordinator,
                  S->id.port, attempt, last);
            double jitter = 0.5 + (double)(randombytes_uniform(1000)) / 1000.0;
            double wait = backoff * jitter;
            if (pf_now() + wait > S->join_deadline) wait = S->join_deadline - pf_now();
            sleep_s(wait);
            backoff = backoff * 2 > 5 ? 5 : backoff * 2;
            continue;
        }
        pf_rdv_conn_init(&S->ctl, fd, peer, true);
        S->have_ctl = true;
        S->ctl.auth.on = S->auth;
        S->ctl.auth.token = S->token;
        pf_rdv_sockaddr_ip(S->root_ip, sizeof(S->root_ip), fd, true);
        pf_rdv_sockaddr_ip(S->my_ip, sizeof(S->my_ip), fd, false);
        struct pf_rdv_msg msg = {0};
        double hd = pf_now() + 10;
        int r = pf_rdv_conn_recv(&S->ctl, &msg, false, hd);
        if (r < 0 || msg.type != PF_RDV_HELLO) {
            snprintf(last, sizeof(last), "%s", r < 0 ? pf_err_msg() : "no HELLO from rank 0");
            pf_rdv_msg_free(&msg);
            pf_rdv_conn_close(&S->ctl);
            S->have_ctl = false;
            if (strstr(last, "protocol version")) {
                add_finding_text(S, "rendezvous", "version-mismatch", PF_FAIL, NULL, last);
                return PF_ERR;
            }
            pf_ctx_progress(S->ctx, "rank 0 at %s: %s; trying again", peer, last);
            sleep_s(backoff);
            continue;
        }
        const struct pf_rdv_field *nf = pf_rdv_fields_get(&msg.f, "nonce");
        if (nf && nf->vlen == PF_RDV_NONCE) memcpy(S->ctl.auth.nonce_s, nf->val, PF_RDV_NONCE);
        char rv[48] = "";
        pf_rdv_fields_str(rv, sizeof(rv), &msg.f, "version");
        pf_rdv_msg_free(&msg);
        pf_rdv_random(S->ctl.auth.nonce_c, PF_RDV_NONCE);
        struct pf_buf b;
        pf_buf_init(&b, PF_RDV_MAX_JOIN);
        join_payload(S, &b, S->ctl.auth.nonce_c);
        r = pf_rdv_conn_send(&S->ctl, PF_RDV_JOIN, b.data, b.len, pf_now() + 10);
        pf_buf_free(&b);
        if (r == 0) {
            guard(S, "rendezvous", "joined rank 0 at %s; waiting for rank 0 to start the run",
                  peer);
            pf_ctx_progress(S->ctx, "rank %d joined rank 0 at %s; waiting for the others", S->rank,
                            peer);
            r = pf_rdv_conn_recv(&S->ctl, &msg, false, S->cutoff - 0.5);
        }
        if (r < 0) {
            snprintf(last, sizeof(last), "%s", pf_err_msg());
            pf_rdv_conn_close(&S->ctl);
            S->have_ctl = false;
            if (r == PF_ETIMEOUT || pf_now() >= S->cutoff - 1) {
                add_finding_text(S, "rendezvous", "timeout", PF_FAIL, NULL,
                                 "joined rank 0 at its address, but it had not started the run "
                                 "by this pod's deadline (it was still waiting for other ranks)");
                return PF_ERR;
            }
            pf_ctx_progress(S->ctx, "rank 0 went away before the run started (%s); joining again",
                            last);
            sleep_s(backoff);
            continue;
        }
        if (msg.type == PF_RDV_REJECT) {
            char code[48] = "", text[512] = "";
            pf_rdv_fields_str(code, sizeof(code), &msg.f, "code");
            pf_rdv_fields_str(text, sizeof(text), &msg.f, "message");
            bool verified = !S->auth || msg.mac_ok;
            static const char *const known[] = {"auth-failed", "duplicate-rank",
                                                "world-size-mismatch", "version-mismatch",
                                                "missing-ranks"};
            const char *use = "timeout";
            for (size_t k = 0; k < PF_ARRAY_LEN(known); k++)
                if (strcmp(code, known[k]) == 0) use = known[k];
            char m2[768];
            snprintf(m2, sizeof(m2), "%s%s", text,
                     verified ? "" : " (rank 0's answer fails the token check: the tokens differ)");
            add_finding_text(S, "rendezvous", use, PF_FAIL, NULL, m2);
            pf_ctx_progress(S->ctx, "rank 0 refused this pod: %s", m2);
            pf_rdv_msg_free(&msg);
            return PF_ERR;
        }
        if (msg.type != PF_RDV_ROSTER || (S->auth && !msg.mac_ok)) {
            add_finding_text(S, "rendezvous", "auth-failed", PF_FAIL, NULL,
                             S->auth && !msg.mac_ok
                                 ? "rank 0's answer fails the token check: rank 0 has another "
                                   "PREFLIGHT_TOKEN, or none"
                                 : "rank 0 sent an unexpected frame");
            pf_rdv_msg_free(&msg);
            return PF_ERR;
        }
        r = client_parse_roster(S, &msg);
        pf_rdv_msg_free(&msg);
        if (r < 0) {
            add_finding_text(S, "rendezvous", "timeout", PF_FAIL, NULL, pf_err_msg());
            return PF_ERR;
        }
        (void)rv;
        return 0;
    }
    /* never reached rank 0 */
    char m2[1024];
    snprintf(m2, sizeof(m2), "rank 0%s%s%s never answered at %s:%d within %.0f s (last error: %s)",
             pod0[0] ? " (" : "", pod0, pod0[0] ? ")" : "", S->id.coordinator, S->id.port,
             pf_now() - S->t0, last[0] ? last : "none");
    add_finding_text(S, "rendezvous", "missing-ranks", PF_FAIL, NULL, m2);
    pf_verdict_add_culprit(S->ctx->verdict, 0, pod0, "", "never reachable at %s:%d: %s",
                           S->id.coordinator, S->id.port, last[0] ? last : "no answer");
    return PF_ERR;
}

/* ---- the stage */

static void find_iface(struct stage *S)
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

static void stage_free(struct stage *S)
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
    mesh_close(S);
    roster_free(S);
    pf_buf_free(&S->sum);
    pf_fleet_marks_free(&S->lost);
    pf_fleet_marks_free(&S->failed);
    if (S->have_fleet) pf_fleet_free(&S->F);
    free(S->links);
    free(S->mylinks);
}

static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

static void run_gpu_stage(struct stage *S)
{
    /* every rank decides alike, by rank 0's world size: a rank that claims another one must
     * not skip the GPU stage's steps while the others run them */
    int world = S->roster_world > 0 ? S->roster_world : S->world;
    if (S->stopped || S->n != world) {
        struct pf_check *c = pf_verdict_find_check(S->ctx->verdict, "collective.nccl");
        if (!c) {
            c = chk(S, "collective.nccl");
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
    guard(S, "collective.nccl", "running the NCCL collectives among %d pods", world);
    pf_nccl_stage(S->ctx, &peers);
}

void pf_rendezvous_stage(struct pf_ctx *ctx, const struct pf_rdv_opts *o)
{
    struct stage st, *S = &st;
    memset(S, 0, sizeof(*S));
    S->ctx = ctx;
    S->cfg = ctx->config;
    S->lfd = S->data_lfd = -1;
    for (int k = 0; k < 3; k++)
        S->out_fd[k] = S->in_fd[k] = -1;
    S->t0 = pf_now();
    pf_buf_init(&S->sum, PF_RDV_MAX_PAYLOAD);
    if (sodium_init() < 0) {
        pf_check_skip(chk(S, "rendezvous"), "libsodium failed to initialise");
        stage_free(S);
        return;
    }
    S->token = o->token && *o->token ? o->token : NULL;
    S->auth = S->token != NULL;
    (void)pf_verdict_add_check(ctx->verdict, "rendezvous");
    (void)pf_verdict_add_check(ctx->verdict, "collective.tcp");

    /* who am I */
    int port = S->cfg->rendezvous_port > 0 ? S->cfg->rendezvous_port : 29400;
    int r = pf_rdv_whoami(&S->id, o, ctx, port);
    struct pf_check *c = chk(S, "rendezvous");
    if (r == 0) pf_rdv_ident_evidence(pf_node_set_map(c->evidence, "identity"), &S->id);
    if (r < 0) {
        pf_check_add_finding(c, "identity-unknown", PF_FAIL, NULL, "%s", pf_err_msg());
        pf_check_skip(chk(S, "collective.tcp"), "no rendezvous: this pod's identity is unknown");
        stage_free(S);
        return;
    }
    if (!S->id.member) {
        pf_check_skip(c, "this pod is no rank: %s", S->id.explain);
        pf_check_skip(chk(S, "collective.tcp"), "this pod is no rank of the all-reduce");
        stage_free(S);
        return;
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

    if (S->world == 1) {
        pf_check_set_message(c, "world size 1: nothing to meet");
        pf_check_skip(chk(S, "collective.tcp"), "one pod: nothing to all-reduce among pods");
        roster_alloc(S, 1);
        S->rk[0] = 0;
        run_gpu_stage(S);
        stage_free(S);
        return;
    }
    raise_nofile();
    /* the time budget: the guard's deadline, less a second to write the verdict */
    double left = pf_verdict_guard_remaining();
    bool bounded = left < 1e8;
    S->cutoff = bounded ? S->t0 + left - 1.0 : S->t0 + 1e9;
    double rdv_to = S->cfg->rendezvous_timeout_s > 0 ? S->cfg->rendezvous_timeout_s : 600;
    double reserve = bounded ? pf_clampd(left * 0.3, 3, 60) : 0;
    double join = bounded && left - reserve < rdv_to ? left - reserve : rdv_to;
    S->join_deadline = S->t0 + (join > 1 ? join : 1);

    find_iface(S);
    S->data_port = 0;
    if (pf_rdv_listen(&S->data_lfd, S->bind_ip, &S->data_port) < 0) {
        pf_check_add_finding(c, "listen-failed", PF_FAIL, NULL, "data port: %s", pf_err_msg());
        pf_check_skip(chk(S, "collective.tcp"), "no data port");
        stage_free(S);
        return;
    }
    char b0[NAME_MAX_];
    if (S->rank == 0) {
        int p = S->id.port;
        pf_ctx_progress(ctx, "rank 0 of %d: listening on port %d for %d ranks", S->world, p,
                        S->world - 1);
        if (pf_rdv_listen(&S->lfd, "", &p) < 0) {
            pf_check_add_finding(c, "listen-failed", PF_FAIL, NULL, "rendezvous port %d: %s",
                                 S->id.port, pf_err_msg());
            pf_check_skip(chk(S, "collective.tcp"), "rank 0 cannot listen");
            stage_free(S);
            return;
        }
        S->m = pf_xcalloc((size_t)S->world, sizeof(*S->m));
        pf_fleet_init(&S->F, S->world);
        S->have_fleet = true;
        for (int k = 0; k < S->world; k++)
            S->m[k].conn = -1;
        S->m[0].state = M_JOINED;
        pf_strcpy(S->m[0].pod, sizeof(S->m[0].pod), S->pod);
        pf_strcpy(S->m[0].node, sizeof(S->m[0].node), S->node);
        S->m[0].world_claimed = S->world;
        pf_strcpy(S->m[0].version, sizeof(S->m[0].version), PF_VERSION);
        pf_config_digest(S->m[0].digest, sizeof(S->m[0].digest), S->cfg);
        const char *nv = pf_node_get_str(ctx->verdict->environment, "ncclVersion");
        pf_strcpy(S->m[0].nccl_version, sizeof(S->m[0].nccl_version), nv ? nv : "");
        /* rank 0's own NCCL variables, as a JOIN would carry them */
        struct pf_buf jb;
        pf_buf_init(&jb, PF_RDV_MAX_JOIN);
        uint8_t zero[PF_RDV_NONCE] = {0};
        join_payload(S, &jb, zero);
        struct pf_rdv_fields jf;
        if (pf_rdv_fields_decode(&jf, (const uint8_t *)jb.data, jb.len) == 0) {
            for (size_t k = 0; k < jf.n; k++)
                if (pf_rdv_field_is(&jf.v[k], "env")) {
                    char *e = pf_rdv_field_dup(&jf.v[k]);
                    if (e) pf_strlist_add(&S->m[0].env, e);
                    free(e);
                }
            pf_rdv_fields_free(&jf);
        }
        pf_buf_free(&jb);
        S->last_waiting = -1;
        guard(S, "rendezvous", "waiting for %d rank%s to join", S->world - 1,
              S->world - 1 == 1 ? "" : "s");
        serve(S, S->join_deadline, join_done);
        double t_last = S->last_join;
        agreement(S);
        root_send_roster(S);
        serve(S, pf_now() + 5 < S->cutoff ? pf_now() + 5 : S->cutoff, flushed);
        S->roster_at = pf_now();
        if (t_last > 0)
            pf_node_set_dbl(chk(S, "rendezvous")->evidence, "lastArrivalToRosterSeconds",
                            round((S->roster_at - t_last) * 1e6) / 1e6);
        pf_node_set_int(chk(S, "rendezvous")->evidence, "droppedConnections", S->dropped);
        if (S->dropped)
            pf_node_set_str(chk(S, "rendezvous")->evidence, "lastDropped", S->dropped_last);
        find_iface(S);
    } else {
        pf_ctx_progress(ctx, "rank %d of %d (%s): joining rank 0%s%s%s at %s:%d", S->rank, S->world,
                        S->id.rank_from, pod_of(S, 0, b0, sizeof(b0))[0] ? " (" : "", b0,
                        b0[0] ? ")" : "", S->id.coordinator, S->id.port);
        if (client_join(S) < 0) {
            struct pf_check *t = chk(S, "collective.tcp");
            if (t->status != PF_SKIP && t->nfindings == 0)
                pf_check_skip(t, "no rendezvous: this pod is not in the run");
            stage_free(S);
            return;
        }
        find_iface(S);
    }
    double met = pf_now() - S->t0;
    c = chk(S, "rendezvous");
    pf_node_set_int(c->evidence, "joined", S->n);
    pf_node_set_dbl(c->evidence, "seconds", round(met * 1000) / 1000);
    pf_ctx_progress(ctx, "%d of %d ranks in the run after %.1f s", S->n, S->world, met);
    if (S->n == S->world)
        pf_check_set_message(c, "all %d ranks met in %.1f s through %s:%d", S->world, met,
                             S->rank == 0 ? "this pod" : S->id.coordinator, S->id.port);
    else
        pf_check_set_message(c, "%d of %d ranks met in %.1f s", S->n, S->world, met);

    if (S->n >= 2) run_collectives(S);
    run_gpu_stage(S);
    final_report(S);
    stage_free(S);
}
