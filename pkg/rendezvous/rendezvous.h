/* rendezvous: every pod meets rank 0 through the headless Service, they agree on who is
 * there, and run the TCP all-reduce. */
#ifndef PF_RENDEZVOUS_H
#define PF_RENDEZVOUS_H

#include "../checks/checks.h"

struct pf_rdv_opts {
    int rank;               /* -1: derive (JOB_COMPLETION_INDEX, RANK, hostname) */
    int world_size;         /* -1: derive (PREFLIGHT_WORLD_SIZE, WORLD_SIZE) */
    char coordinator[512];  /* "": derive (MASTER_ADDR, <prefix>-0.<subdomain>) */
    int port;               /* 0: from the config */
    const char *token;      /* PREFLIGHT_TOKEN, or NULL */
};

/* Runs the rendezvous and the collectives among pods; adds the checks `rendezvous` and
 * `collective.tcp`, the ranks and the culprits to ctx->verdict. Never blocks past the
 * guard's deadline. */
void pf_rendezvous_stage(struct pf_ctx *ctx, const struct pf_rdv_opts *o);

#endif
