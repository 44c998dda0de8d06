/* Stage collective.tcp: the data mesh, the TCP ring all-reduce and the link probes among
 * the pods that met (pkg/collective on the mesh's connections, pkg/rendezvous' steps; the
 * probe rounds in probes.c). */
#define _GNU_SOURCE
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void mesh_close(struct run_pods *P)
{
    pf_rdv_mesh_close(P->rdv);
    for (int k = 0; k < 3; k++)
        P->mesh.out_fd[k] = P->mesh.in_fd[k] = -1;
}

static void do_allreduce(struct pf_run *R)
{
    struct run_pods *P = R->pods;
    struct pf_rdv *rdv = P->rdv;
    int n = pf_rdv_size(rdv), rank = pf_rdv_rank(rdv), pos = pf_rdv_pos(rdv);
    P->ar_ran = true;
    long long bytes = R->config.tcp_message_bytes > 0 ? R->config.tcp_message_bytes : (64ll << 20);
    bytes -= bytes % 4;
    if (bytes < 4) bytes = 4;
    P->bytes = bytes;
    P->iters = R->config.tcp_iterations > 0 ? R->config.tcp_iterations : 5;
    size_t count = (size_t)bytes / 4;
    float *data = malloc((size_t)bytes);
    if (!data) {
        snprintf(P->ar_err, sizeof(P->ar_err), "cannot allocate %lld bytes", bytes);
        return;
    }
    double left = pf_rdv_left_s(rdv);
    double deadline = pf_now() + pf_clampd(left * 0.4, 3, left > 1e8 ? 300 : left - 3);
    char mib[32];
    snprintf(mib, sizeof(mib), "%.3g MiB", (double)bytes / (1 << 20));
    pf_ctx_progress(&R->ctx,
                    "tcp all-reduce: %d ranks, %s float32 sum, 1 checked + %d timed "
                    "iterations",
                    n, mib, P->iters);
    run_guard(R, "collective.tcp", "running the TCP all-reduce among %d ranks", n);
    int send_fd = P->mesh.out_fd[0], recv_fd = P->mesh.in_fd[0];
    struct pf_coll_fail fail;
    pf_coll_seed(data, count, rank);
    int r =
        pf_coll_allreduce(data, count, pos, n, send_fd, recv_fd, RUN_CHUNK_BYTES, deadline, &fail);
    if (r == 0) {
        P->ar_wrong = pf_coll_verify(data, count, pf_rdv_ranks(rdv), n, &P->ar_first_bad);
        double t0 = pf_now();
        for (int it = 0; it < P->iters && r == 0; it++)
            r = pf_coll_allreduce(data, count, pos, n, send_fd, recv_fd, RUN_CHUNK_BYTES, deadline,
                                  &fail);
        P->ar_seconds = (pf_now() - t0) / P->iters;
    }
    free(data);
    if (r == 0) {
        P->ar_ok = true;
        return;
    }
    int peer = fail.on_send ? run_ring_rank(R, 1) : run_ring_rank(R, -1);
    char w[160];
    pf_rdv_who(w, sizeof(w), rdv, peer);
    snprintf(P->ar_err, sizeof(P->ar_err), "%s %s: %s",
             fail.on_send ? "sending to" : "receiving from", w, fail.what);
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
    pf_buf_init(&b, 1 << 16);
    struct pf_fleet_ar mine = {P->ar_ok, P->ar_seconds, (long long)P->ar_wrong,
                               (long long)P->ar_first_bad, pf_rdv_iface(rdv)};
    pf_fleet_ar_encode(&b, &mine);
    double left = pf_rdv_left_s(rdv);
    double t = pf_clampd(left * 0.4, 3, left > 1e8 ? 300 : left) + 5;
    int r =
        pf_rdv_step(rdv, "allreduce", P->ar_ok, P->ar_err, b.data, b.len, PF_RDV_GATHER, t, &res);
    pf_buf_free(&b);
    struct pf_fleet *F = pf_rdv_fleet(rdv);
    const int *rk = pf_rdv_ranks(rdv);
    if (pf_rdv_rank(rdv) == 0 && F && res.blobs)
        for (int i = 0; i < pf_rdv_size(rdv); i++)
            if (res.blobs[i]) (void)pf_fleet_ar_decode(&F->r[rk[i]], res.blobs[i], res.lens[i]);
    pf_rdv_step_res_free(rdv, &res);
    return r;
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
    bool ok = pf_rdv_mesh_connect(rdv, &P->mesh, err, sizeof(err)) == 0;
    if (!ok) pf_ctx_progress(&R->ctx, "data mesh: %s", err);
    if (pf_rdv_step(rdv, "mesh", ok, err, NULL, 0, PF_RDV_BARRIER,
                    pf_clampd(pf_rdv_left_s(rdv) * 0.2, 3, 30) + 5, &res) < 0) {
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
