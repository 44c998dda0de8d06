/* gpu.fabric's reading of NVML's fabric registration (nvmlDeviceGetGpuFabricInfoV): which states
 * make fabric-not-ready. No GPU and no libnvidia-ml are here: the values are the ones nvml.h
 * defines (repeated in NCCL's src/include/nvmlwrap.h), and NCCL's src/mnnvl.cc is the rule:
 * every rank COMPLETED, and a cluster UUID that is not zero. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "../../../pkg/checks/checks.h"

static const unsigned char uuid[16] = {0x5e, 0x1f, 0x2a, 0x90, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
static const unsigned char zero[16] = {0};

static const struct {
    const char *name;
    unsigned state;
    int status;
    const unsigned char *uuid;
    enum pf_fabric_readiness want;
    const char *why;
} cases[] = {
    {"no NVLink fabric", 0, 0, zero, PF_FABRIC_NONE, ""},
    {"not started", 1, 0, uuid, PF_FABRIC_NOT_READY, "fabric registration not started"},
    {"in progress", 2, 0, uuid, PF_FABRIC_NOT_READY, "fabric registration in progress"},
    {"completed", 3, 0, uuid, PF_FABRIC_READY, ""},
    /* 999 is NVML_ERROR_UNKNOWN */
    {"completed with an error", 3, 999, uuid, PF_FABRIC_NOT_READY,
     "fabric registration completed with NVML error 999"},
    {"completed, zero cluster UUID", 3, 0, zero, PF_FABRIC_NOT_READY,
     "fabric registration completed without a cluster UUID (NCCL then turns multi-node NVLink "
     "off)"},
    {"a state NVML does not define", 7, 0, uuid, PF_FABRIC_NOT_READY,
     "fabric state 7, not one NVML defines"},
};

static void test_readiness(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char why[160];
        enum pf_fabric_readiness r = pf_gpu_fabric_readiness(why, sizeof(why), cases[i].state,
                                                             cases[i].status, cases[i].uuid);
        if (r != cases[i].want || strcmp(why, cases[i].why) != 0)
            fail_msg("%s: got %d \"%s\"", cases[i].name, (int)r, why);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_readiness)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
