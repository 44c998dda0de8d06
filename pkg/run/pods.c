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

void run_guard(struct pf_run *R, const char *stage_id, const char *fmt, ...)
{
    char doing[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(doing, sizeof(doing), fmt, ap);
    va_end(ap);
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
        f->state = (enum pf_fleet_state)m.state;
        pf_strcpy(f->pod, sizeof(f->pod), pf_rdv_pod_of(rdv, r, b, sizeof(b)));
        pf_strcpy(f->node, sizeof(f->node), pf_rdv_node_of(rdv, r));
        pf_strcpy(f->addr, sizeof(f->addr), m.addr);
        pf_strcpy(f->why, sizeof(f->why), m.why);
        f->world_claimed = m.world_claimed;
        pf_strcpy(f->version, sizeof(f->version), m.version);
        pf_strcpy(f->digest, sizeof(f->digest), m.digest);
        pf_strcpy(f->nccl_version, sizeof(f->nccl_version), m.nccl_version);
        pf_strlist_free(&f->env);
        for (size_t i = 0; i < m.env->n; i++)
            pf_strlist_add(&f->env, m.env->v[i]);
    }
    F->n = pf_rdv_size(rdv);
    F->roster = pf_rdv_ranks(rdv);
}

void run_apply_fleet(struct pf_run *R, const struct pf_fleet_summary *s, bool only_fleet_checks)
{
    for (size_t i = 0; i < s->nfindings; i++) {
        const struct pf_fleet_finding *x = &s->findings[i];
        if (only_fleet_checks && strcmp(x->check, "rendezvous") != 0 &&
            strcmp(x->check, "collective.tcp") != 0 && strcmp(x->check, "gpu.fabric") != 0)
            continue;
        run_add_finding_text(R, x->check, x->code, x->status, x->remedy, x->message);
    }
    for (size_t i = 0; i < s->nculprits; i++)
        pf_verdict_add_culprit(&R->verdict, s->culprits[i].rank, s->culprits[i].pod,
                               s->culprits[i].node, "%s", s->culprits[i].reason);
}

/* identity, then rank 0 serves JOINs while the others join it */
int run_stage_meet(struct pf_run *R)
{
    struct run_pods *P = R->pods;
    if (pf_rdv_open(&P->rdv, &R->ctx, &R->opts->rdv) < 0) return 0;
    int r = pf_rdv_meet(P->rdv);
    P->met = r < 0 ? RUN_NOT_MET : r;
    return 0;
}

/* clique-mismatch: the ranks whose JOIN carried an NVLink fabric identity (gpu.fabric ran:
 * multi-node NVLink expected) must all share one cluster UUID and clique id, as NCCL's MNNVL
 * set-up needs (docs/checks/10-gpu.md). */
static void fabric_agree(struct pf_run *R, struct pf_fleet *F)
{
    struct pf_fabric_rank *ranks = pf_xcalloc((size_t)F->world + 1, sizeof(*ranks));
    size_t n = 0;
    for (int r = 0; r < F->world; r++) {
        struct pf_rdv_member_info m;
        if (pf_rdv_member(R->pods->rdv, r, &m) < 0 || m.state != PF_RDV_JOINED || !m.fabric ||
            !m.fabric[0] || pf_fabric_parse(&ranks[n], m.fabric) < 0)
            continue;
        ranks[n++].rank = r;
    }
    struct pf_fabric_mismatch mm[PF_FLEET_LIST_MAX];
    size_t k = pf_fabric_compare(mm, PF_FLEET_LIST_MAX, ranks, n);
    if (k) {
        struct pf_buf b;
        pf_buf_init(&b, 1 << 16);
        for (size_t i = 0; i < k && i < PF_FLEET_LIST_MAX; i++) {
            char w[160];
            pf_fleet_who(w, sizeof(w), F, mm[i].rank);
            pf_buf_addf(&b, "%s%s: %s", i ? "; " : "", w, mm[i].message);
            pf_fleet_blame(F, mm[i].rank, "not in the job's NVLink domain: %s", mm[i].message);
        }
        if (k > PF_FLEET_LIST_MAX) pf_buf_addf(&b, "; and %zu more", k - PF_FLEET_LIST_MAX);
        pf_fleet_finding(&F->out, "gpu.fabric", "clique-mismatch", PF_FAIL, NULL,
                         "%zu of %zu ranks expecting multi-node NVLink are outside the NVLink "
                         "domain of the others: %s",
                         k, n, pf_buf_str(&b));
        pf_buf_free(&b);
    }
    free(ranks);
}

/* Rank 0: the fleet's agreement over every JOIN's claims, then the roster to every rank. */
int run_stage_agree(struct pf_run *R)
{
    struct run_pods *P = R->pods;
    if (P->met != RUN_MET) return 0;
    struct pf_fleet *F = pf_rdv_fleet(P->rdv);
    if (pf_rdv_rank(P->rdv) == 0 && F) {
        run_sync_fleet(R, F);
        pf_fleet_agree(F, pf_now() - pf_rdv_t0(P->rdv));
        fabric_agree(R, F);
        run_apply_fleet(R, &F->out, false);
    }
    pf_rdv_roster_send(P->rdv);
    return 0;
}
