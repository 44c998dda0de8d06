/* The data mesh: one TCP connection per probed ring shift, each direction, opened with a
 * DHELLO that names the run, the source, the destination and the shift, under an HMAC with
 * the token (docs/threat-model-rendezvous.md). The data port accepts as every data listener
 * does (accept.c). */
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
static int mesh_dial_out(struct rdv_session *S, const struct pf_wire_auth *da, double deadline,
                         char *err, size_t nerr)
{
    for (int k = 0; k < S->nshifts; k++) {
        int p = ((S->pos + S->shifts[k]) % S->n);
        char peer[96];
        int fd;
        const struct pf_rdv_peer *to = rdv_peer_addr(S, p, err, nerr);
        if (!to) return PF_ERR;
        if (pf_rdv_dial(&fd, peer, sizeof(peer), to->ip, to->port, deadline) < 0) {
            char w[160];
            rdv_who(w, sizeof(w), S, S->rk[p]);
            snprintf(err, nerr, "data connection to %s at %s:%d: %s", w, to->ip, to->port,
                     pf_err_msg());
            return PF_ERR;
        }
        struct pf_rdv_conn c;
        pf_rdv_conn_init(&c, fd, peer, true);
        c.auth = *da;
        c.dir_out = PF_WIRE_DIR_DATA;
        struct pf_buf b;
        pf_buf_init(&b, PF_RDV_MAX_DHELLO);
        struct pf_rdv_dhello h = {.src = S->rank, .dst = S->rk[p], .shift = S->shifts[k]};
        memcpy(h.run, S->ro.run, PF_WIRE_NONCE);
        pf_rdv_dhello_payload(&b, &h);
        int r = pf_rdv_conn_send(&c, PF_WIRE_DHELLO, b.data, b.len, deadline);
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

/* A DHELLO of this run to this rank: taken when it names a shift whose incoming connection
 * is still open, from the rank that far behind. */
static bool mesh_take(void *arg, int fd, const struct pf_rdv_dhello *h)
{
    struct rdv_session *S = arg;
    for (int k = 0; k < S->nshifts; k++) {
        int p = ((S->pos - S->shifts[k]) % S->n + S->n) % S->n;
        if (h->shift == S->shifts[k] && h->src == S->rk[p] && S->in_fd[k] < 0) {
            S->in_fd[k] = fd;
            return true;
        }
    }
    return false;
}

/* Accepts one connection per shift before deadline (accept.c: strangers, garbage and
 * connections without a DHELLO in time are dropped). */
static int mesh_accept_in(struct rdv_session *S, double deadline)
{
    struct pf_rdv_acceptor *A = pf_xcalloc(1, sizeof(*A));
    rdv_acceptor_init(A, S, &S->data_lfd, 1);
    int have = pf_rdv_acceptor_run(A, S->nshifts, deadline, mesh_take, S);
    pf_rdv_acceptor_close(A);
    S->mesh_accepted = A->accepted;
    S->mesh_taken = A->taken;
    S->mesh_closed = A->closed;
    free(A);
    return have;
}

int rdv_mesh_connect(struct rdv_session *S, double deadline, char *err, size_t nerr)
{
    for (int k = 0; k < 3; k++)
        S->out_fd[k] = S->in_fd[k] = -1;
    if (deadline <= 0 || deadline > S->cutoff) deadline = S->cutoff;
    struct pf_wire_auth da = {0};
    da.on = S->auth;
    da.token = S->token;
    memcpy(da.nonce_s, S->ro.run, PF_WIRE_NONCE);
    if (mesh_dial_out(S, &da, deadline, err, nerr) < 0) return PF_ERR;
    if (mesh_accept_in(S, deadline) < S->nshifts) {
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

void rdv_mesh_close(struct rdv_session *S)
{
    for (int k = 0; k < 3; k++) {
        if (S->out_fd[k] >= 0) close(S->out_fd[k]);
        if (S->in_fd[k] >= 0) close(S->in_fd[k]);
        S->out_fd[k] = S->in_fd[k] = -1;
    }
}
