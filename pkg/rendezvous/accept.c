/* One accept discipline for every data listener: the data mesh, the confirmation probes and
 * the grid all-reduce's own connections (the data port), and the rails' listeners. Accepts are
 * non-blocking and drain the listen queue (ACCEPT_BURST a wake-up, until EAGAIN): a real
 * peer's data connection sends its DHELLO as soon as it is connected, so what waits in the
 * queue behind thousands of strangers has its DHELLO there already and is taken at accept,
 * with no pending slot. At most A->cap connections that have not sent their DHELLO are kept
 * (PF_RDV_PEND_MAX, fewer near the descriptor limit: FD_MARGIN descriptors stay free), each
 * until RDV_PEND_WAIT after its handshake, their first frames read as they come, never one
 * connection at a time. A connection's age counts from its handshake (the kernel's, TCP_INFO),
 * not from the accept: one that sat silent in the queue past UNAUTH_GRACE has had its chance,
 * so over the cap the oldest goes at once; only when every pending one is younger than the
 * grace (a real peer's first frame may be on its way) do the listeners rest for ACCEPT_REST.
 * Out of descriptors, strangers past their grace are shed and the cap lowered. A stranger's
 * idle connection costs one slot for a few seconds and never holds up a real peer
 * (docs/threat-model-rendezvous.md, "The data ports"). */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stddef.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#define RDV_PEND_WAIT 3.0 /* a connection must send its DHELLO within this of its handshake */
#define ACCEPT_BURST 1024 /* accepts a wake-up at most: the pending connections are read too */
#define FD_MARGIN 32      /* descriptors the pending set leaves free for everything else */

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
    /* half the soft limit, less the margin: the rest is the process's own (the mesh, NCCL);
     * running out anyway lowers the cap further (accept_some) */
    A->cap = PF_RDV_PEND_MAX;
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur / 2 < (rlim_t)PF_RDV_PEND_MAX + FD_MARGIN)
        A->cap = rl.rlim_cur / 2 > FD_MARGIN + 1 ? (int)(rl.rlim_cur / 2) - FD_MARGIN : 1;
}

static void pend_drop(struct pf_rdv_acceptor *A, int i)
{
    if (A->pend[i].fd >= 0) {
        close(A->pend[i].fd);
        A->closed++;
    }
    A->pend[i] = A->pend[--A->npend];
}

static int pend_oldest(const struct pf_rdv_acceptor *A)
{
    int o = 0;
    for (int i = 1; i < A->npend; i++)
        if (A->pend[i].opened < A->pend[o].opened) o = i;
    return o;
}

/* Sheds the oldest pending connections past their grace until fewer than cap are left:
 * false when one younger than the grace is in the way. */
static bool pend_shed(struct pf_rdv_acceptor *A, int cap, double now)
{
    while (A->npend >= cap && A->npend > 0) {
        int o = pend_oldest(A);
        if (now - A->pend[o].opened < UNAUTH_GRACE) return false;
        pend_drop(A, o);
    }
    return A->npend < cap;
}

/* How long fd's connection has been silent, in seconds: the kernel's time since it last
 * received data, which for a connection that never sent any is the time since its handshake
 * completed (Linux, torvalds/linux v6.6: tcp_create_openreq_child in net/ipv4/tcp_minisocks.c
 * sets icsk_ack.lrcvtime when the handshake's last ACK makes the socket; tcp_get_info in
 * net/ipv4/tcp.c reports now - lrcvtime as tcpi_last_data_recv, in ms). 0 when unknown. */
static double silent_for(int fd)
{
    struct tcp_info ti;
    socklen_t len = sizeof(ti);
    memset(&ti, 0, sizeof(ti));
    if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 ||
        len < offsetof(struct tcp_info, tcpi_last_data_recv) + sizeof(ti.tcpi_last_data_recv))
        return 0;
    return ti.tcpi_last_data_recv / 1000.0;
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

/* Reads what q has of its first frame, as far as the socket has it: 1 when take() took its
 * socket, 0 to keep waiting, -1 to drop it. Reads exactly one frame: what follows is the
 * taker's. */
static int read_pend(struct pf_rdv_acceptor *A, struct pf_rdv_pend *q, pf_rdv_take_fn take,
                     void *arg)
{
    for (int step = 0; step < 3; step++) { /* the header, then the rest: at most two reads */
        size_t need = PF_WIRE_HDR;
        struct pf_wire_frame f;
        if (q->got >= PF_WIRE_HDR) {
            int n = pf_wire_frame_decode(&f, q->buf, q->got, PF_RDV_MAX_DHELLO);
            if (n < 0 || f.version != PF_WIRE_PROTO) return -1;
            need = PF_WIRE_HDR + f.len + ((f.flags & PF_WIRE_F_MAC) ? PF_WIRE_MACLEN : 0);
        }
        if (need > sizeof(q->buf)) return -1;
        ssize_t r = need > q->got ? recv(q->fd, q->buf + q->got, need - q->got, 0) : 0;
        if (r == 0 && need > q->got) return -1;
        if (r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return -1;
        if (r > 0) q->got += (size_t)r;
        struct pf_rdv_dhello h;
        int n = pf_rdv_dhello_decode(&h, q->buf, q->got, &A->auth);
        if (n < 0) return -1;
        if (n > 0) {
            if (memcmp(h.run, A->run, PF_WIRE_NONCE) != 0 || h.dst != A->rank) return -1;
            if (!take(arg, q->fd, &h)) return -1;
            q->fd = -1;
            A->taken++;
            return 1;
        }
        if (r <= 0) return 0; /* nothing more there yet */
    }
    return 0;
}

/* Accepts what waits on listener lfd, up to ACCEPT_BURST; offers each DHELLO already there
 * to take; how many it took. Over the cap the oldest pending connection goes, unless it is
 * younger than UNAUTH_GRACE (then the listeners rest); out of descriptors, strangers past
 * their grace are shed and the cap lowered to leave FD_MARGIN free, or the listeners rest. */
static int accept_some(struct pf_rdv_acceptor *A, int lfd, pf_rdv_take_fn take, void *arg)
{
    int taken = 0;
    for (int k = 0; k < ACCEPT_BURST; k++) {
        double now = pf_now();
        if (!pend_shed(A, A->cap, now)) {
            A->rest_until = now + ACCEPT_REST;
            return taken;
        }
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) return taken;
            /* EMFILE, ENFILE, ENOBUFS, ENOMEM: the connection stays queued in the kernel */
            if ((errno == EMFILE || errno == ENFILE) && A->npend > 0) {
                int cap = A->npend > FD_MARGIN ? A->npend - FD_MARGIN : 1;
                if (cap < A->cap) A->cap = cap;
                if (pend_shed(A, A->npend, now)) continue; /* one descriptor freed: go on */
            }
            A->rest_until = now + ACCEPT_REST;
            return taken;
        }
        A->accepted++;
        struct pf_rdv_pend *q = &A->pend[A->npend++];
        q->fd = fd;
        q->opened = now - silent_for(fd);
        q->got = 0;
        int got = read_pend(A, q, take, arg);
        if (got != 0) {
            taken += got > 0;
            pend_drop(A, A->npend - 1);
        }
    }
    return taken;
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
        if (pfd[i].revents & (POLLIN | POLLERR)) taken += accept_some(A, pfd[i].fd, take, arg);
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
