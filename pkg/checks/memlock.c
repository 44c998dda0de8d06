/* rdma.memlock: whether this process may pin the memory RDMA registers (RLIMIT_MEMLOCK and
 * CAP_IPC_LOCK), read from the process itself, not from sysfs (docs/checks/20-rdma.md). */
#define _GNU_SOURCE
#include "checks.h"

#include <errno.h>
#include <linux/capability.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MEMLOCK_MIN_BYTES (1LL << 30)

static bool has_cap_ipc_lock(void)
{
    struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct data[2];
    memset(data, 0, sizeof(data));
    if (syscall(SYS_capget, &hdr, data) != 0) return false;
    return (data[CAP_IPC_LOCK / 32].effective & (1u << (CAP_IPC_LOCK % 32))) != 0;
}

/* CAP_IPC_LOCK in the bounding set: the container was given it (securityContext adds it),
 * whether or not this process holds it. */
static bool bounding_ipc_lock(void)
{
    return prctl(PR_CAPBSET_READ, CAP_IPC_LOCK, 0, 0, 0) == 1;
}

static void human_bytes(char *out, size_t n, rlim_t v)
{
    if (v == RLIM_INFINITY)
        snprintf(out, n, "unlimited");
    else if (v >= (1ULL << 30) && v % (1ULL << 30) == 0)
        snprintf(out, n, "%llu GiB", (unsigned long long)(v >> 30));
    else if (v >= (1ULL << 20) && v % (1ULL << 20) == 0)
        snprintf(out, n, "%llu MiB", (unsigned long long)(v >> 20));
    else if (v >= 1024 && v % 1024 == 0)
        snprintf(out, n, "%llu KiB", (unsigned long long)(v >> 10));
    else
        snprintf(out, n, "%llu bytes", (unsigned long long)v);
}

static void set_limit(struct pf_node *ev, const char *key, rlim_t v)
{
    if (v == RLIM_INFINITY)
        pf_node_set_str(ev, key, "unlimited");
    else
        pf_node_set_int(ev, key, (long long)v);
}

void pf_check_rdma_memlock(struct pf_check *out, struct pf_ctx *ctx)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_MEMLOCK, &rl) != 0) {
        pf_check_skip(out, "getrlimit(RLIMIT_MEMLOCK) failed: %s", strerror(errno));
        return;
    }
    const bool rdma = ctx->hcas.n > 0 && !(ctx->config && ctx->config->expect_rdma == PF_RDMA_NONE);
    const bool cap = has_cap_ipc_lock();
    struct pf_node *ev = out->evidence;
    set_limit(ev, "soft", rl.rlim_cur);
    set_limit(ev, "hard", rl.rlim_max);
    pf_node_set_int(ev, "thresholdBytes", MEMLOCK_MIN_BYTES);
    pf_node_set_bool(ev, "capIpcLock", cap);
    const bool bounded = !cap && bounding_ipc_lock();
    if (bounded) pf_node_set_bool(ev, "capIpcLockBounding", true);
    pf_node_set_int(ev, "uid", (long long)geteuid());
    pf_node_set_bool(ev, "rdmaDevices", rdma);
    char soft[32], hard[32];
    human_bytes(soft, sizeof(soft), rl.rlim_cur);
    human_bytes(hard, sizeof(hard), rl.rlim_max);

    if (rl.rlim_cur == RLIM_INFINITY) {
        pf_check_set_message(out, "RLIMIT_MEMLOCK is unlimited");
        return;
    }
    if (rl.rlim_cur >= (rlim_t)MEMLOCK_MIN_BYTES) {
        pf_check_set_message(out, "RLIMIT_MEMLOCK is %s (hard %s)", soft, hard);
        return;
    }
    if (cap) {
        /* ib_umem pins beyond RLIMIT_MEMLOCK for a process holding CAP_IPC_LOCK */
        pf_check_set_message(out,
                             "RLIMIT_MEMLOCK is %s, but the process holds CAP_IPC_LOCK, which "
                             "lets verbs pin memory beyond it",
                             soft);
        return;
    }
    if (!rdma) {
        /* the limit binds only memory registered with an HCA (ib_umem_get): with no RDMA device
         * in the pod (or expect.rdma: none) nothing is registered, and NCCL's sockets, shared
         * memory and CUDA's pinned host memory do not count against it */
        pf_check_set_message(out,
                             "RLIMIT_MEMLOCK is %s and the process lacks CAP_IPC_LOCK, but no "
                             "RDMA device is in use here: nothing registers memory with an HCA",
                             soft);
        return;
    }
    char why[192] = "";
    if (bounded)
        snprintf(why, sizeof(why),
                 " (the container was given IPC_LOCK, but the process runs as UID %u and "
                 "Kubernetes gives added capabilities to root processes only: runAsUser: 0)",
                 (unsigned)geteuid());
    pf_check_add_finding(out, "memlock-low", PF_FAIL, NULL,
                         "RLIMIT_MEMLOCK is %s (hard %s), below 1 GiB, and the process lacks "
                         "CAP_IPC_LOCK%s%s%s",
                         soft, hard, why,
                         ": registering NCCL's buffers with the HCAs (ibv_reg_mr) will fail",
                         rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= (rlim_t)MEMLOCK_MIN_BYTES
                             ? "; the hard limit allows `ulimit -l unlimited` in the entrypoint"
                             : "");
}
