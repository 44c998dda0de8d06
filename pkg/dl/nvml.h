/* dl/nvml: libnvidia-ml (NVML), loaded at run time like the other libraries of pkg/dl: the
 * override variable PREFLIGHT_NVML_LIB first, then the soname libnvidia-ml.so.1. Only what
 * gpu.fabric reads is resolved: the device count, each device's PCI bus id and its GPU fabric
 * registration (nvmlDeviceGetGpuFabricInfoV, else nvmlDeviceGetGpuFabricInfo). The types are
 * declared here with the layouts of NVIDIA's nvml.h, so the build needs no nvml.h.
 * Under PF_STATIC the loader fails with "static binary: no dlopen". */
#ifndef PF_DL_NVML_H
#define PF_DL_NVML_H

#include <stdbool.h>
#include <stddef.h>

#include "dl.h"

/* nvmlReturn_t: an enum whose values are all non-negative (unsigned int to GCC and Clang). */
typedef unsigned int pf_nvmlReturn_t;
enum {
    PF_NVML_SUCCESS = 0,
    PF_NVML_ERROR_UNINITIALIZED = 1,
    PF_NVML_ERROR_NOT_SUPPORTED = 3,
    PF_NVML_ERROR_DRIVER_NOT_LOADED = 9,
    PF_NVML_ERROR_FUNCTION_NOT_FOUND = 13,
    PF_NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    PF_NVML_ERROR_UNKNOWN = 999,
};
struct nvmlDevice_st; /* NVML's own opaque tag */
typedef struct nvmlDevice_st *pf_nvmlDevice_t;

/* nvmlPciInfo_t as nvmlDeviceGetPciInfo_v3 writes it; the legacy nvmlDeviceGetPciInfo (v1)
 * writes a shorter struct whose first 16 bytes are the same busIdLegacy. */
#define PF_NVML_BUS_ID_LEGACY 16
#define PF_NVML_BUS_ID 32
struct pf_nvmlPciInfo {
    char busIdLegacy[PF_NVML_BUS_ID_LEGACY];
    unsigned int domain;
    unsigned int bus;
    unsigned int device;
    unsigned int pciDeviceId;
    unsigned int pciSubSystemId;
    char busId[PF_NVML_BUS_ID];
};

/* nvmlGpuFabricInfo_t (nvmlDeviceGetGpuFabricInfo, driver 525 on) and nvmlGpuFabricInfo_v2_t
 * (nvmlDeviceGetGpuFabricInfoV, driver 550 on: a version first, a health mask last). state is
 * nvmlGpuFabricState_t, an unsigned char. */
#define PF_NVML_FABRIC_UUID_LEN 16
struct pf_nvmlGpuFabricInfo {
    unsigned char clusterUuid[PF_NVML_FABRIC_UUID_LEN];
    pf_nvmlReturn_t status;
    unsigned int cliqueId;
    unsigned char state;
};
struct pf_nvmlGpuFabricInfo_v2 {
    unsigned int version; /* PF_NVML_GPU_FABRIC_INFO_V2 */
    unsigned char clusterUuid[PF_NVML_FABRIC_UUID_LEN];
    pf_nvmlReturn_t status;
    unsigned int cliqueId;
    unsigned char state;
    unsigned int healthMask;
};
/* NVML_STRUCT_VERSION(GpuFabricInfo, 2): the struct's size, the version in the top byte */
#define PF_NVML_GPU_FABRIC_INFO_V2                                                                 \
    ((unsigned int)(sizeof(struct pf_nvmlGpuFabricInfo_v2) | (2u << 24)))

struct pf_dl_nvml {
    void *handle;
    char path[PF_DL_PATH_MAX];
    /* required */
    pf_nvmlReturn_t (*Init)(void);                          /* nvmlInit_v2 */
    pf_nvmlReturn_t (*Shutdown)(void);                      /* nvmlShutdown */
    pf_nvmlReturn_t (*DeviceGetCount)(unsigned int *count); /* _v2 */
    pf_nvmlReturn_t (*DeviceGetHandleByIndex)(unsigned int i, pf_nvmlDevice_t *dev); /* _v2 */
    /* optional: one of each pair is needed for the fabric; ErrorString for messages */
    pf_nvmlReturn_t (*DeviceGetPciInfo_v3)(pf_nvmlDevice_t dev, struct pf_nvmlPciInfo *pci);
    pf_nvmlReturn_t (*DeviceGetPciInfo)(pf_nvmlDevice_t dev, struct pf_nvmlPciInfo *pci);
    pf_nvmlReturn_t (*DeviceGetGpuFabricInfoV)(pf_nvmlDevice_t dev,
                                               struct pf_nvmlGpuFabricInfo_v2 *info);
    pf_nvmlReturn_t (*DeviceGetGpuFabricInfo)(pf_nvmlDevice_t dev,
                                              struct pf_nvmlGpuFabricInfo *info);
    const char *(*ErrorString)(pf_nvmlReturn_t r);
};

/* Loads NVML from path (NULL: PREFLIGHT_NVML_LIB, then libnvidia-ml.so.1) into out, without
 * caching. PF_EUNAVAIL with the reason (dlerror() kept, or the missing symbol) when it cannot
 * be used; out is zeroed then. pf_dl_nvml_close undoes a successful open. */
int pf_dl_nvml_open(struct pf_dl_nvml *out, const char *path);
void pf_dl_nvml_close(struct pf_dl_nvml *l);

/* "NVML_ERROR_NOT_SUPPORTED (Not Supported)"; the library's string when loaded. */
void pf_dl_nvml_strerror(char *out, size_t n, const struct pf_dl_nvml *l, pf_nvmlReturn_t r);

/* One GPU's fabric registration, the same fields from either fabric call. */
struct pf_nvml_fabric {
    char bus_id[PF_NVML_BUS_ID]; /* "00000000:1B:00.0"; "" when NVML would not say */
    bool have;                   /* false: err says why the fabric could not be read */
    unsigned char state;         /* nvmlGpuFabricState_t */
    pf_nvmlReturn_t status;
    unsigned int clique;
    unsigned char cluster_uuid[PF_NVML_FABRIC_UUID_LEN];
    char err[160];
};
/* Device i's bus id and fabric registration through l (initialised). Returns 0 with out
 * filled (out->have false when the fabric call failed or is missing, err then says why). */
int pf_dl_nvml_fabric(struct pf_nvml_fabric *out, const struct pf_dl_nvml *l, unsigned int i);

#endif
