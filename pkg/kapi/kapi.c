/* The Kubernetes API server from inside a pod (kapi.h). */
#define _GNU_SOURCE
#include "kapi.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

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

/* What a reply may quote back of the request (a proxy's or a Pushgateway's error page that
 * echoes the headers): every credential this request carried is replaced by "***" in the
 * body and in libcurl's error text before anyone shows them. */
static void redact_reply(struct pf_kapi_res *res, const struct pf_kapi *a)
{
    /* RFC 7617: basic authentication's credentials as they travel, base64 of "user:password"
     * (RFC 4648 section 4), which libcurl sends */
    struct pf_buf plain, basic;
    pf_buf_init(&plain, 4096);
    pf_buf_init(&basic, 8192);
    if (a->user && a->password && pf_buf_addf(&plain, "%s:%s", a->user, a->password) == 0)
        pf_buf_base64(&basic, plain.data, plain.len, false);
    const char *secrets[] = {a->token, a->password, basic.len ? basic.data : NULL};
    for (size_t i = 0; i < sizeof(secrets) / sizeof(secrets[0]); i++) {
        if (!secrets[i] || !*secrets[i]) continue;
        if (res->body.data) {
            res->body.len = pf_kapi_redact(res->body.data, res->body.len, secrets[i]);
            if (res->body.len < res->body.cap) res->body.data[res->body.len] = '\0';
        }
        pf_kapi_redact(res->error, strlen(res->error), secrets[i]);
    }
    /* the credentials must not outlive the request on the heap either */
    if (plain.data) memset(plain.data, 0, plain.cap);
    if (basic.data) memset(basic.data, 0, basic.cap);
    pf_buf_free(&plain);
    pf_buf_free(&basic);
}

/* ---- the name of the server, resolved under the request's deadline
 *
 * libcurl's threaded resolver gives up at CURLOPT_TIMEOUT_MS, but curl_easy_cleanup then
 * joins the resolver thread, which ends only when getaddrinfo does: a resolver that answers
 * in 20 s made a push with a 5 s budget take 20 s and the run miss its deadline. So the name
 * is resolved here first, under the deadline, on a thread nobody waits for past it
 * (pf_resolve_by, pkg/base/resolve.c), and libcurl gets the address through CURLOPT_RESOLVE:
 * it never resolves, so there is nothing to join. */
/* The host and port of an http(s) URL ("[v6]" without brackets); false when there is none. */
static bool url_host_port(const char *url, char *host, size_t hn, char *port, size_t pn)
{
    const char *p = strstr(url, "://");
    if (!p) return false;
    bool tls = strncasecmp(url, "https", 5) == 0;
    p += 3;
    size_t n = strcspn(p, "/?#");
    const char *end = p + n, *colon = NULL;
    if (*p == '[') {
        const char *rb = memchr(p, ']', n);
        if (!rb) return false;
        snprintf(host, hn, "%.*s", (int)(rb - p - 1), p + 1);
        colon = rb + 1 < end && rb[1] == ':' ? rb + 1 : NULL;
    } else {
        colon = memchr(p, ':', n);
        snprintf(host, hn, "%.*s", (int)((colon ? colon : end) - p), p);
    }
    if (colon)
        snprintf(port, pn, "%.*s", (int)(end - colon - 1), colon + 1);
    else
        snprintf(port, pn, "%s", tls ? "443" : "80");
    return host[0] != '\0';
}

/* Resolves the URL's host before deadline: 0 with *resolve set to the CURLOPT_RESOLVE entry
 * ("host:port:address"), or left NULL when the host is an address already (nothing to
 * resolve); -1 with res->error said when the name does not resolve or not in time
 * (pf_resolve_by's words: "resolving NAME took longer than the deadline ...", "cannot resolve
 * NAME: ..."). */
static int resolve_bounded(struct pf_kapi_res *res, const char *url, double deadline, char *entry,
                           size_t en, bool *have)
{
    *have = false;
    char host[256], port[8];
    if (!url_host_port(url, host, sizeof(host), port, sizeof(port))) return 0;
    unsigned char bin[16];
    if (inet_pton(AF_INET, host, bin) == 1 || inet_pton(AF_INET6, host, bin) == 1) return 0;
    struct addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    /* a request always has a deadline; none (0) would wait on this thread for resolv.conf */
    int r = pf_resolve_by(&ai, host, port, &hints, deadline > 0 ? deadline : pf_now());
    if (r < 0) {
        res->curl_code =
            r == PF_ETIMEOUT ? PF_CURLE_OPERATION_TIMEDOUT : 6; /* CURLE_COULDNT_RESOLVE_HOST */
        snprintf(res->error, sizeof(res->error), "%s", pf_err_msg());
        pf_err_clear();
        return -1;
    }
    char t[INET6_ADDRSTRLEN] = "";
    if (ai && ai->ai_family == AF_INET6) {
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr, t, sizeof(t));
        snprintf(entry, en, "%s:%s:[%s]", host, port, t);
    } else if (ai && ai->ai_family == AF_INET) {
        inet_ntop(AF_INET, &((struct sockaddr_in *)ai->ai_addr)->sin_addr, t, sizeof(t));
        snprintf(entry, en, "%s:%s:%s", host, port, t);
    }
    if (ai) freeaddrinfo(ai);
    if (!t[0]) {
        res->curl_code = 6; /* CURLE_COULDNT_RESOLVE_HOST */
        snprintf(res->error, sizeof(res->error), "cannot resolve %.200s: no address", host);
        return -1;
    }
    *have = true;
    return 0;
}

void pf_kapi_request_max(struct pf_kapi_res *res, const struct pf_kapi *a, const char *method,
                         const char *path, const char *content_type, const char *body,
                         double deadline, size_t body_max)
{
    memset(res, 0, sizeof(*res));
    pf_buf_init(&res->body, body_max ? body_max : 64 << 10);
    char resolve_entry[600];
    bool have_resolve = false;
    if (resolve_bounded(res, a->base, deadline, resolve_entry, sizeof(resolve_entry),
                        &have_resolve) < 0)
        return;
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
    struct curl_slist *resolve = NULL;
    if (have_resolve) {
        resolve = curl->slist_append(NULL, resolve_entry);
        curl->easy_setopt(h, PF_CURLOPT_RESOLVE, resolve);
    }
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
    if (resolve) curl->slist_free_all(resolve);
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
