/* The rendezvous' own declarations, shared by its files (session.c, record.c, conn.c, accept.c,
 * server.c, admit.c, client.c, roster.c, step.c, mesh.c, probe.c, watch.c), the unit tests and
 * the fuzz targets. Not part of the module's interface (rendezvous.h). */
#ifndef PF_RENDEZVOUS_INTERNAL_H
#define PF_RENDEZVOUS_INTERNAL_H

#include "rendezvous.h"

/* What an unauthenticated peer may send: one JOIN; with its header and MAC it fits 32 KiB */
#define PF_RDV_MAX_JOIN ((32u << 10) - 64)
#define NAME_MAX_ 128
#define RDV_WHY_MAX 384 /* a member's why, refused_claim and step_err, NUL included */
#define JOIN_WAIT 3.0   /* a new connection must send its JOIN within this */
/* Connections not yet authenticated (rank 0's JOIN, a data port's DHELLO): at most this many
 * at once; past it the oldest is closed, but none younger than UNAUTH_GRACE (a real peer's
 * first frame is on its way); the listener then rests for ACCEPT_REST. */
#define UNAUTH_MAX 256
#define UNAUTH_GRACE 0.5
#define ACCEPT_REST 0.1

/* ---- one connection (conn.c) ------------------------------------------------------- */

struct pf_rdv_conn {
    int fd;
    char peer[96];    /* "10.0.0.5:41234" */
    struct pf_buf in; /* bytes read, not yet consumed */
    size_t in_off;
    struct pf_rdv_out *outq;
    size_t noutq, capoutq;
    uint32_t seq_in, seq_out;
    struct pf_wire_auth auth;
    int dir_out, dir_in;
    size_t max_payload;
};

void pf_rdv_conn_init(struct pf_rdv_conn *c, int fd, const char *peer, bool to_root);
void pf_rdv_conn_close(struct pf_rdv_conn *c);
/* The largest frame payload c takes, and what its input buffer may hold: one such frame
 * (PF_RDV_MAX_JOIN before the peer is authenticated, PF_WIRE_MAX_PAYLOAD after). */
void pf_rdv_conn_limit(struct pf_rdv_conn *c, size_t max_payload);
/* Queues a frame (MAC'd when auth is on). */
void pf_rdv_conn_queue(struct pf_rdv_conn *c, int type, const void *payload, size_t len);
/* One payload queued to many connections (a fan-out): one copy, reference-counted, hashed
 * once (each connection's MAC covers its SHA-256); each queue takes a reference, and the
 * creator drops its own when done queueing. */
struct pf_rdv_shared;
struct pf_rdv_shared *pf_rdv_shared_new(const void *payload, size_t len);
void pf_rdv_shared_drop(struct pf_rdv_shared *s);
void pf_rdv_conn_queue_shared(struct pf_rdv_conn *c, int type, struct pf_rdv_shared *s);
/* Writes what it can without blocking: 1 when all is written, 0 when some is left, <0 on
 * error. */
int pf_rdv_conn_flush_some(struct pf_rdv_conn *c);
bool pf_rdv_conn_pending(const struct pf_rdv_conn *c);
/* Reads what is there without blocking: the byte count (> 0), 0 at end of stream,
 * PF_ETIMEOUT when nothing is there yet, another negative code on error. */
int pf_rdv_conn_fill(struct pf_rdv_conn *c);
/* Takes the next complete frame out of the input: 1 (out filled), 0 (need more bytes),
 * or a negative code with the message saying why (PF_EPROTO: another protocol version;
 * garbage, MAC, sequence: PF_EINVAL). The
 * MAC is checked when auth is on and a nonce pair is set; with require_mac a frame without
 * a valid MAC is an error. */
int pf_rdv_conn_next(struct pf_rdv_conn *c, struct pf_rdv_msg *out, bool require_mac);
/* Blocking forms, each bounded by deadline (pf_now() seconds). */
int pf_rdv_conn_send(struct pf_rdv_conn *c, int type, const void *payload, size_t len,
                     double deadline);
int pf_rdv_conn_recv(struct pf_rdv_conn *c, struct pf_rdv_msg *out, bool require_mac,
                     double deadline);

/* ---- sockets ------------------------------------------------------------------------- */

/* Resolves host (getaddrinfo: resolv.conf search and ndots apply; under deadline, however
 * slow the resolver: pf_resolve_by) and connects to it before deadline. *fd is non-blocking.
 * The message carries getaddrinfo's or connect's words. */
int pf_rdv_dial(int *fd, char *peer, size_t npeer, const char *host, int port, double deadline);
/* "a.b.c.d:port" or "[v6]:port" of a socket's peer (peer) or local end (!peer). */
void pf_rdv_sockname(char *out, size_t n, int fd, bool peer);
/* The IP address text alone. */
void pf_rdv_sockaddr_ip(char *out, size_t n, int fd, bool peer);

/* One rank of the run, as the roster names it. */
struct pf_rdv_peer {
    int rank;
    char ip[64]; /* its data address; "" for rank 0 (a joiner uses the address it reached) */
    int port;    /* its data port */
    char pod[NAME_MAX_], node[NAME_MAX_];
    bool known; /* ip, port, pod and node came (rank 0: all; a rank: its partners') */
};

/* The roster: who is in the run, in rank order (ROSTER, docs/design.md "Wire protocol").
 * Every position's rank is there; the records of some only (known). */
struct pf_rdv_roster {
    uint8_t run[PF_WIRE_NONCE]; /* the run id: data connections name it */
    int world;                  /* rank 0's world size */
    int n;
    struct pf_rdv_peer *peer;
};
/* The ROSTER payload's head: run, n, world and the ranks in the run (`out`: the ranks not in
 * it, 4 bytes big-endian each, ascending; or `in`: a bitmap of world bits, rank r at byte
 * r / 8 bit r % 8; whichever is shorter). PF_ETOOBIG when b's limit cut it. */
int pf_rdv_roster_encode_head(struct pf_buf *b, const struct pf_rdv_roster *ro);
/* The head and one record `m` {rank, ip, port, pod, node} for every known position. */
int pf_rdv_roster_encode(struct pf_buf *b, const struct pf_rdv_roster *ro);
/* Decodes a ROSTER payload (peer input). PF_EINVAL when the header fields are missing or
 * out of range, or the ranks are not n ascending ranks of the world with rank 0 first; a
 * malformed record, or one naming a rank not in the run, is left out (its position stays
 * unknown). Free with pf_rdv_roster_free, also after an error. */
int pf_rdv_roster_decode(struct pf_rdv_roster *out, const uint8_t *payload, size_t len);
void pf_rdv_roster_free(struct pf_rdv_roster *ro);

struct rdv_member {
    int state; /* PF_RDV_MISSING .. PF_RDV_LOST */
    int conn;  /* server connection index, -1 for none (and for rank 0 itself) */
    char pod[NAME_MAX_], node[NAME_MAX_], addr[64], data_ip[64];
    int data_port;
    long long world_claimed;
    char version[48], digest[96], nccl_version[64];
    char fabric[64];        /* gpu.fabric's "<clusterUuid>/<cliqueId>"; "" when not reported */
    struct pf_strlist env;  /* "NAME=VALUE" */
    long long env_left_out; /* NCCL_* variables its JOIN left out */
    /* allocated when first used (NULL: none), so that a thousand ranks that joined and
     * answer every step cost no room for what went wrong */
    char *why;           /* refused or lost: why (at most RDV_WHY_MAX bytes) */
    char *refused_claim; /* the last JOIN for this rank that failed authentication: "CLAIM:
                          * why" (pf_rdv_member_info's refused_claim) */
    /* the step in progress */
    uint32_t step_got;
    bool step_ok;
    char *step_err; /* its "err", when it sent one */
    uint8_t *blob;
    size_t bloblen;
};

struct rdv_sconn {
    struct pf_rdv_conn c;
    bool used;
    int rank; /* -1 until it joined */
    double opened;
    double deadline;
    bool closing;
    double close_by;
    /* what rdv_sc_sync last accounted for it (server.c): the serve loop's counters and
     * epoll's interest in it follow these, never a scan of every connection */
    uint64_t gen; /* its opening's number: a deadline of an earlier one is stale */
    uint32_t ev;  /* the events epoll waits for (EPOLLIN unless closing, EPOLLOUT while
                     its queue is pending) */
    bool ep_on;   /* registered with the serve loop's epoll */
    bool counted; /* a member's pending queue, counted in npend */
    bool listed;  /* in the list of connections not yet joined */
    uint32_t fan; /* the fan-out (fan_gen) whose frame it holds, 0 for none */
};

/* A deadline of connection i (its JOIN's or its close's), in rank 0's heap: stale once the
 * connection closed (gen) or its deadline passed its reason (a JOIN came, the REJECT was
 * written). */
struct rdv_timer {
    double at;
    size_t i;
    uint64_t gen;
};

/* Rank 0 keeps at most this many refusals (pf_rdv_refusals); the same one twice is kept once. */
#define RDV_REFUSALS_MAX 1024

struct rdv_session {
    struct pf_rdv_setup su; /* the caller's (pointers outlive the session) */
    /* how this pod's meeting ended (pf_rdv_end), and what it counted (pf_rdv_stats) */
    enum pf_rdv_end end;
    enum pf_wire_refusal refusal; /* PF_RDV_END_REJECTED: rank 0's word */
    char end_msg[1280];
    char last_error[512]; /* a joiner: the last error towards rank 0 */
    int unauthenticated;  /* a joiner with a token: answers without an HMAC, not believed */
    bool rostered;        /* pf_rdv_roster_send ran: joined and seconds are set */
    double seconds;
    /* rank 0: the JOINs it refused after believing them */
    struct pf_wire_refused *refusals;
    size_t nrefusals, refusals_left_out;
    struct pf_identity id;
    const char *token;
    bool auth;
    int rank, world;
    double t0, cutoff, join_deadline;
    char pod[NAME_MAX_], node[NAME_MAX_];
    char my_ip[64], iface[64], bind_ip[64];
    int data_lfd, data_port;
    /* the roster: who is in the run, in rank order */
    int n, pos;
    struct pf_rdv_roster ro; /* its world: rank 0's; every rank decides by it, not its own */
    int *rk;                 /* the ranks of ro.peer, in order (for collective/ and fleet/) */
    /* rank > 0: the control connection */
    struct pf_rdv_conn ctl;
    bool have_ctl;
    size_t env_left_out; /* this pod's NCCL_* variables its JOIN leaves out */
    char root_ip[64];
    bool root_lost;
    char root_why[384];
    /* rank 0 */
    int lfd;
    struct rdv_sconn *sc;
    size_t nsc, capsc;
    size_t *free_sc, nfree, capfree; /* slots of sc[] to reuse */
    size_t *unauth, nunauth;         /* the connections not yet joined, oldest first */
    int ep;                          /* the serve loop's epoll instance, -1 for none */
    uint32_t lfd_ev;                 /* the listener's events there (0 while it rests) */
    uint64_t opens;                  /* connections opened so far (their gen) */
    struct rdv_timer *tm;            /* a min-heap of the connections' deadlines */
    size_t ntm, captm;
    /* counters serve's done conditions read instead of a pass over every rank: members
     * (ranks 1..) MISSING and JOINED, the joined whose step_got is step_no and step_no + 1,
     * member connections whose queue is pending, fan-out frames not yet written */
    int nmissing, nlive, nstep, nnext, npend, fan_win;
    uint32_t fan_gen;
    struct rdv_member *m;
    int dropped;
    char dropped_last[256];
    int refused; /* JOINs that failed authentication (strangers, replays, other tokens) */
    char refused_last[384];
    double accept_rest_until, last_drop_say;
    uint8_t join_run[PF_WIRE_NONCE]; /* rank 0's HELLO names it; every JOIN names it back */
    double last_join, roster_at, arrival_to_roster;
    int env_left_out_ranks;      /* ranks whose JOIN left NCCL_* variables out */
    char env_left_out_last[256]; /* the last of them */
    int last_waiting;
    double last_progress;
    struct rdv_fanout *fan; /* rank 0: the frame being sent to every rank, a window at a time */
    /* the flow */
    uint32_t step_no;
    bool stopped;
    struct pf_wire_marks lost, failed;
    /* data mesh */
    int nshifts, shifts[3], out_fd[3], in_fd[3];
    long long mesh_accepted, mesh_taken, mesh_closed; /* its data port's acceptor (accept.c) */
};

/* ---- record.c: how the meeting ended, what rank 0 refused, progress lines */
/* This pod's meeting ended so (pf_rdv_end), with a message for a human. */
void rdv_end(struct rdv_session *S, enum pf_rdv_end end, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Rank 0 refused this pod: why (its REJECT's word), and its message. */
void rdv_end_refused(struct rdv_session *S, enum pf_wire_refusal why, const char *text);
/* Rank 0 refused a JOIN it believed: kept once (at most RDV_REFUSALS_MAX). */
void rdv_refused(struct rdv_session *S, const struct pf_wire_refused *x);
/* A progress line for a human. */
void rdv_say(struct rdv_session *S, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- watch.c: a control connection closed while a stage works outside the rendezvous;
 * the rank lost (who: "rank 1 (trainer-1)") or -1. Reads nothing. */
int rdv_peer_lost(struct rdv_session *S, char *who, size_t n);

/* ---- session.c: the session's state. rdv_session_init zeroes it and sets what is not zero
 * (no descriptors, t0); rdv_session_free frees and closes all it holds, whoever built it
 * (pf_rdv_open and pf_rdv_close use them, and so do the tests and the fuzz targets). */
void rdv_session_init(struct rdv_session *S);
void rdv_session_free(struct rdv_session *S);

/* ---- record.c: naming ranks, the guard */
double rdv_wait_end(const struct rdv_session *S, double secs);
/* The pod name of rank: as it joined, from the roster, or from the naming rule. */
const char *rdv_pod_of(const struct rdv_session *S, int rank, char *buf, size_t n);
const char *rdv_node_of(const struct rdv_session *S, int rank);
/* "rank 5 (trainer-5)" */
void rdv_who(char *out, size_t n, const struct rdv_session *S, int rank);
/* Appends "5, 11, 12": at most PF_WIRE_LIST_MAX, then "and K more". */
void rdv_list_numbers(struct pf_buf *b, const int *ranks, size_t n);
/* What is under way, for a verdict written on a signal or at the deadline. */
void rdv_guard(struct rdv_session *S, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- server.c: rank 0's connections and its epoll loop */
/* A new connection on fd: a slot, its JOIN deadline, rank 0's HELLO on its way, and its place
 * in the epoll instance when there is one. false (fd closed) when epoll takes no more. */
bool rdv_sc_open(struct rdv_session *S, int fd, double now);
/* The heap of deadlines (rdv_timer). */
void rdv_timer_push(struct rdv_session *S, double at, size_t i, uint64_t gen);
/* The earliest deadline into out: false when there is none. */
bool rdv_timer_pop(struct rdv_session *S, struct rdv_timer *out);
void rdv_sc_close(struct rdv_session *S, size_t i);
/* After anything that may change connection i's queue, rank or closing: the counters, the
 * list of connections not yet joined and epoll's interest in it follow; a closing connection
 * whose queue is written is closed. O(1) (the list: O(UNAUTH_MAX)). */
void rdv_sc_sync(struct rdv_session *S, size_t i);
/* After a frame was queued on connection i: writes what goes without blocking (epoll waits
 * to write the rest), and a write error loses the rank as in the loop; then rdv_sc_sync. */
void rdv_sc_write(struct rdv_session *S, size_t i);
/* A member's state and step_got change only here, so that the counters follow. */
void rdv_member_set(struct rdv_session *S, int rank, int state, uint32_t step_got);
/* The next step: step_no + 1 (the counters move with it). */
void rdv_step_next(struct rdv_session *S);
void rdv_member_lost(struct rdv_session *S, int rank, const char *why);
/* Queues a REJECT {code: why's word, message} and closes the connection once it is written. */
void rdv_sc_reject(struct rdv_session *S, size_t i, enum pf_wire_refusal why, const char *msg);
/* A connection that is not (or no longer) a member: garbage, a scanner, a slow client. */
void rdv_sc_drop(struct rdv_session *S, size_t i, const char *why);
/* Rank 0's member table: world empty records (rdv_session_free frees it). */
void rdv_members_init(struct rdv_session *S);
/* The event loop of rank 0. Returns true when done(S) said so, false at the deadline. */
bool rdv_serve(struct rdv_session *S, double deadline, bool (*done)(struct rdv_session *));
/* Listens on the rendezvous port and sets up the member table with rank 0 in it. PF_ERR
 * (the meeting ended PF_RDV_END_LISTEN_FAILED) when the port cannot be had. */
int rdv_root_listen(struct rdv_session *S);
/* serve's condition of the join phase: every rank joined (says who is awaited meanwhile). */
bool rdv_join_done(struct rdv_session *S);

/* ---- admit.c: a JOIN on connection i, admitted or refused */
void rdv_admit(struct rdv_session *S, size_t i, struct pf_rdv_msg *msg);
/* Rank 0: rank's JOIN left n of its NCCL_* variables out (envLeftOut, or over the member
 * table's limit): the evidence counts the ranks (envLeftOutRanks) and names the last. */
void rdv_env_left_out(struct rdv_session *S, int rank, long long n);

/* ---- conn.c: the data connection's opener */
/* The DHELLO payload: run, src, dst, shift (struct pf_rdv_dhello: rendezvous.h). */
void pf_rdv_dhello_payload(struct pf_buf *b, const struct pf_rdv_dhello *h);
/* Decodes the DHELLO frame at the start of buf (peer input): the bytes it takes, 0 while
 * more are needed, PF_EPROTO for another protocol version, PF_EINVAL when it is not a DHELLO
 * at sequence 0, lacks a field, or (a->on) carries no HMAC or one that fails: a->nonce_s is
 * the run id. */
int pf_rdv_dhello_decode(struct pf_rdv_dhello *out, const uint8_t *buf, size_t len,
                         const struct pf_wire_auth *a);

/* ---- roster.c */
void rdv_roster_alloc(struct rdv_session *S, int n);
void rdv_roster_free(struct rdv_session *S);
/* Rank 0: the roster of rank 0 and every joined rank (every position known). */
void rdv_roster_build(struct rdv_session *S);
/* The positions whose records position pos gets (the setup's partners rule: in range, not
 * pos, each once; at most PF_RDV_PARTNERS_MAX), or -1 when there is no rule (every one). */
int rdv_roster_partners(const struct rdv_session *S, int pos, int *out);
/* Rank 0: the ROSTER payload position pos gets (the head, its partners' records). */
int rdv_roster_payload(struct rdv_session *S, int pos, struct pf_buf *b);
/* Rank 0: builds the roster and queues each joined rank its own. */
void rdv_root_send_roster(struct rdv_session *S);
/* Rank > 0: the roster from rank 0's ROSTER message. PF_EINVAL when malformed. */
int rdv_client_parse_roster(struct rdv_session *S, const struct pf_rdv_msg *msg);
/* Position pos's record when its address is known here; NULL with why naming the position
 * when rank 0 sent none (a caller that dials it then fails, saying so). */
const struct pf_rdv_peer *rdv_peer_addr(const struct rdv_session *S, int pos, char *why,
                                        size_t nwhy);
/* pf_rdv_addr_put and pf_rdv_addr_take (rendezvous.h). */
int rdv_addr_put(const struct rdv_session *S, struct pf_buf *out, int pos);
int rdv_addr_take(struct rdv_session *S, const uint8_t *payload, size_t len);

/* ---- step.c */
/* Rank 0: a STEP from connection i. */
void rdv_handle_step(struct rdv_session *S, size_t i, struct pf_rdv_msg *msg);
/* One step (mode PF_RDV_BARRIER ..): 0 when every rank goes on, PF_ERR when the run stops. res
 * holds the parts (ALLGATHER everywhere, GATHER at rank 0); free it with rdv_step_res_free. */
int rdv_step(struct rdv_session *S, const char *kind, bool ok, const char *err, const void *blob,
             size_t len, int mode, double timeout, struct pf_rdv_step_res *res);
void rdv_step_res_free(struct rdv_session *S, struct pf_rdv_step_res *r);
typedef void (*rdv_part_fn)(void *arg, int pos, struct pf_buf *out);
/* pf_rdv_step_scatter (rendezvous.h) */
int rdv_step_scatter(struct rdv_session *S, const char *kind, bool ok, const char *err,
                     const void *blob, size_t len, double timeout, pf_rdv_ready_fn ready,
                     rdv_part_fn part, void *arg, struct pf_rdv_step_res *res);
/* Rank 0: sends one frame to every joined rank, common bytes then part(arg, pos) (NULL:
 * none), encoding and queueing a window of ranks at a time so that at most about
 * RDV_FANOUT_BYTES wait in the output queues, and serves until all are written or the
 * deadline. Past the deadline the rest is queued at once: a frame without parts is then one
 * shared payload (about 80 bytes a rank), never a copy per rank. */
#define RDV_FANOUT_BYTES (4u << 20)
void rdv_send_all(struct rdv_session *S, int type, const void *data, size_t len, rdv_part_fn part,
                  void *arg, double deadline);
/* serve's condition: every queued frame to a joined rank is written. */
bool rdv_flushed(struct rdv_session *S);

/* ---- mesh.c */
/* Opens one data connection per probed shift and accepts one from each: 0, or PF_ERR with
 * err saying which. */
int rdv_mesh_connect(struct rdv_session *S, double deadline, char *err, size_t nerr);
void rdv_mesh_close(struct rdv_session *S);

/* ---- probe.c: pf_rdv_probe_connect (rendezvous.h) */
int rdv_probe_connect(struct rdv_session *S, int round, int pos, bool send, double deadline,
                      char *why, size_t nwhy);
/* pf_rdv_probe_accept_many (rendezvous.h) */
int rdv_probe_accept_many(struct rdv_session *S, int n, const int *pos, const int *round, int *fds,
                          double deadline, char *why, size_t nwhy);
int rdv_probe_dial_addr(struct rdv_session *S, int round, int pos, const struct pf_rdv_addr *a,
                        double deadline, char *why, size_t nwhy);
/* pollfds and serve until take took `want` or the deadline: how many it took. */
int pf_rdv_acceptor_run(struct pf_rdv_acceptor *A, int want, double deadline, pf_rdv_take_fn take,
                        void *arg);
/* ---- accept.c: the data listeners' accept discipline, for the session S's run and rank */
void rdv_acceptor_init(struct pf_rdv_acceptor *A, const struct rdv_session *S, const int *lfd,
                       int nlfd);

/* ---- client.c */
/* The JOIN's fields: who this pod is, what it sees (the setup's claims: NCCL_* variables
 * with secrets hashed, the NCCL version, the NVLink fabric identity). Variables that do not
 * fit b are left out and counted in the field envLeftOut; returns that count. */
#define RDV_ENV_LEFT_OUT_ROOM 40 /* the field envLeftOut: 1 + 10 + 4 + up to 20 digits */
size_t rdv_join_payload(struct rdv_session *S, struct pf_buf *b,
                        const uint8_t nonce[PF_WIRE_NONCE]);
/* Joins rank 0 and waits for the roster: 0, or PF_ERR with findings recorded. */
int rdv_client_join(struct rdv_session *S);

#endif
