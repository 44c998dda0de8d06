/* pkg/dl/dl.h declares the few NCCL, CUDA driver, verbs and libcurl types and functions
 * preflight uses, so the build needs none of their headers. This test compiles those
 * declarations next to the real nccl.h, cuda.h, infiniband/verbs.h and curl/curl.h (the
 * Makefile adds -I$(CUDA_HOME)/include) and fails
 * to build when a value, a layout or a function type disagrees; each header that is absent
 * here turns its part into a skipped test. The checks are compile-time (_Static_assert with
 * __builtin_types_compatible_p, which also sees the enum-as-unsigned-int choice of dl.h) plus
 * a few run-time ones on the version helpers and on the libcurl loader (libcurl.so.4 is the
 * real one where it is installed; its override variables are set to files that are not
 * there). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../pkg/dl/dl.h"
#include "../../../pkg/dl/nvml.h"

/* a function-pointer field of one of the loader structs, and the real function's pointer */
#define FIELD_T(S, f) __typeof__(((struct S *)0)->f)
#define SAME(a, b) _Static_assert(__builtin_types_compatible_p(a, b), #a " differs from " #b)
#define SAME_FN(S, f, real) SAME(FIELD_T(S, f), __typeof__(&real))
#define SAME_VAL(ours, theirs) _Static_assert((long long)(ours) == (long long)(theirs), #ours)
#define SAME_OFF(S1, f1, S2, f2)                                                                   \
    _Static_assert(offsetof(S1, f1) == offsetof(S2, f2), #S1 "." #f1 " offset")

/* ------------------------------------------------------------------------------------ NCCL */
#if __has_include(<nccl.h>)
#include <nccl.h>
#define HAVE_NCCL_H 1

/* result codes */
SAME(pf_ncclResult_t, ncclResult_t);
SAME_VAL(PF_NCCL_SUCCESS, ncclSuccess);
SAME_VAL(PF_NCCL_UNHANDLED_CUDA_ERROR, ncclUnhandledCudaError);
SAME_VAL(PF_NCCL_SYSTEM_ERROR, ncclSystemError);
SAME_VAL(PF_NCCL_INTERNAL_ERROR, ncclInternalError);
SAME_VAL(PF_NCCL_INVALID_ARGUMENT, ncclInvalidArgument);
SAME_VAL(PF_NCCL_INVALID_USAGE, ncclInvalidUsage);
SAME_VAL(PF_NCCL_REMOTE_ERROR, ncclRemoteError);
SAME_VAL(PF_NCCL_IN_PROGRESS, ncclInProgress);
#if NCCL_VERSION_CODE >= 23000
SAME_VAL(PF_NCCL_TIMEOUT, ncclTimeout);
#else
SAME_VAL(PF_NCCL_TIMEOUT, ncclNumResults); /* the next value, taken by ncclTimeout in 2.30 */
#endif
/* data types and reductions */
SAME(pf_ncclDataType_t, ncclDataType_t);
SAME_VAL(PF_NCCL_INT32, ncclInt32);
SAME_VAL(PF_NCCL_FLOAT32, ncclFloat32);
SAME(pf_ncclRedOp_t, ncclRedOp_t);
SAME_VAL(PF_NCCL_SUM, ncclSum);
/* handles, the unique id, the config */
SAME(pf_ncclComm_t, ncclComm_t);
SAME(pf_CUstream, cudaStream_t);
SAME_VAL(PF_NCCL_UNIQUE_ID_BYTES, NCCL_UNIQUE_ID_BYTES);
_Static_assert(sizeof(struct pf_ncclUniqueId) == sizeof(ncclUniqueId), "ncclUniqueId size");
_Static_assert(_Alignof(struct pf_ncclUniqueId) == _Alignof(ncclUniqueId), "ncclUniqueId align");
SAME_OFF(struct pf_ncclConfig, size, ncclConfig_t, size);
SAME_OFF(struct pf_ncclConfig, magic, ncclConfig_t, magic);
SAME_OFF(struct pf_ncclConfig, version, ncclConfig_t, version);
SAME_OFF(struct pf_ncclConfig, blocking, ncclConfig_t, blocking);
SAME(__typeof__(((struct pf_ncclConfig *)0)->size), __typeof__(((ncclConfig_t *)0)->size));
SAME(__typeof__(((struct pf_ncclConfig *)0)->magic), __typeof__(((ncclConfig_t *)0)->magic));
SAME(__typeof__(((struct pf_ncclConfig *)0)->version), __typeof__(((ncclConfig_t *)0)->version));
SAME(__typeof__(((struct pf_ncclConfig *)0)->blocking), __typeof__(((ncclConfig_t *)0)->blocking));
_Static_assert(sizeof(struct pf_ncclConfig) <= sizeof(ncclConfig_t), "a prefix of ncclConfig_t");
/* NCCL gives every field newer than the config's version (2.14) its default,
 * NCCL_CONFIG_UNDEF_INT (see dl.h); the blocking flag gpus.c sets is 0 (non-blocking),
 * never that value. */
_Static_assert(PF_NCCL_CONFIG_VERSION == NCCL_VERSION(2, 14, 0), "config version 2.14");
_Static_assert(PF_NCCL_CONFIG_MAGIC == 0xcafebeefu, "NCCL_CONFIG_INITIALIZER's magic");
_Static_assert(NCCL_CONFIG_UNDEF_INT == INT_MIN, "NCCL_CONFIG_UNDEF_INT");

/* functions: every field of struct pf_dl_nccl against the real prototype */
SAME_FN(pf_dl_nccl, GetVersion, ncclGetVersion);
SAME_FN(pf_dl_nccl, CommDestroy, ncclCommDestroy);
SAME_FN(pf_dl_nccl, CommAbort, ncclCommAbort);
SAME_FN(pf_dl_nccl, CommGetAsyncError, ncclCommGetAsyncError);
SAME_FN(pf_dl_nccl, GetErrorString, ncclGetErrorString);
SAME_FN(pf_dl_nccl, GroupStart, ncclGroupStart);
SAME_FN(pf_dl_nccl, GroupEnd, ncclGroupEnd);
SAME_FN(pf_dl_nccl, AllReduce, ncclAllReduce);
SAME_FN(pf_dl_nccl, AllGather, ncclAllGather);
SAME_FN(pf_dl_nccl, ReduceScatter, ncclReduceScatter);
SAME_FN(pf_dl_nccl, CommFinalize, ncclCommFinalize);
SAME_FN(pf_dl_nccl, GetLastError, ncclGetLastError);
SAME_FN(pf_dl_nccl, Send, ncclSend);
SAME_FN(pf_dl_nccl, Recv, ncclRecv);
SAME_FN(pf_dl_nccl, Broadcast, ncclBroadcast);
SAME_FN(pf_dl_nccl, Reduce, ncclReduce);
#if NCCL_VERSION_CODE >= 22800
SAME_FN(pf_dl_nccl, AlltoAll, ncclAlltoAll);
#endif
/* The three that take NCCL's anonymous id/config structs: the same function type once those
 * are put in, and dl.h's fields use exactly our layout-equal structs in their place. */
SAME(__typeof__(&ncclGetUniqueId), pf_ncclResult_t (*)(ncclUniqueId *));
SAME(FIELD_T(pf_dl_nccl, GetUniqueId), pf_ncclResult_t (*)(struct pf_ncclUniqueId *));
SAME(__typeof__(&ncclCommInitRank), pf_ncclResult_t (*)(pf_ncclComm_t *, int, ncclUniqueId, int));
SAME(FIELD_T(pf_dl_nccl, CommInitRank),
     pf_ncclResult_t (*)(pf_ncclComm_t *, int, struct pf_ncclUniqueId, int));
SAME(__typeof__(&ncclCommInitRankConfig),
     pf_ncclResult_t (*)(pf_ncclComm_t *, int, ncclUniqueId, int, ncclConfig_t *));
SAME(FIELD_T(pf_dl_nccl, CommInitRankConfig),
     pf_ncclResult_t (*)(pf_ncclComm_t *, int, struct pf_ncclUniqueId, int,
                         struct pf_ncclConfig *));
#endif

/* ------------------------------------------------------------------------ CUDA driver API */
#if __has_include(<cuda.h>)
#include <cuda.h>
#define HAVE_CUDA_H 1

SAME(pf_CUresult, CUresult);
SAME_VAL(PF_CUDA_SUCCESS, CUDA_SUCCESS);
SAME_VAL(PF_CUDA_ERROR_INVALID_VALUE, CUDA_ERROR_INVALID_VALUE);
SAME_VAL(PF_CUDA_ERROR_OUT_OF_MEMORY, CUDA_ERROR_OUT_OF_MEMORY);
SAME_VAL(PF_CUDA_ERROR_NOT_INITIALIZED, CUDA_ERROR_NOT_INITIALIZED);
SAME_VAL(PF_CUDA_ERROR_NO_DEVICE, CUDA_ERROR_NO_DEVICE);
SAME_VAL(PF_CUDA_ERROR_NOT_READY, CUDA_ERROR_NOT_READY);
SAME_VAL(PF_CU_STREAM_NON_BLOCKING, CU_STREAM_NON_BLOCKING);
SAME_VAL(PF_CU_EVENT_DEFAULT, CU_EVENT_DEFAULT);
SAME(pf_CUdevice, CUdevice);
SAME(pf_CUdeviceptr, CUdeviceptr);
SAME(pf_CUcontext, CUcontext);
SAME(pf_CUstream, CUstream);
SAME(pf_CUevent, CUevent);
_Static_assert(sizeof(struct pf_CUuuid) == sizeof(CUuuid), "CUuuid size");
SAME_OFF(struct pf_CUuuid, bytes, CUuuid, bytes);

/* cuda.h maps the names to the versioned exports dl.c resolves (cuMemAlloc is cuMemAlloc_v2
 * and so on), so &cuMemAlloc below is the _v2 function dl.c loads by that name. */
SAME_FN(pf_dl_cuda, Init, cuInit);
SAME_FN(pf_dl_cuda, DriverGetVersion, cuDriverGetVersion);
SAME_FN(pf_dl_cuda, DeviceGetCount, cuDeviceGetCount);
SAME_FN(pf_dl_cuda, DeviceGet, cuDeviceGet);
SAME_FN(pf_dl_cuda, DeviceGetName, cuDeviceGetName);
SAME_FN(pf_dl_cuda, DeviceGetPCIBusId, cuDeviceGetPCIBusId);
SAME_FN(pf_dl_cuda, DevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain);
SAME_FN(pf_dl_cuda, DevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2);
SAME_FN(pf_dl_cuda, CtxSetCurrent, cuCtxSetCurrent);
SAME_FN(pf_dl_cuda, CtxSynchronize, cuCtxSynchronize);
SAME_FN(pf_dl_cuda, MemAlloc, cuMemAlloc_v2);
SAME_FN(pf_dl_cuda, MemFree, cuMemFree_v2);
SAME_FN(pf_dl_cuda, MemcpyHtoD, cuMemcpyHtoD_v2);
SAME_FN(pf_dl_cuda, MemcpyDtoH, cuMemcpyDtoH_v2);
SAME_FN(pf_dl_cuda, StreamCreate, cuStreamCreate);
SAME_FN(pf_dl_cuda, StreamDestroy, cuStreamDestroy_v2);
SAME_FN(pf_dl_cuda, StreamQuery, cuStreamQuery);
SAME_FN(pf_dl_cuda, EventCreate, cuEventCreate);
SAME_FN(pf_dl_cuda, EventDestroy, cuEventDestroy_v2);
SAME_FN(pf_dl_cuda, EventRecord, cuEventRecord);
SAME_FN(pf_dl_cuda, EventQuery, cuEventQuery);
SAME_FN(pf_dl_cuda, EventElapsedTime, cuEventElapsedTime);
SAME_FN(pf_dl_cuda, GetErrorName, cuGetErrorName);
SAME_FN(pf_dl_cuda, GetErrorString, cuGetErrorString);
SAME(__typeof__(&cuDeviceGetUuid), pf_CUresult (*)(CUuuid *, pf_CUdevice));
SAME(FIELD_T(pf_dl_cuda, DeviceGetUuid), pf_CUresult (*)(struct pf_CUuuid *, pf_CUdevice));
#endif

/* ------------------------------------------------------------------------------ libibverbs */
#if __has_include(<infiniband/verbs.h>)
#include <infiniband/verbs.h>
#define HAVE_VERBS_H 1

SAME_VAL(PF_IBV_ACCESS_LOCAL_WRITE, IBV_ACCESS_LOCAL_WRITE);
SAME_OFF(struct pf_ibv_port_attr, state, struct ibv_port_attr, state);
SAME_OFF(struct pf_ibv_port_attr, max_mtu, struct ibv_port_attr, max_mtu);
SAME_OFF(struct pf_ibv_port_attr, active_mtu, struct ibv_port_attr, active_mtu);
SAME_OFF(struct pf_ibv_port_attr, gid_tbl_len, struct ibv_port_attr, gid_tbl_len);
SAME_OFF(struct pf_ibv_port_attr, port_cap_flags, struct ibv_port_attr, port_cap_flags);
SAME_OFF(struct pf_ibv_port_attr, lid, struct ibv_port_attr, lid);
SAME_OFF(struct pf_ibv_port_attr, active_width, struct ibv_port_attr, active_width);
SAME_OFF(struct pf_ibv_port_attr, active_speed, struct ibv_port_attr, active_speed);
SAME_OFF(struct pf_ibv_port_attr, phys_state, struct ibv_port_attr, phys_state);
SAME_OFF(struct pf_ibv_port_attr, link_layer, struct ibv_port_attr, link_layer);
SAME_VAL(IBV_PORT_ACTIVE, 4);
SAME_VAL(IBV_LINK_LAYER_INFINIBAND, 1);
SAME_VAL(IBV_LINK_LAYER_ETHERNET, 2);
_Static_assert(sizeof(struct ibv_port_attr) <= sizeof(union pf_ibv_port_attr_buf),
               "ibv_query_port writes a whole struct ibv_port_attr");

SAME_FN(pf_dl_verbs, get_device_list, ibv_get_device_list);
SAME_FN(pf_dl_verbs, free_device_list, ibv_free_device_list);
SAME_FN(pf_dl_verbs, get_device_name, ibv_get_device_name);
SAME_FN(pf_dl_verbs, open_device, ibv_open_device);
SAME_FN(pf_dl_verbs, close_device, ibv_close_device);
SAME_FN(pf_dl_verbs, alloc_pd, ibv_alloc_pd);
SAME_FN(pf_dl_verbs, dealloc_pd, ibv_dealloc_pd);
SAME_FN(pf_dl_verbs, reg_mr, ibv_reg_mr);
SAME_FN(pf_dl_verbs, dereg_mr, ibv_dereg_mr);
/* the exported ibv_query_port takes rdma-core's compat struct; dl.h passes a buffer */
SAME(__typeof__(&ibv_query_port),
     int (*)(struct ibv_context *, uint8_t, struct _compat_ibv_port_attr *));
SAME(FIELD_T(pf_dl_verbs, query_port), int (*)(struct ibv_context *, uint8_t, void *));
#ifdef IBV_ACCESS_OPTIONAL_RANGE /* rdma-core 34+ declares ibv_reg_dmabuf_mr */
SAME_FN(pf_dl_verbs, reg_dmabuf_mr, ibv_reg_dmabuf_mr);
#endif
#endif

/* -------------------------------------------------------------------------------- libcurl */
#if __has_include(<curl/curl.h>)
#include <curl/curl.h>
#define HAVE_CURL_H 1

SAME(pf_CURL, CURL);
SAME(pf_CURLcode, CURLcode);
SAME(pf_CURLoption, CURLoption);
SAME(pf_CURLINFO, CURLINFO);
SAME(pf_curl_write_fn, curl_write_callback);
SAME_VAL(PF_CURLE_OK, CURLE_OK);
SAME_VAL(PF_CURLE_OPERATION_TIMEDOUT, CURLE_OPERATION_TIMEDOUT);
SAME_VAL(PF_CURL_GLOBAL_DEFAULT, CURL_GLOBAL_DEFAULT);
SAME_VAL(PF_CURL_ERROR_SIZE, CURL_ERROR_SIZE);
SAME_VAL(PF_CURLOPT_WRITEDATA, CURLOPT_WRITEDATA);
SAME_VAL(PF_CURLOPT_URL, CURLOPT_URL);
SAME_VAL(PF_CURLOPT_ERRORBUFFER, CURLOPT_ERRORBUFFER);
SAME_VAL(PF_CURLOPT_POSTFIELDS, CURLOPT_POSTFIELDS);
SAME_VAL(PF_CURLOPT_USERAGENT, CURLOPT_USERAGENT);
SAME_VAL(PF_CURLOPT_HTTPHEADER, CURLOPT_HTTPHEADER);
SAME_VAL(PF_CURLOPT_CUSTOMREQUEST, CURLOPT_CUSTOMREQUEST);
SAME_VAL(PF_CURLOPT_CAINFO, CURLOPT_CAINFO);
SAME_VAL(PF_CURLOPT_USERNAME, CURLOPT_USERNAME);
SAME_VAL(PF_CURLOPT_PASSWORD, CURLOPT_PASSWORD);
SAME_VAL(PF_CURLOPT_RESOLVE, CURLOPT_RESOLVE);
SAME_VAL(PF_CURLOPT_WRITEFUNCTION, CURLOPT_WRITEFUNCTION);
SAME_VAL(PF_CURLOPT_POSTFIELDSIZE, CURLOPT_POSTFIELDSIZE);
SAME_VAL(PF_CURLOPT_NOSIGNAL, CURLOPT_NOSIGNAL);
SAME_VAL(PF_CURLOPT_TIMEOUT_MS, CURLOPT_TIMEOUT_MS);
SAME_VAL(PF_CURLOPT_CONNECTTIMEOUT_MS, CURLOPT_CONNECTTIMEOUT_MS);
SAME_VAL(PF_CURLINFO_RESPONSE_CODE, CURLINFO_RESPONSE_CODE);

/* curl.h wraps curl_easy_setopt and curl_easy_getinfo in type-checking macros under GCC;
 * the names without parentheses are the functions themselves */
SAME_FN(pf_dl_curl, global_init, curl_global_init);
SAME_FN(pf_dl_curl, easy_init, curl_easy_init);
SAME_FN(pf_dl_curl, easy_setopt, curl_easy_setopt);
SAME_FN(pf_dl_curl, easy_perform, curl_easy_perform);
SAME_FN(pf_dl_curl, easy_getinfo, curl_easy_getinfo);
SAME_FN(pf_dl_curl, easy_cleanup, curl_easy_cleanup);
SAME_FN(pf_dl_curl, easy_strerror, curl_easy_strerror);
SAME_FN(pf_dl_curl, slist_append, curl_slist_append);
SAME_FN(pf_dl_curl, slist_free_all, curl_slist_free_all);
SAME_FN(pf_dl_curl, version, curl_version);
#endif

/* ------------------------------------------------------------------------------------ NVML */
/* nvml.h is NVIDIA's header of the nvidia-nvml-dev-cu12 wheel (NVML_API_VERSION 12), which
 * `scripts/deps.sh test` fetches into a cache folder the Makefile adds (NVML_INCLUDE). */
#if __has_include(<nvml.h>)
#include <nvml.h>
#define HAVE_NVML_H 1

SAME(pf_nvmlReturn_t, nvmlReturn_t);
SAME_VAL(PF_NVML_SUCCESS, NVML_SUCCESS);
SAME_VAL(PF_NVML_ERROR_UNINITIALIZED, NVML_ERROR_UNINITIALIZED);
SAME_VAL(PF_NVML_ERROR_INVALID_ARGUMENT, NVML_ERROR_INVALID_ARGUMENT);
SAME_VAL(PF_NVML_ERROR_NOT_SUPPORTED, NVML_ERROR_NOT_SUPPORTED);
SAME_VAL(PF_NVML_ERROR_NO_PERMISSION, NVML_ERROR_NO_PERMISSION);
SAME_VAL(PF_NVML_ERROR_INSUFFICIENT_SIZE, NVML_ERROR_INSUFFICIENT_SIZE);
SAME_VAL(PF_NVML_ERROR_DRIVER_NOT_LOADED, NVML_ERROR_DRIVER_NOT_LOADED);
SAME_VAL(PF_NVML_ERROR_FUNCTION_NOT_FOUND, NVML_ERROR_FUNCTION_NOT_FOUND);
SAME_VAL(PF_NVML_ERROR_ARGUMENT_VERSION_MISMATCH, NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
SAME_VAL(PF_NVML_ERROR_UNKNOWN, NVML_ERROR_UNKNOWN);
SAME(pf_nvmlDevice_t, nvmlDevice_t);
SAME(pf_nvmlEnableState_t, nvmlEnableState_t);
SAME_VAL(PF_NVML_FEATURE_DISABLED, NVML_FEATURE_DISABLED);
SAME_VAL(PF_NVML_FEATURE_ENABLED, NVML_FEATURE_ENABLED);
SAME(pf_nvmlMemoryErrorType_t, nvmlMemoryErrorType_t);
SAME(pf_nvmlEccCounterType_t, nvmlEccCounterType_t);
SAME(pf_nvmlPageRetirementCause_t, nvmlPageRetirementCause_t);
SAME(pf_nvmlNvLinkErrorCounter_t, nvmlNvLinkErrorCounter_t);
SAME_VAL(PF_NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_MEMORY_ERROR_TYPE_CORRECTED);
SAME_VAL(PF_NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_MEMORY_ERROR_TYPE_UNCORRECTED);
SAME_VAL(PF_NVML_VOLATILE_ECC, NVML_VOLATILE_ECC);
SAME_VAL(PF_NVML_AGGREGATE_ECC, NVML_AGGREGATE_ECC);
SAME_VAL(PF_NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS,
         NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS);
SAME_VAL(PF_NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR,
         NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR);
SAME_VAL(PF_NVML_NVLINK_ERROR_DL_REPLAY, NVML_NVLINK_ERROR_DL_REPLAY);
SAME_VAL(PF_NVML_NVLINK_ERROR_DL_RECOVERY, NVML_NVLINK_ERROR_DL_RECOVERY);
SAME_VAL(PF_NVML_NVLINK_ERROR_DL_CRC_FLIT, NVML_NVLINK_ERROR_DL_CRC_FLIT);
SAME_VAL(PF_NVML_NVLINK_ERROR_DL_CRC_DATA, NVML_NVLINK_ERROR_DL_CRC_DATA);
SAME_VAL(PF_NVML_NVLINK_ERROR_DL_ECC_DATA, NVML_NVLINK_ERROR_DL_ECC_DATA);
SAME_VAL(PF_NVML_NVLINK_ERROR_COUNT, NVML_NVLINK_ERROR_COUNT);
SAME_VAL(PF_NVML_NVLINK_MAX_LINKS, NVML_NVLINK_MAX_LINKS);
SAME_VAL(PF_NVML_DEVICE_MIG_DISABLE, NVML_DEVICE_MIG_DISABLE);
SAME_VAL(PF_NVML_DEVICE_MIG_ENABLE, NVML_DEVICE_MIG_ENABLE);
SAME_VAL(PF_NVML_DEVICE_NAME_V2_BUFFER_SIZE, NVML_DEVICE_NAME_V2_BUFFER_SIZE);
SAME_VAL(PF_NVML_DEVICE_UUID_V2_BUFFER_SIZE, NVML_DEVICE_UUID_V2_BUFFER_SIZE);
SAME_VAL(PF_NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE, NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE);
SAME_VAL(PF_NVML_BUS_ID, NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE);
SAME_VAL(PF_NVML_BUS_ID_LEGACY, NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE);
SAME_VAL(PF_NVML_CLOCKS_EVENT_GPU_IDLE, nvmlClocksEventReasonGpuIdle);
SAME_VAL(PF_NVML_CLOCKS_EVENT_APPLICATIONS_CLOCKS_SETTING,
         nvmlClocksEventReasonApplicationsClocksSetting);
SAME_VAL(PF_NVML_CLOCKS_EVENT_SW_POWER_CAP, nvmlClocksEventReasonSwPowerCap);
SAME_VAL(PF_NVML_CLOCKS_THROTTLE_HW_SLOWDOWN, nvmlClocksThrottleReasonHwSlowdown);
SAME_VAL(PF_NVML_CLOCKS_EVENT_SYNC_BOOST, nvmlClocksEventReasonSyncBoost);
SAME_VAL(PF_NVML_CLOCKS_EVENT_SW_THERMAL_SLOWDOWN, nvmlClocksEventReasonSwThermalSlowdown);
SAME_VAL(PF_NVML_CLOCKS_THROTTLE_HW_THERMAL_SLOWDOWN, nvmlClocksThrottleReasonHwThermalSlowdown);
SAME_VAL(PF_NVML_CLOCKS_THROTTLE_HW_POWER_BRAKE_SLOWDOWN,
         nvmlClocksThrottleReasonHwPowerBrakeSlowdown);
SAME_VAL(PF_NVML_CLOCKS_EVENT_DISPLAY_CLOCK_SETTING, nvmlClocksEventReasonDisplayClockSetting);
/* the structs, field by field */
_Static_assert(sizeof(struct pf_nvmlPciInfo) == sizeof(nvmlPciInfo_t), "nvmlPciInfo_t size");
SAME_OFF(struct pf_nvmlPciInfo, busIdLegacy, nvmlPciInfo_t, busIdLegacy);
SAME_OFF(struct pf_nvmlPciInfo, domain, nvmlPciInfo_t, domain);
SAME_OFF(struct pf_nvmlPciInfo, bus, nvmlPciInfo_t, bus);
SAME_OFF(struct pf_nvmlPciInfo, pciSubSystemId, nvmlPciInfo_t, pciSubSystemId);
SAME_OFF(struct pf_nvmlPciInfo, busId, nvmlPciInfo_t, busId);
_Static_assert(sizeof(struct pf_nvmlGpuFabricInfo) == sizeof(nvmlGpuFabricInfo_t),
               "nvmlGpuFabricInfo_t size");
SAME_OFF(struct pf_nvmlGpuFabricInfo, clusterUuid, nvmlGpuFabricInfo_t, clusterUuid);
SAME_OFF(struct pf_nvmlGpuFabricInfo, status, nvmlGpuFabricInfo_t, status);
SAME_OFF(struct pf_nvmlGpuFabricInfo, cliqueId, nvmlGpuFabricInfo_t, cliqueId);
SAME_OFF(struct pf_nvmlGpuFabricInfo, state, nvmlGpuFabricInfo_t, state);
_Static_assert(sizeof(struct pf_nvmlGpuFabricInfo_v2) == sizeof(nvmlGpuFabricInfo_v2_t),
               "nvmlGpuFabricInfo_v2_t size");
SAME_OFF(struct pf_nvmlGpuFabricInfo_v2, version, nvmlGpuFabricInfo_v2_t, version);
SAME_OFF(struct pf_nvmlGpuFabricInfo_v2, state, nvmlGpuFabricInfo_v2_t, state);
SAME_OFF(struct pf_nvmlGpuFabricInfo_v2, healthMask, nvmlGpuFabricInfo_v2_t, healthMask);
SAME_VAL(PF_NVML_GPU_FABRIC_INFO_V2, nvmlGpuFabricInfo_v2);
/* every function pointer of struct pf_dl_nvml against the real prototype (nvml.h maps the
 * plain names to the _v2/_v3 ones the loader resolves) */
SAME_FN(pf_dl_nvml, Init, nvmlInit_v2);
SAME_FN(pf_dl_nvml, Shutdown, nvmlShutdown);
SAME_FN(pf_dl_nvml, DeviceGetCount, nvmlDeviceGetCount_v2);
SAME_FN(pf_dl_nvml, DeviceGetHandleByIndex, nvmlDeviceGetHandleByIndex_v2);
SAME(FIELD_T(pf_dl_nvml, DeviceGetPciInfo_v3),
     nvmlReturn_t (*)(nvmlDevice_t, struct pf_nvmlPciInfo *));
SAME(__typeof__(&nvmlDeviceGetPciInfo_v3), nvmlReturn_t (*)(nvmlDevice_t, nvmlPciInfo_t *));
SAME(FIELD_T(pf_dl_nvml, DeviceGetGpuFabricInfoV),
     nvmlReturn_t (*)(nvmlDevice_t, struct pf_nvmlGpuFabricInfo_v2 *));
SAME(__typeof__(&nvmlDeviceGetGpuFabricInfoV),
     nvmlReturn_t (*)(nvmlDevice_t, nvmlGpuFabricInfo_v2_t *));
SAME(__typeof__(&nvmlDeviceGetGpuFabricInfo),
     nvmlReturn_t (*)(nvmlDevice_t, nvmlGpuFabricInfo_t *));
SAME_FN(pf_dl_nvml, ErrorString, nvmlErrorString);
SAME_FN(pf_dl_nvml, SystemGetDriverVersion, nvmlSystemGetDriverVersion);
SAME_FN(pf_dl_nvml, SystemGetCudaDriverVersion, nvmlSystemGetCudaDriverVersion_v2);
SAME_FN(pf_dl_nvml, SystemGetCudaDriverVersion, nvmlSystemGetCudaDriverVersion);
SAME_FN(pf_dl_nvml, DeviceGetName, nvmlDeviceGetName);
SAME_FN(pf_dl_nvml, DeviceGetUUID, nvmlDeviceGetUUID);
SAME_FN(pf_dl_nvml, DeviceGetPersistenceMode, nvmlDeviceGetPersistenceMode);
SAME_FN(pf_dl_nvml, DeviceGetMigMode, nvmlDeviceGetMigMode);
SAME_FN(pf_dl_nvml, DeviceGetEccMode, nvmlDeviceGetEccMode);
SAME_FN(pf_dl_nvml, DeviceGetTotalEccErrors, nvmlDeviceGetTotalEccErrors);
SAME_FN(pf_dl_nvml, DeviceGetRetiredPages, nvmlDeviceGetRetiredPages);
SAME_FN(pf_dl_nvml, DeviceGetRetiredPagesPendingStatus, nvmlDeviceGetRetiredPagesPendingStatus);
SAME_FN(pf_dl_nvml, DeviceGetRemappedRows, nvmlDeviceGetRemappedRows);
SAME_FN(pf_dl_nvml, DeviceGetNvLinkState, nvmlDeviceGetNvLinkState);
SAME_FN(pf_dl_nvml, DeviceGetNvLinkErrorCounter, nvmlDeviceGetNvLinkErrorCounter);
SAME_FN(pf_dl_nvml, DeviceGetCurrentClocksEventReasons, nvmlDeviceGetCurrentClocksEventReasons);
SAME_FN(pf_dl_nvml, DeviceGetCurrentClocksEventReasons, nvmlDeviceGetCurrentClocksThrottleReasons);
SAME_FN(pf_dl_nvml, DeviceGetMaxPcieLinkWidth, nvmlDeviceGetMaxPcieLinkWidth);
SAME_FN(pf_dl_nvml, DeviceGetCurrPcieLinkWidth, nvmlDeviceGetCurrPcieLinkWidth);
#endif

/* ------------------------------------------------------------------------- run-time tests */

static void nccl_header(void **state)
{
    (void)state;
#ifdef HAVE_NCCL_H
    /* the version helpers against the header's own macro and its version */
    assert_int_equal(pf_nccl_version_code(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), NCCL_VERSION_CODE);
    assert_int_equal(pf_nccl_version_code(2, 8, 4), NCCL_VERSION(2, 8, 4));
    assert_int_equal(pf_nccl_version_code(2, 9, 6), NCCL_VERSION(2, 9, 6));
    assert_int_equal(pf_nccl_version_code(2, 30, 7), NCCL_VERSION(2, 30, 7));
    char want[32], got[32];
    snprintf(want, sizeof(want), "%d.%d.%d", NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH);
    pf_nccl_version_string(got, sizeof(got), NCCL_VERSION_CODE);
    assert_string_equal(got, want);
    pf_nccl_version_string(got, sizeof(got), NCCL_VERSION(2, 8, 4));
    assert_string_equal(got, "2.8.4");
    /* what NCCL_CONFIG_INITIALIZER sets is what dl.h's config carries */
    ncclConfig_t real = NCCL_CONFIG_INITIALIZER;
    assert_int_equal(real.magic, PF_NCCL_CONFIG_MAGIC);
    assert_true(real.version >= PF_NCCL_CONFIG_VERSION);
    assert_int_equal(real.blocking, NCCL_CONFIG_UNDEF_INT);
    assert_int_equal(NCCL_VERSION(2, 14, 0), PF_NCCL_CONFIG_VERSION);
#else
    skip();
#endif
}

static void cuda_header(void **state)
{
    (void)state;
#ifdef HAVE_CUDA_H
    assert_true(CUDA_VERSION > 0); /* the declarations above compiled */
#else
    skip();
#endif
}

static void verbs_header(void **state)
{
    (void)state;
#ifdef HAVE_VERBS_H
    assert_true(sizeof(struct ibv_port_attr) > sizeof(struct pf_ibv_port_attr) - 8);
#else
    skip();
#endif
}

/* The names nvml.h maps its plain names to are those pkg/dl/nvml.c resolves. */
static void nvml_header(void **state)
{
    (void)state;
#ifdef HAVE_NVML_H
    assert_int_equal(NVML_API_VERSION, 12);
#define NVML_NAME(api) NVML_NAME2(api)
#define NVML_NAME2(api) #api
    static const char *const pairs[][2] = {
        {NVML_NAME(nvmlInit), "nvmlInit_v2"},
        {NVML_NAME(nvmlDeviceGetCount), "nvmlDeviceGetCount_v2"},
        {NVML_NAME(nvmlDeviceGetHandleByIndex), "nvmlDeviceGetHandleByIndex_v2"},
        {NVML_NAME(nvmlDeviceGetPciInfo), "nvmlDeviceGetPciInfo_v3"},
    };
    for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++)
        assert_string_equal(pairs[i][0], pairs[i][1]);
#else
    print_message("no nvml.h (scripts/deps.sh test fetches it): not compared\n");
    skip();
#endif
}

static void curl_header(void **state)
{
    (void)state;
#ifdef HAVE_CURL_H
    assert_true(LIBCURL_VERSION_NUM > 0); /* the declarations above compiled */
#else
    skip();
#endif
}

/* PREFLIGHT_CURL_LIB first, then its older name PREFLIGHT_LIBCURL, then libcurl.so.4; a file
 * that is not there fails the load with its name in the message and every pointer NULL. */
static void curl_override_variables(void **state)
{
    (void)state;
    struct pf_dl_curl l;
    unsetenv(PF_DL_CURL_ENV);
    setenv(PF_DL_CURL_ENV_ALIAS, "/nonexistent/libcurl-older-name.so.4", 1);
    assert_int_equal(pf_dl_curl_open(&l, NULL), PF_EUNAVAIL);
    assert_non_null(strstr(pf_err_msg(), "/nonexistent/libcurl-older-name.so.4"));
    assert_null(l.handle);
    assert_null(l.easy_init);
    setenv(PF_DL_CURL_ENV, "/nonexistent/libcurl-new-name.so.4", 1);
    assert_int_equal(pf_dl_curl_open(&l, NULL), PF_EUNAVAIL);
    assert_non_null(strstr(pf_err_msg(), "/nonexistent/libcurl-new-name.so.4"));
    assert_null(strstr(pf_err_msg(), "older-name"));
    /* dlerror() names the file already: the message says it once */
    const char *first = strstr(pf_err_msg(), "libcurl-new-name");
    assert_null(strstr(first + 1, "libcurl-new-name"));
    /* an explicit path wins over both */
    assert_int_equal(pf_dl_curl_open(&l, "/nonexistent/libcurl-by-path.so.4"), PF_EUNAVAIL);
    assert_non_null(strstr(pf_err_msg(), "libcurl-by-path"));
    /* a library without libcurl's symbols: the missing one is named */
    assert_int_equal(pf_dl_curl_open(&l, "libc.so.6"), PF_EUNAVAIL);
    assert_non_null(strstr(pf_err_msg(), "symbol curl_global_init missing"));
    assert_null(l.handle);
    unsetenv(PF_DL_CURL_ENV);
    unsetenv(PF_DL_CURL_ENV_ALIAS);
}

/* The real libcurl.so.4 of this machine: every symbol resolves, the path is the file, and
 * curl_version() is libcurl's own string. */
/* The real libnccl.so.2, where one loads: every symbol dl.c resolves is there, the
 * optional ones too from NCCL 2.28 on (ncclAlltoAll is the newest). The library is NCCL's
 * PyPI wheel where tests/run.sh names it (NVIDIA_NCCL_LIB, scripts/nvidia-pypi.sh), else
 * the one dl.c's own search finds. */
static void nccl_real_library(void **state)
{
    (void)state;
    unsetenv("PREFLIGHT_NCCL_LIB");
    const char *wheel = getenv("NVIDIA_NCCL_LIB");
    struct pf_dl_nccl l;
    if (pf_dl_nccl_open(&l, wheel && *wheel ? wheel : NULL) < 0) {
        print_message("libnccl.so.2 does not load here: %s\n", pf_err_msg());
        skip();
    }
    int v = 0;
    assert_int_equal(l.GetVersion(&v), PF_NCCL_SUCCESS);
    assert_true(v > 0);
    if (v < 22800) return;
    assert_non_null(l.CommInitRankConfig);
    assert_non_null(l.CommFinalize);
    assert_non_null(l.GetLastError);
    assert_non_null(l.Send);
    assert_non_null(l.Recv);
    assert_non_null(l.AlltoAll);
    assert_non_null(l.Broadcast);
    assert_non_null(l.Reduce);
}

/* The symbol names dl.c resolves are the ones cuda.h binds the API names to (the default
 * ABI, no per-thread default stream): cuMemAlloc is cuMemAlloc_v2, cuEventElapsedTime is
 * cuEventElapsedTime_v2 since CUDA 12.8, and so on; a name cuda.h moved to a newer version
 * would fail here. Then the CUDA toolkit's stub libcuda.so, which exports every entry point
 * of its driver API, loads through dl.c's table: every name exists. */
#define NAME_OF(api) NAME_OF2(api)
#define NAME_OF2(api) #api
static void cuda_exported_names(void **state)
{
    (void)state;
#ifdef HAVE_CUDA_H
#ifdef CUDA_API_PER_THREAD_DEFAULT_STREAM
    skip();
#endif
    static const char *const pairs[][2] = {
        {NAME_OF(cuInit), "cuInit"},
        {NAME_OF(cuDriverGetVersion), "cuDriverGetVersion"},
        {NAME_OF(cuDeviceGetCount), "cuDeviceGetCount"},
        {NAME_OF(cuDeviceGet), "cuDeviceGet"},
        {NAME_OF(cuDeviceGetName), "cuDeviceGetName"},
        {NAME_OF(cuDeviceGetPCIBusId), "cuDeviceGetPCIBusId"},
        {NAME_OF(cuDevicePrimaryCtxRetain), "cuDevicePrimaryCtxRetain"},
        {NAME_OF(cuDevicePrimaryCtxRelease), "cuDevicePrimaryCtxRelease_v2"},
        {NAME_OF(cuCtxSetCurrent), "cuCtxSetCurrent"},
        {NAME_OF(cuCtxSynchronize), "cuCtxSynchronize"},
        {NAME_OF(cuMemAlloc), "cuMemAlloc_v2"},
        {NAME_OF(cuMemFree), "cuMemFree_v2"},
        {NAME_OF(cuMemcpyHtoD), "cuMemcpyHtoD_v2"},
        {NAME_OF(cuMemcpyDtoH), "cuMemcpyDtoH_v2"},
        {NAME_OF(cuStreamCreate), "cuStreamCreate"},
        {NAME_OF(cuStreamDestroy), "cuStreamDestroy_v2"},
        {NAME_OF(cuStreamQuery), "cuStreamQuery"},
        {NAME_OF(cuEventCreate), "cuEventCreate"},
        {NAME_OF(cuEventDestroy), "cuEventDestroy_v2"},
        {NAME_OF(cuEventRecord), "cuEventRecord"},
        {NAME_OF(cuEventQuery), "cuEventQuery"},
        {NAME_OF(cuGetErrorName), "cuGetErrorName"},
        {NAME_OF(cuGetErrorString), "cuGetErrorString"},
#if CUDA_VERSION >= 12080
        {NAME_OF(cuEventElapsedTime), "cuEventElapsedTime_v2"},
#endif
#if CUDA_VERSION >= 11040
        {NAME_OF(cuDeviceGetUuid), "cuDeviceGetUuid_v2"},
#endif
    };
    for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++)
        assert_string_equal(pairs[i][0], pairs[i][1]);
    const char *home = getenv("CUDA_HOME");
    char stub[512];
    snprintf(stub, sizeof(stub), "%s/lib64/stubs/libcuda.so",
             home && *home ? home : "/usr/local/cuda");
    FILE *f = fopen(stub, "r");
    if (!f) {
        print_message("no %s: the exported names are not checked\n", stub);
        return;
    }
    fclose(f);
    struct pf_dl_cuda l;
    if (pf_dl_cuda_open(&l, stub) < 0) fail_msg("%s", pf_err_msg());
    assert_non_null(l.CtxSynchronize);
    assert_non_null(l.EventElapsedTime);
    assert_non_null(l.DeviceGetUuid);
#else
    skip();
#endif
}

static void curl_real_library(void **state)
{
    (void)state;
    unsetenv(PF_DL_CURL_ENV);
    unsetenv(PF_DL_CURL_ENV_ALIAS);
    struct pf_dl_curl l;
    if (pf_dl_curl_open(&l, NULL) < 0) {
        print_message("libcurl.so.4 does not load here: %s\n", pf_err_msg());
        skip();
    }
    assert_non_null(l.handle);
    assert_non_null(strstr(l.path, "libcurl"));
    assert_non_null(l.easy_setopt);
    assert_non_null(l.slist_free_all);
    assert_int_equal(strncmp(l.version(), "libcurl/", 8), 0);
    const struct pf_dl_curl *g = NULL;
    assert_int_equal(pf_dl_curl(&g), 0); /* the process-wide copy: loaded and initialized */
    assert_non_null(g);
    pf_CURL *h = g->easy_init();
    assert_non_null(h);
    g->easy_cleanup(h);
    const struct pf_dl_curl *again = NULL;
    assert_int_equal(pf_dl_curl_at("/nonexistent/ignored-after-the-first-load.so", &again), 0);
    assert_ptr_equal(again, g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(nccl_header),         cmocka_unit_test(cuda_header),
        cmocka_unit_test(cuda_exported_names), cmocka_unit_test(nccl_real_library),
        cmocka_unit_test(verbs_header),        cmocka_unit_test(nvml_header),
        cmocka_unit_test(curl_header),         cmocka_unit_test(curl_override_variables),
        cmocka_unit_test(curl_real_library),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
