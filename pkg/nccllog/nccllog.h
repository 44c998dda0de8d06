/* nccllog: reading NCCL_DEBUG=INFO output of a job (docs/checks.md, `nccl.log`).
 *
 * Lines of any NCCL version (2.3 to 2.2x) and any launcher (Open MPI, torchrun, kubectl
 * --prefix, srun -l, Ray, docker compose, timestamps, ANSI colours) are read one at a time in
 * bounded memory; the model is then built per process and per host: which transport carried
 * inter-node traffic (from channel lines first, then init lines), HCAs and link layers,
 * GPUDirect RDMA, NVLS/CollNet, versions, ranks, init times and WARN lines by kind.
 * Input comes from outside: every field is bounded and odd lines are ignored, never trusted. */
#ifndef PF_NCCLLOG_H
#define PF_NCCLLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "../base/base.h"
#include "../verdict/verdict.h"

#define PF_NCCLLOG_LINE_MAX 4096 /* longer lines are cut there */

/* Kinds of WARN lines, counted per process. */
enum pf_nccllog_warn_kind {
    PF_NCCLLOG_W_REFUSED, /* connection refused */
    PF_NCCLLOG_W_CLOSED,  /* closed / reset by the remote peer */
    PF_NCCLLOG_W_TIMEOUT, /* timeouts */
    PF_NCCLLOG_W_SYSERR,  /* unhandled system error, socket / net errors */
    PF_NCCLLOG_W_IBV,     /* ibv_* calls, IB completions with error */
    PF_NCCLLOG_W_CUDA,    /* Cuda failure */
    PF_NCCLLOG_W_SHM,     /* /dev/shm */
    PF_NCCLLOG_W_PLUGIN,  /* NET/OFI and other plugin errors */
    PF_NCCLLOG_W_OTHER,
    PF_NCCLLOG_W_KINDS
};
/* "connection-refused", "connection-closed", ... */
const char *pf_nccllog_warn_kind_name(int kind);

/* One NCCL process (host:pid), or the lines of one file that name no process. */
struct pf_nccllog_proc {
    char host[128];    /* NCCL's <host> (hostname cut at the first '.'); "-" for none */
    long pid;          /* 0 for lines without a host:pid:tid prefix */
    char pod[128];     /* kubectl --prefix pod, docker compose service, Ray ip */
    int file;          /* index of the file it was first seen in */
    char version[32];  /* "2.21.5" */
    char cuda[16];     /* "12.4" from "+cuda12.4" */
    char network[32];  /* declared: Using network X / internal Network X / Assigned NET plugin */
    char chan_net[32]; /* the network of its NET channel lines: "IB", "Socket", "IBext_v8" */
    char ofi_provider[32];
    char bootstrap[96];        /* "eth0:10.0.0.5" */
    struct pf_strlist devs;    /* CUDA devices seen in "[N]" */
    struct pf_strlist hcas;    /* "mlx5_0:1/IB" from "NET/IB : Using" (any form) */
    struct pf_strlist ifaces;  /* "eth0:10.0.0.5" from "NET/Socket : Using" and IB's OOB */
    struct pf_strlist gdr_on;  /* HCAs named by "GPU Direct RDMA Enabled for HCA" */
    struct pf_strlist gdr_off; /* ... "Disabled for HCA" */
    struct pf_strlist ranks;   /* global ranks this process holds (comm / channel lines) */
    bool ib_no_device;         /* "NET/IB : No device found." */
    bool socket_up;            /* "NET/Socket : Using ..." */
    /* a WARN of the IB transport's completion path (src/transport/net_ib.cc ncclIbTest "NET/IB :
     * Got completion from peer ..."): it runs only on connected IB queue pairs, so the process
     * moved data over NCCL's IB net */
    bool ib_completion;
    bool sharp;       /* "/SHARP" HCAs or a loaded SHARP collnet plugin */
    int net_channels; /* "Channel/Ring ... via NET/..." lines */
    int gdr_channels; /* of which ".../GDRDMA" */
    int p2p_channels; /* via P2P/... */
    int shm_channels; /* via SHM/... */
    int gdr_enabled;  /* "GPU Direct RDMA Enabled for" lines */
    int gdr_disabled;
    bool nvls;           /* NVLS used (channels, Connected NVLS, nvls channels > 0) */
    bool nvls_cap;       /* NVLS multicast support is available */
    bool collnet;        /* CollNet used */
    int collnet_logged;  /* "N collnet channels": CollNet only in 2.20 (2.21+ print nChannels) */
    bool ib_disabled;    /* "NCCL_IB_DISABLE set by environment to 1." */
    int local_ranks;     /* largest "localRanks N" */
    char hostid[64];     /* "NCCL_HOSTID set by environment to X" */
    int nranks;          /* largest "nranks N" */
    int world_rank1;     /* +1: its rank in a communicator of that size (the job's world) */
    int nnodes;          /* largest "nNodes N" */
    int init_complete;   /* "Init COMPLETE" lines */
    double init_seconds; /* largest "Init timings: ... total X" */
    int warns_by_kind[PF_NCCLLOG_W_KINDS];
    struct pf_strlist warns; /* "file:line (func) message" of NCCL WARN lines (at most 64) */
    size_t nwarns;           /* all of them */
};

enum pf_nccllog_class { PF_NCCLLOG_NONE, PF_NCCLLOG_RDMA, PF_NCCLLOG_SOCKET, PF_NCCLLOG_OTHER };

/* One host, built by pf_nccllog_finish from its processes. */
struct pf_nccllog_host {
    char name[256];
    size_t *procs; /* indexes into log->v */
    size_t nprocs;
    char transport[48]; /* inter-node network as NCCL names it ("" none seen) */
    enum pf_nccllog_class cls;
    bool from_channels; /* transport seen on channel lines, not only declared */
    int gdr;            /* -1 unknown, 0 no, 1 yes */
    struct pf_strlist hcas, ifaces, versions, ranks, pods;
    int net_channels, gdr_channels, p2p_channels, shm_channels;
    bool nvls, collnet, sharp, ib_no_device;
    int warns_by_kind[PF_NCCLLOG_W_KINDS];
    size_t nwarns;
};

struct pf_nccllog_file {
    char name[256];
    char version[32]; /* a bare version line no process claimed */
    char cuda[16];
    size_t last_proc; /* +1; 0 none: the process of the previous NCCL line */
    char pending_version[32], pending_cuda[16];
    char last_tag[32]; /* launcher tag of that line */
};

struct pf_nccllog {
    struct pf_nccllog_proc *v;
    size_t n;
    size_t lines;      /* lines read */
    size_t nccl_lines; /* lines that were NCCL's */
    size_t cut_lines;  /* lines longer than PF_NCCLLOG_LINE_MAX */
    struct pf_nccllog_file *files;
    size_t nfiles;
    size_t cur;   /* +1: the file lines go to (pf_nccllog_file_use); 0: the last begun */
    size_t *hash; /* process lookup (open addressing, +1 indexes) */
    size_t hash_cap;
    /* pf_nccllog_finish */
    struct pf_nccllog_host *hosts;
    size_t nhosts;
    bool multi_node; /* NCCL's nNodes / localRanks first; else several hosts or NET channels */
    int nranks;      /* largest nranks any process logged */
    int nnodes;      /* largest nNodes */
    bool one_node;   /* NCCL said so: nNodes 1, localRanks equal to nranks, one NCCL_HOSTID */
    bool finished;
};

/* Starts a new input file (a name for the file's own lines, e.g. its path or "-"). Lines
 * before any call belong to an unnamed file. */
void pf_nccllog_file_begin(struct pf_nccllog *log, const char *name);
/* Makes file index (from 0, in the order of pf_nccllog_file_begin) the one the next lines
 * belong to, for a reader that follows several files at once (`preflight watch`); an index
 * never begun is ignored. */
void pf_nccllog_file_use(struct pf_nccllog *log, size_t index);
/* The index of the process the last line of the current file named (its NCCL line), or -1. */
long pf_nccllog_last_proc(const struct pf_nccllog *log);
/* Reads one line (no newline needed) / a whole text of many ranks, mixed, with or without
 * launcher prefixes or timestamps. Never fails on odd input: unknown lines are ignored. */
void pf_nccllog_line(struct pf_nccllog *log, const char *line, size_t len);
void pf_nccllog_text(struct pf_nccllog *log, const char *text, size_t len);
/* Reads a whole file ("-": stdin) in one pass with bounded memory: pf_nccllog_file_begin and
 * every line, never past deadline (0: none; a FIFO without a writer, /dev/zero). 0, or
 * PF_EUSAGE naming the file when it cannot be read or does not end by the deadline. */
int pf_nccllog_read_file(struct pf_nccllog *log, const char *path, double deadline);
/* Builds hosts and the job's facts from the processes (done by the functions below when
 * needed; lines read afterwards need another call). */
void pf_nccllog_finish(struct pf_nccllog *log);
void pf_nccllog_free(struct pf_nccllog *log);

/* -1 unknown, 0 no, 1 yes: whether the process moved data over the network with GPUDirect
 * RDMA. */
int pf_nccllog_gdr(const struct pf_nccllog_proc *p);
/* What kind of network NCCL's name is (IB, IBext_v8, Socket, AWS Libfabric, OFI, gIB, ...);
 * provider is aws-ofi-nccl's libfabric provider ("" unknown): tcp and sockets are sockets. */
enum pf_nccllog_class pf_nccllog_classify(const char *network, const char *provider);
const char *pf_nccllog_class_name(enum pf_nccllog_class c);

/* Adds the job, hosts and processes to evidence (a map). */
void pf_nccllog_evidence(struct pf_node *evidence, struct pf_nccllog *log);
/* Findings over a whole log (check `nccl.log`): socket-fallback, no-gdr,
 * nccl-version-mismatch, nccl-warn, ... expect_transport is config expect.transport ("" or
 * NULL unset). */
void pf_nccllog_findings(struct pf_check *out, struct pf_nccllog *log,
                         const char *expect_transport);
/* Fills check `nccl.log` (skip, with evidence.unknown naming what is missing, when no NCCL line
 * was read) and environment.ncclVersion(s) of the verdict. */
void pf_nccllog_check(struct pf_verdict *v, struct pf_check *c, struct pf_nccllog *log,
                      const char *expect_transport);
/* Whether the files read are of more than one job (or run): 1 with why (the files and
 * processes named) when two processes of different files hold the same rank of a communicator
 * of the same size (the largest each logged: the job's world), or when the files' worlds
 * differ in size; 0 when nothing says so. A process seen in two files is one process. */
int pf_nccllog_several_runs(const struct pf_nccllog *log, char *why, size_t n);
/* The human summary: the job, a table per host, then the findings of c (may be NULL). */
void pf_nccllog_render(struct pf_buf *out, struct pf_nccllog *log, const struct pf_check *c);
/* The same for a line width (COLUMNS): the HOST column widens to the longest host name as far
 * as the width allows; a name longer than it keeps its start and its end. */
void pf_nccllog_render_width(struct pf_buf *out, struct pf_nccllog *log, const struct pf_check *c,
                             int width);

#endif
