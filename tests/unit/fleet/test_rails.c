/* fleet/rails: the judgement of the pods' rails without sockets: the rings and each rank's
 * tasks, agreement (networks, subnets, MTUs, rails down), the probes' judgement (a pod
 * unreachable or dropping full-MTU frames, a path between two pods, a whole network, a slow
 * rail only when both of its probes are slow), and the codecs, each a round trip and a
 * refusal of what is malformed. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../pkg/fleet/fleet.h"

#define N 6

/* n pods trainer-<r> on node-<r>, each with net1 (ml/a, 10.1.1.x/24) and net2 (ml/b,
 * 10.1.2.x/24), MTU 9000, RDMA devices mlx5_<2r> and mlx5_<2r+1>. */
static void setup(struct pf_fleet *f, int *roster, struct pf_fleet_rails *rails, int n)
{
    pf_fleet_init(f, n);
    memset(rails, 0, (size_t)n * sizeof(*rails));
    for (int r = 0; r < n; r++) {
        f->r[r].state = PF_FLEET_JOINED;
        char b[32];
        snprintf(b, sizeof(b), "trainer-%d", r);
        f->r[r].pod = pf_fleet_keep(f, b);
        snprintf(b, sizeof(b), "node-%d", r);
        f->r[r].node = pf_fleet_keep(f, b);
        roster[r] = r;
        rails[r].reported = true;
        rails[r].port = 40000 + r;
        rails[r].n = 2;
        for (int k = 0; k < 2; k++) {
            struct pf_fleet_rail *x = &rails[r].r[k];
            snprintf(x->net, sizeof(x->net), "ml/%c", 'a' + k);
            snprintf(x->iface, sizeof(x->iface), "net%d", k + 1);
            snprintf(x->ip, sizeof(x->ip), "10.1.%d.%d", k + 1, 10 + r);
            x->prefix = 24;
            x->mtu = 9000;
            x->up = true;
            snprintf(x->rdma, sizeof(x->rdma), "mlx5_%d", 2 * r + k);
        }
    }
    f->n = n;
    f->roster = roster;
}

static const struct pf_fleet_finding *find(const struct pf_fleet *f, const char *code)
{
    for (size_t i = 0; i < f->out.nfindings; i++)
        if (strcmp(f->out.findings[i].code, code) == 0) return &f->out.findings[i];
    return NULL;
}

static size_t count(const struct pf_fleet *f, const char *code)
{
    size_t k = 0;
    for (size_t i = 0; i < f->out.nfindings; i++)
        k += strcmp(f->out.findings[i].code, code) == 0;
    return k;
}

/* The culprits' ranks as "2,4". */
static void culprits(char *out, size_t n, const struct pf_fleet *f)
{
    out[0] = '\0';
    for (size_t i = 0; i < f->out.nculprits; i++)
        snprintf(out + strlen(out), n - strlen(out), "%s%d", i ? "," : "", f->out.culprits[i].rank);
}

/* Every probe ok at gbps, then the ones listed bad. */
static void results(struct pf_fleet_railplan *p, double gbps)
{
    for (int k = 0; k < p->nnet; k++)
        for (int i = 0; i < p->net[k].nring; i++) {
            struct pf_fleet_rail_result r = {k, p->net[k].res[i].dst, PF_RAIL_OK, gbps, ""};
            pf_fleet_rails_add(p, p->net[k].ring[i], &r, 1);
        }
}
static void set(struct pf_fleet_railplan *p, int k, int src, int state, double gbps)
{
    struct pf_fleet_rail_result r = {k, p->net[k].res[p->net[k].at[src]].dst, state, gbps, ""};
    snprintf(r.why, sizeof(r.why), "probe from %d", src);
    pf_fleet_rails_add(p, src, &r, 1);
}

static void test_plan_and_tasks(void **state)
{
    (void)state;
    struct pf_fleet f;
    int roster[N];
    struct pf_fleet_rails rails[N];
    setup(&f, roster, rails, N);
    rails[2].n = 1;           /* trainer-2 has no ml/b */
    rails[4].r[1].up = false; /* trainer-4's ml/b is down */
    struct pf_fleet_railplan p;
    pf_fleet_rails_plan(&p, rails, N);
    assert_int_equal(p.nnet, 2);
    assert_int_equal(p.net[0].nring, 6);
    assert_int_equal(p.net[1].pods, 5);
    assert_int_equal(p.net[1].nring, 4); /* 0, 1, 3, 5 */
    struct pf_fleet_rail_task t[PF_FLEET_RAIL_TASKS];
    size_t nt = pf_fleet_rails_tasks(t, &p, 1);
    assert_int_equal(nt, 4);
    assert_true(t[0].send && t[0].peer == 2 && strcmp(t[0].ip, "10.1.1.12") == 0 &&
                t[0].port == 40002 && strcmp(t[0].name, "ml/a") == 0);
    assert_true(!t[1].send && t[1].peer == 0);
    assert_true(t[2].send && t[2].net == 1 && t[2].peer == 3 && strcmp(t[2].ip, "10.1.2.13") == 0);
    assert_true(!t[3].send && t[3].peer == 0);
    /* the ring wraps: trainer-5 sends ml/b to trainer-0 */
    nt = pf_fleet_rails_tasks(t, &p, 5);
    assert_true(t[2].send && t[2].peer == 0 && !t[3].send && t[3].peer == 3);
    assert_int_equal(pf_fleet_rails_tasks(t, &p, 4), 2); /* its ml/b is down: ml/a only */
    pf_fleet_rails_agree(&f, &p);
    const struct pf_fleet_finding *m = find(&f, "rail-network-missing");
    assert_non_null(m);
    assert_non_null(strstr(m->message, "network ml/b is attached to 5 of 6 pods; not to rank 2 "
                                       "(trainer-2) on node-2"));
    const struct pf_fleet_finding *d = find(&f, "rail-down");
    assert_non_null(d);
    assert_non_null(strstr(d->message, "rank 4 (trainer-4) on node-4, net2 (RDMA device mlx5_9) "
                                       "is down"));
    char c[64];
    culprits(c, sizeof(c), &f);
    assert_string_equal(c, "2,4");
    pf_fleet_railplan_free(&p);
    pf_fleet_free(&f);
}

static void test_subnet_and_mtu(void **state)
{
    (void)state;
    struct pf_fleet f;
    int roster[N];
    struct pf_fleet_rails rails[N];
    setup(&f, roster, rails, N);
    strcpy(rails[3].r[1].ip, "10.1.9.13");
    rails[5].r[0].mtu = 1500;
    struct pf_fleet_railplan p;
    pf_fleet_rails_plan(&p, rails, N);
    pf_fleet_rails_agree(&f, &p);
    const struct pf_fleet_finding *s = find(&f, "rail-subnet-mismatch");
    assert_non_null(s);
    assert_string_equal(s->message,
                        "network ml/b: 1 of 6 pods are on another subnet than 10.1.2.0/24: rank 3 "
                        "(trainer-3) on node-3, net2 (RDMA device mlx5_7) has 10.1.9.13/24");
    assert_int_equal(s->status, PF_FAIL);
    const struct pf_fleet_finding *m = find(&f, "rail-mtu-mismatch");
    assert_non_null(m);
    assert_int_equal(m->status, PF_WARN);
    assert_non_null(strstr(m->message, "rank 5 (trainer-5) on node-5, net1 (RDMA device mlx5_10) "
                                       "has MTU 1500"));
    assert_null(strstr(m->message, "trainer-3"));
    char c[64];
    culprits(c, sizeof(c), &f);
    assert_string_equal(c, "3"); /* an MTU mismatch warns, names no culprit */
    assert_int_equal(count(&f, "rail-network-missing") + count(&f, "rail-down"), 0);
    pf_fleet_railplan_free(&p);
    pf_fleet_free(&f);
}

/* One table: which probes fail, what is found, who is a culprit. */
struct judge_case {
    const char *name;
    int bad[4][3];       /* {net, src, state}, state 0 ends */
    double slow_gbps[2]; /* trainer-2's ml/a probes out and in (0: the others' rate) */
    const char *code;    /* expected code, NULL: none */
    size_t ncode;
    const char *culprits;
    const char *text; /* in the message */
};

static void test_judge_table(void **state)
{
    (void)state;
    const struct judge_case cases[] = {
        {"healthy", {{0}}, {0, 0}, NULL, 0, "", NULL},
        {"a pod unreachable both ways",
         {{1, 2, PF_RAIL_UNREACHABLE}, {1, 1, PF_RAIL_UNREACHABLE}},
         {0, 0},
         "rail-unreachable",
         1,
         "2",
         "network ml/b: rank 2 (trainer-2) on node-2, net2 (RDMA device mlx5_5), 10.1.2.12/24: to "
         "rank 3 (trainer-3): probe from 2; from rank 1 (trainer-1): probe from 1"},
        {"a pod dropping full frames",
         {{0, 4, PF_RAIL_STALLED}, {0, 3, PF_RAIL_STALLED}},
         {0, 0},
         "rail-mtu-blackhole",
         1,
         "4",
         "rank 4 (trainer-4) on node-4, net1 (RDMA device mlx5_8), 10.1.1.14/24 MTU 9000: its "
         "probe to rank 5 (trainer-5) and the one from rank 3 (trainer-3) connected"},
        {"one path between two fine pods",
         {{0, 1, PF_RAIL_STALLED}},
         {0, 0},
         "rail-mtu-blackhole",
         1,
         "",
         "1 probe failed between pods that are otherwise fine"},
        {"every probe of a network",
         {{1, 0, PF_RAIL_UNREACHABLE},
          {1, 1, PF_RAIL_UNREACHABLE},
          {1, 2, PF_RAIL_UNREACHABLE},
          {1, 3, PF_RAIL_UNREACHABLE}},
         {0, 0},
         NULL, /* not all: 4 of 6 */
         0,
         "1,2,3",
         NULL},
        {"one slow probe is no finding", {{0}}, {0.5, 0}, NULL, 0, "", NULL},
        {"slow both ways", {{0}}, {0.5, 0.6}, "rail-slow", 1, "", "rank 2 (trainer-2)"},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        const struct judge_case *x = &cases[c];
        struct pf_fleet f;
        int roster[N];
        struct pf_fleet_rails rails[N];
        setup(&f, roster, rails, N);
        struct pf_fleet_railplan p;
        pf_fleet_rails_plan(&p, rails, N);
        results(&p, 10);
        for (int i = 0; i < 4 && x->bad[i][2]; i++)
            set(&p, x->bad[i][0], x->bad[i][1], x->bad[i][2], 0);
        if (x->slow_gbps[0] > 0) set(&p, 0, 2, PF_RAIL_OK, x->slow_gbps[0]);
        if (x->slow_gbps[1] > 0) set(&p, 0, 1, PF_RAIL_OK, x->slow_gbps[1]);
        pf_fleet_rails_judge(&f, &p);
        char got[64];
        culprits(got, sizeof(got), &f);
        if (strcmp(got, x->culprits) != 0) fail_msg("%s: culprits %s", x->name, got);
        if (x->code) {
            const struct pf_fleet_finding *fd = find(&f, x->code);
            if (!fd || count(&f, x->code) != x->ncode) fail_msg("%s: no %s", x->name, x->code);
            if (x->text && !strstr(fd->message, x->text))
                fail_msg("%s: message %s", x->name, fd->message);
        } else if (c != 4 && f.out.nfindings) {
            fail_msg("%s: unexpected %s: %s", x->name, f.out.findings[0].code,
                     f.out.findings[0].message);
        }
        pf_fleet_railplan_free(&p);
        pf_fleet_free(&f);
    }
}

static void test_whole_network(void **state)
{
    (void)state;
    struct pf_fleet f;
    int roster[N];
    struct pf_fleet_rails rails[N];
    setup(&f, roster, rails, N);
    struct pf_fleet_railplan p;
    pf_fleet_rails_plan(&p, rails, N);
    results(&p, 10);
    for (int src = 0; src < N; src++)
        set(&p, 0, src, PF_RAIL_STALLED, 0);
    pf_fleet_rails_judge(&f, &p);
    const struct pf_fleet_finding *fd = find(&f, "rail-mtu-blackhole");
    assert_non_null(fd);
    assert_non_null(strstr(fd->message, "the network itself, not one pod"));
    assert_int_equal(f.out.nculprits, 0);
    pf_fleet_railplan_free(&p);
    pf_fleet_free(&f);
}

static void test_codecs(void **state)
{
    (void)state;
    struct pf_fleet f;
    int roster[N];
    struct pf_fleet_rails rails[N], back;
    setup(&f, roster, rails, N);
    struct pf_buf b;
    pf_buf_init(&b, 1 << 16);
    assert_int_equal(pf_fleet_rails_encode(&b, &rails[3]), 0);
    assert_int_equal(pf_fleet_rails_decode(&back, (const uint8_t *)b.data, b.len), 0);
    assert_true(back.reported && back.port == 40003 && back.n == 2);
    assert_int_equal(memcmp(&back.r[1], &rails[3].r[1], sizeof(back.r[1])), 0);
    /* a rail with an address that is not IPv4 is left out, the rest kept */
    strcpy(rails[3].r[0].ip, "fe80::1");
    pf_buf_reset(&b);
    pf_fleet_rails_encode(&b, &rails[3]);
    assert_int_equal(pf_fleet_rails_decode(&back, (const uint8_t *)b.data, b.len), 0);
    assert_int_equal(back.n, 1);
    assert_int_equal(pf_fleet_rails_decode(&back, (const uint8_t *)"junk", 4), PF_EINVAL);
    assert_false(back.reported);

    struct pf_fleet_rail_task t[2] = {{1, "ml/b", true, 4, "10.1.2.14", 40004},
                                      {1, "ml/b", false, 2, "", 0}},
                              tb[4];
    pf_buf_reset(&b);
    assert_int_equal(pf_fleet_rail_tasks_encode(&b, 2, t, 2), 0);
    size_t n = 0;
    int nets = 0;
    assert_int_equal(
        pf_fleet_rail_tasks_decode(&nets, tb, &n, 4, N, (const uint8_t *)b.data, b.len), 0);
    assert_int_equal(nets, 2);
    assert_int_equal(n, 2);
    assert_true(tb[0].send && tb[0].peer == 4 && tb[0].port == 40004 && !tb[1].send);
    /* a peer past the roster is dropped */
    assert_int_equal(
        pf_fleet_rail_tasks_decode(&nets, tb, &n, 4, 4, (const uint8_t *)b.data, b.len), 0);
    assert_int_equal(n, 1);

    struct pf_fleet_rail_result r[2] = {{0, 1, PF_RAIL_OK, 12.5, ""},
                                        {1, 2, PF_RAIL_STALLED, 0, "none acknowledged"}},
                                rb[4];
    pf_buf_reset(&b);
    assert_int_equal(pf_fleet_rail_results_encode(&b, r, 2), 0);
    assert_int_equal(pf_fleet_rail_results_decode(rb, &n, 4, 2, N, (const uint8_t *)b.data, b.len),
                     0);
    assert_int_equal(n, 2);
    assert_true(rb[0].gbps == 12.5 && rb[1].state == PF_RAIL_STALLED &&
                strcmp(rb[1].why, "none acknowledged") == 0);
    /* a network index past the plan is dropped */
    assert_int_equal(pf_fleet_rail_results_decode(rb, &n, 4, 1, N, (const uint8_t *)b.data, b.len),
                     0);
    assert_int_equal(n, 1);
    pf_buf_free(&b);
    pf_fleet_free(&f);
}

/* 1,024 pods with 8 rails: the plan, agreement and judgement stay linear (no timing is
 * asserted; the test shows the sizes work and names the one bad pod). */
static void test_large(void **state)
{
    (void)state;
    enum { BIG = 1024 };
    struct pf_fleet f;
    int *roster = calloc(BIG, sizeof(int));
    struct pf_fleet_rails *rails = calloc(BIG, sizeof(*rails));
    setup(&f, roster, rails, BIG);
    for (int r = 0; r < BIG; r++) {
        rails[r].n = 8;
        for (int k = 0; k < 8; k++) {
            struct pf_fleet_rail *x = &rails[r].r[k];
            snprintf(x->net, sizeof(x->net), "ml/rail-%d", k);
            snprintf(x->iface, sizeof(x->iface), "net%d", k + 1);
            snprintf(x->ip, sizeof(x->ip), "10.%d.%d.%d", 10 + k, r / 200, r % 200 + 1);
            x->prefix = 16;
            x->mtu = 9000;
            x->up = true;
        }
    }
    rails[700].r[5].mtu = 4200;
    struct pf_fleet_railplan p;
    pf_fleet_rails_plan(&p, rails, BIG);
    assert_int_equal(p.nnet, 8);
    results(&p, 100);
    pf_fleet_rails_agree(&f, &p);
    pf_fleet_rails_judge(&f, &p);
    assert_int_equal(f.out.nfindings, 1);
    assert_non_null(strstr(f.out.findings[0].message, "rank 700 (trainer-700)"));
    pf_fleet_railplan_free(&p);
    pf_fleet_free(&f);
    free(rails);
    free(roster);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plan_and_tasks), cmocka_unit_test(test_subnet_and_mtu),
        cmocka_unit_test(test_judge_table),    cmocka_unit_test(test_whole_network),
        cmocka_unit_test(test_codecs),         cmocka_unit_test(test_large),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
