/* rdma.efa's search for NCCL's net plugin, in the dynamic loader's order (glibc elf/dl-load.c,
 * _dl_map_object, for NCCL's dlopen from libnccl.so.2): libnccl's DT_RPATH when it has no
 * DT_RUNPATH, LD_LIBRARY_PATH, its DT_RUNPATH, /etc/ld.so.cache, the default folders. The
 * trees are built by the real writers (tests/fixtures/loader/make-tree.sh: shared objects
 * linked by cc and ld, the cache written by glibc's ldconfig -r) on the EFA fixture
 * (tests/fixtures/node-efa). Where the search cannot be followed to its end, the check says
 * unknown and does not fail. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../../pkg/checks/checks.h"
#include "../helpers/helpers.h"

#define MAKE "fixtures/loader/make-tree.sh"
#define OFI "opt/amazon/ofi-nccl/lib"

static struct pf_check *run_efa(struct th_env *e)
{
    th_env_check(e, "rdma.efa", pf_check_rdma_efa);
    pf_verdict_finalize(&e->v, NULL, NULL);
    return pf_verdict_find_check(&e->v, "rdma.efa");
}

static const char *unknown_of(const struct pf_check *c, const char *code)
{
    const struct pf_node *u = pf_node_get(c->evidence, "unknown");
    for (const struct pf_node *e = u ? u->first : NULL; e; e = e->next)
        if (strcmp(pf_node_get_str(e, "code"), code) == 0) return pf_node_get_str(e, "missing");
    return NULL;
}

struct efa_case {
    const char *name;
    const char *setup; /* make-tree.sh steps and shell, run in the root ("$M" is make-tree) */
    const char *vars[3];
    const char *status; /* "pass", "fail", "unknown" (efa-plugin-missing) */
    const char *needle; /* in the plugin path (pass), the finding (fail), the unknown entry */
    const char *from;   /* pass: evidence pluginFrom */
};

/* Each case fails on a search that reads only LD_LIBRARY_PATH, /etc/ld.so.conf.d and the
 * default folders (the search before this one), except the first two, which hold it. */
static const struct efa_case cases[] = {
    {"complete search, no plugin: fail",
     "$M . lib usr/lib/x86_64-linux-gnu/libnccl.so.2 libnccl.so.2 && $M . ldconfig",
     {NULL},
     "fail",
     "not where NCCL's dlopen from /usr/lib/x86_64-linux-gnu/libnccl.so.2 looks for it",
     NULL},
    {"plugin by LD_LIBRARY_PATH",
     "$M . lib usr/lib/x86_64-linux-gnu/libnccl.so.2 libnccl.so.2 && $M . lib " OFI
     "/libnccl-net-ofi.so libnccl-net-ofi.so && $M . ldconfig",
     {"NCCL_NET_PLUGIN=ofi", "LD_LIBRARY_PATH=/" OFI, NULL},
     "pass",
     "/" OFI "/libnccl-net-ofi.so",
     "LD_LIBRARY_PATH"},
    {"plugin by libnccl's DT_RUNPATH ($ORIGIN)",
     "$M . lib opt/nccl/lib/libnccl.so.2 libnccl.so.2 runpath '$ORIGIN/../plugins' && $M . lib "
     "opt/nccl/plugins/libnccl-net.so libnccl-net.so && $M . ldconfig",
     {"LD_LIBRARY_PATH=/opt/nccl/lib", NULL},
     "pass",
     "/opt/nccl/lib/../plugins/libnccl-net.so",
     "libnccl's DT_RUNPATH"},
    {"plugin by libnccl's DT_RPATH",
     "$M . lib opt/nccl/lib/libnccl.so.2 libnccl.so.2 rpath /opt/ofi/lib && $M . lib "
     "opt/ofi/lib/libnccl-net-ofi.so libnccl-net-ofi.so && $M . ldconfig",
     {"NCCL_NET_PLUGIN=ofi", "LD_LIBRARY_PATH=/opt/nccl/lib", NULL},
     "pass",
     "/opt/ofi/lib/libnccl-net-ofi.so",
     "libnccl's DT_RPATH"},
    {"plugin by ld.so.cache (a folder /etc/ld.so.conf names itself)",
     "$M . lib usr/lib/x86_64-linux-gnu/libnccl.so.2 libnccl.so.2 && $M . lib " OFI
     "/libnccl-net-ofi.so libnccl-net-ofi.so && mkdir -p etc && echo /" OFI
     " >etc/ld.so.conf && $M . ldconfig",
     {"NCCL_NET_PLUGIN=ofi", NULL},
     "pass",
     "/" OFI "/libnccl-net-ofi.so",
     "ld.so.cache"},
    {"ld.so.conf.d names the folder but ldconfig has not cached it: fail, run ldconfig",
     "$M . lib usr/lib/x86_64-linux-gnu/libnccl.so.2 libnccl.so.2 && $M . ldconfig && $M . "
     "lib " OFI "/libnccl-net-ofi.so libnccl-net-ofi.so && mkdir -p etc/ld.so.conf.d && echo "
     "/" OFI " >etc/ld.so.conf.d/100_ofinccl.conf",
     {"NCCL_NET_PLUGIN=ofi", NULL},
     "fail",
     "exists but the loader does not search its folder (add it to LD_LIBRARY_PATH, or name it "
     "in /etc/ld.so.conf.d and run ldconfig)",
     NULL},
    {"no libnccl.so.2 in the tree: its DT_RUNPATH is not known",
     "$M . ldconfig",
     {NULL},
     "unknown",
     "libnccl.so.2 (in none of LD_LIBRARY_PATH, ld.so.cache and the system folders",
     NULL},
    {"a plugin linked into the executable (STATIC_PLUGIN)",
     "$M . lib usr/lib/x86_64-linux-gnu/libnccl.so.2 libnccl.so.2 && $M . ldconfig",
     {"NCCL_NET_PLUGIN=static", NULL},
     "unknown",
     "the trainer's executable (NCCL_NET_PLUGIN entry \"static\"",
     NULL},
    {"an ld.so.cache that is not one",
     "$M . lib usr/lib/x86_64-linux-gnu/libnccl.so.2 libnccl.so.2 && mkdir -p etc && printf "
     "'not a cache at all, twenty bytes and more' >etc/ld.so.cache",
     {NULL},
     "unknown",
     "/etc/ld.so.cache (",
     NULL},
    {"a libnccl.so.2 that is not a shared object",
     "mkdir -p usr/lib/x86_64-linux-gnu && echo 'INPUT(libnccl.so.2.28.9) and more text' "
     ">usr/lib/x86_64-linux-gnu/libnccl.so.2 && $M . ldconfig",
     {NULL},
     "unknown",
     "the DT_RUNPATH of /usr/lib/x86_64-linux-gnu/libnccl.so.2 (not an ELF file",
     NULL},
    {"a relative LD_LIBRARY_PATH entry (the trainer's working folder)",
     "$M . lib usr/lib/x86_64-linux-gnu/libnccl.so.2 libnccl.so.2 && $M . ldconfig",
     {"LD_LIBRARY_PATH=plugins:/usr/local/lib", NULL},
     "unknown",
     "the folder \"plugins\" of LD_LIBRARY_PATH (the trainer's working folder)",
     NULL},
    {"no ld.so.cache, the plugin in a folder ld.so.conf.d names: unknown",
     "$M . lib usr/lib/x86_64-linux-gnu/libnccl.so.2 libnccl.so.2 && $M . lib " OFI
     "/libnccl-net-ofi.so libnccl-net-ofi.so && mkdir -p etc/ld.so.conf.d && echo /" OFI
     " >etc/ld.so.conf.d/100_ofinccl.conf",
     {"NCCL_NET_PLUGIN=ofi", NULL},
     "unknown",
     "/etc/ld.so.cache (absent, while /" OFI "/libnccl-net-ofi.so sits in a folder",
     NULL},
};

static void test_loader_order(void **state)
{
    (void)state;
    char make[1024];
    th_abs_path(make, sizeof(make), MAKE);
    /* PF_EFA_CASE=N runs case N alone */
    const char *only = getenv("PF_EFA_CASE");
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (only && *only && (size_t)atoi(only) != i) continue;
        const struct efa_case *k = &cases[i];
        struct th_env e;
        th_env_open(&e, "node-efa", TH_MATERIALIZE);
        th_sh("cd %s && M=%s && %s", e.root, make, k->setup);
        th_env_start(&e);
        for (size_t v = 0; k->vars[v]; v++) {
            char name[64];
            const char *eq = strchr(k->vars[v], '=');
            snprintf(name, sizeof(name), "%.*s", (int)(eq - k->vars[v]), k->vars[v]);
            th_env_set(&e, name, eq + 1);
        }
        struct pf_check *c = run_efa(&e);
        const char *unk = unknown_of(c, "efa-plugin-missing");
        const struct pf_finding *f = th_finding(c, "efa-plugin-missing", NULL);
        if (strcmp(k->status, "pass") == 0) {
            if (c->status != PF_PASS || f || unk)
                fail_msg("%s: %s, %s", k->name, pf_status_name(c->status),
                         f     ? f->message
                         : unk ? unk
                               : "");
            assert_string_equal(pf_node_get_str(c->evidence, "plugin"), k->needle);
            assert_string_equal(pf_node_get_str(c->evidence, "pluginFrom"), k->from);
        } else if (strcmp(k->status, "fail") == 0) {
            if (!f || f->status != PF_FAIL || !strstr(f->message, k->needle))
                fail_msg("%s: want a failure with \"%s\", have %s", k->name, k->needle,
                         f     ? f->message
                         : unk ? unk
                               : c->message);
        } else {
            if (f) fail_msg("%s: fails (%s) where it should say unknown", k->name, f->message);
            if (!unk || !strstr(unk, k->needle))
                fail_msg("%s: unknown \"%s\", want \"%s\"", k->name, unk ? unk : "(none)",
                         k->needle);
            assert_int_equal(c->status, PF_PASS);
        }
        th_env_close(&e);
    }
}

/* expect.transport OFI: no EFA device in a readable /sys/class/infiniband fails; without
 * that folder it is unknown */
static void test_expect_ofi_without_listing(void **state)
{
    (void)state;
    struct th_env e;
    th_env_open(&e, "node-8gpu-ndr", TH_MATERIALIZE);
    snprintf(e.cfg.expect_transport, sizeof(e.cfg.expect_transport), "OFI");
    const struct pf_finding *f = th_finding(run_efa(&e), "efa-plugin-missing", NULL);
    assert_non_null(f);
    assert_int_equal(f->status, PF_FAIL);
    th_env_close(&e);
    th_env_open(&e, "node-8gpu-ndr", TH_MATERIALIZE);
    th_sh("rm -rf %s/sys/class/infiniband", e.root);
    snprintf(e.cfg.expect_transport, sizeof(e.cfg.expect_transport), "OFI");
    struct pf_check *c = run_efa(&e);
    assert_null(th_finding(c, "efa-plugin-missing", NULL));
    const char *u = unknown_of(c, "efa-plugin-missing");
    assert_non_null(u);
    assert_non_null(strstr(u, "/sys/class/infiniband cannot be read"));
    th_env_close(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loader_order),
        cmocka_unit_test(test_expect_ofi_without_listing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
