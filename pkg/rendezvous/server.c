/* Rank 0: listens, accepts, says HELLO, and serves every connection from one epoll loop
 * (never one peer at a time); drops strangers and rejects refused joiners. The loop does O(1)
 * work per ready connection: epoll names the connection (its index in the event), the done
 * conditions read counters, and the deadlines wait in a heap. */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define EV_LISTENER UINT64_MAX /* the listener's epoll_event.data; a connection's is its index */
#define EV_BATCH 1024

/* ---- rank 0: the heap of deadlines */

static bool timer_before(const struct rdv_timer *a, const struct rdv_timer *b)
{
    return a->at < b->at;
}

void rdv_timer_push(struct rdv_session *S, double at, size_t i, uint64_t gen)
{
    if (S->ntm == S->captm) {
        S->captm = S->captm ? S->captm * 2 : 64;
        S->tm = pf_xrealloc(S->tm, S->captm * sizeof(*S->tm));
    }
    size_t k = S->ntm++;
    struct rdv_timer t = {at, i, gen};
    while (k > 0 && timer_before(&t, &S->tm[(k - 1) / 2])) {
        S->tm[k] = S->tm[(k - 1) / 2];
        k = (k - 1) / 2;
    }
    S->tm[k] = t;
}

bool rdv_timer_pop(struct rdv_session *S, struct rdv_timer *out)
{
    if (S->ntm == 0) return false;
    *out = S->tm[0];
    struct rdv_timer last = S->tm[--S->ntm];
    size_t k = 0;
    for (;;) {
        size_t c = 2 * k + 1;
        if (c >= S->ntm) break;
        if (c + 1 < S->ntm && timer_before(&S->tm[c + 1], &S->tm[c])) c++;
        if (!timer_before(&S->tm[c], &last)) break;
        S->tm[k] = S->tm[c];
        k = c;
    }
    if (S->ntm) S->tm[k] = last;
    return true;
}

/* ---- rank 0: the member counters */

/* Adds d to the counters member rank is in (rank 0 is in none). */
static void member_count(struct rdv_session *S, int rank, int d)
{
    if (rank <= 0) return;
    const struct rdv_member *m = &S->m[rank];
    if (m->state == PF_RDV_MISSING) S->nmissing += d;
    if (m->state != PF_RDV_JOINED) return;
    S->nlive += d;
    if (m->step_got == S->step_no)
        S->nstep += d;
    else if (m->step_got == S->step_no + 1)
        S->nnext += d;
}

void rdv_member_set(struct rdv_session *S, int rank, int state, uint32_t step_got)
{
    member_count(S, rank, -1);
    S->m[rank].state = state;
    S->m[rank].step_got = step_got;
    member_count(S, rank, 1);
}

void rdv_step_next(struct rdv_session *S)
{
    /* a STEP is step_no or step_no + 1 (rdv_handle_step), so none is ahead of the new one */
    S->step_no++;
    S->nstep = S->nnext;
    S->nnext = 0;
}

/* ---- rank 0: connections */

/* The connections not yet joined, in the order they opened: at most about UNAUTH_MAX. */
static void unauth_list(struct rdv_session *S, size_t i, bool on)
{
    struct rdv_sconn *c = &S->sc[i];
    if (on) {
        S->unauth = pf_xrealloc(S->unauth, (S->nunauth + 1) * sizeof(*S->unauth));
        S->unauth[S->nunauth++] = i;
    } else {
        size_t k = 0;
        while (k < S->nunauth && S->unauth[k] != i)
            k++;
        if (k < S->nunauth) {
            memmove(S->unauth + k, S->unauth + k + 1, (S->nunauth - k - 1) * sizeof(*S->unauth));
            S->nunauth--;
        }
    }
    c->listed = on;
}

/* What connection i counts for, and what epoll waits for on it, after a change. */
static void sc_account(struct rdv_session *S, size_t i)
{
    struct rdv_sconn *c = &S->sc[i];
    bool pend = c->used && pf_rdv_conn_pending(&c->c);
    bool member_pend = pend && c->rank > 0;
    if (member_pend != c->counted) {
        S->npend += member_pend ? 1 : -1;
        c->counted = member_pend;
    }
    if (!pend && c->fan) {
        if (c->fan == S->fan_gen) S->fan_win--;
        c->fan = 0;
    }
    bool unauth = c->used && c->rank < 0;
    if (unauth != c->listed) unauth_list(S, i, unauth);
    if (!c->ep_on) return;
    if (!c->used) {
        epoll_ctl(S->ep, EPOLL_CTL_DEL, c->c.fd, NULL);
        c->ep_on = false;
        return;
    }
    /* a closing connection only writes what is left (its REJECT) */
    uint32_t ev = (c->closing ? 0 : EPOLLIN) | (pend ? EPOLLOUT : 0);
    if (ev == c->ev) return;
    struct epoll_event e = {.events = ev, .data.u64 = i};
    if (epoll_ctl(S->ep, EPOLL_CTL_MOD, c->c.fd, &e) == 0) c->ev = ev;
}

void rdv_sc_sync(struct rdv_session *S, size_t i)
{
    struct rdv_sconn *c = &S->sc[i];
    if (c->used && c->closing && !pf_rdv_conn_pending(&c->c))
        rdv_sc_close(S, i);
    else
        sc_account(S, i);
}

void rdv_sc_close(struct rdv_session *S, size_t i)
{
    struct rdv_sconn *c = &S->sc[i];
    if (!c->used) return;
    c->used = false;
    sc_account(S, i); /* out of the counters and of epoll while the descriptor is open */
    pf_rdv_conn_close(&c->c);
    if (c->rank > 0 && c->rank < S->world && S->m[c->rank].conn == (int)i) S->m[c->rank].conn = -1;
    if (S->nfree == S->capfree) {
        S->capfree = S->capfree ? S->capfree * 2 : 64;
        S->free_sc = pf_xrealloc(S->free_sc, S->capfree * sizeof(*S->free_sc));
    }
    S->free_sc[S->nfree++] = i;
}

void rdv_member_lost(struct rdv_session *S, int rank, const char *why)
{
    struct rdv_member *m = &S->m[rank];
    if (m->state != PF_RDV_JOINED) return;
    rdv_member_set(S, rank, PF_RDV_LOST, m->step_got);
    free(m->why);
    m->why = pf_xasprintf("%.*s", RDV_WHY_MAX - 1, why);
    pf_wire_mark(&S->lost, rank, why);
    if (m->conn >= 0) rdv_sc_close(S, (size_t)m->conn);
    m->conn = -1;
    char w[160];
    rdv_who(w, sizeof(w), S, rank);
    rdv_say(S, "lost %s: %s", w, why);
}

void rdv_sc_reject(struct rdv_session *S, size_t i, enum pf_wire_refusal why, const char *msg)
{
    struct pf_buf b;
    pf_buf_init(&b, 1 << 16);
    pf_wire_put_str(&b, "code", pf_wire_refusal_code(why));
    pf_wire_put_str(&b, "message", msg);
    struct rdv_sconn *c = &S->sc[i];
    pf_rdv_conn_queue(&c->c, PF_WIRE_REJECT, b.data, b.len);
    pf_buf_free(&b);
    c->closing = true;
    c->close_by = rdv_wait_end(S, S->su.waits.close);
    c->rank = -1;
    rdv_timer_push(S, c->close_by, i, c->gen);
    sc_account(S, i);
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
        rdv_member_set(S, r, PF_RDV_MISSING, S->m[r].step_got);
        rdv_sc_close(S, i);
        S->m[r].conn = -1;
        return;
    }
    rdv_member_lost(S, r,
                    eof ? "its connection closed: the process exited or the pod was deleted" : err);
}

void rdv_sc_write(struct rdv_session *S, size_t i)
{
    struct rdv_sconn *c = &S->sc[i];
    if (c->used && pf_rdv_conn_flush_some(&c->c) < 0) sc_failed(S, i, false, pf_err_msg());
    rdv_sc_sync(S, i);
}

/* The connection not yet authenticated that goes first when room is needed: a refused one
 * still writing its REJECT, else the oldest. -1 when none, or when the oldest is younger than
 * UNAUTH_GRACE (a joiner's JOIN is on its way). The list is oldest first: O(UNAUTH_MAX). */
static ssize_t unauth_victim(const struct rdv_session *S, double now)
{
    ssize_t v = -1;
    for (size_t k = 0; k < S->nunauth && v < 0; k++)
        if (S->sc[S->unauth[k]].closing) v = (ssize_t)S->unauth[k];
    if (v < 0 && S->nunauth) v = (ssize_t)S->unauth[0];
    if (v >= 0 && !S->sc[v].closing && now - S->sc[v].opened < UNAUTH_GRACE) return -1;
    return v;
}

bool rdv_sc_open(struct rdv_session *S, int fd, double now)
{
    size_t i;
    if (S->nfree) {
        i = S->free_sc[--S->nfree];
    } else {
        if (S->nsc >= S->capsc) {
            S->capsc = S->nsc >= 32 ? S->nsc * 2 : 64;
            S->sc = pf_xrealloc(S->sc, S->capsc * sizeof(*S->sc));
        }
        i = S->nsc++;
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
    c->gen = ++S->opens;
    if (S->ep >= 0) {
        struct epoll_event e = {.events = EPOLLIN, .data.u64 = i};
        if (epoll_ctl(S->ep, EPOLL_CTL_ADD, fd, &e) < 0) {
            char why[160];
            snprintf(why, sizeof(why), "epoll: %s", strerror(errno));
            rdv_sc_drop(S, i, why);
            return false;
        }
        c->ep_on = true;
        c->ev = EPOLLIN;
    }
    rdv_timer_push(S, c->deadline, i, c->gen);
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
    rdv_sc_sync(S, i);
    return true;
}

/* The listener in epoll: waiting for connections, or resting (its queued connections would
 * wake the loop at once). */
static void listen_events(struct rdv_session *S, uint32_t ev)
{
    if (ev == S->lfd_ev) return;
    struct epoll_event e = {.events = ev, .data.u64 = EV_LISTENER};
    if (epoll_ctl(S->ep, EPOLL_CTL_MOD, S->lfd, &e) == 0) S->lfd_ev = ev;
}

/* Accepts what waits on the rendezvous port. At UNAUTH_MAX connections not yet joined, the
 * oldest goes (never a joined rank); when none may go yet, or descriptors ran out, the
 * listener rests for ACCEPT_REST instead of waking the loop again at once. */
static void accept_all(struct rdv_session *S)
{
    for (int k = 0; k < 256; k++) {
        double now = pf_now();
        bool evicted = false;
        if (S->nunauth >= UNAUTH_MAX) {
            ssize_t v = unauth_victim(S, now);
            if (v < 0) {
                S->accept_rest_until = now + ACCEPT_REST;
                return;
            }
            rdv_sc_drop(S, (size_t)v, "too many connections that have not joined: the oldest goes");
            evicted = true;
        }
        int fd = accept4(S->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) return;
            /* EMFILE, ENFILE, ENOBUFS, ENOMEM: the connection stays queued in the kernel;
             * free a descriptor a stranger holds, and rest */
            ssize_t v =
                !evicted && (errno == EMFILE || errno == ENFILE) ? unauth_victim(S, now) : -1;
            if (v >= 0)
                rdv_sc_drop(S, (size_t)v,
                            "out of file descriptors: the oldest connection that "
                            "has not joined goes");
            S->accept_rest_until = now + ACCEPT_REST;
            return;
        }
        rdv_sc_open(S, fd, now);
    }
}

/* The deadlines that passed: a REJECT not written in time, a connection with no JOIN. */
static void expire(struct rdv_session *S, double now)
{
    struct rdv_timer t;
    while (S->ntm && S->tm[0].at < now && rdv_timer_pop(S, &t)) {
        struct rdv_sconn *c = &S->sc[t.i];
        if (!c->used || c->gen != t.gen) continue;
        if (c->closing && now > c->close_by)
            rdv_sc_close(S, t.i);
        else if (c->rank < 0 && !c->closing && c->deadline && now > c->deadline)
            rdv_sc_drop(S, t.i, "no JOIN in time (slow, or not a preflight client)");
    }
}

/* What epoll said of connection i: written, read, its frames handled. */
static void serve_one(struct rdv_session *S, size_t i, uint32_t ev)
{
    struct rdv_sconn *c = &S->sc[i];
    if ((ev & (EPOLLOUT | EPOLLERR | EPOLLHUP)) && pf_rdv_conn_pending(&c->c)) {
        if (pf_rdv_conn_flush_some(&c->c) < 0) {
            sc_failed(S, i, false, pf_err_msg());
            return;
        }
    }
    if (!(ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) || c->closing) return;
    int r = pf_rdv_conn_fill(&c->c);
    if (r == PF_ETIMEOUT) return;
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

/* The event loop of rank 0. Returns when done(S) says so or at the deadline. */
bool rdv_serve(struct rdv_session *S, double deadline, bool (*done)(struct rdv_session *))
{
    if (S->ep < 0) return done && done(S);
    struct epoll_event ev[EV_BATCH];
    for (;;) {
        double now = pf_now();
        expire(S, now);
        if (done && done(S)) return true;
        if (now >= deadline) return false;
        bool listen = now >= S->accept_rest_until;
        listen_events(S, listen ? EPOLLIN : 0);
        double wait = deadline - now;
        if (wait > 0.25) wait = 0.25;
        if (!listen && S->accept_rest_until - now < wait) wait = S->accept_rest_until - now;
        if (S->ntm && S->tm[0].at - now < wait) wait = S->tm[0].at - now;
        int ne = epoll_wait(S->ep, ev, EV_BATCH, (int)(wait * 1000) + 1);
        if (ne < 0 && errno != EINTR) return false;
        /* what arrived first, new connections after: an eviction to make room must not take
         * a connection whose JOIN is already here */
        bool accept = false;
        for (int k = 0; k < ne; k++) {
            if (ev[k].data.u64 == EV_LISTENER) {
                accept = ev[k].events & (EPOLLIN | EPOLLERR);
                continue;
            }
            size_t i = (size_t)ev[k].data.u64;
            if (i >= S->nsc || !S->sc[i].used) continue;
            serve_one(S, i, ev[k].events);
            rdv_sc_sync(S, i);
        }
        if (accept) accept_all(S);
    }
}

/* ---- rank 0: the join phase */

/* The ranks that have not joined: a pass over the member table, made only when a line says
 * who they are (the count is S->nmissing). */
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
    int nw = S->nmissing;
    double now = pf_now();
    /* a thousand JOINs must not render the guard's verdict a thousand times: a new count
     * is said at most every JOIN_SAY_EVERY s until JOIN_SAY_ALL are left (each JOIN then) */
    bool say =
        nw != S->last_waiting && (nw <= JOIN_SAY_ALL || now - S->last_progress >= JOIN_SAY_EVERY);
    if (nw && (say || now - S->last_progress > 5)) {
        int *w = pf_xmalloc((size_t)S->world * sizeof(int));
        int k = waiting_list(S, w);
        struct pf_buf b;
        pf_buf_init(&b, 1 << 14);
        rdv_list_numbers(&b, w, (size_t)k);
        free(w);
        /* the guard first: a verdict written on a signal right after the line is seen must
         * already say what was under way */
        rdv_guard(S, "waiting for %d of %d ranks: %s", nw, S->world, pf_buf_str(&b));
        rdv_say(S, "waiting for %d of %d ranks: %s", nw, S->world, pf_buf_str(&b));
        pf_buf_free(&b);
        S->last_progress = now;
        S->last_waiting = nw;
    }
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
    S->nmissing = S->world - 1;
}

int rdv_root_listen(struct rdv_session *S)
{
    int p = S->id.port;
    rdv_say(S, "rank 0 of %d: listening on port %d for %d ranks", S->world, p, S->world - 1);
    if (pf_rdv_listen(&S->lfd, "", &p) < 0) {
        rdv_end(S, PF_RDV_END_LISTEN_FAILED, "rendezvous port %d: %s", S->id.port, pf_err_msg());
        return PF_ERR;
    }
    S->ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event e = {.events = EPOLLIN, .data.u64 = EV_LISTENER};
    if (S->ep < 0 || epoll_ctl(S->ep, EPOLL_CTL_ADD, S->lfd, &e) < 0) {
        rdv_end(S, PF_RDV_END_LISTEN_FAILED, "rendezvous port %d: epoll: %s", S->id.port,
                strerror(errno));
        return PF_ERR;
    }
    S->lfd_ev = EPOLLIN;
    rdv_members_init(S);
    root_member(S);
    pf_wire_random(S->join_run, PF_WIRE_NONCE);
    S->last_waiting = -1;
    return 0;
}
