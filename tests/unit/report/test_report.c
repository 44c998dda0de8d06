/* pkg/report: JSON escaping, the Event body and message, the annotation patch, the
 * Prometheus text (golden), the atomic metrics write, and the reasons report.kubernetes
 * skips. (The libcurl constants are compared with curl.h in test_dl_abi.c.) */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../../pkg/report/report.h"
#include "../helpers/helpers.h"

#define GOLDEN_METRICS "k8s/golden/metrics.prom"

static char *json(const char *s)
{
    struct pf_buf b;
    pf_buf_init(&b, 1 << 16);
    assert_int_equal(pf_report_json_str(&b, s), 0);
    return b.data; /* caller frees */
}

static void test_json_escapes(void **state)
{
    (void)state;
    static const struct {
        const char *in, *want;
    } cases[] = {
        {"", "\"\""},
        {"plain", "\"plain\""},
        {"say \"hi\"", "\"say \\\"hi\\\"\""},
        {"C:\\path", "\"C:\\\\path\""},
        {"a\nb\tc\rd", "\"a\\nb\\tc\\rd\""},
        {"bell\x07"
         "del\x7f",
         "\"bell\\u0007del\\u007f\""},
        {"caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x9a\x80",
         "\"caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x9a\x80\""},
        {"bad\xff", "\"bad\\ufffd\""},
        {"overlong\xc0\xaf", "\"overlong\\ufffd\\ufffd\""},
        {"surrogate\xed\xa0\x80", "\"surrogate\\ufffd\\ufffd\\ufffd\""},
        {"cut\xe2\x9c", "\"cut\\ufffd\\ufffd\""},
        {"</script>", "\"</script>\""},
    };
    for (size_t i = 0; i < PF_ARRAY_LEN(cases); i++) {
        char *got = json(cases[i].in);
        assert_string_equal(got, cases[i].want);
        free(got);
    }
    char *got = json(NULL);
    assert_string_equal(got, "\"\"");
    free(got);
}

static void sample(struct pf_verdict *v, enum pf_status worst)
{
    pf_verdict_init(v);
    strcpy(v->generated_at, "2026-11-21T14:00:00Z");
    v->duration_seconds = 3.25;
    pf_node_set_str(v->pod, "name", "trainer-3");
    pf_node_set_str(v->pod, "namespace", "ml");
    pf_node_set_str(v->pod, "node", "gpu-node-17");
    pf_node_set_int(v->pod, "rank", 3);
    struct pf_check *c = pf_verdict_add_check(v, "sys.shm");
    pf_check_set_message(c, "/dev/shm is 64 GiB");
    c = pf_verdict_add_check(v, "nccl.env");
    if (worst >= PF_WARN)
        pf_check_add_finding(c, "debug-verbose", PF_WARN, NULL, "NCCL_DEBUG=TRACE is set");
    if (worst == PF_FAIL) {
        c = pf_verdict_add_check(v, "rdma.ports");
        pf_check_add_finding(c, "port-down", PF_FAIL, "replug it",
                             "mlx5_1 port 1 is 1: DOWN (want 4: ACTIVE)");
        pf_verdict_add_culprit(v, 5, "trainer-5", "gpu-node-22", "never joined the rendezvous");
    }
    c = pf_verdict_add_check(v, "rdma.verbs");
    pf_check_skip(c, "no RDMA devices");
    c = pf_verdict_add_check(v, "rendezvous");
    pf_node_set_dbl(c->evidence, "seconds", 1.5);
    struct pf_node *coll = pf_node_add_map(v->collectives);
    pf_node_set_str(coll, "backend", "tcp");
    pf_node_set_str(coll, "op", "allreduce");
    pf_node_set_int(coll, "bytes", 8388608);
    pf_node_set_dbl(coll, "algbwGBps", 1.25);
    pf_node_set_dbl(coll, "busbwGBps", 2.5);
    coll = pf_node_add_map(v->collectives);
    pf_node_set_str(coll, "backend", "nccl");
    pf_node_set_str(coll, "op", "allreduce");
    pf_node_set_int(coll, "bytes", 268435456);
    pf_node_set_dbl(coll, "algbwGBps", 180.1);
    pf_node_set_dbl(coll, "busbwGBps", 337.7);
    pf_verdict_finalize(v, NULL, NULL);
}

static void test_event_reason_and_type(void **state)
{
    (void)state;
    assert_string_equal(pf_report_event_reason(PF_PASS), "PreflightPassed");
    assert_string_equal(pf_report_event_reason(PF_WARN), "PreflightWarning");
    assert_string_equal(pf_report_event_reason(PF_FAIL), "PreflightFailed");
    assert_string_equal(pf_report_event_type(PF_PASS), "Normal");
    assert_string_equal(pf_report_event_type(PF_SKIP), "Normal");
    assert_string_equal(pf_report_event_type(PF_WARN), "Warning");
    assert_string_equal(pf_report_event_type(PF_FAIL), "Warning");
}

static void test_event_message_names_culprits_and_checks(void **state)
{
    (void)state;
    struct pf_verdict v;
    sample(&v, PF_FAIL);
    char msg[PF_REPORT_EVENT_MSG_MAX + 1];
    pf_report_event_message(msg, sizeof(msg), &v);
    assert_string_equal(msg, "fail (node) on node gpu-node-17: 1 of 5 checks failed: rdma.ports; "
                             "warnings: nccl.env; culprits: rank 5 "
                             "(trainer-5 on gpu-node-22): never joined the rendezvous; "
                             "rdma.ports: mlx5_1 port 1 is 1: DOWN (want 4: ACTIVE); "
                             "nccl.env: NCCL_DEBUG=TRACE is set");
    pf_verdict_free(&v);

    sample(&v, PF_PASS);
    pf_report_event_message(msg, sizeof(msg), &v);
    assert_int_equal(strncmp(msg, "pass: ", 6), 0);
    assert_null(strstr(msg, "culprits"));
    pf_verdict_free(&v);
}

static void test_event_message_bounded_at_utf8_boundary(void **state)
{
    (void)state;
    struct pf_verdict v;
    sample(&v, PF_FAIL);
    /* 600 two-byte characters: the message is far over 1 KiB */
    char reason[1300];
    for (int i = 0; i < 600; i++)
        memcpy(reason + 2 * i, "\xc3\xa9", 2);
    reason[1200] = '\0';
    pf_verdict_add_culprit(&v, 7, "trainer-7", "gpu-node-9", "%s", reason);
    char msg[PF_REPORT_EVENT_MSG_MAX + 1];
    for (size_t max = sizeof(msg); max > sizeof(msg) - 3; max--) {
        pf_report_event_message(msg, max, &v);
        size_t len = strlen(msg);
        assert_true(len < max);
        assert_true(len >= max - 6);
        assert_string_equal(msg + len - 3, "...");
        /* the text before "..." ends on a whole character */
        char *esc = json(msg);
        assert_null(strstr(esc, "\\ufffd"));
        free(esc);
    }
    pf_verdict_free(&v);
}

static void test_event_body(void **state)
{
    (void)state;
    struct pf_verdict v;
    sample(&v, PF_WARN);
    struct pf_report_pod pod = {
        .name = "trainer-3", .ns = "ml", .uid = "1f0e-42", .node = "gpu-node-17"};
    struct pf_buf b;
    pf_buf_init(&b, 1 << 16);
    assert_int_equal(pf_report_event_body(&b, &v, &pod, "2026-11-21T14:00:03Z"), 0);
    assert_string_equal(
        b.data,
        "{\"apiVersion\":\"v1\",\"kind\":\"Event\","
        "\"metadata\":{\"generateName\":\"trainer-3.preflight-\",\"namespace\":\"ml\"},"
        "\"involvedObject\":{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"name\":\"trainer-3\","
        "\"namespace\":\"ml\",\"uid\":\"1f0e-42\"},"
        "\"reason\":\"PreflightWarning\","
        "\"message\":\"warn on node gpu-node-17: 1 of 4 checks warn: nccl.env; nccl.env: "
        "NCCL_DEBUG=TRACE is set\","
        "\"type\":\"Warning\",\"source\":{\"component\":\"preflight\",\"host\":\"gpu-node-17\"},"
        "\"firstTimestamp\":\"2026-11-21T14:00:03Z\",\"lastTimestamp\":\"2026-11-21T14:00:03Z\","
        "\"count\":1}");
    pf_buf_free(&b);

    /* no uid, no node: those members are left out; hostile text stays inside its string */
    struct pf_check *c = pf_verdict_add_check(&v, "net.multus");
    pf_check_add_finding(c, "network-missing", PF_FAIL, NULL, "\"},\"type\":\"Normal\n");
    pf_verdict_finalize(&v, NULL, NULL);
    struct pf_report_pod bare = {.name = "p", .ns = "n"};
    pf_buf_init(&b, 1 << 16);
    assert_int_equal(pf_report_event_body(&b, &v, &bare, "t"), 0);
    assert_null(strstr(b.data, "\"uid\""));
    assert_null(strstr(b.data, "\"host\""));
    assert_non_null(strstr(b.data, "net.multus: \\\"},\\\"type\\\":\\\"Normal\\n; "));
    assert_non_null(strstr(b.data, "\"type\":\"Warning\""));
    assert_null(strstr(b.data, "\"type\":\"Normal\""));
    pf_buf_free(&b);
    pf_verdict_free(&v);
}

static void test_annotation_patch(void **state)
{
    (void)state;
    struct pf_verdict v;
    sample(&v, PF_PASS);
    struct pf_buf b;
    pf_buf_init(&b, 1 << 16);
    assert_int_equal(pf_report_annotation_patch(&b, &v), 0);
    assert_string_equal(b.data,
                        "{\"metadata\":{\"annotations\":{\"preflight.dev/verdict\":\"pass\","
                        "\"preflight.dev/summary\":\"pass: all 3 checks passed (1 skipped)\"}}}");
    pf_buf_free(&b);
    pf_verdict_free(&v);
}

static void test_prom_escape(void **state)
{
    (void)state;
    struct pf_buf b;
    pf_buf_init(&b, 1024);
    assert_int_equal(pf_report_prom_escape(&b, "a\\b\"c\nd"), 0);
    assert_string_equal(b.data, "a\\\\b\\\"c\\nd");
    pf_buf_free(&b);
}

static void test_metrics_golden(void **state)
{
    (void)state;
    struct pf_verdict v;
    sample(&v, PF_FAIL);
    /* a hostile label value */
    pf_node_set_str(v.pod, "node", "node \"7\"\\\n");
    struct pf_buf b;
    pf_buf_init(&b, 1 << 20);
    pf_report_metrics_now = 1795788000; /* preflight_last_run_timestamp_seconds */
    assert_int_equal(pf_report_metrics_text(&b, &v), 0);
    pf_report_metrics_now = 0;
    const char *update = getenv("PF_UPDATE_GOLDEN");
    if (update && strcmp(update, "1") == 0) {
        FILE *f = fopen(GOLDEN_METRICS, "wb");
        assert_non_null(f);
        const char *ver = strstr(b.data, "version=\"" PF_VERSION "\"");
        assert_non_null(ver);
        ver += strlen("version=\"");
        fprintf(f, "%.*s@VERSION@%s", (int)(ver - b.data), b.data, ver + strlen(PF_VERSION));
        fclose(f);
    }
    char *want = th_slurp(GOLDEN_METRICS, NULL);
    assert_non_null(want);
    /* the golden file says @VERSION@ where the build's version goes */
    char *at = strstr(want, "@VERSION@");
    assert_non_null(at);
    char *fixed = pf_xasprintf("%.*s%s%s", (int)(at - want), want, PF_VERSION, at + 9);
    free(want);
    want = fixed;
    assert_string_equal(b.data, want);
    /* every sample line belongs to a family declared with HELP and TYPE just before */
    char *copy = strdup(b.data), *save = NULL;
    char family[128] = "";
    int samples = 0;
    for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (strncmp(line, "# TYPE ", 7) == 0) {
            sscanf(line + 7, "%127s", family);
            continue;
        }
        if (line[0] == '#') continue;
        assert_int_equal(strncmp(line, family, strlen(family)), 0);
        samples++;
    }
    /* 1 info + 3 verdict + 3 class + 5 checks x 4 + 2 busbw + 2 algbw + rendezvous + culprit +
     * the NCCL Inspector's busbw + duration + last run */
    assert_int_equal(samples, 1 + 3 + 3 + 20 + 2 + 2 + 1 + 1 + 1 + 1 + 1);
    assert_non_null(strstr(b.data, "preflight_verdict{pod=\"trainer-3\",verdict=\"fail\"} 1\n"));
    assert_non_null(strstr(b.data, "preflight_verdict{pod=\"trainer-3\",verdict=\"pass\"} 0\n"));
    /* port-down is a node failure: the class and the node to act on */
    assert_non_null(strstr(b.data, "preflight_failure_class{pod=\"trainer-3\",node=\"node "
                                   "\\\"7\\\"\\\\\\n\",class=\"node\",workload=\"trainer\"} 1\n"));
    assert_non_null(strstr(b.data, ",class=\"spec\",workload=\"trainer\"} 0\n"));
    assert_non_null(strstr(b.data, ",class=\"peer\",workload=\"trainer\"} 0\n"));
    assert_non_null(strstr(b.data, "preflight_check_status{pod=\"trainer-3\",check=\"rdma.ports\","
                                   "status=\"fail\"} 1\n"));
    assert_non_null(strstr(b.data, "preflight_collective_busbw_gbps{pod=\"trainer-3\",backend="
                                   "\"nccl\",op=\"allreduce\",bytes=\"268435456\"} 337.7\n"));
    assert_non_null(strstr(b.data, "node=\"node \\\"7\\\"\\\\\\n\""));
    assert_non_null(strstr(b.data, "preflight_rendezvous_seconds{pod=\"trainer-3\"} 1.5\n"));
    /* every sample carries the pod */
    for (const char *p = b.data; (p = strchr(p, '\n')) && p[1]; p++)
        if (p[1] != '#') assert_int_equal(strncmp(strchr(p + 1, '{'), "{pod=\"trainer-3\"", 16), 0);
    assert_non_null(strstr(b.data, "preflight_duration_seconds{pod=\"trainer-3\"} 3.25\n"));
    free(copy);
    free(want);
    pf_buf_free(&b);
    pf_verdict_free(&v);
}

static void test_metrics_write_atomic(void **state)
{
    (void)state;
    char dir[64];
    th_tmpdir(dir, sizeof(dir), "report");
    char path[256], bad[512];
    snprintf(path, sizeof(path), "%s/a/b/metrics.prom", dir);
    struct pf_verdict v;
    sample(&v, PF_PASS);
    mode_t old = umask(077);
    assert_int_equal(pf_report_metrics_write(&v, path), 0);
    umask(old);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0644);
    size_t len = 0;
    char *got = th_slurp(path, &len);
    assert_non_null(got);
    assert_non_null(strstr(got, "preflight_verdict{pod=\"trainer-3\",verdict=\"pass\"} 1\n"));
    free(got);
    /* no temp file left beside it */
    char sub[256];
    snprintf(sub, sizeof(sub), "%s/a/b", dir);
    th_sh("test $(ls -A %s | wc -l) -eq 1", sub);
    /* a path under a regular file cannot be written, and says where */
    snprintf(bad, sizeof(bad), "%s/x/metrics.prom", path);
    assert_true(pf_report_metrics_write(&v, bad) < 0);
    assert_non_null(strstr(pf_err_msg(), path));
    assert_true(th_rmtree(dir));
    pf_verdict_free(&v);
}

static void test_install_self(void **state)
{
    (void)state;
    char dir[64];
    th_tmpdir(dir, sizeof(dir), "install");
    char out[4200];
    mode_t old = umask(077);
    assert_int_equal(pf_report_install_self(out, sizeof(out), dir), 0);
    umask(old);
    char want[300];
    snprintf(want, sizeof(want), "%s/preflight", dir);
    assert_string_equal(out, want);
    struct stat a, b;
    assert_int_equal(stat(out, &a), 0);
    assert_int_equal(stat("/proc/self/exe", &b), 0);
    assert_int_equal(a.st_mode & 0777, 0755);
    assert_int_equal(a.st_size, b.st_size);
    /* again over the existing one (rename replaces it) */
    assert_int_equal(pf_report_install_self(out, sizeof(out), dir), 0);
    assert_int_equal(pf_report_install_self(out, sizeof(out), "/nonexistent/pf"), PF_ERR);
    assert_non_null(strstr(pf_err_msg(), "/nonexistent/pf"));
    assert_int_equal(pf_report_install_self(out, sizeof(out), want), PF_ERR);
    assert_non_null(strstr(pf_err_msg(), "not a folder"));
    assert_true(th_rmtree(dir));
}

static void test_kubernetes_skips(void **state)
{
    (void)state;
    struct pf_config cfg;
    pf_config_defaults(&cfg);
    struct pf_verdict v;
    sample(&v, PF_PASS);
    struct pf_ctx ctx;
    pf_ctx_init(&ctx, &cfg, &v);
    struct pf_check c = {0};
    c.evidence = pf_node_new_map();
    pf_report_kubernetes(&c, &ctx, 5);
    assert_int_equal(c.status, PF_SKIP);
    assert_non_null(strstr(c.message, "report.events"));
    free(c.message);
    c.message = NULL;
    cfg.report_events = true;
    pf_report_kubernetes(&c, &ctx, 5); /* no KUBERNETES_SERVICE_HOST in ctx->env */
    assert_int_equal(c.status, PF_SKIP);
    assert_non_null(strstr(c.message, "KUBERNETES_SERVICE_HOST"));
    free(c.message);
    c.message = NULL;
    pf_env_set(&ctx.env, "KUBERNETES_SERVICE_HOST", "127.0.0.1", "test");
    /* PREFLIGHT_CURL_LIB is read first; PREFLIGHT_LIBCURL, its older name, only without it
     * (tests/e2e/test_report.sh runs the older name alone) */
    pf_env_set(&ctx.env, "PREFLIGHT_LIBCURL", "libcurl-by-the-older-name.so.4", "test");
    pf_env_set(&ctx.env, "PREFLIGHT_CURL_LIB", "libcurl-that-is-not-here.so.4", "test");
    pf_report_kubernetes(&c, &ctx, 5);
    assert_int_equal(c.status, PF_SKIP);
    assert_non_null(strstr(c.message, "libcurl cannot be loaded"));
    assert_non_null(strstr(c.message, "libcurl-that-is-not-here.so.4"));
    assert_null(strstr(c.message, "older-name"));
    assert_int_equal(c.nfindings, 0);
    free(c.message);
    pf_node_free(c.evidence);
    pf_ctx_free(&ctx);
    pf_verdict_free(&v);
    pf_config_free(&cfg);
}

/* ---- node marking: the exact patches */
static void test_node_label_patch(void **state)
{
    (void)state;
    struct pf_buf b;
    pf_buf_init(&b, 4096);
    assert_int_equal(pf_report_node_label_patch(&b, "port-down"), 0);
    assert_string_equal(b.data,
                        "{\"metadata\":{\"labels\":{\"preflight.dev/unfit\":\"port-down\"}}}");
    pf_buf_free(&b);
}

static void test_node_taint_patch(void **state)
{
    (void)state;
    static const struct {
        const char *node, *want;
    } cases[] = {
        /* no taints yet */
        {"{\"kind\":\"Node\",\"metadata\":{\"name\":\"n\",\"resourceVersion\":\"41\"},\"spec\":{}}",
         "{\"metadata\":{\"resourceVersion\":\"41\"},\"spec\":{\"taints\":[{\"effect\":"
         "\"NoSchedule\",\"key\":\"preflight.dev/unfit\",\"value\":\"port-down\"}]}}"},
        /* others' taints kept byte for byte; an earlier one of ours replaced */
        {"{\"metadata\":{\"labels\":{\"taints\":\"x\"},\"resourceVersion\":\"7\"},\"spec\":{"
         "\"podCIDR\":\"10.0.0.0/24\",\"taints\":[{\"key\":\"nvidia.com/gpu\",\"effect\":"
         "\"NoSchedule\"}, {\"key\":\"preflight.dev/unfit\",\"value\":\"mtu\",\"effect\":"
         "\"NoSchedule\"},{\"key\":\"a\\\"b\",\"effect\":\"NoExecute\",\"timeAdded\":"
         "\"2026-11-21T14:00:00Z\"}]}}",
         "{\"metadata\":{\"resourceVersion\":\"7\"},\"spec\":{\"taints\":[{\"key\":"
         "\"nvidia.com/gpu\",\"effect\":\"NoSchedule\"},{\"key\":\"a\\\"b\",\"effect\":"
         "\"NoExecute\",\"timeAdded\":\"2026-11-21T14:00:00Z\"},{\"effect\":\"NoSchedule\","
         "\"key\":\"preflight.dev/unfit\",\"value\":\"port-down\"}]}}"},
    };
    for (size_t i = 0; i < PF_ARRAY_LEN(cases); i++) {
        struct pf_buf b;
        pf_buf_init(&b, 4096);
        assert_int_equal(pf_report_node_taint_patch(&b, cases[i].node, "port-down"), 0);
        assert_string_equal(b.data, cases[i].want);
        pf_buf_free(&b);
    }
    /* malformed or truncated input: an error, never a crash */
    static const char *const bad[] = {"",
                                      "{",
                                      "{\"metadata\":",
                                      "{\"metadata\":{}}",
                                      "[1,2]",
                                      "{\"metadata\":{\"resourceVersion\":7}}",
                                      "{\"metadata\":{\"resourceVersion\":\"1"};
    for (size_t i = 0; i < PF_ARRAY_LEN(bad); i++) {
        struct pf_buf b;
        pf_buf_init(&b, 4096);
        assert_int_equal(pf_report_node_taint_patch(&b, bad[i], "x"), -1);
        pf_buf_free(&b);
    }
}

/* Against the HTTPS stand-in of tests/e2e/test_report.sh, which sets PF_TEST_APISERVER_PORT
 * and PF_TEST_ROOT (the faked service-account folder) and checks the requests it received;
 * skipped when run on its own. */
static void test_mark_node_live(void **state)
{
    (void)state;
    const char *port = getenv("PF_TEST_APISERVER_PORT"), *root = getenv("PF_TEST_ROOT");
    const char *how = getenv("PF_TEST_MARK");
    if (!port || !root || !how) {
        skip();
        return;
    }
    struct pf_config cfg;
    pf_config_defaults(&cfg);
    cfg.report_mark_node = strcmp(how, "taint") == 0 ? PF_MARK_NODE_TAINT : PF_MARK_NODE_LABEL;
    struct pf_verdict v;
    sample(&v, PF_FAIL);
    struct pf_ctx ctx;
    pf_ctx_init(&ctx, &cfg, &v);
    assert_int_equal(pf_host_init(&ctx.host, root), 0);
    pf_env_set(&ctx.env, "KUBERNETES_SERVICE_HOST", "127.0.0.1", "test");
    pf_env_set(&ctx.env, "KUBERNETES_SERVICE_PORT", port, "test");
    struct pf_check c = {0};
    c.evidence = pf_node_new_map();
    pf_report_mark_node(&c, &ctx, "peer", "node-a", "port-down", 5); /* not node: nothing */
    assert_int_equal(c.status, PF_SKIP);
    free(c.message);
    c.message = NULL;
    c.status = PF_PASS;
    pf_report_mark_node(&c, &ctx, "node", "node-a", "port-down", 5);
    printf("report.node: %s\n", c.message ? c.message : "(none)");
    for (size_t i = 0; i < c.nfindings; i++)
        printf("finding: %s %s\n", c.findings[i].code, c.findings[i].message);
    for (size_t i = 0; i < c.nfindings; i++) {
        free(c.findings[i].message);
        free(c.findings[i].remedy);
    }
    free(c.findings);
    free(c.message);
    pf_node_free(c.evidence);
    pf_ctx_free(&ctx);
    pf_verdict_free(&v);
    pf_config_free(&cfg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_escapes),
        cmocka_unit_test(test_event_reason_and_type),
        cmocka_unit_test(test_event_message_names_culprits_and_checks),
        cmocka_unit_test(test_event_message_bounded_at_utf8_boundary),
        cmocka_unit_test(test_event_body),
        cmocka_unit_test(test_annotation_patch),
        cmocka_unit_test(test_prom_escape),
        cmocka_unit_test(test_metrics_golden),
        cmocka_unit_test(test_metrics_write_atomic),
        cmocka_unit_test(test_install_self),
        cmocka_unit_test(test_kubernetes_skips),
        cmocka_unit_test(test_node_label_patch),
        cmocka_unit_test(test_node_taint_patch),
    };
    /* the live exchange runs alone: libcurl is loaded once per process, and
     * test_kubernetes_skips loads a library that is not there */
    const struct CMUnitTest live[] = {cmocka_unit_test(test_mark_node_live)};
    if (getenv("PF_TEST_APISERVER_PORT")) return cmocka_run_group_tests(live, NULL, NULL);
    return cmocka_run_group_tests(tests, NULL, NULL);
}
