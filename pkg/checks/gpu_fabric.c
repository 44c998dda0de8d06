/* gpu.fabric: what multi-node NVLink (MNNVL, GB200 NVL72 and the like) needs inside the pod.
 * NCCL reads NCCL_MNNVL_ENABLE (0 off, 1 on, 2 auto, its default); the check runs when the
 * variable is 1 or 2, or unset on a node whose GPUs NVML reports registered with a fabric.
 * Across nodes the GPUs share memory through IMEX channels: the pod
 * needs at least one /dev/nvidia-caps-imex-channels/channelN node, which the NVIDIA DRA
 * driver puts in pods that claim a ComputeDomain channel. Each GPU's fabric state and clique
 * come from NVML (pkg/dl/nvml.h); see docs/checks/10-gpu.md. */
#define _GNU_SOURCE
#include "checks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../dl/nvml.h"

#define IMEX_DIR "/dev/nvidia-caps-imex-channels"

/* "channel" followed by decimal digits only */
static bool is_channel_name(const char *n)
{
    if (strncmp(n, "channel", 7) != 0 || n[7] == '\0') return false;
    for (const char *p = n + 7; *p; p++)
        if (*p < '0' || *p > '9') return false;
    return true;
}

/* What NVML says of every GPU's fabric registration. */
struct fabric_read {
    bool loaded; /* false: why says why NVML could not be read */
    char why[600];
    struct pf_nvml_fabric *g;
    unsigned n;
};

static void read_fabric(struct fabric_read *fr)
{
    memset(fr, 0, sizeof(*fr));
    struct pf_dl_nvml l;
    if (pf_dl_nvml_open(&l, NULL) != 0) {
        snprintf(fr->why, sizeof(fr->why), "NVML not available: %s", pf_err_msg());
        return;
    }
    char e[160];
    pf_nvmlReturn_t r = l.Init();
    if (r != PF_NVML_SUCCESS) {
        pf_dl_nvml_strerror(e, sizeof(e), &l, r);
        snprintf(fr->why, sizeof(fr->why), "NVML not available: nvmlInit_v2: %s", e);
        pf_dl_nvml_close(&l);
        return;
    }
    unsigned count = 0;
    r = l.DeviceGetCount(&count);
    if (r != PF_NVML_SUCCESS) {
        pf_dl_nvml_strerror(e, sizeof(e), &l, r);
        snprintf(fr->why, sizeof(fr->why), "NVML not available: nvmlDeviceGetCount_v2: %s", e);
    } else {
        if (count > 64) count = 64; /* more GPUs than any node has: read the first 64 */
        fr->loaded = true;
        fr->n = count;
        fr->g = pf_xcalloc(count ? count : 1, sizeof(*fr->g));
        for (unsigned i = 0; i < count; i++)
            pf_dl_nvml_fabric(&fr->g[i], &l, i);
    }
    l.Shutdown();
    pf_dl_nvml_close(&l);
}

static const char *state_name(unsigned s)
{
    static const char *const names[] = {"NOT_SUPPORTED", "NOT_STARTED", "IN_PROGRESS", "COMPLETED"};
    return s < PF_ARRAY_LEN(names) ? names[s] : "UNKNOWN";
}

/* "8-4-4-4-12" hex, as nvidia-smi prints the ClusterUUID */
static void uuid_text(char out[37], const unsigned char u[16])
{
    size_t k = 0;
    for (size_t i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10) out[k++] = '-';
        snprintf(out + k, 3, "%02x", u[i]);
        k += 2;
    }
    out[k] = '\0';
}

static bool registered(const struct pf_nvml_fabric *g)
{
    static const unsigned char zero[16] = {0};
    return g->have && g->state == PF_NVML_FABRIC_STATE_COMPLETED && g->status == 0 &&
           memcmp(g->cluster_uuid, zero, sizeof(zero)) != 0;
}

/* A GPU whose registration with a fabric was attempted and failed: NVML answers
 * NOT_SUPPORTED for a GPU without an NVLink fabric (nvml.h NVML_GPU_FABRIC_STATE_NOT_SUPPORTED),
 * so NOT_STARTED, IN_PROGRESS, a state NVML does not define, or COMPLETED with an error status
 * are a fabric GPU that is not ready. COMPLETED without a cluster UUID is not counted: NCCL's
 * src/mnnvl.cc then only turns multi-node NVLink off, and a single-node NVSwitch system may
 * answer so. */
static bool failed_registration(const struct pf_nvml_fabric *g)
{
    if (!g->have || g->state == PF_NVML_FABRIC_STATE_NOT_SUPPORTED) return false;
    return g->state != PF_NVML_FABRIC_STATE_COMPLETED || g->status != 0;
}

/* Every GPU's registration into the evidence, `clique` ("<clusterUuid>/<cliqueId>" of the
 * first registered GPU, "" when none is), and fabric-not-ready for each GPU not ready. */
static void judge_fabric(struct pf_check *out, const struct fabric_read *fr, bool expected)
{
    struct pf_node *seq = pf_node_set_seq(out->evidence, "fabric");
    const struct pf_nvml_fabric *first = NULL;
    for (unsigned i = 0; i < fr->n; i++) {
        const struct pf_nvml_fabric *g = &fr->g[i];
        struct pf_node *m = pf_node_add_map(seq);
        pf_node_set_int(m, "index", i);
        pf_node_set_str(m, "busId", g->bus_id);
        if (!g->have) {
            pf_node_set_str(m, "error", g->err);
            continue;
        }
        char u[37];
        uuid_text(u, g->cluster_uuid);
        pf_node_set_str(m, "state", state_name(g->state));
        pf_node_set_int(m, "status", g->status);
        pf_node_set_str(m, "clusterUuid", u);
        pf_node_set_int(m, "cliqueId", g->clique);
        if (!first && registered(g)) first = g;
        char why[200];
        if (pf_gpu_fabric_readiness(why, sizeof(why), g->state, (int)g->status, g->cluster_uuid) !=
            PF_FABRIC_NOT_READY)
            continue;
        if (!expected && !failed_registration(g)) {
            /* nothing asked for the fabric and no GPU registered: a GPU without a cluster UUID
             * is no evidence of a fault */
            pf_check_unknown(out, "fabric-not-ready", "GPU %u (%s): %s, and no GPU registered", i,
                             g->bus_id[0] ? g->bus_id : "bus id unknown", why);
            continue;
        }
        pf_check_add_finding(
            out, "fabric-not-ready", PF_FAIL, NULL, "GPU %u (%s): %s (state %s, status %u)", i,
            g->bus_id[0] ? g->bus_id : "bus id unknown", why, state_name(g->state), g->status);
    }
    if (first) {
        char u[37];
        uuid_text(u, first->cluster_uuid);
        pf_node_set_strf(out->evidence, "clique", "%s/%u", u, first->clique);
    } else {
        pf_node_set_str(out->evidence, "clique", "/0");
    }
}

static bool any_registered(const struct fabric_read *fr)
{
    for (unsigned i = 0; i < fr->n; i++)
        if (registered(&fr->g[i])) return true;
    return false;
}

static bool any_failed_registration(const struct fabric_read *fr)
{
    for (unsigned i = 0; i < fr->n; i++)
        if (failed_registration(&fr->g[i])) return true;
    return false;
}

void pf_check_gpu_fabric(struct pf_check *out, struct pf_ctx *ctx)
{
    const char *en = pf_env_get(&ctx->env, "NCCL_MNNVL_ENABLE");
    bool asked = en && (strcmp(en, "1") == 0 || strcmp(en, "2") == 0);
    struct fabric_read fr;
    if (!asked && en && strcmp(en, "0") == 0) {
        pf_check_skip(out, "multi-node NVLink not requested (NCCL_MNNVL_ENABLE=0)");
        return;
    }
    read_fabric(&fr);
    /* judged when asked, or when some GPU is on a fabric: registered, or its registration
     * failed (a node where every GPU failed is the one to judge, not to skip) */
    bool on_fabric = any_registered(&fr) || any_failed_registration(&fr);
    if (!asked && !on_fabric) {
        if (en && *en)
            pf_check_skip(out, "multi-node NVLink not requested (NCCL_MNNVL_ENABLE=%s)", en);
        else
            pf_check_skip(out, "multi-node NVLink not requested (NCCL_MNNVL_ENABLE unset)");
        free(fr.g);
        return;
    }
    pf_node_set_str(out->evidence, "mnnvlEnable", asked ? en : "unset (NCCL's default 2, auto)");
    size_t before = out->nfindings;
    if (fr.loaded)
        judge_fabric(out, &fr, asked || any_registered(&fr));
    else
        pf_node_set_str(out->evidence, "fabricState", fr.why);
    free(fr.g);
    struct pf_strlist names = {0};
    struct pf_strlist chans = {0};
    int r = pf_host_list(&names, &ctx->host, IMEX_DIR);
    for (size_t i = 0; r == 0 && i < names.n; i++) {
        struct stat st;
        if (!is_channel_name(names.v[i])) continue;
        if (pf_host_stat(&st, &ctx->host, IMEX_DIR "/%s", names.v[i]) != 0 || S_ISDIR(st.st_mode))
            continue;
        pf_strlist_add(&chans, names.v[i]);
    }
    pf_strlist_sort(&chans);
    struct pf_node *seq = pf_node_set_seq(out->evidence, "imexChannels");
    for (size_t i = 0; i < chans.n; i++)
        pf_node_add_strf(seq, IMEX_DIR "/%s", chans.v[i]);
    if (chans.n == 0)
        pf_check_add_finding(out, "imex-channel-missing", PF_FAIL, NULL,
                             "%s%s but %s %s: NCCL cannot import GPU memory "
                             "from other nodes over NVLink",
                             asked ? "NCCL_MNNVL_ENABLE=" : "the GPUs are on an NVLink fabric",
                             asked ? en : "", IMEX_DIR,
                             r != 0 ? "is not in the pod" : "holds no channelN device");
    else if (out->nfindings == before)
        pf_check_set_message(out, "%zu IMEX channel%s (%s%s)", chans.n, chans.n == 1 ? "" : "s",
                             chans.v[0], chans.n > 1 ? ", ..." : "");
    pf_strlist_free(&chans);
    pf_strlist_free(&names);
}

enum pf_fabric_readiness pf_gpu_fabric_readiness(char *why, size_t n, unsigned state, int status,
                                                 const unsigned char cluster_uuid[16])
{
    why[0] = '\0';
    switch (state) {
    case PF_NVML_FABRIC_STATE_NOT_SUPPORTED:
        return PF_FABRIC_NONE;
    case PF_NVML_FABRIC_STATE_NOT_STARTED:
        snprintf(why, n, "fabric registration not started");
        return PF_FABRIC_NOT_READY;
    case PF_NVML_FABRIC_STATE_IN_PROGRESS:
        snprintf(why, n, "fabric registration in progress");
        return PF_FABRIC_NOT_READY;
    case PF_NVML_FABRIC_STATE_COMPLETED:
        break;
    default:
        snprintf(why, n, "fabric state %u, not one NVML defines", state);
        return PF_FABRIC_NOT_READY;
    }
    if (status != 0) { /* NVML_SUCCESS */
        snprintf(why, n, "fabric registration completed with NVML error %d", status);
        return PF_FABRIC_NOT_READY;
    }
    bool zero = true;
    for (size_t i = 0; i < 16; i++)
        if (cluster_uuid[i]) zero = false;
    if (zero) {
        snprintf(why, n,
                 "fabric registration completed without a cluster UUID (NCCL then "
                 "turns multi-node NVLink off)");
        return PF_FABRIC_NOT_READY;
    }
    return PF_FABRIC_READY;
}
