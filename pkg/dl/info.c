/* What the optional libraries say about themselves, for `preflight version`. */
#define _GNU_SOURCE
#include "dl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef PF_STATIC
#include <dirent.h>
#endif

#ifndef PF_STATIC
/* Each library's own account of itself, once it has loaded: version and detail (path is
 * set already). */
static void describe_nccl(struct pf_dl_info *o, const void *lib)
{
    const struct pf_dl_nccl *l = lib;
    int v = 0;
    pf_ncclResult_t r = l->GetVersion(&v);
    if (r == PF_NCCL_SUCCESS)
        pf_nccl_version_string(o->version, sizeof(o->version), v);
    else
        pf_dl_nccl_strerror(o->detail, sizeof(o->detail), l, r);
}

static void describe_cuda(struct pf_dl_info *o, const void *lib)
{
    const struct pf_dl_cuda *l = lib;
    int v = 0;
    char err[256];
    /* cuDriverGetVersion needs no cuInit: it answers even on a node without a GPU */
    pf_CUresult r = l->DriverGetVersion(&v);
    if (r == PF_CUDA_SUCCESS)
        snprintf(o->version, sizeof(o->version), "CUDA %d.%d", v / 1000, v % 1000 / 10);
    else if (r == 34) { /* CUDA_ERROR_STUB_LIBRARY */
        snprintf(o->detail, sizeof(o->detail),
                 "CUDA_ERROR_STUB_LIBRARY: the CUDA toolkit's stub, not the driver's library");
        return;
    } else {
        pf_dl_cuda_strerror(err, sizeof(err), l, r);
        snprintf(o->detail, sizeof(o->detail), "cuDriverGetVersion: %s", err);
        return;
    }
    r = l->Init(0);
    int n = 0;
    if (r == PF_CUDA_SUCCESS && l->DeviceGetCount(&n) == PF_CUDA_SUCCESS)
        snprintf(o->detail, sizeof(o->detail), "%d GPU%s", n, n == 1 ? "" : "s");
    else {
        pf_dl_cuda_strerror(err, sizeof(err), l, r);
        snprintf(o->detail, sizeof(o->detail), "cuInit: %s", err);
    }
}

/* rdma-core loads its providers from lib<name>-rdmav<N>.so in the libibverbs/ folder beside
 * the library (its VERBS_PROVIDER_DIR in a distribution's build). */
static void describe_verbs(struct pf_dl_info *o, const void *lib)
{
    const struct pf_dl_verbs *l = lib;
    /* libibverbs.so.1.<abi>.<rdma-core release>: the file the soname link points at */
    char real[4096]; /* PATH_MAX, as realpath(3) needs */
    const char *base = realpath(l->path, real) ? strrchr(real, '/') : NULL;
    if (base && strncmp(base, "/libibverbs.so.1.", 17) == 0) {
        const char *rel = strchr(base + 17, '.');
        if (rel) snprintf(o->version, sizeof(o->version), "rdma-core %s", rel + 1);
    }
    char dir[PF_DL_PATH_MAX + 16];
    snprintf(dir, sizeof(dir), "%s", l->path);
    char *slash = strrchr(dir, '/');
    if (slash) snprintf(slash, sizeof(dir) - (size_t)(slash - dir), "/libibverbs");
    struct pf_strlist prov = {0};
    DIR *d = slash ? opendir(dir) : NULL;
    for (struct dirent *e; d && (e = readdir(d));) {
        const char *s = e->d_name, *rv = strstr(s, "-rdmav");
        if (strncmp(s, "lib", 3) != 0 || !rv || !strstr(rv, ".so")) continue;
        pf_strlist_addn(&prov, s + 3, (size_t)(rv - s - 3));
    }
    if (d) closedir(d);
    pf_strlist_sort(&prov);
    char list[400];
    pf_strlist_join(list, sizeof(list), &prov, ", ");
    if (prov.n)
        snprintf(o->detail, sizeof(o->detail), "%zu provider%s: %s", prov.n, prov.n == 1 ? "" : "s",
                 list);
    else
        snprintf(o->detail, sizeof(o->detail), "no providers found in %.400s", dir);
    pf_strlist_free(&prov);
}

static void describe_curl(struct pf_dl_info *o, const void *lib)
{
    const struct pf_dl_curl *l = lib;
    const char *v = l->version(); /* "libcurl/7.88.1 OpenSSL/3.0.11 ..." */
    if (v && strncmp(v, "libcurl/", 8) == 0) {
        size_t n = strcspn(v + 8, " ");
        snprintf(o->version, sizeof(o->version), "%.*s", (int)n, v + 8);
    }
    snprintf(o->detail, sizeof(o->detail), "%s", v ? v : "");
}

/* The process-wide copies, as one type: the library's struct (its path second), or NULL. */
#define LOADER(name)                                                                               \
    static const void *load_##name(const char **path)                                              \
    {                                                                                              \
        const struct pf_dl_##name *l;                                                              \
        if (pf_dl_##name(&l) < 0) return NULL;                                                     \
        *path = l->path;                                                                           \
        return l;                                                                                  \
    }
LOADER(nccl)
LOADER(cuda)
LOADER(verbs)
LOADER(curl)
#endif

/* One row per library, in the order `preflight version` prints them. */
static const struct {
    const char *soname;
#ifndef PF_STATIC
    const void *(*load)(const char **path);
    void (*describe)(struct pf_dl_info *o, const void *lib);
#endif
} libs[PF_DL_INFO_COUNT] = {
#ifdef PF_STATIC
    [PF_DL_INFO_NCCL] = {"libnccl.so.2"},
    [PF_DL_INFO_CUDA] = {"libcuda.so.1"},
    [PF_DL_INFO_VERBS] = {"libibverbs.so.1"},
    [PF_DL_INFO_CURL] = {"libcurl.so.4"},
#else
    [PF_DL_INFO_NCCL] = {"libnccl.so.2", load_nccl, describe_nccl},
    [PF_DL_INFO_CUDA] = {"libcuda.so.1", load_cuda, describe_cuda},
    [PF_DL_INFO_VERBS] = {"libibverbs.so.1", load_verbs, describe_verbs},
    [PF_DL_INFO_CURL] = {"libcurl.so.4", load_curl, describe_curl},
#endif
};

void pf_dl_info_gather(struct pf_dl_info out[PF_DL_INFO_COUNT])
{
    for (size_t i = 0; i < PF_DL_INFO_COUNT; i++) {
        struct pf_dl_info *o = &out[i];
        memset(o, 0, sizeof(*o));
        o->soname = libs[i].soname;
#ifdef PF_STATIC
        snprintf(o->detail, sizeof(o->detail), "not in this build (static binary: no dlopen)");
#else
        const char *path = NULL;
        const void *lib = libs[i].load(&path);
        if (!lib) {
            snprintf(o->detail, sizeof(o->detail), "missing (%s)", pf_err_msg());
            continue;
        }
        o->loaded = true;
        snprintf(o->path, sizeof(o->path), "%s", path);
        libs[i].describe(o, lib);
#endif
    }
    pf_err_clear();
}

void pf_dl_info_format(struct pf_buf *out, const struct pf_dl_info in[PF_DL_INFO_COUNT])
{
    for (size_t i = 0; i < PF_DL_INFO_COUNT; i++) {
        const struct pf_dl_info *o = &in[i];
        if (!o->loaded) {
            pf_buf_addf(out, "  %-16s %s\n", o->soname, o->detail);
            continue;
        }
        pf_buf_addf(out, "  %-16s %s (%s)%s%s\n", o->soname,
                    o->version[0] ? o->version : "loads, version unknown", o->path,
                    o->detail[0] && i != PF_DL_INFO_CURL ? ": " : "",
                    i != PF_DL_INFO_CURL ? o->detail : "");
    }
}
