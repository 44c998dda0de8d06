/* collective: the TCP all-reduce among pods (ring reduce-scatter + all-gather, chunked and
 * pipelined; a grid of rings for many pods), the link probes, and the blame that tells a slow node
 * from a slow link. Works on connected sockets; who connects to whom is the rendezvous' business.
 */
#ifndef PF_COLLECTIVE_H
#define PF_COLLECTIVE_H

#include <stdbool.h>
#include <stddef.h>

#include "../base/base.h"

/* ---- ring chunk math (positions are indexes in the ring, 0..n-1) */

/* Segment seg of n over count elements: the first count % n segments are one longer. */
void pf_coll_segment(size_t count, int n, int seg, size_t *off, size_t *len);
/* 2(n-1) steps: n-1 of reduce-scatter, then n-1 of all-gather. */
int pf_coll_steps(int n);
/* The segment position pos sends (to pos+1) and receives (from pos-1) at step g. */
int pf_coll_send_seg(int pos, int n, int g);
int pf_coll_recv_seg(int pos, int n, int g);
/* Chunks a segment of len elements is cut into (0 for an empty segment). */
size_t pf_coll_nchunks(size_t len, size_t chunk_elems);

/* ---- data: small integers, so that float sums are exact whatever the order */

/* The value rank contributes at element j: an integer in [-32, 31]. */
float pf_coll_seed_value(int rank, size_t j);
void pf_coll_seed(float *data, size_t count, int rank);
/* Counts elements that differ from the exact sum over the ranks given; *first_bad gets the
 * index of the first (or count when none). */
size_t pf_coll_verify(const float *data, size_t count, const int *ranks, int n, size_t *first_bad);

/* ---- failures */
enum pf_coll_fail_kind {
    PF_COLL_OK = 0,
    PF_COLL_EOF,
    PF_COLL_RESET,
    PF_COLL_TIMEOUT,
    PF_COLL_ERROR
};
struct pf_coll_fail {
    enum pf_coll_fail_kind kind;
    bool on_send; /* true: the link to the next position; false: from the previous */
    char what[256];
};
const char *pf_coll_fail_name(enum pf_coll_fail_kind k);

/* In-place float32 sum over the ring. send_fd goes to position pos+1, recv_fd comes from
 * pos-1 (non-blocking sockets). A sender thread and the receiving/reducing thread overlap
 * chunk by chunk. On a failure (peer gone, deadline) both directions stop, *fail says which
 * and why, and PF_ERR or PF_ETIMEOUT is returned. */
int pf_coll_allreduce(float *data, size_t count, int pos, int n, int send_fd, int recv_fd,
                      size_t chunk_bytes, double deadline, struct pf_coll_fail *fail);

/* Steps [first_step, end_step) of that ring (reduce-scatter is 0 .. n-2, all-gather
 * n-1 .. 2n-3): the grid's phases. After reduce-scatter, position pos holds segment
 * (pos + 1) % n summed over the ring; all-gather starts from there. */
int pf_coll_ring_run(float *data, size_t count, int pos, int n, int send_fd, int recv_fd,
                     size_t chunk_bytes, int first_step, int end_step, double deadline,
                     struct pf_coll_fail *fail);
/* One way, the whole of data: send it, or receive it (add: summed into data, chunk by
 * chunk). 0, PF_ETIMEOUT or PF_ERR with *fail. */
int pf_coll_send_floats(const float *data, size_t count, int fd, double deadline,
                        struct pf_coll_fail *fail);
int pf_coll_recv_floats(float *data, size_t count, bool add, int fd, size_t chunk_bytes,
                        double deadline, struct pf_coll_fail *fail);

/* ---- the grid all-reduce (grid.c): sequential steps that grow as 2 sqrt(n), not 2n
 *
 * Positions 0 .. rows*cols-1 form a grid of rows of cols consecutive positions; the
 * positions after it (fewer than cols: a partial last row) are "extras", each folded into
 * the position right above it. Per iteration: the extras send their vector to their
 * partner, which adds it; every row runs the ring's reduce-scatter (cols-1 steps), so the
 * position in column c holds segment (c+1) % cols summed over its row; every column runs
 * the ring all-reduce of that segment (2(rows-1) steps); every row runs the ring's
 * all-gather (cols-1 steps); the partners send the result back to their extras. Exact:
 * each contribution is added once, into one position, whatever the order. */
#define PF_COLL_GRID_MIN_N                                                                         \
    64 /* below this many positions the ring runs (docs/tcp-allreduce.md)                          \
        */

struct pf_coll_grid {
    int n, rows, cols;
    int extra; /* n - rows*cols, in [0, cols) */
};
/* The shape for n positions: cols the smallest divisor of n in [s, 1.5 s], s = ceil(sqrt n)
 * (no extras), else s with n % s extras (rows = n / s). n < 4: one row (the ring). */
void pf_coll_grid_shape(struct pf_coll_grid *g, int n);
/* Whether n positions run the grid (n >= PF_COLL_GRID_MIN_N) rather than the ring. */
bool pf_coll_use_grid(int n);
/* Sequential steps of one grid all-reduce: 2(cols-1) + 2(rows-1), + 2 with extras. */
int pf_coll_grid_steps(const struct pf_coll_grid *g);
/* "ring" or "grid 32x32" / "grid 31x32 + 29 folded": what ran, for the evidence. */
void pf_coll_algo_name(char *out, size_t n, int npos);

/* Position pos's partners (positions; -1: none). */
struct pf_coll_grid_peers {
    int row_next, row_prev; /* its row's ring (none for an extra) */
    int col_next, col_prev; /* its column's ring (none for an extra, or one row) */
    int fold;               /* an extra: its partner; a partner: its extra; else -1 */
};
void pf_coll_grid_peers(struct pf_coll_grid_peers *out, const struct pf_coll_grid *g, int pos);

/* The sockets to those partners: row_send to row_next, row_recv from row_prev, and so on;
 * fold is one socket both ways. -1 where there is no partner. */
struct pf_coll_grid_fds {
    int row_send, row_recv, col_send, col_recv, fold;
};
/* The grid all-reduce at position pos (non-blocking sockets). On a failure *fail says what,
 * *fail_peer the position at the other end (-1: unknown), and PF_ERR or PF_ETIMEOUT is
 * returned. */
int pf_coll_allreduce_grid(float *data, size_t count, const struct pf_coll_grid *g, int pos,
                           const struct pf_coll_grid_fds *fds, size_t chunk_bytes, double deadline,
                           struct pf_coll_fail *fail, int *fail_peer);

/* nccl-tests: busbw = algbw * 2(n-1)/n for all-reduce. */
double pf_coll_busbw_allreduce(double algbw, int n);

/* ---- link probes */

/* The ring shifts the data mesh connects: the survey's (pf_coll_survey_shift: 1, n/2,
 * n/4+1, then the next unused ones for small n), the first being the all-reduce's ring.
 * Returns how many (at most 3). */
int pf_coll_probe_shifts(int n, int out[3]);

/* The positions position pos of n dials, known from (pos, n) alone: the data mesh's (pos +
 * each probe shift) and, where n runs the grid, its row and column rings' next and its fold
 * partner. Each once, never pos; how many (at most PF_COLL_DIAL_MAX). Rank 0 sends a rank
 * the addresses of these only (docs/design.md, "Wire protocol"). */
#define PF_COLL_DIAL_MAX 6
int pf_coll_dial_partners(int pos, int n, int out[PF_COLL_DIAL_MAX]);

struct pf_coll_probe_res {
    double gbps;     /* received rate, Gb/s (1e9 bits) */
    size_t bytes;    /* timed: received after the warm-up (the first quarter, untimed) */
    double seconds;  /* from the second ready byte (the first, when the warm-up never ended)
                      * to the last byte, or to the deadline when it cut the probe */
    size_t received; /* all that arrived */
    bool complete;   /* all nbytes arrived before the deadline */
};
/* Sends nbytes on send_fd while receiving nbytes on recv_fd (both at once, as in the ring);
 * the rate is what arrived, timed by the receiver. The receiver sends one ready byte back on
 * recv_fd and the sender starts when it reads it from send_fd; after the warm-up quarter the
 * receiver sends a second one and the sender waits for it too, so the clock starts with both
 * ends ready, the connection out of slow start, and no burst of bytes buffered while the
 * receiver was not reading. At the deadline it reports what arrived so far (complete =
 * false). */
int pf_coll_probe(struct pf_coll_probe_res *out, int send_fd, int recv_fd, size_t nbytes,
                  double deadline, struct pf_coll_fail *fail);

/* The same with each direction optional (fd < 0: none) and its own size: the probes of a
 * round, where a rank may only send, only receive, or both, to and from different
 * partners. An incomplete receive reports the rate over the whole window (seconds). */
int pf_coll_probe_pair(struct pf_coll_probe_res *out, int send_fd, size_t send_bytes, int recv_fd,
                       size_t recv_bytes, double deadline, struct pf_coll_fail *fail);

/* ---- blame */
struct pf_coll_link {
    int src, dst; /* ranks */
    double gbps;
};
struct pf_coll_slow_node {
    int rank;
    bool out; /* every link out of it is slow */
    bool in;  /* every link into it is slow */
    int nslow;
    int ntotal;
    double max_gbps; /* the fastest of its slow links */
};
struct pf_coll_blame {
    double median;
    double threshold; /* links below this are slow */
    struct pf_coll_slow_node *nodes;
    size_t nnodes;
    struct pf_coll_link *links; /* slow links no slow node explains */
    size_t nlinks;
};
/* Classifies measured links: slow = below ratio x the median of all links. A rank with at
 * least two peers measured whose links out (or in) are all slow is a slow node; the slow
 * links it does not explain are slow links. Pure. */
void pf_coll_blame(struct pf_coll_blame *out, const struct pf_coll_link *links, size_t n,
                   double ratio);
void pf_coll_blame_free(struct pf_coll_blame *b);

/* A link below a third of the median is slow. One TCP stream per link measures the path and
 * the CPUs at both ends: streams that share a host's cores, or cross a busy cluster network,
 * differ by up to about 2x with nothing wrong, while a broken path (a shaped or renegotiated
 * link, an MTU black hole, a lossy cable) is slower by far more. */
#define PF_COLL_SLOW_RATIO (1.0 / 3.0)

/* ---- probe plan and judgement (pure: no sockets, no clock; see docs/tcp-allreduce.md)
 *
 * Ranks are roster positions 0..n-1. A round is a set of probes run at once; in every round
 * a position sends at most one probe and receives at most one (two probes per rank, the
 * full-duplex load of the ring). The first rounds are a survey: one ring shift each (1, n/2,
 * n/4+1: neighbours, the far side, and between), so every position is measured out and in
 * against partners at several distances, whatever n is. Then confirmation rounds, only for
 * suspects (the ends of a slow survey link): a suspect whose links in one direction are all
 * slow is measured against fresh partners that the survey showed good; a slow link whose ends
 * are both shown fast with other partners is measured again. The plan ends when nothing is
 * left to confirm, or after pf_coll_plan_max_rounds(n). */

#define PF_COLL_SURVEY_ROUNDS 3
#define PF_COLL_LINK_SAMPLES 3         /* a slow link is slow this many times */
#define PF_COLL_NODE_PARTNERS 2        /* a slow node is slow against this many good partners */
#define PF_COLL_PROBE_START (4u << 20) /* the first probe, before any rate is known */
#define PF_COLL_PROBE_MIN_BYTES                                                                    \
    (1u << 20)                               /* never less: a moment of scheduling noise on        \
                                              * a shared host must not be the measurement */
#define PF_COLL_PROBE_MAX_BYTES (128u << 20) /* never more */
#define PF_COLL_PROBE_TARGET_S 0.025         /* a probe of the measured rate lasts this long */
#define PF_COLL_PROBE_MIN_S 0.020            /* a shorter slow sample proves nothing */
#define PF_COLL_EVIDENCE_MAX 8

/* One probe's result: what arrived at dst from src, and how long it took. */
struct pf_coll_sample {
    int src, dst; /* positions */
    int round;
    size_t bytes;
    double seconds;
    unsigned starved; /* PF_COLL_STARVED_SRC | _DST: that end's CPU was starved in the round */
};
#define PF_COLL_STARVED_SRC 1u
#define PF_COLL_STARVED_DST 2u

/* A rank's CPU over one probe round, which it reports with that round's samples: shares of
 * the round's wall time (0..1; < 0: the kernel did not say). A busy host slows a probe as a
 * slow wire does; a sample taken while an end was starved is no evidence against its link. */
struct pf_coll_cpu {
    double wait;      /* its threads runnable but waiting for a CPU (schedstat run_delay) */
    double steal;     /* the host's CPU time taken by the hypervisor (/proc/stat steal) */
    double psi;       /* its own cgroup had a task waiting for CPU (cpu.pressure "some" total);
                       * < 0 when only the whole host's pressure is known (other tenants') */
    double psi_avg10; /* the "some avg10" the kernel printed (%, host's or own), for the record */
};
#define PF_COLL_STARVED_SHARE 0.25 /* a quarter of the round waiting for a CPU */
/* Whether a rank was starved in the round: wait, steal or its own cgroup's pressure at
 * PF_COLL_STARVED_SHARE or more. */
bool pf_coll_cpu_starved(const struct pf_coll_cpu *c);
/* One probe to run: src sends bytes to dst. */
struct pf_coll_pair {
    int src, dst;
    size_t bytes;
};

/* Gb/s of a sample (0 when it has no duration). */
double pf_coll_sample_gbps(const struct pf_coll_sample *s);
/* Bytes for a probe of a link measured at gbps: enough that it lasts PF_COLL_PROBE_TARGET_S,
 * within [PF_COLL_PROBE_MIN_BYTES, PF_COLL_PROBE_MAX_BYTES], a multiple of 64 KiB;
 * PF_COLL_PROBE_START when nothing is known (gbps <= 0). */
size_t pf_coll_probe_bytes(double gbps);
/* Survey rounds for n positions: min(PF_COLL_SURVEY_ROUNDS, n - 1). */
int pf_coll_survey_rounds(int n);
/* The ring shift of survey round `round` (0 when round is not a survey round). */
int pf_coll_survey_shift(int n, int round);
/* The last round is pf_coll_plan_max_rounds(n) - 1: the survey, then at most
 * 2 + ceil(log2 n) confirmation rounds. */
int pf_coll_plan_max_rounds(int n);

/* The probes of round `round`, given every sample of the rounds before (samples of later
 * rounds, or out of range, are ignored). *out is allocated (free it); *nout = 0 means the plan
 * is over. The survey's probes are sized by the median rate measured so far (the first by
 * PF_COLL_PROBE_START); a confirmation probe by the same rule. Returns 0, or PF_EINVAL. */
int pf_coll_plan(struct pf_coll_pair **out, size_t *nout, int n, int round,
                 const struct pf_coll_sample *s, size_t ns, double ratio);

enum pf_coll_culprit_kind { PF_COLL_CULPRIT_NODE = 1, PF_COLL_CULPRIT_LINK };
struct pf_coll_culprit {
    enum pf_coll_culprit_kind kind;
    int src, dst; /* a node: both are its position; a link: its ends */
    bool out, in; /* a node: its links out of it, into it, are slow */
    double gbps;  /* the fastest sample of its slow links: it is never faster */
    size_t nev;
    struct pf_coll_sample
        ev[PF_COLL_EVIDENCE_MAX]; /* node: against good partners; link: its samples */
    /* a link: the fastest sample out of src and into dst with other partners, which clear the
     * ends (seconds 0: none, in a fleet too small to have other partners) */
    struct pf_coll_sample clear_src, clear_dst;
};
struct pf_coll_judgement {
    double median;    /* Gb/s: the reference, the median over positions of each one's median
                       * survey link (in and out; a link counts by its fastest sample) */
    double threshold; /* ratio x median: a link whose every sample is below is slow */
    size_t nsamples, npairs;
    int rounds;
    struct pf_coll_culprit *v;
    size_t n;
    /* slow links neither confirmed nor cleared (the plan ran out of rounds or partners):
     * named in the evidence, never a culprit */
    size_t nunresolved;
    struct pf_coll_sample unresolved[PF_COLL_EVIDENCE_MAX];
    /* slow links and nodes not named because an end was CPU-starved when they were slow:
     * the first PF_COLL_EVIDENCE_MAX links (one sample each), and how many in all */
    size_t nstarved;
    struct pf_coll_sample starved[PF_COLL_EVIDENCE_MAX];
};
/* Names slow nodes (every link out of it, or into it, slow; slow again in confirmation rounds
 * against at least PF_COLL_NODE_PARTNERS partners the survey showed good), slow links
 * (PF_COLL_LINK_SAMPLES samples, all slow; both ends fast with other partners; no slow node
 * explains it), or nothing. A link counts by its fastest sample (noise on a shared host only
 * slows a probe), so one slow sample never makes a finding. Pure. Returns 0, or PF_EINVAL. */
int pf_coll_judge(struct pf_coll_judgement *out, int n, const struct pf_coll_sample *s, size_t ns,
                  double ratio);
void pf_coll_judgement_free(struct pf_coll_judgement *j);

/* ---- the probe rounds, run (rounds.c): the plan above over real sockets
 *
 * Every rank runs pf_coll_rounds_run; one coordinator (rank 0 of the run) holds a
 * struct pf_coll_coord. Before each round the ranks meet in a barrier (ops->next), where
 * each reports what it received in the round before and gets its probes of the next one;
 * the coordinator plans that round from every sample so far. A rank sends at most one probe
 * and receives at most one a round (PF_COLL_TASKS_MAX). */

#define PF_COLL_TASKS_MAX 2

/* A probe this rank runs in a round: it sends bytes to position peer, or receives them. */
struct pf_coll_task {
    int peer;
    bool send;
    size_t bytes;
};

struct pf_coll_rounds_ops {
    void *arg;
    /* The barrier before round `round`: hands in this rank's samples of round - 1 (none before
     * round 0), gets its tasks of `round` (at most PF_COLL_TASKS_MAX; none is fine). Returns 1
     * when the round runs, 0 when the probing is over, < 0 when the run stopped. err (NULL
     * when none): this rank's probe failed, and says why; the barrier then stops the run. */
    int (*next)(void *arg, int round, const struct pf_coll_sample *mine, size_t nmine,
                const char *err, struct pf_coll_task *tasks, size_t *ntasks);
    /* A connected socket for task t of `round` (the callee owns it); -1 with why set. A rank
     * asks for its send task's socket before its receive task's. */
    int (*link)(void *arg, int round, const struct pf_coll_task *t, char *why, size_t nwhy);
    /* Once every rank is past round `round` (after the next barrier; NULL: nothing to do):
     * the callee may close what it opened for it. */
    void (*release)(void *arg, int round);
};

/* Runs the rounds at position pos of n, each probe under probe_s seconds. 0 when the plan
 * ended; PF_ERR when the run stopped, or when a probe or a connection failed: then *fail
 * says how and *fail_peer names the position (-1: none). */
int pf_coll_rounds_run(int pos, int n, const struct pf_coll_rounds_ops *ops, double probe_s,
                       struct pf_coll_fail *fail, int *fail_peer);

/* The coordinator: every sample so far and the round planned last. */
struct pf_coll_coord {
    int n;
    double ratio;
    int round; /* the round planned last (-1: none) */
    struct pf_coll_sample *s;
    size_t ns, cap;
    int *to, *from; /* per position, in the round planned last: its partner, or -1 */
    size_t *bytes;  /* per position: the bytes it sends */
    size_t npairs;  /* probes in the round planned last */
    bool *starved;  /* per position: starved in the round planned last (pf_coll_coord_cpu) */
    size_t nstarved_reports; /* every (position, round) reported starved */
};
void pf_coll_coord_init(struct pf_coll_coord *c, int n, double ratio);
void pf_coll_coord_free(struct pf_coll_coord *c);
/* What position pos received in the round planned last. Only samples the plan asked for
 * count: dst pos, src its partner of that round, the bytes planned at most; the others (peer
 * input) are dropped. Returns how many were kept. */
size_t pf_coll_coord_add(struct pf_coll_coord *c, int pos, const struct pf_coll_sample *s,
                         size_t ns);
/* Position pos's CPU in the round planned last; call it before pf_coll_coord_add of that
 * round, whose samples then carry their ends' starvation. */
void pf_coll_coord_cpu(struct pf_coll_coord *c, int pos, const struct pf_coll_cpu *cpu);
/* Plans round `round` (the one after the last planned) from every sample so far: the number
 * of probes, 0 when the probing is over, or PF_EINVAL. */
int pf_coll_coord_plan(struct pf_coll_coord *c, int round);
/* Position pos's tasks in the round planned last: how many (0..PF_COLL_TASKS_MAX). */
size_t pf_coll_coord_tasks(const struct pf_coll_coord *c, int pos,
                           struct pf_coll_task out[PF_COLL_TASKS_MAX]);

#endif
