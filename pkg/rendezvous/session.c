/* The meeting among pods: who am I, the time budget, rank 0's server or the joiners' side,
 * the roster; then what pkg/run's stages ask of the meeting (steps, the data mesh, the
 * summary's delivery) through the functions of rendezvous.h.
 *
 * Rank 0 serves every connection from one epoll loop (never one peer at a time); the other
 * ranks hold one control connection to rank 0 and wait on it under deadlines. A gather or a
 * barrier is a "step": every rank sends its part, rank 0 answers with the parts or with the
 * decision to stop (naming who was lost), so every rank takes the same path. */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../netif/netif.h"

/* The session of rendezvous.h is the struct rdv_session of internal.h. */
struct pf_rdv {
    struct rdv_session st;
};

static void find_iface(struct rdv_session *S)
{
    struct pf_netif_list l = {0};
    if (pf_netif_list(&l) < 0) return;
    for (size_t i = 0; i < l.n; i++) {
        if (S->su.interface && S->su.interface[0] && strcmp(l.v[i].name, S->su.interface) == 0) {
            for (size_t a = 0; a < l.v[i].naddrs; a++)
                if (l.v[i].addrs[a].family == AF_INET) {
                    pf_strcpy(S->bind_ip, sizeof(S->bind_ip), l.v[i].addrs[a].text);
                    break;
                }
        }
        if (S->my_ip[0] && pf_netif_has_addr(&l.v[i], S->my_ip))
            pf_strcpy(S->iface, sizeof(S->iface), l.v[i].name);
    }
    pf_netif_list_free(&l);
}

void rdv_session_init(struct rdv_session *S)
{
    memset(S, 0, sizeof(*S));
    S->lfd = S->data_lfd = S->ep = -1;
    for (int k = 0; k < 3; k++)
        S->out_fd[k] = S->in_fd[k] = -1;
    S->t0 = pf_now();
}

void rdv_session_free(struct rdv_session *S)
{
    if (S->m) {
        for (int r = 0; r < S->world; r++) {
            pf_strlist_free(&S->m[r].env);
            free(S->m[r].blob);
            free(S->m[r].why);
            free(S->m[r].refused_claim);
            free(S->m[r].step_err);
        }
        free(S->m);
    }
    for (size_t i = 0; i < S->nsc; i++)
        if (S->sc[i].used) pf_rdv_conn_close(&S->sc[i].c);
    free(S->sc);
    free(S->free_sc);
    free(S->unauth);
    free(S->tm);
    if (S->ep >= 0) close(S->ep);
    if (S->lfd >= 0) close(S->lfd);
    if (S->data_lfd >= 0) close(S->data_lfd);
    if (S->have_ctl) pf_rdv_conn_close(&S->ctl);
    rdv_mesh_close(S);
    rdv_roster_free(S);
    pf_wire_marks_free(&S->lost);
    pf_wire_marks_free(&S->failed);
    free(S->refusals);
}

static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* Who am I. PF_ERR when this pod has nothing to meet (the end says why). */
static int stage_identity(struct rdv_session *S)
{
    if (!S->su.id) {
        rdv_end(S, PF_RDV_END_NO_IDENTITY, "%s",
                S->su.id_error && *S->su.id_error ? S->su.id_error
                                                  : "this pod's identity is unknown");
        return PF_ERR;
    }
    S->id = *S->su.id;
    if (!S->id.member) {
        rdv_end(S, PF_RDV_END_NOT_MEMBER, "%s", S->id.explain);
        return PF_ERR;
    }
    char host[256] = "";
    if (gethostname(host, sizeof(host)) != 0) host[0] = '\0';
    host[sizeof(host) - 1] = '\0';
    S->rank = S->id.rank;
    S->world = S->id.world_size;
    pf_strcpy(S->pod, sizeof(S->pod), S->su.pod ? S->su.pod : host);
    pf_strcpy(S->node, sizeof(S->node), S->su.node ? S->su.node : "");
    return 0;
}

/* The time budget is the caller's: nothing waits past the setup's deadline (the cutoff),
 * the join phase ends at its join deadline (none given: the cutoff). */
static void stage_budget(struct rdv_session *S)
{
    S->cutoff = S->su.deadline > 0 ? S->su.deadline : S->t0 + 1e9;
    S->join_deadline = S->su.join_deadline > 0 ? S->su.join_deadline : S->cutoff;
}

/* Rank 0: serve JOINs until all came or the join deadline. pkg/run's agreement follows,
 * then pf_rdv_roster_send. */
static int meet_root(struct rdv_session *S)
{
    if (rdv_root_listen(S) < 0) return PF_ERR;
    rdv_guard(S, "waiting for %d rank%s to join", S->world - 1, S->world - 1 == 1 ? "" : "s");
    rdv_serve(S, S->join_deadline, rdv_join_done);
    return 0;
}

static void roster_root(struct rdv_session *S)
{
    double t_last = S->last_join;
    rdv_root_send_roster(S);
    rdv_serve(S, rdv_wait_end(S, S->su.waits.flush), rdv_flushed);
    S->roster_at = pf_now();
    S->arrival_to_roster = t_last > 0 ? S->roster_at - t_last : -1;
    find_iface(S);
}

/* Rank > 0: join rank 0 and take the roster. */
static int meet_client(struct rdv_session *S)
{
    char b0[NAME_MAX_];
    const char *pod0 = rdv_pod_of(S, 0, b0, sizeof(b0));
    rdv_say(S, "rank %d of %d (%s): joining rank 0%s%s%s at %s:%d", S->rank, S->world,
            S->id.rank_from, pod0[0] ? " (" : "", pod0, pod0[0] ? ")" : "", S->id.coordinator,
            S->id.port);
    if (rdv_client_join(S) < 0) return PF_ERR;
    find_iface(S);
    return 0;
}

/* identity → (world of one) → listen → meet */
static int stage_meet(struct rdv_session *S)
{
    if (stage_identity(S) < 0) return PF_ERR;
    if (S->world == 1) {
        /* a world of one passes without a partner: no socket, no waiting */
        S->end = PF_RDV_END_ALONE;
        rdv_roster_alloc(S, 1);
        S->rk[0] = 0;
        return PF_RDV_ALONE;
    }
    raise_nofile();
    stage_budget(S);
    find_iface(S);
    S->data_port = 0;
    if (pf_rdv_listen(&S->data_lfd, S->bind_ip, &S->data_port) < 0) {
        rdv_end(S, PF_RDV_END_LISTEN_FAILED, "data port: %s", pf_err_msg());
        return PF_ERR;
    }
    if ((S->rank == 0 ? meet_root(S) : meet_client(S)) < 0) return PF_ERR;
    S->end = PF_RDV_END_MET;
    return PF_RDV_MET;
}

/* ---- the session */

int pf_rdv_open(struct pf_rdv **out, const struct pf_rdv_setup *su)
{
    struct pf_rdv *R = pf_xcalloc(1, sizeof(*R));
    struct rdv_session *S = &R->st;
    *out = R;
    rdv_session_init(S);
    S->su = *su;
    S->token = su->token && *su->token ? su->token : NULL;
    S->auth = S->token != NULL;
    if (sodium_init() < 0) {
        rdv_end(S, PF_RDV_END_NO_CRYPTO, "libsodium failed to initialise");
        return PF_ERR;
    }
    return 0;
}

void pf_rdv_close(struct pf_rdv *R)
{
    if (!R) return;
    rdv_session_free(&R->st);
    free(R);
}

int pf_rdv_meet(struct pf_rdv *R)
{
    return stage_meet(&R->st);
}

enum pf_rdv_end pf_rdv_end(const struct pf_rdv *R, enum pf_wire_refusal *refusal,
                           const char **message)
{
    if (refusal) *refusal = R->st.refusal;
    if (message) *message = R->st.end_msg;
    return R->st.end;
}

void pf_rdv_stats(const struct pf_rdv *R, struct pf_rdv_stats *out)
{
    const struct rdv_session *S = &R->st;
    *out = (struct pf_rdv_stats){
        .auth = S->auth,
        .rostered = S->rostered,
        .joined = S->n,
        .seconds = S->seconds,
        .refused = S->refused,
        .last_refused = S->refused_last,
        .dropped = S->dropped,
        .last_dropped = S->dropped_last,
        .arrival_to_roster = S->rostered && S->rank == 0 ? S->arrival_to_roster : -1,
        .env_left_out_ranks = S->env_left_out_ranks,
        .last_env_left_out = S->env_left_out_last,
        .join_env_left_out = (long long)S->env_left_out,
        .last_error = S->last_error,
    };
}

const struct pf_wire_refused *pf_rdv_refusals(const struct pf_rdv *R, size_t *n)
{
    *n = R->st.nrefusals;
    return R->st.refusals;
}

void pf_rdv_roster_send(struct pf_rdv *R)
{
    struct rdv_session *S = &R->st;
    if (S->rank == 0) roster_root(S);
    S->seconds = pf_now() - S->t0;
    S->rostered = true;
    rdv_say(S, "%d of %d ranks in the run after %.1f s", S->n, S->world, S->seconds);
}

int pf_rdv_rank(const struct pf_rdv *R)
{
    return R->st.rank;
}

int pf_rdv_world(const struct pf_rdv *R)
{
    return R->st.world;
}

int pf_rdv_root_world(const struct pf_rdv *R)
{
    return R->st.ro.world > 0 ? R->st.ro.world : R->st.world;
}

int pf_rdv_size(const struct pf_rdv *R)
{
    return R->st.n;
}

const int *pf_rdv_ranks(const struct pf_rdv *R)
{
    return R->st.rk;
}

int pf_rdv_pos(const struct pf_rdv *R)
{
    return R->st.pos;
}

const char *pf_rdv_my_ip(const struct pf_rdv *R)
{
    return R->st.my_ip;
}

const char *pf_rdv_iface(const struct pf_rdv *R)
{
    return R->st.iface;
}

const char *pf_rdv_root_ip(const struct pf_rdv *R)
{
    return R->st.root_ip;
}

int pf_rdv_port(const struct pf_rdv *R)
{
    return R->st.id.port;
}

double pf_rdv_t0(const struct pf_rdv *R)
{
    return R->st.t0;
}

bool pf_rdv_stopped(const struct pf_rdv *R)
{
    return R->st.stopped;
}

const struct pf_wire_marks *pf_rdv_lost(const struct pf_rdv *R)
{
    return &R->st.lost;
}

int pf_rdv_peer_lost(struct pf_rdv *R, char *who, size_t n)
{
    return rdv_peer_lost(&R->st, who, n);
}

const struct pf_wire_marks *pf_rdv_failed(const struct pf_rdv *R)
{
    return &R->st.failed;
}

bool pf_rdv_serving(const struct pf_rdv *R)
{
    return R->st.rank == 0 && R->st.m != NULL;
}

const char *pf_rdv_pod_of(const struct pf_rdv *R, int rank, char *buf, size_t n)
{
    return rdv_pod_of(&R->st, rank, buf, n);
}

const char *pf_rdv_node_of(const struct pf_rdv *R, int rank)
{
    return rdv_node_of(&R->st, rank);
}

void pf_rdv_who(char *out, size_t n, const struct pf_rdv *R, int rank)
{
    rdv_who(out, n, &R->st, rank);
}

int pf_rdv_member(const struct pf_rdv *R, int rank, struct pf_rdv_member_info *out)
{
    const struct rdv_session *S = &R->st;
    if (!S->m || rank < 0 || rank >= S->world)
        return pf_err_set(PF_EINVAL, "no member record of rank %d", rank);
    const struct rdv_member *m = &S->m[rank];
    *out = (struct pf_rdv_member_info){
        .state = m->state,
        .addr = m->addr,
        .why = m->why ? m->why : "",
        .version = m->version,
        .digest = m->digest,
        .nccl_version = m->nccl_version,
        .world_claimed = m->world_claimed,
        .env = &m->env,
        .fabric = m->fabric,
        .refused_claim = m->refused_claim ? m->refused_claim : "",
    };
    return 0;
}

int pf_rdv_step(struct pf_rdv *R, const char *kind, bool ok, const char *err, const void *blob,
                size_t len, int mode, double timeout, struct pf_rdv_step_res *res)
{
    return rdv_step(&R->st, kind, ok, err, blob, len, mode, timeout, res);
}

int pf_rdv_step_scatter(struct pf_rdv *R, const char *kind, bool ok, const char *err,
                        const void *blob, size_t len, double timeout, pf_rdv_ready_fn ready,
                        void (*part)(void *arg, int pos, struct pf_buf *out), void *arg,
                        struct pf_rdv_step_res *res)
{
    return rdv_step_scatter(&R->st, kind, ok, err, blob, len, timeout, ready, part, arg, res);
}

int pf_rdv_probe_connect(struct pf_rdv *R, int round, int pos, bool send, double deadline,
                         char *why, size_t nwhy)
{
    return rdv_probe_connect(&R->st, round, pos, send, deadline, why, nwhy);
}

int pf_rdv_probe_accept_many(struct pf_rdv *R, int n, const int *pos, const int *round, int *fds,
                             double deadline, char *why, size_t nwhy)
{
    return rdv_probe_accept_many(&R->st, n, pos, round, fds, deadline, why, nwhy);
}

int pf_rdv_probe_dial_addr(struct pf_rdv *R, int round, int pos, const struct pf_rdv_addr *a,
                           double deadline, char *why, size_t nwhy)
{
    return rdv_probe_dial_addr(&R->st, round, pos, a, deadline, why, nwhy);
}

int pf_rdv_addr_put(const struct pf_rdv *R, struct pf_buf *out, int pos)
{
    return rdv_addr_put(&R->st, out, pos);
}

int pf_rdv_addr_take(struct pf_rdv *R, const uint8_t *p, size_t len)
{
    return rdv_addr_take(&R->st, p, len);
}

void pf_rdv_acceptor_init(struct pf_rdv_acceptor *A, const struct pf_rdv *R, const int *lfd,
                          int nlfd)
{
    rdv_acceptor_init(A, &R->st, lfd, nlfd);
}

void pf_rdv_step_res_free(struct pf_rdv *R, struct pf_rdv_step_res *res)
{
    rdv_step_res_free(&R->st, res);
    memset(res, 0, sizeof(*res));
}

int pf_rdv_mesh_connect(struct pf_rdv *R, struct pf_rdv_mesh *out, double deadline, char *err,
                        size_t nerr)
{
    struct rdv_session *S = &R->st;
    if (out->nshifts < 1 || out->nshifts > 3) {
        snprintf(err, nerr, "data mesh: %d ring shifts asked for, 1 to 3 are possible",
                 out->nshifts);
        return PF_ERR;
    }
    for (int k = 0; k < out->nshifts; k++)
        if (out->shifts[k] < 1 || out->shifts[k] >= S->n) {
            snprintf(err, nerr, "data mesh: ring shift %d is not between 1 and %d", out->shifts[k],
                     S->n - 1);
            return PF_ERR;
        }
    S->nshifts = out->nshifts;
    for (int k = 0; k < out->nshifts; k++)
        S->shifts[k] = out->shifts[k];
    int r = rdv_mesh_connect(S, deadline, err, nerr);
    out->nshifts = S->nshifts;
    out->accepted = S->mesh_accepted;
    out->taken = S->mesh_taken;
    out->closed = S->mesh_closed;
    for (int k = 0; k < 3; k++) {
        out->shifts[k] = S->shifts[k];
        out->out_fd[k] = S->out_fd[k];
        out->in_fd[k] = S->in_fd[k];
    }
    return r;
}

void pf_rdv_mesh_close(struct pf_rdv *R)
{
    rdv_mesh_close(&R->st);
}

void pf_rdv_summary_send(struct pf_rdv *R, const void *payload, size_t len)
{
    struct rdv_session *S = &R->st;
    /* one encoded copy; a window of ranks at a time holds it in its output queue */
    rdv_send_all(S, PF_WIRE_SUMMARY, payload, len, NULL, NULL, rdv_wait_end(S, S->su.waits.flush));
    rdv_serve(S, rdv_wait_end(S, S->su.waits.flush), rdv_flushed);
}

int pf_rdv_summary_recv(struct pf_rdv *R, struct pf_rdv_msg *out)
{
    struct rdv_session *S = &R->st;
    memset(out, 0, sizeof(*out));
    if (S->root_lost) return PF_ERR;
    int r = pf_rdv_conn_recv(&S->ctl, out, S->auth, rdv_wait_end(S, S->su.waits.summary));
    if (r < 0 && !S->root_lost) {
        S->root_lost = true;
        snprintf(S->root_why, sizeof(S->root_why), "%s", pf_err_msg());
        pf_wire_mark(&S->lost, 0, S->root_why);
    }
    if (r < 0) return PF_ERR;
    if (out->type != PF_WIRE_SUMMARY) return pf_err_set(PF_EINVAL, "rank 0 sent no SUMMARY");
    return 0;
}
