/* gpu.fabric: what multi-node NVLink (MNNVL, GB200 NVL72 and the like) needs inside the pod.
 * NCCL reads NCCL_MNNVL_ENABLE (0 off, 1 on, 2 auto, its default); the check runs when the
 * variable is 1 or 2. Across nodes the GPUs share memory through IMEX channels: the pod
 * needs at least one /dev/nvidia-caps-imex-channels/channelN node, which the NVIDIA DRA
 * driver puts in pods that claim a ComputeDomain channel. The fabric state and clique come
 * from NVML; see docs/checks/10-gpu.md. */
#define _GNU_SOURCE
#include "checks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define IMEX_DIR "/dev/nvidia-caps-imex-channels"

/* "channel" followed by decimal digits only */
static bool is_channel_name(const char *n)
{
    if (strncmp(n, "channel", 7) != 0 || n[7] == '\0') return false;
    for (const char *p = n + 7; *p; p++)
        if (*p < '0' || *p > '9') return false;
    return true;
}

void pf_check_gpu_fabric(struct pf_check *out, struct pf_ctx *ctx)
{
    const char *en = pf_env_get(&ctx->env, "NCCL_MNNVL_ENABLE");
    if (!en || (strcmp(en, "1") != 0 && strcmp(en, "2") != 0)) {
        if (en && *en)
            pf_check_skip(out, "multi-node NVLink not requested (NCCL_MNNVL_ENABLE=%s)", en);
        else
            pf_check_skip(out, "multi-node NVLink not requested (NCCL_MNNVL_ENABLE unset)");
        return;
    }
    pf_node_set_str(out->evidence, "mnnvlEnable", en);
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
    pf_node_set_str(out->evidence, "fabricState",
                    "not read: the fabric state and clique need libnvidia-ml (not loaded)");
    if (chans.n == 0)
        pf_check_add_finding(out, "imex-channel-missing", PF_FAIL, NULL,
                             "NCCL_MNNVL_ENABLE=%s but %s %s: NCCL cannot import GPU memory "
                             "from other nodes over NVLink",
                             en, IMEX_DIR,
                             r != 0 ? "is not in the pod" : "holds no channelN device");
    else
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
