/* collective: the probe plan and the judgement, run end to end over simulated fleets. A
 * simulated fleet is a link matrix: a base rate, a factor per node out and in, a factor per
 * link, and optional noise from a fixed seed (so every run sees the same numbers). The plan
 * is followed round by round exactly as a run would (every probe of a round "at once"), and
 * every round is checked: positions in range, no position sending or receiving twice. No
 * socket and no clock: a probe's duration is bytes / rate. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../pkg/collective/collective.h"

#define BASE_GBPS 25.0
#define DEADLINE_S 2.0 /* a probe cut here reports what arrived */

struct link_f {
    int src, dst;
    double f;
};
struct one_sample { /* a factor for one probe of one pair in one round: a noisy sample */
    int src, dst, round;
    double f;
};

struct fleet {
    int n;
    double out_f[1024], in_f[1024];
    struct link_f links[8];
    int nlinks;
    struct one_sample once[8];
    int nonce;
    int flaky; /* -1, or a position whose probes alternate slow and fast (a starved CPU) */
    /* -1, or a position that reports a starved CPU in rounds [starved_from, starved_to) */
    int starved, starved_from, starved_to;
    /* noise: every sample x U(jitter, 1); with probability hiccup, x U(0.02, 0.3) */
    double jitter, hiccup;
    uint64_t rng;
};

struct trace {
    struct pf_coll_sample *s;
    size_t n, cap;
    int rounds;
    int max_per_rank; /* probes a position took part in, in its busiest round */
    size_t probes;
};

static void fleet_init(struct fleet *F, int n)
{
    memset(F, 0, sizeof(*F));
    F->n = n;
    for (int i = 0; i < n; i++)
        F->out_f[i] = F->in_f[i] = 1.0;
    F->flaky = -1;
    F->starved = -1;
    F->jitter = 1.0;
    F->rng = 0x9e3779b97f4a7c15ull;
}

static double urand(struct fleet *F)
{
    /* xorshift64*: fixed seed, the same numbers on every machine */
    F->rng ^= F->rng >> 12;
    F->rng ^= F->rng << 25;
    F->rng ^= F->rng >> 27;
    return (double)((F->rng * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

static struct pf_coll_sample measure(struct fleet *F, const struct pf_coll_pair *p, int round)
{
    double rate = BASE_GBPS * F->out_f[p->src] * F->in_f[p->dst];
    for (int i = 0; i < F->nlinks; i++)
        if (F->links[i].src == p->src && F->links[i].dst == p->dst) rate *= F->links[i].f;
    for (int i = 0; i < F->nonce; i++)
        if (F->once[i].src == p->src && F->once[i].dst == p->dst && F->once[i].round == round)
            rate *= F->once[i].f;
    if (F->flaky >= 0 && (p->src == F->flaky || p->dst == F->flaky) && round % 2 == 0) rate *= 0.1;
    if (F->jitter < 1.0) rate *= F->jitter + (1.0 - F->jitter) * urand(F);
    if (F->hiccup > 0 && urand(F) < F->hiccup) rate *= 0.02 + 0.28 * urand(F);
    struct pf_coll_sample s = {p->src, p->dst, round, p->bytes, 0, 0};
    s.seconds = (double)p->bytes * 8.0 / (rate * 1e9) + 50e-6; /* plus a round trip */
    if (F->starved >= 0 && round >= F->starved_from && round < F->starved_to) {
        if (p->src == F->starved) s.starved |= PF_COLL_STARVED_SRC;
        if (p->dst == F->starved) s.starved |= PF_COLL_STARVED_DST;
    }
    if (s.seconds > DEADLINE_S) {
        s.bytes = (size_t)(rate * 1e9 / 8.0 * DEADLINE_S);
        s.seconds = DEADLINE_S;
    }
    return s;
}

/* Follows the plan to its end; checks every round's shape. */
static void run_plan(struct fleet *F, struct trace *T)
{
    memset(T, 0, sizeof(*T));
    int maxr = pf_coll_plan_max_rounds(F->n);
    int *sends = calloc((size_t)F->n, sizeof(int)), *recvs = calloc((size_t)F->n, sizeof(int));
    for (int round = 0;; round++) {
        struct pf_coll_pair *p;
        size_t np;
        assert_int_equal(pf_coll_plan(&p, &np, F->n, round, T->s, T->n, PF_COLL_SLOW_RATIO), 0);
        if (np == 0) {
            free(p);
            break;
        }
        assert_true(round < maxr);
        memset(sends, 0, (size_t)F->n * sizeof(int));
        memset(recvs, 0, (size_t)F->n * sizeof(int));
        for (size_t i = 0; i < np; i++) {
            assert_true(p[i].src >= 0 && p[i].src < F->n && p[i].dst >= 0 && p[i].dst < F->n);
            assert_int_not_equal(p[i].src, p[i].dst);
            assert_true(p[i].bytes >= PF_COLL_PROBE_MIN_BYTES &&
                        p[i].bytes <= PF_COLL_PROBE_MAX_BYTES);
            assert_int_equal(++sends[p[i].src], 1);
            assert_int_equal(++recvs[p[i].dst], 1);
        }
        for (int r = 0; r < F->n; r++)
            if (sends[r] + recvs[r] > T->max_per_rank) T->max_per_rank = sends[r] + recvs[r];
        if (T->n + np > T->cap) {
            T->cap = (T->n + np) * 2;
            T->s = realloc(T->s, T->cap * sizeof(*T->s));
        }
        for (size_t i = 0; i < np; i++)
            T->s[T->n++] = measure(F, &p[i], round);
        T->probes += np;
        T->rounds = round + 1;
        free(p);
    }
    free(sends);
    free(recvs);
}

static void judge(struct pf_coll_judgement *J, const struct fleet *F, const struct trace *T)
{
    assert_int_equal(pf_coll_judge(J, F->n, T->s, T->n, PF_COLL_SLOW_RATIO), 0);
}

static const struct pf_coll_culprit *find(const struct pf_coll_judgement *J,
                                          enum pf_coll_culprit_kind k, int src, int dst)
{
    for (size_t i = 0; i < J->n; i++)
        if (J->v[i].kind == k && J->v[i].src == src && J->v[i].dst == dst) return &J->v[i];
    return NULL;
}

/* Follows the plan, judges, and counts the culprits of each kind. */
static void plan_and_judge(struct fleet *F, struct trace *T, struct pf_coll_judgement *J,
                           int *nodes, int *links)
{
    run_plan(F, T);
    judge(J, F, T);
    *nodes = *links = 0;
    for (size_t i = 0; i < J->n; i++) {
        *nodes += J->v[i].kind == PF_COLL_CULPRIT_NODE;
        *links += J->v[i].kind == PF_COLL_CULPRIT_LINK;
    }
}

/* ---- the table of fleets */

struct scenario {
    const char *name;
    int n;
    struct link_f slow_links[3];
    int nslow_links;
    int slow_nodes[3];
    bool node_out[3], node_in[3];
    int nslow_nodes;
    struct one_sample once[2];
    int nonce;
    int flaky;
    /* what the judgement must say */
    int want_nodes, want_links;
    int max_rounds; /* 0: pf_coll_plan_max_rounds(n) */
};

static const struct scenario scenarios[] = {
    {.name = "healthy fleet of 1024", .n = 1024, .flaky = -1, .max_rounds = 3},
    {.name = "healthy pair", .n = 2, .flaky = -1, .max_rounds = 1},
    {.name = "healthy fleet of 5", .n = 5, .flaky = -1, .max_rounds = 3},
    {.name = "one slow link (the far side)",
     .n = 64,
     .slow_links = {{5, 37, 0.1}},
     .nslow_links = 1,
     .flaky = -1,
     .want_links = 1},
    {.name = "one slow link (neighbours, first probed short)",
     .n = 64,
     .slow_links = {{20, 21, 0.1}},
     .nslow_links = 1,
     .flaky = -1,
     .want_links = 1},
    {.name = "one slow link among 1024",
     .n = 1024,
     .slow_links = {{700, 188, 0.05}},
     .nslow_links = 1,
     .flaky = -1,
     .want_links = 1},
    {.name = "one slow node (both ways)",
     .n = 64,
     .slow_nodes = {17},
     .node_out = {true},
     .node_in = {true},
     .nslow_nodes = 1,
     .flaky = -1,
     .want_nodes = 1},
    {.name = "one slow node (sending only)",
     .n = 64,
     .slow_nodes = {30},
     .node_out = {true},
     .nslow_nodes = 1,
     .flaky = -1,
     .want_nodes = 1},
    {.name = "one slow node among 1024",
     .n = 1024,
     .slow_nodes = {513},
     .node_out = {true},
     .node_in = {true},
     .nslow_nodes = 1,
     .flaky = -1,
     .want_nodes = 1},
    {.name = "one single noisy sample",
     .n = 64,
     .once = {{12, 44, 1, 0.05}},
     .nonce = 1,
     .flaky = -1},
    {.name = "two noisy samples on different links",
     .n = 256,
     .once = {{3, 4, 0, 0.05}, {100, 228, 1, 0.02}},
     .nonce = 2,
     .flaky = -1},
    {.name = "CPU-starved rank, slow in every probe",
     .n = 64,
     .slow_nodes = {9},
     .node_out = {true},
     .node_in = {true},
     .nslow_nodes = 1,
     .flaky = -1,
     .want_nodes = 1},
    {.name = "CPU-starved rank, slow in every other round", .n = 64, .flaky = 9},
    {.name = "two slow nodes",
     .n = 64,
     .slow_nodes = {3, 40},
     .node_out = {true, true},
     .node_in = {true, true},
     .nslow_nodes = 2,
     .flaky = -1,
     .want_nodes = 2},
    {.name = "two slow nodes side by side",
     .n = 64,
     .slow_nodes = {10, 11},
     .node_out = {true, true},
     .node_in = {true, true},
     .nslow_nodes = 2,
     .flaky = -1,
     .want_nodes = 2},
    {.name = "a slow node and a slow link",
     .n = 128,
     .slow_links = {{90, 91, 0.1}},
     .nslow_links = 1,
     .slow_nodes = {7},
     .node_out = {true},
     .node_in = {true},
     .nslow_nodes = 1,
     .flaky = -1,
     .want_nodes = 1,
     .want_links = 1},
    {.name = "slow link between two ranks (cannot tell it from a node)",
     .n = 2,
     .slow_links = {{0, 1, 0.1}},
     .nslow_links = 1,
     .flaky = -1,
     .want_links = 1},
    {.name = "one slow node among four (every other rank is its partner)",
     .n = 4,
     .slow_nodes = {3},
     .node_out = {true},
     .node_in = {true},
     .nslow_nodes = 1,
     .flaky = -1,
     .want_nodes = 1},
    {.name = "one slow link among four",
     .n = 4,
     .slow_links = {{2, 0, 0.05}},
     .nslow_links = 1,
     .flaky = -1,
     .want_links = 1},
    {.name = "one slow node among eight",
     .n = 8,
     .slow_nodes = {5},
     .node_out = {true},
     .node_in = {true},
     .nslow_nodes = 1,
     .flaky = -1,
     .want_nodes = 1},
    {.name = "slow link among three",
     .n = 3,
     .slow_links = {{0, 1, 0.1}},
     .nslow_links = 1,
     .flaky = -1,
     .want_links = 1},
};

static void test_scenarios(void **state)
{
    (void)state;
    for (size_t k = 0; k < PF_ARRAY_LEN(scenarios); k++) {
        const struct scenario *sc = &scenarios[k];
        struct fleet F;
        fleet_init(&F, sc->n);
        for (int i = 0; i < sc->nslow_links; i++)
            F.links[F.nlinks++] = sc->slow_links[i];
        for (int i = 0; i < sc->nslow_nodes; i++) {
            if (sc->node_out[i]) F.out_f[sc->slow_nodes[i]] = 0.1;
            if (sc->node_in[i]) F.in_f[sc->slow_nodes[i]] = 0.1;
        }
        for (int i = 0; i < sc->nonce; i++)
            F.once[F.nonce++] = sc->once[i];
        F.flaky = sc->flaky;
        struct trace T;
        struct pf_coll_judgement J;
        int nodes, links;
        plan_and_judge(&F, &T, &J, &nodes, &links);
        int maxr = sc->max_rounds ? sc->max_rounds : pf_coll_plan_max_rounds(sc->n);
        printf("# %-52s n=%-4d rounds=%d probes=%zu nodes=%d links=%d unresolved=%zu "
               "median=%.1f\n",
               sc->name, sc->n, T.rounds, T.probes, nodes, links, J.nunresolved, J.median);
        assert_int_equal(nodes, sc->want_nodes);
        assert_int_equal(links, sc->want_links);
        assert_int_equal(J.nunresolved, 0);
        assert_true(T.rounds <= maxr);
        assert_true(T.max_per_rank <= 2);
        /* the first round's 1 MiB probes carry a round trip: a little under the base rate */
        /* (among four, a slow node's links are half of all: the median falls with them) */
        if (sc->n >= 8) assert_true(J.median > 0.8 * BASE_GBPS && J.median <= BASE_GBPS);
        for (int i = 0; i < sc->nslow_nodes; i++) {
            int r = sc->slow_nodes[i];
            const struct pf_coll_culprit *c = find(&J, PF_COLL_CULPRIT_NODE, r, r);
            assert_non_null(c);
            assert_int_equal(c->out, sc->node_out[i]);
            assert_int_equal(c->in, sc->node_in[i]);
            /* slow again against good partners, and the numbers to show it */
            int confirmed = 0;
            for (size_t e = 0; e < c->nev; e++) {
                assert_true(pf_coll_sample_gbps(&c->ev[e]) < J.threshold);
                assert_true(c->ev[e].src == r || c->ev[e].dst == r);
                confirmed += c->ev[e].round >= pf_coll_survey_rounds(sc->n);
            }
            assert_true(confirmed >= PF_COLL_NODE_PARTNERS);
            assert_true(c->gbps < J.threshold && c->gbps > 0);
        }
        for (int i = 0; i < sc->nslow_links; i++) {
            const struct link_f *l = &sc->slow_links[i];
            const struct pf_coll_culprit *c = find(&J, PF_COLL_CULPRIT_LINK, l->src, l->dst);
            assert_non_null(c);
            assert_true(c->nev >= PF_COLL_LINK_SAMPLES);
            for (size_t e = 0; e < c->nev; e++)
                assert_true(c->ev[e].src == l->src && c->ev[e].dst == l->dst);
            assert_true(fabs(c->gbps - BASE_GBPS * l->f) < 0.5);
            if (sc->n > 2) {
                /* both ends shown fast with other partners */
                assert_int_equal(c->clear_src.src, l->src);
                assert_int_not_equal(c->clear_src.dst, l->dst);
                assert_true(pf_coll_sample_gbps(&c->clear_src) >= J.threshold);
                assert_int_equal(c->clear_dst.dst, l->dst);
                assert_int_not_equal(c->clear_dst.src, l->src);
                assert_true(pf_coll_sample_gbps(&c->clear_dst) >= J.threshold);
            }
        }
        pf_coll_judgement_free(&J);
        free(T.s);
    }
}

/* A healthy 1024: the survey only, every position measured out and in against three
 * different partners at three distances, two probes a round. */
static void test_healthy_1024_coverage(void **state)
{
    (void)state;
    struct fleet F;
    fleet_init(&F, 1024);
    struct trace T;
    run_plan(&F, &T);
    assert_int_equal(T.rounds, PF_COLL_SURVEY_ROUNDS);
    assert_int_equal(T.probes, 3 * 1024);
    assert_int_equal(T.max_per_rank, 2);
    int outs[1024] = {0}, ins[1024] = {0};
    for (size_t i = 0; i < T.n; i++) {
        outs[T.s[i].src]++;
        ins[T.s[i].dst]++;
    }
    for (int r = 0; r < 1024; r++) {
        assert_int_equal(outs[r], 3);
        assert_int_equal(ins[r], 3);
    }
    /* distances 1, n/2, n/4+1 */
    assert_int_equal(pf_coll_survey_shift(1024, 0), 1);
    assert_int_equal(pf_coll_survey_shift(1024, 1), 512);
    assert_int_equal(pf_coll_survey_shift(1024, 2), 257);
    /* the first round at the start size, the next sized from what it measured */
    assert_int_equal(T.s[0].bytes, PF_COLL_PROBE_START);
    assert_true(T.s[T.n - 1].bytes > PF_COLL_PROBE_START);
    free(T.s);
}

static void test_survey_shifts(void **state)
{
    (void)state;
    assert_int_equal(pf_coll_survey_rounds(1), 0);
    assert_int_equal(pf_coll_survey_rounds(2), 1);
    assert_int_equal(pf_coll_survey_rounds(3), 2);
    assert_int_equal(pf_coll_survey_rounds(4), 3);
    assert_int_equal(pf_coll_survey_rounds(100000), 3);
    for (int n = 2; n <= 70; n++) {
        int k = pf_coll_survey_rounds(n);
        for (int i = 0; i < k; i++) {
            int d = pf_coll_survey_shift(n, i);
            assert_true(d > 0 && d < n);
            for (int j = 0; j < i; j++)
                assert_int_not_equal(d, pf_coll_survey_shift(n, j));
        }
        assert_int_equal(pf_coll_survey_shift(n, k), 0);
        assert_int_equal(pf_coll_survey_shift(n, -1), 0);
    }
    /* the rounds grow with log n, not n */
    assert_int_equal(pf_coll_plan_max_rounds(2), 1 + 2 + 1);
    assert_int_equal(pf_coll_plan_max_rounds(1024), 3 + 2 + 10);
    assert_int_equal(pf_coll_plan_max_rounds(1000), 3 + 2 + 10);
    assert_int_equal(pf_coll_plan_max_rounds(1 << 20), 3 + 2 + 20);
}

static void test_probe_bytes(void **state)
{
    (void)state;
    static const struct {
        double gbps;
        size_t want;
    } rows[] = {
        {0, PF_COLL_PROBE_START},
        {-3, PF_COLL_PROBE_START},
        {NAN, PF_COLL_PROBE_START},
        {INFINITY, PF_COLL_PROBE_START},
        {0.001, PF_COLL_PROBE_MIN_BYTES},  /* 3 KB would last 25 ms: the floor */
        {1.0, 3145728},                    /* 3.125 MB -> 48 x 64 KiB */
        {10.0, 31260672},                  /* 31.25 MB -> 477 x 64 KiB */
        {25.0, 78184448},                  /* 78.1 MB -> 1193 x 64 KiB */
        {1000.0, PF_COLL_PROBE_MAX_BYTES}, /* the cap */
    };
    for (size_t i = 0; i < PF_ARRAY_LEN(rows); i++) {
        size_t b = pf_coll_probe_bytes(rows[i].gbps);
        assert_int_equal(b, rows[i].want);
        assert_int_equal(b % (64u << 10), 0);
        /* enough bytes to last the minimum wherever the cap does not bite */
        if (rows[i].gbps > 0 && isfinite(rows[i].gbps) && b < PF_COLL_PROBE_MAX_BYTES)
            assert_true((double)b * 8 / (rows[i].gbps * 1e9) >= PF_COLL_PROBE_MIN_S);
    }
}

static void test_bad_input(void **state)
{
    (void)state;
    struct pf_coll_pair *p;
    size_t np;
    assert_int_equal(pf_coll_plan(&p, &np, 1, 0, NULL, 0, PF_COLL_SLOW_RATIO), PF_EINVAL);
    assert_int_equal(pf_coll_plan(&p, &np, 8, -1, NULL, 0, PF_COLL_SLOW_RATIO), PF_EINVAL);
    assert_int_equal(pf_coll_plan(&p, &np, 8, 0, NULL, 0, 1.5), PF_EINVAL);
    assert_int_equal(pf_coll_plan(&p, &np, 8, 0, NULL, 3, 0.3), PF_EINVAL);
    /* past the last round the plan is over */
    assert_int_equal(pf_coll_plan(&p, &np, 8, pf_coll_plan_max_rounds(8), NULL, 0, 0.3), 0);
    assert_int_equal(np, 0);
    free(p);
    struct pf_coll_judgement J;
    assert_int_equal(pf_coll_judge(&J, 0, NULL, 0, 0.3), PF_EINVAL);
    /* samples that make no sense are ignored, never trusted */
    struct pf_coll_sample s[] = {
        {0, 0, 0, 1 << 20, 0.5, 0},   /* to itself */
        {-1, 2, 0, 1 << 20, 0.5, 0},  /* out of range */
        {1, 9, 0, 1 << 20, 0.5, 0},   /* out of range */
        {1, 2, 0, 1 << 20, 0, 0},     /* no duration */
        {1, 2, -4, 1 << 20, 0.5, 0},  /* no round */
        {1, 2, 0, 1 << 20, NAN, 0},   /* no duration */
        {2, 3, 0, 1 << 20, 0.001, 0}, /* the one real sample */
    };
    assert_int_equal(pf_coll_judge(&J, 4, s, PF_ARRAY_LEN(s), PF_COLL_SLOW_RATIO), 0);
    assert_int_equal(J.nsamples, 1);
    assert_int_equal(J.npairs, 1);
    assert_int_equal(J.n, 0);
    pf_coll_judgement_free(&J);
    /* an empty judgement is nothing, not a crash */
    assert_int_equal(pf_coll_judge(&J, 4, NULL, 0, PF_COLL_SLOW_RATIO), 0);
    assert_int_equal(J.n, 0);
    assert_true(J.median == 0);
    pf_coll_judgement_free(&J);
}

/* A single slow sample makes a suspect and costs one more probe of that link: the link is
 * measured again, fast, and nothing is named. */
static void test_noisy_sample_remeasured(void **state)
{
    (void)state;
    struct fleet F;
    fleet_init(&F, 64);
    F.once[F.nonce++] = (struct one_sample){12, 44, 1, 0.05};
    struct trace T;
    run_plan(&F, &T);
    int samples = 0;
    for (size_t i = 0; i < T.n; i++)
        samples += T.s[i].src == 12 && T.s[i].dst == 44;
    assert_int_equal(samples, 2);
    assert_int_equal(T.rounds, PF_COLL_SURVEY_ROUNDS + 1);
    assert_int_equal(T.probes, 3 * 64 + 1); /* one confirmation probe, nothing else */
    free(T.s);
}

/* ---- simulation: plan + judge over noisy fleets, fixed seed */

static void sim(int n, int trials, double hiccup, int *false_culprits, int *missed, int *rounds_max,
                uint64_t seed)
{
    *false_culprits = *missed = *rounds_max = 0;
    for (int t = 0; t < trials; t++) {
        struct fleet F;
        fleet_init(&F, n);
        F.rng = seed + (uint64_t)t * 0x100000001b3ull;
        F.jitter = 0.5; /* healthy links between half and full speed */
        F.hiccup = hiccup;
        /* a third healthy, a third one slow node, a third one slow link */
        int kind = t % 3, bad = (int)(urand(&F) * n), bad2 = (bad + n / 2) % n;
        if (kind == 1) F.out_f[bad] = F.in_f[bad] = 0.1;
        if (kind == 2) F.links[F.nlinks++] = (struct link_f){bad, bad2, 0.1};
        struct trace T;
        run_plan(&F, &T);
        assert_true(T.max_per_rank <= 2);
        if (T.rounds > *rounds_max) *rounds_max = T.rounds;
        struct pf_coll_judgement J;
        judge(&J, &F, &T);
        bool found = kind == 0;
        for (size_t i = 0; i < J.n; i++) {
            const struct pf_coll_culprit *c = &J.v[i];
            bool right =
                (kind == 1 && c->kind == PF_COLL_CULPRIT_NODE && c->src == bad) ||
                (kind == 2 && c->kind == PF_COLL_CULPRIT_LINK && c->src == bad && c->dst == bad2);
            if (right)
                found = true;
            else
                (*false_culprits)++;
        }
        if (!found) (*missed)++;
        pf_coll_judgement_free(&J);
        free(T.s);
    }
}

static void test_simulation_no_false_culprit(void **state)
{
    (void)state;
    static const struct {
        int n, trials;
        double hiccup;
    } rows[] = {
        {64, 200, 0.01},
        {64, 200, 0.03},
        {256, 60, 0.01},
        {1024, 9, 0.01},
    };
    for (size_t i = 0; i < PF_ARRAY_LEN(rows); i++) {
        int fc, missed, rmax;
        sim(rows[i].n, rows[i].trials, rows[i].hiccup, &fc, &missed, &rmax, 0x5eed0000u + i);
        printf("# simulation n=%d trials=%d hiccups=%.0f%%: false culprits %d, missed %d, "
               "rounds <= %d\n",
               rows[i].n, rows[i].trials, rows[i].hiccup * 100, fc, missed, rmax);
        assert_int_equal(fc, 0);
        assert_int_equal(missed, 0);
        assert_true(rmax <= pf_coll_plan_max_rounds(rows[i].n));
    }
}

/* The judge and a busy host: a rank that reports its CPU starved in a round gives no
 * evidence against its links in that round; a link is named only when it is slow again at
 * other moments, with both ends' CPUs free. */
static void test_starved_ends(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        int n;
        struct link_f link;     /* a slow link (f 0: none) */
        int slow_node;          /* -1: none */
        struct one_sample once; /* a slow moment (f 0: none) */
        int starved, from, to;  /* the rank reporting a starved CPU, and when */
        int want_links, want_nodes;
        bool want_starved; /* the judgement lists what it left out for the CPU */
    } rows[] = {
        {"starved end, slow every time: no culprit",
         64,
         {5, 37, 0.1},
         -1,
         {0},
         5,
         0,
         99,
         0,
         0,
         true},
        {"starved receiver, slow every time: no culprit",
         64,
         {5, 37, 0.1},
         -1,
         {0},
         37,
         0,
         99,
         0,
         0,
         true},
        {"starved node, slow every time: no culprit", 64, {0}, 17, {0}, 17, 0, 99, 0, 0, true},
        {"slow link, another rank starved: still named",
         64,
         {5, 37, 0.1},
         -1,
         {0},
         9,
         0,
         99,
         1,
         0,
         false},
        {"slow link, its end starved in the survey only: named from the rounds after",
         64,
         {5, 37, 0.1},
         -1,
         {0},
         5,
         0,
         3,
         1,
         0,
         false},
        {"slow node, starved in the survey only: named", 64, {0}, 17, {0}, 17, 0, 3, 0, 1, false},
        {"slow while starved in the survey, fast when probed again: not named",
         64,
         {0},
         -1,
         {12, 44, 1, 0.05},
         12,
         0,
         3,
         0,
         0,
         false},
        {"slow link among 1024, its end starved every time: no culprit",
         1024,
         {700, 188, 0.05},
         -1,
         {0},
         700,
         0,
         99,
         0,
         0,
         true},
    };
    for (size_t k = 0; k < PF_ARRAY_LEN(rows); k++) {
        struct fleet F;
        fleet_init(&F, rows[k].n);
        if (rows[k].link.f > 0) F.links[F.nlinks++] = rows[k].link;
        if (rows[k].slow_node >= 0) F.out_f[rows[k].slow_node] = F.in_f[rows[k].slow_node] = 0.1;
        if (rows[k].once.f > 0) F.once[F.nonce++] = rows[k].once;
        F.starved = rows[k].starved;
        F.starved_from = rows[k].from;
        F.starved_to = rows[k].to;
        struct trace T;
        struct pf_coll_judgement J;
        int nodes, links;
        plan_and_judge(&F, &T, &J, &nodes, &links);
        printf("# %-72s rounds=%d nodes=%d links=%d starved=%zu\n", rows[k].name, T.rounds, nodes,
               links, J.nstarved);
        assert_int_equal(links, rows[k].want_links);
        assert_int_equal(nodes, rows[k].want_nodes);
        if (rows[k].want_links)
            assert_non_null(find(&J, PF_COLL_CULPRIT_LINK, rows[k].link.src, rows[k].link.dst));
        if (rows[k].want_nodes)
            assert_non_null(find(&J, PF_COLL_CULPRIT_NODE, rows[k].slow_node, rows[k].slow_node));
        assert_int_equal(J.nstarved > 0, rows[k].want_starved);
        for (size_t i = 0; i < J.nstarved && i < PF_COLL_EVIDENCE_MAX; i++)
            assert_int_not_equal(J.starved[i].starved, 0);
        pf_coll_judgement_free(&J);
        free(T.s);
    }
}

/* The coordinator marks each sample with its ends' CPU as they reported it in that round,
 * whatever the sample itself claims. */
static void test_coord_cpu(void **state)
{
    (void)state;
    struct pf_coll_coord c;
    pf_coll_coord_init(&c, 4, PF_COLL_SLOW_RATIO);
    assert_true(pf_coll_coord_plan(&c, 0) > 0);
    struct pf_coll_cpu busy = {0.6, 0, -1, 99}, idle = {0.01, 0, -1, 99};
    struct pf_coll_cpu steal = {0, 0.3, -1, -1}, own = {0, 0, 0.5, 50}, host = {0, 0, -1, 100};
    assert_true(pf_coll_cpu_starved(&busy) && pf_coll_cpu_starved(&steal));
    assert_true(pf_coll_cpu_starved(&own));
    assert_false(pf_coll_cpu_starved(&idle) || pf_coll_cpu_starved(&host));
    pf_coll_coord_cpu(&c, 0, &busy);
    pf_coll_coord_cpu(&c, 1, &idle);
    pf_coll_coord_cpu(&c, 2, &idle);
    assert_int_equal(c.nstarved_reports, 1);
    struct pf_coll_task t[PF_COLL_TASKS_MAX];
    size_t nt = pf_coll_coord_tasks(&c, 1, t);
    int from = -1;
    for (size_t i = 0; i < nt; i++)
        if (!t[i].send) from = t[i].peer;
    assert_int_equal(from, 0); /* round 0 is shift 1: 0 sends to 1 */
    struct pf_coll_sample s = {0, 1, 0, 1 << 20, 0.01, 0};
    assert_int_equal(pf_coll_coord_add(&c, 1, &s, 1), 1);
    s = (struct pf_coll_sample){1, 2, 0, 1 << 20, 0.01, PF_COLL_STARVED_SRC};
    assert_int_equal(pf_coll_coord_add(&c, 2, &s, 1), 1);
    assert_int_equal(c.s[0].starved, PF_COLL_STARVED_SRC); /* rank 0 reported it */
    assert_int_equal(c.s[1].starved, 0);                   /* the sample's own claim: none */
    pf_coll_coord_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_probe_bytes),
        cmocka_unit_test(test_survey_shifts),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_healthy_1024_coverage),
        cmocka_unit_test(test_noisy_sample_remeasured),
        cmocka_unit_test(test_scenarios),
        cmocka_unit_test(test_simulation_no_false_culprit),
        cmocka_unit_test(test_starved_ends),
        cmocka_unit_test(test_coord_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
