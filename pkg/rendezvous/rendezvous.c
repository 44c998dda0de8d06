#include "rendezvous.h"

void pf_rendezvous_stage(struct pf_ctx *ctx, const struct pf_rdv_opts *o)
{
    (void)o;
    struct pf_check *c = pf_verdict_add_check(ctx->verdict, "rendezvous");
    pf_check_skip(c, "not built yet");
}
