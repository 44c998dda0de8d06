/* NCCL_TOPO_FILE's bus ids: the scanner on topology XML in the form NCCL's topology dumps and
 * the Azure ND images' topology files use (<cpu>/<pci busid="..."> nesting; hand-written,
 * abridged), and nccl.env's topo-file-mismatch on a materialized fixture tree with the PCI
 * devices made at test time. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../pkg/checks/checks.h"

static const char topo[] =
    "<system version=\"1\">\n"
    "  <cpu numaid=\"0\" affinity=\"0000ffff,0000ffff\" arch=\"x86_64\">\n"
    "    <pci busid=\"ffff:ff:01.0\" class=\"0x060400\" link_speed=\"16 GT/s\">\n"
    "      <pci busid=\"0001:00:00.0\" class=\"0x030200\" link_speed=\"16 GT/s\"/>\n"
    "      <pci busid=\"0101:00:00.0\" class=\"0x020700\"/>\n"
    "      <gpu BusId = '0000:17:00.0' dev=\"0\"/>\n"
    "      <nic busid=\"0001:00:00.0\"/> <pci xbusid=\"0000:aa:00.0\"/>\n"
    "      <pci busid=\"0000:AB:00.0\"/> <pci busid=\"not an id\"/> <pci busid=\"0000:cc\n";

static void test_scan(void **state)
{
    (void)state;
    struct pf_strlist ids = {0};
    assert_int_equal(pf_topo_busids(&ids, topo, strlen(topo)), 5);
    char got[256];
    pf_strlist_join(got, sizeof(got), &ids, ",");
    assert_string_equal(got, "ffff:ff:01.0,0001:00:00.0,0101:00:00.0,0000:17:00.0,0000:ab:00.0");
    pf_strlist_free(&ids);
    assert_int_equal(pf_topo_busids(&ids, "", 0), 0);
    assert_int_equal(pf_topo_busids(&ids, "busid=", 6), 0);
    pf_strlist_free(&ids);
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

/* nccl.env with NCCL_TOPO_FILE=/etc/topo.xml holding `topo` and the listed PCI devices */
static const struct pf_finding *run(const char *devices, char *msg, size_t n)
{
    char dir[64], root[128];
    snprintf(dir, sizeof(dir), "/tmp/pf-topo-XXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(root, sizeof(root), "%s/root", dir);
    sh("fixtures/materialize.sh fixtures/node-8gpu-ndr %s 2>/dev/null", root);
    sh("mkdir -p %s/etc %s/sys/bus/pci/devices && cd %s/sys/bus/pci/devices && for d in %s; do "
       "mkdir \"$d\"; done",
       root, root, root, devices);
    char path[160];
    snprintf(path, sizeof(path), "%s/etc/topo.xml", root);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(topo, f);
    fclose(f);
    struct pf_config cfg;
    struct pf_verdict v;
    struct pf_ctx ctx;
    pf_config_defaults(&cfg);
    pf_verdict_init(&v);
    pf_ctx_init(&ctx, &cfg, &v);
    assert_int_equal(pf_host_init(&ctx.host, root), 0);
    pf_env_set(&ctx.env, "NCCL_TOPO_FILE", "/etc/topo.xml", "test");
    pf_checks_inventory(&ctx);
    pf_check_nccl_env(pf_verdict_add_check(&v, "nccl.env"), &ctx);
    pf_verdict_finalize(&v, NULL, NULL);
    struct pf_check *c = pf_verdict_find_check(&v, "nccl.env");
    assert_int_equal(pf_node_get(c->evidence, "topoFileBusIds")->i, 5);
    const struct pf_finding *hit = NULL;
    msg[0] = '\0';
    for (size_t i = 0; i < c->nfindings; i++)
        if (strcmp(c->findings[i].code, "topo-file-mismatch") == 0) {
            hit = &c->findings[i];
            assert_int_equal(hit->status, PF_WARN);
            snprintf(msg, n, "%s", hit->message);
        }
    pf_ctx_free(&ctx);
    pf_verdict_free(&v);
    pf_config_free(&cfg);
    sh("rm -rf '%s'", dir);
    return hit;
}

static void test_check(void **state)
{
    (void)state;
    char msg[512];
    assert_null(
        run("ffff:ff:01.0 0001:00:00.0 0101:00:00.0 0000:17:00.0 0000:ab:00.0", msg, sizeof(msg)));
    assert_non_null(run("ffff:ff:01.0 0000:17:00.0 0000:ab:00.0", msg, sizeof(msg)));
    assert_non_null(strstr(msg, "names 2 of 5 PCI devices not on this node "
                                "(0001:00:00.0, 0101:00:00.0)"));
    assert_non_null(run("0000:00:00.0", msg, sizeof(msg)));
    assert_non_null(strstr(msg, "names 5 of 5 PCI devices"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scan),
        cmocka_unit_test(test_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
