/* The watch a stage keeps on the pods while it works outside the rendezvous (the GPU stage
 * waiting on NCCL): has a control connection closed? Nothing is read, so the next step sees
 * the connection as it is; a connection with bytes waiting is alive. */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>

/* Closed: the peer's FIN or reset arrived (POLLRDHUP, POLLHUP, POLLERR, or a peek that reads
 * the end of the stream). */
static bool conn_closed(const struct pollfd *p)
{
    if (p->revents & (POLLHUP | POLLERR | POLLNVAL)) return true;
    if (!(p->revents & (POLLIN | POLLRDHUP))) return false;
    char b;
    ssize_t r = recv(p->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (r == 0) return true;
    return r < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

int rdv_peer_lost(struct rdv_session *S, char *who, size_t n)
{
    if (S->rank != 0) {
        if (!S->have_ctl || S->ctl.fd < 0 || S->root_lost) return -1;
        struct pollfd p = {S->ctl.fd, POLLIN | POLLRDHUP, 0};
        if (poll(&p, 1, 0) <= 0 || !conn_closed(&p)) return -1;
        rdv_who(who, n, S, 0);
        return 0;
    }
    struct pollfd *p = calloc(S->nsc ? S->nsc : 1, sizeof(*p));
    int *rank = calloc(S->nsc ? S->nsc : 1, sizeof(*rank));
    int lost = -1;
    nfds_t k = 0;
    if (!p || !rank) goto out;
    for (size_t i = 0; i < S->nsc; i++) {
        const struct rdv_sconn *c = &S->sc[i];
        if (!c->used || c->closing || c->rank < 0 || c->c.fd < 0 ||
            pf_wire_marked(&S->lost, c->rank))
            continue;
        p[k] = (struct pollfd){c->c.fd, POLLIN | POLLRDHUP, 0};
        rank[k++] = c->rank;
    }
    if (k && poll(p, k, 0) > 0)
        for (nfds_t i = 0; i < k && lost < 0; i++)
            if (conn_closed(&p[i])) lost = rank[i];
    if (lost >= 0) rdv_who(who, n, S, lost);
out:
    free(p);
    free(rank);
    return lost;
}
