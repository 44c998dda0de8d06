/* The collective results as nccl-tests writes them with `-J FILE` (NVIDIA/nccl-tests v2.19.6,
 * src/util.cu: jsonOutputInit, printDeviceInfo's "config", writeResultHeader,
 * writeBenchmarkLinePreamble / writeBenchmarkLineBody / writeBenchmarkLineTerminator and
 * writeResultFooter; JSON_FILE_VERSION 3), so that the tools that read those files read
 * preflight's too. One document for the run's collectives: the NCCL ones, then the TCP
 * all-reduce (the only one of a run without GPUs), marked as not nccl-tests' own by
 * "experiment_name": "preflight_tcp_all_reduce" and "backend": "tcp", a key nccl-tests does
 * not write (its readers take the keys they know). average_bus_bandwidth is over the NCCL
 * results when there are any, else over the TCP one:
 *
 *   {"version": 3, "start_time", "args": [...], "env": [...], "nccl_version",
 *    "config": {"nthreads", "ngpus", "minimum_bytes", "maximum_bytes", "step_factor",
 *               "warmup_iters", "iterations", "aggregated_iterations", "validation", "graph",
 *               "blocking_collectives", "per_iter_timing", "per_iter_skip", "parallel_init",
 *               "devices": [{"rank", "group", "pid", "hostname", "device", "device_hex",
 *                            "device_info"}]},
 *    "results": [{"size", "count", "type", "redop", "root",
 *                 "out_of_place": {"time", "alg_bw", "bus_bw", "nwrong"}, "in_place": null,
 *                 "actual_iterations", "experiment_name"}],
 *    "out_of_bounds": {"count", "okay"}, "average_bus_bandwidth": {"bandwidth", "okay"},
 *    "end_time"}
 *
 * What preflight does not know as nccl-tests does is written as nccl-tests writes a value it
 * lacks: in_place null (one measurement, out of place), device -1, device_hex and device_info
 * "", and average_bus_bandwidth's okay "unchecked" when no floor applies. */
#define _GNU_SOURCE
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "report.h"

static double dbl_of(const struct pf_node *m, const char *key, double dflt)
{
    const struct pf_node *n = pf_node_get(m, key);
    if (n && n->kind == PF_NODE_DBL) return n->d;
    if (n && n->kind == PF_NODE_INT) return (double)n->i;
    return dflt;
}

static long long int_of(const struct pf_node *m, const char *key, long long dflt)
{
    const struct pf_node *n = pf_node_get(m, key);
    return n && n->kind == PF_NODE_INT ? n->i : dflt;
}

static const char *str_or(const char *s, const char *dflt)
{
    return s && *s ? s : dflt;
}

/* nccl-tests' operation names (src/common.cu: test_opnames) for the reducing collectives,
 * "none" for the others (writeBenchmarkLinePreamble's opName). */
static const char *redop_of(const char *op)
{
    return op && (strcmp(op, "allreduce") == 0 || strcmp(op, "reducescatter") == 0) ? "sum"
                                                                                    : "none";
}

static const char *experiment_of(const char *op)
{
    static const struct {
        const char *op, *name;
    } t[] = {{"allreduce", "all_reduce_perf"},
             {"allgather", "all_gather_perf"},
             {"reducescatter", "reduce_scatter_perf"},
             {"alltoall", "alltoall_perf"},
             {"broadcast", "broadcast_perf"}};
    for (size_t i = 0; op && i < PF_ARRAY_LEN(t); i++)
        if (strcmp(op, t[i].op) == 0) return t[i].name;
    return "preflight";
}

int pf_report_results_json(char **out, const struct pf_verdict *v)
{
    *out = NULL;
    json_t *doc = json_object();
    json_object_set_new(doc, "version", json_integer(3));
    json_object_set_new(doc, "start_time", json_string(v->generated_at));
    json_t *args = json_array();
    json_array_append_new(args, json_string("preflight"));
    json_object_set_new(doc, "args", args);
    json_object_set_new(doc, "env", json_array());
    /* the library's ncclGetVersion code, as nccl-tests' test_ncclVersion (check nccl.library) */
    long long nccl_version = 0;
    for (size_t k = 0; k < v->nchecks; k++)
        if (strcmp(v->checks[k].id, "nccl.library") == 0)
            nccl_version = int_of(v->checks[k].evidence, "versionCode", 0);
    json_object_set_new(doc, "nccl_version", json_integer(nccl_version));

    unsigned long long lo = 0, hi = 0;
    json_t *results = json_array();
    double bw_sum = 0;
    int nbw = 0, wrong_total = 0;
    bool floor_known = false, floor_ok = true;
    bool any_nccl = false;
    for (const struct pf_node *c = v->collectives ? v->collectives->first : NULL; c; c = c->next) {
        const char *backend = pf_node_get_str(c, "backend");
        any_nccl = any_nccl || (backend && strcmp(backend, "nccl") == 0);
    }
    /* pass 0: NCCL's; pass 1: the TCP all-reduce */
    for (int pass = 0; pass < 2; pass++)
        for (const struct pf_node *c = v->collectives ? v->collectives->first : NULL; c;
             c = c->next) {
            const char *backend = pf_node_get_str(c, "backend");
            bool tcp = pass == 1;
            if (!backend || strcmp(backend, tcp ? "tcp" : "nccl") != 0) continue;
            const char *op = pf_node_get_str(c, "op");
            long long bytes = int_of(c, "bytes", 0);
            if (bytes > 0 && (lo == 0 || (unsigned long long)bytes < lo))
                lo = (unsigned long long)bytes;
            if ((unsigned long long)bytes > hi) hi = (unsigned long long)bytes;
            const struct pf_node *ok = pf_node_get(c, "correct");
            bool correct = !ok || ok->kind != PF_NODE_BOOL || ok->b;
            json_t *r = json_object();
            json_object_set_new(r, "size", json_integer(bytes));
            json_object_set_new(r, "count", json_integer(bytes / 4));
            json_object_set_new(r, "type", json_string("float"));
            json_object_set_new(r, "redop", json_string(redop_of(op)));
            json_object_set_new(r, "root", json_string("none"));
            json_t *oop = json_object();
            double bus = dbl_of(c, "busbwGBps", 0);
            /* NCCL: timeUs; TCP: timeSeconds, one iteration's, as nccl-tests' time */
            double us = tcp ? dbl_of(c, "timeSeconds", 0) * 1e6 : dbl_of(c, "timeUs", 0);
            json_object_set_new(oop, "time", json_real(us));
            json_object_set_new(oop, "alg_bw", json_real(dbl_of(c, "algbwGBps", 0)));
            json_object_set_new(oop, "bus_bw", json_real(bus));
            json_object_set_new(oop, "nwrong", json_real(correct ? 0 : 1));
            json_object_set_new(r, "out_of_place", oop);
            json_object_set_new(r, "in_place", json_null());
            json_object_set_new(r, "actual_iterations", json_integer(int_of(c, "iterations", 1)));
            json_object_set_new(r, "experiment_name",
                                json_string(tcp ? "preflight_tcp_all_reduce" : experiment_of(op)));
            if (tcp) json_object_set_new(r, "backend", json_string("tcp"));
            json_array_append_new(results, r);
            wrong_total += !correct;
            if (tcp && any_nccl) continue; /* the average is NCCL's */
            bw_sum += bus;
            nbw++;
            double floor = dbl_of(c, "expectedMinBusbwGBps", -1);
            if (floor >= 0) {
                floor_known = true;
                floor_ok = floor_ok && bus >= floor;
            }
        }

    json_t *cfg = json_object();
    json_object_set_new(cfg, "nthreads", json_integer(1));
    json_object_set_new(cfg, "ngpus", json_integer(1));
    json_object_set_new(cfg, "minimum_bytes", json_integer((json_int_t)lo));
    json_object_set_new(cfg, "maximum_bytes", json_integer((json_int_t)hi));
    json_object_set_new(cfg, "step_factor", json_integer(2));
    json_object_set_new(cfg, "warmup_iters", json_integer(0));
    json_object_set_new(cfg, "iterations", json_integer(1));
    json_object_set_new(cfg, "aggregated_iterations", json_integer(1));
    json_object_set_new(cfg, "validation", json_integer(1));
    json_object_set_new(cfg, "graph", json_integer(0));
    json_object_set_new(cfg, "blocking_collectives", json_false());
    json_object_set_new(cfg, "per_iter_timing", json_false());
    json_object_set_new(cfg, "per_iter_skip", json_integer(0));
    json_object_set_new(cfg, "parallel_init", json_false());
    json_t *devs = json_array(), *d = json_object();
    json_object_set_new(d, "rank", json_integer(int_of(v->pod, "rank", 0)));
    json_object_set_new(d, "group", json_integer(0));
    json_object_set_new(d, "pid", json_integer(getpid()));
    json_object_set_new(d, "hostname",
                        json_string(str_or(pf_node_get_str(v->pod, "node"),
                                           str_or(pf_node_get_str(v->pod, "name"), ""))));
    json_object_set_new(d, "device", json_integer(-1));
    json_object_set_new(d, "device_hex", json_string(""));
    json_object_set_new(d, "device_info", json_string(""));
    json_array_append_new(devs, d);
    json_object_set_new(cfg, "devices", devs);
    json_object_set_new(doc, "config", cfg);
    json_object_set_new(doc, "results", results);

    json_t *oob = json_object();
    json_object_set_new(oob, "count", json_integer(wrong_total));
    json_object_set_new(oob, "okay", json_boolean(wrong_total == 0));
    json_object_set_new(doc, "out_of_bounds", oob);
    json_t *avg = json_object();
    json_object_set_new(avg, "bandwidth", json_real(nbw ? bw_sum / nbw : 0));
    json_object_set_new(avg, "okay",
                        floor_known ? json_boolean(floor_ok) : json_string("unchecked"));
    json_object_set_new(doc, "average_bus_bandwidth", avg);
    char now[32];
    pf_utc_timestamp(now, sizeof(now));
    json_object_set_new(doc, "end_time", json_string(now));

    *out = json_dumps(doc, JSON_PRESERVE_ORDER | JSON_INDENT(2));
    json_decref(doc);
    return *out ? 0 : pf_err_set(PF_ERR, "results: cannot encode JSON");
}

void pf_report_results_stage(struct pf_ctx *ctx, pf_policy_fn policy, void *policy_arg)
{
    const char *path = ctx->config->report_results_file;
    if (!path[0]) return;
    char *text = NULL;
    int r = pf_report_results_json(&text, ctx->verdict);
    if (r == 0) r = pf_file_replace(path, text, strlen(text), 0644);
    free(text);
    if (r < 0) {
        struct pf_check *c = pf_verdict_add_check(ctx->verdict, "report.metrics");
        pf_check_add_finding(c, "results-write-failed", PF_WARN, NULL, "%s", pf_err_msg());
        pf_verdict_finalize(ctx->verdict, policy, policy_arg);
    }
}
