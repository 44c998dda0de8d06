/* The probes of stage rails (rails.c): every send task dials the neighbour's rail address
 * from this pod's rail (pf_rdv_probe_dial_addr), every expected probe is accepted on this
 * rank's own listeners, one on each rail's address, under the accept discipline of every data
 * listener (pf_rdv_acceptor: a stranger's idle connection holds up nobody); one poll loop
 * moves all of them at once, so no rank waits on another to finish sending first:
 *
 *   sender                               receiver
 *   connect, DHELLO          ───────►    accept, check the DHELLO
 *                            ◄───────    ready byte 'R'
 *   RAIL_PROBE_BYTES in writes of the rail's MTU less the headers
 *                            ───────►    reads them all
 *                            ◄───────    sends as many back, the same way
 *
 * Both directions on one connection: a rail that drops big frames one way only (a port at a
 * smaller MTU drops what leaves through it) fails both probes of its pod, its own and its
 * neighbour's, and so is told apart from its neighbours. The rate is both transfers' bytes
 * over the time from 'R' to the last byte back. At the deadline, a transfer of which the
 * peer acknowledged no byte (SIOCOUTQ: the bytes still unacknowledged), or none of whose
 * bytes came back, is STALLED: the small frames of the handshake and the DHELLO went through
 * and the full-sized ones did not, which is what an MTU mismatch on the path does (a switch
 * port, a bridge or a VF at a smaller MTU drops them without a word). */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <linux/sockios.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#define HDRS 52 /* IPv4 + TCP with timestamps */
#define CHUNK_MAX (64u << 10)

enum { OUT_READY = 0, OUT_SEND, OUT_BACK, OUT_DONE };

struct out {
    int fd, state, mtu;
    size_t sent, back;
    long long acked; /* the most of sent seen acknowledged while the connection was sound */
    bool timed_out;  /* the connection broke with ETIMEDOUT */
    double t0;
    struct pf_fleet_rail_result *res;
};
struct in {
    int fd, task, mtu;
    size_t got, sent;
    bool done;
};

struct probe {
    struct pf_run *R;
    const struct pf_fleet_rail_task *t;
    size_t nt;
    const struct pf_fleet_rails *mine;
    struct pf_rdv_acceptor *A; /* the listeners and the connections still to say DHELLO */
    double deadline;
    struct out out[PF_FLEET_RAIL_TASKS];
    size_t nout;
    struct in in[PF_FLEET_RAIL_TASKS];
    size_t nin, expect;
    bool taken[PF_FLEET_RAIL_TASKS]; /* expect tasks matched by an accepted probe */
    uint8_t *buf;                    /* CHUNK_MAX bytes: what is sent, what is read */
};

static const struct pf_fleet_rail *rail_of(const struct pf_fleet_rails *mine, const char *net)
{
    for (int i = 0; i < mine->n; i++)
        if (strcmp(mine->r[i].net, net) == 0) return &mine->r[i];
    return NULL;
}

/* Dials every send task; a failure is the task's result at once. */
static void dial_all(struct probe *P, const struct pf_fleet_rails *mine,
                     struct pf_fleet_rail_result *res, size_t *nres)
{
    struct pf_rdv *rdv = P->R->pods->rdv;
    double connect_s = (P->deadline - pf_now()) / 2;
    for (size_t i = 0; i < P->nt; i++) {
        const struct pf_fleet_rail_task *t = &P->t[i];
        if (!t->send) {
            P->expect++;
            continue;
        }
        struct pf_fleet_rail_result *r = &res[(*nres)++];
        memset(r, 0, sizeof(*r));
        r->net = t->net;
        r->dst = t->peer;
        r->state = PF_RAIL_UNREACHABLE;
        const struct pf_fleet_rail *mr = rail_of(mine, t->name);
        if (!mr || !mr->ip[0]) {
            snprintf(r->why, sizeof(r->why), "this pod has no address on network %s", t->name);
            continue;
        }
        struct pf_rdv_addr a = {t->ip, t->port, mr->ip, mr->iface};
        int fd = pf_rdv_probe_dial_addr(rdv, PF_RUN_RAIL_ROUND + t->net, t->peer, &a,
                                        pf_now() + connect_s, r->why, sizeof(r->why));
        if (fd < 0) continue;
        struct out *o = &P->out[P->nout++];
        *o = (struct out){
            .fd = fd, .state = OUT_READY, .mtu = mr->mtu > HDRS + 64 ? mr->mtu : 1500, .res = r};
    }
}

/* A connection whose DHELLO (run, this rank: checked) comes from an expected probe's peer
 * for its round: taken, and told to start with the ready byte. */
static bool rails_take(void *arg, int fd, const struct pf_rdv_dhello *h)
{
    struct probe *P = arg;
    const struct pf_rdv *rdv = P->R->pods->rdv;
    const int *rk = pf_rdv_ranks(rdv);
    int pos = -1;
    for (int q = 0; q < pf_rdv_size(rdv); q++)
        if (rk[q] == h->src && q != pf_rdv_pos(rdv)) pos = q;
    for (size_t i = 0; pos >= 0 && i < P->nt; i++) {
        const struct pf_fleet_rail_task *t = &P->t[i];
        if (t->send || P->taken[i] || t->peer != pos || PF_RUN_RAIL_ROUND + t->net != h->round)
            continue;
        if (send(fd, "R", 1, MSG_NOSIGNAL) != 1) return false;
        P->taken[i] = true;
        const struct pf_fleet_rail *mr = rail_of(P->mine, t->name);
        int mtu = mr && mr->mtu > HDRS + 64 ? mr->mtu : 1500;
        P->in[P->nin++] = (struct in){fd, (int)i, mtu, 0, 0, false};
        return true;
    }
    return false;
}

static void out_done(struct out *o, int state, double gbps)
{
    o->res->state = state;
    o->res->gbps = gbps;
    o->state = OUT_DONE;
    close(o->fd);
    o->fd = -1;
}

/* Writes up to RAIL_PROBE_BYTES from *sent in writes of mtu less the headers: 1 when all
 * went, 0 when the socket is full, -1 on error. */
static int send_some(struct probe *P, int fd, size_t *sent, int mtu)
{
    size_t w = (size_t)mtu - HDRS;
    while (*sent < RAIL_PROBE_BYTES) {
        size_t k = RAIL_PROBE_BYTES - *sent < w ? RAIL_PROBE_BYTES - *sent : w;
        ssize_t r = send(fd, P->buf, k, MSG_NOSIGNAL);
        if (r < 0 && (errno == EAGAIN || errno == EINTR)) return 0;
        if (r == 0) errno = 0;
        if (r <= 0) return -1;
        *sent += (size_t)r;
    }
    return 1;
}

/* Reads what is there into *got: 1 when RAIL_PROBE_BYTES are in, 0 for more, -1 at the end
 * of the stream or on error. */
static int recv_some(struct probe *P, int fd, size_t *got)
{
    for (;;) {
        ssize_t k = recv(fd, P->buf, CHUNK_MAX, 0);
        if (k < 0 && (errno == EAGAIN || errno == EINTR)) return 0;
        if (k == 0) errno = 0; /* the end of the stream */
        if (k <= 0) return -1;
        *got += (size_t)k;
        if (*got >= RAIL_PROBE_BYTES) return 1;
    }
}

static void out_classify(struct out *o, const char *err);

/* What the peer has acknowledged so far (sent less SIOCOUTQ's unacknowledged bytes). Read
 * only while the connection is sound: once it broke, the kernel has emptied its send queue
 * and SIOCOUTQ says 0, which would count every byte ever written as acknowledged. */
static void out_acked(struct out *o)
{
    int q = 0;
    if (ioctl(o->fd, SIOCOUTQ, &q) < 0) return;
    long long a = (long long)o->sent - q;
    if (a > o->acked) o->acked = a;
}

/* One sender's events. */
static void out_event(struct probe *P, struct out *o)
{
    if (o->state == OUT_READY) {
        char c;
        ssize_t k = recv(o->fd, &c, 1, 0);
        if (k < 0 && (errno == EAGAIN || errno == EINTR)) return;
        if (k != 1 || c != 'R') {
            snprintf(o->res->why, sizeof(o->res->why),
                     "the peer closed the probe before it was ready");
            out_done(o, PF_RAIL_UNREACHABLE, 0);
            return;
        }
        o->state = OUT_SEND;
        o->t0 = pf_now();
    }
    int r = 0;
    if (o->state == OUT_SEND && (r = send_some(P, o->fd, &o->sent, o->mtu)) == 1)
        o->state = OUT_BACK;
    if (r >= 0) out_acked(o);
    if (o->state == OUT_BACK && r >= 0 && (r = recv_some(P, o->fd, &o->back)) == 1) {
        double s = pf_now() - o->t0;
        out_done(o, PF_RAIL_OK, 2.0 * RAIL_PROBE_BYTES * 8 / (s > 1e-6 ? s : 1e-6) / 1e9);
        return;
    }
    if (r < 0) {
        char e[128];
        int eno = errno;
        snprintf(e, sizeof(e), "%s", eno ? strerror(eno) : "the peer closed the connection");
        /* ETIMEDOUT: the kernel gave up retransmitting what the peer never acknowledged */
        o->timed_out = eno == ETIMEDOUT;
        out_classify(o, e);
    }
}

/* One receiver's events: all of the data in, then as much back. */
static void in_event(struct probe *P, struct in *x)
{
    int r = 0;
    if (x->got < RAIL_PROBE_BYTES) r = recv_some(P, x->fd, &x->got);
    if (r >= 0 && x->got >= RAIL_PROBE_BYTES) r = send_some(P, x->fd, &x->sent, x->mtu);
    if (r == 0) return;
    x->done = true; /* all back, or an error: closed at the end, not to cut what is queued */
}

/* What an unfinished sender got through, at the deadline (err NULL) or when its connection
 * broke (err says how): none of its data acknowledged, all of it but none of the peer's back,
 * or a connection the kernel timed out retransmitting full-sized segments, is a stall of
 * full-sized frames (small frames, the handshake and the ACKs, went through); any other
 * broken connection is unreachable; else the rate of what moved. */
static void out_classify(struct out *o, const char *err)
{
    if (!err) out_acked(o);
    double s = pf_now() - o->t0;
    long long acked = o->acked;
    char tail[160] = "";
    if (err) snprintf(tail, sizeof(tail), "; then: %s", err);
    if (acked <= 0) {
        snprintf(o->res->why, sizeof(o->res->why),
                 "connected and answered, but none of the %zu bytes sent in %d-byte writes "
                 "(MTU %d) was acknowledged in %.0f s%s",
                 o->sent, o->mtu - HDRS, o->mtu, s, tail);
        out_done(o, PF_RAIL_STALLED, 0);
    } else if (acked >= (long long)RAIL_PROBE_BYTES && o->back == 0) {
        snprintf(o->res->why, sizeof(o->res->why),
                 "all %d bytes went, but none of the peer's full-MTU-sized data came back in "
                 "%.0f s%s",
                 (int)RAIL_PROBE_BYTES, s, tail);
        out_done(o, PF_RAIL_STALLED, 0);
    } else if (err && o->timed_out) {
        snprintf(o->res->why, sizeof(o->res->why),
                 "connected and answered, %lld of the %zu bytes sent in %d-byte writes (MTU %d) "
                 "acknowledged and %zu came back, then the rest was never acknowledged: %s",
                 acked, o->sent, o->mtu - HDRS, o->mtu, o->back, err);
        out_done(o, PF_RAIL_STALLED, 0);
    } else if (err) {
        snprintf(o->res->why, sizeof(o->res->why), "after %lld bytes out and %zu back: %s", acked,
                 o->back, err);
        out_done(o, PF_RAIL_UNREACHABLE, 0);
    } else {
        snprintf(o->res->why, sizeof(o->res->why),
                 "%lld of %d bytes acknowledged and %zu came back in %.0f s", acked,
                 (int)RAIL_PROBE_BYTES, o->back, s);
        out_done(o, PF_RAIL_OK,
                 (double)(acked + (long long)o->back) * 8 / (s > 1e-6 ? s : 1e-6) / 1e9);
    }
}

/* At the deadline: what each unfinished sender got through. */
static void out_deadline(struct out *o, double probe_s)
{
    if (o->state == OUT_DONE) return;
    if (o->state == OUT_READY) {
        snprintf(o->res->why, sizeof(o->res->why),
                 "connected, but the peer did not answer within %.0f s", probe_s);
        out_done(o, PF_RAIL_UNREACHABLE, 0);
        return;
    }
    out_classify(o, NULL);
}

static bool all_done(const struct probe *P)
{
    for (size_t i = 0; i < P->nout; i++)
        if (P->out[i].state != OUT_DONE) return false;
    for (size_t i = 0; i < P->nin; i++)
        if (!P->in[i].done) return false;
    return P->nin == P->expect;
}

/* One round of poll over the listeners (and the connections still to say DHELLO), the
 * senders and the receivers. */
static void poll_once(struct probe *P)
{
    enum { NA = PF_RDV_PEND_MAX + PF_RDV_ACCEPT_LFDS };
    struct pollfd pfd[NA + 2 * PF_FLEET_RAIL_TASKS];
    void *who[NA + 2 * PF_FLEET_RAIL_TASKS];
    bool is_out[NA + 2 * PF_FLEET_RAIL_TASKS];
    double now = pf_now(), wake = now + 0.2 < P->deadline ? now + 0.2 : P->deadline;
    nfds_t na = 0, n = 0;
    if (P->nin < P->expect) na = (nfds_t)pf_rdv_acceptor_pollfds(P->A, pfd, now, &wake);
    n = na;
    for (size_t i = 0; i < P->nout; i++) {
        struct out *o = &P->out[i];
        if (o->state == OUT_DONE) continue;
        pfd[n] = (struct pollfd){o->fd, o->state == OUT_SEND ? POLLOUT : POLLIN, 0};
        who[n] = o;
        is_out[n++] = true;
    }
    for (size_t i = 0; i < P->nin; i++) {
        if (P->in[i].done) continue;
        pfd[n] =
            (struct pollfd){P->in[i].fd, P->in[i].got >= RAIL_PROBE_BYTES ? POLLOUT : POLLIN, 0};
        who[n] = &P->in[i];
        is_out[n++] = false;
    }
    if (poll(pfd, n, (int)((wake - now) * 1000) + 1) <= 0) return;
    /* the receivers and senders first: serving the listeners adds receivers */
    for (nfds_t i = na; i < n; i++) {
        if (!pfd[i].revents) continue;
        if (is_out[i])
            out_event(P, who[i]);
        else
            in_event(P, who[i]);
    }
    if (na) pf_rdv_acceptor_serve(P->A, pfd, (int)na, rails_take, P);
}

size_t run_rails_probe(struct pf_run *R, const int *lfd, int nlfd,
                       const struct pf_fleet_rails *mine, const struct pf_fleet_rail_task *t,
                       size_t nt, double probe_s, struct pf_fleet_rail_result *res)
{
    struct probe *P = pf_xcalloc(1, sizeof(*P));
    P->R = R;
    P->t = t;
    P->nt = nt < PF_FLEET_RAIL_TASKS ? nt : PF_FLEET_RAIL_TASKS;
    P->mine = mine;
    P->A = pf_xcalloc(1, sizeof(*P->A));
    pf_rdv_acceptor_init(P->A, R->pods->rdv, lfd, nlfd);
    P->deadline = pf_now() + probe_s;
    P->buf = pf_xcalloc(1, CHUNK_MAX);
    size_t nres = 0;
    dial_all(P, mine, res, &nres);
    while (!all_done(P) && pf_now() < P->deadline)
        poll_once(P);
    for (size_t i = 0; i < P->nout; i++)
        out_deadline(&P->out[i], probe_s);
    for (size_t i = 0; i < P->nin; i++)
        if (P->in[i].fd >= 0) close(P->in[i].fd);
    pf_rdv_acceptor_close(P->A);
    free(P->A);
    free(P->buf);
    free(P);
    return nres;
}
