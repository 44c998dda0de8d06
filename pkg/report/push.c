/* The push to a Prometheus Pushgateway: the run's metrics (the text exposition of metrics.c)
 * PUT to /metrics/job/preflight/namespace/<ns>/pod/<pod>/node/<node>, the grouping key the
 * Pushgateway README (github.com/prometheus/pushgateway, README.md, "URL") documents for
 * batch jobs: one group per pod, replaced whole by the pod's next push. Through the libcurl
 * the Kubernetes reporter loads (pkg/kapi), bounded in time and attempts; a failure is a
 * warn of check `report.metrics`, never a gate failure. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../kapi/kapi.h"
#include "report.h"

/* RFC 4648 section 5, the URL and filename safe alphabet, with padding (the README asks for
 * at least one '=' on an empty value). */
static void base64url(struct pf_buf *out, const char *s)
{
    size_t n = strlen(s);
    if (n == 0)
        pf_buf_add(out, "=", 1);
    else
        pf_buf_base64(out, s, n, true);
}

/* One /<name>/<value> pair: plain when the value is made of URI-unreserved characters
 * (every Kubernetes name is), else /<name>@base64/<value> (a '/', an empty value, anything
 * else). */
static void path_label(struct pf_buf *out, const char *name, const char *value)
{
    const char *v = value ? value : "";
    bool plain = *v != '\0';
    for (const char *p = v; plain && *p; p++)
        plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                *p == '-' || *p == '.' || *p == '_' || *p == '~';
    if (plain) {
        pf_buf_addf(out, "/%s/%s", name, v);
        return;
    }
    pf_buf_addf(out, "/%s@base64/", name);
    base64url(out, v);
}

int pf_report_push_url(struct pf_buf *out, const char *base, const char *ns, const char *pod,
                       const char *node)
{
    return pf_report_push_url_job(out, base, PF_REPORT_PUSH_JOB, ns, pod, node);
}

int pf_report_push_url_job(struct pf_buf *out, const char *base, const char *job, const char *ns,
                           const char *pod, const char *node)
{
    size_t n = strlen(base);
    while (n > 0 && base[n - 1] == '/')
        n--;
    pf_buf_add(out, base, n);
    pf_buf_add(out, "/metrics", 8);
    path_label(out, "job", job);
    path_label(out, "namespace", ns);
    path_label(out, "pod", pod);
    path_label(out, "node", node);
    return out->len < out->max ? 0 : PF_ETOOBIG;
}

#ifndef PF_STATIC
/* A credential file as Kubernetes mounts a secret: its content, trailing newline removed. */
static int read_secret(char *out, size_t n, const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return pf_err_set(PF_ERR, "%s: %s", path, strerror(errno));
    size_t len = 0;
    ssize_t r = 1;
    while (len + 1 < n && (r = read(fd, out + len, n - 1 - len)) > 0)
        len += (size_t)r;
    int e = errno;
    close(fd);
    out[len] = '\0';
    if (r < 0) return pf_err_set(PF_ERR, "%s: %s", path, strerror(e));
    if (len + 1 >= n) return pf_err_set(PF_ETOOBIG, "%s: over %zu bytes", path, n - 1);
    pf_trim(out);
    if (!*out) return pf_err_set(PF_ERR, "%s: empty", path);
    return 0;
}

static void nap(double s)
{
    if (s <= 0) return;
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* Worth another attempt: no answer at all before the deadline passed is not (the budget is
 * spent), a refused connection or a 5xx/429 is. */
static bool retryable(const struct pf_kapi_res *res)
{
    if (res->curl_code == PF_CURLE_OPERATION_TIMEDOUT) return false;
    if (res->curl_code != PF_CURLE_OK) return true;
    return res->status >= 500 || res->status == 429;
}

/* A reply body in one line, for the finding (the Pushgateway explains a 400 there, one error
 * a line): line breaks become "; ", other control and non-ASCII bytes '?'. */
static void first_line(char *out, size_t n, const char *body)
{
    size_t o = 0;
    for (size_t i = 0; body && body[i] && o + 3 < n; i++) {
        unsigned char ch = (unsigned char)body[i];
        if (ch == '\n') {
            while (body[i + 1] == '\n' || body[i + 1] == '\t' || body[i + 1] == ' ')
                i++;
            if (body[i + 1]) out[o++] = ';', out[o++] = ' ';
        } else {
            out[o++] = (ch >= 0x20 && ch < 0x7f) ? (char)ch : '?';
        }
    }
    out[o] = '\0';
}

static void push_finding(struct pf_check *out, const struct pf_kapi_res *res, const char *url,
                         int attempts, double budget)
{
    char detail[400];
    first_line(detail, sizeof(detail), pf_buf_str(&res->body));
    if (res->curl_code == PF_CURLE_OPERATION_TIMEDOUT)
        pf_check_add_finding(out, "push-timeout", PF_WARN, NULL,
                             "push to the Pushgateway at %s: no answer within the %.1f s budget "
                             "(%s)",
                             url, budget, res->error);
    else if (res->curl_code != PF_CURLE_OK)
        pf_check_add_finding(out, "push-unreachable", PF_WARN, NULL,
                             "push to the Pushgateway at %s failed after %d attempt%s: %s", url,
                             attempts, attempts == 1 ? "" : "s", res->error);
    else
        pf_check_add_finding(out, "push-failed", PF_WARN, NULL,
                             "push to the Pushgateway at %s: HTTP %ld after %d attempt%s%s%s", url,
                             res->status, attempts, attempts == 1 ? "" : "s", detail[0] ? ": " : "",
                             detail);
}
#endif

void pf_report_push(struct pf_check *out, struct pf_ctx *ctx, const char *base,
                    const struct pf_buf *body, double budget_s)
{
    pf_report_push_job(out, ctx, base, PF_REPORT_PUSH_JOB, body, budget_s);
}

void pf_report_push_job(struct pf_check *out, struct pf_ctx *ctx, const char *base, const char *job,
                        const struct pf_buf *body, double budget_s)
{
    const struct pf_config *cfg = ctx->config;
    const struct pf_verdict *v = ctx->verdict;
    struct pf_buf url;
    pf_buf_init(&url, 4096);
    pf_report_push_url_job(&url, base, job, pf_node_get_str(v->pod, "namespace"),
                           pf_node_get_str(v->pod, "name"), pf_node_get_str(v->pod, "node"));
    pf_node_set_str(out->evidence, "pushgateway", pf_buf_str(&url));
#ifdef PF_STATIC
    (void)cfg;
    (void)body;
    (void)budget_s;
    pf_check_add_finding(out, "push-unreachable", PF_WARN, NULL,
                         "push to the Pushgateway at %s: the static build has no libcurl; use the "
                         "glibc build of preflight",
                         pf_buf_str(&url));
#else
    if (pf_kapi_load(&ctx->env) < 0) {
        pf_check_add_finding(out, "push-unreachable", PF_WARN, NULL,
                             "push to the Pushgateway at %s: libcurl cannot be loaded (%s)",
                             pf_buf_str(&url), pf_err_msg());
        pf_buf_free(&url);
        return;
    }
    if (budget_s <= 0.1) {
        pf_check_add_finding(out, "push-timeout", PF_WARN, NULL,
                             "push to the Pushgateway at %s: no time left before the run's "
                             "deadline",
                             pf_buf_str(&url));
        pf_buf_free(&url);
        return;
    }
    struct pf_kapi a;
    memset(&a, 0, sizeof(a));
    /* the secrets live on the stack of this call only, and are wiped before it returns */
    char token[8192] = "", user[1024] = "", pass[1024] = "";
    const char *bad = NULL;
    if (cfg->report_push_bearer_file[0] &&
        read_secret(token, sizeof(token), cfg->report_push_bearer_file) < 0)
        bad = "bearerTokenFile";
    else if (cfg->report_push_username_file[0] &&
             (read_secret(user, sizeof(user), cfg->report_push_username_file) < 0 ||
              read_secret(pass, sizeof(pass), cfg->report_push_password_file) < 0))
        bad = "usernameFile/passwordFile";
    if (bad) {
        pf_check_add_finding(out, "push-credentials", PF_WARN, NULL,
                             "push to the Pushgateway at %s not attempted: "
                             "report.pushgatewayAuth.%s: %s",
                             pf_buf_str(&url), bad, pf_err_msg());
        goto out;
    }
    snprintf(a.base, sizeof(a.base), "%s", pf_buf_str(&url));
    snprintf(a.cafile, sizeof(a.cafile), "%s", cfg->report_push_ca_file);
    if (token[0]) a.token = token;
    if (user[0]) a.user = user, a.password = pass;

    double t0 = pf_now(), deadline = t0 + budget_s, backoff = 0.2;
    struct pf_kapi_res res;
    memset(&res, 0, sizeof(res));
    int attempt = 0;
    for (;;) {
        attempt++;
        pf_kapi_request(&res, &a, "PUT", "", "text/plain; version=0.0.4; charset=utf-8",
                        pf_buf_str(body), deadline);
        bool ok = res.curl_code == PF_CURLE_OK && res.status >= 200 && res.status < 300;
        if (ok || attempt >= PF_REPORT_PUSH_ATTEMPTS || !retryable(&res) ||
            pf_now() + backoff + 0.1 >= deadline)
            break;
        pf_buf_free(&res.body);
        nap(backoff);
        backoff *= 2;
    }
    pf_node_set_int(out->evidence, "attempts", attempt);
    pf_node_set_dbl(out->evidence, "pushSeconds", pf_now() - t0);
    if (res.status) pf_node_set_int(out->evidence, "httpStatus", res.status);
    if (res.curl_code == PF_CURLE_OK && res.status >= 200 && res.status < 300)
        pf_check_set_message(out, "metrics pushed to %s (%zu bytes, HTTP %ld)", pf_buf_str(&url),
                             body->len, res.status);
    else
        push_finding(out, &res, pf_buf_str(&url), attempt, budget_s);
    pf_buf_free(&res.body);
out:
    memset(token, 0, sizeof(token));
    memset(pass, 0, sizeof(pass));
#endif
    pf_buf_free(&url);
}

const char *pf_report_pushgateway_url(const struct pf_ctx *ctx)
{
    return ctx->config->report_pushgateway[0] ? ctx->config->report_pushgateway : NULL;
}

void pf_report_push_stage(struct pf_ctx *ctx, pf_policy_fn policy, void *policy_arg, double t0,
                          double budget)
{
    const char *base = pf_report_pushgateway_url(ctx);
    if (!base) return;
    struct pf_verdict *v = ctx->verdict;
    v->duration_seconds = pf_now() - t0;
    pf_verdict_finalize(v, policy, policy_arg);
    double t = pf_now();
    /* the metrics of the verdict as it stands, before the push's own check joins it */
    struct pf_buf body;
    pf_buf_init(&body, 8 << 20);
    bool fits = pf_report_metrics_text(&body, v) == 0;
    struct pf_check *c = pf_verdict_add_check(v, "report.metrics");
    if (fits)
        pf_report_push(c, ctx, base, &body, budget);
    else
        pf_check_add_finding(c, "push-failed", PF_WARN, NULL,
                             "push to the Pushgateway at %s: the metrics are over %zu bytes", base,
                             body.max);
    pf_buf_free(&body);
    c->seconds += pf_now() - t;
    pf_verdict_finalize(v, policy, policy_arg);
}
