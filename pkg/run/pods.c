/* What the stages among pods share: the verdict's checks, the fleet, the ring (the meeting
 * itself: meet.c). */
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
        f->refused_claim = m.refused_claim;
    }
    F->refused = pf_rdv_refusals(rdv, &F->nrefused);
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
