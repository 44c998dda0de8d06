/* The RDMA provider table (pkg/checks/providers.c), walked row by row: for every provider a
 * sysfs tree is built as its kernel driver shows a device (the driver bound to its PCI
 * function, the PCI vendor id, node_type, the link layer it reports, a RoCE v2 GID where its
 * Ethernet ports carry one, hw_counters/ by its names; a software device has no PCI device),
 * healthy first, then broken one way at a time; a new row is tested without a new line here.
 * Healthy: identified as its row, rdma.devices and rdma.ports pass, rdma.efa runs for EFA and
 * the NCCL_NET advice is the row's. Broken: a DOWN port, a Disabled physical link, a link layer
 * the driver never reports, a missing RoCE GID, a PCIe link trained at x8 of x16, an error
 * counter that rose: each named by its finding. Also the PCIe speed and width parsers on the
 * forms drivers/pci/pci-sysfs.c writes. */
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

#define BDF "0000:17:00.0"

/* The first word of a separated list, into out. */
static const char *first(char *out, size_t n, const char *list, char sep)
{
    const char *e = strchr(list, sep);
    snprintf(out, n, "%.*s", e ? (int)(e - list) : (int)strlen(list), list);
    return out;
}

static void put(const char *root, const char *rel, const char *text)
{
    char path[2048];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    char *slash = strrchr(path, '/');
    *slash = '\0';
    th_sh("mkdir -p '%s'", path);
    *slash = '/';
    th_write_file(path, text);
}

/* The device's folder under sys/, relative to the root. */
static void ib_dir(char *out, size_t n, const struct pf_rdma_provider *p)
{
    if (p->software)
        snprintf(out, n, "sys/devices/virtual/infiniband/%s", p->example);
    else
        snprintf(out, n, "sys/devices/pci0000:17/" BDF "/infiniband/%s", p->example);
}

static const char *link_layer_of(const struct pf_rdma_provider *p, char *buf, size_t n)
{
    return first(buf, n, p->link_layers, '|');
}

/* A healthy tree for provider p at root. */
static void build(const char *root, const struct pf_rdma_provider *p)
{
    char ib[256], rel[512], ll[32], drv[32], ven[16];
    ib_dir(ib, sizeof(ib), p);
    link_layer_of(p, ll, sizeof(ll));
    th_sh("mkdir -p '%s/sys/class/infiniband' '%s/%s/ports/1/gids'", root, root, ib);
    th_sh("ln -s '../../%s' '%s/sys/class/infiniband/%s'", ib + 4, root, p->example);
    if (!p->software) {
        const char *pci = "sys/devices/pci0000:17/" BDF;
        first(ven, sizeof(ven), p->vendors, ' ');
        snprintf(rel, sizeof(rel), "%s/vendor", pci);
        put(root, rel, ven[0] ? ven : "0xfffe");
        snprintf(rel, sizeof(rel), "%s/numa_node", pci);
        put(root, rel, "0");
        const char *attrs[][2] = {{"current_link_speed", "16.0 GT/s PCIe"},
                                  {"max_link_speed", "16.0 GT/s PCIe"},
                                  {"current_link_width", "16"},
                                  {"max_link_width", "16"}};
        for (size_t i = 0; i < 4; i++) {
            snprintf(rel, sizeof(rel), "%s/%s", pci, attrs[i][0]);
            put(root, rel, attrs[i][1]);
        }
        first(drv, sizeof(drv), p->drivers, ' ');
        if (drv[0])
            th_sh("mkdir -p '%s/sys/bus/pci/drivers/%s' && ln -s '../../../bus/pci/drivers/%s' "
                  "'%s/%s/driver'",
                  root, drv, drv, root, pci);
        th_sh("ln -s '../../../" BDF "' '%s/%s/device'", root, ib);
    } else if (strcmp(p->name, "rxe") == 0) {
        snprintf(rel, sizeof(rel), "%s/parent", ib);
        put(root, rel, "eth0");
    } else if (strcmp(p->name, "siw") == 0) {
        /* sw/siw/siw_main.c copies SIW_NODE_DESC_COMMON into node_desc */
        snprintf(rel, sizeof(rel), "%s/node_desc", ib);
        put(root, rel, "Software iWARP stack");
    }
    snprintf(rel, sizeof(rel), "%s/node_type", ib);
    put(root, rel, p->node_type ? p->node_type : "1: CA");
    const char *port[][2] = {{"state", "4: ACTIVE"},
                             {"phys_state", "5: LinkUp"},
                             {"link_layer", ll},
                             {"rate", "100 Gb/sec (4X EDR)"}};
    for (size_t i = 0; i < 4; i++) {
        snprintf(rel, sizeof(rel), "%s/ports/1/%s", ib, port[i][0]);
        put(root, rel, port[i][1]);
    }
    if (strcmp(ll, "Ethernet") == 0) {
        snprintf(rel, sizeof(rel), "%s/ports/1/gids/0", ib);
        put(root, rel, "fe80:0000:0000:0000:0202:c9ff:fe00:0001");
        snprintf(rel, sizeof(rel), "%s/ports/1/gids/1", ib);
        put(root, rel, "0000:0000:0000:0000:0000:ffff:0a00:0001");
        snprintf(rel, sizeof(rel), "%s/ports/1/gid_attrs/types/0", ib);
        put(root, rel, "IB/RoCE v1");
        snprintf(rel, sizeof(rel), "%s/ports/1/gid_attrs/types/1", ib);
        put(root, rel, "RoCE v2");
        snprintf(rel, sizeof(rel), "%s/ports/1/gid_attrs/ndevs/1", ib);
        put(root, rel, "eth0");
    } else if (strcmp(ll, "InfiniBand") == 0) {
        snprintf(rel, sizeof(rel), "%s/ports/1/lid", ib);
        put(root, rel, "0x11");
    }
    if (p->hw_errors) {
        snprintf(rel, sizeof(rel), "%s/ports/1/hw_counters/%s", ib, p->hw_errors[0]);
        put(root, rel, "0");
    }
    put(root, "sys/class/infiniband_verbs/uverbs0/ibdev", p->example);
    put(root, "dev/infiniband/uverbs0", "");
    if (p->rdma_cm != PF_RDMA_CM_NO) put(root, "dev/infiniband/rdma_cm", "");
}

struct tree {
    struct th_env e;
    char ib[1300]; /* the device's folder, absolute */
};

static void tree_open(struct tree *t, const struct pf_rdma_provider *p, const char *mutate)
{
    char dir[64], root[128];
    th_tmpdir(dir, sizeof(dir), "prov");
    snprintf(root, sizeof(root), "%s/root", dir);
    build(root, p);
    char rel[256];
    ib_dir(rel, sizeof(rel), p);
    snprintf(t->ib, sizeof(t->ib), "%s/%s", root, rel);
    if (mutate) th_sh("cd '%s' && %s", t->ib, mutate);
    th_env_open(&t->e, root, TH_IN_PLACE);
    snprintf(t->e.dir, sizeof(t->e.dir), "%s", dir); /* removed by th_env_close */
}

static struct pf_check *run_check(struct tree *t, pf_check_fn fn, const char *id)
{
    th_env_check(&t->e, id, fn);
    pf_verdict_finalize(&t->e.v, NULL, NULL);
    return pf_verdict_find_check(&t->e.v, id);
}

static void expect(const struct pf_rdma_provider *p, const char *what, const struct pf_check *c,
                   enum pf_status st, const char *code, const char *needle)
{
    const struct pf_finding *f = code ? th_finding(c, code, needle) : NULL;
    if (c->status == st && (!code || (f && f->status >= PF_WARN))) return;
    for (size_t i = 0; i < c->nfindings; i++)
        print_message("  %s %s: %s\n", c->id, c->findings[i].code, c->findings[i].message);
    fail_msg("%s, %s: %s is %s, want %s%s%s", p->name, what, c->id, pf_status_name(c->status),
             pf_status_name(st), code ? " with " : "", code ? code : "");
}

static void test_healthy(void **state)
{
    (void)state;
    assert_true(pf_rdma_providers_count >= 16);
    assert_string_equal(pf_rdma_providers[pf_rdma_providers_count - 1].name, "unknown");
    for (size_t i = 0; i < pf_rdma_providers_count; i++) {
        const struct pf_rdma_provider *p = &pf_rdma_providers[i];
        assert_non_null(p->source);
        struct tree t;
        tree_open(&t, p, NULL);
        th_env_start(&t.e);
        struct pf_rdma_ident id;
        pf_rdma_identify(&id, &t.e.ctx.host, p->example);
        if (id.provider != p)
            fail_msg("%s identified as %s (%s)", p->name, id.provider->name, id.how);
        struct pf_check *c = run_check(&t, pf_check_rdma_devices, "rdma.devices");
        expect(p, "healthy", c, PF_PASS, NULL, NULL);
        c = run_check(&t, pf_check_rdma_ports, "rdma.ports");
        expect(p, "healthy", c, PF_PASS, NULL, NULL);
        char why[160];
        const char *net = pf_checks_net_advice(why, sizeof(why), &t.e.ctx);
        const char *want = id.iwarp ? NULL : p->nccl_net;
        if (!(net == want || (net && want && strcmp(net, want) == 0)))
            fail_msg("%s: NCCL_NET advice %s, want %s", p->name, net ? net : "none",
                     want ? want : "none");
        c = run_check(&t, pf_check_rdma_efa, "rdma.efa");
        if ((c->status == PF_SKIP) != (strcmp(p->name, "efa") != 0))
            fail_msg("%s: rdma.efa is %s", p->name, pf_status_name(c->status));
        th_env_close(&t.e);
    }
}

static void test_broken(void **state)
{
    (void)state;
    for (size_t i = 0; i < pf_rdma_providers_count; i++) {
        const struct pf_rdma_provider *p = &pf_rdma_providers[i];
        char ll[32];
        link_layer_of(p, ll, sizeof(ll));
        struct tree t;

        tree_open(&t, p, "echo '1: DOWN' >ports/1/state");
        expect(p, "port DOWN", run_check(&t, pf_check_rdma_ports, "rdma.ports"), PF_FAIL,
               "port-down", p->example);
        th_env_close(&t.e);

        tree_open(&t, p, "echo '3: Disabled' >ports/1/phys_state");
        expect(p, "link Disabled", run_check(&t, pf_check_rdma_ports, "rdma.ports"), PF_FAIL,
               "port-not-linkup", "Disabled");
        th_env_close(&t.e);

        /* a link layer the driver never reports: the port was not set up by it */
        const char *wrong = pf_rdma_link_layer_ok(p, "Unknown") ? "InfiniBand" : "Unknown";
        if (!pf_rdma_link_layer_ok(p, wrong)) {
            char cmd[96];
            snprintf(cmd, sizeof(cmd), "echo '%s' >ports/1/link_layer", wrong);
            tree_open(&t, p, cmd);
            expect(p, "foreign link layer", run_check(&t, pf_check_rdma_ports, "rdma.ports"),
                   PF_FAIL, "port-down", wrong);
            th_env_close(&t.e);
        }

        if (strcmp(ll, "Ethernet") == 0 && p->roce_gids && p->node_type &&
            strcmp(p->node_type, "4: RNIC") != 0) {
            tree_open(&t, p, "for f in ports/1/gid_attrs/types/*; do echo 'IB/RoCE v1' >$f; done");
            expect(p, "no RoCE v2 GID", run_check(&t, pf_check_rdma_ports, "rdma.ports"), PF_FAIL,
                   "no-roce-gid", p->example);
            th_env_close(&t.e);
        }

        if (!p->software) {
            tree_open(&t, p, "echo 8 >device/current_link_width");
            expect(p, "PCIe x8", run_check(&t, pf_check_rdma_devices, "rdma.devices"), PF_WARN,
                   "pcie-link-degraded", "x8 at 16.0 GT/s, capable of x16 at 16.0 GT/s");
            th_env_close(&t.e);
            tree_open(&t, p, "echo '8.0 GT/s PCIe' >device/current_link_speed");
            expect(p, "PCIe Gen3", run_check(&t, pf_check_rdma_devices, "rdma.devices"), PF_WARN,
                   "pcie-link-degraded", "x16 at 8.0 GT/s, capable of x16 at 16.0 GT/s");
            th_env_close(&t.e);
        }

        if (p->hw_errors) { /* the driver's own error counter rose */
            tree_open(&t, p, NULL);
            th_env_start(&t.e);
            pf_checks_inventory(&t.e.ctx);
            struct pf_counters *before = pf_counters_snapshot(&t.e.ctx);
            th_sh("echo 5 >'%s/ports/1/hw_counters/%s'", t.ib, p->hw_errors[0]);
            struct pf_check *c = pf_verdict_add_check(&t.e.v, "rdma.counters");
            pf_check_rdma_counters(c, &t.e.ctx, before);
            pf_verdict_finalize(&t.e.v, NULL, NULL);
            c = pf_verdict_find_check(&t.e.v, "rdma.counters");
            if (c->status < PF_WARN || !strstr(c->findings[0].message, p->hw_errors[0]))
                fail_msg("%s: %s rose, rdma.counters is %s", p->name, p->hw_errors[0],
                         pf_status_name(c->status));
            pf_counters_free(before);
            th_env_close(&t.e);
        }
    }
}

/* An EFA device renamed by rdma-core's udev rules is EFA by its driver, and by its vendor id
 * where the driver link is missing; a name that looks like EFA is not. */
static void test_names_do_not_decide(void **state)
{
    (void)state;
    const struct pf_rdma_provider *efa = pf_rdma_provider_named("efa");
    struct tree t;
    tree_open(&t, efa, "rm '../../driver'");
    th_env_start(&t.e);
    struct pf_rdma_ident id;
    pf_rdma_identify(&id, &t.e.ctx.host, "rdmap16s27");
    assert_ptr_equal(id.provider, efa);
    assert_string_equal(id.how, "PCI vendor 0x1d0f");
    th_env_close(&t.e);

    const struct pf_rdma_provider *mlx5 = pf_rdma_provider_named("mlx5");
    tree_open(&t, mlx5, NULL);
    th_sh("cd '%s/sys/class/infiniband' && mv mlx5_0 efa_0 && echo efa_0 "
          ">../infiniband_verbs/uverbs0/ibdev",
          t.e.root);
    th_env_start(&t.e);
    pf_rdma_identify(&id, &t.e.ctx.host, "efa_0");
    assert_ptr_equal(id.provider, mlx5);
    th_sh("echo Unknown >'%s/ports/1/link_layer'", t.ib);
    expect(mlx5, "named efa_0", run_check(&t, pf_check_rdma_ports, "rdma.ports"), PF_FAIL,
           "port-down", "efa_0");
    th_env_close(&t.e);

    /* an older kernel's rxe and siw: their device link leads to the netdev's PCI function */
    static const char *const soft[] = {"rxe", "siw"};
    for (size_t i = 0; i < 2; i++) {
        const struct pf_rdma_provider *p = pf_rdma_provider_named(soft[i]);
        tree_open(&t, p,
                  "mkdir -p ../../../pci0000:17/0000:17:00.0 ../../../../bus/pci/drivers/mlx5_core "
                  "&& echo 0x15b3 >../../../pci0000:17/0000:17:00.0/vendor && ln -s "
                  "../../../../bus/pci/drivers/mlx5_core ../../../pci0000:17/0000:17:00.0/driver "
                  "&& ln -s ../../../pci0000:17/0000:17:00.0 device");
        if (i == 1) th_sh("echo 'Software iWARP stack' >'%s/node_desc'", t.ib);
        th_env_start(&t.e);
        pf_rdma_identify(&id, &t.e.ctx.host, p->example);
        if (id.provider != p)
            fail_msg("%s identified as %s (%s)", p->name, id.provider->name, id.how);
        th_env_close(&t.e);
    }
}

/* A device without a device link (a container's sysfs, a driver the table does not know) is no
 * software device: rxe is told by its "parent" attribute, siw by its node_desc. An InfiniBand
 * port of such a device is judged by what it reports, never as rxe's "Ethernet"; its family
 * comes from hca_type where the driver writes "MT<id>" (mlx5/main.c hca_type_show), else the
 * driver stays unknown, and so does whether it needs rdma_cm. */
static void test_no_device_link(void **state)
{
    (void)state;
    const struct pf_rdma_provider *mlx5 = pf_rdma_provider_named("mlx5");
    struct tree t;
    struct pf_rdma_ident id;
    tree_open(&t, mlx5,
              "rm device && echo InfiniBand >ports/1/link_layer && echo MT4129 >hca_type && echo "
              "MT_0000000838 >board_id && echo 28.39.1002 >fw_ver && rm -rf ports/1/gids "
              "ports/1/gid_attrs");
    th_env_start(&t.e);
    pf_rdma_identify(&id, &t.e.ctx.host, mlx5->example);
    if (id.provider != mlx5) fail_msg("identified as %s (%s)", id.provider->name, id.how);
    assert_non_null(strstr(id.how, "hca_type MT4129"));
    struct pf_check *c = run_check(&t, pf_check_rdma_ports, "rdma.ports");
    expect(mlx5, "no device link, hca_type", c, PF_PASS, NULL, NULL);
    assert_int_equal(c->nfindings, 0);
    th_env_close(&t.e);

    /* nothing names the family: unknown, its InfiniBand port passes, rdma_cm unknown */
    tree_open(&t, mlx5, "rm device && echo InfiniBand >ports/1/link_layer");
    th_sh("rm -f '%s/dev/infiniband/rdma_cm'", t.e.root);
    th_env_start(&t.e);
    pf_rdma_identify(&id, &t.e.ctx.host, mlx5->example);
    assert_ptr_equal(id.provider, pf_rdma_provider_unknown());
    assert_non_null(strstr(id.how, "unknown: no device link"));
    c = run_check(&t, pf_check_rdma_ports, "rdma.ports");
    expect(mlx5, "no device link, no hca_type", c, PF_PASS, NULL, NULL);
    assert_false(pf_check_has_finding(c, "port-down"));
    c = run_check(&t, pf_check_rdma_devices, "rdma.devices");
    expect(mlx5, "no device link, no rdma_cm", c, PF_PASS, NULL, NULL);
    assert_false(pf_check_has_finding(c, "rdma-cm-missing"));
    const struct pf_node *u = pf_node_get(c->evidence, "unknown");
    assert_non_null(u);
    assert_string_equal(pf_node_get_str(u->first, "code"), "rdma-cm-missing");
    assert_non_null(strstr(c->message, "unknown rdma-cm-missing"));
    th_env_close(&t.e);

    /* the port's files unreadable or not in core/sysfs.c's form: unknown, not port-down */
    tree_open(&t, mlx5,
              "echo InfiniBand >ports/1/link_layer && : >ports/1/state && echo fast "
              ">ports/1/rate && rm ports/1/phys_state");
    c = run_check(&t, pf_check_rdma_ports, "rdma.ports");
    expect(mlx5, "port files unreadable", c, PF_PASS, NULL, NULL);
    assert_int_equal(c->nfindings, 0);
    u = pf_node_get(c->evidence, "unknown");
    assert_non_null(u);
    assert_int_equal(u->count, 3);
    th_env_close(&t.e);
}

/* irdma (like qedr and erdma) runs iWARP or RoCE: node_type 4: RNIC says iWARP, whose ports have
 * no RoCE GID, whose connections need rdma_cm, and which NCCL's IB transport cannot use. */
static void test_iwarp_mode(void **state)
{
    (void)state;
    const struct pf_rdma_provider *irdma = pf_rdma_provider_named("irdma");
    struct tree t;
    tree_open(&t, irdma, "echo '4: RNIC' >node_type && rm -rf ports/1/gids ports/1/gid_attrs");
    struct pf_check *c = run_check(&t, pf_check_rdma_ports, "rdma.ports");
    expect(irdma, "iWARP, no GID", c, PF_PASS, NULL, NULL);
    char why[160];
    assert_null(pf_checks_net_advice(why, sizeof(why), &t.e.ctx));
    th_sh("rm '%s/dev/infiniband/rdma_cm'", t.e.root);
    c = run_check(&t, pf_check_rdma_devices, "rdma.devices");
    expect(irdma, "iWARP, no rdma_cm", c, PF_WARN, "rdma-cm-missing", "iWARP");
    const struct pf_node *h0 = pf_node_get(c->evidence, "hcas")->first;
    assert_string_equal(pf_node_get_str(h0, "transport"), "iWARP");
    assert_non_null(strstr(pf_node_get_str(h0, "nccl"), "iWARP"));
    th_env_close(&t.e);
    /* the same device in RoCE mode needs its GID */
    tree_open(&t, irdma, "for f in ports/1/gid_attrs/types/*; do echo 'IB/RoCE v1' >$f; done");
    expect(irdma, "RoCE, no RoCE v2 GID", run_check(&t, pf_check_rdma_ports, "rdma.ports"), PF_FAIL,
           "no-roce-gid", "irdma0");
    th_env_close(&t.e);
}

static void test_pcie_parsers(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        double gts; /* 0: rejected */
    } speeds[] = {
        {"2.5 GT/s PCIe", 2.5},
        {"5.0 GT/s PCIe", 5},
        {"8.0 GT/s PCIe", 8},
        {"16.0 GT/s PCIe", 16},
        {"32.0 GT/s PCIe", 32},
        {"64.0 GT/s PCIe", 64},
        {"8 GT/s", 8},
        {"2.5 GT/s", 2.5},
        {"Unknown", 0},
        {"Unknown speed", 0},
        {"", 0},
        {"16.0 GT/s PCIe/s", 0},
        {"16.0GT/s", 0},
        {"-8 GT/s", 0},
        {"1e9 GT/s", 0},
    };
    for (size_t i = 0; i < sizeof(speeds) / sizeof(speeds[0]); i++) {
        double v = 0;
        bool ok = pf_pcie_speed_parse(&v, speeds[i].text);
        if (ok != (speeds[i].gts > 0) || (ok && v != speeds[i].gts))
            fail_msg("speed \"%s\": %s %g", speeds[i].text, ok ? "parsed" : "rejected", v);
    }
    static const struct {
        const char *text;
        int width; /* -1: rejected */
    } widths[] = {{"16", 16},  {"8", 8},    {"0", 0},
                  {"32", 32},  {"x16", -1}, {"", -1},
                  {"16 ", -1}, {"99", -1},  {"99999999999999999999", -1}};
    for (size_t i = 0; i < sizeof(widths) / sizeof(widths[0]); i++) {
        int w = -1;
        bool ok = pf_pcie_width_parse(&w, widths[i].text);
        if (ok != (widths[i].width >= 0) || (ok && w != widths[i].width))
            fail_msg("width \"%s\": %s %d", widths[i].text, ok ? "parsed" : "rejected", w);
    }
}

/* A VF's link registers read zero and an unknown speed is not a speed: never judged. */
static void test_pcie_not_judged(void **state)
{
    (void)state;
    const struct pf_rdma_provider *mlx5 = pf_rdma_provider_named("mlx5");
    static const char *const mutations[] = {
        "echo 0 >device/current_link_width && echo 0 >device/max_link_width && echo Unknown "
        ">device/current_link_speed && echo Unknown >device/max_link_speed",
        "echo 'Unknown speed' >device/current_link_speed",
        "rm device/max_link_width",
    };
    for (size_t i = 0; i < sizeof(mutations) / sizeof(mutations[0]); i++) {
        struct tree t;
        tree_open(&t, mlx5, mutations[i]);
        struct pf_check *c = run_check(&t, pf_check_rdma_devices, "rdma.devices");
        expect(mlx5, mutations[i], c, PF_PASS, NULL, NULL);
        th_env_close(&t.e);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_healthy),
        cmocka_unit_test(test_broken),
        cmocka_unit_test(test_names_do_not_decide),
        cmocka_unit_test(test_no_device_link),
        cmocka_unit_test(test_iwarp_mode),
        cmocka_unit_test(test_pcie_parsers),
        cmocka_unit_test(test_pcie_not_judged),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
