/* The meet stage of pkg/run (run_stage_meet, meet.c): it finds who this pod is, hands the
 * rendezvous its setup, and names how the meeting ended in the verdict (meet_ends): every
 * way it ends gives the check `rendezvous` one code and status, and says what becomes of
 * `collective.tcp`. A world of one and a pod whose identity cannot be found need no
 * socket. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../../pkg/run/internal.h"

static struct pf_run_opts opts;

/* Opens a run whose environment is env (NULL-terminated), runs the meet stage, and leaves
 * the meeting open in pods (the caller closes it with close_meet). */
static void meet(struct pf_run *R, struct run_pods *pods, char **env)
{
    memset(&opts, 0, sizeof(opts));
    opts.environ_ = env;
    opts.identity.rank = -1;
    opts.identity.world_size = -1;
    assert_int_equal(pf_run_open(R, &opts), 0);
    memset(pods, 0, sizeof(*pods));
    pods->met = RUN_NOT_MET;
    R->pods = pods;
    assert_int_equal(run_stage_meet(R), 0);
}

static void close_meet(struct pf_run *R, struct run_pods *pods)
{
    pf_rdv_close(pods->rdv);
    run_pods_free(pods);
    R->pods = NULL;
    pf_run_close(R);
}

/* the index of check id in the verdict's list, -1 when absent */
static int check_at(const struct pf_run *R, const char *id)
{
    for (size_t i = 0; i < R->verdict.nchecks; i++)
        if (strcmp(R->verdict.checks[i].id, id) == 0) return (int)i;
    return -1;
}

/* a world of one: the rendezvous check passes with its message and the identity's evidence,
 * collective.tcp is skipped, the pod's rank and world size are recorded */
static void test_world_of_one(void **state)
{
    (void)state;
    static char e0[] = "RANK=0", e1[] = "WORLD_SIZE=1", e2[] = "MASTER_ADDR=127.0.0.1";
    static char e3[] = "PREFLIGHT_PODINFO=/nonexistent/podinfo"; /* not this host's */
    static char *env[] = {e0, e1, e2, e3, NULL};
    struct pf_run R;
    struct run_pods pods;
    meet(&R, &pods, env);
    assert_int_equal(pods.met, RUN_ALONE);
    int a = check_at(&R, "rendezvous"), b = check_at(&R, "collective.tcp");
    assert_true(a >= 0 && b == a + 1); /* rendezvous, then collective.tcp */
    const struct pf_check *c = &R.verdict.checks[a];
    assert_int_equal(c->nfindings, 0);
    assert_string_equal(c->message, "world of one: no other pod to meet");
    const struct pf_node *id = pf_node_get(c->evidence, "identity");
    assert_non_null(id);
    assert_non_null(pf_node_get_str(id, "rule"));
    assert_int_equal(pf_node_get(c->evidence, "worldSize")->i, 1);
    assert_string_equal(pf_node_get_str(c->evidence, "auth"), "none");
    const struct pf_check *t = &R.verdict.checks[b];
    assert_int_equal(t->status, PF_SKIP);
    assert_string_equal(t->message, "world of one: no other pod to all-reduce with");
    assert_int_equal(pf_node_get(R.verdict.pod, "rank")->i, 0);
    assert_int_equal(pf_node_get(R.verdict.pod, "worldSize")->i, 1);
    assert_null(run_fleet(&R)); /* no rank 0 that serves: no fleet */
    close_meet(&R, &pods);
}

/* an identity that cannot be found: identity-unknown names the variable, and the all-reduce
 * is skipped saying why */
static void test_identity_unknown(void **state)
{
    (void)state;
    static char e0[] = "RANK=two", e1[] = "WORLD_SIZE=4", e2[] = "MASTER_ADDR=127.0.0.1";
    static char e3[] = "PREFLIGHT_PODINFO=/nonexistent/podinfo"; /* not this host's */
    static char *env[] = {e0, e1, e2, e3, NULL};
    struct pf_run R;
    struct run_pods pods;
    meet(&R, &pods, env);
    assert_int_equal(pods.met, RUN_NOT_MET);
    int a = check_at(&R, "rendezvous");
    assert_true(a >= 0);
    const struct pf_check *c = &R.verdict.checks[a];
    assert_true(pf_check_has_finding(c, "identity-unknown"));
    assert_int_equal(c->findings[0].status, PF_FAIL);
    assert_non_null(strstr(c->findings[0].message, "RANK"));
    assert_null(pf_node_get(c->evidence, "identity"));
    const struct pf_check *t = &R.verdict.checks[check_at(&R, "collective.tcp")];
    assert_int_equal(t->status, PF_SKIP);
    assert_string_equal(t->message, "no rendezvous: this pod's identity is unknown");
    assert_null(pf_node_get(R.verdict.pod, "rank"));
    close_meet(&R, &pods);
}

/* every way the meeting ends has one row: the code the verdict names (documented: the
 * explain test collects them from meet.c), a failing status for every code, and a skip of
 * collective.tcp wherever there is no run to all-reduce in */
static void test_meet_ends(void **state)
{
    (void)state;
    static const struct {
        enum pf_rdv_end end;
        enum pf_wire_refusal refusal;
        const char *code; /* NULL: no finding */
        bool tcp_skipped;
    } want[] = {
        {PF_RDV_END_MET, 0, NULL, false},
        {PF_RDV_END_ALONE, 0, NULL, true},
        {PF_RDV_END_NOT_MEMBER, 0, NULL, true},
        {PF_RDV_END_NO_CRYPTO, 0, NULL, false},
        {PF_RDV_END_NO_IDENTITY, 0, "identity-unknown", true},
        {PF_RDV_END_LISTEN_FAILED, 0, "listen-failed", true},
        {PF_RDV_END_REJECTED, PF_WIRE_REFUSED_TOKEN, "auth-failed", true},
        {PF_RDV_END_REJECTED, PF_WIRE_REFUSED_RUN, "version-mismatch", true},
        {PF_RDV_END_REJECTED, PF_WIRE_REFUSED_DUPLICATE, "duplicate-rank", true},
        {PF_RDV_END_REJECTED, PF_WIRE_REFUSED_WORLD, "world-size-mismatch", true},
        {PF_RDV_END_REJECTED, PF_WIRE_REFUSED_LATE, "missing-ranks", true},
        {PF_RDV_END_REJECTED, PF_WIRE_REFUSED_JOB, "job-mismatch", true},
        {PF_RDV_END_UNVERIFIED, 0, "auth-failed", true},
        {PF_RDV_END_NO_START, 0, "timeout", true},
        {PF_RDV_END_UNAUTHENTICATED, 0, "timeout", true}, /* not auth-failed: no proof */
        {PF_RDV_END_UNREACHABLE, 0, "missing-ranks", true},
        {PF_RDV_END_OTHER_VERSION, 0, "version-mismatch", true},
        {PF_RDV_END_BAD_ANSWER, 0, "protocol-error", true}, /* not timeout, not auth-failed */
    };
    for (size_t i = 0; i < PF_ARRAY_LEN(want); i++) {
        struct run_meet_end e;
        if (!run_meet_end_of(want[i].end, want[i].refusal, &e))
            fail_msg("end %d: no row in meet_ends", (int)want[i].end);
        if (!want[i].code) {
            if (e.code) fail_msg("end %d: code %s, none expected", (int)want[i].end, e.code);
        } else if (!e.code || strcmp(e.code, want[i].code) != 0 || e.st != PF_FAIL) {
            fail_msg("end %d: code %s, %s expected", (int)want[i].end, e.code ? e.code : "none",
                     want[i].code);
        }
        if ((e.tcp != NULL) != want[i].tcp_skipped)
            fail_msg("end %d: collective.tcp %s", (int)want[i].end,
                     e.tcp ? "skipped" : "not skipped");
        assert_int_equal(e.blame_root, want[i].end == PF_RDV_END_UNREACHABLE);
    }
    struct run_meet_end e;
    assert_false(run_meet_end_of(PF_RDV_END_NONE, 0, &e)); /* not opened: nothing to say */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_meet_ends),
        cmocka_unit_test(test_world_of_one),
        cmocka_unit_test(test_identity_unknown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
