/* fleet: the judgement of what the ranks reported, as pure functions of data: agreement at
 * the rendezvous (world size, versions, config, NCCL, NCCL_* variables), lost peers, wrong
 * results, the TCP bandwidth floor, slow nodes and links, every rank's statuses and the fleet
 * verdict. No sockets, no clock: rank 0's run fills a struct pf_fleet from what it gathered,
 * these functions add findings and culprits to its summary, and the summary codec carries
 * that summary to every other rank (docs/design.md, "Wire protocol").
 *
 * Also the codecs of what ranks send each other about results (each a fuzz target): the
 * SUMMARY, a rank's report (verdict and check statuses), its TCP all-reduce result and its
 * link measurements. Records are nested fields (pkg/wire/wire.c), never tab-joined. */
#ifndef PF_FLEET_H
#define PF_FLEET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../base/base.h"
#include "../collective/collective.h"
#include "../wire/wire.h"
#include "../verdict/verdict.h"

#define PF_FLEET_NAME 128

enum pf_fleet_state { PF_FLEET_MISSING = 0, PF_FLEET_JOINED, PF_FLEET_REFUSED, PF_FLEET_LOST };

/* A check of one rank's report that is neither pass nor skip: its id (an index into the fleet's
 * table of check ids, which every rank shares), its status and its finding codes. */
struct pf_fleet_check {
    uint16_t id;
    uint8_t status; /* PF_FLEET_ST_* */
    char *own_id;   /* the id, when the fleet's table was full; NULL otherwise */
    struct pf_strlist codes;
};
/* A check's status in one byte: none (not in the rank's report), or pf_status + 1, or a
 * status the fleet does not know ("?"). */
enum { PF_FLEET_ST_NONE = 0, PF_FLEET_ST_OTHER = PF_FAIL + 2 };
#define PF_FLEET_IDS_MAX 1024 /* distinct check ids the fleet keeps a table of */

/* The traits of a pod's inventory that rank 0 compares across its gang (check `gang`,
 * gang.c, docs/checks/39-gang.md), in the order they are judged: within a family (the GPUs,
 * the HCAs) a rank named for one trait is not named again for a later one, so one missing
 * HCA is one finding, not one a trait. */
enum pf_gang_trait {
    PF_GANG_GPUS,      /* GPUs in the pod: "8" */
    PF_GANG_GPU_MODEL, /* the distinct models: "NVIDIA H100 80GB HBM3" */
    PF_GANG_NVLINKS,   /* NVLink links active over the pod's GPUs: gpu.health's evidence
                        * `nvlinksActive` where that check ran, else unknown */
    PF_GANG_DRIVER,    /* the NVIDIA driver version */
    PF_GANG_HCAS,      /* RDMA devices in sysfs: "8" */
    PF_GANG_PROVIDER,  /* their distinct providers: "mlx5" */
    PF_GANG_PORTS,     /* ACTIVE ports: "8" */
    PF_GANG_RATE,      /* the distinct rates of the ACTIVE ports: "400 Gb/s" */
    PF_GANG_LINK,      /* the distinct link layers: "InfiniBand" */
    PF_GANG_PCIE,      /* the distinct PCIe links of the NICs: "x16 at 32.0 GT/s PCIe" */
    PF_GANG_FIRMWARE,  /* the distinct firmware versions of the HCAs */
    PF_GANG_NICS,      /* the interfaces NCCL's socket transport would use: "eth0" */
    PF_GANG_NCCL,      /* the NCCL library's version */
    PF_GANG_NETWORKS,  /* the pod's secondary networks (attachments): "ml/a,ml/b", "none" */
    PF_GANG_NTRAITS
};
#define PF_GANG_VALUE 160 /* a trait's value on the wire, at most (bytes, NUL included) */

/* What rank 0 knows of one rank. The strings refer to the meeting's record of the rank
 * (pkg/run: run_sync_fleet), never NULL ("" when unknown): they are valid while the meeting
 * is open, and run_sync_fleet refreshes them before each judgement. */
struct pf_fleet_rank {
    enum pf_fleet_state state;
    const char *pod, *node, *addr;
    const char *why; /* refused: why */
    /* its JOIN's claims */
    long long world_claimed;
    const char *version, *digest, *nccl_version;
    const struct pf_strlist *env; /* "NAME=VALUE" of its NCCL_* variables (secrets hashed) */
    const char *fabric;           /* gpu.fabric's "<clusterUuid>/<cliqueId>"; "": not reported */
    /* "CLAIM: why" of the last JOIN for this rank that failed the token check ("": none) */
    const char *refused_claim;
    /* missing: what the API server says of its pod ("pod x Pending, Unschedulable: ...";
     * rendezvous.explainMissing), NULL when not asked */
    const char *absent;
    /* its TCP all-reduce */
    bool ar_done;
    double ar_seconds;
    long long ar_wrong, ar_first_bad;
    char iface[16]; /* IFNAMSIZ */
    /* its report: each check's status by the fleet's check ids (st[0 .. nst)), how many
     * passed, and the checks that did not pass or skip, with their codes */
    bool reported;
    char verdict[8];
    uint8_t *st;
    uint16_t nst, passed, nbad;
    struct pf_fleet_check *bad;
    /* its inventory (gang.c): each trait's value interned in the fleet's table (0: unknown),
     * [PF_GANG_NTRAITS] its group's value; ports not ACTIVE (-1: unknown) */
    bool inv_reported;
    uint8_t gang_named; /* judging: the families this rank was named in */
    int16_t ports_down;
    uint32_t inv[PF_GANG_NTRAITS + 1];
};

struct pf_fleet_finding {
    char *check, *code, *remedy, *message; /* remedy "" when none */
    enum pf_status status;
};
struct pf_fleet_culprit {
    int rank;
    char *pod, *node, *reason;
};

/* What every rank's verdict carries: the SUMMARY's content. */
struct pf_fleet_summary {
    struct pf_fleet_finding *findings;
    size_t nfindings;
    struct pf_fleet_culprit *culprits;
    size_t nculprits;
    char verdict[16]; /* "" when the summary has no fleet verdict */
    char text[512];
    /* the TCP all-reduce among all ranks (have_tcp) */
    bool have_tcp, correct;
    long long bytes, ranks, iterations;
    double seconds, algbw, busbw;
    double expected; /* tcp.minBusbwGBps; < 0 when unset */
    bool have_links;
    double median;
    int slow_src, slow_dst;
    double slow_gbps;
    /* decoding: the first value refused (named; its part is left out), "" when none */
    char bad[256];
};

struct pf_fleet {
    int world;               /* rank 0's world size */
    struct pf_strlist ids;   /* the check ids of the ranks' reports, shared by all ranks */
    struct pf_strlist kept;  /* strings the fleet holds itself (a pod name it composed) */
    int n;                   /* ranks in the run (the roster) */
    const int *roster;       /* their ranks, in roster order (n entries) */
    struct pf_fleet_rank *r; /* world entries, by rank */
    /* the JOINs rank 0 refused after believing them (the meeting's record, like r's strings) */
    const struct pf_wire_refused *refused;
    size_t nrefused;
    struct pf_fleet_summary out; /* what the judgement found */
    bool lost_any;               /* judge_tcp: a rank was lost after the rendezvous */
    /* gang.c: the distinct inventory values of every rank (index 0: ""), a hash of them */
    struct {
        char **v;
        uint32_t n, cap;
        uint32_t *slot, nslot;
        int trait; /* the trait pf_fleet_minority groups by, while judging */
    } gang;
};

void pf_fleet_init(struct pf_fleet *f, int world);
void pf_fleet_free(struct pf_fleet *f);
void pf_fleet_summary_free(struct pf_fleet_summary *s);

/* "rank 5 (trainer-5)", or "rank 5" when its pod is unknown. */
void pf_fleet_who(char *out, size_t n, const struct pf_fleet *f, int rank);

/* Adds a finding (once: the same check, code and text are not repeated) or a culprit. */
void pf_fleet_finding(struct pf_fleet_summary *s, const char *check, const char *code,
                      enum pf_status st, const char *remedy, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
void pf_fleet_culprit(struct pf_fleet_summary *s, int rank, const char *pod, const char *node,
                      const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* A culprit named by the fleet's own pod and node of rank. */
void pf_fleet_blame(struct pf_fleet *f, int rank, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- agree.c: after the join phase (check `rendezvous`) */

/* gpu.fabric's cross-rank part: each rank's NVLink fabric identity (the cluster UUID and
 * clique id its GPUs registered with, "" and 0 when it has none), as gpu.fabric records it in
 * its evidence (`fabric.clique`: "<clusterUuid>/<cliqueId>"). The ranks of one multi-node
 * NVLink job must all share one; pf_fleet_fabric_compare writes one mismatch for every rank that
 * differs from the identity most ranks have (ties: the lowest rank's) and returns how many
 * differ (it writes at most max). */
struct pf_fleet_fabric {
    int rank;
    char cluster_uuid[40]; /* "" when the rank has no fabric */
    unsigned clique;
};
struct pf_fleet_fabric_mismatch {
    int rank;
    char message[200];
};
size_t pf_fleet_fabric_compare(struct pf_fleet_fabric_mismatch *out, size_t max,
                               const struct pf_fleet_fabric *ranks, size_t n);
/* Reads "<clusterUuid>/<cliqueId>" (gpu.fabric's evidence) into r; -1 when malformed. */
int pf_fleet_fabric_parse(struct pf_fleet_fabric *r, const char *text);
/* clique-mismatch (check gpu.fabric): the joined ranks whose JOIN carried a fabric identity
 * (gpu.fabric ran: multi-node NVLink expected) must all share one cluster UUID and clique id,
 * as NCCL's MNNVL set-up needs (docs/checks/10-gpu.md); each rank outside is a culprit. */
void pf_fleet_fabric_agree(struct pf_fleet *f);

/* Minority by value: groups ranks[0..n) by val, names the ranks outside the biggest group
 * (rank 0's group wins a tie) in out, the biggest group's value in major. Returns how many
 * are outside. */
typedef const char *(*pf_fleet_value_fn)(const struct pf_fleet *f, int rank, char *buf, size_t n);
int pf_fleet_minority(const struct pf_fleet *f, const int *ranks, int n, pf_fleet_value_fn val,
                      int *out, char *major, size_t nmajor);
/* The check `rendezvous` at rank 0, every code that judges the ranks in one place: the JOINs
 * rank 0 refused (duplicate-rank, world-size-mismatch, version-mismatch, job-mismatch),
 * missing-ranks and stranger-refused, refused ranks, world-size-, version-, config-, nccl-version-
 * and env-mismatch, and gpu.fabric's clique-mismatch among the joined ranks that report a fabric
 * (pf_fleet_fabric_agree). waited_s: how long rank 0 waited for the others. */
void pf_fleet_agree(struct pf_fleet *f, double waited_s);

/* ---- judge.c: after the collectives (check `collective.tcp`) and the final gather */

struct pf_fleet_tcp {
    bool ran;     /* rank 0 ran the all-reduce */
    bool stopped; /* the run stopped before its end */
    bool ok;      /* rank 0's own all-reduce succeeded */
    long long bytes;
    int iterations;
    double min_busbw; /* tcp.minBusbwGBps; < 0 when unset */
    const struct pf_coll_link *links;
    size_t nlinks;
    /* the probe rounds' judgement (positions are roster positions), which names the slow
     * nodes and links; NULL: links alone are judged by pf_coll_blame */
    const struct pf_coll_judgement *judgement;
    const struct pf_wire_marks *lost, *failed; /* the rendezvous' marks */
};
/* peer-lost, wrong-result, below-threshold, slow-node, slow-link, and the TCP summary. */
void pf_fleet_judge_tcp(struct pf_fleet *f, const struct pf_fleet_tcp *t);
/* Culprits for failed local checks of every rank that reported. */
void pf_fleet_judge_reports(struct pf_fleet *f);
/* The fleet verdict and its one-line summary: worst is the worst policy-applied status of
 * rank 0's findings (fleet findings included); a culprit or a rank without a report fails. */
void pf_fleet_conclude(struct pf_fleet *f, enum pf_status worst, size_t nculprits,
                       const struct pf_node *first_culprit);
/* Every rank's entry for the verdict's ranks list: its pod, node, state, verdict, how many of
 * its checks passed, and the checks that did not pass or skip. my_ip: rank 0's own address. */
void pf_fleet_ranks(const struct pf_fleet *f, struct pf_ranks *ranks, const char *my_ip);
/* The id of a rank's check that did not pass. */
const char *pf_fleet_check_id(const struct pf_fleet *f, const struct pf_fleet_check *c);
/* A copy the fleet keeps until pf_fleet_free (for a name it composed). */
const char *pf_fleet_keep(struct pf_fleet *f, const char *s);

/* ---- summary.c: codecs (nested fields; pure; each decoder has a fuzz target) */

/* The SUMMARY payload. Encoding fails with PF_ETOOBIG (message says so) over max bytes. */
int pf_fleet_summary_encode(struct pf_buf *out, const struct pf_fleet_summary *s);
/* PF_EINVAL on malformed fields; records that do not decode are skipped, and a number that
 * is not a finite decimal leaves its part out and is named in out->bad. */
int pf_fleet_summary_decode(struct pf_fleet_summary *out, const uint8_t *p, size_t len);

/* A rank's report: its verdict and every check's status and finding codes. Decoded into
 * rank's entry of f: each status in one byte against f's table of check ids, codes only for
 * the checks that did not pass (at most 256 checks, 256 codes a check). */
int pf_fleet_report_encode(struct pf_buf *out, const struct pf_verdict *finalized);
int pf_fleet_report_decode(struct pf_fleet *f, int rank, const uint8_t *p, size_t len);

/* A rank's TCP all-reduce result. */
struct pf_fleet_ar {
    bool ok;
    double seconds;
    long long wrong, first_bad;
    const char *iface;
};
int pf_fleet_ar_encode(struct pf_buf *out, const struct pf_fleet_ar *a);
/* PF_EINVAL when p is not fields, or when a success comes without a finite time (then the
 * rank's all-reduce counts as not done; the rest is decoded). */
int pf_fleet_ar_decode(struct pf_fleet_rank *into, const uint8_t *p, size_t len);

/* ---- probes.c: the probe rounds' messages */

/* A rank's samples (what it received in a round): at most 16 go; PF_ETOOBIG naming the probe
 * samples when there were more or out went over its limit (out keeps whole records only). */
int pf_fleet_samples_encode(struct pf_buf *out, const struct pf_coll_sample *s, size_t n);
/* Up to max well-formed samples into out (*n of them); PF_EINVAL when p is not fields. */
int pf_fleet_samples_decode(struct pf_coll_sample *out, size_t *n, size_t max, const uint8_t *p,
                            size_t len);
/* A rank's probes of the next round, and whether that round runs at all. */
/* A rank's CPU over the round (struct pf_coll_cpu), in the same message as its samples:
 * top-level fields cpuWait, cpuSteal, cpuPsi, cpuAvg10, each in 1/10000 (-1: unknown).
 * decode: 0, PF_ENOENT when the message has none (an older rank), PF_EINVAL when malformed;
 * a share out of [0, 1] is refused. */
int pf_fleet_cpu_encode(struct pf_buf *out, const struct pf_coll_cpu *c);
int pf_fleet_cpu_decode(struct pf_coll_cpu *out, const uint8_t *p, size_t len);
int pf_fleet_tasks_encode(struct pf_buf *out, bool more, const struct pf_coll_task *t, size_t n);
/* Up to max tasks whose peer is a position below npos; PF_EINVAL without "more". */
int pf_fleet_tasks_decode(bool *more, struct pf_coll_task *out, size_t *n, size_t max, int npos,
                          const uint8_t *p, size_t len);

/* ---- rails.c: the rails of every pod (its Multus secondary networks, one NIC each) and
 * the per-rail probes between pods (check `net.rails`, docs/checks/38-net-rails.md).
 * Rank 0 gathers every rank's rails, judges their agreement, plans one probe a rail along
 * each network's ring, and judges what the probes found: all O(N) or O(N log N) in the
 * ranks, never pairwise. */

#define PF_FLEET_RAILS_MAX 16 /* rails one pod reports (a GPU node has up to 8 NICs) */
#define PF_FLEET_RAIL_NETS 32 /* distinct networks rank 0 follows; more are named, not probed */
#define PF_FLEET_RAIL_NAME 128
#define PF_FLEET_RAIL_SLOW_RATIO 0.25 /* slow: both probes of a pod under this x the median */

/* One rail of one pod. */
struct pf_fleet_rail {
    char net[PF_FLEET_RAIL_NAME]; /* the network, "ns/nad" as Multus names it */
    char iface[32];               /* "net1" */
    char ip[48];                  /* its IPv4 address, "" when none */
    int prefix;                   /* its prefix length, 0..32 */
    int mtu;
    bool up;       /* administratively up and running */
    char rdma[64]; /* device-info's rdma-device ("mlx5_3"), "" when none */
};
/* What one rank sends rank 0: its rails and the port its probe listener has. */
struct pf_fleet_rails {
    bool reported; /* decoded from the rank's part (not on the wire) */
    int port;
    int n;
    struct pf_fleet_rail r[PF_FLEET_RAILS_MAX];
};
int pf_fleet_rails_encode(struct pf_buf *out, const struct pf_fleet_rails *r);
/* Peer input: PF_EINVAL when p is not fields or has no port; a malformed rail is left out. */
int pf_fleet_rails_decode(struct pf_fleet_rails *out, const uint8_t *p, size_t len);

enum pf_fleet_rail_state {
    PF_RAIL_NOT_RUN = 0, /* no result (the rank did not report, or the probe was not run) */
    PF_RAIL_OK,          /* the transfer completed (or part of it: gbps says how fast) */
    PF_RAIL_UNREACHABLE, /* no connection, or no answer on it */
    PF_RAIL_STALLED,     /* connected, but no full-MTU-sized data arrived: big frames dropped */
};

/* A probe task of one rank: send to the peer on a network (ip:port), or expect its probe. */
struct pf_fleet_rail_task {
    int net; /* the network's index in rank 0's plan: the probe's round */
    char name[PF_FLEET_RAIL_NAME];
    bool send;
    int peer; /* roster position */
    char ip[48];
    int port;
};
#define PF_FLEET_RAIL_TASKS (2 * PF_FLEET_RAILS_MAX)
/* nets: the networks rank 0 planned (0: no pod has a rail). */
int pf_fleet_rail_tasks_encode(struct pf_buf *out, int nets, const struct pf_fleet_rail_task *t,
                               size_t n);
/* Up to max tasks whose peer is a position below npos; PF_EINVAL when p is not fields or
 * has no nets. */
int pf_fleet_rail_tasks_decode(int *nets, struct pf_fleet_rail_task *out, size_t *n, size_t max,
                               int npos, const uint8_t *p, size_t len);

/* What one probe found (the sender reports it). */
struct pf_fleet_rail_result {
    int net;       /* the plan's network index */
    int dst;       /* the position probed */
    int state;     /* enum pf_fleet_rail_state */
    double gbps;   /* PF_RAIL_OK: the rate */
    char why[256]; /* otherwise: what happened */
};
int pf_fleet_rail_results_encode(struct pf_buf *out, const struct pf_fleet_rail_result *r,
                                 size_t n);
/* Up to max well-formed results (net below nnet, dst below npos); PF_EINVAL when p is not
 * fields. */
int pf_fleet_rail_results_decode(struct pf_fleet_rail_result *out, size_t *n, size_t max, int nnet,
                                 int npos, const uint8_t *p, size_t len);

/* One network as rank 0 plans it: the ring of positions that probe on it. */
struct pf_fleet_railnet {
    char name[PF_FLEET_RAIL_NAME];
    int pods;  /* positions that have the network (up or not) */
    int *ring; /* positions whose rail is up with an address, in roster order */
    int nring;
    int *at;   /* by position: its index in ring, -1 when not in it */
    int *rail; /* by position: its rail's index in rails[pos], -1 when none */
    struct pf_fleet_rail_result *res; /* by ring index: the probe from ring[i] to ring[i+1] */
};
struct pf_fleet_railplan {
    int n;                              /* positions */
    const struct pf_fleet_rails *rails; /* by position (borrowed) */
    struct pf_fleet_railnet net[PF_FLEET_RAIL_NETS];
    int nnet;
    int more_nets; /* networks past PF_FLEET_RAIL_NETS: not probed */
};
/* The networks of every position's rails and each network's ring. */
void pf_fleet_rails_plan(struct pf_fleet_railplan *out, const struct pf_fleet_rails *rails, int n);
void pf_fleet_railplan_free(struct pf_fleet_railplan *p);
/* The tasks of position pos (at most PF_FLEET_RAIL_TASKS): each of its rails in a ring of
 * two or more sends to the next position and expects the one before. */
size_t pf_fleet_rails_tasks(struct pf_fleet_rail_task *out, const struct pf_fleet_railplan *p,
                            int pos);
/* Records the results position src reported (those that match its tasks). */
void pf_fleet_rails_add(struct pf_fleet_railplan *p, int src, const struct pf_fleet_rail_result *r,
                        size_t n);
/* Agreement: rail-network-missing, rail-network-extra, rail-subnet-mismatch,
 * rail-mtu-mismatch, rail-down. f->roster maps positions to ranks. */
void pf_fleet_rails_agree(struct pf_fleet *f, const struct pf_fleet_railplan *p);
/* The probes: rail-unreachable, rail-mtu-blackhole, rail-slow. */
void pf_fleet_rails_judge(struct pf_fleet *f, const struct pf_fleet_railplan *p);
/* The networks as evidence: [{name, pods, probed, subnet, mtu, medianGbps}]. */
void pf_fleet_rails_evidence(const struct pf_fleet_railplan *p, struct pf_node *networks);

/* ---- gang.c: gang-relative judgement (check `gang`): every rank's inventory against the
 * others of its group, by sorting (O(N log N) a trait), never pairwise. */

struct pf_gang_trait_def {
    const char *key;  /* its wire key and evidence key */
    const char *code; /* its finding code */
    const char *fmt;  /* the value in a message: "%s HCAs" */
    enum pf_status status;
    int family; /* 0: none; ranks named in a family are not named again within it */
};
extern const struct pf_gang_trait_def pf_gang_traits[PF_GANG_NTRAITS];

/* One pod's inventory as it travels: each trait's text ("" when the pod could not tell), the
 * value of its group (gang.groupBy's label, "" when none), its ports not ACTIVE (-1: unknown). */
struct pf_fleet_inv {
    char v[PF_GANG_NTRAITS][PF_GANG_VALUE];
    char group[PF_GANG_VALUE];
    int ports_down;
};
void pf_fleet_inv_init(struct pf_fleet_inv *inv);
/* Nested fields, one a known trait ("" left out). */
int pf_fleet_inv_encode(struct pf_buf *out, const struct pf_fleet_inv *inv);
/* Peer input: PF_EINVAL when p is not fields; a value that is not printable text of at most
 * PF_GANG_VALUE - 1 bytes is left unknown (and named in the error, the rest decoded: returns
 * PF_EINVAL then too); unknown keys are ignored (a newer rank's traits). */
int pf_fleet_inv_decode(struct pf_fleet_inv *out, const uint8_t *p, size_t len);
/* Keeps inv as rank's inventory (its values interned in f). */
void pf_fleet_gang_add(struct pf_fleet *f, int rank, const struct pf_fleet_inv *inv);
/* The text of rank's trait t ("" unknown); t == PF_GANG_NTRAITS: its group. */
const char *pf_fleet_gang_value(const struct pf_fleet *f, int rank, int t);

struct pf_fleet_gang_opts {
    bool rank0_apart; /* gang.rank0: apart: rank 0 is judged in a group of its own */
    /* the policy-applied status of a code (NULL: the trait's default); a rank is a culprit
     * where its code's status is fail */
    int (*policy)(void *arg, const char *code, int status);
    void *arg;
};
struct pf_fleet_gang_result {
    int ranks;     /* ranks with an inventory */
    int groups;    /* groups of two or more of them */
    int named;     /* ranks named (culprits or named in a warning) */
    int undecided; /* traits without a majority in a group */
};
/* Among the roster's ranks that sent an inventory, by group (the group's value, rank 0 alone
 * when rank0_apart): for each trait, the ranks whose value differs from what a strict majority
 * of the ranks that know it share are named (finding pf_gang_traits[t].code, a culprit where
 * its status is fail); without a strict majority, gang-undecided (warn) names the values,
 * unless positive evidence picks the ranks (the HCA traits: the ranks with ports not ACTIVE,
 * where all the others have none). A trait every rank shares is never a finding. evidence
 * (may be NULL): what was compared, and each group's majority values. */
void pf_fleet_gang_judge(struct pf_fleet *f, const struct pf_fleet_gang_opts *o,
                         struct pf_fleet_gang_result *res, struct pf_node *evidence);

#endif
