/* gpu.health: each GPU of the pod as NVML reports it (pkg/dl/nvml.h, the calls and types of
 * nvml.h NVML_API_VERSION 12): uncorrected ECC errors, retired pages and remapped rows pending
 * or failed, NVLinks inactive where the model has them, clock slowdowns active now, a PCIe
 * link narrower than the GPU's maximum; persistence and MIG mode, driver and CUDA versions as
 * evidence; Xid lines of the kernel log where the pod may read it. A fact NVML does not support
 * on this GPU is "not supported", one it could not give is "unknown": neither is a fault. See
 * docs/checks/11-gpu-health.md. */
#define _GNU_SOURCE
#include "checks.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../dl/nvml.h"

#define NVML_HEADER "nvml.h NVML_API_VERSION 12 (nvidia-nvml-dev-cu12 12.9.79)"
#define KMSG "/dev/kmsg"
/* the most read of it: the kernel's log buffer is 2^CONFIG_LOG_BUF_SHIFT, 128 KiB to 32 MiB */
#define KMSG_MAX (8u << 20)
#define MAX_GPUS 64

/* ---- the NVLink count of each model whose links are on its board (SXM/OAM modules and
 * Grace superchips); PCIe cards reach other GPUs only through an optional bridge, so their
 * missing links are not judged. Names as nvmlDeviceGetName returns them (nvidia-smi's
 * "Product Name"); links from NVIDIA's data sheets: V100 SXM2 6 NVLink2, A100 SXM4 12 NVLink3, A800
 * SXM4 8, H100 SXM5 and H200 SXM 18 NVLink4, H800 SXM5 8, H20 18, B200/GB200/B300/GB300 18 NVLink5.
 */
static const struct {
    const char *prefix; /* matched against the name from its start, after "NVIDIA " */
    const char *model;
    unsigned links;
} nvlink_models[] = {
    {"Tesla V100-SXM2", "V100 SXM2", 6},
    {"V100-SXM2", "V100 SXM2", 6},
    {"A100-SXM4", "A100 SXM4", 12},
    {"A800-SXM4", "A800 SXM4", 8},
    {"H100 80GB HBM3", "H100 SXM5", 18},
    {"H100 SXM", "H100 SXM5", 18},
    {"H800", "H800 SXM5", 8},
    {"H20", "H20", 18},
    {"H200", "H200 SXM", 18},
    {"GB200", "GB200", 18},
    {"B200", "B200", 18},
    {"GB300", "GB300", 18},
    {"B300", "B300", 18},
};

unsigned pf_gpu_nvlinks_expected(const char *name, const char **model)
{
    if (model) *model = NULL;
    if (!name) return 0;
    /* a PCIe card of any of these ("NVIDIA H800 PCIe", "NVIDIA A100-PCIE-40GB", "NVIDIA H100
     * NVL"): links through an optional bridge only */
    if (strcasestr(name, "pcie") || strstr(name, " NVL")) return 0;
    if (strncmp(name, "NVIDIA ", 7) == 0) name += 7;
    for (size_t i = 0; i < PF_ARRAY_LEN(nvlink_models); i++) {
        size_t k = strlen(nvlink_models[i].prefix);
        if (strncmp(name, nvlink_models[i].prefix, k) != 0) continue;
        /* "H200" must not take "H2000"; a size or a suffix after a space or '-' is fine */
        if (name[k] != '\0' && name[k] != ' ' && name[k] != '-') continue;
        if (model) *model = nvlink_models[i].model;
        return nvlink_models[i].links;
    }
    return 0;
}

/* ---- Xid lines. The NVIDIA kernel module prints "NVRM: Xid (PCI:%04x:%02x:%02x): %d, ..."
 * (the form NVIDIA's "XID Errors" guide and k8s-device-plugin's health check read; the number
 * is decimal). */
static bool hexnum(const char **p, unsigned *out, size_t maxdigits)
{
    unsigned v = 0;
    size_t k = 0;
    for (; k < maxdigits; k++) {
        char c = (*p)[k];
        unsigned d;
        if (c >= '0' && c <= '9')
            d = (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f')
            d = (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F')
            d = (unsigned)(c - 'A' + 10);
        else
            break;
        v = v * 16 + d;
    }
    if (k == 0) return false;
    *p += k;
    *out = v;
    return true;
}

/* One line (not NUL-terminated, len bytes) into x; false when it is not an Xid line. */
static bool xid_line(struct pf_xid *x, const char *line, size_t len)
{
    static const char tag[] = "NVRM: Xid (";
    const char *end = line + len;
    const char *p = memmem(line, len, tag, sizeof(tag) - 1);
    if (!p) return false;
    p += sizeof(tag) - 1;
    memset(x, 0, sizeof(*x));
    if (end - p > 4 && memcmp(p, "PCI:", 4) == 0) {
        p += 4;
        /* bounded by the line: copy the address part into a small buffer first */
        char addr[24];
        size_t k = 0;
        while (p + k < end && p[k] != ')' && k < sizeof(addr) - 1) {
            addr[k] = p[k];
            k++;
        }
        addr[k] = '\0';
        if (p + k >= end || p[k] != ')') return false;
        const char *a = addr;
        if (!hexnum(&a, &x->domain, 8) || *a++ != ':' || !hexnum(&a, &x->bus, 2) || *a++ != ':' ||
            !hexnum(&a, &x->dev, 2) || *a != '\0')
            return false;
        p += k + 1;
    } else {
        return false;
    }
    if (end - p < 3 || p[0] != ':' || p[1] != ' ') return false;
    p += 2;
    unsigned v = 0;
    size_t digits = 0;
    while (p < end && *p >= '0' && *p <= '9' && digits < 6) {
        v = v * 10 + (unsigned)(*p - '0');
        p++;
        digits++;
    }
    if (digits == 0 || (p < end && *p >= '0' && *p <= '9')) return false;
    x->xid = v;
    if (p < end && *p == ',') p++;
    while (p < end && *p == ' ')
        p++;
    size_t rest = (size_t)(end - p);
    if (rest >= sizeof(x->text)) rest = sizeof(x->text) - 1;
    for (size_t i = 0; i < rest; i++)
        x->text[i] = (p[i] >= 0x20 && p[i] < 0x7f) ? p[i] : '?';
    x->text[rest] = '\0';
    return true;
}

size_t pf_xid_parse(struct pf_xid_log *log, const char *text, size_t len)
{
    size_t added = 0;
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        struct pf_xid x;
        if (xid_line(&x, p, (size_t)(le - p))) {
            if (log->n < PF_XID_MAX) {
                if (log->n % 16 == 0) {
                    log->v = pf_xrealloc(log->v, (log->n + 16) * sizeof(*log->v));
                }
                log->v[log->n++] = x;
                added++;
            } else {
                log->dropped++;
            }
        }
        p = nl ? nl + 1 : end;
    }
    return added;
}

/* NVIDIA's Xid catalogue ("XID Errors", r570): the Xids that point at the GPU, its memory,
 * its links or the node, rather than at the application. */
const char *pf_xid_node_fault(unsigned xid)
{
    switch (xid) {
    case 48:
        return "double-bit ECC error";
    case 61:
    case 62:
        return "internal micro-controller error";
    case 63:
        return "row remapping recorded, a reset applies it";
    case 64:
        return "row remapping failed";
    case 74:
        return "NVLink error";
    case 79:
        return "GPU has fallen off the bus";
    case 92:
        return "high single-bit ECC error rate";
    case 94:
        return "contained uncorrectable ECC error";
    case 95:
        return "uncontained uncorrectable ECC error";
    case 119:
    case 120:
        return "GSP firmware error";
    case 140:
        return "unrecovered ECC error";
    case 154:
        return "GPU recovery action required";
    default:
        return NULL;
    }
}

/* Reads the kernel log from /dev/kmsg under the root prefix: one record per read(2) on the
 * real device, which would block at the end without O_NONBLOCK (EAGAIN then); EPIPE means a
 * record was overwritten while reading and the next read goes on. A regular file (a fixture)
 * is read to its end the same way. */
static void read_kmsg(struct pf_xid_log *log, const struct pf_host *h)
{
    memset(log, 0, sizeof(*log));
    snprintf(log->source, sizeof(log->source), KMSG);
    char path[PATH_MAX];
    if (pf_host_path(path, sizeof(path), h, KMSG) != 0) {
        snprintf(log->why, sizeof(log->why), "%s: %s", KMSG, pf_err_msg());
        return;
    }
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT)
            snprintf(log->why, sizeof(log->why),
                     "%s is not in the pod (the container runtime adds it only to privileged "
                     "containers or with a hostPath volume)",
                     KMSG);
        else if (e == EPERM || e == EACCES)
            snprintf(log->why, sizeof(log->why),
                     "%s: %s (reading it needs CAP_SYSLOG, or kernel.dmesg_restrict=0 on the "
                     "node)",
                     KMSG, strerror(e));
        else
            snprintf(log->why, sizeof(log->why), "%s: %s", KMSG, strerror(e));
        return;
    }
    /* a new reader of /dev/kmsg starts at the oldest record the kernel keeps */
    struct pf_buf all;
    pf_buf_init(&all, KMSG_MAX);
    char rec[8192]; /* a record is at most 1024 bytes of text plus its prefix (CONSOLE_EXT_LOG_MAX)
                     */
    int err = 0;
    for (;;) {
        ssize_t r = read(fd, rec, sizeof(rec));
        if (r > 0) {
            if (pf_buf_add(&all, rec, (size_t)r) != 0) break; /* full: what fits is read */
            if (rec[r - 1] != '\n') (void)pf_buf_add(&all, "\n", 1);
            continue;
        }
        if (r == 0) break;
        if (errno == EINTR || errno == EPIPE) continue;
        if (errno != EAGAIN) err = errno;
        break;
    }
    close(fd);
    if (err) {
        snprintf(log->why, sizeof(log->why), "%s: read: %s%s", KMSG, strerror(err),
                 err == EPERM ? " (reading it needs CAP_SYSLOG, or kernel.dmesg_restrict=0)" : "");
        pf_buf_free(&all);
        return;
    }
    log->readable = true;
    (void)pf_xid_parse(log, pf_buf_str(&all), all.len);
    pf_buf_free(&all);
}

/* ---- evidence */
static void fact_text(char *out, size_t n, pf_nvmlReturn_t rc, const char *call)
{
    if (rc == PF_NVML_ERROR_NOT_SUPPORTED) {
        snprintf(out, n, "not supported");
    } else if (rc == PF_NVML_ERROR_FUNCTION_NOT_FOUND) {
        snprintf(out, n, "unknown: this libnvidia-ml has no %s", call);
    } else {
        char e[96];
        pf_dl_nvml_strerror(e, sizeof(e), NULL, rc);
        snprintf(out, n, "unknown: %s: %s", call, e);
    }
}

/* key: the value when the call answered, else "not supported" / "unknown: ..." */
static void set_fact_int(struct pf_node *m, const char *key, const struct pf_nvml_fact *f,
                         const char *call)
{
    if (f->rc == PF_NVML_SUCCESS) {
        pf_node_set_int(m, key, (long long)f->v);
        return;
    }
    char t[160];
    fact_text(t, sizeof(t), f->rc, call);
    pf_node_set_str(m, key, t);
}

static void set_fact_state(struct pf_node *m, const char *key, const struct pf_nvml_fact *f,
                           const char *call)
{
    if (f->rc == PF_NVML_SUCCESS) {
        pf_node_set_str(m, key, f->v ? "enabled" : "disabled");
        return;
    }
    char t[160];
    fact_text(t, sizeof(t), f->rc, call);
    pf_node_set_str(m, key, t);
}

static const struct {
    unsigned long long bit;
    const char *name;
    bool slows; /* a slowdown preflight warns about */
} clock_reasons[] = {
    {PF_NVML_CLOCKS_EVENT_GPU_IDLE, "idle", false},
    {PF_NVML_CLOCKS_EVENT_APPLICATIONS_CLOCKS_SETTING, "applications clocks setting", false},
    {PF_NVML_CLOCKS_EVENT_SW_POWER_CAP, "SW power cap", false},
    {PF_NVML_CLOCKS_THROTTLE_HW_SLOWDOWN, "HW slowdown", true},
    {PF_NVML_CLOCKS_EVENT_SYNC_BOOST, "sync boost", false},
    {PF_NVML_CLOCKS_EVENT_SW_THERMAL_SLOWDOWN, "SW thermal slowdown", true},
    {PF_NVML_CLOCKS_THROTTLE_HW_THERMAL_SLOWDOWN, "HW thermal slowdown", true},
    {PF_NVML_CLOCKS_THROTTLE_HW_POWER_BRAKE_SLOWDOWN, "HW power brake slowdown", true},
    {PF_NVML_CLOCKS_EVENT_DISPLAY_CLOCK_SETTING, "display clock setting", false},
};

static const char *const nvlink_counter_keys[PF_NVML_NVLINK_ERROR_COUNT] = {
    "replay", "recovery", "crcFlit", "crcData", "eccData"};

/* "GPU 3 (00000000:4C:00.0, NVIDIA H100 80GB HBM3)" */
static void gpu_label(char *out, size_t n, const struct pf_nvml_health *g)
{
    snprintf(out, n, "GPU %u (%s%s%s)", g->index, g->bus_id[0] ? g->bus_id : "bus id unknown",
             g->name[0] ? ", " : "", g->name);
}

static bool same_pci(const struct pf_nvml_health *g, const struct pf_xid *x)
{
    unsigned dom = 0, bus = 0, dev = 0, fn = 0;
    if (sscanf(g->bus_id, "%x:%x:%x.%x", &dom, &bus, &dev, &fn) != 4) return false;
    return dom == x->domain && bus == x->bus && dev == x->dev;
}

static void judge_gpu(struct pf_check *out, struct pf_node *m, const struct pf_nvml_health *g)
{
    char who[200];
    gpu_label(who, sizeof(who), g);
    pf_node_set_int(m, "index", g->index);
    if (g->handle_rc != PF_NVML_SUCCESS) {
        char t[160];
        fact_text(t, sizeof(t), g->handle_rc, "nvmlDeviceGetHandleByIndex_v2");
        pf_node_set_str(m, "error", t);
        return;
    }
    pf_node_set_str(m, "busId", g->bus_id[0] ? g->bus_id : "unknown");
    pf_node_set_str(m, "name", g->name[0] ? g->name : "unknown");
    pf_node_set_str(m, "uuid", g->uuid[0] ? g->uuid : "unknown");
    set_fact_state(m, "persistenceMode", &g->persistence, "nvmlDeviceGetPersistenceMode");
    set_fact_state(m, "migMode", &g->mig_current, "nvmlDeviceGetMigMode");
    if (g->mig_pending.rc == PF_NVML_SUCCESS && g->mig_current.rc == PF_NVML_SUCCESS &&
        g->mig_pending.v != g->mig_current.v)
        pf_node_set_str(m, "migModePending", g->mig_pending.v ? "enabled" : "disabled");
    set_fact_state(m, "eccMode", &g->ecc_mode, "nvmlDeviceGetEccMode");

    /* ECC: volatile counts are since the driver loaded, aggregate ones for the GPU's life */
    struct pf_node *ecc = pf_node_set_map(m, "eccErrors");
    set_fact_int(ecc, "volatileUncorrected", &g->ecc_unc_volatile, "nvmlDeviceGetTotalEccErrors");
    set_fact_int(ecc, "volatileCorrected", &g->ecc_cor_volatile, "nvmlDeviceGetTotalEccErrors");
    set_fact_int(ecc, "aggregateUncorrected", &g->ecc_unc_aggregate, "nvmlDeviceGetTotalEccErrors");
    set_fact_int(ecc, "aggregateCorrected", &g->ecc_cor_aggregate, "nvmlDeviceGetTotalEccErrors");
    if (g->ecc_unc_volatile.rc == PF_NVML_SUCCESS && g->ecc_unc_volatile.v > 0)
        pf_check_add_finding(out, "ecc-uncorrected", PF_FAIL, NULL,
                             "%s: %llu uncorrected ECC error%s since the driver loaded "
                             "(nvmlDeviceGetTotalEccErrors, volatile; %llu corrected)",
                             who, g->ecc_unc_volatile.v, g->ecc_unc_volatile.v == 1 ? "" : "s",
                             g->ecc_cor_volatile.rc == PF_NVML_SUCCESS ? g->ecc_cor_volatile.v
                                                                       : 0ull);

    /* page retirement (before A100) */
    struct pf_node *rp = pf_node_set_map(m, "retiredPages");
    set_fact_int(rp, "singleBitEcc", &g->retired_sbe, "nvmlDeviceGetRetiredPages");
    set_fact_int(rp, "doubleBitEcc", &g->retired_dbe, "nvmlDeviceGetRetiredPages");
    set_fact_state(rp, "pending", &g->retired_pending, "nvmlDeviceGetRetiredPagesPendingStatus");
    if (g->retired_pending.rc == PF_NVML_SUCCESS && g->retired_pending.v)
        pf_check_add_finding(out, "page-retirement-pending", PF_FAIL, NULL,
                             "%s: pages are pending retirement (%llu single-bit, %llu double-bit "
                             "retired so far; nvmlDeviceGetRetiredPagesPendingStatus): they are "
                             "retired only when the GPU is reset",
                             who, g->retired_sbe.v, g->retired_dbe.v);

    /* row remapping (A100 and later) */
    struct pf_node *rr = pf_node_set_map(m, "remappedRows");
    if (g->remap_rc == PF_NVML_SUCCESS) {
        pf_node_set_int(rr, "correctable", g->remap_cor);
        pf_node_set_int(rr, "uncorrectable", g->remap_unc);
        pf_node_set_bool(rr, "pending", g->remap_pending != 0);
        pf_node_set_bool(rr, "failureOccurred", g->remap_failed != 0);
        if (g->remap_failed)
            pf_check_add_finding(out, "row-remap-failed", PF_FAIL, NULL,
                                 "%s: a row remapping failed (nvmlDeviceGetRemappedRows: "
                                 "failureOccurred; %u rows remapped for uncorrectable, %u for "
                                 "correctable errors): the GPU's memory cannot be repaired",
                                 who, g->remap_unc, g->remap_cor);
        if (g->remap_pending)
            pf_check_add_finding(out, "row-remap-pending", PF_FAIL, NULL,
                                 "%s: a row remapping is pending (nvmlDeviceGetRemappedRows: "
                                 "isPending; %u rows remapped for uncorrectable, %u for "
                                 "correctable errors): it takes effect only after a GPU reset",
                                 who, g->remap_unc, g->remap_cor);
    } else {
        char t[160];
        fact_text(t, sizeof(t), g->remap_rc, "nvmlDeviceGetRemappedRows");
        pf_node_set_str(rr, "state", t);
    }

    /* clock event reasons active now */
    if (g->clocks_event.rc == PF_NVML_SUCCESS) {
        struct pf_node *seq = pf_node_set_seq(m, "clocksEventReasons");
        char slow[200] = "";
        for (size_t i = 0; i < PF_ARRAY_LEN(clock_reasons); i++) {
            if (!(g->clocks_event.v & clock_reasons[i].bit)) continue;
            pf_node_add_str(seq, clock_reasons[i].name);
            if (!clock_reasons[i].slows) continue;
            size_t k = strlen(slow);
            snprintf(slow + k, sizeof(slow) - k, "%s%s", k ? ", " : "", clock_reasons[i].name);
        }
        if (slow[0])
            pf_check_add_finding(out, "clocks-slowdown", PF_WARN, NULL,
                                 "%s: clocks slowed now by %s "
                                 "(nvmlDeviceGetCurrentClocksEventReasons 0x%llx)",
                                 who, slow, g->clocks_event.v);
    } else {
        char t[160];
        fact_text(t, sizeof(t), g->clocks_event.rc, "nvmlDeviceGetCurrentClocksEventReasons");
        pf_node_set_str(m, "clocksEventReasons", t);
    }

    /* PCIe width (not speed: an idle GPU lowers its link speed to save power) */
    struct pf_node *pw = pf_node_set_map(m, "pcieLinkWidth");
    set_fact_int(pw, "max", &g->pcie_width_max, "nvmlDeviceGetMaxPcieLinkWidth");
    set_fact_int(pw, "current", &g->pcie_width_cur, "nvmlDeviceGetCurrPcieLinkWidth");
    if (g->pcie_width_max.rc == PF_NVML_SUCCESS && g->pcie_width_cur.rc == PF_NVML_SUCCESS &&
        g->pcie_width_cur.v > 0 && g->pcie_width_cur.v < g->pcie_width_max.v)
        pf_check_add_finding(out, "pcie-width-degraded", PF_WARN, NULL,
                             "%s: PCIe link x%llu, the GPU's maximum is x%llu "
                             "(nvmlDeviceGetCurrPcieLinkWidth, nvmlDeviceGetMaxPcieLinkWidth)",
                             who, g->pcie_width_cur.v, g->pcie_width_max.v);

    /* NVLink */
    struct pf_node *nl = pf_node_set_map(m, "nvlink");
    const char *model = NULL;
    unsigned expected = pf_gpu_nvlinks_expected(g->name, &model);
    if (g->nvlink_rc == PF_NVML_SUCCESS) {
        pf_node_set_int(nl, "supported", g->nvlink_supported);
        pf_node_set_int(nl, "active", g->nvlink_active);
        if (expected) pf_node_set_int(nl, "modelHas", expected);
        struct pf_node *in = pf_node_set_seq(nl, "inactiveLinks");
        char list[128] = "";
        for (unsigned k = 0; k < PF_NVML_NVLINK_MAX_LINKS; k++) {
            if (g->link[k] != PF_NVLINK_INACTIVE) continue;
            pf_node_add_strf(in, "%u", k);
            size_t len = strlen(list);
            snprintf(list + len, sizeof(list) - len, "%s%u", len ? ", " : "", k);
        }
        if (g->nvlink_unknown) pf_node_set_int(nl, "unknownLinks", g->nvlink_unknown);
        struct pf_node *er = pf_node_set_map(nl, "errors");
        for (unsigned k = 0; k < PF_NVML_NVLINK_ERROR_COUNT; k++)
            set_fact_int(er, nvlink_counter_keys[k], &g->nvlink_errors[k],
                         "nvmlDeviceGetNvLinkErrorCounter");
        /* a fault only where the model has the links on its board: the links that answered
         * inactive, or fewer links than the model has answered at all (unknown ones aside) */
        unsigned missing = expected > g->nvlink_active + g->nvlink_unknown
                               ? expected - g->nvlink_active - g->nvlink_unknown
                               : 0;
        if (expected && missing)
            pf_check_add_finding(out, "nvlink-inactive", PF_FAIL, NULL,
                                 "%s: %u of %u NVLinks active%s%s%s; the %s has %u "
                                 "(nvmlDeviceGetNvLinkState)",
                                 who, g->nvlink_active, expected, list[0] ? " (inactive: " : "",
                                 list, list[0] ? ")" : "", model, expected);
    } else {
        char t[160];
        fact_text(t, sizeof(t), g->nvlink_rc, "nvmlDeviceGetNvLinkState");
        pf_node_set_str(nl, "state", t);
        if (expected) pf_node_set_int(nl, "modelHas", expected);
    }
}

/* "12.4" from 12040 (CUDA_VERSION's form: 1000 x major + 10 x minor) */
static void cuda_text(char *out, size_t n, int v)
{
    snprintf(out, n, "%d.%d", v / 1000, v % 1000 / 10);
}

static void judge_xid(struct pf_check *out, const struct pf_nvml_health *g, size_t n,
                      const struct pf_xid_log *xid)
{
    struct pf_node *x = pf_node_set_map(out->evidence, "xid");
    pf_node_set_str(x, "source", xid->source[0] ? xid->source : KMSG);
    if (!xid->readable) {
        /* never "no Xid": nothing was read */
        pf_node_set_strf(x, "state", "could not be read: %s", xid->why);
        return;
    }
    pf_node_set_str(x, "state", "read");
    struct pf_node *seq = pf_node_set_seq(x, "events");
    for (size_t i = 0; i < xid->n; i++) {
        struct pf_node *e = pf_node_add_map(seq);
        pf_node_set_strf(e, "pci", "%04x:%02x:%02x", xid->v[i].domain, xid->v[i].bus,
                         xid->v[i].dev);
        pf_node_set_int(e, "xid", xid->v[i].xid);
        pf_node_set_str(e, "text", xid->v[i].text);
        /* the kernel's log is the node's: an Xid of a GPU of another pod is evidence only */
        long long gpu = -1;
        for (size_t k = 0; k < n; k++)
            if (g[k].handle_rc == PF_NVML_SUCCESS && same_pci(&g[k], &xid->v[i]))
                gpu = (long long)g[k].index;
        if (gpu >= 0)
            pf_node_set_int(e, "gpu", gpu);
        else
            pf_node_set_str(e, "gpu", "not in the pod");
    }
    if (xid->dropped) pf_node_set_int(x, "dropped", (long long)xid->dropped);
    /* one finding per GPU of the pod with Xids that point at the GPU or node */
    bool *done = pf_xcalloc(xid->n ? xid->n : 1, sizeof(*done));
    for (size_t i = 0; i < xid->n; i++) {
        if (done[i] || !pf_xid_node_fault(xid->v[i].xid)) continue;
        char who[200] = "";
        for (size_t k = 0; k < n; k++)
            if (g[k].handle_rc == PF_NVML_SUCCESS && same_pci(&g[k], &xid->v[i]))
                gpu_label(who, sizeof(who), &g[k]);
        if (!who[0]) continue; /* another pod's GPU */
        char list[400] = "";
        for (size_t j = i; j < xid->n; j++) {
            const struct pf_xid *a = &xid->v[i], *b = &xid->v[j];
            if (a->domain != b->domain || a->bus != b->bus || a->dev != b->dev) continue;
            if (!pf_xid_node_fault(b->xid)) continue;
            done[j] = true;
            bool seen = false;
            for (size_t k = i; k < j; k++)
                if (xid->v[k].xid == b->xid && xid->v[k].domain == a->domain &&
                    xid->v[k].bus == a->bus && xid->v[k].dev == a->dev)
                    seen = true;
            if (seen) continue;
            size_t len = strlen(list);
            snprintf(list + len, sizeof(list) - len, "%sXid %u (%s)", len ? ", " : "", b->xid,
                     pf_xid_node_fault(b->xid));
        }
        pf_check_add_finding(out, "gpu-xid", PF_WARN, NULL,
                             "%s, PCI %04x:%02x:%02x: %s in the kernel log (%s)", who,
                             xid->v[i].domain, xid->v[i].bus, xid->v[i].dev, list,
                             xid->source[0] ? xid->source : KMSG);
    }
    free(done);
}

void pf_gpu_health_judge(struct pf_check *out, const struct pf_nvml_system *sys,
                         const struct pf_nvml_health *g, size_t n, const struct pf_xid_log *xid)
{
    pf_node_set_str(out->evidence, "nvmlHeader", NVML_HEADER);
    /* each fact of a GPU's evidence and the NVML call it comes from */
    static const char *const calls[][2] = {
        {"persistenceMode", "nvmlDeviceGetPersistenceMode"},
        {"migMode", "nvmlDeviceGetMigMode"},
        {"eccMode", "nvmlDeviceGetEccMode"},
        {"eccErrors", "nvmlDeviceGetTotalEccErrors"},
        {"retiredPages", "nvmlDeviceGetRetiredPages, nvmlDeviceGetRetiredPagesPendingStatus"},
        {"remappedRows", "nvmlDeviceGetRemappedRows"},
        {"clocksEventReasons", "nvmlDeviceGetCurrentClocksEventReasons"},
        {"pcieLinkWidth", "nvmlDeviceGetMaxPcieLinkWidth, nvmlDeviceGetCurrPcieLinkWidth"},
        {"nvlink", "nvmlDeviceGetNvLinkState, nvmlDeviceGetNvLinkErrorCounter"},
        {"driverVersion", "nvmlSystemGetDriverVersion"},
        {"cudaVersion", "nvmlSystemGetCudaDriverVersion_v2"},
    };
    struct pf_node *cm = pf_node_set_map(out->evidence, "calls");
    for (size_t i = 0; i < PF_ARRAY_LEN(calls); i++)
        pf_node_set_str(cm, calls[i][0], calls[i][1]);
    char t[160];
    if (sys->driver_rc == PF_NVML_SUCCESS) {
        pf_node_set_str(out->evidence, "driverVersion", sys->driver);
    } else {
        fact_text(t, sizeof(t), sys->driver_rc, "nvmlSystemGetDriverVersion");
        pf_node_set_str(out->evidence, "driverVersion", t);
    }
    char cuda[16] = "";
    if (sys->cuda_rc == PF_NVML_SUCCESS) {
        cuda_text(cuda, sizeof(cuda), sys->cuda);
        pf_node_set_str(out->evidence, "cudaVersion", cuda);
    } else {
        fact_text(t, sizeof(t), sys->cuda_rc, "nvmlSystemGetCudaDriverVersion_v2");
        pf_node_set_str(out->evidence, "cudaVersion", t);
    }
    size_t before = out->nfindings;
    struct pf_node *seq = pf_node_set_seq(out->evidence, "gpus");
    /* the stable keys the gang comparison reads (pf_gpu_inventory_read): a count is left out
     * when a GPU could not tell it, so that an unknown is never compared */
    long long active = 0, supported = 0, active_min = -1, mig = 0, pers_off = 0;
    bool nvl_known = n > 0, mig_known = n > 0, pers_known = n > 0;
    char model[96] = "";
    for (size_t i = 0; i < n; i++) {
        judge_gpu(out, pf_node_add_map(seq), &g[i]);
        if (g[i].handle_rc != PF_NVML_SUCCESS) {
            nvl_known = mig_known = pers_known = false;
            continue;
        }
        const char *name = g[i].name[0] ? g[i].name : "unknown";
        if (!model[0])
            snprintf(model, sizeof(model), "%s", name);
        else if (strcmp(model, name) != 0)
            snprintf(model, sizeof(model), "mixed");
        if (g[i].nvlink_rc == PF_NVML_SUCCESS && !g[i].nvlink_unknown) {
            active += g[i].nvlink_active;
            supported += g[i].nvlink_supported;
            if (active_min < 0 || (long long)g[i].nvlink_active < active_min)
                active_min = g[i].nvlink_active;
        } else if (g[i].nvlink_rc == PF_NVML_ERROR_NOT_SUPPORTED) {
            active_min = 0; /* no NVLink on this GPU: 0 of 0 */
        } else {
            nvl_known = false;
        }
        if (g[i].mig_current.rc == PF_NVML_SUCCESS)
            mig += g[i].mig_current.v == PF_NVML_DEVICE_MIG_ENABLE;
        else if (g[i].mig_current.rc != PF_NVML_ERROR_NOT_SUPPORTED)
            mig_known = false;
        if (g[i].persistence.rc == PF_NVML_SUCCESS)
            pers_off += g[i].persistence.v == PF_NVML_FEATURE_DISABLED;
        else
            pers_known = false;
    }
    struct pf_node *ev = out->evidence;
    if (model[0] && strcmp(model, "unknown") != 0) pf_node_set_str(ev, "model", model);
    pf_node_set_int(ev, "gpuCount", (long long)n);
    if (nvl_known) {
        pf_node_set_int(ev, "nvlinksActive", active);
        pf_node_set_int(ev, "nvlinksSupported", supported);
        pf_node_set_int(ev, "nvlinksActiveMin", active_min);
    }
    if (mig_known) pf_node_set_int(ev, "migEnabled", mig);
    if (pers_known) pf_node_set_int(ev, "persistenceDisabled", pers_off);
    judge_xid(out, g, n, xid);
    if (out->nfindings == before)
        pf_check_set_message(out, "%zu GPU%s healthy as NVML reports them (%s)", n,
                             n == 1 ? "" : "s", model[0] ? model : "no GPU");
}

/* a string key's value, "" when absent or not a value ("unknown: ...", "not supported") */
static void inv_str(char *out, size_t n, const struct pf_node *m, const char *key)
{
    const char *s = pf_node_get_str(m, key);
    if (!s || strncmp(s, "unknown", 7) == 0 || strcmp(s, "not supported") == 0) s = "";
    snprintf(out, n, "%s", s);
}

static int inv_int(const struct pf_node *m, const char *key)
{
    const struct pf_node *v = pf_node_get(m, key);
    if (!v || v->kind != PF_NODE_INT || v->i < 0 || v->i > 1 << 20) return -1;
    return (int)v->i;
}

void pf_gpu_inventory_read(struct pf_gpu_inventory *out, const struct pf_node *evidence)
{
    memset(out, 0, sizeof(*out));
    out->gpus = out->nvlinks_active = out->nvlinks_supported = out->nvlinks_active_min = -1;
    out->mig_enabled = out->persistence_disabled = -1;
    if (!evidence || evidence->kind != PF_NODE_MAP || !pf_node_get(evidence, "gpuCount")) return;
    out->known = true;
    inv_str(out->model, sizeof(out->model), evidence, "model");
    out->gpus = inv_int(evidence, "gpuCount");
    out->nvlinks_active = inv_int(evidence, "nvlinksActive");
    out->nvlinks_supported = inv_int(evidence, "nvlinksSupported");
    out->nvlinks_active_min = inv_int(evidence, "nvlinksActiveMin");
    out->mig_enabled = inv_int(evidence, "migEnabled");
    out->persistence_disabled = inv_int(evidence, "persistenceDisabled");
    inv_str(out->driver, sizeof(out->driver), evidence, "driverVersion");
    inv_str(out->cuda, sizeof(out->cuda), evidence, "cudaVersion");
}

/* The /dev/nvidiaN nodes in the pod: the GPUs it can open (gpu.devices counts them the same
 * way). */
static size_t pod_gpu_nodes(const struct pf_host *h)
{
    struct pf_strlist l = {0};
    size_t n = 0;
    if (pf_host_list(&l, h, "/dev") == 0)
        for (size_t i = 0; i < l.n; i++)
            if (strncmp(l.v[i], "nvidia", 6) == 0 && l.v[i][6] >= '0' && l.v[i][6] <= '9' &&
                strspn(l.v[i] + 6, "0123456789") == strlen(l.v[i] + 6))
                n++;
    pf_strlist_free(&l);
    return n;
}

/* The pod has GPUs but NVML cannot be read (why): every fact is unknown, none judged. */
static void not_read(struct pf_check *out, size_t nodes, const char *why)
{
    pf_node_set_str(out->evidence, "nvml", why);
    pf_check_set_message(out, "the health of the pod's GPUs was not read");
    pf_check_unknown(out, "health-unknown",
                     "the pod has %zu GPU%s but their health cannot be read: %s", nodes,
                     nodes == 1 ? "" : "s", why);
}

void pf_check_gpu_health(struct pf_check *out, struct pf_ctx *ctx)
{
    struct pf_dl_nvml l;
    char why[700] = "";
    if (pf_dl_nvml_open(&l, NULL) != 0) {
        snprintf(why, sizeof(why), "NVML not available: %s", pf_err_msg());
    } else {
        pf_nvmlReturn_t r = l.Init();
        if (r != PF_NVML_SUCCESS) {
            char e[160];
            pf_dl_nvml_strerror(e, sizeof(e), &l, r);
            snprintf(why, sizeof(why), "NVML not available: nvmlInit_v2: %s", e);
            pf_dl_nvml_close(&l);
        }
    }
    size_t nodes = pod_gpu_nodes(&ctx->host);
    if (why[0]) {
        if (ctx->gpus.n == 0 || nodes == 0) {
            pf_check_skip(out, "no NVIDIA GPUs in the pod (%s)", why);
            return;
        }
        not_read(out, nodes, why);
        return;
    }
    unsigned count = 0;
    pf_nvmlReturn_t r = l.DeviceGetCount(&count);
    if (r != PF_NVML_SUCCESS || count == 0) {
        char e[160] = "";
        if (r != PF_NVML_SUCCESS) pf_dl_nvml_strerror(e, sizeof(e), &l, r);
        l.Shutdown();
        pf_dl_nvml_close(&l);
        if (r == PF_NVML_SUCCESS && nodes == 0) {
            pf_check_skip(out, "NVML lists no GPU, and the pod has no /dev/nvidiaN");
            return;
        }
        if (r == PF_NVML_SUCCESS)
            snprintf(why, sizeof(why), "nvmlDeviceGetCount_v2 says 0 GPUs");
        else
            snprintf(why, sizeof(why), "nvmlDeviceGetCount_v2: %s", e);
        not_read(out, nodes, why);
        return;
    }
    if (count > MAX_GPUS) count = MAX_GPUS; /* more GPUs than any node has: the first 64 */
    struct pf_nvml_system sys;
    pf_dl_nvml_system(&sys, &l);
    struct pf_nvml_health *g = pf_xcalloc(count, sizeof(*g));
    for (unsigned i = 0; i < count; i++)
        pf_dl_nvml_health(&g[i], &l, i);
    pf_node_set_str(out->evidence, "nvml", l.path);
    l.Shutdown();
    pf_dl_nvml_close(&l);
    struct pf_xid_log xid;
    read_kmsg(&xid, &ctx->host);
    pf_gpu_health_judge(out, &sys, g, count, &xid);
    free(xid.v);
    free(g);
}
