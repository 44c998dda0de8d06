/* The stages that meet the other pods (pkg/rendezvous does the meeting), and what the stages
 * among pods share: the verdict's checks, the fleet, the ring. */
#define _GNU_SOURCE
#include "internal.h"

#include "../checks/checks.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct pf_check *run_chk(struct pf_run *R, const char *id)
{
    return pf_verdict_add_check(&R->verdict, id);
}

static bool has_same_finding(const struct pf_check *c, const char *code, const char *msg)
{
    for (size_t i = 0; i < c->nfindings; i++)
        if (strcmp(c->findings[i].code, code) == 0 && c->findings[i].message &&
            strcmp(c->findings[i].message, msg) == 0)
            return true;
    return false;
}

void run_add_finding_text(struct pf_run *R, const char *check, const char *code, enum pf_status st,
                          const char *remedy, const char *msg)
{
    struct pf_check *c = run_chk(R, check);
    if (has_same_finding(c, code, msg)) return;
    pf_check_add_finding(c, code, st, remedy && *remedy ? remedy : NULL, "%s", msg);
}

/* run_add_finding_text of a finding of the whole job (the fleet's), marked so: its class is
 * node only on a pod the culprits name (pf_verdict_classify). */
static void add_fleet_finding(struct pf_run *R, const char *check, const char *code,
                              enum pf_status st, const char *remedy, const char *msg)
{
    run_add_finding_text(R, check, code, st, remedy, msg);
    struct pf_check *c = run_chk(R, check);
    for (size_t i = 0; i < c->nfindings; i++)
        if (strcmp(c->findings[i].code, code) == 0 && c->findings[i].message &&
            strcmp(c->findings[i].message, msg) == 0)
            c->findings[i].fleet = true;
}

void run_guard(struct pf_run *R, const char *stage_id, const char *fmt, ...)
{
    char doing[768];
    PF_FORMAT_ARGS(doing, fmt);
    pf_verdict_guard_update(&R->verdict, stage_id, doing);
}

int run_ring_rank(const struct pf_run *R, int shift)
{
    const struct pf_rdv *rdv = R->pods->rdv;
    int n = pf_rdv_size(rdv);
    return pf_rdv_ranks(rdv)[((pf_rdv_pos(rdv) + shift) % n + n) % n];
}

void run_sync_fleet(struct pf_run *R, struct pf_fleet *F)
{
    struct pf_rdv *rdv = R->pods->rdv;
    for (int r = 0; r < F->world; r++) {
        struct pf_rdv_member_info m;
        if (pf_rdv_member(rdv, r, &m) < 0) continue;
        struct pf_fleet_rank *f = &F->r[r];
        char b[PF_FLEET_NAME];
        /* the member's strings, not copies: the meeting stays open while the fleet is judged */
        f->state = (enum pf_fleet_state)m.state;
        const char *pod = pf_rdv_pod_of(rdv, r, b, sizeof(b));
        if (pod != b)
            f->pod = pod;
        else if (strcmp(f->pod, b) != 0)
            f->pod = pf_fleet_keep(F, b); /* composed from the naming: the fleet's own copy */
        f->node = pf_rdv_node_of(rdv, r);
        f->addr = m.addr;
        f->why = m.why;
        f->world_claimed = m.world_claimed;
        f->version = m.version;
        f->digest = m.digest;
        f->nccl_version = m.nccl_version;
        f->fabric = m.fabric ? m.fabric : "";
        f->env = m.env;
    }
    F->n = pf_rdv_size(rdv);
    F->roster = pf_rdv_ranks(rdv);
}

void run_apply_fleet(struct pf_run *R, const struct pf_fleet_summary *s, bool only_fleet_checks)
{
    for (size_t i = 0; i < s->nfindings; i++) {
        const struct pf_fleet_finding *x = &s->findings[i];
        if (only_fleet_checks && strcmp(x->check, "rendezvous") != 0 &&
            strcmp(x->check, "collective.tcp") != 0 && strcmp(x->check, "gpu.fabric") != 0 &&
            strcmp(x->check, "net.rails") != 0 && strcmp(x->check, "gang") != 0)
            continue;
        add_fleet_finding(R, x->check, x->code, x->status, x->remedy, x->message);
    }
    for (size_t i = 0; i < s->nculprits; i++)
        pf_verdict_add_culprit(&R->verdict, s->culprits[i].rank, s->culprits[i].pod,
                               s->culprits[i].node, "%s", s->culprits[i].reason);
}

struct pf_fleet *run_fleet(struct pf_run *R)
{
    return R->pods && R->pods->have_fleet ? &R->pods->F : NULL;
}

/* One note of the meeting into the verdict (and the fleet). */
static void apply_note(struct pf_run *R, const struct pf_rdv_note *x)
{
    struct run_pods *P = R->pods;
    if (x->kind == PF_RDV_NOTE_POD) {
        pf_node_set_int(R->verdict.pod, "rank", x->i);
        pf_node_set_int(R->verdict.pod, "worldSize", x->world);
        return;
    }
    if (x->kind == PF_RDV_NOTE_CULPRIT) {
        pf_verdict_add_culprit(&R->verdict, (int)x->i, x->pod, x->node, "%s", x->text);
        return;
    }
    struct pf_check *c = run_chk(R, x->check);
    enum pf_status st = x->fail ? PF_FAIL : PF_WARN;
    switch (x->kind) {
    case PF_RDV_NOTE_FINDING:
        if (x->fleet)
            add_fleet_finding(R, x->check, x->code, st, NULL, x->text);
        else
            run_add_finding_text(R, x->check, x->code, st, NULL, x->text);
        if (x->fleet && P->have_fleet)
            pf_fleet_finding(&P->F.out, x->check, x->code, st, NULL, "%s", x->text);
        break;
    case PF_RDV_NOTE_SKIP:
        if (!x->soft || (c->status != PF_SKIP && c->nfindings == 0))
            pf_check_skip(c, "%s", x->text);
        break;
    case PF_RDV_NOTE_MESSAGE:
        pf_check_set_message(c, "%s", x->text);
        break;
    case PF_RDV_NOTE_INT:
        pf_node_set_int(c->evidence, x->key, x->i);
        break;
    case PF_RDV_NOTE_DBL:
        pf_node_set_dbl(c->evidence, x->key, x->d);
        break;
    case PF_RDV_NOTE_STR:
        pf_node_set_str(c->evidence, x->key, x->text);
        break;
    case PF_RDV_NOTE_IDENTITY:
        pf_run_ident_evidence(pf_node_set_map(c->evidence, "identity"), &P->id);
        break;
    default: /* PF_RDV_NOTE_CHECK: run_chk added it */
        break;
    }
}

void run_rdv_notes(struct pf_run *R)
{
    struct run_pods *P = R->pods;
    if (!P || !P->rdv) return;
    if (!P->have_fleet && pf_rdv_serving(P->rdv)) {
        pf_fleet_init(&P->F, pf_rdv_world(P->rdv));
        P->have_fleet = true;
    }
    struct pf_rdv_note x;
    while (pf_rdv_note_next(P->rdv, &x))
        apply_note(R, &x);
}

static void meet_progress(void *arg, const char *line)
{
    pf_ctx_progress(&((struct pf_run *)arg)->ctx, "%s", line);
}

static void meet_doing(void *arg, const char *check, const char *doing)
{
    pf_verdict_guard_update(&((struct pf_run *)arg)->verdict, check, doing);
}

/* A note is written at once: a verdict the guard writes meanwhile carries it. */
static void meet_noted(void *arg)
{
    run_rdv_notes(arg);
}

/* The join phase's end: rendezvous.timeoutSeconds (600 s when unset) from now, but leaving
 * the stages after it their reserve (meet.reserve) of the time left; at least a second. */
static double join_deadline(const struct pf_run *R)
{
    double now = pf_now(), end = pf_run_waits_end(R);
    double join = R->config.rendezvous_timeout_s > 0 ? R->config.rendezvous_timeout_s : 600;
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
 * checks found). */
static void meet_setup(struct pf_run *R, struct pf_rdv_setup *su)
{
    struct run_pods *P = R->pods;
    const struct pf_config *cfg = &R->config;
    int port = cfg->rendezvous_port > 0 ? cfg->rendezvous_port : 29400;
    bool known = pf_run_whoami(&P->id, &R->opts->rdv, &R->ctx, port) == 0;
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
                  .close = PF_RUN_CLOSE_S},
        .id = known ? &P->id : NULL,
        .id_error = P->id_error,
        .pod = P->pod,
        .node = P->node,
        .nccl_version = P->nccl_version,
        .fabric = P->fabric,
        .env = &P->join_env,
        .progress = meet_progress,
        .doing = meet_doing,
        .noted = meet_noted,
        .arg = R,
        .partners = meet_partners,
    };
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

/* identity, then rank 0 serves JOINs while the others join it */
int run_stage_meet(struct pf_run *R)
{
    struct run_pods *P = R->pods;
    struct pf_rdv_setup su;
    meet_setup(R, &su);
    int r = pf_rdv_open(&P->rdv, &R->opts->rdv, &su);
    if (r == 0) r = pf_rdv_meet(P->rdv);
    run_rdv_notes(R);
    P->met = r < 0 ? RUN_NOT_MET : r;
    return 0;
}

/* Rank 0: the fleet's agreement over every JOIN's claims, then the roster to every rank. */
int run_stage_agree(struct pf_run *R)
{
    struct run_pods *P = R->pods;
    if (P->met != RUN_MET) return 0;
    run_rdv_notes(R);
    struct pf_fleet *F = run_fleet(R);
    if (pf_rdv_rank(P->rdv) == 0 && F) {
        run_sync_fleet(R, F);
        pf_fleet_agree(F, pf_now() - pf_rdv_t0(P->rdv));
        run_apply_fleet(R, &F->out, false);
    }
    pf_rdv_roster_send(P->rdv);
    run_rdv_notes(R);
    return 0;
}
