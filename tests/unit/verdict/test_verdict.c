/* The verdict model, its YAML and human forms, and secret masking. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../../pkg/verdict/verdict.h"
#include "../helpers/helpers.h"

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
    th_golden("fixtures/golden/verdict.yaml", y);
    free(y);
    char *h = NULL;
    size_t hn = 0;
    FILE *f = open_memstream(&h, &hn);
    pf_verdict_render_human(f, &v, false);
    fclose(f);
    th_golden("fixtures/golden/verdict.txt", h);
    free(h);
    pf_verdict_free(&v);
}

static void test_atomic_write(void **state)
{
    (void)state;
    char dir[64];
    th_tmpdir(dir, sizeof(dir), "verdict");
    char path[256];
    snprintf(path, sizeof(path), "%s/sub/verdict.yaml", dir);
    struct pf_verdict v;
    sample(&v);
    pf_verdict_finalize(&v, NULL, NULL);
    assert_int_equal(pf_verdict_write_file(&v, path), 0);
    char *s = th_slurp(path, NULL);
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
    char dir[64];
    th_tmpdir(dir, sizeof(dir), "verdict-utf8");
    char path[256];
    snprintf(path, sizeof(path), "%s/verdict.yaml", dir);
    assert_int_equal(pf_verdict_write_file(&v, path), 0);
    unlink(path);
    rmdir(dir);
    pf_verdict_free(&v);
}

/* One verdict from a list of "check/code/status" findings (status "fail" or "warn"). */
static void classed(struct pf_verdict *v, bool strict, const char *const *spec)
{
    pf_verdict_init(v);
    pf_node_set_str(v->pod, "name", "trainer-3");
    pf_node_set_str(v->pod, "node", "gpu-17");
    pf_node_set_int(v->pod, "rank", 3);
    v->warn_fails = strict;
    for (; *spec; spec++) {
        char id[64], code[64], st[8];
        assert_int_equal(sscanf(*spec, "%63[^/]/%63[^/]/%7s", id, code, st), 3);
        struct pf_check *c = pf_verdict_add_check(v, id);
        pf_check_add_finding(c, code, (enum pf_status)pf_status_parse(st), NULL, "%s is bad", code);
    }
    pf_verdict_finalize(v, NULL, NULL);
}

static void test_failure_class_and_exit_code(void **state)
{
    (void)state;
    static const struct {
        const char *findings[4];
        bool strict;
        const char *cls;
        int code;
    } t[] = {
        {{"rdma.ports/port-down/fail", NULL}, false, "node", 4},
        {{"nccl.env/p2p-disabled/fail", NULL}, false, "spec", 3},
        {{"rendezvous/missing-ranks/fail", NULL}, false, "peer", 5},
        /* spec over node over peer */
        {{"rendezvous/missing-ranks/fail", "rdma.ports/port-down/fail",
          "nccl.env/p2p-disabled/fail", NULL},
         false,
         "spec",
         3},
        {{"collective.tcp/peer-lost/fail", "rdma.ports/port-down/fail", NULL}, false, "node", 4},
        /* the same code under two checks: the check decides */
        {{"rendezvous/timeout/fail", NULL}, false, "peer", 5},
        {{"gpu.devices/timeout/fail", NULL}, false, "node", 4}, /* the run's own timeout */
        /* a warning fails only under --strict, with its class */
        {{"nccl.env/debug-verbose/warn", NULL}, false, "", 0},
        {{"nccl.env/debug-verbose/warn", NULL}, true, "spec", 3},
        {{"nccl.env/debug-verbose/warn", "rendezvous/missing-ranks/fail", NULL}, false, "peer", 5},
        /* a failing finding no document classes */
        {{"x.y/no-such-code/fail", NULL}, false, "", 1},
        {{NULL}, false, "", 0},
    };
    for (size_t i = 0; i < PF_ARRAY_LEN(t); i++) {
        struct pf_verdict v;
        classed(&v, t[i].strict, t[i].findings);
        assert_string_equal(pf_class_name(v.failure_class), t[i].cls);
        assert_int_equal(pf_verdict_exit_code(&v), t[i].code);
        char *y = NULL;
        assert_int_equal(pf_verdict_to_yaml(&y, NULL, &v), 0);
        if (*t[i].cls) {
            char want[64];
            snprintf(want, sizeof(want), "\nfailureClass: %s\n", t[i].cls);
            assert_non_null(strstr(y, want));
        } else {
            assert_null(strstr(y, "failureClass"));
        }
        free(y);
        pf_verdict_free(&v);
    }
}

static void test_culprit_pod_turns_peer_into_node(void **state)
{
    (void)state;
    const char *f[] = {"collective.tcp/slow-node/fail", NULL};
    struct pf_verdict v;
    classed(&v, false, f);
    assert_int_equal(pf_verdict_exit_code(&v), 5); /* another pod is slow */
    pf_verdict_free(&v);
    classed(&v, false, f);
    pf_verdict_add_culprit(&v, 3, "trainer-3", "gpu-17", "every link is slow");
    pf_verdict_finalize(&v, NULL, NULL);
    assert_int_equal(pf_verdict_exit_code(&v), 4); /* this pod is the slow one */
    assert_int_equal(v.checks[0].findings[0].cls, PF_CLASS_NODE);
    pf_verdict_free(&v);
    /* a culprit without a finding: the gate fails as peer on the others */
    const char *none[] = {NULL};
    classed(&v, false, none);
    pf_verdict_add_culprit(&v, 5, "trainer-5", "gpu-22", "never joined the rendezvous");
    pf_verdict_finalize(&v, NULL, NULL);
    assert_int_equal(pf_verdict_exit_code(&v), 5);
    char line[256];
    pf_verdict_reason_line(line, sizeof(line), &v);
    assert_string_equal(line, "fail (peer) gpu-17: culprit rank 5: never joined the rendezvous");
    pf_verdict_free(&v);
}

/* A finding of the whole job (fleet: another pod's rail, a clique mismatch) is a node fault
 * only on the pod the culprits name; on every other pod, and when nobody is named, a peer's. */
static void test_fleet_finding_is_node_only_on_the_culprit(void **state)
{
    (void)state;
    static const struct {
        int culprit; /* -1: none */
        bool fleet;
        int code;
        const char *cls;
    } t[] = {
        {-1, true, 5, "peer"},  /* nobody named: not this node's fault */
        {5, true, 5, "peer"},   /* another pod named */
        {3, true, 4, "node"},   /* this pod named */
        {-1, false, 4, "node"}, /* this pod's own finding keeps its class */
        {5, false, 4, "node"},
    };
    for (size_t i = 0; i < PF_ARRAY_LEN(t); i++) {
        struct pf_verdict v;
        pf_verdict_init(&v);
        pf_node_set_str(v.pod, "name", "trainer-3");
        pf_node_set_int(v.pod, "rank", 3);
        struct pf_check *c = pf_verdict_add_check(&v, "net.rails");
        struct pf_finding *f =
            pf_check_add_finding(c, "rail-down", PF_FAIL, NULL, "network ml/rail-a: down");
        f->fleet = t[i].fleet;
        if (t[i].culprit >= 0) pf_verdict_add_culprit(&v, t[i].culprit, "x", "n", "its rail");
        pf_verdict_finalize(&v, NULL, NULL);
        assert_int_equal(pf_verdict_exit_code(&v), t[i].code);
        assert_string_equal(pf_class_name(v.failure_class), t[i].cls);
        pf_verdict_free(&v);
    }
}

static void test_reason_line(void **state)
{
    (void)state;
    const char *f[] = {"rendezvous/missing-ranks/fail", "nccl.env/debug-verbose/warn",
                       "rdma.ports/port-down/fail", NULL};
    struct pf_verdict v;
    classed(&v, false, f);
    v.checks[2].findings[0].message[0] = 'P';
    char line[256];
    pf_verdict_reason_line(line, sizeof(line), &v);
    assert_string_equal(line, "fail (node) gpu-17: rdma.ports: Port-down is bad");
    pf_verdict_free(&v);
    /* a message with a newline stays one line; a short buffer cuts it */
    const char *g[] = {"nccl.env/p2p-disabled/fail", NULL};
    classed(&v, false, g);
    free(v.checks[0].findings[0].message);
    v.checks[0].findings[0].message = pf_xstrdup("NCCL_P2P_DISABLE=1\nis set");
    pf_verdict_reason_line(line, sizeof(line), &v);
    assert_string_equal(line, "fail (spec) gpu-17: nccl.env: NCCL_P2P_DISABLE=1 is set");
    pf_verdict_reason_line(line, 12, &v);
    assert_string_equal(line, "fail (spec)");
    pf_verdict_free(&v);
}

/* Strings that YAML 1.1 or 1.2 readers resolve to something else, and strings they read back
 * as written. The first column is what pf_yaml_plain_is_string must say. */
static const struct {
    bool plain_ok;
    const char *s;
} yaml_cases[] = {
    {false, "0000:07:00.0"}, /* base-60 float in YAML 1.1 (PyYAML: 25200.0) */
    {false, "0000:03:02.1"},
    {false, "0000:07:00"},
    {false, "190:20:30"}, /* base-60 int */
    {false, "010"},       /* octal in 1.1 */
    {false, "0o17"},      /* octal in 1.2 */
    {false, "0x1d0f"},
    {false, "0b1010"},
    {false, "-0x1_0"},
    {false, "1_000"},
    {false, "1,000"}, /* Ruby Psych */
    {false, "+12"},
    {false, "1e3"}, /* float in 1.2, not in 1.1 */
    {false, "1.0e+3"},
    {false, ".5"},
    {false, "565.57.01"}, /* the 1.1 spec's float regex allows several dots */
    {false, "10.0.0.5"},
    {false, "."},
    {false, ".inf"},
    {false, "-.INF"},
    {false, ".NaN"},
    {false, "Infinity"},
    {false, "y"},
    {false, "N"},
    {false, "yes"},
    {false, "No"},
    {false, "on"},
    {false, "OFF"},
    {false, "true"},
    {false, "False"},
    {false, "~"},
    {false, "null"},
    {false, "NULL"},
    {false, ""},
    {false, "<<"},
    {false, "="},
    {false, "2026-11-21"},
    {false, "2026-11-21T14:00:00Z"},
    {false, "2001-12-14 21:59:43.10 -5"},
    {true, "eth0"},
    {true, "mlx5_0"},
    {true, "net1"},
    {true, "fe80::1"},
    {true, "4: ACTIVE"},
    {true, "N/A (no PMA)"},
    {true, "pass"},
    {true, "v2.28.9"},
    {true, "400 Gb/sec (4X NDR)"},
    {true, "yesterday"},
    {true, "0x"},
    {true, "1-2"},
    {true, "ml/sriov-a"},
};

static void test_yaml_plain_resolution(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(yaml_cases) / sizeof(yaml_cases[0]); i++) {
        if (pf_yaml_plain_is_string(yaml_cases[i].s) != yaml_cases[i].plain_ok)
            fail_msg("pf_yaml_plain_is_string(\"%s\") != %d", yaml_cases[i].s,
                     yaml_cases[i].plain_ok);
    }
}

/* Every case emitted as a map value, then read back by PyYAML with its pure-Python reader
 * (YAML 1.1 resolver) and with libyaml's C parser (CSafeLoader): each value must come back as
 * the same string. A doubles line checks numbers stay numbers. */
/* Runs a Python script (yaml and sys imported) on the text y, in a file named by sys.argv[1];
 * its first line of output into line. Returns the exit status. */
static int python_on(const char *y, const char *script, char *line, size_t n)
{
    char path[] = "/tmp/pf-yaml-py.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, y, strlen(y)), (ssize_t)strlen(y));
    close(fd);
    struct pf_buf cmd;
    pf_buf_init(&cmd, 1 << 16);
    pf_buf_addf(&cmd, "python3 -c \"import sys, yaml\n%s\" %s", script, path);
    FILE *p = popen(pf_buf_str(&cmd), "r");
    assert_non_null(p);
    if (!fgets(line, (int)n, p)) line[0] = '\0';
    int rc = pclose(p);
    unlink(path);
    pf_buf_free(&cmd);
    return rc;
}

static void test_yaml_roundtrip_pyyaml(void **state)
{
    (void)state;
    if (system("python3 -c 'import yaml' 2>/dev/null") != 0) skip();
    struct pf_node *root = pf_node_new_map();
    char key[32];
    for (size_t i = 0; i < sizeof(yaml_cases) / sizeof(yaml_cases[0]); i++) {
        snprintf(key, sizeof(key), "k%zu", i);
        pf_node_set_str(root, key, yaml_cases[i].s);
        /* the same text as a key: the value must read back equal to it */
        (void)pf_node_set_map(root, yaml_cases[i].s[0] ? yaml_cases[i].s : "-");
    }
    pf_node_set_dbl(root, "small", 0.00001234);
    pf_node_set_dbl(root, "big", 3.5e18);
    pf_node_set_dbl(root, "plain", 337.7);
    char *y = NULL;
    assert_int_equal(pf_node_to_yaml(&y, NULL, root), 0);
    char line[64] = "";
    assert_int_equal(
        python_on(y,
                  "for L in (yaml.SafeLoader, yaml.CSafeLoader):\n"
                  "  d = yaml.load(open(sys.argv[1]), Loader=L)\n"
                  "  for k, v in d.items():\n"
                  "    if k in ('small', 'big', 'plain'):\n"
                  "      assert isinstance(v, float), (L, k, v)\n"
                  "    elif k.startswith('k'):\n"
                  "      assert isinstance(v, str) and (v in d or v == ''), (L, k, v)\n"
                  "    else:\n"
                  "      assert isinstance(k, str), (L, k)\n"
                  "print(len(d))",
                  line, sizeof(line)),
        0);
    free(y);
    pf_node_free(root);
    /* every value and every key came back: 2 per case, 3 doubles (duplicates merge) */
    assert_true(atoi(line) >= (int)(sizeof(yaml_cases) / sizeof(yaml_cases[0])) + 3);
}

/* The ranks list: flat entries written straight into the YAML. A passing rank is one flow
 * map without checks; a failing one lists only its checks that did not pass, with their
 * codes; a rank without a report has no checksPassed. Strings are interned once (the node
 * and every status shared by all entries), a clone is equal, and PyYAML reads it back. */
static void test_ranks_list(void **state)
{
    (void)state;
    struct pf_verdict v;
    pf_verdict_init(&v);
    static char down[] = "port-down", yes[] = "yes";
    char *codes[] = {down, yes};
    struct pf_rank_in_check bad[] = {{"rdma.ports", "fail", codes, 2},
                                     {"sys.shm", "warn", NULL, 0}};
    char pod[32];
    for (int r = 0; r < 100; r++) {
        snprintf(pod, sizeof(pod), "trainer-%d", r);
        struct pf_rank_in e = {.rank = r,
                               .pod = pod,
                               .node = "gpu-node-1",
                               .state = "joined",
                               .verdict = r == 7 ? "fail" : "pass",
                               .passed = r == 7 ? 19 : 21,
                               .has_tcp = r == 0,
                               .tcp_seconds = 0.25};
        if (r == 7) e.checks = bad, e.nchecks = 2;
        if (r == 9) e.verdict = "fail", e.passed = -1, e.state = "lost";
        pf_ranks_add(&v.ranks, &e);
    }
    assert_int_equal(v.ranks.n, 100);
    /* "gpu-node-1", "joined", "pass" once: well under the 100 copies of each */
    assert_true(v.ranks.slen < 100 * 12 + 200);
    assert_string_equal(pf_ranks_node(&v.ranks, 42), "gpu-node-1");
    assert_string_equal(pf_ranks_node(&v.ranks, 100), "");
    struct pf_verdict copy;
    pf_verdict_clone(&copy, &v);
    struct pf_rank_in e;
    pf_ranks_get(&copy.ranks, 7, &e);
    assert_string_equal(e.pod, "trainer-7");
    assert_int_equal(e.nchecks, 2);
    struct pf_rank_in_check c;
    pf_ranks_check(&copy.ranks, 7, 0, &c);
    assert_string_equal(c.id, "rdma.ports");
    assert_int_equal(c.ncodes, 2);
    assert_string_equal(pf_ranks_code(&copy.ranks, 7, 0, 1), "yes");
    pf_verdict_free(&copy);
    pf_verdict_finalize(&v, NULL, NULL);
    char *y = NULL;
    assert_int_equal(pf_verdict_to_yaml(&y, NULL, &v), 0);
    assert_non_null(strstr(y, "- {rank: 1, pod: trainer-1, node: gpu-node-1, state: joined, "
                              "verdict: pass, checksPassed: 21}\n"));
    if (system("python3 -c 'import yaml' 2>/dev/null") != 0) {
        free(y);
        pf_verdict_free(&v);
        skip();
    }
    char line[512] = "";
    assert_int_equal(python_on(y,
                               "d = yaml.safe_load(open(sys.argv[1]))['ranks']\n"
                               "print(len(d), [r['rank'] for r in d if 'checks' in r], "
                               "d[7]['checks'], d[0]['tcpSeconds'], 'checksPassed' in d[9], "
                               "d[9]['state'], d[9]['verdict'])",
                               line, sizeof(line)),
                     0);
    assert_string_equal(line, "100 [7] [{'id': 'rdma.ports', 'status': 'fail', 'findings': "
                              "['port-down', 'yes']}, {'id': 'sys.shm', 'status': 'warn', "
                              "'findings': []}] 0.25 False lost fail\n");
    free(y);
    /* brief (the guard's snapshots): the same entries, no rank's checks */
    v.ranks.brief = true;
    assert_int_equal(pf_verdict_to_yaml(&y, NULL, &v), 0);
    v.ranks.brief = false;
    assert_null(strstr(y, "{id: rdma.ports"));
    assert_non_null(strstr(y, "- {rank: 7, pod: trainer-7, node: gpu-node-1, state: joined, "
                              "verdict: fail, checksPassed: 19}\n"));
    assert_non_null(strstr(y, "- {rank: 1, pod: trainer-1, node: gpu-node-1, state: joined, "
                              "verdict: pass, checksPassed: 21}\n"));
    free(y);
    pf_verdict_free(&v);
}

/* An unknown is evidence, never a finding: the check keeps its status, the entry names the code
 * and what is missing (once), and a passing check's message says so. */
static void test_unknown_never_fails(void **state)
{
    (void)state;
    struct pf_verdict v;
    pf_verdict_init(&v);
    struct pf_check *c = pf_verdict_add_check(&v, "rdma.ports");
    pf_check_set_message(c, "1 of 1 port ACTIVE");
    pf_check_unknown(c, "port-down", "mlx5_0 port 1: state file %s is empty", "/sys/x");
    pf_check_unknown(c, "port-down", "mlx5_0 port 1: state file %s is empty", "/sys/x");
    pf_check_unknown(c, "port-rate", "rate unreadable");
    assert_int_equal(pf_check_unknowns(c), 2);
    pf_verdict_finalize(&v, NULL, NULL);
    c = pf_verdict_find_check(&v, "rdma.ports");
    assert_int_equal(c->status, PF_PASS);
    assert_int_equal(c->nfindings, 0);
    assert_int_equal(v.verdict, PF_PASS);
    assert_int_equal(pf_verdict_exit_code(&v), 0);
    assert_non_null(strstr(c->message, "unknown port-down: mlx5_0 port 1: state file /sys/x"));
    const struct pf_node *u = pf_node_get(c->evidence, "unknown");
    assert_string_equal(pf_node_get_str(u->first, "code"), "port-down");
    pf_verdict_free(&v);
}

/* --format json: the same tree as JSON that a JSON reader (jansson) reads back to the same
 * values: escapes, numbers, booleans, null, empty collections, .nan as null, secrets masked. */
static void test_json_same_document(void **state)
{
    (void)state;
    struct pf_node *root = pf_node_new_map();
    pf_node_set_str(root, "text", "a \"quoted\" \\ back\nslash\tand \x01 control");
    pf_node_set_str(root, "yes", "yes"); /* a string, though YAML 1.1 reads it as true */
    pf_node_set_int(root, "n", -42);
    pf_node_set_dbl(root, "d", 1.5);
    pf_node_set_dbl(root, "nan", NAN);
    pf_node_set_bool(root, "b", true);
    pf_node_set_null(root, "none");
    pf_node_set_map(root, "emptyMap");
    pf_node_set_seq(root, "emptySeq");
    struct pf_node *env = pf_node_set_map(root, "env");
    pf_node_set_str(env, "PREFLIGHT_TOKEN", "hunter2");
    struct pf_node *seq = pf_node_set_seq(root, "list");
    pf_node_add_str(seq, "x");
    pf_node_set_int(pf_node_add_map(seq), "k", 7);
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(pf_node_to_json(&text, &len, root), 0);
    assert_int_equal(strlen(text), len);
    json_error_t e;
    json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &e);
    if (!j) fail_msg("not JSON: %s at line %d:\n%s", e.text, e.line, text);
    assert_string_equal(json_string_value(json_object_get(j, "text")),
                        "a \"quoted\" \\ back\nslash\tand \x01 control");
    assert_string_equal(json_string_value(json_object_get(j, "yes")), "yes");
    assert_int_equal(json_integer_value(json_object_get(j, "n")), -42);
    assert_float_equal(json_number_value(json_object_get(j, "d")), 1.5, 0);
    assert_true(json_is_null(json_object_get(j, "nan")));
    assert_true(json_is_true(json_object_get(j, "b")));
    assert_true(json_is_null(json_object_get(j, "none")));
    assert_int_equal(json_object_size(json_object_get(j, "emptyMap")), 0);
    assert_int_equal(json_array_size(json_object_get(j, "emptySeq")), 0);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(j, "env"), "PREFLIGHT_TOKEN")), "***");
    json_t *l = json_object_get(j, "list");
    assert_string_equal(json_string_value(json_array_get(l, 0)), "x");
    assert_int_equal(json_integer_value(json_object_get(json_array_get(l, 1), "k")), 7);
    /* the keys in the YAML's order */
    const char *order[] = {"text", "yes", "n", "d", "nan", "b", "none", "emptyMap", "emptySeq"};
    const char *prev = text;
    for (size_t i = 0; i < PF_ARRAY_LEN(order); i++) {
        char key[32];
        snprintf(key, sizeof(key), "\"%s\":", order[i]);
        const char *at = strstr(text, key);
        assert_non_null(at);
        assert_true(at >= prev);
        prev = at;
    }
    assert_null(strstr(text, "hunter2"));
    json_decref(j);
    free(text);
    pf_node_free(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unknown_never_fails),
        cmocka_unit_test(test_finalize_status_and_summary),
        cmocka_unit_test(test_policy_regrades_and_drops),
        cmocka_unit_test(test_yaml_masks_secrets_and_quotes),
        cmocka_unit_test(test_secret_names),
        cmocka_unit_test(test_golden_yaml_and_human),
        cmocka_unit_test(test_atomic_write),
        cmocka_unit_test(test_yaml_invalid_utf8),
        cmocka_unit_test(test_failure_class_and_exit_code),
        cmocka_unit_test(test_fleet_finding_is_node_only_on_the_culprit),
        cmocka_unit_test(test_culprit_pod_turns_peer_into_node),
        cmocka_unit_test(test_reason_line),
        cmocka_unit_test(test_yaml_plain_resolution),
        cmocka_unit_test(test_yaml_roundtrip_pyyaml),
        cmocka_unit_test(test_ranks_list),
        cmocka_unit_test(test_json_same_document),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
