/* rendezvous: one connection over a real socketpair (frames both ways, MAC, sequence, a
 * deadline on a silent peer). */
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

#include "../../../pkg/rendezvous/internal.h"

static void auth_init(struct pf_wire_auth *a, const char *token, uint8_t ns, uint8_t nc)
{
    memset(a, 0, sizeof(*a));
    a->on = true;
    a->token = token;
    memset(a->nonce_s, ns, PF_WIRE_NONCE);
    memset(a->nonce_c, nc, PF_WIRE_NONCE);
}

/* ---- one connection over a socketpair */

static void nonblock_pair(int sv[2])
{
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    for (int i = 0; i < 2; i++)
        assert_int_equal(fcntl(sv[i], F_SETFL, fcntl(sv[i], F_GETFL) | O_NONBLOCK), 0);
}

static void test_conn_round_trip(void **state)
{
    (void)state;
    int sv[2];
    nonblock_pair(sv);
    struct pf_rdv_conn joiner, root;
    pf_rdv_conn_init(&joiner, sv[0], "root", true);
    pf_rdv_conn_init(&root, sv[1], "joiner", false);
    double dl = pf_now() + 10;

    struct pf_buf b;
    pf_buf_init(&b, 1 << 20);
    pf_wire_put_str(&b, "pod", "trainer-1");
    pf_wire_put_int(&b, "rank", 1);
    /* several frames queued before any is read, one large enough to need many reads */
    assert_int_equal(pf_rdv_conn_send(&joiner, PF_WIRE_JOIN, b.data, b.len, dl), 0);
    assert_int_equal(pf_rdv_conn_send(&joiner, PF_WIRE_STEP, NULL, 0, dl), 0);
    struct pf_rdv_msg m;
    assert_int_equal(pf_rdv_conn_recv(&root, &m, false, dl), 0);
    assert_int_equal(m.type, PF_WIRE_JOIN);
    char s[64];
    assert_int_equal(pf_wire_fields_str(s, sizeof(s), &m.f, "pod"), 0);
    assert_string_equal(s, "trainer-1");
    assert_false(m.had_mac);
    assert_false(m.mac_ok);
    pf_rdv_msg_free(&m);
    assert_int_equal(pf_rdv_conn_recv(&root, &m, false, dl), 0);
    assert_int_equal(m.type, PF_WIRE_STEP);
    assert_int_equal(m.len, 0);
    assert_int_equal(m.f.n, 0);
    pf_rdv_msg_free(&m);

    /* the other way, 1 MiB: the writer and the reader take turns without blocking */
    pf_buf_reset(&b);
    size_t big = 1 << 20;
    uint8_t *blob = malloc(big);
    for (size_t i = 0; i < big; i++)
        blob[i] = (uint8_t)(i * 31 + 7);
    /* a field over the buffer's limit is refused whole, never half written */
    assert_int_equal(pf_wire_put(&b, "blob", blob, big), PF_ETOOBIG);
    assert_int_equal(b.len, 0);
    pf_buf_free(&b);
    pf_buf_init(&b, 2 << 20);
    assert_int_equal(pf_wire_put(&b, "blob", blob, big), 0);
    pf_rdv_conn_queue(&root, PF_WIRE_ROSTER, b.data, b.len);
    assert_true(pf_rdv_conn_pending(&root));
    int got = 0;
    for (int spins = 0; spins < 100000 && !got; spins++) {
        int r = pf_rdv_conn_flush_some(&root);
        assert_true(r >= 0);
        r = pf_rdv_conn_fill(&joiner);
        assert_true(r > 0 || r == PF_ETIMEOUT);
        got = pf_rdv_conn_next(&joiner, &m, false);
        if (got < 0) print_message("next: %d %s\n", got, pf_err_msg());
        assert_true(got >= 0);
    }
    assert_int_equal(got, 1);
    assert_false(pf_rdv_conn_pending(&root));
    assert_int_equal(m.type, PF_WIRE_ROSTER);
    const struct pf_wire_field *fl = pf_wire_fields_get(&m.f, "blob");
    assert_non_null(fl);
    assert_int_equal(fl->vlen, big);
    assert_memory_equal(fl->val, blob, big);
    pf_rdv_msg_free(&m);
    free(blob);

    /* the peer goes away: the reader says so, naming it */
    pf_rdv_conn_close(&root);
    assert_int_equal(pf_rdv_conn_recv(&joiner, &m, false, dl), PF_ERR);
    assert_non_null(strstr(pf_err_msg(), "root closed the connection"));
    pf_rdv_conn_close(&joiner);
    pf_buf_free(&b);
}

/* One payload queued to several connections (a fan-out): each gets it whole, under its own
 * sequence number and MAC, and the one copy is freed by the last writer (ASan says when it
 * leaks or is freed twice), also when a connection closes with it still queued. */
static void test_conn_shared_payload(void **state)
{
    (void)state;
    int a[2], b[2], c[2];
    nonblock_pair(a);
    nonblock_pair(b);
    nonblock_pair(c);
    struct pf_rdv_conn ra, rb, rc, ja, jb;
    pf_rdv_conn_init(&ra, a[1], "a", false);
    pf_rdv_conn_init(&rb, b[1], "b", false);
    pf_rdv_conn_init(&rc, c[1], "c", false);
    pf_rdv_conn_init(&ja, a[0], "root", true);
    pf_rdv_conn_init(&jb, b[0], "root", true);
    struct pf_wire_auth au = {.on = true, .token = "t"};
    memset(au.nonce_s, 1, sizeof(au.nonce_s));
    ra.auth = ja.auth = au;
    memset(au.nonce_c, 2, sizeof(au.nonce_c));
    rb.auth = jb.auth = au;
    struct pf_buf p;
    pf_buf_init(&p, 1 << 20);
    pf_wire_put_str(&p, "roster", "every rank");
    struct pf_rdv_shared *sh = pf_rdv_shared_new(p.data, p.len);
    pf_rdv_conn_queue(&ra, PF_WIRE_STEP, NULL, 0); /* a frame before it: seq 1 for a */
    pf_rdv_conn_queue_shared(&ra, PF_WIRE_ROSTER, sh);
    pf_rdv_conn_queue_shared(&rb, PF_WIRE_ROSTER, sh);
    pf_rdv_conn_queue_shared(&rc, PF_WIRE_ROSTER, sh);
    pf_rdv_shared_drop(sh); /* the queues hold it now */
    pf_rdv_conn_close(&rc); /* never written: its reference goes with it */
    double dl = pf_now() + 10;
    struct pf_rdv_conn *roots[2] = {&ra, &rb}, *joiners[2] = {&ja, &jb};
    for (int k = 0; k < 2; k++) {
        while (pf_rdv_conn_pending(roots[k]))
            assert_true(pf_rdv_conn_flush_some(roots[k]) >= 0);
        struct pf_rdv_msg m;
        if (k == 0) {
            assert_int_equal(pf_rdv_conn_recv(joiners[k], &m, true, dl), 0);
            assert_int_equal(m.type, PF_WIRE_STEP);
            pf_rdv_msg_free(&m);
        }
        assert_int_equal(pf_rdv_conn_recv(joiners[k], &m, true, dl), 0);
        assert_int_equal(m.type, PF_WIRE_ROSTER);
        assert_true(m.mac_ok);
        char v[32];
        assert_int_equal(pf_wire_fields_str(v, sizeof(v), &m.f, "roster"), 0);
        assert_string_equal(v, "every rank");
        pf_rdv_msg_free(&m);
    }
    pf_buf_free(&p);
    pf_rdv_conn_close(&ra);
    pf_rdv_conn_close(&rb);
    pf_rdv_conn_close(&ja);
    pf_rdv_conn_close(&jb);
    close(c[0]);
}

/* A fan-out's payload is hashed once and each connection's MAC covers that digest: a byte
 * of the payload changed on the way no longer matches it, and the joiner refuses the frame,
 * naming it; the same bytes unchanged on a second connection are taken. */
static void test_conn_shared_tampered(void **state)
{
    (void)state;
    int wire[2], a[2], b[2];
    nonblock_pair(wire);
    nonblock_pair(a);
    nonblock_pair(b);
    struct pf_rdv_conn root, rootb, joiner, joinerb;
    pf_rdv_conn_init(&root, wire[1], "root side", false);
    pf_rdv_conn_init(&rootb, b[1], "root side", false);
    pf_rdv_conn_init(&joiner, a[0], "root", true);
    pf_rdv_conn_init(&joinerb, b[0], "root", true);
    struct pf_wire_auth au;
    auth_init(&au, "t", 3, 4);
    root.auth = joiner.auth = au;
    auth_init(&au, "t", 3, 5);
    rootb.auth = joinerb.auth = au;
    struct pf_buf p;
    pf_buf_init(&p, 1 << 20);
    char rec[64];
    for (int k = 0; k < 2000; k++) {
        snprintf(rec, sizeof(rec), "10.0.%d.%d:29500 trainer-%d", k / 250, k % 250, k);
        pf_wire_put_str(&p, "m", rec);
    }
    struct pf_rdv_shared *sh = pf_rdv_shared_new(p.data, p.len);
    pf_rdv_conn_queue_shared(&root, PF_WIRE_ROSTER, sh);
    pf_rdv_conn_queue_shared(&rootb, PF_WIRE_ROSTER, sh);
    pf_rdv_shared_drop(sh);
    /* the frame as rank 0 wrote it, one payload byte changed, then on to the joiner */
    size_t total = PF_WIRE_HDR + p.len + PF_WIRE_MACLEN, got = 0;
    uint8_t *raw = malloc(total);
    assert_non_null(raw);
    while (got < total) {
        assert_true(pf_rdv_conn_flush_some(&root) >= 0);
        ssize_t r = read(wire[0], raw + got, total - got);
        if (r > 0) got += (size_t)r;
    }
    raw[PF_WIRE_HDR + p.len / 2] ^= 0x01;
    struct pf_rdv_msg m;
    int r = 0;
    for (size_t off = 0; r == 0;) {
        if (off < total) {
            ssize_t w = write(a[1], raw + off, total - off);
            if (w > 0) off += (size_t)w;
        }
        int fr = pf_rdv_conn_fill(&joiner);
        assert_true(fr > 0 || fr == PF_ETIMEOUT);
        r = pf_rdv_conn_next(&joiner, &m, true);
    }
    assert_int_equal(r, PF_EINVAL);
    assert_non_null(strstr(pf_err_msg(), "ROSTER frame fails its HMAC"));
    /* the other connection's copy, unchanged, is taken */
    double dl = pf_now() + 10;
    while (pf_rdv_conn_pending(&rootb)) {
        assert_true(pf_rdv_conn_flush_some(&rootb) >= 0);
        if (pf_rdv_conn_pending(&rootb)) {
            int fr = pf_rdv_conn_fill(&joinerb);
            assert_true(fr > 0 || fr == PF_ETIMEOUT);
        }
    }
    assert_int_equal(pf_rdv_conn_recv(&joinerb, &m, true, dl), 0);
    assert_int_equal(m.type, PF_WIRE_ROSTER);
    assert_true(m.mac_ok);
    assert_int_equal(m.len, p.len);
    assert_memory_equal(m.payload, p.data, p.len);
    pf_rdv_msg_free(&m);
    free(raw);
    pf_buf_free(&p);
    pf_rdv_conn_close(&root);
    pf_rdv_conn_close(&rootb);
    pf_rdv_conn_close(&joiner);
    pf_rdv_conn_close(&joinerb);
    close(wire[0]);
    close(a[1]);
}

static void test_conn_mac_and_sequence(void **state)
{
    (void)state;
    int sv[2];
    nonblock_pair(sv);
    struct pf_rdv_conn joiner, root;
    pf_rdv_conn_init(&joiner, sv[0], "root", true);
    pf_rdv_conn_init(&root, sv[1], "joiner", false);
    auth_init(&joiner.auth, "tok", 1, 2);
    auth_init(&root.auth, "tok", 1, 2);
    double dl = pf_now() + 10;
    struct pf_buf b;
    pf_buf_init(&b, 4096);
    pf_wire_put_str(&b, "k", "v");
    struct pf_rdv_msg m;
    for (int i = 0; i < 3; i++) {
        assert_int_equal(pf_rdv_conn_send(&joiner, PF_WIRE_STEP, b.data, b.len, dl), 0);
        assert_int_equal(pf_rdv_conn_recv(&root, &m, true, dl), 0);
        assert_true(m.had_mac);
        assert_true(m.mac_ok);
        pf_rdv_msg_free(&m);
        assert_int_equal(pf_rdv_conn_send(&root, PF_WIRE_RESULT, b.data, b.len, dl), 0);
        assert_int_equal(pf_rdv_conn_recv(&joiner, &m, true, dl), 0);
        assert_true(m.mac_ok);
        pf_rdv_msg_free(&m);
    }
    /* a joiner with another token: the frame fails its HMAC and says so */
    joiner.auth.token = "other";
    assert_int_equal(pf_rdv_conn_send(&joiner, PF_WIRE_STEP, b.data, b.len, dl), 0);
    assert_int_equal(pf_rdv_conn_recv(&root, &m, true, dl), PF_EINVAL);
    assert_non_null(strstr(pf_err_msg(), "fails its HMAC"));
    pf_rdv_conn_close(&joiner);
    pf_rdv_conn_close(&root);

    /* no token on one side: "carries no HMAC" */
    nonblock_pair(sv);
    pf_rdv_conn_init(&joiner, sv[0], "root", true);
    pf_rdv_conn_init(&root, sv[1], "joiner", false);
    auth_init(&root.auth, "tok", 1, 2);
    assert_int_equal(pf_rdv_conn_send(&joiner, PF_WIRE_STEP, b.data, b.len, dl), 0);
    assert_int_equal(pf_rdv_conn_recv(&root, &m, true, dl), PF_EINVAL);
    assert_non_null(strstr(pf_err_msg(), "carries no HMAC"));
    pf_rdv_conn_close(&joiner);
    pf_rdv_conn_close(&root);

    /* a replayed frame is out of sequence */
    nonblock_pair(sv);
    pf_rdv_conn_init(&joiner, sv[0], "root", true);
    pf_rdv_conn_init(&root, sv[1], "joiner", false);
    assert_int_equal(pf_rdv_conn_send(&joiner, PF_WIRE_STEP, b.data, b.len, dl), 0);
    assert_int_equal(pf_rdv_conn_recv(&root, &m, false, dl), 0);
    pf_rdv_msg_free(&m);
    joiner.seq_out = 0;
    assert_int_equal(pf_rdv_conn_send(&joiner, PF_WIRE_STEP, b.data, b.len, dl), 0);
    assert_int_equal(pf_rdv_conn_recv(&root, &m, false, dl), PF_EINVAL);
    assert_non_null(strstr(pf_err_msg(), "out of sequence"));
    pf_rdv_conn_close(&joiner);
    pf_rdv_conn_close(&root);

    /* garbage on the connection, and a frame of another version (PF_EPROTO: no text to search) */
    nonblock_pair(sv);
    pf_rdv_conn_init(&root, sv[1], "joiner", false);
    assert_int_equal(write(sv[0], "SSH-2.0-OpenSSH_9.2\r\n", 21), 21);
    assert_int_equal(pf_rdv_conn_recv(&root, &m, false, dl), PF_EINVAL);
    assert_non_null(strstr(pf_err_msg(), "bad magic"));
    close(sv[0]);
    pf_rdv_conn_close(&root);
    nonblock_pair(sv);
    pf_rdv_conn_init(&root, sv[1], "joiner", false);
    uint8_t h[PF_WIRE_HDR];
    pf_wire_frame_header(h, PF_WIRE_JOIN, 0, 0, 0);
    h[4] = PF_WIRE_PROTO + 1; /* a later preflight */
    assert_int_equal(write(sv[0], h, sizeof(h)), (ssize_t)sizeof(h));
    assert_int_equal(pf_rdv_conn_recv(&root, &m, false, dl), PF_EPROTO);
    assert_non_null(strstr(pf_err_msg(), "protocol version 5 (this preflight speaks 4)"));
    close(sv[0]);
    pf_rdv_conn_close(&root);
    /* an earlier one: version 3's JOIN names no job */
    nonblock_pair(sv);
    pf_rdv_conn_init(&root, sv[1], "joiner", false);
    h[4] = 3;
    assert_int_equal(write(sv[0], h, sizeof(h)), (ssize_t)sizeof(h));
    assert_int_equal(pf_rdv_conn_recv(&root, &m, false, dl), PF_EPROTO);
    assert_non_null(strstr(pf_err_msg(), "protocol version 3 (this preflight speaks 4)"));
    close(sv[0]);
    pf_rdv_conn_close(&root);
    pf_buf_free(&b);
}

static void test_conn_deadline_on_silent_peer(void **state)
{
    (void)state;
    int sv[2];
    nonblock_pair(sv);
    struct pf_rdv_conn c;
    pf_rdv_conn_init(&c, sv[0], "silent", true);
    struct pf_rdv_msg m;

    /* nothing at all */
    double t0 = pf_now();
    assert_int_equal(pf_rdv_conn_recv(&c, &m, false, t0 + 0.3), PF_ETIMEOUT);
    double took = pf_now() - t0;
    assert_true(took >= 0.3);
    assert_true(took < 10); /* bounded: far above the deadline only when stuck */
    assert_non_null(strstr(pf_err_msg(), "no answer from silent"));

    /* half a frame, then silence */
    uint8_t h[PF_WIRE_HDR];
    pf_wire_frame_header(h, PF_WIRE_JOIN, 0, 0, 100);
    assert_int_equal(write(sv[1], h, sizeof(h)), (ssize_t)sizeof(h));
    t0 = pf_now();
    assert_int_equal(pf_rdv_conn_recv(&c, &m, false, t0 + 0.3), PF_ETIMEOUT);
    assert_true(pf_now() - t0 < 10);

    /* a peer that does not read: sending stops at the deadline */
    size_t big = 8 << 20;
    uint8_t *blob = calloc(1, big);
    t0 = pf_now();
    assert_int_equal(pf_rdv_conn_send(&c, PF_WIRE_STEP, blob, big, t0 + 0.3), PF_ETIMEOUT);
    assert_true(pf_now() - t0 < 10);
    assert_non_null(strstr(pf_err_msg(), "silent is not reading"));
    free(blob);
    pf_rdv_conn_close(&c);
    close(sv[1]);
}

/* A frame larger than 1 KiB (a report with its inventory) grows the reader's input buffer;
 * once it is consumed the buffer is given back, so rank 0 does not keep one such buffer a
 * rank for the rest of the meeting. Small frames keep theirs. */
static void test_conn_releases_large_buffer(void **state)
{
    (void)state;
    int sv[2];
    nonblock_pair(sv);
    struct pf_rdv_conn joiner, root;
    pf_rdv_conn_init(&joiner, sv[0], "root", true);
    pf_rdv_conn_init(&root, sv[1], "joiner", false);
    double dl = pf_now() + 10;
    struct pf_buf b;
    pf_buf_init(&b, 1 << 16);
    char big[1500];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    pf_wire_put_str(&b, "inv", big);
    assert_int_equal(pf_rdv_conn_send(&joiner, PF_WIRE_STEP, NULL, 0, dl), 0);
    struct pf_rdv_msg m;
    assert_int_equal(pf_rdv_conn_recv(&root, &m, false, dl), 0);
    pf_rdv_msg_free(&m);
    assert_true(root.in.cap > 0 && root.in.cap <= 1024); /* a small frame keeps its buffer */
    assert_int_equal(pf_rdv_conn_send(&joiner, PF_WIRE_STEP, b.data, b.len, dl), 0);
    assert_int_equal(pf_rdv_conn_recv(&root, &m, false, dl), 0);
    assert_true(m.len > 1024);
    assert_int_equal(m.f.n, 1);
    pf_rdv_msg_free(&m);
    assert_int_equal(root.in.cap, 0);
    assert_int_equal(root.in.len, 0);
    /* and the connection goes on */
    assert_int_equal(pf_rdv_conn_send(&joiner, PF_WIRE_STEP, b.data, b.len, dl), 0);
    assert_int_equal(pf_rdv_conn_recv(&root, &m, false, dl), 0);
    assert_true(m.len > 1024);
    pf_rdv_msg_free(&m);
    pf_buf_free(&b);
    pf_rdv_conn_close(&joiner);
    pf_rdv_conn_close(&root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_conn_round_trip),
        cmocka_unit_test(test_conn_releases_large_buffer),
        cmocka_unit_test(test_conn_mac_and_sequence),
        cmocka_unit_test(test_conn_shared_payload),
        cmocka_unit_test(test_conn_shared_tampered),
        cmocka_unit_test(test_conn_deadline_on_silent_peer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
