/* rdma.devices, rdma.ports, rdma.memlock and rdma.gpudirect on materialized fixture trees
 * (tests/fixtures/node-*, made real by fixtures/materialize.sh), table-driven, plus
 * mutations made at test time: a uverbs node with no driver behind it, missing nodes, RoCE
 * GIDs without a netdev, a lowered RLIMIT_MEMLOCK without CAP_IPC_LOCK. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "../../../pkg/checks/checks.h"
#include "../helpers/helpers.h"

/* ---- a materialized fixture and one check run on it */

/* Runs one check on the tree with the config as it is now, finalizes, returns the result. */
static struct pf_check *env_run(struct th_env *e, pf_check_fn fn, const char *id)
{
    th_env_check(e, id, fn);
    pf_verdict_finalize(&e->v, NULL, NULL);
    return pf_verdict_find_check(&e->v, id);
}

/* Whether the check's evidence.unknown has an entry for code whose text holds needle. */
static bool has_unknown(const struct pf_check *c, const char *code, const char *needle)
{
    const struct pf_node *u = pf_node_get(c->evidence, "unknown");
    for (const struct pf_node *e = u ? u->first : NULL; e; e = e->next)
        if (strcmp(pf_node_get_str(e, "code"), code) == 0 &&
            strstr(pf_node_get_str(e, "missing"), needle))
            return true;
    return false;
}

static void assert_finding(const struct pf_check *c, const char *code, enum pf_status st,
                           const char *needle)
{
    const struct pf_finding *f = th_finding(c, code, needle);
    if (!f) {
        for (size_t i = 0; i < c->nfindings; i++)
            print_message("  have %s: %s\n", c->findings[i].code, c->findings[i].message);
        fail_msg("no %s finding mentioning \"%s\"", code, needle ? needle : "");
    }
    assert_int_equal(f->status, st);
}

/* ---- the table */

struct row {
    const char *name;
    const char *fixture;
    const char *check;
    const char *mutate; /* shell run in the root before the check, or NULL */
    int expect_rdma;    /* -1: default */
    int expect_hcas;
    double min_rate;
    enum pf_status status;
    const char *codes;  /* exactly these (sorted, comma-joined) */
    const char *needle; /* the check's message contains this, or NULL */
};

static pf_check_fn fn_of(const char *id)
{
    if (strcmp(id, "rdma.devices") == 0) return pf_check_rdma_devices;
    if (strcmp(id, "rdma.ports") == 0) return pf_check_rdma_ports;
    if (strcmp(id, "rdma.gpudirect") == 0) return pf_check_rdma_gpudirect;
    return pf_check_rdma_memlock;
}

#define NOEXP -1, -1, -1
static const struct row rows[] = {
    /* healthy NDR node */
    {"ndr devices", "node-8gpu-ndr", "rdma.devices", NULL, NOEXP, PF_PASS, "",
     "8 with an openable uverbs node"},
    {"ndr ports", "node-8gpu-ndr", "rdma.ports", NULL, NOEXP, PF_PASS, "", "8 of 8 ports ACTIVE"},
    {"ndr ports at 400", "node-8gpu-ndr", "rdma.ports", NULL, -1, -1, 400, PF_PASS, "", NULL},
    {"ndr hcas 8", "node-8gpu-ndr", "rdma.devices", NULL, -1, 8, -1, PF_PASS, "", NULL},
    {"ndr peermem", "node-8gpu-ndr", "rdma.gpudirect", NULL, NOEXP, PF_PASS, "", "nvidia_peermem"},
    {"ndr no peermem", "node-8gpu-ndr", "rdma.gpudirect", "rm -rf sys/module/nvidia_peermem", NOEXP,
     PF_WARN, "no-gpudirect", NULL},
    {"ndr nv_mem", "node-8gpu-ndr", "rdma.gpudirect",
     "rm -rf sys/module/nvidia_peermem && mkdir -p sys/kernel/mm/memory_peers/nv_mem && "
     "echo 1.0 > sys/kernel/mm/memory_peers/nv_mem/version",
     NOEXP, PF_PASS, "", "memory_peers/nv_mem/version"},
    {"ndr expect none devices", "node-8gpu-ndr", "rdma.devices", NULL, PF_RDMA_NONE, -1, -1,
     PF_SKIP, "", "expect.rdma is none"},
    {"ndr expect none ports", "node-8gpu-ndr", "rdma.ports", NULL, PF_RDMA_NONE, -1, -1, PF_SKIP,
     "", NULL},
    {"ndr rdma_cm missing", "node-8gpu-ndr", "rdma.devices", "rm dev/infiniband/rdma_cm", NOEXP,
     PF_WARN, "rdma-cm-missing", NULL},
    {"ndr 4 of 8 nodes", "node-8gpu-ndr", "rdma.devices",
     "rm dev/infiniband/uverbs4 dev/infiniband/uverbs5 dev/infiniband/uverbs6 "
     "dev/infiniband/uverbs7",
     NOEXP, PF_WARN, "uverbs-missing", NULL},
    {"ndr 4 of 8 nodes, hcas 8", "node-8gpu-ndr", "rdma.devices",
     "rm dev/infiniband/uverbs4 dev/infiniband/uverbs5 dev/infiniband/uverbs6 "
     "dev/infiniband/uverbs7",
     -1, 8, -1, PF_FAIL, "hca-count,uverbs-missing", NULL},
    /* AWS p4d with rdma-core's device names (tests/fixtures/gen-p4d.sh): EFA by its driver */
    {"p4d devices", "node-p4d-efa", "rdma.devices", NULL, NOEXP, PF_PASS, "",
     "4 HCAs (rdmap16s27, rdmap32s27, rdmap144s27, rdmap160s27), 4 with an openable uverbs node"},
    {"p4d ports", "node-p4d-efa", "rdma.ports", NULL, NOEXP, PF_PASS, "", "4 of 4 ports ACTIVE"},
    {"p4d port down", "node-p4d-efa", "rdma.ports",
     "echo '1: DOWN' > sys/class/infiniband/rdmap32s27/ports/1/state", NOEXP, PF_FAIL, "port-down",
     "rdmap32s27 port 1: state is DOWN"},
    {"p4d link disabled", "node-p4d-efa", "rdma.ports",
     "echo '3: Disabled' > sys/class/infiniband/rdmap144s27/ports/1/phys_state", NOEXP, PF_FAIL,
     "port-not-linkup", NULL},
    {"p4d pcie x8", "node-p4d-efa", "rdma.devices",
     "echo 8 > sys/bus/pci/devices/0000:20:1b.0/current_link_width", NOEXP, PF_WARN,
     "pcie-link-degraded", NULL},
    {"ndr no ib_uverbs", "node-8gpu-ndr", "rdma.devices", "rm -rf sys/class/infiniband_verbs",
     NOEXP, PF_FAIL, "uverbs-missing", NULL},
    {"ndr half rate", "node-8gpu-ndr", "rdma.ports",
     "echo '2.5 Gb/sec (1X SDR)' > sys/class/infiniband/mlx5_6/ports/1/rate", -1, -1, 400, PF_FAIL,
     "port-rate", NULL},
    /* the kernel always writes ports/ (core/sysfs.c ib_setup_port_attrs): without it the view
     * is partial, and the port's state unknown */
    {"ndr hca without ports: unknown", "node-8gpu-ndr", "rdma.ports",
     "rm -rf sys/class/infiniband/mlx5_2/ports", NOEXP, PF_PASS, "",
     "unknown port-down: mlx5_2: no ports listed"},
    {"ndr INIT", "node-8gpu-ndr", "rdma.ports",
     "echo '2: INIT' > sys/class/infiniband/mlx5_1/ports/1/state", NOEXP, PF_FAIL, "port-down",
     NULL},
    /* RoCE */
    {"roce devices", "node-roce", "rdma.devices", NULL, NOEXP, PF_PASS, "", NULL},
    {"roce ports", "node-roce", "rdma.ports", NULL, NOEXP, PF_PASS, "", "2 of 2 ports ACTIVE"},
    {"roce dma-buf", "node-roce", "rdma.gpudirect", NULL, NOEXP, PF_PASS, "", "dma-buf"},
    {"roce old kernel", "node-roce", "rdma.gpudirect",
     "echo 5.4.0-150-generic > proc/sys/kernel/osrelease", NOEXP, PF_WARN, "no-gpudirect", NULL},
    {"roce hcas 8", "node-roce", "rdma.devices", NULL, -1, 8, -1, PF_FAIL, "hca-count", NULL},
    {"roce min 400", "node-roce", "rdma.ports", NULL, -1, -1, 400, PF_FAIL, "port-rate", NULL},
    /* a GID table without its attribute files, or without gids/, is a partial copy (the kernel
     * writes both for every entry, core/sysfs.c): unknown; an entry the kernel says has no
     * netdev (an empty ndevs file) is evidence */
    {"roce no ndevs: unknown", "node-roce", "rdma.ports",
     "rm -rf sys/class/infiniband/mlx5_1/ports/1/gid_attrs/ndevs", NOEXP, PF_PASS, "",
     "unknown no-roce-gid: mlx5_1 port 1: "},
    {"roce empty ndevs", "node-roce", "rdma.ports",
     "for f in sys/class/infiniband/mlx5_1/ports/1/gid_attrs/ndevs/*; do : > $f; done", NOEXP,
     PF_FAIL, "no-roce-gid", NULL},
    {"roce v1 only", "node-roce", "rdma.ports",
     "for i in 0 1 2 3; do echo 'IB/RoCE v1' > sys/class/infiniband/mlx5_0/ports/1/gid_attrs/"
     "types/$i; done",
     NOEXP, PF_FAIL, "no-roce-gid", NULL},
    {"roce no gid table: unknown", "node-roce", "rdma.ports",
     "rm -rf sys/class/infiniband/mlx5_0/ports/1/gids", NOEXP, PF_PASS, "",
     "unknown no-roce-gid: mlx5_0 port 1: no GID table under "},
    {"roce v2 zero gids", "node-roce", "rdma.ports",
     "for i in 1 3; do echo 0000:0000:0000:0000:0000:0000:0000:0000 > "
     "sys/class/infiniband/mlx5_0/ports/1/gids/$i; done",
     NOEXP, PF_FAIL, "no-roce-gid", NULL},
    /* broken ports */
    {"ports-bad", "node-ports-bad", "rdma.ports", NULL, NOEXP, PF_FAIL,
     "port-down,port-not-linkup,port-rate", NULL},
    {"ports-bad devices", "node-ports-bad", "rdma.devices", NULL, NOEXP, PF_PASS, "", NULL},
    {"ports-bad, only the pod's HCAs", "node-ports-bad", "rdma.ports",
     "rm dev/infiniband/uverbs1 dev/infiniband/uverbs2", NOEXP, PF_WARN, "port-rate", NULL},
    {"ports-bad, healthy pair", "node-ports-bad", "rdma.ports",
     "rm dev/infiniband/uverbs1 dev/infiniband/uverbs2 dev/infiniband/uverbs3", NOEXP, PF_PASS, "",
     "1 of 1 port ACTIVE"},
    /* no /dev/infiniband */
    {"no-devinfiniband devices", "node-no-devinfiniband", "rdma.devices", NULL, NOEXP, PF_FAIL,
     "uverbs-missing", NULL},
    {"no-devinfiniband ports (all checked)", "node-no-devinfiniband", "rdma.ports", NULL, NOEXP,
     PF_PASS, "", "2 of 2 ports ACTIVE"},
    /* garbage */
    {"garbage devices (an empty uverbsN/ibdev: unknown)", "node-garbage", "rdma.devices", NULL,
     NOEXP, PF_PASS, "", "unknown uverbs-missing: mlx5_0: "},
    {"garbage ports (unreadable port files are unknown)", "node-garbage", "rdma.ports", NULL, NOEXP,
     PF_PASS, "", NULL},
    {"garbage gpudirect: unknown", "node-garbage", "rdma.gpudirect", NULL, NOEXP, PF_PASS, "",
     "unknown no-gpudirect: nvidia_peermem is not loaded, and whether dma-buf is possible: kernel "
     "release \"not-a-version\" does not parse"},
    {"roce gpudirect, no driver version: unknown", "node-roce", "rdma.gpudirect",
     "rm proc/driver/nvidia/version", NOEXP, PF_PASS, "",
     "unknown no-gpudirect: nvidia_peermem is not loaded, and whether dma-buf is possible: "
     "/proc/driver/nvidia/version is missing"},
    /* CPU node */
    {"cpu devices", "cpu-node", "rdma.devices", NULL, NOEXP, PF_SKIP, "",
     "no RDMA devices (TCP-only pod)"},
    /* HPE Slingshot: a cxi device and no verbs device is no TCP-only pod, it is not judged */
    {"cxi devices: unknown, not TCP-only", "cpu-node", "rdma.devices",
     "mkdir -p sys/class/cxi/cxi0", NOEXP, PF_SKIP, "",
     "/sys/class/cxi (HPE Slingshot) is there: the network is not judged here (unknown)"},
    {"cpu devices required", "cpu-node", "rdma.devices", NULL, PF_RDMA_REQUIRED, -1, -1, PF_FAIL,
     "no-rdma-devices", NULL},
    {"cpu devices hcas 8", "cpu-node", "rdma.devices", NULL, -1, 8, -1, PF_FAIL, "hca-count", NULL},
    {"cpu ports", "cpu-node", "rdma.ports", NULL, NOEXP, PF_SKIP, "", NULL},
    {"cpu gpudirect", "cpu-node", "rdma.gpudirect", NULL, NOEXP, PF_SKIP, "", NULL},
};

static void run_row(const struct row *r)
{
    struct th_env e;
    th_env_open(&e, r->fixture, TH_MATERIALIZE);
    if (r->mutate) th_sh("cd '%s' && %s", e.root, r->mutate);
    if (r->expect_rdma >= 0) e.cfg.expect_rdma = (enum pf_rdma_expect)r->expect_rdma;
    e.cfg.expect_hcas = r->expect_hcas;
    e.cfg.expect_min_port_rate_gbps = r->min_rate;
    struct pf_check *c = env_run(&e, fn_of(r->check), r->check);
    char codes[512];
    th_codes(codes, sizeof(codes), c);
    if (c->status != r->status || strcmp(codes, r->codes) != 0 ||
        (r->needle && !strstr(c->message, r->needle))) {
        for (size_t i = 0; i < c->nfindings; i++)
            print_message("  %s %s: %s\n", pf_status_name(c->findings[i].status),
                          c->findings[i].code, c->findings[i].message);
        fail_msg("%s: got %s [%s] \"%s\", want %s [%s] \"%s\"", r->name, pf_status_name(c->status),
                 codes, c->message, pf_status_name(r->status), r->codes,
                 r->needle ? r->needle : "");
    }
    th_env_close(&e);
}

static void test_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < PF_ARRAY_LEN(rows); i++)
        run_row(&rows[i]);
}

/* ---- findings and evidence in detail */

static struct pf_node *seq_at(struct pf_node *seq, size_t idx)
{
    assert_non_null(seq);
    struct pf_node *n = seq->first;
    for (size_t i = 0; n && i < idx; i++)
        n = n->next;
    assert_non_null(n);
    return n;
}

static void test_devices_evidence(void **state)
{
    (void)state;
    struct th_env e;
    th_env_open(&e, "node-8gpu-ndr", TH_MATERIALIZE);
    struct pf_check *c = env_run(&e, pf_check_rdma_devices, "rdma.devices");
    assert_int_equal(c->status, PF_PASS);
    assert_int_equal(pf_node_get(c->evidence, "count")->i, 8);
    assert_int_equal(pf_node_get(c->evidence, "usable")->i, 8);
    assert_true(pf_node_get(c->evidence, "rdmaCm")->b);
    struct pf_node *h0 = seq_at(pf_node_get(c->evidence, "hcas"), 0);
    assert_string_equal(pf_node_get_str(h0, "name"), "mlx5_0");
    assert_string_equal(pf_node_get_str(h0, "uverbs"), "uverbs0");
    assert_string_equal(pf_node_get_str(h0, "devNode"), "openable");
    assert_string_equal(pf_node_get_str(h0, "nodeType"), "1: CA");
    assert_string_equal(pf_node_get_str(h0, "fwVer"), "28.39.1002");
    assert_string_equal(pf_node_get_str(h0, "nodeGuid"), "a088:c203:00b1:2c40");
    assert_string_equal(pf_node_get_str(h0, "pciAddress"), "0000:1a:00.0");
    assert_int_equal(pf_node_get(h0, "numaNode")->i, 0);
    struct pf_node *h7 = seq_at(pf_node_get(c->evidence, "hcas"), 7);
    assert_string_equal(pf_node_get_str(h7, "name"), "mlx5_7");
    assert_string_equal(pf_node_get_str(h7, "pciAddress"), "0000:dc:00.0");
    assert_int_equal(pf_node_get(h7, "numaNode")->i, 1);
    th_env_close(&e);
}

static void test_devices_messages(void **state)
{
    (void)state;
    struct th_env e;
    th_env_open(&e, "node-8gpu-ndr", TH_MATERIALIZE);
    th_sh("cd '%s' && rm dev/infiniband/uverbs5 dev/infiniband/uverbs6", e.root);
    struct pf_check *c = env_run(&e, pf_check_rdma_devices, "rdma.devices");
    assert_finding(c, "uverbs-missing", PF_WARN,
                   "2 of 8 HCAs have no uverbs node in the pod: /dev/infiniband/uverbs5 (mlx5_5), "
                   "/dev/infiniband/uverbs6 (mlx5_6)");
    th_env_close(&e);

    th_env_open(&e, "node-no-devinfiniband", TH_MATERIALIZE);
    c = env_run(&e, pf_check_rdma_devices, "rdma.devices");
    assert_finding(c, "uverbs-missing", PF_FAIL, "/dev/infiniband is not in the pod");
    assert_finding(c, "uverbs-missing", PF_FAIL, "(mlx5_0, mlx5_1)");
    /* the pod was given none of the node's HCAs: rdma_cm is not asked for them */
    assert_false(pf_check_has_finding(c, "rdma-cm-missing"));
    th_env_close(&e);

    /* the pod was given mlx5_0 and mlx5_1 of 8: rdma_cm is asked for those and names one */
    th_env_open(&e, "node-8gpu-ndr", TH_MATERIALIZE);
    th_sh("cd '%s' && rm dev/infiniband/rdma_cm dev/infiniband/uverbs[2-7]", e.root);
    c = env_run(&e, pf_check_rdma_devices, "rdma.devices");
    assert_finding(c, "rdma-cm-missing", PF_WARN, "which was given mlx5_0 (mlx5");
    th_env_close(&e);

    /* uverbs0/ibdev is empty: mlx5_0, which no readable ibdev names, may be uverbs0's, so
     * whether its uverbs node is missing is unknown */
    th_env_open(&e, "node-garbage", TH_MATERIALIZE);
    c = env_run(&e, pf_check_rdma_devices, "rdma.devices");
    assert_false(pf_check_has_finding(c, "uverbs-missing"));
    assert_true(has_unknown(c, "uverbs-missing",
                            "mlx5_0: no /sys/class/infiniband_verbs/uverbsN/"
                            "ibdev names mlx5_0; "));
    assert_true(has_unknown(c, "uverbs-missing", "uverbs0/ibdev is empty or unreadable"));
    th_env_close(&e);

    /* the same with every ibdev readable: no uverbsN names mlx5_0 is evidence */
    th_env_open(&e, "node-garbage", TH_MATERIALIZE);
    th_sh("cd '%s' && echo mlx5_9 > sys/class/infiniband_verbs/uverbs0/ibdev", e.root);
    c = env_run(&e, pf_check_rdma_devices, "rdma.devices");
    assert_finding(c, "uverbs-missing", PF_WARN,
                   "no /sys/class/infiniband_verbs/uverbsN/ibdev "
                   "names mlx5_0 (is ib_uverbs loaded");
    th_env_close(&e);
}

/* A char major with no driver (not in /proc/devices' character section), for ENXIO. */
static int free_char_major(void)
{
    FILE *f = fopen("/proc/devices", "r");
    if (!f) return -1;
    bool used[512] = {false};
    char line[256];
    bool chr = false;
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, "Character devices:", 18) == 0)
            chr = true;
        else if (strncmp(line, "Block devices:", 14) == 0)
            chr = false;
        else if (chr) {
            int m = atoi(line);
            if (m > 0 && m < 512) used[m] = true;
        }
    }
    fclose(f);
    for (int m = 234; m <= 254; m++)
        if (!used[m]) return m;
    return -1;
}

static void test_uverbs_no_driver(void **state)
{
    (void)state;
    if (geteuid() != 0) skip();
    int major = free_char_major();
    if (major < 0) skip();
    struct th_env e;
    th_env_open(&e, "node-8gpu-ndr", TH_MATERIALIZE);
    char path[1100];
    snprintf(path, sizeof(path), "%s/dev/infiniband/uverbs3", e.root);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(mknod(path, S_IFCHR | 0666, makedev((unsigned)major, 0)), 0);
    struct pf_check *c = env_run(&e, pf_check_rdma_devices, "rdma.devices");
    char codes[128];
    th_codes(codes, sizeof(codes), c);
    assert_string_equal(codes, "uverbs-unopenable");
    assert_int_equal(c->status, PF_FAIL);
    assert_finding(c, "uverbs-unopenable", PF_FAIL, "mlx5_3: open(/dev/infiniband/uverbs3");
    assert_finding(c, "uverbs-unopenable", PF_FAIL, "ENXIO");
    assert_finding(c, "uverbs-unopenable", PF_FAIL, "no driver behind it");
    assert_int_equal(pf_node_get(c->evidence, "usable")->i, 7);
    assert_string_equal(pf_node_get_str(seq_at(pf_node_get(c->evidence, "hcas"), 3), "devNode"),
                        "unopenable");
    th_env_close(&e);
}

static void test_uverbs_not_a_device(void **state)
{
    (void)state;
    struct th_env e;
    th_env_open(&e, "node-8gpu-ndr", TH_MATERIALIZE);
    th_sh("cd '%s' && rm dev/infiniband/uverbs2 && mkdir dev/infiniband/uverbs2", e.root);
    struct pf_check *c = env_run(&e, pf_check_rdma_devices, "rdma.devices");
    assert_finding(c, "uverbs-unopenable", PF_FAIL, "uverbs2 is not a character device");
    th_env_close(&e);
}

static void test_ports_messages(void **state)
{
    (void)state;
    struct th_env e;
    th_env_open(&e, "node-ports-bad", TH_MATERIALIZE);
    struct pf_check *c = env_run(&e, pf_check_rdma_ports, "rdma.ports");
    assert_finding(c, "port-down", PF_FAIL, "mlx5_1 port 1: state is DOWN (\"1: DOWN\")");
    assert_finding(c, "port-down", PF_FAIL, "mlx5_2 port 1: state is DOWN");
    assert_finding(c, "port-not-linkup", PF_FAIL, "mlx5_1 port 1: physical state is Disabled");
    assert_finding(c, "port-not-linkup", PF_FAIL, "mlx5_2 port 1: physical state is Polling");
    assert_finding(c, "port-rate", PF_WARN,
                   "mlx5_3 port 1 runs at 200 Gb/sec (4X HDR), slower than its peers (mlx5_0 "
                   "port 1: 400 Gb/sec (4X NDR))");
    assert_null(th_finding(c, "port-rate", "mlx5_1")); /* down ports are not rate-compared */
    assert_null(th_finding(c, "port-down", "mlx5_0"));
    assert_null(th_finding(c, "port-down", "mlx5_3"));
    assert_int_equal(pf_node_get(c->evidence, "active")->i, 2);
    struct pf_node *p1 = seq_at(pf_node_get(c->evidence, "ports"), 1);
    assert_string_equal(pf_node_get_str(p1, "hca"), "mlx5_1");
    assert_string_equal(pf_node_get_str(p1, "state"), "DOWN");
    assert_string_equal(pf_node_get_str(p1, "physState"), "Disabled");
    th_env_close(&e);

    /* with an expectation the slow port fails, and no peer warning is added */
    th_env_open(&e, "node-ports-bad", TH_MATERIALIZE);
    e.cfg.expect_min_port_rate_gbps = 400;
    c = env_run(&e, pf_check_rdma_ports, "rdma.ports");
    assert_finding(c, "port-rate", PF_FAIL,
                   "mlx5_3 port 1 runs at 200 Gb/sec (4X HDR), expect.minPortRateGbps is 400");
    assert_null(th_finding(c, "port-rate", "slower than its peers"));
    th_env_close(&e);
}

static void test_ports_evidence(void **state)
{
    (void)state;
    struct th_env e;
    th_env_open(&e, "node-8gpu-ndr", TH_MATERIALIZE);
    th_sh("cd '%s' && echo '2.5 Gb/sec (1X SDR)' > sys/class/infiniband/mlx5_6/ports/1/rate",
          e.root);
    struct pf_check *c = env_run(&e, pf_check_rdma_ports, "rdma.ports");
    /* without an expectation the 2.5 port is a peer warning */
    assert_finding(c, "port-rate", PF_WARN, "mlx5_6 port 1 runs at 2.5 Gb/sec (1X SDR)");
    struct pf_node *p0 = seq_at(pf_node_get(c->evidence, "ports"), 0);
    assert_string_equal(pf_node_get_str(p0, "hca"), "mlx5_0");
    assert_int_equal(pf_node_get(p0, "port")->i, 1);
    assert_string_equal(pf_node_get_str(p0, "state"), "ACTIVE");
    assert_string_equal(pf_node_get_str(p0, "physState"), "LinkUp");
    assert_string_equal(pf_node_get_str(p0, "linkLayer"), "InfiniBand");
    assert_true(pf_node_get(p0, "rateGbps")->d == 400.0);
    assert_string_equal(pf_node_get_str(p0, "lid"), "0x18");
    assert_string_equal(pf_node_get_str(p0, "smLid"), "0x1");
    struct pf_node *p6 = seq_at(pf_node_get(c->evidence, "ports"), 6);
    assert_true(pf_node_get(p6, "rateGbps")->d == 2.5);
    th_env_close(&e);
}

static void test_roce_evidence(void **state)
{
    (void)state;
    struct th_env e;
    th_env_open(&e, "node-roce", TH_MATERIALIZE);
    struct pf_check *c = env_run(&e, pf_check_rdma_ports, "rdma.ports");
    assert_int_equal(c->status, PF_PASS);
    struct pf_node *p1 = seq_at(pf_node_get(c->evidence, "ports"), 1);
    assert_string_equal(pf_node_get_str(p1, "linkLayer"), "Ethernet");
    struct pf_node *r = pf_node_get(p1, "roce");
    assert_non_null(r);
    /* the IPv4-mapped RoCE v2 GID is preferred over the link-local one at index 1 */
    assert_int_equal(pf_node_get(r, "gidIndex")->i, 3);
    assert_string_equal(pf_node_get_str(r, "gidType"), "RoCE v2");
    assert_string_equal(pf_node_get_str(r, "netdev"), "net2");
    assert_string_equal(pf_node_get_str(r, "gid"), "0000:0000:0000:0000:0000:ffff:c0a8:020b");
    assert_true(pf_node_get(r, "ipv4")->b);
    assert_int_equal(pf_node_get(r, "v2Gids")->i, 2);
    th_env_close(&e);

    /* without the IPv4 GIDs the link-local v2 GID is used */
    th_env_open(&e, "node-roce", TH_MATERIALIZE);
    th_sh("cd '%s' && rm sys/class/infiniband/mlx5_0/ports/1/gid_attrs/types/3", e.root);
    c = env_run(&e, pf_check_rdma_ports, "rdma.ports");
    assert_int_equal(c->status, PF_PASS);
    r = pf_node_get(seq_at(pf_node_get(c->evidence, "ports"), 0), "roce");
    assert_int_equal(pf_node_get(r, "gidIndex")->i, 1);
    assert_false(pf_node_get(r, "ipv4")->b);
    th_env_close(&e);

    /* no entry with a netdev: the message says why */
    th_env_open(&e, "node-roce", TH_MATERIALIZE);
    th_sh("cd '%s' && for f in sys/class/infiniband/mlx5_1/ports/1/gid_attrs/ndevs/*; do : > $f; "
          "done",
          e.root);
    c = env_run(&e, pf_check_rdma_ports, "rdma.ports");
    assert_finding(c, "no-roce-gid", PF_FAIL,
                   "mlx5_1 port 1 (Ethernet) has no usable RoCE v2 GID: 2 RoCE v2 entries among 6 "
                   "GID entries (0 all-zero, 2 without a netdev)");
    assert_null(th_finding(c, "no-roce-gid", "mlx5_0"));
    th_env_close(&e);
}

/* Port files that are empty, unreadable or not in core/sysfs.c's form are no evidence: each is
 * named under evidence.unknown, none fails the port, and neither does a GID type that is not in
 * the kernel's form (the unreadable entry may be the RoCE v2 one). */
static void test_garbage_names_files(void **state)
{
    (void)state;
    struct th_env e;
    th_env_open(&e, "node-garbage", TH_MATERIALIZE);
    struct pf_check *c = env_run(&e, pf_check_rdma_ports, "rdma.ports");
    assert_true(has_unknown(
        c, "port-down",
        "mlx5_0 port 1: state file /sys/class/infiniband/mlx5_0/ports/1/state is empty"));
    assert_true(has_unknown(c, "port-down", "link_layer file"));
    assert_true(has_unknown(c, "port-not-linkup", "phys_state file holds \"garbage\""));
    assert_true(has_unknown(c, "port-rate", "rate file holds \"fast\""));
    assert_false(pf_check_has_finding(c, "port-down"));
    assert_false(pf_check_has_finding(c, "port-not-linkup"));
    assert_false(pf_check_has_finding(c, "port-rate"));
    assert_true(has_unknown(c, "no-roce-gid", "gid_attrs/types/0 holds \"RoCE v9\""));
    assert_false(pf_check_has_finding(c, "no-roce-gid"));
    th_env_close(&e);

    /* an unreadable state file (a directory in its place) */
    th_env_open(&e, "node-8gpu-ndr", TH_MATERIALIZE);
    th_sh("cd '%s' && rm sys/class/infiniband/mlx5_4/ports/1/state && "
          "mkdir sys/class/infiniband/mlx5_4/ports/1/state",
          e.root);
    c = env_run(&e, pf_check_rdma_ports, "rdma.ports");
    assert_true(has_unknown(c, "port-down", "mlx5_4 port 1: state file unreadable"));
    assert_false(pf_check_has_finding(c, "port-down"));
    th_env_close(&e);
}

/* ---- memlock: the process's own limit and capability, changed for the test and restored */

static bool cap_effective(bool on)
{
    struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct d[2];
    if (syscall(SYS_capget, &hdr, d) != 0) return false;
    if (!(d[0].permitted & (1u << CAP_IPC_LOCK))) return !on;
    if (on)
        d[0].effective |= 1u << CAP_IPC_LOCK;
    else
        d[0].effective &= ~(1u << CAP_IPC_LOCK);
    return syscall(SYS_capset, &hdr, d) == 0;
}

struct memlock_row {
    const char *name;
    const char *fixture;
    rlim_t soft;
    bool cap;
    enum pf_status status;
    const char *codes;
    const char *needle;
};

static void test_memlock(void **state)
{
    (void)state;
    struct rlimit saved;
    assert_int_equal(getrlimit(RLIMIT_MEMLOCK, &saved), 0);
    int ran = 0;
    const struct memlock_row mrows[] = {
        {"unlimited", "node-8gpu-ndr", RLIM_INFINITY, false, PF_PASS, "", "unlimited"},
        {"2 GiB", "node-8gpu-ndr", 2ULL << 30, false, PF_PASS, "", "2 GiB"},
        {"64 KiB with RDMA", "node-8gpu-ndr", 64 << 10, false, PF_FAIL, "memlock-low",
         "RLIMIT_MEMLOCK is 64 KiB"},
        /* no RDMA device: nothing registers memory, no finding (ipcLock: false pods) */
        {"64 KiB without RDMA", "cpu-node", 64 << 10, false, PF_PASS, "",
         "no RDMA device is in use here"},
        {"64 KiB with CAP_IPC_LOCK", "node-8gpu-ndr", 64 << 10, true, PF_PASS, "",
         "holds CAP_IPC_LOCK"},
    };
    for (size_t i = 0; i < PF_ARRAY_LEN(mrows); i++) {
        const struct memlock_row *r = &mrows[i];
        /* a soft limit above the hard one needs CAP_SYS_RESOURCE to raise the hard limit */
        struct rlimit rl = {.rlim_cur = r->soft, .rlim_max = saved.rlim_max};
        if (saved.rlim_max != RLIM_INFINITY &&
            (r->soft == RLIM_INFINITY || r->soft > saved.rlim_max))
            rl.rlim_max = r->soft;
        if (setrlimit(RLIMIT_MEMLOCK, &rl) != 0) {
            print_message("  skip %s: setrlimit(RLIMIT_MEMLOCK): %s\n", r->name, strerror(errno));
            continue;
        }
        if (!cap_effective(r->cap)) {
            setrlimit(RLIMIT_MEMLOCK, &saved);
            print_message("  skip %s: cannot %s CAP_IPC_LOCK\n", r->name,
                          r->cap ? "raise" : "drop");
            continue;
        }
        ran++;
        struct th_env e;
        th_env_open(&e, r->fixture, TH_MATERIALIZE);
        struct pf_check *c = env_run(&e, pf_check_rdma_memlock, "rdma.memlock");
        cap_effective(true);
        setrlimit(RLIMIT_MEMLOCK, &saved);
        char codes[128];
        th_codes(codes, sizeof(codes), c);
        if (c->status != r->status || strcmp(codes, r->codes) != 0 ||
            !strstr(c->message, r->needle))
            fail_msg("%s: got %s [%s] \"%s\"", r->name, pf_status_name(c->status), codes,
                     c->message);
        assert_int_equal(pf_node_get(c->evidence, "capIpcLock")->b, r->cap);
        if (r->soft == RLIM_INFINITY)
            assert_string_equal(pf_node_get_str(c->evidence, "soft"), "unlimited");
        else
            assert_int_equal(pf_node_get(c->evidence, "soft")->i, (long long)r->soft);
        th_env_close(&e);
    }
    assert_int_equal(setrlimit(RLIMIT_MEMLOCK, &saved), 0);
    assert_true(ran >= 2); /* the low-limit rows run anywhere */
}

static void test_gpudirect_evidence(void **state)
{
    (void)state;
    struct th_env e;
    th_env_open(&e, "node-roce", TH_MATERIALIZE);
    struct pf_check *c = env_run(&e, pf_check_rdma_gpudirect, "rdma.gpudirect");
    assert_true(pf_node_get(c->evidence, "dmabuf")->b);
    assert_true(pf_node_get(c->evidence, "openKernelModule")->b);
    assert_string_equal(pf_node_get_str(c->evidence, "kernel"), "6.5.0-1024-azure");
    assert_null(pf_node_get(c->evidence, "peermem"));
    th_env_close(&e);

    th_env_open(&e, "node-8gpu-ndr", TH_MATERIALIZE);
    c = env_run(&e, pf_check_rdma_gpudirect, "rdma.gpudirect");
    assert_string_equal(pf_node_get_str(c->evidence, "peermem"),
                        "/sys/module/nvidia_peermem/version");
    assert_string_equal(pf_node_get_str(c->evidence, "peermemVersion"), "1.1");
    assert_false(pf_node_get(c->evidence, "dmabuf")->b); /* proprietary module */
    th_env_close(&e);

    th_env_open(&e, "node-8gpu-ndr", TH_MATERIALIZE);
    th_sh("cd '%s' && rm -rf sys/module/nvidia_peermem", e.root);
    c = env_run(&e, pf_check_rdma_gpudirect, "rdma.gpudirect");
    assert_finding(c, "no-gpudirect", PF_WARN, "the NVIDIA kernel module is not the open one");
    th_env_close(&e);
}

/* rdma.counters with counters that read "N/A (no PMA)" (the kernel's text for a device
 * without a Performance Management Agent, drivers/infiniband/core/sysfs.c): counted and shown
 * as not available, never dropped. node-efa: every PMA counter is N/A (EFA; tests/fixtures/
 * gen-efa.sh). node-8gpu-ndr with counters written at test time: one N/A among numbers, and
 * a rise on a numeric one still found. */
static void test_counters_not_available(void **state)
{
    (void)state;
    struct th_env e;
    th_env_open(&e, "node-efa", TH_MATERIALIZE);
    th_env_start(&e);
    pf_checks_inventory(&e.ctx);
    assert_int_equal(e.ctx.hcas.n, 2);
    struct pf_counters *before = pf_counters_snapshot(&e.ctx);
    assert_non_null(before);
    struct pf_check *c = pf_verdict_add_check(&e.v, "rdma.counters");
    pf_check_rdma_counters(c, &e.ctx, before);
    pf_verdict_finalize(&e.v, NULL, NULL);
    c = pf_verdict_find_check(&e.v, "rdma.counters");
    assert_int_equal(c->status, PF_SKIP);
    assert_non_null(strstr(c->message, "N/A (no PMA)"));
    assert_int_equal(pf_node_get(c->evidence, "notAvailableCount")->i, 14);
    pf_counters_free(before);
    th_env_close(&e);

    th_env_open(&e, "node-8gpu-ndr", TH_MATERIALIZE);
    const char *port = "sys/class/infiniband/mlx5_0/ports/1/counters";
    th_sh("mkdir -p %s/%s && echo 'N/A (no PMA)' >%s/%s/link_downed && echo 3 >%s/%s/symbol_error",
          e.root, port, e.root, port, e.root, port);
    th_env_start(&e);
    pf_checks_inventory(&e.ctx);
    before = pf_counters_snapshot(&e.ctx);
    th_sh("echo 9 >%s/%s/symbol_error", e.root, port);
    c = pf_verdict_add_check(&e.v, "rdma.counters");
    pf_check_rdma_counters(c, &e.ctx, before);
    pf_verdict_finalize(&e.v, NULL, NULL);
    c = pf_verdict_find_check(&e.v, "rdma.counters");
    assert_int_equal(c->status, PF_WARN);
    assert_int_equal(pf_node_get(c->evidence, "notAvailableCount")->i, 1);
    struct pf_node *na = pf_node_get(pf_node_get(c->evidence, "notAvailable"), "mlx5_0/1");
    assert_non_null(na);
    assert_string_equal(na->first->str, "link_downed");
    assert_non_null(th_finding(c, "port-errors", NULL));
    pf_counters_free(before);
    th_env_close(&e);
}

/* ---- AWS EFA (tests/fixtures/node-efa, from the kernel's efa driver; plugin paths from
 * the .install files of aws-ofi-nccl's contrib/debian-template:
 * /opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so, /opt/amazon/aws-ofi-nccl/lib/libnccl-net-aws-ofi.so;
 * FI_PROVIDER=efa and FI_EFA_USE_DEVICE_RDMA=1 as EKS training pod specs set them) */

/* Runs rdma.efa with "K=V" settings in the environment. */
static struct pf_check *efa_run(struct th_env *e, const char *const *vars)
{
    th_env_start(e);
    for (size_t i = 0; vars && vars[i]; i++) {
        char k[128];
        const char *eq = strchr(vars[i], '=');
        snprintf(k, sizeof(k), "%.*s", (int)(eq - vars[i]), vars[i]);
        pf_env_set(&e->ctx.env, k, eq + 1, "environment");
    }
    return env_run(e, pf_check_rdma_efa, "rdma.efa");
}

static void test_efa_devices_and_ports(void **state)
{
    (void)state;
    struct th_env e;
    /* EFA needs no rdma_cm or umad: only the uverbs nodes the EFA device plugin mounts */
    th_env_open(&e, "node-efa", TH_MATERIALIZE);
    struct pf_check *c = env_run(&e, pf_check_rdma_devices, "rdma.devices");
    assert_false(pf_check_has_finding(c, "rdma-cm-missing"));
    assert_string_equal(pf_node_get_str(c->evidence, "rdmaCmNote"), "not needed by EFA");
    th_env_close(&e);
    /* ... but a Mellanox node still needs it */
    th_env_open(&e, "node-8gpu-ndr", TH_MATERIALIZE);
    th_sh("rm -f %s/dev/infiniband/rdma_cm", e.root);
    c = env_run(&e, pf_check_rdma_devices, "rdma.devices");
    assert_true(pf_check_has_finding(c, "rdma-cm-missing"));
    th_env_close(&e);
    /* EFA ports report link layer Unknown: not a down port */
    th_env_open(&e, "node-efa", TH_MATERIALIZE);
    c = env_run(&e, pf_check_rdma_ports, "rdma.ports");
    assert_int_equal(c->nfindings, 0);
    assert_int_equal(c->status, PF_PASS);
    th_env_close(&e);
    /* the same on a p4d whose EFA devices rdma-core renamed rdmapXsY: no rdma_cm demanded, the
     * PCIe link named, the advice OFI, rdma.efa runs and passes with the plugin in place */
    th_env_open(&e, "node-p4d-efa", TH_MATERIALIZE);
    c = env_run(&e, pf_check_rdma_devices, "rdma.devices");
    assert_int_equal(c->nfindings, 0);
    assert_string_equal(pf_node_get_str(c->evidence, "rdmaCmNote"), "not needed by EFA");
    const struct pf_node *h0 = pf_node_get(c->evidence, "hcas")->first;
    assert_string_equal(pf_node_get_str(h0, "provider"), "efa");
    assert_string_equal(pf_node_get_str(h0, "providerFrom"), "driver efa");
    assert_string_equal(pf_node_get_str(h0, "pcieLink"), "x16 at 8.0 GT/s");
    char why[160];
    assert_string_equal(pf_checks_net_advice(why, sizeof(why), &e.ctx), "OFI");
    th_env_close(&e);
    th_env_open(&e, "node-p4d-efa", TH_MATERIALIZE);
    th_sh("cd %s && mkdir -p opt/amazon/ofi-nccl/lib && : > "
          "opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so",
          e.root);
    static const char *const vars[] = {
        "NCCL_NET_PLUGIN=ofi", "LD_LIBRARY_PATH=/opt/amazon/ofi-nccl/lib", "NCCL_NET=OFI", NULL};
    c = efa_run(&e, vars);
    assert_int_equal(c->status, PF_PASS);
    assert_non_null(strstr(c->message, "4 EFA devices"));
    th_env_close(&e);
}

struct efa_case {
    const char *setup; /* shell run in the root, or NULL */
    const char *vars[4];
    const char *codes; /* "code:status,..." */
    const char *text;  /* in the first finding's message, or in the check's message */
};

static void test_efa_plugin_provider_net(void **state)
{
    (void)state;
    static const struct efa_case cases[] = {
        /* no libnccl.so.2 in the tree: the search cannot be followed to its end (its
         * DT_RUNPATH), so the missing plugin is unknown, not a failure (test_efa.c has the
         * complete searches) */
        {NULL, {NULL}, "", "2 EFA devices; plugin not found"},
        {"mkdir -p opt/amazon/ofi-nccl/lib && : > opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so",
         {"NCCL_NET_PLUGIN=ofi", NULL},
         "",
         "2 EFA devices; plugin not found"},
        {"mkdir -p opt/amazon/ofi-nccl/lib && : > opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so",
         {"NCCL_NET_PLUGIN=ofi", "LD_LIBRARY_PATH=/opt/amazon/ofi-nccl/lib:/usr/local/lib",
          "FI_PROVIDER=efa", NULL},
         "",
         "plugin /opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so; FI_PROVIDER efa"},
        {"mkdir -p usr/lib/x86_64-linux-gnu && : > usr/lib/x86_64-linux-gnu/libnccl-net.so",
         {"FI_EFA_USE_DEVICE_RDMA=1", NULL},
         "",
         "plugin /usr/lib/x86_64-linux-gnu/libnccl-net.so; FI_PROVIDER unset (efa)"},
        {"mkdir -p etc/ld.so.conf.d opt/amazon/aws-ofi-nccl/lib && echo "
         "/opt/amazon/aws-ofi-nccl/lib > etc/ld.so.conf.d/aws-ofi-nccl.conf && : > "
         "opt/amazon/aws-ofi-nccl/lib/libnccl-net-aws-ofi.so",
         {"NCCL_NET_PLUGIN=aws-ofi", NULL},
         "",
         /* the loader reads only what ldconfig cached, and the tree has no cache */
         "plugin not found"},
        {"mkdir -p usr/lib && : > usr/lib/libnccl-net.so",
         {"NCCL_NET_PLUGIN=none", NULL},
         "efa-plugin-missing:fail",
         "NCCL_NET_PLUGIN=none turns off net plugins"},
        {"mkdir -p usr/lib && : > usr/lib/libnccl-net.so",
         {"FI_PROVIDER=efa,tcp", "NCCL_NET=IB", NULL},
         "fi-provider-not-efa:fail,efa-net-mismatch:fail",
         "FI_PROVIDER=efa,tcp: aws-ofi-nccl uses the EFA provider only when"},
        {"mkdir -p usr/lib && : > usr/lib/libnccl-net.so",
         {"NCCL_NET=aws libfabric", NULL},
         "",
         "2 EFA devices"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct th_env e;
        th_env_open(&e, "node-efa", TH_MATERIALIZE);
        if (cases[i].setup) th_sh("cd %s && %s", e.root, cases[i].setup);
        struct pf_check *c = efa_run(&e, cases[i].vars);
        char got[512] = "";
        for (size_t k = 0; k < c->nfindings; k++) {
            size_t l = strlen(got);
            snprintf(got + l, sizeof(got) - l, "%s%s:%s", k ? "," : "", c->findings[k].code,
                     pf_status_name(c->findings[k].status));
        }
        if (strcmp(got, cases[i].codes) != 0)
            fail_msg("case %zu: got '%s', want '%s'", i, got, cases[i].codes);
        const char *text = c->nfindings ? c->findings[0].message : c->message;
        if (!text || !strstr(text, cases[i].text))
            fail_msg("case %zu: '%s' does not hold '%s'", i, text ? text : "", cases[i].text);
        th_env_close(&e);
    }
    /* no EFA device and no OFI expectation: skipped */
    struct th_env e;
    th_env_open(&e, "node-8gpu-ndr", TH_MATERIALIZE);
    assert_int_equal(efa_run(&e, NULL)->status, PF_SKIP);
    th_env_close(&e);
    /* expect.transport OFI without EFA devices fails */
    th_env_open(&e, "node-8gpu-ndr", TH_MATERIALIZE);
    snprintf(e.cfg.expect_transport, sizeof(e.cfg.expect_transport), "OFI");
    assert_true(pf_check_has_finding(efa_run(&e, NULL), "efa-plugin-missing"));
    th_env_close(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),
        cmocka_unit_test(test_devices_evidence),
        cmocka_unit_test(test_devices_messages),
        cmocka_unit_test(test_uverbs_no_driver),
        cmocka_unit_test(test_uverbs_not_a_device),
        cmocka_unit_test(test_ports_messages),
        cmocka_unit_test(test_ports_evidence),
        cmocka_unit_test(test_roce_evidence),
        cmocka_unit_test(test_garbage_names_files),
        cmocka_unit_test(test_memlock),
        cmocka_unit_test(test_gpudirect_evidence),
        cmocka_unit_test(test_counters_not_available),
        cmocka_unit_test(test_efa_devices_and_ports),
        cmocka_unit_test(test_efa_plugin_provider_net),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
