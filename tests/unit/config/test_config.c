/* The config file's tcp section, table-driven: values read, defaults kept, and every mistake a
 * usage error naming the file, line and key. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "../../../pkg/config/config.h"
#include "../../../pkg/verdict/verdict.h"

struct tcp_case {
    const char *yaml;
    int rc;              /* 0 or PF_EUSAGE */
    const char *message; /* a part of the error message, when rc < 0 */
    long long bytes;     /* tcp.messageBytes after parsing, when rc == 0 */
    int iterations;
    double min_busbw; /* -1: unset */
};

static const struct tcp_case tcp_cases[] = {
    {"", 0, NULL, 64ll << 20, 5, -1},
    {"tcp: {messageBytes: 1048576, iterations: 2}\n", 0, NULL, 1048576, 2, -1},
    {"tcp:\n  minBusbwGBps: 2.5\n", 0, NULL, 64ll << 20, 5, 2.5},
    {"tcp: {minBusbwGBps: 0}\n", 0, NULL, 64ll << 20, 5, 0},
    {"tcp: {minBusbwGBps: 100000}\n", 0, NULL, 64ll << 20, 5, 100000},
    {"tcp:\n  minBusbwGBps: fast\n", PF_EUSAGE,
     "c.yaml:2: tcp.minBusbwGBps: expected a number, found \"fast\"", 0, 0, 0},
    {"tcp:\n  minBusbwGBps: -1\n", PF_EUSAGE, "c.yaml:2: tcp.minBusbwGBps: -1 is out of range", 0,
     0, 0},
    {"tcp:\n  minBusbwGBps: .nan\n", PF_EUSAGE, "tcp.minBusbwGBps: expected a number", 0, 0, 0},
    {"tcp:\n  minBusbwGBps: [1]\n", PF_EUSAGE,
     "c.yaml:2: tcp.minBusbwGBps: expected a scalar, found a list", 0, 0, 0},
    {"tcp:\n  minBusbwGbps: 1\n", PF_EUSAGE,
     "c.yaml:2: tcp.minBusbwGbps: unknown key (did you mean 'minBusbwGBps'?)", 0, 0, 0},
    {"tcp:\n  minBusbw: 1\n", PF_EUSAGE,
     "c.yaml:2: tcp.minBusbw: unknown key (did you mean 'minBusbwGBps'?)", 0, 0, 0},
    {"tcp:\n  minBusbwGBps: 1\n  minBusbwGBps: 2\n", PF_EUSAGE,
     "c.yaml:3: tcp.minBusbwGBps: given twice (first on line 2)", 0, 0, 0},
};

static void test_tcp_section(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(tcp_cases) / sizeof(tcp_cases[0]); i++) {
        const struct tcp_case *t = &tcp_cases[i];
        struct pf_config c;
        pf_config_defaults(&c);
        int rc = pf_config_parse(&c, "c.yaml", t->yaml, strlen(t->yaml));
        if (rc != t->rc || (rc < 0 && !strstr(pf_err_msg(), t->message)))
            fail_msg("case %zu (%s): rc %d, message \"%s\"; expected rc %d with \"%s\"", i, t->yaml,
                     rc, rc < 0 ? pf_err_msg() : "", t->rc, t->message ? t->message : "");
        if (rc == 0) {
            assert_int_equal(c.tcp_message_bytes, t->bytes);
            assert_int_equal(c.tcp_iterations, t->iterations);
            if (c.tcp_min_busbw_gbps != t->min_busbw)
                fail_msg("case %zu: tcp.minBusbwGBps %g, expected %g", i, c.tcp_min_busbw_gbps,
                         t->min_busbw);
        }
        pf_config_free(&c);
    }
}

/* report.pushgateway, report.pushgatewayAuth and report.resultsFile: read, and each mistake a
 * usage error naming the key. */
static void test_report_push_keys(void **state)
{
    (void)state;
    static const struct {
        const char *yaml, *message;
    } bad[] = {
        {"report: {pushgateway: pgw:9091}\n",
         "c.yaml:1: report.pushgateway: expected an http:// or https:// URL, found \"pgw:9091\""},
        {"report: {pushgateway: 'https://u:p@pgw:9091/'}\n",
         "report.pushgateway: credentials in the URL would show in the verdict"},
        {"report:\n  pushgatewayAuth: {bearerTokenFile: token}\n",
         "report.pushgatewayAuth.bearerTokenFile: must be an absolute path"},
        {"report:\n  pushgatewayAuth: {usernameFile: /u}\n",
         "report.pushgatewayAuth: usernameFile and passwordFile go together"},
        {"report:\n  pushgatewayAuth: {bearerTokenFile: /t, usernameFile: /u, passwordFile: /p}\n",
         "report.pushgatewayAuth: bearerTokenFile or usernameFile and passwordFile, not both"},
        {"report:\n  pushgatewayAuth: {caFle: /ca}\n",
         "report.pushgatewayAuth.caFle: unknown key (did you mean 'caFile'?)"},
        {"report: {resultsFile: out.json}\n", "report.resultsFile: must be an absolute path"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct pf_config c;
        pf_config_defaults(&c);
        int rc = pf_config_parse(&c, "c.yaml", bad[i].yaml, strlen(bad[i].yaml));
        if (rc != PF_EUSAGE || !strstr(pf_err_msg(), bad[i].message))
            fail_msg("case %zu: rc %d, \"%s\"; expected \"%s\"", i, rc, pf_err_msg(),
                     bad[i].message);
        pf_config_free(&c);
    }
    const char *good = "report:\n"
                       "  pushgateway: https://pgw.monitoring:9091\n"
                       "  pushgatewayAuth:\n"
                       "    usernameFile: /s/user\n"
                       "    passwordFile: /s/pass\n"
                       "    caFile: /s/ca.crt\n"
                       "  resultsFile: /run/preflight/nccl-tests.json\n";
    struct pf_config c;
    pf_config_defaults(&c);
    assert_int_equal(pf_config_parse(&c, "c.yaml", good, strlen(good)), 0);
    assert_string_equal(c.report_pushgateway, "https://pgw.monitoring:9091");
    assert_string_equal(c.report_push_username_file, "/s/user");
    assert_string_equal(c.report_push_password_file, "/s/pass");
    assert_string_equal(c.report_push_ca_file, "/s/ca.crt");
    assert_string_equal(c.report_push_bearer_file, "");
    assert_string_equal(c.report_results_file, "/run/preflight/nccl-tests.json");
    pf_config_free(&c);
}

/* The floor is part of the digest the rendezvous compares: ranks that judge the TCP
 * all-reduce by different floors report config-mismatch. */
static void test_tcp_floor_in_digest(void **state)
{
    (void)state;
    static const char *const yaml[] = {"", "tcp: {minBusbwGBps: 1}\n", "tcp: {minBusbwGBps: 2}\n"};
    char d[3][96];
    for (int i = 0; i < 3; i++) {
        struct pf_config c;
        pf_config_defaults(&c);
        assert_int_equal(pf_config_parse(&c, "c.yaml", yaml[i], strlen(yaml[i])), 0);
        pf_config_digest(d[i], sizeof(d[i]), &c);
        pf_config_free(&c);
    }
    assert_string_not_equal(d[0], d[1]);
    assert_string_not_equal(d[1], d[2]);
    assert_string_not_equal(d[0], d[2]);
}

/* Every key of docs/configuration.md, read into its field. */
static void test_every_key(void **state)
{
    (void)state;
    static const char yaml[] = "expect:\n"
                               "  rdma: required\n"
                               "  hcas: 8\n"
                               "  minPortRateGbps: 200\n"
                               "  gpusPerPod: 4\n"
                               "  networks: [default/rdma-a, default/rdma-b]\n"
                               "  mtu: 4096\n"
                               "  transport: Socket\n"
                               "  busbwGBps: 40.5\n"
                               "  lineRateGbps: 400\n"
                               "  efficiency: [{nodes: 2, percent: 80}, {nodes: 16, percent: 60}]\n"
                               "workload: moe\n"
                               "collectives: [allgather, alltoall]\n"
                               "messageBytes: 17179869184\n"
                               "rendezvous: {port: 1234, timeoutSeconds: 30, interface: eth1}\n"
                               "tcp: {messageBytes: 4096, iterations: 3, minBusbwGBps: 1.5}\n"
                               "nccl: {iterations: 7, warmup: 0, timeoutSeconds: 9}\n"
                               "podinfo: {waitSeconds: 2.5}\n"
                               "gang: {groupBy: node.example.com/pool, rank0: apart}\n"
                               "policy:\n"
                               "  failOn: warn\n"
                               "  findings: {mac-mismatch: ignore}\n"
                               "report:\n"
                               "  events: true\n"
                               "  annotate: yes\n"
                               "  metricsFile: /var/lib/node-exporter/pf.prom\n"
                               "  markNode: taint\n";
    struct pf_config c;
    pf_config_defaults(&c);
    int rc = pf_config_parse(&c, "c.yaml", yaml, strlen(yaml));
    if (rc < 0) fail_msg("%s", pf_err_msg());
    assert_int_equal(c.expect_rdma, PF_RDMA_REQUIRED);
    assert_int_equal(c.expect_hcas, 8);
    assert_true(c.expect_min_port_rate_gbps == 200);
    assert_int_equal(c.expect_gpus_per_pod, 4);
    assert_int_equal(c.expect_networks.n, 2);
    assert_string_equal(c.expect_networks.v[1], "default/rdma-b");
    assert_int_equal(c.expect_mtu, 4096);
    assert_string_equal(c.expect_transport, "Socket");
    assert_true(c.expect_busbw_gbps == 40.5);
    assert_true(c.expect_line_rate_gbps == 400);
    assert_int_equal(c.nefficiency, 2);
    assert_true(c.efficiency[1].nodes == 16 && c.efficiency[1].percent == 60);
    assert_string_equal(c.workload, "moe");
    assert_int_equal(c.collectives.n, 2);
    assert_int_equal(c.message_bytes, 16ll << 30);
    assert_int_equal(c.rendezvous_port, 1234);
    assert_int_equal(c.rendezvous_timeout_s, 30);
    assert_string_equal(c.rendezvous_interface, "eth1");
    assert_int_equal(c.tcp_message_bytes, 4096);
    assert_int_equal(c.tcp_iterations, 3);
    assert_true(c.tcp_min_busbw_gbps == 1.5);
    assert_int_equal(c.nccl_iterations, 7);
    assert_int_equal(c.nccl_warmup, 0);
    assert_int_equal(c.nccl_timeout_s, 9);
    assert_true(c.podinfo_wait_s == 2.5);
    assert_string_equal(c.gang_group_by, "node.example.com/pool");
    assert_int_equal(c.gang_rank0, 1);
    assert_int_equal(c.fail_on, PF_WARN);
    assert_int_equal(c.npolicy, 1);
    assert_int_equal(c.policy[0].status, PF_POLICY_IGNORE);
    assert_true(c.report_events && c.report_annotate);
    assert_string_equal(c.report_metrics_file, "/var/lib/node-exporter/pf.prom");
    assert_int_equal(c.report_mark_node, PF_MARK_NODE_TAINT);
    pf_config_free(&c);
}

/* The messages of each kind of value, word for word. */
static const struct {
    const char *yaml, *message;
} key_errors[] = {
    {"expect: {rdma: maybe}\n",
     "c.yaml:1: expect.rdma: \"maybe\" is not one of: auto, required, none"},
    {"expect: {hcas: 2000}\n", "c.yaml:1: expect.hcas: 2000 is out of range (0..1024)"},
    {"expect: {mtu: big}\n", "c.yaml:1: expect.mtu: expected an integer, found \"big\""},
    {"messageBytes: 17179869185\n",
     "c.yaml:1: messageBytes: 17179869185 is out of range (4..17179869184)"},
    {"expect: {efficiency: [{nodes: 2}]}\n",
     "c.yaml:1: expect.efficiency: each point needs both nodes and percent"},
    {"expect: {efficiency: [{nodes: 2, pct: 3}]}\n",
     "c.yaml:1: expect.efficiency.pct: unknown key"},
    {"expect: {transport: ib}\n",
     "c.yaml:1: expect.transport: \"ib\" is not one of: IB, Socket, OFI, any"},
    {"workload: sparse\n", "c.yaml:1: workload: \"sparse\" is not one of: dense, moe, fsdp"},
    {"rendezvous: {interface: "
     "abcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghij}\n",
     "c.yaml:1: rendezvous.interface: longer than 63 characters"},
    {"policy: {failOn: never}\n", "c.yaml:1: policy.failOn: \"never\" is not one of: fail, warn"},
    {"report: {events: maybe}\n",
     "c.yaml:1: report.events: expected true or false, found \"maybe\""},
    {"report: {metricsFile: x.prom}\n", "c.yaml:1: report.metricsFile: must be an absolute path"},
    {"report: {markNode: cordon}\n",
     "c.yaml:1: report.markNode: \"cordon\" is not one of: none, label, taint"},
    {"report: 3\n", "c.yaml:1: report: expected a mapping, found a scalar"},
    {"nccl: {warmups: 1}\n", "c.yaml:1: nccl.warmups: unknown key (did you mean 'warmup'?)"},
    {"gang: {groupBy: \"-pool\"}\n",
     "c.yaml:1: gang.groupBy: \"-pool\" is not a label key ([prefix/]name: name 1-63 "
     "alphanumerics, '-', '_', '.'; prefix a DNS subdomain)"},
    {"gang: {groupBy: \"Node.Example/pool\"}\n",
     "c.yaml:1: gang.groupBy: \"Node.Example/pool\" is not a label key ([prefix/]name: name "
     "1-63 alphanumerics, '-', '_', '.'; prefix a DNS subdomain)"},
    {"gang: {rank0: first}\n", "c.yaml:1: gang.rank0: \"first\" is not one of: same, apart"},
};

static void test_key_errors(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(key_errors) / sizeof(key_errors[0]); i++) {
        struct pf_config c;
        pf_config_defaults(&c);
        const char *y = key_errors[i].yaml;
        int rc = pf_config_parse(&c, "c.yaml", y, strlen(y));
        if (rc != PF_EUSAGE || strcmp(pf_err_msg(), key_errors[i].message) != 0)
            fail_msg("case %zu (%s): rc %d, \"%s\"; expected \"%s\"", i, y, rc, pf_err_msg(),
                     key_errors[i].message);
        pf_config_free(&c);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tcp_section),      cmocka_unit_test(test_tcp_floor_in_digest),
        cmocka_unit_test(test_every_key),        cmocka_unit_test(test_key_errors),
        cmocka_unit_test(test_report_push_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
