/* One collective on every GPU of the pod: its buffers filled with exact small integers in
 * float32 (so every sum is exact), warm-up and timed iterations in one group per
 * iteration, and every element of the result checked. */
#include "internal.h"

#include <stdio.h>
#include <string.h>

/* ---- data: exact small integers in float32, so every sum is exact */

static inline float pat(long long r, size_t k)
{
    return (float)((k % 61) + (size_t)(r % 7) + 1);
}

void nc_make_plan(struct plan *p, const char *op, size_t bytes, int n)
{
    size_t elems = bytes / sizeof(float);
    if (strcmp(op, "allgather") == 0 || strcmp(op, "reducescatter") == 0 ||
        strcmp(op, "alltoall") == 0) {
        size_t c = elems / (size_t)n;
        if (c == 0) c = 1;
        p->count = c;
        p->send_elems = strcmp(op, "allgather") == 0 ? c : c * (size_t)n;
        p->recv_elems = strcmp(op, "reducescatter") == 0 ? c : c * (size_t)n;
        p->bytes = c * (size_t)n * sizeof(float);
        return;
    }
    if (elems == 0) elems = 1;
    p->count = p->send_elems = p->recv_elems = elems;
    p->bytes = elems * sizeof(float);
}

/* The expected element j of rank g's output, for ops that move data without reducing. */
static float expect_at(const char *op, const struct plan *p, int n, int g, size_t j)
{
    size_t c = p->count;
    if (strcmp(op, "broadcast") == 0) return pat(0, j);
    if (strcmp(op, "sendrecv") == 0) return pat((g - 1 + n) % n, j);
    if (strcmp(op, "allgather") == 0) return pat((long long)(j / c), j % c);
    if (strcmp(op, "alltoall") == 0) return pat((long long)(j / c), (size_t)g * c + j % c);
    return -1;
}

/* Sum over n ranks of pat(r, k) = n*((k%61)+1) + sum_r (r%7). */
static float expect_sum(int n, long long s7, size_t k)
{
    return (float)((long long)n * (long long)((k % 61) + 1) + s7);
}

static long long sum_mod7(int n)
{
    long long s = 0;
    for (int r = 0; r < n; r++)
        s += r % 7;
    return s;
}

/* ---- one iteration of an op on every local GPU, in one group */

static pf_ncclResult_t launch(struct stage *st, const char *op, const struct plan *p, int *bad)
{
    const struct pf_dl_nccl *n = st->nccl;
    pf_ncclResult_t r = n->GroupStart();
    if (r != PF_NCCL_SUCCESS) {
        *bad = -1;
        return r;
    }
    for (int i = 0; i < st->ngpus && r == PF_NCCL_SUCCESS; i++) {
        struct gpu *g = &st->g[i];
        void *s = (void *)(uintptr_t)g->send, *d = (void *)(uintptr_t)g->recv;
        int me = st->base + i;
        nc_set_current(st, i);
        *bad = i;
        if (strcmp(op, "allreduce") == 0)
            r = n->AllReduce(s, d, p->count, PF_NCCL_FLOAT32, PF_NCCL_SUM, g->comm, g->stream);
        else if (strcmp(op, "allgather") == 0)
            r = n->AllGather(s, d, p->count, PF_NCCL_FLOAT32, g->comm, g->stream);
        else if (strcmp(op, "reducescatter") == 0)
            r = n->ReduceScatter(s, d, p->count, PF_NCCL_FLOAT32, PF_NCCL_SUM, g->comm, g->stream);
        else if (strcmp(op, "broadcast") == 0)
            r = n->Broadcast(s, d, p->count, PF_NCCL_FLOAT32, 0, g->comm, g->stream);
        else if (strcmp(op, "reduce") == 0)
            r = n->Reduce(s, d, p->count, PF_NCCL_FLOAT32, PF_NCCL_SUM, 0, g->comm, g->stream);
        else if (strcmp(op, "alltoall") == 0 && n->AlltoAll)
            r = n->AlltoAll(s, d, p->count, PF_NCCL_FLOAT32, g->comm, g->stream);
        else if (strcmp(op, "alltoall") == 0) {
            /* older NCCL: grouped send/recv, as nccl-tests' alltoall does */
            for (int peer = 0; peer < st->nranks && r == PF_NCCL_SUCCESS; peer++) {
                size_t off = (size_t)peer * p->count * sizeof(float);
                r = n->Send((char *)s + off, p->count, PF_NCCL_FLOAT32, peer, g->comm, g->stream);
                if (r == PF_NCCL_SUCCESS)
                    r = n->Recv((char *)d + off, p->count, PF_NCCL_FLOAT32, peer, g->comm,
                                g->stream);
            }
        } else if (strcmp(op, "sendrecv") == 0) {
            int to = (me + 1) % st->nranks, from = (me - 1 + st->nranks) % st->nranks;
            r = n->Send(s, p->count, PF_NCCL_FLOAT32, to, g->comm, g->stream);
            if (r == PF_NCCL_SUCCESS)
                r = n->Recv(d, p->count, PF_NCCL_FLOAT32, from, g->comm, g->stream);
        }
    }
    pf_ncclResult_t e = n->GroupEnd();
    if (r == PF_NCCL_SUCCESS || r == PF_NCCL_IN_PROGRESS) {
        *bad = -1;
        r = e;
    }
    return r == PF_NCCL_IN_PROGRESS ? PF_NCCL_SUCCESS : r;
}

const char *nc_op_missing(const struct pf_dl_nccl *n, const char *op)
{
    if (strcmp(op, "broadcast") == 0 && !n->Broadcast) return "ncclBroadcast";
    if (strcmp(op, "reduce") == 0 && !n->Reduce) return "ncclReduce";
    if ((strcmp(op, "sendrecv") == 0 || (strcmp(op, "alltoall") == 0 && !n->AlltoAll)) &&
        (!n->Send || !n->Recv))
        return "ncclSend/ncclRecv";
    return NULL;
}

/* Fills every GPU's send buffer, runs warm-up and timed iterations, checks the result.
 * Returns WAIT_OK/WAIT_TIMEOUT/WAIT_FAIL; r gets this pod's part. */
int nc_run_op(struct stage *st, const char *op, struct result *r)
{
    const struct pf_config *cfg = st->ctx->config;
    struct plan p;
    nc_make_plan(&p, op, (size_t)cfg->message_bytes, st->nranks);
    char why[300] = "";
    memset(r, 0, sizeof(*r));
    r->ngpus = st->ngpus;
    /* send buffers */
    for (int i = 0; i < st->ngpus; i++) {
        int me = st->base + i;
        for (size_t k = 0; k < p.send_elems; k++)
            st->host[k] = pat(me, k);
        nc_set_current(st, i);
        pf_CUresult cr = st->cu->MemcpyHtoD(st->g[i].send, st->host, p.send_elems * 4);
        if (cr == PF_CUDA_SUCCESS) {
            for (size_t k = 0; k < p.recv_elems; k++)
                st->host[k] = -1.0f;
            cr = st->cu->MemcpyHtoD(st->g[i].recv, st->host, p.recv_elems * 4);
        }
        /* cuMemcpyHtoD from pageable memory may return before its DMA lands, and it runs
         * on the legacy default stream, which a CU_STREAM_NON_BLOCKING stream (where NCCL
         * runs) does not wait for (CUDA Driver API reference, "API synchronization behavior"):
         * the context is synchronised before any collective reads the buffers. */
        if (cr == PF_CUDA_SUCCESS) cr = st->cu->CtxSynchronize();
        if (cr != PF_CUDA_SUCCESS) {
            nc_cuerr(why, sizeof(why), st, "cuMemcpyHtoD", i, cr);
            goto fail;
        }
    }
    int iters = cfg->nccl_iterations > 0 ? cfg->nccl_iterations : 1;
    int warm = cfg->nccl_warmup > 0 ? cfg->nccl_warmup : 0;
    for (int phase = 0; phase < 2; phase++) {
        int count = phase == 0 ? warm : iters;
        if (count == 0) continue;
        if (phase == 1)
            for (int i = 0; i < st->ngpus; i++) {
                nc_set_current(st, i);
                st->cu->EventRecord(st->g[i].start, st->g[i].stream);
            }
        for (int it = 0; it < count; it++) {
            int bad = -1;
            pf_ncclResult_t nr = launch(st, op, &p, &bad);
            if (nr != PF_NCCL_SUCCESS) {
                char what[64];
                snprintf(what, sizeof(what), "nccl %s", op);
                nc_ncclerr(why, sizeof(why), st, what, bad < 0 ? 0 : bad, nr);
                goto fail;
            }
            int w = nc_wait_comms(st, why, sizeof(why), op);
            if (w != WAIT_OK) {
                r->state = w;
                goto out;
            }
        }
        for (int i = 0; i < st->ngpus; i++) {
            nc_set_current(st, i);
            st->cu->EventRecord(st->g[i].stop, st->g[i].stream);
        }
        char what[64];
        snprintf(what, sizeof(what), "%s %s", op, phase == 0 ? "warm-up" : "iterations");
        int w = nc_wait_events(st, why, sizeof(why), what);
        if (w != WAIT_OK) {
            r->state = w;
            goto out;
        }
    }
    for (int i = 0; i < st->ngpus; i++) {
        float ms = 0;
        nc_set_current(st, i);
        pf_CUresult cr = st->cu->EventElapsedTime(&ms, st->g[i].start, st->g[i].stop);
        if (cr != PF_CUDA_SUCCESS) {
            nc_cuerr(why, sizeof(why), st, "cuEventElapsedTime", i, cr);
            goto fail;
        }
        r->tsum += ms / 1000.0 / iters;
    }
    /* check every element on every GPU */
    long long s7 = sum_mod7(st->nranks);
    for (int i = 0; i < st->ngpus; i++) {
        int me = st->base + i;
        if (strcmp(op, "reduce") == 0 && me != 0) continue;
        nc_set_current(st, i);
        pf_CUresult cr = st->cu->MemcpyDtoH(st->host, st->g[i].recv, p.recv_elems * 4);
        if (cr != PF_CUDA_SUCCESS) {
            nc_cuerr(why, sizeof(why), st, "cuMemcpyDtoH", i, cr);
            goto fail;
        }
        for (size_t k = 0; k < p.recv_elems; k++) {
            float want;
            if (strcmp(op, "allreduce") == 0 || strcmp(op, "reduce") == 0)
                want = expect_sum(st->nranks, s7, k);
            else if (strcmp(op, "reducescatter") == 0)
                want = expect_sum(st->nranks, s7, (size_t)me * p.count + k);
            else
                want = expect_at(op, &p, st->nranks, me, k);
            if (st->host[k] != want) {
                if (r->wrong == 0)
                    snprintf(r->why, sizeof(r->why),
                             "first on rank %d (GPU %d) element %zu: %g, expected %g", me, i, k,
                             (double)st->host[k], (double)want);
                if (r->wrong < INT32_MAX) r->wrong++;
            }
        }
    }
    return WAIT_OK;
fail:
    r->state = WAIT_FAIL;
out:
    snprintf(r->why, sizeof(r->why), "%s", why);
    return r->state;
}
