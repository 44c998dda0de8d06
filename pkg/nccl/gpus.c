/* The pod's GPUs and their communicators: one process drives every GPU of its pod (ranks =
 * pods x GPUs, like nccl-tests -g) through a primary context per GPU, made current before
 * every NCCL call for that GPU; non-blocking communicators (ncclCommInitRankConfig with
 * blocking = 0) polled with ncclCommGetAsyncError against the deadline and aborted when it
 * passes, so a broken fabric never hangs the pod. */
#define _GNU_SOURCE
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void nc_cuerr(char *out, size_t n, const struct stage *st, const char *what, int gpu, pf_CUresult r)
{
    char e[160];
    pf_dl_cuda_strerror(e, sizeof(e), st->cu, r);
    if (gpu >= 0)
        snprintf(out, n, "%s on GPU %d: %s", what, gpu, e);
    else
        snprintf(out, n, "%s: %s", what, e);
}

void nc_ncclerr(char *out, size_t n, const struct stage *st, const char *what, int gpu,
                pf_ncclResult_t r)
{
    char e[200];
    pf_dl_nccl_strerror(e, sizeof(e), st->nccl, r);
    const char *last = NULL;
    if (st->nccl->GetLastError && gpu >= 0 && st->g[gpu].comm)
        last = st->nccl->GetLastError(st->g[gpu].comm);
    else if (st->nccl->GetLastError)
        last = st->nccl->GetLastError(NULL);
    if (last && *last)
        snprintf(out, n, "%s (GPU %d): %s; %s", what, gpu, e, last);
    else
        snprintf(out, n, "%s (GPU %d): %s", what, gpu, e);
}

pf_CUresult nc_set_current(struct stage *st, int i)
{
    return st->cu->CtxSetCurrent(st->g[i].cu);
}

static double remaining(const struct stage *st)
{
    return st->deadline - pf_now();
}

static void nap(int *round)
{
    struct timespec ts = {0, (*round < 50 ? 1 : 10) * 1000000L};
    nanosleep(&ts, NULL);
    (*round)++;
}

/* ---- waiting: every GPU's stop event and every communicator, against the deadline */

/* Every quarter of a second while NCCL is busy: a pod whose rendezvous connection closed
 * (killed, deleted) will never finish this collective, and NCCL itself may not say so before
 * the deadline (NET/Socket logs "Connection closed by remote peer" and waits on). */
#define WATCH_EVERY_S 0.25

static int watch_peers(struct stage *st, char *why, size_t wn, const char *what)
{
    if (st->world < 2 || !st->peers || !st->peers->lost) return WAIT_OK;
    double now = pf_now();
    if (now < st->next_watch) return WAIT_OK;
    st->next_watch = now + WATCH_EVERY_S;
    char who[160];
    if (st->peers->lost(st->peers->rdv, who, sizeof(who)) < 0) return WAIT_OK;
    snprintf(why, wn,
             "%s was lost during %s: its connection to the rendezvous closed (the process "
             "exited or the pod was deleted)",
             who, what);
    return WAIT_LOST;
}

int nc_wait_comms(struct stage *st, char *why, size_t wn, const char *what)
{
    int round = 0;
    for (;;) {
        bool busy = false;
        for (int i = 0; i < st->ngpus; i++) {
            if (!st->g[i].comm) continue;
            pf_ncclResult_t e = PF_NCCL_SUCCESS;
            nc_set_current(st, i);
            pf_ncclResult_t r = st->nccl->CommGetAsyncError(st->g[i].comm, &e);
            if (r != PF_NCCL_SUCCESS) {
                nc_ncclerr(why, wn, st, "ncclCommGetAsyncError", i, r);
                return WAIT_FAIL;
            }
            if (e == PF_NCCL_IN_PROGRESS) {
                busy = true;
            } else if (e != PF_NCCL_SUCCESS) {
                nc_ncclerr(why, wn, st, what, i, e);
                return WAIT_FAIL;
            }
        }
        if (!busy) return WAIT_OK;
        if (remaining(st) <= 0) {
            snprintf(why, wn, "%s did not complete within the deadline", what);
            return WAIT_TIMEOUT;
        }
        if (watch_peers(st, why, wn, what) == WAIT_LOST) return WAIT_LOST;
        nap(&round);
    }
}

int nc_wait_events(struct stage *st, char *why, size_t wn, const char *what)
{
    int round = 0;
    for (;;) {
        bool busy = false;
        for (int i = 0; i < st->ngpus; i++) {
            nc_set_current(st, i);
            pf_CUresult r = st->cu->EventQuery(st->g[i].stop);
            if (r == PF_CUDA_ERROR_NOT_READY) {
                busy = true;
            } else if (r != PF_CUDA_SUCCESS) {
                nc_cuerr(why, wn, st, what, i, r);
                return WAIT_FAIL;
            }
        }
        int w = nc_wait_comms(st, why, wn, what); /* async errors while the kernels run */
        if (w != WAIT_OK && w != WAIT_TIMEOUT) return w;
        if (!busy) return WAIT_OK;
        if (remaining(st) <= 0) {
            snprintf(why, wn, "%s did not complete within the deadline", what);
            return WAIT_TIMEOUT;
        }
        if (watch_peers(st, why, wn, what) == WAIT_LOST) return WAIT_LOST;
        nap(&round);
    }
}

/* Ends every communicator with ncclCommAbort or ncclCommDestroy, each on its GPU. */
static void end_comms(struct stage *st, bool abort)
{
    double t0 = pf_now();
    for (int i = 0; i < st->ngpus; i++) {
        if (!st->g[i].comm) continue;
        nc_set_current(st, i);
        (abort ? st->nccl->CommAbort : st->nccl->CommDestroy)(st->g[i].comm);
        st->g[i].comm = NULL;
    }
    st->end_s += pf_now() - t0;
}

void nc_abort_comms(struct stage *st)
{
    end_comms(st, true);
}

void nc_destroy_comms(struct stage *st)
{
    end_comms(st, false);
}

void nc_free_gpus(struct stage *st)
{
    for (int i = 0; i < st->ngpus; i++) {
        struct gpu *g = &st->g[i];
        if (!g->retained) continue;
        nc_set_current(st, i);
        if (g->send) st->cu->MemFree(g->send);
        if (g->recv) st->cu->MemFree(g->recv);
        if (g->start) st->cu->EventDestroy(g->start);
        if (g->stop) st->cu->EventDestroy(g->stop);
        if (g->stream) st->cu->StreamDestroy(g->stream);
        st->cu->CtxSetCurrent(NULL);
        st->cu->DevicePrimaryCtxRelease(g->dev);
        g->retained = false;
    }
    free(st->host);
    st->host = NULL;
}

/* ---- preparing this pod */

static const char *workload_ops[][4] = {
    {"dense", "allreduce", NULL, NULL},
    {"moe", "allreduce", "alltoall", NULL},
    {"fsdp", "allreduce", "allgather", "reducescatter"},
};

static void plan_ops(struct stage *st)
{
    const struct pf_config *cfg = st->ctx->config;
    st->nops = 0;
    if (cfg->collectives.n) {
        for (size_t i = 0; i < cfg->collectives.n && st->nops < MAX_OPS; i++)
            snprintf(st->ops[st->nops++].op, sizeof(st->ops[0].op), "%s", cfg->collectives.v[i]);
        return;
    }
    for (size_t w = 0; w < PF_ARRAY_LEN(workload_ops); w++) {
        if (strcmp(cfg->workload, workload_ops[w][0]) != 0) continue;
        for (int k = 1; k < 4 && workload_ops[w][k]; k++)
            snprintf(st->ops[st->nops++].op, sizeof(st->ops[0].op), "%s", workload_ops[w][k]);
    }
    if (st->nops == 0) snprintf(st->ops[st->nops++].op, sizeof(st->ops[0].op), "allreduce");
}

/* Loads the libraries and sets up every GPU. Returns 0 ready, 1 skip, 2 fail (why set). */
int nc_prepare(struct stage *st, char *why, size_t wn)
{
    if (pf_dl_cuda(&st->cu) < 0) {
        snprintf(why, wn, "libcuda.so.1 does not load (%s): no NVIDIA driver in this pod",
                 pf_err_msg());
        return 1;
    }
    if (pf_dl_nccl(&st->nccl) < 0) {
        snprintf(why, wn, "libnccl.so.2 does not load: %s", pf_err_msg());
        return st->ctx->gpus.n ? 2 : 1;
    }
    pf_CUresult cr = st->cu->Init(0);
    if (cr == PF_CUDA_ERROR_NO_DEVICE) {
        snprintf(why, wn, "cuInit: no CUDA device visible in this pod");
        return 1;
    }
    if (cr != PF_CUDA_SUCCESS) {
        nc_cuerr(why, wn, st, "cuInit", -1, cr);
        return 2;
    }
    int n = 0;
    cr = st->cu->DeviceGetCount(&n);
    if (cr != PF_CUDA_SUCCESS) {
        nc_cuerr(why, wn, st, "cuDeviceGetCount", -1, cr);
        return 2;
    }
    if (n <= 0) {
        snprintf(why, wn, "cuDeviceGetCount: no CUDA device visible in this pod");
        return 1;
    }
    if (n > MAX_GPUS) n = MAX_GPUS;
    st->ngpus = n;

    plan_ops(st);
    size_t need = 1;
    for (int k = 0; k < st->nops; k++) {
        struct plan p;
        /* the world size is not known yet: the largest buffers are S per rank either way */
        nc_make_plan(&p, st->ops[k].op, (size_t)st->ctx->config->message_bytes, 1);
        if (p.send_elems > need) need = p.send_elems;
        if (p.recv_elems > need) need = p.recv_elems;
    }
    st->buf_elems = need;
    st->host = malloc(need * sizeof(float));
    if (!st->host) {
        snprintf(why, wn, "out of host memory for a %zu-byte check buffer", need * 4);
        return 2;
    }
    struct pf_node *devs = pf_node_set_seq(st->ctx->verdict->environment, "cudaDevices");
    for (int i = 0; i < n; i++) {
        struct gpu *g = &st->g[i];
        if ((cr = st->cu->DeviceGet(&g->dev, i)) != PF_CUDA_SUCCESS) {
            nc_cuerr(why, wn, st, "cuDeviceGet", i, cr);
            return 2;
        }
        st->cu->DeviceGetName(g->name, sizeof(g->name), g->dev);
        g->name[sizeof(g->name) - 1] = '\0';
        st->cu->DeviceGetPCIBusId(g->bus, sizeof(g->bus), g->dev);
        g->bus[sizeof(g->bus) - 1] = '\0';
        struct pf_CUuuid u;
        if (st->cu->DeviceGetUuid && st->cu->DeviceGetUuid(&u, g->dev) == PF_CUDA_SUCCESS) {
            const unsigned char *b = (const unsigned char *)u.bytes;
            snprintf(g->uuid, sizeof(g->uuid),
                     "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                     b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
                     b[12], b[13], b[14], b[15]);
        }
        struct pf_node *d = pf_node_add_map(devs);
        pf_node_set_int(d, "ordinal", i);
        pf_node_set_str(d, "name", g->name);
        pf_node_set_str(d, "busId", g->bus);
        if (g->uuid[0]) pf_node_set_str(d, "uuid", g->uuid);
        if ((cr = st->cu->DevicePrimaryCtxRetain(&g->cu, g->dev)) != PF_CUDA_SUCCESS) {
            nc_cuerr(why, wn, st, "cuDevicePrimaryCtxRetain", i, cr);
            return 2;
        }
        g->retained = true;
        if ((cr = nc_set_current(st, i)) != PF_CUDA_SUCCESS) {
            nc_cuerr(why, wn, st, "cuCtxSetCurrent", i, cr);
            return 2;
        }
        if ((cr = st->cu->StreamCreate(&g->stream, PF_CU_STREAM_NON_BLOCKING)) != PF_CUDA_SUCCESS ||
            (cr = st->cu->EventCreate(&g->start, PF_CU_EVENT_DEFAULT)) != PF_CUDA_SUCCESS ||
            (cr = st->cu->EventCreate(&g->stop, PF_CU_EVENT_DEFAULT)) != PF_CUDA_SUCCESS) {
            nc_cuerr(why, wn, st, "cuStreamCreate/cuEventCreate", i, cr);
            return 2;
        }
        if ((cr = st->cu->MemAlloc(&g->send, need * 4)) != PF_CUDA_SUCCESS ||
            (cr = st->cu->MemAlloc(&g->recv, need * 4)) != PF_CUDA_SUCCESS) {
            char what[64];
            snprintf(what, sizeof(what), "cuMemAlloc of 2 x %zu bytes", need * 4);
            nc_cuerr(why, wn, st, what, i, cr);
            return 2;
        }
    }
    return 0;
}

/* Creates the communicators: non-blocking when this NCCL has ncclCommInitRankConfig. */
int nc_init_comms(struct stage *st, const struct pf_ncclUniqueId *id, char *why, size_t wn)
{
    const struct pf_dl_nccl *n = st->nccl;
    /* zeroed first: NCCL copies `size` bytes, the tail padding included (see dl.h) */
    struct pf_ncclConfig cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.size = sizeof(cfg);
    cfg.magic = PF_NCCL_CONFIG_MAGIC;
    cfg.version = PF_NCCL_CONFIG_VERSION;
    cfg.blocking = 0;
    pf_ncclResult_t r = n->GroupStart();
    int bad = 0;
    for (int i = 0; i < st->ngpus && (r == PF_NCCL_SUCCESS || r == PF_NCCL_IN_PROGRESS); i++) {
        nc_set_current(st, i);
        bad = i;
        if (n->CommInitRankConfig)
            r = n->CommInitRankConfig(&st->g[i].comm, st->nranks, *id, st->base + i, &cfg);
        else
            r = n->CommInitRank(&st->g[i].comm, st->nranks, *id, st->base + i);
        if (r == PF_NCCL_SUCCESS || r == PF_NCCL_IN_PROGRESS) st->ncomms++;
    }
    pf_ncclResult_t e = n->GroupEnd();
    if (r == PF_NCCL_SUCCESS || r == PF_NCCL_IN_PROGRESS) r = e, bad = 0;
    if (r != PF_NCCL_SUCCESS && r != PF_NCCL_IN_PROGRESS) {
        nc_ncclerr(why, wn, st,
                   n->CommInitRankConfig ? "ncclCommInitRankConfig" : "ncclCommInitRank", bad, r);
        return WAIT_FAIL;
    }
    return nc_wait_comms(st, why, wn, "ncclCommInitRankConfig");
}
