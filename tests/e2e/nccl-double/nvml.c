/* TEST DOUBLE of libnvidia-ml.so.1 — for error-handling tests only (see double.h): no GPU and
 * no NVLink fabric is behind it. It answers the NVML calls gpu.fabric makes with the GPU
 * fabric registration chosen by the environment:
 *   DOUBLE_NVML_GPUS=N      devices (default 1)
 *   DOUBLE_FABRIC=LIST      per GPU, comma-separated: STATE[:STATUS[:CLIQUE[:UUID]]] with
 *                           STATE 0 NOT_SUPPORTED .. 3 COMPLETED, STATUS an nvmlReturn_t,
 *                           UUID 32 hex digits ("0": all zero); default 3:0:32766 and
 *                           DOUBLE_FABRIC_UUID (default 5e1f2a90...01); the last entry
 *                           repeats for the GPUs after it
 *   DOUBLE_NVML_FAIL=init   nvmlInit_v2 fails with NVML_ERROR_DRIVER_NOT_LOADED
 *   DOUBLE_NVML_NOV=1       nvmlDeviceGetGpuFabricInfoV says NVML_ERROR_FUNCTION_NOT_FOUND,
 *                           so the caller must fall back to nvmlDeviceGetGpuFabricInfo
 * The versioned call checks the struct version it is given, as NVML does. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))
#define MAXDEV 64

typedef unsigned int ret_t;
enum {
    OK = 0,
    E_UNINIT = 1,
    E_INVALID = 2,
    E_DRIVER = 9,
    E_NOFUNC = 13,
    E_VERSION = 25,
};

struct nvmlDevice_st {
    unsigned idx;
};
static struct nvmlDevice_st devs[MAXDEV];
static int inited;

/* nvml.h's layouts, written out again here on purpose: the double must not share
 * preflight's declarations, or a wrong layout would agree with itself. */
struct pci_v3 {
    char legacy[16];
    unsigned domain, bus, device, pci_device_id, subsys;
    char bus_id[32];
};
struct fab_v1 {
    unsigned char uuid[16];
    ret_t status;
    unsigned clique;
    unsigned char state;
};
struct fab_v2 {
    unsigned version;
    unsigned char uuid[16];
    ret_t status;
    unsigned clique;
    unsigned char state;
    unsigned health;
};

static unsigned ngpus(void)
{
    const char *s = getenv("DOUBLE_NVML_GPUS");
    int n = s && *s ? atoi(s) : 1;
    return n < 0 ? 0 : n > MAXDEV ? MAXDEV : (unsigned)n;
}

static void hex16(unsigned char out[16], const char *h)
{
    memset(out, 0, 16);
    for (size_t i = 0; i < 16 && h[2 * i] && h[2 * i + 1]; i++) {
        char b[3] = {h[2 * i], h[2 * i + 1], 0};
        out[i] = (unsigned char)strtoul(b, NULL, 16);
    }
}

/* GPU i's entry of DOUBLE_FABRIC */
static void fabric_of(unsigned i, unsigned char *state, ret_t *status, unsigned *clique,
                      unsigned char uuid[16])
{
    const char *u = getenv("DOUBLE_FABRIC_UUID");
    hex16(uuid, u && *u ? u : "5e1f2a90000000000000000000000001");
    *state = 3;
    *status = OK;
    *clique = 32766;
    const char *l = getenv("DOUBLE_FABRIC");
    if (!l || !*l) return;
    char buf[1024];
    snprintf(buf, sizeof(buf), "%s", l);
    char *save = NULL, *tok = strtok_r(buf, ",", &save), *last = tok;
    for (unsigned k = 0; tok && k < i; k++) {
        tok = strtok_r(NULL, ",", &save);
        if (tok) last = tok;
    }
    if (!last) return;
    char *f[4] = {0};
    char *s2 = NULL;
    f[0] = strtok_r(last, ":", &s2);
    for (int k = 1; k < 4 && f[k - 1]; k++)
        f[k] = strtok_r(NULL, ":", &s2);
    if (f[0]) *state = (unsigned char)atoi(f[0]);
    if (f[1]) *status = (ret_t)strtoul(f[1], NULL, 10);
    if (f[2]) *clique = (unsigned)strtoul(f[2], NULL, 10);
    if (f[3]) hex16(uuid, strcmp(f[3], "0") == 0 ? "" : f[3]);
}

EXPORT ret_t nvmlInit_v2(void)
{
    const char *f = getenv("DOUBLE_NVML_FAIL");
    if (f && strcmp(f, "init") == 0) return E_DRIVER;
    inited = 1;
    return OK;
}
EXPORT ret_t nvmlShutdown(void)
{
    if (!inited) return E_UNINIT;
    inited = 0;
    return OK;
}
EXPORT const char *nvmlErrorString(ret_t r)
{
    switch (r) {
    case OK:
        return "Success";
    case E_DRIVER:
        return "Driver Not Loaded";
    case E_NOFUNC:
        return "Function Not Found";
    case E_VERSION:
        return "Argument version mismatch";
    default:
        return "Unknown Error";
    }
}
EXPORT ret_t nvmlDeviceGetCount_v2(unsigned *n)
{
    if (!inited) return E_UNINIT;
    *n = ngpus();
    return OK;
}
EXPORT ret_t nvmlDeviceGetHandleByIndex_v2(unsigned i, struct nvmlDevice_st **d)
{
    if (!inited) return E_UNINIT;
    if (i >= ngpus()) return E_INVALID;
    devs[i].idx = i;
    *d = &devs[i];
    return OK;
}
EXPORT ret_t nvmlDeviceGetPciInfo_v3(struct nvmlDevice_st *d, struct pci_v3 *p)
{
    if (!inited) return E_UNINIT;
    memset(p, 0, sizeof(*p));
    /* the bus ids of tests/fixtures/node-8gpu-ndr's GPUs are not needed: 0x18 + 0x10 x index */
    p->bus = 0x18 + 0x10 * d->idx;
    snprintf(p->bus_id, sizeof(p->bus_id), "00000000:%02X:00.0", p->bus);
    snprintf(p->legacy, sizeof(p->legacy), "0000:%02X:00.0", p->bus);
    return OK;
}
EXPORT ret_t nvmlDeviceGetGpuFabricInfo(struct nvmlDevice_st *d, struct fab_v1 *f)
{
    if (!inited) return E_UNINIT;
    fabric_of(d->idx, &f->state, &f->status, &f->clique, f->uuid);
    return OK;
}
EXPORT ret_t nvmlDeviceGetGpuFabricInfoV(struct nvmlDevice_st *d, struct fab_v2 *f)
{
    if (!inited) return E_UNINIT;
    const char *nov = getenv("DOUBLE_NVML_NOV");
    if (nov && *nov == '1') return E_NOFUNC;
    if (f->version != ((unsigned)sizeof(struct fab_v2) | (2u << 24))) return E_VERSION;
    fabric_of(d->idx, &f->state, &f->status, &f->clique, f->uuid);
    f->health = 0;
    return OK;
}
