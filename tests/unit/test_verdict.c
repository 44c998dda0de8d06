/* The verdict model, its YAML and human forms, and secret masking. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../pkg/verdict/verdict.h"

static void sample(struct pf_verdict *v)
{
    pf_verdict_init(v);
    strcpy(v->generated_at, "2026-11-21T14:00:00Z");
    v->duration_seconds = 3.2;
    pf_node_set_str(v->pod, "name", "trainer-3");
    pf_node_set_str(v->pod, "namespace", "ml");
    pf_node_set_int(v->pod, "rank", 3);
    struct pf_node *env = pf_node_set_map(v->environment, "ncclEnv");
    pf_node_set_str(env, "NCCL_SOCKET_IFNAME", "net1");
    pf_node_set_str(env, "HF_TOKEN", "hunter2");
    struct pf_check *c = pf_verdict_add_check(v, "nccl.env");
    pf_check_add_finding(c, "p2p-disabled", PF_FAIL, "unset it", "NCCL_P2P_DISABLE=1 is set");
    pf_check_add_finding(c, "debug-verbose", PF_WARN, NULL, "NCCL_DEBUG=TRACE");
    c = pf_verdict_add_check(v, "sys.shm");
    pf_check_set_message(c, "/dev/shm is 64 GiB");
    c = pf_verdict_add_check(v, "rdma.ports");
    pf_check_skip(c, "no RDMA devices");
}

static void test_finalize_status_and_summary(void **state)
{
    (void)state;
    struct pf_verdict v;
    sample(&v);
    pf_verdict_finalize(&v, NULL, NULL);
    assert_int_equal(v.verdict, PF_FAIL);
    assert_int_equal(v.checks[0].status, PF_FAIL);
    assert_int_equal(v.checks[1].status, PF_PASS);
    assert_int_equal(v.checks[2].status, PF_SKIP);
    assert_string_equal(v.summary, "1 of 3 checks failed: nccl.env");
    assert_string_equal(v.checks[0].message, "NCCL_P2P_DISABLE=1 is set");
    pf_verdict_free(&v);
}

static int demote(void *arg, const char *check, const char *code, enum pf_status st)
{
    (void)arg;
    (void)check;
    if (strcmp(code, "p2p-disabled") == 0) return PF_WARN;
    if (strcmp(code, "debug-verbose") == 0) return -1;
    return (int)st;
}

static void test_policy_regrades_and_drops(void **state)
{
    (void)state;
    struct pf_verdict v;
    sample(&v);
    pf_verdict_finalize(&v, demote, NULL);
    assert_int_equal(v.verdict, PF_WARN);
    assert_int_equal(v.checks[0].nfindings, 1);
    assert_string_equal(v.checks[0].findings[0].code, "p2p-disabled");
    assert_string_equal(v.summary, "1 of 3 checks warn: nccl.env");
    pf_verdict_free(&v);
}

static void test_yaml_masks_secrets_and_quotes(void **state)
{
    (void)state;
    struct pf_verdict v;
    sample(&v);
    struct pf_check *c = pf_verdict_add_check(&v, "gpu.devices");
    pf_node_set_str(c->evidence, "driverVersion", "550.54");
    pf_node_set_str(c->evidence, "flag", "true");
    pf_verdict_finalize(&v, NULL, NULL);
    char *y = NULL;
    size_t n = 0;
    assert_int_equal(pf_verdict_to_yaml(&y, &n, &v), 0);
    assert_non_null(strstr(y, "apiVersion: preflight/v1\n"));
    assert_non_null(strstr(y, "HF_TOKEN: \"***\""));
    assert_null(strstr(y, "hunter2"));
    assert_non_null(strstr(y, "driverVersion: \"550.54\""));
    assert_non_null(strstr(y, "flag: \"true\""));
    assert_non_null(strstr(y, "durationSeconds: 3.2\n"));
    assert_non_null(strstr(y, "remedy: unset it"));
    free(y);
    pf_verdict_free(&v);
}

static void test_secret_names(void **state)
{
    (void)state;
    assert_true(pf_verdict_is_secret_name("PREFLIGHT_TOKEN"));
    assert_true(pf_verdict_is_secret_name("aws_secret_access_key"));
    assert_true(pf_verdict_is_secret_name("DB_PASSWORD"));
    assert_false(pf_verdict_is_secret_name("NCCL_IB_HCA"));
    /* the word past byte 255 of a long name still counts */
    char longname[400];
    memset(longname, 'A', sizeof(longname));
    strcpy(longname + 300, "_Token");
    assert_true(pf_verdict_is_secret_name(longname));
    longname[300] = '\0';
    assert_false(pf_verdict_is_secret_name(longname));
}

/* Golden files: the YAML and the human form of a fixed verdict. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = calloc(1, (size_t)n + 1);
    if (fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    fclose(f);
    return s;
}

static void golden(const char *path, const char *actual)
{
    if (getenv("PF_UPDATE_GOLDEN")) {
        FILE *f = fopen(path, "wb");
        assert_non_null(f);
        fputs(actual, f);
        fclose(f);
    }
    char *want = slurp(path);
    assert_non_null(want);
    assert_string_equal(actual, want);
    free(want);
}

static void test_golden_yaml_and_human(void **state)
{
    (void)state;
    struct pf_verdict v;
    sample(&v);
    struct pf_node *col = pf_node_add_map(v.collectives);
    pf_node_set_str(col, "backend", "tcp");
    pf_node_set_str(col, "op", "allreduce");
    pf_node_set_int(col, "bytes", 67108864);
    pf_node_set_int(col, "ranks", 4);
    pf_node_set_dbl(col, "algbwGBps", 1.25);
    pf_node_set_dbl(col, "busbwGBps", 1.875);
    pf_node_set_bool(col, "correct", true);
    pf_verdict_add_culprit(&v, 5, "trainer-5", "gpu-node-22", "never joined the rendezvous");
    pf_verdict_finalize(&v, NULL, NULL);
    char *y = NULL;
    assert_int_equal(pf_verdict_to_yaml(&y, NULL, &v), 0);
    golden("fixtures/golden/verdict.yaml", y);
    free(y);
    char *h = NULL;
    size_t hn = 0;
    FILE *f = open_memstream(&h, &hn);
    pf_verdict_render_human(f, &v, false);
    fclose(f);
    golden("fixtures/golden/verdict.txt", h);
    free(h);
    pf_verdict_free(&v);
}

static void test_atomic_write(void **state)
{
    (void)state;
    char dir[] = "/tmp/pf-verdict-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof(path), "%s/sub/verdict.yaml", dir);
    struct pf_verdict v;
    sample(&v);
    pf_verdict_finalize(&v, NULL, NULL);
    assert_int_equal(pf_verdict_write_file(&v, path), 0);
    char *s = slurp(path);
    assert_non_null(s);
    assert_non_null(strstr(s, "verdict: fail"));
    free(s);
    unlink(path);
    snprintf(path, sizeof(path), "%s/sub", dir);
    rmdir(path);
    rmdir(dir);
    pf_verdict_free(&v);
}

/* Text from the environment, sysfs, annotations or logs may be any bytes; libyaml refuses
 * a scalar that is not UTF-8 and leaves its event uninitialised, which once crashed (double
 * free) or hung the emitter and lost the verdict. Invalid bytes become U+FFFD. */
static void test_yaml_invalid_utf8(void **state)
{
    (void)state;
    struct pf_verdict v;
    sample(&v);
    struct pf_node *env = pf_node_get(v.environment, "ncclEnv");
    pf_node_set_str(env, "NCCL_BAD\x8f",
                    "\x8f\x8f net1 \xc0\xaf \xed\xa0\x80 \xf4\x90\x80\x80 \xe2\x9c");
    struct pf_check *c = pf_verdict_add_check(&v, "nccl.env");
    pf_check_add_finding(c, "invalid-value", PF_WARN, NULL,
                         "NCCL_SOCKET_IFNAME=\xff: caf\xc3\xa9 \xe2\x9c\x93");
    pf_verdict_finalize(&v, NULL, NULL);
    char *yaml = NULL;
    size_t len = 0;
    assert_int_equal(pf_verdict_to_yaml(&yaml, &len, &v), 0);
    assert_non_null(strstr(yaml, "NCCL_BAD\xef\xbf\xbd"));
    /* every invalid byte is one U+FFFD; valid text around it stays */
    assert_non_null(strstr(yaml, "\xef\xbf\xbd\xef\xbf\xbd net1 \xef\xbf\xbd\xef\xbf\xbd"));
    assert_non_null(strstr(yaml, "caf\xc3\xa9 \xe2\x9c\x93"));
    assert_null(strstr(yaml, "\x8f"));
    assert_non_null(strstr(yaml, "verdict: fail"));
    free(yaml);
    char dir[] = "/tmp/pf-verdict-utf8.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof(path), "%s/verdict.yaml", dir);
    assert_int_equal(pf_verdict_write_file(&v, path), 0);
    unlink(path);
    rmdir(dir);
    pf_verdict_free(&v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_finalize_status_and_summary),
        cmocka_unit_test(test_policy_regrades_and_drops),
        cmocka_unit_test(test_yaml_masks_secrets_and_quotes),
        cmocka_unit_test(test_secret_names),
        cmocka_unit_test(test_golden_yaml_and_human),
        cmocka_unit_test(test_atomic_write),
        cmocka_unit_test(test_yaml_invalid_utf8),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
