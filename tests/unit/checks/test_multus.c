/* net.multus against the interfaces of the namespace the test runs in (loopback is the one
 * interface every namespace has): annotation sources, waiting, and each finding code. The
 * end-to-end script tests/e2e/test_multus.sh covers veth/dummy interfaces in namespaces. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../../pkg/checks/checks.h"
#include "../helpers/helpers.h"

/* The fixture as the root, net.multus waiting at most 0.3 s for the podinfo files. */
static void setup(struct th_env *r, const char *fixture)
{
    th_env_open(r, fixture, TH_IN_PLACE);
    r->cfg.podinfo_wait_s = 0.3;
    th_env_start(r);
}

static void run_check(struct th_env *r)
{
    th_env_check(r, "net.multus", pf_check_net_multus);
}

#define CLUSTER "{\"name\":\"ovn-kubernetes\",\"interface\":\"eth0\",\"default\":true,\"dns\":{}}"

static void test_skip_without_annotation_or_expectation(void **state)
{
    (void)state;
    struct th_env r;
    setup(&r, "fixtures/sriov-healthy");
    run_check(&r);
    assert_int_equal(r.c->status, PF_SKIP);
    assert_string_equal(r.c->message,
                        "no attachment metadata found: no Multus network-status "
                        "(/etc/podinfo/annotations does not exist), no GKE, DRA or device-plugin "
                        "attachments and no expect.networks; evidence lists what the namespace "
                        "holds");
    /* what the namespace holds: the RDMA devices with PCI address and NUMA node */
    const struct pf_node *ns = pf_node_get(r.c->evidence, "namespace");
    assert_non_null(ns);
    const struct pf_node *rdma = pf_node_get(ns, "rdma");
    assert_non_null(rdma);
    assert_true(rdma->count > 0);
    assert_non_null(pf_node_get(rdma->first, "name"));
    assert_non_null(pf_node_get(rdma->first, "pciAddress"));
    th_env_close(&r);
}

/* A device plugin's resource (PREFLIGHT_DEVICE_RESOURCES, the pod's limits) against the verbs
 * devices the pod holds: node-efa gives it uverbs0 and uverbs1, both EFA. */
static void test_device_plugin_resources(void **state)
{
    (void)state;
    static const struct {
        const char *resources, *expect, *codes, *needle;
    } rows[] = {
        {"vpc.amazonaws.com/efa=2", "vpc.amazonaws.com/efa", "", "1 of 1 attachments present"},
        {"vpc.amazonaws.com/efa=3", NULL, "attachment-missing:fail",
         "device-plugin resource vpc.amazonaws.com/efa=3 (PREFLIGHT_DEVICE_RESOURCES, the pod's "
         "limits) promises 3 EFA devices, the pod holds 2 (efa_0, efa_1 in "},
        {"rdma/hca_shared_devices_a=1", NULL, "", "rdma/hca_shared_devices_a"},
        {"vpc.amazonaws.com/efa=2", "ml/sriov-a", "network-missing:fail",
         "network ml/sriov-a is not attached (attached: vpc.amazonaws.com/efa (device-plugin))"},
        {"efa=2", NULL, "annotation-invalid:fail",
         "variable PREFLIGHT_DEVICE_RESOURCES: \"efa=2\" is not resource=count"},
    };
    for (size_t i = 0; i < PF_ARRAY_LEN(rows); i++) {
        struct th_env r;
        th_env_open(&r, "node-efa", TH_MATERIALIZE);
        r.cfg.podinfo_wait_s = 0.3;
        if (rows[i].expect) pf_strlist_add(&r.cfg.expect_networks, rows[i].expect);
        th_env_start(&r);
        th_env_set(&r, "PREFLIGHT_DEVICE_RESOURCES", rows[i].resources);
        run_check(&r);
        const char *codes = th_codes_status(r.c);
        const char *text = r.c->nfindings ? r.c->findings[0].message : r.c->message;
        if (strcmp(codes, rows[i].codes) != 0 || !strstr(text, rows[i].needle))
            fail_msg("%zu: codes [%s], \"%s\"", i, codes, text);
        th_env_close(&r);
    }
}

static void test_annotation_missing(void **state)
{
    (void)state;
    struct th_env r;
    setup(&r, "fixtures/sriov-healthy");
    pf_strlist_add(&r.cfg.expect_networks, "ml/sriov-a");
    run_check(&r);
    assert_string_equal(th_codes_status(r.c), "annotation-missing:fail");
    assert_non_null(strstr(r.c->findings[0].message, "/etc/podinfo/annotations does not exist"));
    assert_non_null(strstr(r.c->findings[0].message, "expect.networks lists ml/sriov-a"));
    th_env_close(&r);

    /* the key is there but empty: re-read for podinfo.waitSeconds, then give up */
    setup(&r, "fixtures/podinfo-empty");
    run_check(&r);
    assert_string_equal(th_codes_status(r.c), "annotation-missing:fail");
    assert_non_null(strstr(r.c->findings[0].message, "is still empty after"));
    assert_non_null(strstr(r.c->findings[0].message, "the pod asks for ml/sriov-a,ml/sriov-b"));
    assert_non_null(pf_node_get(r.c->evidence, "waitedSeconds"));
    th_env_close(&r);
}

/* The wait ends at the context's deadline (pkg/run hands each stage the run's): past it, the
 * check does not wait its podinfo.waitSeconds of 60 s. With none (every other test here),
 * podinfo.waitSeconds alone bounds the wait. */
static void test_wait_within_the_deadline(void **state)
{
    (void)state;
    struct th_env r;
    setup(&r, "fixtures/podinfo-empty");
    r.cfg.podinfo_wait_s = 60;
    r.ctx.deadline = pf_now() - 1;
    run_check(&r);
    assert_string_equal(th_codes_status(r.c), "annotation-missing:fail");
    const struct pf_node *w = pf_node_get(r.c->evidence, "waitedSeconds");
    assert_non_null(w);
    assert_true(w->d < 30);
    th_env_close(&r);
}

static void test_annotation_invalid(void **state)
{
    (void)state;
    struct th_env r;
    setup(&r, "fixtures/podinfo-bad");
    run_check(&r);
    assert_string_equal(th_codes_status(r.c), "annotation-invalid:fail");
    assert_non_null(strstr(r.c->findings[0].message, "/etc/podinfo/annotations:3:"));
    th_env_close(&r);

    setup(&r, "fixtures/sriov-healthy");
    th_env_set(&r, "NETWORK_STATUS", "[{\"name\": \"a\", \"mtu\": \"big\"}]");
    run_check(&r);
    assert_string_equal(th_codes_status(r.c), "annotation-invalid:fail");
    assert_string_equal(r.c->findings[0].message,
                        "variable NETWORK_STATUS: network-status element 1 (a): \"mtu\" is not "
                        "an MTU");
    th_env_close(&r);
}

struct lo_case {
    const char *secondary; /* the second element of the annotation */
    const char *expect;    /* expect.networks entry or NULL */
    int expect_mtu;
    const char *want;
};

static void test_loopback_as_secondary(void **state)
{
    (void)state;
    static const struct lo_case cases[] = {
        {"{\"name\":\"ml/lo\",\"interface\":\"lo\",\"ips\":[\"127.0.0.1\"],\"mtu\":65536}", "ml/lo",
         0, ""},
        {"{\"name\":\"lo\",\"interface\":\"lo\",\"ips\":[\"127.0.0.1/8\"]}", "ml/lo", 0, ""},
        {"{\"name\":\"ml/lo\",\"interface\":\"lo\",\"ips\":[\"127.0.0.1\"]}", "ml/other", 0,
         "network-missing:fail"},
        {"{\"name\":\"ml/lo\",\"interface\":\"lo\",\"ips\":[\"127.0.0.2\",\"127.0.0.1\"]}", NULL, 0,
         "ip-missing:fail"},
        {"{\"name\":\"ml/lo\",\"interface\":\"lo\",\"ips\":[\"127.0.0.1\"],\"mtu\":9000}", NULL, 0,
         "mtu:fail"},
        {"{\"name\":\"ml/lo\",\"interface\":\"lo\",\"ips\":[\"127.0.0.1\"]}", NULL, 9000,
         "mtu:fail"},
        {"{\"name\":\"ml/lo\",\"interface\":\"lo\",\"ips\":[\"127.0.0.1\"],"
         "\"mac\":\"02:00:00:00:00:01\"}",
         NULL, 0, "mac-mismatch:warn"},
        {"{\"name\":\"ml/n9\",\"interface\":\"pfmu-none9\",\"ips\":[\"10.203.9.9\"]}", "ml/n9", 0,
         "iface-missing:fail"},
        /* no interface name: which interface to look at is unknown, no finding */
        {"{\"name\":\"ml/noif\"}", NULL, 0, ""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct th_env r;
        setup(&r, "fixtures/sriov-healthy");
        char ns[1024];
        snprintf(ns, sizeof(ns), "[" CLUSTER ",%s]", cases[i].secondary);
        th_env_set(&r, "NETWORK_STATUS", ns);
        if (cases[i].expect) pf_strlist_add(&r.cfg.expect_networks, cases[i].expect);
        r.cfg.expect_mtu = cases[i].expect_mtu ? cases[i].expect_mtu : -1;
        run_check(&r);
        if (strcmp(th_codes_status(r.c), cases[i].want) != 0)
            fail_msg("case %zu: got '%s', want '%s' (%s)", i, th_codes_status(r.c), cases[i].want,
                     r.c->nfindings ? r.c->findings[0].message : "");
        assert_int_not_equal(r.c->status, PF_SKIP);
        if (strstr(cases[i].secondary, "noif")) {
            const struct pf_node *u = pf_node_get(r.c->evidence, "unknown");
            assert_non_null(u);
            assert_string_equal(pf_node_get_str(u->first, "code"), "iface-missing");
            assert_string_equal(pf_node_get_str(u->first, "missing"),
                                "network ml/noif is listed without an interface name in the "
                                "network-status annotation");
        }
        th_env_close(&r);
    }
}

static void test_messages(void **state)
{
    (void)state;
    struct th_env r;
    setup(&r, "fixtures/sriov-healthy");
    th_env_set(&r, "NETWORK_STATUS",
               "[" CLUSTER ",{\"name\":\"ml/lo\",\"interface\":\"lo\",\"ips\":[\"127.0.0.1\"]}]");
    r.cfg.expect_mtu = 9000;
    run_check(&r);
    assert_string_equal(r.c->findings[0].message, "lo (ml/lo) has MTU 65536, expect.mtu is 9000");
    assert_non_null(strstr(r.c->findings[0].remedy, "NetworkAttachmentDefinition ml/lo"));
    struct pf_node *n = pf_node_get(r.c->evidence, "networks");
    assert_int_equal(n->count, 2);
    assert_true(pf_node_get(n->first, "default")->b);
    struct pf_node *st = pf_node_get(n->first->next, "state");
    assert_true(pf_node_get(st, "up")->b);
    assert_int_equal(pf_node_get(st, "mtu")->i, 65536);
    assert_string_equal(pf_node_get_str(r.c->evidence, "source"), "variable NETWORK_STATUS");
    th_env_close(&r);

    setup(&r, "fixtures/sriov-healthy");
    th_env_set(&r, "NETWORK_STATUS", "[" CLUSTER ",{\"name\":\"ml/lo\",\"interface\":\"lo\"}]");
    run_check(&r);
    assert_string_equal(th_codes_status(r.c), "");
    assert_string_equal(r.c->message, "1 of 1 secondary networks attached and up: ml/lo on lo");
    th_env_close(&r);
}

static void test_socket_ifname_on_cluster_network(void **state)
{
    (void)state;
    /* the cluster network is on lo here; the RDMA network's interface is absent */
    const char *ns = "[{\"name\":\"c\",\"interface\":\"lo\",\"default\":true},"
                     "{\"name\":\"ml/rdma\",\"interface\":\"pfmu-none1\",\"device-info\":"
                     "{\"type\":\"pci\",\"pci\":{\"pci-address\":\"0000:c4:00.2\","
                     "\"rdma-device\":\"mlx5_3\"}}}]";
    struct th_env r;
    setup(&r, "fixtures/sriov-healthy");
    th_env_set(&r, "NETWORK_STATUS", ns);
    th_env_set(&r, "NCCL_SOCKET_IFNAME", "lo");
    run_check(&r);
    assert_string_equal(th_codes_status(r.c), "iface-missing:fail,socket-ifname-cluster:warn");
    assert_non_null(strstr(r.c->findings[1].remedy, "NCCL_SOCKET_IFNAME=pfmu-none1"));
    th_env_close(&r);

    /* not set, or excluding the cluster interface: nothing to say */
    setup(&r, "fixtures/sriov-healthy");
    th_env_set(&r, "NETWORK_STATUS", ns);
    th_env_set(&r, "NCCL_SOCKET_IFNAME", "^lo");
    run_check(&r);
    assert_string_equal(th_codes_status(r.c), "iface-missing:fail");
    th_env_close(&r);
}

static void test_pod_identity_recorded(void **state)
{
    (void)state;
    struct th_env r;
    setup(&r, "fixtures/podinfo-healthy");
    pf_node_set_str(r.v.pod, "name", "from-env");
    run_check(&r);
    assert_string_equal(pf_node_get_str(r.v.pod, "name"), "from-env");
    struct pf_node *labels = pf_node_get(r.v.pod, "labels");
    assert_non_null(labels);
    assert_string_equal(pf_node_get_str(labels, "batch.kubernetes.io/job-completion-index"), "3");
    /* net1/net2 of the annotation do not exist in this namespace */
    assert_string_equal(th_codes_status(r.c), "iface-missing:fail,iface-missing:fail");
    assert_string_equal(pf_node_get_str(r.c->evidence, "source"),
                        "annotation k8s.v1.cni.cncf.io/network-status in /etc/podinfo/annotations");
    th_env_close(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_skip_without_annotation_or_expectation),
        cmocka_unit_test(test_annotation_missing),
        cmocka_unit_test(test_wait_within_the_deadline),
        cmocka_unit_test(test_device_plugin_resources),
        cmocka_unit_test(test_annotation_invalid),
        cmocka_unit_test(test_loopback_as_secondary),
        cmocka_unit_test(test_messages),
        cmocka_unit_test(test_socket_ifname_on_cluster_network),
        cmocka_unit_test(test_pod_identity_recorded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
