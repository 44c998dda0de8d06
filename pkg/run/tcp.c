/* Stage collective.tcp: the data mesh, the TCP all-reduce (the ring, or the grid of rings
 * for many ranks) and the link probes among the pods that met (pkg/collective on the mesh's
 * connections, pkg/rendezvous' steps; the probe rounds in probes.c). */
#define _GNU_SOURCE
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void mesh_close(struct run_pods *P)
{
    pf_rdv_mesh_close(P->rdv);
    for (int k = 0; k < 3; k++)
        P->mesh.out_fd[k] = P->mesh.in_fd[k] = -1;
}

/* The DHELLO rounds of the grid all-reduce's own connections: far above the probe rounds'
 * (a few dozen), so that neither takes the other's connection. */
#define GRID_ROUND_ROW 1000000 /* the row ring's wrap: last column to first */
#define GRID_ROUND_COL 1000001 /* the column rings */
#define GRID_ROUND_FOLD 1000002

/* The grid's connections and the ones it opened itself (to close after). */
struct grid_links {
    struct pf_coll_grid g;
    struct pf_coll_grid_fds fds;
    int own[5], nown;
};

static void grid_links_close(struct grid_links *L)
{
    for (int i = 0; i < L->nown; i++)
        close(L->own[i]);
    L->nown = 0;
}

/* Dials position q for round; the fd, owned by L, or -1 with why. */
static int grid_dial(struct pf_run *R, struct grid_links *L, int round, int q, double deadline,
                     char *why, size_t nwhy)
{
    int fd = pf_rdv_probe_connect(R->pods->rdv, round, q, true, deadline, why, nwhy);
    if (fd >= 0) L->own[L->nown++] = fd;
    return fd;
}

/* The grid's partners: the row ring rides the mesh's shift 1 (position p to p+1) except
 * for each row's wrap; the column rings and the folds get connections of their own (dialed
 * first, then accepted in whatever order they come). 0, or -1 with why. */
static int grid_connect(struct pf_run *R, struct grid_links *L, double deadline, char *why,
                        size_t nwhy)
{
    struct run_pods *P = R->pods;
    int n = pf_rdv_size(P->rdv), pos = pf_rdv_pos(P->rdv);
    bool mesh1 = P->mesh.nshifts > 0 && P->mesh.shifts[0] == 1;
    struct pf_coll_grid_peers p;
    pf_coll_grid_peers(&p, &L->g, pos);
    bool extra = pos >= L->g.rows * L->g.cols;
    L->fds = (struct pf_coll_grid_fds){-1, -1, -1, -1, -1};
    if (p.row_next >= 0)
        L->fds.row_send = mesh1 && p.row_next == (pos + 1) % n
                              ? P->mesh.out_fd[0]
                              : grid_dial(R, L, GRID_ROUND_ROW, p.row_next, deadline, why, nwhy);
    if (p.col_next >= 0)
        L->fds.col_send = grid_dial(R, L, GRID_ROUND_COL, p.col_next, deadline, why, nwhy);
    if (extra) L->fds.fold = grid_dial(R, L, GRID_ROUND_FOLD, p.fold, deadline, why, nwhy);
    if ((p.row_next >= 0 && L->fds.row_send < 0) || (p.col_next >= 0 && L->fds.col_send < 0) ||
        (extra && L->fds.fold < 0))
        return -1;
    int from[3], round[3], fd[3], *into[3], k = 0;
    if (p.row_prev >= 0 && mesh1 && p.row_prev == (pos + n - 1) % n)
        L->fds.row_recv = P->mesh.in_fd[0];
    else if (p.row_prev >= 0)
        from[k] = p.row_prev, round[k] = GRID_ROUND_ROW, into[k++] = &L->fds.row_recv;
    if (p.col_prev >= 0)
        from[k] = p.col_prev, round[k] = GRID_ROUND_COL, into[k++] = &L->fds.col_recv;
    if (!extra && p.fold >= 0)
        from[k] = p.fold, round[k] = GRID_ROUND_FOLD, into[k++] = &L->fds.fold;
    int missing = k ? pf_rdv_probe_accept_many(P->rdv, k, from, round, fd, deadline, why, nwhy) : 0;
    for (int i = 0; i < k; i++) {
        *into[i] = fd[i];
        if (fd[i] >= 0) L->own[L->nown++] = fd[i];
    }
    return missing ? -1 : 0;
}

/* One all-reduce by the algorithm for this size; on a failure *peer is the rank at the
 * other end of the failing link. */
static int allreduce_once(struct pf_run *R, struct grid_links *L, float *data, size_t count,
                          double deadline, struct pf_coll_fail *fail, int *peer)
{
    struct run_pods *P = R->pods;
    struct pf_rdv *rdv = P->rdv;
    int n = pf_rdv_size(rdv), pos = pf_rdv_pos(rdv);
    if (!L) {
        int r = pf_coll_allreduce(data, count, pos, n, P->mesh.out_fd[0], P->mesh.in_fd[0],
                                  RUN_CHUNK_BYTES, deadline, fail);
        *peer = fail->on_send ? run_ring_rank(R, 1) : run_ring_rank(R, -1);
        return r;
    }
    int fp = -1;
    int r = pf_coll_allreduce_grid(data, count, &L->g, pos, &L->fds, RUN_CHUNK_BYTES, deadline,
                                   fail, &fp);
    *peer = fp >= 0 ? pf_rdv_ranks(rdv)[fp] : -1;
    return r;
}

/* The checked iteration, then the timed ones: 0, or the failure. */
static int allreduce_run(struct pf_run *R, struct grid_links *L, float *data, size_t count,
                         double deadline, struct pf_coll_fail *fail, int *peer)
{
    struct run_pods *P = R->pods;
    struct pf_rdv *rdv = P->rdv;
    pf_coll_seed(data, count, pf_rdv_rank(rdv));
    int r = allreduce_once(R, L, data, count, deadline, fail, peer);
    if (r) return r;
    P->ar_wrong =
        pf_coll_verify(data, count, pf_rdv_ranks(rdv), pf_rdv_size(rdv), &P->ar_first_bad);
    double t0 = pf_now();
    for (int it = 0; it < P->iters && r == 0; it++)
        r = allreduce_once(R, L, data, count, deadline, fail, peer);
    P->ar_seconds = (pf_now() - t0) / P->iters;
    return r;
}

static void do_allreduce(struct pf_run *R)
{
    struct run_pods *P = R->pods;
    struct pf_rdv *rdv = P->rdv;
    int n = pf_rdv_size(rdv);
    P->ar_ran = true;
    long long bytes = R->config.tcp_message_bytes;
    bytes -= bytes % 4;
    if (bytes < 4) bytes = 4;
    P->bytes = bytes;
    P->iters = R->config.tcp_iterations;
    size_t count = (size_t)bytes / 4;
    float *data = malloc((size_t)bytes);
    if (!data) {
        snprintf(P->ar_err, sizeof(P->ar_err), "cannot allocate %lld bytes", bytes);
        return;
    }
    double deadline = pf_run_wait(R, "tcp.allreduce");
    char mib[32], algo[64];
    snprintf(mib, sizeof(mib), "%.3g MiB", (double)bytes / (1 << 20));
    pf_coll_algo_name(algo, sizeof(algo), n);
    pf_ctx_progress(&R->ctx,
                    "tcp all-reduce: %d ranks, %s float32 sum (%s), 1 checked + %d timed "
                    "iterations",
                    n, mib, algo, P->iters);
    run_guard(R, "collective.tcp", "running the TCP all-reduce among %d ranks", n);
    struct pf_coll_fail fail = {0};
    int peer = -1, r = 0;
    struct grid_links L = {0};
    bool grid = pf_coll_use_grid(n);
    char why[384] = "";
    if (grid) {
        pf_coll_grid_shape(&L.g, n);
        r = grid_connect(R, &L, deadline, why, sizeof(why));
    }
    if (r == 0) r = allreduce_run(R, grid ? &L : NULL, data, count, deadline, &fail, &peer);
    grid_links_close(&L);
    free(data);
    if (r == 0) {
        P->ar_ok = true;
        return;
    }
    if (why[0]) {
        snprintf(P->ar_err, sizeof(P->ar_err), "%s", why);
    } else {
        char w[PF_WHO_MAX] = "a partner";
        if (peer >= 0) pf_rdv_who(w, sizeof(w), rdv, peer);
        snprintf(P->ar_err, sizeof(P->ar_err), "%s %s: %s",
                 fail.on_send ? "sending to" : "receiving from", w, fail.what);
    }
    pf_ctx_progress(&R->ctx, "tcp all-reduce failed: %s", P->ar_err);
    /* close the ring now so that the neighbours stop at once rather than at their deadline */
    mesh_close(P);
}

/* The all-reduce's results: rank 0 gathers every rank's into the fleet. PF_ERR: stopped. */
static int gather_allreduce(struct pf_run *R)
{
    struct run_pods *P = R->pods;
    struct pf_rdv *rdv = P->rdv;
    struct pf_rdv_step_res res;
    struct pf_buf b;
    pf_buf_init(&b, PF_BUF_TEXT);
    struct pf_fleet_ar mine = {P->ar_ok, P->ar_seconds, (long long)P->ar_wrong,
                               (long long)P->ar_first_bad, pf_rdv_iface(rdv)};
    pf_fleet_ar_encode(&b, &mine);
    double t = pf_run_wait_s(R, "tcp.allreduce") + PF_RUN_SKEW_S;
    int r =
        pf_rdv_step(rdv, "allreduce", P->ar_ok, P->ar_err, b.data, b.len, PF_RDV_GATHER, t, &res);
    pf_buf_free(&b);
    struct pf_fleet *F = run_fleet(R);
    const int *rk = pf_rdv_ranks(rdv);
    if (pf_rdv_rank(rdv) == 0 && F && res.blobs)
        for (int i = 0; i < pf_rdv_size(rdv); i++)
            if (res.blobs[i] && pf_fleet_ar_decode(&F->r[rk[i]], res.blobs[i], res.lens[i]) < 0) {
                char w[PF_WHO_MAX];
                pf_rdv_who(w, sizeof(w), rdv, rk[i]);
                pf_ctx_progress(&R->ctx, "the all-reduce result of %s: %s", w, pf_err_msg());
            }
    pf_rdv_step_res_free(rdv, &res);
    return r;
}

/* This rank's data port while the mesh formed: how long it took against its wait, and what
 * the acceptor did (docs/checks/collective.md) */
static void mesh_evidence(struct pf_run *R, double seconds, double wait_s)
{
    const struct pf_rdv_mesh *m = &R->pods->mesh;
    struct pf_node *e = pf_node_set_map(run_chk(R, "collective.tcp")->evidence, "dataMesh");
    pf_node_set_dbl(e, "seconds", round(seconds * 1000) / 1000);
    pf_node_set_dbl(e, "waitSeconds", round(wait_s * 1000) / 1000);
    pf_node_set_int(e, "accepted", m->accepted);
    pf_node_set_int(e, "taken", m->taken);
    pf_node_set_int(e, "closed", m->closed);
}

/* mesh → barrier → all-reduce → its results gathered → the probe rounds (probes.c) */
int run_stage_tcp(struct pf_run *R)
{
    struct run_pods *P = R->pods;
    struct pf_rdv *rdv = P->rdv;
    for (int k = 0; k < 3; k++)
        P->mesh.out_fd[k] = P->mesh.in_fd[k] = -1;
    if (P->met != RUN_MET || pf_rdv_size(rdv) < 2) return 0;
    struct pf_rdv_step_res res;
    char err[384] = "";
    P->mesh.nshifts = pf_coll_probe_shifts(pf_rdv_size(rdv), P->mesh.shifts);
    double t0 = pf_now(), wait = pf_run_wait(R, "tcp.mesh");
    bool ok = pf_rdv_mesh_connect(rdv, &P->mesh, wait, err, sizeof(err)) == 0;
    if (!ok) pf_ctx_progress(&R->ctx, "data mesh: %s", err);
    mesh_evidence(R, pf_now() - t0, wait - t0);
    if (pf_rdv_step(rdv, "mesh", ok, err, NULL, 0, PF_RDV_BARRIER,
                    pf_run_wait_s(R, "tcp.mesh") + PF_RUN_SKEW_S, &res) < 0) {
        pf_rdv_step_res_free(rdv, &res);
        mesh_close(P);
        return 0;
    }
    pf_rdv_step_res_free(rdv, &res);
    do_allreduce(R);
    if (gather_allreduce(R) < 0) {
        mesh_close(P);
        return 0;
    }
    run_guard(R, "collective.tcp", "probing the links between %d ranks", pf_rdv_size(rdv));
    (void)run_probe_links(R);
    mesh_close(P);
    return 0;
}
