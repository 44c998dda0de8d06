/* nccl (private): the stage's state and the declarations its files share: expect.c (the
 * bus-bandwidth expectation, pure), gpus.c (the CUDA devices, communicators and waiting on
 * them against the deadline), ops.c (one collective: its buffers, launch and check),
 * log.c (NCCL's INFO log: where it goes, reading and keeping it) and stage.c (the stage in
 * order, the exchanges between pods and the verdict entries). Not part of nccl.h. */
#ifndef PF_NCCL_INTERNAL_H
#define PF_NCCL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../dl/dl.h"
#include "nccl.h"

#define MAX_GPUS 64
#define MAX_OPS 8
#define LOG_MAX (16u << 20)

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
    double next_watch; /* when to ask peers->lost next */
    double end_s;      /* seconds spent in ncclCommAbort / ncclCommDestroy */
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

/* How a wait, a step or a pod ended. */
enum { WAIT_OK = 0, WAIT_TIMEOUT = 1, WAIT_FAIL = 2, WAIT_LOST = 3 };

/* The buffers of one op at one world size. */
struct plan {
    size_t count;      /* the count argument */
    size_t send_elems; /* per rank */
    size_t recv_elems;
    size_t bytes; /* S */
};

/* ---- gpus.c */
/* "what on GPU gpu: CUDA_ERROR_... (...)" (gpu < 0: no GPU named). */
void nc_cuerr(char *out, size_t n, const struct stage *st, const char *what, int gpu,
              pf_CUresult r);
/* "what (GPU gpu): ncclResult ...; ncclGetLastError's text". */
void nc_ncclerr(char *out, size_t n, const struct stage *st, const char *what, int gpu,
                pf_ncclResult_t r);
/* Makes GPU i's primary context current (before every NCCL call for that GPU). */
pf_CUresult nc_set_current(struct stage *st, int i);
/* Loads the libraries and sets up every GPU. Returns 0 ready, 1 skip, 2 fail (why set). */
int nc_prepare(struct stage *st, char *why, size_t wn);
/* Creates the communicators (non-blocking where NCCL allows) and waits for them. WAIT_*. */
int nc_init_comms(struct stage *st, const struct pf_ncclUniqueId *id, char *why, size_t wn);
/* Polls every communicator (ncclCommGetAsyncError), or every GPU's stop event and then the
 * communicators, until done, an error or the deadline. WAIT_*; why says what went wrong. */
int nc_wait_comms(struct stage *st, char *why, size_t wn, const char *what);
int nc_wait_events(struct stage *st, char *why, size_t wn, const char *what);
void nc_abort_comms(struct stage *st);
void nc_destroy_comms(struct stage *st);
/* Frees every GPU's buffers, events and stream, and releases its primary context. */
void nc_free_gpus(struct stage *st);

/* ---- ops.c */
/* The buffers of op for a message of bytes over n ranks, as nccl-tests sizes them. */
void nc_make_plan(struct plan *p, const char *op, size_t bytes, int n);
/* The missing NCCL function op needs, or NULL when it can run. */
const char *nc_op_missing(const struct pf_dl_nccl *n, const char *op);
/* Fills every GPU's send buffer, runs warm-up and timed iterations, checks the result.
 * Returns WAIT_OK/WAIT_TIMEOUT/WAIT_FAIL; r gets this pod's part. */
int nc_run_op(struct stage *st, const char *op, struct result *r);

/* ---- log.c */
/* NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,NET and NCCL_DEBUG_FILE in a private folder, in
 * this process only, before NCCL's first log line; the user's own values are kept. */
void nc_debug_setup(struct stage *st);
/* Reads NCCL's log of this process (the one file in the private folder, or the user's);
 * found gets its path ("" when there is none). */
void nc_read_log(struct stage *st, struct pf_nccllog *log, char *found, size_t fn);
/* Copies NCCL's log next to the verdict as nccl-rank<N>.log; out gets where it is now. */
void nc_keep_log(struct stage *st, const char *src, char *out, size_t n);
void nc_remove_logdir(struct stage *st);

#endif
