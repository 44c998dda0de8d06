/* Rank 0: JOIN admission. A JOIN is checked for its token (the MAC), its rank (duplicate,
 * outside the world size), and whether the run has started; the same pod joining again
 * (a restarted initContainer) replaces its previous connection. */
#define _GNU_SOURCE
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rdv_admit(struct rdv_stage *S, size_t i, struct pf_rdv_msg *msg)
{
    struct rdv_sconn *c = &S->sc[i];
    long long r = -1, world = -1;
    char pod[NAME_MAX_] = "", addr[64];
    pf_rdv_sockaddr_ip(addr, sizeof(addr), c->c.fd, true);
    if (pf_rdv_fields_int(&r, &msg->f, "rank") < 0 ||
        pf_rdv_fields_int(&world, &msg->f, "world") < 0) {
        rdv_sc_drop(S, i, "malformed JOIN");
        return;
    }
    pf_rdv_fields_str(pod, sizeof(pod), &msg->f, "pod");
    char claim[256];
    snprintf(claim, sizeof(claim), "a pod at %s claiming rank %lld%s%s%s", addr, r,
             pod[0] ? " (" : "", pod, pod[0] ? ")" : "");
    bool in_range = r > 0 && r < S->world;

    if (S->auth && !msg->mac_ok) {
        rdv_fleet_finding(S, "rendezvous", "auth-failed", PF_FAIL, NULL, "%s was refused: %s",
                          claim,
                          msg->had_mac ? "its PREFLIGHT_TOKEN differs from rank 0's"
                                       : "it has no PREFLIGHT_TOKEN, rank 0 has one");
        if (in_range && S->m[r].state == M_EMPTY) {
            S->m[r].state = M_REFUSED;
            pf_strcpy(S->m[r].pod, sizeof(S->m[r].pod), pod);
            pf_strcpy(S->m[r].addr, sizeof(S->m[r].addr), addr);
            snprintf(S->m[r].why, sizeof(S->m[r].why),
                     "refused at the rendezvous: its PREFLIGHT_TOKEN does not match (from %s)",
                     addr);
        }
        rdv_sc_reject(S, i, "auth-failed",
                      msg->had_mac ? "rank 0 refused this pod: its PREFLIGHT_TOKEN differs"
                                   : "rank 0 refused this pod: rank 0 requires PREFLIGHT_TOKEN");
        return;
    }
    if (!S->auth && msg->had_mac) {
        rdv_fleet_finding(
            S, "rendezvous", "auth-failed", PF_FAIL, NULL,
            "%s sets PREFLIGHT_TOKEN, rank 0 has none: set the same token in every pod", claim);
        if (in_range && S->m[r].state == M_EMPTY) {
            S->m[r].state = M_REFUSED;
            pf_strcpy(S->m[r].pod, sizeof(S->m[r].pod), pod);
            snprintf(S->m[r].why, sizeof(S->m[r].why),
                     "refused at the rendezvous: it has a PREFLIGHT_TOKEN, rank 0 has none");
        }
        rdv_sc_reject(S, i, "auth-failed", "rank 0 has no PREFLIGHT_TOKEN; this pod has one");
        return;
    }
    if (S->n > 0) {
        rdv_sc_reject(
            S, i, "missing-ranks",
            "too late: rank 0 started the run without this rank (it was declared missing)");
        return;
    }
    if (r == 0) {
        rdv_fleet_finding(S, "rendezvous", "duplicate-rank", PF_FAIL, NULL, "%s, but rank 0 is %s",
                          claim, S->pod);
        rdv_sc_reject(S, i, "duplicate-rank", "rank 0 is another pod");
        return;
    }
    if (!in_range) {
        rdv_fleet_finding(S, "rendezvous", "world-size-mismatch", PF_FAIL, NULL,
                          "%s of world size %lld: outside rank 0's world size %d", claim, world,
                          S->world);
        rdv_sc_reject(S, i, "world-size-mismatch", "this rank is outside rank 0's world size");
        return;
    }
    struct rdv_member *m = &S->m[r];
    if (m->state == M_JOINED) {
        if (strcmp(m->pod, pod) == 0) {
            /* the same pod again: its initContainer restarted; the new connection wins */
            pf_ctx_progress(S->ctx,
                            "rank %lld (%s) rejoined from %s; its previous connection is "
                            "replaced",
                            r, pod, addr);
            if (m->conn >= 0 && (size_t)m->conn != i) rdv_sc_close(S, (size_t)m->conn);
        } else {
            rdv_fleet_finding(
                S, "rendezvous", "duplicate-rank", PF_FAIL, NULL,
                "rank %lld is claimed by two pods: %s (joined from %s) and %s (from %s)", r, m->pod,
                m->addr, pod, addr);
            rdv_sc_reject(S, i, "duplicate-rank", "another pod already holds this rank");
            return;
        }
    }
    memset(m->why, 0, sizeof(m->why));
    pf_strlist_free(&m->env);
    m->state = M_JOINED;
    m->conn = (int)i;
    pf_strcpy(m->pod, sizeof(m->pod), pod);
    pf_rdv_fields_str(m->node, sizeof(m->node), &msg->f, "node");
    pf_strcpy(m->addr, sizeof(m->addr), addr);
    pf_rdv_fields_str(m->data_ip, sizeof(m->data_ip), &msg->f, "dataIp");
    long long dp = 0;
    pf_rdv_fields_int(&dp, &msg->f, "dataPort");
    m->data_port = (int)dp;
    m->world_claimed = world;
    pf_rdv_fields_str(m->version, sizeof(m->version), &msg->f, "version");
    pf_rdv_fields_str(m->digest, sizeof(m->digest), &msg->f, "digest");
    pf_rdv_fields_str(m->nccl_version, sizeof(m->nccl_version), &msg->f, "ncclVersion");
    pf_rdv_fields_str(m->fabric, sizeof(m->fabric), &msg->f, "fabric"); /* optional */
    for (size_t k = 0; k < msg->f.n; k++) {
        if (!pf_rdv_field_is(&msg->f.v[k], "env")) continue;
        char *e = pf_rdv_field_dup(&msg->f.v[k]);
        if (e && m->env.n < 512) pf_strlist_add(&m->env, e);
        free(e);
    }
    c->rank = (int)r;
    c->deadline = 0;
    c->c.max_payload = PF_RDV_MAX_PAYLOAD;
    S->last_join = pf_now();
    int joined = 1;
    for (int k = 1; k < S->world; k++)
        joined += S->m[k].state == M_JOINED;
    pf_ctx_progress(S->ctx, "rank %lld (%s) joined from %s (%d of %d)", r, pod[0] ? pod : "?", addr,
                    joined, S->world);
}
