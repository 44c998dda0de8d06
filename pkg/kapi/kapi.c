/* The Kubernetes API server from inside a pod (kapi.h). */
#define _GNU_SOURCE
#include "kapi.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef PF_STATIC
bool pf_kapi_load(const struct pf_env *env, const char **why)
{
    (void)env;
    *why = "static build: no dlopen, so no libcurl";
    return false;
}
#else
static const struct pf_dl_curl *curl; /* set by pf_kapi_load */

bool pf_kapi_load(const struct pf_env *env, const char **why)
{
    static char error[600];
    /* the run's own copy of the environment names the library, as the process's would */
    const char *path = pf_env_get(env, PF_DL_CURL_ENV);
    if (!path || !*path) path = pf_env_get(env, PF_DL_CURL_ENV_ALIAS);
    if (pf_dl_curl_at(path, &curl) == 0) return true;
    snprintf(error, sizeof(error), "%s", pf_err_msg());
    *why = error;
    return false;
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
    /* the token must not outlive the request on the stack */
    memset(auth, 0, sizeof(auth));
}
#endif

void pf_kapi_request(struct pf_kapi_res *res, const struct pf_kapi *a, const char *method,
                     const char *path, const char *content_type, const char *body, double deadline)
{
    pf_kapi_request_max(res, a, method, path, content_type, body, deadline, 0);
}
