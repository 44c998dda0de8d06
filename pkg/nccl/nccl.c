/* collective.nccl: NCCL collectives among every GPU of every pod, through the image's own
 * libnccl and the CUDA driver API (both loaded with dlopen). One process drives all GPUs of
 * its pod (ranks = pods x GPUs, like nccl-tests -g): a primary context per GPU, made current
 * before every NCCL call for that GPU; non-blocking communicators (ncclCommInitRankConfig with
 * blocking = 0) polled with ncclCommGetAsyncError against a deadline and aborted when it
 * passes, so a broken fabric never hangs the pod. NCCL's own INFO log (NCCL_DEBUG_FILE in a
 * private folder) tells which transport it chose. */
#define _GNU_SOURCE
#include "nccl.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../dl/dl.h"

#define MAX_GPUS 64
#define MAX_OPS 8
#define LOG_MAX (16u << 20)

/* ---- expectations and bus bandwidth (pure) */

double pf_nccl_busbw_factor(const char *op, int n)
{
    if (n < 1) return 0;
    if (strcmp(op, "allreduce") == 0) return 2.0 * (n - 1) / n;
    if (strcmp(op, "allgather") == 0 || strcmp(op, "reducescatter") == 0 ||
        strcmp(op, "alltoall") == 0)
        return (double)(n - 1) / n;
    if (strcmp(op, "broadcast") == 0 || strcmp(op, "reduce") == 0 || strcmp(op, "sendrecv") == 0)
        return 1.0;
    return 0;
}

static const struct pf_curve_point default_curve[] = {{2, 85}, {8, 68}, {125, 39}};

void pf_nccl_expected_busbw(struct pf_nccl_expect *out, const struct pf_config *config, int nodes)
{
    out->gbps = -1;
    out->rule[0] = '\0';
    if (config->expect_busbw_gbps >= 0) {
        out->gbps = config->expect_busbw_gbps;
        snprintf(out->rule, sizeof(out->rule), "expect.busbwGBps = %g GB/s", out->gbps);
        return;
    }
    if (!(config->expect_line_rate_gbps > 0)) return;
    if (nodes < 2) {
        snprintf(out->rule, sizeof(out->rule),
                 "none: expect.lineRateGbps applies between nodes, this run has 1 node");
        return;
    }
    const struct pf_curve_point *c = config->nefficiency ? config->efficiency : default_curve;
    size_t n = config->nefficiency ? config->nefficiency : PF_ARRAY_LEN(default_curve);
    double pct;
    const char *how;
    if (nodes <= c[0].nodes) {
        pct = c[0].percent;
        how = n > 1 && nodes < c[0].nodes ? "curve, clamped" : "curve";
    } else if (nodes >= c[n - 1].nodes) {
        pct = c[n - 1].percent;
        how = nodes > c[n - 1].nodes ? "curve, clamped" : "curve";
    } else {
        size_t i = 0;
        while (i + 1 < n && c[i + 1].nodes < nodes)
            i++;
        double x = log((double)nodes), a = log(c[i].nodes), b = log(c[i + 1].nodes);
        double t = b > a ? (x - a) / (b - a) : 0;
        pct = c[i].percent + t * (c[i + 1].percent - c[i].percent);
        how = "curve, interpolated";
    }
    pct = round(pct * 10) / 10;
    out->gbps = config->expect_line_rate_gbps / 8.0 * pct / 100.0;
    snprintf(out->rule, sizeof(out->rule),
             "lineRate %g Gb/s \xc3\x97 %g%% at %d nodes (%s) = %.4g GB/s",
             config->expect_line_rate_gbps, pct, nodes, how, out->gbps);
}

/* ---- the stage */

struct gpu {
    pf_CUdevice dev;
    pf_CUcontext cu;
    bool retained;
    pf_CUstream stream;
    pf_CUevent start, stop;
    pf_CUdeviceptr send, recv;
    pf_ncclComm_t comm;
    char name[128];
    char bus[32];
    char uuid[48];
};

struct opres {
    char op[16];
    size_t bytes;    /* S, as nccl-tests counts it */
    double seconds;  /* per iteration, mean over every rank */
    long long wrong; /* wrong elements, summed over every rank */
    bool ran;
    char why[160]; /* why it did not run */
};

struct stage {
    struct pf_ctx *ctx;
    struct pf_check *c;
    const struct pf_dl_nccl *nccl;
    const struct pf_dl_cuda *cu;
    const struct pf_nccl_peers *peers;
    int rank, world;
    struct gpu g[MAX_GPUS];
    int ngpus;
    int nranks; /* all GPUs of all pods */
    int base;   /* this pod's first global rank */
    size_t buf_elems;
    float *host;
    double deadline;
    char logdir[128];
    char logpath[PF_HOST_PATH_MAX]; /* where NCCL writes its log ("" unknown) */
    char debug_note[256];
    int ncomms; /* communicators created */
    struct opres ops[MAX_OPS];
    int nops;
};

/* What every pod tells the others before the communicators are made. */
struct hello {
    int32_t ngpus;
    int32_t state; /* 0 ready, 1 skip, 2 fail */
    char why[120];
    char id[PF_NCCL_UNIQUE_ID_BYTES];
};

/* What every pod tells the others after a step. */
struct result {
    double tsum; /* sum over this pod's GPUs of seconds per iteration */
    int32_t ngpus;
    int32_t wrong;
    int32_t state; /* 0 ok, 1 timeout, 2 failed */
    char why[116];
};

static int exchange(struct stage *st, const void *mine, void *all, size_t len)
{
    if (st->world == 1) {
        memcpy(all, mine, len);
        return 0;
    }
    return st->peers->allgather(st->peers->rdv, mine, all, len);
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

static void cuerr(char *out, size_t n, const struct stage *st, const char *what, int gpu,
                  pf_CUresult r)
{
    char e[160];
    pf_dl_cuda_strerror(e, sizeof(e), st->cu, r);
    if (gpu >= 0)
        snprintf(out, n, "%s on GPU %d: %s", what, gpu, e);
    else
        snprintf(out, n, "%s: %s", what, e);
}

static void ncclerr(char *out, size_t n, const struct stage *st, const char *what, int gpu,
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

static pf_CUresult set_current(struct stage *st, int i)
{
    return st->cu->CtxSetCurrent(st->g[i].cu);
}

/* NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,NET and NCCL_DEBUG_FILE in a private folder, in
 * this process only, before NCCL's first log line; the user's own values are kept. */
static void debug_setup(struct stage *st)
{
    const char *dbg = getenv("NCCL_DEBUG");
    const char *sub = getenv("NCCL_DEBUG_SUBSYS");
    const char *file = getenv("NCCL_DEBUG_FILE");
    size_t used = 0;
    st->debug_note[0] = '\0';
    if (dbg && *dbg) {
        if (strcasecmp(dbg, "INFO") != 0 && strcasecmp(dbg, "TRACE") != 0)
            used += (size_t)snprintf(st->debug_note + used, sizeof(st->debug_note) - used,
                                     "NCCL_DEBUG=%s is set (kept): NCCL logs no transport "
                                     "below INFO; ",
                                     dbg);
    } else {
        setenv("NCCL_DEBUG", "INFO", 1);
    }
    if (sub && *sub) {
        if (used < sizeof(st->debug_note))
            used += (size_t)snprintf(st->debug_note + used, sizeof(st->debug_note) - used,
                                     "NCCL_DEBUG_SUBSYS=%s is set (kept); ", sub);
    } else {
        setenv("NCCL_DEBUG_SUBSYS", "INIT,NET", 1);
    }
    if (file && *file) {
        /* NCCL expands %h (hostname cut at the first '.', '%' and '/' made '-') and %p */
        char host[256] = "";
        if (gethostname(host, sizeof(host)) != 0) host[0] = '\0';
        host[sizeof(host) - 1] = '\0';
        host[strcspn(host, ".")] = '\0';
        for (char *h = host; *h; h++)
            if (*h == '%' || *h == '/') *h = '-';
        size_t o = 0;
        for (const char *f = file; *f && o + 32 < sizeof(st->logpath); f++) {
            if (f[0] == '%' && f[1] == 'h') {
                o += (size_t)snprintf(st->logpath + o, sizeof(st->logpath) - o, "%.200s", host);
                f++;
            } else if (f[0] == '%' && f[1] == 'p') {
                o +=
                    (size_t)snprintf(st->logpath + o, sizeof(st->logpath) - o, "%d", (int)getpid());
                f++;
            } else if (f[0] == '%' && f[1] == '%') {
                st->logpath[o++] = '%';
                f++;
            } else {
                st->logpath[o++] = *f;
            }
        }
        st->logpath[o] = '\0';
        if (used < sizeof(st->debug_note))
            snprintf(st->debug_note + used, sizeof(st->debug_note) - used,
                     "NCCL_DEBUG_FILE=%s is set (kept)", file);
        return;
    }
    snprintf(st->logdir, sizeof(st->logdir), "/tmp/preflight-nccl.XXXXXX");
    if (!mkdtemp(st->logdir)) {
        st->logdir[0] = '\0';
        return; /* NCCL logs to stdout then; the transport stays unknown */
    }
    char f[256];
    snprintf(f, sizeof(f), "%s/nccl.%%h.%%p.log", st->logdir);
    setenv("NCCL_DEBUG_FILE", f, 1);
}

/* Reads NCCL's log of this process (the one file in the private folder, or the user's). */
static void read_log(struct stage *st, struct pf_nccllog *log, char *found, size_t fn)
{
    found[0] = '\0';
    char path[PF_HOST_PATH_MAX] = "";
    if (st->logpath[0]) {
        snprintf(path, sizeof(path), "%s", st->logpath);
    } else if (st->logdir[0]) {
        DIR *d = opendir(st->logdir);
        if (!d) return;
        struct dirent *e;
        while ((e = readdir(d))) {
            if (strncmp(e->d_name, "nccl.", 5) == 0) {
                snprintf(path, sizeof(path), "%s/%s", st->logdir, e->d_name);
                break;
            }
        }
        closedir(d);
    }
    if (!path[0]) return;
    FILE *f = fopen(path, "r");
    if (!f) return;
    char *line = NULL;
    size_t cap = 0, total = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, f)) > 0 && total < LOG_MAX) {
        pf_nccllog_line(log, line, (size_t)n);
        total += (size_t)n;
    }
    free(line);
    fclose(f);
    snprintf(found, fn, "%s", path);
}

/* Copies NCCL's log next to the verdict as nccl-rank<N>.log; out gets where it is now. */
static void keep_log(struct stage *st, const char *src, char *out, size_t n)
{
    snprintf(out, n, "%s", src);
    const char *vp = st->ctx->verdict_path;
    if (!vp || !*vp || strcmp(vp, "-") == 0) return;
    char dir[PF_HOST_PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", vp);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(dir, sizeof(dir), ".");
    char dst[PF_HOST_PATH_MAX];
    if (pf_snprintf(dst, sizeof(dst), "%s/nccl-rank%d.log", dir[0] ? dir : "/", st->rank) < 0)
        return;
    /* the verdict's folder may be shared: a fresh O_EXCL|O_NOFOLLOW temporary file renamed
     * over the target, never a write through a name someone else may have planted */
    struct pf_file_target target;
    if (pf_file_split(&target, dst) < 0) return;
    FILE *in = fopen(src, "r");
    if (!in) return;
    struct pf_file_tmp t;
    if (pf_file_tmp_open(&t, &target, 0644, pf_file_random(), true) < 0) {
        fclose(in);
        return;
    }
    char buf[65536];
    size_t k, total = 0;
    int e = 0;
    while (e == 0 && total < LOG_MAX && (k = fread(buf, 1, sizeof(buf), in)) > 0) {
        e = pf_file_tmp_write(&t, buf, k);
        total += k;
    }
    fclose(in);
    if (e < 0) {
        pf_file_tmp_abort(&t);
        return;
    }
    if (pf_file_tmp_commit(&t) == 0) snprintf(out, n, "%s", dst);
}

static void remove_logdir(struct stage *st)
{
    if (!st->logdir[0]) return;
    DIR *d = opendir(st->logdir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            char p[PF_HOST_PATH_MAX];
            if (pf_snprintf(p, sizeof(p), "%s/%s", st->logdir, e->d_name) == 0) unlink(p);
        }
        closedir(d);
    }
    rmdir(st->logdir);
}

/* ---- data: exact small integers in float32, so every sum is exact */

static inline float pat(long long r, size_t k)
{
    return (float)((k % 61) + (size_t)(r % 7) + 1);
}

struct plan {
    size_t count;      /* the count argument */
    size_t send_elems; /* per rank */
    size_t recv_elems;
    size_t bytes; /* S */
};

static void make_plan(struct plan *p, const char *op, size_t bytes, int n)
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

/* ---- waiting: every GPU's stop event and every communicator, against the deadline */

enum { WAIT_OK = 0, WAIT_TIMEOUT = 1, WAIT_FAIL = 2 };

static int wait_comms(struct stage *st, char *why, size_t wn, const char *what)
{
    int round = 0;
    for (;;) {
        bool busy = false;
        for (int i = 0; i < st->ngpus; i++) {
            if (!st->g[i].comm) continue;
            pf_ncclResult_t e = PF_NCCL_SUCCESS;
            set_current(st, i);
            pf_ncclResult_t r = st->nccl->CommGetAsyncError(st->g[i].comm, &e);
            if (r != PF_NCCL_SUCCESS) {
                ncclerr(why, wn, st, "ncclCommGetAsyncError", i, r);
                return WAIT_FAIL;
            }
            if (e == PF_NCCL_IN_PROGRESS) {
                busy = true;
            } else if (e != PF_NCCL_SUCCESS) {
                ncclerr(why, wn, st, what, i, e);
                return WAIT_FAIL;
            }
        }
        if (!busy) return WAIT_OK;
        if (remaining(st) <= 0) {
            snprintf(why, wn, "%s did not complete within the deadline", what);
            return WAIT_TIMEOUT;
        }
        nap(&round);
    }
}

static int wait_events(struct stage *st, char *why, size_t wn, const char *what)
{
    int round = 0;
    for (;;) {
        bool busy = false;
        for (int i = 0; i < st->ngpus; i++) {
            set_current(st, i);
            pf_CUresult r = st->cu->EventQuery(st->g[i].stop);
            if (r == PF_CUDA_ERROR_NOT_READY) {
                busy = true;
            } else if (r != PF_CUDA_SUCCESS) {
                cuerr(why, wn, st, what, i, r);
                return WAIT_FAIL;
            }
        }
        int w = wait_comms(st, why, wn, what); /* async errors while the kernels run */
        if (w != WAIT_OK && w != WAIT_TIMEOUT) return w;
        if (!busy) return WAIT_OK;
        if (remaining(st) <= 0) {
            snprintf(why, wn, "%s did not complete within the deadline", what);
            return WAIT_TIMEOUT;
        }
        nap(&round);
    }
}

static void abort_comms(struct stage *st)
{
    for (int i = 0; i < st->ngpus; i++) {
        if (!st->g[i].comm) continue;
        set_current(st, i);
        st->nccl->CommAbort(st->g[i].comm);
        st->g[i].comm = NULL;
    }
}

static void destroy_comms(struct stage *st)
{
    for (int i = 0; i < st->ngpus; i++) {
        if (!st->g[i].comm) continue;
        set_current(st, i);
        st->nccl->CommDestroy(st->g[i].comm);
        st->g[i].comm = NULL;
    }
}

static void free_gpus(struct stage *st)
{
    for (int i = 0; i < st->ngpus; i++) {
        struct gpu *g = &st->g[i];
        if (!g->retained) continue;
        set_current(st, i);
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
        set_current(st, i);
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

static const char *op_missing(const struct pf_dl_nccl *n, const char *op)
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
static int run_op(struct stage *st, const char *op, struct result *r)
{
    const struct pf_config *cfg = st->ctx->config;
    struct plan p;
    make_plan(&p, op, (size_t)cfg->message_bytes, st->nranks);
    char why[300] = "";
    memset(r, 0, sizeof(*r));
    r->ngpus = st->ngpus;
    /* send buffers */
    for (int i = 0; i < st->ngpus; i++) {
        int me = st->base + i;
        for (size_t k = 0; k < p.send_elems; k++)
            st->host[k] = pat(me, k);
        set_current(st, i);
        pf_CUresult cr = st->cu->MemcpyHtoD(st->g[i].send, st->host, p.send_elems * 4);
        if (cr == PF_CUDA_SUCCESS) {
            for (size_t k = 0; k < p.recv_elems; k++)
                st->host[k] = -1.0f;
            cr = st->cu->MemcpyHtoD(st->g[i].recv, st->host, p.recv_elems * 4);
        }
        if (cr != PF_CUDA_SUCCESS) {
            cuerr(why, sizeof(why), st, "cuMemcpyHtoD", i, cr);
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
                set_current(st, i);
                st->cu->EventRecord(st->g[i].start, st->g[i].stream);
            }
        for (int it = 0; it < count; it++) {
            int bad = -1;
            pf_ncclResult_t nr = launch(st, op, &p, &bad);
            if (nr != PF_NCCL_SUCCESS) {
                char what[64];
                snprintf(what, sizeof(what), "nccl %s", op);
                ncclerr(why, sizeof(why), st, what, bad < 0 ? 0 : bad, nr);
                goto fail;
            }
            int w = wait_comms(st, why, sizeof(why), op);
            if (w != WAIT_OK) {
                r->state = w;
                goto out;
            }
        }
        for (int i = 0; i < st->ngpus; i++) {
            set_current(st, i);
            st->cu->EventRecord(st->g[i].stop, st->g[i].stream);
        }
        char what[64];
        snprintf(what, sizeof(what), "%s %s", op, phase == 0 ? "warm-up" : "iterations");
        int w = wait_events(st, why, sizeof(why), what);
        if (w != WAIT_OK) {
            r->state = w;
            goto out;
        }
    }
    for (int i = 0; i < st->ngpus; i++) {
        float ms = 0;
        set_current(st, i);
        pf_CUresult cr = st->cu->EventElapsedTime(&ms, st->g[i].start, st->g[i].stop);
        if (cr != PF_CUDA_SUCCESS) {
            cuerr(why, sizeof(why), st, "cuEventElapsedTime", i, cr);
            goto fail;
        }
        r->tsum += ms / 1000.0 / iters;
    }
    /* check every element on every GPU */
    long long s7 = sum_mod7(st->nranks);
    for (int i = 0; i < st->ngpus; i++) {
        int me = st->base + i;
        if (strcmp(op, "reduce") == 0 && me != 0) continue;
        set_current(st, i);
        pf_CUresult cr = st->cu->MemcpyDtoH(st->host, st->g[i].recv, p.recv_elems * 4);
        if (cr != PF_CUDA_SUCCESS) {
            cuerr(why, sizeof(why), st, "cuMemcpyDtoH", i, cr);
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
static int prepare(struct stage *st, char *why, size_t wn)
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
        cuerr(why, wn, st, "cuInit", -1, cr);
        return 2;
    }
    int n = 0;
    cr = st->cu->DeviceGetCount(&n);
    if (cr != PF_CUDA_SUCCESS) {
        cuerr(why, wn, st, "cuDeviceGetCount", -1, cr);
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
        make_plan(&p, st->ops[k].op, (size_t)st->ctx->config->message_bytes, 1);
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
            cuerr(why, wn, st, "cuDeviceGet", i, cr);
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
            cuerr(why, wn, st, "cuDevicePrimaryCtxRetain", i, cr);
            return 2;
        }
        g->retained = true;
        if ((cr = set_current(st, i)) != PF_CUDA_SUCCESS) {
            cuerr(why, wn, st, "cuCtxSetCurrent", i, cr);
            return 2;
        }
        if ((cr = st->cu->StreamCreate(&g->stream, PF_CU_STREAM_NON_BLOCKING)) != PF_CUDA_SUCCESS ||
            (cr = st->cu->EventCreate(&g->start, PF_CU_EVENT_DEFAULT)) != PF_CUDA_SUCCESS ||
            (cr = st->cu->EventCreate(&g->stop, PF_CU_EVENT_DEFAULT)) != PF_CUDA_SUCCESS) {
            cuerr(why, wn, st, "cuStreamCreate/cuEventCreate", i, cr);
            return 2;
        }
        if ((cr = st->cu->MemAlloc(&g->send, need * 4)) != PF_CUDA_SUCCESS ||
            (cr = st->cu->MemAlloc(&g->recv, need * 4)) != PF_CUDA_SUCCESS) {
            char what[64];
            snprintf(what, sizeof(what), "cuMemAlloc of 2 x %zu bytes", need * 4);
            cuerr(why, wn, st, what, i, cr);
            return 2;
        }
    }
    return 0;
}

/* Creates the communicators: non-blocking when this NCCL has ncclCommInitRankConfig. */
static int init_comms(struct stage *st, const struct pf_ncclUniqueId *id, char *why, size_t wn)
{
    const struct pf_dl_nccl *n = st->nccl;
    struct pf_ncclConfig cfg = {sizeof(cfg), PF_NCCL_CONFIG_MAGIC, PF_NCCL_CONFIG_VERSION, 0};
    pf_ncclResult_t r = n->GroupStart();
    int bad = 0;
    for (int i = 0; i < st->ngpus && (r == PF_NCCL_SUCCESS || r == PF_NCCL_IN_PROGRESS); i++) {
        set_current(st, i);
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
        ncclerr(why, wn, st, n->CommInitRankConfig ? "ncclCommInitRankConfig" : "ncclCommInitRank",
                bad, r);
        return WAIT_FAIL;
    }
    return wait_comms(st, why, wn, "ncclCommInitRankConfig");
}

static void record_results(struct stage *st, const struct pf_nccllog_proc *me)
{
    struct pf_ctx *ctx = st->ctx;
    struct pf_check *c = st->c;
    int gdr = me ? pf_nccllog_gdr(me) : -1;
    const char *transport = me && me->network[0] ? me->network : "unknown";
    struct pf_nccl_expect ex;
    pf_nccl_expected_busbw(&ex, ctx->config, st->world);
    char summary[512] = "";
    size_t used = 0;
    for (int k = 0; k < st->nops; k++) {
        struct opres *o = &st->ops[k];
        if (!o->ran) continue;
        struct pf_node *m = pf_node_add_map(ctx->verdict->collectives);
        double algbw = o->seconds > 0 ? (double)o->bytes / 1e9 / o->seconds : 0;
        double busbw = algbw * pf_nccl_busbw_factor(o->op, st->nranks);
        pf_node_set_str(m, "backend", "nccl");
        pf_node_set_str(m, "op", o->op);
        pf_node_set_int(m, "bytes", (long long)o->bytes);
        pf_node_set_int(m, "ranks", st->nranks);
        pf_node_set_str(m, "transport", transport);
        if (gdr >= 0)
            pf_node_set_bool(m, "gpuDirectRdma", gdr == 1);
        else
            pf_node_set_null(m, "gpuDirectRdma");
        pf_node_set_dbl(m, "timeUs", round(o->seconds * 1e7) / 10);
        pf_node_set_dbl(m, "algbwGBps", round(algbw * 100) / 100);
        pf_node_set_dbl(m, "busbwGBps", round(busbw * 100) / 100);
        bool floor = strcmp(o->op, "allreduce") == 0 && ex.gbps >= 0;
        if (floor) {
            pf_node_set_dbl(m, "expectedMinBusbwGBps", round(ex.gbps * 100) / 100);
            pf_node_set_str(m, "rule", ex.rule);
        } else {
            pf_node_set_null(m, "expectedMinBusbwGBps");
            if (ex.rule[0] && strcmp(o->op, "allreduce") == 0) pf_node_set_str(m, "rule", ex.rule);
        }
        pf_node_set_bool(m, "correct", o->wrong == 0);
        if (o->wrong)
            pf_check_add_finding(c, "wrong-result", PF_FAIL, NULL,
                                 "%s of %zu bytes over %d ranks: %lld wrong elements (%s)", o->op,
                                 o->bytes, st->nranks, o->wrong, o->why);
        if (floor && busbw < ex.gbps)
            pf_check_add_finding(c, "below-threshold", PF_FAIL, NULL,
                                 "%s busbw %.1f GB/s over %d ranks is below %.1f GB/s (%s)", o->op,
                                 busbw, st->nranks, ex.gbps, ex.rule);
        if (used < sizeof(summary))
            used += (size_t)snprintf(summary + used, sizeof(summary) - used, "%s%s %.1f GB/s busbw",
                                     used ? ", " : "", o->op, busbw);
    }
    /* transport verification */
    const char *want = ctx->config->expect_transport;
    bool want_rdma = strcasecmp(want, "IB") == 0 || strcasecmp(want, "OFI") == 0;
    bool want_socket = strcasecmp(want, "Socket") == 0; /* asked for: no fallback */
    if (me && strcmp(me->network, "Socket") == 0 && !want_socket &&
        (ctx->hcas.n > 0 || want_rdma)) {
        char hcas[256] = "", ifs[256] = "";
        pf_strlist_join(hcas, sizeof(hcas), &ctx->hcas, ", ");
        pf_strlist_join(ifs, sizeof(ifs), &me->ifaces, ", ");
        pf_check_add_finding(c, "socket-fallback", PF_FAIL, NULL, "NCCL chose NET/Socket (%s) %s",
                             ifs[0] ? ifs : "interfaces not logged",
                             want_rdma ? "while expect.transport asks for RDMA"
                                       : "while this pod has RDMA devices");
        pf_node_set_str(c->evidence, "hcas", hcas);
    } else if (me && want[0] && strcasecmp(want, "any") != 0 && me->network[0] &&
               strcasecmp(want, me->network) != 0 &&
               !(strcasecmp(want, "OFI") == 0 && strstr(me->network, "Libfabric"))) {
        pf_check_add_finding(c, "socket-fallback", PF_FAIL, NULL,
                             "NCCL chose network %s, expect.transport is %s", me->network, want);
    }
    if (me && (strcmp(me->network, "IB") == 0 || strstr(me->network, "Libfabric")) && gdr == 0 &&
        st->ngpus > 0)
        pf_check_add_finding(c, "no-gdr", PF_WARN, NULL,
                             "NCCL used %s without GPUDirect RDMA (%d of %d network channels "
                             "via GDRDMA)",
                             me->network, me->gdr_channels, me->net_channels);
    if (me) {
        pf_node_set_str(c->evidence, "transport", transport);
        if (me->hcas.n) {
            struct pf_node *s = pf_node_set_seq(c->evidence, "hcas");
            for (size_t i = 0; i < me->hcas.n; i++)
                pf_node_add_str(s, me->hcas.v[i]);
        }
        if (me->ifaces.n) {
            struct pf_node *s = pf_node_set_seq(c->evidence, "interfaces");
            for (size_t i = 0; i < me->ifaces.n; i++)
                pf_node_add_str(s, me->ifaces.v[i]);
        }
        if (me->nvls) pf_node_set_bool(c->evidence, "nvls", true);
        if (me->collnet) pf_node_set_bool(c->evidence, "collnet", true);
        if (me->nwarns) {
            struct pf_node *s = pf_node_set_seq(c->evidence, "ncclWarnings");
            for (size_t i = 0; i < me->warns.n; i++)
                pf_node_add_str(s, me->warns.v[i]);
        }
        if (me->version[0] && me->cuda[0])
            pf_node_set_strf(ctx->verdict->environment, "ncclBuild", "%s+cuda%s", me->version,
                             me->cuda);
        if (me->network[0]) pf_node_set_str(ctx->verdict->environment, "ncclNetwork", me->network);
    }
    pf_check_set_message(c, "%d ranks (%d pod%s x %d GPU%s), transport %s%s: %s", st->nranks,
                         st->world, st->world == 1 ? "" : "s", st->ngpus, st->ngpus == 1 ? "" : "s",
                         transport, gdr == 1 ? " with GPUDirect RDMA" : "",
                         summary[0] ? summary : "no collective ran");
}

void pf_nccl_stage(struct pf_ctx *ctx, const struct pf_nccl_peers *peers)
{
    struct pf_check *c = pf_verdict_add_check(ctx->verdict, "collective.nccl");
    double t0 = pf_now();
    struct stage *st = pf_xcalloc(1, sizeof(*st));
    st->ctx = ctx;
    st->c = c;
    st->peers = peers;
    st->rank = peers ? peers->rank : 0;
    st->world = peers ? peers->world_size : 1;
    if (st->world < 1) st->world = 1;
    double budget = ctx->config->nccl_timeout_s > 0 ? ctx->config->nccl_timeout_s : 120;
    double guard = pf_verdict_guard_remaining() - 2.0; /* leave time to write the verdict */
    if (guard < budget) budget = guard > 1 ? guard : 1;
    st->deadline = pf_now() + budget;
    pf_node_set_dbl(c->evidence, "deadlineSeconds", round(budget * 10) / 10);
    if (st->world > 1 && (!peers->allgather)) {
        pf_check_add_finding(c, "init-failed", PF_FAIL, NULL,
                             "world size %d but no rendezvous session to share the NCCL id",
                             st->world);
        goto done;
    }

    char why[300] = "";
    int state = prepare(st, why, sizeof(why));
    if (st->nccl) {
        int v = 0;
        if (st->nccl->GetVersion(&v) == PF_NCCL_SUCCESS) {
            char vs[32];
            pf_nccl_version_string(vs, sizeof(vs), v);
            pf_node_set_str(ctx->verdict->environment, "ncclVersion", vs);
        }
        pf_node_set_str(c->evidence, "ncclLibrary", st->nccl->path);
    }
    struct hello mine = {0};
    mine.ngpus = st->ngpus;
    if (state == 0) {
        debug_setup(st);
        if (st->debug_note[0]) pf_node_set_str(c->evidence, "ncclDebug", st->debug_note);
        if (st->rank == 0) {
            struct pf_ncclUniqueId id;
            pf_ncclResult_t r = st->nccl->GetUniqueId(&id);
            if (r != PF_NCCL_SUCCESS) {
                ncclerr(why, sizeof(why), st, "ncclGetUniqueId", 0, r);
                state = 2;
            } else {
                memcpy(mine.id, id.internal, sizeof(mine.id));
            }
        }
    }
    mine.state = state;
    snprintf(mine.why, sizeof(mine.why), "%s", why);
    struct hello *all = pf_xcalloc((size_t)st->world, sizeof(*all));
    pf_ctx_progress(ctx, "NCCL: %d GPU%s here, exchanging the NCCL id", st->ngpus,
                    st->ngpus == 1 ? "" : "s");
    if (exchange(st, &mine, all, sizeof(mine)) < 0) {
        pf_check_add_finding(c, "init-failed", PF_FAIL, NULL,
                             "could not share the NCCL id among pods: %s", pf_err_msg());
        free(all);
        goto done;
    }
    /* everyone decides alike from the same table */
    int bad = -1;
    for (int r = 0; r < st->world; r++)
        if (all[r].state != 0 && (bad < 0 || all[r].state > all[bad].state)) bad = r;
    if (bad >= 0) {
        all[bad].why[sizeof(all[bad].why) - 1] = '\0';
        if (state == 1)
            pf_check_skip(c, "%s", why);
        else if (state == 2)
            pf_check_add_finding(c, "init-failed", PF_FAIL, NULL, "%s", why);
        else if (all[bad].state == 2)
            pf_check_add_finding(c, "init-failed", PF_FAIL, NULL, "rank %d could not start: %s",
                                 bad, all[bad].why);
        else
            pf_check_skip(c, "rank %d: %s", bad, all[bad].why);
        free(all);
        goto done;
    }
    st->nranks = 0;
    for (int r = 0; r < st->world; r++) {
        if (r == st->rank) st->base = st->nranks;
        st->nranks += all[r].ngpus;
    }
    struct pf_ncclUniqueId id;
    memcpy(id.internal, all[0].id, sizeof(id.internal));
    free(all);
    pf_node_set_int(c->evidence, "gpusHere", st->ngpus);
    pf_node_set_int(c->evidence, "firstRank", st->base);

    pf_ctx_progress(ctx, "NCCL: creating %d communicators (%d ranks in all)", st->ngpus,
                    st->nranks);
    why[0] = '\0';
    int w = init_comms(st, &id, why, sizeof(why));
    struct result res = {0}, *rall = pf_xcalloc((size_t)st->world, sizeof(*rall));
    res.state = w;
    snprintf(res.why, sizeof(res.why), "%s", why);
    bool go = exchange(st, &res, rall, sizeof(res)) == 0;
    for (int r = 0; go && r < st->world; r++)
        if (rall[r].state != WAIT_OK) {
            go = false;
            if (w == WAIT_OK) /* another pod failed: say which */
                snprintf(why, sizeof(why), "rank %d: %.*s", r, (int)sizeof(rall[r].why) - 1,
                         rall[r].why);
            if (w == WAIT_OK) w = rall[r].state;
        }
    if (!go) {
        abort_comms(st);
        pf_check_add_finding(c, w == WAIT_TIMEOUT ? "timeout" : "init-failed", PF_FAIL, NULL,
                             "NCCL communicators (%d ranks): %s", st->nranks,
                             why[0] ? why : "the pods could not agree to go on");
        free(rall);
        goto logs;
    }
    for (int k = 0; k < st->nops; k++) {
        struct opres *o = &st->ops[k];
        const char *miss = op_missing(st->nccl, o->op);
        if (miss) {
            snprintf(o->why, sizeof(o->why), "%s is missing in this NCCL", miss);
            pf_node_set_strf(c->evidence, o->op, "not run: %s", o->why);
            continue;
        }
        pf_ctx_progress(ctx, "NCCL: %s", o->op);
        (void)run_op(st, o->op, &res);
        if (exchange(st, &res, rall, sizeof(res)) < 0) {
            abort_comms(st);
            pf_check_add_finding(c, "timeout", PF_FAIL, NULL,
                                 "%s: the pods could not share their results: %s", o->op,
                                 pf_err_msg());
            break;
        }
        int worst = WAIT_OK, who = -1;
        double tsum = 0;
        long long n = 0, wrong = 0;
        for (int r = 0; r < st->world; r++) {
            if (rall[r].state > worst) worst = rall[r].state, who = r;
            tsum += rall[r].tsum;
            n += rall[r].ngpus;
            wrong += rall[r].wrong;
            if (rall[r].wrong && !o->why[0])
                snprintf(o->why, sizeof(o->why), "%.*s", (int)sizeof(rall[r].why) - 1, rall[r].why);
        }
        if (worst != WAIT_OK) {
            abort_comms(st);
            pf_check_add_finding(c, worst == WAIT_TIMEOUT ? "timeout" : "init-failed", PF_FAIL,
                                 NULL, "%s over %d ranks, rank %d: %.*s", o->op, st->nranks, who,
                                 (int)sizeof(rall[who].why) - 1, rall[who].why);
            break;
        }
        struct plan p;
        make_plan(&p, o->op, (size_t)ctx->config->message_bytes, st->nranks);
        o->ran = true;
        o->bytes = p.bytes;
        o->seconds = n ? tsum / (double)n : 0;
        o->wrong = wrong;
    }
    free(rall);
    if (st->ncomms) {
        /* orderly teardown only when every comm is idle */
        char tmp[300];
        if (wait_comms(st, tmp, sizeof(tmp), "teardown") == WAIT_OK)
            destroy_comms(st);
        else
            abort_comms(st);
    }
logs:;
    struct pf_nccllog log = {0};
    char found[PF_HOST_PATH_MAX], kept[PF_HOST_PATH_MAX] = "";
    read_log(st, &log, found, sizeof(found));
    const struct pf_nccllog_proc *me = NULL;
    for (size_t i = 0; i < log.n; i++)
        if (log.v[i].pid == (long)getpid()) me = &log.v[i];
    if (!me && log.n) me = &log.v[0];
    if (found[0]) {
        keep_log(st, found, kept, sizeof(kept));
        pf_node_set_str(c->evidence, "ncclLog", kept);
    }
    record_results(st, me);
    pf_nccllog_free(&log);
    if (kept[0] && strncmp(kept, st->logdir, strlen(st->logdir)) != 0)
        remove_logdir(st);
    else if (!kept[0])
        remove_logdir(st);
done:
    if (st->ncomms) abort_comms(st);
    if (st->cu) free_gpus(st);
    c->seconds = pf_now() - t0;
    free(st);
}
