/* The NVML loader (see nvml.h): the required symbols fail the load when missing, the fabric
 * and PCI calls are optional and tried newest first. */
#define _GNU_SOURCE
#include "nvml.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef PF_STATIC
#include <dlfcn.h>
#endif

#define NVML_SONAME "libnvidia-ml.so.1"
#define NVML_ENV "PREFLIGHT_NVML_LIB"

void pf_dl_nvml_strerror(char *out, size_t n, const struct pf_dl_nvml *l, pf_nvmlReturn_t r)
{
    static const struct {
        pf_nvmlReturn_t r;
        const char *name;
    } names[] = {
        {PF_NVML_SUCCESS, "NVML_SUCCESS"},
        {PF_NVML_ERROR_UNINITIALIZED, "NVML_ERROR_UNINITIALIZED"},
        {2, "NVML_ERROR_INVALID_ARGUMENT"},
        {PF_NVML_ERROR_NOT_SUPPORTED, "NVML_ERROR_NOT_SUPPORTED"},
        {4, "NVML_ERROR_NO_PERMISSION"},
        {6, "NVML_ERROR_NOT_FOUND"},
        {PF_NVML_ERROR_DRIVER_NOT_LOADED, "NVML_ERROR_DRIVER_NOT_LOADED"},
        {12, "NVML_ERROR_LIBRARY_NOT_FOUND"},
        {PF_NVML_ERROR_FUNCTION_NOT_FOUND, "NVML_ERROR_FUNCTION_NOT_FOUND"},
        {15, "NVML_ERROR_GPU_IS_LOST"},
        {PF_NVML_ERROR_ARGUMENT_VERSION_MISMATCH, "NVML_ERROR_ARGUMENT_VERSION_MISMATCH"},
        {PF_NVML_ERROR_UNKNOWN, "NVML_ERROR_UNKNOWN"},
    };
    const char *name = NULL;
    for (size_t i = 0; i < PF_ARRAY_LEN(names); i++)
        if (names[i].r == r) name = names[i].name;
    const char *s = l && l->ErrorString ? l->ErrorString(r) : NULL;
    if (name && s && *s)
        snprintf(out, n, "%s (%s)", name, s);
    else if (name)
        snprintf(out, n, "%s", name);
    else if (s && *s)
        snprintf(out, n, "nvmlReturn %u (%s)", r, s);
    else
        snprintf(out, n, "nvmlReturn %u", r);
}

#ifdef PF_STATIC
int pf_dl_nvml_open(struct pf_dl_nvml *out, const char *path)
{
    (void)path;
    memset(out, 0, sizeof(*out));
    return pf_err_set(PF_EUNAVAIL, "static binary: no dlopen");
}
void pf_dl_nvml_close(struct pf_dl_nvml *l)
{
    memset(l, 0, sizeof(*l));
}
#else
struct nvml_sym {
    const char *name;
    size_t offset;
    bool required;
};
#define NSYM(field, name, req)                                                                     \
    {                                                                                              \
        name, offsetof(struct pf_dl_nvml, field), req                                              \
    }
static const struct nvml_sym nvml_syms[] = {
    NSYM(Init, "nvmlInit_v2", true),
    NSYM(Shutdown, "nvmlShutdown", true),
    NSYM(DeviceGetCount, "nvmlDeviceGetCount_v2", true),
    NSYM(DeviceGetHandleByIndex, "nvmlDeviceGetHandleByIndex_v2", true),
    NSYM(DeviceGetPciInfo_v3, "nvmlDeviceGetPciInfo_v3", false),
    NSYM(DeviceGetPciInfo, "nvmlDeviceGetPciInfo", false),
    NSYM(DeviceGetGpuFabricInfoV, "nvmlDeviceGetGpuFabricInfoV", false),
    NSYM(DeviceGetGpuFabricInfo, "nvmlDeviceGetGpuFabricInfo", false),
    NSYM(ErrorString, "nvmlErrorString", false),
};

/* Tried after the soname fails, in order: the distribution's library folders (NVIDIA
 * Container Toolkit), then /usr/local/nvidia/lib64 (GKE's driver installer mounts the host's
 * driver there; images reach it only through LD_LIBRARY_PATH, which a process started
 * without that environment lacks). */
static const char *const nvml_places[] = {
    "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1", "/usr/lib/aarch64-linux-gnu/libnvidia-ml.so.1",
    "/usr/lib64/libnvidia-ml.so.1", "/usr/local/nvidia/lib64/libnvidia-ml.so.1",
    "/usr/local/nvidia/lib/libnvidia-ml.so.1"};

int pf_dl_nvml_open(struct pf_dl_nvml *out, const char *path)
{
    memset(out, 0, sizeof(*out));
    const char *env = getenv(NVML_ENV);
    if (!path && env && *env) path = env;
    const char *what = path ? path : NVML_SONAME;
    (void)dlerror();
    void *h = dlopen(what, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        char err[512];
        snprintf(err, sizeof(err), "%s", e ? e : "not found");
        /* the driver's own folders, as for libcuda.so.1 (dl.c) */
        for (size_t i = 0; !path && !h && i < PF_ARRAY_LEN(nvml_places); i++)
            if ((h = dlopen(nvml_places[i], RTLD_NOW | RTLD_LOCAL))) what = nvml_places[i];
        if (!h) return pf_err_set(PF_EUNAVAIL, "%s does not load: %s", what, err);
    }
    for (size_t i = 0; i < PF_ARRAY_LEN(nvml_syms); i++) {
        const struct nvml_sym *s = &nvml_syms[i];
        (void)dlerror();
        void *p = dlsym(h, s->name);
        if (!p && s->required) {
            const char *e = dlerror();
            char msg[512];
            snprintf(msg, sizeof(msg), "%s: symbol %s missing (%s)", what, s->name,
                     e ? e : "not found");
            dlclose(h);
            memset(out, 0, sizeof(*out));
            return pf_err_set(PF_EUNAVAIL, "%s", msg);
        }
        memcpy((char *)out + s->offset, &p, sizeof(p));
    }
    out->handle = h;
    Dl_info info;
    void *first = NULL;
    memcpy(&first, &out->Init, sizeof(first));
    if (dladdr(first, &info) && info.dli_fname)
        snprintf(out->path, sizeof(out->path), "%s", info.dli_fname);
    else
        snprintf(out->path, sizeof(out->path), "%s", what);
    return 0;
}

void pf_dl_nvml_close(struct pf_dl_nvml *l)
{
    if (l->handle) dlclose(l->handle);
    memset(l, 0, sizeof(*l));
}
#endif

static void copy_bus_id(char *out, size_t n, const char *in, size_t max)
{
    size_t len = strnlen(in, max);
    snprintf(out, n, "%.*s", (int)len, in);
}

/* The fields both versions of nvmlGpuFabricInfo have, under the same names, into out. */
#define TAKE_FABRIC(out, v)                                                                        \
    do {                                                                                           \
        (out)->state = (v).state;                                                                  \
        (out)->status = (v).status;                                                                \
        (out)->clique = (v).cliqueId;                                                              \
        memcpy((out)->cluster_uuid, (v).clusterUuid, sizeof((out)->cluster_uuid));                 \
    } while (0)

int pf_dl_nvml_fabric(struct pf_nvml_fabric *out, const struct pf_dl_nvml *l, unsigned int i)
{
    memset(out, 0, sizeof(*out));
    char e[96];
    pf_nvmlDevice_t dev = NULL;
    pf_nvmlReturn_t r = l->DeviceGetHandleByIndex(i, &dev);
    if (r != PF_NVML_SUCCESS) {
        pf_dl_nvml_strerror(e, sizeof(e), l, r);
        snprintf(out->err, sizeof(out->err), "nvmlDeviceGetHandleByIndex_v2: %s", e);
        return 0;
    }
    struct pf_nvmlPciInfo pci;
    memset(&pci, 0, sizeof(pci));
    if (l->DeviceGetPciInfo_v3 && l->DeviceGetPciInfo_v3(dev, &pci) == PF_NVML_SUCCESS)
        copy_bus_id(out->bus_id, sizeof(out->bus_id), pci.busId, sizeof(pci.busId));
    else if (l->DeviceGetPciInfo && l->DeviceGetPciInfo(dev, &pci) == PF_NVML_SUCCESS)
        copy_bus_id(out->bus_id, sizeof(out->bus_id), pci.busIdLegacy, sizeof(pci.busIdLegacy));
    r = PF_NVML_ERROR_FUNCTION_NOT_FOUND;
    const char *call = "nvmlDeviceGetGpuFabricInfo";
    if (l->DeviceGetGpuFabricInfoV) {
        struct pf_nvmlGpuFabricInfo_v2 v;
        memset(&v, 0, sizeof(v));
        v.version = PF_NVML_GPU_FABRIC_INFO_V2;
        call = "nvmlDeviceGetGpuFabricInfoV";
        r = l->DeviceGetGpuFabricInfoV(dev, &v);
        if (r == PF_NVML_SUCCESS) TAKE_FABRIC(out, v);
    }
    if (r != PF_NVML_SUCCESS && l->DeviceGetGpuFabricInfo) {
        struct pf_nvmlGpuFabricInfo v;
        memset(&v, 0, sizeof(v));
        call = "nvmlDeviceGetGpuFabricInfo";
        r = l->DeviceGetGpuFabricInfo(dev, &v);
        if (r == PF_NVML_SUCCESS) TAKE_FABRIC(out, v);
    }
    if (r == PF_NVML_SUCCESS) {
        out->have = true;
    } else if (!l->DeviceGetGpuFabricInfoV && !l->DeviceGetGpuFabricInfo) {
        snprintf(out->err, sizeof(out->err),
                 "this libnvidia-ml has no nvmlDeviceGetGpuFabricInfo (driver older than 525)");
    } else {
        pf_dl_nvml_strerror(e, sizeof(e), l, r);
        snprintf(out->err, sizeof(out->err), "%s: %s", call, e);
    }
    return 0;
}
