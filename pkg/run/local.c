/* The stages of this pod alone: the local checks, rdma.counters, the report. */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../checks/checks.h"
#include "../report/report.h"

static const char *env_or(const struct pf_env *e, const char *name, const char *dflt)
{
    const char *s = pf_env_get(e, name);
    return s && *s ? s : dflt;
}

void pf_run_record_pod(struct pf_run *R)
{
    const struct pf_env *e = &R->ctx.env;
    char host[256] = "";
    if (gethostname(host, sizeof(host)) != 0) host[0] = '\0';
    host[sizeof(host) - 1] = '\0';
    pf_node_set_str(R->verdict.pod, "name", env_or(e, "POD_NAME", host));
    const char *ns = env_or(e, "POD_NAMESPACE", NULL);
    if (ns) pf_node_set_str(R->verdict.pod, "namespace", ns);
    const char *node = env_or(e, "NODE_NAME", NULL);
    if (node) pf_node_set_str(R->verdict.pod, "node", node);
}

/* The inventory, the environment, the counters' snapshot, then every local check. */
int run_stage_local(struct pf_run *R)
{
    bool guard = R->verdict_path != NULL;
    pf_env_load_nccl_conf(&R->ctx.env, &R->ctx.host);
    pf_run_record_pod(R);
    if (guard) pf_verdict_guard_update(&R->verdict, "preflight", "starting");
    pf_checks_inventory(&R->ctx);
    pf_checks_environment(&R->ctx);
    R->counters = pf_counters_snapshot(&R->ctx);
    R->counters_t = pf_now();
    if (guard) pf_verdict_guard_update(&R->verdict, "preflight", "running the local checks");
    pf_checks_run(&R->ctx, PF_MODE_LOCAL);
    return 0;
}

int pf_run_counters_window(double *out, const struct pf_env *e)
{
    *out = PF_COUNTERS_MIN_INTERVAL_S;
    const char *s = pf_env_get(e, "PREFLIGHT_COUNTERS_WINDOW");
    if (!s || !*s) return 0;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (*end || errno || !(v >= 0) || v > 60)
        return pf_err_set(
            PF_EUSAGE, "PREFLIGHT_COUNTERS_WINDOW: expected seconds from 0 to 60, found \"%s\"", s);
    *out = v;
    return 0;
}

/* rdma.counters against the snapshot of the local stage; at least R->counters_window
 * seconds after it, so that a dirty link has time to show. */
int run_stage_counters(struct pf_run *R)
{
    double left = R->counters_window - (pf_now() - R->counters_t);
    if (R->counters && left > 0) {
        struct timespec ts = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
        nanosleep(&ts, NULL);
    }
    double t0 = pf_now();
    struct pf_check *c = pf_verdict_add_check(&R->verdict, "rdma.counters");
    pf_check_rdma_counters(c, &R->ctx, R->counters);
    c->seconds = pf_now() - t0;
    return 0;
}

/* Event, annotation, metrics (each says itself when it cannot). */
int run_stage_report(struct pf_run *R)
{
    struct pf_report_waits w = {.api_s = PF_RUN_API_S, .push_s = pf_run_wait_s(R, "report.push")};
    pf_report_stage(&R->ctx, pf_run_policy, &R->config, R->t0, &w);
    return 0;
}

/* `check`: the push to a Pushgateway alone (no Event, annotation or node mark). */
int run_stage_push(struct pf_run *R)
{
    pf_report_results_stage(&R->ctx, pf_run_policy, &R->config);
    pf_report_push_stage(&R->ctx, pf_run_policy, &R->config, R->t0,
                         pf_run_wait_s(R, "report.push"));
    return 0;
}

int pf_run_env(struct pf_run *R, const char *env_file)
{
    R->ctx.in_env_mode = true;
    if (env_file) {
        pf_env_free(&R->ctx.env);
        int r = pf_env_load_file(&R->ctx.env, env_file, R->deadline);
        R->ctx.env_file = env_file;
        if (r < 0) return r;
    } else {
        pf_env_load_nccl_conf(&R->ctx.env, &R->ctx.host);
    }
    pf_checks_inventory(&R->ctx);
    pf_checks_run(&R->ctx, PF_MODE_ENV);
    return 0;
}

void pf_run_advice(const struct pf_run *R, struct pf_strlist *out)
{
    pf_checks_advice(out, &R->verdict);
}
