/* net.sriov and topology.locality on the SR-IOV fixture trees (tests/fixtures/gen-sriov.sh):
 * PCIDEVICE_* and _INFO, device-info, bound/netdev/RDMA/uverbs, NCCL_IB_HCA, NUMA and PCIe
 * paths. Variants are made on a copy of a fixture in a temporary folder. */
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

#define VF1 "0000:c4:00.2"
#define VF2 "0000:c4:00.3"
#define VAR "PCIDEVICE_MELLANOX_COM_MLNX_SRIOV_RDMA"
#define INFO                                                                                       \
    "{\"" VF1 "\":{\"generic\":{\"deviceID\":\"" VF1 "\"},\"rdma\":{\"rdma_cm\":"                  \
    "\"/dev/infiniband/rdma_cm\",\"uverbs\":\"/dev/infiniband/uverbs3\",\"rdma_dev\":"             \
    "\"mlx5_3\"}},\"" VF2 "\":{\"generic\":{\"deviceID\":\"" VF2 "\"},\"rdma\":{\"uverbs\":"       \
    "\"/dev/infiniband/uverbs4\",\"rdma_dev\":\"mlx5_4\"}}}"

/* A context rooted at a fixture (or a fresh copy of it when copy is true). */
static void setup(struct th_env *r, const char *fixture, bool copy)
{
    th_env_open(r, fixture, copy ? TH_COPY : TH_IN_PLACE);
    th_env_start(r);
}

/* A shell command run in the root (of a copy). */
static void sh(const struct th_env *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sh(const struct th_env *r, const char *fmt, ...)
{
    char body[3000];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(body, sizeof(body), fmt, ap);
    va_end(ap);
    th_sh("cd '%s' && %s", r->root, body);
}

/* ---- net.sriov */

static void test_healthy_vfs(void **state)
{
    (void)state;
    struct th_env r;
    setup(&r, "fixtures/sriov-healthy", false);
    th_env_set(&r, VAR, VF1 "," VF2);
    th_env_set(&r, VAR "_INFO", INFO);
    th_env_check(&r, "net.sriov", pf_check_net_sriov);
    assert_string_equal(th_codes_status(r.c), "");
    assert_int_not_equal(r.c->status, PF_SKIP);
    assert_string_equal(r.c->message,
                        "2 SR-IOV functions present and bound; RDMA devices: mlx5_3, mlx5_4, "
                        "mlx5_5");
    struct pf_node *devs = pf_node_get(r.c->evidence, "devices");
    assert_non_null(devs);
    assert_int_equal(devs->count, 2);
    struct pf_node *d = devs->first;
    assert_string_equal(pf_node_get_str(d, "pciAddress"), VF1);
    assert_string_equal(pf_node_get_str(d, "role"), "vf");
    assert_string_equal(pf_node_get_str(d, "pf"), "0000:c4:00.0");
    assert_string_equal(pf_node_get_str(d, "driver"), "mlx5_core");
    assert_int_equal(pf_node_get(d, "numaNode")->i, 1);
    assert_string_equal(pf_node_get(d, "netdevs")->first->str, "net1");
    struct pf_node *rd = pf_node_get(d, "rdmaDevices")->first;
    assert_string_equal(pf_node_get_str(rd, "name"), "mlx5_3");
    assert_string_equal(pf_node_get_str(rd, "uverbs"), "/dev/infiniband/uverbs3");
    /* both variables named the first VF */
    assert_int_equal(pf_node_get(d, "from")->count, 2);
    th_env_close(&r);
}

static void test_no_devices_skips(void **state)
{
    (void)state;
    struct th_env r;
    setup(&r, "fixtures/sriov-healthy", false);
    th_env_set(&r, "PATH", "/usr/bin");
    th_env_check(&r, "net.sriov", pf_check_net_sriov);
    assert_int_equal(r.c->status, PF_SKIP);
    assert_int_equal(r.c->nfindings, 0);
    th_env_close(&r);
}

static void test_vf_without_rdma_child(void **state)
{
    (void)state;
    struct th_env r;
    setup(&r, "fixtures/sriov-no-rdma", false);
    th_env_set(&r, VAR, VF1 "," VF2);
    th_env_set(&r, VAR "_INFO", INFO);
    th_env_check(&r, "net.sriov", pf_check_net_sriov);
    assert_string_equal(th_codes_status(r.c), "vf-no-rdma:fail");
    const char *m = r.c->findings[0].message;
    assert_non_null(strstr(m, VF2 " (VF of 0000:c4:00.0) (mlx5_core) has no RDMA device"));
    assert_non_null(strstr(m, VAR "_INFO lists an rdma provider"));
    th_env_close(&r);

    /* a Mellanox VF without RDMA while nothing else in the pod asks for RDMA (no uverbs node,
     * no NCCL_IB_HCA, no NCCL_NET=IB): a plain netdevice VF, or a broken rail: warn */
    setup(&r, "fixtures/sriov-no-rdma", true);
    sh(&r, "rm dev/infiniband/uverbs3");
    th_env_set(&r, VAR, VF2);
    th_env_check(&r, "net.sriov", pf_check_net_sriov);
    assert_string_equal(th_codes_status(r.c), "vf-no-rdma:warn");
    assert_non_null(strstr(r.c->findings[0].message,
                           VF2 " (VF of 0000:c4:00.0) (mlx5_core) has no RDMA device"));
    assert_non_null(strstr(r.c->findings[0].message, "nothing else in the pod asks for RDMA"));
    th_env_close(&r);

    /* the same VF fails when anything else says RDMA is meant to run */
    static const struct {
        const char *k, *v, *why;
    } wants[] = {
        {"NCCL_IB_HCA", "=mlx5_4", "although NCCL_IB_HCA==mlx5_4 is set"},
        {"NCCL_NET", "ib", "although NCCL_NET=ib is set"},
        {NULL, NULL, "although the pod has 1 uverbs node in /dev/infiniband"},
    };
    for (size_t i = 0; i < sizeof(wants) / sizeof(wants[0]); i++) {
        setup(&r, "fixtures/sriov-no-rdma", true);
        if (wants[i].k) sh(&r, "rm dev/infiniband/uverbs3");
        th_env_set(&r, VAR, VF2);
        if (wants[i].k) th_env_set(&r, wants[i].k, wants[i].v);
        th_env_check(&r, "net.sriov", pf_check_net_sriov);
        assert_string_equal(th_codes_status(r.c), "vf-no-rdma:fail");
        assert_non_null(strstr(r.c->findings[0].message, wants[i].why));
        assert_non_null(strstr(r.c->findings[0].message, "verbs fail on this rail"));
        th_env_close(&r);
    }

    /* another VF of the pod has its RDMA device: this one is a broken rail */
    setup(&r, "fixtures/sriov-no-rdma", false);
    th_env_set(&r, VAR, VF1 "," VF2);
    th_env_check(&r, "net.sriov", pf_check_net_sriov);
    assert_string_equal(th_codes_status(r.c), "vf-no-rdma:fail");
    assert_non_null(
        strstr(r.c->findings[0].message, "the pod's other functions have RDMA devices (mlx5_3)"));
    th_env_close(&r);

    /* a VF of another vendor's driver (iavf) without RDMA is a plain netdevice VF */
    setup(&r, "fixtures/sriov-no-rdma", true);
    sh(&r,
       "mkdir -p sys/bus/pci/drivers/iavf && cd sys/bus/pci/devices/%s && "
       "ln -sfn \"$(readlink driver | sed 's/mlx5_core$/iavf/')\" driver",
       VF2);
    th_env_set(&r, VAR, VF2);
    th_env_check(&r, "net.sriov", pf_check_net_sriov);
    assert_string_equal(th_codes_status(r.c), "");
    th_env_close(&r);

    /* ... unless the config requires RDMA */
    setup(&r, "fixtures/sriov-no-rdma", false);
    r.cfg.expect_rdma = PF_RDMA_REQUIRED;
    th_env_set(&r, VAR, VF2);
    th_env_check(&r, "net.sriov", pf_check_net_sriov);
    assert_string_equal(th_codes_status(r.c), "vf-no-rdma:fail");
    assert_non_null(strstr(r.c->findings[0].message, "expect.rdma is required"));
    th_env_close(&r);
}

static void test_missing_unbound_no_netdev_no_uverbs(void **state)
{
    (void)state;
    struct th_env r;
    setup(&r, "fixtures/sriov-healthy", false);
    th_env_set(&r, VAR, VF1 ",0000:c4:00.7");
    th_env_check(&r, "net.sriov", pf_check_net_sriov);
    assert_string_equal(th_codes_status(r.c), "vf-missing:fail");
    assert_non_null(strstr(r.c->findings[0].message, "0000:c4:00.7 (from " VAR ") is not in "
                                                     "/sys/bus/pci/devices"));
    th_env_close(&r);

    setup(&r, "fixtures/sriov-healthy", true);
    sh(&r, "rm sys/bus/pci/devices/%s/driver", VF1);
    th_env_set(&r, VAR, VF1);
    th_env_check(&r, "net.sriov", pf_check_net_sriov);
    assert_string_equal(th_codes_status(r.c), "vf-unbound:fail");
    th_env_close(&r);

    setup(&r, "fixtures/sriov-healthy", true);
    sh(&r, "rm -r sys/bus/pci/devices/%s/net", VF1);
    th_env_set(&r, VAR, VF1);
    th_env_check(&r, "net.sriov", pf_check_net_sriov);
    assert_string_equal(th_codes_status(r.c), "vf-no-netdev:fail");
    th_env_close(&r);

    /* an InfiniBand port: the IPoIB netdev is not needed for verbs */
    setup(&r, "fixtures/sriov-healthy", true);
    sh(&r,
       "rm -r sys/bus/pci/devices/%s/net && mkdir -p sys/class/infiniband/mlx5_3/ports/1 && "
       "echo InfiniBand > sys/class/infiniband/mlx5_3/ports/1/link_layer",
       VF1);
    th_env_set(&r, VAR, VF1);
    th_env_check(&r, "net.sriov", pf_check_net_sriov);
    assert_string_equal(th_codes_status(r.c), "vf-no-netdev:warn");
    th_env_close(&r);

    setup(&r, "fixtures/sriov-healthy", true);
    sh(&r, "rm dev/infiniband/uverbs3");
    th_env_set(&r, VAR, VF1);
    th_env_set(&r, VAR "_INFO", INFO);
    th_env_check(&r, "net.sriov", pf_check_net_sriov);
    assert_string_equal(th_codes_status(r.c), "vf-no-uverbs:fail");
    assert_non_null(strstr(r.c->findings[0].message, "no /dev/infiniband/uverbs3 in this pod"));
    th_env_close(&r);
}

/* A node tree without the sysfs listing the finding would be absent from: unknown, not a
 * missing function or device. */
static void test_no_listing_is_unknown(void **state)
{
    (void)state;
    struct th_env r;
    setup(&r, "fixtures/sriov-healthy", true);
    sh(&r, "rm -rf sys/bus/pci/devices");
    th_env_set(&r, VAR, VF1);
    th_env_check(&r, "net.sriov", pf_check_net_sriov);
    assert_string_equal(th_codes_status(r.c), "");
    const struct pf_node *u = pf_node_get(r.c->evidence, "unknown");
    assert_non_null(u);
    assert_string_equal(pf_node_get_str(u->first, "code"), "vf-missing");
    assert_non_null(strstr(pf_node_get_str(u->first, "missing"), "/sys/bus/pci/devices cannot"));
    th_env_close(&r);
}

static void test_device_info_from_network_status(void **state)
{
    (void)state;
    struct th_env r;
    setup(&r, "fixtures/sriov-healthy", false);
    th_env_set(&r, "NETWORK_STATUS",
               "[{\"name\":\"ovn\",\"interface\":\"eth0\",\"default\":true},"
               "{\"name\":\"ml/a\",\"interface\":\"net1\",\"device-info\":{\"type\":\"pci\","
               "\"version\":\"1.1.0\",\"pci\":{\"pci-address\":\"" VF1 "\","
               "\"rdma-device\":\"mlx5_3,mlx5_11\"}}}]");
    th_env_check(&r, "net.sriov", pf_check_net_sriov);
    assert_string_equal(th_codes_status(r.c), "vf-no-rdma:fail");
    assert_non_null(strstr(r.c->findings[0].message,
                           "network-status ml/a names RDMA device mlx5_11 for " VF1
                           ", but /sys/class/infiniband has no mlx5_11"));
    th_env_close(&r);
}

static void test_invalid_variables(void **state)
{
    (void)state;
    struct th_env r;
    setup(&r, "fixtures/sriov-healthy", false);
    th_env_set(&r, VAR, VF1 ",bogus:value");
    th_env_set(&r, "PCIDEVICE_X_INFO", "{not json");
    th_env_check(&r, "net.sriov", pf_check_net_sriov);
    assert_string_equal(th_codes_status(r.c), "pcidevice-invalid:warn,pcidevice-invalid:warn");
    th_env_close(&r);
}

struct hca_case {
    const char *value;
    const char *want;
};

static void test_nccl_ib_hca_against_given_devices(void **state)
{
    (void)state;
    static const struct hca_case cases[] = {
        {"mlx5_0", "hca-not-allocated:fail"},
        {"=mlx5_0:1", "hca-not-allocated:fail"},
        {"mlx5_3,mlx5_0", "hca-not-allocated:warn"},
        {"^mlx5", "hca-not-allocated:fail"},
        {"^mlx5_0", ""},
        {"=mlx5_3,mlx5_4,mlx5_5", ""},
        {"=mlx5_3:1,mlx5_4:1,mlx5_5:1", ""},
        {"mlx5", ""},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct th_env r;
        setup(&r, "fixtures/sriov-healthy", false);
        th_env_set(&r, VAR, VF1 "," VF2);
        th_env_set(&r, "NCCL_IB_HCA", cases[i].value);
        th_env_check(&r, "net.sriov", pf_check_net_sriov);
        if (strcmp(th_codes_status(r.c), cases[i].want) != 0)
            fail_msg("NCCL_IB_HCA=%s: got '%s', want '%s'", cases[i].value, th_codes_status(r.c),
                     cases[i].want);
        const struct pf_finding *f = th_finding(r.c, "hca-not-allocated", NULL);
        if (f) {
            assert_non_null(strstr(f->message, "mlx5_3, mlx5_4, mlx5_5"));
            assert_non_null(strstr(f->remedy, "NCCL_IB_HCA==mlx5_3,mlx5_4,mlx5_5"));
            /* NCCL_NET is unset: the remedy says how to make NCCL fail instead of falling
             * back to sockets */
            assert_non_null(strstr(f->remedy, "; and set NCCL_NET=IB in the pod spec's env"));
        }
        th_env_close(&r);
    }
    /* with NCCL_NET set, the remedy does not repeat it */
    struct th_env r;
    setup(&r, "fixtures/sriov-healthy", false);
    th_env_set(&r, VAR, VF1 "," VF2);
    th_env_set(&r, "NCCL_IB_HCA", "mlx5_0");
    th_env_set(&r, "NCCL_NET", "IB");
    th_env_check(&r, "net.sriov", pf_check_net_sriov);
    assert_null(strstr(th_finding(r.c, "hca-not-allocated", NULL)->remedy, "NCCL_NET"));
    th_env_close(&r);
}

/* pf_checks_net_advice: which net name NCCL_NET should hold, and why */
static void test_net_advice(void **state)
{
    (void)state;
    struct th_env r;
    char why[160];
    setup(&r, "fixtures/sriov-healthy", false); /* mlx5 HCAs, uverbs nodes in the pod */
    pf_checks_inventory(&r.ctx);
    assert_string_equal(pf_checks_net_advice(why, sizeof(why), &r.ctx), "IB");
    assert_string_equal(why, "the pod has RDMA devices with uverbs nodes");
    r.ctx.in_env_mode = true; /* an env file: the hardware here is not the pod's */
    assert_null(pf_checks_net_advice(why, sizeof(why), &r.ctx));
    snprintf(r.cfg.expect_transport, sizeof(r.cfg.expect_transport), "OFI");
    assert_string_equal(pf_checks_net_advice(why, sizeof(why), &r.ctx), "OFI");
    th_env_set(&r, "NCCL_NET", "ofi");
    assert_null(pf_checks_net_advice(why, sizeof(why), &r.ctx));
    th_env_close(&r);

    setup(&r, "fixtures/node-efa", false); /* efa_0..: the aws-ofi-nccl plugin */
    pf_checks_inventory(&r.ctx);
    r.cfg.expect_rdma = PF_RDMA_REQUIRED;
    assert_string_equal(pf_checks_net_advice(why, sizeof(why), &r.ctx), "OFI");
    r.cfg.expect_rdma = PF_RDMA_NONE;
    assert_null(pf_checks_net_advice(why, sizeof(why), &r.ctx));
    th_env_close(&r);
}

/* ---- topology.locality */

static void test_locality_remote_gpu(void **state)
{
    (void)state;
    struct th_env r;
    setup(&r, "fixtures/sriov-healthy", false);
    th_env_check(&r, "topology.locality", pf_check_topology_locality);
    /* mlx5_0 (the PF) has no uverbs node in the pod: only mlx5_3..5 count */
    assert_string_equal(th_codes_status(r.c), "nic-numa-remote:warn");
    assert_non_null(strstr(r.c->findings[0].message,
                           "GPU 0000:18:00.0 is on NUMA node 0, but every RDMA NIC this pod can "
                           "open is on another node (mlx5_3 on node 1, mlx5_4 on node 1, mlx5_5 "
                           "on node 1)"));
    struct pf_node *gpus = pf_node_get(r.c->evidence, "gpus");
    assert_int_equal(gpus->count, 2);
    struct pf_node *g0 = gpus->first, *g1 = g0->next;
    assert_string_equal(pf_node_get_str(g0, "busId"), "0000:18:00.0");
    assert_string_equal(pf_node_get_str(g0, "path"), "SYS");
    assert_string_equal(pf_node_get_str(g1, "busId"), "0000:c3:00.0");
    assert_string_equal(pf_node_get_str(g1, "nearestNic"), "mlx5_3");
    assert_string_equal(pf_node_get_str(g1, "path"), "PIX");
    assert_string_equal(pf_node_get_str(pf_node_get(g1, "paths"), "mlx5_5"), "PIX");
    struct pf_node *nics = pf_node_get(r.c->evidence, "nics");
    assert_int_equal(nics->count, 4);
    assert_string_equal(pf_node_get_str(nics->first, "name"), "mlx5_0");
    assert_false(pf_node_get(nics->first, "usable")->b);
    th_env_close(&r);
}

/* The NIC-to-GPU map names the attachment that gave the pod each NIC (pkg/k8s/attach.h): here
 * Multus, whose device-info names mlx5_3, and a GKE network on the netdev of mlx5_4 and
 * mlx5_5. */
static void test_locality_attachments(void **state)
{
    (void)state;
    struct th_env r;
    setup(&r, "fixtures/sriov-healthy", true);
    char gen[512];
    th_abs_path(gen, sizeof(gen), "fixtures/gen-podinfo.py");
    sh(&r,
       "n=$(ls sys/class/infiniband/mlx5_4/device/net | head -1) && "
       "echo '[{\"name\":\"ovn\",\"interface\":\"eth0\",\"default\":true},"
       "{\"name\":\"ml/sriov-a\",\"interface\":\"net1\",\"device-info\":{\"type\":"
       "\"pci\",\"version\":\"1.1.0\",\"pci\":{\"pci-address\":\"0000:c4:00.2\","
       "\"rdma-device\":\"mlx5_3\"}}}]' | python3 '%s' etc/podinfo - --annotation "
       "\"networking.gke.io/interfaces=[{\\\"interfaceName\\\":\\\"$n\\\",\\\"network\\\":"
       "\\\"rdma-1\\\"}]\"",
       gen);
    th_env_check(&r, "topology.locality", pf_check_topology_locality);
    struct pf_node *nics = pf_node_get(r.c->evidence, "nics");
    /* mlx5_4 and mlx5_5 are two RDMA devices of one function, whose netdev is net2 */
    const char *want[] = {NULL, "multus ml/sriov-a on net1", "gke rdma-1 on net2",
                          "gke rdma-1 on net2"};
    size_t i = 0;
    for (struct pf_node *n = nics->first; n; n = n->next, i++) {
        const char *got = pf_node_get_str(n, "attachment");
        if (i >= 4) fail_msg("more than 4 NICs");
        if (!want[i] ? got != NULL : !got || !strstr(got, want[i]))
            fail_msg("nic %zu (%s): attachment %s, want %s", i, pf_node_get_str(n, "name"),
                     got ? got : "none", want[i] ? want[i] : "none");
    }
    th_env_close(&r);
}

static void test_locality_paths(void **state)
{
    (void)state;
    struct th_env r;
    /* GPU0 moved to NUMA node 1 (other host bridge): NODE, no finding; a GPU under the same
     * root port but behind a second switch level: PXB */
    setup(&r, "fixtures/sriov-healthy", true);
    sh(&r, "echo 1 > sys/bus/pci/devices/0000:18:00.0/numa_node");
    th_env_check(&r, "topology.locality", pf_check_topology_locality);
    assert_string_equal(th_codes_status(r.c), "");
    assert_string_equal(r.c->message,
                        "every GPU has an RDMA NIC on its NUMA node (2 GPUs, 3 NICs)");
    assert_string_equal(pf_node_get_str(pf_node_get(r.c->evidence, "gpus")->first, "path"), "NODE");
    th_env_close(&r);

    setup(&r, "fixtures/sriov-healthy", true);
    sh(&r, "d=sys/devices/pci0000:c0/0000:c0:01.1/0000:c1:00.0/0000:c2:00.0 && "
           "rm -r $d/0000:c3:00.0 sys/bus/pci/devices/0000:c3:00.0 && "
           "mkdir -p $d/0000:c3:00.0/0000:c5:00.0/0000:c6:00.0 && "
           "echo 1 > $d/0000:c3:00.0/0000:c5:00.0/0000:c6:00.0/numa_node && "
           "ln -s ../../../devices/pci0000:c0/0000:c0:01.1/0000:c1:00.0/0000:c2:00.0/0000:c3:00.0/"
           "0000:c5:00.0/0000:c6:00.0 sys/bus/pci/devices/0000:c6:00.0 && "
           "mv proc/driver/nvidia/gpus/0000:c3:00.0 proc/driver/nvidia/gpus/0000:c6:00.0");
    th_env_check(&r, "topology.locality", pf_check_topology_locality);
    struct pf_node *g1 = pf_node_get(r.c->evidence, "gpus")->first->next;
    assert_string_equal(pf_node_get_str(g1, "busId"), "0000:c6:00.0");
    assert_string_equal(pf_node_get_str(g1, "path"), "PXB");
    th_env_close(&r);

    /* unknown NUMA everywhere (a VM): no finding, the message says so */
    setup(&r, "fixtures/sriov-healthy", true);
    sh(&r, "for f in $(find sys/devices -name numa_node); do echo -1 > $f; done");
    th_env_check(&r, "topology.locality", pf_check_topology_locality);
    assert_string_equal(th_codes_status(r.c), "");
    assert_non_null(strstr(r.c->message, "NUMA placement unknown"));
    th_env_close(&r);
}

static void test_locality_skips(void **state)
{
    (void)state;
    struct th_env r;
    setup(&r, "fixtures/podinfo-healthy", false);
    th_env_check(&r, "topology.locality", pf_check_topology_locality);
    assert_int_equal(r.c->status, PF_SKIP);
    assert_string_equal(r.c->message, "no GPUs in /proc/driver/nvidia/gpus");
    th_env_close(&r);

    setup(&r, "fixtures/sriov-healthy", true);
    sh(&r, "rm dev/infiniband/uverbs*");
    th_env_check(&r, "topology.locality", pf_check_topology_locality);
    assert_int_equal(r.c->status, PF_SKIP);
    assert_non_null(strstr(r.c->message, "no RDMA NIC this pod can open"));
    th_env_close(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_healthy_vfs),
        cmocka_unit_test(test_no_devices_skips),
        cmocka_unit_test(test_vf_without_rdma_child),
        cmocka_unit_test(test_missing_unbound_no_netdev_no_uverbs),
        cmocka_unit_test(test_no_listing_is_unknown),
        cmocka_unit_test(test_device_info_from_network_status),
        cmocka_unit_test(test_invalid_variables),
        cmocka_unit_test(test_nccl_ib_hca_against_given_devices),
        cmocka_unit_test(test_net_advice),
        cmocka_unit_test(test_locality_remote_gpu),
        cmocka_unit_test(test_locality_paths),
        cmocka_unit_test(test_locality_attachments),
        cmocka_unit_test(test_locality_skips),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
