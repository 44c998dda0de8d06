/* kapi: the Kubernetes API server from inside a pod: its address (KUBERNETES_SERVICE_HOST and
 * _PORT), the service account's token and CA under the root prefix, and one HTTPS exchange
 * through libcurl loaded at run time (pkg/dl). Used by pkg/report (Event, annotation, node
 * marking) and pkg/checks (the pod's ResourceClaims). Bounded by the caller's deadline; never
 * prints. Under PF_STATIC nothing loads: pf_kapi_load says why. */
#ifndef PF_KAPI_H
#define PF_KAPI_H

#include <stdbool.h>

#include "../base/base.h"
#include "../base/env.h"
#include "../dl/dl.h"
#include "../host/host.h"

#define PF_KAPI_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

/* One exchange's outcome. */
struct pf_kapi_res {
    long status;   /* HTTP status, 0 when none came */
    int curl_code; /* CURLE_* */
    char error[PF_CURL_ERROR_SIZE + 64];
    struct pf_buf body; /* the response, at most body_max kept (64 KiB by default) */
};

/* Where the API server is and who the pod is to it. */
struct pf_kapi {
    char base[2048];               /* https://host:port (or a Pushgateway's whole URL) */
    char cafile[PF_HOST_PATH_MAX]; /* "" when the service account has no ca.crt */
    char *token;
    const char *user, *password; /* HTTP basic authentication, or NULL */
};

/* Loads libcurl once (pf_dl_curl_at; the override PREFLIGHT_CURL_LIB, or its older name
 * PREFLIGHT_LIBCURL, read from env): 0, or a negative code with the reason in pf_err_msg(). */
int pf_kapi_load(const struct pf_env *env);

/* Fills a from KUBERNETES_SERVICE_HOST/_PORT and PF_KAPI_SA_DIR under the root: PF_ENOENT
 * when the host is unset (not in a pod), PF_EUNAVAIL when there is no token (the message says
 * which); 0 otherwise. Free with pf_kapi_close. */
int pf_kapi_open(struct pf_kapi *a, const struct pf_env *env, const struct pf_host *h);
void pf_kapi_close(struct pf_kapi *a);

/* One request (pf_kapi_load must have succeeded); res->body must be freed by the caller.
 * body_max 0 keeps 64 KiB. */
/* Replaces every occurrence of secret in s[0..len) by "***" in place (a secret shorter than
 * three bytes by as many '*'); returns the new length (NUL-terminated when shorter). Every
 * request's reply passes through it for each credential the request carried. */
size_t pf_kapi_redact(char *s, size_t len, const char *secret);
void pf_kapi_request(struct pf_kapi_res *res, const struct pf_kapi *a, const char *method,
                     const char *path, const char *content_type, const char *body, double deadline);
void pf_kapi_request_max(struct pf_kapi_res *res, const struct pf_kapi *a, const char *method,
                         const char *path, const char *content_type, const char *body,
                         double deadline, size_t body_max);

#endif
