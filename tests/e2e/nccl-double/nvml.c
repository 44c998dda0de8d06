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
 * The versioned call checks the struct version it is given, as NVML does.
 *
 * For gpu.health it answers the health calls from a table of nvml_profiles.h, each built from a
 * real `nvidia-smi -q` capture whose source the table names:
 *   DOUBLE_NVML_PROFILE=ID  h100-sxm, h100-sxm-powerbrake, a100-sxm, h100-remap-pending,
 *                           a100-pcie-ecc, v100-nvlink-down, gb200; its GPU count and bus ids
 *                           unless DOUBLE_NVML_GPUS says otherwise. Without a profile every
 *                           health call answers NVML_ERROR_NOT_SUPPORTED.
 *   DOUBLE_NVML_FAULTS=LIST  more faults, ';'-separated GPU:FAULT (GPU an index or "all"):
 *                           nvlink=N (N links active, the rest inactive), ecc=N (volatile
 *                           uncorrected), remap-pending, remap-failed, retire-pending,
 *                           pcie=W (current width), clocks=0xBITS, mig, persistence-off,
 *                           err=CALL:RC (CALL answers nvmlReturn_t RC: ecc, remap, clocks,
 *                           nvlink, pcie, mig, persistence, retired)
 * Built with -DDOUBLE_OLD_NVML it exports the older names an NVML before R535 has (see below).
 * Its signatures are nvml.h's (tests/unit/dl/test_dl_abi.c compares pkg/dl/nvml.h with the
 * real header; this file keeps its own copy on purpose, see below). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <stdbool.h>
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
 * preflight's declarations, or a wrong layout would agree with itself. Built with
 * -DDOUBLE_NVML_H and NVIDIA's nvml.h on the include path (test_gpu_health.sh, when
 * `scripts/deps.sh test` fetched it), the real header's types are used instead and every
 * function below is compiled against its prototype there: a signature that differs from
 * nvml.h's fails the build. */
#ifdef DOUBLE_NVML_H
#define NVML_NO_UNVERSIONED_FUNC_DEFS
#include <nvml.h>
typedef nvmlPciInfo_t pci_v3;
typedef nvmlGpuFabricInfo_t fab_v1;
typedef nvmlGpuFabricInfo_v2_t fab_v2;
#else
typedef struct {
    char busIdLegacy[16];
    unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} pci_v3;
typedef struct {
    unsigned char clusterUuid[16];
    ret_t status;
    unsigned cliqueId;
    unsigned char state;
} fab_v1;
typedef struct {
    unsigned version;
    unsigned char clusterUuid[16];
    ret_t status;
    unsigned cliqueId;
    unsigned char state;
    unsigned healthMask;
} fab_v2;
#endif

#include "nvml_profiles.h"

static const struct prof *profile(void)
{
    const char *id = getenv("DOUBLE_NVML_PROFILE");
    for (size_t i = 0; id && i < sizeof(profiles) / sizeof(profiles[0]); i++)
        if (strcmp(profiles[i].id, id) == 0) return &profiles[i];
    return NULL;
}

static unsigned ngpus(void)
{
    const char *s = getenv("DOUBLE_NVML_GPUS");
    const struct prof *p = profile();
    int n = s && *s ? atoi(s) : p ? (int)p->ngpus : 1;
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
    case 3:
        return "Not Supported";
    case 4:
        return "Insufficient Permissions";
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
EXPORT ret_t nvmlDeviceGetPciInfo_v3(struct nvmlDevice_st *d, pci_v3 *p)
{
    if (!inited) return E_UNINIT;
    memset(p, 0, sizeof(*p));
    /* the bus ids of tests/fixtures/node-8gpu-ndr's GPUs are not needed: 0x18 + 0x10 x index */
    const struct prof *pr = profile();
    p->bus = pr && d->idx < pr->ngpus ? pr->bus[d->idx] : 0x18 + 0x10 * d->idx;
    snprintf(p->busId, sizeof(p->busId), "00000000:%02X:00.0", p->bus);
    snprintf(p->busIdLegacy, sizeof(p->busIdLegacy), "0000:%02X:00.0", p->bus);
    return OK;
}
EXPORT ret_t nvmlDeviceGetGpuFabricInfo(struct nvmlDevice_st *d, fab_v1 *f)
{
    if (!inited) return E_UNINIT;
    ret_t status = OK;
    fabric_of(d->idx, &f->state, &status, &f->cliqueId, f->clusterUuid);
    f->status = status;
    return OK;
}
EXPORT ret_t nvmlDeviceGetGpuFabricInfoV(struct nvmlDevice_st *d, fab_v2 *f)
{
    if (!inited) return E_UNINIT;
    const char *nov = getenv("DOUBLE_NVML_NOV");
    if (nov && *nov == '1') return E_NOFUNC;
    if (f->version != ((unsigned)sizeof(fab_v2) | (2u << 24))) return E_VERSION;
    ret_t status = OK;
    fabric_of(d->idx, &f->state, &status, &f->cliqueId, f->clusterUuid);
    f->status = status;
    f->healthMask = 0;
    return OK;
}

/* ---- gpu.health */
enum { E_NOTSUP = 3, E_NOPERM = 4 };

/* GPU i's answers: the profile's, healthy on the GPUs its capture does not name, then the
 * faults of DOUBLE_NVML_FAULTS. */
struct gpu_state {
    const struct prof *p;
    unsigned persistence, mig, ecc_unc, remap_unc, remap_cor, remap_pending, remap_failed;
    unsigned retired_pending, pcie_cur, nvlinks, inactive;
    unsigned long long clocks;
    char err_call[16];
    ret_t err_rc;
};

static void gpu_state(struct gpu_state *g, unsigned i)
{
    memset(g, 0, sizeof(*g));
    const struct prof *p = profile();
    g->p = p;
    if (!p) return;
    bool faulty = p->faulty_gpu == i;
    g->persistence = p->persistence;
    g->mig = p->mig;
    g->ecc_unc = faulty ? p->ecc_unc : 0;
    g->remap_cor = p->remap_cor;
    g->remap_unc = faulty || p->remap_unc == NOT_SUP ? p->remap_unc : 0;
    g->remap_pending = faulty || p->remap_pending == NOT_SUP ? p->remap_pending : 0;
    g->remap_failed = p->remap_failed;
    g->retired_pending = p->retired == NOT_SUP ? NOT_SUP : 0;
    g->clocks = p->clocks;
    g->pcie_cur = p->pcie_cur;
    g->nvlinks = p->nvlinks;
    g->inactive = faulty ? p->inactive_mask : 0;
    const char *l = getenv("DOUBLE_NVML_FAULTS");
    if (!l || !*l) return;
    char buf[1024];
    snprintf(buf, sizeof(buf), "%s", l);
    char *save = NULL;
    for (char *t = strtok_r(buf, ";", &save); t; t = strtok_r(NULL, ";", &save)) {
        char *colon = strchr(t, ':');
        if (!colon) continue;
        *colon = '\0';
        if (strcmp(t, "all") != 0 && (unsigned)atoi(t) != i) continue;
        char *f = colon + 1, *eq = strchr(f, '=');
        const char *v = eq ? eq + 1 : "";
        if (eq) *eq = '\0';
        if (strcmp(f, "nvlink") == 0) {
            unsigned active = (unsigned)atoi(v);
            g->inactive = 0;
            for (unsigned k = active; k < g->nvlinks; k++)
                g->inactive |= 1u << k;
        } else if (strcmp(f, "ecc") == 0) {
            g->ecc_unc = (unsigned)atoi(v);
        } else if (strcmp(f, "remap-pending") == 0) {
            g->remap_pending = 1;
        } else if (strcmp(f, "remap-failed") == 0) {
            g->remap_failed = 1;
        } else if (strcmp(f, "retire-pending") == 0) {
            g->retired_pending = 1;
        } else if (strcmp(f, "pcie") == 0) {
            g->pcie_cur = (unsigned)atoi(v);
        } else if (strcmp(f, "clocks") == 0) {
            g->clocks = strtoull(v, NULL, 0);
        } else if (strcmp(f, "mig") == 0) {
            g->mig = 1;
        } else if (strcmp(f, "persistence-off") == 0) {
            g->persistence = 0;
        } else if (strcmp(f, "err") == 0) {
            const char *c2 = strchr(v, ':');
            if (!c2) continue;
            snprintf(g->err_call, sizeof(g->err_call), "%.*s", (int)(c2 - v), v);
            g->err_rc = (ret_t)atoi(c2 + 1);
        }
    }
}

/* the rc a call answers: the profile's absence, an injected error, or OK */
static ret_t answer(const struct gpu_state *g, const char *call, unsigned field)
{
    if (!inited) return E_UNINIT;
    if (!g->p) return E_NOTSUP;
    if (g->err_call[0] && strcmp(g->err_call, call) == 0) return g->err_rc;
    return field == NOT_SUP ? E_NOTSUP : OK;
}

EXPORT ret_t nvmlSystemGetDriverVersion(char *version, unsigned length)
{
    const struct prof *p = profile();
    if (!inited) return E_UNINIT;
    if (!p) return E_NOTSUP;
    snprintf(version, length, "%s", p->driver);
    return OK;
}
/* -DDOUBLE_OLD_NVML: the names of an NVML before the _v2 CUDA version call and before
 * clock "event" reasons (R418-R530 export nvmlSystemGetCudaDriverVersion and
 * nvmlDeviceGetCurrentClocksThrottleReasons), and without nvmlDeviceGetRemappedRows (R450 on):
 * the loader must fall back to the older names and leave the remapped rows unknown */
#ifdef DOUBLE_OLD_NVML
#define nvmlSystemGetCudaDriverVersion_v2 nvmlSystemGetCudaDriverVersion
#define nvmlDeviceGetCurrentClocksEventReasons nvmlDeviceGetCurrentClocksThrottleReasons
#define nvmlDeviceGetRemappedRows double_no_remapped_rows
#define EXPORT_REMAP static __attribute__((unused))
#else
#define EXPORT_REMAP EXPORT
#endif
EXPORT ret_t nvmlSystemGetCudaDriverVersion_v2(int *v)
{
    const struct prof *p = profile();
    if (!inited) return E_UNINIT;
    if (!p) return E_NOTSUP;
    *v = p->cuda;
    return OK;
}
EXPORT ret_t nvmlDeviceGetName(struct nvmlDevice_st *d, char *name, unsigned length)
{
    const struct prof *p = profile();
    if (!inited) return E_UNINIT;
    if (!p) return E_NOTSUP;
    (void)d;
    snprintf(name, length, "%s", p->name);
    return OK;
}
EXPORT ret_t nvmlDeviceGetUUID(struct nvmlDevice_st *d, char *uuid, unsigned length)
{
    if (!inited) return E_UNINIT;
    if (!profile()) return E_NOTSUP;
    snprintf(uuid, length, "GPU-d0ub1e00-0000-0000-0000-%012x", d->idx);
    return OK;
}
EXPORT ret_t nvmlDeviceGetPersistenceMode(struct nvmlDevice_st *d, unsigned *mode)
{
    struct gpu_state g;
    gpu_state(&g, d->idx);
    ret_t r = answer(&g, "persistence", g.persistence);
    if (r == OK) *mode = g.persistence;
    return r;
}
EXPORT ret_t nvmlDeviceGetMigMode(struct nvmlDevice_st *d, unsigned *cur, unsigned *pend)
{
    struct gpu_state g;
    gpu_state(&g, d->idx);
    ret_t r = answer(&g, "mig", g.mig);
    if (r == OK) *cur = *pend = g.mig;
    return r;
}
EXPORT ret_t nvmlDeviceGetEccMode(struct nvmlDevice_st *d, unsigned *cur, unsigned *pend)
{
    struct gpu_state g;
    gpu_state(&g, d->idx);
    ret_t r = answer(&g, "eccmode", g.p ? g.p->ecc_mode : 0);
    if (r == OK) *cur = *pend = g.p->ecc_mode;
    return r;
}
/* errorType 1 uncorrected, 0 corrected; counterType 0 volatile, 1 aggregate */
EXPORT ret_t nvmlDeviceGetTotalEccErrors(struct nvmlDevice_st *d, unsigned type, unsigned counter,
                                         unsigned long long *n)
{
    struct gpu_state g;
    gpu_state(&g, d->idx);
    ret_t r = answer(&g, "ecc", 0);
    if (r != OK) return r;
    if (type > 1 || counter > 1) return E_INVALID;
    *n = type == 1 ? g.ecc_unc : 0;
    return OK;
}
EXPORT ret_t nvmlDeviceGetRetiredPages(struct nvmlDevice_st *d, unsigned cause, unsigned *count,
                                       unsigned long long *addresses)
{
    struct gpu_state g;
    gpu_state(&g, d->idx);
    ret_t r = answer(&g, "retired", g.retired_pending);
    if (r != OK) return r;
    if (cause > 1 || !count) return E_INVALID;
    (void)addresses;
    *count = 0;
    return OK;
}
EXPORT ret_t nvmlDeviceGetRetiredPagesPendingStatus(struct nvmlDevice_st *d, unsigned *pending)
{
    struct gpu_state g;
    gpu_state(&g, d->idx);
    ret_t r = answer(&g, "retired", g.retired_pending);
    if (r == OK) *pending = g.retired_pending;
    return r;
}
EXPORT_REMAP ret_t nvmlDeviceGetRemappedRows(struct nvmlDevice_st *d, unsigned *cor, unsigned *unc,
                                             unsigned *pending, unsigned *failed)
{
    struct gpu_state g;
    gpu_state(&g, d->idx);
    ret_t r = answer(&g, "remap", g.remap_unc);
    if (r != OK) return r;
    *cor = g.remap_cor;
    *unc = g.remap_unc;
    *pending = g.remap_pending;
    *failed = g.remap_failed;
    return OK;
}
EXPORT ret_t nvmlDeviceGetCurrentClocksEventReasons(struct nvmlDevice_st *d,
                                                    unsigned long long *reasons)
{
    struct gpu_state g;
    gpu_state(&g, d->idx);
    ret_t r = answer(&g, "clocks", 0);
    if (r == OK) *reasons = g.clocks;
    return r;
}
EXPORT ret_t nvmlDeviceGetMaxPcieLinkWidth(struct nvmlDevice_st *d, unsigned *w)
{
    struct gpu_state g;
    gpu_state(&g, d->idx);
    ret_t r = answer(&g, "pcie", 0);
    if (r == OK) *w = g.p->pcie_max;
    return r;
}
EXPORT ret_t nvmlDeviceGetCurrPcieLinkWidth(struct nvmlDevice_st *d, unsigned *w)
{
    struct gpu_state g;
    gpu_state(&g, d->idx);
    ret_t r = answer(&g, "pcie", 0);
    if (r == OK) *w = g.pcie_cur;
    return r;
}
/* NVML answers NOT_SUPPORTED on a GPU without NVLink and INVALID_ARGUMENT for a link index
 * past the GPU's links */
EXPORT ret_t nvmlDeviceGetNvLinkState(struct nvmlDevice_st *d, unsigned link, unsigned *active)
{
    struct gpu_state g;
    gpu_state(&g, d->idx);
    ret_t r = answer(&g, "nvlink", g.nvlinks ? 0 : NOT_SUP);
    if (r != OK) return r;
    if (link >= g.nvlinks) return E_INVALID;
    *active = (g.inactive >> link) & 1u ? 0 : 1;
    return OK;
}
EXPORT ret_t nvmlDeviceGetNvLinkErrorCounter(struct nvmlDevice_st *d, unsigned link,
                                             unsigned counter, unsigned long long *v)
{
    struct gpu_state g;
    gpu_state(&g, d->idx);
    ret_t r = answer(&g, "nvlink", g.nvlinks ? 0 : NOT_SUP);
    if (r != OK) return r;
    if (link >= g.nvlinks || counter > 4) return E_INVALID;
    *v = 0;
    return OK;
}
