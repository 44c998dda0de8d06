/* Rank 0: listens, accepts, says HELLO, and serves every connection from one poll loop
 * (never one peer at a time); drops strangers and rejects refused joiners. */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- rank 0: connections */

void rdv_sc_close(struct rdv_session *S, size_t i)
{
    struct rdv_sconn *c = &S->sc[i];
    if (!c->used) return;
    pf_rdv_conn_close(&c->c);
    c->used = false;
    if (c->rank > 0 && c->rank < S->world && S->m[c->rank].conn == (int)i) S->m[c->rank].conn = -1;
}

void rdv_member_lost(struct rdv_session *S, int rank, const char *why)
{
    struct rdv_member *m = &S->m[rank];
    if (m->state != PF_RDV_JOINED) return;
    m->state = PF_RDV_LOST;
    free(m->why);
    m->why = pf_xasprintf("%.*s", RDV_WHY_MAX - 1, why);
    pf_wire_mark(&S->lost, rank, why);
    if (m->conn >= 0) rdv_sc_close(S, (size_t)m->conn);
    m->conn = -1;
    char w[160];
    rdv_who(w, sizeof(w), S, rank);
    rdv_say(S, "lost %s: %s", w, why);
}

void rdv_sc_reject(struct rdv_session *S, size_t i, const char *code, const char *msg)
{
    struct pf_buf b;
    pf_buf_init(&b, 1 << 16);
    pf_wire_put_str(&b, "code", code);
    pf_wire_put_str(&b, "message", msg);
    pf_rdv_conn_queue(&S->sc[i].c, PF_WIRE_REJECT, b.data, b.len);
    pf_buf_free(&b);
    S->sc[i].closing = true;
    S->sc[i].close_by = rdv_wait_end(S, S->su.waits.close);
    S->sc[i].rank = -1;
}

/* A connection that is not (or no longer) a member: garbage, a scanner, a slow client. A
 * flood of them is logged a line a second, not a line each. */
void rdv_sc_drop(struct rdv_session *S, size_t i, const char *why)
{
    S->dropped++;
    snprintf(S->dropped_last, sizeof(S->dropped_last), "%s: %s", S->sc[i].c.peer, why);
    double now = pf_now();
    if (S->dropped <= 3 || now - S->last_drop_say >= 1) {
        rdv_say(S, "dropped a connection from %s: %s (%d so far)", S->sc[i].c.peer, why,
                S->dropped);
        S->last_drop_say = now;
    }
    rdv_sc_close(S, i);
}

static void dispatch(struct rdv_session *S, size_t i, struct pf_rdv_msg *msg)
{
    struct rdv_sconn *c = &S->sc[i];
    if (c->rank < 0) {
        if (msg->type == PF_WIRE_JOIN)
            rdv_admit(S, i, msg);
        else
            rdv_sc_drop(S, i, "expected JOIN");
        return;
    }
    if (msg->type == PF_WIRE_STEP)
        rdv_handle_step(S, i, msg);
    else
        rdv_member_lost(S, c->rank, "protocol error: unexpected frame");
}

static void sc_failed(struct rdv_session *S, size_t i, bool eof, const char *err)
{
    struct rdv_sconn *c = &S->sc[i];
    int r = c->rank;
    if (c->closing || r < 0) {
        if (!c->closing && r < 0)
            rdv_sc_drop(S, i, eof ? "closed before joining" : err);
        else
            rdv_sc_close(S, i);
        return;
    }
    if (S->n == 0) {
        /* before the run: the slot is free again (a restarting pod comes back) */
        rdv_say(S,
                "rank %d (%s) left before the run started (%s); waiting for it "
                "to come back",
                r, S->m[r].pod, eof ? "connection closed" : err);
        S->m[r].state = PF_RDV_MISSING;
        rdv_sc_close(S, i);
        S->m[r].conn = -1;
        return;
    }
    rdv_member_lost(S, r,
                    eof ? "its connection closed: the process exited or the pod was deleted" : err);
}

/* The connection not yet authenticated that goes first when room is needed: a refused one
 * still writing its REJECT, else the oldest. -1 when none, or when the oldest is younger than
 * UNAUTH_GRACE (a joiner's JOIN is on its way). *n is how many there are. */
static ssize_t unauth_victim(const struct rdv_session *S, double now, size_t *n)
{
    ssize_t v = -1;
    *n = 0;
    for (size_t i = 0; i < S->nsc; i++) {
        const struct rdv_sconn *c = &S->sc[i];
        if (!c->used || c->rank >= 0) continue;
        (*n)++;
        if (v < 0 || (c->closing && !S->sc[v].closing) ||
            (c->closing == S->sc[v].closing && c->opened < S->sc[v].opened))
            v = (ssize_t)i;
    }
    if (v >= 0 && !S->sc[v].closing && now - S->sc[v].opened < UNAUTH_GRACE) return -1;
    return v;
}

/* A new connection: a slot, the JOIN limits, and rank 0's HELLO on its way. */
static void sc_open(struct rdv_session *S, int fd, double now)
{
    size_t i;
    for (i = 0; i < S->nsc; i++)
        if (!S->sc[i].used) break;
    if (i == S->nsc) {
        S->sc = pf_xrealloc(S->sc, (S->nsc + 1) * sizeof(*S->sc));
        S->nsc++;
    }
    struct rdv_sconn *c = &S->sc[i];
    memset(c, 0, sizeof(*c));
    char peer[96];
    pf_rdv_sockname(peer, sizeof(peer), fd, true);
    pf_rdv_conn_init(&c->c, fd, peer, false);
    pf_rdv_conn_limit(&c->c, PF_RDV_MAX_JOIN);
    c->used = true;
    c->rank = -1;
    c->opened = now;
    c->deadline = now + JOIN_WAIT;
    if (!S->my_ip[0]) pf_rdv_sockaddr_ip(S->my_ip, sizeof(S->my_ip), fd, false);
    c->c.auth.on = S->auth;
    c->c.auth.token = S->token;
    pf_wire_random(c->c.auth.nonce_s, PF_WIRE_NONCE);
    struct pf_buf b;
    pf_buf_init(&b, 4096);
    pf_wire_put(&b, "nonce", c->c.auth.nonce_s, PF_WIRE_NONCE);
    pf_wire_put(&b, "run", S->join_run, PF_WIRE_NONCE);
    pf_wire_put_int(&b, "proto", PF_WIRE_PROTO);
    pf_wire_put_str(&b, "version", PF_VERSION);
    pf_wire_put_str(&b, "auth", S->auth ? "hmac-sha256" : "none");
    pf_wire_put_int(&b, "world", S->world);
    /* HELLO goes out bare: the joiner has no nonce of its own in it yet */
    bool on = c->c.auth.on;
    c->c.auth.on = false;
    pf_rdv_conn_queue(&c->c, PF_WIRE_HELLO, b.data, b.len);
    c->c.auth.on = on;
    pf_buf_free(&b);
    pf_rdv_conn_flush_some(&c->c);
}

/* Accepts what waits on the rendezvous port. At UNAUTH_MAX connections not yet joined, the
 * oldest goes (never a joined rank); when none may go yet, or descriptors ran out, the
 * listener rests for ACCEPT_REST instead of waking the loop again at once. */
static void accept_all(struct rdv_session *S)
{
    for (int k = 0; k < 256; k++) {
        double now = pf_now();
        size_t n;
        ssize_t v = unauth_victim(S, now, &n);
        if (n >= UNAUTH_MAX) {
            if (v < 0) {
                S->accept_rest_until = now + ACCEPT_REST;
                return;
            }
            rdv_sc_drop(S, (size_t)v, "too many connections that have not joined: the oldest goes");
            v = -1;
        }
        int fd = accept4(S->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) return;
            /* EMFILE, ENFILE, ENOBUFS, ENOMEM: the connection stays queued in the kernel;
             * free a descriptor a stranger holds, and rest */
            if ((errno == EMFILE || errno == ENFILE) && v >= 0)
                rdv_sc_drop(S, (size_t)v,
                            "out of file descriptors: the oldest connection that "
                            "has not joined goes");
            S->accept_rest_until = now + ACCEPT_REST;
            return;
        }
        sc_open(S, fd, now);
    }
}

/* The event loop of rank 0. Returns when done(S) says so or at the deadline. */
bool rdv_serve(struct rdv_session *S, double deadline, bool (*done)(struct rdv_session *))
{
    struct pollfd *pf = NULL;
    size_t *idx = NULL;
    bool fin = false;
    for (;;) {
        double now = pf_now();
        for (size_t i = 0; i < S->nsc; i++) {
            struct rdv_sconn *c = &S->sc[i];
            if (!c->used) continue;
            if (c->closing && (!pf_rdv_conn_pending(&c->c) || now > c->close_by))
                rdv_sc_close(S, i);
            else if (c->rank < 0 && !c->closing && c->deadline && now > c->deadline)
                rdv_sc_drop(S, i, "no JOIN in time (slow, or not a preflight client)");
        }
        if (done && done(S)) {
            fin = true;
            break;
        }
        if (now >= deadline) break;
        pf = pf_xrealloc(pf, (S->nsc + 1) * sizeof(*pf));
        idx = pf_xrealloc(idx, (S->nsc + 1) * sizeof(*idx));
        size_t np = 0;
        /* a resting listener is left out: its queued connections would wake poll at once */
        bool listen = now >= S->accept_rest_until;
        pf[np++] = (struct pollfd){listen ? S->lfd : -1, POLLIN, 0};
        for (size_t i = 0; i < S->nsc; i++) {
            struct rdv_sconn *c = &S->sc[i];
            if (!c->used) continue;
            short ev = c->closing ? 0 : POLLIN;
            if (pf_rdv_conn_pending(&c->c)) ev |= POLLOUT;
            idx[np] = i;
            pf[np++] = (struct pollfd){c->c.fd, ev, 0};
        }
        double wait = deadline - now;
        if (wait > 0.25) wait = 0.25;
        if (!listen && S->accept_rest_until - now < wait) wait = S->accept_rest_until - now;
        int pr = poll(pf, np, (int)(wait * 1000) + 1);
        if (pr < 0 && errno != EINTR) break;
        if (pr <= 0) continue;
        /* what arrived first, new connections after: an eviction to make room must not take
         * a connection whose JOIN is already here */
        for (size_t k = 1; k < np; k++) {
            size_t i = idx[k];
            struct rdv_sconn *c = &S->sc[i];
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
                        /* nothing proves who sent it: it changes no verdict (a pod of another
                         * protocol fails its own rendezvous on rank 0's HELLO) */
                        rdv_sc_drop(S, i, why);
                    } else {
                        rdv_member_lost(S, c->rank, why);
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
        if (pf[0].revents & (POLLIN | POLLERR)) accept_all(S);
    }
    free(pf);
    free(idx);
    return fin;
}

/* ---- rank 0: the join phase */

static int waiting_list(const struct rdv_session *S, int *out)
{
    int k = 0;
    for (int r = 1; r < S->world; r++)
        if (S->m[r].state == PF_RDV_MISSING) out[k++] = r;
    return k;
}

#define JOIN_SAY_EVERY 0.25
#define JOIN_SAY_ALL 12

bool rdv_join_done(struct rdv_session *S)
{
    int *w = pf_xmalloc((size_t)S->world * sizeof(int));
    int nw = waiting_list(S, w);
    double now = pf_now();
    /* a thousand JOINs must not render the guard's verdict a thousand times: a new count
     * is said at most every JOIN_SAY_EVERY s until JOIN_SAY_ALL are left (each JOIN then) */
    bool say =
        nw != S->last_waiting && (nw <= JOIN_SAY_ALL || now - S->last_progress >= JOIN_SAY_EVERY);
    if (nw && (say || now - S->last_progress > 5)) {
        struct pf_buf b;
        pf_buf_init(&b, 1 << 14);
        rdv_list_numbers(&b, w, (size_t)nw);
        /* the guard first: a verdict written on a signal right after the line is seen must
         * already say what was under way */
        rdv_guard(S, "rendezvous", "waiting for %d of %d ranks: %s", nw, S->world, pf_buf_str(&b));
        rdv_say(S, "waiting for %d of %d ranks: %s", nw, S->world, pf_buf_str(&b));
        pf_buf_free(&b);
        S->last_progress = now;
        S->last_waiting = nw;
    }
    free(w);
    if (nw && now >= S->join_deadline) rdv_admit_report_claims(S);
    return nw == 0;
}

/* Rank 0's own place in the member table: its claims, as a JOIN would carry them. */
static void root_member(struct rdv_session *S)
{
    struct rdv_member *m0 = &S->m[0];
    m0->state = PF_RDV_JOINED;
    pf_strcpy(m0->pod, sizeof(m0->pod), S->pod);
    pf_strcpy(m0->node, sizeof(m0->node), S->node);
    m0->world_claimed = S->world;
    pf_strcpy(m0->version, sizeof(m0->version), PF_VERSION);
    pf_strcpy(m0->digest, sizeof(m0->digest), S->su.digest ? S->su.digest : "");
    pf_strcpy(m0->nccl_version, sizeof(m0->nccl_version),
              S->su.nccl_version ? S->su.nccl_version : "");
    pf_strcpy(m0->fabric, sizeof(m0->fabric), S->su.fabric ? S->su.fabric : "");
    /* rank 0's own NCCL variables, as a JOIN would carry them */
    struct pf_buf jb;
    pf_buf_init(&jb, PF_RDV_MAX_JOIN);
    uint8_t zero[PF_WIRE_NONCE] = {0};
    size_t left_out = rdv_join_payload(S, &jb, zero);
    struct pf_wire_fields jf;
    if (pf_wire_fields_decode(&jf, (const uint8_t *)jb.data, jb.len) == 0) {
        for (size_t k = 0; k < jf.n; k++)
            if (pf_wire_field_is(&jf.v[k], "env")) {
                char *e = pf_wire_field_dup(&jf.v[k]);
                if (e) pf_strlist_add(&m0->env, e);
                free(e);
            }
        pf_wire_fields_free(&jf);
    }
    pf_buf_free(&jb);
    if (left_out) rdv_env_left_out(S, 0, (long long)left_out);
}

void rdv_members_init(struct rdv_session *S)
{
    S->m = pf_xcalloc((size_t)S->world, sizeof(*S->m));
    for (int k = 0; k < S->world; k++)
        S->m[k].conn = -1;
}

int rdv_root_listen(struct rdv_session *S)
{
    int p = S->id.port;
    rdv_say(S, "rank 0 of %d: listening on port %d for %d ranks", S->world, p, S->world - 1);
    if (pf_rdv_listen(&S->lfd, "", &p) < 0) {
        char m[1100];
        snprintf(m, sizeof(m), "rendezvous port %d: %s", S->id.port, pf_err_msg());
        rdv_add_finding_text(S, "rendezvous", "listen-failed", RDV_FAIL, m);
        rdv_skip(S, "collective.tcp", false, "rank 0 cannot listen");
        return PF_ERR;
    }
    rdv_members_init(S);
    root_member(S);
    pf_wire_random(S->join_run, PF_WIRE_NONCE);
    S->last_waiting = -1;
    return 0;
}
