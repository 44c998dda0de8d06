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

/* ---- a minimal reader of the API server's JSON: spans of values, no allocation */

static const char *ws(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    return p;
}

/* p at a value: returns just past it, or NULL when malformed. */
static const char *skip_value(const char *p, const char *end)
{
    p = ws(p, end);
    if (p >= end) return NULL;
    if (*p == '"') {
        for (p++; p < end; p++) {
            if (*p == '\\') {
                p++;
                continue;
            }
            if (*p == '"') return p + 1;
        }
        return NULL;
    }
    if (*p == '{' || *p == '[') {
        char close = *p == '{' ? '}' : ']';
        p = ws(p + 1, end);
        if (p < end && *p == close) return p + 1;
        for (;;) {
            if (close == '}') { /* "key": */
                p = skip_value(p, end);
                if (!p) return NULL;
                p = ws(p, end);
                if (p >= end || *p != ':') return NULL;
                p++;
            }
            p = skip_value(p, end);
            if (!p) return NULL;
            p = ws(p, end);
            if (p >= end) return NULL;
            if (*p == close) return p + 1;
            if (*p != ',') return NULL;
            p++;
        }
    }
    const char *q = p;
    while (q < end && (*q == '-' || *q == '+' || *q == '.' || (*q >= '0' && *q <= '9') ||
                       (*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z')))
        q++;
    return q > p ? q : NULL;
}

/* obj: the span of an object; sets *v, *vend to the span of member key's value. */
static bool member(const char *obj, const char *end, const char *key, const char **v,
                   const char **vend)
{
    const char *p = ws(obj, end);
    if (p >= end || *p != '{') return false;
    p = ws(p + 1, end);
    size_t klen = strlen(key);
    while (p < end && *p == '"') {
        const char *k = p + 1;
        const char *kend = skip_value(p, end);
        if (!kend) return false;
        p = ws(kend, end);
        if (p >= end || *p != ':') return false;
        const char *val = ws(p + 1, end);
        const char *vq = skip_value(val, end);
        if (!vq) return false;
        if ((size_t)(kend - 1 - k) == klen && memcmp(k, key, klen) == 0) {
            *v = val;
            *vend = vq;
            return true;
        }
        p = ws(vq, end);
        if (p < end && *p == ',') p = ws(p + 1, end);
    }
    return false;
}

int pf_report_node_label_patch(struct pf_buf *out, const char *code)
{
    int r = pf_buf_addf(out, "{\"metadata\":{\"labels\":{\"%s\":", PF_REPORT_NODE_KEY);
    if (r == 0) r = pf_report_json_str(out, code);
    if (r == 0) r = pf_buf_addf(out, "}}}");
    return r;
}

int pf_report_node_taint_patch(struct pf_buf *out, const char *node_json, const char *code)
{
    const char *end = node_json + strlen(node_json);
    const char *meta, *meta_end, *rv, *rv_end, *spec, *spec_end, *taints, *taints_end;
    if (!member(node_json, end, "metadata", &meta, &meta_end) ||
        !member(meta, meta_end, "resourceVersion", &rv, &rv_end) || *rv != '"')
        return -1;
    int r = pf_buf_addf(out, "{\"metadata\":{\"resourceVersion\":%.*s},\"spec\":{\"taints\":[",
                        (int)(rv_end - rv), rv);
    bool first = true;
    if (r == 0 && member(node_json, end, "spec", &spec, &spec_end) &&
        member(spec, spec_end, "taints", &taints, &taints_end) && *taints == '[') {
        const char *p = ws(taints + 1, taints_end);
        while (r == 0 && p < taints_end && *p == '{') {
            const char *e = skip_value(p, taints_end);
            if (!e) break;
            const char *k, *kend;
            bool ours = member(p, e, "key", &k, &kend) &&
                        (size_t)(kend - k) == strlen(PF_REPORT_NODE_KEY) + 2 &&
                        memcmp(k + 1, PF_REPORT_NODE_KEY, strlen(PF_REPORT_NODE_KEY)) == 0;
            if (!ours) { /* kept exactly as the API server gave it */
                r = pf_buf_addf(out, "%s%.*s", first ? "" : ",", (int)(e - p), p);
                first = false;
            }
            p = ws(e, taints_end);
            if (p < taints_end && *p == ',') p = ws(p + 1, taints_end);
        }
    }
    if (r == 0)
        r = pf_buf_addf(out,
                        "%s{\"effect\":\"NoSchedule\",\"key\":\"%s\",\"value\":", first ? "" : ",",
                        PF_REPORT_NODE_KEY);
    if (r == 0) r = pf_report_json_str(out, code);
    if (r == 0) r = pf_buf_addf(out, "}]}}");
    return r;
}

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
    const char *why = NULL;
    int r = pf_kapi_open(a, &ctx->env, &ctx->host);
    if (r == PF_ENOENT) {
        pf_check_skip(out, "%s", pf_err_msg());
        return false;
    }
    if (!pf_kapi_load(&ctx->env, &why)) {
        pf_kapi_close(a);
        pf_check_skip(out, "libcurl cannot be loaded (%s)", why);
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
    pf_buf_init(&body, 64 << 10);
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
            bool got = res.curl_code == PF_CURLE_OK && res.status == 200 && res.body.data;
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
                          const char *failure_class)
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
    if (budget > PF_REPORT_K8S_BUDGET_S) budget = PF_REPORT_K8S_BUDGET_S;
    char code_copy[PF_CODE_MAX];
    snprintf(code_copy, sizeof(code_copy), "%s", code ? code : "");
    double t = pf_now();
    struct pf_check *c = pf_verdict_add_check(v, "report.node");
    pf_report_mark_node(c, ctx, failure_class, pf_node_get_str(v->pod, "node"), code_copy, budget);
    c->seconds = pf_now() - t;
    pf_verdict_finalize(v, policy, policy_arg);
}
