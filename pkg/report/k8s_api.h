/* report (private): one HTTPS exchange with the Kubernetes API server through libcurl (loaded
 * by pkg/dl), shared by the Event and annotation (k8s.c) and node marking (node.c). Not part
 * of report.h. */
#ifndef PF_REPORT_K8S_API_H
#define PF_REPORT_K8S_API_H

#include <stdbool.h>

#include "../dl/dl.h"
#include "report.h"

#ifndef PF_STATIC
struct http {
    long status;   /* HTTP status, 0 when none came */
    int curl_code; /* CURLE_* */
    char error[PF_CURL_ERROR_SIZE + 64];
    struct pf_buf body; /* the response, at most 64 KiB kept */
};

struct api {
    char base[2048];               /* https://host:port (or a Pushgateway's whole URL) */
    char cafile[PF_HOST_PATH_MAX]; /* "" when the service account has no ca.crt */
    char *token;
    const char *user, *password; /* HTTP basic authentication, or NULL */
};

/* Loads libcurl once (pf_dl_curl_at; the override PREFLIGHT_CURL_LIB, or its older name
 * PREFLIGHT_LIBCURL, read from env); false with *why set when it cannot. */
bool pf_report_api_load(const struct pf_env *env, const char **why);
/* One request; res->body must be freed by the caller. */
void pf_report_api_request(struct http *res, const struct api *a, const char *method,
                           const char *path, const char *content_type, const char *body,
                           double deadline);
#endif

#endif
