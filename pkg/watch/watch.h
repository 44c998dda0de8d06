/* watch: the trainer's own NCCL, followed while it starts (`preflight watch`, docs/kubernetes.md).
 *
 * NCCL writes one file per process into a shared folder (NCCL_DEBUG_FILE=<dir>/nccl.%h.%p,
 * src/debug.cc of NVIDIA/nccl: %h the hostname, %p the pid). The follower (follow.c) reads every
 * file of the folder as it grows: files that appear late, a file replaced under its name
 * (rotation), a file cut shorter (truncation), a line not yet ended, a line of any length (cut at
 * PF_NCCLLOG_LINE_MAX, the rest skipped in bounded memory). Every whole line goes to the reader
 * of `preflight log` (pkg/nccllog), once, in order per file. After each line the process it named
 * is judged (judge.c) against what the gate measured in this pod (gate.c reads its verdict file):
 * the network NCCL chose, the NICs it saw, GPUDirect RDMA, the version. A stall at
 * initialisation is judged on the clock. Never prints; the command (cmd/preflight/cmd_watch.c)
 * says what was found where operators look. */
#ifndef PF_WATCH_H
#define PF_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "../base/base.h"
#include "../nccllog/nccllog.h"
#include "../verdict/verdict.h"

/* The gate's verdict file in the shared folder: `preflight run` writes /run/preflight/verdict.yaml
 * by default, and the chart shares /run/preflight with the trainer and the watch. */
#define PF_WATCH_GATE_FILE "verdict.yaml"
/* The watch's own verdict file in the shared folder. */
#define PF_WATCH_OWN_FILE "watch.yaml"
/* Files of the folder the follower reads: every regular file but those two, their temporary
 * siblings (".name.tmp*") and hidden files. At most this many (more are counted, not read). */
#define PF_WATCH_FILES_MAX 4096
/* The gate's verdict is read up to this size. */
#define PF_WATCH_GATE_MAX (4u << 20)

/* What the gate measured in this pod, from its verdict (schema preflight/v1):
 * environment.ncclVersion (the libnccl it loaded), environment.ncclNetwork and check
 * collective.nccl's evidence (transport, hcas) and the NCCL collectives' gpuDirectRdma. */
struct pf_watch_gate {
    bool found;       /* the file was read and is a preflight verdict */
    char error[256];  /* why not, when the file exists but could not be used */
    char version[32]; /* "" unknown */
    char network[32]; /* "" unknown: the network the gate's NCCL chose */
    int hcas;         /* -1 unknown: the NICs the gate's NCCL listed */
    int gdr;          /* -1 unknown, 0 off, 1 on (in a collective that ran) */
    char verdict[16]; /* pass | warn | fail | ... */
};

/* Reads a verdict's text (name for messages). 0, or PF_EUSAGE naming the file when it is not a
 * preflight verdict (g->error says why). Never fails on odd content: fields it lacks stay
 * unknown. */
int pf_watch_gate_parse(struct pf_watch_gate *g, const char *name, const char *text, size_t len);
/* Reads the file: PF_ENOENT when it does not exist (g->found false), PF_EUSAGE when unreadable
 * or not a verdict. */
int pf_watch_gate_load(struct pf_watch_gate *g, const char *path);

/* One file followed. */
struct pf_watch_file {
    char name[256];
    int fd; /* -1 while closed (gone, or not yet opened) */
    dev_t dev;
    ino_t ino;
    off_t off;        /* bytes read from this open file */
    size_t log_index; /* its pf_nccllog file */
    char *line;       /* the line not yet ended: at most PF_NCCLLOG_LINE_MAX bytes kept */
    size_t have;      /* bytes kept */
    size_t linelen;   /* its whole length so far */
    unsigned rotations, truncations;
    bool gone; /* the name no longer exists */
};

/* One finding, raised once per process and code. */
struct pf_watch_finding {
    char code[40];
    enum pf_status status;
    char proc[160]; /* "host:pid" ("" for the job) */
    char message[768];
    double line_at; /* pf_now() when the deciding line was read */
    double wall_at; /* the wall clock then (seconds since the epoch) */
};

/* Per process, parallel to the reader's processes. */
struct pf_watch_proc {
    unsigned decided; /* bits of the facts decided (judge.c) */
    unsigned raised;  /* bits of the findings raised */
    double first_at;  /* its first NCCL line */
    double complete_at;
    long pid; /* the pid NCCL named (%p) */
    bool signalled;
    bool seen_alive; /* its process was seen running here (a shared PID namespace) */
};

struct pf_watch_opts {
    const char *dir;       /* the shared folder */
    const char *gate_path; /* NULL: dir/PF_WATCH_GATE_FILE */
    double stall_s;        /* init stall bound (watch.stallSeconds) */
    int processes;         /* processes expected in this pod; 0: those whose files appear */
};

struct pf_watch {
    struct pf_watch_opts o;
    char dir[1024];
    char gate_path[1100];
    struct pf_watch_gate gate;
    double gate_checked; /* pf_now() of the last look for it */
    struct pf_nccllog log;
    struct pf_watch_file *files;
    size_t nfiles;
    size_t files_skipped; /* beyond PF_WATCH_FILES_MAX */
    int inotify_fd;       /* -1 when inotify is unavailable: the follower polls */
    struct pf_watch_proc *procs;
    size_t nprocs;
    struct pf_watch_finding *findings;
    size_t nfindings;
    size_t reported;   /* findings the caller has taken (pf_watch_take) */
    double t0;         /* pf_now() at open */
    double last_start; /* pf_now() when the last process printed its first NCCL line */
    bool stall_raised;
    int stop_refused; /* trainer processes kill() refused (EPERM: another user, no CAP_KILL) */
    unsigned long long bytes, lines, cut_lines;
    /* files read before under another name (rotated away): never read again under a new one */
    struct pf_watch_inode {
        dev_t dev;
        ino_t ino;
    } * retired;
    size_t nretired;
    double last_scan;
};

/* Opens the folder (it must exist): 0, or PF_EUSAGE naming it. */
int pf_watch_open(struct pf_watch *w, const struct pf_watch_opts *o);
void pf_watch_close(struct pf_watch *w);
/* Waits for new lines at most wait_s (inotify, else a poll of the folder), reads every file
 * that grew, judges. Returns the number of new findings. */
int pf_watch_step(struct pf_watch *w, double wait_s);
/* Reads what is there now without waiting (and the scan for new, rotated and cut files). */
int pf_watch_poll(struct pf_watch *w);
/* The next finding not yet taken, or NULL. */
const struct pf_watch_finding *pf_watch_take(struct pf_watch *w);
/* Feeds bytes of file f as read from it (lines split, partial lines kept): for tests and the
 * fuzz target; the follower calls it on every read. */
void pf_watch_feed(struct pf_watch *w, struct pf_watch_file *f, const char *data, size_t n);
/* Adds a file by name without opening it (tests, fuzz); returns it. */
struct pf_watch_file *pf_watch_file_add(struct pf_watch *w, const char *name);
/* Judges the clock: the init stall (every process started and none completed stall_s after the
 * last started, or expected processes never appeared). Called by pf_watch_step. */
void pf_watch_judge_clock(struct pf_watch *w);
/* Whether every process seen completed its first communicator's init. */
bool pf_watch_all_complete(const struct pf_watch *w);

/* The check `watch` of the verdict: evidence (the gate, the files, per process the network,
 * NICs, channels, GPUDirect RDMA, version and step reached) and every finding. */
void pf_watch_check(struct pf_check *c, const struct pf_watch *w);
/* The step a process reached, from its lines: "started", "version", "bootstrap", "network",
 * "communicator", "connecting", "complete". */
const char *pf_watch_step_name(const struct pf_nccllog_proc *p);
/* Appends the watch's own metrics (Prometheus text) to out: preflight_watch_processes,
 * preflight_watch_findings{code}, preflight_watch_lines_total, preflight_watch_bytes_total,
 * preflight_watch_init_complete_processes. pod is the pod's name. */
int pf_watch_metrics_text(struct pf_buf *out, const struct pf_watch *w, const char *pod);

/* stop.c: the trainer's processes (the pids NCCL named), seen only in a shared PID namespace
 * and only those that started before their first NCCL line was read. How many run now; whether
 * some were seen and none runs any more; SIGTERM to each, SIGKILL to those left after grace_s
 * (the pids signalled go into signalled). */
int pf_watch_trainer_alive(struct pf_watch *w);
bool pf_watch_trainer_ended(struct pf_watch *w);
int pf_watch_stop_trainer(struct pf_watch *w, double grace_s, struct pf_strlist *signalled);

#endif
