/* The data mesh: one TCP connection per probed ring shift, each direction, opened with a
 * DHELLO that names the run, the source, the destination and the shift. */
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
        pf_buf_init(&b, 4096);
        pf_rdv_put(&b, "run", S->ro.run, PF_RDV_NONCE);
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
    return 0;
}

/* A connection accepted on the data port, until its DHELLO is read. */
struct pend {
    int fd;
    uint8_t buf[PF_RDV_HDR + 512 + PF_RDV_MACLEN];
    size_t got;
};

/* A complete DHELLO frame f on q: true when it names this run, this rank and a shift whose
 * incoming connection is still open; then q's socket is taken. */
static bool mesh_take(struct rdv_stage *S, const struct pf_rdv_auth *da, struct pend *q,
                      const struct pf_rdv_frame *f)
{
    bool taken = false;
    struct pf_rdv_fields fl;
    long long src = -1, dst = -1, shift = -1;
    bool mac = !S->auth || pf_rdv_mac_ok(da, PF_RDV_DIR_DATA, f);
    if (f->type == PF_RDV_DHELLO && mac && pf_rdv_fields_decode(&fl, f->payload, f->len) == 0) {
        const struct pf_rdv_field *run = pf_rdv_fields_get(&fl, "run");
        pf_rdv_fields_int(&src, &fl, "src");
        pf_rdv_fields_int(&dst, &fl, "dst");
        pf_rdv_fields_int(&shift, &fl, "shift");
        if (run && run->vlen == PF_RDV_NONCE && memcmp(run->val, S->ro.run, PF_RDV_NONCE) == 0 &&
            dst == S->rank) {
            for (int k = 0; k < S->nshifts; k++) {
                int p = ((S->pos - S->shifts[k]) % S->n + S->n) % S->n;
                if (shift == S->shifts[k] && src == S->rk[p] && S->in_fd[k] < 0) {
                    S->in_fd[k] = q->fd;
                    taken = true;
                    q->fd = -1;
                }
            }
        }
        pf_rdv_fields_free(&fl);
    }
    return taken;
}

/* Reads what q has of its first frame: 1 when its socket was taken, 0 to keep waiting, -1
 * to drop it. Reads exactly one frame: the data that follows is not ours to take. */
static int mesh_read_pend(struct rdv_stage *S, const struct pf_rdv_auth *da, struct pend *q)
{
    size_t need = PF_RDV_HDR;
    if (q->got >= PF_RDV_HDR) {
        struct pf_rdv_frame f;
        int n = pf_rdv_frame_decode(&f, q->buf, q->got, 512);
        need = n < 0 ? 0 : PF_RDV_HDR + f.len + ((f.flags & PF_RDV_F_MAC) ? PF_RDV_MACLEN : 0);
    }
    ssize_t r = need > q->got ? recv(q->fd, q->buf + q->got, need - q->got, 0) : -1;
    bool drop = r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR) || need == 0;
    if (r > 0) q->got += (size_t)r;
    struct pf_rdv_frame f;
    int n = drop ? -1 : pf_rdv_frame_decode(&f, q->buf, q->got, 512);
    if (n < 0) return -1;
    if (n > 0) return mesh_take(S, da, q, &f) ? 1 : -1;
    return 0;
}

/* Accepts one connection per shift before deadline; strangers and garbage are dropped. */
static int mesh_accept_in(struct rdv_stage *S, const struct pf_rdv_auth *da, double deadline)
{
    struct pend pend[32];
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
            int got = mesh_read_pend(S, da, &pend[i]);
            if (got == 0) continue;
            have += got > 0;
            if (got < 0 && pend[i].fd >= 0) close(pend[i].fd);
            pend[i] = pend[--npend];
            i--;
        }
    }
    for (int i = 0; i < npend; i++)
        close(pend[i].fd);
    return have;
}

int rdv_mesh_connect(struct rdv_stage *S, char *err, size_t nerr)
{
    S->nshifts = pf_coll_probe_shifts(S->n, S->shifts);
    for (int k = 0; k < 3; k++)
        S->out_fd[k] = S->in_fd[k] = -1;
    double deadline = pf_now() + pf_clampd(rdv_left_s(S) * 0.2, 3, 30);
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
