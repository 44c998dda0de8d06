/* The loader every library goes through, and the NCCL, CUDA and libibverbs tables. Each
 * resolves a table of symbols into a struct of pointers; any missing
 * required symbol fails the whole load (handle closed, every pointer NULL). */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef PF_STATIC
#include <dlfcn.h>
#include <glob.h>
#endif
#include <unistd.h>

int pf_nccl_version_code(int major, int minor, int patch)
{
    if (major <= 2 && minor <= 8) return major * 1000 + minor * 100 + patch;
    return major * 10000 + minor * 100 + patch;
}

void pf_nccl_version_string(char *out, size_t n, int code)
{
    int major, minor, patch;
    if (code >= 20900) { /* X*10000 + Y*100 + Z */
        major = code / 10000;
        minor = code % 10000 / 100;
        patch = code % 100;
    } else { /* X*1000 + Y*100 + Z */
        major = code / 1000;
        minor = code % 1000 / 100;
        patch = code % 100;
    }
    snprintf(out, n, "%d.%d.%d", major, minor, patch);
}

void pf_dl_nccl_strerror(char *out, size_t n, const struct pf_dl_nccl *l, pf_ncclResult_t r)
{
    static const char *const names[] = {
        "ncclSuccess",       "ncclUnhandledCudaError", "ncclSystemError",
        "ncclInternalError", "ncclInvalidArgument",    "ncclInvalidUsage",
        "ncclRemoteError",   "ncclInProgress",         "ncclTimeout"};
    const char *s = l && l->GetErrorString ? l->GetErrorString(r) : NULL;
    const char *name = r < PF_ARRAY_LEN(names) ? names[r] : "ncclResult";
    if (s && *s)
        snprintf(out, n, "%s %u: %s", name, r, s);
    else
        snprintf(out, n, "%s %u", name, r);
}

void pf_dl_cuda_strerror(char *out, size_t n, const struct pf_dl_cuda *l, pf_CUresult r)
{
    const char *name = NULL, *s = NULL;
    if (l && l->GetErrorName && l->GetErrorName(r, &name) != PF_CUDA_SUCCESS) name = NULL;
    if (l && l->GetErrorString && l->GetErrorString(r, &s) != PF_CUDA_SUCCESS) s = NULL;
    if (name && s)
        snprintf(out, n, "%s (%s)", name, s);
    else if (name)
        snprintf(out, n, "%s", name);
    else
        snprintf(out, n, "CUresult %u", r);
}

static const struct pf_dl_sym nccl_syms[] = {
    REQ(struct pf_dl_nccl, GetVersion, "ncclGetVersion"),
    REQ(struct pf_dl_nccl, GetUniqueId, "ncclGetUniqueId"),
    REQ(struct pf_dl_nccl, CommInitRank, "ncclCommInitRank"),
    REQ(struct pf_dl_nccl, CommDestroy, "ncclCommDestroy"),
    REQ(struct pf_dl_nccl, CommAbort, "ncclCommAbort"),
    REQ(struct pf_dl_nccl, CommGetAsyncError, "ncclCommGetAsyncError"),
    REQ(struct pf_dl_nccl, GetErrorString, "ncclGetErrorString"),
    REQ(struct pf_dl_nccl, GroupStart, "ncclGroupStart"),
    REQ(struct pf_dl_nccl, GroupEnd, "ncclGroupEnd"),
    REQ(struct pf_dl_nccl, AllReduce, "ncclAllReduce"),
    REQ(struct pf_dl_nccl, AllGather, "ncclAllGather"),
    REQ(struct pf_dl_nccl, ReduceScatter, "ncclReduceScatter"),
    OPT(struct pf_dl_nccl, CommInitRankConfig, "ncclCommInitRankConfig"),
    OPT(struct pf_dl_nccl, CommFinalize, "ncclCommFinalize"),
    OPT(struct pf_dl_nccl, GetLastError, "ncclGetLastError"),
    OPT(struct pf_dl_nccl, Send, "ncclSend"),
    OPT(struct pf_dl_nccl, Recv, "ncclRecv"),
    OPT(struct pf_dl_nccl, AlltoAll, "ncclAlltoAll"),
    OPT(struct pf_dl_nccl, Broadcast, "ncclBroadcast"),
    OPT(struct pf_dl_nccl, Reduce, "ncclReduce"),
};

static const struct pf_dl_sym cuda_syms[] = {
    REQ(struct pf_dl_cuda, Init, "cuInit"),
    REQ(struct pf_dl_cuda, DriverGetVersion, "cuDriverGetVersion"),
    REQ(struct pf_dl_cuda, DeviceGetCount, "cuDeviceGetCount"),
    REQ(struct pf_dl_cuda, DeviceGet, "cuDeviceGet"),
    REQ(struct pf_dl_cuda, DeviceGetName, "cuDeviceGetName"),
    REQ(struct pf_dl_cuda, DeviceGetPCIBusId, "cuDeviceGetPCIBusId"),
    REQ(struct pf_dl_cuda, DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain"),
    REQ(struct pf_dl_cuda, DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2"),
    REQ(struct pf_dl_cuda, CtxSetCurrent, "cuCtxSetCurrent"),
    REQ(struct pf_dl_cuda, CtxSynchronize, "cuCtxSynchronize"),
    REQ(struct pf_dl_cuda, MemAlloc, "cuMemAlloc_v2"),
    REQ(struct pf_dl_cuda, MemFree, "cuMemFree_v2"),
    REQ(struct pf_dl_cuda, MemcpyHtoD, "cuMemcpyHtoD_v2"),
    REQ(struct pf_dl_cuda, MemcpyDtoH, "cuMemcpyDtoH_v2"),
    REQ(struct pf_dl_cuda, StreamCreate, "cuStreamCreate"),
    REQ(struct pf_dl_cuda, StreamDestroy, "cuStreamDestroy_v2"),
    REQ(struct pf_dl_cuda, StreamQuery, "cuStreamQuery"),
    REQ(struct pf_dl_cuda, EventCreate, "cuEventCreate"),
    REQ(struct pf_dl_cuda, EventDestroy, "cuEventDestroy_v2"),
    REQ(struct pf_dl_cuda, EventRecord, "cuEventRecord"),
    REQ(struct pf_dl_cuda, EventQuery, "cuEventQuery"),
    REQ2(struct pf_dl_cuda, EventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime"),
    OPT(struct pf_dl_cuda, GetErrorName, "cuGetErrorName"),
    OPT(struct pf_dl_cuda, GetErrorString, "cuGetErrorString"),
    OPT2(struct pf_dl_cuda, DeviceGetUuid, "cuDeviceGetUuid_v2", "cuDeviceGetUuid"),
};

/* As NCCL's ibvsymbols.cc resolves them. */
static const struct pf_dl_sym verbs_syms[] = {
    VREQ(struct pf_dl_verbs, get_device_list, "ibv_get_device_list", "IBVERBS_1.1"),
    VREQ(struct pf_dl_verbs, free_device_list, "ibv_free_device_list", "IBVERBS_1.1"),
    VREQ(struct pf_dl_verbs, get_device_name, "ibv_get_device_name", "IBVERBS_1.1"),
    VREQ(struct pf_dl_verbs, open_device, "ibv_open_device", "IBVERBS_1.1"),
    VREQ(struct pf_dl_verbs, close_device, "ibv_close_device", "IBVERBS_1.1"),
    VREQ(struct pf_dl_verbs, query_port, "ibv_query_port", "IBVERBS_1.1"),
    VREQ(struct pf_dl_verbs, alloc_pd, "ibv_alloc_pd", "IBVERBS_1.1"),
    VREQ(struct pf_dl_verbs, dealloc_pd, "ibv_dealloc_pd", "IBVERBS_1.1"),
    VREQ(struct pf_dl_verbs, reg_mr, "ibv_reg_mr", "IBVERBS_1.0"),
    VREQ(struct pf_dl_verbs, dereg_mr, "ibv_dereg_mr", "IBVERBS_1.0"),
    VOPT(struct pf_dl_verbs, reg_dmabuf_mr, "ibv_reg_dmabuf_mr", "IBVERBS_1.12"),
};

/* The site-packages folders a training image keeps Python packages in, in the order they are
 * searched: the system's Python (/usr/local/lib/python3.X, /usr/lib/python3), a virtual
 * environment (/opt/venv, /opt/<app>/.venv, /opt/<app>/venv, /venv, /workspace/.venv: uv and
 * python -m venv in training images), pip install --user for root; conda's (CONDA_SITES) come
 * after /opt/conda/lib in nccl_names. One list, for nccl_names and for torch_nccl. */
#define PIP_SITES(X)                                                                               \
    X("/usr/local/lib/python3*/dist-packages")                                                     \
    X("/usr/local/lib/python3*/site-packages")                                                     \
    X("/usr/lib/python3*/dist-packages")                                                           \
    X("/opt/venv/lib/python3*/site-packages")                                                      \
    X("/opt/*/.venv/lib/python3*/site-packages")                                                   \
    X("/opt/*/venv/lib/python3*/site-packages")                                                    \
    X("/venv/lib/python3*/site-packages")                                                          \
    X("/workspace/.venv/lib/python3*/site-packages")                                               \
    X("/root/.local/lib/python3*/site-packages")
#define CONDA_SITES(X)                                                                             \
    X("/opt/conda/lib/python3*/site-packages")                                                     \
    X("/opt/conda/envs/*/lib/python3*/site-packages")
#define SITE(dir) dir,
#define WHEEL_NCCL(dir) dir PF_DL_WHEEL_NCCL,

/* Before the soname: the NCCL a pip-installed PyTorch loads (pf_dl_torch_beside). PyTorch's
 * CUDA wheels are linked with DT_RPATH (--force-rpath) $ORIGIN/../../nvidia/nccl/lib on the
 * libraries in torch/lib (pytorch/pytorch .ci/manywheel/build_cuda.sh, "Using nvidia libs
 * from pypi"), and DT_RPATH comes before LD_LIBRARY_PATH and ld.so.cache: where
 * torch/lib/libtorch_cuda.so and nvidia/nccl/lib/libnccl.so.2 share a site-packages, that
 * NCCL is the one training loads, whatever else the soname finds (seen on an H100 machine:
 * torch 2.11.0+cu130 loaded the wheel's NCCL 2.28.9 from a virtual environment while
 * ld.so.cache held a system NCCL 2.28.3). */
#ifndef PF_STATIC
static const char *const site_packages[] = {PIP_SITES(SITE) CONDA_SITES(SITE) NULL};
#endif

/* Tried in this order after the soname (the dynamic linker's own search), the first file
 * that loads wins; a glob takes its first match in sorted order:
 *   - NVIDIA's CUDA images and NCCL's own packages: /usr/local/cuda/lib64,
 *     /usr/local/nccl/lib, /opt/nccl/lib;
 *   - PyTorch's pip wheels nvidia-nccl-cu12 and nvidia-nccl-cu13: both keep the library in
 *     <site-packages>/nvidia/nccl/lib; the cu13 wheels moved the other CUDA libraries to
 *     nvidia/cu13/lib but not NCCL (NVIDIA/cuml pull request 7304, "Set NCCL rpath for cu13
 *     wheels"), in the folders of PIP_SITES;
 *   - conda: /opt/conda/lib (conda-forge's nccl package) and its environments' wheels. */
static const char *const nccl_names[] = {
    "libnccl.so.2",
    "/usr/local/cuda/lib64/libnccl.so.2",
    "/usr/local/nccl/lib/libnccl.so.2",
    "/opt/nccl/lib/libnccl.so.2",
    PIP_SITES(WHEEL_NCCL) "/opt/conda/lib/libnccl.so.2",
    CONDA_SITES(WHEEL_NCCL) NULL,
};
/* The driver's library where the container runtime puts it: the distribution's library
 * folders (NVIDIA Container Toolkit on Debian/Ubuntu and RHEL), and /usr/local/nvidia/lib64
 * (GKE's driver installer mounts the host's driver there, and NVIDIA's device plugin images
 * put it on LD_LIBRARY_PATH, which a process started without that environment lacks). */
static const char *const cuda_names[] = {"libcuda.so.1",
                                         "/usr/lib/x86_64-linux-gnu/libcuda.so.1",
                                         "/usr/lib/aarch64-linux-gnu/libcuda.so.1",
                                         "/usr/lib64/libcuda.so.1",
                                         "/usr/local/nvidia/lib64/libcuda.so.1",
                                         "/usr/local/nvidia/lib/libcuda.so.1",
                                         NULL};
/* NCCL tries libibverbs.so first, then libibverbs.so.1; the unversioned name is the
 * development symlink, so the soname comes first here. */
static const char *const verbs_names[] = {"libibverbs.so.1", "libibverbs.so", NULL};

static const struct pf_dl_lib lib_nccl = {
    "libnccl.so.2",          "PREFLIGHT_NCCL_LIB",     NULL, nccl_names, nccl_syms,
    PF_ARRAY_LEN(nccl_syms), sizeof(struct pf_dl_nccl)};
static const struct pf_dl_lib lib_cuda = {
    "libcuda.so.1",          "PREFLIGHT_CUDA_LIB",     NULL, cuda_names, cuda_syms,
    PF_ARRAY_LEN(cuda_syms), sizeof(struct pf_dl_cuda)};
static const struct pf_dl_lib lib_verbs = {
    "libibverbs.so.1",        "PREFLIGHT_IBVERBS_LIB",   NULL, verbs_names, verbs_syms,
    PF_ARRAY_LEN(verbs_syms), sizeof(struct pf_dl_verbs)};

#ifdef PF_STATIC
int pf_dl_open_lib(void *out, const struct pf_dl_lib *lib, const char *path)
{
    (void)path;
    memset(out, 0, lib->size);
    return pf_err_set(PF_EUNAVAIL, "%s: static binary: no dlopen", lib->what);
}
#else
/* dlopen of one file preflight picked itself (not the soname, not an override): only from a
 * trusted tree (pf_dl_path_trusted); a skipped one is noted for the evidence. */
static void *open_trusted(const struct pf_dl_lib *lib, const char *file, char *err, size_t errn)
{
    char why[600], real[PATH_MAX];
    if (access(file, F_OK) != 0) {
        snprintf(err, errn, "%s: %s", file, strerror(errno));
        return NULL;
    }
    if (!pf_dl_path_trusted(file, real, sizeof(real), why, sizeof(why))) {
        pf_dl_skip_note(lib->what, file, why);
        snprintf(err, errn, "%.200s skipped: %.280s", file, why);
        return NULL;
    }
    /* the file judged, not the name: no link in the name can be swapped in between */
    void *h = dlopen(real, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(err, errn, "%s", e ? e : "dlopen failed");
    }
    return h;
}

/* dlopen of one name; a name with a glob character is expanded first (first match wins).
 * lib: a path (not the soname, which the loader's own search resolves) is opened only from
 * a trusted tree; NULL: as named (the operator's override). */
static void *try_open(const struct pf_dl_lib *lib, const char *name, char *err, size_t errn)
{
    if (!strpbrk(name, "*?[")) {
        if (lib && strchr(name, '/')) return open_trusted(lib, name, err, errn);
        void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            const char *e = dlerror();
            snprintf(err, errn, "%s", e ? e : "dlopen failed");
        }
        return h;
    }
    glob_t g;
    void *h = NULL;
    if (glob(name, 0, NULL, &g) == 0) {
        for (size_t i = 0; i < g.gl_pathc && !h; i++) {
            if (lib) {
                h = open_trusted(lib, g.gl_pathv[i], err, errn);
                continue;
            }
            h = dlopen(g.gl_pathv[i], RTLD_NOW | RTLD_LOCAL);
            if (!h) {
                const char *e = dlerror();
                snprintf(err, errn, "%s", e ? e : "dlopen failed");
            }
        }
        globfree(&g);
    }
    return h;
}

/* The NCCL of a pip-installed PyTorch (site_packages above), or NULL: a wheel's NCCL in a
 * trusted tree with torch's own library beside it (pf_dl_torch_proof). */
static void *torch_nccl(const struct pf_dl_lib *lib, char *err, size_t errn)
{
    void *h = NULL;
    for (size_t i = 0; site_packages[i] && !h; i++) {
        glob_t g;
        if (glob(site_packages[i], 0, NULL, &g) != 0) continue;
        for (size_t k = 0; k < g.gl_pathc && !h; k++) {
            char nccl[PF_DL_PATH_MAX], why[800], note[830];
            int a = snprintf(nccl, sizeof(nccl), "%s" PF_DL_WHEEL_NCCL, g.gl_pathv[k]);
            if (a < 0 || (size_t)a >= sizeof(nccl)) continue;
            if (access(nccl, F_OK) != 0) continue;
            if (!pf_dl_torch_proof(nccl, NULL, 0, why, sizeof(why))) {
                if (strncmp(why, "no ", 3) != 0) { /* torch absent: nothing worth saying */
                    snprintf(note, sizeof(note), "not taken as PyTorch's: %s", why);
                    pf_dl_skip_note(lib->what, nccl, note);
                }
                continue;
            }
            h = open_trusted(lib, nccl, err, errn);
        }
        globfree(&g);
    }
    return h;
}

/* The override: lib->env, else its older name. */
static const char * override(const struct pf_dl_lib *lib)
{
    const char *v = getenv(lib->env);
    if ((!v || !*v) && lib->env_alias) v = getenv(lib->env_alias);
    return v && *v ? v : NULL;
}

/* Resolves every symbol of lib into out; false with msg set when a required one is missing. */
static bool resolve(void *out, void *h, const struct pf_dl_lib *lib, const char *tried, char *msg,
                    size_t msgn)
{
    for (size_t i = 0; i < lib->nsyms; i++) {
        const struct pf_dl_sym *s = &lib->syms[i];
        (void)dlerror();
        void *p = s->version ? dlvsym(h, s->name, s->version) : dlsym(h, s->name);
        const char *e = p ? NULL : dlerror();
        if (!p && s->alt) {
            (void)dlerror();
            p = dlsym(h, s->alt);
        }
        if (!p && s->required) {
            snprintf(msg, msgn, "%s: symbol %s%s%s missing (%s)", tried, s->name,
                     s->version ? "@" : "", s->version ? s->version : "", e ? e : "not found");
            return false;
        }
        memcpy((char *)out + s->offset, &p, sizeof(p));
    }
    return true;
}

int pf_dl_open_lib(void *out, const struct pf_dl_lib *lib, const char *path)
{
    memset(out, 0, lib->size);
    char err[512] = "";
    void *h = NULL;
    const char *tried = NULL;
    if (!path) path = override(lib);
    if (path) {
        h = try_open(NULL, path, err, sizeof(err));
        if (!h) /* dlerror() names the file already when it could not be opened */
            return strncmp(err, path, strlen(path)) == 0
                       ? pf_err_set(PF_EUNAVAIL, "%s", err)
                       : pf_err_set(PF_EUNAVAIL, "%s: %s", path, err);
        tried = path;
    } else {
        if (lib == &lib_nccl) h = torch_nccl(lib, err, sizeof(err));
        for (size_t i = 0; lib->names[i] && !h; i++) {
            char e[512] = "";
            h = try_open(lib, lib->names[i], e, sizeof(e));
            if (!h && i == 0) /* the soname's dlerror() is the one worth keeping */
                snprintf(err, sizeof(err), "%s", e);
        }
        if (!h) return pf_err_set(PF_EUNAVAIL, "%s", err[0] ? err : "not found");
        tried = lib->what;
    }
    char msg[512];
    if (!resolve(out, h, lib, tried, msg, sizeof(msg))) {
        dlclose(h);
        memset(out, 0, lib->size);
        return pf_err_set(PF_EUNAVAIL, "%s", msg);
    }
    /* the handle and the file behind it (the first struct member is the handle, then path) */
    memcpy(out, &h, sizeof(h));
    char *outpath = (char *)out + sizeof(void *);
    void *first = NULL;
    memcpy(&first, (char *)out + lib->syms[0].offset, sizeof(first));
    Dl_info info;
    if (first && dladdr(first, &info) && info.dli_fname)
        snprintf(outpath, PF_DL_PATH_MAX, "%s", info.dli_fname);
    else
        snprintf(outpath, PF_DL_PATH_MAX, "%s", tried);
    return 0;
}
#endif

_Static_assert(offsetof(struct pf_dl_nccl, path) == sizeof(void *), "handle, then path");
_Static_assert(offsetof(struct pf_dl_cuda, path) == sizeof(void *), "handle, then path");
_Static_assert(offsetof(struct pf_dl_verbs, path) == sizeof(void *), "handle, then path");

int pf_dl_nccl_open(struct pf_dl_nccl *out, const char *path)
{
    return pf_dl_open_lib(out, &lib_nccl, path);
}

int pf_dl_cuda_open(struct pf_dl_cuda *out, const char *path)
{
    return pf_dl_open_lib(out, &lib_cuda, path);
}

int pf_dl_verbs_open(struct pf_dl_verbs *out, const char *path)
{
    return pf_dl_open_lib(out, &lib_verbs, path);
}

int pf_dl_load_once(struct pf_dl_once *o, void *out, const char *path,
                    int (*open_fn)(void *out, const char *path))
{
    pthread_mutex_lock(&o->lock);
    if (!o->done) {
        o->rc = open_fn(out, path);
        snprintf(o->msg, sizeof(o->msg), "%s", o->rc < 0 ? pf_err_msg() : "");
        o->done = true;
    }
    int rc = o->rc;
    pthread_mutex_unlock(&o->lock);
    if (rc < 0) return pf_err_set(rc, "%s", o->msg);
    return 0;
}

static int open_nccl_v(void *out, const char *p)
{
    return pf_dl_nccl_open(out, p);
}
static int open_cuda_v(void *out, const char *p)
{
    return pf_dl_cuda_open(out, p);
}
static int open_verbs_v(void *out, const char *p)
{
    return pf_dl_verbs_open(out, p);
}

int pf_dl_nccl(const struct pf_dl_nccl **out)
{
    static struct pf_dl_nccl lib;
    static struct pf_dl_once o = PF_DL_ONCE_INIT;
    int r = pf_dl_load_once(&o, &lib, NULL, open_nccl_v);
    *out = r < 0 ? NULL : &lib;
    return r;
}

int pf_dl_cuda(const struct pf_dl_cuda **out)
{
    static struct pf_dl_cuda lib;
    static struct pf_dl_once o = PF_DL_ONCE_INIT;
    int r = pf_dl_load_once(&o, &lib, NULL, open_cuda_v);
    *out = r < 0 ? NULL : &lib;
    return r;
}

int pf_dl_verbs(const struct pf_dl_verbs **out)
{
    static struct pf_dl_verbs lib;
    static struct pf_dl_once o = PF_DL_ONCE_INIT;
    int r = pf_dl_load_once(&o, &lib, NULL, open_verbs_v);
    *out = r < 0 ? NULL : &lib;
    return r;
}
