/* Check gang's comparison (pkg/fleet/gang.c) as a table: each row a gang of N ranks that
 * share one inventory but for the differences it plants, the options, and what rank 0 must
 * find (the finding codes, the culprits, the traits without a majority). Then the codec of
 * the inventory, the message's numbers, and a large gang's cost. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../pkg/fleet/fleet.h"

/* An 8-GPU, 8-HCA NDR node. */
static void healthy(struct pf_fleet_inv *inv)
{
    pf_fleet_inv_init(inv);
    static const char *const v[PF_GANG_NTRAITS] = {
        [PF_GANG_GPUS] = "8",
        [PF_GANG_GPU_MODEL] = "NVIDIA H100 80GB HBM3",
        [PF_GANG_DRIVER] = "550.90.07",
        [PF_GANG_HCAS] = "8",
        [PF_GANG_PROVIDER] = "mlx5",
        [PF_GANG_PORTS] = "8",
        [PF_GANG_RATE] = "400 Gb/s",
        [PF_GANG_LINK] = "InfiniBand",
        [PF_GANG_PCIE] = "x16 at 32.0 GT/s PCIe",
        [PF_GANG_FIRMWARE] = "28.39.1002",
        [PF_GANG_NICS] = "eth0",
        [PF_GANG_NCCL] = "2.21.5",
        [PF_GANG_NETWORKS] = "ml/rail-0,ml/rail-1",
    };
    for (int t = 0; t < PF_GANG_NTRAITS; t++)
        if (v[t]) snprintf(inv->v[t], PF_GANG_VALUE, "%s", v[t]);
    inv->ports_down = 0;
}

struct change {
    int rank;
    int trait; /* -1: ports_down; PF_GANG_NTRAITS: the group */
    const char *value;
};
#define MAXCH 8
struct row {
    const char *name;
    int n;
    bool rank0_apart;
    struct change ch[MAXCH];
    const char *codes;    /* the findings' codes, sorted, joined with ' ' ("" none) */
    const char *culprits; /* the culprits' ranks, "1 5" */
    int undecided;
};

static const struct row rows[] = {
    {"all agree: nothing", 16, false, {{-1, 0, NULL}}, "", "", 0},
    {"one pod without HCAs among 16",
     16,
     false,
     {{1, PF_GANG_HCAS, "0"},
      {1, PF_GANG_PROVIDER, ""},
      {1, PF_GANG_PORTS, ""},
      {1, PF_GANG_RATE, ""},
      {1, PF_GANG_LINK, ""},
      {1, PF_GANG_PCIE, ""},
      {1, PF_GANG_FIRMWARE, ""},
      {-1, 0, NULL}},
     "gang-hca-count",
     "1",
     0},
    {"one pod without GPUs",
     4,
     false,
     {{3, PF_GANG_GPUS, "0"}, {3, PF_GANG_GPU_MODEL, ""}, {3, PF_GANG_DRIVER, ""}, {-1, 0, NULL}},
     "gang-gpu-count",
     "3",
     0},
    {"a rail down: 7 ports ACTIVE, the rate set the same",
     8,
     false,
     {{5, PF_GANG_PORTS, "7"}, {5, -1, "1"}, {-1, 0, NULL}},
     "gang-ports",
     "5",
     0},
    {"a NIC missing: one family, one finding",
     8,
     false,
     {{2, PF_GANG_HCAS, "7"}, {2, PF_GANG_PORTS, "7"}, {-1, 0, NULL}},
     "gang-hca-count",
     "2",
     0},
    {"a PCIe lane missing: a warning, no culprit",
     8,
     false,
     {{4, PF_GANG_PCIE, "x16 at 32.0 GT/s PCIe, x8 at 32.0 GT/s PCIe"}, {-1, 0, NULL}},
     "gang-pcie",
     "",
     0},
    {"other firmware: a warning naming it",
     8,
     false,
     {{6, PF_GANG_FIRMWARE, "28.36.1010"}, {-1, 0, NULL}},
     "gang-firmware",
     "",
     0},
    {"a slower port and another NCCL",
     8,
     false,
     {{7, PF_GANG_RATE, "200 Gb/s, 400 Gb/s"}, {3, PF_GANG_NCCL, "2.18.3"}, {-1, 0, NULL}},
     "gang-nccl-version gang-port-rate",
     "3 7",
     0},
    {"a network missing",
     6,
     false,
     {{0, PF_GANG_NETWORKS, "ml/rail-0"}, {-1, 0, NULL}},
     "gang-networks",
     "0",
     0},
    {"1 against 1: undecided, nobody blamed",
     2,
     false,
     {{1, PF_GANG_HCAS, "0"}, {1, PF_GANG_GPUS, "0"}, {1, -1, "-1"}, {-1, 0, NULL}},
     "gang-undecided",
     "",
     2},
    {"1 against 1, one side's ports DOWN: positive evidence picks it",
     2,
     false,
     {{1, PF_GANG_PORTS, "6"}, {1, -1, "2"}, {-1, 0, NULL}},
     "gang-ports",
     "1",
     0},
    {"2 against 2: undecided",
     4,
     false,
     {{2, PF_GANG_DRIVER, "535.1"}, {3, PF_GANG_DRIVER, "535.1"}, {-1, 0, NULL}},
     "gang-undecided",
     "",
     1},
    {"3 values among 4, none over half",
     4,
     false,
     {{1, PF_GANG_NICS, "net1"}, {2, PF_GANG_NICS, "net2"}, {-1, 0, NULL}},
     "gang-undecided",
     "",
     1},
    {"unknown is not compared: one rank that could not read its HCAs",
     4,
     false,
     {{2, PF_GANG_HCAS, ""}, {2, PF_GANG_PORTS, ""}, {-1, 0, NULL}},
     "",
     "",
     0},
    {"rank 0 of another role, apart: not blamed",
     8,
     true,
     {{0, PF_GANG_GPUS, "0"}, {0, PF_GANG_HCAS, "0"}, {-1, 0, NULL}},
     "",
     "",
     0},
    {"rank 0 of another role, not apart: blamed",
     8,
     false,
     {{0, PF_GANG_GPUS, "0"}, {-1, 0, NULL}},
     "gang-gpu-count",
     "0",
     0},
    {"two pools by label, each agrees within: nothing",
     8,
     false,
     {{4, PF_GANG_NTRAITS, "pool=a100"},
      {5, PF_GANG_NTRAITS, "pool=a100"},
      {6, PF_GANG_NTRAITS, "pool=a100"},
      {7, PF_GANG_NTRAITS, "pool=a100"},
      {4, PF_GANG_GPU_MODEL, "NVIDIA A100-SXM4-80GB"},
      {5, PF_GANG_GPU_MODEL, "NVIDIA A100-SXM4-80GB"},
      {6, PF_GANG_GPU_MODEL, "NVIDIA A100-SXM4-80GB"},
      {7, PF_GANG_GPU_MODEL, "NVIDIA A100-SXM4-80GB"}},
     "",
     "",
     0},
};

static void sorted_codes(char *out, size_t n, const struct pf_fleet *f)
{
    struct pf_strlist l = {0};
    for (size_t i = 0; i < f->out.nfindings; i++)
        if (!pf_strlist_has(&l, f->out.findings[i].code))
            pf_strlist_add(&l, f->out.findings[i].code);
    pf_strlist_sort(&l);
    pf_strlist_join(out, n, &l, " ");
    pf_strlist_free(&l);
}

static int int_cmp(const void *a, const void *b)
{
    return *(const int *)a - *(const int *)b;
}

static void culprit_ranks(char *out, size_t n, const struct pf_fleet *f)
{
    int r[64];
    size_t k = 0;
    for (size_t i = 0; i < f->out.nculprits && k < 64; i++)
        r[k++] = f->out.culprits[i].rank;
    qsort(r, k, sizeof(int), int_cmp);
    size_t len = 0;
    out[0] = '\0';
    for (size_t i = 0; i < k; i++)
        if (i == 0 || r[i] != r[i - 1])
            len += (size_t)snprintf(out + len, n - len, "%s%d", len ? " " : "", r[i]);
}

static void gang_of(struct pf_fleet *f, int *roster, const struct row *w)
{
    pf_fleet_init(f, w->n);
    for (int r = 0; r < w->n; r++) {
        roster[r] = r;
        struct pf_fleet_inv inv;
        healthy(&inv);
        for (int c = 0; c < MAXCH && w->ch[c].value; c++) {
            if (w->ch[c].rank != r) continue;
            if (w->ch[c].trait < 0)
                inv.ports_down = atoi(w->ch[c].value);
            else if (w->ch[c].trait == PF_GANG_NTRAITS)
                snprintf(inv.group, sizeof(inv.group), "%s", w->ch[c].value);
            else
                snprintf(inv.v[w->ch[c].trait], PF_GANG_VALUE, "%s", w->ch[c].value);
        }
        /* through the wire, as rank 0 gets it */
        struct pf_buf b;
        pf_buf_init(&b, PF_BUF_TEXT);
        assert_int_equal(pf_fleet_inv_encode(&b, &inv), 0);
        struct pf_fleet_inv back;
        assert_int_equal(pf_fleet_inv_decode(&back, (const uint8_t *)b.data, b.len), 0);
        for (int t = 0; t < PF_GANG_NTRAITS; t++)
            assert_string_equal(back.v[t], inv.v[t]);
        assert_string_equal(back.group, inv.group);
        assert_int_equal(back.ports_down, inv.ports_down);
        pf_buf_free(&b);
        pf_fleet_gang_add(f, r, &back);
        char pod[32];
        snprintf(pod, sizeof(pod), "trainer-%d", r);
        f->r[r].pod = pf_fleet_keep(f, pod);
        f->r[r].state = PF_FLEET_JOINED;
    }
    f->n = w->n;
    f->roster = roster;
}

static void test_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        const struct row *w = &rows[i];
        struct pf_fleet f;
        int roster[64];
        gang_of(&f, roster, w);
        struct pf_fleet_gang_opts o = {.rank0_apart = w->rank0_apart};
        struct pf_fleet_gang_result res;
        struct pf_node *ev = pf_node_new_map();
        pf_fleet_gang_judge(&f, &o, &res, ev);
        char codes[512], culprits[256];
        sorted_codes(codes, sizeof(codes), &f);
        culprit_ranks(culprits, sizeof(culprits), &f);
        if (strcmp(codes, w->codes) != 0 || strcmp(culprits, w->culprits) != 0 ||
            res.undecided != w->undecided) {
            for (size_t k = 0; k < f.out.nfindings; k++)
                print_message("  %s: %s\n", f.out.findings[k].code, f.out.findings[k].message);
            fail_msg("%s: codes [%s] (want [%s]), culprits [%s] (want [%s]), undecided %d "
                     "(want %d)",
                     w->name, codes, w->codes, culprits, w->culprits, res.undecided, w->undecided);
        }
        assert_int_equal(res.ranks, w->n);
        assert_int_equal(pf_node_get(ev, "ranksCompared")->i, w->n);
        pf_node_free(ev);
        pf_fleet_free(&f);
    }
}

/* The message carries the numbers on both sides and who. */
static void test_message(void **state)
{
    (void)state;
    const struct row *w = &rows[1];
    struct pf_fleet f;
    int roster[64];
    gang_of(&f, roster, w);
    struct pf_fleet_gang_result res;
    pf_fleet_gang_judge(&f, NULL, &res, NULL);
    assert_int_equal(f.out.nfindings, 1);
    const char *m = f.out.findings[0].message;
    assert_non_null(strstr(m, "rank 1 (trainer-1): 0 HCAs; its 15 peers have 8 HCAs"));
    assert_non_null(strstr(m, "HCA provider mlx5, 8 ports ACTIVE, ports at 400 Gb/s"));
    assert_int_equal(f.out.nculprits, 1);
    assert_string_equal(f.out.culprits[0].pod, "trainer-1");
    assert_non_null(strstr(f.out.culprits[0].reason, "0 HCAs"));
    assert_int_equal(f.out.findings[0].status, PF_FAIL);
    pf_fleet_free(&f);
}

static int demote(void *arg, const char *code, int status)
{
    (void)arg;
    if (strcmp(code, "gang-hca-count") == 0) return PF_WARN;
    if (strcmp(code, "gang-firmware") == 0) return PF_FAIL;
    return status;
}

/* The policy decides the status, and a culprit only where it is fail. */
static void test_policy(void **state)
{
    (void)state;
    struct pf_fleet f;
    int roster[64];
    gang_of(&f, roster, &rows[1]);
    struct pf_fleet_gang_opts o = {.policy = demote};
    struct pf_fleet_gang_result res;
    pf_fleet_gang_judge(&f, &o, &res, NULL);
    assert_int_equal(f.out.nfindings, 1);
    assert_int_equal(f.out.findings[0].status, PF_WARN);
    assert_int_equal(f.out.nculprits, 0);
    assert_int_equal(res.named, 1);
    pf_fleet_free(&f);
    gang_of(&f, roster, &rows[6]);
    pf_fleet_gang_judge(&f, &o, &res, NULL);
    assert_int_equal(f.out.nculprits, 1);
    assert_int_equal(f.out.culprits[0].rank, 6);
    pf_fleet_free(&f);
}

static void test_codec_refuses(void **state)
{
    (void)state;
    struct pf_fleet_inv inv;
    assert_int_equal(pf_fleet_inv_decode(&inv, (const uint8_t *)"\x05", 1), PF_EINVAL);
    assert_int_equal(pf_fleet_inv_decode(&inv, NULL, 0), PF_EINVAL);
    struct pf_buf b;
    pf_buf_init(&b, PF_BUF_TEXT);
    pf_wire_put_str(&b, "hcas", "8");
    pf_wire_put(&b, "gpus", "8\n", 2); /* a control byte: refused, the rest kept */
    char big[PF_GANG_VALUE + 1];
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    pf_wire_put_str(&b, "driver", big); /* too long: refused */
    pf_wire_put_str(&b, "futureTrait", "1");
    pf_wire_put_str(&b, "portsDown", "-3");
    assert_int_equal(pf_fleet_inv_decode(&inv, (const uint8_t *)b.data, b.len), PF_EINVAL);
    assert_string_equal(inv.v[PF_GANG_HCAS], "8");
    assert_string_equal(inv.v[PF_GANG_GPUS], "");
    assert_string_equal(inv.v[PF_GANG_DRIVER], "");
    assert_int_equal(inv.ports_down, -1);
    pf_buf_free(&b);
}

/* 16,384 ranks, one outlier: named alone, and the table holds each value once. */
static void test_large(void **state)
{
    (void)state;
    enum { N = 16384 };
    struct pf_fleet f;
    pf_fleet_init(&f, N);
    int *roster = calloc(N, sizeof(int));
    assert_non_null(roster);
    for (int r = 0; r < N; r++) {
        struct pf_fleet_inv inv;
        healthy(&inv);
        if (r == 9001) snprintf(inv.v[PF_GANG_RATE], PF_GANG_VALUE, "200 Gb/s");
        pf_fleet_gang_add(&f, r, &inv);
        roster[r] = r;
    }
    f.n = N;
    f.roster = roster;
    assert_true(f.gang.n <= PF_GANG_NTRAITS + 3);
    struct pf_fleet_gang_result res;
    pf_fleet_gang_judge(&f, NULL, &res, NULL);
    assert_int_equal(f.out.nculprits, 1);
    assert_int_equal(f.out.culprits[0].rank, 9001);
    assert_int_equal(res.named, 1);
    pf_fleet_free(&f);
    free(roster);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),  cmocka_unit_test(test_message),
        cmocka_unit_test(test_policy), cmocka_unit_test(test_codec_refuses),
        cmocka_unit_test(test_large),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
