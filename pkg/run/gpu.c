/* Stage gpu: the NCCL collectives among every GPU of every pod (pkg/nccl), with the
 * rendezvous' allgather handed over through struct pf_nccl_peers. */
#define _GNU_SOURCE
#include "internal.h"

#include <stdint.h>
#include <string.h>

#include "../nccl/nccl.h"

/* The GPU stage's allgather (blobs up to PF_RDV_ALLGATHER_MAX bytes per rank). */
static int nccl_allgather(void *arg, const void *mine, void *out, size_t len)
{
    struct pf_run *R = arg;
    struct pf_rdv *rdv = R->pods->rdv;
    if (len > PF_RDV_ALLGATHER_MAX)
        return pf_err_set(PF_EINVAL, "allgather of %zu bytes per rank: the limit is %u", len,
                          PF_RDV_ALLGATHER_MAX);
    struct pf_rdv_step_res res;
    /* A pod reaches the next allgather after its own wait for NCCL, which ends at its own
     * stage deadline (nccl.timeoutSeconds from when it entered the stage): rank 0, done
     * early, waits that long plus the skew between the pods' stage starts and a margin
     * before it calls a silent pod lost. A pod whose NCCL timed out must still be heard. */
    double t = R->config.nccl_timeout_s + PF_RUN_SKEW_S;
    int r = pf_rdv_step(rdv, "allgather", true, NULL, mine, len, PF_RDV_ALLGATHER, t, &res);
    if (r == 0) {
        const int *rk = pf_rdv_ranks(rdv);
        for (int i = 0; i < pf_rdv_size(rdv); i++) {
            if (res.lens[i] != len) {
                size_t got = res.lens[i];
                pf_rdv_step_res_free(rdv, &res);
                return pf_err_set(PF_EINVAL, "allgather: rank %d sent %zu bytes, expected %zu",
                                  rk[i], got, len);
            }
            memcpy((uint8_t *)out + (size_t)i * len, res.blobs[i], len);
        }
    }
    pf_rdv_step_res_free(rdv, &res);
    return r < 0 ? pf_err_set(PF_ERR, "allgather among pods failed: a rank was lost") : 0;
}

/* A pod lost while NCCL is waited on (pf_rdv_peer_lost). */
static int nccl_lost(void *arg, char *who, size_t n)
{
    struct pf_run *R = arg;
    return pf_rdv_peer_lost(R->pods->rdv, who, n);
}

int run_stage_gpu(struct pf_run *R)
{
    struct run_pods *P = R->pods;
    if (P->met == RUN_NOT_MET) return 0;
    struct pf_rdv *rdv = P->rdv;
    /* every rank decides alike, by rank 0's world size: a rank that claims another one must
     * not skip the GPU stage's steps while the others run them */
    int world = pf_rdv_root_world(rdv);
    int n = pf_rdv_size(rdv);
    if (pf_rdv_stopped(rdv) || n != world) {
        struct pf_check *c = pf_verdict_find_check(&R->verdict, "collective.nccl");
        if (!c) {
            c = run_chk(R, "collective.nccl");
            pf_check_skip(c, "not run: %s",
                          n != world ? "not every rank joined the rendezvous"
                                     : "a rank was lost during the TCP stage");
        }
        return 0;
    }
    struct pf_nccl_peers peers;
    memset(&peers, 0, sizeof(peers));
    int rank = pf_rdv_rank(rdv);
    const char *my_ip = pf_rdv_my_ip(rdv);
    int port = pf_rdv_port(rdv);
    peers.rank = rank;
    peers.world_size = world;
    pf_strcpy(peers.coordinator_ip, sizeof(peers.coordinator_ip),
              rank == 0 ? (my_ip[0] ? my_ip : "127.0.0.1") : pf_rdv_root_ip(rdv));
    peers.port = port + 1 <= 65535 ? port + 1 : port - 1;
    peers.rdv = R;
    peers.allgather = nccl_allgather;
    peers.lost = nccl_lost;
    run_guard(R, "collective.nccl", "running the NCCL collectives among %d pods", world);
    if (R->ctx.deadline > 0) R->ctx.deadline -= PF_RUN_NCCL_AFTER_S;
    pf_nccl_stage(&R->ctx, &peers);
    return 0;
}
