/* The waits of `preflight run`: every one that is a share of the time left, in one table, and
 * the one function that turns a row into a deadline (docs/design.md, "The waits"). The fixed
 * waits are named in run.h; nothing waits past R->deadline. */
#include "internal.h"

#include <string.h>

/* Every wait of `preflight run` that is a share of the time left (docs/design.md, "The
 * waits"). A share of what is left before the waits' end (pf_run_waits_end), at least min
 * and at most max seconds. */
const struct pf_run_wait pf_run_waits[] = {
    /* id              share  min  max */
    {"meet.reserve", 0.30, 3, 60},   /* what the join phase leaves for the stages after it */
    {"tcp.mesh", 0.20, 3, 30},       /* the data mesh's connections (and its barrier) */
    {"tcp.allreduce", 0.40, 3, 300}, /* the TCP all-reduce (and the gathering of its results) */
    {"tcp.probe", 0.03, 2, 10},      /* one link probe of collective.tcp */
    {"rails.probe", 0.08, 3, 15},    /* one rail probe of net.rails */
    {"report.push", 0.50, 0, 5},     /* the push to a Pushgateway, every attempt included */
};
const size_t pf_run_waits_len = sizeof(pf_run_waits) / sizeof(pf_run_waits[0]);

double pf_run_waits_end(const struct pf_run *R)
{
    return R->deadline > 0 ? R->deadline - PF_RUN_AFTER_S : 0;
}

double pf_run_wait(const struct pf_run *R, const char *id)
{
    for (size_t i = 0; i < pf_run_waits_len; i++) {
        const struct pf_run_wait *w = &pf_run_waits[i];
        if (strcmp(w->id, id) == 0)
            return pf_deadline_share(pf_run_waits_end(R), w->share, w->min, w->max);
    }
    /* a programming error: an id not in the table waits for nothing beyond the end */
    return pf_run_waits_end(R) > 0 ? pf_run_waits_end(R) : pf_now();
}

double pf_run_wait_s(const struct pf_run *R, const char *id)
{
    double s = pf_run_wait(R, id) - pf_now();
    return s > 0 ? s : 0;
}
