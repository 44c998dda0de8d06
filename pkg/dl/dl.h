/* dl: the optional libraries of a training image, loaded at run time with dlopen, one loader
 * per library in the manner of NCCL's ibvsymbols: every function pointer in one struct, an
 * override variable first (PREFLIGHT_CUDA_LIB, PREFLIGHT_NCCL_LIB, PREFLIGHT_IBVERBS_LIB,
 * PREFLIGHT_CURL_LIB), then the versioned soname; required and optional symbols apart; on
 * failure every pointer is NULL and the message keeps dlerror(); each library is loaded once
 * and never closed after a success. The few NCCL, CUDA driver, verbs and libcurl types used
 * are declared here, so the build needs none of their headers; tests/unit/dl/test_dl_abi.c
 * compiles these declarations against the real nccl.h, cuda.h, infiniband/verbs.h and
 * curl/curl.h where they are installed. Under PF_STATIC every loader fails with "static
 * binary: no dlopen". */
#ifndef PF_DL_H
#define PF_DL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../base/base.h"

/* ---- NCCL (nccl.h). Enums are declared as unsigned int, the type GCC and Clang give an enum
 * whose values are all non-negative, so our function pointer types are compatible with the
 * real ones. */
typedef unsigned int pf_ncclResult_t;
enum {
    PF_NCCL_SUCCESS = 0,
    PF_NCCL_UNHANDLED_CUDA_ERROR = 1,
    PF_NCCL_SYSTEM_ERROR = 2,
    PF_NCCL_INTERNAL_ERROR = 3,
    PF_NCCL_INVALID_ARGUMENT = 4,
    PF_NCCL_INVALID_USAGE = 5,
    PF_NCCL_REMOTE_ERROR = 6,
    PF_NCCL_IN_PROGRESS = 7,
    PF_NCCL_TIMEOUT = 8, /* NCCL >= 2.30 only */
};
typedef unsigned int pf_ncclDataType_t;
enum { PF_NCCL_INT32 = 2, PF_NCCL_FLOAT32 = 7 };
typedef unsigned int pf_ncclRedOp_t;
enum { PF_NCCL_SUM = 0 };

struct ncclComm; /* NCCL's own opaque tag */
typedef struct ncclComm *pf_ncclComm_t;
#define PF_NCCL_UNIQUE_ID_BYTES 128
struct pf_ncclUniqueId {
    char internal[PF_NCCL_UNIQUE_ID_BYTES];
};
/* The ncclConfig_t layout of NCCL 2.14 (the first with ncclCommInitRankConfig), with
 * version = NCCL_VERSION(2,14,0). NCCL 2.14 to 2.16 read only `blocking`; from 2.17 on
 * parseCommConfig (src/init.cc, v2.17.1-1 to v2.28.9-1) copies min(size, its own sizeof)
 * bytes over an NCCL_CONFIG_INITIALIZER copy and then puts back the default of every field
 * newer than the config's `version` (cgaClusterSize, minCTAs, maxCTAs, netName: < 2.17;
 * trafficClass: < 2.25; collnetEnable, CTAPolicy, shrinkShare, nvlsCTAs: < 2.27;
 * nChannelsPerNetPeer, nvlinkCentricSched: < 2.28). So every field after `blocking`, the
 * 4 bytes of tail padding copied over cgaClusterSize included, ends up
 * NCCL_CONFIG_UNDEF_INT/PTR (NCCL's default) with every NCCL from 2.14 on; a newer
 * layout would have to list every field with its UNDEF value instead. */
struct pf_ncclConfig {
    size_t size;
    unsigned int magic;   /* PF_NCCL_CONFIG_MAGIC */
    unsigned int version; /* PF_NCCL_CONFIG_VERSION */
    int blocking;
};
#define PF_NCCL_CONFIG_MAGIC 0xcafebeefu
#define PF_NCCL_CONFIG_VERSION 21400u
/* NCCL_VERSION(X,Y,Z): X*10000+Y*100+Z from 2.9 on, X*1000+Y*100+Z before. */
int pf_nccl_version_code(int major, int minor, int patch);
/* Decodes ncclGetVersion's integer into "2.28.9". */
void pf_nccl_version_string(char *out, size_t n, int code);

/* ---- CUDA driver API (cuda.h). */
typedef unsigned int pf_CUresult;
enum {
    PF_CUDA_SUCCESS = 0,
    PF_CUDA_ERROR_INVALID_VALUE = 1,
    PF_CUDA_ERROR_OUT_OF_MEMORY = 2,
    PF_CUDA_ERROR_NOT_INITIALIZED = 3,
    PF_CUDA_ERROR_NO_DEVICE = 100,
    PF_CUDA_ERROR_NOT_READY = 600,
};
typedef int pf_CUdevice;
typedef unsigned long long pf_CUdeviceptr;
struct CUctx_st;
struct CUstream_st;
struct CUevent_st;
typedef struct CUctx_st *pf_CUcontext;
typedef struct CUstream_st *pf_CUstream;
typedef struct CUevent_st *pf_CUevent;
struct pf_CUuuid {
    char bytes[16];
};
enum { PF_CU_STREAM_NON_BLOCKING = 1, PF_CU_EVENT_DEFAULT = 0 };

/* ---- libibverbs (infiniband/verbs.h): opaque handles with rdma-core's own tags. */
struct ibv_device;
struct ibv_context;
struct ibv_pd;
struct ibv_mr;
/* The leading fields of struct ibv_port_attr (unchanged since IBVERBS_1.1); the library may
 * write more, so it is queried into a larger buffer (pf_ibv_port_attr_buf). */
struct pf_ibv_port_attr {
    unsigned int state; /* enum ibv_port_state: 4 ACTIVE */
    unsigned int max_mtu;
    unsigned int active_mtu;
    int gid_tbl_len;
    uint32_t port_cap_flags;
    uint32_t max_msg_sz;
    uint32_t bad_pkey_cntr;
    uint32_t qkey_viol_cntr;
    uint16_t pkey_tbl_len;
    uint16_t lid;
    uint16_t sm_lid;
    uint8_t lmc;
    uint8_t max_vl_num;
    uint8_t sm_sl;
    uint8_t subnet_timeout;
    uint8_t init_type_reply;
    uint8_t active_width;
    uint8_t active_speed;
    uint8_t phys_state;
    uint8_t link_layer; /* 1 InfiniBand, 2 Ethernet */
};
union pf_ibv_port_attr_buf {
    struct pf_ibv_port_attr attr;
    unsigned char room[256];
};
enum { PF_IBV_ACCESS_LOCAL_WRITE = 1 };

/* ---- libcurl (curl/curl.h): the easy interface, enough for one HTTPS request. CURLcode,
 * CURLoption and CURLINFO are enums with non-negative values: unsigned int, as above. */
typedef void pf_CURL;
struct curl_slist; /* libcurl's own tag */
typedef unsigned int pf_CURLcode;
typedef unsigned int pf_CURLoption;
typedef unsigned int pf_CURLINFO;
typedef size_t (*pf_curl_write_fn)(char *ptr, size_t size, size_t nmemb, void *userdata);
enum {
    PF_CURLE_OK = 0,
    PF_CURLE_OPERATION_TIMEDOUT = 28,
    PF_CURL_GLOBAL_DEFAULT = 3,
    PF_CURL_ERROR_SIZE = 256,
    PF_CURLOPT_WRITEDATA = 10001,
    PF_CURLOPT_URL = 10002,
    PF_CURLOPT_ERRORBUFFER = 10010,
    PF_CURLOPT_POSTFIELDS = 10015,
    PF_CURLOPT_USERAGENT = 10018,
    PF_CURLOPT_HTTPHEADER = 10023,
    PF_CURLOPT_CUSTOMREQUEST = 10036,
    PF_CURLOPT_CAINFO = 10065,
    PF_CURLOPT_USERNAME = 10173,
    PF_CURLOPT_PASSWORD = 10174,
    PF_CURLOPT_RESOLVE = 10203,
    PF_CURLOPT_WRITEFUNCTION = 20011,
    PF_CURLOPT_POSTFIELDSIZE = 60,
    PF_CURLOPT_NOSIGNAL = 99,
    PF_CURLOPT_TIMEOUT_MS = 155,
    PF_CURLOPT_CONNECTTIMEOUT_MS = 156,
    PF_CURLINFO_RESPONSE_CODE = 0x200000 + 2,
};

/* ---- the loaders */
#define PF_DL_PATH_MAX 1024

struct pf_dl_nccl {
    void *handle;
    char path[PF_DL_PATH_MAX]; /* the file that was loaded (dladdr) */
    /* required */
    pf_ncclResult_t (*GetVersion)(int *version);
    pf_ncclResult_t (*GetUniqueId)(struct pf_ncclUniqueId *id);
    pf_ncclResult_t (*CommInitRank)(pf_ncclComm_t *comm, int nranks, struct pf_ncclUniqueId id,
                                    int rank);
    pf_ncclResult_t (*CommDestroy)(pf_ncclComm_t comm);
    pf_ncclResult_t (*CommAbort)(pf_ncclComm_t comm);
    pf_ncclResult_t (*CommGetAsyncError)(pf_ncclComm_t comm, pf_ncclResult_t *err);
    const char *(*GetErrorString)(pf_ncclResult_t r);
    pf_ncclResult_t (*GroupStart)(void);
    pf_ncclResult_t (*GroupEnd)(void);
    pf_ncclResult_t (*AllReduce)(const void *send, void *recv, size_t count, pf_ncclDataType_t type,
                                 pf_ncclRedOp_t op, pf_ncclComm_t comm, pf_CUstream stream);
    pf_ncclResult_t (*AllGather)(const void *send, void *recv, size_t sendcount,
                                 pf_ncclDataType_t type, pf_ncclComm_t comm, pf_CUstream stream);
    pf_ncclResult_t (*ReduceScatter)(const void *send, void *recv, size_t recvcount,
                                     pf_ncclDataType_t type, pf_ncclRedOp_t op, pf_ncclComm_t comm,
                                     pf_CUstream stream);
    /* optional (NULL when this NCCL lacks them) */
    pf_ncclResult_t (*CommInitRankConfig)(pf_ncclComm_t *comm, int nranks,
                                          struct pf_ncclUniqueId id, int rank,
                                          struct pf_ncclConfig *config); /* 2.14 */
    pf_ncclResult_t (*CommFinalize)(pf_ncclComm_t comm);                 /* 2.14 */
    const char *(*GetLastError)(pf_ncclComm_t comm);                     /* 2.13 */
    pf_ncclResult_t (*Send)(const void *buf, size_t count, pf_ncclDataType_t type, int peer,
                            pf_ncclComm_t comm, pf_CUstream stream); /* 2.7 */
    pf_ncclResult_t (*Recv)(void *buf, size_t count, pf_ncclDataType_t type, int peer,
                            pf_ncclComm_t comm, pf_CUstream stream); /* 2.7 */
    pf_ncclResult_t (*AlltoAll)(const void *send, void *recv, size_t count, pf_ncclDataType_t type,
                                pf_ncclComm_t comm, pf_CUstream stream); /* 2.28 */
    pf_ncclResult_t (*Broadcast)(const void *send, void *recv, size_t count, pf_ncclDataType_t type,
                                 int root, pf_ncclComm_t comm, pf_CUstream stream);
    pf_ncclResult_t (*Reduce)(const void *send, void *recv, size_t count, pf_ncclDataType_t type,
                              pf_ncclRedOp_t op, int root, pf_ncclComm_t comm, pf_CUstream stream);
};

struct pf_dl_cuda {
    void *handle;
    char path[PF_DL_PATH_MAX];
    /* required */
    pf_CUresult (*Init)(unsigned int flags);
    pf_CUresult (*DriverGetVersion)(int *version);
    pf_CUresult (*DeviceGetCount)(int *count);
    pf_CUresult (*DeviceGet)(pf_CUdevice *dev, int ordinal);
    pf_CUresult (*DeviceGetName)(char *name, int len, pf_CUdevice dev);
    pf_CUresult (*DeviceGetPCIBusId)(char *bus, int len, pf_CUdevice dev);
    pf_CUresult (*DevicePrimaryCtxRetain)(pf_CUcontext *ctx, pf_CUdevice dev);
    pf_CUresult (*DevicePrimaryCtxRelease)(pf_CUdevice dev); /* _v2 */
    pf_CUresult (*CtxSetCurrent)(pf_CUcontext ctx);
    pf_CUresult (*CtxSynchronize)(void);
    pf_CUresult (*MemAlloc)(pf_CUdeviceptr *p, size_t bytes);                 /* _v2 */
    pf_CUresult (*MemFree)(pf_CUdeviceptr p);                                 /* _v2 */
    pf_CUresult (*MemcpyHtoD)(pf_CUdeviceptr dst, const void *src, size_t n); /* _v2 */
    pf_CUresult (*MemcpyDtoH)(void *dst, pf_CUdeviceptr src, size_t n);       /* _v2 */
    pf_CUresult (*StreamCreate)(pf_CUstream *s, unsigned int flags);
    pf_CUresult (*StreamDestroy)(pf_CUstream s); /* _v2 */
    pf_CUresult (*StreamQuery)(pf_CUstream s);
    pf_CUresult (*EventCreate)(pf_CUevent *e, unsigned int flags);
    pf_CUresult (*EventDestroy)(pf_CUevent e); /* _v2 */
    pf_CUresult (*EventRecord)(pf_CUevent e, pf_CUstream s);
    pf_CUresult (*EventQuery)(pf_CUevent e);
    pf_CUresult (*EventElapsedTime)(float *ms, pf_CUevent start, pf_CUevent end); /* _v2 first */
    /* optional */
    pf_CUresult (*GetErrorName)(pf_CUresult r, const char **s);
    pf_CUresult (*GetErrorString)(pf_CUresult r, const char **s);
    pf_CUresult (*DeviceGetUuid)(struct pf_CUuuid *uuid, pf_CUdevice dev); /* _v2 first */
};

struct pf_dl_verbs {
    void *handle;
    char path[PF_DL_PATH_MAX];
    /* required (IBVERBS_1.1, ibv_reg_mr and ibv_dereg_mr IBVERBS_1.0 as NCCL resolves them) */
    struct ibv_device **(*get_device_list)(int *num);
    void (*free_device_list)(struct ibv_device **list);
    const char *(*get_device_name)(struct ibv_device *dev);
    struct ibv_context *(*open_device)(struct ibv_device *dev);
    int (*close_device)(struct ibv_context *ctx);
    int (*query_port)(struct ibv_context *ctx, uint8_t port, void *attr);
    struct ibv_pd *(*alloc_pd)(struct ibv_context *ctx);
    int (*dealloc_pd)(struct ibv_pd *pd);
    struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t len, int access);
    int (*dereg_mr)(struct ibv_mr *mr);
    /* optional: IBVERBS_1.12 (rdma-core 34) */
    struct ibv_mr *(*reg_dmabuf_mr)(struct ibv_pd *pd, uint64_t offset, size_t len, uint64_t iova,
                                    int fd, int access);
};

struct pf_dl_curl {
    void *handle;
    char path[PF_DL_PATH_MAX];
    /* required (all in libcurl 7.x, the soname libcurl.so.4) */
    pf_CURLcode (*global_init)(long flags);
    pf_CURL *(*easy_init)(void);
    pf_CURLcode (*easy_setopt)(pf_CURL *curl, pf_CURLoption option, ...);
    pf_CURLcode (*easy_perform)(pf_CURL *curl);
    pf_CURLcode (*easy_getinfo)(pf_CURL *curl, pf_CURLINFO info, ...);
    void (*easy_cleanup)(pf_CURL *curl);
    const char *(*easy_strerror)(pf_CURLcode code);
    struct curl_slist *(*slist_append)(struct curl_slist *list, const char *s);
    void (*slist_free_all)(struct curl_slist *list);
    char *(*version)(void); /* "libcurl/7.88.1 OpenSSL/3.0.11 zlib/1.2.13 ..." */
};
/* libcurl's override variable, and the older name still read when it is unset. */
#define PF_DL_CURL_ENV "PREFLIGHT_CURL_LIB"
#define PF_DL_CURL_ENV_ALIAS "PREFLIGHT_LIBCURL"

/* Loads the library from path (NULL: the override variable, then the soname, then the
 * image's usual places) into out, without caching. PF_EUNAVAIL with the reason (dlerror()
 * kept, or the missing symbol) when it cannot be used; out is zeroed then. */
int pf_dl_nccl_open(struct pf_dl_nccl *out, const char *path);
/* Where the nvidia-nccl pip wheel keeps NCCL under a site-packages folder. */
#define PF_DL_WHEEL_NCCL "/nvidia/nccl/lib/libnccl.so.2"
/* nccl_path is a wheel's NCCL (<site-packages>/nvidia/nccl/lib/libnccl.so.2) with a
 * pip-installed PyTorch beside it, whose libraries load it first (their RPATH); torch, when
 * not NULL, gets that torch/lib/libtorch_cuda.so. PyTorch's presence is proven by that file
 * being a shared object for this machine (pf_dl_elf_shared) in a trusted tree
 * (pf_dl_path_trusted), not by its name: an empty file or one anyone may replace is no proof.
 * pf_dl_torch_proof says why not in why ("no <file>" when torch is simply absent). */
bool pf_dl_torch_beside(const char *nccl_path, char *torch, size_t n);
bool pf_dl_torch_proof(const char *nccl_path, char *torch, size_t n, char *why, size_t whyn);

/* ---- which files preflight picks itself (pkg/dl/trust.c)
 * A path preflight tries on its own (the usual places after the soname, the trees of
 * PyTorch's wheels) is loaded only when the file and every directory from it up to / is owned
 * by root or by this process's effective uid and is writable by neither group nor others, as
 * the dynamic loader's secure mode loads only from directories root alone writes. The soname
 * (the loader's own search) and an override variable (the operator's choice) are not judged.
 * The links in path are resolved first (realpath) and the file they lead to is judged:
 * resolved (when not NULL) gets it, the name to load so that nothing changes in between.
 * false with why ("/opt/app is owned by uid 1000 (...)") otherwise. */
bool pf_dl_path_trusted(const char *path, char *resolved, size_t rn, char *why, size_t n);
/* b (len bytes, a file's start) is an ELF shared object (ET_DYN) of this process's class,
 * byte order and machine; false with why otherwise. */
bool pf_dl_elf_shared(const unsigned char *b, size_t len, char *why, size_t n);
/* Notes that a path was skipped for library what ("libnccl.so.2"), and why (kept for the whole
 * process, at most 64 notes); pf_dl_skipped appends what's notes, "PATH: WHY", to out. */
void pf_dl_skip_note(const char *what, const char *path, const char *why);
void pf_dl_skipped(struct pf_strlist *out, const char *what);
int pf_dl_cuda_open(struct pf_dl_cuda *out, const char *path);
int pf_dl_verbs_open(struct pf_dl_verbs *out, const char *path);
int pf_dl_curl_open(struct pf_dl_curl *out, const char *path);

/* The process-wide copy, loaded on the first call; later calls give the same result (and set
 * the same message again on failure). */
int pf_dl_nccl(const struct pf_dl_nccl **out);
int pf_dl_cuda(const struct pf_dl_cuda **out);
int pf_dl_verbs(const struct pf_dl_verbs **out);
/* libcurl's process-wide copy, curl_global_init done once it loads. */
int pf_dl_curl(const struct pf_dl_curl **out);
/* The same copy; on the first call of the process, path (a file or soname; NULL or "": the
 * override variables, then the soname) says what to load. For a caller that reads the
 * override from its own copy of the environment. */
int pf_dl_curl_at(const char *path, const struct pf_dl_curl **out);

/* "NCCL error 6 (remote process exited or there was a network error)"; uses the library's
 * strings when loaded. */
void pf_dl_nccl_strerror(char *out, size_t n, const struct pf_dl_nccl *l, pf_ncclResult_t r);
/* "CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)". */
void pf_dl_cuda_strerror(char *out, size_t n, const struct pf_dl_cuda *l, pf_CUresult r);

/* ---- what `preflight version` shows: each optional library, whether it loads here and
 * what it says about itself. */
enum { PF_DL_INFO_NCCL, PF_DL_INFO_CUDA, PF_DL_INFO_VERBS, PF_DL_INFO_CURL, PF_DL_INFO_COUNT };
struct pf_dl_info {
    const char *soname;        /* "libnccl.so.2" */
    bool loaded;               /* false: detail says why */
    char path[PF_DL_PATH_MAX]; /* the file that was loaded */
    char version[64];          /* "2.28.9"; "" when the library cannot tell */
    char detail[512];          /* the rest: "cuInit: CUDA_ERROR_NO_DEVICE (...)", providers */
};
/* Loads each library (through the loaders above) and fills out[i]:
 * NCCL's ncclGetVersion, the CUDA driver API's cuDriverGetVersion and cuInit's result,
 * libibverbs' providers (lib*-rdmav*.so beside it), libcurl's curl_version(). */
void pf_dl_info_gather(struct pf_dl_info out[PF_DL_INFO_COUNT]);
/* One line per library, "  libnccl.so.2     2.28.9 (/usr/lib/.../libnccl.so.2)", appended
 * to out. */
void pf_dl_info_format(struct pf_buf *out, const struct pf_dl_info in[PF_DL_INFO_COUNT]);

/* ---- the dynamic loader's own files (pkg/dl/ldcache.c), read as glibc writes them
 * Looks name up among the entries of an ld.so.cache (b, len bytes: the whole file) as
 * _dl_load_cache_lookup does: the first entry of this machine's flags whose key is name.
 * 1 with its value (the library's path) in path, 0 when no entry has it, -1 with why when b
 * is not a cache ldconfig wrote. entries (when not NULL) gets how many entries the table
 * has. */
int pf_dl_ldcache_find(const unsigned char *b, size_t len, const char *name, char *path, size_t n,
                       size_t *entries, char *why, size_t wn);
/* Reads len bytes at off into buf; returns how many were read (fewer at the end), -1 on
 * error. */
typedef long (*pf_dl_read_at_fn)(void *arg, void *buf, size_t len, uint64_t off);
/* A shared object's DT_RPATH and DT_RUNPATH, as written (with $ORIGIN unexpanded). */
struct pf_dl_elf_paths {
    bool rpath_set, runpath_set;
    char rpath[PF_DL_PATH_MAX];
    char runpath[PF_DL_PATH_MAX];
};
/* Reads them through rd (the file need not be read whole: a libnccl.so.2 is hundreds of
 * MiB): 0, or -1 with why when the file is not a shared object of this machine or its
 * dynamic section cannot be followed. */
int pf_dl_elf_search_paths(struct pf_dl_elf_paths *out, pf_dl_read_at_fn rd, void *arg, char *why,
                           size_t wn);

#endif
