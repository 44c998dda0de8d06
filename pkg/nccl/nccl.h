/* nccl: GPU collectives through the training image's own libnccl (loaded with dlopen); its
 * INFO log is read with pkg/nccllog. */
#ifndef PF_NCCL_H
#define PF_NCCL_H

#include <stdbool.h>
#include <stddef.h>

#include "../context/context.h"
#include "../nccllog/nccllog.h"

/* What the rendezvous hands the GPU stage. */
struct pf_nccl_peers {
    int rank;                /* this pod's rank among pods */
    int world_size;          /* pods */
    char coordinator_ip[64]; /* rank 0's IP address, as this pod reaches it */
    int port;                /* a free port on rank 0 for NCCL's bootstrap (NCCL_COMM_ID) */
    void *rdv;               /* opaque rendezvous session for allgather */
    /* Every rank contributes len bytes; out receives world_size * len bytes in rank order.
     * 0 or a negative PF_E* code; bounded by the run's deadline. */
    int (*allgather)(void *rdv, const void *mine, void *out, size_t len);
    /* Optional, non-blocking: the rank of a pod whose rendezvous connection has closed (who:
     * "rank N (pod)"), else -1. Asked while NCCL is waited on, so that a pod killed in the
     * middle of a collective aborts the others' communicators at once, not at the deadline. */
    int (*lost)(void *rdv, char *who, size_t n);
};

/* Runs the NCCL collectives among all GPUs of all pods (check `collective.nccl`), adding
 * entries to ctx->verdict->collectives. Skips with a reason when there is no GPU or no NCCL.
 * Every rank must call it (it is collective). peers NULL: this pod alone (world size 1).
 * The ncclUniqueId is made by rank 0 (ncclGetUniqueId, so NCCL picks its bootstrap interface
 * by its own rules, as a training job does) and handed to every pod through
 * peers->allgather. */
void pf_nccl_stage(struct pf_ctx *ctx, const struct pf_nccl_peers *peers);

/* ---- expected bus bandwidth (pure) */
struct pf_nccl_expect {
    double gbps;    /* expected minimum busbw in GB/s; < 0: no expectation */
    char rule[256]; /* how it was derived, for the verdict */
};
/* From config expect.busbwGBps, else expect.lineRateGbps (Gb/s per node, /8 for GB/s) times
 * the efficiency curve (config->efficiency, else 2 nodes 85%, 8 nodes 68%, 125 nodes 39%)
 * interpolated linearly in log(nodes) and clamped outside its range. */
void pf_nccl_expected_busbw(struct pf_nccl_expect *out, const struct pf_config *config, int nodes);
/* busbw / algbw factor of a collective as nccl-tests computes it
 * (docs/checks/80-collective-nccl.md); 0 when the name is unknown. */
double pf_nccl_busbw_factor(const char *op, int nranks);

#endif
