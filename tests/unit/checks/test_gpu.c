/* gpu.devices on materialized fixture trees (tests/fixtures/node-*, cpu-node), table-driven,
 * with mutations made at test time: nodes missing from /dev, extra nodes, a /proc without
 * GPUs, an unreadable information file. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../../pkg/checks/checks.h"
#include "../helpers/helpers.h"

/* Runs gpu.devices on the tree with the config as it is now, finalizes, returns the result. */
static struct pf_check *env_run(struct th_env *e)
{
    th_env_check(e, "gpu.devices", pf_check_gpu_devices);
    pf_verdict_finalize(&e->v, NULL, NULL);
    return pf_verdict_find_check(&e->v, "gpu.devices");
}

struct row {
    const char *name;
    const char *fixture;
    const char *mutate; /* shell run in the root, or NULL */
    int expect;         /* expect.gpusPerPod, -1 unset */
    enum pf_status status;
    const char *codes;
    const char *needle; /* in the check's message */
    long long count;    /* evidence count, -1: not checked */
};

static const struct row rows[] = {
    {"8 GPUs", "node-8gpu-ndr", NULL, -1, PF_PASS, "",
     "8 x NVIDIA H100 80GB HBM3, driver 550.90.07", 8},
    {"8 GPUs, 8 expected", "node-8gpu-ndr", NULL, 8, PF_PASS, "", NULL, 8},
    {"8 GPUs, 4 expected", "node-8gpu-ndr", NULL, 4, PF_FAIL, "gpu-count",
     "8 GPUs usable in the pod, expect.gpusPerPod is 4", 8},
    {"open kernel module version", "node-roce", NULL, 2, PF_PASS, "",
     "2 x NVIDIA L40S, driver 570.124.06", 2},
    {"cpu node", "cpu-node", NULL, -1, PF_SKIP, "", "no NVIDIA GPUs visible", -1},
    {"cpu node, 8 expected", "cpu-node", NULL, 8, PF_FAIL, "no-gpus", "expect.gpusPerPod is 8", 0},
    /* missing or unreadable evidence is unknown (evidence.unknown), never a failure */
    {"garbage information", "node-garbage", NULL, -1, PF_PASS, "",
     "unknown gpu-count: GPU 0000:18:00.0: /proc/driver/nvidia/gpus/0000:18:00.0/information: "
     "Device Minor is \"zero\", not a number",
     1},
    /* a node missing: without expectation unknown (a masked /proc under the NVIDIA runtime, or
     * an unmasked one under CDI: the gang compares counts), with one a failure; an expectation
     * that matches the nodes is the unmasked-/proc (CDI) case and passes */
    {"node 5 missing", "node-8gpu-ndr", "rm dev/nvidia5", -1, PF_PASS, "",
     "unknown gpu-count: /proc/driver/nvidia/gpus lists 8 GPUs, the pod has 7 of their nodes (not "
     "in the pod: /dev/nvidia5 (0000:ab:00.0))",
     7},
    {"node 5 missing, 8 expected", "node-8gpu-ndr", "rm dev/nvidia5", 8, PF_FAIL, "gpu-count",
     "7 GPUs usable in the pod, expect.gpusPerPod is 8 (listed by the driver but not in the pod: "
     "/dev/nvidia5 (0000:ab:00.0))",
     7},
    {"node 5 missing, 7 expected", "node-8gpu-ndr", "rm dev/nvidia5", 7, PF_PASS, "", NULL, 7},
    {"no nodes", "node-8gpu-ndr", "rm dev/nvidia[0-7]", -1, PF_SKIP, "",
     "no /dev/nvidiaN node in the pod (the driver lists 8 GPUs)", 0},
    {"no nodes, 8 expected", "node-8gpu-ndr", "rm dev/nvidia[0-7]", 8, PF_FAIL, "no-gpus",
     "the driver lists 8 GPUs but no /dev/nvidiaN node is in the pod", 0},
    {"extra node", "node-8gpu-ndr", "mknod dev/nvidia9 c 195 9 2>/dev/null || : > dev/nvidia9", -1,
     PF_FAIL, "gpu-count", "/dev/nvidia9 is in the pod but no GPU in /proc/driver/nvidia/gpus", 9},
    {"proc empty", "node-8gpu-ndr", "rm -rf proc/driver/nvidia/gpus", -1, PF_PASS, "",
     "unknown gpu-count: 8 /dev/nvidiaN nodes in the pod but /proc/driver/nvidia/gpus lists no GPU",
     8},
    {"information unreadable", "node-8gpu-ndr",
     "rm proc/driver/nvidia/gpus/0000:3a:00.0/information", -1, PF_PASS, "",
     "unknown gpu-count: GPU 0000:3a:00.0: /", 8},
    {"no version file", "node-8gpu-ndr", "rm proc/driver/nvidia/version", -1, PF_PASS, "",
     "driver version unknown", 8},
    {"nvidiactl and nvidia-uvm are not GPUs", "cpu-node",
     "mkdir -p dev && : > dev/nvidiactl && : > dev/nvidia-uvm && : > dev/nvidia-modeset", -1,
     PF_SKIP, "", NULL, -1},
};

static void test_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < PF_ARRAY_LEN(rows); i++) {
        const struct row *r = &rows[i];
        struct th_env e;
        th_env_open(&e, r->fixture, TH_MATERIALIZE);
        if (r->mutate) th_sh("cd '%s' && %s", e.root, r->mutate);
        e.cfg.expect_gpus_per_pod = r->expect;
        struct pf_check *c = env_run(&e);
        char codes[256];
        th_codes(codes, sizeof(codes), c);
        const struct pf_node *count = pf_node_get(c->evidence, "count");
        if (c->status != r->status || strcmp(codes, r->codes) != 0 ||
            (r->needle && !strstr(c->message, r->needle)) ||
            (r->count >= 0 && (!count || count->i != r->count))) {
            for (size_t j = 0; j < c->nfindings; j++)
                print_message("  %s %s: %s\n", pf_status_name(c->findings[j].status),
                              c->findings[j].code, c->findings[j].message);
            fail_msg("%s: got %s [%s] \"%s\" count %lld, want %s [%s] \"%s\" count %lld", r->name,
                     pf_status_name(c->status), codes, c->message, count ? count->i : -1,
                     pf_status_name(r->status), r->codes, r->needle ? r->needle : "", r->count);
        }
        th_env_close(&e);
    }
}

static void test_evidence(void **state)
{
    (void)state;
    struct th_env e;
    th_env_open(&e, "node-8gpu-ndr", TH_MATERIALIZE);
    struct pf_check *c = env_run(&e);
    assert_int_equal(c->status, PF_PASS);
    assert_string_equal(pf_node_get_str(c->evidence, "driverVersion"), "550.90.07");
    assert_int_equal(pf_node_get(c->evidence, "driverGpus")->i, 8);
    struct pf_node *gpus = pf_node_get(c->evidence, "gpus");
    assert_non_null(gpus);
    assert_int_equal(gpus->count, 8);
    const struct pf_node *g0 = gpus->first;
    assert_string_equal(pf_node_get_str(g0, "busId"), "0000:18:00.0");
    assert_string_equal(pf_node_get_str(g0, "model"), "NVIDIA H100 80GB HBM3");
    assert_string_equal(pf_node_get_str(g0, "uuid"), "GPU-5a2d9b5c-6f1e-4c2b-9d3a-0c1e2f3a4b50");
    assert_string_equal(pf_node_get_str(g0, "devNode"), "/dev/nvidia0");
    assert_true(pf_node_get(g0, "inPod")->b);
    const struct pf_node *g7 = gpus->last;
    assert_string_equal(pf_node_get_str(g7, "busId"), "0000:db:00.0");
    assert_string_equal(pf_node_get_str(g7, "devNode"), "/dev/nvidia7");
    th_env_close(&e);

    /* minors need not follow bus order: the node is matched by Device Minor */
    th_env_open(&e, "node-8gpu-ndr", TH_MATERIALIZE);
    th_sh("cd '%s' && sed -i 's/^Device Minor: \\t 0$/Device Minor: \\t 9/' "
          "proc/driver/nvidia/gpus/0000:18:00.0/information && rm dev/nvidia0",
          e.root);
    c = env_run(&e);
    char codes[128];
    th_codes(codes, sizeof(codes), c);
    assert_string_equal(codes, "");
    assert_non_null(strstr(c->message, "unknown gpu-count: "));
    assert_non_null(strstr(c->message, "/dev/nvidia9 (0000:18:00.0)"));
    assert_string_equal(pf_node_get_str(pf_node_get(c->evidence, "gpus")->first, "devNode"),
                        "/dev/nvidia9");
    assert_false(pf_node_get(pf_node_get(c->evidence, "gpus")->first, "inPod")->b);
    th_env_close(&e);
}

/* /proc/driver/nvidia/version as the driver writes it. Sources: the proprietary x86_64 and
 * aarch64 lines as captured in public test suites of GPU tooling ("NVIDIA UNIX aarch64 Kernel
 * Module  550.120  Fri Sep 13 11:01:10 UTC 2024"); the open module's line from a user's
 * `cat /proc/driver/nvidia/version` ("... Open Kernel Module for x86_64  580.95.05  Release
 * Build  (dvs-builder@U22-I3-B17-02-5)  Tue Sep 23 09:55:41 UTC 2025"), and the line of
 * the brief's 565.57.01 report. The open aarch64 line and the localized date (the build
 * host's locale) are those lines with the architecture or the date changed. */
static void test_driver_version_forms(void **state)
{
    (void)state;
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  565.57.01  Release Build  "
         "(dvs-builder@U16-I3-B03-4-3)  Fri Oct 11 04:44:53 UTC 2024\n"
         "GCC version:  gcc version 12.3.0 (Ubuntu 12.3.0-1ubuntu1~22.04)\n",
         "565.57.01"},
        {"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  "
         "(dvs-builder@U22-I3-B17-02-5)  Tue Sep 23 09:55:41 UTC 2025\n",
         "580.95.05"},
        {"NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  570.148.08  Release Build  "
         "(dvs-builder@U16-I1-N07-12-3)  Thu May  8 01:06:36 UTC 2025\n",
         "570.148.08"},
        {"NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.90.07  Fri May 31 09:35:42 UTC "
         "2024\nGCC version:  gcc version 12.3.0\n",
         "550.90.07"},
        {"NVRM version: NVIDIA UNIX aarch64 Kernel Module  550.120  Fri Sep 13 11:01:10 UTC 2024\n",
         "550.120"},
        {"NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Fr 31. Mai 09:35:42 CEST "
         "2024\n",
         "535.183.01"},
        {"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64 595.71.05\n", "595.71.05"},
        /* nothing to take: no version on the NVRM line (the GCC line's is not the driver's) */
        {"NVRM version: ???\nGCC version:  gcc version 12.3.0\n", NULL},
        {"NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  Fr 31. Mai\n", NULL},
        {"", NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char v[64] = "";
        bool ok = pf_nvidia_driver_version(v, sizeof(v), cases[i].text);
        if (!cases[i].want) {
            if (ok) fail_msg("case %zu: got \"%s\", want none", i, v);
            continue;
        }
        if (!ok || strcmp(v, cases[i].want) != 0)
            fail_msg("case %zu: got \"%s\", want \"%s\"", i, ok ? v : "(none)", cases[i].want);
    }
}

/* environment.driverVersion comes from the same parser: the RoCE fixture's open module. */
static void test_environment_driver_version(void **state)
{
    (void)state;
    struct pf_verdict v;
    pf_verdict_init(&v);
    struct pf_ctx ctx;
    pf_ctx_init(&ctx, NULL, &v);
    char root[4096];
    assert_non_null(realpath("fixtures/node-roce", root));
    assert_int_equal(pf_host_init(&ctx.host, root), 0);
    pf_checks_inventory(&ctx);
    pf_checks_environment(&ctx);
    const char *dv = pf_node_get_str(v.environment, "driverVersion");
    assert_non_null(dv);
    assert_string_equal(dv, "570.124.06");
    pf_ctx_free(&ctx);
    pf_verdict_free(&v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_evidence),
        cmocka_unit_test(test_driver_version_forms),
        cmocka_unit_test(test_environment_driver_version),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
