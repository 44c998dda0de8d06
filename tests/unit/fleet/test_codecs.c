/* fleet: the codecs' numbers from peers. A value that is not a finite decimal (nan, inf,
 * garbage around digits) is refused by the one number decoder: its part of the message is left
 * out and named, and the rest (the fleet verdict above all) still stands. And the record
 * lists: one over its limits is reported, never cut silently or written past. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../pkg/fleet/internal.h"
#include "../../../pkg/wire/wire.h"

/* A SUMMARY as rank 0 writes it, with one of its number fields replaced by text. */
static void summary_with(struct pf_buf *b, const char *key, const char *text)
{
    static const char *const nums[][2] = {
        {"seconds", "0.004100000"}, {"algbw", "0.255750"}, {"busbw", "0.383625"},
        {"expected", "0.5"},        {"median", "9.120"},
    };
    pf_buf_init(b, 1 << 16);
    struct pf_buf r;
    pf_buf_init(&r, 4096);
    pf_wire_put_str(&r, "check", "collective.tcp");
    pf_wire_put_str(&r, "code", "slow-link");
    pf_wire_put_str(&r, "status", "warn");
    pf_wire_put_str(&r, "message", "rank 1 -> rank 2 is slow");
    pf_wire_put(b, "finding", r.data, r.len);
    pf_wire_put_int(b, "bytes", 1 << 20);
    pf_wire_put_int(b, "ranks", 4);
    pf_wire_put_int(b, "correct", 1);
    pf_wire_put_int(b, "iterations", 5);
    for (size_t i = 0; i < PF_ARRAY_LEN(nums); i++)
        pf_wire_put_str(b, nums[i][0], strcmp(key, nums[i][0]) == 0 ? text : nums[i][1]);
    pf_buf_reset(&r);
    pf_wire_put_int(&r, "from", 1);
    pf_wire_put_int(&r, "to", 2);
    pf_wire_put_str(&r, "gbps", strcmp(key, "gbps") == 0 ? text : "0.830");
    pf_wire_put(b, "slowest", r.data, r.len);
    pf_wire_put_str(b, "fleet", "warn");
    pf_wire_put_str(b, "fleetSummary", "4 of 4 ranks met; fleet verdict warn");
    pf_buf_free(&r);
}

static void test_summary_numbers(void **state)
{
    (void)state;
    static const struct {
        const char *key, *text;
        bool tcp, links, slowest, expected;
    } cases[] = {
        /* each field as rank 0 writes it: everything decodes */
        {"none", "", true, true, true, true},
        {"busbw", "nan", false, true, true, true},
        {"busbw", "inf", false, true, true, true},
        {"seconds", "0.0041garbage", false, true, true, true},
        {"algbw", "-inf", false, true, true, true},
        {"algbw", "1e999", false, true, true, true},
        {"expected", "nan", true, true, true, false},
        {"median", "inf", true, false, false, true},
        {"gbps", "nan", true, true, false, true},
        {"gbps", " 0.8", true, true, false, true},
    };
    for (size_t i = 0; i < PF_ARRAY_LEN(cases); i++) {
        struct pf_buf b;
        summary_with(&b, cases[i].key, cases[i].text);
        struct pf_fleet_summary s;
        assert_int_equal(pf_fleet_summary_decode(&s, (const uint8_t *)b.data, b.len), 0);
        /* the verdict and the findings are never lost to a bad number */
        assert_string_equal(s.verdict, "warn");
        assert_string_equal(s.text, "4 of 4 ranks met; fleet verdict warn");
        assert_int_equal(s.nfindings, 1);
        if (s.have_tcp != cases[i].tcp) print_message("%s=%s: tcp\n", cases[i].key, cases[i].text);
        assert_true(s.have_tcp == cases[i].tcp);
        assert_true(s.have_links == cases[i].links);
        assert_true((s.slow_src == 1) == cases[i].slowest);
        assert_true((s.expected == 0.5) == cases[i].expected);
        if (!cases[i].expected) assert_true(s.expected == -1);
        if (s.have_tcp) assert_true(s.busbw > 0.38 && s.busbw < 0.39);
        if (strcmp(cases[i].key, "none") == 0) {
            assert_string_equal(s.bad, "");
        } else {
            /* the refusal names the field and quotes what came */
            char want[64];
            snprintf(want, sizeof(want), "field %s: \"%s\"", cases[i].key, cases[i].text);
            if (!strstr(s.bad, want)) print_message("bad: %s\n", s.bad);
            assert_non_null(strstr(s.bad, want));
        }
        pf_fleet_summary_free(&s);
        pf_buf_free(&b);
    }
}

/* Integers are refused the same way and named. */
static void test_summary_first_refusal(void **state)
{
    (void)state;
    struct pf_buf b;
    summary_with(&b, "busbw", "nan");
    pf_wire_put_str(&b, "ranks", "4x"); /* a second "ranks": the first wins */
    struct pf_fleet_summary s;
    assert_int_equal(pf_fleet_summary_decode(&s, (const uint8_t *)b.data, b.len), 0);
    assert_string_equal(s.bad, "field busbw: \"nan\" is not a finite decimal number");
    pf_fleet_summary_free(&s);
    pf_buf_free(&b);
    pf_buf_init(&b, 4096);
    pf_wire_put_str(&b, "bytes", "1M");
    pf_wire_put_str(&b, "fleet", "pass");
    assert_int_equal(pf_fleet_summary_decode(&s, (const uint8_t *)b.data, b.len), 0);
    assert_false(s.have_tcp);
    assert_string_equal(s.verdict, "pass");
    assert_non_null(strstr(s.bad, "field bytes"));
    pf_fleet_summary_free(&s);
    pf_buf_free(&b);
}

static void test_ar_numbers(void **state)
{
    (void)state;
    static const struct {
        const char *s, *seconds;
        int rc;
        bool done;
    } cases[] = {
        {"ok", "0.012000000", 0, true},  {"ok", "nan", PF_EINVAL, false},
        {"ok", "inf", PF_EINVAL, false}, {"ok", "0.01 s", PF_EINVAL, false},
        {"fail", "nan", 0, false}, /* a failure carries no time to judge */
    };
    for (size_t i = 0; i < PF_ARRAY_LEN(cases); i++) {
        struct pf_buf b;
        pf_buf_init(&b, 4096);
        pf_wire_put_str(&b, "s", cases[i].s);
        pf_wire_put_str(&b, "seconds", cases[i].seconds);
        pf_wire_put_int(&b, "wrong", 0);
        pf_wire_put_int(&b, "firstBad", -1);
        pf_wire_put_str(&b, "iface", "eth0");
        struct pf_fleet_rank m;
        memset(&m, 0, sizeof(m));
        assert_int_equal(pf_fleet_ar_decode(&m, (const uint8_t *)b.data, b.len), cases[i].rc);
        assert_true(m.ar_done == cases[i].done);
        assert_true(m.ar_done ? m.ar_seconds == 0.012 : m.ar_seconds == 0);
        assert_string_equal(m.iface, "eth0");
        if (cases[i].rc < 0) assert_non_null(strstr(pf_err_msg(), "field seconds"));
        pf_buf_free(&b);
    }
}

/* A sample whose number is refused is skipped; its neighbours are kept. */
static void test_records_numbers(void **state)
{
    (void)state;
    struct pf_buf b, r;
    pf_buf_init(&b, 1 << 16);
    pf_buf_init(&r, 4096);
    size_t n = 0;
    static const char *const secs[] = {"0.001", "nan", "-inf", "0.002 ", "0x1p-9", "0.003"};
    for (size_t i = 0; i < PF_ARRAY_LEN(secs); i++) {
        pf_buf_reset(&r);
        pf_wire_put_int(&r, "src", (long long)i);
        pf_wire_put_int(&r, "dst", 1);
        pf_wire_put_int(&r, "round", 0);
        pf_wire_put_int(&r, "bytes", 4096);
        pf_wire_put_str(&r, "seconds", secs[i]);
        pf_wire_put(&b, "s", r.data, r.len);
    }
    struct pf_coll_sample smp[8];
    assert_int_equal(pf_fleet_samples_decode(smp, &n, 8, (const uint8_t *)b.data, b.len), 0);
    assert_int_equal(n, 2);
    assert_int_equal(smp[0].src, 0);
    assert_int_equal(smp[1].src, 5);
    assert_true(smp[1].seconds == 0.003);
    pf_buf_free(&r);
    pf_buf_free(&b);
}

static void samples_of(struct pf_coll_sample *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        s[i] = (struct pf_coll_sample){(int)i, 1, 0, 1 << 20, 0.001 * (double)(i + 1), 0};
}

/* Decodes what an encoder left in b: whole records only, and how many. */
static size_t samples_in(const struct pf_buf *b)
{
    struct pf_coll_sample got[32];
    size_t n = 99;
    assert_int_equal(pf_fleet_samples_decode(got, &n, 32, (const uint8_t *)pf_buf_str(b), b->len),
                     0);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(got[i].src, (int)i);
        double want = 0.001 * (double)(i + 1);
        assert_true(got[i].seconds > want * 0.999999 && got[i].seconds < want * 1.000001);
    }
    return n;
}

static void test_samples_bounded(void **state)
{
    (void)state;
    struct pf_coll_sample s[40];
    samples_of(s, 40);
    struct pf_buf b;
    /* as many as rank 0 reads: all of them go */
    pf_buf_init(&b, 1 << 16);
    assert_int_equal(pf_fleet_samples_encode(&b, s, 16), 0);
    assert_int_equal(samples_in(&b), 16);
    pf_buf_free(&b);
    /* more than rank 0 reads: the first 16 go and the rest is reported, not dropped quietly */
    pf_buf_init(&b, 1 << 16);
    assert_int_equal(pf_fleet_samples_encode(&b, s, 40), PF_ETOOBIG);
    assert_string_equal(pf_err_msg(), "the probe samples: 40, over the limit of 16 a round");
    assert_int_equal(samples_in(&b), 16);
    pf_buf_free(&b);
    /* a message too small for the list: reported, within its limit, whole records only */
    pf_buf_init(&b, 300);
    assert_int_equal(pf_fleet_samples_encode(&b, s, 10), PF_ETOOBIG);
    assert_string_equal(pf_err_msg(), "the probe samples is over its limit of 300 bytes");
    assert_true(b.len <= 300);
    size_t n = samples_in(&b);
    assert_true(n > 0 && n < 10);
    pf_buf_free(&b);
    /* the tasks share the loop, and its check */
    struct pf_coll_task t[20];
    for (int i = 0; i < 20; i++)
        t[i] = (struct pf_coll_task){i, true, 4096};
    pf_buf_init(&b, 200);
    assert_int_equal(pf_fleet_tasks_encode(&b, true, t, 20), PF_ETOOBIG);
    assert_non_null(strstr(pf_err_msg(), "the probe tasks is over its limit"));
    pf_buf_free(&b);
}

/* A record over its own limit is left out whole: the records around it stand. */
static void big_record(struct pf_buf *r, const void *items, size_t i)
{
    size_t len = ((const size_t *)items)[i];
    char *v = malloc(len + 1);
    assert_non_null(v);
    memset(v, 'x', len);
    v[len] = '\0';
    pf_wire_put_str(r, "v", v);
    free(v);
}

/* A rank's CPU over a round rides in the message of its samples: both decode from it; a
 * message without it (an older rank) is PF_ENOENT, a share out of range is refused. */
static void test_cpu_report(void **state)
{
    (void)state;
    struct pf_buf b;
    pf_buf_init(&b, 1 << 16);
    struct pf_coll_sample s[2];
    samples_of(s, 2);
    assert_int_equal(pf_fleet_samples_encode(&b, s, 2), 0);
    struct pf_coll_cpu c = {0.4321, 0, -1, 95.8}, got;
    assert_int_equal(pf_fleet_cpu_encode(&b, &c), 0);
    assert_int_equal(samples_in(&b), 2);
    assert_int_equal(pf_fleet_cpu_decode(&got, (const uint8_t *)pf_buf_str(&b), b.len), 0);
    assert_true(got.wait > 0.4320 && got.wait < 0.4322);
    assert_true(got.steal == 0);
    assert_true(got.psi < 0);
    assert_true(got.psi_avg10 > 95.79 && got.psi_avg10 < 95.81);
    assert_true(pf_coll_cpu_starved(&got));
    pf_buf_reset(&b);
    assert_int_equal(pf_fleet_samples_encode(&b, s, 2), 0);
    assert_int_equal(pf_fleet_cpu_decode(&got, (const uint8_t *)pf_buf_str(&b), b.len), PF_ENOENT);
    assert_false(pf_coll_cpu_starved(&got)); /* unknown: -1 everywhere, never starved */
    pf_buf_reset(&b);
    pf_wire_put_int(&b, "cpuWait", 20000);
    pf_wire_put_int(&b, "cpuSteal", 0);
    pf_wire_put_int(&b, "cpuPsi", 0);
    pf_wire_put_int(&b, "cpuAvg10", 0);
    assert_int_equal(pf_fleet_cpu_decode(&got, (const uint8_t *)pf_buf_str(&b), b.len), PF_EINVAL);
    pf_buf_free(&b);
}

static void test_record_over_limit(void **state)
{
    (void)state;
    size_t lens[] = {10, 100u << 10, 20};
    struct pf_buf b;
    pf_buf_init(&b, 1 << 20);
    assert_int_equal(fleet_records_put(&b, "r", lens, 3, big_record, "the test list"), PF_ETOOBIG);
    assert_non_null(strstr(pf_err_msg(), "the test list is over its limit"));
    struct pf_wire_fields f;
    assert_int_equal(pf_wire_fields_decode(&f, (const uint8_t *)b.data, b.len), 0);
    assert_int_equal(f.n, 2);
    assert_true(f.v[0].vlen < 64 && f.v[1].vlen < 64);
    pf_wire_fields_free(&f);
    pf_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_summary_numbers), cmocka_unit_test(test_summary_first_refusal),
        cmocka_unit_test(test_ar_numbers),      cmocka_unit_test(test_records_numbers),
        cmocka_unit_test(test_samples_bounded), cmocka_unit_test(test_record_over_limit),
        cmocka_unit_test(test_cpu_report),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
