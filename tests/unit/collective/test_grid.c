/* collective: the grid all-reduce. Its shapes (every position in one row and one column, or
 * folded into exactly one partner), its steps against the ring's, and the all-reduce for
 * real among threads over socketpairs for several n, primes among them, checking exact sums;
 * a partner that goes away is named. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../../pkg/collective/collective.h"

#define MAXN 40

/* 4.5 ceil(sqrt n): at most 2(1.5 s) + 2(s / 1.5) steps, or 4s + 2 with extras */
static int bound_steps(int n)
{
    int s = 1;
    while (s * s < n)
        s++;
    return 9 * s / 2;
}

static void test_shapes(void **state)
{
    (void)state;
    static const struct {
        int n, rows, cols, extra;
    } cases[] = {
        {1, 1, 1, 0},      {2, 1, 2, 0},      {3, 1, 3, 0},      {4, 2, 2, 0},
        {5, 1, 3, 2},      {7, 2, 3, 1},      {12, 3, 4, 0},     {13, 3, 4, 1},
        {64, 8, 8, 0},     {256, 16, 16, 0},  {1000, 25, 40, 0}, {1021, 31, 32, 29},
        {1024, 32, 32, 0}, {1031, 31, 33, 8}, {4099, 63, 65, 4},
    };
    for (size_t i = 0; i < PF_ARRAY_LEN(cases); i++) {
        struct pf_coll_grid g;
        pf_coll_grid_shape(&g, cases[i].n);
        print_message("n=%d: %dx%d + %d\n", cases[i].n, g.rows, g.cols, g.extra);
        assert_int_equal(g.rows, cases[i].rows);
        assert_int_equal(g.cols, cases[i].cols);
        assert_int_equal(g.extra, cases[i].extra);
        assert_int_equal(g.rows * g.cols + g.extra, cases[i].n);
        assert_true(g.extra < g.cols);
    }
    /* the point: the steps grow as sqrt(n) */
    struct pf_coll_grid g;
    pf_coll_grid_shape(&g, 1024);
    assert_int_equal(pf_coll_grid_steps(&g), 124);
    assert_int_equal(pf_coll_steps(1024), 2046);
    pf_coll_grid_shape(&g, 1021);
    assert_int_equal(pf_coll_grid_steps(&g), 2 * 31 + 2 * 30 + 2);
    for (int n = 64; n <= 5000; n++) {
        pf_coll_grid_shape(&g, n);
        assert_true(g.rows * g.cols + g.extra == n && g.extra < g.cols);
        assert_true(pf_coll_grid_steps(&g) <= bound_steps(n));
    }
    char name[64];
    pf_coll_algo_name(name, sizeof(name), 16);
    assert_string_equal(name, "ring");
    pf_coll_algo_name(name, sizeof(name), 1024);
    assert_string_equal(name, "grid 32x32");
    pf_coll_algo_name(name, sizeof(name), 1021);
    assert_string_equal(name, "grid 31x32 + 29 folded");
    assert_false(pf_coll_use_grid(PF_COLL_GRID_MIN_N - 1));
    assert_true(pf_coll_use_grid(PF_COLL_GRID_MIN_N));
}

/* Every position is in one row ring and one column ring, each a cycle through its row or
 * column, or folded into exactly one partner in the last full row. */
static void test_peers_consistent(void **state)
{
    (void)state;
    for (int n = 1; n <= 300; n++) {
        struct pf_coll_grid g;
        pf_coll_grid_shape(&g, n);
        int full = g.rows * g.cols, nfold = 0;
        for (int p = 0; p < n; p++) {
            struct pf_coll_grid_peers a, b;
            pf_coll_grid_peers(&a, &g, p);
            if (p >= full) {
                assert_int_equal(a.row_next, -1);
                assert_int_equal(a.col_next, -1);
                assert_true(a.fold >= (g.rows - 1) * g.cols && a.fold < full);
                pf_coll_grid_peers(&b, &g, a.fold);
                assert_int_equal(b.fold, p);
                nfold++;
                continue;
            }
            if (g.cols > 1) {
                assert_int_equal(a.row_next / g.cols, p / g.cols);
                pf_coll_grid_peers(&b, &g, a.row_next);
                assert_int_equal(b.row_prev, p);
            }
            if (g.rows > 1) {
                assert_int_equal(a.col_next % g.cols, p % g.cols);
                pf_coll_grid_peers(&b, &g, a.col_next);
                assert_int_equal(b.col_prev, p);
            }
            /* a row ring's cycle covers its row */
            int q = p, len = 0;
            do {
                struct pf_coll_grid_peers c;
                pf_coll_grid_peers(&c, &g, q);
                q = g.cols > 1 ? c.row_next : q;
                len++;
            } while (q != p && len <= n);
            assert_int_equal(len, g.cols);
        }
        assert_int_equal(nfold, g.extra);
    }
}

/* ---- the all-reduce for real, one thread per position */

struct grid_rank {
    float *data;
    size_t count;
    const struct pf_coll_grid *g;
    int pos;
    struct pf_coll_grid_fds fds;
    size_t chunk;
    double deadline;
    bool vanish; /* closes its sockets at once instead */
    int rc, fail_peer;
    struct pf_coll_fail fail;
};

static void *grid_main(void *arg)
{
    struct grid_rank *a = arg;
    if (a->vanish) {
        int *f[] = {&a->fds.row_send, &a->fds.row_recv, &a->fds.col_send, &a->fds.col_recv,
                    &a->fds.fold};
        for (size_t i = 0; i < PF_ARRAY_LEN(f); i++)
            if (*f[i] >= 0) {
                close(*f[i]);
                *f[i] = -1;
            }
        return NULL;
    }
    a->rc = pf_coll_allreduce_grid(a->data, a->count, a->g, a->pos, &a->fds, a->chunk, a->deadline,
                                   &a->fail, &a->fail_peer);
    return NULL;
}

static void nb_pair(int s[2])
{
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, s), 0);
    for (int i = 0; i < 2; i++)
        assert_int_equal(fcntl(s[i], F_SETFL, fcntl(s[i], F_GETFL) | O_NONBLOCK), 0);
}

/* Connects every position to its partners: position p's row link goes to row_next, its
 * column link to col_next; an extra and its partner share one socketpair. */
static void grid_wire(struct grid_rank *a, const struct pf_coll_grid *g)
{
    for (int p = 0; p < g->n; p++)
        a[p].fds = (struct pf_coll_grid_fds){-1, -1, -1, -1, -1};
    for (int p = 0; p < g->n; p++) {
        struct pf_coll_grid_peers q;
        pf_coll_grid_peers(&q, g, p);
        int s[2];
        if (q.row_next >= 0) {
            nb_pair(s);
            a[p].fds.row_send = s[0];
            a[q.row_next].fds.row_recv = s[1];
        }
        if (q.col_next >= 0) {
            nb_pair(s);
            a[p].fds.col_send = s[0];
            a[q.col_next].fds.col_recv = s[1];
        }
        if (q.fold >= 0 && q.fold > p) {
            nb_pair(s);
            a[p].fds.fold = s[0];
            a[q.fold].fds.fold = s[1];
        }
    }
}

static void grid_run(struct grid_rank *a, const struct pf_coll_grid *g, const int *ranks,
                     size_t count, size_t chunk, double secs, int vanish)
{
    double deadline = pf_now() + secs;
    for (int p = 0; p < g->n; p++) {
        a[p].data = malloc(count ? count * sizeof(float) : 1);
        pf_coll_seed(a[p].data, count, ranks[p]);
        a[p].count = count;
        a[p].g = g;
        a[p].pos = p;
        a[p].chunk = chunk;
        a[p].deadline = deadline;
        a[p].vanish = p == vanish;
        a[p].rc = 0;
        a[p].fail_peer = -1;
    }
    pthread_t th[MAXN];
    for (int p = 0; p < g->n; p++)
        assert_int_equal(pthread_create(&th[p], NULL, grid_main, &a[p]), 0);
    for (int p = 0; p < g->n; p++)
        pthread_join(th[p], NULL);
    for (int p = 0; p < g->n; p++) {
        int *f[] = {&a[p].fds.row_send, &a[p].fds.row_recv, &a[p].fds.col_send, &a[p].fds.col_recv,
                    &a[p].fds.fold};
        for (size_t i = 0; i < PF_ARRAY_LEN(f); i++)
            if (*f[i] >= 0) close(*f[i]);
    }
}

static void test_grid_exact(void **state)
{
    (void)state;
    static const struct {
        int n;
        size_t count, chunk;
    } cases[] = {
        {2, 1001, 4096},    {3, 7, 8},       {4, 65537, 4096},  {5, 100003, 8192},
        {6, 5, 4},          {7, 10007, 256}, {9, 99, 16},       {12, 1 << 16, 65536},
        {13, 30011, 1024},  {16, 3, 4096},   {17, 65599, 8192}, {23, 1009, 64},
        {31, 100003, 4096}, {37, 4099, 512}, {40, 40, 4},       {29, 0, 4096},
    };
    int ranks[MAXN], sparse[MAXN];
    for (int p = 0; p < MAXN; p++) {
        ranks[p] = p;
        sparse[p] = 3 * p + (p % 5);
    }
    for (size_t i = 0; i < PF_ARRAY_LEN(cases); i++) {
        struct pf_coll_grid g;
        pf_coll_grid_shape(&g, cases[i].n);
        size_t count = cases[i].count;
        const int *rk = i % 2 ? sparse : ranks;
        print_message("grid all-reduce: n=%d (%dx%d + %d) count=%zu chunk=%zu\n", g.n, g.rows,
                      g.cols, g.extra, count, cases[i].chunk);
        struct grid_rank a[MAXN];
        memset(a, 0, sizeof(a));
        grid_wire(a, &g);
        grid_run(a, &g, rk, count, cases[i].chunk, 60, -1);
        for (int p = 0; p < g.n; p++) {
            if (a[p].rc) print_message("  pos %d: %s\n", p, a[p].fail.what);
            assert_int_equal(a[p].rc, 0);
            size_t first = 0;
            assert_int_equal(pf_coll_verify(a[p].data, count, rk, g.n, &first), 0);
            if (p && count) assert_memory_equal(a[p].data, a[0].data, count * sizeof(float));
        }
        for (int p = 0; p < g.n; p++)
            free(a[p].data);
    }
}

/* An extra that goes away: its partner names it; nobody ends with a result it did not get. */
static void test_grid_extra_vanishes(void **state)
{
    (void)state;
    struct pf_coll_grid g;
    pf_coll_grid_shape(&g, 7); /* 2x3 + 1: position 6 folds into position 3 */
    assert_int_equal(g.extra, 1);
    struct grid_rank a[MAXN];
    memset(a, 0, sizeof(a));
    int ranks[MAXN];
    for (int p = 0; p < MAXN; p++)
        ranks[p] = p;
    grid_wire(a, &g);
    grid_run(a, &g, ranks, 4096, 1024, 2, 6);
    assert_int_equal(a[3].rc, PF_ERR);
    assert_int_equal(a[3].fail_peer, 6);
    assert_int_equal(a[3].fail.kind, PF_COLL_EOF);
    for (int p = 0; p < 6; p++)
        assert_int_not_equal(a[p].rc, 0); /* stopped by the lost partner, or its deadline */
    for (int p = 0; p < g.n; p++)
        free(a[p].data);
}

/* A position that goes away mid-row, with segments small enough for the one-thread ring
 * and large enough for the two-thread one: its row partner names it. */
static void test_grid_row_partner_vanishes(void **state)
{
    (void)state;
    static const size_t chunks[] = {65536, 256};
    for (size_t i = 0; i < PF_ARRAY_LEN(chunks); i++) {
        struct pf_coll_grid g;
        pf_coll_grid_shape(&g, 4); /* 2x2: positions 0 and 1 are one row */
        struct grid_rank a[MAXN];
        memset(a, 0, sizeof(a));
        int ranks[MAXN];
        for (int p = 0; p < MAXN; p++)
            ranks[p] = p;
        grid_wire(a, &g);
        grid_run(a, &g, ranks, 4096, chunks[i], 2, 1);
        print_message("chunk %zu: pos 0: %s (%s)\n", chunks[i], pf_coll_fail_name(a[0].fail.kind),
                      a[0].fail.what);
        assert_int_equal(a[0].rc, PF_ERR);
        assert_int_equal(a[0].fail_peer, 1);
        assert_true(a[0].fail.kind == PF_COLL_EOF || a[0].fail.kind == PF_COLL_RESET);
        for (int p = 0; p < g.n; p++)
            free(a[p].data);
    }
}

static bool has(const int *v, int k, int q)
{
    for (int i = 0; i < k; i++)
        if (v[i] == q) return true;
    return false;
}

/* The positions a rank dials, for which the roster carries addresses: every probe shift's,
 * and the grid's row, column and fold partners that tcp.c dials; never itself, each once. */
static void test_dial_partners(void **state)
{
    (void)state;
    static const int sizes[] = {1, 2, 3, 5, 16, 100, 1000, 1031, 4096, 16384};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        int n = sizes[i];
        struct pf_coll_grid g;
        pf_coll_grid_shape(&g, n);
        int sh[3], ns = pf_coll_probe_shifts(n, sh), step = n > 64 ? 37 : 1;
        for (int pos = 0; pos < n; pos += step) {
            int q[PF_COLL_DIAL_MAX];
            int k = pf_coll_dial_partners(pos, n, q);
            assert_true(k >= 0 && k <= PF_COLL_DIAL_MAX);
            if (n == 1) assert_int_equal(k, 0);
            for (int a = 0; a < k; a++) {
                assert_true(q[a] >= 0 && q[a] < n && q[a] != pos);
                for (int b = a + 1; b < k; b++)
                    assert_int_not_equal(q[a], q[b]);
            }
            for (int s = 0; s < ns && n > 1; s++)
                assert_true(has(q, k, (pos + sh[s]) % n));
            if (!pf_coll_use_grid(n)) continue;
            struct pf_coll_grid_peers p;
            pf_coll_grid_peers(&p, &g, pos);
            if (p.row_next >= 0 && p.row_next != pos) assert_true(has(q, k, p.row_next));
            if (p.col_next >= 0 && p.col_next != pos) assert_true(has(q, k, p.col_next));
            if (p.fold >= 0) assert_true(has(q, k, p.fold));
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shapes),
        cmocka_unit_test(test_peers_consistent),
        cmocka_unit_test(test_grid_exact),
        cmocka_unit_test(test_grid_extra_vanishes),
        cmocka_unit_test(test_grid_row_partner_vanishes),
        cmocka_unit_test(test_dial_partners),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
