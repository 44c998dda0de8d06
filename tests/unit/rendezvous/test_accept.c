/* rendezvous/accept.c: a data listener under strangers. Idle connections, garbage and a
 * DHELLO of another run reach the listener before the real peer's probe connection; the real
 * one is taken well within the deadline (the connections' first frames are read side by
 * side, not one connection at a time with a wait each), also past the pending cap, and behind
 * thousands of idle connections queued in the kernel (the queue drained at once, the strangers
 * shed by the age of their handshake). Real sockets on loopback. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../../pkg/rendezvous/internal.h"

#define TOKEN "acc3pt-t0ken"
#ifndef PF_RDV_PEND_MAX
#define PF_RDV_PEND_MAX 64
#endif

struct rig {
    struct rdv_session S;
    struct pf_rdv_peer peer[3];
    int rk[3];
    int port;
    int *idle;
    int maxidle;
    int nidle;
};

static void rig_open(struct rig *g)
{
    memset(g, 0, sizeof(*g));
    g->maxidle = 200;
    g->idle = calloc((size_t)g->maxidle, sizeof(int));
    struct rdv_session *S = &g->S;
    S->auth = true;
    S->token = TOKEN;
    S->rank = 1;
    S->n = 3;
    S->pos = 1;
    for (int i = 0; i < 3; i++) {
        g->rk[i] = i;
        g->peer[i].rank = i;
    }
    S->rk = g->rk;
    S->ro.n = 3;
    S->ro.world = 3;
    S->ro.peer = g->peer;
    memset(S->ro.run, 0x5a, PF_WIRE_NONCE);
    g->port = 0;
    assert_int_equal(pf_rdv_listen(&S->data_lfd, "127.0.0.1", &g->port), 0);
    assert_true(g->port > 0);
}

static void rig_close(struct rig *g)
{
    for (int i = 0; i < g->nidle; i++)
        close(g->idle[i]);
    free(g->idle);
    close(g->S.data_lfd);
}

static int dial(const struct rig *g)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    assert_true(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)g->port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    return fd;
}

/* A connection that says nothing (a stranger's, or a port scan's). */
static void idle(struct rig *g, int n)
{
    for (int i = 0; i < n && g->nidle < g->maxidle; i++)
        g->idle[g->nidle++] = dial(g);
}

/* A DHELLO from rank src to rank dst for round, with run byte run and the token token. */
static int hello(struct rig *g, long long src, long long dst, long long round, uint8_t run,
                 const char *token)
{
    int fd = dial(g);
    struct pf_rdv_conn c;
    pf_rdv_conn_init(&c, fd, "test", true);
    c.auth.on = true;
    c.auth.token = token;
    memset(c.auth.nonce_s, run, PF_WIRE_NONCE);
    c.dir_out = PF_WIRE_DIR_DATA;
    struct pf_buf b;
    pf_buf_init(&b, 4096);
    uint8_t r[PF_WIRE_NONCE];
    memset(r, run, sizeof(r));
    pf_wire_put(&b, "run", r, PF_WIRE_NONCE);
    pf_wire_put_int(&b, "src", src);
    pf_wire_put_int(&b, "dst", dst);
    pf_wire_put_int(&b, "shift", 0);
    pf_wire_put_int(&b, "round", round);
    assert_int_equal(pf_rdv_conn_send(&c, PF_WIRE_DHELLO, b.data, b.len, pf_now() + 2), 0);
    pf_buf_free(&b);
    c.fd = -1;
    pf_rdv_conn_close(&c);
    return fd;
}

/* Three idle connections, garbage, a DHELLO of another run and one with another token come
 * first; the real probe connection from position 2 for round 7 is still taken, long before a
 * deadline that a wait of seconds on each stranger in turn would pass. */
static void test_real_peer_behind_strangers(void **state)
{
    (void)state;
    struct rig g;
    rig_open(&g);
    idle(&g, 3);
    int junk = dial(&g);
    assert_int_equal(write(junk, "GET / HTTP/1.0\r\n\r\n", 18), 18);
    int other_run = hello(&g, 2, 1, 7, 0x11, TOKEN);
    int other_token = hello(&g, 2, 1, 7, 0x5a, "not-the-token");
    int wrong_round = hello(&g, 2, 1, 8, 0x5a, TOKEN);
    int real = hello(&g, 2, 1, 7, 0x5a, TOKEN);
    int pos = 2, round = 7, fd = -1;
    char why[256] = "";
    double t0 = pf_now();
    int missing = rdv_probe_accept_many(&g.S, 1, &pos, &round, &fd, t0 + 1.5, why, sizeof(why));
    assert_int_equal(missing, 0);
    assert_true(fd >= 0);
    /* it is the real connection: what the peer writes next arrives on it */
    assert_int_equal(write(real, "R", 1), 1);
    char ch = 0;
    for (int k = 0; k < 100 && recv(fd, &ch, 1, MSG_DONTWAIT) != 1; k++)
        usleep(10000);
    assert_int_equal(ch, 'R');
    close(fd);
    close(junk);
    close(other_run);
    close(other_token);
    close(wrong_round);
    close(real);
    rig_close(&g);
}

/* More idle connections than the pending cap: the oldest are evicted past their grace and
 * the real one, last in the queue, is taken before the deadline. */
static void test_real_peer_past_the_cap(void **state)
{
    (void)state;
    struct rig g;
    rig_open(&g);
    idle(&g, PF_RDV_PEND_MAX + 40);
    int real = hello(&g, 0, 1, 3, 0x5a, TOKEN);
    int pos = 0, round = 3, fd = -1;
    char why[256] = "";
    int missing =
        rdv_probe_accept_many(&g.S, 1, &pos, &round, &fd, pf_now() + 2.9, why, sizeof(why));
    assert_int_equal(missing, 0);
    close(fd);
    close(real);
    rig_close(&g);
}

static bool take_any(void *arg, int fd, const struct pf_rdv_dhello *h)
{
    (void)h;
    *(int *)arg = fd;
    return true;
}

/* 3,000 idle connections sit in the listen queue, older than the grace, ahead of the real
 * peer's: every one is accepted and closed and the real one taken within 2.5 s (128 accepts a
 * second, the pace of a listener that rests whenever its pending set is full, would take
 * 23 s). */
static void test_real_peer_behind_thousands_queued(void **state)
{
    (void)state;
    enum { QUEUED = 3000 };
    struct rlimit rl;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < QUEUED + 600) {
        skip(); /* the test's own connections need the descriptors */
        return;
    }
    rlim_t was = rl.rlim_cur;
    rl.rlim_cur = QUEUED + 600;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
    struct rig g;
    rig_open(&g);
    free(g.idle);
    g.maxidle = QUEUED;
    g.idle = calloc(QUEUED, sizeof(int));
    idle(&g, QUEUED);
    assert_int_equal(g.nidle, QUEUED);
    int real = hello(&g, 2, 1, 5, 0x5a, TOKEN);
    usleep(600 * 1000); /* every stranger now silent for longer than UNAUTH_GRACE */
    struct pf_rdv_acceptor *A = calloc(1, sizeof(*A));
    rdv_acceptor_init(A, &g.S, &g.S.data_lfd, 1);
    int fd = -1;
    double t0 = pf_now();
    assert_int_equal(pf_rdv_acceptor_run(A, 1, t0 + 2.5, take_any, &fd), 1);
    double took = pf_now() - t0;
    print_message("# %d queued strangers: the real peer taken after %.3f s (%lld accepted)\n",
                  QUEUED, took, A->accepted);
    assert_true(took < 2.5);
    assert_true(fd >= 0);
    assert_int_equal(A->taken, 1);
    assert_int_equal(A->accepted, QUEUED + 1);
    /* every stranger is closed or still pending, none is held past the cap */
    assert_int_equal(A->closed + A->npend, QUEUED);
    assert_true(A->npend <= A->cap);
    pf_rdv_acceptor_close(A);
    assert_int_equal(A->closed, QUEUED);
    free(A);
    close(fd);
    close(real);
    rig_close(&g);
    rl.rlim_cur = was;
    setrlimit(RLIMIT_NOFILE, &rl);
}

/* Nobody real comes: the call ends at its deadline and names the peer it waited for. */
static void test_deadline_names_the_missing_peer(void **state)
{
    (void)state;
    struct rig g;
    rig_open(&g);
    idle(&g, 2);
    int pos = 2, round = 1, fd = -1;
    char why[256] = "";
    assert_int_equal(
        rdv_probe_accept_many(&g.S, 1, &pos, &round, &fd, pf_now() + 0.3, why, sizeof(why)), 1);
    assert_int_equal(fd, -1);
    assert_non_null(strstr(why, "no probe connection from rank 2"));
    rig_close(&g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_real_peer_behind_strangers),
        cmocka_unit_test(test_real_peer_past_the_cap),
        cmocka_unit_test(test_real_peer_behind_thousands_queued),
        cmocka_unit_test(test_deadline_names_the_missing_peer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
