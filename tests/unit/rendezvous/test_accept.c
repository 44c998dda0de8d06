/* rendezvous/accept.c: a data listener under strangers. Idle connections, garbage and a
 * DHELLO of another run reach the listener before the real peer's probe connection; the real
 * one is taken well within the deadline (the connections' first frames are read side by
 * side, not one connection at a time with a wait each), also past the pending cap. Real
 * sockets on loopback. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
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
    int idle[200];
    int nidle;
};

static void rig_open(struct rig *g)
{
    memset(g, 0, sizeof(*g));
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
    for (int i = 0; i < n && g->nidle < (int)PF_ARRAY_LEN(g->idle); i++)
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
        cmocka_unit_test(test_deadline_names_the_missing_peer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
