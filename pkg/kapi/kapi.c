/* The Kubernetes API server from inside a pod (kapi.h). */
#define _GNU_SOURCE
#include "kapi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef PF_STATIC
int pf_kapi_load(const struct pf_env *env)
{
    (void)env;
    return pf_err_set(PF_EUNAVAIL, "static build: no dlopen, so no libcurl");
}
#else
static const struct pf_dl_curl *curl; /* set by pf_kapi_load */

int pf_kapi_load(const struct pf_env *env)
{
    /* the run's own copy of the environment names the library, as the process's would */
    const char *path = pf_env_get(env, PF_DL_CURL_ENV);
    if (!path || !*path) path = pf_env_get(env, PF_DL_CURL_ENV_ALIAS);
    int r = pf_dl_curl_at(path, &curl);
    return r < 0 ? r : 0;
}
#endif

int pf_kapi_open(struct pf_kapi *a, const struct pf_env *env, const struct pf_host *h)
{
    memset(a, 0, sizeof(*a));
    const char *host = pf_env_get(env, "KUBERNETES_SERVICE_HOST");
    const char *port = pf_env_get(env, "KUBERNETES_SERVICE_PORT");
    if (!host || !*host)
        return pf_err_set(PF_ENOENT,
                          "KUBERNETES_SERVICE_HOST is unset: not running in a Kubernetes pod");
    snprintf(a->base, sizeof(a->base), strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s",
             host, port && *port ? port : "443");
    size_t tlen = 0;
    if (pf_host_read_all(&a->token, &tlen, 64 << 10, h, "%s/token", PF_KAPI_SA_DIR) < 0 ||
        tlen == 0) {
        free(a->token);
        a->token = NULL;
        return pf_err_set(PF_EUNAVAIL, "no service-account token at %s/token", PF_KAPI_SA_DIR);
    }
    pf_trim(a->token);
    if (pf_host_exists(h, "%s/ca.crt", PF_KAPI_SA_DIR))
        pf_host_path(a->cafile, sizeof(a->cafile), h, "%s/ca.crt", PF_KAPI_SA_DIR);
    return 0;
}

void pf_kapi_close(struct pf_kapi *a)
{
    if (a->token) {
        memset(a->token, 0, strlen(a->token));
        free(a->token);
    }
    a->token = NULL;
}

size_t pf_kapi_redact(char *s, size_t len, const char *secret)
{
    size_t n = secret ? strlen(secret) : 0;
    if (n == 0) return len;
    size_t r = 0, w = 0;
    while (r < len) {
        if (r + n <= len && memcmp(s + r, secret, n) == 0) {
            size_t m = n < 3 ? n : 3;
            memset(s + w, '*', m);
            w += m;
            r += n;
        } else {
            s[w++] = s[r++];
        }
    }
    if (w < len) s[w] = '\0';
    return w;
}

#ifdef PF_STATIC
void pf_kapi_request_max(struct pf_kapi_res *res, const struct pf_kapi *a, const char *method,
                         const char *path, const char *content_type, const char *body,
                         double deadline, size_t body_max)
{
    (void)a, (void)method, (void)path, (void)content_type, (void)body, (void)deadline;
    memset(res, 0, sizeof(*res));
    pf_buf_init(&res->body, body_max ? body_max : 64 << 10);
    res->curl_code = -1;
    snprintf(res->error, sizeof(res->error), "static build: no libcurl");
}
#else
static size_t on_data(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    struct pf_buf *b = userdata;
    size_t n = size * nmemb;
    size_t room = b->max - b->len;
    (void)pf_buf_add(b, ptr, n < room ? n : room); /* the rest is dropped, not an error */
    return n;
}

/* RFC 7617: the credentials of HTTP basic authentication as they travel, base64 of
 * "user:password" (RFC 4648 section 4, with padding), which libcurl sends. */
static void basic_b64(char *out, size_t cap, const char *user, const char *pass)
{
    static const char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char in[2100];
    size_t n = (size_t)snprintf(in, sizeof(in), "%s:%s", user, pass);
    if (n >= sizeof(in)) n = sizeof(in) - 1;
    size_t w = 0;
    const unsigned char *p = (const unsigned char *)in;
    for (size_t i = 0; i < n && w + 5 <= cap; i += 3) {
        unsigned v = (unsigned)p[i] << 16;
        if (i + 1 < n) v |= (unsigned)p[i + 1] << 8;
        if (i + 2 < n) v |= p[i + 2];
        out[w++] = abc[(v >> 18) & 63];
        out[w++] = abc[(v >> 12) & 63];
        out[w++] = i + 1 < n ? abc[(v >> 6) & 63] : '=';
        out[w++] = i + 2 < n ? abc[v & 63] : '=';
    }
    out[w < cap ? w : cap - 1] = '\0';
    memset(in, 0, sizeof(in));
}

/* What a reply may quote back of the request (a proxy's or a Pushgateway's error page that
 * echoes the headers): every credential this request carried is replaced by "***" in the
 * body and in libcurl's error text before anyone shows them. */
static void redact_reply(struct pf_kapi_res *res, const struct pf_kapi *a)
{
    char b64[2900] = "";
    if (a->user && a->password) basic_b64(b64, sizeof(b64), a->user, a->password);
    const char *secrets[] = {a->token, a->password, b64[0] ? b64 : NULL};
    for (size_t i = 0; i < sizeof(secrets) / sizeof(secrets[0]); i++) {
        if (!secrets[i] || !*secrets[i]) continue;
        if (res->body.data) {
            res->body.len = pf_kapi_redact(res->body.data, res->body.len, secrets[i]);
            if (res->body.len < res->body.cap) res->body.data[res->body.len] = '\0';
        }
        pf_kapi_redact(res->error, strlen(res->error), secrets[i]);
    }
    memset(b64, 0, sizeof(b64));
}

void pf_kapi_request_max(struct pf_kapi_res *res, const struct pf_kapi *a, const char *method,
                         const char *path, const char *content_type, const char *body,
                         double deadline, size_t body_max)
{
    memset(res, 0, sizeof(*res));
    pf_buf_init(&res->body, body_max ? body_max : 64 << 10);
    double left = deadline - pf_now();
    if (left < 0.05) {
        res->curl_code = PF_CURLE_OPERATION_TIMEDOUT;
        snprintf(res->error, sizeof(res->error), "no time left of the budget");
        return;
    }
    pf_CURL *h = curl ? curl->easy_init() : NULL;
    if (!h) {
        res->curl_code = -1;
        snprintf(res->error, sizeof(res->error), "curl_easy_init failed");
        return;
    }
    char url[2048 + 1200], auth[8192], ctype[128], errbuf[PF_CURL_ERROR_SIZE] = "";
    snprintf(url, sizeof(url), "%s%s", a->base, path);
    snprintf(ctype, sizeof(ctype), "Content-Type: %s", content_type);
    struct curl_slist *hdr = NULL;
    if (a->token && pf_snprintf(auth, sizeof(auth), "Authorization: Bearer %s", a->token) == 0)
        hdr = curl->slist_append(hdr, auth);
    hdr = curl->slist_append(hdr, ctype);
    hdr = curl->slist_append(hdr, "Accept: application/json");
    long ms = (long)(left * 1000);
    curl->easy_setopt(h, PF_CURLOPT_URL, url);
    curl->easy_setopt(h, PF_CURLOPT_CUSTOMREQUEST, method);
    curl->easy_setopt(h, PF_CURLOPT_POSTFIELDS, body);
    curl->easy_setopt(h, PF_CURLOPT_POSTFIELDSIZE, (long)strlen(body));
    curl->easy_setopt(h, PF_CURLOPT_HTTPHEADER, hdr);
    curl->easy_setopt(h, PF_CURLOPT_USERAGENT, "preflight/" PF_VERSION);
    curl->easy_setopt(h, PF_CURLOPT_NOSIGNAL, 1L); /* the verdict guard owns SIGALRM */
    curl->easy_setopt(h, PF_CURLOPT_TIMEOUT_MS, ms);
    curl->easy_setopt(h, PF_CURLOPT_CONNECTTIMEOUT_MS, ms);
    curl->easy_setopt(h, PF_CURLOPT_ERRORBUFFER, errbuf);
    curl->easy_setopt(h, PF_CURLOPT_WRITEFUNCTION, (pf_curl_write_fn)on_data);
    curl->easy_setopt(h, PF_CURLOPT_WRITEDATA, &res->body);
    if (a->cafile[0]) curl->easy_setopt(h, PF_CURLOPT_CAINFO, a->cafile);
    if (a->user) curl->easy_setopt(h, PF_CURLOPT_USERNAME, a->user);
    if (a->password) curl->easy_setopt(h, PF_CURLOPT_PASSWORD, a->password);
    res->curl_code = (int)curl->easy_perform(h);
    if (res->curl_code == PF_CURLE_OK)
        curl->easy_getinfo(h, PF_CURLINFO_RESPONSE_CODE, &res->status);
    else
        snprintf(res->error, sizeof(res->error), "%s",
                 errbuf[0] ? errbuf : curl->easy_strerror((pf_CURLcode)res->curl_code));
    curl->easy_cleanup(h);
    curl->slist_free_all(hdr);
    redact_reply(res, a);
    /* the token must not outlive the request on the stack */
    memset(auth, 0, sizeof(auth));
}
#endif

void pf_kapi_request(struct pf_kapi_res *res, const struct pf_kapi *a, const char *method,
                     const char *path, const char *content_type, const char *body, double deadline)
{
    pf_kapi_request_max(res, a, method, path, content_type, body, deadline, 0);
}
