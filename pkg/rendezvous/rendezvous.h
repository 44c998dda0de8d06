/* rendezvous: every pod meets rank 0 through the headless Service, they agree on who is
 * there, and exchange what the stages of pkg/run need (barriers, gathers, the data mesh's
 * connections, the summary).
 *
 * Pieces, each usable alone (and unit-tested alone):
 *   identity  who am I, how many are we, where is rank 0 (pure functions of env + hostname)
 *   proto     the wire format: versioned, length-prefixed frames with a magic number and an
 *             optional HMAC-SHA256 bound to per-connection nonces (pure encode/decode)
 *   conn      one TCP connection carrying frames, every read and write under a deadline
 *   stage     the meeting: identity, budget, rank 0's server and JOIN admission, the
 *             joiners' side, the roster; then steps, the data mesh and the summary's
 *             delivery for pkg/run (internal.h: the parts)
 *   outcome   what the meeting concluded, as notes the caller writes into its verdict
 *
 * The meeting knows nothing of verdicts, configs or the fleet: the caller hands it what it
 * needs (struct pf_rdv_setup) and takes back what it concluded (pf_rdv_note_next, the marks,
 * pf_rdv_member). */
#ifndef PF_RENDEZVOUS_H
#define PF_RENDEZVOUS_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../base/base.h"
#include "../base/env.h"
#include "../k8s/map.h"

struct pf_rdv_opts {
    int rank;              /* -1: derive (JOB_COMPLETION_INDEX, RANK, hostname) */
    int world_size;        /* -1: derive (PREFLIGHT_WORLD_SIZE, WORLD_SIZE) */
    char coordinator[512]; /* "": derive (MASTER_ADDR, <prefix>-0.<subdomain>) */
    int port;              /* 0: from the config */
    const char *token;     /* PREFLIGHT_TOKEN, or NULL */
};

/* ---- the meeting, as the stages of pkg/run call it --------------------------------- */

/* One run among pods. Every wait is bounded by the setup's deadline less a second. */
struct pf_rdv;
struct pf_rdv_msg;
struct pf_rdv_ident;

/* Ranks named in one message before "and N more". */
#define PF_RDV_LIST_MAX 12

/* A rank lost, or a rank that reported a failure, with why (pkg/fleet judges them). */
struct pf_rdv_mark {
    int rank;
    char *why;
};
struct pf_rdv_marks {
    struct pf_rdv_mark *v;
    size_t n;
};
/* Adds (rank, why) unless rank is already there. */
void pf_rdv_mark(struct pf_rdv_marks *l, int rank, const char *why);
bool pf_rdv_marked(const struct pf_rdv_marks *l, int rank);
void pf_rdv_marks_free(struct pf_rdv_marks *l);

/* What the caller hands the session: the config's values, the time it has, who this pod is,
 * what its JOIN claims, and where its lines go. Pointers must outlive the session. */
struct pf_rdv_setup {
    double timeout_s;      /* rendezvous.timeoutSeconds: the join phase's length; <= 0: 600 */
    const char *interface; /* rendezvous.interface: the data port binds to its IPv4 address */
    const char *digest;    /* the config's digest: every rank's must be the same */
    double deadline;       /* pf_now() seconds by which the run ends (the guard's); 0: none */
    /* who this pod is (pkg/run's pf_run_whoami); NULL: unknown, id_error says why */
    const struct pf_rdv_ident *id;
    const char *id_error;
    const char *pod, *node; /* this pod's name (NULL: the host name) and node (NULL: "") */
    /* the JOIN's claims, compared among ranks at rank 0 */
    const char *nccl_version;     /* "" or NULL: unknown */
    const char *fabric;           /* gpu.fabric's "<clusterUuid>/<cliqueId>"; NULL: none */
    const struct pf_strlist *env; /* "NAME=VALUE" of the NCCL_* variables (pf_rdv_join_env) */
    /* progress lines for a human; what is under way (for a verdict written on a signal or
     * at the deadline); a new note (pf_rdv_note_next). Each may be NULL. */
    void (*progress)(void *arg, const char *line);
    void (*doing)(void *arg, const char *check, const char *doing);
    void (*noted)(void *arg);
    void *arg;
};

/* The JOIN's variables from env: every NCCL_* "NAME=VALUE", the value of a name secret()
 * calls secret replaced by "sha256:" and the first 8 bytes of its SHA-256 in hex. */
void pf_rdv_join_env(struct pf_strlist *out, const struct pf_env *env,
                     bool (*secret)(const char *name));

/* A new session; notes the checks `rendezvous` and `collective.tcp`. PF_ERR (the check
 * skipped, saying why) when libsodium cannot start; *out is set first, either way, and is
 * freed by pf_rdv_close. */
int pf_rdv_open(struct pf_rdv **out, const struct pf_rdv_opts *o, const struct pf_rdv_setup *su);
void pf_rdv_close(struct pf_rdv *R);

enum { PF_RDV_ALONE = 0, PF_RDV_MET = 1 };
/* Who am I, then the meeting: rank 0 serves JOINs until all came or the join deadline, the
 * others join it and take the roster. PF_RDV_MET (rank 0 must then call pf_rdv_roster_send),
 * PF_RDV_ALONE for a world of one (no socket opened), PF_ERR when this pod is in no run
 * (the checks `rendezvous` and `collective.tcp` then say why). */
int pf_rdv_meet(struct pf_rdv *R);
/* After the meeting: rank 0 sends the roster; every rank records the meeting's evidence
 * and message on the check `rendezvous`. */
void pf_rdv_roster_send(struct pf_rdv *R);

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
/* When the session started (pf_now()) and the seconds left before its cutoff. */
double pf_rdv_t0(const struct pf_rdv *R);
double pf_rdv_left_s(const struct pf_rdv *R);
/* A step stopped the run (a rank lost or failed). */
bool pf_rdv_stopped(const struct pf_rdv *R);
/* The ranks lost and the ranks that reported a failure, with why. */
const struct pf_rdv_marks *pf_rdv_lost(const struct pf_rdv *R);
const struct pf_rdv_marks *pf_rdv_failed(const struct pf_rdv *R);
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
};
/* Rank 0 only: PF_EINVAL for a rank out of range or at another rank. */
int pf_rdv_member(const struct pf_rdv *R, int rank, struct pf_rdv_member_info *out);

/* ---- what the meeting concluded: notes, in the order made, that the caller writes into
 * its verdict (and, at rank 0, a fleet finding into the fleet's findings) */
enum pf_rdv_note_kind {
    PF_RDV_NOTE_CHECK = 0, /* the check exists (checks are noted in the order they appear) */
    PF_RDV_NOTE_FINDING,   /* code and text; fail, else a warning; fleet: every rank's
                            * verdict carries it (rank 0 adds it to the fleet's findings) */
    PF_RDV_NOTE_SKIP,      /* the check is skipped, text says why; soft: only if the check has
                            * neither a skip nor a finding */
    PF_RDV_NOTE_MESSAGE,   /* the check's message is text */
    PF_RDV_NOTE_INT,       /* the check's evidence: key = i */
    PF_RDV_NOTE_DBL,       /* key = d */
    PF_RDV_NOTE_STR,       /* key = text */
    PF_RDV_NOTE_IDENTITY,  /* the evidence map `identity`: the setup's identity */
    PF_RDV_NOTE_POD,       /* this pod's rank is i, its world size world */
    PF_RDV_NOTE_CULPRIT,   /* rank i (pod, node) is to blame: text */
};
struct pf_rdv_note {
    int kind;
    const char *check; /* "rendezvous" or "collective.tcp" */
    const char *code, *key, *text, *pod, *node;
    bool fail, fleet, soft;
    long long i;
    int world;
    double d;
};
/* The next note not yet taken: true with *out filled (its texts live until the next call or
 * pf_rdv_close), false when there is none. */
bool pf_rdv_note_next(struct pf_rdv *R, struct pf_rdv_note *out);

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
};
/* Connects the ring shifts the caller put in out->shifts[0 .. out->nshifts) (1 to 3 shifts,
 * each 1 .. size-1: the link probes' survey shifts), then fills in the descriptors.
 * 0, or PF_ERR with err saying which connection failed. */
int pf_rdv_mesh_connect(struct pf_rdv *R, struct pf_rdv_mesh *out, char *err, size_t nerr);
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

/* ---- the summary: rank 0 sends it to every joined rank, the others wait for it */
void pf_rdv_summary_send(struct pf_rdv *R, const void *payload, size_t len);
/* Rank > 0: 0 with *out the SUMMARY frame, or PF_ERR (rank 0 is then marked lost). */
int pf_rdv_summary_recv(struct pf_rdv *R, struct pf_rdv_msg *out);

/* ---- identity ------------------------------------------------------------------------ */

/* How the pods of this job are named, so that a missing rank can be named too. */
enum pf_rdv_naming {
    PF_RDV_NAMING_NONE = 0, /* unknown: ranks are named by number only */
    PF_RDV_NAMING_ORDINAL,  /* <prefix>-<rank> (StatefulSet, Indexed Job, JobSet) */
    PF_RDV_NAMING_PYTORCH,  /* <job>-master-0 is rank 0, <job>-worker-N is rank N+1 */
    PF_RDV_NAMING_JOBSET,   /* <prefix>-<rank / per_job>-<rank % per_job> (JobSet, TrainJob) */
    PF_RDV_NAMING_MPI,      /* <job>-worker-<rank - shift>; rank 0 <job>-launcher when shift 1 */
    PF_RDV_NAMING_LWS,      /* rank 0 <prefix> (the leader), rank N <prefix>-N */
};

/* Whether the pod carries Kubeflow's training labels (from the podinfo labels file). */
enum pf_rdv_pytorch_hint { PF_RDV_PT_UNKNOWN = 0, PF_RDV_PT_YES, PF_RDV_PT_NO };

struct pf_rdv_ident {
    int rank;
    int world_size;
    char rank_from[96];    /* where the rank came from: "--rank", "hostname trainer-3", ... */
    char world_from[64];   /* "--world-size", "WORLD_SIZE" */
    char coordinator[512]; /* rank 0's host name or address, without the port */
    int port;              /* rank 0's rendezvous port */
    char coord_from[64];   /* "--coordinator", "MASTER_ADDR", "hostname and subdomain" */
    enum pf_rdv_naming naming;
    char prefix[256]; /* ORDINAL: "trainer"; PYTORCH: the job name */
    char domain[256]; /* the part of the FQDN after the host label ("" when unknown) */
    /* which launcher rule decided, and from what (docs/launchers.md) */
    char rule[24];      /* "jobset", "indexed-job", "statefulset", "pytorchjob", ... */
    char explain[512];  /* one sentence: why this rule, what it assumed */
    char from[12][160]; /* the inputs used: "JOB_COMPLETION_INDEX=3", "label k=v", ... */
    int nfrom;
    bool member;     /* false: this pod is no rank (an MPIJob launcher): nothing to meet */
    int per_job;     /* JOBSET naming: pods per Job; MPI naming: the shift (0 or 1) */
    int named_ranks; /* naming covers ranks below this (0: all) */
    bool wants_fqdn; /* the result depends on the FQDN: resolve it and call again */
};

/* What a pod knows about itself besides its environment. */
struct pf_rdv_podinfo {
    const char *hostname;                   /* gethostname() */
    const char *fqdn;                       /* canonical name, "" or NULL when unknown */
    const struct pf_k8s_map *labels;        /* the downward-API labels file; NULL: not mounted */
    const struct pf_k8s_map *annotations;   /* the annotations file; NULL: not mounted */
    const struct pf_k8s_map *volcano_hosts; /* /etc/volcano/<task>.host files: task -> text */
};

/* Derives rank, world size and rank 0's address (docs/design.md, "The stages of `preflight run`").
 * env: the process environment (JOB_COMPLETION_INDEX, RANK, WORLD_SIZE, MASTER_ADDR);
 * hostname: gethostname(); fqdn: the canonical name of the host ("" or NULL when unknown);
 * default_port: the config's rendezvous port. PF_EUSAGE with a message naming the variable
 * when something is missing or malformed. A pure function: tested with tables. */
int pf_rdv_identify(struct pf_rdv_ident *out, const struct pf_rdv_opts *o, const struct pf_env *env,
                    const char *hostname, const char *fqdn, enum pf_rdv_pytorch_hint hint,
                    int default_port);

/* Derives rank, world size and rank 0's address for every launcher preflight knows
 * (docs/launchers.md): options first, then the launcher's own variables, labels and names.
 * Fills rule, explain and from. PF_EUSAGE naming the missing piece and how to give it. Pure. */
int pf_rdv_identify_pod(struct pf_rdv_ident *out, const struct pf_rdv_opts *o,
                        const struct pf_env *env, const struct pf_rdv_podinfo *pi,
                        int default_port);

/* The pod name rank would have under id's naming ("trainer-5"); "" when unknown. */
void pf_rdv_pod_name(char *out, size_t n, const struct pf_rdv_ident *id, int rank);

/* Splits "host", "host:port", "[v6]:port" or a bare IPv6 address. port is left alone when
 * the text has none. PF_EINVAL on an empty host or a bad port. */
int pf_rdv_split_hostport(char *host, size_t n, int *port, const char *text);

/* ---- wire format --------------------------------------------------------------------- */

#define PF_RDV_PROTO 1
#define PF_RDV_MAGIC 0x50465256u /* "PFRV" */
#define PF_RDV_HDR 16
#define PF_RDV_MACLEN 32
#define PF_RDV_NONCE 16
#define PF_RDV_MAX_PAYLOAD (32u << 20)
/* What an unauthenticated peer may send: one JOIN; with its header and MAC it fits 32 KiB */
#define PF_RDV_MAX_JOIN ((32u << 10) - 64)
#define PF_RDV_F_MAC 0x01

enum pf_rdv_type {
    PF_RDV_HELLO = 1, /* rank 0 -> joiner on accept: nonce, versions */
    PF_RDV_JOIN,      /* joiner -> rank 0: who I am, what I see */
    PF_RDV_REJECT,    /* rank 0 -> joiner: why not (then closes) */
    PF_RDV_ROSTER,    /* rank 0 -> all: who is in the run, where their data ports are */
    PF_RDV_STEP,      /* rank -> rank 0: my part of a gather/barrier */
    PF_RDV_RESULT,    /* rank 0 -> all: the gathered parts, or the decision to stop */
    PF_RDV_SUMMARY,   /* rank 0 -> all: findings, culprits, fleet verdict */
    PF_RDV_DHELLO,    /* data connection opener: run id, source, destination, purpose */
    PF_RDV_TYPE_END,
};
const char *pf_rdv_type_name(int type);

struct pf_rdv_frame {
    uint8_t version;
    uint8_t type;
    uint8_t flags;
    uint32_t seq;
    uint32_t len;
    const uint8_t *header;  /* the PF_RDV_HDR header bytes (covered by the MAC) */
    const uint8_t *payload; /* len bytes */
    const uint8_t *mac;     /* PF_RDV_MACLEN bytes, or NULL */
};

/* Decodes one frame at the start of buf (len bytes available). Returns the frame's size
 * (> 0) when it is complete, 0 when more bytes are needed, PF_EINVAL when the bytes are not
 * a preflight frame (bad magic, unknown type or flags), PF_ETOOBIG when the announced payload
 * is over max_payload. A frame of another protocol version still decodes (version says
 * which) so the caller can name the mismatch. Pure; the fuzz target's entry point. */
int pf_rdv_frame_decode(struct pf_rdv_frame *out, const uint8_t *buf, size_t len,
                        size_t max_payload);
/* Writes a header for a frame of this type into hdr. */
void pf_rdv_frame_header(uint8_t hdr[PF_RDV_HDR], int type, int flags, uint32_t seq, uint32_t len);

/* Payload: a sequence of fields [u8 key length][key][u32 BE value length][value]. Keys are
 * 1..64 printable ASCII bytes; a key may repeat (lists). */
struct pf_rdv_field {
    const char *key;
    size_t klen;
    const uint8_t *val;
    size_t vlen;
};
struct pf_rdv_fields {
    struct pf_rdv_field *v;
    size_t n;
};
#define PF_RDV_MAX_FIELDS 65536
/* Splits a payload into fields (pointing into p). PF_EINVAL on any malformed byte. */
int pf_rdv_fields_decode(struct pf_rdv_fields *out, const uint8_t *p, size_t len);
void pf_rdv_fields_free(struct pf_rdv_fields *f);
/* The first field with this key, or NULL. */
const struct pf_rdv_field *pf_rdv_fields_get(const struct pf_rdv_fields *f, const char *key);
/* Copies a text value (no NUL bytes, fits n) into out; PF_ENOENT when absent. */
int pf_rdv_fields_str(char *out, size_t n, const struct pf_rdv_fields *f, const char *key);
/* A decimal integer value; PF_ENOENT when absent, PF_EINVAL when not a number. */
int pf_rdv_fields_int(long long *out, const struct pf_rdv_fields *f, const char *key);
/* A decimal number value, the whole field: digits with an optional minus, point and exponent,
 * finite; PF_ENOENT when absent, else PF_EINVAL (or PF_ETOOBIG) naming the field. */
int pf_rdv_fields_num(double *out, const struct pf_rdv_fields *f, const char *key);
/* Field i as a NUL-terminated copy (caller frees); NULL if it holds a NUL byte. */
char *pf_rdv_field_dup(const struct pf_rdv_field *fl);
bool pf_rdv_field_is(const struct pf_rdv_field *fl, const char *key);

int pf_rdv_put(struct pf_buf *b, const char *key, const void *val, size_t vlen);
int pf_rdv_put_str(struct pf_buf *b, const char *key, const char *s);
int pf_rdv_put_int(struct pf_buf *b, const char *key, long long v);

/* Authentication: HMAC-SHA256 keyed with the token over a direction byte, both nonces, the
 * header and the payload. The header's sequence number and the per-connection nonces make a
 * frame useless on any other connection or at any other position. */
enum { PF_RDV_DIR_TO_ROOT = 0, PF_RDV_DIR_FROM_ROOT = 1, PF_RDV_DIR_DATA = 2 };
struct pf_rdv_auth {
    bool on;
    const char *token;
    uint8_t nonce_s[PF_RDV_NONCE]; /* rank 0's (HELLO), or the run id on data connections */
    uint8_t nonce_c[PF_RDV_NONCE]; /* the joiner's (JOIN) */
};
void pf_rdv_mac(uint8_t out[PF_RDV_MACLEN], const struct pf_rdv_auth *a, int dir,
                const uint8_t hdr[PF_RDV_HDR], const uint8_t *payload, size_t len);
/* Constant-time check of a frame's MAC; false when it has none. */
bool pf_rdv_mac_ok(const struct pf_rdv_auth *a, int dir, const struct pf_rdv_frame *f);
/* Random bytes from the kernel. */
void pf_rdv_random(void *out, size_t n);

/* ---- one connection ------------------------------------------------------------------ */

struct pf_rdv_conn {
    int fd;
    char peer[96];    /* "10.0.0.5:41234" */
    struct pf_buf in; /* bytes read, not yet consumed */
    size_t in_off;
    struct pf_rdv_out *outq;
    size_t noutq, capoutq;
    uint32_t seq_in, seq_out;
    struct pf_rdv_auth auth;
    int dir_out, dir_in;
    size_t max_payload;
};
/* A decoded frame with its fields; owns a copy of the payload. */
struct pf_rdv_msg {
    int type;
    uint8_t *payload;
    size_t len;
    struct pf_rdv_fields f;
    bool mac_ok;  /* the MAC verified (always false when auth is off) */
    bool had_mac; /* the frame carried a MAC */
};
void pf_rdv_msg_free(struct pf_rdv_msg *m);

void pf_rdv_conn_init(struct pf_rdv_conn *c, int fd, const char *peer, bool to_root);
void pf_rdv_conn_close(struct pf_rdv_conn *c);
/* The largest frame payload c takes, and what its input buffer may hold: one such frame
 * (PF_RDV_MAX_JOIN before the peer is authenticated, PF_RDV_MAX_PAYLOAD after). */
void pf_rdv_conn_limit(struct pf_rdv_conn *c, size_t max_payload);
/* Queues a frame (MAC'd when auth is on). */
void pf_rdv_conn_queue(struct pf_rdv_conn *c, int type, const void *payload, size_t len);
/* Writes what it can without blocking: 1 when all is written, 0 when some is left, <0 on
 * error. */
int pf_rdv_conn_flush_some(struct pf_rdv_conn *c);
bool pf_rdv_conn_pending(const struct pf_rdv_conn *c);
/* Reads what is there without blocking: the byte count (> 0), 0 at end of stream,
 * PF_ETIMEOUT when nothing is there yet, another negative code on error. */
int pf_rdv_conn_fill(struct pf_rdv_conn *c);
/* Takes the next complete frame out of the input: 1 (out filled), 0 (need more bytes),
 * or a negative code with the message saying why (garbage, version, MAC, sequence). The
 * MAC is checked when auth is on and a nonce pair is set; with require_mac a frame without
 * a valid MAC is an error. */
int pf_rdv_conn_next(struct pf_rdv_conn *c, struct pf_rdv_msg *out, bool require_mac);
/* Blocking forms, each bounded by deadline (pf_now() seconds). */
int pf_rdv_conn_send(struct pf_rdv_conn *c, int type, const void *payload, size_t len,
                     double deadline);
int pf_rdv_conn_recv(struct pf_rdv_conn *c, struct pf_rdv_msg *out, bool require_mac,
                     double deadline);

/* ---- sockets ------------------------------------------------------------------------- */

/* Resolves host (getaddrinfo: resolv.conf search and ndots apply) and connects to it before
 * deadline. *fd is non-blocking. The message carries getaddrinfo's or connect's words. */
int pf_rdv_dial(int *fd, char *peer, size_t npeer, const char *host, int port, double deadline);
/* A listening TCP socket on addr ("" = any) and port (0 = ephemeral); *port gets the port. */
int pf_rdv_listen(int *fd, const char *addr, int *port);

/* ---- accept.c: every data listener's accept discipline (the data port's mesh, probes and
 * grid connections, the rails' listeners): non-blocking, at most PF_RDV_PEND_MAX connections
 * that have not sent their DHELLO, 3 s each, read side by side, the oldest evicted past its
 * grace, the listeners resting when out of descriptors (docs/threat-model-rendezvous.md). */
#define PF_RDV_MAX_DHELLO 512
/* A data connection's opener, checked by the acceptor (run id, receiver, HMAC). */
struct pf_rdv_dhello {
    uint8_t run[PF_RDV_NONCE]; /* the run id (the roster's) */
    long long src, dst, shift; /* sender rank, receiver rank, ring shift */
    long long round;           /* a probe's round; -1 for the mesh's connections */
};
#define PF_RDV_PEND_MAX 64
#define PF_RDV_ACCEPT_LFDS 8
struct pf_rdv_pend {
    int fd;
    double opened;
    size_t got;
    uint8_t buf[PF_RDV_HDR + PF_RDV_MAX_DHELLO + PF_RDV_MACLEN];
};
struct pf_rdv_acceptor {
    int lfd[PF_RDV_ACCEPT_LFDS];
    int nlfd;
    struct pf_rdv_auth auth;
    uint8_t run[PF_RDV_NONCE];
    long long rank;
    struct pf_rdv_pend pend[PF_RDV_PEND_MAX];
    int npend;
    double rest_until;
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
/* pollfds and serve until take took `want` or the deadline: how many it took. */
int pf_rdv_acceptor_run(struct pf_rdv_acceptor *A, int want, double deadline, pf_rdv_take_fn take,
                        void *arg);
/* Closes the pending connections (the listeners stay the caller's). */
void pf_rdv_acceptor_close(struct pf_rdv_acceptor *A);
/* The next connection on listener lfd, non-blocking and close-on-exec; -1 when there is none
 * (errno says why). Out of descriptors or memory the listener stays readable, so it rests
 * 100 ms first: a poll loop around it does not spin. */
int pf_rdv_accept(int lfd);
/* "a.b.c.d:port" or "[v6]:port" of a socket's peer (peer) or local end (!peer). */
void pf_rdv_sockname(char *out, size_t n, int fd, bool peer);
/* The IP address text alone. */
void pf_rdv_sockaddr_ip(char *out, size_t n, int fd, bool peer);

#endif
