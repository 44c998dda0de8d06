/* collective: the ring's chunk math (simulated for n = 1..9), the exact small-integer data,
 * the all-reduce for real among threads over socketpairs and loopback TCP (exact results,
 * a peer that goes away, a silent peer), link probes, the busbw formula and blame. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../../pkg/collective/collective.h"

#define MAXN 9

/* ---- chunk math */

static void test_segments_cover_once(void **state)
{
    (void)state;
    static const size_t counts[] = {0, 1, 2, 3, 7, 8, 9, 10, 13, 63, 64, 65, 101, 1000003};
    for (int n = 1; n <= MAXN; n++) {
        for (size_t ci = 0; ci < PF_ARRAY_LEN(counts); ci++) {
            size_t count = counts[ci];
            size_t next = 0, minlen = SIZE_MAX, maxlen = 0;
            for (int s = 0; s < n; s++) {
                size_t off, len;
                pf_coll_segment(count, n, s, &off, &len);
                assert_int_equal(off, next); /* contiguous, in order, no gap, no overlap */
                next = off + len;
                if (len < minlen) minlen = len;
                if (len > maxlen) maxlen = len;
                /* the first count % n segments are the longer ones */
                assert_int_equal(len, count / (size_t)n + ((size_t)s < count % (size_t)n));
            }
            assert_int_equal(next, count);
            assert_true(maxlen - minlen <= 1);
        }
    }
}

static void test_nchunks(void **state)
{
    (void)state;
    assert_int_equal(pf_coll_nchunks(0, 16), 0);
    assert_int_equal(pf_coll_nchunks(1, 16), 1);
    assert_int_equal(pf_coll_nchunks(16, 16), 1);
    assert_int_equal(pf_coll_nchunks(17, 16), 2);
    assert_int_equal(pf_coll_nchunks(33, 1), 33);
    assert_int_equal(pf_coll_steps(1), 0);
    assert_int_equal(pf_coll_steps(2), 2);
    assert_int_equal(pf_coll_steps(5), 8);
}

/* Runs the ring's steps symbolically: each position holds, per segment, the set of ranks
 * whose values are summed in it. Every step, every position sends send_seg to the next,
 * which must be the segment the next receives; in reduce-scatter the sets must be disjoint
 * (each contribution added exactly once), in all-gather the receiver takes the full set. */
static void test_ring_steps_simulated(void **state)
{
    (void)state;
    for (int n = 1; n <= MAXN; n++) {
        unsigned have[MAXN][MAXN]; /* [pos][seg] bitmask of ranks */
        for (int p = 0; p < n; p++)
            for (int s = 0; s < n; s++)
                have[p][s] = 1u << p;
        unsigned all = (1u << n) - 1;
        int steps = pf_coll_steps(n);
        for (int g = 0; g < steps; g++) {
            unsigned msg[MAXN];
            int seg[MAXN];
            for (int p = 0; p < n; p++) {
                seg[p] = pf_coll_send_seg(p, n, g);
                assert_in_range(seg[p], 0, n - 1);
                msg[p] = have[p][seg[p]];
            }
            for (int p = 0; p < n; p++) {
                int from = (p - 1 + n) % n;
                int r = pf_coll_recv_seg(p, n, g);
                assert_int_equal(r, seg[from]);
                /* what is sent at step g was received (and completed) at step g-1 */
                if (g > 0)
                    assert_int_equal(pf_coll_send_seg(p, n, g), pf_coll_recv_seg(p, n, g - 1));
                if (g < n - 1) {
                    assert_int_equal(have[p][r] & msg[from], 0u);
                    have[p][r] |= msg[from];
                } else {
                    assert_int_equal(msg[from], all); /* only finished sums travel */
                    have[p][r] = msg[from];
                }
            }
            if (g == n - 2) {
                /* after reduce-scatter, position p owns segment p+1 in full */
                for (int p = 0; p < n; p++)
                    assert_int_equal(have[p][(p + 1) % n], all);
            }
        }
        for (int p = 0; p < n; p++)
            for (int s = 0; s < n; s++)
                assert_int_equal(have[p][s], all);
    }
}

/* ---- exact data */

static void test_seed_and_verify(void **state)
{
    (void)state;
    for (int r = 0; r < 300; r++) {
        for (size_t j = 0; j < 200; j++) {
            float v = pf_coll_seed_value(r, j);
            assert_true(v >= -32 && v <= 31);
            assert_true(v == floorf(v));
        }
    }
    /* ranks need not be 0..n-1: after a lost rank the ring is who is left */
    static const int sets[][6] = {{0}, {0, 1}, {0, 1, 2, 3}, {2, 5, 7}, {0, 3, 4, 9, 11, 250}};
    static const int sizes[] = {1, 2, 4, 3, 6};
    const size_t count = 1001;
    float *sum = malloc(count * sizeof(float)), *one = malloc(count * sizeof(float));
    for (size_t si = 0; si < PF_ARRAY_LEN(sizes); si++) {
        int n = sizes[si];
        memset(sum, 0, count * sizeof(float));
        for (int k = 0; k < n; k++) {
            pf_coll_seed(one, count, sets[si][k]);
            for (size_t j = 0; j < count; j++) {
                assert_true(one[j] == pf_coll_seed_value(sets[si][k], j));
                sum[j] += one[j];
            }
        }
        size_t first = 0;
        assert_int_equal(pf_coll_verify(sum, count, sets[si], n, &first), 0);
        assert_int_equal(first, count);
        /* the same sum claimed for other ranks does not verify */
        int other[6];
        memcpy(other, sets[si], sizeof(other));
        other[0] += 1;
        assert_true(pf_coll_verify(sum, count, other, n, &first) > 0);
        /* one corrupted element, anywhere, is found at its index, by one ulp too */
        static const size_t where[] = {0, 1, 500, 1000};
        for (size_t w = 0; w < PF_ARRAY_LEN(where); w++) {
            float keep = sum[where[w]];
            sum[where[w]] = nextafterf(keep, INFINITY);
            assert_int_equal(pf_coll_verify(sum, count, sets[si], n, &first), 1);
            assert_int_equal(first, where[w]);
            sum[where[w]] = NAN;
            assert_int_equal(pf_coll_verify(sum, count, sets[si], n, &first), 1);
            sum[where[w]] = keep;
        }
        /* two: the first is named, both counted */
        sum[700] += 1;
        sum[30] -= 2;
        assert_int_equal(pf_coll_verify(sum, count, sets[si], n, &first), 2);
        assert_int_equal(first, 30);
    }
    /* the adjacent values differ: a shifted buffer does not verify */
    int r0 = 0;
    pf_coll_seed(one, count, 0);
    size_t first = 0;
    assert_true(pf_coll_verify(one + 1, count - 1, &r0, 1, &first) > 0);
    free(sum);
    free(one);
}

static void test_busbw(void **state)
{
    (void)state;
    /* nccl-tests: busbw = algbw * 2(n-1)/n */
    assert_true(fabs(pf_coll_busbw_allreduce(10, 2) - 10) < 1e-12);
    assert_true(fabs(pf_coll_busbw_allreduce(10, 4) - 15) < 1e-12);
    assert_true(fabs(pf_coll_busbw_allreduce(9, 3) - 12) < 1e-12);
    assert_true(fabs(pf_coll_busbw_allreduce(8, 8) - 14) < 1e-12);
    assert_true(fabs(pf_coll_busbw_allreduce(10, 1)) < 1e-12);
    assert_true(fabs(pf_coll_busbw_allreduce(10, 0)) < 1e-12);
}

static void test_probe_shifts(void **state)
{
    (void)state;
    static const struct {
        int n, k, s[3];
    } cases[] = {
        {0, 0, {0}},       {1, 0, {0}},       {2, 1, {1}},
        {3, 2, {1, 2}},    {4, 3, {1, 2, 3}}, {5, 3, {1, 2, 3}},
        {6, 3, {1, 3, 2}}, {7, 3, {1, 3, 2}}, {8, 3, {1, 4, 3}},
    };
    for (size_t i = 0; i < PF_ARRAY_LEN(cases); i++) {
        int out[3] = {-1, -1, -1};
        int k = pf_coll_probe_shifts(cases[i].n, out);
        assert_int_equal(k, cases[i].k);
        for (int j = 0; j < k; j++) {
            assert_int_equal(out[j], cases[i].s[j]);
            assert_in_range(out[j], 1, cases[i].n - 1);
            for (int l = 0; l < j; l++)
                assert_int_not_equal(out[j], out[l]); /* never the same shift twice */
        }
    }
    /* every shift is a permutation of the ranks: each rank sends once and receives once */
    for (int n = 2; n <= 64; n++) {
        int out[3];
        int k = pf_coll_probe_shifts(n, out);
        assert_true(k >= 1 && k <= 3);
        for (int j = 0; j < k; j++) {
            unsigned char got[64] = {0};
            for (int p = 0; p < n; p++)
                got[(p + out[j]) % n]++;
            for (int p = 0; p < n; p++)
                assert_int_equal(got[p], 1);
        }
    }
}

/* ---- the all-reduce for real */

enum { VIA_UNIX, VIA_TCP };

static void set_nonblock(int fd)
{
    assert_int_equal(fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK), 0);
}

/* A connected pair: a[0] writes, a[1] reads. Over TCP both ends are on 127.0.0.1. */
static void make_link(int a[2], int via)
{
    if (via == VIA_UNIX) {
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, a), 0);
    } else {
        int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(l >= 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        assert_int_equal(bind(l, (struct sockaddr *)&sa, sizeof(sa)), 0); /* ephemeral port */
        socklen_t sl = sizeof(sa);
        assert_int_equal(getsockname(l, (struct sockaddr *)&sa, &sl), 0);
        assert_int_equal(listen(l, 1), 0);
        a[0] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_int_equal(connect(a[0], (struct sockaddr *)&sa, sizeof(sa)), 0);
        a[1] = accept4(l, NULL, NULL, SOCK_CLOEXEC);
        assert_true(a[1] >= 0);
        close(l);
        int one = 1;
        setsockopt(a[0], IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    }
    set_nonblock(a[0]);
    set_nonblock(a[1]);
}

struct rank_arg {
    float *data;
    size_t count;
    int pos, n;
    int send_fd, recv_fd;
    size_t chunk;
    double deadline;
    /* a rank that misbehaves: reads this many bytes, then closes both ends (0: behaves) */
    size_t die_after;
    int rc;
    struct pf_coll_fail fail;
};

static void *rank_main(void *arg)
{
    struct rank_arg *a = arg;
    if (a->die_after) {
        /* take part just long enough to be mid-run, then vanish */
        char *buf = malloc(a->die_after);
        size_t got = 0;
        while (got < a->die_after && pf_now() < a->deadline) {
            struct pollfd p = {a->recv_fd, POLLIN, 0};
            poll(&p, 1, 50);
            ssize_t r = recv(a->recv_fd, buf + got, a->die_after - got, MSG_DONTWAIT);
            if (r > 0) got += (size_t)r;
            if (r == 0) break;
        }
        free(buf);
        close(a->send_fd);
        close(a->recv_fd);
        a->send_fd = a->recv_fd = -1;
        a->rc = got == a->die_after ? 0 : -1;
        return NULL;
    }
    a->rc = pf_coll_allreduce(a->data, a->count, a->pos, a->n, a->send_fd, a->recv_fd, a->chunk,
                              a->deadline, &a->fail);
    return NULL;
}

/* A ring of n threads: position p sends on link[p] and receives on link[p-1]. The ranks
 * are ranks[p] (not necessarily 0..n-1). */
static void run_ring(struct rank_arg *args, int n, const int *ranks, size_t count, size_t chunk,
                     int via, double secs, size_t die_pos_bytes, int die_pos)
{
    int link[MAXN][2];
    for (int p = 0; p < n; p++)
        make_link(link[p], via);
    pthread_t th[MAXN];
    double deadline = pf_now() + secs;
    for (int p = 0; p < n; p++) {
        struct rank_arg *a = &args[p];
        memset(a, 0, sizeof(*a));
        a->data = malloc(count ? count * sizeof(float) : 1);
        pf_coll_seed(a->data, count, ranks[p]);
        a->count = count;
        a->pos = p;
        a->n = n;
        a->send_fd = link[p][0];
        a->recv_fd = link[(p - 1 + n) % n][1];
        a->chunk = chunk;
        a->deadline = deadline;
        if (p == die_pos) a->die_after = die_pos_bytes;
    }
    for (int p = 0; p < n; p++)
        assert_int_equal(pthread_create(&th[p], NULL, rank_main, &args[p]), 0);
    for (int p = 0; p < n; p++)
        pthread_join(th[p], NULL);
    for (int p = 0; p < n; p++) {
        if (args[p].send_fd >= 0) close(args[p].send_fd);
        if (args[p].recv_fd >= 0) close(args[p].recv_fd);
    }
}

static void free_ring(struct rank_arg *args, int n)
{
    for (int p = 0; p < n; p++)
        free(args[p].data);
}

static void test_allreduce_exact(void **state)
{
    (void)state;
    static const struct {
        int n;
        size_t count, chunk_bytes;
        int via;
    } cases[] = {
        {2, 1, 4096, VIA_UNIX},       {2, 1001, 64, VIA_UNIX},      {3, 1000, 4096, VIA_UNIX},
        {3, 2, 4096, VIA_UNIX},       {4, 1 << 16, 4096, VIA_UNIX}, {4, 65537, 1000, VIA_UNIX},
        {5, 3, 4, VIA_UNIX},          {5, 100003, 8192, VIA_UNIX},  {5, 7, 8, VIA_UNIX},
        {2, 262147, 65536, VIA_TCP},  {3, 100001, 4096, VIA_TCP},   {4, 1 << 18, 524288, VIA_TCP},
        {5, 500009, 524288, VIA_TCP}, {7, 10007, 256, VIA_UNIX},    {9, 99, 16, VIA_UNIX},
        {4, 0, 4096, VIA_UNIX},
    };
    static const int ranks[MAXN] = {0, 1, 2, 3, 4, 5, 6, 7, 8};
    static const int sparse[MAXN] = {0, 3, 4, 9, 11, 12, 20, 21, 40};
    for (size_t i = 0; i < PF_ARRAY_LEN(cases); i++) {
        int n = cases[i].n;
        size_t count = cases[i].count;
        const int *rk = i % 2 ? sparse : ranks;
        print_message("allreduce: n=%d count=%zu chunk=%zu via %s\n", n, count,
                      cases[i].chunk_bytes, cases[i].via == VIA_TCP ? "tcp" : "unix");
        struct rank_arg args[MAXN];
        run_ring(args, n, rk, count, cases[i].chunk_bytes, cases[i].via, 60, 0, -1);
        for (int p = 0; p < n; p++) {
            if (args[p].rc != 0) print_message("  pos %d: %s\n", p, args[p].fail.what);
            assert_int_equal(args[p].rc, 0);
            assert_int_equal(args[p].fail.kind, PF_COLL_OK);
            size_t first = 0;
            assert_int_equal(pf_coll_verify(args[p].data, count, rk, n, &first), 0);
            /* and the same bytes on every rank */
            if (p) assert_memory_equal(args[p].data, args[0].data, count * sizeof(float));
        }
        free_ring(args, n);
    }
}

static void test_allreduce_repeated_in_place(void **state)
{
    (void)state;
    /* the stage runs it again on its own output: the sums must stay exact (n^k growth) */
    static const int ranks[3] = {0, 1, 2};
    struct rank_arg args[3];
    run_ring(args, 3, ranks, 3001, 1024, VIA_UNIX, 60, 0, -1);
    for (int p = 0; p < 3; p++)
        assert_int_equal(args[p].rc, 0);
    /* second round on the results, by hand: each element becomes 3x the sum */
    int link[3][2];
    for (int p = 0; p < 3; p++)
        make_link(link[p], VIA_UNIX);
    pthread_t th[3];
    for (int p = 0; p < 3; p++) {
        args[p].send_fd = link[p][0];
        args[p].recv_fd = link[(p + 2) % 3][1];
        args[p].deadline = pf_now() + 60;
        assert_int_equal(pthread_create(&th[p], NULL, rank_main, &args[p]), 0);
    }
    for (int p = 0; p < 3; p++)
        pthread_join(th[p], NULL);
    for (int p = 0; p < 3; p++) {
        assert_int_equal(args[p].rc, 0);
        for (size_t j = 0; j < 3001; j++) {
            float s = 0;
            for (int r = 0; r < 3; r++)
                s += pf_coll_seed_value(r, j);
            assert_true(args[p].data[j] == 3 * s);
        }
        close(link[p][0]);
        close(link[p][1]);
    }
    free_ring(args, 3);
}

static void test_allreduce_peer_closes(void **state)
{
    (void)state;
    for (int via = VIA_UNIX; via <= VIA_TCP; via++) {
        /* positions 0, 1, 2; position 2 reads a little of what 1 sends, then closes both
         * ends: 1 loses the link it sends on, 0 the link it receives from */
        static const int ranks[3] = {0, 1, 2};
        struct rank_arg args[3];
        /* the deadline is far: a rank that waited for it would report a timeout */
        run_ring(args, 3, ranks, 4 << 20, 65536, via, 120, 100000, 2);
        assert_int_equal(args[2].rc, 0); /* it did read before vanishing: mid-run */

        assert_int_equal(args[0].rc, PF_ERR);
        print_message("pos 0: %s (%s)\n", pf_coll_fail_name(args[0].fail.kind), args[0].fail.what);
        assert_int_equal(args[0].fail.kind, PF_COLL_EOF);
        assert_false(args[0].fail.on_send);
        assert_non_null(strstr(args[0].fail.what, "closed"));

        assert_int_equal(args[1].rc, PF_ERR);
        print_message("pos 1: %s (%s)\n", pf_coll_fail_name(args[1].fail.kind), args[1].fail.what);
        assert_true(args[1].fail.kind == PF_COLL_RESET || args[1].fail.kind == PF_COLL_EOF);
        assert_true(args[1].fail.on_send);
        assert_non_null(strstr(args[1].fail.what, "send"));
        free_ring(args, 3);
    }
    assert_string_equal(pf_coll_fail_name(PF_COLL_EOF), "closed");
    assert_string_equal(pf_coll_fail_name(PF_COLL_RESET), "reset");
    assert_string_equal(pf_coll_fail_name(PF_COLL_TIMEOUT), "timeout");
    assert_string_equal(pf_coll_fail_name(PF_COLL_OK), "ok");
}

static void test_allreduce_silent_peer_deadline(void **state)
{
    (void)state;
    /* a peer that is connected but never sends and never reads */
    static const size_t counts[] = {16, 4 << 20}; /* fits the socket buffer, and does not */
    for (size_t i = 0; i < PF_ARRAY_LEN(counts); i++) {
        int out[2], in[2];
        make_link(out, VIA_UNIX);
        make_link(in, VIA_UNIX);
        float *data = malloc(counts[i] * sizeof(float));
        pf_coll_seed(data, counts[i], 0);
        struct pf_coll_fail fail;
        double t0 = pf_now();
        int rc = pf_coll_allreduce(data, counts[i], 0, 2, out[0], in[1], 65536, t0 + 0.4, &fail);
        double took = pf_now() - t0;
        assert_int_equal(rc, PF_ETIMEOUT);
        assert_int_equal(fail.kind, PF_COLL_TIMEOUT);
        assert_non_null(strstr(fail.what, "timed out"));
        assert_true(took >= 0.4);
        assert_true(took < 10); /* bounded */
        /* the small one was sent whole: the silence is on the receiving side */
        if (i == 0) assert_false(fail.on_send);
        free(data);
        close(out[0]);
        close(out[1]);
        close(in[0]);
        close(in[1]);
    }
    /* n <= 1 or nothing to sum: nothing to do, nothing touched */
    float x = 5;
    struct pf_coll_fail fail;
    assert_int_equal(pf_coll_allreduce(&x, 1, 0, 1, -1, -1, 4096, pf_now(), &fail), 0);
    assert_true(x == 5);
    assert_int_equal(fail.kind, PF_COLL_OK);
}

/* ---- link probes */

static void test_probe(void **state)
{
    (void)state;
    /* a link to itself: everything sent arrives */
    int a[2];
    make_link(a, VIA_TCP);
    struct pf_coll_probe_res pr;
    struct pf_coll_fail fail;
    size_t nbytes = 8 << 20;
    assert_int_equal(pf_coll_probe(&pr, a[0], a[1], nbytes, pf_now() + 30, &fail), 0);
    assert_true(pr.complete);
    assert_int_equal(pr.received, nbytes);
    assert_int_equal(pr.bytes, nbytes - nbytes / 4); /* the first quarter warms up, untimed */
    assert_true(pr.gbps > 0);
    assert_true(pr.seconds > 0);
    assert_int_equal(fail.kind, PF_COLL_OK);
    close(a[0]);
    close(a[1]);

    /* nothing arrives by the deadline: a measurement (incomplete), not a failure */
    int out[2], in[2];
    make_link(out, VIA_UNIX);
    make_link(in, VIA_UNIX);
    double t0 = pf_now();
    assert_int_equal(pf_coll_probe(&pr, out[0], in[1], nbytes, t0 + 0.3, &fail), 0);
    assert_true(pf_now() - t0 < 10);
    assert_false(pr.complete);
    assert_int_equal(pr.bytes, 0);
    assert_true(pr.gbps == 0);

    /* a trickle: part arrives, the rate is over the whole window */
    assert_int_equal(write(in[0], "0123456789", 10), 10);
    t0 = pf_now();
    assert_int_equal(pf_coll_probe(&pr, out[0], in[1], nbytes, t0 + 0.3, &fail), 0);
    assert_false(pr.complete);
    assert_int_equal(pr.bytes, 10);
    assert_true(pr.gbps > 0 && pr.gbps < 1e-3);

    /* the sender's peer closes: named as a failure on the receiving side (end of stream, or
     * a reset when the ready byte hit the closed socket first) */
    close(in[0]);
    assert_int_equal(pf_coll_probe(&pr, out[0], in[1], nbytes, pf_now() + 5, &fail), PF_ERR);
    assert_true(fail.kind == PF_COLL_EOF || fail.kind == PF_COLL_RESET);
    assert_false(fail.on_send);
    close(out[0]);
    close(out[1]);
    close(in[1]);
}

/* The sender starts only on the receiver's ready byte: bytes sent before the receiver reads
 * would sit in the socket buffers and arrive as one burst, timed as an absurd rate. */
static void test_probe_waits_for_ready(void **state)
{
    (void)state;
    int out[2], in[2];
    make_link(out, VIA_TCP);
    make_link(in, VIA_TCP);
    struct pf_coll_probe_res pr;
    struct pf_coll_fail fail;
    /* nobody sends the ready byte on out: nothing may be sent there */
    assert_int_equal(pf_coll_probe(&pr, out[0], in[1], 1 << 20, pf_now() + 0.3, &fail), 0);
    char b[16];
    assert_int_equal(recv(out[1], b, sizeof(b), MSG_DONTWAIT), -1);
    assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
    /* the probe sent its own ready byte back on in */
    assert_int_equal(recv(in[0], b, sizeof(b), MSG_DONTWAIT), 1);
    close(out[0]);
    close(out[1]);
    close(in[0]);
    close(in[1]);
}

/* ---- blame */

/* The links the stage measures: every probe shift s, from position p-s to p. */
static size_t shift_links(struct pf_coll_link *out, int n, double fast)
{
    int sh[3];
    int k = pf_coll_probe_shifts(n, sh);
    size_t m = 0;
    for (int j = 0; j < k; j++)
        for (int p = 0; p < n; p++)
            out[m++] = (struct pf_coll_link){(p - sh[j] + n) % n, p, fast};
    return m;
}

static void test_blame_uniform(void **state)
{
    (void)state;
    struct pf_coll_link l[64];
    size_t m = shift_links(l, 8, 25.0);
    /* measurement noise, all well above a third of the median */
    for (size_t i = 0; i < m; i++)
        l[i].gbps += (double)(i % 5) - 2;
    struct pf_coll_blame b;
    pf_coll_blame(&b, l, m, PF_COLL_SLOW_RATIO);
    assert_int_equal(b.nnodes, 0);
    assert_int_equal(b.nlinks, 0);
    assert_true(fabs(b.median - 25.0) < 2.01);
    assert_true(fabs(b.threshold - b.median / 3.0) < 1e-9);
    pf_coll_blame_free(&b);
    pf_coll_blame(&b, l, 0, PF_COLL_SLOW_RATIO);
    assert_int_equal(b.nnodes + b.nlinks, 0);
    pf_coll_blame_free(&b);
}

static void test_blame_slow_node(void **state)
{
    (void)state;
    /* rank 5's NIC is slow both ways: every link into and out of it */
    struct pf_coll_link l[64];
    size_t m = shift_links(l, 8, 25.0);
    for (size_t i = 0; i < m; i++)
        if (l[i].src == 5 || l[i].dst == 5) l[i].gbps = 2.0 + (double)(i % 3) * 0.1;
    struct pf_coll_blame b;
    pf_coll_blame(&b, l, m, PF_COLL_SLOW_RATIO);
    assert_int_equal(b.nnodes, 1);
    assert_int_equal(b.nodes[0].rank, 5);
    assert_true(b.nodes[0].out);
    assert_true(b.nodes[0].in);
    assert_int_equal(b.nodes[0].ntotal, 6);
    assert_int_equal(b.nodes[0].nslow, 6);
    assert_true(b.nodes[0].max_gbps >= 2.0 && b.nodes[0].max_gbps < 2.5);
    assert_int_equal(b.nlinks, 0); /* the node explains all its slow links */
    pf_coll_blame_free(&b);

    /* only its sending side is slow (a bad transmit queue, a throttled egress) */
    m = shift_links(l, 8, 25.0);
    for (size_t i = 0; i < m; i++)
        if (l[i].src == 2) l[i].gbps = 1.0;
    pf_coll_blame(&b, l, m, PF_COLL_SLOW_RATIO);
    assert_int_equal(b.nnodes, 1);
    assert_int_equal(b.nodes[0].rank, 2);
    assert_true(b.nodes[0].out);
    assert_false(b.nodes[0].in);
    assert_int_equal(b.nodes[0].nslow, 3);
    assert_int_equal(b.nlinks, 0);
    pf_coll_blame_free(&b);
}

static void test_blame_slow_link(void **state)
{
    (void)state;
    /* one cable: 3 -> 4 only; 3's other links and 4's other links are fine */
    struct pf_coll_link l[64];
    size_t m = shift_links(l, 8, 25.0);
    int hit = 0;
    for (size_t i = 0; i < m; i++)
        if (l[i].src == 3 && l[i].dst == 4) {
            l[i].gbps = 3.0;
            hit++;
        }
    assert_int_equal(hit, 1);
    struct pf_coll_blame b;
    pf_coll_blame(&b, l, m, PF_COLL_SLOW_RATIO);
    assert_int_equal(b.nnodes, 0);
    assert_int_equal(b.nlinks, 1);
    assert_int_equal(b.links[0].src, 3);
    assert_int_equal(b.links[0].dst, 4);
    assert_true(b.links[0].gbps == 3.0);
    pf_coll_blame_free(&b);

    /* two ranks: one peer each way, so a slow node cannot be told from a slow link */
    struct pf_coll_link two[2] = {{0, 1, 20.0}, {1, 0, 2.0}};
    /* the median of two is their mean (11): 2 is below 5.5 */
    pf_coll_blame(&b, two, 2, PF_COLL_SLOW_RATIO);
    assert_int_equal(b.nnodes, 0);
    assert_int_equal(b.nlinks, 1);
    assert_int_equal(b.links[0].src, 1);
    pf_coll_blame_free(&b);
}

static void test_blame_ratio_threshold(void **state)
{
    (void)state;
    struct pf_coll_link l[64];
    size_t m = shift_links(l, 8, 10.0);
    for (size_t i = 0; i < m; i++)
        if (l[i].src == 0 && l[i].dst == 1) l[i].gbps = 5.0; /* half the median */
    struct pf_coll_blame b;
    /* exactly at the threshold is not slow */
    pf_coll_blame(&b, l, m, 0.5);
    assert_true(b.median == 10.0);
    assert_true(b.threshold == 5.0);
    assert_int_equal(b.nlinks, 0);
    pf_coll_blame_free(&b);
    /* a stricter ratio calls it slow */
    pf_coll_blame(&b, l, m, 0.75);
    assert_int_equal(b.nlinks, 1);
    assert_true(b.links[0].gbps == 5.0);
    assert_int_equal(b.nnodes, 0);
    pf_coll_blame_free(&b);
    /* a looser one does not */
    pf_coll_blame(&b, l, m, 0.25);
    assert_int_equal(b.nlinks, 0);
    pf_coll_blame_free(&b);
    /* the product's ratio: half the median is within TCP's noise, a quarter is slow */
    pf_coll_blame(&b, l, m, PF_COLL_SLOW_RATIO);
    assert_int_equal(b.nlinks, 0);
    pf_coll_blame_free(&b);
    for (size_t i = 0; i < m; i++)
        if (l[i].src == 0 && l[i].dst == 1) l[i].gbps = 2.5;
    pf_coll_blame(&b, l, m, PF_COLL_SLOW_RATIO);
    assert_int_equal(b.nlinks, 1);
    assert_int_equal(b.links[0].src, 0);
    assert_int_equal(b.links[0].dst, 1);
    pf_coll_blame_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_segments_cover_once),
        cmocka_unit_test(test_nchunks),
        cmocka_unit_test(test_ring_steps_simulated),
        cmocka_unit_test(test_seed_and_verify),
        cmocka_unit_test(test_busbw),
        cmocka_unit_test(test_probe_shifts),
        cmocka_unit_test(test_allreduce_exact),
        cmocka_unit_test(test_allreduce_repeated_in_place),
        cmocka_unit_test(test_allreduce_peer_closes),
        cmocka_unit_test(test_allreduce_silent_peer_deadline),
        cmocka_unit_test(test_probe),
        cmocka_unit_test(test_probe_waits_for_ready),
        cmocka_unit_test(test_blame_uniform),
        cmocka_unit_test(test_blame_slow_node),
        cmocka_unit_test(test_blame_slow_link),
        cmocka_unit_test(test_blame_ratio_threshold),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
