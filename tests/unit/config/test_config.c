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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tcp_section),
        cmocka_unit_test(test_tcp_floor_in_digest),
        cmocka_unit_test(test_report_push_keys),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
