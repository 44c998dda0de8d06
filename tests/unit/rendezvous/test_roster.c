/* rendezvous: the roster codec (every position, records {rank, ip, port, pod, node} of some):
 * a round trip, records that are left out, headers and rank lists that make the whole roster
 * malformed; and what rank 0 sends each rank: every position, its partners' records and no
 * other, a dial to any other position failing with an error that names it. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "../../../pkg/rendezvous/internal.h"

static void put_rec(struct pf_buf *b, long long rank, const char *ip, long long port,
                    const char *pod)
{
    struct pf_buf r;
    pf_buf_init(&r, 4096);
    pf_wire_put_int(&r, "rank", rank);
    pf_wire_put_str(&r, "ip", ip);
    pf_wire_put_int(&r, "port", port);
    if (pod) pf_wire_put_str(&r, "pod", pod);
    pf_wire_put(b, "m", r.data, r.len);
    pf_buf_free(&r);
}

static void put_head_only(struct pf_buf *b, long long n, long long world)
{
    uint8_t run[PF_WIRE_NONCE];
    memset(run, 7, sizeof(run));
    pf_wire_put(b, "run", run, sizeof(run));
    pf_wire_put_int(b, "n", n);
    pf_wire_put_int(b, "world", world);
}

/* ranks 0 .. n-1 in the run: the others listed out */
static void put_head(struct pf_buf *b, long long n, long long world)
{
    put_head_only(b, n, world);
    uint8_t v[64] = {0};
    size_t k = 0;
    for (long long r = n; r < world && k + 4 <= sizeof(v); r++, k += 4)
        v[k + 3] = (uint8_t)r;
    pf_wire_put(b, "out", v, k);
}

static void test_round_trip(void **state)
{
    (void)state;
    struct pf_rdv_peer peers[4] = {
        {0, "", 40001, "trainer-0", "node-a", true},
        {1, "10.0.0.2", 40002, "trainer-1", "node-b", true},
        {3, "", 0, "", "", false},
        {40, "fd00::4", 40004, "", "", true},
    };
    /* a world of 41 lists the 37 ranks out (4 bytes each) in a bitmap (6 bytes); a world of
     * 41 with 40 ranks in lists the one out */
    for (int w = 0; w < 2; w++) {
        struct pf_rdv_peer many[40];
        memset(many, 0, sizeof(many));
        for (int k = 0; k < 40; k++)
            many[k] = (struct pf_rdv_peer){.rank = k < 39 ? k : 40, .port = k, .known = k % 3 == 0};
        struct pf_rdv_roster ro = {.world = 41, .n = w ? 40 : 4, .peer = w ? many : peers};
        memset(ro.run, 9, sizeof(ro.run));
        struct pf_buf b;
        pf_buf_init(&b, 1 << 20);
        assert_int_equal(pf_rdv_roster_encode(&b, &ro), 0);
        struct pf_wire_fields f;
        assert_int_equal(pf_wire_fields_decode(&f, (const uint8_t *)pf_buf_str(&b), b.len), 0);
        assert_non_null(pf_wire_fields_get(&f, w ? "out" : "in"));
        assert_null(pf_wire_fields_get(&f, w ? "in" : "out"));
        pf_wire_fields_free(&f);
        struct pf_rdv_roster got;
        assert_int_equal(pf_rdv_roster_decode(&got, (const uint8_t *)pf_buf_str(&b), b.len), 0);
        assert_int_equal(got.world, 41);
        assert_int_equal(got.n, ro.n);
        assert_memory_equal(got.run, ro.run, sizeof(ro.run));
        for (int k = 0; k < ro.n; k++) {
            const struct pf_rdv_peer *p = &ro.peer[k];
            assert_int_equal(got.peer[k].rank, p->rank);
            assert_int_equal(got.peer[k].known, p->known);
            if (!p->known) continue;
            assert_string_equal(got.peer[k].ip, p->ip);
            assert_int_equal(got.peer[k].port, p->port);
            assert_string_equal(got.peer[k].pod, p->pod);
            assert_string_equal(got.peer[k].node, p->node);
        }
        pf_rdv_roster_free(&got);
        pf_buf_free(&b);
    }
}

/* a record naming a rank outside the world size, a port out of range, a NUL byte in a name
 * or no port at all is left out; the good ones stay, in order */
static void test_bad_records_left_out(void **state)
{
    (void)state;
    struct pf_buf b;
    pf_buf_init(&b, 1 << 20);
    put_head(&b, 4, 4);
    put_rec(&b, 0, "", 40001, "trainer-0");
    put_rec(&b, 9, "10.0.0.9", 40009, "trainer-9");
    put_rec(&b, 1, "10.0.0.2", 70000, "trainer-1");
    struct pf_buf r;
    pf_buf_init(&r, 4096);
    pf_wire_put_int(&r, "rank", 2);
    pf_wire_put(&r, "pod", "a\0b", 3);
    pf_wire_put_int(&r, "port", 1);
    pf_wire_put(&b, "m", r.data, r.len);
    pf_buf_reset(&r);
    pf_wire_put_int(&r, "rank", 2);
    pf_wire_put(&b, "m", r.data, r.len);
    pf_buf_free(&r);
    pf_wire_put(&b, "m", "\x01", 1);
    put_rec(&b, 3, "10.0.0.4", 40004, NULL);
    struct pf_rdv_roster got;
    assert_int_equal(pf_rdv_roster_decode(&got, (const uint8_t *)pf_buf_str(&b), b.len), 0);
    assert_int_equal(got.n, 4);
    for (int k = 0; k < 4; k++)
        assert_int_equal(got.peer[k].rank, k);
    assert_true(got.peer[0].known);
    assert_false(got.peer[1].known);
    assert_false(got.peer[2].known);
    assert_true(got.peer[3].known);
    assert_string_equal(got.peer[3].ip, "10.0.0.4");
    assert_string_equal(got.peer[3].pod, "");
    pf_rdv_roster_free(&got);
    pf_buf_free(&b);
}

static void test_malformed_headers(void **state)
{
    (void)state;
    static const struct {
        long long n, world;
        bool run;
    } cases[] = {{1, 0, true}, {5, 4, true}, {0, 4, true}, {1, (1 << 20) + 1, true}, {1, 1, false}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct pf_buf b;
        pf_buf_init(&b, 1 << 16);
        if (cases[i].run)
            put_head(&b, cases[i].n, cases[i].world);
        else {
            pf_wire_put_int(&b, "n", cases[i].n);
            pf_wire_put_int(&b, "world", cases[i].world);
        }
        put_rec(&b, 0, "", 1, "p");
        struct pf_rdv_roster got;
        assert_int_equal(pf_rdv_roster_decode(&got, (const uint8_t *)pf_buf_str(&b), b.len),
                         PF_EINVAL);
        assert_non_null(strstr(pf_err_msg(), "malformed roster"));
        pf_rdv_roster_free(&got);
        pf_buf_free(&b);
    }
    /* rank lists that are not n ascending ranks of the world with rank 0 in */
    static const struct {
        const char *key;
        const char *v;
        size_t len;
        long long n, world;
    } lists[] = {
        {"out", "\0\0\0\3\0\0\0\2", 8, 2, 4}, /* not ascending */
        {"out", "\0\0\0\3\0\0\0\3", 8, 2, 4}, /* twice */
        {"out", "\0\0\0\0", 4, 3, 4},         /* rank 0 out */
        {"out", "\0\0\0\4", 4, 3, 4},         /* past the world */
        {"out", "\0\0\0\3", 4, 2, 4},         /* n says two are out */
        {"out", "\0\0\3", 3, 3, 4},           /* not whole numbers */
        {"in", "\x0e", 1, 3, 4},              /* rank 0 not in */
        {"in", "\x1f", 1, 4, 4},              /* a bit past the world */
        {"in", "\x07", 1, 4, 4},              /* n says four */
        {"in", "\x0f\0", 2, 4, 4},            /* too long */
        {NULL, NULL, 0, 4, 4},                /* neither */
        {"both", NULL, 0, 4, 4},              /* both */
    };
    for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
        struct pf_buf b;
        pf_buf_init(&b, 1 << 16);
        if (lists[i].key && !lists[i].v) {
            put_head(&b, 4, 4);
            pf_wire_put(&b, "in", "\x0f", 1);
        } else {
            put_head_only(&b, lists[i].n, lists[i].world);
            if (lists[i].key) pf_wire_put(&b, lists[i].key, lists[i].v, lists[i].len);
        }
        put_rec(&b, 0, "", 1, "p");
        struct pf_rdv_roster got;
        assert_int_equal(pf_rdv_roster_decode(&got, (const uint8_t *)pf_buf_str(&b), b.len),
                         PF_EINVAL);
        assert_non_null(strstr(pf_err_msg(), "malformed roster"));
        pf_rdv_roster_free(&got);
        pf_buf_free(&b);
    }
    struct pf_rdv_roster got;
    assert_int_equal(pf_rdv_roster_decode(&got,
                                          (const uint8_t *)"\x05"
                                                           "ab",
                                          3),
                     PF_EINVAL);
    assert_non_null(strstr(pf_err_msg(), "malformed roster"));
    pf_rdv_roster_free(&got);
}

/* A partners rule as pkg/run's is (position pos dials pos+1 and pos+3), with what a rule
 * may say wrongly (itself, out of range, twice) that rank 0 must drop. */
static int rule(void *arg, int pos, int n, int *out, int max)
{
    (void)arg;
    (void)max;
    out[0] = (pos + 1) % n;
    out[1] = pos;
    out[2] = n + 5;
    out[3] = (pos + 3) % n;
    out[4] = (pos + 1) % n;
    return 5;
}

/* Rank 0 of a world of world ranks, all joined but `missing`, with the rule above. */
static void root_session(struct rdv_session *S, int world, int missing)
{
    rdv_session_init(S);
    S->world = world;
    S->su.partners = rule;
    rdv_members_init(S);
    S->data_port = 39999;
    for (int r = 1; r < world; r++) {
        struct rdv_member *m = &S->m[r];
        if (r == missing) continue;
        m->state = PF_RDV_JOINED;
        snprintf(m->data_ip, sizeof(m->data_ip), "10.0.%d.%d", r / 250, r % 250 + 1);
        m->data_port = 40000 + r % 20000;
        snprintf(m->pod, sizeof(m->pod), "trainer-%d", r);
    }
    rdv_roster_build(S);
}

/* Rank rank's session after it took payload from rank 0. */
static void client_session(struct rdv_session *C, int rank, int world, const struct pf_buf *b)
{
    rdv_session_init(C);
    C->rank = rank;
    C->world = world;
    pf_strcpy(C->root_ip, sizeof(C->root_ip), "10.9.9.9");
    struct pf_rdv_msg msg = {.type = PF_WIRE_ROSTER, .payload = (uint8_t *)b->data, .len = b->len};
    assert_int_equal(rdv_client_parse_roster(C, &msg), 0);
}

static size_t count_records(const struct pf_buf *b)
{
    struct pf_wire_fields f;
    assert_int_equal(pf_wire_fields_decode(&f, (const uint8_t *)b->data, b->len), 0);
    size_t n = 0;
    for (size_t i = 0; i < f.n; i++)
        n += pf_wire_field_is(&f.v[i], "m");
    pf_wire_fields_free(&f);
    return n;
}

static void test_partners_only(void **state)
{
    (void)state;
    struct rdv_session S;
    root_session(&S, 10, 7);
    assert_int_equal(S.n, 9);
    for (int pos = 0; pos < S.n; pos++) {
        struct pf_buf b;
        pf_buf_init(&b, 1 << 20);
        assert_int_equal(rdv_roster_payload(&S, pos, &b), 0);
        assert_int_equal(count_records(&b), 2);
        struct rdv_session C;
        client_session(&C, S.rk[pos], 10, &b);
        /* every position, in order; this rank's own */
        assert_int_equal(C.n, 9);
        assert_int_equal(C.pos, pos);
        assert_memory_equal(C.rk, S.rk, sizeof(int) * 9);
        int a = (pos + 1) % 9, c = (pos + 3) % 9;
        for (int q = 0; q < C.n; q++) {
            char why[200] = "";
            const struct pf_rdv_peer *p = rdv_peer_addr(&C, q, why, sizeof(why));
            if (q != a && q != c) {
                assert_null(p);
                char want[40];
                snprintf(want, sizeof(want), "position %d (rank %d)", q, S.rk[q]);
                assert_non_null(strstr(why, want));
                continue;
            }
            assert_non_null(p);
            assert_int_equal(p->port, S.ro.peer[q].port);
            assert_string_equal(p->pod, S.ro.peer[q].pod);
            /* rank 0's address is the one the rank reached it at */
            assert_string_equal(p->ip, q == 0 ? "10.9.9.9" : S.ro.peer[q].ip);
        }
        rdv_session_free(&C);
        pf_buf_free(&b);
    }
    rdv_session_free(&S);
}

/* A dial to a position whose address never came fails with the error naming it, the data
 * mesh's and a probe's alike; an address rank 0 sends with a task is then taken. */
static void test_unknown_address(void **state)
{
    (void)state;
    struct rdv_session S;
    root_session(&S, 10, -1);
    struct pf_buf b;
    pf_buf_init(&b, 1 << 20);
    assert_int_equal(rdv_roster_payload(&S, 2, &b), 0);
    struct rdv_session C;
    client_session(&C, 2, 10, &b);
    int port = 0;
    assert_int_equal(pf_rdv_listen(&C.data_lfd, "127.0.0.1", &port), 0);
    char why[256] = "";
    assert_int_equal(rdv_probe_connect(&C, 4, 7, true, pf_now() + 5, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "no data address of position 7 (rank 7)"));
    C.nshifts = 1;
    C.shifts[0] = 2;
    assert_int_equal(rdv_mesh_connect(&C, pf_now() + 5, why, sizeof(why)), PF_ERR);
    assert_non_null(strstr(why, "no data address of position 4 (rank 4)"));
    /* with the task: rank 0's record of position 7 and of itself */
    pf_buf_reset(&b);
    pf_wire_put_int(&b, "more", 1);
    assert_int_equal(rdv_addr_put(&S, &b, 7), 0);
    assert_int_equal(rdv_addr_put(&S, &b, 0), 0);
    assert_int_equal(rdv_addr_take(&C, (const uint8_t *)b.data, b.len), 2);
    assert_non_null(rdv_peer_addr(&C, 7, why, sizeof(why)));
    assert_string_equal(C.ro.peer[7].ip, S.ro.peer[7].ip);
    assert_int_equal(C.ro.peer[7].port, S.ro.peer[7].port);
    assert_string_equal(C.ro.peer[0].ip, "10.9.9.9");
    /* a malformed record is named, the good ones still taken */
    pf_buf_reset(&b);
    pf_wire_put(&b, "a", "\x01", 1);
    assert_int_equal(rdv_addr_put(&S, &b, 5), 0);
    assert_int_equal(rdv_addr_take(&C, (const uint8_t *)b.data, b.len), PF_EINVAL);
    assert_non_null(strstr(pf_err_msg(), "malformed address"));
    assert_non_null(rdv_peer_addr(&C, 5, why, sizeof(why)));
    assert_int_equal(rdv_addr_put(&C, &b, 6), PF_EINVAL);
    assert_non_null(strstr(pf_err_msg(), "position 6"));
    rdv_session_free(&C);
    rdv_session_free(&S);
    pf_buf_free(&b);
}

/* What a rank receives does not grow with the world: a few hundred bytes at 4,096 ranks. */
static void test_size_flat(void **state)
{
    (void)state;
    struct rdv_session S;
    root_session(&S, 4096, -1);
    struct pf_buf b;
    pf_buf_init(&b, 1 << 20);
    assert_int_equal(rdv_roster_payload(&S, 1234, &b), 0);
    assert_true(b.len < 400);
    /* without a rule every record goes, as the unit tests' meetings have it */
    S.su.partners = NULL;
    pf_buf_reset(&b);
    assert_int_equal(rdv_roster_payload(&S, 1234, &b), 0);
    assert_int_equal(count_records(&b), 4096);
    rdv_session_free(&S);
    pf_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),        cmocka_unit_test(test_bad_records_left_out),
        cmocka_unit_test(test_malformed_headers), cmocka_unit_test(test_partners_only),
        cmocka_unit_test(test_unknown_address),   cmocka_unit_test(test_size_flat),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
