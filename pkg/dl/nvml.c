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
        {PF_NVML_ERROR_INSUFFICIENT_SIZE, "NVML_ERROR_INSUFFICIENT_SIZE"},
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
    const char *alt; /* an older name, tried when name is missing; or NULL */
    size_t offset;
    bool required;
};
#define NSYM(field, name, req)                                                                     \
    {                                                                                              \
        name, NULL, offsetof(struct pf_dl_nvml, field), req                                        \
    }
#define NSYM2(field, name, alt)                                                                    \
    {                                                                                              \
        name, alt, offsetof(struct pf_dl_nvml, field), false                                       \
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
    /* gpu.health: the names nvml.h (NVML_API_VERSION 12) maps its plain names to */
    NSYM(SystemGetDriverVersion, "nvmlSystemGetDriverVersion", false),
    NSYM2(SystemGetCudaDriverVersion, "nvmlSystemGetCudaDriverVersion_v2",
          "nvmlSystemGetCudaDriverVersion"),
    NSYM(DeviceGetName, "nvmlDeviceGetName", false),
    NSYM(DeviceGetUUID, "nvmlDeviceGetUUID", false),
    NSYM(DeviceGetPersistenceMode, "nvmlDeviceGetPersistenceMode", false),
    NSYM(DeviceGetMigMode, "nvmlDeviceGetMigMode", false),
    NSYM(DeviceGetEccMode, "nvmlDeviceGetEccMode", false),
    NSYM(DeviceGetTotalEccErrors, "nvmlDeviceGetTotalEccErrors", false),
    NSYM(DeviceGetRetiredPages, "nvmlDeviceGetRetiredPages", false),
    NSYM(DeviceGetRetiredPagesPendingStatus, "nvmlDeviceGetRetiredPagesPendingStatus", false),
    NSYM(DeviceGetRemappedRows, "nvmlDeviceGetRemappedRows", false),
    NSYM(DeviceGetNvLinkState, "nvmlDeviceGetNvLinkState", false),
    NSYM(DeviceGetNvLinkErrorCounter, "nvmlDeviceGetNvLinkErrorCounter", false),
    NSYM2(DeviceGetCurrentClocksEventReasons, "nvmlDeviceGetCurrentClocksEventReasons",
          "nvmlDeviceGetCurrentClocksThrottleReasons"),
    NSYM(DeviceGetMaxPcieLinkWidth, "nvmlDeviceGetMaxPcieLinkWidth", false),
    NSYM(DeviceGetCurrPcieLinkWidth, "nvmlDeviceGetCurrPcieLinkWidth", false),
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
        if (!p && s->alt) p = dlsym(h, s->alt);
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

/* rc of a call through pointer fn, or FUNCTION_NOT_FOUND when this library lacks it */
#define CALL(fn, ...) ((fn) ? (fn)(__VA_ARGS__) : (pf_nvmlReturn_t)PF_NVML_ERROR_FUNCTION_NOT_FOUND)

static void fact_u(struct pf_nvml_fact *f, pf_nvmlReturn_t rc, unsigned long long v)
{
    f->rc = rc;
    f->v = rc == PF_NVML_SUCCESS ? v : 0;
}

void pf_dl_nvml_system(struct pf_nvml_system *out, const struct pf_dl_nvml *l)
{
    memset(out, 0, sizeof(*out));
    out->driver_rc = CALL(l->SystemGetDriverVersion, out->driver, sizeof(out->driver));
    out->driver[sizeof(out->driver) - 1] = '\0';
    if (out->driver_rc != PF_NVML_SUCCESS) out->driver[0] = '\0';
    out->cuda_rc = CALL(l->SystemGetCudaDriverVersion, &out->cuda);
    if (out->cuda_rc != PF_NVML_SUCCESS) out->cuda = 0;
}

static void read_nvlinks(struct pf_nvml_health *out, const struct pf_dl_nvml *l,
                         pf_nvmlDevice_t dev)
{
    out->nvlink_rc = PF_NVML_ERROR_FUNCTION_NOT_FOUND;
    for (unsigned k = 0; k < PF_NVML_NVLINK_ERROR_COUNT; k++)
        out->nvlink_errors[k].rc = PF_NVML_ERROR_NOT_SUPPORTED;
    if (!l->DeviceGetNvLinkState) return;
    bool any = false;
    for (unsigned link = 0; link < PF_NVML_NVLINK_MAX_LINKS; link++) {
        pf_nvmlEnableState_t active = 0;
        pf_nvmlReturn_t r = l->DeviceGetNvLinkState(dev, link, &active);
        if (link == 0) out->nvlink_rc = r;
        if (r == PF_NVML_SUCCESS) {
            any = true;
            out->nvlink_supported++;
            out->link[link] =
                active == PF_NVML_FEATURE_ENABLED ? PF_NVLINK_ACTIVE : PF_NVLINK_INACTIVE;
            if (active == PF_NVML_FEATURE_ENABLED) out->nvlink_active++;
        } else if (r == PF_NVML_ERROR_NOT_SUPPORTED || r == PF_NVML_ERROR_INVALID_ARGUMENT) {
            out->link[link] = PF_NVLINK_ABSENT;
        } else {
            out->link[link] = PF_NVLINK_UNKNOWN;
            out->nvlink_unknown++;
        }
    }
    if (any) out->nvlink_rc = PF_NVML_SUCCESS;
    for (unsigned k = 0; k < PF_NVML_NVLINK_ERROR_COUNT; k++) {
        struct pf_nvml_fact *f = &out->nvlink_errors[k];
        f->rc = l->DeviceGetNvLinkErrorCounter ? PF_NVML_ERROR_NOT_SUPPORTED
                                               : PF_NVML_ERROR_FUNCTION_NOT_FOUND;
        for (unsigned link = 0; l->DeviceGetNvLinkErrorCounter && link < PF_NVML_NVLINK_MAX_LINKS;
             link++) {
            if (out->link[link] != PF_NVLINK_ACTIVE) continue;
            unsigned long long v = 0;
            pf_nvmlReturn_t r = l->DeviceGetNvLinkErrorCounter(dev, link, k, &v);
            if (r == PF_NVML_SUCCESS) {
                f->rc = PF_NVML_SUCCESS;
                f->v += v;
            } else if (f->rc != PF_NVML_SUCCESS && r != PF_NVML_ERROR_NOT_SUPPORTED) {
                f->rc = r;
            }
        }
    }
}

void pf_dl_nvml_health(struct pf_nvml_health *out, const struct pf_dl_nvml *l, unsigned int i)
{
    memset(out, 0, sizeof(*out));
    out->index = i;
    pf_nvmlDevice_t dev = NULL;
    out->handle_rc = l->DeviceGetHandleByIndex(i, &dev);
    if (out->handle_rc != PF_NVML_SUCCESS) return;
    struct pf_nvmlPciInfo pci;
    memset(&pci, 0, sizeof(pci));
    if (l->DeviceGetPciInfo_v3 && l->DeviceGetPciInfo_v3(dev, &pci) == PF_NVML_SUCCESS)
        copy_bus_id(out->bus_id, sizeof(out->bus_id), pci.busId, sizeof(pci.busId));
    else if (l->DeviceGetPciInfo && l->DeviceGetPciInfo(dev, &pci) == PF_NVML_SUCCESS)
        copy_bus_id(out->bus_id, sizeof(out->bus_id), pci.busIdLegacy, sizeof(pci.busIdLegacy));
    if (CALL(l->DeviceGetName, dev, out->name, sizeof(out->name)) != PF_NVML_SUCCESS)
        out->name[0] = '\0';
    out->name[sizeof(out->name) - 1] = '\0';
    if (CALL(l->DeviceGetUUID, dev, out->uuid, sizeof(out->uuid)) != PF_NVML_SUCCESS)
        out->uuid[0] = '\0';
    out->uuid[sizeof(out->uuid) - 1] = '\0';

    pf_nvmlEnableState_t st = 0, st2 = 0;
    pf_nvmlReturn_t r = CALL(l->DeviceGetPersistenceMode, dev, &st);
    fact_u(&out->persistence, r, st);
    unsigned cur = 0, pend = 0;
    r = CALL(l->DeviceGetMigMode, dev, &cur, &pend);
    fact_u(&out->mig_current, r, cur);
    fact_u(&out->mig_pending, r, pend);
    r = CALL(l->DeviceGetEccMode, dev, &st, &st2);
    fact_u(&out->ecc_mode, r, st);

    unsigned long long n = 0;
    r = CALL(l->DeviceGetTotalEccErrors, dev, PF_NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
             PF_NVML_VOLATILE_ECC, &n);
    fact_u(&out->ecc_unc_volatile, r, n);
    n = 0;
    r = CALL(l->DeviceGetTotalEccErrors, dev, PF_NVML_MEMORY_ERROR_TYPE_CORRECTED,
             PF_NVML_VOLATILE_ECC, &n);
    fact_u(&out->ecc_cor_volatile, r, n);
    n = 0;
    r = CALL(l->DeviceGetTotalEccErrors, dev, PF_NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
             PF_NVML_AGGREGATE_ECC, &n);
    fact_u(&out->ecc_unc_aggregate, r, n);
    n = 0;
    r = CALL(l->DeviceGetTotalEccErrors, dev, PF_NVML_MEMORY_ERROR_TYPE_CORRECTED,
             PF_NVML_AGGREGATE_ECC, &n);
    fact_u(&out->ecc_cor_aggregate, r, n);

    /* pageCount 0 with addresses NULL asks for the count: NVML answers SUCCESS (none) or
     * INSUFFICIENT_SIZE with the count set */
    unsigned cnt = 0;
    r = CALL(l->DeviceGetRetiredPages, dev,
             PF_NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS, &cnt, NULL);
    fact_u(&out->retired_sbe, r == PF_NVML_ERROR_INSUFFICIENT_SIZE ? PF_NVML_SUCCESS : r, cnt);
    cnt = 0;
    r = CALL(l->DeviceGetRetiredPages, dev, PF_NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR,
             &cnt, NULL);
    fact_u(&out->retired_dbe, r == PF_NVML_ERROR_INSUFFICIENT_SIZE ? PF_NVML_SUCCESS : r, cnt);
    st = 0;
    r = CALL(l->DeviceGetRetiredPagesPendingStatus, dev, &st);
    fact_u(&out->retired_pending, r, st);

    out->remap_rc = CALL(l->DeviceGetRemappedRows, dev, &out->remap_cor, &out->remap_unc,
                         &out->remap_pending, &out->remap_failed);
    if (out->remap_rc != PF_NVML_SUCCESS)
        out->remap_cor = out->remap_unc = out->remap_pending = out->remap_failed = 0;

    n = 0;
    r = CALL(l->DeviceGetCurrentClocksEventReasons, dev, &n);
    fact_u(&out->clocks_event, r, n);
    unsigned w = 0;
    r = CALL(l->DeviceGetMaxPcieLinkWidth, dev, &w);
    fact_u(&out->pcie_width_max, r, w);
    w = 0;
    r = CALL(l->DeviceGetCurrPcieLinkWidth, dev, &w);
    fact_u(&out->pcie_width_cur, r, w);

    read_nvlinks(out, l, dev);
}
