/* collective: the TCP all-reduce among pods (ring reduce-scatter + all-gather, chunked and
 * pipelined), the link probes, and the blame that tells a slow node from a slow link.
 * Works on connected sockets; who connects to whom is the rendezvous' business. */
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

/* nccl-tests: busbw = algbw * 2(n-1)/n for all-reduce. */
double pf_coll_busbw_allreduce(double algbw, int n);

/* ---- link probes */

/* The ring shifts probed: 1 (forward ring), n-1 (backward ring) and a second permutation
 * (n/2 for even n >= 4, 2 for odd n >= 5). Returns how many (at most 3). */
int pf_coll_probe_shifts(int n, int out[3]);

struct pf_coll_probe_res {
    double gbps;    /* received rate, Gb/s (1e9 bits) */
    size_t bytes;   /* received */
    double seconds; /* from the ready byte to the last byte */
    bool complete;  /* all nbytes arrived before the deadline */
};
/* Sends nbytes on send_fd while receiving nbytes on recv_fd (both at once, as in the ring);
 * the rate is what arrived, timed by the receiver. The receiver first sends one ready byte
 * back on recv_fd and the sender starts when it reads it from send_fd, so the timing starts
 * with both ends ready (no burst of bytes buffered while the receiver was not reading). At
 * the deadline it reports what arrived so far (complete = false). */
int pf_coll_probe(struct pf_coll_probe_res *out, int send_fd, int recv_fd, size_t nbytes,
                  double deadline, struct pf_coll_fail *fail);

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

#endif
