/* nccllog: what launchers and log collectors put around NCCL's lines, one row a decoration:
 * the line as printed, where NCCL's own text starts after stripping, the pod (kubectl
 * --prefix, docker compose, Ray ip) and rank tag the decoration gave, and the host NCCL's
 * `host:pid:tid` prefix names once the line is read. Rows marked REAL are copied from public
 * logs (tests/fixtures/nccl-logs/real/SOURCES.md names each source); rows marked MADE-UP
 * follow the launcher's documented format where no public NCCL log with that decoration was
 * found, and say so. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "../../../pkg/nccllog/internal.h"

struct row {
    const char *origin; /* REAL: source; MADE-UP: why */
    const char *line;
    const char *rest; /* what nl_decor_strip returns starts with this */
    const char *pod;
    const char *tag;
    const char *host; /* NCCL's host of the process the line is given to */
};

static const struct row rows[] = {
    {"REAL torchrun [rankN]: (pytorch/torchtitan#1570)",
     "[rank0]:costa-671b-5-worker-1:382:582 [0] NCCL INFO Channel 01/0 : 0[0] -> 8[0] [receive] "
     "via NET/Libfabric/0/GDRDMA",
     "costa-671b-5-worker-1:382:582 [0] NCCL INFO", "", "0", "costa-671b-5-worker-1"},
    {"REAL SkyPilot Ray prefix and [host:slot]: (skypilot-org/skypilot#4448)",
     "(worker1, rank=1, pid=4888, ip=10.60.0.4) [nccl-e9ef-7d4f-1:2]:nccl-e9ef-7d4f-1:10478:10517 "
     "[2] NCCL INFO Channel 04/0 : 6[2] -> 7[3] via P2P/CUMEM/read",
     "nccl-e9ef-7d4f-1:10478:10517 [2] NCCL INFO", "10.60.0.4", "2", "nccl-e9ef-7d4f-1"},
    {"REAL Open MPI --tag-output from an MPIJob launcher pod, indented (aws/aws-k8s-tester#464)",
     "        [1,0]<stdout>:multi-node-nccl-test-worker-0:22:28 [0] NCCL INFO Using network Socket",
     "multi-node-nccl-test-worker-0:22:28 [0] NCCL INFO", "", "0", "multi-node-nccl-test-worker-0"},
    {"REAL Open MPI --tag-output, two-digit rank (aws/aws-k8s-tester#454)",
     "[1,14]<stdout>:bert-mpi-training-worker-1:27:571 [6] NCCL INFO NET/OFI Internode latency "
     "set at 150.0 us",
     "bert-mpi-training-worker-1:27:571 [6] NCCL INFO", "", "14", "bert-mpi-training-worker-1"},
    {"REAL Ray Train worker prefix on KubeRay (saltysoup/oasis-temp ray-examples/README.md)",
     "(RayTrainWorker pid=3704, ip=10.52.3.7) ray-cluster-ccc-gpu-group-worker-684r7:3704:4784 [5] "
     "NCCL INFO NET/gIB : GPU Direct RDMA Enabled for HCA 0 'mlx5_0'",
     "ray-cluster-ccc-gpu-group-worker-684r7:3704:4784 [5] NCCL INFO", "10.52.3.7", "",
     "ray-cluster-ccc-gpu-group-worker-684r7"},
    {"REAL Ray pid only (ray-project/ray#16979)",
     "(pid=21065) dev-duanjiangfei-ap0:21065:21065 [1] NCCL INFO Bootstrap : Using "
     "[0]eth0:10.148.18.24<0>",
     "dev-duanjiangfei-ap0:21065:21065 [1] NCCL INFO", "", "", "dev-duanjiangfei-ap0"},
    {"REAL MPICH -l (NVIDIA/nccl#302)",
     "[155] crow-ib-new-nccl-256-info-19:5330:5330 [3] NCCL INFO Bootstrap : Using "
     "[0]eth0:10.100.62.64<0>",
     "crow-ib-new-nccl-256-info-19:5330:5330 [3] NCCL INFO", "", "155",
     "crow-ib-new-nccl-256-info-19"},
    {"REAL pdsh host: (NVIDIA/nccl#1029)",
     "rdma-gpu-train-worker-0: rdma-gpu-train-worker-0:19487:21056 [3] NCCL INFO Using network "
     "IBext",
     "rdma-gpu-train-worker-0:19487:21056 [3] NCCL INFO", "", "", "rdma-gpu-train-worker-0"},
    {"REAL CloudWatch columns with an ISO timestamp (aws/aws-ofi-nccl#889)",
     "  | 2025-05-16T16:39:51.208-07:00 | ip-10-36-29-253:79:79 [0] NCCL INFO NCCL_SOCKET_IFNAME "
     "set by environment to eth0",
     "ip-10-36-29-253:79:79 [0] NCCL INFO", "", "", "ip-10-36-29-253"},
    {"REAL quoted when pasted (NVIDIA/nccl#1609)",
     "> tj5-sc-ai-h800r-dev01:532:1764 [1] NCCL INFO Using non-device net plugin version 0",
     "tj5-sc-ai-h800r-dev01:532:1764 [1] NCCL INFO", "", "", "tj5-sc-ai-h800r-dev01"},
    {"REAL citation marks of a generated page around a Ray line (google/dranet kuberay.md): not a "
     "decoration, left in place; NCCL's prefix is still found inside",
     "[cite_start][... (Worker pid=3590, ip=10.48.4.17) [0m "
     "a4-ray-cluster-gpu-group-worker-pbkpw:3590:3753 [2] NCCL INFO NET/gIB : Initializing gIB "
     "v1.0.6 [cite: 1887]",
     "[cite_start][... (Worker", "", "", "a4-ray-cluster-gpu-group-worker-pbkpw"},
    {"MADE-UP torch.distributed.elastic tee [defaultN]: (no public log with NCCL lines under "
     "torchrun --tee found; the prefix is real on other lines of public logs)",
     "[default3]:tr-0:11:11 [3] NCCL INFO NCCL version 2.21.5+cuda12.4", "tr-0:11:11 [3] NCCL INFO",
     "", "3", "tr-0"},
    {"MADE-UP kubectl logs --prefix (no public NCCL log kept with --prefix found)",
     "[pod/llm-worker-1/trainer] llm-worker-1:43:43 [0] NCCL INFO Using network IB",
     "llm-worker-1:43:43 [0] NCCL INFO", "llm-worker-1", "", "llm-worker-1"},
    {"MADE-UP Slurm srun -l (no public NCCL log with srun's task labels found)",
     "12: node-7:100:100 [4] NCCL INFO Using network IB", "node-7:100:100 [4] NCCL INFO", "", "12",
     "node-7"},
    {"MADE-UP docker compose service column (no public NCCL log from compose found)",
     "worker_1  | tr-2:31:60 [0] NCCL INFO Channel 00/0 : 4[0] -> 5[0] [send] via NET/IBext_v8/1",
     "tr-2:31:60 [0] NCCL INFO", "worker_1", "", "tr-2"},
    {"MADE-UP syslog timestamp, host and program (no public NCCL log through syslog found)",
     "Mar  4 10:11:12 gpu7 train[812]: tr-2:31:60 [0] NCCL INFO Using network IB",
     "tr-2:31:60 [0] NCCL INFO", "", "", "tr-2"},
    {"MADE-UP ANSI colour around torchrun's prefix (colours come from log collectors' terminals)",
     "\x1b[32m[default0]:\x1b[0mtr-0:11:11 [0] NCCL INFO Using network IB",
     "tr-0:11:11 [0] NCCL INFO", "", "0", "tr-0"},
};

static void test_rows(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        const struct row *r = &rows[i];
        char buf[PF_NCCLLOG_LINE_MAX];
        snprintf(buf, sizeof(buf), "%s", r->line);
        struct nl_decor d;
        const char *rest = nl_decor_strip(buf, &d);
        if (strncmp(rest, r->rest, strlen(r->rest)) != 0 || strcmp(d.pod, r->pod) != 0 ||
            strcmp(d.tag, r->tag) != 0)
            fail_msg("%s: got rest \"%.60s\" pod \"%s\" tag \"%s\"", r->origin, rest, d.pod, d.tag);
        struct pf_nccllog log = {0};
        pf_nccllog_line(&log, r->line, strlen(r->line));
        if (log.n != 1 || strcmp(log.v[0].host, r->host) != 0)
            fail_msg("%s: %zu processes, host \"%s\"", r->origin, log.n,
                     log.n ? log.v[0].host : "");
        pf_nccllog_free(&log);
    }
}

/* Two ranks of one SkyPilot host, each behind its own "[host:slot]:" tag: one host, not two. */
static void test_host_slot_one_host(void **state)
{
    (void)state;
    static const char text[] = "(worker1, rank=1, pid=4888, ip=10.60.0.4) "
                               "[nccl-e9ef-7d4f-1:2]:nccl-e9ef-7d4f-1:10478:10517"
                               " [2] NCCL INFO Channel 04/0 : 6[2] -> 7[3] via P2P/CUMEM/read\n"
                               "(worker1, rank=1, pid=4888, ip=10.60.0.4) "
                               "[nccl-e9ef-7d4f-1:1]:nccl-e9ef-7d4f-1:10477:10518"
                               " [1] NCCL INFO Channel 02 : 5[1] -> 6[2] via SHM/direct/direct\n";
    struct pf_nccllog log = {0};
    pf_nccllog_text(&log, text, sizeof(text) - 1);
    pf_nccllog_finish(&log);
    assert_int_equal(log.n, 2);
    assert_int_equal(log.nhosts, 1);
    assert_string_equal(log.hosts[0].name, "nccl-e9ef-7d4f-1");
    assert_false(log.multi_node);
    pf_nccllog_free(&log);
}

/* A bracketed text that is not "[name:digits]:" stays NCCL's or the application's. */
static void test_not_a_tag(void **state)
{
    (void)state;
    const char *lines[] = {"[host:2] tr-0:1:1 [0] NCCL INFO x", "[a b:2]:tr-0:1:1 [0] NCCL INFO x",
                           "[:2]:tr-0:1:1 [0] NCCL INFO x", "[host:x2]:tr-0:1:1 [0] NCCL INFO x"};
    for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
        char buf[256];
        snprintf(buf, sizeof(buf), "%s", lines[i]);
        struct nl_decor d;
        const char *rest = nl_decor_strip(buf, &d);
        if (rest != buf || d.tag[0])
            fail_msg("%s: stripped to \"%s\" tag \"%s\"", lines[i], rest, d.tag);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_host_slot_one_host),
        cmocka_unit_test(test_not_a_tag),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
