/* nccl: GPU collectives through the training image's own libnccl (loaded with dlopen), and
 * the reading of NCCL's INFO logs. */
#ifndef PF_NCCL_H
#define PF_NCCL_H

#include <stdbool.h>
#include <stddef.h>

#include "../context/context.h"

/* What the rendezvous hands the GPU stage. */
struct pf_nccl_peers {
    int rank;                /* this pod's rank among pods */
    int world_size;          /* pods */
    char coordinator_ip[64]; /* rank 0's IP address, as this pod reaches it */
    int port;                /* a free port on rank 0 for NCCL's bootstrap (NCCL_COMM_ID) */
    void *rdv;               /* opaque rendezvous session for allgather */
    /* Every rank contributes len bytes; out receives world_size * len bytes in rank order.
     * 0 or a negative PF_E* code; bounded by the run's deadline. */
    int (*allgather)(void *rdv, const void *mine, void *out, size_t len);
};

/* Runs the NCCL collectives among all GPUs of all pods (check `collective.nccl`), adding
 * entries to ctx->verdict->collectives. Skips with a reason when there is no GPU or no NCCL.
 * Every rank must call it (it is collective). peers NULL: this pod alone (world size 1).
 * The ncclUniqueId is made by rank 0 (ncclGetUniqueId, so NCCL picks its bootstrap interface
 * by its own rules, as a training job does) and handed to every pod through
 * peers->allgather. */
void pf_nccl_stage(struct pf_ctx *ctx, const struct pf_nccl_peers *peers);

/* ---- expected bus bandwidth (pure) */
struct pf_nccl_expect {
    double gbps;    /* expected minimum busbw in GB/s; < 0: no expectation */
    char rule[256]; /* how it was derived, for the verdict */
};
/* From config expect.busbwGBps, else expect.lineRateGbps (Gb/s per node, /8 for GB/s) times
 * the efficiency curve (config->efficiency, else 2 nodes 85%, 8 nodes 68%, 125 nodes 39%)
 * interpolated linearly in log(nodes) and clamped outside its range. */
void pf_nccl_expected_busbw(struct pf_nccl_expect *out, const struct pf_config *config, int nodes);
/* busbw / algbw factor of a collective as nccl-tests computes it (REFERENCE §8); 0 when the
 * name is unknown. */
double pf_nccl_busbw_factor(const char *op, int nranks);

/* ---- NCCL_DEBUG=INFO logs */
struct pf_nccllog_proc {
    char host[128];   /* NCCL's <host> (hostname cut at the first '.') */
    long pid;         /* 0 for lines without a host:pid:tid prefix */
    char pod[128];    /* from a kubectl --prefix "[pod/NAME/CONTAINER]" when present */
    char version[32]; /* "2.21.5" */
    char cuda[16];    /* "12.4" from "+cuda12.4" */
    char network[32]; /* IB | Socket | Libfabric | AWS Libfabric | OFI | "" unknown */
    char ofi_provider[32];
    char bootstrap[96];       /* "eth0:10.0.0.5" */
    struct pf_strlist devs;   /* CUDA devices seen in "[N]" */
    struct pf_strlist hcas;   /* "mlx5_0:1/IB" from "NET/IB : Using" */
    struct pf_strlist ifaces; /* "eth0:10.0.0.5" from "NET/Socket : Using" and IB's OOB */
    bool ib_no_device;        /* "NET/IB : No device found." */
    int net_channels;         /* "Channel ... via NET/..." lines */
    int gdr_channels;         /* of which ".../GDRDMA" */
    int gdr_enabled;          /* "GPU Direct RDMA Enabled for HCA" lines */
    int gdr_disabled;
    bool nvls;
    bool collnet;
    struct pf_strlist warns; /* "file:line (func) message" of NCCL WARN lines (at most 64) */
    size_t nwarns;           /* all of them */
};

struct pf_nccllog {
    struct pf_nccllog_proc *v;
    size_t n;
    size_t lines;      /* lines read */
    size_t nccl_lines; /* lines that were NCCL's */
};

/* Reads one line (no newline needed) / a whole text of many ranks, mixed, with or without
 * kubectl prefixes or timestamps. Never fails on odd input: unknown lines are ignored. */
void pf_nccllog_line(struct pf_nccllog *log, const char *line, size_t len);
void pf_nccllog_text(struct pf_nccllog *log, const char *text, size_t len);
void pf_nccllog_free(struct pf_nccllog *log);
/* -1 unknown, 0 no, 1 yes: whether the process moved data over the network with GPUDirect
 * RDMA. */
int pf_nccllog_gdr(const struct pf_nccllog_proc *p);
/* Adds the processes to evidence (a map) under "processes". */
void pf_nccllog_evidence(struct pf_node *evidence, const struct pf_nccllog *log);
/* Findings over a whole log (check `nccl.log`): socket-fallback, no-gdr,
 * nccl-version-mismatch, nccl-warn. expect_transport is config expect.transport ("" unset). */
void pf_nccllog_findings(struct pf_check *out, const struct pf_nccllog *log,
                         const char *expect_transport);

#endif
