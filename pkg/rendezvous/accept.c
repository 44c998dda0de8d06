/* One accept discipline for every data listener: the data mesh, the confirmation probes and
 * the grid all-reduce's own connections (the data port), and the rails' listeners. Accepts are
 * non-blocking; at most PF_RDV_PEND_MAX connections that have not sent their DHELLO are kept,
 * each for RDV_PEND_WAIT, and their first frames are read as they come, never one connection
 * at a time; over the cap the oldest past UNAUTH_GRACE is evicted; out of descriptors the
 * listeners rest for ACCEPT_REST. A stranger's idle connection costs one slot for a few
 * seconds and never holds up a real peer (docs/threat-model-rendezvous.md, "The data ports"). */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define RDV_PEND_WAIT 3.0 /* a connection must send its DHELLO within this */

void rdv_acceptor_init(struct pf_rdv_acceptor *A, const struct rdv_session *S, const int *lfd,
                       int nlfd)
{
    memset(A, 0, sizeof(*A));
    A->nlfd = nlfd < PF_RDV_ACCEPT_LFDS ? nlfd : PF_RDV_ACCEPT_LFDS;
    for (int i = 0; i < A->nlfd; i++)
        A->lfd[i] = lfd[i];
    A->auth.on = S->auth;
    A->auth.token = S->token;
    memcpy(A->auth.nonce_s, S->ro.run, PF_WIRE_NONCE);
    memcpy(A->run, S->ro.run, PF_WIRE_NONCE);
    A->rank = S->rank;
}

static void pend_drop(struct pf_rdv_acceptor *A, int i)
{
    if (A->pend[i].fd >= 0) close(A->pend[i].fd);
    A->pend[i] = A->pend[--A->npend];
}

static int pend_oldest(const struct pf_rdv_acceptor *A)
{
    int o = 0;
    for (int i = 1; i < A->npend; i++)
        if (A->pend[i].opened < A->pend[o].opened) o = i;
    return o;
}

int pf_rdv_acceptor_pollfds(struct pf_rdv_acceptor *A, struct pollfd *pfd, double now, double *wake)
{
    for (int i = A->npend - 1; i >= 0; i--) {
        if (now - A->pend[i].opened >= RDV_PEND_WAIT)
            pend_drop(A, i);
        else if (A->pend[i].opened + RDV_PEND_WAIT < *wake)
            *wake = A->pend[i].opened + RDV_PEND_WAIT;
    }
    int n = 0;
    for (int i = 0; i < A->npend; i++)
        pfd[n++] = (struct pollfd){A->pend[i].fd, POLLIN, 0};
    if (now >= A->rest_until) {
        for (int i = 0; i < A->nlfd; i++)
            pfd[n++] = (struct pollfd){A->lfd[i], POLLIN, 0};
    } else if (A->rest_until < *wake) {
        *wake = A->rest_until;
    }
    return n;
}

/* Accepts what waits on listener lfd. Over the cap the oldest pending connection goes, unless
 * it is younger than UNAUTH_GRACE (then the listeners rest); out of descriptors, one stranger
 * past its grace is shed and the listeners rest. */
static void accept_some(struct pf_rdv_acceptor *A, int lfd)
{
    for (int k = 0; k < 16; k++) {
        double now = pf_now();
        if (A->npend == PF_RDV_PEND_MAX) {
            int o = pend_oldest(A);
            if (now - A->pend[o].opened < UNAUTH_GRACE) {
                A->rest_until = now + ACCEPT_REST;
                return;
            }
            pend_drop(A, o);
        }
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) return;
            /* EMFILE, ENFILE, ENOBUFS, ENOMEM: the connection stays queued in the kernel */
            if ((errno == EMFILE || errno == ENFILE) && A->npend > 0) {
                int o = pend_oldest(A);
                if (now - A->pend[o].opened >= UNAUTH_GRACE) pend_drop(A, o);
            }
            A->rest_until = now + ACCEPT_REST;
            return;
        }
        struct pf_rdv_pend *q = &A->pend[A->npend++];
        q->fd = fd;
        q->opened = now;
        q->got = 0;
    }
}

/* Reads what q has of its first frame: 1 when take() took its socket, 0 to keep waiting, -1
 * to drop it. Reads exactly one frame: what follows is the taker's. */
static int read_pend(struct pf_rdv_acceptor *A, struct pf_rdv_pend *q, pf_rdv_take_fn take,
                     void *arg)
{
    size_t need = PF_WIRE_HDR;
    struct pf_wire_frame f;
    if (q->got >= PF_WIRE_HDR) {
        int n = pf_wire_frame_decode(&f, q->buf, q->got, PF_RDV_MAX_DHELLO);
        if (n < 0 || f.version != PF_WIRE_PROTO) return -1;
        need = PF_WIRE_HDR + f.len + ((f.flags & PF_WIRE_F_MAC) ? PF_WIRE_MACLEN : 0);
    }
    if (need > sizeof(q->buf)) return -1;
    ssize_t r = need > q->got ? recv(q->fd, q->buf + q->got, need - q->got, 0) : 0;
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) return -1;
    if (r > 0) q->got += (size_t)r;
    struct pf_rdv_dhello h;
    int n = pf_rdv_dhello_decode(&h, q->buf, q->got, &A->auth);
    if (n < 0) return -1;
    if (n == 0) return 0;
    if (memcmp(h.run, A->run, PF_WIRE_NONCE) != 0 || h.dst != A->rank) return -1;
    if (!take(arg, q->fd, &h)) return -1;
    q->fd = -1;
    return 1;
}

int pf_rdv_acceptor_serve(struct pf_rdv_acceptor *A, const struct pollfd *pfd, int n,
                          pf_rdv_take_fn take, void *arg)
{
    int taken = 0, np = A->npend < n ? A->npend : n;
    /* from the last: dropping one moves the last into its place, already seen */
    for (int i = np - 1; i >= 0; i--) {
        if (!(pfd[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        int got = read_pend(A, &A->pend[i], take, arg);
        if (got == 0) continue;
        taken += got > 0;
        pend_drop(A, i);
    }
    for (int i = np; i < n; i++)
        if (pfd[i].revents & (POLLIN | POLLERR)) accept_some(A, pfd[i].fd);
    return taken;
}

int pf_rdv_acceptor_run(struct pf_rdv_acceptor *A, int want, double deadline, pf_rdv_take_fn take,
                        void *arg)
{
    int have = 0;
    while (have < want) {
        double now = pf_now();
        if (now >= deadline) break;
        double wake = deadline;
        struct pollfd pfd[PF_RDV_PEND_MAX + PF_RDV_ACCEPT_LFDS];
        int n = pf_rdv_acceptor_pollfds(A, pfd, now, &wake);
        int pr = poll(pfd, (nfds_t)n, (int)((wake - now) * 1000) + 1);
        if (pr <= 0) continue;
        have += pf_rdv_acceptor_serve(A, pfd, n, take, arg);
    }
    return have;
}

void pf_rdv_acceptor_close(struct pf_rdv_acceptor *A)
{
    while (A->npend > 0)
        pend_drop(A, A->npend - 1);
}
