/* dl/nvml: libnvidia-ml (NVML), loaded at run time like the other libraries of pkg/dl: the
 * override variable PREFLIGHT_NVML_LIB first, then the soname libnvidia-ml.so.1. What
 * gpu.fabric reads (the device count, each device's PCI bus id and its GPU fabric registration)
 * and what gpu.health reads (pf_dl_nvml_health: ECC, retired pages, remapped rows, NVLink,
 * clock event reasons, PCIe width, persistence and MIG mode, driver and CUDA versions) is
 * resolved from one symbol table, each entry under the name libnvidia-ml exports (the _v2/_v3
 * names nvml.h maps the plain names to), an older name tried after it. The types and values
 * are declared here with the layouts of NVIDIA's nvml.h (NVML_API_VERSION 12, the header of
 * the nvidia-nvml-dev-cu12 12.9.79 wheel, against which tests/unit/dl/test_dl_abi.c compiles
 * them when scripts/deps.sh has fetched it), so the build needs no nvml.h.
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
    PF_NVML_ERROR_INVALID_ARGUMENT = 2,
    PF_NVML_ERROR_NOT_SUPPORTED = 3,
    PF_NVML_ERROR_NO_PERMISSION = 4,
    PF_NVML_ERROR_INSUFFICIENT_SIZE = 7,
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

/* nvmlEnableState_t */
typedef unsigned int pf_nvmlEnableState_t;
enum { PF_NVML_FEATURE_DISABLED = 0, PF_NVML_FEATURE_ENABLED = 1 };
/* nvmlMemoryErrorType_t, nvmlEccCounterType_t, nvmlPageRetirementCause_t,
 * nvmlNvLinkErrorCounter_t: enums with non-negative values, unsigned int as above */
typedef unsigned int pf_nvmlMemoryErrorType_t;
typedef unsigned int pf_nvmlEccCounterType_t;
typedef unsigned int pf_nvmlPageRetirementCause_t;
typedef unsigned int pf_nvmlNvLinkErrorCounter_t;
enum {
    PF_NVML_MEMORY_ERROR_TYPE_CORRECTED = 0,
    PF_NVML_MEMORY_ERROR_TYPE_UNCORRECTED = 1,
    PF_NVML_VOLATILE_ECC = 0,
    PF_NVML_AGGREGATE_ECC = 1,
    PF_NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS = 0,
    PF_NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR = 1,
    PF_NVML_NVLINK_ERROR_DL_REPLAY = 0,
    PF_NVML_NVLINK_ERROR_DL_RECOVERY = 1,
    PF_NVML_NVLINK_ERROR_DL_CRC_FLIT = 2,
    PF_NVML_NVLINK_ERROR_DL_CRC_DATA = 3,
    PF_NVML_NVLINK_ERROR_DL_ECC_DATA = 4,
    PF_NVML_NVLINK_ERROR_COUNT = 5,
};
#define PF_NVML_NVLINK_MAX_LINKS 18 /* NVML_NVLINK_MAX_LINKS */
#define PF_NVML_DEVICE_MIG_DISABLE 0u
#define PF_NVML_DEVICE_MIG_ENABLE 1u
#define PF_NVML_DEVICE_NAME_V2_BUFFER_SIZE 96
#define PF_NVML_DEVICE_UUID_V2_BUFFER_SIZE 96
#define PF_NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE 80
/* nvmlClocksEventReason* / nvmlClocksThrottleReason* bits (unsigned long long) */
#define PF_NVML_CLOCKS_EVENT_GPU_IDLE 0x1ull
#define PF_NVML_CLOCKS_EVENT_APPLICATIONS_CLOCKS_SETTING 0x2ull
#define PF_NVML_CLOCKS_EVENT_SW_POWER_CAP 0x4ull
#define PF_NVML_CLOCKS_THROTTLE_HW_SLOWDOWN 0x8ull
#define PF_NVML_CLOCKS_EVENT_SYNC_BOOST 0x10ull
#define PF_NVML_CLOCKS_EVENT_SW_THERMAL_SLOWDOWN 0x20ull
#define PF_NVML_CLOCKS_THROTTLE_HW_THERMAL_SLOWDOWN 0x40ull
#define PF_NVML_CLOCKS_THROTTLE_HW_POWER_BRAKE_SLOWDOWN 0x80ull
#define PF_NVML_CLOCKS_EVENT_DISPLAY_CLOCK_SETTING 0x100ull

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
    /* optional: gpu.health (pf_dl_nvml_health); a missing one is that fact unknown */
    pf_nvmlReturn_t (*SystemGetDriverVersion)(char *version, unsigned int length);
    pf_nvmlReturn_t (*SystemGetCudaDriverVersion)(int *version); /* _v2 first */
    pf_nvmlReturn_t (*DeviceGetName)(pf_nvmlDevice_t dev, char *name, unsigned int length);
    pf_nvmlReturn_t (*DeviceGetUUID)(pf_nvmlDevice_t dev, char *uuid, unsigned int length);
    pf_nvmlReturn_t (*DeviceGetPersistenceMode)(pf_nvmlDevice_t dev, pf_nvmlEnableState_t *mode);
    pf_nvmlReturn_t (*DeviceGetMigMode)(pf_nvmlDevice_t dev, unsigned int *current,
                                        unsigned int *pending);
    pf_nvmlReturn_t (*DeviceGetEccMode)(pf_nvmlDevice_t dev, pf_nvmlEnableState_t *current,
                                        pf_nvmlEnableState_t *pending);
    pf_nvmlReturn_t (*DeviceGetTotalEccErrors)(pf_nvmlDevice_t dev,
                                               pf_nvmlMemoryErrorType_t errorType,
                                               pf_nvmlEccCounterType_t counterType,
                                               unsigned long long *count);
    pf_nvmlReturn_t (*DeviceGetRetiredPages)(pf_nvmlDevice_t dev,
                                             pf_nvmlPageRetirementCause_t cause,
                                             unsigned int *count, unsigned long long *addresses);
    pf_nvmlReturn_t (*DeviceGetRetiredPagesPendingStatus)(pf_nvmlDevice_t dev,
                                                          pf_nvmlEnableState_t *pending);
    pf_nvmlReturn_t (*DeviceGetRemappedRows)(pf_nvmlDevice_t dev, unsigned int *corrRows,
                                             unsigned int *uncRows, unsigned int *isPending,
                                             unsigned int *failureOccurred);
    pf_nvmlReturn_t (*DeviceGetNvLinkState)(pf_nvmlDevice_t dev, unsigned int link,
                                            pf_nvmlEnableState_t *isActive);
    pf_nvmlReturn_t (*DeviceGetNvLinkErrorCounter)(pf_nvmlDevice_t dev, unsigned int link,
                                                   pf_nvmlNvLinkErrorCounter_t counter,
                                                   unsigned long long *value);
    /* nvmlDeviceGetCurrentClocksEventReasons (driver 535 on), else the older
     * nvmlDeviceGetCurrentClocksThrottleReasons: the same bits */
    pf_nvmlReturn_t (*DeviceGetCurrentClocksEventReasons)(pf_nvmlDevice_t dev,
                                                          unsigned long long *reasons);
    pf_nvmlReturn_t (*DeviceGetMaxPcieLinkWidth)(pf_nvmlDevice_t dev, unsigned int *width);
    pf_nvmlReturn_t (*DeviceGetCurrPcieLinkWidth)(pf_nvmlDevice_t dev, unsigned int *width);
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

/* ---- gpu.health: one fact as NVML answered it. rc is the call's nvmlReturn_t:
 * PF_NVML_SUCCESS (v holds the value), PF_NVML_ERROR_NOT_SUPPORTED (this GPU has no such
 * counter: "not supported", neither healthy nor failed), PF_NVML_ERROR_FUNCTION_NOT_FOUND (this
 * libnvidia-ml lacks the call) or another error (unknown). */
struct pf_nvml_fact {
    pf_nvmlReturn_t rc;
    unsigned long long v;
};
/* One GPU's health facts, each from the NVML call named beside it. */
struct pf_nvml_health {
    unsigned index;
    pf_nvmlReturn_t handle_rc;   /* nvmlDeviceGetHandleByIndex_v2; not SUCCESS: nothing else read */
    char bus_id[PF_NVML_BUS_ID]; /* nvmlDeviceGetPciInfo_v3 */
    char name[PF_NVML_DEVICE_NAME_V2_BUFFER_SIZE];            /* nvmlDeviceGetName; "" unknown */
    char uuid[PF_NVML_DEVICE_UUID_V2_BUFFER_SIZE];            /* nvmlDeviceGetUUID; "" unknown */
    struct pf_nvml_fact persistence;                          /* nvmlDeviceGetPersistenceMode */
    struct pf_nvml_fact mig_current, mig_pending;             /* nvmlDeviceGetMigMode */
    struct pf_nvml_fact ecc_mode;                             /* nvmlDeviceGetEccMode (current) */
    struct pf_nvml_fact ecc_unc_volatile, ecc_cor_volatile;   /* nvmlDeviceGetTotalEccErrors */
    struct pf_nvml_fact ecc_unc_aggregate, ecc_cor_aggregate; /* (VOLATILE, AGGREGATE) */
    struct pf_nvml_fact retired_sbe, retired_dbe; /* nvmlDeviceGetRetiredPages (count only) */
    struct pf_nvml_fact retired_pending;          /* nvmlDeviceGetRetiredPagesPendingStatus */
    pf_nvmlReturn_t remap_rc;                     /* nvmlDeviceGetRemappedRows */
    unsigned remap_cor, remap_unc, remap_pending, remap_failed;
    struct pf_nvml_fact clocks_event;                   /* nvmlDeviceGetCurrentClocksEventReasons */
    struct pf_nvml_fact pcie_width_max, pcie_width_cur; /* nvmlDeviceGet{Max,Curr}PcieLinkWidth */
    /* nvmlDeviceGetNvLinkState for links 0..17: SUCCESS says the link exists (active or not),
     * NOT_SUPPORTED / INVALID_ARGUMENT that it does not; another error leaves it unknown */
    pf_nvmlReturn_t nvlink_rc; /* SUCCESS when any link answered; else link 0's answer */
    unsigned nvlink_supported, nvlink_active, nvlink_unknown;
    unsigned char
        link[PF_NVML_NVLINK_MAX_LINKS]; /* PF_NVLINK_ABSENT, _INACTIVE, _ACTIVE, _UNKNOWN */
    /* nvmlDeviceGetNvLinkErrorCounter summed over the active links, per counter (DL_REPLAY ..
     * DL_ECC_DATA); rc SUCCESS when at least one link answered */
    struct pf_nvml_fact nvlink_errors[PF_NVML_NVLINK_ERROR_COUNT];
};
enum { PF_NVLINK_ABSENT = 0, PF_NVLINK_INACTIVE, PF_NVLINK_ACTIVE, PF_NVLINK_UNKNOWN };
/* What holds for the whole node: the driver and CUDA versions. */
struct pf_nvml_system {
    pf_nvmlReturn_t driver_rc; /* nvmlSystemGetDriverVersion */
    char driver[PF_NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
    pf_nvmlReturn_t cuda_rc; /* nvmlSystemGetCudaDriverVersion_v2: 12040 is "12.4" */
    int cuda;
};
/* Device i's health facts through l (initialised); never fails: each fact keeps its rc. */
void pf_dl_nvml_health(struct pf_nvml_health *out, const struct pf_dl_nvml *l, unsigned int i);
void pf_dl_nvml_system(struct pf_nvml_system *out, const struct pf_dl_nvml *l);

#endif
