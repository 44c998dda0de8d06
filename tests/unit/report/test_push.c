/* pkg/report: the Pushgateway's URL (grouping key, base64 values), the metrics a push carries
 * (culprits, the run's timestamp, the NCCL Inspector plugin's names, link figures), and the
 * nccl-tests JSON of --results compared key by key with the layout of nccl-tests' writer. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../pkg/report/report.h"
#include "../helpers/helpers.h"

#define LAYOUT "fixtures/nccl-tests/all_reduce_perf-J.json"

static char *url(const char *base, const char *ns, const char *pod, const char *node)
{
    struct pf_buf b;
    pf_buf_init(&b, 4096);
    assert_int_equal(pf_report_push_url(&b, base, ns, pod, node), 0);
    return b.data;
}

static void test_push_url(void **state)
{
    (void)state;
    static const struct {
        const char *base, *ns, *pod, *node, *want;
    } cases[] = {
        {"http://pgw:9091", "ml", "trainer-3", "gpu-node-17",
         "http://pgw:9091/metrics/job/preflight/namespace/ml/pod/trainer-3/node/gpu-node-17"},
        /* trailing slashes of the base are dropped */
        {"https://pgw.example:443//", "ml", "p", "n",
         "https://pgw.example:443/metrics/job/preflight/namespace/ml/pod/p/node/n"},
        /* empty and missing values: @base64 with the '=' the README asks for */
        {"http://h", "", "p", NULL,
         "http://h/metrics/job/preflight/namespace@base64/=/pod/p/node@base64/="},
        /* a '/' (the README's example: /var/tmp -> L3Zhci90bXA, padded) */
        {"http://h", "ml", "/var/tmp", "n",
         "http://h/metrics/job/preflight/namespace/ml/pod@base64/L3Zhci90bXA=/node/n"},
        /* the URL-safe alphabet: bytes 0xfb 0xff encode with '-' and '_' */
        {"http://h", "ml", "\xfb\xff", "a b",
         "http://h/metrics/job/preflight/namespace/ml/pod@base64/-_8=/node@base64/YSBi"},
    };
    for (size_t i = 0; i < PF_ARRAY_LEN(cases); i++) {
        char *got = url(cases[i].base, cases[i].ns, cases[i].pod, cases[i].node);
        assert_string_equal(got, cases[i].want);
        free(got);
    }
}

static void test_inspector_size(void **state)
{
    (void)state;
    static const struct {
        unsigned long long bytes;
        const char *want;
    } cases[] = {
        {0, "0B"},
        {1, "1-2B"},
        {1023, "1023-1024B"},
        {1024, "1-2KB"},
        {268435456, "256-257MB"},
        {4831838208ULL, "4-5GB"}, /* the README's example range */
        {5ULL << 40, "5-6TB"},
        {3ULL << 50, "3072-3073TB"},
    };
    for (size_t i = 0; i < PF_ARRAY_LEN(cases); i++) {
        char got[32];
        pf_report_inspector_size(got, sizeof(got), cases[i].bytes);
        assert_string_equal(got, cases[i].want);
    }
}

static void verdict(struct pf_verdict *v)
{
    pf_verdict_init(v);
    strcpy(v->generated_at, "2026-11-21T14:00:00Z");
    v->duration_seconds = 9;
    pf_node_set_str(v->pod, "name", "trainer-0");
    pf_node_set_str(v->pod, "namespace", "ml");
    pf_node_set_str(v->pod, "node", "gpu-node-1");
    pf_node_set_int(v->pod, "rank", 0);
    struct pf_node *labels = pf_node_set_map(v->pod, "labels");
    pf_node_set_str(labels, "batch.kubernetes.io/job-name", "llama-7b");
    struct pf_check *c = pf_verdict_add_check(v, "nccl.library");
    pf_node_set_int(c->evidence, "versionCode", 22703);
    c = pf_verdict_add_check(v, "collective.tcp");
    pf_check_add_finding(c, "slow-node", PF_FAIL, NULL, "trainer-2 is slow");
    struct pf_node *links = pf_node_set_seq(c->evidence, "links");
    for (int i = 0; i < 3; i++) {
        struct pf_node *l = pf_node_add_map(links);
        pf_node_set_int(l, "from", i);
        pf_node_set_int(l, "to", (i + 1) % 3);
        pf_node_set_dbl(l, "gbps", i == 1 ? 0.5 : 9.5);
    }
    struct pf_node *again = pf_node_add_map(links); /* a second round's sample of 1 -> 2 */
    pf_node_set_int(again, "from", 1);
    pf_node_set_int(again, "to", 2);
    pf_node_set_dbl(again, "gbps", 0.25);
    pf_node_set_dbl(c->evidence, "medianLinkGbps", 9.5);
    for (int i = 0; i < 3; i++) { /* rank 0's list of ranks: their nodes */
        struct pf_rank_in r = {.rank = i, .verdict = "pass", .passed = 1};
        r.node = i == 0 ? "gpu-node-1" : i == 1 ? "gpu-node-2" : "gpu-node-3";
        pf_ranks_add(&v->ranks, &r);
    }
    pf_verdict_add_culprit(v, 2, "trainer-2", "gpu-node-3", "slow: 0.5 Gb/s, median 9.5 Gb/s");
    pf_verdict_add_culprit(v, 2, "trainer-2", "gpu-node-3", "lost during the collectives");
    pf_verdict_add_culprit(v, 1, "trainer-1", "gpu-node-2", "the link from rank 1 is slow");
    pf_verdict_add_culprit(v, 4, "trainer-4", "gpu-node-5", "rail 2 (mlx5_2) unreachable");
    c = pf_verdict_add_check(v, "net.rails");
    struct pf_node *rl = pf_node_set_seq(c->evidence, "rails");
    struct pf_node *r1 = pf_node_add_map(rl);
    pf_node_set_str(r1, "network", "ml/rail-1");
    pf_node_set_str(r1, "interface", "net1");
    pf_node_set_dbl(pf_node_set_map(r1, "probe"), "gbps", 96.5);
    struct pf_node *r2 = pf_node_add_map(rl); /* a failed probe: no figure */
    pf_node_set_str(r2, "network", "ml/rail-2");
    pf_node_set_str(r2, "interface", "net2");
    pf_node_set_str(pf_node_set_map(r2, "probe"), "error", "nothing acknowledged");
    struct pf_node *nets = pf_node_set_seq(c->evidence, "networks");
    struct pf_node *n1 = pf_node_add_map(nets);
    pf_node_set_str(n1, "name", "ml/rail-1");
    pf_node_set_dbl(n1, "medianGbps", 97.25);
    struct pf_node *coll = pf_node_add_map(v->collectives);
    pf_node_set_str(coll, "backend", "nccl");
    pf_node_set_str(coll, "op", "allreduce");
    pf_node_set_int(coll, "bytes", 268435456);
    pf_node_set_int(coll, "ranks", 16);
    pf_node_set_dbl(coll, "timeUs", 1490.5);
    pf_node_set_dbl(coll, "algbwGBps", 180.1);
    pf_node_set_dbl(coll, "busbwGBps", 337.7);
    pf_node_set_dbl(coll, "expectedMinBusbwGBps", 300);
    pf_node_set_bool(coll, "correct", true);
    coll = pf_node_add_map(v->collectives);
    pf_node_set_str(coll, "backend", "tcp");
    pf_node_set_str(coll, "op", "allreduce");
    pf_node_set_int(coll, "bytes", 8388608);
    pf_node_set_dbl(coll, "busbwGBps", 2.5);
    pf_verdict_finalize(v, NULL, NULL);
}

static void has(const char *text, const char *line)
{
    if (!strstr(text, line)) fail_msg("missing: %s\nin:\n%s", line, text);
}

static void test_push_metrics(void **state)
{
    (void)state;
    struct pf_verdict v;
    verdict(&v);
    struct pf_buf b;
    pf_buf_init(&b, 1 << 20);
    pf_report_metrics_now = 1795788000;
    assert_int_equal(pf_report_metrics_text(&b, &v), 0);
    pf_report_metrics_now = 0;
    has(b.data, "preflight_last_run_timestamp_seconds{pod=\"trainer-0\"} 1.795788e+09\n");
    has(b.data, "preflight_culprit{pod=\"trainer-0\",culprit_pod=\"trainer-2\",culprit_node="
                "\"gpu-node-3\",culprit_rank=\"2\",kind=\"node\",workload=\"llama-7b\"} 1\n");
    has(b.data, ",culprit_rank=\"1\",kind=\"link\",workload=\"llama-7b\"} 1\n");
    has(b.data, ",culprit_rank=\"4\",kind=\"rail\",workload=\"llama-7b\"} 1\n");
    has(b.data, "preflight_failure_class{pod=\"trainer-0\",node=\"gpu-node-1\",class=\"node\","
                "workload=\"llama-7b\"} ");
    /* one series a link, its slowest round; one a culprit and kind (the Pushgateway refuses
     * a push with two samples of one series) */
    has(b.data, "preflight_link_gbps{pod=\"trainer-0\",from_rank=\"1\",to_rank=\"2\",from_node="
                "\"gpu-node-2\",to_node=\"gpu-node-3\",workload=\"llama-7b\"} 0.25\n");
    assert_null(strstr(b.data, "to_rank=\"2\"} 0.5\n"));
    const char *cu = strstr(b.data, "culprit_rank=\"2\",kind=\"node\"");
    assert_non_null(cu);
    assert_null(strstr(cu + 1, "culprit_rank=\"2\",kind=\"node\""));
    has(b.data, "preflight_link_median_gbps{pod=\"trainer-0\"} 9.5\n");
    has(b.data, "preflight_rail_probe_gbps{pod=\"trainer-0\",network=\"ml/rail-1\",interface="
                "\"net1\"} 96.5\n");
    assert_null(strstr(b.data, "interface=\"net2\""));
    has(b.data, "preflight_rail_median_gbps{pod=\"trainer-0\",network=\"ml/rail-1\"} 97.25\n");
    has(b.data, "preflight_collective_busbw_floor_gbps{pod=\"trainer-0\",backend=\"nccl\","
                "op=\"allreduce\",bytes=\"268435456\"} 300\n");
    /* the NCCL Inspector plugin's names and label set (NCCL v2.30.7-1), NCCL results only */
    has(b.data, "nccl_bus_bandwidth_gbs{pod=\"trainer-0\",version=\"v5.1\",slurm_job_id="
                "\"unknown\",node=\"gpu-node-1\",gpu=\"unknown\",comm_name=\"preflight\","
                "n_nodes=\"16\",nranks=\"16\",collective=\"AllReduce\",message_size="
                "\"256-257MB\",algo_proto=\"unknown\"} 337.7\n");
    has(b.data, "nccl_collective_exec_time_microseconds{pod=\"trainer-0\",version=\"v5.1\",");
    assert_null(strstr(b.data, "message_size=\"8-9MB\""));
    /* a family is declared once */
    const char *p = strstr(b.data, "# TYPE preflight_culprit gauge");
    assert_non_null(p);
    assert_null(strstr(p + 1, "# TYPE preflight_culprit gauge"));
    pf_buf_free(&b);
    pf_verdict_free(&v);
}

/* Same keys in the same order, same JSON types, recursively; arrays compared element 0. The
 * differences allowed: in_place is null (preflight measures one placement), and okay of
 * average_bus_bandwidth is a boolean or "unchecked" as the writer's is. */
static void same_layout(const json_t *want, const json_t *got, const char *path)
{
    if (strcmp(path, ".results[0].in_place") == 0 && json_is_null(got)) return;
    /* the writer's okay is "unchecked" without a floor (-c), a boolean with one */
    if (strcmp(path, ".average_bus_bandwidth.okay") == 0 &&
        (json_is_boolean(got) || json_is_string(got)))
        return;
    if (json_typeof(want) != json_typeof(got) && !(json_is_boolean(want) && json_is_boolean(got)))
        fail_msg("%s: JSON type %d, want %d", path, json_typeof(got), json_typeof(want));
    if (json_is_object(want)) {
        const char *key;
        json_t *w;
        void *gi = json_object_iter((json_t *)got);
        json_object_foreach((json_t *)want, key, w)
        {
            char sub[256];
            snprintf(sub, sizeof(sub), "%s.%s", path, key);
            if (!gi) fail_msg("%s: missing", sub);
            if (strcmp(json_object_iter_key(gi), key) != 0)
                fail_msg("%s: found key %s at its place", sub, json_object_iter_key(gi));
            same_layout(w, json_object_iter_value(gi), sub);
            gi = json_object_iter_next((json_t *)got, gi);
        }
        if (gi) fail_msg("%s.%s: not in nccl-tests' layout", path, json_object_iter_key(gi));
    } else if (json_is_array(want) && json_array_size(want) && json_array_size(got)) {
        char sub[256];
        snprintf(sub, sizeof(sub), "%s[0]", path);
        if (json_is_object(json_array_get(want, 0)) || json_is_array(json_array_get(want, 0)))
            same_layout(json_array_get(want, 0), json_array_get(got, 0), sub);
    }
}

static void test_results_json(void **state)
{
    (void)state;
    struct pf_verdict v;
    verdict(&v);
    char *text = NULL;
    assert_int_equal(pf_report_results_json(&text, &v), 0);
    json_error_t e;
    json_t *got = json_loads(text, JSON_PRESERVE_ORDER, &e);
    if (!got) fail_msg("%s: %s", e.text, text);
    json_t *want = json_load_file(LAYOUT, JSON_PRESERVE_ORDER, &e);
    if (!want) fail_msg("%s: %s", LAYOUT, e.text);
    same_layout(want, got, "");
    /* the values preflight knows */
    assert_int_equal(json_integer_value(json_object_get(got, "version")), 3);
    assert_int_equal(json_integer_value(json_object_get(got, "nccl_version")), 22703);
    json_t *res = json_object_get(got, "results");
    /* NCCL's first, then the TCP all-reduce, marked as preflight's own */
    assert_int_equal(json_array_size(res), 2);
    json_t *r1 = json_array_get(res, 1);
    assert_string_equal(json_string_value(json_object_get(r1, "experiment_name")),
                        "preflight_tcp_all_reduce");
    assert_string_equal(json_string_value(json_object_get(r1, "backend")), "tcp");
    assert_int_equal(json_integer_value(json_object_get(r1, "size")), 8388608);
    assert_null(json_object_get(json_array_get(res, 0), "backend")); /* nccl-tests' keys only */
    json_t *r0 = json_array_get(res, 0);
    assert_int_equal(json_integer_value(json_object_get(r0, "size")), 268435456);
    assert_int_equal(json_integer_value(json_object_get(r0, "count")), 67108864);
    assert_string_equal(json_string_value(json_object_get(r0, "redop")), "sum");
    assert_string_equal(json_string_value(json_object_get(r0, "experiment_name")),
                        "all_reduce_perf");
    json_t *oop = json_object_get(r0, "out_of_place");
    assert_float_equal(json_real_value(json_object_get(oop, "time")), 1490.5, 1e-9);
    assert_float_equal(json_real_value(json_object_get(oop, "alg_bw")), 180.1, 1e-9);
    assert_float_equal(json_real_value(json_object_get(oop, "bus_bw")), 337.7, 1e-9);
    assert_float_equal(json_real_value(json_object_get(oop, "nwrong")), 0, 0);
    json_t *cfg = json_object_get(got, "config");
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(cfg, "devices"), 0), "hostname")),
                        "gpu-node-1");
    json_t *avg = json_object_get(got, "average_bus_bandwidth");
    /* NCCL's average: the TCP all-reduce's 2.5 GB/s is not in it */
    assert_float_equal(json_real_value(json_object_get(avg, "bandwidth")), 337.7, 1e-9);
    assert_true(json_is_true(json_object_get(avg, "okay"))); /* 337.7 >= the 300 floor */
    assert_true(json_is_true(json_object_get(json_object_get(got, "out_of_bounds"), "okay")));
    json_decref(got);
    json_decref(want);
    free(text);
    pf_verdict_free(&v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_push_url),
        cmocka_unit_test(test_inspector_size),
        cmocka_unit_test(test_push_metrics),
        cmocka_unit_test(test_results_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
