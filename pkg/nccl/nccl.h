/* nccl: GPU collectives through the training image's own libnccl (loaded with dlopen), and
 * the reading of NCCL's INFO logs. */
#ifndef PF_NCCL_H
#define PF_NCCL_H

#include <stddef.h>

#include "../checks/checks.h"

/* What the rendezvous hands the GPU stage. */
struct pf_nccl_peers {
    int rank;                  /* this pod's rank among pods */
    int world_size;            /* pods */
    char coordinator_ip[64];   /* rank 0's IP address, as this pod reaches it */
    int port;                  /* a free port on rank 0 for NCCL's bootstrap (NCCL_COMM_ID) */
    void *rdv;                 /* opaque rendezvous session for allgather */
    /* Every rank contributes len bytes; out receives world_size * len bytes in rank order.
     * 0 or a negative PF_E* code; bounded by the run's deadline. */
    int (*allgather)(void *rdv, const void *mine, void *out, size_t len);
};

/* Runs the NCCL collectives among all GPUs of all pods (check `collective.nccl`), adding
 * entries to ctx->verdict->collectives. Skips with a reason when there is no GPU or no NCCL.
 * Every rank must call it (it is collective). */
void pf_nccl_stage(struct pf_ctx *ctx, const struct pf_nccl_peers *peers);

#endif
