/* gpu.fabric's cross-rank comparison: N ranks' (cluster UUID, clique id), as gpu.fabric's
 * evidence writes them ("<clusterUuid>/<cliqueId>"), and the ranks that differ. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "../../../pkg/fleet/fleet.h"

#define U1 "8e3a5b1c-2d4f-4a6b-9c8d-7e6f5a4b3c2d"
#define U2 "0b1c2d3e-4f5a-4b6c-8d7e-9f0a1b2c3d4e"

static void load(struct pf_fleet_fabric *r, size_t n, const char *const *texts)
{
    for (size_t i = 0; i < n; i++) {
        memset(&r[i], 0, sizeof(r[i]));
        r[i].rank = (int)i;
        if (texts[i]) assert_int_equal(pf_fleet_fabric_parse(&r[i], texts[i]), 0);
    }
}

static void test_parse(void **state)
{
    (void)state;
    struct pf_fleet_fabric r;
    assert_int_equal(pf_fleet_fabric_parse(&r, U1 "/32766"), 0);
    assert_string_equal(r.cluster_uuid, U1);
    assert_int_equal(r.clique, 32766);
    assert_int_equal(pf_fleet_fabric_parse(&r, "/0"), 0); /* no fabric: empty UUID */
    assert_string_equal(r.cluster_uuid, "");
    assert_int_equal(pf_fleet_fabric_parse(&r, U1), -1);
    assert_int_equal(pf_fleet_fabric_parse(&r, U1 "/"), -1);
    assert_int_equal(pf_fleet_fabric_parse(&r, U1 "/x1"), -1);
    assert_int_equal(pf_fleet_fabric_parse(&r, U1 "/-1"), -1);
    assert_int_equal(pf_fleet_fabric_parse(&r, U1 "/4294967296"), -1);
    assert_int_equal(pf_fleet_fabric_parse(&r, NULL), -1);
}

static void test_all_agree(void **state)
{
    (void)state;
    const char *t[] = {U1 "/7", U1 "/7", U1 "/7", U1 "/7"};
    struct pf_fleet_fabric r[4];
    load(r, 4, t);
    struct pf_fleet_fabric_mismatch m[4];
    assert_int_equal(pf_fleet_fabric_compare(m, 4, r, 4), 0);
    assert_int_equal(pf_fleet_fabric_compare(m, 4, r, 0), 0);
}

static void test_one_clique_differs(void **state)
{
    (void)state;
    const char *t[] = {U1 "/7", U1 "/7", U1 "/9", U1 "/7"};
    struct pf_fleet_fabric r[4];
    load(r, 4, t);
    struct pf_fleet_fabric_mismatch m[4];
    assert_int_equal(pf_fleet_fabric_compare(m, 4, r, 4), 1);
    assert_int_equal(m[0].rank, 2);
    assert_non_null(strstr(m[0].message, "rank 2 is in clique 9"));
    assert_non_null(strstr(m[0].message, "3 of 4 ranks in clique 7"));
}

static void test_cluster_and_missing(void **state)
{
    (void)state;
    const char *t[] = {U1 "/7", U2 "/7", "/0", U1 "/7", U1 "/7"};
    struct pf_fleet_fabric r[5];
    load(r, 5, t);
    struct pf_fleet_fabric_mismatch m[1];
    /* two differ; only one fits in out, the count says two */
    assert_int_equal(pf_fleet_fabric_compare(m, 1, r, 5), 2);
    assert_int_equal(m[0].rank, 1);
    assert_non_null(strstr(m[0].message, "NVLink cluster " U2));
    struct pf_fleet_fabric_mismatch all[5];
    assert_int_equal(pf_fleet_fabric_compare(all, 5, r, 5), 2);
    assert_int_equal(all[1].rank, 2);
    assert_non_null(strstr(all[1].message, "rank 2 has no NVLink fabric"));
}

static void test_tie_lowest_rank_wins(void **state)
{
    (void)state;
    const char *t[] = {U2 "/1", U1 "/1", U1 "/1", U2 "/1"};
    struct pf_fleet_fabric r[4];
    load(r, 4, t);
    struct pf_fleet_fabric_mismatch m[4];
    assert_int_equal(pf_fleet_fabric_compare(m, 4, r, 4), 2);
    assert_int_equal(m[0].rank, 1);
    assert_int_equal(m[1].rank, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_all_agree),
        cmocka_unit_test(test_one_clique_differs),
        cmocka_unit_test(test_cluster_and_missing),
        cmocka_unit_test(test_tie_lowest_rank_wins),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
