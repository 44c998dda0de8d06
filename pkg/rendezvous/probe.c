/* A probe's own connection, where the data mesh has none: the confirmation rounds of the
 * link probes (pkg/run/probes.c) measure pairs the mesh does not join. The sender dials the
 * receiver's data port and opens with a DHELLO that names the run, both ranks and the round;
 * the receiver accepts until that one arrives, closing strangers and leftovers. */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
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
    if (r < 0) {
        close(fd);
        snprintf(why, nwhy, "probe connection: %s", pf_err_msg());
        return -1;
    }
    return fd;
}

/* Whether fd's first frame is the DHELLO of this run, from rank src to this rank, for this
 * round. Nothing follows it until this rank sends the ready byte, so reading it whole takes
 * no probe data. */
static bool probe_hello_ok(struct rdv_stage *S, int fd, int src, int round, double deadline)
{
    struct pf_rdv_conn c;
    pf_rdv_conn_init(&c, fd, "probe", false);
    data_auth(S, &c.auth);
    c.dir_in = PF_RDV_DIR_DATA;
    c.max_payload = 512;
    struct pf_rdv_msg m = {0};
    double d = pf_now() + 2 < deadline ? pf_now() + 2 : deadline;
    bool ok = false;
    if (pf_rdv_conn_recv(&c, &m, S->auth, d) == 0 && m.type == PF_RDV_DHELLO) {
        const struct pf_rdv_field *run = pf_rdv_fields_get(&m.f, "run");
        long long s = -1, dst = -1, rd = -1;
        pf_rdv_fields_int(&s, &m.f, "src");
        pf_rdv_fields_int(&dst, &m.f, "dst");
        pf_rdv_fields_int(&rd, &m.f, "round");
        ok = run && run->vlen == PF_RDV_NONCE && memcmp(run->val, S->ro.run, PF_RDV_NONCE) == 0 &&
             s == src && dst == S->rank && rd == round;
    }
    pf_rdv_msg_free(&m);
    c.fd = -1;
    pf_rdv_conn_close(&c);
    return ok;
}

/* A confirmation connection from position q, accepted on the data port before deadline;
 * strangers and leftovers are closed. */
static int probe_accept(struct rdv_stage *S, int round, int q, double deadline, char *why,
                        size_t nwhy)
{
    for (;;) {
        double now = pf_now();
        if (now >= deadline) break;
        struct pollfd pfd = {S->data_lfd, POLLIN, 0};
        int pr = poll(&pfd, 1, (int)((deadline - now) * 1000) + 1);
        if (pr <= 0) continue;
        int fd = accept4(S->data_lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            /* out of descriptors the listener stays readable: rest instead of spinning */
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM)
                (void)poll(NULL, 0, 100);
            continue;
        }
        if (probe_hello_ok(S, fd, S->rk[q], round, deadline)) return fd;
        close(fd);
    }
    char w[160];
    rdv_who(w, sizeof(w), S, S->rk[q]);
    snprintf(why, nwhy, "no probe connection from %s within the deadline", w);
    return -1;
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
