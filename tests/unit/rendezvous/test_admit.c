/* rendezvous: JOIN admission at rank 0 (admit.c) without sockets. Rank 0 of a world of 4
 * takes JOINs on connections that are not connected (fd -1): what it admits, what it
 * refuses with which REJECT code and fleet finding, a pod that joins again, and JOINs that
 * fail the token check, which change nothing (docs/threat-model-rendezvous.md). What rank 0
 * concluded is read from the session's notes, as pkg/run reads them. */
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

/* A note as the rig keeps it. */
struct seen {
    int kind;
    char code[64], key[64], text[1024];
    bool fail, fleet;
    long long i;
};

struct rig {
    struct rdv_session S;
    struct seen seen[64];
    size_t nseen;
};

/* Takes the notes made so far. */
static void drain(struct rig *g)
{
    struct pf_rdv_note x;
    while (rdv_note_take(&g->S, &x)) {
        assert_true(g->nseen < PF_ARRAY_LEN(g->seen));
        struct seen *s = &g->seen[g->nseen++];
        s->kind = x.kind;
        snprintf(s->code, sizeof(s->code), "%s", x.code ? x.code : "");
        snprintf(s->key, sizeof(s->key), "%s", x.key ? x.key : "");
        snprintf(s->text, sizeof(s->text), "%s", x.text ? x.text : "");
        s->fail = x.fail;
        s->fleet = x.fleet;
        s->i = x.i;
    }
}

/* The findings noted; fleet: only those every rank's verdict carries. */
static size_t nfindings(struct rig *g, bool fleet)
{
    drain(g);
    size_t n = 0;
    for (size_t i = 0; i < g->nseen; i++)
        n += g->seen[i].kind == PF_RDV_NOTE_FINDING && (!fleet || g->seen[i].fleet);
    return n;
}

/* The last evidence note of key, or NULL. */
static const struct seen *evidence(struct rig *g, const char *key)
{
    drain(g);
    for (size_t i = g->nseen; i-- > 0;)
        if ((g->seen[i].kind == PF_RDV_NOTE_INT || g->seen[i].kind == PF_RDV_NOTE_STR) &&
            strcmp(g->seen[i].key, key) == 0)
            return &g->seen[i];
    return NULL;
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

static bool has_code(struct rig *g, const char *code)
{
    drain(g);
    for (size_t i = 0; i < g->nseen; i++)
        if (g->seen[i].kind == PF_RDV_NOTE_FINDING && strcmp(g->seen[i].code, code) == 0)
            return true;
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

/* a JOIN that fails the token check changes nothing: no slot, no finding; it is counted in
 * the evidence with its address and answered with an auth-failed REJECT */
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
        size_t nf = nfindings(&g, false);
        if (g.S.sc[0].rank != -1 || !g.S.sc[0].closing || nf != 0 ||
            g.S.m[2].state != PF_RDV_MISSING || g.S.refused != 1 || !g.S.m[2].refused_claim ||
            !g.S.m[2].refused_claim[0])
            fail_msg("%s: rank %d closing %d, %zu findings, slot %d, refused %d", cases[k].name,
                     g.S.sc[0].rank, g.S.sc[0].closing, nf, g.S.m[2].state, g.S.refused);
        const struct seen *n = evidence(&g, "refusedJoins");
        assert_non_null(n);
        assert_int_equal(n->i, 1);
        n = evidence(&g, "lastRefused");
        assert_non_null(n);
        assert_non_null(strstr(n->text, "claiming rank 2"));
        rig_close(&g);
    }
}

/* a stranger claims rank 2 before the real rank 2, and again after it: the real pod is
 * admitted, keeps its slot, and nothing is reported, as no rank is missing */
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
    g.S.m[1].state = g.S.m[3].state = PF_RDV_JOINED;
    rdv_admit_report_claims(&g.S);
    assert_false(has_code(&g, "stranger-refused"));
    assert_int_equal(nfindings(&g, true), 0);
    rig_close(&g);
}

/* rank 3 never joins, and a JOIN that claimed it failed the token check: a warning says so
 * to every rank (the missing rank fails the run anyway); rank 1, claimed the same way but
 * joined, is not named */
static void test_claims_reported(void **state)
{
    (void)state;
    struct rig g;
    rig_open(&g, true, 3);
    join(&g, 0, 3, WORLD, "trainer-3", 2);
    join(&g, 1, 1, WORLD, "trainer-1", 2);
    join(&g, 2, 1, WORLD, "trainer-1", 1);
    rdv_admit_report_claims(&g.S);
    rdv_admit_report_claims(&g.S);
    assert_int_equal(nfindings(&g, false), 1);
    const struct seen *f = NULL;
    for (size_t i = 0; i < g.nseen; i++)
        if (g.seen[i].kind == PF_RDV_NOTE_FINDING) f = &g.seen[i];
    assert_non_null(f);
    assert_string_equal(f->code, "stranger-refused");
    assert_false(f->fail); /* a warning */
    assert_true(f->fleet); /* every rank's verdict carries it */
    assert_non_null(strstr(f->text, "rank 3 never joined"));
    assert_non_null(strstr(f->text, "trainer-3"));
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
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        struct rig g;
        rig_open(&g, cases[k].auth, 1);
        join(&g, 0, cases[k].rank, cases[k].world, "intruder", cases[k].mac);
        if (g.S.sc[0].rank != -1 || !g.S.sc[0].closing || !has_code(&g, cases[k].code))
            fail_msg("%s: rank %d closing %d, finding %s expected", cases[k].name, g.S.sc[0].rank,
                     g.S.sc[0].closing, cases[k].code);
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
    assert_true(g.S.sc[2].closing);
    assert_true(has_code(&g, "duplicate-rank"));
    assert_int_equal(g.S.m[1].conn, 1);
    assert_string_equal(g.S.m[1].pod, "trainer-1");
    g.S.n = 2; /* the roster went out */
    join(&g, 3, 3, WORLD, "trainer-3", 1);
    assert_true(g.S.sc[3].closing);
    assert_int_equal(g.S.m[3].state, PF_RDV_MISSING);
    rig_close(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_admitted),
        cmocka_unit_test(test_unverified),
        cmocka_unit_test(test_stranger_before_and_after),
        cmocka_unit_test(test_claims_reported),
        cmocka_unit_test(test_no_run),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_rejoin_duplicate_late),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
