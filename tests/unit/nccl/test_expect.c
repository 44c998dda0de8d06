/* pkg/nccl's pure part: the busbw factors against nccl-tests' formulas (each src/ collective file's
 * GetBw, doc/PERFORMANCE.md), and the expected busbw from the config (line rate times the
 * efficiency curve, interpolated in log(nodes), clamped outside it). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../../../pkg/config/config.h"
#include "../../../pkg/nccl/nccl.h"

static void near(double got, double want, const char *what)
{
    if (fabs(got - want) > 1e-9) fail_msg("%s: %.12g, expected %.12g", what, got, want);
}

static void test_busbw_factor(void **state)
{
    (void)state;
    static const int ranks[] = {1, 2, 3, 4, 8, 16, 1024};
    for (size_t i = 0; i < sizeof(ranks) / sizeof(ranks[0]); i++) {
        int n = ranks[i];
        char what[64];
        snprintf(what, sizeof(what), "allreduce at %d", n);
        near(pf_nccl_busbw_factor("allreduce", n), 2.0 * (n - 1) / n, what);
        static const char *const ring[] = {"allgather", "reducescatter", "alltoall"};
        for (size_t k = 0; k < 3; k++) {
            snprintf(what, sizeof(what), "%s at %d", ring[k], n);
            near(pf_nccl_busbw_factor(ring[k], n), (double)(n - 1) / n, what);
        }
        static const char *const one[] = {"broadcast", "reduce", "sendrecv"};
        for (size_t k = 0; k < 3; k++) {
            snprintf(what, sizeof(what), "%s at %d", one[k], n);
            near(pf_nccl_busbw_factor(one[k], n), 1.0, what);
        }
    }
    /* the numbers a reader checks by hand: 8 ranks */
    near(pf_nccl_busbw_factor("allreduce", 8), 1.75, "allreduce at 8");
    near(pf_nccl_busbw_factor("allgather", 8), 0.875, "allgather at 8");
    /* unknown names and no ranks: 0, never a guess */
    near(pf_nccl_busbw_factor("allreducex", 8), 0, "an unknown collective");
    near(pf_nccl_busbw_factor("AllReduce", 8), 0, "names are nccl-tests' lower case");
    near(pf_nccl_busbw_factor("allreduce", 0), 0, "no ranks");
}

static void expect(struct pf_config *c, int nodes, double gbps, const char *rule_part)
{
    struct pf_nccl_expect e;
    pf_nccl_expected_busbw(&e, c, nodes);
    char what[64];
    snprintf(what, sizeof(what), "expected busbw at %d nodes", nodes);
    near(e.gbps, gbps, what);
    if (rule_part && !strstr(e.rule, rule_part))
        fail_msg("%d nodes: rule \"%s\" lacks \"%s\"", nodes, e.rule, rule_part);
    if (!rule_part && e.rule[0]) fail_msg("%d nodes: rule \"%s\", expected none", nodes, e.rule);
}

static void test_expected_busbw(void **state)
{
    (void)state;
    struct pf_config c;
    pf_config_defaults(&c);
    expect(&c, 8, -1, NULL); /* nothing configured: no expectation */

    c.expect_line_rate_gbps = 400; /* 50 GB/s a node */
    expect(&c, 1, -1, "this run has 1 node");
    expect(&c, 2, 50 * 0.85, "(curve)");
    expect(&c, 8, 50 * 0.68, "68% at 8 nodes"); /* a point inside the curve */
    expect(&c, 125, 50 * 0.39, "(curve)");
    expect(&c, 1000, 50 * 0.39, "curve, clamped");
    /* 4 nodes: halfway between 2 and 8 in log(nodes): 85 - 17/2 = 76.5% */
    expect(&c, 4, 50 * 0.765, "curve, interpolated");
    /* 32 nodes: log-interpolated between 8 (68%) and 125 (39%), rounded to 0.1% */
    double t = (log(32) - log(8)) / (log(125) - log(8));
    double pct = round((68 + t * (39 - 68)) * 10) / 10;
    expect(&c, 32, 50 * pct / 100, "lineRate 400 Gb/s");

    /* the config's own curve replaces the default one */
    c.efficiency[0] = (struct pf_curve_point){4, 90};
    c.efficiency[1] = (struct pf_curve_point){16, 50};
    c.nefficiency = 2;
    expect(&c, 2, 50 * 0.90, "curve, clamped");
    expect(&c, 8, 50 * 0.70, "curve, interpolated");
    expect(&c, 64, 50 * 0.50, "curve, clamped");

    /* expect.busbwGBps wins over the line rate */
    c.expect_busbw_gbps = 12.5;
    expect(&c, 8, 12.5, "expect.busbwGBps = 12.5 GB/s");
    pf_config_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_busbw_factor),
        cmocka_unit_test(test_expected_busbw),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
