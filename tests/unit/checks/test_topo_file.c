/* NCCL_TOPO_FILE's GPUs and NICs: the bus id scanner on real topology files (Azure's NDv4, NDv5
 * and NCv4 images, an IBM Cloud H100 dump; tests/fixtures/nccl-topo/SOURCES.md), and nccl.env's
 * topo-file-mismatch with the PCI devices of an Azure NDv4 VM (tests/fixtures/node-azure-ndv4,
 * a sysfs tree: no GPU or NIC is here). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../pkg/checks/checks.h"

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) fail_msg("cannot open %s", path);
    char *buf = malloc(1 << 16);
    assert_non_null(buf);
    *len = fread(buf, 1, (1 << 16) - 1, f);
    buf[*len] = '\0';
    fclose(f);
    return buf;
}

static const struct {
    const char *file;
    size_t n;
    const char *ids; /* all of them, in the order the scanner lists them */
} real[] = {
    /* GPUs 0x030200 and InfiniBand NICs 0x020700 under virtual switches ffff:ff:0N.0 */
    {"azure-ndv4-topo.xml", 16,
     "0003:00:00.0,0103:00:00.0,0004:00:00.0,0104:00:00.0,0001:00:00.0,0101:00:00.0,0002:00:00.0,"
     "0102:00:00.0,000d:00:00.0,0107:00:00.0,000e:00:00.0,0108:00:00.0,000b:00:00.0,0105:00:00.0,"
     "000c:00:00.0,0106:00:00.0"},
    {"azure-ndv5-topo.xml", 16,
     "0001:00:00.0,0101:00:00.0,0002:00:00.0,0102:00:00.0,0003:00:00.0,0103:00:00.0,0008:00:00.0,"
     "0104:00:00.0,0009:00:00.0,0105:00:00.0,000a:00:00.0,0106:00:00.0,000b:00:00.0,0107:00:00.0,"
     "000c:00:00.0,0108:00:00.0"},
    /* four GPUs; <nvlink target="..."> is not a device of the file, eth0's <nic> has no bus id */
    {"azure-ncv4-topo.xml", 4, "0001:00:00.0,0002:00:00.0,0003:00:00.0,0004:00:00.0"},
    /* a dump: NIC 0x020000 with <nic><net name="mlx5_7">, GPU with <gpu dev="0">, bridges left out
     */
    {"ibm-gx3d-h100-topo.xml", 16,
     "0000:a3:00.0,0000:a4:00.0,0000:ad:00.0,0000:ae:00.0,0000:b7:00.0,0000:b8:00.0,0000:c1:00.0,"
     "0000:c2:00.0,0000:cb:00.0,0000:cc:00.0,0000:d5:00.0,0000:d6:00.0,0000:df:00.0,0000:e0:00.0,"
     "0000:e9:00.0,0000:ea:00.0"},
    /* aws-ofi-nccl's p4d.24xlarge file: GPUs 0x030200 and EFA NICs 0x020000 (vendor 0x1d0f)
     * under virtual switches */
    {"aws-p4d-24xl-topo.xml", 12,
     "0000:10:1c.0,0000:10:1d.0,0000:10:1b.0,0000:20:1c.0,0000:20:1d.0,0000:20:1b.0,0000:90:1c.0,"
     "0000:90:1d.0,0000:90:1b.0,0000:a0:1c.0,0000:a0:1d.0,0000:a0:1b.0"},
    /* aws-ofi-nccl's p5.48xlarge file: leaf <pci busid=... link_speed=... link_width=.../> with
     * no class (NCCL reads it from sysfs), under class-less switches that are left out */
    {"aws-p5.48xl-topo.xml", 32,
     "0000:4f:00.0,0000:50:00.0,0000:51:00.0,0000:52:00.0,0000:60:00.0,0000:61:00.0,0000:62:00.0,"
     "0000:63:00.0,0000:71:00.0,0000:72:00.0,0000:73:00.0,0000:74:00.0,0000:82:00.0,0000:83:00.0,"
     "0000:84:00.0,0000:85:00.0,0000:93:00.0,0000:94:00.0,0000:95:00.0,0000:96:00.0,0000:a4:00.0,"
     "0000:a5:00.0,0000:a6:00.0,0000:a7:00.0,0000:b5:00.0,0000:b6:00.0,0000:b7:00.0,0000:b8:00.0,"
     "0000:c6:00.0,0000:c7:00.0,0000:c8:00.0,0000:c9:00.0"},
};

static void test_real_files(void **state)
{
    (void)state;
    for (size_t t = 0; t < sizeof(real) / sizeof(real[0]); t++) {
        char path[128];
        snprintf(path, sizeof(path), "fixtures/nccl-topo/%s", real[t].file);
        size_t len;
        char *text = slurp(path, &len);
        struct pf_strlist ids = {0};
        size_t n = pf_topo_busids(&ids, text, len);
        char got[1024];
        pf_strlist_join(got, sizeof(got), &ids, ",");
        if (n != real[t].n || strcmp(got, real[t].ids) != 0)
            fail_msg("%s: got %zu: %s", real[t].file, n, got);
        assert_false(pf_strlist_has(&ids, "ffff:ff:01.0"));
        assert_false(pf_strlist_has(&ids, "0000:a1:00.0"));
        assert_false(pf_strlist_has(&ids, "0000:45:00.0")); /* p5's class-less switch */
        pf_strlist_free(&ids);
        free(text);
    }
}

static const struct {
    const char *name, *xml, *ids;
} edge[] = {
    {"empty", "", ""},
    {"no bus id", "<system version=\"1\"><cpu numaid=\"0\"></cpu></system>", ""},
    {"bridge alone", "<pci busid=\"ffff:ff:01.0\" class=\"0x060400\"/>", ""},
    {"class decides",
     "<pci busid='0000:17:00.0' class='0x030200'/><pci busid=\"0000:18:00.0\" class=\"0x010802\"/>",
     "0000:17:00.0"},
    {"no class: a leaf is a device", "<pci busid=\"0000:18:00.0\" link_width=\"16\"/>",
     "0000:18:00.0"},
    {"no class: a switch is not",
     "<pci busid=\"0000:45:00.0\"><pci busid=\"0000:4f:00.0\"/><pci busid=\"0000:50:00.0\">"
     "</pci></pci>",
     "0000:4f:00.0,0000:50:00.0"},
    {"no class, a bridge class", "<pci busid=\"0000:45:00.0\" class=\"0x060400\"></pci>", ""},
    {"child decides", "<pci busid=\"0000:18:00.0\" class=\"0x068000\"><gpu dev=\"0\"/></pci>",
     "0000:18:00.0"},
    {"nested nic",
     "<pci busid=\"0000:17:00.0\"><pci busid=\"0000:19:00.0\"><nic><net name=\"m\"/>"
     "</nic></pci></pci>",
     "0000:19:00.0"},
    {"as written", "<pci busid=\"0000:AB:00.0\" class=\"0x020700\"/>", "0000:AB:00.0"},
    {"not a bus id", "<pci busid=\"not an id\" class=\"0x030200\"/>", ""},
    {"other attribute", "<pci xbusid=\"0000:aa:00.0\" class=\"0x030200\"/>", ""},
    {"comment", "<!-- <pci busid=\"0000:01:00.0\" class=\"0x030200\"/> -->", ""},
    {"each once",
     "<pci busid=\"0001:00:00.0\" class=\"0x0302\"/><pci busid=\"0001:00:00.0\" "
     "class=\"0x0302\"/>",
     "0001:00:00.0"},
    {"truncated", "<pci busid=\"0000:0b:00.0\" class=\"0x030200\"><gpu dev=\"0\"", "0000:0b:00.0"},
    {"unterminated value", "<pci busid=\"0000:cc", ""},
};

static void test_edges(void **state)
{
    (void)state;
    for (size_t t = 0; t < sizeof(edge) / sizeof(edge[0]); t++) {
        struct pf_strlist ids = {0};
        (void)pf_topo_busids(&ids, edge[t].xml, strlen(edge[t].xml));
        char got[256];
        pf_strlist_join(got, sizeof(got), &ids, ",");
        if (strcmp(got, edge[t].ids) != 0)
            fail_msg("%s: got \"%s\", want \"%s\"", edge[t].name, got, edge[t].ids);
        pf_strlist_free(&ids);
    }
}

static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *fmt, ...)
{
    char cmd[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    int rc = system(cmd);
    if (rc != 0) fail_msg("command failed (%d): %s", rc, cmd);
}

/* nccl.env on a node tree with NCCL_TOPO_FILE=<where>/<file>, the real file copied where the
 * images put it (Azure's /opt/microsoft, aws-ofi-nccl's share/aws-ofi-nccl/xml). Returns the
 * topo-file-mismatch finding's message, "" if none. */
static void run_on(const char *node, const char *where, const char *file, long long want_ids,
                   char *msg, size_t n)
{
    char dir[64], root[128];
    snprintf(dir, sizeof(dir), "/tmp/pf-topo-XXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(root, sizeof(root), "%s/root", dir);
    sh("fixtures/materialize.sh fixtures/%s %s 2>/dev/null && mkdir -p %s%s && "
       "cp fixtures/nccl-topo/%s %s%s/",
       node, root, root, where, file, root, where);
    char env[160];
    snprintf(env, sizeof(env), "%s/%s", where, file);
    struct pf_config cfg;
    struct pf_verdict v;
    struct pf_ctx ctx;
    pf_config_defaults(&cfg);
    pf_verdict_init(&v);
    pf_ctx_init(&ctx, &cfg, &v);
    assert_int_equal(pf_host_init(&ctx.host, root), 0);
    pf_env_set(&ctx.env, "NCCL_TOPO_FILE", env, "test");
    pf_checks_inventory(&ctx);
    pf_check_nccl_env(pf_verdict_add_check(&v, "nccl.env"), &ctx);
    pf_verdict_finalize(&v, NULL, NULL);
    struct pf_check *c = pf_verdict_find_check(&v, "nccl.env");
    assert_int_equal(pf_node_get(c->evidence, "topoFileBusIds")->i, want_ids);
    msg[0] = '\0';
    for (size_t i = 0; i < c->nfindings; i++)
        if (strcmp(c->findings[i].code, "topo-file-mismatch") == 0) {
            assert_int_equal(c->findings[i].status, PF_WARN);
            snprintf(msg, n, "%s", c->findings[i].message);
        }
    pf_ctx_free(&ctx);
    pf_verdict_free(&v);
    pf_config_free(&cfg);
    sh("rm -rf '%s'", dir);
}

static void run(const char *file, long long want_ids, char *msg, size_t n)
{
    run_on("node-azure-ndv4", "/opt/microsoft", file, want_ids, msg, n);
}

static void test_check(void **state)
{
    (void)state;
    char msg[512];
    /* the node's own file: its virtual switches ffff:ff:0N.0 are in no sysfs, and that is fine */
    run("azure-ndv4-topo.xml", 16, msg, sizeof(msg));
    assert_string_equal(msg, "");
    /* NDv5's file on an NDv4 node: same NICs, three GPUs NDv4 does not have */
    run("azure-ndv5-topo.xml", 16, msg, sizeof(msg));
    assert_string_equal(msg,
                        "NCCL_TOPO_FILE=/opt/microsoft/azure-ndv5-topo.xml (from test) names 3 of "
                        "its 16 GPUs and NICs at PCI bus ids not on this node (0008:00:00.0, "
                        "0009:00:00.0, 000a:00:00.0): the file was written for another node "
                        "type");
    /* IBM's H100 dump: none of its devices, the first five named */
    run("ibm-gx3d-h100-topo.xml", 16, msg, sizeof(msg));
    assert_non_null(strstr(msg, "names 16 of its 16 GPUs and NICs at PCI bus ids not on this node "
                                "(0000:a3:00.0, 0000:a4:00.0, 0000:ad:00.0, 0000:ae:00.0, "
                                "0000:b7:00.0, ...)"));
    /* aws-ofi-nccl's own p4d file on a p4d (tests/fixtures/node-p4d-efa): every device there */
    const char *ofi = "/opt/amazon/ofi-nccl/share/aws-ofi-nccl/xml";
    run_on("node-p4d-efa", ofi, "aws-p4d-24xl-topo.xml", 12, msg, sizeof(msg));
    assert_string_equal(msg, "");
    /* the p5 file, class-less leaves and all, on a p4d: none of its 32 devices is there */
    run_on("node-p4d-efa", ofi, "aws-p5.48xl-topo.xml", 32, msg, sizeof(msg));
    assert_non_null(strstr(msg, "names 32 of its 32 GPUs and NICs at PCI bus ids not on this node "
                                "(0000:4f:00.0, 0000:50:00.0,"));
}

/* A topology file the check cannot read whole (over its 4 MiB bound: NCCL reads any size)
 * proves nothing against NCCL: the comparison is unknown, and neither topo-file-missing nor
 * topo-file-mismatch is raised. A link that loops cannot be looked up: unknown too. */
static void test_unreadable_is_unknown(void **state)
{
    (void)state;
    char dir[64], root[128];
    snprintf(dir, sizeof(dir), "/tmp/pf-topo-XXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(root, sizeof(root), "%s/root", dir);
    sh("fixtures/materialize.sh fixtures/node-azure-ndv4 %s 2>/dev/null && mkdir -p %s/opt/t && "
       "cp fixtures/nccl-topo/azure-ndv5-topo.xml %s/opt/t/big.xml && head -c 5000000 /dev/zero "
       "| tr '\\0' ' ' >>%s/opt/t/big.xml && ln -s loop.xml %s/opt/t/loop.xml",
       root, root, root, root, root);
    static const char *const files[] = {"/opt/t/big.xml", "/opt/t/loop.xml"};
    static const char *const codes[] = {"topo-file-mismatch", "topo-file-missing"};
    for (size_t k = 0; k < 2; k++) {
        struct pf_config cfg;
        struct pf_verdict v;
        struct pf_ctx ctx;
        pf_config_defaults(&cfg);
        pf_verdict_init(&v);
        pf_ctx_init(&ctx, &cfg, &v);
        assert_int_equal(pf_host_init(&ctx.host, root), 0);
        pf_env_set(&ctx.env, "NCCL_TOPO_FILE", files[k], "test");
        pf_checks_inventory(&ctx);
        pf_check_nccl_env(pf_verdict_add_check(&v, "nccl.env"), &ctx);
        pf_verdict_finalize(&v, NULL, NULL);
        struct pf_check *c = pf_verdict_find_check(&v, "nccl.env");
        for (size_t i = 0; i < c->nfindings; i++)
            if (strncmp(c->findings[i].code, "topo-file-", 10) == 0)
                fail_msg("%s: %s: %s", files[k], c->findings[i].code, c->findings[i].message);
        bool unknown = false;
        const struct pf_node *u = pf_node_get(c->evidence, "unknown");
        for (const struct pf_node *x = u ? u->first : NULL; x; x = x->next)
            if (strcmp(pf_node_get_str(x, "code"), codes[k]) == 0 &&
                strstr(pf_node_get_str(x, "missing"), files[k]))
                unknown = true;
        if (!unknown) fail_msg("%s: no unknown entry for %s", files[k], codes[k]);
        pf_ctx_free(&ctx);
        pf_verdict_free(&v);
        pf_config_free(&cfg);
    }
    sh("rm -rf '%s'", dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_real_files),
        cmocka_unit_test(test_edges),
        cmocka_unit_test(test_check),
        cmocka_unit_test(test_unreadable_is_unknown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
