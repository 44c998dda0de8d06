/* fleet: the judgement of what ranks report, without sockets: agreement at the rendezvous,
 * lost peers (the message never ends in "(null)"), wrong results, the TCP floor, slow nodes,
 * failed local checks, the fleet verdict; and the codecs of the SUMMARY, the reports, the
 * all-reduce results and the link measurements, each a round trip. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../pkg/fleet/fleet.h"

/* A fleet of n joined ranks named trainer-<r> on node-<r>, each claiming the same things. */
static void fleet_of(struct pf_fleet *f, int n, int *roster)
{
    pf_fleet_init(f, n);
    for (int r = 0; r < n; r++) {
        struct pf_fleet_rank *m = &f->r[r];
        m->state = PF_FLEET_JOINED;
        char b[32];
        snprintf(b, sizeof(b), "trainer-%d", r);
        m->pod = pf_fleet_keep(f, b);
        snprintf(b, sizeof(b), "node-%d", r);
        m->node = pf_fleet_keep(f, b);
        m->world_claimed = n;
        m->version = "0.1.0";
        m->digest = "sha256:aa";
        m->nccl_version = "2.21.5";
        roster[r] = r;
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

struct agree_case {
    const char *name;
    void (*breaks)(struct pf_fleet *f);
    const char *code;    /* expected finding, NULL: none */
    const char *in_text; /* a part of its message */
    int culprit;         /* the rank blamed, -1: nobody */
};

static void b_none(struct pf_fleet *f)
{
    (void)f;
}
static void b_missing(struct pf_fleet *f)
{
    f->r[3].state = PF_FLEET_MISSING;
}
static void b_world(struct pf_fleet *f)
{
    f->r[2].world_claimed = 5;
}
static void b_version(struct pf_fleet *f)
{
    f->r[1].version = "0.0.9";
}
static void b_config(struct pf_fleet *f)
{
    f->r[1].digest = "sha256:bb";
}
static void b_nccl(struct pf_fleet *f)
{
    f->r[3].nccl_version = "2.18.1";
}
static struct pf_strlist env_0, env_1; /* the ranks' NCCL_* lists refer to these */
static void b_env(struct pf_fleet *f)
{
    if (!env_0.n) pf_strlist_add(&env_0, "NCCL_IB_HCA=mlx5_0");
    if (!env_1.n) pf_strlist_add(&env_1, "NCCL_IB_HCA=mlx5_1");
    for (int r = 0; r < 4; r++)
        f->r[r].env = r == 2 ? &env_1 : &env_0;
}
static void b_refused(struct pf_fleet *f)
{
    f->r[1].state = PF_FLEET_REFUSED;
    f->r[1].why = "refused at the rendezvous: its PREFLIGHT_TOKEN does not match";
}
/* the JOINs rank 0 refused after believing them (the meeting's list): each is judged here,
 * with the claims, so that each code of the check `rendezvous` is decided once */
static const struct pf_wire_refused refused_rows[] = {
    {.why = PF_WIRE_REFUSED_DUPLICATE,
     .rank = 0,
     .world = 4,
     .claim = "a pod at 10.0.0.9 claiming rank 0 (intruder)",
     .pod = "intruder",
     .addr = "10.0.0.9",
     .holder = "trainer-0"},
    {.why = PF_WIRE_REFUSED_DUPLICATE,
     .rank = 2,
     .world = 4,
     .claim = "a pod at 10.0.0.8 claiming rank 2 (impostor)",
     .pod = "impostor",
     .addr = "10.0.0.8",
     .holder = "trainer-2",
     .holder_addr = "10.0.0.2"},
    {.why = PF_WIRE_REFUSED_WORLD,
     .rank = 5,
     .world = 8,
     .claim = "a pod at 10.0.0.7 claiming rank 5 (far-5)"},
    {.why = PF_WIRE_REFUSED_RUN,
     .rank = 1,
     .world = 4,
     .claim = "a pod at 10.0.0.6 claiming rank 1"},
    {.why = PF_WIRE_REFUSED_LATE,
     .rank = 3,
     .world = 4,
     .claim = "a pod at 10.0.0.3 claiming rank 3"},
    {.why = PF_WIRE_REFUSED_JOB,
     .rank = 1,
     .world = 4,
     .claim = "a pod at 10.0.0.5 claiming rank 1 (other-1)",
     .pod = "other-1",
     .addr = "10.0.0.5",
     .job = "Job ml/other (uid u-b)",
     .root_job = "Job ml/trainer (uid u-a)"},
};
static void b_refused_dup0(struct pf_fleet *f)
{
    f->refused = &refused_rows[0];
    f->nrefused = 1;
}
static void b_refused_dup(struct pf_fleet *f)
{
    f->refused = &refused_rows[1];
    f->nrefused = 1;
}
static void b_refused_world(struct pf_fleet *f)
{
    f->refused = &refused_rows[2];
    f->nrefused = 1;
}
static void b_refused_run(struct pf_fleet *f)
{
    f->refused = &refused_rows[3];
    f->nrefused = 1;
}
static void b_refused_late(struct pf_fleet *f)
{
    f->refused = &refused_rows[4];
    f->nrefused = 1;
}
/* another job's pod that shares the token: a warning naming both jobs, no culprit */
static void b_refused_job(struct pf_fleet *f)
{
    f->refused = &refused_rows[5];
    f->nrefused = 1;
}
/* rank 3 never joined, and a JOIN that claimed it failed the token check: a warning besides
 * missing-ranks; rank 1, claimed the same way but joined, is not named */
static void b_stranger(struct pf_fleet *f)
{
    b_missing(f);
    f->r[3].refused_claim = "a pod at 10.0.0.66 claiming rank 3 (trainer-3): its HMAC fails";
    f->r[1].refused_claim = "a pod at 10.0.0.67 claiming rank 1 (trainer-1): its HMAC fails";
}
/* rank 3 never joined, and the API server said why (rendezvous.explainMissing): the finding
 * and the culprit carry it */
#define ABSENT_WHY "pod trainer-3-x7k2p Pending, Unschedulable: 0/64 nodes are available"
static void b_missing_why(struct pf_fleet *f)
{
    b_missing(f);
    f->r[3].absent = ABSENT_WHY;
}
/* gpu.fabric's claims: every rank in cluster U clique 7 but rank 2 (clique 9); ranks that
 * report none (no multi-node NVLink expected) and ranks not joined are left out */
#define FAB_U "8e3a5b1c-2d4f-4a6b-9c8d-7e6f5a4b3c2d"
static void b_fabric(struct pf_fleet *f)
{
    for (int r = 0; r < 4; r++)
        f->r[r].fabric = r == 2 ? FAB_U "/9" : FAB_U "/7";
}
static void b_fabric_some(struct pf_fleet *f)
{
    f->r[0].fabric = FAB_U "/7";
    f->r[1].fabric = FAB_U "/7";
    f->r[3].fabric = "not/a-clique"; /* malformed: left out */
}
static void b_fabric_refused(struct pf_fleet *f)
{
    b_fabric(f);
    b_refused(f);
    f->r[1].state = PF_FLEET_JOINED;
    f->r[2].state = PF_FLEET_REFUSED; /* the odd one was refused: nothing to compare */
}

static void test_agree_table(void **state)
{
    (void)state;
    static const struct agree_case cases[] = {
        {"healthy", b_none, NULL, NULL, -1},
        {"missing", b_missing, "missing-ranks",
         "1 of 4 ranks never joined within 30 s: rank 3 (trainer-3)", 3},
        {"missing-why", b_missing_why, "missing-ranks",
         "1 of 4 ranks never joined within 30 s: rank 3 (trainer-3). Why, from the API server: "
         "rank 3: " ABSENT_WHY,
         3},
        {"world", b_world, "world-size-mismatch", "rank 2 (trainer-2) says 5; the others say 4", 2},
        {"version", b_version, "version-mismatch",
         "rank 1 (trainer-1) runs preflight 0.0.9; the others run 0.1.0", 1},
        {"config", b_config, "config-mismatch",
         "the preflight config of rank 1 (trainer-1) differs", -1},
        {"nccl", b_nccl, "nccl-version-mismatch", "rank 3 (trainer-3) has NCCL 2.18.1", 3},
        {"env", b_env, "env-mismatch",
         "NCCL_IB_HCA: rank 2 (trainer-2) =mlx5_1 (the others: mlx5_0)", -1},
        {"refused", b_refused, NULL, NULL, 1},
        {"fabric", b_fabric, "clique-mismatch",
         "1 of 4 ranks expecting multi-node NVLink are outside the NVLink domain of the others: "
         "rank 2 (trainer-2): rank 2 is in clique 9 of cluster " FAB_U ", 3 of 4 ranks in clique 7",
         2},
        {"fabric-some", b_fabric_some, NULL, NULL, -1},
        {"refused-rank-0", b_refused_dup0, "duplicate-rank",
         "a pod at 10.0.0.9 claiming rank 0 (intruder), but rank 0 is trainer-0", -1},
        {"refused-duplicate", b_refused_dup, "duplicate-rank",
         "rank 2 is claimed by two pods: trainer-2 (joined from 10.0.0.2) and impostor (from "
         "10.0.0.8)",
         -1},
        {"refused-world", b_refused_world, "world-size-mismatch",
         "a pod at 10.0.0.7 claiming rank 5 (far-5) of world size 8: outside rank 0's world size 4",
         -1},
        {"refused-run", b_refused_run, "version-mismatch",
         "a pod at 10.0.0.6 claiming rank 1 sent a JOIN that does not name this run", -1},
        {"refused-late", b_refused_late, NULL, NULL, -1},
        {"refused-job", b_refused_job, "job-mismatch",
         "a pod at 10.0.0.5 claiming rank 1 (other-1) of Job ml/other (uid u-b) was refused: this "
         "run is Job ml/trainer (uid u-a)",
         -1},
        {"stranger", b_stranger, "stranger-refused",
         "rank 3 never joined; the last JOIN that claimed it was refused (a pod at 10.0.0.66", 3},
        {"fabric-refused", b_fabric_refused, NULL, NULL, 2},
    };
    for (size_t i = 0; i < PF_ARRAY_LEN(cases); i++) {
        const struct agree_case *c = &cases[i];
        struct pf_fleet f;
        int roster[4];
        fleet_of(&f, 4, roster);
        c->breaks(&f);
        pf_fleet_agree(&f, 30);
        if (c->breaks == b_stranger) { /* the warning names rank 3 only, besides missing-ranks */
            assert_int_equal(f.out.nfindings, 2);
            assert_non_null(find(&f, "missing-ranks"));
            assert_int_equal(find(&f, "stranger-refused")->status, PF_WARN);
            assert_null(strstr(find(&f, "stranger-refused")->message, "rank 1"));
        }
        if (c->breaks == b_missing_why) /* the culprit says why too */
            assert_non_null(strstr(f.out.culprits[0].reason, "within 30 s): " ABSENT_WHY));
        if (c->breaks == b_refused_job) /* not this job's fault: a warning */
            assert_int_equal(find(&f, "job-mismatch")->status, PF_WARN);
        if (!c->code) {
            assert_int_equal(f.out.nfindings, 0);
        } else {
            const struct pf_fleet_finding *x = find(&f, c->code);
            if (!x) fail_msg("%s: no %s finding", c->name, c->code);
            if (!strstr(x->message, c->in_text))
                fail_msg("%s: '%s' not in '%s'", c->name, c->in_text, x->message);
        }
        if (c->culprit < 0) {
            assert_int_equal(f.out.nculprits, 0);
        } else {
            assert_int_equal(f.out.nculprits, 1);
            assert_int_equal(f.out.culprits[0].rank, c->culprit);
            assert_string_equal(f.out.culprits[0].pod, f.r[c->culprit].pod);
        }
        pf_fleet_free(&f);
    }
}

static struct pf_fleet_tcp tcp_of(const struct pf_wire_marks *lost,
                                  const struct pf_wire_marks *failed)
{
    struct pf_fleet_tcp t = {.ran = true,
                             .ok = true,
                             .bytes = 1 << 20,
                             .iterations = 2,
                             .min_busbw = -1,
                             .lost = lost,
                             .failed = failed};
    return t;
}

/* A rank lost during a later stage while nobody else reported a failure: the message ends
 * with the reason, not with "(null)". */
static void test_lost_without_failures(void **state)
{
    (void)state;
    struct pf_fleet f;
    int roster[2];
    fleet_of(&f, 2, roster);
    struct pf_wire_marks lost = {0}, failed = {0};
    pf_wire_mark(&lost, 1, "its connection closed: the process exited or the pod was deleted");
    pf_wire_mark(&lost, 1, "another reason"); /* once per rank */
    struct pf_fleet_tcp t = tcp_of(&lost, &failed);
    pf_fleet_judge_tcp(&f, &t);
    const struct pf_fleet_finding *x = find(&f, "peer-lost");
    assert_non_null(x);
    assert_string_equal(x->message, "rank 1 (trainer-1) was lost after the rendezvous: its "
                                    "connection closed: the process exited or the pod was "
                                    "deleted");
    assert_null(strstr(x->message, "(null)"));
    assert_int_equal(f.out.nculprits, 1);
    assert_int_equal(f.out.culprits[0].rank, 1);
    /* rank 0's GPU collective failed because rank 1 died: rank 1 stays the only culprit */
    f.r[0].reported = true;
    strcpy(f.r[0].verdict, "fail");
    pf_strlist_add(&f.ids, "collective.nccl");
    f.r[0].bad = calloc(1, sizeof(*f.r[0].bad));
    f.r[0].nbad = 1;
    f.r[0].bad[0].id = 0;
    f.r[0].bad[0].status = PF_FAIL + 1;
    pf_fleet_judge_reports(&f);
    assert_int_equal(f.out.nculprits, 1);
    assert_int_equal(f.out.culprits[0].rank, 1);
    /* with the others' reports, they are quoted in parentheses */
    pf_fleet_free(&f);
    fleet_of(&f, 2, roster);
    pf_wire_mark(&failed, 0, "receiving from rank 1 (trainer-1): connection reset");
    pf_fleet_judge_tcp(&f, &t);
    x = find(&f, "peer-lost");
    assert_non_null(strstr(x->message, "deleted (rank 0: receiving from rank 1 (trainer-1): "
                                       "connection reset)"));
    pf_fleet_free(&f);
    pf_wire_marks_free(&lost);
    pf_wire_marks_free(&failed);
}

/* Hundreds lost (a thousand pods whose collective broke): a finding and a culprit for each of
 * the first PF_WIRE_LIST_MAX, one finding for the rest, every message of bounded size. */
static void test_many_lost(void **state)
{
    (void)state;
    enum { N = 300 };
    struct pf_fleet f;
    static int roster[N];
    fleet_of(&f, N, roster);
    struct pf_wire_marks lost = {0}, failed = {0};
    for (int r = 1; r < N; r++) {
        pf_wire_mark(&lost, r, "its connection closed: the process exited or the pod was deleted");
        pf_wire_mark(&failed, r, "receiving from the previous rank: the peer sent nothing");
    }
    struct pf_fleet_tcp t = tcp_of(&lost, &failed);
    pf_fleet_judge_tcp(&f, &t);
    size_t nlost = 0, total = 0;
    for (size_t i = 0; i < f.out.nfindings; i++) {
        if (strcmp(f.out.findings[i].code, "peer-lost") != 0) continue;
        nlost++;
        total += strlen(f.out.findings[i].message);
        assert_true(strlen(f.out.findings[i].message) < 1400);
    }
    assert_int_equal(nlost, PF_WIRE_LIST_MAX + 1);
    assert_int_equal(f.out.nculprits, PF_WIRE_LIST_MAX);
    const struct pf_fleet_finding *x = NULL;
    for (size_t i = 0; i < f.out.nfindings; i++)
        if (strstr(f.out.findings[i].message, "more ranks were lost")) x = &f.out.findings[i];
    assert_non_null(x);
    /* 299 lost: 12 named alone, 287 in the last finding, of which 12 listed */
    assert_non_null(strstr(x->message, "287 more ranks were lost after the rendezvous (13, 14"));
    assert_non_null(strstr(x->message, "and 275 more)"));
    assert_true(total < 20000);
    pf_fleet_free(&f);
    pf_wire_marks_free(&lost);
    pf_wire_marks_free(&failed);
}

static void test_results_and_floor(void **state)
{
    (void)state;
    struct pf_fleet f;
    int roster[4];
    fleet_of(&f, 4, roster);
    for (int r = 0; r < 4; r++) {
        f.r[r].ar_done = true;
        f.r[r].ar_seconds = 0.01;
    }
    f.r[2].ar_wrong = 5;
    f.r[2].ar_first_bad = 7;
    struct pf_wire_marks none = {0};
    struct pf_fleet_tcp t = tcp_of(&none, &none);
    t.min_busbw = 1000; /* far above what 1 MiB in 10 ms gives */
    pf_fleet_judge_tcp(&f, &t);
    assert_true(f.out.have_tcp);
    assert_false(f.out.correct);
    assert_true(f.out.algbw > 0.1 && f.out.algbw < 0.11);
    assert_non_null(find(&f, "wrong-result"));
    assert_non_null(strstr(find(&f, "wrong-result")->message, "rank 2 (trainer-2): 5 of 262144"));
    assert_non_null(find(&f, "below-threshold"));
    assert_int_equal(find(&f, "below-threshold")->status, PF_WARN);
    assert_int_equal(f.out.nculprits, 1);
    assert_int_equal(f.out.culprits[0].rank, 2);
    pf_fleet_free(&f);
}

static void test_slow_node(void **state)
{
    (void)state;
    struct pf_fleet f;
    int roster[4];
    fleet_of(&f, 4, roster);
    /* every link into and out of rank 3 is slow; each rank measures the links into it */
    struct pf_coll_link links[] = {
        {3, 0, 0.5}, {0, 1, 9.0},  {1, 2, 9.2}, {2, 3, 0.4},
        {2, 0, 9.1}, {3, 1, 0.45}, {0, 2, 9.3}, {1, 3, 0.42},
    };
    struct pf_wire_marks none = {0};
    struct pf_fleet_tcp t = tcp_of(&none, &none);
    t.links = links;
    t.nlinks = PF_ARRAY_LEN(links);
    pf_fleet_judge_tcp(&f, &t);
    const struct pf_fleet_finding *x = find(&f, "slow-node");
    assert_non_null(x);
    assert_non_null(strstr(x->message, "rank 3 (trainer-3) on node node-3"));
    assert_true(f.out.have_links);
    assert_int_equal(f.out.slow_src, 2);
    assert_int_equal(f.out.slow_dst, 3);
    assert_int_equal(f.out.culprits[0].rank, 3);
    assert_null(find(&f, "peer-lost"));
    pf_fleet_free(&f);
}

static void test_reports_and_verdict(void **state)
{
    (void)state;
    struct pf_fleet f;
    int roster[3];
    fleet_of(&f, 3, roster);
    struct pf_verdict v;
    pf_verdict_init(&v);
    struct pf_check *c = pf_verdict_add_check(&v, "rdma.ports");
    pf_check_add_finding(c, "port-down", PF_FAIL, NULL, "mlx5_0 port 1 is DOWN");
    (void)pf_verdict_add_check(&v, "rendezvous");
    pf_verdict_finalize(&v, NULL, NULL);
    struct pf_buf b;
    pf_buf_init(&b, 1 << 20);
    assert_int_equal(pf_fleet_report_encode(&b, &v), 0);
    assert_int_equal(pf_fleet_report_decode(&f, 1, (const uint8_t *)pf_buf_str(&b), b.len), 0);
    assert_true(f.r[1].reported);
    assert_string_equal(f.r[1].verdict, "fail");
    /* statuses by the shared ids; codes only for the check that did not pass */
    assert_int_equal(f.ids.n, 2);
    assert_int_equal(f.r[1].nst, 2);
    assert_int_equal(f.r[1].st[0], PF_FAIL + 1);
    assert_int_equal(f.r[1].st[1], PF_PASS + 1);
    assert_int_equal(f.r[1].passed, 1);
    assert_int_equal(f.r[1].nbad, 1);
    assert_string_equal(pf_fleet_check_id(&f, &f.r[1].bad[0]), "rdma.ports");
    assert_string_equal(f.r[1].bad[0].codes.v[0], "port-down");
    strcpy(f.r[0].verdict, "pass");
    f.r[0].reported = true;
    /* rank 2 never reported */
    pf_fleet_judge_reports(&f);
    assert_int_equal(f.out.nculprits, 1);
    assert_string_equal(f.out.culprits[0].reason,
                        "check rdma.ports failed on this pod (port-down)");
    pf_fleet_conclude(&f, PF_PASS, 0, NULL);
    assert_string_equal(f.out.verdict, "fail");
    assert_string_equal(f.out.text, "3 of 3 ranks met; fleet verdict fail");
    struct pf_ranks ranks = {0};
    pf_fleet_ranks(&f, &ranks, "10.0.0.1");
    assert_int_equal(ranks.n, 3);
    struct pf_rank_in e;
    pf_ranks_get(&ranks, 1, &e);
    assert_string_equal(e.pod, "trainer-1");
    assert_string_equal(e.verdict, "fail");
    assert_int_equal(e.passed, 1);
    assert_int_equal(e.nchecks, 2); /* every check it reported: the passing one too */
    struct pf_rank_in_check rc;
    int fails = 0;
    for (size_t k = 0; k < e.nchecks; k++) {
        pf_ranks_check(&ranks, 1, k, &rc);
        if (strcmp(rc.status, "fail") == 0) {
            fails++;
            assert_string_equal(rc.id, "rdma.ports");
            assert_int_equal(rc.ncodes, 1);
        } else {
            assert_string_equal(rc.status, "pass");
            assert_int_equal(rc.ncodes, 0);
        }
    }
    assert_int_equal(fails, 1);
    pf_ranks_get(&ranks, 2, &e); /* no report: failed, nothing counted */
    assert_string_equal(e.verdict, "fail");
    assert_int_equal(e.passed, -1);
    assert_int_equal(e.nchecks, 0);
    pf_ranks_free(&ranks);
    pf_buf_free(&b);
    pf_verdict_free(&v);
    pf_fleet_free(&f);
}

static void test_summary_round_trip(void **state)
{
    (void)state;
    struct pf_fleet_summary s;
    memset(&s, 0, sizeof(s));
    s.expected = 0.5;
    /* tabs and newlines in texts travel as they are: records are nested fields */
    pf_fleet_finding(&s, "collective.tcp", "slow-link", PF_WARN, NULL, "from\trank 1\nto rank 2");
    pf_fleet_finding(&s, "rendezvous", "auth-failed", PF_FAIL, "set the token", "refused");
    pf_fleet_culprit(&s, 5, "trainer-5", "", "never joined\tthe rendezvous");
    s.have_tcp = true;
    s.correct = true;
    s.bytes = 1 << 20;
    s.ranks = 4;
    s.iterations = 2;
    s.seconds = 0.0041;
    s.algbw = 0.25575;
    s.busbw = 0.383625;
    s.have_links = true;
    s.median = 9.12;
    s.slow_src = 1;
    s.slow_dst = 2;
    s.slow_gbps = 0.83;
    strcpy(s.verdict, "warn");
    strcpy(s.text, "4 of 4 ranks met; fleet verdict warn");
    struct pf_buf b;
    pf_buf_init(&b, 1 << 20);
    assert_int_equal(pf_fleet_summary_encode(&b, &s), 0);
    struct pf_fleet_summary t;
    assert_int_equal(pf_fleet_summary_decode(&t, (const uint8_t *)pf_buf_str(&b), b.len), 0);
    assert_int_equal(t.nfindings, 2);
    assert_string_equal(t.findings[0].message, "from\trank 1\nto rank 2");
    assert_int_equal(t.findings[0].status, PF_WARN);
    assert_string_equal(t.findings[1].remedy, "set the token");
    assert_int_equal(t.nculprits, 1);
    assert_int_equal(t.culprits[0].rank, 5);
    assert_string_equal(t.culprits[0].reason, "never joined\tthe rendezvous");
    assert_true(t.have_tcp && t.correct);
    assert_int_equal(t.bytes, 1 << 20);
    assert_true(t.expected == 0.5);
    assert_true(t.have_links && t.slow_src == 1 && t.slow_dst == 2);
    assert_string_equal(t.verdict, "warn");
    assert_string_equal(t.text, s.text);
    pf_fleet_summary_free(&t);
    /* a limit is never ignored silently */
    struct pf_buf small;
    pf_buf_init(&small, 64);
    assert_int_equal(pf_fleet_summary_encode(&small, &s), PF_ETOOBIG);
    assert_non_null(strstr(pf_err_msg(), "the SUMMARY message is over its limit"));
    pf_buf_free(&small);
    pf_buf_free(&b);
    pf_fleet_summary_free(&s);
}

static void test_step_codecs(void **state)
{
    (void)state;
    struct pf_buf b;
    pf_buf_init(&b, 1 << 16);
    struct pf_fleet_ar a = {true, 0.012, 3, 17, "eth0"};
    assert_int_equal(pf_fleet_ar_encode(&b, &a), 0);
    struct pf_fleet_rank m;
    memset(&m, 0, sizeof(m));
    assert_int_equal(pf_fleet_ar_decode(&m, (const uint8_t *)pf_buf_str(&b), b.len), 0);
    assert_true(m.ar_done);
    assert_int_equal(m.ar_wrong, 3);
    assert_int_equal(m.ar_first_bad, 17);
    assert_string_equal(m.iface, "eth0");
    assert_int_equal(pf_fleet_ar_decode(&m, (const uint8_t *)"\x05", 1), PF_EINVAL);
    pf_buf_free(&b);
}

/* A fleet of 1,000 ranks, each reporting 21 checks (17 pass, 4 skip), one of them (rank 637)
 * with rdma.ports failing: one table of 21 check ids for all, a status byte a check, a record
 * only for the failing check; the ranks list has 1,000 entries of which only rank 637's
 * lists a check, and the fleet's summary names it. */
static void test_thousand_ranks_one_failing(void **state)
{
    (void)state;
    enum { W = 1000, BAD = 637 };
    static int roster[W];
    struct pf_fleet f;
    fleet_of(&f, W, roster);
    struct pf_verdict ok, fail;
    pf_verdict_init(&ok);
    pf_verdict_init(&fail);
    for (int k = 0; k < 21; k++) {
        char id[32];
        snprintf(id, sizeof(id), k == 3 ? "rdma.ports" : "check.%02d", k);
        struct pf_check *c = pf_verdict_add_check(&ok, id);
        if (k >= 17) pf_check_skip(c, "nothing to check");
        c = pf_verdict_add_check(&fail, id);
        if (k >= 17) pf_check_skip(c, "nothing to check");
        if (k == 3) pf_check_add_finding(c, "port-down", PF_FAIL, NULL, "mlx5_1 port 1 is DOWN");
    }
    pf_verdict_finalize(&ok, NULL, NULL);
    pf_verdict_finalize(&fail, NULL, NULL);
    struct pf_buf a, b;
    pf_buf_init(&a, 1 << 20);
    pf_buf_init(&b, 1 << 20);
    assert_int_equal(pf_fleet_report_encode(&a, &ok), 0);
    assert_int_equal(pf_fleet_report_encode(&b, &fail), 0);
    for (int r = 0; r < W; r++) {
        const struct pf_buf *x = r == BAD ? &b : &a;
        assert_int_equal(pf_fleet_report_decode(&f, r, (const uint8_t *)pf_buf_str(x), x->len), 0);
    }
    assert_int_equal(f.ids.n, 21);
    for (int r = 0; r < W; r++) {
        assert_int_equal(f.r[r].nst, 21);
        assert_int_equal(f.r[r].passed, r == BAD ? 16 : 17);
        assert_int_equal(f.r[r].nbad, r == BAD ? 1 : 0);
        assert_int_equal(f.r[r].st[20], PF_SKIP + 1);
    }
    pf_fleet_judge_reports(&f);
    assert_int_equal(f.out.nculprits, 1);
    assert_int_equal(f.out.culprits[0].rank, BAD);
    assert_string_equal(f.out.culprits[0].reason,
                        "check rdma.ports failed on this pod (port-down)");
    struct pf_verdict v;
    pf_verdict_init(&v);
    pf_verdict_add_culprit(&v, BAD, f.out.culprits[0].pod, f.out.culprits[0].node, "%s",
                           f.out.culprits[0].reason);
    pf_fleet_conclude(&f, PF_PASS, v.culprits->count, v.culprits->first);
    assert_string_equal(f.out.verdict, "fail");
    assert_non_null(strstr(f.out.text, "first: rank 637 (trainer-637): check rdma.ports failed"));
    pf_fleet_ranks(&f, &v.ranks, "10.0.0.1");
    assert_int_equal(v.ranks.n, W);
    int listed = 0;
    for (size_t i = 0; i < v.ranks.n; i++) {
        struct pf_rank_in e;
        pf_ranks_get(&v.ranks, i, &e);
        assert_int_equal(e.rank, (int)i);
        assert_int_equal(e.nchecks, 21); /* every rank's every check, with its status */
        size_t bad = 0, nbad = 0;
        for (size_t k = 0; k < e.nchecks; k++) {
            struct pf_rank_in_check c;
            pf_ranks_check(&v.ranks, i, k, &c);
            if (strcmp(c.status, "pass") != 0 && strcmp(c.status, "skip") != 0)
                bad = k, nbad++;
            else
                assert_int_equal(c.ncodes, 0);
        }
        if (!nbad) {
            assert_string_equal(e.verdict, "pass");
            assert_int_equal(e.passed, 17);
            continue;
        }
        listed++;
        assert_int_equal(e.rank, BAD);
        assert_string_equal(e.verdict, "fail");
        assert_int_equal(e.passed, 16);
        assert_int_equal(nbad, 1);
        struct pf_rank_in_check c;
        pf_ranks_check(&v.ranks, i, bad, &c);
        assert_string_equal(c.id, "rdma.ports");
        assert_string_equal(c.status, "fail");
        assert_int_equal(c.ncodes, 1);
        assert_string_equal(pf_ranks_code(&v.ranks, i, bad, 0), "port-down");
    }
    assert_int_equal(listed, 1);
    char *y = NULL;
    size_t len = 0;
    assert_int_equal(pf_verdict_to_yaml(&y, &len, &v), 0);
    assert_non_null(strstr(y, "- rank: 999\n  pod: trainer-999\n  node: node-999\n  state: "
                              "joined\n  verdict: pass\n  checksPassed: 17\n  checks:\n  - {id: "));
    assert_non_null(strstr(y, "  - {id: rdma.ports, status: fail, findings: [port-down]}\n"));
    assert_non_null(strstr(y, "  - {id: rdma.ports, status: pass, findings: []}\n"));
    /* a check a line: about 50 bytes a check, 21 checks a rank */
    assert_true(len < (size_t)W * 21 * 64);
    free(y);
    pf_verdict_free(&v);
    pf_buf_free(&a);
    pf_buf_free(&b);
    pf_verdict_free(&ok);
    pf_verdict_free(&fail);
    pf_fleet_free(&f);
}

/* pf_fleet_minority at 20,001 ranks, by sorting: the biggest group wins, rank 0's group wins
 * a tie (wherever rank 0 stands in ranks[]), else the group seen first; every other rank is
 * named, in the order of ranks[]. */
static const char *const *mvals;
static const char *mval(const struct pf_fleet *f, int rank, char *buf, size_t n)
{
    (void)f;
    (void)buf;
    (void)n;
    return mvals[rank];
}

static void test_minority_large(void **state)
{
    (void)state;
    enum { N = 20001 };
    const char **v = calloc(N, sizeof(*v));
    int *ranks = calloc(N, sizeof(*ranks)), *out = calloc(N, sizeof(*out));
    char major[64];
    mvals = v;
    /* ranks[] from the end: rank 0 comes last. a: rank 0 and 9,999 more; b: 10,000; c: 1 */
    for (int i = 0; i < N; i++) {
        ranks[i] = N - 1 - i;
        v[i] = i == 7 ? "c" : (i % 2 == 0 ? "a" : "b");
    }
    v[7] = "c";
    int k = pf_fleet_minority(NULL, ranks, N, mval, out, major, sizeof(major));
    /* a: even ranks but 7 is odd anyway: a has 10,001 (0, 2, ..., 20000), b 9,999, c 1 */
    assert_string_equal(major, "a");
    assert_int_equal(k, 10000);
    for (int i = 0; i < k; i++) {
        assert_true(out[i] % 2 == 1);
        if (i) assert_true(out[i] < out[i - 1]); /* the order of ranks[] */
    }
    /* a tie of 10,000 against 10,000: rank 0's group wins though b is seen first */
    v[2] = "b";
    k = pf_fleet_minority(NULL, ranks, N, mval, out, major, sizeof(major));
    assert_string_equal(major, "a");
    assert_int_equal(k, 10001);
    /* b bigger by one: b wins over rank 0's group */
    v[4] = "b";
    k = pf_fleet_minority(NULL, ranks, N, mval, out, major, sizeof(major));
    assert_string_equal(major, "b");
    assert_int_equal(k, 10000);
    /* a tie without rank 0: the group seen first in ranks[] (from the end: rank 20,000 is a) */
    for (int i = 0; i < N; i++)
        v[i] = i == 0 ? "z" : (i % 2 == 0 ? "a" : "b");
    k = pf_fleet_minority(NULL, ranks, N, mval, out, major, sizeof(major));
    assert_string_equal(major, "a");
    assert_int_equal(k, 10001);
    assert_int_equal(pf_fleet_minority(NULL, ranks, 0, mval, out, major, sizeof(major)), 0);
    free(v);
    free(ranks);
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_agree_table),
        cmocka_unit_test(test_lost_without_failures),
        cmocka_unit_test(test_many_lost),
        cmocka_unit_test(test_results_and_floor),
        cmocka_unit_test(test_slow_node),
        cmocka_unit_test(test_reports_and_verdict),
        cmocka_unit_test(test_summary_round_trip),
        cmocka_unit_test(test_step_codecs),
        cmocka_unit_test(test_thousand_ranks_one_failing),
        cmocka_unit_test(test_minority_large),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
