/* One TCP connection carrying frames: a bounded input buffer, a queue of outgoing frames
 * (payloads may be shared between connections), every blocking wait under a deadline. And
 * the socket plumbing: resolve + connect, listen, addresses as text; and the data
 * connections' DHELLO. */
#define _GNU_SOURCE
#include "internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

struct pf_rdv_out {
    uint8_t hdr[PF_WIRE_HDR];
    uint8_t mac[PF_WIRE_MACLEN];
    size_t maclen;
    uint8_t *payload; /* owned, or shared's */
    struct pf_rdv_shared *shared;
    size_t len;
    size_t sent; /* bytes of hdr+payload+mac written */
};

struct pf_rdv_shared {
    size_t refs, len;
    bool hashed; /* digest holds the payload's SHA-256 (hashed at the first MAC) */
    uint8_t digest[PF_WIRE_DIGEST];
    uint8_t data[];
};

struct pf_rdv_shared *pf_rdv_shared_new(const void *payload, size_t len)
{
    struct pf_rdv_shared *s = pf_xmalloc(sizeof(*s) + (len ? len : 1));
    s->refs = 1;
    s->len = len;
    s->hashed = false;
    if (len) memcpy(s->data, payload, len);
    return s;
}

void pf_rdv_shared_drop(struct pf_rdv_shared *s)
{
    if (s && --s->refs == 0) free(s);
}

static void out_free(struct pf_rdv_out *o)
{
    if (o->shared)
        pf_rdv_shared_drop(o->shared);
    else
        free(o->payload);
    o->payload = NULL;
    o->shared = NULL;
}

void pf_rdv_msg_free(struct pf_rdv_msg *m)
{
    free(m->payload);
    pf_wire_fields_free(&m->f);
    memset(m, 0, sizeof(*m));
}

void pf_rdv_conn_init(struct pf_rdv_conn *c, int fd, const char *peer, bool to_root)
{
    memset(c, 0, sizeof(*c));
    c->fd = fd;
    pf_strcpy(c->peer, sizeof(c->peer), peer ? peer : "?");
    pf_buf_init(&c->in, 0);
    pf_rdv_conn_limit(c, PF_WIRE_MAX_PAYLOAD);
    c->dir_out = to_root ? PF_WIRE_DIR_TO_ROOT : PF_WIRE_DIR_FROM_ROOT;
    c->dir_in = to_root ? PF_WIRE_DIR_FROM_ROOT : PF_WIRE_DIR_TO_ROOT;
}

void pf_rdv_conn_limit(struct pf_rdv_conn *c, size_t max_payload)
{
    c->max_payload = max_payload;
    c->in.max = max_payload + PF_WIRE_HDR + PF_WIRE_MACLEN;
}

void pf_rdv_conn_close(struct pf_rdv_conn *c)
{
    if (c->fd >= 0) close(c->fd);
    c->fd = -1;
    pf_buf_free(&c->in);
    c->in_off = 0;
    for (size_t i = 0; i < c->noutq; i++)
        out_free(&c->outq[i]);
    free(c->outq);
    c->outq = NULL;
    c->noutq = c->capoutq = 0;
}

static struct pf_rdv_out *queue_slot(struct pf_rdv_conn *c, int type, size_t len)
{
    if (c->noutq == c->capoutq) {
        c->capoutq = c->capoutq ? c->capoutq * 2 : 4;
        c->outq = pf_xrealloc(c->outq, c->capoutq * sizeof(*c->outq));
    }
    struct pf_rdv_out *o = &c->outq[c->noutq++];
    memset(o, 0, sizeof(*o));
    int flags = c->auth.on ? PF_WIRE_F_MAC : 0;
    pf_wire_frame_header(o->hdr, type, flags, c->seq_out++, (uint32_t)len);
    o->len = len;
    return o;
}

static void queue_mac(struct pf_rdv_conn *c, struct pf_rdv_out *o)
{
    if (!c->auth.on) return;
    if (o->shared) {
        /* one payload on many connections: hashed once, each MAC then covers its digest */
        if (!o->shared->hashed) pf_wire_digest(o->shared->digest, o->payload, o->len);
        o->shared->hashed = true;
        pf_wire_mac_digest(o->mac, &c->auth, c->dir_out, o->hdr, o->shared->digest);
    } else {
        pf_wire_mac(o->mac, &c->auth, c->dir_out, o->hdr, o->payload, o->len);
    }
    o->maclen = PF_WIRE_MACLEN;
}

void pf_rdv_conn_queue_shared(struct pf_rdv_conn *c, int type, struct pf_rdv_shared *s)
{
    struct pf_rdv_out *o = queue_slot(c, type, s->len);
    s->refs++;
    o->shared = s;
    o->payload = s->data;
    queue_mac(c, o);
}

void pf_rdv_conn_queue(struct pf_rdv_conn *c, int type, const void *payload, size_t len)
{
    struct pf_rdv_out *o = queue_slot(c, type, len);
    if (len) {
        o->payload = pf_xmalloc(len);
        memcpy(o->payload, payload, len);
    }
    queue_mac(c, o);
}

bool pf_rdv_conn_pending(const struct pf_rdv_conn *c)
{
    return c->noutq > 0;
}

int pf_rdv_conn_flush_some(struct pf_rdv_conn *c)
{
    while (c->noutq) {
        struct pf_rdv_out *o = &c->outq[0];
        struct iovec iov[3];
        int n = 0;
        size_t s = o->sent;
        size_t parts[3] = {PF_WIRE_HDR, o->len, o->maclen};
        void *bases[3] = {o->hdr, o->payload, o->mac};
        for (int i = 0; i < 3; i++) {
            if (s >= parts[i]) {
                s -= parts[i];
                continue;
            }
            iov[n].iov_base = (uint8_t *)bases[i] + s;
            iov[n].iov_len = parts[i] - s;
            n++;
            s = 0;
        }
        struct msghdr mh;
        memset(&mh, 0, sizeof(mh));
        mh.msg_iov = iov;
        mh.msg_iovlen = (size_t)n;
        ssize_t w = n ? sendmsg(c->fd, &mh, MSG_NOSIGNAL) : 0;
        if (w < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) return 0;
            return pf_err_set(PF_ERR, "write to %s: %s", c->peer, strerror(errno));
        }
        o->sent += (size_t)w;
        if (o->sent == PF_WIRE_HDR + o->len + o->maclen) {
            out_free(o);
            memmove(c->outq, c->outq + 1, (c->noutq - 1) * sizeof(*c->outq));
            c->noutq--;
        }
    }
    return 1;
}

/* An input buffer larger than this is released once everything in it is consumed. */
#define PF_RDV_IN_KEEP 1024

int pf_rdv_conn_fill(struct pf_rdv_conn *c)
{
    /* drop consumed bytes first so the buffer never grows past one frame */
    if (c->in_off) {
        memmove(c->in.data, c->in.data + c->in_off, c->in.len - c->in_off);
        c->in.len -= c->in_off;
        c->in_off = 0;
    }
    /* never more than one frame can hold: what a peer sends past it stays in the kernel */
    size_t room = c->in.max - c->in.len;
    if (room == 0) return pf_err_set(PF_ETOOBIG, "%s sent more than a frame can hold", c->peer);
    if (c->max_payload <= PF_RDV_MAX_JOIN) {
        /* before authentication: the header first, then no more than the frame it announces,
         * so that a header announcing too much is refused before anything else is read */
        const uint8_t *h = (const uint8_t *)c->in.data;
        size_t want = PF_WIRE_HDR;
        if (c->in.len >= PF_WIRE_HDR)
            want += ((size_t)h[12] << 24 | (size_t)h[13] << 16 | (size_t)h[14] << 8 | h[15]) +
                    ((h[6] & PF_WIRE_F_MAC) ? PF_WIRE_MACLEN : 0);
        if (want > c->in.len && want - c->in.len < room) room = want - c->in.len;
    }
    char tmp[65536];
    for (;;) {
        ssize_t r = recv(c->fd, tmp, room < sizeof(tmp) ? room : sizeof(tmp), 0);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return PF_ETIMEOUT;
        if (r < 0) return pf_err_set(PF_ERR, "read from %s: %s", c->peer, strerror(errno));
        if (r == 0) return 0;
        if (pf_buf_add(&c->in, tmp, (size_t)r) < 0)
            return pf_err_set(PF_ETOOBIG, "%s sent more than a frame can hold", c->peer);
        return (int)r;
    }
}

int pf_rdv_conn_next(struct pf_rdv_conn *c, struct pf_rdv_msg *out, bool require_mac)
{
    memset(out, 0, sizeof(*out));
    size_t avail = c->in.len - c->in_off;
    if (avail == 0) return 0;
    const uint8_t *p = (const uint8_t *)c->in.data + c->in_off;
    struct pf_wire_frame f;
    int n = pf_wire_frame_decode(&f, p, avail, c->max_payload);
    if (n <= 0) return n;
    if (f.version != PF_WIRE_PROTO)
        return pf_err_set(PF_EPROTO, "protocol version %u (this preflight speaks %d)", f.version,
                          PF_WIRE_PROTO);
    if (f.seq != c->seq_in)
        return pf_err_set(PF_EINVAL,
                          "frame out of sequence (got %u, expected %u): replayed or "
                          "corrupted",
                          f.seq, c->seq_in);
    bool ok = false;
    if (c->auth.on && f.mac && f.type == PF_WIRE_JOIN && c->dir_in == PF_WIRE_DIR_TO_ROOT) {
        /* the JOIN carries the joiner's nonce; its MAC covers it */
        struct pf_wire_fields jf;
        if (pf_wire_fields_decode(&jf, f.payload, f.len) == 0) {
            const struct pf_wire_field *nf = pf_wire_fields_get(&jf, "nonce");
            if (nf && nf->vlen == PF_WIRE_NONCE) memcpy(c->auth.nonce_c, nf->val, PF_WIRE_NONCE);
            pf_wire_fields_free(&jf);
        }
    }
    if (c->auth.on && f.mac) ok = pf_wire_mac_ok(&c->auth, c->dir_in, &f);
    if (require_mac && !ok)
        return pf_err_set(
            PF_EINVAL,
            f.mac ? "%s frame fails its HMAC: the token differs, or its bytes changed on the way"
                  : "%s frame carries no HMAC: the peer has no token",
            pf_wire_type_name(f.type));
    c->seq_in++;
    out->type = f.type;
    out->len = f.len;
    out->payload = pf_xmalloc(f.len + 1);
    memcpy(out->payload, f.payload, f.len);
    out->payload[f.len] = 0;
    out->mac_ok = ok;
    out->had_mac = f.mac != NULL;
    c->in_off += (size_t)n;
    if (c->in_off == c->in.len && c->in.cap > PF_RDV_IN_KEEP) {
        /* every byte read is consumed and the frame grew the buffer past what the small
         * frames need: give it back, so that rank 0 does not hold one report-sized buffer a
         * rank for the rest of the meeting (docs/performance.md, check gang) */
        size_t max = c->in.max;
        pf_buf_free(&c->in);
        c->in.max = max;
        c->in_off = 0;
    }
    if (pf_wire_fields_decode(&out->f, out->payload, out->len) < 0) {
        pf_rdv_msg_free(out);
        return PF_EINVAL;
    }
    return 1;
}

static int wait_fd(int fd, short ev, double deadline)
{
    for (;;) {
        double left = deadline - pf_now();
        if (left <= 0) return PF_ETIMEOUT;
        struct pollfd p = {fd, ev, 0};
        int ms = left > 0.2 ? 200 : (int)(left * 1000) + 1;
        int r = poll(&p, 1, ms);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return pf_err_set(PF_ERR, "poll: %s", strerror(errno));
        if (r > 0) return 0;
    }
}

int pf_rdv_conn_send(struct pf_rdv_conn *c, int type, const void *payload, size_t len,
                     double deadline)
{
    pf_rdv_conn_queue(c, type, payload, len);
    for (;;) {
        int r = pf_rdv_conn_flush_some(c);
        if (r < 0) return r;
        if (r == 1) return 0;
        if ((r = wait_fd(c->fd, POLLOUT, deadline)) < 0)
            return r == PF_ETIMEOUT
                       ? pf_err_set(PF_ETIMEOUT, "%s is not reading (send timed out)", c->peer)
                       : r;
    }
}

int pf_rdv_conn_recv(struct pf_rdv_conn *c, struct pf_rdv_msg *out, bool require_mac,
                     double deadline)
{
    for (;;) {
        int r = pf_rdv_conn_next(c, out, require_mac);
        if (r != 0) return r < 0 ? r : 0;
        r = pf_rdv_conn_fill(c);
        if (r == 0) return pf_err_set(PF_ERR, "%s closed the connection", c->peer);
        if (r == PF_ETIMEOUT) {
            if ((r = wait_fd(c->fd, POLLIN, deadline)) < 0)
                return r == PF_ETIMEOUT
                           ? pf_err_set(PF_ETIMEOUT, "no answer from %s in time", c->peer)
                           : r;
            continue;
        }
        if (r < 0) return r;
    }
}

/* ---- sockets */

static void addr_text(char *out, size_t n, const struct sockaddr *sa, bool with_port)
{
    char ip[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &s4->sin_addr, ip, sizeof(ip));
        port = ntohs(s4->sin_port);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &s6->sin6_addr, ip, sizeof(ip));
        port = ntohs(s6->sin6_port);
        /* an IPv4-mapped address reads better as IPv4 */
        if (strncmp(ip, "::ffff:", 7) == 0 && strchr(ip + 7, '.'))
            memmove(ip, ip + 7, strlen(ip + 7) + 1);
    }
    if (!with_port)
        snprintf(out, n, "%s", ip);
    else if (strchr(ip, ':'))
        snprintf(out, n, "[%s]:%d", ip, port);
    else
        snprintf(out, n, "%s:%d", ip, port);
}

/* The socket's own or its peer's address as text, "?" when the kernel will not say. */
static void sock_text(char *out, size_t n, int fd, bool peer, bool with_port)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    int r = peer ? getpeername(fd, (struct sockaddr *)&ss, &sl)
                 : getsockname(fd, (struct sockaddr *)&ss, &sl);
    if (r < 0) {
        snprintf(out, n, "?");
        return;
    }
    addr_text(out, n, (struct sockaddr *)&ss, with_port);
}

void pf_rdv_sockname(char *out, size_t n, int fd, bool peer)
{
    sock_text(out, n, fd, peer, true);
}

void pf_rdv_sockaddr_ip(char *out, size_t n, int fd, bool peer)
{
    sock_text(out, n, fd, peer, false);
}

static void tune(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

int pf_rdv_dial(int *fd, char *peer, size_t npeer, const char *host, int port, double deadline)
{
    *fd = -1;
    char ps[16];
    snprintf(ps, sizeof(ps), "%d", port);
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_ADDRCONFIG;
    /* resolved under the dial's deadline, not resolv.conf's timeouts (pf_resolve_by) */
    int g = pf_resolve_by(&res, host, ps, &hints, deadline);
    if (g < 0) return g;
    int last = ECONNREFUSED;
    char where[96] = "";
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        int s = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (s < 0) {
            last = errno;
            continue;
        }
        tune(s);
        addr_text(where, sizeof(where), ai->ai_addr, true);
        int r = connect(s, ai->ai_addr, ai->ai_addrlen);
        if (r < 0 && errno != EINPROGRESS) {
            last = errno;
            close(s);
            continue;
        }
        if (r < 0) {
            r = wait_fd(s, POLLOUT, deadline);
            int err = 0;
            socklen_t el = sizeof(err);
            if (r == 0 && getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0) {
                r = 0;
            } else {
                last = r == PF_ETIMEOUT ? ETIMEDOUT : (err ? err : EIO);
                close(s);
                continue;
            }
        }
        *fd = s;
        snprintf(peer, npeer, "%s", where);
        freeaddrinfo(res);
        return 0;
    }
    freeaddrinfo(res);
    return pf_err_set(PF_ERR, "connect %s: %s", where[0] ? where : host, strerror(last));
}

int pf_rdv_listen(int *fd, const char *addr, int *port)
{
    *fd = -1;
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof(ss));
    socklen_t sl;
    int fam = AF_INET6;
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
    struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
    if (addr && *addr && inet_pton(AF_INET, addr, &s4->sin_addr) == 1) {
        fam = AF_INET;
        s4->sin_family = AF_INET;
        s4->sin_port = htons((uint16_t)*port);
        sl = sizeof(*s4);
    } else if (addr && *addr && inet_pton(AF_INET6, addr, &s6->sin6_addr) == 1) {
        s6->sin6_family = AF_INET6;
        s6->sin6_port = htons((uint16_t)*port);
        sl = sizeof(*s6);
    } else {
        s6->sin6_family = AF_INET6;
        s6->sin6_addr = in6addr_any;
        s6->sin6_port = htons((uint16_t)*port);
        sl = sizeof(*s6);
    }
    int s = socket(fam, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s < 0 && fam == AF_INET6 && !(addr && *addr)) {
        /* no IPv6 in this kernel: any IPv4 address */
        fam = AF_INET;
        memset(&ss, 0, sizeof(ss));
        s4->sin_family = AF_INET;
        s4->sin_port = htons((uint16_t)*port);
        sl = sizeof(*s4);
        s = socket(fam, SOCK_STREAM | SOCK_CLOEXEC, 0);
    }
    if (s < 0) return pf_err_set(PF_ERR, "socket: %s", strerror(errno));
    int one = 1, zero = 0;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (fam == AF_INET6) setsockopt(s, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    if (bind(s, (struct sockaddr *)&ss, sl) < 0) {
        int e = errno;
        close(s);
        return pf_err_set(PF_ERR, "listen on %s port %d: %s", addr && *addr ? addr : "any address",
                          *port, strerror(e));
    }
    /* the kernel caps the queue at net.core.somaxconn (4096 by default in each network
     * namespace); the listeners drain it at once (accept.c), so the host's setting decides */
    if (listen(s, 65535) < 0) {
        int e = errno;
        close(s);
        return pf_err_set(PF_ERR, "listen: %s", strerror(e));
    }
    fcntl(s, F_SETFL, fcntl(s, F_GETFL) | O_NONBLOCK);
    sl = sizeof(ss);
    getsockname(s, (struct sockaddr *)&ss, &sl);
    *port = ntohs(ss.ss_family == AF_INET ? s4->sin_port : s6->sin6_port);
    *fd = s;
    return 0;
}

/* ---- the data connection's opener */

void pf_rdv_dhello_payload(struct pf_buf *b, const struct pf_rdv_dhello *h)
{
    pf_wire_put(b, "run", h->run, PF_WIRE_NONCE);
    pf_wire_put_int(b, "src", h->src);
    pf_wire_put_int(b, "dst", h->dst);
    pf_wire_put_int(b, "shift", h->shift);
}

int pf_rdv_dhello_decode(struct pf_rdv_dhello *out, const uint8_t *buf, size_t len,
                         const struct pf_wire_auth *a)
{
    memset(out, 0, sizeof(*out));
    struct pf_wire_frame f;
    int n = pf_wire_frame_decode(&f, buf, len, PF_RDV_MAX_DHELLO);
    if (n <= 0) return n;
    if (f.version != PF_WIRE_PROTO)
        return pf_err_set(PF_EPROTO, "protocol version %u (this preflight speaks %d)", f.version,
                          PF_WIRE_PROTO);
    if (f.type != PF_WIRE_DHELLO || f.seq != 0)
        return pf_err_set(PF_EINVAL, "a %s frame at sequence %u, not a DHELLO",
                          pf_wire_type_name(f.type), f.seq);
    if (a->on && !pf_wire_mac_ok(a, PF_WIRE_DIR_DATA, &f))
        return pf_err_set(PF_EINVAL, f.mac ? "DHELLO fails its HMAC: another run or token"
                                           : "DHELLO carries no HMAC: the peer has no token");
    struct pf_wire_fields fl;
    if (pf_wire_fields_decode(&fl, f.payload, f.len) < 0) return PF_EINVAL;
    const struct pf_wire_field *run = pf_wire_fields_get(&fl, "run");
    int r = 0;
    if (!run || run->vlen != PF_WIRE_NONCE || pf_wire_fields_int(&out->src, &fl, "src") < 0 ||
        pf_wire_fields_int(&out->dst, &fl, "dst") < 0 ||
        pf_wire_fields_int(&out->shift, &fl, "shift") < 0)
        r = pf_err_set(PF_EINVAL, "DHELLO without its run, src, dst or shift");
    else
        memcpy(out->run, run->val, PF_WIRE_NONCE);
    if (r == 0 && pf_wire_fields_int(&out->round, &fl, "round") < 0) out->round = -1;
    pf_wire_fields_free(&fl);
    return r < 0 ? r : n;
}
