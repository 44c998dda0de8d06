/* A probe's own connection, where the data mesh has none: the confirmation rounds of the
 * link probes (pkg/run/probes.c) measure pairs the mesh does not join. The sender dials the
 * receiver's data port and opens with a DHELLO that names the run, both ranks and the round;
 * the receiver accepts until that one arrives, closing strangers and leftovers. */
#define _GNU_SOURCE
#include "internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void data_auth(const struct rdv_session *S, struct pf_wire_auth *da)
{
    memset(da, 0, sizeof(*da));
    da->on = S->auth;
    da->token = S->token;
    memcpy(da->nonce_s, S->ro.run, PF_WIRE_NONCE);
}

/* Opens fd (connected to peer) with the DHELLO of round towards position q. */
static int hello_send(struct rdv_session *S, int fd, const char *peer, int round, int q,
                      double deadline)
{
    struct pf_rdv_conn c;
    pf_rdv_conn_init(&c, fd, peer, true);
    data_auth(S, &c.auth);
    c.dir_out = PF_WIRE_DIR_DATA;
    struct pf_buf b;
    pf_buf_init(&b, 4096);
    pf_wire_put(&b, "run", S->ro.run, PF_WIRE_NONCE);
    pf_wire_put_int(&b, "src", S->rank);
    pf_wire_put_int(&b, "dst", S->rk[q]);
    pf_wire_put_int(&b, "shift", 0);
    pf_wire_put_int(&b, "round", round);
    int r = pf_rdv_conn_send(&c, PF_WIRE_DHELLO, b.data, b.len, deadline);
    pf_buf_free(&b);
    c.fd = -1; /* keep the socket */
    pf_rdv_conn_close(&c);
    return r;
}

/* A confirmation connection to position q: dial its data port, send the DHELLO. */
static int probe_dial(struct rdv_session *S, int round, int q, double deadline, char *why,
                      size_t nwhy)
{
    char peer[96];
    int fd;
    const struct pf_rdv_peer *to = rdv_peer_addr(S, q, why, nwhy);
    if (!to) return -1;
    if (pf_rdv_dial(&fd, peer, sizeof(peer), to->ip, to->port, deadline) < 0) {
        snprintf(why, nwhy, "probe connection to %s:%d: %s", to->ip, to->port, pf_err_msg());
        return -1;
    }
    if (hello_send(S, fd, peer, round, q, deadline) < 0) {
        close(fd);
        snprintf(why, nwhy, "probe connection: %s", pf_err_msg());
        return -1;
    }
    return fd;
}

/* The connections a probe waits for: from position pos[i] for round[i], i < n. */
struct probe_want {
    const struct rdv_session *S;
    int n;
    const int *pos, *round;
    int *fds;
};

/* Takes a connection whose DHELLO is one still missing. */
static bool probe_take(void *arg, int fd, const struct pf_rdv_dhello *h)
{
    struct probe_want *w = arg;
    for (int i = 0; i < w->n; i++)
        if (w->fds[i] < 0 && w->S->rk[w->pos[i]] == h->src && w->round[i] == h->round) {
            w->fds[i] = fd;
            return true;
        }
    return false;
}

int rdv_probe_accept_many(struct rdv_session *S, int n, const int *pos, const int *round, int *fds,
                          double deadline, char *why, size_t nwhy)
{
    for (int i = 0; i < n; i++) {
        fds[i] = -1;
        if (pos[i] < 0 || pos[i] >= S->n || pos[i] == S->pos || S->data_lfd < 0) {
            snprintf(why, nwhy, "no probe connection from position %d", pos[i]);
            return n;
        }
    }
    struct probe_want w = {S, n, pos, round, fds};
    struct pf_rdv_acceptor *A = pf_xcalloc(1, sizeof(*A));
    rdv_acceptor_init(A, S, &S->data_lfd, 1);
    int missing = n - pf_rdv_acceptor_run(A, n, deadline, probe_take, &w);
    pf_rdv_acceptor_close(A);
    free(A);
    for (int i = 0; i < n && missing; i++) {
        if (fds[i] >= 0) continue;
        char who[160];
        rdv_who(who, sizeof(who), S, S->rk[pos[i]]);
        snprintf(why, nwhy, "no probe connection from %s within the deadline", who);
        break;
    }
    return missing;
}

/* A confirmation connection from position q, accepted on the data port before deadline. */
static int probe_accept(struct rdv_session *S, int round, int q, double deadline, char *why,
                        size_t nwhy)
{
    int fd = -1;
    return rdv_probe_accept_many(S, 1, &q, &round, &fd, deadline, why, nwhy) == 0 ? fd : -1;
}

int rdv_probe_connect(struct rdv_session *S, int round, int pos, bool send, double deadline,
                      char *why, size_t nwhy)
{
    if (pos < 0 || pos >= S->n || pos == S->pos || S->data_lfd < 0) {
        snprintf(why, nwhy, "no probe connection to position %d", pos);
        return -1;
    }
    return send ? probe_dial(S, round, pos, deadline, why, nwhy)
                : probe_accept(S, round, pos, deadline, why, nwhy);
}

/* ---- a rail's probe (pkg/run/rails.c): dialled from the rail's own address and interface
 * to the peer's rail address, and its DHELLO read on the rails' own listener */

int rdv_probe_dial_addr(struct rdv_session *S, int round, int pos, const struct pf_rdv_addr *a,
                        double deadline, char *why, size_t nwhy)
{
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((uint16_t)a->port)};
    struct sockaddr_in from = {.sin_family = AF_INET};
    if (pos < 0 || pos >= S->n || pos == S->pos || inet_pton(AF_INET, a->ip, &to.sin_addr) != 1 ||
        inet_pton(AF_INET, a->src, &from.sin_addr) != 1) {
        snprintf(why, nwhy, "no probe connection to position %d at %s", pos, a->ip);
        return -1;
    }
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(why, nwhy, "socket: %s", strerror(errno));
        return -1;
    }
    /* out of the rail's interface whatever the routes say; without CAP_NET_RAW the source
     * address alone picks it */
    if (a->ifname && *a->ifname)
        (void)setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, a->ifname, (socklen_t)strlen(a->ifname));
    int r = bind(fd, (struct sockaddr *)&from, sizeof(from));
    if (r == 0) r = connect(fd, (struct sockaddr *)&to, sizeof(to));
    int err = r == 0 ? 0 : errno;
    if (r < 0 && err == EINPROGRESS) {
        struct pollfd p = {fd, POLLOUT, 0};
        double left = deadline - pf_now();
        socklen_t el = sizeof(err);
        err = ETIMEDOUT;
        if (left > 0 && poll(&p, 1, (int)(left * 1000) + 1) == 1 &&
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) < 0)
            err = errno;
    }
    char peer[96];
    snprintf(peer, sizeof(peer), "%s:%d", a->ip, a->port);
    if (err) {
        snprintf(why, nwhy, "connect from %s to %s: %s", a->src, peer, strerror(err));
        close(fd);
        return -1;
    }
    if (hello_send(S, fd, peer, round, pos, deadline) < 0) {
        snprintf(why, nwhy, "probe connection to %s: %s", peer, pf_err_msg());
        close(fd);
        return -1;
    }
    return fd;
}
