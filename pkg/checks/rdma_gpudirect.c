/* rdma.gpudirect: a path for GPUDirect RDMA, nvidia_peermem or dma-buf (kernel 5.12 or later
 * with the open GPU kernel module), read under the root prefix (docs/checks/20-rdma.md). */
#define _GNU_SOURCE
#include "rdma_hca.h"

#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>

/* ---- rdma.gpudirect */

static const char *const peermem_paths[] = {
    "/sys/kernel/mm/memory_peers/nv_mem/version",
    "/sys/kernel/mm/memory_peers/nv_mem_nc/version",
    "/sys/module/nvidia_peermem/version",
};

/* Kernel release from the root's /proc/sys/kernel/osrelease, else uname. */
static void kernel_release(char *out, size_t n, const struct pf_host *h)
{
    if (pf_host_read(out, n, h, "/proc/sys/kernel/osrelease") > 0) {
        pf_trim(out);
        return;
    }
    struct utsname u;
    snprintf(out, n, "%s", uname(&u) == 0 ? u.release : "");
}

void pf_check_rdma_gpudirect(struct pf_check *out, struct pf_ctx *ctx)
{
    const struct pf_host *h = &ctx->host;
    if (pf_rdma_expect_none(ctx)) {
        pf_check_skip(out, "expect.rdma is none");
        return;
    }
    if (ctx->gpus.n == 0 || ctx->hcas.n == 0) {
        pf_check_skip(out, "needs both GPUs and RDMA devices (%zu GPU%s, %zu HCA%s)", ctx->gpus.n,
                      ctx->gpus.n == 1 ? "" : "s", ctx->hcas.n, ctx->hcas.n == 1 ? "" : "s");
        return;
    }
    struct pf_node *ev = out->evidence;
    const char *peermem = NULL;
    for (size_t i = 0; i < PF_ARRAY_LEN(peermem_paths) && !peermem; i++)
        if (pf_host_exists(h, "%s", peermem_paths[i])) peermem = peermem_paths[i];
    if (peermem) {
        char ver[64];
        pf_node_set_str(ev, "peermem", peermem);
        if (pf_host_read(ver, sizeof(ver), h, "%s", peermem) > 0)
            pf_node_set_str(ev, "peermemVersion", pf_trim(ver));
    }

    char rel[256];
    kernel_release(rel, sizeof(rel), h);
    int major = 0, minor = 0;
    bool kernel_known = sscanf(rel, "%d.%d", &major, &minor) == 2;
    bool kernel_ok = kernel_known && (major > 5 || (major == 5 && minor >= 12));
    char ver[1024];
    /* the driver writes "NVRM version: NVIDIA UNIX [Open ]Kernel Module ..." (nv.c); a line
     * without "Kernel Module" says neither */
    bool have_ver = pf_host_read(ver, sizeof(ver), h, "/proc/driver/nvidia/version") > 0 &&
                    strstr(ver, "Kernel Module") != NULL;
    bool open_module = have_ver && strstr(ver, "Open Kernel Module") != NULL;
    bool dmabuf = kernel_ok && open_module;
    pf_node_set_str(ev, "kernel", rel);
    pf_node_set_bool(ev, "openKernelModule", open_module);
    pf_node_set_bool(ev, "dmabuf", dmabuf);

    if (peermem && dmabuf)
        pf_check_set_message(out, "peer memory (%s) and dma-buf (kernel %s, open GPU module)",
                             peermem, rel);
    else if (peermem)
        pf_check_set_message(out, "peer memory: %s", peermem);
    else if (dmabuf)
        pf_check_set_message(out, "dma-buf: kernel %s with the open GPU kernel module", rel);
    else if (!kernel_known || (kernel_ok && !have_ver)) {
        /* dma-buf needs both: without the kernel's release or the driver's version line
         * (NVRM version: "... Open Kernel Module ...") it may be there */
        if (!kernel_known)
            pf_check_unknown(out, "no-gpudirect",
                             "nvidia_peermem is not loaded, and whether dma-buf is possible: "
                             "kernel release \"%.64s\" does not parse",
                             rel);
        else
            pf_check_unknown(out, "no-gpudirect",
                             "nvidia_peermem is not loaded, and whether dma-buf is possible: "
                             "/proc/driver/nvidia/version is missing or names no kernel module "
                             "(open or proprietary)");
        pf_check_set_message(out, "no GPUDirect RDMA path found, none ruled out");
    } else {
        char why[320];
        if (!kernel_ok)
            snprintf(why, sizeof(why), "kernel %.64s is older than 5.12%s", rel,
                     open_module ? "" : " and the NVIDIA kernel module is not the open one");
        else
            snprintf(why, sizeof(why), "the NVIDIA kernel module is not the open one");
        pf_check_add_finding(out, "no-gpudirect", PF_WARN, NULL,
                             "no GPUDirect RDMA path: nvidia_peermem is not loaded (none of %s, "
                             "%s, %s) and dma-buf is not possible (%s)",
                             peermem_paths[0], peermem_paths[1], peermem_paths[2], why);
    }
}
