/* The grid all-reduce: rings along the rows, then along the columns, then along the rows
 * again, so that the sequential steps grow as 2(rows + cols), 4 to 4.4 sqrt(n), instead of
 * the ring's 2(n-1) (docs/tcp-allreduce.md). Each phase is the ring of ring.c on a subset
 * of the positions and of the data; the partial last row folds into the row above. */
#define _GNU_SOURCE
#include "collective.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

bool pf_coll_use_grid(int n)
{
    return n >= PF_COLL_GRID_MIN_N;
}

void pf_coll_grid_shape(struct pf_coll_grid *g, int n)
{
    memset(g, 0, sizeof(*g));
    g->n = n;
    if (n < 4) {
        g->rows = 1;
        g->cols = n > 0 ? n : 1;
        return;
    }
    int s = (int)ceil(sqrt((double)n));
    while ((long)(s - 1) * (s - 1) >= n)
        s--;
    while ((long)s * s < n)
        s++;
    for (int c = s; 2 * c <= 3 * s && c <= n; c++) {
        if (n % c == 0) {
            g->cols = c;
            g->rows = n / c;
            return;
        }
    }
    g->cols = s;
    g->rows = n / s;
    g->extra = n - g->rows * g->cols;
}

int pf_coll_grid_steps(const struct pf_coll_grid *g)
{
    return pf_coll_steps(g->cols) + pf_coll_steps(g->rows) + (g->extra ? 2 : 0);
}

void pf_coll_algo_name(char *out, size_t n, int npos)
{
    if (!pf_coll_use_grid(npos)) {
        snprintf(out, n, "ring");
        return;
    }
    struct pf_coll_grid g;
    pf_coll_grid_shape(&g, npos);
    if (g.extra)
        snprintf(out, n, "grid %dx%d + %d folded", g.rows, g.cols, g.extra);
    else
        snprintf(out, n, "grid %dx%d", g.rows, g.cols);
}

void pf_coll_grid_peers(struct pf_coll_grid_peers *out, const struct pf_coll_grid *g, int pos)
{
    *out = (struct pf_coll_grid_peers){-1, -1, -1, -1, -1};
    int full = g->rows * g->cols;
    if (pos < 0 || pos >= g->n) return;
    if (pos >= full) {
        out->fold = pos - g->cols;
        return;
    }
    int r = pos / g->cols, c = pos % g->cols;
    if (g->cols > 1) {
        out->row_next = r * g->cols + (c + 1) % g->cols;
        out->row_prev = r * g->cols + (c + g->cols - 1) % g->cols;
    }
    if (g->rows > 1) {
        out->col_next = ((r + 1) % g->rows) * g->cols + c;
        out->col_prev = ((r + g->rows - 1) % g->rows) * g->cols + c;
    }
    if (r == g->rows - 1 && c < g->extra) out->fold = pos + g->cols;
}

/* An extra: its vector to its partner, the sum back. */
static int grid_extra(float *data, size_t count, const struct pf_coll_grid_peers *p,
                      const struct pf_coll_grid_fds *fds, size_t chunk_bytes, double deadline,
                      struct pf_coll_fail *fail, int *fail_peer)
{
    int r = pf_coll_send_floats(data, count, fds->fold, deadline, fail);
    if (r == 0) r = pf_coll_recv_floats(data, count, false, fds->fold, chunk_bytes, deadline, fail);
    if (r) *fail_peer = p->fold;
    return r;
}

/* One phase on a ring of the grid; a failure names the partner on the failing side. */
static int grid_ring(float *data, size_t count, int pos, int n, int send_fd, int recv_fd, int next,
                     int prev, size_t chunk_bytes, int g0, int g1, double deadline,
                     struct pf_coll_fail *fail, int *fail_peer)
{
    int r = pf_coll_ring_run(data, count, pos, n, send_fd, recv_fd, chunk_bytes, g0, g1, deadline,
                             fail);
    if (r) *fail_peer = fail->on_send ? next : prev;
    return r;
}

int pf_coll_allreduce_grid(float *data, size_t count, const struct pf_coll_grid *g, int pos,
                           const struct pf_coll_grid_fds *fds, size_t chunk_bytes, double deadline,
                           struct pf_coll_fail *fail, int *fail_peer)
{
    memset(fail, 0, sizeof(*fail));
    *fail_peer = -1;
    if (g->n <= 1 || count == 0) return 0;
    struct pf_coll_grid_peers p;
    pf_coll_grid_peers(&p, g, pos);
    if (pos >= g->rows * g->cols)
        return grid_extra(data, count, &p, fds, chunk_bytes, deadline, fail, fail_peer);
    int r = 0, c = pos % g->cols, row = pos / g->cols, cols = g->cols;
    if (p.fold >= 0) {
        r = pf_coll_recv_floats(data, count, true, fds->fold, chunk_bytes, deadline, fail);
        if (r) *fail_peer = p.fold;
    }
    /* the row's reduce-scatter: column c holds segment (c + 1) % cols of the row's sum */
    if (r == 0)
        r = grid_ring(data, count, c, cols, fds->row_send, fds->row_recv, p.row_next, p.row_prev,
                      chunk_bytes, 0, cols - 1, deadline, fail, fail_peer);
    size_t off, len;
    pf_coll_segment(count, cols, (c + 1) % cols, &off, &len);
    /* the column's all-reduce of that segment: every row's sum of it */
    if (r == 0)
        r = grid_ring(data + off, len, row, g->rows, fds->col_send, fds->col_recv, p.col_next,
                      p.col_prev, chunk_bytes, 0, pf_coll_steps(g->rows), deadline, fail,
                      fail_peer);
    /* the row's all-gather: every segment, summed over all */
    if (r == 0)
        r = grid_ring(data, count, c, cols, fds->row_send, fds->row_recv, p.row_next, p.row_prev,
                      chunk_bytes, cols - 1, pf_coll_steps(cols), deadline, fail, fail_peer);
    if (r == 0 && p.fold >= 0) {
        r = pf_coll_send_floats(data, count, fds->fold, deadline, fail);
        if (r) *fail_peer = p.fold;
    }
    return r;
}

static int add_partner(int *out, int k, int q, int pos)
{
    if (q < 0 || q == pos) return k;
    for (int i = 0; i < k; i++)
        if (out[i] == q) return k;
    out[k] = q;
    return k + 1;
}

int pf_coll_dial_partners(int pos, int n, int out[PF_COLL_DIAL_MAX])
{
    if (n < 2 || pos < 0 || pos >= n) return 0;
    int sh[3], k = 0, ns = pf_coll_probe_shifts(n, sh);
    for (int i = 0; i < ns; i++)
        k = add_partner(out, k, (pos + sh[i]) % n, pos);
    if (!pf_coll_use_grid(n)) return k;
    struct pf_coll_grid g;
    pf_coll_grid_shape(&g, n);
    struct pf_coll_grid_peers p;
    pf_coll_grid_peers(&p, &g, pos);
    k = add_partner(out, k, p.row_next, pos);
    k = add_partner(out, k, p.col_next, pos);
    return add_partner(out, k, p.fold, pos);
}
