/* nccl.env's rules for settings NCCL releases changed: each against a given NCCL version (the
 * version code ncclGetVersion returns; 0 when no libnccl.so.2 loads), on the RoCE fixture
 * (tests/fixtures/node-roce: Ethernet link layer), the InfiniBand one (node-8gpu-ndr) or no
 * root. The rules were checked against NCCL's source at each release tag (pkg/ncclenv). No NCCL
 * is loaded here: the version is the test's input. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../pkg/checks/checks.h"
#include "../../../pkg/ncclenv/ncclenv.h"

struct rule_case {
    const char *name;
    const char *vars; /* "A=1 B=2" */
    int version;
    const char *root; /* fixture tree, or NULL for none */
    const char *code; /* the one finding expected, or NULL for none */
    const char *msg;  /* a part of its message */
};

static const struct rule_case cases[] = {
    /* renamed */
    {"WORK_FIFO_DEPTH on 2.23.4", "NCCL_WORK_FIFO_DEPTH=131072", 22304, NULL,
     "nccl-setting-renamed",
     "NCCL_WORK_FIFO_DEPTH (from test) has no effect: the loaded NCCL 2.23.4 does not read it "
     "(NCCL 2.22 replaced it with NCCL_WORK_FIFO_BYTES: the work FIFO is sized in bytes"},
    {"WORK_FIFO_DEPTH on 2.21.5 is read", "NCCL_WORK_FIFO_DEPTH=131072", 22105, NULL, NULL, NULL},
    {"WORK_FIFO_DEPTH, NCCL unknown", "NCCL_WORK_FIFO_DEPTH=131072", 0, NULL,
     "nccl-setting-renamed",
     "has no effect: NCCL 2.22 and later do not read it (NCCL 2.22 replaced it with "
     "NCCL_WORK_FIFO_BYTES"},
    {"MNNVL on 2.28.9", "NCCL_MNNVL=1", 22809, NULL, "nccl-setting-renamed",
     "the loaded NCCL 2.28.9 does not read it (NCCL 2.21 replaced it with NCCL_MNNVL_ENABLE"},
    {"MNNVL on 2.20.5 is read", "NCCL_MNNVL=1", 22005, NULL, NULL, NULL},
    {"MNNVL on 2.19.3 not yet", "NCCL_MNNVL=1", 21903, NULL, "nccl-setting-unsupported",
     "NCCL_MNNVL (from test) has no effect: the loaded NCCL 2.19.3 does not read it yet (NCCL "
     "2.20 and later do"},
    {"PROXY_PROFILE on 2.23.4", "NCCL_PROXY_PROFILE=/tmp/p.json", 22304, NULL,
     "nccl-setting-renamed", "(NCCL 2.23 replaced it with NCCL_PROFILER_PLUGIN"},
    /* obsolete */
    {"CUDA_PATH on 2.21.5", "NCCL_CUDA_PATH=/usr/local/cuda/lib64", 22105, NULL,
     "nccl-setting-obsolete",
     "NCCL_CUDA_PATH (from test) has no effect: the loaded NCCL 2.21.5 does not read it (gone "
     "since NCCL 2.21: NCCL takes the CUDA driver's entry points from the CUDA runtime)"},
    {"CUDA_PATH on 2.20.5 is read", "NCCL_CUDA_PATH=/usr/local/cuda/lib64", 22005, NULL, NULL,
     NULL},
    /* not read yet */
    {"ADDR_FAMILY on 2.20.5", "NCCL_IB_ADDR_FAMILY=AF_INET6", 22005, NULL,
     "nccl-setting-unsupported",
     "the loaded NCCL 2.20.5 does not read it yet (NCCL 2.21 and later do: it steers the "
     "automatic RoCE GID choice)"},
    {"ADDR_FAMILY on 2.21.5", "NCCL_IB_ADDR_FAMILY=AF_INET6", 22105, NULL, NULL, NULL},
    {"ADDR_FAMILY, NCCL unknown", "NCCL_IB_ADDR_FAMILY=AF_INET6", 0, NULL, NULL, NULL},
    {"RUNTIME_CONNECT on 2.21.5", "NCCL_RUNTIME_CONNECT=0", 22105, NULL, "nccl-setting-unsupported",
     "(NCCL 2.22 and later do"},
    {"WORK_FIFO_BYTES on 2.21.5", "NCCL_WORK_FIFO_BYTES=2097152", 22105, NULL,
     "nccl-setting-unsupported", "older releases read NCCL_WORK_FIFO_DEPTH (entries)"},
    /* the RoCE GID */
    {"GID index on RoCE, 2.28.9", "NCCL_IB_GID_INDEX=3", 22809, "fixtures/node-roce",
     "gid-index-fixed",
     "NCCL_IB_GID_INDEX=3 (from test) pins the RoCE GID index, while the loaded NCCL 2.28.9 "
     "picks the GID itself"},
    {"GID index on RoCE, NCCL unknown", "NCCL_IB_GID_INDEX=3", 0, "fixtures/node-roce",
     "gid-index-fixed", "while NCCL 2.21 and later pick the GID itself"},
    {"GID index, no RDMA device known", "NCCL_IB_GID_INDEX=3", 0, NULL, "gid-index-fixed",
     "pins the RoCE GID index"},
    {"GID index on RoCE, 2.20.5 needs it", "NCCL_IB_GID_INDEX=3", 22005, "fixtures/node-roce", NULL,
     NULL},
    {"GID index -1 is the automatic choice", "NCCL_IB_GID_INDEX=-1", 22809, "fixtures/node-roce",
     NULL, NULL},
    {"GID index on InfiniBand", "NCCL_IB_GID_INDEX=0", 22809, "fixtures/node-8gpu-ndr", NULL, NULL},
    /* still read by every release */
    {"NET_GDR_LEVEL", "NCCL_NET_GDR_LEVEL=PHB", 22809, NULL, NULL, NULL},
    {"NSOCKS_PERTHREAD", "NCCL_NSOCKS_PERTHREAD=4", 21805, NULL, NULL, NULL},
};

static void run_case(const struct rule_case *k)
{
    struct pf_config cfg;
    struct pf_verdict v;
    struct pf_ctx ctx;
    pf_config_defaults(&cfg);
    pf_verdict_init(&v);
    pf_ctx_init(&ctx, &cfg, &v);
    char tmp[64], root[96], cmd[256];
    snprintf(tmp, sizeof(tmp), "/tmp/pf-ncclver-XXXXXX");
    assert_non_null(mkdtemp(tmp));
    snprintf(root, sizeof(root), "%s/root", tmp);
    if (k->root)
        snprintf(cmd, sizeof(cmd), "fixtures/materialize.sh %s %s 2>/dev/null", k->root, root);
    else
        snprintf(cmd, sizeof(cmd), "mkdir %s", root); /* an empty root: no RDMA device known */
    assert_int_equal(system(cmd), 0);
    assert_int_equal(pf_host_init(&ctx.host, root), 0);
    pf_checks_inventory(&ctx);
    char vars[256];
    snprintf(vars, sizeof(vars), "%s", k->vars);
    for (char *save = NULL, *kv = strtok_r(vars, " ", &save); kv; kv = strtok_r(NULL, " ", &save)) {
        char *eq = strchr(kv, '=');
        *eq = '\0';
        pf_env_set(&ctx.env, kv, eq + 1, "test");
    }
    struct pf_check *c = pf_verdict_add_check(&v, "nccl.env");
    pf_nccl_env_version_rules(c, &ctx, k->version);
    if (!k->code && c->nfindings != 0)
        fail_msg("%s: unexpected %s: %s", k->name, c->findings[0].code, c->findings[0].message);
    if (k->code) {
        if (c->nfindings != 1) fail_msg("%s: %zu findings, want 1", k->name, c->nfindings);
        if (strcmp(c->findings[0].code, k->code) != 0 || !strstr(c->findings[0].message, k->msg))
            fail_msg("%s: got %s: %s", k->name, c->findings[0].code, c->findings[0].message);
        assert_int_equal(c->findings[0].status, PF_WARN);
        assert_non_null(c->findings[0].remedy);
    }
    if (k->version) assert_non_null(pf_node_get(c->evidence, "ncclVersion"));
    pf_ctx_free(&ctx);
    pf_verdict_free(&v);
    pf_config_free(&cfg);
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
    assert_int_equal(system(cmd), 0);
}

static void test_rules(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        run_case(&cases[i]);
}

/* the table: every name is one NCCL reads in some release, and since < until where both are set */
static void test_table(void **state)
{
    (void)state;
    static const char *const names[] = {
        "NCCL_CUDA_PATH",           "NCCL_IB_ADDR_FAMILY",  "NCCL_IB_ADDR_RANGE",
        "NCCL_IB_ROCE_VERSION_NUM", "NCCL_MNNVL",           "NCCL_MNNVL_ENABLE",
        "NCCL_PROFILER_PLUGIN",     "NCCL_PROXY_PROFILE",   "NCCL_RUNTIME_CONNECT",
        "NCCL_WORK_FIFO_BYTES",     "NCCL_WORK_FIFO_DEPTH",
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const struct pf_ncclenv_change *c = pf_ncclenv_change(names[i]);
        assert_non_null(c);
        assert_true(pf_ncclenv_known(names[i]));
        if (c->since && c->until) assert_true(c->since < c->until);
        if (c->replacement) assert_non_null(pf_ncclenv_change(c->replacement));
    }
    assert_null(pf_ncclenv_change("NCCL_IB_HCA"));
    assert_null(pf_ncclenv_change(NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rules),
        cmocka_unit_test(test_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
