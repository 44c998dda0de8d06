/* run's own declarations, shared by its files (run.c the loop, budget.c, local.c, whoami.c,
 * meet.c, pods.c, tcp.c, probes.c, rails.c, rails_probe.c, gpu.c, summary.c) and its unit
 * tests. Not part of the module's interface (run.h). */
#ifndef PF_RUN_INTERNAL_H
#define PF_RUN_INTERNAL_H

#include "run.h"

#include "../collective/collective.h"
#include "../fleet/fleet.h"
#include "../rendezvous/rendezvous.h"

#define RUN_CHUNK_BYTES (512u << 10)

enum { RUN_NOT_MET = -1, RUN_ALONE = PF_RDV_ALONE, RUN_MET = PF_RDV_MET };

/* The stages among pods: the meeting and what this rank measured. */
struct run_pods {
    struct pf_rdv *rdv;
    int met; /* RUN_NOT_MET, RUN_ALONE, RUN_MET */
    /* what the meeting was handed (pointers of its setup) */
    struct pf_identity id;
    char id_error[1024];
    char digest[96];
    char *nccl_version, *fabric, *pod, *node;
    struct pf_strlist join_env;
    /* rank 0: what the ranks claimed and reported, and the judgement (have_fleet) */
    struct pf_fleet F;
    bool have_fleet;
    struct pf_rdv_mesh mesh;
    /* this rank's TCP all-reduce */
    bool ar_ran, ar_ok;
    double ar_seconds;
    size_t ar_wrong, ar_first_bad;
    char ar_err[640];
    long long bytes;
    int iters;
    /* the links into this rank, and (rank 0) every rank's */
    struct pf_coll_link *mylinks;
    size_t nmylinks;
    struct pf_coll_link *links; /* rank 0: every probe sample, by rank */
    size_t nlinks;
    struct pf_coll_judgement judg; /* rank 0: the probes' judgement (have_judg) */
    bool have_judg;
    int starved_rounds;     /* probe rounds in which this pod's CPU was starved */
    size_t starved_reports; /* rank 0: (rank, round) reports of a starved CPU */
    struct pf_buf sum;      /* rank 0: the SUMMARY payload */
};

/* ---- meet.c: what the meeting is handed, and what the verdict says of it */
/* How one way the meeting ends shows in the verdict (a row of meet.c's meet_ends). */
struct run_meet_end {
    enum pf_rdv_end end;
    const char *code;  /* the finding of check `rendezvous`; NULL: none */
    enum pf_status st; /* its status */
    bool skip;         /* `rendezvous` is skipped: "<skip_pre><the end's message>" */
    const char *skip_pre;
    const char *tcp; /* `collective.tcp` is skipped, saying this; NULL: it is not */
    bool no_tcp;     /* `collective.tcp` is not in the verdict */
    bool blame_root; /* rank 0 is the culprit (never reachable) */
};
/* The row of end into out (REJECTED: the code is refusal's word); false for PF_RDV_END_NONE. */
bool run_meet_end_of(enum pf_rdv_end end, enum pf_wire_refusal refusal, struct run_meet_end *out);
/* The meeting's counters as the evidence of check `rendezvous` (and, after the roster, its
 * message); again is harmless. */
void run_meet_evidence(struct pf_run *R);
/* Frees what run_stage_meet set up for the meeting (after pf_rdv_close). */
void run_pods_free(struct run_pods *P);

/* ---- pods.c: the verdict, the fleet, naming ranks */
struct pf_check *run_chk(struct pf_run *R, const char *id);
/* A finding on this rank's verdict (once). */
void run_add_finding_text(struct pf_run *R, const char *check, const char *code, enum pf_status st,
                          const char *remedy, const char *msg);
/* What is under way, for a verdict written on a signal or at the deadline. */
void run_guard(struct pf_run *R, const char *stage_id, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Copies what rank 0 knows of every rank into the fleet (idempotent). */
void run_sync_fleet(struct pf_run *R, struct pf_fleet *F);
/* Rank 0, rendezvous.explainMissing: what the API server says of each missing rank's pod, into
 * F (pf_fleet_rank.absent) and the evidence of check rendezvous (absent.c). */
void run_explain_missing(struct pf_run *R, struct pf_fleet *F);
/* Adds the fleet's findings and culprits to this rank's verdict (again is harmless).
 * only_fleet_checks: a SUMMARY from rank 0 may only speak of `rendezvous`,
 * `collective.tcp`, `gpu.fabric`, `net.rails` and `gang`. */
void run_apply_fleet(struct pf_run *R, const struct pf_fleet_summary *s, bool only_fleet_checks);
/* The rank at shift from this one along the roster's ring. */
int run_ring_rank(const struct pf_run *R, int shift);
/* Rank 0's fleet once it serves; NULL at the other ranks and before. */
struct pf_fleet *run_fleet(struct pf_run *R);

/* ---- inventory.c: this pod's inventory for check gang, from its local checks' evidence */
void run_inventory(struct pf_fleet_inv *out, struct pf_run *R);
/* The inventory as evidence `inventory` in ev. */
void run_inventory_evidence(struct pf_node *ev, const struct pf_fleet_inv *inv);

/* ---- the stages (local.c, meet.c, tcp.c, gpu.c, summary.c) */
int run_stage_local(struct pf_run *R);
int run_stage_counters(struct pf_run *R);
int run_stage_meet(struct pf_run *R);
int run_stage_agree(struct pf_run *R);
int run_stage_tcp(struct pf_run *R);
int run_stage_gpu(struct pf_run *R);
int run_stage_rails(struct pf_run *R);
int run_stage_summary(struct pf_run *R);
int run_stage_report(struct pf_run *R);
int run_stage_push(struct pf_run *R);

/* ---- probes.c */
/* The probe rounds among the roster's ranks (pf_coll_rounds_run over the mesh and the
 * steps); rank 0 keeps the judgement and every sample. 0, or PF_ERR (ar_err says why when
 * this rank's probe failed). */
int run_probe_links(struct pf_run *R);

/* ---- rails.c, rails_probe.c: stage rails */
#define RAIL_PROBE_BYTES (4u << 20)
/* The DHELLO round of network k's probe: apart from the link probes' rounds. */
#define PF_RUN_RAIL_ROUND 4096
/* This pod's rails: the network-status's secondary networks, as its interfaces are. */
int run_rails_mine(struct pf_fleet_rails *out, const struct pf_ctx *ctx);
/* Runs this rank's rail tasks on its listeners lfd[0..nlfd) for probe_s seconds at most; one
 * result a send task into res (PF_FLEET_RAIL_TASKS of room). Returns how many. */
size_t run_rails_probe(struct pf_run *R, const int *lfd, int nlfd,
                       const struct pf_fleet_rails *mine, const struct pf_fleet_rail_task *t,
                       size_t nt, double probe_s, struct pf_fleet_rail_result *res);

#endif
