/* The ring all-reduce over TCP: reduce-scatter then all-gather, each segment cut in chunks;
 * a sender thread sends chunk c of step g as soon as the receiving thread has reduced chunk
 * c of step g-1, so sending, receiving and adding overlap. */
#define _GNU_SOURCE
#include "collective.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

void pf_coll_segment(size_t count, int n, int seg, size_t *off, size_t *len)
{
    size_t base = count / (size_t)n, extra = count % (size_t)n, s = (size_t)seg;
    *len = base + (s < extra ? 1 : 0);
    *off = s * base + (s < extra ? s : extra);
}

int pf_coll_steps(int n)
{
    return n > 1 ? 2 * (n - 1) : 0;
}

static int mod(int a, int n)
{
    int r = a % n;
    return r < 0 ? r + n : r;
}

int pf_coll_send_seg(int pos, int n, int g)
{
    return g < n - 1 ? mod(pos - g, n) : mod(pos - (g - (n - 1)) + 1, n);
}

int pf_coll_recv_seg(int pos, int n, int g)
{
    return g < n - 1 ? mod(pos - g - 1, n) : mod(pos - (g - (n - 1)), n);
}

size_t pf_coll_nchunks(size_t len, size_t chunk_elems)
{
    return len == 0 ? 0 : (len + chunk_elems - 1) / chunk_elems;
}

float pf_coll_seed_value(int rank, size_t j)
{
    return (float)((int)((j * 7u + (size_t)rank * 13u) & 63u) - 32);
}

void pf_coll_seed(float *data, size_t count, int rank)
{
    for (size_t j = 0; j < count; j++)
        data[j] = pf_coll_seed_value(rank, j);
}

size_t pf_coll_verify(const float *data, size_t count, const int *ranks, int n, size_t *first_bad)
{
    /* the value depends on (7j mod 64), so 64 expected sums cover every element */
    float expect[64];
    for (int a = 0; a < 64; a++) {
        long s = 0;
        for (int r = 0; r < n; r++)
            s += (long)(((unsigned)a + (unsigned)ranks[r] * 13u) & 63u) - 32;
        expect[a] = (float)s;
    }
    size_t bad = 0;
    *first_bad = count;
    for (size_t j = 0; j < count; j++) {
        if (data[j] != expect[(j * 7u) & 63u]) {
            if (!bad) *first_bad = j;
            bad++;
        }
    }
    return bad;
}

double pf_coll_busbw_allreduce(double algbw, int n)
{
    return n > 0 ? algbw * 2.0 * (n - 1) / n : 0;
}

const char *pf_coll_fail_name(enum pf_coll_fail_kind k)
{
    static const char *const names[] = {[PF_COLL_OK] = "ok",
                                        [PF_COLL_EOF] = "closed",
                                        [PF_COLL_RESET] = "reset",
                                        [PF_COLL_TIMEOUT] = "timeout"};
    return pf_name_of(names, PF_ARRAY_LEN(names), (int)k, "error");
}

/* ---- shared by the ring and the probes: I/O under a deadline and an abort flag */

struct xfer {
    atomic_int abort;
    double deadline;
};

static void set_fail(struct pf_coll_fail *f, enum pf_coll_fail_kind k, bool on_send,
                     const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void set_fail(struct pf_coll_fail *f, enum pf_coll_fail_kind k, bool on_send,
                     const char *fmt, ...)
{
    if (f->kind != PF_COLL_OK) return;
    f->kind = k;
    f->on_send = on_send;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->what, sizeof(f->what), fmt, ap);
    va_end(ap);
}

/* Waits for fd to be ready; PF_ETIMEOUT at the deadline, PF_ERR when aborted. */
static int wait_io(struct xfer *x, int fd, short ev)
{
    for (;;) {
        if (atomic_load(&x->abort)) return PF_ERR;
        double left = x->deadline - pf_now();
        if (left <= 0) return PF_ETIMEOUT;
        struct pollfd p = {fd, ev, 0};
        int ms = left > 0.05 ? 50 : (int)(left * 1000) + 1;
        int r = poll(&p, 1, ms);
        if (r > 0) return 0;
        if (r < 0 && errno != EINTR) return PF_ERR;
    }
}

/* wait_io, and a timeout is the transfer's failure: what says which way it stalled. */
static int wait_ready(struct xfer *x, int fd, short events, struct pf_coll_fail *f,
                      const char *what)
{
    int r = wait_io(x, fd, events);
    if (r == PF_ETIMEOUT) set_fail(f, PF_COLL_TIMEOUT, events == POLLOUT, "%s", what);
    return r;
}

static int send_all(struct xfer *x, int fd, const void *p, size_t n, struct pf_coll_fail *f)
{
    const char *c = p;
    while (n) {
        ssize_t w = send(fd, c, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            c += w;
            n -= (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int r = wait_ready(x, fd, POLLOUT, f, "sending timed out: the peer stopped reading");
            if (r < 0) return r;
            continue;
        }
        set_fail(f, errno == EPIPE || errno == ECONNRESET ? PF_COLL_RESET : PF_COLL_ERROR, true,
                 "send: %s", strerror(errno));
        return PF_ERR;
    }
    return 0;
}

/* Receives up to n bytes (at least one); returns the count or a negative code. */
static ssize_t recv_some(struct xfer *x, int fd, void *p, size_t n, struct pf_coll_fail *f)
{
    for (;;) {
        ssize_t r = recv(fd, p, n, MSG_DONTWAIT);
        if (r > 0) return r;
        if (r == 0) {
            set_fail(f, PF_COLL_EOF, false, "%s", "the peer closed the connection");
            return PF_ERR;
        }
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            int w = wait_ready(x, fd, POLLIN, f, "receiving timed out: the peer sent nothing");
            if (w < 0) return w;
            continue;
        }
        set_fail(f, errno == ECONNRESET ? PF_COLL_RESET : PF_COLL_ERROR, false, "recv: %s",
                 strerror(errno));
        return PF_ERR;
    }
}

/* ---- the ring */

/* d[i] += s[i], eight floats at a time (GCC/Clang vector types: SIMD on every target) so the
 * reduction keeps pace with the socket copies. Each element is one IEEE addition, exactly
 * what the scalar loop does. */
static void add_floats(float *restrict d, const float *restrict s, size_t n)
{
    typedef float v8 __attribute__((vector_size(32)));
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        v8 a, b;
        memcpy(&a, d + i, sizeof(a));
        memcpy(&b, s + i, sizeof(b));
        a += b;
        memcpy(d + i, &a, sizeof(a));
    }
    for (; i < n; i++)
        d[i] += s[i];
}

struct ring {
    struct xfer x;
    float *data;
    size_t count;
    int pos, n;
    int g0, g1; /* the steps run: [g0, g1) */
    int send_fd, recv_fd;
    size_t chunk;      /* elements */
    size_t *unit_base; /* first unit index of step g */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t done; /* receive units completed, in order */
    struct pf_coll_fail send_fail;
    int send_rc;
};

static void *ring_sender(void *arg)
{
    struct ring *R = arg;
    for (int g = R->g0; g < R->g1; g++) {
        size_t off, len;
        pf_coll_segment(R->count, R->n, pf_coll_send_seg(R->pos, R->n, g), &off, &len);
        size_t nc = pf_coll_nchunks(len, R->chunk);
        for (size_t c = 0; c < nc; c++) {
            /* the first step run sends what this rank holds already */
            if (g > R->g0) {
                size_t need = R->unit_base[g - 1 - R->g0] + c + 1;
                pthread_mutex_lock(&R->mu);
                while (R->done < need && !atomic_load(&R->x.abort)) {
                    struct timespec ts;
                    clock_gettime(CLOCK_REALTIME, &ts);
                    ts.tv_nsec += 50 * 1000000L;
                    if (ts.tv_nsec >= 1000000000L) {
                        ts.tv_sec++;
                        ts.tv_nsec -= 1000000000L;
                    }
                    pthread_cond_timedwait(&R->cv, &R->mu, &ts);
                }
                pthread_mutex_unlock(&R->mu);
                if (atomic_load(&R->x.abort)) {
                    R->send_rc = PF_ERR;
                    return NULL;
                }
            }
            size_t co = off + c * R->chunk;
            size_t cl = len - c * R->chunk < R->chunk ? len - c * R->chunk : R->chunk;
            int r = send_all(&R->x, R->send_fd, R->data + co, cl * sizeof(float), &R->send_fail);
            if (r < 0) {
                R->send_rc = r;
                atomic_store(&R->x.abort, 1);
                return NULL;
            }
        }
    }
    return NULL;
}

/* Receives n floats into dst, or, with tmp (room for n), into tmp and adds them to dst as
 * they complete, while they are in cache. 0, or the failure's negative code. */
static int recv_chunk(struct xfer *x, int fd, float *dst, size_t n, float *tmp,
                      struct pf_coll_fail *f)
{
    size_t want = n * sizeof(float), got = 0, added = 0;
    uint8_t *into = tmp ? (uint8_t *)tmp : (uint8_t *)dst;
    while (got < want) {
        ssize_t r = recv_some(x, fd, into + got, want - got, f);
        if (r < 0) return (int)r;
        got += (size_t)r;
        if (tmp) {
            size_t upto = got / sizeof(float);
            add_floats(dst + added, tmp + added, upto - added);
            added = upto;
        }
    }
    return 0;
}

/* The receiving side of steps [g0, g1): receives each chunk, adds it in reduce-scatter
 * steps, and tells the sender. 0, or the failure. */
static int ring_receive(struct ring *R, float *tmp, struct pf_coll_fail *recv_fail)
{
    int rc = 0;
    for (int g = R->g0; g < R->g1 && rc == 0; g++) {
        bool reduce = g < R->n - 1;
        size_t off, len;
        pf_coll_segment(R->count, R->n, pf_coll_recv_seg(R->pos, R->n, g), &off, &len);
        size_t nc = pf_coll_nchunks(len, R->chunk);
        for (size_t c = 0; c < nc && rc == 0; c++) {
            size_t co = off + c * R->chunk;
            size_t cl = len - c * R->chunk < R->chunk ? len - c * R->chunk : R->chunk;
            rc = recv_chunk(&R->x, R->recv_fd, R->data + co, cl, reduce ? tmp : NULL, recv_fail);
            if (rc) break;
            pthread_mutex_lock(&R->mu);
            R->done++;
            pthread_cond_signal(&R->cv);
            pthread_mutex_unlock(&R->mu);
        }
    }
    return rc;
}

/* ---- the ring in one thread, for segments of one chunk at most
 *
 * With a thousand ranks the segments are small and a step is mostly waiting: handing each
 * one from the receiving thread to the sending thread costs two wake-ups per step on every
 * rank, which on a host whose cores are shared is most of the time. One thread that sends
 * and receives without blocking (poll on both) does the same steps with one. */

struct single {
    float *data, *tmp;
    size_t count;
    int pos, n, gs, gr; /* the step being sent, the step being received */
    size_t sent, got, added;
};

/* Sends what it can of step gs: 1 when the step is done, 0 when the socket is full, or the
 * failure. */
static int single_send(struct single *G, int fd, struct pf_coll_fail *f)
{
    size_t off, len;
    pf_coll_segment(G->count, G->n, pf_coll_send_seg(G->pos, G->n, G->gs), &off, &len);
    size_t want = len * sizeof(float);
    while (G->sent < want) {
        ssize_t w = send(fd, (const char *)(G->data + off) + G->sent, want - G->sent,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w > 0) {
            G->sent += (size_t)w;
            continue;
        }
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
        set_fail(f, errno == EPIPE || errno == ECONNRESET ? PF_COLL_RESET : PF_COLL_ERROR, true,
                 "send: %s", strerror(errno));
        return PF_ERR;
    }
    G->gs++;
    G->sent = 0;
    return 1;
}

/* Receives what has come of step gr, adding it in reduce-scatter: 1 when the step is done,
 * 0 when nothing more is there, or the failure. */
static int single_recv(struct single *G, int fd, struct pf_coll_fail *f)
{
    size_t off, len;
    pf_coll_segment(G->count, G->n, pf_coll_recv_seg(G->pos, G->n, G->gr), &off, &len);
    bool reduce = G->gr < G->n - 1;
    size_t want = len * sizeof(float);
    uint8_t *dst = reduce ? (uint8_t *)G->tmp : (uint8_t *)(G->data + off);
    while (G->got < want) {
        ssize_t r = recv(fd, dst + G->got, want - G->got, MSG_DONTWAIT);
        if (r == 0) {
            set_fail(f, PF_COLL_EOF, false, "%s", "the peer closed the connection");
            return PF_ERR;
        }
        if (r < 0 && errno == EINTR) continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
        if (r < 0) {
            set_fail(f, errno == ECONNRESET ? PF_COLL_RESET : PF_COLL_ERROR, false, "recv: %s",
                     strerror(errno));
            return PF_ERR;
        }
        G->got += (size_t)r;
        if (reduce) {
            size_t upto = G->got / sizeof(float);
            add_floats(G->data + off + G->added, G->tmp + G->added, upto - G->added);
            G->added = upto;
        }
    }
    G->gr++;
    G->got = G->added = 0;
    return 1;
}

/* Steps [g0, g1) of R in this thread; a step is sent once the one before it has arrived. */
static int ring_single(struct ring *R, float *tmp, struct pf_coll_fail *fail)
{
    struct single G = {R->data, tmp, R->count, R->pos, R->n, R->g0, R->g0, 0, 0, 0};
    while (G.gs < R->g1 || G.gr < R->g1) {
        int r = 0;
        bool can_send = G.gs < R->g1 && G.gs <= G.gr;
        if (can_send && (r = single_send(&G, R->send_fd, fail)) != 0) {
            if (r < 0) return r;
            continue;
        }
        if (G.gr < R->g1 && (r = single_recv(&G, R->recv_fd, fail)) != 0) {
            if (r < 0) return r;
            continue;
        }
        double left = R->x.deadline - pf_now();
        if (left <= 0) {
            bool recv_wait = G.gr < R->g1;
            set_fail(fail, PF_COLL_TIMEOUT, !recv_wait, "%s",
                     recv_wait ? "receiving timed out: the peer sent nothing"
                               : "sending timed out: the peer stopped reading");
            return PF_ETIMEOUT;
        }
        struct pollfd p[2] = {{R->send_fd, POLLOUT, 0}, {R->recv_fd, POLLIN, 0}};
        int ms = left > 0.05 ? 50 : (int)(left * 1000) + 1;
        int pr = G.gr < R->g1 ? poll(p + !can_send, can_send ? 2 : 1, ms) : poll(p, 1, ms);
        if (pr < 0 && errno != EINTR) {
            set_fail(fail, PF_COLL_ERROR, false, "poll: %s", strerror(errno));
            return PF_ERR;
        }
    }
    return 0;
}

int pf_coll_ring_run(float *data, size_t count, int pos, int n, int send_fd, int recv_fd,
                     size_t chunk_bytes, int first_step, int end_step, double deadline,
                     struct pf_coll_fail *fail)
{
    memset(fail, 0, sizeof(*fail));
    int steps = pf_coll_steps(n);
    if (first_step < 0) first_step = 0;
    if (end_step > steps) end_step = steps;
    if (n <= 1 || count == 0 || first_step >= end_step) return 0;
    struct ring R;
    memset(&R, 0, sizeof(R));
    atomic_init(&R.x.abort, 0);
    R.x.deadline = deadline;
    R.data = data;
    R.count = count;
    R.pos = pos;
    R.n = n;
    R.g0 = first_step;
    R.g1 = end_step;
    R.send_fd = send_fd;
    R.recv_fd = recv_fd;
    R.chunk = chunk_bytes / sizeof(float);
    if (R.chunk == 0) R.chunk = 1;
    if ((count + (size_t)n - 1) / (size_t)n <= R.chunk) {
        /* every segment is one chunk at most: nothing to pipeline within a step */
        float *t = pf_xmalloc(R.chunk * sizeof(float));
        int r = ring_single(&R, t, fail);
        free(t);
        return r;
    }
    R.unit_base = pf_xcalloc((size_t)(end_step - first_step) + 1, sizeof(size_t));
    for (int g = first_step; g < end_step; g++) {
        size_t off, len;
        pf_coll_segment(count, n, pf_coll_recv_seg(pos, n, g), &off, &len);
        R.unit_base[g - first_step + 1] =
            R.unit_base[g - first_step] + pf_coll_nchunks(len, R.chunk);
    }
    pthread_mutex_init(&R.mu, NULL);
    pthread_cond_init(&R.cv, NULL);
    float *tmp = pf_xmalloc(R.chunk * sizeof(float));
    pthread_t th;
    struct pf_coll_fail recv_fail = {0};
    if (pthread_create(&th, NULL, ring_sender, &R) != 0) {
        free(tmp);
        free(R.unit_base);
        snprintf(fail->what, sizeof(fail->what), "cannot start the sender thread");
        fail->kind = PF_COLL_ERROR;
        return pf_err_set(PF_ERR, "cannot start the sender thread");
    }
    int rc = ring_receive(&R, tmp, &recv_fail);
    if (rc) atomic_store(&R.x.abort, 1);
    pthread_join(th, NULL);
    /* the first failure is the one that matters: the other direction was aborted by it */
    if (recv_fail.kind != PF_COLL_OK && (rc || R.send_rc == 0 || R.send_fail.kind == PF_COLL_OK))
        *fail = recv_fail;
    else if (R.send_fail.kind != PF_COLL_OK)
        *fail = R.send_fail;
    if (R.send_rc && !rc) rc = R.send_rc;
    pthread_cond_destroy(&R.cv);
    pthread_mutex_destroy(&R.mu);
    free(tmp);
    free(R.unit_base);
    if (rc == 0) return 0;
    if (fail->kind == PF_COLL_OK) {
        fail->kind = PF_COLL_ERROR;
        snprintf(fail->what, sizeof(fail->what), "aborted");
    }
    return fail->kind == PF_COLL_TIMEOUT ? PF_ETIMEOUT : PF_ERR;
}

int pf_coll_allreduce(float *data, size_t count, int pos, int n, int send_fd, int recv_fd,
                      size_t chunk_bytes, double deadline, struct pf_coll_fail *fail)
{
    return pf_coll_ring_run(data, count, pos, n, send_fd, recv_fd, chunk_bytes, 0, pf_coll_steps(n),
                            deadline, fail);
}

/* ---- one way: the fold of the grid all-reduce (grid.c) */

int pf_coll_send_floats(const float *data, size_t count, int fd, double deadline,
                        struct pf_coll_fail *fail)
{
    memset(fail, 0, sizeof(*fail));
    struct xfer x;
    atomic_init(&x.abort, 0);
    x.deadline = deadline;
    int r = send_all(&x, fd, data, count * sizeof(float), fail);
    return r == 0 ? 0 : fail->kind == PF_COLL_TIMEOUT ? PF_ETIMEOUT : PF_ERR;
}

int pf_coll_recv_floats(float *data, size_t count, bool add, int fd, size_t chunk_bytes,
                        double deadline, struct pf_coll_fail *fail)
{
    memset(fail, 0, sizeof(*fail));
    struct xfer x;
    atomic_init(&x.abort, 0);
    x.deadline = deadline;
    size_t chunk = chunk_bytes / sizeof(float);
    if (chunk == 0) chunk = 1;
    float *tmp = add ? pf_xmalloc(chunk * sizeof(float)) : NULL;
    int rc = 0;
    for (size_t co = 0; co < count && rc == 0; co += chunk) {
        size_t cl = count - co < chunk ? count - co : chunk;
        rc = recv_chunk(&x, fd, data + co, cl, tmp, fail);
    }
    free(tmp);
    return rc == 0 ? 0 : fail->kind == PF_COLL_TIMEOUT ? PF_ETIMEOUT : PF_ERR;
}

/* ---- probes */

/* A probe streams from and into one block, whatever its size: a thousand ranks on one host
 * must not each hold a probe's bytes. */
#define PROBE_BLOCK (256u << 10)

struct probe_send {
    struct xfer *x;
    int fd;
    size_t nbytes;
    struct pf_coll_fail fail;
    int rc;
};

/* The bytes of a probe that warm its connection up, untimed: a fresh connection starts in
 * TCP slow start, which on a host whose round trips are long (a loaded scheduler) is a good
 * part of a short probe, while a slow path stays slow once warm. */
static size_t probe_warm(size_t nbytes)
{
    return nbytes / 4;
}

/* Sends n bytes from buf (blk bytes, reused) unless failed already. */
static void probe_send_n(struct probe_send *S, const char *buf, size_t blk, size_t n)
{
    while (n && S->rc == 0) {
        size_t k = n < blk ? n : blk;
        S->rc = send_all(S->x, S->fd, buf, k, &S->fail);
        n -= k;
    }
}

/* Waits for the receiver's ready byte: a sender that starts before its receiver reads fills
 * the socket buffers, and the receiver would then time a burst of buffered bytes. */
static void probe_wait_ready(struct probe_send *S)
{
    char go;
    if (S->rc) return;
    ssize_t g = recv_some(S->x, S->fd, &go, 1, &S->fail);
    if (g < 0) {
        S->fail.on_send = true;
        S->rc = (int)g;
    }
}

static void *probe_sender(void *arg)
{
    struct probe_send *S = arg;
    static const size_t blk = PROBE_BLOCK;
    char *buf = pf_xmalloc(blk);
    memset(buf, 0x5a, blk);
    size_t warm = probe_warm(S->nbytes);
    /* ready, the warm-up, ready again (nothing is in flight), the timed part */
    probe_wait_ready(S);
    probe_send_n(S, buf, blk, warm);
    if (warm) probe_wait_ready(S);
    probe_send_n(S, buf, blk, S->nbytes - warm);
    free(buf);
    return NULL;
}

int pf_coll_probe(struct pf_coll_probe_res *out, int send_fd, int recv_fd, size_t nbytes,
                  double deadline, struct pf_coll_fail *fail)
{
    return pf_coll_probe_pair(out, send_fd, nbytes, recv_fd, nbytes, deadline, fail);
}

/* Reads until *got reaches want (or the deadline / a failure): 0, or the failure. */
static int probe_read_to(struct xfer *x, int fd, char *buf, size_t blk, size_t *got, size_t want,
                         double *t_last, struct pf_coll_fail *rf)
{
    while (*got < want) {
        size_t k = want - *got < blk ? want - *got : blk;
        ssize_t r = recv_some(x, fd, buf, k, rf);
        if (r < 0) return (int)r;
        *t_last = pf_now();
        *got += (size_t)r;
    }
    return 0;
}

/* Receives nbytes on recv_fd: a ready byte, the warm-up (untimed), a second ready byte, then
 * the timed part, from that byte to the last (so nothing was buffered before the clock
 * started; the time includes one round trip). The result in out. */
static int probe_receive(struct pf_coll_probe_res *out, struct xfer *x, int recv_fd, size_t nbytes,
                         double deadline, struct pf_coll_fail *rf)
{
    static const size_t blk = PROBE_BLOCK;
    char *buf = pf_xmalloc(blk);
    size_t got = 0, warm = probe_warm(nbytes);
    double t_last = 0, t0 = pf_now();
    /* ready: the sender at the other end starts now (a failed write shows as the recv's
     * end of stream or reset below) */
    (void)!send(recv_fd, "R", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    int rc = probe_read_to(x, recv_fd, buf, blk, &got, warm, &t_last, rf);
    bool timed = rc == 0 && warm > 0;
    if (timed) {
        t0 = pf_now();
        (void)!send(recv_fd, "R", 1, MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    if (rc == 0) rc = probe_read_to(x, recv_fd, buf, blk, &got, nbytes, &t_last, rf);
    free(buf);
    if (rc == PF_ETIMEOUT) {
        /* a slow link is a measurement, not a failure: report what arrived */
        rc = 0;
        memset(rf, 0, sizeof(*rf));
    }
    out->complete = got == nbytes;
    out->received = got;
    /* what arrived after the clock started, until the last byte, or until the deadline when
     * it cut the probe (the rate of what arrived stands, over the whole window) */
    size_t n = got - (timed ? warm : 0);
    double until = out->complete ? (t_last > t0 ? t_last : pf_now()) : deadline;
    out->bytes = n;
    if (n && until > t0) {
        out->seconds = until - t0;
        out->gbps = (double)n * 8.0 / out->seconds / 1e9;
    }
    return rc;
}

int pf_coll_probe_pair(struct pf_coll_probe_res *out, int send_fd, size_t send_bytes, int recv_fd,
                       size_t recv_bytes, double deadline, struct pf_coll_fail *fail)
{
    memset(out, 0, sizeof(*out));
    memset(fail, 0, sizeof(*fail));
    struct xfer x;
    atomic_init(&x.abort, 0);
    x.deadline = deadline;
    struct probe_send S = {&x, send_fd, send_bytes, {0}, 0};
    pthread_t th;
    bool sending = send_fd >= 0;
    if (sending && pthread_create(&th, NULL, probe_sender, &S) != 0)
        return pf_err_set(PF_ERR, "cannot start the sender thread");
    struct pf_coll_fail rf = {0};
    int rc = recv_fd >= 0 ? probe_receive(out, &x, recv_fd, recv_bytes, deadline, &rf) : 0;
    if (rc || (recv_fd >= 0 && !out->complete)) atomic_store(&x.abort, 1);
    if (sending) pthread_join(th, NULL);
    if (rc) {
        *fail = rf;
        return rc;
    }
    if (sending && S.rc && S.fail.kind != PF_COLL_OK && S.fail.kind != PF_COLL_TIMEOUT) {
        *fail = S.fail;
        return PF_ERR;
    }
    return 0;
}

int pf_coll_probe_shifts(int n, int out[3])
{
    int k = pf_coll_survey_rounds(n);
    for (int i = 0; i < k; i++)
        out[i] = pf_coll_survey_shift(n, i);
    return k;
}
