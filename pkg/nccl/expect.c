/* The bus bandwidth a collective should reach, and nccl-tests' busbw factors (pure). */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

double pf_nccl_busbw_factor(const char *op, int n)
{
    if (n < 1) return 0;
    if (strcmp(op, "allreduce") == 0) return 2.0 * (n - 1) / n;
    if (strcmp(op, "allgather") == 0 || strcmp(op, "reducescatter") == 0 ||
        strcmp(op, "alltoall") == 0)
        return (double)(n - 1) / n;
    if (strcmp(op, "broadcast") == 0 || strcmp(op, "reduce") == 0 || strcmp(op, "sendrecv") == 0)
        return 1.0;
    return 0;
}

static const struct pf_curve_point default_curve[] = {{2, 85}, {8, 68}, {125, 39}};

void pf_nccl_expected_busbw(struct pf_nccl_expect *out, const struct pf_config *config, int nodes)
{
    out->gbps = -1;
    out->rule[0] = '\0';
    if (config->expect_busbw_gbps >= 0) {
        out->gbps = config->expect_busbw_gbps;
        snprintf(out->rule, sizeof(out->rule), "expect.busbwGBps = %g GB/s", out->gbps);
        return;
    }
    if (!(config->expect_line_rate_gbps > 0)) return;
    if (nodes < 2) {
        snprintf(out->rule, sizeof(out->rule),
                 "none: expect.lineRateGbps applies between nodes, this run has 1 node");
        return;
    }
    const struct pf_curve_point *c = config->nefficiency ? config->efficiency : default_curve;
    size_t n = config->nefficiency ? config->nefficiency : PF_ARRAY_LEN(default_curve);
    double pct;
    const char *how;
    if (nodes <= c[0].nodes) {
        pct = c[0].percent;
        how = n > 1 && nodes < c[0].nodes ? "curve, clamped" : "curve";
    } else if (nodes >= c[n - 1].nodes) {
        pct = c[n - 1].percent;
        how = nodes > c[n - 1].nodes ? "curve, clamped" : "curve";
    } else {
        size_t i = 0;
        while (i + 1 < n && c[i + 1].nodes < nodes)
            i++;
        double x = log((double)nodes), a = log(c[i].nodes), b = log(c[i + 1].nodes);
        double t = b > a ? (x - a) / (b - a) : 0;
        pct = c[i].percent + t * (c[i + 1].percent - c[i].percent);
        how = "curve, interpolated";
    }
    pct = round(pct * 10) / 10;
    out->gbps = config->expect_line_rate_gbps / 8.0 * pct / 100.0;
    snprintf(out->rule, sizeof(out->rule),
             "lineRate %g Gb/s \xc3\x97 %g%% at %d nodes (%s) = %.4g GB/s",
             config->expect_line_rate_gbps, pct, nodes, how, out->gbps);
}
