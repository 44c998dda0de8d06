/* libcurl's table: the easy interface the Kubernetes reporter uses, and curl_version for
 * `preflight version`. The process-wide copy runs curl_global_init once, as libcurl asks of a
 * program before its first handle. */
#define _GNU_SOURCE
#include "internal.h"

#include <stdio.h>
#include <string.h>

static const struct pf_dl_sym curl_syms[] = {
    REQ(struct pf_dl_curl, global_init, "curl_global_init"),
    REQ(struct pf_dl_curl, easy_init, "curl_easy_init"),
    REQ(struct pf_dl_curl, easy_setopt, "curl_easy_setopt"),
    REQ(struct pf_dl_curl, easy_perform, "curl_easy_perform"),
    REQ(struct pf_dl_curl, easy_getinfo, "curl_easy_getinfo"),
    REQ(struct pf_dl_curl, easy_cleanup, "curl_easy_cleanup"),
    REQ(struct pf_dl_curl, easy_strerror, "curl_easy_strerror"),
    REQ(struct pf_dl_curl, slist_append, "curl_slist_append"),
    REQ(struct pf_dl_curl, slist_free_all, "curl_slist_free_all"),
    REQ(struct pf_dl_curl, version, "curl_version"),
};

static const char *const curl_names[] = {"libcurl.so.4", NULL};

static const struct pf_dl_lib lib_curl = {
    "libcurl.so.4", PF_DL_CURL_ENV,          PF_DL_CURL_ENV_ALIAS,     curl_names,
    curl_syms,      PF_ARRAY_LEN(curl_syms), sizeof(struct pf_dl_curl)};

_Static_assert(offsetof(struct pf_dl_curl, path) == sizeof(void *), "handle, then path");

int pf_dl_curl_open(struct pf_dl_curl *out, const char *path)
{
    return pf_dl_open_lib(out, &lib_curl, path && *path ? path : NULL);
}

/* Load, then curl_global_init; a library that loads but cannot initialize is not used (and
 * stays open: libcurl may have started threads of its own). */
static int open_curl_init(void *out, const char *path)
{
    struct pf_dl_curl *l = out;
    int r = pf_dl_curl_open(l, path);
    if (r < 0) return r;
    pf_CURLcode c = l->global_init(PF_CURL_GLOBAL_DEFAULT);
    if (c != PF_CURLE_OK) {
        char what[PF_DL_PATH_MAX];
        snprintf(what, sizeof(what), "%s", l->path);
        memset(l, 0, sizeof(*l));
        return pf_err_set(PF_EUNAVAIL, "%s: curl_global_init failed (CURLcode %u)", what, c);
    }
    return 0;
}

int pf_dl_curl_at(const char *path, const struct pf_dl_curl **out)
{
    static struct pf_dl_curl lib;
    static struct pf_dl_once o = PF_DL_ONCE_INIT;
    int r = pf_dl_load_once(&o, &lib, path, open_curl_init);
    *out = r < 0 ? NULL : &lib;
    return r;
}

int pf_dl_curl(const struct pf_dl_curl **out)
{
    return pf_dl_curl_at(NULL, out);
}
