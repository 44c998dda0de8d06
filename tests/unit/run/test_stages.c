/* The stage loop of pkg/run (pf_run_stages) with test stages in place of the real ones: the
 * order, the context's deadline every stage is handed, the deadline that makes later stages
 * skip with a reason, a failing stage that stops the table, and the guard's message naming
 * the stage under way (the real guard, in a child process that a signal ends). The waits'
 * table (pkg/run/budget.c) against docs/design.md and at a few deadlines. No sockets; no
 * timing decides a result: the deadline is moved by the stages themselves, and a wait is
 * checked between two readings of the clock. Tests run from tests/, so the repository's root
 * is "..". */
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "../../../pkg/checks/checks.h"
#include "../../../pkg/run/run.h"
#include "../helpers/helpers.h"

/* What the test stages saw. */
struct seen {
    char order[8][32];
    int n;
    double ctx_deadline; /* the context's deadline the last stage saw */
};

static struct pf_run_opts opts;

/* A run with no environment (verdict at path, or none), the test stages' record as its user
 * data. */
static int open_run(struct pf_run *R, struct seen *s, const char *path)
{
    memset(&opts, 0, sizeof(opts));
    static char *env[] = {NULL};
    opts.environ_ = env;
    opts.verdict_path = path;
    opts.guard = path != NULL;
    int r = pf_run_open(R, &opts);
    memset(s, 0, sizeof(*s));
    R->user = s;
    return r;
}

/* The fixture of every test but the guard's: such a run, closed after the test. */
struct fixture {
    struct pf_run R;
    struct seen s;
};

static int setup(void **state)
{
    struct fixture *x = calloc(1, sizeof(*x));
    if (!x || open_run(&x->R, &x->s, NULL) < 0) {
        free(x);
        return -1;
    }
    *state = x;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *x = *state;
    pf_run_close(&x->R);
    free(x);
    return 0;
}

/* A row of a stage table: stage id feeding check, no message of its own, not always run. */
static struct pf_run_stage stage(const char *id, const char *check, pf_run_fn fn)
{
    return (struct pf_run_stage){id, check, NULL, false, fn};
}

static int note(struct pf_run *R)
{
    struct seen *s = R->user;
    snprintf(s->order[s->n++], sizeof(s->order[0]), "%s", R->stage->id);
    s->ctx_deadline = R->ctx.deadline;
    return 0;
}

static int overrun(struct pf_run *R)
{
    note(R);
    R->deadline = pf_now() - 1; /* this stage ran past the run's deadline */
    return 0;
}

static int fails(struct pf_run *R)
{
    note(R);
    return pf_err_set(PF_EUSAGE, "stage %s: bad input", R->stage->id);
}

/* A stage that moves the context's deadline, as the GPU stage does: the next is handed its
 * own again. */
static int moves_ctx(struct pf_run *R)
{
    note(R);
    R->ctx.deadline = 1;
    return 0;
}

static void test_order(void **state)
{
    struct fixture *x = *state;
    struct pf_run *R = &x->R;
    const struct seen *s = &x->s;
    const struct pf_run_stage t[] = {
        stage("one", "preflight", note),
        stage("two", "rendezvous", note),
        stage("three", "collective.tcp", note),
    };
    assert_int_equal(pf_run_stages(R, t, 3), 0);
    assert_int_equal(s->n, 3);
    assert_string_equal(s->order[0], "one");
    assert_string_equal(s->order[1], "two");
    assert_string_equal(s->order[2], "three");
    assert_int_equal(R->ntiming, 3);
    for (int i = 0; i < 3; i++) {
        assert_string_equal(R->timing[i].id, t[i].id);
        assert_int_equal(R->timing[i].state, PF_RUN_DONE);
        assert_true(R->timing[i].seconds >= 0);
    }
    /* no deadline: the context has none either */
    assert_true(s->ctx_deadline == 0);
    /* no check was touched by the loop itself */
    assert_null(pf_verdict_find_check(&R->verdict, "rendezvous"));
    struct pf_buf b;
    pf_buf_init(&b, 4096);
    pf_run_timing_text(R, &b);
    assert_non_null(strstr(pf_buf_str(&b), "one "));
    assert_non_null(strstr(pf_buf_str(&b), ", three "));
    pf_buf_free(&b);
}

/* Every stage is handed the waits' end as the context's deadline, even after a stage moved
 * it; pf_ctx_left counts down to it. */
static void test_ctx_deadline(void **state)
{
    struct fixture *x = *state;
    struct pf_run *R = &x->R;
    const struct seen *s = &x->s;
    R->deadline = pf_now() + 1000;
    const struct pf_run_stage t[] = {stage("gpu", "collective.nccl", moves_ctx),
                                     stage("summary", "collective.tcp", note)};
    assert_int_equal(pf_run_stages(R, t, 2), 0);
    assert_true(s->ctx_deadline == R->deadline - PF_RUN_AFTER_S);
    assert_true(pf_run_waits_end(R) == R->deadline - PF_RUN_AFTER_S);
    double left = pf_ctx_left(&R->ctx, 10);
    assert_true(left > 0 && left <= 1000 - PF_RUN_AFTER_S - 10);
    /* past: nothing left; none: the caller's own bound alone (a large number) */
    R->ctx.deadline = pf_now() - 1;
    assert_true(pf_ctx_left(&R->ctx, 0) == 0);
    R->ctx.deadline = 0;
    assert_true(pf_ctx_left(&R->ctx, 0) >= 1e8);
}

/* The waits at a few run deadlines: (deadline in s, 0: none) → each wait's seconds from
 * now, in pf_run_waits' order; < 0: the waits' end itself. */
static void test_waits_at_deadlines(void **state)
{
    struct fixture *x = *state;
    struct pf_run *R = &x->R;
    const char *ids[] = {"meet.reserve", "tcp.mesh",    "tcp.allreduce",
                         "tcp.probe",    "rails.probe", "report.push"};
    const struct {
        double deadline;
        double want[6];
    } rows[] = {
        /* 9.5 s left to the waits' end */
        {10, {3, 3, 3.8, 2, 3, 4.75}},
        {60, {17.85, 11.9, 23.8, 2, 4.76, 5}},
        {600, {60, 30, 239.8, 10, 15, 5}},
        {0, {60, 30, 300, 10, 15, 5}},
        /* 1.5 s left: every minimum is past the end (the push has none: half of what is left) */
        {2, {-1, -1, -1, -1, -1, 0.75}},
    };
    assert_int_equal(pf_run_waits_len, 6);
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
        for (size_t k = 0; k < 6; k++) {
            double before = pf_now();
            R->deadline = rows[i].deadline > 0 ? before + rows[i].deadline : 0;
            double d = pf_run_wait(R, ids[k]);
            double after = pf_now(), want = rows[i].want[k];
            if (want < 0) {
                if (d != pf_run_waits_end(R))
                    fail_msg("at %.0f s, %s: %.6f, not the waits' end", rows[i].deadline, ids[k],
                             d - before);
            } else if (d < before + want - 1e-6 || d > after + want + 1e-6) {
                fail_msg("at %.0f s, %s: %.6f s, want %.2f", rows[i].deadline, ids[k], d - before,
                         want);
            }
        }
}

/* docs/design.md's table of waits ("| `id` | 30% | 3 s | 60 s | what |") is pf_run_waits, row
 * for row, both ways. */
static void test_waits_documented(void **state)
{
    (void)state;
    char *text = th_slurp("../docs/design.md", NULL);
    if (!text) fail_msg("docs/design.md: cannot be read");
    bool seen[32] = {false};
    assert_true(pf_run_waits_len <= 32);
    size_t rows = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char id[64];
        double pct, lo, hi;
        if (sscanf(line, "| `%63[^`]` | %lf%% | %lf s | %lf s |", id, &pct, &lo, &hi) != 4)
            continue;
        rows++;
        size_t k = 0;
        while (k < pf_run_waits_len && strcmp(pf_run_waits[k].id, id) != 0)
            k++;
        if (k == pf_run_waits_len) fail_msg("docs/design.md has wait %s, pf_run_waits not", id);
        const struct pf_run_wait *w = &pf_run_waits[k];
        if (fabs(w->share * 100 - pct) > 1e-9 || w->min != lo || w->max != hi)
            fail_msg("wait %s: docs/design.md says %g%% (%g-%g s), pf_run_waits %g%% (%g-%g s)", id,
                     pct, lo, hi, w->share * 100, w->min, w->max);
        if (seen[k]) fail_msg("docs/design.md has wait %s twice", id);
        seen[k] = true;
    }
    for (size_t k = 0; k < pf_run_waits_len; k++)
        if (!seen[k]) fail_msg("pf_run_waits has %s, docs/design.md not", pf_run_waits[k].id);
    assert_int_equal(rows, pf_run_waits_len);
    free(text);
}

static void test_deadline_skips_later_stages(void **state)
{
    struct fixture *x = *state;
    struct pf_run *R = &x->R;
    const struct seen *s = &x->s;
    R->deadline = pf_now() + 1000;
    /* collective.nccl already says more: the skip must not overwrite it */
    struct pf_check *gpu = pf_verdict_add_check(&R->verdict, "collective.nccl");
    pf_check_add_finding(gpu, "timeout", PF_FAIL, NULL, "the GPU stage said this first");
    const struct pf_run_stage t[] = {
        stage("local", "preflight", note),
        stage("meet", "rendezvous", overrun),
        stage("collective.tcp", "collective.tcp", note),
        stage("gpu", "collective.nccl", note),
        {"report", "preflight", NULL, true, note},
    };
    assert_int_equal(pf_run_stages(R, t, 5), 0);
    /* local, meet and the report ran; the two between did not */
    assert_int_equal(s->n, 3);
    assert_string_equal(s->order[0], "local");
    assert_string_equal(s->order[1], "meet");
    assert_string_equal(s->order[2], "report");
    assert_int_equal(R->timing[1].state, PF_RUN_DONE);
    assert_int_equal(R->timing[2].state, PF_RUN_SKIPPED);
    assert_int_equal(R->timing[3].state, PF_RUN_SKIPPED);
    assert_int_equal(R->timing[4].state, PF_RUN_DONE);
    assert_string_equal(R->timing[2].why,
                        "the deadline (--timeout) passed during stage meet, before stage "
                        "collective.tcp");
    /* the skipped stage's check says why */
    struct pf_check *tcp = pf_verdict_find_check(&R->verdict, "collective.tcp");
    assert_non_null(tcp);
    assert_int_equal(tcp->status, PF_SKIP);
    assert_string_equal(tcp->message, "not run: the deadline (--timeout) passed during stage "
                                      "meet, before stage collective.tcp");
    /* one that had its own findings keeps them and its message */
    gpu = pf_verdict_find_check(&R->verdict, "collective.nccl");
    assert_int_equal(gpu->nfindings, 1);
    assert_int_not_equal(gpu->status, PF_SKIP);
    assert_null(gpu->message);
    /* the timing text names the skipped stages */
    struct pf_buf b;
    pf_buf_init(&b, 4096);
    pf_run_timing_text(R, &b);
    assert_non_null(strstr(pf_buf_str(&b), "collective.tcp skipped, gpu skipped, report "));
    pf_buf_free(&b);
}

static void test_deadline_before_the_first(void **state)
{
    struct fixture *x = *state;
    struct pf_run *R = &x->R;
    const struct seen *s = &x->s;
    R->deadline = pf_now() - 1;
    const struct pf_run_stage t[] = {stage("meet", "rendezvous", note)};
    assert_int_equal(pf_run_stages(R, t, 1), 0);
    assert_int_equal(s->n, 0);
    assert_string_equal(R->timing[0].why, "the deadline (--timeout) passed before stage meet");
    struct pf_check *c = pf_verdict_find_check(&R->verdict, "rendezvous");
    assert_non_null(c);
    assert_int_equal(c->status, PF_SKIP);
}

static void test_failure_stops_the_table(void **state)
{
    struct fixture *x = *state;
    struct pf_run *R = &x->R;
    const struct seen *s = &x->s;
    const struct pf_run_stage t[] = {
        stage("one", "preflight", note),
        stage("bad", "preflight", fails),
        stage("three", "rendezvous", note),
    };
    assert_int_equal(pf_run_stages(R, t, 3), PF_EUSAGE);
    assert_string_equal(pf_err_msg(), "stage bad: bad input");
    assert_int_equal(s->n, 2);
    assert_int_equal(R->ntiming, 2);
    assert_int_equal(R->timing[1].state, PF_RUN_FAILED);
}

/* The guard: a child runs a table under the real guard; its second stage is stopped by
 * SIGTERM, and the verdict the guard writes names that stage's check and message. */
static int stopped(struct pf_run *R)
{
    (void)R;
    raise(SIGTERM);
    pause();
    return 0;
}

static void test_guard_names_the_stage(void **state)
{
    (void)state;
    char dir[] = "/tmp/pf-run-guard.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof(path), "%s/verdict.yaml", dir);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct pf_run R;
        struct seen s;
        if (open_run(&R, &s, path) < 0) _exit(90);
        const struct pf_run_stage t[] = {
            {"first", "rendezvous", "meeting the test pods", false, note},
            {"second", "collective.tcp", "running the test all-reduce", false, stopped},
        };
        pf_run_stages(&R, t, 2);
        _exit(91); /* not reached: the guard ends the process */
    }
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_not_equal(WEXITSTATUS(st), 90);
    assert_int_not_equal(WEXITSTATUS(st), 91);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    assert_non_null(strstr(buf, "id: collective.tcp"));
    assert_non_null(strstr(buf, "interrupted"));
    assert_non_null(strstr(buf, "while running the test all-reduce"));
    assert_null(strstr(buf, "while meeting the test pods"));
    unlink(path);
    rmdir(dir);
}

/* stages (space-separated ids) has id */
static bool has_word(const char *stages, const char *id)
{
    size_t n = strlen(id);
    for (const char *p = stages; (p = strstr(p, id)); p += n)
        if ((p == stages || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0')) return true;
    return false;
}

/* The stage checks are in the one table of checks (pkg/checks/checks.c): the check every
 * stage feeds (the one the guard names) has an entry naming that stage, and every stage an
 * entry names is one of `run` (the report stage feeds report.* too, under "preflight"). */
static void test_stage_checks_in_the_checks_table(void **state)
{
    (void)state;
    const struct {
        const struct pf_run_stage *t;
        size_t n;
    } tables[] = {{pf_run_run_table, pf_run_run_table_len},
                  {pf_run_check_table, pf_run_check_table_len}};
    for (size_t k = 0; k < 2; k++)
        for (size_t i = 0; i < tables[k].n; i++) {
            const struct pf_run_stage *st = &tables[k].t[i];
            const struct pf_check_def *d = NULL;
            for (size_t j = 0; j < pf_checks_count; j++)
                if (strcmp(pf_checks_table[j].id, st->check) == 0) d = &pf_checks_table[j];
            if (!d) fail_msg("stage %s feeds %s, which pf_checks_table lacks", st->id, st->check);
            if (!(d->modes & PF_MODE_STAGE) || !has_word(d->stages, st->id))
                fail_msg("stage %s feeds %s, whose entry does not name it", st->id, st->check);
        }
    size_t stage_checks = 0;
    for (size_t j = 0; j < pf_checks_count; j++) {
        const struct pf_check_def *d = &pf_checks_table[j];
        if (!(d->modes & PF_MODE_STAGE)) continue;
        stage_checks++;
        char words[128];
        snprintf(words, sizeof(words), "%s", d->stages);
        char *save = NULL;
        for (char *w = strtok_r(words, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
            bool found = false;
            for (size_t i = 0; i < pf_run_run_table_len; i++)
                found = found || strcmp(pf_run_run_table[i].id, w) == 0;
            for (size_t i = 0; i < pf_run_check_table_len; i++)
                found = found || strcmp(pf_run_check_table[i].id, w) == 0;
            if (!found)
                fail_msg("%s names stage %s, which neither `run` nor `check` has", d->id, w);
        }
    }
    /* rendezvous, collective.tcp, net.rails, collective.nccl, rdma.counters, report.*,
     * preflight */
    assert_true(stage_checks >= 9);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_order, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ctx_deadline, setup, teardown),
        cmocka_unit_test_setup_teardown(test_waits_at_deadlines, setup, teardown),
        cmocka_unit_test(test_waits_documented),
        cmocka_unit_test_setup_teardown(test_deadline_skips_later_stages, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deadline_before_the_first, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failure_stops_the_table, setup, teardown),
        cmocka_unit_test(test_guard_names_the_stage),
        cmocka_unit_test(test_stage_checks_in_the_checks_table),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
