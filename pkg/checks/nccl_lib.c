/* nccl.library: the training image's own libnccl.so.2 loads (override PREFLIGHT_NCCL_LIB,
 * the soname through LD_LIBRARY_PATH and ld.so.cache, then the usual places: CUDA, pip and
 * conda wheels), and its version; libcuda's driver version when the driver is there (no GPU
 * needed for either). Only trusted trees are searched (pkg/dl/trust.c); the evidence
 * "skipped" says which were passed over and why. */
#define _GNU_SOURCE
#include "checks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../dl/dl.h"

/* Below this NCCL is reported (nccl-version, warn): see docs/checks/41-nccl-library.md. */
#define NCCL_MIN_MAJOR 2
#define NCCL_MIN_MINOR 18

#ifndef PF_STATIC
static void record_cuda(struct pf_check *out, struct pf_ctx *ctx)
{
    const struct pf_dl_cuda *cu = NULL;
    if (pf_dl_cuda(&cu) < 0) {
        pf_node_set_strf(out->evidence, "cudaDriver", "not loaded: %s", pf_err_msg());
        return;
    }
    pf_node_set_str(out->evidence, "cudaLibrary", cu->path);
    int v = 0;
    if (cu->DriverGetVersion(&v) == PF_CUDA_SUCCESS && v > 0) {
        char s[32];
        snprintf(s, sizeof(s), "%d.%d", v / 1000, v % 1000 / 10);
        pf_node_set_str(ctx->verdict->environment, "cudaDriverVersion", s);
        pf_node_set_str(out->evidence, "cudaDriverVersion", s);
    }
}

/* The trees the search passed over (pkg/dl/trust.c): "skipped", one "PATH: WHY" each. */
static void record_skipped(struct pf_check *out)
{
    struct pf_strlist l = {0};
    pf_dl_skipped(&l, "libnccl.so.2");
    if (l.n) {
        struct pf_node *seq = pf_node_set_seq(out->evidence, "skipped");
        for (size_t i = 0; i < l.n; i++)
            pf_node_add_str(seq, l.v[i]);
    }
    pf_strlist_free(&l);
}
#endif

void pf_check_nccl_library(struct pf_check *out, struct pf_ctx *ctx)
{
#ifdef PF_STATIC
    (void)ctx;
    pf_check_skip(out, "static binary: no dlopen (libnccl.so.2 not probed)");
    return;
#else
    /* Under a root prefix the dynamic loader still reads this machine's LD_LIBRARY_PATH,
     * ld.so.cache and wheel folders, not the tree's: what it finds or misses there says nothing
     * of the pod the tree stands for. Only a library named outright is judged then. */
    const char *named = getenv("PREFLIGHT_NCCL_LIB");
    if (ctx->host.root[0] && (!named || !*named)) {
        pf_check_unknown(out, "nccl-missing",
                         "the root prefix %s: the dynamic loader looks for libnccl.so.2 on this "
                         "machine, not under the prefix (set PREFLIGHT_NCCL_LIB to judge one)",
                         ctx->host.root);
        pf_check_skip(out,
                      "root prefix %s: libnccl.so.2 not probed (the loader does not read "
                      "the prefix); unknown",
                      ctx->host.root);
        return;
    }
    record_cuda(out, ctx);
    const struct pf_dl_nccl *n = NULL;
    int loaded = pf_dl_nccl(&n);
    record_skipped(out);
    if (loaded < 0) {
        if (ctx->gpus.n == 0) {
            pf_check_skip(out, "no GPUs in this pod, and libnccl.so.2 does not load (%s)",
                          pf_err_msg());
            return;
        }
        pf_check_add_finding(out, "nccl-missing", PF_FAIL, NULL,
                             "libnccl.so.2 does not load (%s) while this pod has %zu GPU%s",
                             pf_err_msg(), ctx->gpus.n, ctx->gpus.n == 1 ? "" : "s");
        return;
    }
    pf_node_set_str(out->evidence, "library", n->path);
    int code = 0;
    pf_ncclResult_t r = n->GetVersion(&code);
    if (r != PF_NCCL_SUCCESS || code <= 0) {
        char e[200];
        pf_dl_nccl_strerror(e, sizeof(e), n, r);
        pf_check_add_finding(out, "nccl-missing", PF_FAIL, NULL,
                             "%s loads but ncclGetVersion fails: %s", n->path, e);
        return;
    }
    char ver[32];
    pf_nccl_version_string(ver, sizeof(ver), code);
    pf_node_set_str(ctx->verdict->environment, "ncclVersion", ver);
    pf_node_set_str(ctx->verdict->environment, "ncclLibrary", n->path);
    pf_node_set_str(out->evidence, "version", ver);
    pf_node_set_int(out->evidence, "versionCode", code);
    struct pf_node *opt = pf_node_set_seq(out->evidence, "missingOptional");
    if (!n->CommInitRankConfig) pf_node_add_str(opt, "ncclCommInitRankConfig");
    if (!n->AlltoAll) pf_node_add_str(opt, "ncclAlltoAll");
    if (!n->Send || !n->Recv) pf_node_add_str(opt, "ncclSend/ncclRecv");
    if (!n->GetLastError) pf_node_add_str(opt, "ncclGetLastError");
    int min = pf_nccl_version_code(NCCL_MIN_MAJOR, NCCL_MIN_MINOR, 0);
    if (code < min) {
        pf_check_add_finding(
            out, "nccl-version", PF_WARN, NULL, "%s is NCCL %s, older than %d.%d%s", n->path, ver,
            NCCL_MIN_MAJOR, NCCL_MIN_MINOR,
            n->CommInitRankConfig
                ? ""
                : ": it has no ncclCommInitRankConfig, so communicator set-up cannot be bounded "
                  "by a deadline (only by --timeout)");
    }
    char torch_lib[PF_DL_PATH_MAX + 64];
    bool torch = pf_dl_torch_beside(n->path, torch_lib, sizeof(torch_lib));
    if (torch) pf_node_set_str(out->evidence, "loadedBy", torch_lib);
    pf_check_set_message(out, "NCCL %s from %s%s", ver, n->path,
                         torch ? " (PyTorch's own: its libraries load it first)" : "");
#endif
}
