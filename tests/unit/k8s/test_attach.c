/* pkg/k8s/attach.c: every source of the pod's attachments, on the samples of
 * tests/fixtures/attach (README names their sources), and the RDMA device list. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../pkg/k8s/attach.h"
#include "../../../pkg/k8s/k8s.h"
#include "../helpers/helpers.h"

static char *sample(const char *name, size_t *len)
{
    char path[256];
    snprintf(path, sizeof(path), "fixtures/attach/%s", name);
    char *t = th_slurp(path, len);
    assert_non_null(t);
    return t;
}

static void test_claim_dranet_doc(void **state)
{
    (void)state;
    size_t len;
    char *j = sample("dranet-claim.json", &len);
    struct pf_k8s_attachments a = {0};
    assert_int_equal(pf_k8s_claim_parse(&a, j, len), 0);
    assert_int_equal(a.n, 1);
    assert_int_equal(a.v[0].src, PF_K8S_SRC_DRA);
    assert_string_equal(a.v[0].name, "dummy-interface-static-ip-route/req-dummy");
    assert_string_equal(a.v[0].device, "dra.net/dra-worker/dummy2");
    assert_string_equal(a.v[0].interface, "eth99");
    assert_string_equal(a.v[0].mac, "86:d7:86:e6:f3:dd");
    assert_int_equal(a.v[0].ips.n, 1);
    assert_string_equal(a.v[0].ips.v[0], "169.254.169.13");
    assert_true(a.v[0].reported);
    assert_string_equal(a.v[0].not_ready, ""); /* Ready is True */
    assert_true(pf_k8s_attach_matches(&a.v[0], "dummy-interface-static-ip-route"));
    assert_true(pf_k8s_attach_matches(&a.v[0], "dummy-interface-static-ip-route/req-dummy"));
    assert_false(pf_k8s_attach_matches(&a.v[0], "dummy-interface"));
    assert_false(pf_k8s_attach_matches(&a.v[0], "req-dummy"));
    pf_k8s_attachments_free(&a);
    free(j);
}

static void test_claim_two_devices_and_unallocated(void **state)
{
    (void)state;
    size_t len;
    char *j = sample("dranet-claim-rdma.json", &len);
    struct pf_k8s_attachments a = {0};
    assert_int_equal(pf_k8s_claim_parse(&a, j, len), 0);
    assert_int_equal(a.n, 2);
    assert_string_equal(a.v[1].name, "worker-0-rdma-x7k2p/nic1");
    assert_string_equal(a.v[1].interface, "rdma1");
    assert_string_equal(a.v[1].ips.v[0], "10.210.2.11");
    /* not allocated yet: nothing; allocated without device status: the device, no interface */
    static const char pending[] = "{\"kind\":\"ResourceClaim\",\"metadata\":{\"name\":\"c\"}}";
    assert_int_equal(pf_k8s_claim_parse(&a, pending, strlen(pending)), 0);
    assert_int_equal(a.n, 2);
    static const char gpu[] =
        "{\"apiVersion\":\"resource.k8s.io/v1beta1\",\"kind\":\"ResourceClaim\",\"metadata\":"
        "{\"name\":\"gpus\"},\"status\":{\"allocation\":{\"devices\":{\"results\":[{\"request\":"
        "\"gpu\",\"driver\":\"gpu.nvidia.com\",\"pool\":\"node-1\",\"device\":\"gpu-0\"}]}}}}";
    assert_int_equal(pf_k8s_claim_parse(&a, gpu, strlen(gpu)), 0);
    assert_int_equal(a.n, 3);
    assert_string_equal(a.v[2].interface, "");
    assert_false(a.v[2].reported);
    pf_k8s_attachments_free(&a);
    free(j);
}

static void test_claim_not_ready(void **state)
{
    (void)state;
    static const char j[] =
        "{\"metadata\":{\"name\":\"c\"},\"status\":{\"allocation\":{\"devices\":{\"results\":"
        "[{\"request\":\"r\",\"driver\":\"dra.net\",\"pool\":\"p\",\"device\":\"x\"}]}},"
        "\"devices\":[{\"driver\":\"dra.net\",\"pool\":\"p\",\"device\":\"x\",\"conditions\":"
        "[{\"type\":\"NetworkReady\",\"status\":\"False\"},{\"type\":\"Ready\",\"status\":"
        "\"False\",\"reason\":\"NetworkDeviceError\",\"message\":\"link not found\"}]}]}}";
    struct pf_k8s_attachments a = {0};
    assert_int_equal(pf_k8s_claim_parse(&a, j, strlen(j)), 0);
    assert_int_equal(a.n, 1);
    assert_string_equal(a.v[0].not_ready, "NetworkDeviceError: link not found");
    pf_k8s_attachments_free(&a);
}

static void test_claim_errors(void **state)
{
    (void)state;
    static const struct {
        const char *json, *err;
    } bad[] = {
        {"not json", "ResourceClaim is not JSON"},
        {"[]", "not a JSON object"},
        {"{\"kind\":\"Pod\",\"metadata\":{\"name\":\"p\"}}", "not a ResourceClaim (kind Pod)"},
        {"{\"kind\":\"ResourceClaim\"}", "without metadata.name"},
        {"{\"metadata\":{\"name\":\"c\"},\"status\":{\"allocation\":{\"devices\":{\"results\":{}}}}"
         "}",
         "ResourceClaim c: status.allocation.devices.results is not a list"},
        {"{\"metadata\":{\"name\":\"c\"},\"status\":{\"allocation\":{\"devices\":{\"results\":[{"
         "\"request\":\"r\"}]}}}}",
         "lacks request, driver, pool or device"},
        {"{\"metadata\":{\"name\":\"c\"},\"status\":{\"allocation\":{\"devices\":{\"results\":[{"
         "\"request\":\"r\",\"driver\":\"d\",\"pool\":\"p\",\"device\":\"x\"}]}},\"devices\":[{"
         "\"driver\":\"d\",\"pool\":\"p\",\"device\":\"x\",\"networkData\":{\"ips\":[1]}}]}}",
         "networkData.ips is not a list of strings"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct pf_k8s_attachments a = {0};
        assert_int_equal(pf_k8s_claim_parse(&a, bad[i].json, strlen(bad[i].json)), PF_EINVAL);
        assert_int_equal(a.n, 0);
        if (!strstr(pf_err_msg(), bad[i].err)) fail_msg("%zu: %s", i, pf_err_msg());
        pf_k8s_attachments_free(&a);
    }
}

static void test_pod_claims(void **state)
{
    (void)state;
    size_t len;
    char *j = sample("pod-dra.json", &len);
    struct pf_strlist c = {0};
    assert_int_equal(pf_k8s_pod_claims_parse(&c, j, len), 0);
    assert_int_equal(c.n, 2);
    assert_string_equal(c.v[0], "worker-0-rdma-x7k2p"); /* from the template, by its status */
    assert_string_equal(c.v[1], "shared-gpus");
    pf_strlist_free(&c);
    static const char none[] = "{\"kind\":\"Pod\",\"spec\":{\"containers\":[]}}";
    assert_int_equal(pf_k8s_pod_claims_parse(&c, none, strlen(none)), 0);
    assert_int_equal(c.n, 0);
    static const char *const bad[] = {"[]",
                                      "{\"kind\":\"Node\"}",
                                      "{\"spec\":[]}",
                                      "{\"spec\":{\"resourceClaims\":{}}}",
                                      "{\"status\":{\"resourceClaimStatuses\":[1]}}",
                                      "{\"status\":{\"extendedResourceClaimStatus\":[]}}",
                                      "{\"status\":{\"extendedResourceClaimStatus\":"
                                      "{\"resourceClaimName\":1}}}"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(pf_k8s_pod_claims_parse(&c, bad[i], strlen(bad[i])), PF_EINVAL);
        assert_int_equal(c.n, 0);
    }
    free(j);
}

/* The objects as kube-apiserver v1.37.2 stored them (tests/e2e/test_k8s_dra.sh): the pod with a
 * named claim, a template's claim and the claim kube-scheduler made for an extended resource a
 * DeviceClass backs (status.extendedResourceClaimStatus); two of the claims, allocated by
 * kube-scheduler, with status.devices written through the status subresource. */
static void test_real_apiserver(void **state)
{
    (void)state;
    size_t len;
    char *j = sample("k8s-1.37-pod.json", &len);
    struct pf_strlist c = {0};
    assert_int_equal(pf_k8s_pod_claims_parse(&c, j, len), 0);
    assert_int_equal(c.n, 3);
    assert_string_equal(c.v[0], "worker-0-gpus-kzlzt");
    assert_string_equal(c.v[1], "worker-0-rdma");
    assert_string_equal(c.v[2], "worker-0-extended-resources-cj7cv");
    pf_strlist_free(&c);
    free(j);
    struct pf_k8s_attachments a = {0};
    j = sample("k8s-1.37-claim-rdma.json", &len);
    assert_int_equal(pf_k8s_claim_parse(&a, j, len), 0);
    free(j);
    j = sample("k8s-1.37-claim-extended.json", &len);
    assert_int_equal(pf_k8s_claim_parse(&a, j, len), 0);
    free(j);
    assert_int_equal(a.n, 3);
    static const char *const want[][4] = {
        {"worker-0-rdma/nic0", "dra.net/dra-node/pci-0000-0c-00-0", "rdma0", "10.210.0.11"},
        {"worker-0-rdma/nic1", "dra.net/dra-node/pci-0000-0d-00-0", "rdma1", "10.210.1.11"},
        {"worker-0-extended-resources-cj7cv/container-0-request-0",
         "dra.net/dra-node/pci-0000-8c-00-0", "rdma2", "10.210.2.11"},
    };
    for (size_t i = 0; i < 3; i++) {
        assert_string_equal(a.v[i].name, want[i][0]);
        assert_string_equal(a.v[i].device, want[i][1]);
        assert_string_equal(a.v[i].interface, want[i][2]);
        assert_int_equal(a.v[i].ips.n, 1);
        assert_string_equal(a.v[i].ips.v[0], want[i][3]);
        assert_true(a.v[i].reported);
        assert_string_equal(a.v[i].not_ready, "");
    }
    pf_k8s_attachments_free(&a);
}

static void test_gke(void **state)
{
    (void)state;
    size_t len, slen;
    char *j = sample("gke-interfaces.json", &len);
    char *st = sample("gke-interface-status.json", &slen);
    struct pf_k8s_attachments a = {0};
    assert_int_equal(pf_k8s_gke_parse(&a, j, len, NULL, 0), 0);
    assert_int_equal(a.n, 10);
    assert_true(a.v[0].cluster);
    assert_false(a.v[1].cluster);
    assert_string_equal(a.v[2].name, "rdma-0");
    assert_string_equal(a.v[2].interface, "eth2");
    assert_int_equal(a.v[2].ips.n, 0);
    assert_true(pf_k8s_attach_matches(&a.v[2], "rdma-0"));
    assert_false(pf_k8s_attach_matches(&a.v[2], "ns/rdma-0"));
    pf_k8s_attachments_free(&a);
    assert_int_equal(pf_k8s_gke_parse(&a, j, len, st, slen), 0);
    assert_int_equal(a.n, 10);
    assert_string_equal(a.v[9].ips.v[0], "192.168.17.17");
    assert_string_equal(a.v[9].mac, "42:01:c0:a8:11:11");
    assert_true(a.v[9].reported);
    pf_k8s_attachments_free(&a);
    /* a NetworkInterface reference instead of a network */
    static const char ref[] = "[{\"interfaceName\":\"eth1\",\"interface\":\"l2-nic\"}]";
    assert_int_equal(pf_k8s_gke_parse(&a, ref, strlen(ref), NULL, 0), 0);
    assert_string_equal(a.v[0].name, "l2-nic");
    pf_k8s_attachments_free(&a);
    static const char *const bad[] = {"{}", "[{\"interfaceName\":\"eth1\"}]", "[1]",
                                      "[{\"interfaceName\":2,\"network\":\"x\"}]"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(pf_k8s_gke_parse(&a, bad[i], strlen(bad[i]), NULL, 0), PF_EINVAL);
        assert_int_equal(a.n, 0);
        assert_non_null(strstr(pf_err_msg(), "networking.gke.io/interfaces"));
    }
    static const char badst[] = "[{\"networkName\":\"rdma-0\",\"ipAddresses\":\"x\"}]";
    assert_int_equal(pf_k8s_gke_parse(&a, j, len, badst, strlen(badst)), PF_EINVAL);
    assert_int_equal(a.n, 0);
    assert_non_null(strstr(pf_err_msg(), "networking.gke.io/interface-status element 1"));
    free(j);
    free(st);
}

static void test_resources(void **state)
{
    (void)state;
    struct pf_k8s_attachments a = {0};
    assert_int_equal(
        pf_k8s_resources_parse(&a, " vpc.amazonaws.com/efa=32, ,rdma/hca_shared_devices_a = 1"), 0);
    assert_int_equal(a.n, 2);
    assert_string_equal(a.v[0].name, "vpc.amazonaws.com/efa");
    assert_int_equal(a.v[0].count, 32);
    assert_string_equal(a.v[1].name, "rdma/hca_shared_devices_a");
    assert_int_equal(a.v[1].count, 1);
    assert_true(pf_k8s_attach_matches(&a.v[1], "rdma/hca_shared_devices_a"));
    pf_k8s_attachments_free(&a);
    static const char *const bad[] = {"efa=1", "rdma/ib", "rdma/ib=x", "rdma/ib=-1",
                                      "/ib=1", "a/b/c=1", "rdma/=1",   "rdma/ib=1,x"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(pf_k8s_resources_parse(&a, bad[i]), PF_EINVAL);
        assert_int_equal(a.n, 0);
        assert_non_null(strstr(pf_err_msg(), "is not resource=count"));
        assert_non_null(strstr(pf_err_msg(), bad[i] + (i == 7 ? 10 : 0)));
    }
    pf_k8s_attachments_free(&a);
}

static void test_gather_podinfo(void **state)
{
    (void)state;
    /* a podinfo folder with GKE's annotations and no Multus */
    char dir[128], cmd[1024];
    th_tmpdir(dir, sizeof(dir), "attach");
    snprintf(
        cmd, sizeof(cmd),
        "echo [] | python3 fixtures/gen-podinfo.py %s/podinfo - --key none "
        "--annotation networking.gke.io/default-interface=eth0 "
        "--annotation \"networking.gke.io/interfaces=$(cat fixtures/attach/gke-interfaces.json)\"",
        dir);
    th_sh("%s", cmd);
    struct pf_host h;
    assert_int_equal(pf_host_init(&h, ""), 0);
    char pdir[256];
    snprintf(pdir, sizeof(pdir), "%s/podinfo", dir);
    struct pf_k8s_podinfo pi;
    assert_int_equal(pf_k8s_podinfo_read(&pi, &h, pdir, NULL, NULL), 0);
    struct pf_k8s_attachments a;
    struct pf_strlist errs = {0};
    pf_k8s_attach_gather(&a, &errs, &pi, "vpc.amazonaws.com/efa=2");
    assert_int_equal(errs.n, 0);
    assert_int_equal(a.n, 11);
    assert_int_equal(a.v[10].src, PF_K8S_SRC_DEVPLUGIN);
    pf_k8s_attachments_free(&a);
    pf_k8s_attach_gather(&a, &errs, &pi, "nonsense");
    assert_int_equal(errs.n, 1);
    assert_non_null(strstr(errs.v[0], "variable PREFLIGHT_DEVICE_RESOURCES"));
    assert_int_equal(a.n, 10);
    pf_k8s_attachments_free(&a);
    pf_strlist_free(&errs);
    pf_k8s_podinfo_free(&pi);
    assert_true(th_rmtree(dir));
}

static void test_rdma_list(void **state)
{
    (void)state;
    struct pf_host h;
    char root[512];
    th_abs_path(root, sizeof(root), "fixtures/node-efa");
    assert_int_equal(pf_host_init(&h, root), 0);
    struct pf_k8s_rdmadevs d;
    assert_int_equal(pf_k8s_rdma_list(&d, &h), 0);
    assert_int_equal(d.n, 2);
    assert_string_equal(d.v[0].name, "efa_0");
    assert_string_equal(d.v[0].pci, "0000:10:1b.0");
    assert_int_equal(d.v[0].numa, 0);
    assert_int_equal(d.v[0].vendor, 0x1d0f);
    assert_string_equal(d.v[0].netdevs, "");
    pf_k8s_rdma_free(&d);
    th_abs_path(root, sizeof(root), "fixtures/cpu-node");
    assert_int_equal(pf_host_init(&h, root), 0);
    assert_int_equal(pf_k8s_rdma_list(&d, &h), 0);
    assert_int_equal(d.n, 0);
    pf_k8s_rdma_free(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_claim_dranet_doc),
        cmocka_unit_test(test_claim_two_devices_and_unallocated),
        cmocka_unit_test(test_claim_errors),
        cmocka_unit_test(test_pod_claims),
        cmocka_unit_test(test_real_apiserver),
        cmocka_unit_test(test_claim_not_ready),
        cmocka_unit_test(test_gke),
        cmocka_unit_test(test_resources),
        cmocka_unit_test(test_gather_podinfo),
        cmocka_unit_test(test_rdma_list),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
