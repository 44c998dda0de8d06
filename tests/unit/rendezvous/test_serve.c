/* rendezvous: rank 0's epoll loop (server.c) and the counters its done conditions read
 * instead of a pass over every rank. Ranks are the other ends of socket pairs in this
 * process, speaking the real frames (HELLO, JOIN, ROSTER, STEP, RESULT) through
 * pf_rdv_conn: nothing is mocked. After every change, each counter must equal a recount of
 * the member table and the connections, and epoll's interest in each connection (read back
 * from /proc/self/fdinfo) must be EPOLLIN unless it is closing, EPOLLOUT exactly while its
 * queue is pending. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../../pkg/rendezvous/internal.h"

#define WORLD 33

struct rig {
    struct rdv_session S;
    struct pf_rdv_conn peer[WORLD]; /* rank r's end, fd -1 when none */
    int slot_peer[4 * WORLD];       /* the test's end of connection slot i, -1 for none */
};

/* The counters and lists, recounted from the member table and the connections. */
static void check_counts(struct rig *g)
{
    struct rdv_session *S = &g->S;
    int missing = 0, live = 0, step = 0, next = 0, pend = 0;
    for (int r = 1; r < S->world; r++) {
        const struct rdv_member *m = &S->m[r];
        missing += m->state == PF_RDV_MISSING;
        if (m->state != PF_RDV_JOINED) continue;
        live++;
        step += m->step_got == S->step_no;
        next += m->step_got == S->step_no + 1;
        /* a joined member's connection names it back */
        if (m->conn >= 0) {
            assert_true(S->sc[m->conn].used);
            assert_int_equal(S->sc[m->conn].rank, r);
        }
    }
    size_t unauth = 0;
    for (size_t i = 0; i < S->nsc; i++) {
        const struct rdv_sconn *c = &S->sc[i];
        if (!c->used) continue;
        pend += c->rank > 0 && pf_rdv_conn_pending(&c->c);
        if (c->rank < 0) {
            /* in the list, which is oldest first */
            size_t k = 0;
            while (k < S->nunauth && S->unauth[k] != i)
                k++;
            assert_true(k < S->nunauth);
            unauth++;
        }
        /* a closing connection with nothing left to write is closed at once */
        assert_false(c->closing && !pf_rdv_conn_pending(&c->c));
    }
    for (size_t k = 1; k < S->nunauth; k++)
        assert_true(S->sc[S->unauth[k - 1]].opened <= S->sc[S->unauth[k]].opened);
    assert_int_equal(S->nmissing, missing);
    assert_int_equal(S->nlive, live);
    assert_int_equal(S->nstep, step);
    assert_int_equal(S->nnext, next);
    assert_int_equal(S->npend, pend);
    assert_int_equal(S->nunauth, unauth);

    /* epoll's interest, as the kernel lists it: "tfd: <fd> events: <hex> data: <hex>" */
    char path[64], line[512];
    snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", S->ep);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t seen = 0, used = 0;
    while (fgets(line, sizeof(line), f)) {
        int fd;
        unsigned ev;
        unsigned long long data;
        if (sscanf(line, "tfd: %d events: %x data: %llx", &fd, &ev, &data) != 3) continue;
        if (fd == S->lfd) continue;
        assert_true(data < S->nsc);
        const struct rdv_sconn *c = &S->sc[data];
        assert_true(c->used);
        assert_int_equal(c->c.fd, fd);
        unsigned want = (c->closing ? 0 : EPOLLIN) | (pf_rdv_conn_pending(&c->c) ? EPOLLOUT : 0);
        if ((ev & (EPOLLIN | EPOLLOUT)) != want)
            fail_msg("connection %llu (rank %d): epoll waits for %#x, want %#x", data, c->rank,
                     ev & (EPOLLIN | EPOLLOUT), want);
        seen++;
    }
    fclose(f);
    for (size_t i = 0; i < S->nsc; i++)
        used += S->sc[i].used;
    assert_int_equal(seen, used);
}

static void rig_open(struct rig *g)
{
    memset(g, 0, sizeof(*g));
    struct rdv_session *S = &g->S;
    rdv_session_init(S);
    S->world = WORLD;
    S->cutoff = pf_now() + 60;
    S->join_deadline = S->cutoff;
    pf_strcpy(S->pod, sizeof(S->pod), "trainer-0");
    rdv_members_init(S);
    S->m[0].state = PF_RDV_JOINED;
    S->ep = epoll_create1(EPOLL_CLOEXEC);
    assert_true(S->ep >= 0);
    for (int r = 0; r < WORLD; r++)
        g->peer[r].fd = -1;
    for (size_t i = 0; i < PF_ARRAY_LEN(g->slot_peer); i++)
        g->slot_peer[i] = -1;
}

static void rig_close(struct rig *g)
{
    for (int r = 0; r < WORLD; r++)
        if (g->peer[r].fd >= 0) pf_rdv_conn_close(&g->peer[r]);
    for (size_t i = 0; i < PF_ARRAY_LEN(g->slot_peer); i++)
        if (g->slot_peer[i] >= 0) close(g->slot_peer[i]);
    rdv_session_free(&g->S);
}

/* A new connection at rank 0; its other end is returned (the HELLO waits there). */
static int connect_one(struct rig *g, size_t *slot)
{
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
    assert_true(rdv_sc_open(&g->S, sv[0], pf_now()));
    for (size_t i = 0; i < g->S.nsc; i++)
        if (g->S.sc[i].used && g->S.sc[i].c.fd == sv[0]) *slot = i;
    return sv[1];
}

static void put_join(struct pf_buf *b, int rank)
{
    char pod[32];
    snprintf(pod, sizeof(pod), "trainer-%d", rank);
    pf_wire_put_int(b, "rank", rank);
    pf_wire_put_int(b, "world", WORLD);
    pf_wire_put_str(b, "pod", pod);
    pf_wire_put_str(b, "node", "node-x");
}

/* rank's end sends a frame of type with the fields fill puts */
static void peer_send(struct rig *g, int rank, int type, void (*fill)(struct pf_buf *, int),
                      int arg)
{
    struct pf_buf b;
    pf_buf_init(&b, 1 << 16);
    fill(&b, arg);
    assert_int_equal(pf_rdv_conn_send(&g->peer[rank], type, b.data, b.len, pf_now() + 5), 0);
    pf_buf_free(&b);
}

static int step_arg;

static void put_step(struct pf_buf *b, int rank)
{
    char part[16];
    snprintf(part, sizeof(part), "r%d", rank);
    pf_wire_put_int(b, "step", step_arg);
    pf_wire_put_int(b, "ok", 1);
    pf_wire_put(b, "b", part, strlen(part));
}

/* rank's end takes the next frame: its type, and the field key as an integer in *v */
static int peer_recv(struct rig *g, int rank, const char *key, long long *v)
{
    struct pf_rdv_msg msg;
    assert_int_equal(pf_rdv_conn_recv(&g->peer[rank], &msg, false, pf_now() + 5), 0);
    int type = msg.type;
    if (key) assert_int_equal(pf_wire_fields_int(v, &msg.f, key), 0);
    pf_rdv_msg_free(&msg);
    return type;
}

static size_t watched;

static bool watched_closed(struct rdv_session *S)
{
    return !S->sc[watched].used;
}

/* The loop from the JOINs to two steps: every rank joins (one stranger's JOIN is refused and
 * its connection closed once its REJECT is written), the roster goes out, an allgather
 * passes, and in the next barrier a rank whose connection closes is lost and the run
 * stops. */
static void test_serve_loop(void **state)
{
    (void)state;
    struct rig g;
    rig_open(&g);
    struct rdv_session *S = &g.S;
    for (int r = 1; r < WORLD; r++) {
        size_t slot = 0;
        int fd = connect_one(&g, &slot);
        pf_rdv_conn_init(&g.peer[r], fd, "peer", true);
        assert_int_equal(peer_recv(&g, r, NULL, NULL), PF_WIRE_HELLO);
        check_counts(&g);
    }
    /* a stranger claiming rank 0 */
    size_t sslot = 0;
    int sfd = connect_one(&g, &sslot);
    struct pf_rdv_conn stranger;
    pf_rdv_conn_init(&stranger, sfd, "stranger", true);
    struct pf_rdv_msg hello;
    assert_int_equal(pf_rdv_conn_recv(&stranger, &hello, false, pf_now() + 5), 0);
    pf_rdv_msg_free(&hello);
    struct pf_buf b;
    pf_buf_init(&b, 1 << 16);
    put_join(&b, 0);
    assert_int_equal(pf_rdv_conn_send(&stranger, PF_WIRE_JOIN, b.data, b.len, pf_now() + 5), 0);
    pf_buf_free(&b);
    check_counts(&g);
    assert_int_equal(S->nunauth, WORLD);

    for (int r = 1; r < WORLD; r++)
        peer_send(&g, r, PF_WIRE_JOIN, put_join, r);
    assert_true(rdv_serve(S, pf_now() + 10, rdv_join_done));
    check_counts(&g);
    assert_int_equal(S->nmissing, 0);
    assert_int_equal(S->nlive, WORLD - 1);
    /* the stranger's connection closes once its REJECT is written */
    watched = sslot;
    assert_true(rdv_serve(S, pf_now() + 10, watched_closed));
    struct pf_rdv_msg rej;
    assert_int_equal(pf_rdv_conn_recv(&stranger, &rej, false, pf_now() + 5), 0);
    assert_int_equal(rej.type, PF_WIRE_REJECT);
    pf_rdv_msg_free(&rej);
    pf_rdv_conn_close(&stranger);
    check_counts(&g);

    rdv_root_send_roster(S);
    check_counts(&g);
    assert_true(rdv_serve(S, pf_now() + 10, rdv_flushed));
    assert_int_equal(S->n, WORLD);
    for (int r = 1; r < WORLD; r++)
        assert_int_equal(peer_recv(&g, r, NULL, NULL), PF_WIRE_ROSTER);
    check_counts(&g);

    /* step 1, an allgather: every part comes back to every rank */
    step_arg = 1;
    for (int r = 1; r < WORLD; r++)
        peer_send(&g, r, PF_WIRE_STEP, put_step, r);
    struct pf_rdv_step_res res;
    assert_int_equal(rdv_step(S, "test", true, NULL, "r0", 2, PF_RDV_ALLGATHER, 10, &res), 0);
    assert_true(res.go);
    assert_int_equal(res.nb, WORLD);
    for (int i = 0; i < WORLD; i++) {
        char want[16];
        snprintf(want, sizeof(want), "r%d", S->rk[i]);
        assert_int_equal(res.lens[i], strlen(want));
        assert_memory_equal(res.blobs[i], want, strlen(want));
    }
    rdv_step_res_free(S, &res);
    check_counts(&g);
    assert_int_equal(S->npend, 0);
    for (int r = 1; r < WORLD; r++) {
        long long go = -1;
        assert_int_equal(peer_recv(&g, r, "go", &go), PF_WIRE_RESULT);
        assert_int_equal(go, 1);
    }

    /* step 2: the last rank's connection closes instead */
    step_arg = 2;
    for (int r = 1; r < WORLD - 1; r++)
        peer_send(&g, r, PF_WIRE_STEP, put_step, r);
    pf_rdv_conn_close(&g.peer[WORLD - 1]);
    assert_true(rdv_step(S, "test", true, NULL, NULL, 0, PF_RDV_BARRIER, 10, &res) < 0);
    assert_false(res.go);
    rdv_step_res_free(S, &res);
    assert_int_equal(S->m[WORLD - 1].state, PF_RDV_LOST);
    assert_int_equal(S->nlive, WORLD - 2);
    check_counts(&g);
    for (int r = 1; r < WORLD - 1; r++) {
        long long go = -1;
        assert_int_equal(peer_recv(&g, r, "go", &go), PF_WIRE_RESULT);
        assert_int_equal(go, 0);
    }
    rig_close(&g);
}

/* A small deterministic generator, so that a failure replays. */
static uint64_t rng = 0x9e3779b97f4a7c15ull;
static unsigned pick(unsigned n)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (unsigned)(rng % n);
}

/* A random used connection: joined (want 1), not yet (want -1); SIZE_MAX when none. */
static size_t pick_conn(struct rig *g, int want)
{
    size_t have[4 * WORLD], n = 0;
    for (size_t i = 0; i < g->S.nsc; i++) {
        const struct rdv_sconn *c = &g->S.sc[i];
        if (c->used && !c->closing && (want > 0 ? c->rank > 0 : c->rank < 0)) have[n++] = i;
    }
    return n ? have[pick((unsigned)n)] : SIZE_MAX;
}

/* Random joins, steps, losses, queued and written frames, refusals and drops, straight
 * through the functions the loop calls: the counters equal a recount after each. */
static void test_counters_random(void **state)
{
    (void)state;
    struct rig g;
    rig_open(&g);
    struct rdv_session *S = &g.S;
    for (int op = 0; op < 4000; op++) {
        size_t i;
        switch (pick(9)) {
        case 0: /* a new connection */
            if (S->nunauth < 12) {
                int fd = connect_one(&g, &i);
                assert_true(i < PF_ARRAY_LEN(g.slot_peer));
                if (g.slot_peer[i] >= 0) close(g.slot_peer[i]);
                g.slot_peer[i] = fd;
            }
            break;
        case 1: /* a JOIN for a random rank: admitted, a rejoin, or refused as a duplicate */
            if ((i = pick_conn(&g, -1)) != SIZE_MAX) {
                struct pf_buf b;
                pf_buf_init(&b, 1 << 16);
                int r = 1 + (int)pick(WORLD - 1);
                char pod[32];
                snprintf(pod, sizeof(pod), "trainer-%d%s", r, pick(4) ? "" : "-other");
                pf_wire_put_int(&b, "rank", r);
                pf_wire_put_int(&b, "world", WORLD);
                pf_wire_put_str(&b, "pod", pod);
                struct pf_rdv_msg msg;
                memset(&msg, 0, sizeof(msg));
                msg.type = PF_WIRE_JOIN;
                assert_int_equal(pf_wire_fields_decode(&msg.f, (const uint8_t *)b.data, b.len), 0);
                rdv_admit(S, i, &msg);
                if (S->sc[i].used) rdv_sc_sync(S, i);
                pf_wire_fields_free(&msg.f);
                pf_buf_free(&b);
            }
            break;
        case 2: /* a STEP: this one or the next */
            if ((i = pick_conn(&g, 1)) != SIZE_MAX) {
                struct pf_buf b;
                pf_buf_init(&b, 1 << 16);
                pf_wire_put_int(&b, "step", (long long)S->step_no + pick(2));
                pf_wire_put_int(&b, "ok", 1);
                struct pf_rdv_msg msg;
                memset(&msg, 0, sizeof(msg));
                msg.type = PF_WIRE_STEP;
                assert_int_equal(pf_wire_fields_decode(&msg.f, (const uint8_t *)b.data, b.len), 0);
                rdv_handle_step(S, i, &msg);
                rdv_sc_sync(S, i);
                pf_wire_fields_free(&msg.f);
                pf_buf_free(&b);
            }
            break;
        case 3: /* a member lost */
            if ((i = pick_conn(&g, 1)) != SIZE_MAX) rdv_member_lost(S, S->sc[i].rank, "test");
            break;
        case 4:
            rdv_step_next(S);
            break;
        case 5: /* a frame queued */
            if ((i = pick_conn(&g, pick(2) ? 1 : -1)) != SIZE_MAX) {
                pf_rdv_conn_queue(&S->sc[i].c, PF_WIRE_RESULT, "x", 1);
                rdv_sc_sync(S, i);
            }
            break;
        case 6: /* what is queued written, as EPOLLOUT would have it */
            for (i = 0; i < S->nsc; i++)
                if (S->sc[i].used && pf_rdv_conn_pending(&S->sc[i].c) && pick(2)) {
                    assert_true(pf_rdv_conn_flush_some(&S->sc[i].c) >= 0);
                    rdv_sc_sync(S, i);
                }
            break;
        case 7: /* refused */
            if ((i = pick_conn(&g, -1)) != SIZE_MAX)
                rdv_sc_reject(S, i, PF_WIRE_REFUSED_LATE, "refused");
            break;
        default: /* dropped */
            if ((i = pick_conn(&g, pick(2) ? 1 : -1)) != SIZE_MAX) rdv_sc_drop(S, i, "test");
            break;
        }
        check_counts(&g);
        /* the other ends read and forget, so that writes go through */
        char sink[4096];
        for (i = 0; i < PF_ARRAY_LEN(g.slot_peer); i++)
            if (g.slot_peer[i] >= 0)
                while (read(g.slot_peer[i], sink, sizeof(sink)) > 0) {
                }
    }
    rig_close(&g);
}

/* The heap pops its deadlines earliest first, with pushes in between. */
static void test_timer_heap(void **state)
{
    (void)state;
    struct rdv_session S;
    rdv_session_init(&S);
    double ref[3000];
    size_t nref = 0;
    for (int op = 0; op < 6000; op++) {
        if (nref < PF_ARRAY_LEN(ref) && (pick(3) || nref == 0)) {
            double at = pick(500) / 10.0; /* ties too */
            rdv_timer_push(&S, at, (size_t)op, (uint64_t)op);
            ref[nref++] = at;
            continue;
        }
        size_t lo = 0;
        for (size_t k = 1; k < nref; k++)
            if (ref[k] < ref[lo]) lo = k;
        struct rdv_timer t;
        assert_true(rdv_timer_pop(&S, &t));
        assert_true(t.at == ref[lo]);
        assert_int_equal(t.gen, t.i);
        ref[lo] = ref[--nref];
    }
    double last = -1;
    struct rdv_timer t;
    while (rdv_timer_pop(&S, &t)) {
        assert_true(t.at >= last);
        last = t.at;
        nref--;
    }
    assert_int_equal(nref, 0);
    assert_int_equal(S.ntm, 0);
    rdv_session_free(&S);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_serve_loop),
        cmocka_unit_test(test_counters_random),
        cmocka_unit_test(test_timer_heap),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
