/* TEST DOUBLE of libnccl.so.2 — for error-handling tests only, never proof that the GPU path
 * works (see double.h). Every rank of a collective must live in this process (one pod); the
 * "collective" is computed on the host at ncclGroupEnd. It writes an NCCL_DEBUG=INFO log in
 * NCCL's line format (host:pid:tid [dev] NCCL INFO ...) to NCCL_DEBUG_FILE so that preflight's
 * transport detection reads it as it reads NCCL's. Environment:
 *   DOUBLE_NCCL_FAIL   ""      success (non-blocking: ncclInProgress, then ncclSuccess)
 *                      init    ncclCommInitRankConfig returns ncclSystemError
 *                      async   init is in progress, then ncclCommGetAsyncError reports
 *                              ncclRemoteError
 *                      hang    init stays in progress until ncclCommAbort
 *                      wrong   collectives succeed with one wrong element on the last rank
 *   DOUBLE_NCCL_NET    IB (default, with GPUDirect RDMA) | IB-nogdr | IB-nochannels (no
 *                      channel line, as NCCL_DEBUG_SUBSYS without INIT leaves) | Socket: what
 *                      the log says
 *   DOUBLE_OP_US       virtual microseconds one collective takes (default 1000)
 *   DOUBLE_NCCL_VERSION  what ncclGetVersion says (default 22809) */
#define _GNU_SOURCE
#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "double.h"

typedef unsigned int ncclResult_t;
enum {
    SUCCESS = 0,
    SYSTEM_ERROR = 2,
    INTERNAL_ERROR = 3,
    INVALID_ARGUMENT = 4,
    INVALID_USAGE = 5,
    REMOTE_ERROR = 6,
    IN_PROGRESS = 7,
};
enum { FLOAT32 = 7, SUM = 0 };
#define ID_MAGIC "preflight-test-double-id"
#define MAXRANKS 64
#define MAXQ 256

struct uid { /* ncclUniqueId, passed by value */
    char internal[128];
};

struct config { /* the 2.14 prefix of ncclConfig_t */
    size_t size;
    unsigned int magic;
    unsigned int version;
    int blocking;
};

struct ncclComm {
    int rank, nranks, dev;
    int blocking;
    ncclResult_t state; /* what ncclCommGetAsyncError reports */
    int polls;
};

enum kind { ALLREDUCE, ALLGATHER, REDUCESCATTER, ALLTOALL, BROADCAST, REDUCE };
struct work {
    enum kind kind;
    struct ncclComm *comm;
    const float *send;
    float *recv;
    size_t count;
    int root;
    struct CUstream_st *stream;
};

static struct ncclComm *ranks[MAXRANKS]; /* the communicators of this process, by rank */
static int ncreated;
static int depth;
static struct work q[MAXQ];
static int nq;
static int q_nonblocking;
static char last_error[256];
static FILE *logf_;
static int log_ready;

#define EXPORT __attribute__((visibility("default")))

static const char *env(const char *k, const char *dflt)
{
    const char *s = getenv(k);
    return s && *s ? s : dflt;
}

static int mode(const char *m)
{
    return strcmp(env("DOUBLE_NCCL_FAIL", ""), m) == 0;
}

/* ---- the log, as NCCL's debug.cc writes it */

static void log_open(void)
{
    if (log_ready) return;
    log_ready = 1;
    const char *lvl = env("NCCL_DEBUG", "");
    if (strcasecmp(lvl, "INFO") != 0 && strcasecmp(lvl, "TRACE") != 0) return;
    const char *file = env("NCCL_DEBUG_FILE", "");
    if (!*file) {
        logf_ = stdout;
        return;
    }
    char host[256] = "", path[1024];
    gethostname(host, sizeof(host) - 1);
    host[strcspn(host, ".")] = '\0';
    size_t o = 0;
    for (const char *f = file; *f && o + 300 < sizeof(path); f++) {
        if (f[0] == '%' && f[1] == 'h')
            o += (size_t)snprintf(path + o, sizeof(path) - o, "%s", host), f++;
        else if (f[0] == '%' && f[1] == 'p')
            o += (size_t)snprintf(path + o, sizeof(path) - o, "%d", (int)getpid()), f++;
        else
            path[o++] = *f;
    }
    path[o] = '\0';
    logf_ = fopen(path, "w");
    if (logf_) setvbuf(logf_, NULL, _IOLBF, 0);
}

__attribute__((format(printf, 2, 3))) static void info(int dev, const char *fmt, ...)
{
    log_open();
    if (!logf_) return;
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    host[strcspn(host, ".")] = '\0';
    fprintf(logf_, "%s:%d:%d [%d] NCCL INFO ", host, (int)getpid(), (int)syscall(SYS_gettid), dev);
    va_list ap;
    va_start(ap, fmt);
    vfprintf(logf_, fmt, ap);
    va_end(ap);
    fputc('\n', logf_);
}

__attribute__((format(printf, 4, 5))) static void warn(int dev, const char *file, int line,
                                                       const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof(last_error), fmt, ap);
    va_end(ap);
    log_open();
    if (!logf_) return;
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    host[strcspn(host, ".")] = '\0';
    fprintf(logf_, "\n%s:%d:%d [%d] %s:%d NCCL WARN %s\n", host, (int)getpid(),
            (int)syscall(SYS_gettid), dev, file, line, last_error);
}

static int gdr(void)
{
    return strcmp(env("DOUBLE_NCCL_NET", "IB"), "IB") == 0;
}

static int socket_net(void)
{
    return strcasecmp(env("DOUBLE_NCCL_NET", "IB"), "Socket") == 0;
}

static void log_start(int dev)
{
    static int done;
    if (done) return;
    done = 1;
    info(dev, "Bootstrap: Using eth0:10.0.0.5<0>");
    info(dev, "NCCL version 2.28.9+cuda13.0");
    info(dev, "NET/Plugin: Could not find: libnccl-net.so. Using internal net plugin.");
    if (socket_net()) {
        info(dev, "NET/IB : No device found.");
        info(dev, "NET/Socket : Using [0]eth0:10.0.0.5<0>");
        info(dev, "Using network Socket");
    } else {
        info(dev, "NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB eth0:10.0.0.5<0>");
        info(dev, "Using network IB");
    }
}

/* ---- the API */

EXPORT ncclResult_t ncclGetVersion(int *v)
{
    const char *s = getenv("DOUBLE_NCCL_VERSION"); /* the real NCCL's code, beside a real rank */
    *v = s && atoi(s) > 0 ? atoi(s) : 22809;
    return SUCCESS;
}

EXPORT const char *ncclGetErrorString(ncclResult_t r)
{
    switch (r) {
    case SUCCESS:
        return "no error";
    case SYSTEM_ERROR:
        return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case INTERNAL_ERROR:
        return "internal error - please report this issue to the NCCL developers";
    case INVALID_ARGUMENT:
        return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case INVALID_USAGE:
        return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case REMOTE_ERROR:
        return "remote process exited or there was a network error";
    case IN_PROGRESS:
        return "NCCL operation in progress";
    default:
        return "unknown result code";
    }
}

EXPORT const char *ncclGetLastError(struct ncclComm *comm)
{
    (void)comm;
    return last_error;
}

EXPORT ncclResult_t ncclGetUniqueId(char *id)
{
    memset(id, 0, 128);
    snprintf(id, 128, "%s:%d", ID_MAGIC, (int)getpid());
    log_start(0);
    return SUCCESS;
}

EXPORT ncclResult_t ncclGroupStart(void)
{
    depth++;
    return SUCCESS;
}

EXPORT ncclResult_t ncclCommInitRankConfig(struct ncclComm **out, int nranks, struct uid id,
                                           int rank, struct config *cfg)
{
    int dev = ncreated % (atoi(env("DOUBLE_GPUS", "1")) > 0 ? atoi(env("DOUBLE_GPUS", "1")) : 1);
    *out = NULL;
    log_start(dev);
    if (cfg && (cfg->magic != 0xcafebeefu || cfg->size < sizeof(struct config))) {
        warn(dev, "init.cc", 1867,
             "ncclConfig_t argument not initialized via NCCL_CONFIG_INITIALIZER");
        return INVALID_ARGUMENT;
    }
    /* a hanging rank takes any id: tests/gpu/device-check.sh pairs it with a real NCCL rank 0
     * whose id it never uses (a rank that never joins the real communicator) */
    if (!mode("hang") && strncmp(id.internal, ID_MAGIC, strlen(ID_MAGIC)) != 0) {
        warn(dev, "init.cc", 1700, "test double: the unique id was not made by ncclGetUniqueId");
        return INVALID_ARGUMENT;
    }
    if (nranks < 1 || rank < 0 || rank >= nranks || rank >= MAXRANKS) {
        warn(dev, "init.cc", 1710, "Invalid rank requested : %d/%d", rank, nranks);
        return INVALID_ARGUMENT;
    }
    if (mode("init")) {
        warn(dev, "misc/socket.cc", 484,
             "socketStartConnect: Connect to 10.0.0.5<43771> failed : Connection refused");
        return SYSTEM_ERROR;
    }
    struct ncclComm *c = calloc(1, sizeof(*c));
    if (!c) return SYSTEM_ERROR;
    c->rank = rank;
    c->nranks = nranks;
    c->dev = dev;
    c->blocking = cfg ? cfg->blocking != 0 : 1;
    c->state = c->blocking ? SUCCESS : IN_PROGRESS;
    ranks[rank] = c;
    ncreated++;
    *out = c;
    info(dev, "comm %p rank %d nRanks %d nNodes %d localRanks %d localRank %d MNNVL 0", (void *)c,
         rank, nranks, nranks, 1, 0);
    const char *via = socket_net() ? "NET/Socket/0" : gdr() ? "NET/IB/0/GDRDMA" : "NET/IB/0";
    if (strcmp(env("DOUBLE_NCCL_NET", "IB"), "IB-nochannels") == 0) via = NULL;
    if (via)
        info(dev, "Channel 00/0 : %d[%d] -> %d[%d] [send] via %s", rank, dev, (rank + 1) % nranks,
             dev, via);
    if (via)
        info(dev, "Channel 00/0 : %d[%d] -> %d[%d] [receive] via %s", (rank + nranks - 1) % nranks,
             dev, rank, dev, via);
    if (!c->blocking) q_nonblocking = 1;
    return c->blocking ? SUCCESS : IN_PROGRESS;
}

EXPORT ncclResult_t ncclCommInitRank(struct ncclComm **out, int nranks, struct uid id, int rank)
{
    struct config blocking = {sizeof(blocking), 0xcafebeefu, 21400, 1};
    return ncclCommInitRankConfig(out, nranks, id, rank, &blocking);
}

EXPORT ncclResult_t ncclCommGetAsyncError(struct ncclComm *c, ncclResult_t *err)
{
    if (!c) return INVALID_ARGUMENT;
    c->polls++;
    if (c->state == IN_PROGRESS) {
        if (mode("hang")) {
            /* stays in progress */
        } else if (mode("async")) {
            if (c->polls >= 3) {
                c->state = REMOTE_ERROR;
                warn(c->dev, "transport/net_ib.cc", 1120,
                     "NET/IB : Got completion from peer 10.0.0.6<52042> with status=12 "
                     "opcode=0 len=0 vendor err 129 (Recv)");
            }
        } else {
            c->state = SUCCESS;
            info(c->dev, "comm %p rank %d nranks %d cudaDev %d busId %x - Init COMPLETE", (void *)c,
                 c->rank, c->nranks, c->dev, 0x10 + c->dev);
        }
    }
    *err = c->state;
    return SUCCESS;
}

static ncclResult_t release(struct ncclComm *c)
{
    if (!c) return INVALID_ARGUMENT;
    if (c->rank < MAXRANKS && ranks[c->rank] == c) ranks[c->rank] = NULL;
    for (int i = 0; i < nq; i++)
        if (q[i].comm == c) q[i].comm = NULL;
    free(c);
    return SUCCESS;
}

EXPORT ncclResult_t ncclCommAbort(struct ncclComm *c)
{
    if (c)
        info(c->dev, "comm %p rank %d nRanks %d - Abort COMPLETE", (void *)c, c->rank, c->nranks);
    return release(c);
}

EXPORT ncclResult_t ncclCommDestroy(struct ncclComm *c)
{
    if (c && c->state != SUCCESS) return INVALID_USAGE;
    return release(c);
}

EXPORT ncclResult_t ncclCommFinalize(struct ncclComm *c)
{
    return c ? SUCCESS : INVALID_ARGUMENT;
}

static ncclResult_t enqueue(enum kind k, const void *send, void *recv, size_t count, unsigned type,
                            unsigned op, int root, struct ncclComm *c, struct CUstream_st *s)
{
    if (!c || c->state != SUCCESS) {
        snprintf(last_error, sizeof(last_error), "test double: communicator not ready");
        return INVALID_USAGE;
    }
    if (type != FLOAT32 || op != SUM) { /* the only ones preflight uses */
        snprintf(last_error, sizeof(last_error), "test double: type %u op %u", type, op);
        return INVALID_ARGUMENT;
    }
    if (depth == 0 || nq >= MAXQ) {
        snprintf(last_error, sizeof(last_error), "test double: collectives only inside a group");
        return INVALID_USAGE;
    }
    q[nq++] = (struct work){k, c, send, recv, count, root, s};
    if (!c->blocking) q_nonblocking = 1;
    return SUCCESS;
}

EXPORT ncclResult_t ncclAllReduce(const void *s, void *r, size_t n, unsigned t, unsigned op,
                                  struct ncclComm *c, struct CUstream_st *st)
{
    return enqueue(ALLREDUCE, s, r, n, t, op, 0, c, st);
}
EXPORT ncclResult_t ncclAllGather(const void *s, void *r, size_t n, unsigned t, struct ncclComm *c,
                                  struct CUstream_st *st)
{
    return enqueue(ALLGATHER, s, r, n, t, SUM, 0, c, st);
}
EXPORT ncclResult_t ncclReduceScatter(const void *s, void *r, size_t n, unsigned t, unsigned op,
                                      struct ncclComm *c, struct CUstream_st *st)
{
    return enqueue(REDUCESCATTER, s, r, n, t, op, 0, c, st);
}
EXPORT ncclResult_t ncclAlltoAll(const void *s, void *r, size_t n, unsigned t, struct ncclComm *c,
                                 struct CUstream_st *st)
{
    return enqueue(ALLTOALL, s, r, n, t, SUM, 0, c, st);
}
EXPORT ncclResult_t ncclBroadcast(const void *s, void *r, size_t n, unsigned t, int root,
                                  struct ncclComm *c, struct CUstream_st *st)
{
    return enqueue(BROADCAST, s, r, n, t, SUM, root, c, st);
}
EXPORT ncclResult_t ncclReduce(const void *s, void *r, size_t n, unsigned t, unsigned op, int root,
                               struct ncclComm *c, struct CUstream_st *st)
{
    return enqueue(REDUCE, s, r, n, t, op, root, c, st);
}

/* Runs the queued collective: one entry per rank, every rank in this process. */
static ncclResult_t run_queue(void)
{
    if (nq == 0) return SUCCESS;
    int n = q[0].comm ? q[0].comm->nranks : 0;
    struct work *by[MAXRANKS] = {0};
    for (int i = 0; i < nq; i++) {
        if (!q[i].comm || q[i].kind != q[0].kind || q[i].count != q[0].count ||
            q[i].comm->nranks != n || by[q[i].comm->rank]) {
            snprintf(last_error, sizeof(last_error), "test double: mismatched group");
            return INVALID_USAGE;
        }
        by[q[i].comm->rank] = &q[i];
    }
    if (nq != n) {
        snprintf(last_error, sizeof(last_error),
                 "test double: %d of %d ranks in this process; the double cannot reach others", nq,
                 n);
        return INVALID_USAGE;
    }
    size_t c = q[0].count;
    for (int r = 0; r < n; r++) {
        const struct work *w = by[r];
        switch (w->kind) {
        case ALLREDUCE:
        case REDUCE:
            if (w->kind == REDUCE && r != w->root) break;
            for (size_t k = 0; k < c; k++) {
                float s = 0;
                for (int x = 0; x < n; x++)
                    s += by[x]->send[k];
                w->recv[k] = s;
            }
            break;
        case ALLGATHER:
            for (int x = 0; x < n; x++)
                memcpy(w->recv + (size_t)x * c, by[x]->send, c * sizeof(float));
            break;
        case REDUCESCATTER:
            for (size_t k = 0; k < c; k++) {
                float s = 0;
                for (int x = 0; x < n; x++)
                    s += by[x]->send[(size_t)r * c + k];
                w->recv[k] = s;
            }
            break;
        case ALLTOALL:
            for (int x = 0; x < n; x++)
                memcpy(w->recv + (size_t)x * c, by[x]->send + (size_t)r * c, c * sizeof(float));
            break;
        case BROADCAST:
            memcpy(w->recv, by[w->root]->send, c * sizeof(float));
            break;
        }
    }
    if (mode("wrong")) by[n - 1]->recv[0] += 1.0f;
    long long step = atoll(env("DOUBLE_OP_US", "1000")) * 1000;
    for (int i = 0; i < nq; i++)
        if (q[i].stream) q[i].stream->clock_ns += step;
    return SUCCESS;
}

EXPORT ncclResult_t ncclGroupEnd(void)
{
    if (depth <= 0) return INVALID_USAGE;
    if (--depth > 0) return SUCCESS;
    ncclResult_t r = run_queue();
    int nb = q_nonblocking;
    nq = 0;
    q_nonblocking = 0;
    if (r != SUCCESS) return r;
    return nb ? IN_PROGRESS : SUCCESS;
}
