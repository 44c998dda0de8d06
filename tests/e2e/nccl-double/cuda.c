/* TEST DOUBLE of libcuda.so.1 — for error-handling tests only, never proof that the GPU path
 * works (see double.h). Environment:
 *   DOUBLE_GPUS=N          devices to report (default 1; 0: cuDeviceGetCount says none)
 *   DOUBLE_CUDA_FAIL=init  cuInit fails with CUDA_ERROR_NO_DEVICE ("nodevice") or
 *                          CUDA_ERROR_NOT_INITIALIZED ("init") */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "double.h"

typedef unsigned int CUresult;
enum {
    OK = 0,
    E_INVALID_VALUE = 1,
    E_OUT_OF_MEMORY = 2,
    E_NOT_INITIALIZED = 3,
    E_INVALID_CONTEXT = 201,
    E_NO_DEVICE = 100,
};
#define MAXDEV 64

struct CUctx_st {
    int dev;
};
static struct CUctx_st ctxs[MAXDEV];
static __thread struct CUctx_st *current;
static int inited;

#define EXPORT __attribute__((visibility("default")))

static int ngpus(void)
{
    const char *s = getenv("DOUBLE_GPUS");
    int n = s && *s ? atoi(s) : 1;
    return n < 0 ? 0 : n > MAXDEV ? MAXDEV : n;
}

static const char *fail_mode(void)
{
    const char *s = getenv("DOUBLE_CUDA_FAIL");
    return s ? s : "";
}

EXPORT CUresult cuInit(unsigned int flags)
{
    if (flags != 0) return E_INVALID_VALUE;
    if (strcmp(fail_mode(), "nodevice") == 0) return E_NO_DEVICE;
    if (strcmp(fail_mode(), "init") == 0) return E_NOT_INITIALIZED;
    inited = 1;
    return OK;
}

EXPORT CUresult cuDriverGetVersion(int *v)
{
    *v = 13000;
    return OK;
}

EXPORT CUresult cuDeviceGetCount(int *n)
{
    if (!inited) return E_NOT_INITIALIZED;
    *n = ngpus();
    return OK;
}

EXPORT CUresult cuDeviceGet(int *dev, int ordinal)
{
    if (ordinal < 0 || ordinal >= ngpus()) return E_INVALID_VALUE;
    *dev = ordinal;
    return OK;
}

EXPORT CUresult cuDeviceGetName(char *name, int len, int dev)
{
    snprintf(name, (size_t)len, "Test Double %d (not a GPU)", dev);
    return OK;
}

EXPORT CUresult cuDeviceGetPCIBusId(char *bus, int len, int dev)
{
    snprintf(bus, (size_t)len, "0000:%02x:00.0", 0x10 + dev);
    return OK;
}

EXPORT CUresult cuDeviceGetUuid_v2(unsigned char *uuid, int dev)
{
    memset(uuid, 0xd0, 16);
    uuid[15] = (unsigned char)dev;
    return OK;
}

EXPORT CUresult cuDevicePrimaryCtxRetain(struct CUctx_st **ctx, int dev)
{
    if (dev < 0 || dev >= ngpus()) return E_INVALID_VALUE;
    ctxs[dev].dev = dev;
    *ctx = &ctxs[dev];
    return OK;
}

EXPORT CUresult cuDevicePrimaryCtxRelease_v2(int dev)
{
    return dev >= 0 && dev < ngpus() ? OK : E_INVALID_VALUE;
}

EXPORT CUresult cuCtxSetCurrent(struct CUctx_st *ctx)
{
    current = ctx;
    return OK;
}

EXPORT CUresult cuCtxSynchronize(void)
{
    return current ? OK : E_INVALID_CONTEXT;
}

EXPORT CUresult cuMemAlloc_v2(unsigned long long *p, size_t bytes)
{
    if (!current) return E_INVALID_CONTEXT;
    void *m = malloc(bytes ? bytes : 1);
    if (!m) return E_OUT_OF_MEMORY;
    *p = (unsigned long long)(size_t)m;
    return OK;
}

EXPORT CUresult cuMemFree_v2(unsigned long long p)
{
    free((void *)(size_t)p);
    return OK;
}

EXPORT CUresult cuMemcpyHtoD_v2(unsigned long long dst, const void *src, size_t n)
{
    memcpy((void *)(size_t)dst, src, n);
    return OK;
}

EXPORT CUresult cuMemcpyDtoH_v2(void *dst, unsigned long long src, size_t n)
{
    memcpy(dst, (const void *)(size_t)src, n);
    return OK;
}

EXPORT CUresult cuStreamCreate(struct CUstream_st **s, unsigned int flags)
{
    (void)flags;
    if (!current) return E_INVALID_CONTEXT;
    *s = calloc(1, sizeof(**s));
    if (!*s) return E_OUT_OF_MEMORY;
    (*s)->dev = current->dev;
    return OK;
}

EXPORT CUresult cuStreamDestroy_v2(struct CUstream_st *s)
{
    free(s);
    return OK;
}

EXPORT CUresult cuStreamQuery(struct CUstream_st *s)
{
    (void)s;
    return OK;
}

EXPORT CUresult cuEventCreate(struct CUevent_st **e, unsigned int flags)
{
    (void)flags;
    *e = calloc(1, sizeof(**e));
    return *e ? OK : E_OUT_OF_MEMORY;
}

EXPORT CUresult cuEventDestroy_v2(struct CUevent_st *e)
{
    free(e);
    return OK;
}

EXPORT CUresult cuEventRecord(struct CUevent_st *e, struct CUstream_st *s)
{
    e->t_ns = s ? s->clock_ns : 0;
    return OK;
}

EXPORT CUresult cuEventQuery(struct CUevent_st *e)
{
    (void)e;
    return OK;
}

EXPORT CUresult cuEventElapsedTime_v2(float *ms, struct CUevent_st *start, struct CUevent_st *end)
{
    *ms = (float)((double)(end->t_ns - start->t_ns) / 1e6);
    return OK;
}

static const char *name_of(CUresult r)
{
    switch (r) {
    case OK:
        return "CUDA_SUCCESS";
    case E_INVALID_VALUE:
        return "CUDA_ERROR_INVALID_VALUE";
    case E_OUT_OF_MEMORY:
        return "CUDA_ERROR_OUT_OF_MEMORY";
    case E_NOT_INITIALIZED:
        return "CUDA_ERROR_NOT_INITIALIZED";
    case E_NO_DEVICE:
        return "CUDA_ERROR_NO_DEVICE";
    case E_INVALID_CONTEXT:
        return "CUDA_ERROR_INVALID_CONTEXT";
    default:
        return NULL;
    }
}

EXPORT CUresult cuGetErrorName(CUresult r, const char **s)
{
    *s = name_of(r);
    return *s ? OK : E_INVALID_VALUE;
}

EXPORT CUresult cuGetErrorString(CUresult r, const char **s)
{
    *s = name_of(r) ? "test double error" : NULL;
    return *s ? OK : E_INVALID_VALUE;
}
