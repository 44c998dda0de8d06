/* Rank 0: JOIN admission. A JOIN is checked for its token (the MAC over rank 0's nonce for
 * the connection, the run it names and every field, rank, world size and job included), its
 * job (another job's pod that shares the token), its rank
 * (duplicate, outside the world size), and whether the run has started; the same pod joining
 * again (a restarted initContainer) replaces its previous connection. A JOIN that fails the
 * token check changes nothing (docs/threat-model-rendezvous.md). */
#define _GNU_SOURCE
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A JOIN that fails authentication: a stranger, a replayed JOIN, or a pod whose token
 * differs. Nothing it claims is believed, so it changes nothing in the run: no rank slot, no
 * refusal on the list, no culprit. It is counted (pf_rdv_stats) with its address, and the
 * claim is kept on the rank it named in case that rank never joins (pkg/fleet's
 * stranger-refused). The REJECT tells a real pod with another token why, so that its own
 * verdict can say so. */
static void refuse_unverified(struct rdv_session *S, size_t i, long long r, const char *claim,
                              const char *why, const char *reject)
{
    S->refused++;
    snprintf(S->refused_last, sizeof(S->refused_last), "%s: %s", claim, why);
    if (r > 0 && r < S->world) {
        char t[RDV_WHY_MAX];
        snprintf(t, sizeof(t), "%s: %s", claim, why);
        free(S->m[r].refused_claim);
        S->m[r].refused_claim = pf_xstrdup(t);
    }
    double now = pf_now();
    if (S->refused <= 3 || now - S->last_drop_say >= 1) {
        rdv_say(S, "refused %s: %s (%d so far)", claim, why, S->refused);
        S->last_drop_say = now;
    }
    rdv_sc_reject(S, i, PF_WIRE_REFUSED_TOKEN, reject);
}

/* A JOIN refused after it was believed: on the list (pkg/fleet judges it), and the REJECT. */
static void refuse(struct rdv_session *S, size_t i, const struct pf_wire_refused *x,
                   const char *reject)
{
    rdv_refused(S, x);
    rdv_say(S, "refused %s: %s", x->claim, reject);
    rdv_sc_reject(S, i, x->why, reject);
}

void rdv_env_left_out(struct rdv_session *S, int rank, long long n)
{
    S->m[rank].env_left_out = n;
    int ranks = 0;
    for (int r = 0; r < S->world; r++)
        ranks += S->m[r].env_left_out > 0;
    char w[160];
    rdv_who(w, sizeof(w), S, rank);
    S->env_left_out_ranks = ranks;
    snprintf(S->env_left_out_last, sizeof(S->env_left_out_last), "%s: %lld NCCL_* variables", w, n);
    rdv_say(S,
            "%s: %lld of its NCCL_* variables did not fit its JOIN: the ranks do not compare them",
            w, n);
}

/* An authenticated JOIN must name the run of rank 0's HELLO (its MAC covers the name). */
static bool run_named(struct rdv_session *S, size_t i, const struct pf_rdv_msg *msg,
                      struct pf_wire_refused *x)
{
    const struct pf_wire_field *run = pf_wire_fields_get(&msg->f, "run");
    if (run && run->vlen == PF_WIRE_NONCE && memcmp(run->val, S->join_run, PF_WIRE_NONCE) == 0)
        return true;
    x->why = PF_WIRE_REFUSED_RUN;
    refuse(S, i, x,
           "rank 0 refused this pod: its JOIN does not name the run (another preflight "
           "version)");
    return false;
}

/* The job a JOIN names (protocol 4); a piece that is absent or does not fit is unknown. */
static void job_of(struct pf_identity_job *j, const struct pf_rdv_msg *msg)
{
    memset(j, 0, sizeof(*j));
    if (pf_wire_fields_str(j->kind, sizeof(j->kind), &msg->f, "jobKind") < 0) j->kind[0] = '\0';
    if (pf_wire_fields_str(j->ns, sizeof(j->ns), &msg->f, "jobNamespace") < 0) j->ns[0] = '\0';
    if (pf_wire_fields_str(j->name, sizeof(j->name), &msg->f, "jobName") < 0) j->name[0] = '\0';
    if (pf_wire_fields_str(j->uid, sizeof(j->uid), &msg->f, "jobUid") < 0) j->uid[0] = '\0';
}

/* An authenticated JOIN of another job (a pod that shares the token and reached this rank 0
 * through a stale name or a copied coordinator value): refused before it can take a rank,
 * so the rank's own pod still gets in. Only when both jobs are known and shown to differ
 * (pf_identity_job_other); an unknown job is no proof. */
static bool same_job(struct rdv_session *S, size_t i, const struct pf_rdv_msg *msg,
                     struct pf_wire_refused *x)
{
    struct pf_identity_job j;
    job_of(&j, msg);
    if (!pf_identity_job_other(&S->id.job, &j)) return true;
    x->why = PF_WIRE_REFUSED_JOB;
    pf_identity_job_text(x->job, sizeof(x->job), &j);
    pf_identity_job_text(x->root_job, sizeof(x->root_job), &S->id.job);
    char t[2 * PF_WIRE_JOB_MAX + 96];
    snprintf(t, sizeof(t), "rank 0 refused this pod: it is of %s, rank 0 is of %s", x->job,
             x->root_job);
    refuse(S, i, x, t);
    return false;
}

void rdv_admit(struct rdv_session *S, size_t i, struct pf_rdv_msg *msg)
{
    struct rdv_sconn *c = &S->sc[i];
    long long r = -1, world = -1;
    char pod[NAME_MAX_] = "", addr[64];
    pf_rdv_sockaddr_ip(addr, sizeof(addr), c->c.fd, true);
    if (pf_wire_fields_int(&r, &msg->f, "rank") < 0 ||
        pf_wire_fields_int(&world, &msg->f, "world") < 0) {
        rdv_sc_drop(S, i, "malformed JOIN");
        return;
    }
    pf_wire_fields_str(pod, sizeof(pod), &msg->f, "pod");
    struct pf_wire_refused x = {.rank = r, .world = world};
    snprintf(x.claim, sizeof(x.claim), "a pod at %s claiming rank %lld%s%s%s", addr, r,
             pod[0] ? " (" : "", pod, pod[0] ? ")" : "");
    pf_strcpy(x.pod, sizeof(x.pod), pod);
    pf_strcpy(x.addr, sizeof(x.addr), addr);
    const char *claim = x.claim;
    bool in_range = r > 0 && r < S->world;

    if (S->auth && !msg->mac_ok) {
        refuse_unverified(S, i, r, claim,
                          msg->had_mac ? "its HMAC fails: another PREFLIGHT_TOKEN, or a JOIN "
                                         "replayed from another connection"
                                       : "it has no PREFLIGHT_TOKEN, rank 0 has one",
                          msg->had_mac ? "rank 0 refused this pod: its PREFLIGHT_TOKEN differs"
                                       : "rank 0 refused this pod: rank 0 requires "
                                         "PREFLIGHT_TOKEN");
        return;
    }
    if (!S->auth && msg->had_mac) {
        refuse_unverified(S, i, r, claim, "it sets PREFLIGHT_TOKEN, rank 0 has none",
                          "rank 0 has no PREFLIGHT_TOKEN; this pod has one");
        return;
    }
    if (S->auth && !run_named(S, i, msg, &x)) return;
    if (!same_job(S, i, msg, &x)) return;
    if (S->n > 0) {
        x.why = PF_WIRE_REFUSED_LATE;
        refuse(S, i, &x,
               "too late: rank 0 started the run without this rank (it was declared missing)");
        return;
    }
    if (r == 0) {
        x.why = PF_WIRE_REFUSED_DUPLICATE;
        pf_strcpy(x.holder, sizeof(x.holder), S->pod);
        refuse(S, i, &x, "rank 0 is another pod");
        return;
    }
    if (!in_range) {
        x.why = PF_WIRE_REFUSED_WORLD;
        refuse(S, i, &x, "this rank is outside rank 0's world size");
        return;
    }
    struct rdv_member *m = &S->m[r];
    if (m->state == PF_RDV_JOINED) {
        if (strcmp(m->pod, pod) == 0) {
            /* the same pod again: its initContainer restarted; the new connection wins */
            rdv_say(S,
                    "rank %lld (%s) rejoined from %s; its previous connection is "
                    "replaced",
                    r, pod, addr);
            if (m->conn >= 0 && (size_t)m->conn != i) rdv_sc_close(S, (size_t)m->conn);
        } else {
            x.why = PF_WIRE_REFUSED_DUPLICATE;
            pf_strcpy(x.holder, sizeof(x.holder), m->pod);
            pf_strcpy(x.holder_addr, sizeof(x.holder_addr), m->addr);
            refuse(S, i, &x, "another pod already holds this rank");
            return;
        }
    }
    free(m->why);
    m->why = NULL;
    pf_strlist_free(&m->env);
    rdv_member_set(S, (int)r, PF_RDV_JOINED, m->step_got);
    m->conn = (int)i;
    pf_strcpy(m->pod, sizeof(m->pod), pod);
    pf_wire_fields_str(m->node, sizeof(m->node), &msg->f, "node");
    pf_strcpy(m->addr, sizeof(m->addr), addr);
    pf_wire_fields_str(m->data_ip, sizeof(m->data_ip), &msg->f, "dataIp");
    long long dp = 0;
    pf_wire_fields_int(&dp, &msg->f, "dataPort");
    m->data_port = (int)dp;
    m->world_claimed = world;
    pf_wire_fields_str(m->version, sizeof(m->version), &msg->f, "version");
    pf_wire_fields_str(m->digest, sizeof(m->digest), &msg->f, "digest");
    pf_wire_fields_str(m->nccl_version, sizeof(m->nccl_version), &msg->f, "ncclVersion");
    pf_wire_fields_str(m->fabric, sizeof(m->fabric), &msg->f, "fabric"); /* optional */
    long long left_out = 0;
    if (pf_wire_fields_int(&left_out, &msg->f, "envLeftOut") < 0 || left_out < 0) left_out = 0;
    for (size_t k = 0; k < msg->f.n; k++) {
        if (!pf_wire_field_is(&msg->f.v[k], "env")) continue;
        char *e = pf_wire_field_dup(&msg->f.v[k]);
        if (e && m->env.n < 512)
            pf_strlist_add(&m->env, e);
        else if (e)
            left_out++;
        free(e);
    }
    m->env_left_out = 0;
    if (left_out > 0) rdv_env_left_out(S, (int)r, left_out);
    c->rank = (int)r;
    c->deadline = 0;
    pf_rdv_conn_limit(&c->c, PF_WIRE_MAX_PAYLOAD);
    S->last_join = pf_now();
    rdv_say(S, "rank %lld (%s) joined from %s (%d of %d)", r, pod[0] ? pod : "?", addr,
            1 + S->nlive, S->world);
}
