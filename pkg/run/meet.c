/* The stages that meet the other pods (pkg/rendezvous does the meeting): what the meeting is
 * handed, and what this pod's verdict says of it. The meeting returns facts (how it ended,
 * its counters, rank 0's refusals); this file names how this pod's meeting ended (meet_ends),
 * writes the counters as the evidence of the check `rendezvous`, and skips `collective.tcp`
 * when there is no run to all-reduce in. What rank 0 concludes about the ranks (refusals,
 * missing ranks, claims) is pkg/fleet/agree.c's. */
#define _GNU_SOURCE
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How this pod's meeting ended, as the check `rendezvous` says it
 * (docs/checks/60-rendezvous.md): the finding's code and status (NULL: none; for
 * PF_RDV_END_REJECTED the code is rank 0's word, pf_wire_refusal_code), whether the check is
 * skipped with the end's message, and why `collective.tcp` is skipped (NULL: it runs, or,
 * with no_tcp, is not in the verdict). */
#define NOT_IN_RUN "no rendezvous: this pod is not in the run"
static const struct run_meet_end meet_ends[] = {
    {.end = PF_RDV_END_MET},
    {.end = PF_RDV_END_ALONE, .tcp = "world of one: no other pod to all-reduce with"},
    {.end = PF_RDV_END_NOT_MEMBER,
     .skip = true,
     .skip_pre = "this pod is no rank: ",
     .tcp = "this pod is no rank of the all-reduce"},
    {.end = PF_RDV_END_NO_CRYPTO, .skip = true, .skip_pre = "", .no_tcp = true},
    {.end = PF_RDV_END_NO_IDENTITY,
     .code = "identity-unknown",
     .st = PF_FAIL,
     .tcp = "no rendezvous: this pod's identity is unknown"},
    {.end = PF_RDV_END_LISTEN_FAILED,
     .code = "listen-failed",
     .st = PF_FAIL,
     .tcp = "no rendezvous: this pod cannot listen"},
    {.end = PF_RDV_END_REJECTED, .st = PF_FAIL, .tcp = NOT_IN_RUN},
    {.end = PF_RDV_END_UNVERIFIED, .code = "auth-failed", .st = PF_FAIL, .tcp = NOT_IN_RUN},
    {.end = PF_RDV_END_NO_START, .code = "timeout", .st = PF_FAIL, .tcp = NOT_IN_RUN},
    /* no proof of another token: nothing this pod's spec can fix, rank 0 never answered */
    {.end = PF_RDV_END_UNAUTHENTICATED, .code = "timeout", .st = PF_FAIL, .tcp = NOT_IN_RUN},
    {.end = PF_RDV_END_UNREACHABLE,
     .code = "missing-ranks",
     .st = PF_FAIL,
     .tcp = NOT_IN_RUN,
     .blame_root = true},
    {.end = PF_RDV_END_OTHER_VERSION, .code = "version-mismatch", .st = PF_FAIL, .tcp = NOT_IN_RUN},
    {.end = PF_RDV_END_BAD_ANSWER, .code = "protocol-error", .st = PF_FAIL, .tcp = NOT_IN_RUN},
};

bool run_meet_end_of(enum pf_rdv_end end, enum pf_wire_refusal refusal, struct run_meet_end *out)
{
    for (size_t i = 0; i < PF_ARRAY_LEN(meet_ends); i++) {
        if (meet_ends[i].end != end) continue;
        *out = meet_ends[i];
        if (end == PF_RDV_END_REJECTED) out->code = pf_wire_refusal_code(refusal);
        return true;
    }
    return false;
}

/* The identity's evidence and the pod's rank: what this pod knows before it meets anyone, so
 * that a verdict the guard writes during the meeting carries it. */
static void meet_identity(struct pf_run *R, bool auth)
{
    struct run_pods *P = R->pods;
    const struct pf_identity *id = &P->id;
    struct pf_node *ev = run_chk(R, "rendezvous")->evidence;
    pf_run_ident_evidence(pf_node_set_map(ev, "identity"), id);
    if (!id->member) return;
    pf_node_set_int(R->verdict.pod, "rank", id->rank);
    pf_node_set_int(R->verdict.pod, "worldSize", id->world_size);
    pf_node_set_int(ev, "rank", id->rank);
    pf_node_set_str(ev, "rankFrom", id->rank_from);
    pf_node_set_int(ev, "worldSize", id->world_size);
    pf_node_set_str(ev, "worldSizeFrom", id->world_from);
    if (id->rank != 0) {
        pf_node_set_str(ev, "coordinator", id->coordinator);
        pf_node_set_str(ev, "coordinatorFrom", id->coord_from);
    }
    pf_node_set_int(ev, "port", id->port);
    pf_node_set_str(ev, "auth", auth ? "hmac-sha256" : "none");
}

void run_meet_evidence(struct pf_run *R)
{
    struct run_pods *P = R->pods;
    if (!P || !P->rdv) return;
    struct pf_rdv_stats s;
    pf_rdv_stats(P->rdv, &s);
    struct pf_check *c = run_chk(R, "rendezvous");
    struct pf_node *ev = c->evidence;
    if (s.refused) {
        pf_node_set_int(ev, "refusedJoins", s.refused);
        pf_node_set_str(ev, "lastRefused", s.last_refused);
    }
    if (s.env_left_out_ranks) {
        pf_node_set_int(ev, "envLeftOutRanks", s.env_left_out_ranks);
        pf_node_set_str(ev, "lastEnvLeftOut", s.last_env_left_out);
    }
    if (s.join_env_left_out) pf_node_set_int(ev, "joinEnvLeftOut", s.join_env_left_out);
    if (!s.rostered) return;
    if (pf_rdv_rank(P->rdv) == 0) {
        if (s.arrival_to_roster >= 0)
            pf_node_set_dbl(ev, "lastArrivalToRosterSeconds",
                            round(s.arrival_to_roster * 1e6) / 1e6);
        pf_node_set_int(ev, "droppedConnections", s.dropped);
        if (s.dropped) pf_node_set_str(ev, "lastDropped", s.last_dropped);
    }
    pf_node_set_int(ev, "joined", s.joined);
    pf_node_set_dbl(ev, "seconds", round(s.seconds * 1000) / 1000);
    int world = pf_rdv_world(P->rdv);
    if (s.joined == world)
        pf_check_set_message(c, "all %d ranks met in %.1f s through %s:%d", world, s.seconds,
                             pf_rdv_rank(P->rdv) == 0 ? "this pod" : P->id.coordinator, P->id.port);
    else
        pf_check_set_message(c, "%d of %d ranks met in %.1f s", s.joined, world, s.seconds);
}

/* What this pod's verdict says of how its meeting ended (meet_ends). */
static void meet_ended(struct pf_run *R)
{
    struct run_pods *P = R->pods;
    enum pf_wire_refusal refusal;
    const char *msg;
    enum pf_rdv_end end = pf_rdv_end(P->rdv, &refusal, &msg);
    struct run_meet_end e;
    if (!run_meet_end_of(end, refusal, &e)) return; /* NONE: it was not opened */
    struct pf_check *c = run_chk(R, "rendezvous");
    if (e.code) run_add_finding_text(R, "rendezvous", e.code, e.st, NULL, msg);
    if (e.skip) pf_check_skip(c, "%s%s", e.skip_pre, msg);
    if (end == PF_RDV_END_ALONE) pf_check_set_message(c, "world of one: no other pod to meet");
    if (!e.no_tcp) {
        struct pf_check *t = run_chk(R, "collective.tcp");
        if (e.tcp) pf_check_skip(t, "%s", e.tcp);
    }
    if (e.blame_root) {
        struct pf_rdv_stats s;
        pf_rdv_stats(P->rdv, &s);
        char b[PF_FLEET_NAME];
        pf_verdict_add_culprit(&R->verdict, 0, pf_rdv_pod_of(P->rdv, 0, b, sizeof(b)), "",
                               "never reachable at %s:%d: %s", P->id.coordinator, P->id.port,
                               s.last_error);
    }
}

static void meet_progress(void *arg, const char *line)
{
    pf_ctx_progress(&((struct pf_run *)arg)->ctx, "%s", line);
}

/* What is under way: a verdict written on a signal or at the deadline says it. */
static void meet_doing(void *arg, const char *doing)
{
    pf_verdict_guard_update(&((struct pf_run *)arg)->verdict, "rendezvous", doing);
}

/* The join phase's end: rendezvous.timeoutSeconds (pf_config_defaults: 600 s) from now, but leaving
 * the stages after it their reserve (meet.reserve) of the time left; at least a second. */
static double join_deadline(const struct pf_run *R)
{
    double now = pf_now(), end = pf_run_waits_end(R);
    double join = R->config.rendezvous_timeout_s;
    if (end > 0) {
        double left = end - now - (pf_run_wait(R, "meet.reserve") - now);
        if (left < join) join = left;
    }
    return now + (join > 1 ? join : 1);
}

/* The positions whose addresses position pos of n gets in its roster: those it dials for
 * the data mesh and the grid (pkg/collective); a confirmation probe's peer comes with its
 * task (probes.c). */
static int meet_partners(void *arg, int pos, int n, int *out, int max)
{
    (void)arg;
    int q[PF_COLL_DIAL_MAX], k = pf_coll_dial_partners(pos, n, q);
    for (int i = 0; i < k && i < max; i++)
        out[i] = q[i];
    return k < max ? k : max;
}

/* What the meeting is handed: the config's values, the run's deadlines and fixed waits, who
 * this pod is, and its JOIN's claims (the NCCL version and gpu.fabric's clique the local
 * checks found). true when this pod's identity is known. */
static bool meet_setup(struct pf_run *R, struct pf_rdv_setup *su)
{
    struct run_pods *P = R->pods;
    const struct pf_config *cfg = &R->config;
    int port = cfg->rendezvous_port;
    bool known = pf_run_whoami(&P->id, &R->opts->identity, &R->ctx, port) == 0;
    if (!known) pf_strcpy(P->id_error, sizeof(P->id_error), pf_err_msg());
    pf_config_digest(P->digest, sizeof(P->digest), cfg);
    const char *nv = pf_node_get_str(R->verdict.environment, "ncclVersion");
    P->nccl_version = pf_xstrdup(nv ? nv : "");
    const struct pf_check *fc = pf_verdict_find_check(&R->verdict, "gpu.fabric");
    const char *fab = fc && fc->status != PF_SKIP ? pf_node_get_str(fc->evidence, "clique") : NULL;
    P->fabric = fab ? pf_xstrdup(fab) : NULL;
    const char *pn = pf_node_get_str(R->verdict.pod, "name");
    const char *nn = pf_node_get_str(R->verdict.pod, "node");
    P->pod = pn ? pf_xstrdup(pn) : NULL;
    P->node = nn ? pf_xstrdup(nn) : NULL;
    pf_rdv_join_env(&P->join_env, &R->ctx.env, pf_verdict_is_secret_name);
    *su = (struct pf_rdv_setup){
        .interface = cfg->rendezvous_interface,
        .digest = P->digest,
        .deadline = pf_run_waits_end(R),
        .join_deadline = join_deadline(R),
        .waits = {.dial = PF_RUN_DIAL_S,
                  .frame = PF_RUN_FRAME_S,
                  .flush = PF_RUN_FLUSH_S,
                  .summary = PF_RUN_SUMMARY_S,
                  .step = PF_RUN_STEP_S,
                  .close = PF_RUN_CLOSE_S,
                  .roster_margin = PF_RUN_ROSTER_MARGIN_S},
        .id = known ? &P->id : NULL,
        .id_error = P->id_error,
        .token = R->opts->identity.token,
        .pod = P->pod,
        .node = P->node,
        .nccl_version = P->nccl_version,
        .fabric = P->fabric,
        .env = &P->join_env,
        .progress = meet_progress,
        .doing = meet_doing,
        .arg = R,
        .partners = meet_partners,
    };
    return known;
}

void run_pods_free(struct run_pods *P)
{
    if (P->have_fleet) pf_fleet_free(&P->F);
    P->have_fleet = false;
    free(P->nccl_version);
    free(P->fabric);
    free(P->pod);
    free(P->node);
    P->nccl_version = P->fabric = P->pod = P->node = NULL;
    pf_strlist_free(&P->join_env);
}

/* identity, then rank 0 serves JOINs while the others join it; then what the verdict says of
 * how it ended. */
int run_stage_meet(struct pf_run *R)
{
    struct run_pods *P = R->pods;
    struct pf_rdv_setup su;
    bool known = meet_setup(R, &su);
    int r = pf_rdv_open(&P->rdv, &su);
    if (r == 0) {
        run_chk(R, "rendezvous");
        run_chk(R, "collective.tcp");
        struct pf_rdv_stats s;
        pf_rdv_stats(P->rdv, &s);
        if (known) meet_identity(R, s.auth);
        r = pf_rdv_meet(P->rdv);
    }
    if (pf_rdv_serving(P->rdv) && !P->have_fleet) {
        pf_fleet_init(&P->F, pf_rdv_world(P->rdv));
        P->have_fleet = true;
    }
    meet_ended(R);
    run_meet_evidence(R);
    P->met = r < 0 ? RUN_NOT_MET : r;
    return 0;
}

/* Rank 0: the fleet's agreement over every JOIN's claims and refusals, then the roster to
 * every rank. */
int run_stage_agree(struct pf_run *R)
{
    struct run_pods *P = R->pods;
    if (P->met != RUN_MET) return 0;
    struct pf_fleet *F = run_fleet(R);
    if (pf_rdv_rank(P->rdv) == 0 && F) {
        run_sync_fleet(R, F);
        run_explain_missing(R, F);
        pf_fleet_agree(F, pf_now() - pf_rdv_t0(P->rdv));
        run_apply_fleet(R, &F->out, false);
    }
    pf_rdv_roster_send(P->rdv);
    run_meet_evidence(R);
    return 0;
}
