/* rendezvous: JOIN admission at rank 0 (admit.c) without sockets. Rank 0 of a world of 4
 * takes JOINs on connections that are not connected (fd -1): what it admits, what it
 * refuses with which REJECT word, a pod that joins again, and JOINs that fail the token check,
 * which change nothing (docs/threat-model-rendezvous.md). What rank 0 recorded is read as
 * facts: the refusals it believed (pkg/fleet judges them), its counters, the member table. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../pkg/rendezvous/internal.h"

#define WORLD 4

struct rig {
    struct rdv_session S;
};

/* The refusals rank 0 believed, listed for pkg/fleet. */
static size_t nrefusals(struct rig *g)
{
    return g->S.nrefusals;
}

static void rig_open(struct rig *g, bool auth, size_t nconn)
{
    memset(g, 0, sizeof(*g));
    struct rdv_session *S = &g->S;
    rdv_session_init(S);
    S->auth = auth;
    S->token = auth ? "t0ken" : NULL;
    S->world = WORLD;
    pf_strcpy(S->pod, sizeof(S->pod), "trainer-0");
    rdv_members_init(S);
    S->m[0].state = PF_RDV_JOINED;
    S->nsc = nconn;
    S->sc = calloc(nconn, sizeof(*S->sc));
    assert_non_null(S->sc);
    for (size_t i = 0; i < nconn; i++) {
        pf_rdv_conn_init(&S->sc[i].c, -1, "test", false);
        S->sc[i].used = true;
        S->sc[i].rank = -1;
    }
}

static void rig_close(struct rig *g)
{
    rdv_session_free(&g->S);
}

/* connection i sends a JOIN claiming rank of world, from pod; mac: 0 none, 1 good, 2 bad,
 * 3 good but the JOIN names no run (an older preflight) */
static void join(struct rig *g, size_t i, long long rank, long long world, const char *pod, int mac)
{
    struct pf_buf b;
    pf_buf_init(&b, 1 << 16);
    if (mac != 3) pf_wire_put(&b, "run", g->S.join_run, PF_WIRE_NONCE);
    pf_wire_put_int(&b, "rank", rank);
    pf_wire_put_int(&b, "world", world);
    pf_wire_put_str(&b, "pod", pod);
    pf_wire_put_str(&b, "node", "node-x");
    pf_wire_put_str(&b, "env", "NCCL_DEBUG=INFO");
    struct pf_rdv_msg msg;
    memset(&msg, 0, sizeof(msg));
    msg.type = PF_WIRE_JOIN;
    msg.had_mac = mac != 0;
    msg.mac_ok = mac == 1 || mac == 3;
    assert_int_equal(pf_wire_fields_decode(&msg.f, (const uint8_t *)b.data, b.len), 0);
    rdv_admit(&g->S, i, &msg);
    pf_wire_fields_free(&msg.f);
    pf_buf_free(&b);
}

/* a refusal with the REJECT word code is on the list */
static bool has_code(struct rig *g, const char *code)
{
    for (size_t i = 0; i < g->S.nrefusals; i++)
        if (strcmp(pf_wire_refusal_code(g->S.refusals[i].why), code) == 0) return true;
    return false;
}

static void test_admitted(void **state)
{
    (void)state;
    struct rig g;
    rig_open(&g, false, 1);
    join(&g, 0, 2, WORLD, "trainer-2", 0);
    assert_int_equal(g.S.sc[0].rank, 2);
    assert_int_equal(g.S.m[2].state, PF_RDV_JOINED);
    assert_int_equal(g.S.m[2].conn, 0);
    assert_string_equal(g.S.m[2].pod, "trainer-2");
    assert_string_equal(g.S.m[2].node, "node-x");
    assert_int_equal(g.S.m[2].env.n, 1);
    assert_false(g.S.sc[0].closing);
    rig_close(&g);
}

/* a JOIN that fails the token check changes nothing: no slot, no refusal on the list; it is
 * counted with its address, kept by the rank it claimed, and answered with an auth-failed
 * REJECT */
static void test_unverified(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        bool auth;
        int mac;
    } cases[] = {
        {"no token, rank 0 has one", true, 0},
        {"another token or a replay", true, 2},
        {"a token, rank 0 has none", false, 1},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        struct rig g;
        rig_open(&g, cases[k].auth, 1);
        join(&g, 0, 2, WORLD, "trainer-2", cases[k].mac);
        size_t nf = nrefusals(&g);
        if (g.S.sc[0].rank != -1 || !g.S.sc[0].closing || nf != 0 ||
            g.S.m[2].state != PF_RDV_MISSING || g.S.refused != 1 || !g.S.m[2].refused_claim ||
            !g.S.m[2].refused_claim[0])
            fail_msg("%s: rank %d closing %d, %zu refusals, slot %d, refused %d", cases[k].name,
                     g.S.sc[0].rank, g.S.sc[0].closing, nf, g.S.m[2].state, g.S.refused);
        assert_non_null(strstr(g.S.refused_last, "claiming rank 2"));
        assert_non_null(strstr(g.S.m[2].refused_claim, "claiming rank 2"));
        rig_close(&g);
    }
}

/* a stranger claims rank 2 before the real rank 2, and again after it: the real pod is
 * admitted and keeps its slot, and nothing is listed as refused */
static void test_stranger_before_and_after(void **state)
{
    (void)state;
    struct rig g;
    rig_open(&g, true, 3);
    join(&g, 0, 2, WORLD, "trainer-2", 2);
    join(&g, 1, 2, WORLD, "trainer-2", 1);
    assert_int_equal(g.S.sc[1].rank, 2);
    assert_int_equal(g.S.m[2].state, PF_RDV_JOINED);
    join(&g, 2, 2, WORLD, "impostor", 2);
    assert_true(g.S.sc[2].closing);
    assert_int_equal(g.S.m[2].conn, 1);
    assert_string_equal(g.S.m[2].pod, "trainer-2");
    assert_int_equal(nrefusals(&g), 0);
    assert_int_equal(g.S.refused, 2);
    rig_close(&g);
}

/* JOINs that failed the token check are kept by the rank they claimed, the last one each
 * (pkg/fleet warns stranger-refused for a rank that then never joins): rank 3's and rank 1's,
 * though rank 1 joined after */
static void test_claims_kept(void **state)
{
    (void)state;
    struct rig g;
    rig_open(&g, true, 3);
    join(&g, 0, 3, WORLD, "trainer-3", 2);
    join(&g, 1, 1, WORLD, "trainer-1", 2);
    join(&g, 2, 1, WORLD, "trainer-1", 1);
    assert_int_equal(nrefusals(&g), 0);
    assert_int_equal(g.S.m[3].state, PF_RDV_MISSING);
    assert_non_null(strstr(g.S.m[3].refused_claim, "claiming rank 3 (trainer-3)"));
    assert_int_equal(g.S.m[1].state, PF_RDV_JOINED);
    assert_non_null(g.S.m[1].refused_claim);
    rig_close(&g);
}

/* an authenticated JOIN that names no run comes from another preflight version */
static void test_no_run(void **state)
{
    (void)state;
    struct rig g;
    rig_open(&g, true, 1);
    join(&g, 0, 1, WORLD, "trainer-1", 3);
    assert_true(g.S.sc[0].closing);
    assert_int_equal(g.S.m[1].state, PF_RDV_MISSING);
    assert_true(has_code(&g, "version-mismatch"));
    rig_close(&g);
}

static void test_refused(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        bool auth;
        long long rank, world;
        int mac;
        const char *code;
    } cases[] = {
        {"claims rank 0", false, 0, WORLD, 0, "duplicate-rank"},
        {"outside the world size", false, 5, 8, 0, "world-size-mismatch"},
        {"negative rank", false, -1, WORLD, 0, "world-size-mismatch"},
        {"names no run", true, 1, WORLD, 3, "version-mismatch"},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        struct rig g;
        rig_open(&g, cases[k].auth, 1);
        join(&g, 0, cases[k].rank, cases[k].world, "intruder", cases[k].mac);
        if (g.S.sc[0].rank != -1 || !g.S.sc[0].closing || !has_code(&g, cases[k].code) ||
            nrefusals(&g) != 1 || g.S.refusals[0].rank != cases[k].rank ||
            g.S.refusals[0].world != cases[k].world || !strstr(g.S.refusals[0].claim, "intruder"))
            fail_msg("%s: rank %d closing %d, refusal %s expected", cases[k].name, g.S.sc[0].rank,
                     g.S.sc[0].closing, cases[k].code);
        /* the REJECT queued says the same word (the refused pod's verdict names it) */
        assert_true(g.S.sc[0].c.noutq > 0);
        for (int r = 1; r < WORLD; r++)
            assert_int_not_equal(g.S.m[r].state, PF_RDV_JOINED);
        rig_close(&g);
    }
}

/* the same pod again (its initContainer restarted) replaces its connection; another pod
 * claiming a held rank is refused; after the run started, a JOIN is too late */
static void test_rejoin_duplicate_late(void **state)
{
    (void)state;
    struct rig g;
    rig_open(&g, true, 4);
    join(&g, 0, 1, WORLD, "trainer-1", 1);
    join(&g, 1, 1, WORLD, "trainer-1", 1);
    assert_int_equal(g.S.m[1].conn, 1);
    assert_false(g.S.sc[0].used);
    assert_false(has_code(&g, "duplicate-rank"));
    join(&g, 2, 1, WORLD, "impostor", 1);
    join(&g, 2, 1, WORLD, "impostor", 1); /* the same refusal again: listed once */
    assert_true(g.S.sc[2].closing);
    assert_true(has_code(&g, "duplicate-rank"));
    assert_int_equal(nrefusals(&g), 1);
    assert_string_equal(g.S.refusals[0].holder, "trainer-1");
    assert_string_equal(g.S.refusals[0].pod, "impostor");
    assert_int_equal(g.S.m[1].conn, 1);
    assert_string_equal(g.S.m[1].pod, "trainer-1");
    g.S.n = 2; /* the roster went out */
    join(&g, 3, 3, WORLD, "trainer-3", 1);
    assert_true(g.S.sc[3].closing);
    assert_int_equal(g.S.m[3].state, PF_RDV_MISSING);
    assert_true(has_code(&g, "missing-ranks")); /* PF_WIRE_REFUSED_LATE */
    rig_close(&g);
}

/* connection i sends an authenticated JOIN for rank from a pod of the job (kind, ns, name,
 * uid; NULL: the field is absent, as an unknown piece is) */
static void join_job(struct rig *g, size_t i, long long rank, const char *pod, const char *kind,
                     const char *ns, const char *name, const char *uid)
{
    struct pf_buf b;
    pf_buf_init(&b, 1 << 16);
    pf_wire_put(&b, "run", g->S.join_run, PF_WIRE_NONCE);
    pf_wire_put_int(&b, "rank", rank);
    pf_wire_put_int(&b, "world", WORLD);
    pf_wire_put_str(&b, "pod", pod);
    if (kind) pf_wire_put_str(&b, "jobKind", kind);
    if (ns) pf_wire_put_str(&b, "jobNamespace", ns);
    if (name) pf_wire_put_str(&b, "jobName", name);
    if (uid) pf_wire_put_str(&b, "jobUid", uid);
    struct pf_rdv_msg msg;
    memset(&msg, 0, sizeof(msg));
    msg.type = PF_WIRE_JOIN;
    msg.had_mac = msg.mac_ok = true;
    assert_int_equal(pf_wire_fields_decode(&msg.f, (const uint8_t *)b.data, b.len), 0);
    rdv_admit(&g->S, i, &msg);
    pf_wire_fields_free(&msg.f);
    pf_buf_free(&b);
}

/* rank 0 of Job ml/trainer (uid u-a): another job's pod with the same token is refused with
 * job-mismatch naming both jobs, and takes no rank, so the rank's own pod joins after it; a
 * pod whose job is unknown, or named another way, proves nothing and is admitted */
static void test_other_job(void **state)
{
    (void)state;
    static const struct {
        const char *name, *kind, *ns, *job, *uid;
        bool refused;
    } cases[] = {
        {"another Job's uid and name", "Job", "ml", "other", "u-b", true},
        {"the same name, another uid (re-created)", "Job", "ml", "trainer", "u-b", true},
        {"another namespace", "Job", "dev", "trainer", NULL, true},
        {"the same Job", "Job", "ml", "trainer", "u-a", false},
        {"the same name, uid unknown", "Job", "ml", "trainer", NULL, false},
        {"job unknown", NULL, NULL, NULL, NULL, false},
        {"named another way (PREFLIGHT_JOB)", "run", "ml", "exp-17", NULL, false},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        struct rig g;
        rig_open(&g, true, 2);
        struct pf_identity_job *j = &g.S.id.job;
        pf_strcpy(j->kind, sizeof(j->kind), "Job");
        pf_strcpy(j->ns, sizeof(j->ns), "ml");
        pf_strcpy(j->name, sizeof(j->name), "trainer");
        pf_strcpy(j->uid, sizeof(j->uid), "u-a");
        join_job(&g, 0, 1, "other-1", cases[k].kind, cases[k].ns, cases[k].job, cases[k].uid);
        bool refused = g.S.sc[0].closing;
        if (refused != cases[k].refused || has_code(&g, "job-mismatch") != cases[k].refused ||
            (g.S.m[1].state == PF_RDV_JOINED) == cases[k].refused)
            fail_msg("%s: refused %d, expected %d", cases[k].name, refused, cases[k].refused);
        if (cases[k].refused) {
            const struct pf_wire_refused *x = &g.S.refusals[0];
            assert_string_equal(x->root_job, "Job ml/trainer (uid u-a)");
            assert_non_null(strstr(x->job, cases[k].job));
            assert_non_null(strstr(x->claim, "other-1"));
            assert_int_equal(x->rank, 1);
            /* the rank's own pod still gets in */
            join_job(&g, 1, 1, "trainer-1", "Job", "ml", "trainer", "u-a");
            assert_int_equal(g.S.m[1].state, PF_RDV_JOINED);
            assert_string_equal(g.S.m[1].pod, "trainer-1");
            assert_false(g.S.sc[1].closing);
        }
        rig_close(&g);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_admitted),
        cmocka_unit_test(test_unverified),
        cmocka_unit_test(test_stranger_before_and_after),
        cmocka_unit_test(test_claims_kept),
        cmocka_unit_test(test_no_run),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_rejoin_duplicate_late),
        cmocka_unit_test(test_other_job),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
