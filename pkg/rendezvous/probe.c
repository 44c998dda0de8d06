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

static void data_auth(const struct rdv_stage *S, struct pf_rdv_auth *da)
{
    memset(da, 0, sizeof(*da));
    da->on = S->auth;
    da->token = S->token;
    memcpy(da->nonce_s, S->ro.run, PF_RDV_NONCE);
}

/* Opens fd (connected to peer) with the DHELLO of round towards position q. */
static int hello_send(struct rdv_stage *S, int fd, const char *peer, int round, int q,
                      double deadline)
{
    struct pf_rdv_conn c;
    pf_rdv_conn_init(&c, fd, peer, true);
    data_auth(S, &c.auth);
    c.dir_out = PF_RDV_DIR_DATA;
    struct pf_buf b;
    pf_buf_init(&b, 4096);
    pf_rdv_put(&b, "run", S->ro.run, PF_RDV_NONCE);
    pf_rdv_put_int(&b, "src", S->rank);
    pf_rdv_put_int(&b, "dst", S->rk[q]);
    pf_rdv_put_int(&b, "shift", 0);
    pf_rdv_put_int(&b, "round", round);
    int r = pf_rdv_conn_send(&c, PF_RDV_DHELLO, b.data, b.len, deadline);
    pf_buf_free(&b);
    c.fd = -1; /* keep the socket */
    pf_rdv_conn_close(&c);
    return r;
}

/* A confirmation connection to position q: dial its data port, send the DHELLO. */
static int probe_dial(struct rdv_stage *S, int round, int q, double deadline, char *why,
                      size_t nwhy)
{
    char peer[96];
    int fd;
    if (pf_rdv_dial(&fd, peer, sizeof(peer), S->ro.peer[q].ip, S->ro.peer[q].port, deadline) < 0) {
        snprintf(why, nwhy, "probe connection to %s:%d: %s", S->ro.peer[q].ip, S->ro.peer[q].port,
                 pf_err_msg());
        return -1;
    }
    if (hello_send(S, fd, peer, round, q, deadline) < 0) {
        close(fd);
        snprintf(why, nwhy, "probe connection: %s", pf_err_msg());
        return -1;
    }
    return fd;
}

/* Whether fd's first frame is a DHELLO of this run to this rank; *src and *round say from
 * which rank, for which round. Nothing follows it until this rank sends the ready byte, so
 * reading it whole takes no probe data. */
static bool hello_read(struct rdv_stage *S, int fd, long long *src, long long *round,
                       double deadline)
{
    struct pf_rdv_conn c;
    pf_rdv_conn_init(&c, fd, "probe", false);
    data_auth(S, &c.auth);
    c.dir_in = PF_RDV_DIR_DATA;
    c.max_payload = 512;
    struct pf_rdv_msg m = {0};
    double d = S->su.waits.dhello > 0 ? pf_deadline_in(S->su.waits.dhello, deadline) : deadline;
    bool ok = false;
    *src = *round = -1;
    if (pf_rdv_conn_recv(&c, &m, S->auth, d) == 0 && m.type == PF_RDV_DHELLO) {
        const struct pf_rdv_field *run = pf_rdv_fields_get(&m.f, "run");
        long long dst = -1;
        pf_rdv_fields_int(src, &m.f, "src");
        pf_rdv_fields_int(&dst, &m.f, "dst");
        pf_rdv_fields_int(round, &m.f, "round");
        ok = run && run->vlen == PF_RDV_NONCE && memcmp(run->val, S->ro.run, PF_RDV_NONCE) == 0 &&
             dst == S->rank;
    }
    pf_rdv_msg_free(&m);
    c.fd = -1;
    pf_rdv_conn_close(&c);
    return ok;
}

/* Whether fd's first frame is the DHELLO of this run, from rank src to this rank, for this
 * round. */
static bool probe_hello_ok(struct rdv_stage *S, int fd, int src, int round, double deadline)
{
    long long s = -1, rd = -1;
    return hello_read(S, fd, &s, &rd, deadline) && s == src && rd == round;
}

/* The next connection on the data port, accepted before deadline (pf_rdv_accept); -1 once
 * the deadline passed. */
static int data_accept(const struct rdv_stage *S, double deadline)
{
    for (;;) {
        double now = pf_now();
        if (now >= deadline) return -1;
        struct pollfd pfd = {S->data_lfd, POLLIN, 0};
        if (poll(&pfd, 1, (int)((deadline - now) * 1000) + 1) <= 0) continue;
        int fd = pf_rdv_accept(S->data_lfd);
        if (fd >= 0) return fd;
    }
}

/* A confirmation connection from position q, accepted on the data port before deadline;
 * strangers and leftovers are closed. */
static int probe_accept(struct rdv_stage *S, int round, int q, double deadline, char *why,
                        size_t nwhy)
{
    int fd;
    while ((fd = data_accept(S, deadline)) >= 0) {
        if (probe_hello_ok(S, fd, S->rk[q], round, deadline)) return fd;
        close(fd);
    }
    char w[160];
    rdv_who(w, sizeof(w), S, S->rk[q]);
    snprintf(why, nwhy, "no probe connection from %s within the deadline", w);
    return -1;
}

/* The connection expected from pos[i] for round[i], i < n, still missing: its index, or -1. */
static int probe_expected(const struct rdv_stage *S, int n, const int *pos, const int *round,
                          const int *fds, long long src, long long rd)
{
    for (int i = 0; i < n; i++)
        if (fds[i] < 0 && S->rk[pos[i]] == src && round[i] == rd) return i;
    return -1;
}

int rdv_probe_accept_many(struct rdv_stage *S, int n, const int *pos, const int *round, int *fds,
                          double deadline, char *why, size_t nwhy)
{
    for (int i = 0; i < n; i++) {
        fds[i] = -1;
        if (pos[i] < 0 || pos[i] >= S->n || pos[i] == S->pos || S->data_lfd < 0) {
            snprintf(why, nwhy, "no probe connection from position %d", pos[i]);
            return n;
        }
    }
    int missing = n;
    while (missing > 0) {
        int fd = data_accept(S, deadline);
        if (fd < 0) break;
        long long src, rd;
        int i = hello_read(S, fd, &src, &rd, deadline)
                    ? probe_expected(S, n, pos, round, fds, src, rd)
                    : -1;
        if (i < 0) {
            close(fd);
            continue;
        }
        fds[i] = fd;
        missing--;
    }
    for (int i = 0; i < n && missing; i++) {
        if (fds[i] >= 0) continue;
        char w[160];
        rdv_who(w, sizeof(w), S, S->rk[pos[i]]);
        snprintf(why, nwhy, "no probe connection from %s within the deadline", w);
        break;
    }
    return missing;
}

int rdv_probe_connect(struct rdv_stage *S, int round, int pos, bool send, double deadline,
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

int rdv_probe_dial_addr(struct rdv_stage *S, int round, int pos, const struct pf_rdv_addr *a,
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

bool rdv_probe_hello(struct rdv_stage *S, int fd, int *pos, int *round, double deadline)
{
    long long src = -1, rd = -1;
    if (!hello_read(S, fd, &src, &rd, deadline) || rd < 0 || rd > INT32_MAX) return false;
    for (int q = 0; q < S->n; q++)
        if (S->rk[q] == src && q != S->pos) {
            *pos = q;
            *round = (int)rd;
            return true;
        }
    return false;
}
