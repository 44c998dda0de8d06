/* rendezvous: the roster codec (records {rank, ip, port, pod, node}): a round trip, records
 * that are left out, and headers that make the whole roster malformed. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

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

static void put_head(struct pf_buf *b, long long n, long long world)
{
    uint8_t run[PF_WIRE_NONCE];
    memset(run, 7, sizeof(run));
    pf_wire_put(b, "run", run, sizeof(run));
    pf_wire_put_int(b, "n", n);
    pf_wire_put_int(b, "world", world);
}

static void test_round_trip(void **state)
{
    (void)state;
    struct pf_rdv_peer peers[3] = {
        {0, "", 40001, "trainer-0", "node-a"},
        {1, "10.0.0.2", 40002, "trainer-1", "node-b"},
        {3, "fd00::4", 40004, "", ""},
    };
    struct pf_rdv_roster ro = {.world = 4, .n = 3, .peer = peers};
    memset(ro.run, 9, sizeof(ro.run));
    struct pf_buf b;
    pf_buf_init(&b, 1 << 20);
    assert_int_equal(pf_rdv_roster_encode(&b, &ro), 0);
    struct pf_rdv_roster got;
    assert_int_equal(pf_rdv_roster_decode(&got, (const uint8_t *)pf_buf_str(&b), b.len), 0);
    assert_int_equal(got.world, 4);
    assert_int_equal(got.n, 3);
    assert_memory_equal(got.run, ro.run, sizeof(ro.run));
    for (int k = 0; k < 3; k++) {
        assert_int_equal(got.peer[k].rank, peers[k].rank);
        assert_string_equal(got.peer[k].ip, peers[k].ip);
        assert_int_equal(got.peer[k].port, peers[k].port);
        assert_string_equal(got.peer[k].pod, peers[k].pod);
        assert_string_equal(got.peer[k].node, peers[k].node);
    }
    pf_rdv_roster_free(&got);
    pf_buf_free(&b);
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
    assert_int_equal(got.n, 2);
    assert_int_equal(got.peer[0].rank, 0);
    assert_int_equal(got.peer[1].rank, 3);
    assert_string_equal(got.peer[1].ip, "10.0.0.4");
    assert_string_equal(got.peer[1].pod, "");
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
    struct pf_rdv_roster got;
    assert_int_equal(pf_rdv_roster_decode(&got,
                                          (const uint8_t *)"\x05"
                                                           "ab",
                                          3),
                     PF_EINVAL);
    assert_non_null(strstr(pf_err_msg(), "malformed roster"));
    pf_rdv_roster_free(&got);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_bad_records_left_out),
        cmocka_unit_test(test_malformed_headers),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
