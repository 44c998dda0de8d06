/* Node marking: after a failure of class "node", preflight labels or taints its own node so
 * that the next attempt of the job is scheduled elsewhere (config report.markNode). Through
 * the same API-server exchange as the Event (pkg/kapi); bounded in time; every failure is a
 * warn in the check report.node, never a gate failure. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../kapi/kapi.h"
#include "report.h"

#ifndef PF_STATIC
static void node_finding(struct pf_check *out, const struct pf_kapi_res *res,
                         const struct pf_kapi *a, const char *what, const char *node)
{
    if (res->curl_code == PF_CURLE_OPERATION_TIMEDOUT)
        pf_check_add_finding(out, "api-timeout", PF_WARN, NULL,
                             "%s %s: the API server at %s did not answer in time (%s)", what, node,
                             a->base, res->error);
    else if (res->curl_code != PF_CURLE_OK)
        pf_check_add_finding(out, "api-unreachable", PF_WARN, NULL, "%s %s: cannot reach %s: %s",
                             what, node, a->base, res->error);
    else if (res->status == 401 || res->status == 403)
        pf_check_add_finding(out, "node-forbidden", PF_WARN, NULL, "%s %s: HTTP %ld", what, node,
                             res->status);
    else
        pf_check_add_finding(out, "api-error", PF_WARN, NULL, "%s %s: HTTP %ld", what, node,
                             res->status);
}

/* The API server's address, token and CA, as for the Event; false (with a finding or a
 * skip) when there are none. */
static bool api_open(struct pf_kapi *a, struct pf_check *out, struct pf_ctx *ctx)
{
    int r = pf_kapi_open(a, &ctx->env, &ctx->host);
    if (r == PF_ENOENT) {
        pf_check_skip(out, "%s", pf_err_msg());
        return false;
    }
    if (pf_kapi_load(&ctx->env) < 0) {
        pf_kapi_close(a);
        pf_check_skip(out, "libcurl cannot be loaded (%s)", pf_err_msg());
        return false;
    }
    if (r < 0) {
        pf_check_add_finding(out, "no-service-account", PF_WARN, NULL, "%s", pf_err_msg());
        return false;
    }
    return true;
}
#endif

void pf_report_mark_node(struct pf_check *out, struct pf_ctx *ctx, const char *failure_class,
                         const char *node, const char *code, double budget_s)
{
    int how = ctx->config->report_mark_node;
    if (how == PF_MARK_NODE_NONE || !failure_class || strcmp(failure_class, "node") != 0) {
        pf_check_skip(out, "no failure of class node");
        return;
    }
    if (!node || !*node || !code || !*code) {
        pf_check_skip(out, "the node's name is unknown (set NODE_NAME from spec.nodeName)");
        return;
    }
#ifdef PF_STATIC
    (void)budget_s;
    pf_check_skip(out, "static build: no libcurl to patch the node");
#else
    struct pf_kapi a;
    if (!api_open(&a, out, ctx)) return;
    double deadline = pf_now() + budget_s;
    char path[400];
    snprintf(path, sizeof(path), "/api/v1/nodes/%s", node);
    struct pf_buf body;
    struct pf_kapi_res res;
    pf_buf_init(&body, PF_BUF_HTTP);
    bool done = false;
    if (how == PF_MARK_NODE_LABEL) {
        pf_report_node_label_patch(&body, code);
        pf_kapi_request(&res, &a, "PATCH", path, "application/merge-patch+json", body.data,
                        deadline);
        done = res.curl_code == PF_CURLE_OK && res.status >= 200 && res.status < 300;
        if (!done) node_finding(out, &res, &a, "labelling node", node);
        pf_buf_free(&res.body);
    } else {
        /* a 409 means the node changed between GET and PATCH: read it again, once */
        for (int attempt = 0; attempt < 2 && !done; attempt++) {
            pf_kapi_request(&res, &a, "GET", path, "application/json", "", deadline);
            bool got = res.curl_code == PF_CURLE_OK && res.status == 200 && res.body.len > 0;
            pf_buf_reset(&body);
            if (!got || pf_report_node_taint_patch(&body, res.body.data, code) < 0) {
                if (got)
                    pf_check_add_finding(out, "api-error", PF_WARN, NULL,
                                         "reading node %s: no metadata.resourceVersion", node);
                else
                    node_finding(out, &res, &a, "reading node", node);
                pf_buf_free(&res.body);
                break;
            }
            pf_buf_free(&res.body);
            pf_kapi_request(&res, &a, "PATCH", path, "application/strategic-merge-patch+json",
                            body.data, deadline);
            done = res.curl_code == PF_CURLE_OK && res.status >= 200 && res.status < 300;
            if (!done && (res.status != 409 || attempt == 1))
                node_finding(out, &res, &a, "tainting node", node);
            bool retry = res.status == 409;
            pf_buf_free(&res.body);
            if (!retry) break;
        }
    }
    pf_buf_free(&body);
    free(a.token);
    pf_node_set_str(out->evidence, "node", node);
    pf_node_set_str(out->evidence, "mark", how == PF_MARK_NODE_LABEL ? "label" : "taint");
    if (done)
        pf_check_set_message(out,
                             how == PF_MARK_NODE_LABEL ? "node %s labelled %s=%s"
                                                       : "node %s tainted %s=%s:NoSchedule",
                             node, PF_REPORT_NODE_KEY, code);
#endif
}

void pf_report_node_stage(struct pf_ctx *ctx, pf_policy_fn policy, void *policy_arg,
                          const char *failure_class, double api_s)
{
    struct pf_verdict *v = ctx->verdict;
    if (v->verdict != PF_FAIL || !failure_class || strcmp(failure_class, "node") != 0) return;
    const char *code = NULL;
    for (size_t i = 0; i < v->nchecks && !code; i++)
        for (size_t j = 0; j < v->checks[i].nfindings && !code; j++)
            if (v->checks[i].findings[j].status == PF_FAIL &&
                v->checks[i].findings[j].cls == PF_CLASS_NODE)
                code = v->checks[i].findings[j].code;
    double budget = pf_ctx_left(ctx, 0);
    if (budget > api_s) budget = api_s;
    char code_copy[PF_CODE_MAX];
    snprintf(code_copy, sizeof(code_copy), "%s", code ? code : "");
    double t = pf_now();
    struct pf_check *c = pf_verdict_add_check(v, "report.node");
    pf_report_mark_node(c, ctx, failure_class, pf_node_get_str(v->pod, "node"), code_copy, budget);
    c->seconds = pf_now() - t;
    pf_verdict_finalize(v, policy, policy_arg);
}
