/* collective: the probe rounds run for real. Each position is a thread running
 * pf_coll_rounds_run over Unix socket pairs (one fresh pair per probe); the barrier is a
 * mutex and a condition variable around one struct pf_coll_coord, as rank 0 holds it in a
 * run. The checks are about what ran, never about speed: every round's probes are the ones
 * the coordinator planned, every byte planned arrives, the plan ends, and a failed
 * connection stops every position at the next barrier with the partner named. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../../pkg/collective/collective.h"

#define N 6
#define MAXR 16

struct world {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int arrived, gen;
    bool stopping;   /* a position reported a failure at the barrier under way */
    bool stop, more; /* the last barrier's decision */
    struct pf_coll_coord co;
    struct pf_coll_sample got[N][PF_COLL_TASKS_MAX];
    size_t ngot[N];
    /* the probes planned per round: to[round][src] = dst */
    int to[MAXR][N];
    size_t bytes[MAXR][N];
    int rounds_planned, last_plan;
    size_t kept;
    int pair[MAXR][N][N][2];  /* [round][src][dst]: the socket pair, created by the first end */
    int fail_pos, fail_round; /* this position's link fails in this round (-1: never) */
};

struct rank {
    struct world *W;
    int pos;
    int own[2];
    int rc, fail_peer;
    struct pf_coll_fail fail;
};

static int next_cb(void *arg, int round, const struct pf_coll_sample *mine, size_t nmine,
                   const char *err, struct pf_coll_task *tasks, size_t *ntasks)
{
    struct rank *R = arg;
    struct world *W = R->W;
    pthread_mutex_lock(&W->mu);
    for (size_t i = 0; i < nmine && i < PF_COLL_TASKS_MAX; i++)
        W->got[R->pos][i] = mine[i];
    W->ngot[R->pos] = nmine;
    if (err) W->stopping = true;
    int gen = W->gen;
    if (++W->arrived == N) {
        W->stop = W->stopping;
        for (int p = 0; p < N; p++)
            W->kept += pf_coll_coord_add(&W->co, p, W->got[p], W->ngot[p]);
        int np = W->stop ? 0 : pf_coll_coord_plan(&W->co, round);
        assert_true(np >= 0);
        W->more = np > 0;
        W->last_plan = np;
        if (W->more) {
            assert_true(round < MAXR);
            W->rounds_planned = round + 1;
            for (int p = 0; p < N; p++) {
                W->to[round][p] = W->co.to[p];
                W->bytes[round][p] = W->co.bytes[p];
            }
        }
        W->arrived = 0;
        W->gen++;
        pthread_cond_broadcast(&W->cv);
    } else {
        while (W->gen == gen)
            pthread_cond_wait(&W->cv, &W->mu);
    }
    bool stop = W->stop, more = W->more;
    *ntasks = more && !stop ? pf_coll_coord_tasks(&W->co, R->pos, tasks) : 0;
    pthread_mutex_unlock(&W->mu);
    if (stop) return -1;
    return more ? 1 : 0;
}

static int link_cb(void *arg, int round, const struct pf_coll_task *t, char *why, size_t nwhy)
{
    struct rank *R = arg;
    struct world *W = R->W;
    if (R->pos == W->fail_pos && round == W->fail_round) {
        snprintf(why, nwhy, "connection refused (planted)");
        return -1;
    }
    int src = t->send ? R->pos : t->peer, dst = t->send ? t->peer : R->pos;
    pthread_mutex_lock(&W->mu);
    int *sp = W->pair[round][src][dst];
    if (sp[0] < 0) {
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sp), 0);
    }
    int fd = t->send ? sp[0] : sp[1];
    pthread_mutex_unlock(&W->mu);
    R->own[t->send ? 0 : 1] = fd;
    return fd;
}

static void release_cb(void *arg, int round)
{
    struct rank *R = arg;
    (void)round;
    for (int k = 0; k < 2; k++) {
        if (R->own[k] >= 0) close(R->own[k]);
        R->own[k] = -1;
    }
}

static void *rank_main(void *arg)
{
    struct rank *R = arg;
    struct pf_coll_rounds_ops ops = {R, next_cb, link_cb, release_cb};
    R->rc = pf_coll_rounds_run(R->pos, N, &ops, 3.0, &R->fail, &R->fail_peer);
    return NULL;
}

static void world_run(struct world *W, struct rank *R)
{
    pthread_t th[N];
    for (int p = 0; p < N; p++) {
        R[p] = (struct rank){.W = W, .pos = p, .own = {-1, -1}, .fail_peer = -2};
        assert_int_equal(pthread_create(&th[p], NULL, rank_main, &R[p]), 0);
    }
    for (int p = 0; p < N; p++)
        pthread_join(th[p], NULL);
}

static void world_init(struct world *W)
{
    memset(W, 0, sizeof(*W));
    pthread_mutex_init(&W->mu, NULL);
    pthread_cond_init(&W->cv, NULL);
    pf_coll_coord_init(&W->co, N, PF_COLL_SLOW_RATIO);
    memset(W->pair, -1, sizeof(W->pair));
    W->fail_pos = W->fail_round = -1;
}

static void world_free(struct world *W)
{
    pf_coll_coord_free(&W->co);
    pthread_mutex_destroy(&W->mu);
    pthread_cond_destroy(&W->cv);
}

static void test_rounds_run_the_plan(void **state)
{
    (void)state;
    struct world *W = calloc(1, sizeof(*W));
    world_init(W);
    struct rank R[N];
    world_run(W, R);
    for (int p = 0; p < N; p++) {
        assert_int_equal(R[p].rc, 0);
        assert_int_equal(R[p].fail_peer, -1);
    }
    /* the survey at least, and the plan ended by itself within its bound */
    int survey = pf_coll_survey_rounds(N);
    assert_true(W->rounds_planned >= survey);
    assert_true(W->rounds_planned <= pf_coll_plan_max_rounds(N));
    assert_int_equal(W->last_plan, 0);
    /* every survey round: each position sends to the one its shift away */
    for (int r = 0; r < survey; r++)
        for (int p = 0; p < N; p++)
            assert_int_equal(W->to[r][p], (p + pf_coll_survey_shift(N, r)) % N);
    /* every sample kept is a probe planned, received whole (no deadline cuts a socket pair) */
    size_t planned = 0;
    for (int r = 0; r < W->rounds_planned; r++)
        for (int p = 0; p < N; p++)
            planned += W->to[r][p] >= 0;
    assert_int_equal(W->kept, planned);
    assert_int_equal(W->co.ns, planned);
    for (size_t i = 0; i < W->co.ns; i++) {
        const struct pf_coll_sample *s = &W->co.s[i];
        assert_int_equal(W->to[s->round][s->src], s->dst);
        /* the timed part: all but the first quarter, which warms the connection up */
        size_t b = W->bytes[s->round][s->src];
        assert_int_equal(s->bytes, b - b / 4);
        assert_true(s->seconds > 0);
    }
    /* the sockets opened were for planned probes only */
    for (int r = 0; r < MAXR; r++)
        for (int a = 0; a < N; a++)
            for (int b = 0; b < N; b++)
                if (W->pair[r][a][b][0] >= 0) assert_int_equal(W->to[r][a], b);
    struct pf_coll_judgement j;
    assert_int_equal(pf_coll_judge(&j, N, W->co.s, W->co.ns, PF_COLL_SLOW_RATIO), 0);
    assert_int_equal(j.nsamples, planned);
    assert_true(j.median > 0);
    pf_coll_judgement_free(&j);
    world_free(W);
    free(W);
}

static void test_rounds_failed_link_stops_all(void **state)
{
    (void)state;
    struct world *W = calloc(1, sizeof(*W));
    world_init(W);
    W->fail_pos = 4;
    W->fail_round = 1;
    struct rank R[N];
    world_run(W, R);
    for (int p = 0; p < N; p++)
        assert_int_equal(R[p].rc, PF_ERR);
    /* the failing position names its partner of that round (it sends first) */
    assert_int_equal(R[4].fail_peer, (4 + pf_coll_survey_shift(N, 1)) % N);
    assert_true(R[4].fail.on_send);
    assert_non_null(strstr(R[4].fail.what, "planted"));
    /* the others stopped at the barrier, not at a probe */
    for (int p = 0; p < N; p++)
        if (p != 4) assert_int_equal(R[p].fail_peer, -1);
    /* no round after the failed one was planned */
    assert_int_equal(W->rounds_planned, 2);
    world_free(W);
    free(W);
}

static void test_coord_keeps_planned_samples_only(void **state)
{
    (void)state;
    struct pf_coll_coord c;
    pf_coll_coord_init(&c, 4, PF_COLL_SLOW_RATIO);
    /* nothing is planned yet: nothing is kept */
    struct pf_coll_sample s = {3, 0, 0, 1000, 0.01, 0};
    assert_int_equal(pf_coll_coord_add(&c, 0, &s, 1), 0);
    assert_int_equal(pf_coll_coord_plan(&c, 1), PF_EINVAL); /* round 0 comes first */
    assert_int_equal(pf_coll_coord_plan(&c, 0), 4);
    int d = pf_coll_survey_shift(4, 0);
    struct pf_coll_task t[PF_COLL_TASKS_MAX];
    assert_int_equal(pf_coll_coord_tasks(&c, 0, t), 2);
    assert_int_equal(t[0].peer, d);
    assert_true(t[0].send);
    assert_int_equal(t[1].peer, (4 - d) % 4);
    assert_false(t[1].send);
    size_t b = c.bytes[0];
    struct pf_coll_sample bad[] = {
        {(4 - d) % 4, 1, 0, b, 0.01, 0},     /* claims another destination */
        {2, 0, 0, b, 0.01, 0},               /* not its partner (for d = 1: 3 is) */
        {(4 - d) % 4, 0, 5, b, 0.01, 0},     /* another round */
        {(4 - d) % 4, 0, 0, b + 1, 0.01, 0}, /* more than was sent */
        {(4 - d) % 4, 0, 0, b, 0, 0},        /* no duration */
        {(4 - d) % 4, 0, 0, b, -1, 0},       /* a negative one */
    };
    assert_int_equal(pf_coll_coord_add(&c, 0, bad, PF_ARRAY_LEN(bad)), 0);
    struct pf_coll_sample good[] = {{(4 - d) % 4, 0, 0, b, 0.01, 0},
                                    {(4 - d) % 4, 0, 0, b, 0.01, 0}};
    /* one a round: the second copy is not kept */
    assert_int_equal(pf_coll_coord_add(&c, 0, good, 2), 1);
    assert_int_equal(pf_coll_coord_add(&c, 9, good, 1), 0); /* no such position */
    assert_int_equal(c.ns, 1);
    pf_coll_coord_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rounds_run_the_plan),
        cmocka_unit_test(test_rounds_failed_link_stops_all),
        cmocka_unit_test(test_coord_keeps_planned_samples_only),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
