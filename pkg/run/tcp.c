/* Stage collective.tcp: the data mesh, the TCP ring all-reduce and the link probes among
 * the pods that met (pkg/collective on the mesh's connections, pkg/rendezvous' steps). */
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

static void do_probes(struct pf_run *R)
{
    struct run_pods *P = R->pods;
    struct pf_rdv *rdv = P->rdv;
    long long nbytes = P->bytes;
    /* at least 4 MiB: a few milliseconds of scheduling noise must not make a link look slow */
    if (nbytes < (4 << 20)) nbytes = 4 << 20;
    for (int k = 0; k < P->mesh.nshifts; k++) {
        /* RUN_PROBE_RUNS runs, each after a barrier, keeping the fastest: a moment of
         * scheduling noise on a busy host makes one run slow, a slow link is slow every time */
        double best = 0;
        int from = run_ring_rank(R, -P->mesh.shifts[k]);
        for (int rep = 0; rep < RUN_PROBE_RUNS; rep++) {
            struct pf_rdv_step_res res;
            if (pf_rdv_step(rdv, "probe", true, NULL, NULL, 0, PF_RDV_BARRIER, 15, &res) < 0) {
                pf_rdv_step_res_free(rdv, &res);
                return;
            }
            pf_rdv_step_res_free(rdv, &res);
            double deadline = pf_now() + pf_clampd(pf_rdv_left_s(rdv) * 0.04, 1, 10);
            struct pf_coll_probe_res pr;
            struct pf_coll_fail fail;
            int r = pf_coll_probe(&pr, P->mesh.out_fd[k], P->mesh.in_fd[k], (size_t)nbytes,
                                  deadline, &fail);
            if (r < 0) {
                char w[160];
                pf_rdv_who(w, sizeof(w), rdv,
                           fail.on_send ? run_ring_rank(R, P->mesh.shifts[k]) : from);
                snprintf(P->ar_err, sizeof(P->ar_err), "link probe %s %s: %s",
                         fail.on_send ? "to" : "from", w, fail.what);
                mesh_close(P);
                return;
            }
            if (pr.gbps > best) best = pr.gbps;
        }
        P->mylinks = pf_xrealloc(P->mylinks, (P->nmylinks + 1) * sizeof(*P->mylinks));
        P->mylinks[P->nmylinks++] = (struct pf_coll_link){from, pf_rdv_rank(rdv), best};
    }
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

/* The links into every rank, gathered at rank 0. */
static void gather_links(struct pf_run *R)
{
    struct run_pods *P = R->pods;
    struct pf_rdv *rdv = P->rdv;
    struct pf_rdv_step_res res;
    struct pf_buf b;
    pf_buf_init(&b, 1 << 20);
    pf_fleet_links_encode(&b, P->mylinks, P->nmylinks);
    bool pok = !pf_rdv_stopped(rdv) && P->nmylinks == (size_t)P->mesh.nshifts;
    int r = pf_rdv_step(rdv, "links", pok, pok ? NULL : P->ar_err, b.data, b.len, PF_RDV_GATHER, 15,
                        &res);
    (void)r;
    pf_buf_free(&b);
    const int *rk = pf_rdv_ranks(rdv);
    if (pf_rdv_rank(rdv) == 0 && res.blobs)
        for (int i = 0; i < pf_rdv_size(rdv); i++)
            if (res.blobs[i])
                (void)pf_fleet_links_decode(&P->links, &P->nlinks, rk[i], res.blobs[i],
                                            res.lens[i]);
    pf_rdv_step_res_free(rdv, &res);
}

/* mesh → barrier → all-reduce → its results gathered → probes → the links gathered */
int run_stage_tcp(struct pf_run *R)
{
    struct run_pods *P = R->pods;
    struct pf_rdv *rdv = P->rdv;
    for (int k = 0; k < 3; k++)
        P->mesh.out_fd[k] = P->mesh.in_fd[k] = -1;
    if (P->met != RUN_MET || pf_rdv_size(rdv) < 2) return 0;
    struct pf_rdv_step_res res;
    char err[384] = "";
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
    do_probes(R);
    gather_links(R);
    mesh_close(P);
    return 0;
}
