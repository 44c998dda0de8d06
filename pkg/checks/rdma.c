#include "checks.h"

void pf_check_rdma_devices(struct pf_check *out, struct pf_ctx *ctx)
{
    (void)ctx;
    pf_check_skip(out, "not built yet");
}

void pf_check_rdma_ports(struct pf_check *out, struct pf_ctx *ctx)
{
    (void)ctx;
    pf_check_skip(out, "not built yet");
}

void pf_check_rdma_memlock(struct pf_check *out, struct pf_ctx *ctx)
{
    (void)ctx;
    pf_check_skip(out, "not built yet");
}

void pf_check_rdma_gpudirect(struct pf_check *out, struct pf_ctx *ctx)
{
    (void)ctx;
    pf_check_skip(out, "not built yet");
}

