#include "checks.h"

void pf_check_sys_shm(struct pf_check *out, struct pf_ctx *ctx)
{
    (void)ctx;
    pf_check_skip(out, "not built yet");
}

void pf_check_sys_ports(struct pf_check *out, struct pf_ctx *ctx)
{
    (void)ctx;
    pf_check_skip(out, "not built yet");
}

