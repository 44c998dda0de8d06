/* The session and the stage loop; the tables of `check` and `run`. */
#define _GNU_SOURCE
#include "internal.h"

#include <stdlib.h>
#include <string.h>

#include "../checks/checks.h"

int pf_run_policy(void *config, const char *check_id, const char *code, enum pf_status status)
{
    const struct pf_config *c = config;
    (void)check_id;
    int st = pf_config_policy(c, code, (int)status);
    return st == PF_POLICY_IGNORE ? -1 : st;
}

/* The command line's values over the config's: --pushgateway, else PREFLIGHT_PUSHGATEWAY,
 * over report.pushgateway; --results over report.resultsFile. */
static int over_config(struct pf_run *R, const struct pf_run_opts *o)
{
    const char *pgw = o->pushgateway;
    if (!pgw) {
        pgw = pf_env_get(&R->ctx.env, "PREFLIGHT_PUSHGATEWAY");
        if (pgw && !*pgw) pgw = NULL;
        int r = pgw ? pf_http_url_check("PREFLIGHT_PUSHGATEWAY", pgw) : 0;
        if (r < 0) return r;
    }
    if (pgw) pf_strcpy(R->config.report_pushgateway, sizeof(R->config.report_pushgateway), pgw);
    if (o->results_file)
        pf_strcpy(R->config.report_results_file, sizeof(R->config.report_results_file),
                  o->results_file);
    if (o->counters_window) return pf_run_counters_window(&R->counters_window, &R->ctx.env);
    return 0;
}

int pf_run_open(struct pf_run *R, const struct pf_run_opts *o)
{
    memset(R, 0, sizeof(*R));
    R->opts = o;
    R->t0 = pf_now();
    const char *guard = o->guard ? (o->verdict_path ? o->verdict_path : "-") : NULL;
    R->verdict_path = guard;
    pf_config_defaults(&R->config);
    pf_verdict_init(&R->verdict);
    pf_ctx_init(&R->ctx, &R->config, &R->verdict);
    /* the one clock, read before the guard's alarm is set: never after it; the commands
     * without a guard (env, log) keep their --timeout by it too */
    if (o->timeout_s > 0) R->deadline = pf_now() + o->timeout_s - PF_RUN_DELIVER_S;
    if (guard) {
        int r = pf_verdict_guard_install(guard, o->timeout_s, pf_run_policy, &R->config);
        if (r < 0) return r;
        pf_verdict_guard_update(&R->verdict, "preflight", "reading the config file");
    }
    R->ctx.deadline = pf_run_waits_end(R);
    R->ctx.api_s = PF_RUN_API_S;
    if (o->config_path) {
        int r = pf_config_load(&R->config, o->config_path, R->deadline);
        if (r < 0) return r;
    }
    R->verdict.warn_fails = o->strict || R->config.fail_on == PF_WARN; /* the exit code's rule */
    int r = pf_host_init(&R->ctx.host, o->root ? o->root : "/");
    if (r < 0) return r;
    pf_env_from_environ(&R->ctx.env, o->environ_);
    R->ctx.progress = o->progress;
    R->ctx.progress_arg = o->progress_arg;
    R->ctx.verdict_path = o->verdict_path ? o->verdict_path : "-";
    return over_config(R, o);
}

void pf_run_close(struct pf_run *R)
{
    pf_verdict_guard_disarm();
    pf_counters_free(R->counters);
    R->counters = NULL;
    pf_ctx_free(&R->ctx);
    pf_verdict_free(&R->verdict);
    pf_config_free(&R->config);
}

/* The check a skipped stage feeds says why it did not run, unless it already says more. */
static void skip_check(struct pf_run *R, const struct pf_run_stage *st, const char *why)
{
    if (!st->check || strcmp(st->check, "preflight") == 0) return;
    struct pf_check *c = pf_verdict_find_check(&R->verdict, st->check);
    if (c && (c->nfindings || c->status != PF_PASS || (c->message && *c->message))) return;
    if (!c) c = pf_verdict_add_check(&R->verdict, st->check);
    pf_check_skip(c, "not run: %s", why);
}

int pf_run_stages(struct pf_run *R, const struct pf_run_stage *table, size_t n)
{
    R->ntiming = 0;
    const char *over = NULL; /* the stage during which the deadline passed */
    for (size_t i = 0; i < n && i < PF_RUN_MAX_STAGES; i++) {
        const struct pf_run_stage *st = &table[i];
        struct pf_run_timing *tm = &R->timing[R->ntiming++];
        memset(tm, 0, sizeof(*tm));
        tm->id = st->id;
        double now = pf_now();
        if (R->deadline > 0 && now >= R->deadline && !st->always) {
            tm->state = PF_RUN_SKIPPED;
            if (over)
                snprintf(tm->why, sizeof(tm->why),
                         "the deadline (--timeout) passed during stage %s, before stage %s", over,
                         st->id);
            else
                snprintf(tm->why, sizeof(tm->why),
                         "the deadline (--timeout) passed before stage %s", st->id);
            skip_check(R, st, tm->why);
            continue;
        }
        R->ctx.deadline = pf_run_waits_end(R);
        R->ctx.api_s = PF_RUN_API_S;
        R->stage = st;
        if (st->doing && R->verdict_path)
            pf_verdict_guard_update(&R->verdict, st->check ? st->check : "preflight", st->doing);
        int r = st->fn(R);
        tm->seconds = pf_now() - now;
        tm->state = r < 0 ? PF_RUN_FAILED : PF_RUN_DONE;
        R->stage = NULL;
        if (r < 0) return r;
        if (!over && R->deadline > 0 && pf_now() >= R->deadline) over = st->id;
    }
    return 0;
}

void pf_run_timing_text(const struct pf_run *R, struct pf_buf *out)
{
    for (size_t i = 0; i < R->ntiming; i++) {
        const struct pf_run_timing *t = &R->timing[i];
        pf_buf_addf(out, "%s%s ", i ? ", " : "", t->id);
        if (t->state == PF_RUN_SKIPPED)
            pf_buf_addf(out, "skipped");
        else
            pf_buf_addf(out, "%.2f s%s", t->seconds, t->state == PF_RUN_FAILED ? " (failed)" : "");
    }
}

/* ---- the tables */

/* `preflight check`: this pod alone, by absolute rules (a pod that differs from its gang needs
 * the gang); check gang says so and lists what a run would send rank 0. A stage of its own,
 * before the push, so that the metrics carry it like every other check. */
static int run_stage_gang_alone(struct pf_run *R)
{
    struct pf_check *g = pf_verdict_add_check(&R->verdict, "gang");
    if (g->status != PF_SKIP || !g->message)
        pf_check_skip(g, "`preflight check` judges this pod alone; `preflight run` also compares "
                         "it with every other pod of its job (GPUs, HCAs, ports, PCIe, NICs, "
                         "firmware, driver, NCCL, networks)");
    struct pf_fleet_inv inv;
    run_inventory(&inv, R);
    run_inventory_evidence(g->evidence, &inv);
    return 0;
}

const struct pf_run_stage pf_run_check_table[] = {
    {"local", "preflight", NULL, false, run_stage_local},
    {"counters", "rdma.counters", NULL, false, run_stage_counters},
    {"gang", "gang", NULL, false, run_stage_gang_alone},
    {"push", "report.metrics", "pushing the metrics", true, run_stage_push},
};
const size_t pf_run_check_table_len = sizeof(pf_run_check_table) / sizeof(pf_run_check_table[0]);

/* The stages among pods cut their waits from R->deadline (budget.c, docs/design.md). */
const struct pf_run_stage pf_run_run_table[] = {
    {"local", "preflight", NULL, false, run_stage_local},
    {"meet", "rendezvous", "meeting the other pods", false, run_stage_meet},
    {"agree", "rendezvous", NULL, false, run_stage_agree},
    {"collective.tcp", "collective.tcp", NULL, false, run_stage_tcp},
    {"rails", "net.rails", NULL, false, run_stage_rails},
    {"gpu", "collective.nccl", NULL, false, run_stage_gpu},
    {"summary", "collective.tcp", NULL, false, run_stage_summary},
    {"counters", "rdma.counters", "reading the port error counters", false, run_stage_counters},
    {"report", "preflight", "reporting the verdict", true, run_stage_report},
};
const size_t pf_run_run_table_len = sizeof(pf_run_run_table) / sizeof(pf_run_run_table[0]);

int pf_run_check(struct pf_run *R)
{
    return pf_run_stages(R, pf_run_check_table, pf_run_check_table_len);
}

int pf_run_run(struct pf_run *R)
{
    struct run_pods pods;
    memset(&pods, 0, sizeof(pods));
    pods.met = RUN_NOT_MET;
    pf_buf_init(&pods.sum, PF_WIRE_MAX_PAYLOAD);
    R->pods = &pods;
    int r = pf_run_stages(R, pf_run_run_table, pf_run_run_table_len);
    pf_rdv_close(pods.rdv);
    run_pods_free(&pods);
    pf_buf_free(&pods.sum);
    free(pods.links);
    free(pods.mylinks);
    pf_coll_judgement_free(&pods.judg);
    R->pods = NULL;
    return r;
}
