/* run's own declarations, shared by its files (run.c the loop, local.c, pods.c, tcp.c,
 * gpu.c, summary.c) and its unit tests. Not part of the module's interface (run.h). */
#ifndef PF_RUN_INTERNAL_H
#define PF_RUN_INTERNAL_H

#include "run.h"

#include "../collective/collective.h"
#include "../fleet/fleet.h"

#define RUN_CHUNK_BYTES (512u << 10)

enum { RUN_NOT_MET = -1, RUN_ALONE = PF_RDV_ALONE, RUN_MET = PF_RDV_MET };

/* The stages among pods: the meeting and what this rank measured. */
struct run_pods {
    struct pf_rdv *rdv;
    int met; /* RUN_NOT_MET, RUN_ALONE, RUN_MET */
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
    struct pf_buf sum; /* rank 0: the SUMMARY payload */
};

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
/* Adds the fleet's findings and culprits to this rank's verdict (again is harmless).
 * only_fleet_checks: a SUMMARY from rank 0 may only speak of `rendezvous` and
 * `collective.tcp`. */
void run_apply_fleet(struct pf_run *R, const struct pf_fleet_summary *s, bool only_fleet_checks);
/* The rank at shift from this one along the roster's ring. */
int run_ring_rank(const struct pf_run *R, int shift);

/* ---- the stages (local.c, pods.c, tcp.c, gpu.c, summary.c) */
int run_stage_local(struct pf_run *R);
int run_stage_counters(struct pf_run *R);
int run_stage_meet(struct pf_run *R);
int run_stage_agree(struct pf_run *R);
int run_stage_tcp(struct pf_run *R);
int run_stage_gpu(struct pf_run *R);
int run_stage_summary(struct pf_run *R);
int run_stage_report(struct pf_run *R);

/* ---- probes.c */
/* The probe rounds among the roster's ranks (pf_coll_rounds_run over the mesh and the
 * steps); rank 0 keeps the judgement and every sample. 0, or PF_ERR (ar_err says why when
 * this rank's probe failed). */
int run_probe_links(struct pf_run *R);

#endif
