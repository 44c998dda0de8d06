/* rendezvous: the data connection's DHELLO (conn.c): what it names (run, sender, receiver,
 * shift) and its HMAC, which binds all of them to the token, so that a stranger, another
 * run or another ring position is refused on a data port. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../pkg/rendezvous/internal.h"

/* A DHELLO frame into out: header, payload and (token != NULL) the MAC with that token. */
static size_t frame(uint8_t *out, const char *token, const uint8_t run[PF_WIRE_NONCE], int src,
                    int dst, int shift, uint32_t seq)
{
    struct pf_rdv_dhello h = {.src = src, .dst = dst, .shift = shift};
    memcpy(h.run, run, PF_WIRE_NONCE);
    struct pf_buf b;
    pf_buf_init(&b, PF_RDV_MAX_DHELLO);
    pf_rdv_dhello_payload(&b, &h);
    pf_wire_frame_header(out, PF_WIRE_DHELLO, token ? PF_WIRE_F_MAC : 0, seq, (uint32_t)b.len);
    memcpy(out + PF_WIRE_HDR, b.data, b.len);
    size_t n = PF_WIRE_HDR + b.len;
    if (token) {
        struct pf_wire_auth a = {.on = true, .token = token};
        memcpy(a.nonce_s, run, PF_WIRE_NONCE);
        pf_wire_mac(out + n, &a, PF_WIRE_DIR_DATA, out, out + PF_WIRE_HDR, b.len);
        n += PF_WIRE_MACLEN;
    }
    pf_buf_free(&b);
    return n;
}

static struct pf_wire_auth auth(const char *token, const uint8_t run[PF_WIRE_NONCE])
{
    struct pf_wire_auth a = {.on = token != NULL, .token = token};
    memcpy(a.nonce_s, run, PF_WIRE_NONCE);
    return a;
}

static void test_roundtrip(void **state)
{
    (void)state;
    uint8_t run[PF_WIRE_NONCE], buf[1024];
    memset(run, 0x42, sizeof(run));
    size_t n = frame(buf, "t0ken", run, 3, 1, 2, 0);
    struct pf_wire_auth a = auth("t0ken", run);
    struct pf_rdv_dhello h;
    assert_int_equal(pf_rdv_dhello_decode(&h, buf, n, &a), (int)n);
    assert_int_equal(h.src, 3);
    assert_int_equal(h.dst, 1);
    assert_int_equal(h.shift, 2);
    assert_memory_equal(h.run, run, PF_WIRE_NONCE);
    /* bytes after the frame are the data that follows: not taken */
    memset(buf + n, 0xee, 32);
    assert_int_equal(pf_rdv_dhello_decode(&h, buf, n + 32, &a), (int)n);
    /* every prefix asks for more */
    for (size_t k = 0; k < n; k++)
        assert_int_equal(pf_rdv_dhello_decode(&h, buf, k, &a), 0);
    /* without a token on either side */
    n = frame(buf, NULL, run, 0, 2, 1, 0);
    struct pf_wire_auth off = auth(NULL, run);
    assert_int_equal(pf_rdv_dhello_decode(&h, buf, n, &off), (int)n);
    assert_int_equal(h.dst, 2);
}

static void test_refused(void **state)
{
    (void)state;
    uint8_t run[PF_WIRE_NONCE], other[PF_WIRE_NONCE], buf[1024];
    memset(run, 0x42, sizeof(run));
    memset(other, 0x43, sizeof(other));
    struct pf_wire_auth a = auth("t0ken", run);
    struct pf_rdv_dhello h;
    size_t n = frame(buf, "another", run, 3, 1, 2, 0);
    assert_int_equal(pf_rdv_dhello_decode(&h, buf, n, &a), PF_EINVAL); /* another token */
    n = frame(buf, "t0ken", other, 3, 1, 2, 0);
    assert_int_equal(pf_rdv_dhello_decode(&h, buf, n, &a), PF_EINVAL); /* another run */
    n = frame(buf, NULL, run, 3, 1, 2, 0);
    assert_int_equal(pf_rdv_dhello_decode(&h, buf, n, &a), PF_EINVAL); /* no MAC */
    n = frame(buf, "t0ken", run, 3, 1, 2, 1);
    assert_int_equal(pf_rdv_dhello_decode(&h, buf, n, &a), PF_EINVAL); /* not the first frame */
    /* the ring position is under the MAC: shift 2 made into shift 1 fails */
    n = frame(buf, "t0ken", run, 3, 1, 2, 0);
    uint8_t *s = memmem(buf, n,
                        "shift\0\0\0\1"
                        "2",
                        10);
    assert_non_null(s);
    s[9] = '1';
    assert_int_equal(pf_rdv_dhello_decode(&h, buf, n, &a), PF_EINVAL);
    /* garbage and a header that announces too much */
    assert_int_equal(pf_rdv_dhello_decode(&h, (const uint8_t *)"GET / HTTP/1.1", 14, &a),
                     PF_EINVAL);
    pf_wire_frame_header(buf, PF_WIRE_DHELLO, 0, 0, PF_RDV_MAX_DHELLO + 1);
    assert_int_equal(pf_rdv_dhello_decode(&h, buf, PF_WIRE_HDR, &a), PF_ETOOBIG);
}

/* The fuzz corpus' seed was made with Python's hmac module, not with this code: both ends of
 * the wire agree on the MAC. */
static void test_python_made(void **state)
{
    (void)state;
    FILE *f = fopen("fuzz/corpus/fuzz_hello/mac-ok", "rb");
    assert_non_null(f);
    uint8_t buf[1024];
    size_t n = fread(buf, 1, sizeof(buf), f);
    fclose(f);
    assert_true(n > 1);
    uint8_t run[PF_WIRE_NONCE];
    memset(run, 0x11, sizeof(run));
    struct pf_wire_auth a = auth("fuzz-token", run);
    struct pf_rdv_dhello h;
    assert_int_equal(pf_rdv_dhello_decode(&h, buf + 1, n - 1, &a), (int)(n - 1));
    assert_int_equal(h.src, 2);
    assert_int_equal(h.dst, 0);
    assert_int_equal(h.shift, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_python_made),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
