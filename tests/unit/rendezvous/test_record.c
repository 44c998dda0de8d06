/* rendezvous: the seam to its caller. The session is handed what it needs (struct
 * pf_rdv_setup: the identity, the JOIN's claims, the hooks) and hands back facts, with no
 * check, finding or evidence named: how this pod's meeting ended (pf_rdv_end: a pod in no
 * run, a world of one, an unknown identity, rank 0 never reached), its counters
 * (pf_rdv_stats); what a JOIN carries; how the NCCL_* variables are made into the JOIN's
 * claims. No socket is opened except where a test says so. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../pkg/rendezvous/internal.h"

/* What the hooks saw. */
struct got {
    int doing; /* calls of the doing hook */
    int lines; /* progress lines */
    char last_doing[768];
    enum pf_rdv_end end;
    char msg[1280];
    struct pf_rdv_stats stats;
};

static void on_doing(void *arg, const char *doing)
{
    struct got *g = arg;
    g->doing++;
    snprintf(g->last_doing, sizeof(g->last_doing), "%s", doing);
}

static void on_progress(void *arg, const char *line)
{
    (void)line;
    ((struct got *)arg)->lines++;
}

static struct pf_identity ident(int rank, int world, bool member)
{
    struct pf_identity id;
    memset(&id, 0, sizeof(id));
    id.rank = rank;
    id.world_size = world;
    id.member = member;
    id.port = 29400;
    snprintf(id.rule, sizeof(id.rule), "%s", member ? "statefulset" : "mpijob");
    snprintf(id.rank_from, sizeof(id.rank_from), "hostname trainer-%d", rank);
    snprintf(id.world_from, sizeof(id.world_from), "WORLD_SIZE");
    snprintf(id.explain, sizeof(id.explain), "%s",
             member ? "the ordinal of the host name" : "the MPIJob launcher runs no rank");
    return id;
}

/* opens a session with id (NULL: unknown, err says why) and token, meets, reads the facts */
static int meet_with(struct got *g, const struct pf_identity *id, const char *err,
                     const char *token)
{
    memset(g, 0, sizeof(*g));
    struct pf_identity_opts o = {.rank = -1, .world_size = -1, .token = token};
    struct pf_rdv_setup su = {.id = id,
                              .id_error = err,
                              .pod = "trainer-0",
                              .node = "node-a",
                              .progress = on_progress,
                              .doing = on_doing,
                              .arg = g};
    struct pf_rdv *R = NULL;
    int r = pf_rdv_open(&R, &o, &su);
    assert_non_null(R);
    assert_int_equal(r, 0);
    assert_int_equal(pf_rdv_end(R, NULL, NULL), PF_RDV_END_NONE); /* not yet */
    r = pf_rdv_meet(R);
    const char *msg = NULL;
    g->end = pf_rdv_end(R, NULL, &msg);
    assert_non_null(msg);
    snprintf(g->msg, sizeof(g->msg), "%s", msg);
    pf_rdv_stats(R, &g->stats);
    size_t n = 99;
    assert_null(pf_rdv_refusals(R, &n));
    assert_int_equal(n, 0);
    pf_rdv_close(R);
    return r;
}

/* a pod that is in no run (an MPIJob launcher): the end says so, and why */
static void test_not_member(void **state)
{
    (void)state;
    struct got g;
    struct pf_identity id = ident(0, 4, false);
    assert_int_equal(meet_with(&g, &id, NULL, NULL), PF_ERR);
    assert_int_equal(g.end, PF_RDV_END_NOT_MEMBER);
    assert_string_equal(g.msg, "the MPIJob launcher runs no rank");
    assert_int_equal(g.lines, 0);
}

/* an identity that could not be found: the end carries the caller's reason */
static void test_unknown(void **state)
{
    (void)state;
    struct got g;
    assert_int_equal(meet_with(&g, NULL, "RANK: 'x' is not a number", NULL), PF_ERR);
    assert_int_equal(g.end, PF_RDV_END_NO_IDENTITY);
    assert_string_equal(g.msg, "RANK: 'x' is not a number");
    assert_int_equal(meet_with(&g, NULL, NULL, NULL), PF_ERR);
    assert_string_equal(g.msg, "this pod's identity is unknown");
}

/* a world of one meets nobody: no socket, nothing counted; the token shows in the stats */
static void test_world_of_one(void **state)
{
    (void)state;
    struct got g;
    struct pf_identity id = ident(0, 1, true);
    assert_int_equal(meet_with(&g, &id, NULL, NULL), PF_RDV_ALONE);
    assert_int_equal(g.end, PF_RDV_END_ALONE);
    assert_string_equal(g.msg, "");
    assert_false(g.stats.auth);
    assert_false(g.stats.rostered);
    assert_int_equal(g.stats.refused, 0);
    assert_int_equal(g.stats.dropped, 0);
    assert_true(g.stats.arrival_to_roster < 0);
    assert_int_equal(meet_with(&g, &id, NULL, "t0ken"), PF_RDV_ALONE);
    assert_true(g.stats.auth);
}

/* the words of a REJECT: each parses back to itself; a word this version lacks is an error
 * naming it, never another refusal */
static void test_refusal_words(void **state)
{
    (void)state;
    for (int k = 0; k < PF_WIRE_REFUSED_END; k++) {
        enum pf_wire_refusal r = PF_WIRE_REFUSED_END;
        const char *w = pf_wire_refusal_code((enum pf_wire_refusal)k);
        assert_true(w[0] != '\0');
        assert_int_equal(pf_wire_refusal_parse(w, &r), 0);
        assert_int_equal(r, k);
    }
    enum pf_wire_refusal r = PF_WIRE_REFUSED_END;
    assert_int_equal(pf_wire_refusal_parse("timeout", &r), PF_EINVAL);
    assert_non_null(strstr(pf_err_msg(), "\"timeout\""));
    assert_int_equal(pf_wire_refusal_parse(NULL, &r), PF_EINVAL);
    assert_int_equal(r, PF_WIRE_REFUSED_END);
    assert_string_equal(pf_wire_refusal_code(PF_WIRE_REFUSED_END), "");
}

/* rank 0 never answers before the join deadline: the end says so, naming rank 0 by the
 * naming rule, and the last error is kept (pkg/run blames rank 0 with it) */
static void test_root_unreachable(void **state)
{
    (void)state;
    struct rdv_session S;
    rdv_session_init(&S);
    S.id = ident(2, 4, true);
    S.id.naming = PF_IDENTITY_NAMING_ORDINAL;
    snprintf(S.id.prefix, sizeof(S.id.prefix), "trainer");
    snprintf(S.id.coordinator, sizeof(S.id.coordinator), "trainer-0.svc");
    S.rank = 2;
    S.world = 4;
    S.join_deadline = S.t0 - 1; /* already over: no dial */
    assert_int_equal(rdv_client_join(&S), PF_ERR);
    assert_int_equal(S.end, PF_RDV_END_UNREACHABLE);
    assert_non_null(strstr(S.end_msg, "rank 0 (trainer-0) never answered at trainer-0.svc:29400"));
    assert_string_equal(S.last_error, "no answer");
    rdv_session_free(&S);
}

/* the JOIN carries the claims the caller passed: digest, NCCL version, fabric, variables */
static void test_join_claims(void **state)
{
    (void)state;
    struct pf_strlist env = {0};
    pf_strlist_add(&env, "NCCL_IB_HCA=mlx5_0");
    pf_strlist_add(&env, "NCCL_SOCKET_IFNAME=eth0");
    for (int fab = 0; fab < 2; fab++) {
        struct rdv_session S;
        memset(&S, 0, sizeof(S));
        S.su =
            (struct pf_rdv_setup){.digest = "sha256:abc",
                                  .nccl_version = "2.21.5",
                                  .fabric = fab ? "6f1c7e00-1111-2222-3333-444455556666/7" : NULL,
                                  .env = &env};
        S.rank = 3;
        S.world = 4;
        snprintf(S.pod, sizeof(S.pod), "trainer-3");
        uint8_t nonce[PF_WIRE_NONCE] = {1};
        struct pf_buf b;
        pf_buf_init(&b, PF_RDV_MAX_JOIN);
        rdv_join_payload(&S, &b, nonce);
        struct pf_wire_fields f;
        assert_int_equal(pf_wire_fields_decode(&f, (const uint8_t *)b.data, b.len), 0);
        char v[128];
        assert_int_equal(pf_wire_fields_str(v, sizeof(v), &f, "digest"), 0);
        assert_string_equal(v, "sha256:abc");
        assert_int_equal(pf_wire_fields_str(v, sizeof(v), &f, "ncclVersion"), 0);
        assert_string_equal(v, "2.21.5");
        assert_int_equal(pf_wire_fields_str(v, sizeof(v), &f, "pod"), 0);
        assert_string_equal(v, "trainer-3");
        if (fab) {
            assert_int_equal(pf_wire_fields_str(v, sizeof(v), &f, "fabric"), 0);
            assert_string_equal(v, "6f1c7e00-1111-2222-3333-444455556666/7");
        } else {
            assert_null(pf_wire_fields_get(&f, "fabric")); /* not reported: not sent */
        }
        assert_null(pf_wire_fields_get(&f, "envLeftOut")); /* every variable fit */
        size_t k = 0;
        for (size_t i = 0; i < f.n; i++) {
            if (!pf_wire_field_is(&f.v[i], "env")) continue;
            char *e = pf_wire_field_dup(&f.v[i]);
            assert_non_null(e);
            assert_true(k < env.n);
            assert_string_equal(e, env.v[k]);
            k++;
            free(e);
        }
        assert_int_equal(k, env.n);
        pf_wire_fields_free(&f);
        pf_buf_free(&b);
    }
    pf_strlist_free(&env);
}

/* NCCL_* variables over the JOIN's 32 KiB: those that fit go, the JOIN says how many were
 * left out, and rank 0 counts the ranks and names the last (pf_rdv_stats) */
static void test_join_env_left_out(void **state)
{
    (void)state;
    struct pf_strlist env = {0};
    char v[100];
    memset(v, 'x', 60);
    v[60] = '\0';
    for (int i = 0; i < 600; i++) /* about 88 bytes a field: 52 KiB */
        pf_strlist_addf(&env, "NCCL_TEST_VAR_%03d=%s", i, v);
    struct rdv_session J;
    memset(&J, 0, sizeof(J));
    J.su.env = &env;
    J.rank = 3;
    J.world = 4;
    snprintf(J.pod, sizeof(J.pod), "trainer-3");
    uint8_t nonce[PF_WIRE_NONCE] = {1};
    struct pf_buf b;
    pf_buf_init(&b, PF_RDV_MAX_JOIN);
    size_t out = rdv_join_payload(&J, &b, nonce);
    assert_true(out > 0 && out < env.n);
    assert_true(b.len <= PF_RDV_MAX_JOIN);
    struct pf_rdv_msg msg;
    memset(&msg, 0, sizeof(msg));
    msg.type = PF_WIRE_JOIN;
    assert_int_equal(pf_wire_fields_decode(&msg.f, (const uint8_t *)b.data, b.len), 0);
    long long said = -1;
    assert_int_equal(pf_wire_fields_int(&said, &msg.f, "envLeftOut"), 0);
    assert_int_equal(said, (long long)out);
    size_t k = 0;
    for (size_t i = 0; i < msg.f.n; i++)
        k += pf_wire_field_is(&msg.f.v[i], "env");
    assert_int_equal(k + out, env.n); /* each variable sent or counted, none twice */

    /* rank 0 of a world of 4 admits it */
    struct rdv_session S;
    memset(&S, 0, sizeof(S));
    S.world = 4;
    S.m = calloc(4, sizeof(*S.m));
    assert_non_null(S.m);
    for (int r = 0; r < 4; r++)
        S.m[r].conn = -1;
    S.m[0].state = PF_RDV_JOINED;
    S.nsc = 1;
    S.sc = calloc(1, sizeof(*S.sc));
    assert_non_null(S.sc);
    pf_rdv_conn_init(&S.sc[0].c, -1, "test", false);
    S.sc[0].used = true;
    S.sc[0].rank = -1;
    rdv_admit(&S, 0, &msg);
    assert_int_equal(S.m[3].state, PF_RDV_JOINED);
    assert_int_equal(S.m[3].env.n, k);
    assert_int_equal(S.env_left_out_ranks, 1);
    char want[200];
    snprintf(want, sizeof(want), "rank 3 (trainer-3): %zu NCCL_* variables", out);
    assert_string_equal(S.env_left_out_last, want);
    pf_rdv_conn_close(&S.sc[0].c);
    free(S.sc);
    for (int r = 0; r < 4; r++)
        pf_strlist_free(&S.m[r].env);
    free(S.m);
    pf_wire_fields_free(&msg.f);
    pf_buf_free(&b);
    pf_strlist_free(&env);
}

static bool secret_token(const char *name)
{
    return strstr(name, "TOKEN") != NULL;
}

/* the JOIN's variables: NCCL_* only, a secret's value as a hash, never the value */
static void test_join_env(void **state)
{
    (void)state;
    struct pf_env e = {0};
    pf_env_set(&e, "NCCL_IB_HCA", "mlx5_0,mlx5_1", "environment");
    pf_env_set(&e, "PATH", "/usr/bin", "environment");
    pf_env_set(&e, "NCCL_COLLNET_TOKEN", "hunter2", "environment");
    pf_env_set(&e, "XNCCL_DEBUG", "INFO", "environment");
    struct pf_strlist out = {0};
    pf_rdv_join_env(&out, &e, secret_token);
    assert_int_equal(out.n, 2);
    assert_string_equal(out.v[0], "NCCL_IB_HCA=mlx5_0,mlx5_1");
    /* sha256("hunter2") begins f52fbd32b2b3b86f */
    assert_string_equal(out.v[1], "NCCL_COLLNET_TOKEN=sha256:f52fbd32b2b3b86f");
    pf_strlist_free(&out);
    pf_rdv_join_env(&out, &e, NULL); /* no predicate: nothing is secret */
    assert_string_equal(out.v[1], "NCCL_COLLNET_TOKEN=hunter2");
    pf_strlist_free(&out);
    pf_env_free(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_not_member),       cmocka_unit_test(test_unknown),
        cmocka_unit_test(test_world_of_one),     cmocka_unit_test(test_refusal_words),
        cmocka_unit_test(test_root_unreachable), cmocka_unit_test(test_join_claims),
        cmocka_unit_test(test_join_env),         cmocka_unit_test(test_join_env_left_out),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
