/* inject: byte positions from libyaml's marks with multi-byte characters and CRLF before
 * them, flow and indentless collections, the order of insertions at one offset, refusals. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "../../../pkg/inject/inject.h"

/* Injects in; returns the output (NULL on a refusal, with pf_err_msg()). */
static char *run(const char *in, bool watch, struct pf_inject_result *res)
{
    struct pf_inject_opts o = {"img:1", watch, "t.yaml"};
    char *out = NULL;
    size_t len = 0;
    if (pf_inject(&o, in, strlen(in), &out, &len, res) < 0) return NULL;
    assert_int_equal(strlen(out), len);
    /* a second run: nothing to add, nothing to refuse, the same bytes */
    struct pf_inject_result again;
    char *out2 = NULL;
    size_t len2 = 0;
    assert_int_equal(pf_inject(&o, out, len, &out2, &len2, &again), 0);
    assert_int_equal(again.gated, 0);
    assert_string_equal(out2, out);
    free(out2);
    pf_inject_result_free(&again);
    return out;
}

#define JOB_HEAD                                                                                   \
    "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: t\nspec:\n  completionMode: Indexed\n"    \
    "  completions: 3\n  template:\n    spec:\n"

static void test_utf8_columns(void **state)
{
    (void)state;
    /* multi-byte characters before the marks on the same lines: columns count characters */
    const char *in = "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: t  # café — ✓\n"
                     "spec:\n  completionMode: Indexed  # 東京\n  completions: 2\n  template:\n"
                     "    spec:\n      containers: [{name: \"ünï\", image: x}]  # ✓✓\n";
    struct pf_inject_result res;
    char *out = run(in, false, &res);
    assert_non_null(out);
    assert_non_null(strstr(out, "  name: t  # café — ✓\nspec:\n  podFailurePolicy:\n"));
    assert_non_null(strstr(out, "    spec:\n      subdomain: t\n      initContainers:\n"));
    assert_non_null(strstr(out, "      containers: [{name: \"ünï\", image: x}]  # ✓✓\n"));
    assert_int_equal(res.gated, 1);
    free(out);
    pf_inject_result_free(&res);
}

static void test_flow_empty_lists(void **state)
{
    (void)state;
    const char *in = JOB_HEAD "      subdomain: t\n      restartPolicy: Never\n"
                              "      initContainers: []\n      volumes: []\n"
                              "      containers: [{name: c, image: x}]\n";
    struct pf_inject_result res;
    char *out = run(in, false, &res);
    assert_non_null(out);
    assert_non_null(
        strstr(out, "      initContainers: [{\"name\": \"preflight\", \"image\": \"img:1\""));
    assert_non_null(strstr(out, "      volumes: [{\"name\": \"preflight-sa\""));
    assert_non_null(strstr(out, "}, {\"name\": \"podinfo\""));
    free(out);
    pf_inject_result_free(&res);
}

static void test_indentless_and_order(void **state)
{
    (void)state;
    /* an indentless sequence ends where the next key at its column begins: the new item must
     * come before the key added to the enclosing mapping at the same offset */
    const char *in = JOB_HEAD "      restartPolicy: Never\n      subdomain: t\n"
                              "      containers:\n      - name: c\n        image: x\n"
                              "      volumes:\n      - name: data\n        emptyDir: {}\n";
    struct pf_inject_result res;
    char *out = run(in, true, &res);
    assert_non_null(out);
    assert_non_null(
        strstr(out, "      - name: data\n        emptyDir: {}\n      - name: preflight-sa\n"));
    /* --watch: the trainer's env and mount, added in its mapping after "- " */
    assert_non_null(strstr(out, "        image: x\n        env:\n          - name: NCCL_DEBUG\n"));
    assert_non_null(strstr(out, "          - name: preflight-watch\n") ||
                    strstr(out, "        - name: preflight-watch\n"));
    free(out);
    pf_inject_result_free(&res);
}

static void test_crlf(void **state)
{
    (void)state;
    const char *in = "apiVersion: apps/v1\r\nkind: StatefulSet\r\nmetadata:\r\n  name: s\r\n"
                     "spec:\r\n  replicas: 2\r\n  serviceName: s\r\n  template:\r\n    spec:\r\n"
                     "      containers:\r\n        - name: c\r\n          image: x";
    struct pf_inject_result res;
    char *out = run(in, false, &res);
    assert_non_null(out);
    for (const char *p = strchr(out, '\n'); p; p = strchr(p + 1, '\n'))
        assert_int_equal(p[-1], '\r');
    assert_non_null(strstr(out, "value: \"2\"\r\n"));
    free(out);
    pf_inject_result_free(&res);
}

static void test_refusals(void **state)
{
    (void)state;
    static const struct {
        const char *in, *msg;
    } cases[] = {
        {"apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: d}\n",
         "DaemonSet's pods have no rank"},
        {"apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  completionMode: Indexed\n"
         "  template: &t\n    spec: {containers: [{name: c, image: i}]}\n",
         "has an anchor"},
        {"apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  completionMode: Indexed\n"
         "  template:\n    spec: {}\n",
         "has no containers"},
        {"- a\n- b\n", "not a Kubernetes object"},
        {"apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: a\n  name: b\n",
         "the key name appears twice"},
        {"apiVersion: v1\nkind: List\nitems:\n- apiVersion: batch/v1\n  kind: CronJob\n"
         "  metadata: {name: c}\n",
         "document 1, item 1 (CronJob c): cannot gate: every run of a CronJob"},
        {"a: [\n", "not YAML"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct pf_inject_result res;
        char *out = run(cases[i].in, false, &res);
        assert_null(out);
        if (!strstr(pf_err_msg(), cases[i].msg)) fail_msg("case %zu: %s", i, pf_err_msg());
        assert_non_null(strstr(pf_err_msg(), "t.yaml"));
    }
}

static void test_server_fields_flow(void **state)
{
    (void)state;
    const char *in =
        "{\"apiVersion\": \"apps/v1\", \"kind\": \"StatefulSet\", \"metadata\": {\"name\": "
        "\"s\", \"uid\": \"u-1\", \"resourceVersion\": \"7\"}, \"spec\": {\"replicas\": 2, "
        "\"serviceName\": \"s\", \"template\": {\"spec\": {\"containers\": [{\"name\": "
        "\"c\", \"image\": \"x\"}]}}}, \"status\": {\"replicas\": 2}}\n";
    struct pf_inject_result res;
    char *out = run(in, false, &res);
    assert_non_null(out);
    assert_int_equal(res.removed, 3);
    assert_null(strstr(out, "u-1"));
    assert_null(strstr(out, "resourceVersion"));
    assert_null(strstr(out, "\"status\""));
    assert_non_null(strstr(out, "\"metadata\": {\"name\": \"s\"}"));
    free(out);
    pf_inject_result_free(&res);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_utf8_columns),
        cmocka_unit_test(test_flow_empty_lists),
        cmocka_unit_test(test_indentless_and_order),
        cmocka_unit_test(test_crlf),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_server_fields_flow),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
