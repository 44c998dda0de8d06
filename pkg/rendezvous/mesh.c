/* The data mesh: one TCP connection per probed ring shift, each direction, opened with a
 * DHELLO that names the run, the source, the destination and the shift, under an HMAC with
 * the token (docs/threat-model-rendezvous.md). The data port takes at most PEND_MAX
 * connections that have not sent their DHELLO, each for PEND_WAIT, and never busy-waits. */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Opens one connection per probed shift to the rank that far ahead, sending a DHELLO. */
static int mesh_dial_out(struct rdv_stage *S, const struct pf_rdv_auth *da, double deadline,
                         char *err, size_t nerr)
{
    for (int k = 0; k < S->nshifts; k++) {
        int p = ((S->pos + S->shifts[k]) % S->n);
        char peer[96];
        int fd;
        if (pf_rdv_dial(&fd, peer, sizeof(peer), S->ro.peer[p].ip, S->ro.peer[p].port, deadline) <
            0) {
            char w[160];
            rdv_who(w, sizeof(w), S, S->rk[p]);
            snprintf(err, nerr, "data connection to %s at %s:%d: %s", w, S->ro.peer[p].ip,
                     S->ro.peer[p].port, pf_err_msg());
            return PF_ERR;
        }
        struct pf_rdv_conn c;
        pf_rdv_conn_init(&c, fd, peer, true);
        c.auth = *da;
        c.dir_out = PF_RDV_DIR_DATA;
        struct pf_buf b;
        pf_buf_init(&b, PF_RDV_MAX_DHELLO);
        struct pf_rdv_dhello h = {.src = S->rank, .dst = S->rk[p], .shift = S->shifts[k]};
        memcpy(h.run, S->ro.run, PF_RDV_NONCE);
        pf_rdv_dhello_payload(&b, &h);
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
    return 0;
}

/* A connection accepted on the data port, until its DHELLO is read. */
struct pend {
    int fd;
    double opened;
    uint8_t buf[PF_RDV_HDR + PF_RDV_MAX_DHELLO + PF_RDV_MACLEN];
    size_t got;
};

#define PEND_MAX 64   /* data connections not yet authenticated */
#define PEND_WAIT 3.0 /* a data connection must send its DHELLO within this */

/* A DHELLO h: true when it names this run, this rank and a shift whose incoming connection
 * is still open; then q's socket is taken. */
static bool mesh_take(struct rdv_stage *S, struct pend *q, const struct pf_rdv_dhello *h)
{
    if (memcmp(h->run, S->ro.run, PF_RDV_NONCE) != 0 || h->dst != S->rank) return false;
    for (int k = 0; k < S->nshifts; k++) {
        int p = ((S->pos - S->shifts[k]) % S->n + S->n) % S->n;
        if (h->shift == S->shifts[k] && h->src == S->rk[p] && S->in_fd[k] < 0) {
            S->in_fd[k] = q->fd;
            q->fd = -1;
            return true;
        }
    }
    return false;
}

/* Reads what q has of its first frame: 1 when its socket was taken, 0 to keep waiting, -1
 * to drop it. Reads exactly one frame: the data that follows is not ours to take. */
static int mesh_read_pend(struct rdv_stage *S, const struct pf_rdv_auth *da, struct pend *q)
{
    size_t need = PF_RDV_HDR;
    struct pf_rdv_frame f;
    if (q->got >= PF_RDV_HDR) {
        int n = pf_rdv_frame_decode(&f, q->buf, q->got, PF_RDV_MAX_DHELLO);
        if (n < 0 || f.version != PF_RDV_PROTO) return -1;
        need = PF_RDV_HDR + f.len + ((f.flags & PF_RDV_F_MAC) ? PF_RDV_MACLEN : 0);
    }
    if (need > sizeof(q->buf)) return -1;
    ssize_t r = need > q->got ? recv(q->fd, q->buf + q->got, need - q->got, 0) : 0;
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return -1;
    if (r > 0) q->got += (size_t)r;
    struct pf_rdv_dhello h;
    int n = pf_rdv_dhello_decode(&h, q->buf, q->got, da);
    if (n < 0) return -1;
    if (n == 0) return 0;
    return mesh_take(S, q, &h) ? 1 : -1;
}

static void pend_drop(struct pend *pend, int *npend, int i)
{
    if (pend[i].fd >= 0) close(pend[i].fd);
    pend[i] = pend[--*npend];
}

static int pend_oldest(const struct pend *pend, int npend)
{
    int o = 0;
    for (int i = 1; i < npend; i++)
        if (pend[i].opened < pend[o].opened) o = i;
    return o;
}

/* Accepts what waits on the data port. Over PEND_MAX the oldest pending connection goes,
 * unless it is younger than UNAUTH_GRACE; out of descriptors, the listener rests. Sets
 * *rest_until when the listener is to rest. */
static void mesh_accept_some(struct rdv_stage *S, struct pend *pend, int *npend, double *rest_until)
{
    for (int k = 0; k < 16; k++) {
        double now = pf_now();
        if (*npend == PEND_MAX) {
            int o = pend_oldest(pend, *npend);
            if (now - pend[o].opened < UNAUTH_GRACE) {
                *rest_until = now + ACCEPT_REST;
                return;
            }
            pend_drop(pend, npend, o);
        }
        int fd = accept4(S->data_lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) return;
            /* EMFILE, ENFILE, ENOBUFS, ENOMEM: the connection stays queued in the kernel;
             * free a descriptor held by the oldest stranger, and rest */
            if ((errno == EMFILE || errno == ENFILE) && *npend > 0) {
                int o = pend_oldest(pend, *npend);
                if (now - pend[o].opened >= UNAUTH_GRACE) pend_drop(pend, npend, o);
            }
            *rest_until = now + ACCEPT_REST;
            return;
        }
        pend[*npend].fd = fd;
        pend[*npend].opened = now;
        pend[*npend].got = 0;
        (*npend)++;
    }
}

/* Accepts one connection per shift before deadline; strangers and garbage are dropped, and
 * so is a connection that sends no DHELLO within PEND_WAIT. */
static int mesh_accept_in(struct rdv_stage *S, const struct pf_rdv_auth *da, double deadline)
{
    struct pend pend[PEND_MAX];
    int npend = 0, have = 0;
    double rest_until = 0;
    while (have < S->nshifts) {
        double now = pf_now();
        if (now >= deadline) break;
        double wake = deadline;
        for (int i = npend - 1; i >= 0; i--) {
            if (now - pend[i].opened >= PEND_WAIT)
                pend_drop(pend, &npend, i);
            else if (pend[i].opened + PEND_WAIT < wake)
                wake = pend[i].opened + PEND_WAIT;
        }
        struct pollfd pfd[PEND_MAX + 1];
        for (int i = 0; i < npend; i++)
            pfd[i] = (struct pollfd){pend[i].fd, POLLIN, 0};
        bool listen = now >= rest_until;
        int li = npend; /* the listener's place in pfd */
        if (listen)
            pfd[li] = (struct pollfd){S->data_lfd, POLLIN, 0};
        else if (rest_until < wake)
            wake = rest_until;
        int pr = poll(pfd, (nfds_t)npend + listen, (int)((wake - now) * 1000) + 1);
        if (pr <= 0) continue;
        /* from the last: dropping one moves the last into its place, already seen */
        for (int i = npend - 1; i >= 0; i--) {
            if (!(pfd[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
            int got = mesh_read_pend(S, da, &pend[i]);
            if (got == 0) continue;
            have += got > 0;
            pend_drop(pend, &npend, i);
        }
        if (listen && (pfd[li].revents & (POLLIN | POLLERR)))
            mesh_accept_some(S, pend, &npend, &rest_until);
    }
    for (int i = 0; i < npend; i++)
        close(pend[i].fd);
    return have;
}

int rdv_mesh_connect(struct rdv_stage *S, double deadline, char *err, size_t nerr)
{
    for (int k = 0; k < 3; k++)
        S->out_fd[k] = S->in_fd[k] = -1;
    if (deadline <= 0 || deadline > S->cutoff) deadline = S->cutoff;
    struct pf_rdv_auth da = {0};
    da.on = S->auth;
    da.token = S->token;
    memcpy(da.nonce_s, S->ro.run, PF_RDV_NONCE);
    if (mesh_dial_out(S, &da, deadline, err, nerr) < 0) return PF_ERR;
    if (mesh_accept_in(S, &da, deadline) < S->nshifts) {
        for (int k = 0; k < S->nshifts; k++) {
            if (S->in_fd[k] >= 0) continue;
            int p = ((S->pos - S->shifts[k]) % S->n + S->n) % S->n;
            char w[160];
            rdv_who(w, sizeof(w), S, S->rk[p]);
            snprintf(err, nerr, "no data connection from %s within the deadline", w);
            break;
        }
        return PF_ERR;
    }
    return 0;
}

void rdv_mesh_close(struct rdv_stage *S)
{
    for (int k = 0; k < 3; k++) {
        if (S->out_fd[k] >= 0) close(S->out_fd[k]);
        if (S->in_fd[k] >= 0) close(S->in_fd[k]);
        S->out_fd[k] = S->in_fd[k] = -1;
    }
}
