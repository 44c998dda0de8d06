/* gpu.fabric on materialized fixture trees (tests/fixtures/node-8gpu-ndr) with the IMEX
 * channel folder made at test time. As in the other fixtures a device node is a regular file
 * when the test does not run as root (materialize.sh). No GPU fabric (NVLink switch trays,
 * IMEX daemon) and no libnvidia-ml run here: the fabric state is only asserted to be reported as
 * not read (tests/e2e/test_gpu_fabric.sh drives it through an NVML test double). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../pkg/checks/checks.h"
#include "../helpers/helpers.h"

struct row {
    const char *name;
    const char *mnnvl;  /* NCCL_MNNVL_ENABLE, NULL: unset */
    const char *mutate; /* shell run in the root, or NULL */
    enum pf_status status;
    const char *code;    /* the one finding's code, "" for none */
    const char *needle;  /* in the message or the finding's message */
    const char *channel; /* first evidence imexChannels entry, NULL: none */
};

static const struct row rows[] = {
    {"unset", NULL, NULL, PF_SKIP, "", "multi-node NVLink not requested (NCCL_MNNVL_ENABLE unset)",
     NULL},
    {"off", "0", "mkdir -p dev/nvidia-caps-imex-channels", PF_SKIP, "", "NCCL_MNNVL_ENABLE=0",
     NULL},
    {"on, no folder", "1", NULL, PF_FAIL, "imex-channel-missing",
     "/dev/nvidia-caps-imex-channels is not in the pod", NULL},
    {"auto, empty folder", "2", "mkdir -p dev/nvidia-caps-imex-channels", PF_FAIL,
     "imex-channel-missing", "/dev/nvidia-caps-imex-channels holds no channelN device", NULL},
    {"on, not a channel", "1",
     "mkdir -p dev/nvidia-caps-imex-channels/channel1 && : > dev/nvidia-caps-imex-channels/chan",
     PF_FAIL, "imex-channel-missing", "holds no channelN device", NULL},
    {"on, channel0", "1",
     "mkdir -p dev/nvidia-caps-imex-channels && : > dev/nvidia-caps-imex-channels/channel0",
     PF_PASS, "", "1 IMEX channel (channel0)", "/dev/nvidia-caps-imex-channels/channel0"},
    {"auto, two channels", "2",
     "mkdir -p dev/nvidia-caps-imex-channels && : > dev/nvidia-caps-imex-channels/channel7 && "
     ": > dev/nvidia-caps-imex-channels/channel2",
     PF_PASS, "", "2 IMEX channels (channel2, ...)", "/dev/nvidia-caps-imex-channels/channel2"},
};

static void test_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < PF_ARRAY_LEN(rows); i++) {
        const struct row *r = &rows[i];
        struct th_env e;
        th_env_open(&e, "node-8gpu-ndr", TH_MATERIALIZE);
        if (r->mutate) th_sh("cd '%s' && %s", e.root, r->mutate);
        th_env_start(&e);
        if (r->mnnvl) th_env_set(&e, "NCCL_MNNVL_ENABLE", r->mnnvl);
        th_env_check(&e, "gpu.fabric", pf_check_gpu_fabric);
        pf_verdict_finalize(&e.v, NULL, NULL);
        struct pf_check *c = pf_verdict_find_check(&e.v, "gpu.fabric");
        const char *code = c->nfindings ? c->findings[0].code : "";
        const char *text = c->nfindings ? c->findings[0].message : c->message;
        const struct pf_node *ch = pf_node_get(c->evidence, "imexChannels");
        const char *first = ch && ch->first ? ch->first->str : NULL;
        if (c->status != r->status || c->nfindings > 1 || strcmp(code, r->code) != 0 || !text ||
            !strstr(text, r->needle) ||
            (r->channel ? !first || strcmp(first, r->channel) != 0 : first != NULL))
            fail_msg("%s: got %s [%s] \"%s\" first channel %s", r->name, pf_status_name(c->status),
                     code, text ? text : "", first ? first : "-");
        if (r->status != PF_SKIP)
            assert_non_null(strstr(pf_node_get_str(c->evidence, "fabricState"),
                                   "NVML not available: /nonexistent/libnvidia-ml.so.1"));
        th_env_close(&e);
    }
}

int main(void)
{
    /* no libnvidia-ml here: the fabric state is reported as not read */
    setenv("PREFLIGHT_NVML_LIB", "/nonexistent/libnvidia-ml.so.1", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
