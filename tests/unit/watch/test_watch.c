/* watch: the follower on real files in a temporary folder (a line written in pieces, a file
 * that appears late, rotation, truncation, a 100 MB line, a process that never writes), the
 * judgement of each process against the gate's verdict, and the reader of that verdict. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../../pkg/watch/watch.h"

static const char GATE[] = "apiVersion: preflight/v1\n"
                           "kind: Verdict\n"
                           "verdict: pass\n"
                           "environment:\n"
                           "  ncclVersion: 2.21.5\n"
                           "  ncclNetwork: IB\n"
                           "checks:\n"
                           "- id: collective.nccl\n"
                           "  status: pass\n"
                           "  evidence:\n"
                           "    transport: IB\n"
                           "    hcas: [mlx5_0:1/IB, mlx5_1:1/IB]\n"
                           "collectives:\n"
                           "- backend: tcp\n"
                           "  gpuDirectRdma: false\n"
                           "- backend: nccl\n"
                           "  op: allreduce\n"
                           "  gpuDirectRdma: true\n";

/* Lines as NCCL 2.21.5 writes them (tests/fixtures/nccl-logs/ib-gdr.log). */
#define L_VERSION "node-a:11:11 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
#define L_HCAS                                                                                     \
    "node-a:11:30 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB; OOB "                \
    "eth0:10.0.0.1<0>\n"
#define L_IB "node-a:11:30 [0] NCCL INFO Using network IB\n"
#define L_START                                                                                    \
    "node-a:11:30 [0] NCCL INFO ncclCommInitRank comm 0x55 rank 0 nranks 2 cudaDev 0 nvmlDev 0 "   \
    "busId 18000 commId 0x5e - Init START\n"
#define L_CHAN                                                                                     \
    "node-a:11:30 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IB/0/GDRDMA\n"
#define L_DONE                                                                                     \
    "node-a:11:30 [0] NCCL INFO ncclCommInitRank comm 0x55 rank 0 nranks 2 cudaDev 0 nvmlDev 0 "   \
    "busId 18000 commId 0x5e - Init COMPLETE\n"

struct fx {
    char dir[64];
    struct pf_watch w;
};

static void put(const struct fx *x, const char *name, const char *text, const char *mode)
{
    char p[256];
    snprintf(p, sizeof(p), "%s/%s", x->dir, name);
    FILE *f = fopen(p, mode);
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int setup(void **state)
{
    struct fx *x = calloc(1, sizeof(*x));
    snprintf(x->dir, sizeof(x->dir), "/tmp/pf-watch-unit.XXXXXX");
    if (!mkdtemp(x->dir)) return -1;
    put(x, PF_WATCH_GATE_FILE, GATE, "w");
    struct pf_watch_opts o = {.dir = x->dir, .stall_s = 0};
    if (pf_watch_open(&x->w, &o) < 0) return -1;
    *state = x;
    return 0;
}

static int teardown(void **state)
{
    struct fx *x = *state;
    pf_watch_close(&x->w);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", x->dir);
    if (system(cmd) != 0) return -1;
    free(x);
    return 0;
}

static bool has(struct pf_watch *w, const char *code)
{
    for (size_t i = 0; i < w->nfindings; i++)
        if (strcmp(w->findings[i].code, code) == 0) return true;
    return false;
}

static void test_gate_read(void **state)
{
    struct fx *x = *state;
    assert_true(x->w.gate.found);
    assert_string_equal(x->w.gate.version, "2.21.5");
    assert_string_equal(x->w.gate.network, "IB");
    assert_int_equal(x->w.gate.hcas, 2);
    assert_int_equal(x->w.gate.gdr, 1);
}

static void test_gate_refused(void **state)
{
    (void)state;
    struct pf_watch_gate g;
    assert_int_equal(pf_watch_gate_parse(&g, "t", "apiVersion: v1\nkind: Pod\n", 25), PF_EUSAGE);
    assert_false(g.found);
    const char alias[] = "apiVersion: preflight/v1\nkind: Verdict\na: &x [1]\nb: *x\n";
    assert_int_equal(pf_watch_gate_parse(&g, "t", alias, sizeof(alias) - 1), PF_EUSAGE);
    char deep[400];
    memset(deep, '[', 200);
    memset(deep + 200, ']', 200);
    assert_int_equal(pf_watch_gate_parse(&g, "t", deep, sizeof(deep)), PF_EUSAGE);
    assert_non_null(strstr(g.error, "deeper"));
    assert_int_equal(pf_watch_gate_parse(&g, "t", "{{{", 3), PF_EUSAGE);
    /* a verdict without NCCL facts: found, every fact unknown */
    const char bare[] = "apiVersion: preflight/v1\nkind: Verdict\nverdict: pass\n";
    assert_int_equal(pf_watch_gate_parse(&g, "t", bare, sizeof(bare) - 1), 0);
    assert_true(g.found);
    assert_int_equal(g.hcas, -1);
    assert_int_equal(g.gdr, -1);
    assert_string_equal(g.version, "");
}

/* A line written in two pieces is read once, whole, when its newline comes. */
static void test_partial_line(void **state)
{
    struct fx *x = *state;
    put(x, "nccl.node-a.11", "node-a:11:11 [0] NCCL INFO NCCL vers", "w");
    pf_watch_poll(&x->w);
    assert_int_equal(x->w.nfiles, 1);
    assert_int_equal(x->w.lines, 0);
    put(x, "nccl.node-a.11", "ion 2.21.5+cuda12.4\n", "a");
    pf_watch_poll(&x->w);
    assert_int_equal(x->w.lines, 1);
    assert_int_equal(x->w.log.n, 1);
    assert_string_equal(x->w.log.v[0].version, "2.21.5");
    assert_false(has(&x->w, "trainer-nccl-version"));
}

/* A file that appears after the folder was first read is followed from its first line. */
static void test_late_file(void **state)
{
    struct fx *x = *state;
    pf_watch_poll(&x->w);
    assert_int_equal(x->w.nfiles, 0);
    put(x, "nccl.node-a.11", L_VERSION L_HCAS L_IB, "w");
    pf_watch_poll(&x->w);
    assert_int_equal(x->w.nfiles, 1);
    assert_int_equal(x->w.lines, 3);
    assert_string_equal(x->w.log.v[0].network, "IB");
}

/* Rotation: the file is renamed away (its last line written after the rename still counts) and
 * a new file takes its name; both are read whole, in order. */
static void test_rotation(void **state)
{
    struct fx *x = *state;
    put(x, "nccl.node-a.11", L_VERSION, "w");
    pf_watch_poll(&x->w);
    char a[256], b[256];
    snprintf(a, sizeof(a), "%s/nccl.node-a.11", x->dir);
    snprintf(b, sizeof(b), "%s/nccl.node-a.11.1", x->dir);
    assert_int_equal(rename(a, b), 0);
    put(x, "nccl.node-a.11.1", L_HCAS, "a");                   /* the writer's last line */
    put(x, "nccl.node-a.11", L_IB L_START L_CHAN L_DONE, "w"); /* the new file */
    pf_watch_poll(&x->w);
    assert_int_equal(x->w.files[0].rotations, 1);
    assert_int_equal(x->w.log.v[0].hcas.n, 2);
    assert_int_equal(x->w.log.v[0].init_complete, 1);
    assert_true(pf_watch_all_complete(&x->w));
    assert_int_equal(x->w.nfindings, 0); /* as the gate measured: IB, 2 NICs, GDR, 2.21.5 */
}

/* Truncation (copytruncate, or the file opened again with "w"): read again from the start. */
static void test_truncation(void **state)
{
    struct fx *x = *state;
    put(x, "nccl.node-a.11", L_VERSION L_HCAS L_IB L_START, "w");
    pf_watch_poll(&x->w);
    assert_int_equal(x->w.lines, 4);
    put(x, "nccl.node-a.11", L_DONE, "w");
    pf_watch_poll(&x->w);
    assert_int_equal(x->w.files[0].truncations, 1);
    assert_int_equal(x->w.lines, 5);
    assert_int_equal(x->w.log.v[0].init_complete, 1);
}

/* A 100 MB line: kept to its first 4 KiB, the rest skipped in bounded memory; the lines after
 * it are read as usual. */
static void test_huge_line(void **state)
{
    struct fx *x = *state;
    char p[256];
    snprintf(p, sizeof(p), "%s/nccl.node-a.11", x->dir);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    const char head[] = "node-a:11:11 [0] NCCL INFO NCCL version 2.19.3+cuda12.2 ";
    assert_int_equal(write(fd, head, sizeof(head) - 1), (ssize_t)sizeof(head) - 1);
    size_t chunk = 1 << 20;
    char *junk = malloc(chunk);
    memset(junk, 'x', chunk);
    for (int i = 0; i < 100; i++)
        assert_int_equal(write(fd, junk, chunk), (ssize_t)chunk);
    free(junk);
    assert_int_equal(write(fd, "\n" L_IB, 1 + strlen(L_IB)), (ssize_t)(1 + strlen(L_IB)));
    close(fd);
    for (int i = 0; i < 64 && x->w.lines < 2; i++)
        pf_watch_poll(&x->w);
    assert_int_equal(x->w.lines, 2);
    assert_int_equal(x->w.cut_lines, 1);
    assert_true(x->w.files[0].have <= PF_NCCLLOG_LINE_MAX);
    assert_string_equal(x->w.log.v[0].version, "2.19.3");
    assert_string_equal(x->w.log.v[0].network, "IB");
    assert_true(has(&x->w, "trainer-nccl-version"));
}

/* Socket where the gate measured IB, fewer NICs, no GDRDMA: each at the line that decides it. */
static void test_judged_at_deciding_line(void **state)
{
    struct fx *x = *state;
    struct pf_watch_file *f = pf_watch_file_add(&x->w, "fed");
    const char *a = "node-b:12:12 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n"
                    "node-b:12:40 [0] NCCL INFO NET/IB : No device found.\n"
                    "node-b:12:40 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.2<0>\n";
    pf_watch_feed(&x->w, f, a, strlen(a));
    assert_int_equal(x->w.nfindings, 0);
    const char *b = "node-b:12:40 [0] NCCL INFO Using network Socket\n";
    pf_watch_feed(&x->w, f, b, strlen(b));
    assert_int_equal(x->w.nfindings, 1);
    assert_string_equal(x->w.findings[0].code, "trainer-socket-fallback");
    assert_non_null(strstr(x->w.findings[0].proc, "node-b:12"));
    const char *c =
        "node-c:13:13 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB; OOB eth0:10.0.0.3<0>\n"
        "node-c:13:13 [0] NCCL INFO Using network IB\n";
    pf_watch_feed(&x->w, f, c, strlen(c));
    assert_true(has(&x->w, "trainer-fewer-nics"));
    assert_false(has(&x->w, "trainer-no-gdr"));
    const char *d =
        "node-c:13:13 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IB/0\n";
    pf_watch_feed(&x->w, f, d, strlen(d));
    assert_true(has(&x->w, "trainer-no-gdr"));
    size_t n = x->w.nfindings;
    pf_watch_feed(&x->w, f, d, strlen(d)); /* once per process and code */
    assert_int_equal(x->w.nfindings, n);
}

/* Two processes expected, one never writes: the stall says so, and names the step the other
 * reached. */
static void test_stall_missing_process(void **state)
{
    struct fx *x = *state;
    x->w.o.stall_s = 0.2;
    x->w.o.processes = 2;
    put(x, "nccl.node-a.11", L_VERSION L_HCAS L_IB L_START, "w");
    pf_watch_poll(&x->w);
    assert_false(has(&x->w, "init-stall"));
    usleep(300000);
    pf_watch_judge_clock(&x->w);
    assert_true(has(&x->w, "init-stall"));
    const char *m = x->w.findings[x->w.nfindings - 1].message;
    assert_non_null(strstr(m, "1 of 2 expected processes wrote no NCCL line"));
    assert_non_null(strstr(m, "communicator: 1 (node-a:11 (rank 0))"));
}

/* Every process completed: no stall, however long it waits. */
static void test_no_stall_when_complete(void **state)
{
    struct fx *x = *state;
    x->w.o.stall_s = 0.1;
    put(x, "nccl.node-a.11", L_VERSION L_HCAS L_IB L_START L_CHAN L_DONE, "w");
    pf_watch_poll(&x->w);
    usleep(200000);
    pf_watch_judge_clock(&x->w);
    assert_int_equal(x->w.nfindings, 0);
    struct pf_verdict v;
    pf_verdict_init(&v);
    struct pf_check *c = pf_verdict_add_check(&v, "watch");
    pf_watch_check(c, &x->w);
    pf_verdict_finalize(&v, NULL, NULL);
    assert_int_equal(v.verdict, PF_PASS);
    const struct pf_node *ps = pf_node_get(c->evidence, "processes");
    assert_non_null(ps);
    pf_verdict_free(&v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_gate_read, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gate_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_partial_line, setup, teardown),
        cmocka_unit_test_setup_teardown(test_late_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rotation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_truncation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_huge_line, setup, teardown),
        cmocka_unit_test_setup_teardown(test_judged_at_deciding_line, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stall_missing_process, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_stall_when_complete, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
