#include "checks.h"

void pf_check_gpu_devices(struct pf_check *out, struct pf_ctx *ctx)
{
    (void)ctx;
    pf_check_skip(out, "not built yet");
}

