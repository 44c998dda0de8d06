/* Why a missing rank's pod is absent (rendezvous.explainMissing): at the join deadline rank 0
 * asks the API server (pkg/report/absent.c) and hands what it says to the fleet, whose finding
 * missing-ranks and culprits carry it to every rank's verdict, the human form and the
 * termination message; the check rendezvous's evidence `absent` has it field by field. */
#define _GNU_SOURCE
#include "internal.h"

#include "../report/report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The requests' budget: PF_RUN_API_S, at most half of what is left before the waits' end (the
 * joined ranks wait for the roster meanwhile; the stages after keep the rest). */
static double absent_deadline(const struct pf_run *R)
{
    double now = pf_now(), end = pf_run_waits_end(R), s = PF_RUN_API_S;
    if (end > 0 && (end - now) / 2 < s) s = (end - now) / 2;
    return now + (s > 0 ? s : 0);
}

void run_explain_missing(struct pf_run *R, struct pf_fleet *F)
{
    if (!R->config.rendezvous_explain_missing) return;
    struct run_pods *P = R->pods;
    int missing = 0;
    for (int r = 1; r < F->world; r++)
        if (F->r[r].state == PF_FLEET_MISSING) missing++;
    if (!missing) return;
    struct pf_absent *a = pf_xcalloc(PF_ABSENT_MAX, sizeof(*a));
    size_t n = 0;
    for (int r = 1; r < F->world && n < PF_ABSENT_MAX; r++) {
        if (F->r[r].state != PF_FLEET_MISSING) continue;
        a[n].rank = r;
        pf_identity_pod_name(a[n].expect, sizeof(a[n].expect), &P->id, r);
        n++;
    }
    const char *ns = P->id.job.ns[0] ? P->id.job.ns : pf_env_get(&R->ctx.env, "POD_NAMESPACE");
    struct pf_absent_ask q = {.ns = ns,
                              .selector = P->id.selector,
                              .self_pod = P->pod,
                              .coordinator = P->id.coordinator[0] ? P->id.coordinator : "this pod",
                              .port = P->id.port,
                              .by_index = strcmp(P->id.rule, "indexed-job") == 0};
    run_guard(R, "rendezvous", "asking the API server why %d rank%s never joined", missing,
              missing == 1 ? "" : "s");
    char from[1024];
    pf_absent_read(a, n, &q, &R->ctx.env, &R->ctx.host, absent_deadline(R), from, sizeof(from));
    struct pf_node *ev = run_chk(R, "rendezvous")->evidence;
    if (from[0]) pf_node_set_str(ev, "absentFrom", from);
    struct pf_node *seq = pf_node_set_seq(ev, "absent");
    for (size_t i = 0; i < n; i++) {
        struct pf_node *m = pf_node_add_map(seq);
        pf_node_set_int(m, "rank", a[i].rank);
        if (a[i].pod[0])
            pf_node_set_str(m, "pod", a[i].pod);
        else if (a[i].expect[0])
            pf_node_set_str(m, "pod", a[i].expect);
        if (a[i].phase[0]) pf_node_set_str(m, "phase", a[i].phase);
        pf_node_set_str(m, "reason", a[i].reason);
        pf_node_set_str(m, "message", a[i].message);
        if (a[i].node[0]) pf_node_set_str(m, "node", a[i].node);
        if (a[i].ip[0]) pf_node_set_str(m, "address", a[i].ip);
        if (a[i].event[0]) pf_node_set_str(m, "lastWarningEvent", a[i].event);
        char text[1024];
        pf_absent_text(text, sizeof(text), &a[i]);
        F->r[a[i].rank].absent = pf_fleet_keep(F, text);
    }
    if ((size_t)missing > n) pf_node_set_int(ev, "absentNotExplained", missing - (long long)n);
    free(a);
}
