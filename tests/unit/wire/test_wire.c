/* wire: frames (complete, partial, garbage, another version), fields (round trip, strict
 * integers, malformed payloads), the HMAC and the kernel's random bytes. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../../pkg/wire/wire.h"

/* ---- frames */

static size_t make_frame(uint8_t *out, int type, int flags, uint32_t seq, const void *payload,
                         uint32_t len)
{
    pf_wire_frame_header(out, type, flags, seq, len);
    if (len) memcpy(out + PF_WIRE_HDR, payload, len);
    size_t n = PF_WIRE_HDR + len;
    if (flags & PF_WIRE_F_MAC) {
        memset(out + n, 0xAB, PF_WIRE_MACLEN);
        n += PF_WIRE_MACLEN;
    }
    return n;
}

static void test_frame_complete_and_partial(void **state)
{
    (void)state;
    uint8_t buf[256];
    const char *pl = "hello, rank 0";
    size_t n = make_frame(buf, PF_WIRE_JOIN, 0, 42, pl, (uint32_t)strlen(pl));
    assert_memory_equal(buf, "PFRV", 4);
    struct pf_wire_frame f;
    assert_int_equal(pf_wire_frame_decode(&f, buf, n, 1024), (int)n);
    assert_int_equal(f.version, PF_WIRE_PROTO);
    assert_int_equal(f.type, PF_WIRE_JOIN);
    assert_int_equal(f.flags, 0);
    assert_int_equal(f.seq, 42);
    assert_int_equal(f.len, strlen(pl));
    assert_memory_equal(f.payload, pl, strlen(pl));
    assert_ptr_equal(f.header, buf);
    assert_null(f.mac);
    /* trailing bytes of the next frame are not this one's */
    assert_int_equal(pf_wire_frame_decode(&f, buf, sizeof(buf), 1024), (int)n);
    /* every shorter prefix asks for more */
    for (size_t k = 0; k < n; k++)
        assert_int_equal(pf_wire_frame_decode(&f, buf, k, 1024), 0);

    /* with a MAC: 32 more bytes, and mac points at them */
    n = make_frame(buf, PF_WIRE_ROSTER, PF_WIRE_F_MAC, 0, pl, (uint32_t)strlen(pl));
    assert_int_equal(pf_wire_frame_decode(&f, buf, n, 1024), (int)n);
    assert_non_null(f.mac);
    assert_ptr_equal(f.mac, buf + PF_WIRE_HDR + strlen(pl));
    assert_int_equal(pf_wire_frame_decode(&f, buf, n - 1, 1024), 0);

    /* an empty payload */
    n = make_frame(buf, PF_WIRE_STEP, 0, 7, NULL, 0);
    assert_int_equal(n, PF_WIRE_HDR);
    assert_int_equal(pf_wire_frame_decode(&f, buf, n, 0), PF_WIRE_HDR);
    assert_int_equal(f.len, 0);

    /* every type has a name */
    for (int t = 1; t < PF_WIRE_TYPE_END; t++)
        assert_string_not_equal(pf_wire_type_name(t), "?");
    assert_string_equal(pf_wire_type_name(0), "?");
    assert_string_equal(pf_wire_type_name(PF_WIRE_TYPE_END), "?");
    assert_string_equal(pf_wire_type_name(PF_WIRE_DHELLO), "DHELLO");
}

static void test_frame_garbage(void **state)
{
    (void)state;
    uint8_t buf[64];
    struct pf_wire_frame f;
    size_t n = make_frame(buf, PF_WIRE_HELLO, 0, 0, "ab", 2);

    /* bad magic is refused at its first byte, before a whole header is there */
    uint8_t g[PF_WIRE_HDR];
    memcpy(g, buf, sizeof(g));
    g[0] = 'G';
    assert_int_equal(pf_wire_frame_decode(&f, g, 1, 1024), PF_EINVAL);
    assert_non_null(strstr(pf_err_msg(), "bad magic"));
    memcpy(g, buf, sizeof(g));
    g[3] = 'X';
    assert_int_equal(pf_wire_frame_decode(&f, g, 3, 1024), 0);
    assert_int_equal(pf_wire_frame_decode(&f, g, 4, 1024), PF_EINVAL);
    /* an HTTP request on the port */
    const char *http = "GET / HTTP/1.1\r\n\r\n";
    assert_int_equal(pf_wire_frame_decode(&f, (const uint8_t *)http, strlen(http), 1024),
                     PF_EINVAL);
    assert_int_equal(pf_wire_frame_decode(&f, buf, 0, 1024), 0);

    /* unknown types */
    static const int bad_types[] = {0, PF_WIRE_TYPE_END, 200, 255};
    for (size_t i = 0; i < PF_ARRAY_LEN(bad_types); i++) {
        memcpy(g, buf, sizeof(g));
        g[5] = (uint8_t)bad_types[i];
        assert_int_equal(pf_wire_frame_decode(&f, g, sizeof(g), 1024), PF_EINVAL);
        assert_non_null(strstr(pf_err_msg(), "unknown frame type"));
    }
    /* unknown flags, and the reserved byte */
    memcpy(g, buf, sizeof(g));
    g[6] = 0x02;
    assert_int_equal(pf_wire_frame_decode(&f, g, sizeof(g), 1024), PF_EINVAL);
    assert_non_null(strstr(pf_err_msg(), "flags"));
    memcpy(g, buf, sizeof(g));
    g[7] = 1;
    assert_int_equal(pf_wire_frame_decode(&f, g, sizeof(g), 1024), PF_EINVAL);

    /* oversize: over the caller's limit, and over the protocol's whatever the caller says */
    pf_wire_frame_header(g, PF_WIRE_JOIN, 0, 0, 1025);
    assert_int_equal(pf_wire_frame_decode(&f, g, sizeof(g), 1024), PF_ETOOBIG);
    assert_non_null(strstr(pf_err_msg(), "1025"));
    assert_int_equal(pf_wire_frame_decode(&f, g, sizeof(g), 1025), 0); /* fits: needs more */
    pf_wire_frame_header(g, PF_WIRE_JOIN, 0, 0, PF_WIRE_MAX_PAYLOAD + 1);
    assert_int_equal(pf_wire_frame_decode(&f, g, sizeof(g), SIZE_MAX), PF_ETOOBIG);
    pf_wire_frame_header(g, PF_WIRE_JOIN, 0, 0, UINT32_MAX);
    assert_int_equal(pf_wire_frame_decode(&f, g, sizeof(g), SIZE_MAX), PF_ETOOBIG);
    (void)n;
}

static void test_frame_other_version(void **state)
{
    (void)state;
    uint8_t g[PF_WIRE_HDR + 8];
    struct pf_wire_frame f;
    pf_wire_frame_header(g, PF_WIRE_JOIN, 0, 3, 8);
    g[4] = PF_WIRE_PROTO + 1; /* a later preflight */
    g[5] = 77;                /* with a type this one does not know */
    g[6] = 0xF0;              /* and flags */
    /* decodes as far as the header so the caller can name the version */
    assert_int_equal(pf_wire_frame_decode(&f, g, PF_WIRE_HDR, 1024), PF_WIRE_HDR);
    assert_int_equal(f.version, PF_WIRE_PROTO + 1);
    assert_int_equal(f.seq, 3);
    assert_null(f.payload);
    /* even when its length would be too big for this version */
    pf_wire_frame_header(g, PF_WIRE_JOIN, 0, 0, 1u << 30);
    g[4] = 9;
    assert_int_equal(pf_wire_frame_decode(&f, g, PF_WIRE_HDR, 1024), PF_WIRE_HDR);
    assert_int_equal(f.version, 9);
    /* and still needs a whole header */
    assert_int_equal(pf_wire_frame_decode(&f, g, PF_WIRE_HDR - 1, 1024), 0);
}

/* ---- fields */

static void test_fields_round_trip(void **state)
{
    (void)state;
    struct pf_buf b;
    pf_buf_init(&b, 1 << 20);
    uint8_t bin[300];
    for (size_t i = 0; i < sizeof(bin); i++)
        bin[i] = (uint8_t)(i * 7);
    assert_int_equal(pf_wire_put_str(&b, "pod", "trainer-3"), 0);
    assert_int_equal(pf_wire_put_int(&b, "rank", 3), 0);
    assert_int_equal(pf_wire_put_int(&b, "neg", -9223372036854775807LL - 1), 0);
    assert_int_equal(pf_wire_put(&b, "nonce", bin, sizeof(bin)), 0);
    assert_int_equal(pf_wire_put_str(&b, "env", "NCCL_DEBUG=INFO"), 0);
    assert_int_equal(pf_wire_put_str(&b, "env", "NCCL_IB_HCA=mlx5"), 0);
    assert_int_equal(pf_wire_put_str(&b, "empty", ""), 0);
    assert_int_equal(pf_wire_put_str(&b, "null", NULL), 0);
    char key64[65];
    memset(key64, 'k', 64);
    key64[64] = '\0';
    assert_int_equal(pf_wire_put_str(&b, key64, "x"), 0);
    /* keys the format cannot carry */
    assert_int_equal(pf_wire_put_str(&b, "", "x"), PF_EINVAL);
    char key65[66];
    memset(key65, 'k', 65);
    key65[65] = '\0';
    assert_int_equal(pf_wire_put_str(&b, key65, "x"), PF_EINVAL);

    struct pf_wire_fields f;
    assert_int_equal(pf_wire_fields_decode(&f, (const uint8_t *)b.data, b.len), 0);
    assert_int_equal(f.n, 9);
    char s[64];
    long long v;
    assert_int_equal(pf_wire_fields_str(s, sizeof(s), &f, "pod"), 0);
    assert_string_equal(s, "trainer-3");
    assert_int_equal(pf_wire_fields_int(&v, &f, "rank"), 0);
    assert_int_equal(v, 3);
    assert_int_equal(pf_wire_fields_int(&v, &f, "neg"), 0);
    assert_true(v == -9223372036854775807LL - 1);
    const struct pf_wire_field *nf = pf_wire_fields_get(&f, "nonce");
    assert_non_null(nf);
    assert_int_equal(nf->vlen, sizeof(bin));
    assert_memory_equal(nf->val, bin, sizeof(bin));
    /* binary with a NUL is not text */
    assert_int_equal(pf_wire_fields_str(s, sizeof(s), &f, "nonce"), PF_EINVAL);
    assert_non_null(strstr(pf_err_msg(), "nonce"));
    assert_null(pf_wire_field_dup(nf));
    /* a repeated key: get finds the first, the list keeps both in order */
    assert_int_equal(pf_wire_fields_str(s, sizeof(s), &f, "env"), 0);
    assert_string_equal(s, "NCCL_DEBUG=INFO");
    int nenv = 0;
    for (size_t i = 0; i < f.n; i++) {
        if (!pf_wire_field_is(&f.v[i], "env")) continue;
        char *d = pf_wire_field_dup(&f.v[i]);
        assert_string_equal(d, nenv == 0 ? "NCCL_DEBUG=INFO" : "NCCL_IB_HCA=mlx5");
        free(d);
        nenv++;
    }
    assert_int_equal(nenv, 2);
    assert_int_equal(pf_wire_fields_str(s, sizeof(s), &f, "empty"), 0);
    assert_string_equal(s, "");
    assert_int_equal(pf_wire_fields_str(s, sizeof(s), &f, "null"), 0);
    assert_string_equal(s, "");
    assert_int_equal(pf_wire_fields_str(s, sizeof(s), &f, key64), 0);
    assert_string_equal(s, "x");
    /* absent, too long, not a number */
    assert_int_equal(pf_wire_fields_str(s, sizeof(s), &f, "missing"), PF_ENOENT);
    assert_non_null(strstr(pf_err_msg(), "missing"));
    assert_int_equal(pf_wire_fields_int(&v, &f, "missing"), PF_ENOENT);
    assert_int_equal(pf_wire_fields_str(s, 9, &f, "pod"), PF_ETOOBIG);
    assert_int_equal(pf_wire_fields_str(s, 10, &f, "pod"), 0);
    assert_int_equal(pf_wire_fields_int(&v, &f, "pod"), PF_EINVAL);
    assert_int_equal(pf_wire_fields_int(&v, &f, "empty"), PF_EINVAL);
    assert_null(pf_wire_fields_get(&f, "po"));
    assert_null(pf_wire_fields_get(&f, "pods"));
    pf_wire_fields_free(&f);
    assert_null(f.v);

    /* an empty payload is no fields */
    assert_int_equal(pf_wire_fields_decode(&f, (const uint8_t *)"", 0), 0);
    assert_int_equal(f.n, 0);
    pf_wire_fields_free(&f);
    pf_buf_free(&b);
}

static void test_fields_int_strict(void **state)
{
    (void)state;
    static const struct {
        const char *text;
        int rc;
        long long v;
    } cases[] = {
        {"0", 0, 0},
        {"-12", 0, -12},
        {"9223372036854775807", 0, 9223372036854775807LL},
        {"9223372036854775808", PF_EINVAL, 0}, /* out of range: never clamped */
        {"-9223372036854775809", PF_EINVAL, 0},
        {"99999999999999999999999", PF_EINVAL, 0},
        {" 5", PF_EINVAL, 0},
        {"5 ", PF_EINVAL, 0},
        {"0x10", PF_EINVAL, 0},
        {"", PF_EINVAL, 0},
        {"-", PF_EINVAL, 0},
    };
    for (size_t i = 0; i < PF_ARRAY_LEN(cases); i++) {
        struct pf_buf b;
        pf_buf_init(&b, 1024);
        pf_wire_put_str(&b, "n", cases[i].text);
        struct pf_wire_fields f;
        assert_int_equal(pf_wire_fields_decode(&f, (const uint8_t *)b.data, b.len), 0);
        long long v = -1;
        int rc = pf_wire_fields_int(&v, &f, "n");
        if (rc != cases[i].rc) print_message("int \"%s\": rc %d v %lld\n", cases[i].text, rc, v);
        assert_int_equal(rc, cases[i].rc);
        if (rc == 0) assert_true(v == cases[i].v);
        if (rc < 0) assert_non_null(strstr(pf_err_msg(), "field n"));
        pf_wire_fields_free(&f);
        pf_buf_free(&b);
    }
}

static void test_fields_malformed(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        const uint8_t *p;
        size_t len;
    } cases[] = {
        {"key length 0", (const uint8_t *)"\0", 1},
        {"key length 65", (const uint8_t *)"\x41", 1},
        {"key cut",
         (const uint8_t *)"\x03"
                          "ab",
         3},
        {"value length cut", (const uint8_t *)"\x01k\0\0", 4},
        {"value longer than the payload",
         (const uint8_t *)"\x01k\0\0\0\x05"
                          "abcd",
         10},
        {"value length near 4 GiB",
         (const uint8_t *)"\x01k\xff\xff\xff\xff"
                          "ab",
         8},
        {"key with a space", (const uint8_t *)"\x02k \0\0\0\0", 7},
        {"key with a control byte", (const uint8_t *)"\x02k\n\0\0\0\0", 7},
        {"key with a high byte", (const uint8_t *)"\x02k\xc3\0\0\0\0", 7},
        {"good field then a stray byte", (const uint8_t *)"\x01k\0\0\0\x01v\x01", 8},
    };
    for (size_t i = 0; i < PF_ARRAY_LEN(cases); i++) {
        struct pf_wire_fields f;
        int rc = pf_wire_fields_decode(&f, cases[i].p, cases[i].len);
        if (rc != PF_EINVAL) print_message("fields: %s: rc %d\n", cases[i].name, rc);
        assert_int_equal(rc, PF_EINVAL);
        assert_non_null(strstr(pf_err_msg(), "malformed fields"));
        /* nothing is left to free */
        assert_null(f.v);
        assert_int_equal(f.n, 0);
    }
    /* the first byte of a good payload cut anywhere is malformed or fewer fields */
    struct pf_buf b;
    pf_buf_init(&b, 1024);
    pf_wire_put_str(&b, "a", "1");
    pf_wire_put_str(&b, "bb", "22");
    for (size_t k = 1; k < b.len; k++) {
        struct pf_wire_fields f;
        int rc = pf_wire_fields_decode(&f, (const uint8_t *)b.data, k);
        if (k == 7) {
            assert_int_equal(rc, 0); /* exactly the first field */
            assert_int_equal(f.n, 1);
        } else {
            assert_int_equal(rc, PF_EINVAL);
        }
        pf_wire_fields_free(&f);
    }
    pf_buf_free(&b);
}

/* ---- MAC */

static void auth_init(struct pf_wire_auth *a, const char *token, uint8_t ns, uint8_t nc)
{
    memset(a, 0, sizeof(*a));
    a->on = true;
    a->token = token;
    memset(a->nonce_s, ns, PF_WIRE_NONCE);
    memset(a->nonce_c, nc, PF_WIRE_NONCE);
}

/* A MAC'd frame in buf, decoded into f. */
static void macd_frame(uint8_t *buf, struct pf_wire_frame *f, const struct pf_wire_auth *a, int dir,
                       uint32_t seq, const char *payload)
{
    uint32_t len = (uint32_t)strlen(payload);
    pf_wire_frame_header(buf, PF_WIRE_JOIN, PF_WIRE_F_MAC, seq, len);
    memcpy(buf + PF_WIRE_HDR, payload, len);
    pf_wire_mac(buf + PF_WIRE_HDR + len, a, dir, buf, buf + PF_WIRE_HDR, len);
    int n = pf_wire_frame_decode(f, buf, PF_WIRE_HDR + len + PF_WIRE_MACLEN, 1024);
    assert_int_equal(n, (int)(PF_WIRE_HDR + len + PF_WIRE_MACLEN));
}

static void test_mac(void **state)
{
    (void)state;
    struct pf_wire_auth a, other;
    auth_init(&a, "s3cret-token", 0x11, 0x22);
    uint8_t buf[256];
    struct pf_wire_frame f;
    const char *pl = "rank=3 pod=trainer-3";
    macd_frame(buf, &f, &a, PF_WIRE_DIR_TO_ROOT, 5, pl);
    assert_true(pf_wire_mac_ok(&a, PF_WIRE_DIR_TO_ROOT, &f));

    /* the other direction, the data direction */
    assert_false(pf_wire_mac_ok(&a, PF_WIRE_DIR_FROM_ROOT, &f));
    assert_false(pf_wire_mac_ok(&a, PF_WIRE_DIR_DATA, &f));
    /* a wrong token, an empty one, a prefix of it */
    static const char *const bad_tokens[] = {"s3cret-tokem", "", "s3cret", "s3cret-token "};
    for (size_t i = 0; i < PF_ARRAY_LEN(bad_tokens); i++) {
        auth_init(&other, bad_tokens[i], 0x11, 0x22);
        assert_false(pf_wire_mac_ok(&other, PF_WIRE_DIR_TO_ROOT, &f));
    }
    /* another connection's nonces */
    auth_init(&other, "s3cret-token", 0x12, 0x22);
    assert_false(pf_wire_mac_ok(&other, PF_WIRE_DIR_TO_ROOT, &f));
    auth_init(&other, "s3cret-token", 0x11, 0x23);
    assert_false(pf_wire_mac_ok(&other, PF_WIRE_DIR_TO_ROOT, &f));
    /* auth off: never ok */
    other = a;
    other.on = false;
    assert_false(pf_wire_mac_ok(&other, PF_WIRE_DIR_TO_ROOT, &f));

    /* any flipped bit anywhere in header, payload or MAC breaks it (the magic, version,
     * type and flags are the decoder's business; seq, length and payload are the MAC's) */
    size_t total = PF_WIRE_HDR + strlen(pl) + PF_WIRE_MACLEN;
    for (size_t i = 0; i < total; i++) {
        for (int bit = 0; bit < 8; bit++) {
            uint8_t copy[256];
            memcpy(copy, buf, total);
            copy[i] ^= (uint8_t)(1u << bit);
            struct pf_wire_frame g;
            int n = pf_wire_frame_decode(&g, copy, total, 1024);
            if (n != (int)total) continue; /* refused or reshaped by the decoder */
            assert_false(pf_wire_mac_ok(&a, PF_WIRE_DIR_TO_ROOT, &g));
        }
    }
    /* the same frame at another position of the stream */
    uint8_t b2[256];
    struct pf_wire_frame g;
    memcpy(b2, buf, total);
    b2[11] = 6; /* seq 5 -> 6, MAC unchanged */
    assert_int_equal(pf_wire_frame_decode(&g, b2, total, 1024), (int)total);
    assert_int_equal(g.seq, 6);
    assert_false(pf_wire_mac_ok(&a, PF_WIRE_DIR_TO_ROOT, &g));
    /* a frame without a MAC is never ok */
    size_t n = make_frame(b2, PF_WIRE_JOIN, 0, 5, pl, (uint32_t)strlen(pl));
    assert_int_equal(pf_wire_frame_decode(&g, b2, n, 1024), (int)n);
    assert_false(pf_wire_mac_ok(&a, PF_WIRE_DIR_TO_ROOT, &g));

    /* deterministic for the same inputs; random bytes are not all equal */
    uint8_t m1[PF_WIRE_MACLEN], m2[PF_WIRE_MACLEN];
    pf_wire_mac(m1, &a, 0, buf, buf + PF_WIRE_HDR, strlen(pl));
    pf_wire_mac(m2, &a, 0, buf, buf + PF_WIRE_HDR, strlen(pl));
    assert_memory_equal(m1, m2, PF_WIRE_MACLEN);
    uint8_t r1[32], r2[32];
    pf_wire_random(r1, sizeof(r1));
    pf_wire_random(r2, sizeof(r2));
    assert_memory_not_equal(r1, r2, sizeof(r1));
}

static void hex(uint8_t *out, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        assert_int_equal(sscanf(s + 2 * i, "%2x", &v), 1);
        out[i] = (uint8_t)v;
    }
}

/* The MAC covers the header and the payload's SHA-256 (docs/security.md, "The frame MAC"):
 * the values below were made with Python's hmac and hashlib, not with this code. A payload
 * hashed once and MAC'd per connection gives the same bytes as one MAC'd whole, and a
 * changed byte of a large payload, whose digest then differs, fails. */
static void test_mac_digest(void **state)
{
    (void)state;
    struct pf_wire_auth a;
    auth_init(&a, "s3cret-token", 0x11, 0x22);
    uint8_t buf[256];
    struct pf_wire_frame f;
    const char *pl = "rank=3 pod=trainer-3";
    macd_frame(buf, &f, &a, PF_WIRE_DIR_TO_ROOT, 5, pl);
    uint8_t want[PF_WIRE_MACLEN], dg[PF_WIRE_DIGEST], m[PF_WIRE_MACLEN];
    hex(want, "c2d7edd85f2b2a89c4bd4118604442bc649763328d677c02064364e420c3d528", PF_WIRE_DIGEST);
    pf_wire_digest(dg, f.payload, f.len);
    assert_memory_equal(dg, want, PF_WIRE_DIGEST);
    /* the header says protocol 4 */
    hex(want, "5718f8847e995dd4f6a3aca786d3519a8fb14ca9940cc5884c5658cbd4aecdd5", PF_WIRE_MACLEN);
    assert_memory_equal(f.mac, want, PF_WIRE_MACLEN);
    pf_wire_mac_digest(m, &a, PF_WIRE_DIR_TO_ROOT, f.header, dg);
    assert_memory_equal(m, want, PF_WIRE_MACLEN);
    /* the digest is what the MAC binds: another digest, another MAC */
    dg[PF_WIRE_DIGEST - 1] ^= 1;
    pf_wire_mac_digest(m, &a, PF_WIRE_DIR_TO_ROOT, f.header, dg);
    assert_memory_not_equal(m, want, PF_WIRE_MACLEN);

    /* a 1 MiB payload (a whole roster at 14,000 ranks, before protocol 3), MAC'd from its
     * digest as a fan-out does */
    size_t len = 1u << 20;
    uint8_t *big = malloc(PF_WIRE_HDR + len + PF_WIRE_MACLEN);
    assert_non_null(big);
    for (size_t i = 0; i < len; i++)
        big[PF_WIRE_HDR + i] = (uint8_t)(i * 7 + 3);
    pf_wire_frame_header(big, PF_WIRE_ROSTER, PF_WIRE_F_MAC, 1, (uint32_t)len);
    pf_wire_digest(dg, big + PF_WIRE_HDR, len);
    pf_wire_mac_digest(big + PF_WIRE_HDR + len, &a, PF_WIRE_DIR_FROM_ROOT, big, dg);
    size_t total = PF_WIRE_HDR + len + PF_WIRE_MACLEN;
    struct pf_wire_frame g;
    assert_int_equal(pf_wire_frame_decode(&g, big, total, PF_WIRE_MAX_PAYLOAD), (int)total);
    assert_true(pf_wire_mac_ok(&a, PF_WIRE_DIR_FROM_ROOT, &g));
    /* one byte changed, first, in the middle, last: the digest differs, the MAC fails */
    size_t at[] = {0, len / 2, len - 1};
    for (size_t i = 0; i < PF_ARRAY_LEN(at); i++) {
        big[PF_WIRE_HDR + at[i]] ^= 0x40;
        assert_false(pf_wire_mac_ok(&a, PF_WIRE_DIR_FROM_ROOT, &g));
        big[PF_WIRE_HDR + at[i]] ^= 0x40;
    }
    assert_true(pf_wire_mac_ok(&a, PF_WIRE_DIR_FROM_ROOT, &g));
    /* the same payload and digest on another connection: that connection's MAC, not this */
    struct pf_wire_auth b;
    auth_init(&b, "s3cret-token", 0x11, 0x23);
    assert_false(pf_wire_mac_ok(&b, PF_WIRE_DIR_FROM_ROOT, &g));
    free(big);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_frame_complete_and_partial),
        cmocka_unit_test(test_frame_garbage),
        cmocka_unit_test(test_frame_other_version),
        cmocka_unit_test(test_fields_round_trip),
        cmocka_unit_test(test_fields_int_strict),
        cmocka_unit_test(test_fields_malformed),
        cmocka_unit_test(test_mac),
        cmocka_unit_test(test_mac_digest),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
