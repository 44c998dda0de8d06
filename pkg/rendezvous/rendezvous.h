/* rendezvous: every pod meets rank 0 through the headless Service, they agree on who is
 * there, and exchange what the stages of pkg/run need (barriers, gathers, the data mesh's
 * connections, the summary).
 *
 * This header holds only what other modules call: the session (session.c: the meeting, its
 * steps, the data mesh, probe connections, the summary's delivery) and what it recorded
 * (record.c: how the meeting ended, its counters, rank 0's refusals). Who a pod is comes from
 * pkg/identity, the bytes on the wire and the REJECT's words from pkg/wire; the parts
 * (connections, rank 0's server, admission, the joiners' side, the roster) are declared in
 * internal.h.
 *
 * The meeting knows nothing of verdicts, checks, configs or the fleet: the caller hands it
 * what it needs (struct pf_rdv_setup) and reads back facts (pf_rdv_end, pf_rdv_stats,
 * pf_rdv_refusals, the marks, pf_rdv_member); pkg/run (meet.c) and pkg/fleet (agree.c) name
 * them. */
#ifndef PF_RENDEZVOUS_H
#define PF_RENDEZVOUS_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../base/base.h"
#include "../base/env.h"
#include "../identity/identity.h"
#include "../wire/wire.h"

/* ---- the meeting, as the stages of pkg/run call it --------------------------------- */

/* One run among pods. Every wait is bounded by the setup's deadline (the cutoff). */
struct pf_rdv;
struct pf_rdv_msg;

/* The meeting's fixed waits in seconds, each also bounded by the cutoff; 0: the cutoff alone
 * (pkg/run gives them: run.h's PF_RUN_*_S). */
struct pf_rdv_waits {
    double dial;    /* one dial of rank 0's address */
    double frame;   /* a JOIN or RESULT sent; the HELLO of a new connection read */
    double flush;   /* rank 0: the roster, or the SUMMARY, flushed to every rank */
    double summary; /* a rank waits for rank 0's SUMMARY */
    double step;    /* a step's message sent; its answer: the step's timeout + this */
    double close;   /* rank 0 lets a refused connection read why, then closes it */
    /* a joiner stops waiting for the roster this long before the cutoff (and takes a
     * connection that closes within twice this of it for rank 0 not starting, not for a
     * retry), so that its own verdict says why before the deadline's does */
    double roster_margin;
};

/* What the caller hands the session: the config's values, the time it has, who this pod is,
 * what its JOIN claims, and where its lines go. Pointers must outlive the session. */
struct pf_rdv_setup {
    const char *interface; /* rendezvous.interface: the data port binds to its IPv4 address */
    const char *digest;    /* the config's digest: every rank's must be the same */
    /* the caller's clock (pf_now() times; 0: none): no wait ends past deadline (the
     * cutoff); rank 0 serves JOINs until join_deadline, the others join until then */
    double deadline, join_deadline;
    struct pf_rdv_waits waits;
    /* who this pod is (pkg/run's pf_run_whoami); NULL: unknown, id_error says why */
    const struct pf_identity *id;
    const char *id_error;
    const char *token;      /* PREFLIGHT_TOKEN: every frame carries its HMAC; NULL or "": none */
    const char *pod, *node; /* this pod's name (NULL: the host name) and node (NULL: "") */
    /* the JOIN's claims, compared among ranks at rank 0 */
    const char *nccl_version;     /* "" or NULL: unknown */
    const char *fabric;           /* gpu.fabric's "<clusterUuid>/<cliqueId>"; NULL: none */
    const struct pf_strlist *env; /* "NAME=VALUE" of the NCCL_* variables (pf_rdv_join_env) */
    /* progress lines for a human; what is under way (for a verdict written on a signal or
     * at the deadline). Each may be NULL. */
    void (*progress)(void *arg, const char *line);
    void (*doing)(void *arg, const char *doing);
    void *arg;
    /* rank 0: the positions whose data addresses position pos of n needs from the roster
     * (those it dials, known from (pos, n): pf_coll_dial_partners), at most
     * PF_RDV_PARTNERS_MAX, with arg; NULL: every rank gets every address */
    int (*partners)(void *arg, int pos, int n, int *out, int max);
};
#define PF_RDV_PARTNERS_MAX 16

/* The JOIN's variables from env: every NCCL_* "NAME=VALUE", the value of a name secret()
 * calls secret replaced by "sha256:" and the first 8 bytes of its SHA-256 in hex. */
void pf_rdv_join_env(struct pf_strlist *out, const struct pf_env *env,
                     bool (*secret)(const char *name));

/* A new session. PF_ERR (the meeting ended PF_RDV_END_NO_CRYPTO) when libsodium cannot
 * start; *out is set first, either way, and is freed by pf_rdv_close. */
int pf_rdv_open(struct pf_rdv **out, const struct pf_rdv_setup *su);
void pf_rdv_close(struct pf_rdv *R);

enum { PF_RDV_ALONE = 0, PF_RDV_MET = 1 };
/* Who am I, then the meeting: rank 0 serves JOINs until all came or the join deadline, the
 * others join it and take the roster. PF_RDV_MET (rank 0 must then call pf_rdv_roster_send),
 * PF_RDV_ALONE for a world of one (no socket opened), PF_ERR when this pod is in no run
 * (pf_rdv_end says why). */
int pf_rdv_meet(struct pf_rdv *R);
/* After the meeting: rank 0 sends the roster; every rank records how many met, and when
 * (pf_rdv_stats). */
void pf_rdv_roster_send(struct pf_rdv *R);

/* ---- what the meeting recorded (record.c): facts, named by pkg/run and pkg/fleet */

/* How this pod's meeting ended. */
enum pf_rdv_end {
    PF_RDV_END_NONE = 0,        /* not yet (the meeting is under way, or was not opened) */
    PF_RDV_END_MET,             /* it met the others (rank 0 then sends the roster) */
    PF_RDV_END_ALONE,           /* a world of one: nobody to meet */
    PF_RDV_END_NOT_MEMBER,      /* the identity says this pod is no rank (the message: why) */
    PF_RDV_END_NO_IDENTITY,     /* who this pod is is unknown (the setup's id_error) */
    PF_RDV_END_NO_CRYPTO,       /* libsodium failed to initialise */
    PF_RDV_END_LISTEN_FAILED,   /* the rendezvous port (rank 0) or the data port cannot be had */
    PF_RDV_END_REJECTED,        /* rank 0 refused this pod (the refusal: its REJECT's word) */
    PF_RDV_END_UNVERIFIED,      /* an answer at rank 0's address had an HMAC that failed the
                                 * token check (another token), and none verified */
    PF_RDV_END_UNAUTHENTICATED, /* with a token: every answer at rank 0's address carried no
                                 * HMAC (a HELLO of another version included): not believed */
    PF_RDV_END_NO_START,        /* it joined, but rank 0 had not started the run by the cutoff */
    PF_RDV_END_UNREACHABLE,     /* rank 0 never answered at its address */
    PF_RDV_END_OTHER_VERSION,   /* rank 0 speaks another protocol version (PF_EPROTO) */
    PF_RDV_END_BAD_ANSWER,      /* rank 0's answer did not decode: a malformed roster, an
                                 * unexpected frame, a REJECT with a word this version lacks */
};
/* How this pod's meeting ended; *refusal (may be NULL) rank 0's word when REJECTED, and
 * *message (may be NULL) what happened, for a human ("" when nothing went wrong). */
enum pf_rdv_end pf_rdv_end(const struct pf_rdv *R, enum pf_wire_refusal *refusal,
                           const char **message);

/* The meeting's counters. The strings live as long as R; "" when none. */
struct pf_rdv_stats {
    bool auth;                     /* every frame carries an HMAC (a token is set) */
    bool rostered;                 /* pf_rdv_roster_send ran: joined and seconds are set */
    int joined;                    /* ranks in the run */
    double seconds;                /* from the session's start to the roster */
    int refused;                   /* rank 0: JOINs that failed the token check */
    const char *last_refused;      /* "CLAIM: why" of the last one */
    int dropped;                   /* rank 0: connections dropped before they joined */
    const char *last_dropped;      /* "PEER: why" of the last one */
    double arrival_to_roster;      /* rank 0: the last JOIN to the roster sent; -1: none */
    int env_left_out_ranks;        /* rank 0: ranks whose JOIN left NCCL_* variables out */
    const char *last_env_left_out; /* "rank N (POD): K NCCL_* variables" of the last one */
    long long join_env_left_out;   /* this pod's JOIN left these NCCL_* variables out */
    const char *last_error;        /* a joiner: the last error towards rank 0 */
};
void pf_rdv_stats(const struct pf_rdv *R, struct pf_rdv_stats *out);
/* Rank 0: the JOINs it refused after believing them (struct pf_wire_refused), in the order
 * refused, the same one once; *n gets their number. */
const struct pf_wire_refused *pf_rdv_refusals(const struct pf_rdv *R, size_t *n);

int pf_rdv_rank(const struct pf_rdv *R);
/* This pod's world size, and rank 0's (the roster's: every rank decides by that one). */
int pf_rdv_world(const struct pf_rdv *R);
int pf_rdv_root_world(const struct pf_rdv *R);
/* The ranks in the run, in roster order, and this rank's position among them. */
int pf_rdv_size(const struct pf_rdv *R);
const int *pf_rdv_ranks(const struct pf_rdv *R);
int pf_rdv_pos(const struct pf_rdv *R);
/* This pod's address as the others reach it, its interface, rank 0's address. */
const char *pf_rdv_my_ip(const struct pf_rdv *R);
const char *pf_rdv_iface(const struct pf_rdv *R);
const char *pf_rdv_root_ip(const struct pf_rdv *R);
/* Rank 0's rendezvous port. */
int pf_rdv_port(const struct pf_rdv *R);
/* When the session started (pf_now()). */
double pf_rdv_t0(const struct pf_rdv *R);
/* A step stopped the run (a rank lost or failed). */
bool pf_rdv_stopped(const struct pf_rdv *R);
/* The ranks lost and the ranks that reported a failure, with why. */
const struct pf_wire_marks *pf_rdv_lost(const struct pf_rdv *R);
/* Between steps, without reading: has a pod's control connection closed (rank 0: any rank's;
 * a rank: rank 0's)? The rank lost, who set to "rank N (pod)"; -1 when none has. For a stage
 * that waits on something else (NCCL) and must not wait out its deadline for a dead pod. */
int pf_rdv_peer_lost(struct pf_rdv *R, char *who, size_t n);
const struct pf_wire_marks *pf_rdv_failed(const struct pf_rdv *R);
/* Rank 0 after it began to listen: it keeps a record of every rank (pf_rdv_member). */
bool pf_rdv_serving(const struct pf_rdv *R);
/* The pod and node of rank: as it joined, from the roster, or from the naming rule. */
const char *pf_rdv_pod_of(const struct pf_rdv *R, int rank, char *buf, size_t n);
const char *pf_rdv_node_of(const struct pf_rdv *R, int rank);
/* "rank 5 (trainer-5)" */
void pf_rdv_who(char *out, size_t n, const struct pf_rdv *R, int rank);

enum { PF_RDV_MISSING = 0, PF_RDV_JOINED, PF_RDV_REFUSED, PF_RDV_LOST };
/* What rank 0 knows of one rank (its JOIN's claims); pointers live as long as R. */
struct pf_rdv_member_info {
    int state; /* PF_RDV_MISSING .. PF_RDV_LOST */
    const char *addr, *why, *version, *digest, *nccl_version;
    long long world_claimed;
    const struct pf_strlist *env; /* "NAME=VALUE" of its NCCL_* variables */
    const char *fabric;           /* gpu.fabric's "<clusterUuid>/<cliqueId>"; "": not reported */
    /* "CLAIM: why" of the last JOIN for this rank that failed the token check; "": none */
    const char *refused_claim;
};
/* Rank 0 only: PF_EINVAL for a rank out of range or at another rank. */
int pf_rdv_member(const struct pf_rdv *R, int rank, struct pf_rdv_member_info *out);

/* ---- steps: every rank sends its part, rank 0 answers with the parts or with the decision
 * to stop (naming who was lost or failed), so every rank takes the same path */
enum { PF_RDV_BARRIER = 0, PF_RDV_GATHER, PF_RDV_ALLGATHER };
#define PF_RDV_ALLGATHER_MAX (64u << 10)
struct pf_rdv_step_res {
    bool go;
    uint8_t **blobs; /* per roster position (ALLGATHER everywhere, GATHER at rank 0) */
    size_t *lens;
    int nb; /* entries of blobs and lens */
};
/* 0 when every rank goes on, PF_ERR when the run stops. kind names the step in messages;
 * ok/err: this rank's own success. Free res with pf_rdv_step_res_free, also after PF_ERR. */
int pf_rdv_step(struct pf_rdv *R, const char *kind, bool ok, const char *err, const void *blob,
                size_t len, int mode, double timeout, struct pf_rdv_step_res *res);
void pf_rdv_step_res_free(struct pf_rdv *R, struct pf_rdv_step_res *res);
/* Rank 0 of a scatter step, once every part is in: blobs[pos] (lens[pos] bytes, NULL for
 * none) for nb positions; it may take (free and NULL) what it uses. */
typedef void (*pf_rdv_ready_fn)(void *arg, uint8_t **blobs, size_t *lens, int nb);
/* A gather whose answer gives each rank its own part (the probe rounds' barrier): rank 0
 * gathers every part, calls ready once, then part(arg, pos, out) for each position's answer
 * (only when the run goes on); every other rank gets its part in res->blobs[0]. 0, or
 * PF_ERR when the run stops. */
int pf_rdv_step_scatter(struct pf_rdv *R, const char *kind, bool ok, const char *err,
                        const void *blob, size_t len, double timeout, pf_rdv_ready_fn ready,
                        void (*part)(void *arg, int pos, struct pf_buf *out), void *arg,
                        struct pf_rdv_step_res *res);

/* ---- the data mesh: one connection to and one from the rank at each probed ring shift */
struct pf_rdv_mesh {
    int nshifts;
    int shifts[3];
    int out_fd[3], in_fd[3]; /* owned by the session: pf_rdv_mesh_close closes them */
    /* this rank's data port while the mesh formed: connections accepted, handed to the mesh,
     * and closed without a DHELLO of this run (strangers, garbage, silence) */
    long long accepted, taken, closed;
};
/* Connects the ring shifts the caller put in out->shifts[0 .. out->nshifts) (1 to 3 shifts,
 * each 1 .. size-1: the link probes' survey shifts) by deadline (and the cutoff), then fills
 * in the descriptors.
 * 0, or PF_ERR with err saying which connection failed. */
int pf_rdv_mesh_connect(struct pf_rdv *R, struct pf_rdv_mesh *out, double deadline, char *err,
                        size_t nerr);
void pf_rdv_mesh_close(struct pf_rdv *R);
/* A connection of its own for one probe between this rank and roster position pos, where
 * the mesh has none (a confirmation round): send dials pos's data port and opens it with a
 * DHELLO naming the run, both ranks and the round; !send accepts that connection from pos
 * (strangers and leftovers are closed). The fd (the caller closes it), or -1 with why. */
int pf_rdv_probe_connect(struct pf_rdv *R, int round, int pos, bool send, double deadline,
                         char *why, size_t nwhy);
/* The receiving side of n such connections at once, whatever order they arrive in: from
 * position pos[i] for round[i] into fds[i] (-1 when it did not come). Strangers and leftovers
 * are closed. The number missing (0: all came), why naming the first. */
int pf_rdv_probe_accept_many(struct pf_rdv *R, int n, const int *pos, const int *round, int *fds,
                             double deadline, char *why, size_t nwhy);
/* A probe on one rail (a secondary network; pkg/run/rails.c): from the local address src,
 * out of the interface ifname where the process may bind to one, to ip:port. */
struct pf_rdv_addr {
    const char *ip;
    int port;
    const char *src;
    const char *ifname; /* NULL: the source address alone */
};
/* Dials a->ip:port and opens the connection with the DHELLO of round towards roster position
 * pos (authenticated as every data connection). The fd (non-blocking; the caller closes it),
 * or -1 with why. */
int pf_rdv_probe_dial_addr(struct pf_rdv *R, int round, int pos, const struct pf_rdv_addr *a,
                           double deadline, char *why, size_t nwhy);

/* A rank's roster holds the addresses of its partners only (struct pf_rdv_setup's partners);
 * a peer rank 0 pairs it with later (a confirmation probe) comes with the task. Rank 0:
 * appends position pos's record {rank, ip, port, pod, node} to out as the field "a" (the
 * task's decoder passes it by). PF_EINVAL when this rank holds no address of pos. */
int pf_rdv_addr_put(const struct pf_rdv *R, struct pf_buf *out, int pos);
/* A rank: takes the address of every field "a" of the payload p (rank 0's, peer input)
 * that names a rank of the run. How many it took, or PF_EINVAL when p is not a field
 * payload or a record is malformed. */
int pf_rdv_addr_take(struct pf_rdv *R, const uint8_t *p, size_t len);

/* ---- the summary: rank 0 sends it to every joined rank, the others wait for it */
void pf_rdv_summary_send(struct pf_rdv *R, const void *payload, size_t len);
/* Rank > 0: 0 with *out the SUMMARY frame, or PF_ERR (rank 0 is then marked lost). */
int pf_rdv_summary_recv(struct pf_rdv *R, struct pf_rdv_msg *out);

/* ---- a message received: a decoded frame with its fields; owns a copy of the payload */
struct pf_rdv_msg {
    int type;
    uint8_t *payload;
    size_t len;
    struct pf_wire_fields f;
    bool mac_ok;  /* the MAC verified (always false when auth is off) */
    bool had_mac; /* the frame carried a MAC */
};
void pf_rdv_msg_free(struct pf_rdv_msg *m);

/* ---- sockets of the caller's own (pkg/run's rail probes) and every data listener's accept
 * discipline */

/* A listening TCP socket on addr ("" = any) and port (0 = ephemeral); *port gets the port. */
int pf_rdv_listen(int *fd, const char *addr, int *port);

/* ---- accept.c: every data listener's accept discipline (the data port's mesh, probes and
 * grid connections, the rails' listeners): non-blocking, the listen queue drained at once, a
 * DHELLO already there taken at accept, at most PF_RDV_PEND_MAX connections (fewer near the
 * descriptor limit) that have not sent their DHELLO, 3 s each from their handshake, read side
 * by side, the oldest evicted past its grace (docs/threat-model-rendezvous.md). */
#define PF_RDV_MAX_DHELLO 512
/* A data connection's opener, checked by the acceptor (run id, receiver, HMAC). */
struct pf_rdv_dhello {
    uint8_t run[PF_WIRE_NONCE]; /* the run id (the roster's) */
    long long src, dst, shift;  /* sender rank, receiver rank, ring shift */
    long long round;            /* a probe's round; -1 for the mesh's connections */
};
#define PF_RDV_PEND_MAX 512
#define PF_RDV_ACCEPT_LFDS 8
struct pf_rdv_pend {
    int fd;
    double opened; /* when its handshake completed (the kernel's count, TCP_INFO), or accepted */
    size_t got;
    uint8_t buf[PF_WIRE_HDR + PF_RDV_MAX_DHELLO + PF_WIRE_MACLEN];
};
struct pf_rdv_acceptor {
    int lfd[PF_RDV_ACCEPT_LFDS];
    int nlfd;
    struct pf_wire_auth auth;
    uint8_t run[PF_WIRE_NONCE];
    long long rank;
    struct pf_rdv_pend pend[PF_RDV_PEND_MAX];
    int npend;
    int cap; /* pending connections kept at most: PF_RDV_PEND_MAX, less near the fd limit */
    double rest_until;
    long long accepted, taken, closed; /* connections accepted, handed over, closed unheard */
};
/* Offered a connection whose DHELLO names this run and this rank: true takes fd (the callee
 * owns it then), false has it closed. */
typedef bool (*pf_rdv_take_fn)(void *arg, int fd, const struct pf_rdv_dhello *h);
/* For the listeners lfd[0..nlfd) of the session R's rank. */
void pf_rdv_acceptor_init(struct pf_rdv_acceptor *A, const struct pf_rdv *R, const int *lfd,
                          int nlfd);
/* What to poll (the pending connections, then the listeners unless resting; at most
 * PF_RDV_PEND_MAX + PF_RDV_ACCEPT_LFDS), dropping those past their wait; *wake is lowered to
 * the next moment something expires. */
int pf_rdv_acceptor_pollfds(struct pf_rdv_acceptor *A, struct pollfd *pfd, double now,
                            double *wake);
/* After poll over those n: reads the pending, accepts the new, offers each complete DHELLO
 * to take; how many it took. */
int pf_rdv_acceptor_serve(struct pf_rdv_acceptor *A, const struct pollfd *pfd, int n,
                          pf_rdv_take_fn take, void *arg);
/* Closes the pending connections (the listeners stay the caller's). */
void pf_rdv_acceptor_close(struct pf_rdv_acceptor *A);

#endif
