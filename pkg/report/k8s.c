/* Kubernetes reporting: an Event on the pod (core/v1 events API) and the annotation
 * preflight.dev/verdict (JSON merge patch), with the pod's service-account token, through
 * libcurl loaded at run time (pkg/kapi). Bounded in time; every failure is a warn, never a gate
 * failure. */
#define _GNU_SOURCE
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../kapi/kapi.h"
#include "report.h"

#ifndef PF_STATIC
/* The "message" of a Kubernetes Status body (metav1.Status), cut to n with line breaks and
 * tabs as spaces, or "" when none. */
static void status_message(char *out, size_t n, const char *body)
{
    out[0] = '\0';
    json_t *st = json_loads(body, 0, NULL);
    const char *m = json_string_value(json_object_get(st, "message"));
    if (m) snprintf(out, n, "%s", m);
    for (char *p = out; *p; p++)
        if (*p == '\n' || *p == '\t' || *p == '\r') *p = ' ';
    json_decref(st);
}

/* Adds the finding for a failed exchange; what is "posting the Event" or "patching the pod". */
static void finding_for(struct pf_check *out, const struct pf_kapi_res *res, const char *what,
                        const char *forbidden_code, const struct pf_kapi *a, const char *ns,
                        const char *pod, double budget_s)
{
    char detail[600];
    status_message(detail, sizeof(detail), pf_buf_str(&res->body));
    if (res->curl_code == PF_CURLE_OPERATION_TIMEDOUT) {
        pf_check_add_finding(out, "api-timeout", PF_WARN, NULL,
                             "%s: the API server at %s did not answer within the %.0f s budget "
                             "(%s)",
                             what, a->base, budget_s, res->error);
    } else if (res->curl_code != PF_CURLE_OK) {
        pf_check_add_finding(out, "api-unreachable", PF_WARN, NULL, "%s: cannot reach %s: %s", what,
                             a->base, res->error);
    } else if (res->status == 401 || res->status == 403) {
        char remedy[512];
        if (strcmp(forbidden_code, "events-forbidden") == 0)
            snprintf(remedy, sizeof(remedy),
                     "give the pod's ServiceAccount a Role with verbs [create] on resource "
                     "events in namespace %s (manifests/rbac.yaml), or set report.events: false",
                     ns);
        else
            snprintf(remedy, sizeof(remedy),
                     "give the pod's ServiceAccount a Role with verbs [get, patch] on resource "
                     "pods in namespace %s (manifests/rbac.yaml), or set report.annotate: false",
                     ns);
        pf_check_add_finding(out, forbidden_code, PF_WARN, res->status == 401 ? NULL : remedy,
                             "%s %s/%s: HTTP %ld%s%s", what, ns, pod, res->status,
                             detail[0] ? ": " : "", detail);
    } else {
        pf_check_add_finding(out, "api-error", PF_WARN, NULL, "%s %s/%s: HTTP %ld%s%s", what, ns,
                             pod, res->status, detail[0] ? ": " : "", detail);
    }
}

static bool http_ok(const struct pf_kapi_res *res)
{
    return res->curl_code == PF_CURLE_OK && res->status >= 200 && res->status < 300;
}

/* The Event and the annotation as the config asks, each a finding when it fails; the
 * check's message says what was done. */
static void post_and_patch(struct pf_check *out, const struct pf_ctx *ctx, const struct pf_kapi *a,
                           const struct pf_report_pod *who, double deadline, double budget_s)
{
    const struct pf_config *cfg = ctx->config;
    const struct pf_verdict *v = ctx->verdict;
    char path[800], ts[32];
    struct pf_buf body;
    struct pf_kapi_res res;
    pf_buf_init(&body, PF_BUF_HTTP);
    pf_utc_timestamp(ts, sizeof(ts));
    bool posted = false, patched = false;

    if (cfg->report_events) {
        pf_report_event_body(&body, v, who, ts);
        snprintf(path, sizeof(path), "/api/v1/namespaces/%s/events", who->ns);
        double t = pf_now();
        pf_kapi_request(&res, a, "POST", path, "application/json", body.len ? body.data : "{}",
                        deadline);
        pf_node_set_dbl(out->evidence, "eventSeconds", pf_now() - t);
        if (res.status) pf_node_set_int(out->evidence, "eventHttpStatus", res.status);
        if (http_ok(&res)) {
            posted = true;
            pf_node_set_str(out->evidence, "eventReason", pf_report_event_reason(v->verdict));
        } else {
            finding_for(out, &res, "posting the Event on pod", "events-forbidden", a, who->ns,
                        who->name, budget_s);
        }
        pf_buf_free(&res.body);
    }
    if (cfg->report_annotate) {
        pf_buf_reset(&body);
        pf_report_annotation_patch(&body, v);
        snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods/%s", who->ns, who->name);
        double t = pf_now();
        pf_kapi_request(&res, a, "PATCH", path, "application/merge-patch+json",
                        body.len ? body.data : "{}", deadline);
        pf_node_set_dbl(out->evidence, "annotateSeconds", pf_now() - t);
        if (res.status) pf_node_set_int(out->evidence, "annotateHttpStatus", res.status);
        if (http_ok(&res))
            patched = true;
        else
            finding_for(out, &res, "annotating pod", "annotate-forbidden", a, who->ns, who->name,
                        budget_s);
        pf_buf_free(&res.body);
    }
    pf_buf_free(&body);

    char msg[600] = "";
    if (posted)
        snprintf(msg, sizeof(msg), "Event %s posted on pod %s/%s",
                 pf_report_event_reason(v->verdict), who->ns, who->name);
    if (patched) {
        size_t l = strlen(msg);
        snprintf(msg + l, sizeof(msg) - l, "%sannotation %s set on pod %s/%s", l ? "; " : "",
                 PF_REPORT_ANNOTATION, who->ns, who->name);
    }
    if (msg[0]) pf_check_set_message(out, "%s", msg);
}
#endif /* !PF_STATIC */

void pf_report_kubernetes(struct pf_check *out, struct pf_ctx *ctx, double budget_s)
{
    const struct pf_config *cfg = ctx->config;
    const struct pf_verdict *v = ctx->verdict;
    if (!cfg->report_events && !cfg->report_annotate) {
        pf_check_skip(out, "report.events and report.annotate are off");
        return;
    }
#ifdef PF_STATIC
    (void)v;
    (void)budget_s;
    pf_check_skip(out, "static build: no dlopen, so no libcurl; use the glibc build of "
                       "preflight to post Events");
    return;
#else
    const char *host = pf_env_get(&ctx->env, "KUBERNETES_SERVICE_HOST");
    if (!host || !*host) {
        pf_check_skip(out, "KUBERNETES_SERVICE_HOST is unset: not running in a Kubernetes pod");
        return;
    }
    if (pf_kapi_load(&ctx->env) < 0) {
        pf_check_skip(out,
                      "libcurl cannot be loaded (%s); install libcurl4 in the image or "
                      "run preflight's own image",
                      pf_err_msg());
        return;
    }
    if (budget_s <= 0.1) {
        pf_check_add_finding(out, "api-timeout", PF_WARN, NULL,
                             "no time left before the run's deadline to report to Kubernetes");
        return;
    }
    double deadline = pf_now() + budget_s;
    const char *port = pf_env_get(&ctx->env, "KUBERNETES_SERVICE_PORT");
    struct pf_kapi a;
    memset(&a, 0, sizeof(a));
    snprintf(a.base, sizeof(a.base), strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s", host,
             port && *port ? port : "443");
    pf_node_set_str(out->evidence, "apiServer", a.base);

    size_t tlen = 0;
    int r = pf_host_read_all(&a.token, &tlen, 64 << 10, &ctx->host, "%s/token", PF_REPORT_SA_DIR);
    if (r < 0 || tlen == 0) {
        pf_check_add_finding(out, "no-service-account", PF_WARN, NULL,
                             "no service-account token at %s/token: the pod cannot authenticate "
                             "to the API server",
                             PF_REPORT_SA_DIR);
        free(a.token);
        return;
    }
    pf_trim(a.token);
    if (pf_host_exists(&ctx->host, "%s/ca.crt", PF_REPORT_SA_DIR))
        pf_host_path(a.cafile, sizeof(a.cafile), &ctx->host, "%s/ca.crt", PF_REPORT_SA_DIR);

    /* the pod: POD_NAME / POD_NAMESPACE as recorded in the verdict, else the namespace the
     * service account lives in */
    char ns_file[256] = "";
    const char *pod = pf_node_get_str(v->pod, "name");
    const char *ns = pf_node_get_str(v->pod, "namespace");
    if (!ns || !*ns) {
        if (pf_host_read(ns_file, sizeof(ns_file), &ctx->host, "%s/namespace", PF_REPORT_SA_DIR) >
            0)
            ns = pf_trim(ns_file);
        else
            ns = "default";
    }
    if (!pod || !*pod) {
        pf_check_skip(out, "the pod's name is unknown (set POD_NAME from metadata.name)");
        free(a.token);
        return;
    }
    struct pf_report_pod who = {
        .name = pod,
        .ns = ns,
        .uid = pf_env_get(&ctx->env, "POD_UID"),
        .node = pf_node_get_str(v->pod, "node"),
    };
    post_and_patch(out, ctx, &a, &who, deadline, budget_s);
    free(a.token);
#endif
}

void pf_report_stage(struct pf_ctx *ctx, pf_policy_fn policy, void *policy_arg, double t0,
                     const struct pf_report_waits *w)
{
    const struct pf_config *cfg = ctx->config;
    struct pf_verdict *v = ctx->verdict;
    v->duration_seconds = pf_now() - t0;
    pf_verdict_finalize(v, policy, policy_arg);
    if (cfg->report_events || cfg->report_annotate) {
        /* within the stage's deadline: the rest is the verdict's */
        double budget = pf_ctx_left(ctx, 0);
        if (budget > w->api_s) budget = w->api_s;
        double t = pf_now();
        struct pf_check *c = pf_verdict_add_check(v, "report.kubernetes");
        pf_report_kubernetes(c, ctx, budget);
        c->seconds = pf_now() - t;
        pf_verdict_finalize(v, policy, policy_arg);
    }
    if (cfg->report_mark_node != PF_MARK_NODE_NONE)
        pf_report_node_stage(ctx, policy, policy_arg, pf_class_name(v->failure_class), w->api_s);
    if (cfg->report_metrics_file[0]) {
        v->duration_seconds = pf_now() - t0;
        if (pf_report_metrics_write(v, cfg->report_metrics_file) < 0) {
            struct pf_check *c = pf_verdict_add_check(v, "report.metrics");
            pf_check_add_finding(c, "metrics-write-failed", PF_WARN, NULL, "%s", pf_err_msg());
            pf_verdict_finalize(v, policy, policy_arg);
        }
    }
    pf_report_results_stage(ctx, policy, policy_arg);
    pf_report_push_stage(ctx, policy, policy_arg, t0, w->push_s);
}
