/* Stage rails: the pods' rails (Multus secondary networks, one NIC each) probed between pods
 * on each rail's own addresses (check `net.rails`, docs/checks/38-net-rails.md).
 *
 *   1. every rank sends rank 0 its rails (network, interface, IPv4/prefix, MTU, state, RDMA
 *      device) and its probe listener's port in a scatter step; rank 0 judges their
 *      agreement (pkg/fleet/rails.c) and answers each rank with its own tasks only: for each
 *      rail, the address of its ring neighbour on the same network;
 *   2. every rank probes each rail once (rails_probe.c): a connection from its rail address
 *      to the neighbour's, opened with the DHELLO, then RAIL_PROBE_BYTES in full-MTU-sized
 *      writes under a short deadline: a transfer of which nothing is acknowledged means
 *      frames of that size are dropped on the path (an MTU blackhole);
 *   3. the results go to rank 0 in a gather; it names the bad rails. Every rank's verdict
 *      gets the findings with the SUMMARY.
 * Skipped, saying why, when no pod has a rail. The rails are the secondary networks of every
 * source of pkg/k8s/attach.h that names an interface (Multus, GKE, and DRA network data when
 * PREFLIGHT_READ_CLAIMS asks: pf_checks_attachments). */
#define _GNU_SOURCE
#include "internal.h"

#include <arpa/inet.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../checks/checks.h"
#include "../k8s/attach.h"
#include "../k8s/k8s.h"
#include "../netif/netif.h"

#define CHECK "net.rails"

/* ---- this pod's rails: the secondary networks of every source (Multus network-status, GKE
 * multi-networking, DRA claims with network data; pkg/k8s/attach.h) that name an interface,
 * as the interfaces are */

static void rail_from(struct pf_fleet_rail *r, const struct pf_k8s_attach *a,
                      const struct pf_netif_list *l)
{
    memset(r, 0, sizeof(*r));
    pf_strcpy(r->net, sizeof(r->net), a->name);
    pf_strcpy(r->iface, sizeof(r->iface), a->interface);
    r->mtu = a->mtu;
    pf_strlist_join(r->rdma, sizeof(r->rdma), &a->rdma, ",");
    const struct pf_netif *i = pf_netif_find(l, a->interface);
    if (!i) return; /* not in the pod: down, without address */
    r->mtu = i->mtu;
    r->up = i->up && i->running;
    for (size_t k = 0; k < i->naddrs; k++)
        if (i->addrs[k].family == AF_INET) {
            pf_strcpy(r->ip, sizeof(r->ip), i->addrs[k].text);
            r->prefix = i->addrs[k].prefix_len;
            break;
        }
}

/* The podinfo folder and the variables net.multus reads (docs/checks/35-net-multus.md); no
 * wait: net.multus waited for the annotation already. 0 with no rails when there is none. */
int run_rails_mine(struct pf_fleet_rails *out, const struct pf_ctx *ctx)
{
    memset(out, 0, sizeof(*out));
    struct pf_k8s_attachments att;
    pf_checks_attachments(&att, ctx);
    struct pf_netif_list l = {0};
    if (att.n && pf_netif_list(&l) == 0) {
        for (size_t i = 0; i < att.n && out->n < PF_FLEET_RAILS_MAX; i++) {
            if (att.v[i].cluster || !att.v[i].interface[0]) continue;
            rail_from(&out->r[out->n++], &att.v[i], &l);
        }
    }
    pf_err_clear();
    pf_netif_list_free(&l);
    pf_k8s_attachments_free(&att);
    return 0;
}

/* ---- rank 0: the plan and the judgement */

struct rails_run {
    struct pf_run *R;
    struct pf_fleet_rails mine;
    struct pf_fleet_rails *all; /* rank 0: by position */
    struct pf_fleet_railplan plan;
    bool have_plan;
};

static void rails_ready(void *arg, uint8_t **blobs, size_t *lens, int nb)
{
    struct rails_run *X = arg;
    struct pf_rdv *rdv = X->R->pods->rdv;
    int n = pf_rdv_size(rdv);
    X->all = pf_xcalloc((size_t)n, sizeof(*X->all));
    for (int i = 0; i < nb && i < n; i++) {
        if (i == pf_rdv_pos(rdv))
            X->all[i] = X->mine, X->all[i].reported = true;
        else if (blobs[i])
            (void)pf_fleet_rails_decode(&X->all[i], blobs[i], lens[i]);
        free(blobs[i]);
        blobs[i] = NULL;
        lens[i] = 0;
    }
    pf_fleet_rails_plan(&X->plan, X->all, n);
    X->have_plan = true;
    struct pf_fleet *F = run_fleet(X->R);
    if (F) {
        run_sync_fleet(X->R, F);
        pf_fleet_rails_agree(F, &X->plan);
    }
}

static void rails_part(void *arg, int pos, struct pf_buf *out)
{
    struct rails_run *X = arg;
    struct pf_fleet_rail_task t[PF_FLEET_RAIL_TASKS];
    size_t nt = X->have_plan ? pf_fleet_rails_tasks(t, &X->plan, pos) : 0;
    pf_fleet_rail_tasks_encode(out, X->have_plan ? X->plan.nnet : 0, t, nt);
}

/* Step 1: the rails to rank 0, this rank's tasks back. PF_ERR when the run stopped. */
static int exchange_rails(struct rails_run *X, double step_s, int *nets,
                          struct pf_fleet_rail_task *t, size_t *nt)
{
    struct pf_rdv *rdv = X->R->pods->rdv;
    struct pf_buf b;
    pf_buf_init(&b, 1 << 16);
    pf_fleet_rails_encode(&b, &X->mine);
    struct pf_rdv_step_res res;
    int r = pf_rdv_step_scatter(rdv, "rails", true, NULL, b.data, b.len, step_s, rails_ready,
                                rails_part, X, &res);
    pf_buf_free(&b);
    *nt = 0;
    *nets = 0;
    if (r == 0 && pf_rdv_rank(rdv) == 0) {
        *nets = X->have_plan ? X->plan.nnet : 0;
        *nt = X->have_plan ? pf_fleet_rails_tasks(t, &X->plan, pf_rdv_pos(rdv)) : 0;
    } else if (r == 0 && (res.nb < 1 || pf_fleet_rail_tasks_decode(nets, t, nt, PF_FLEET_RAIL_TASKS,
                                                                   pf_rdv_size(rdv), res.blobs[0],
                                                                   res.lens[0]) < 0)) {
        r = PF_ERR;
    }
    pf_rdv_step_res_free(rdv, &res);
    return r;
}

/* Step 3: the results to rank 0, which judges them. */
static void gather_results(struct rails_run *X, const struct pf_fleet_rail_result *mine, size_t n,
                           double step_s)
{
    struct pf_rdv *rdv = X->R->pods->rdv;
    struct pf_buf b;
    pf_buf_init(&b, 1 << 16);
    pf_fleet_rail_results_encode(&b, mine, n);
    struct pf_rdv_step_res res;
    int r = pf_rdv_step(rdv, "rail probes", true, NULL, b.data, b.len, PF_RDV_GATHER, step_s, &res);
    pf_buf_free(&b);
    struct pf_fleet *F = run_fleet(X->R);
    if (pf_rdv_rank(rdv) == 0 && X->have_plan) {
        pf_fleet_rails_add(&X->plan, pf_rdv_pos(rdv), mine, n);
        for (int i = 0; r == 0 && i < res.nb && i < X->plan.n; i++) {
            struct pf_fleet_rail_result got[PF_FLEET_RAIL_TASKS];
            size_t ng = 0;
            if (i == pf_rdv_pos(rdv) || !res.blobs[i] ||
                pf_fleet_rail_results_decode(got, &ng, PF_FLEET_RAIL_TASKS, X->plan.nnet, X->plan.n,
                                             res.blobs[i], res.lens[i]) < 0)
                continue;
            pf_fleet_rails_add(&X->plan, i, got, ng);
        }
        if (F && r == 0) pf_fleet_rails_judge(F, &X->plan);
        pf_fleet_rails_evidence(&X->plan,
                                pf_node_set_seq(run_chk(X->R, CHECK)->evidence, "networks"));
    }
    pf_rdv_step_res_free(rdv, &res);
}

/* ---- every rank: its own rails and probes, as evidence and message */

static void my_evidence(struct pf_run *R, const struct pf_fleet_rails *mine,
                        const struct pf_fleet_rail_task *t, size_t nt,
                        const struct pf_fleet_rail_result *res, size_t nres)
{
    struct pf_rdv *rdv = R->pods->rdv;
    struct pf_check *c = run_chk(R, CHECK);
    struct pf_node *seq = pf_node_set_seq(c->evidence, "rails");
    size_t ok = 0, bad = 0;
    struct pf_buf m;
    pf_buf_init(&m, 4096);
    for (int i = 0; i < mine->n; i++) {
        const struct pf_fleet_rail *r = &mine->r[i];
        struct pf_node *e = pf_node_add_map(seq);
        pf_node_set_str(e, "network", r->net);
        pf_node_set_str(e, "interface", r->iface);
        if (r->ip[0]) pf_node_set_strf(e, "address", "%s/%d", r->ip, r->prefix);
        pf_node_set_int(e, "mtu", r->mtu);
        pf_node_set_bool(e, "up", r->up);
        if (r->rdma[0]) pf_node_set_str(e, "rdmaDevice", r->rdma);
        size_t j = 0, k = 0;
        for (; j < nt && !(t[j].send && strcmp(t[j].name, r->net) == 0); j++)
            ;
        for (; j < nt && k < nres && res[k].net != t[j].net; k++)
            ;
        if (j == nt || k == nres) continue;
        struct pf_node *p = pf_node_set_map(e, "probe");
        char w[160];
        pf_rdv_who(w, sizeof(w), rdv, pf_rdv_ranks(rdv)[t[j].peer]);
        pf_node_set_strf(p, "to", "%s at %s", w, t[j].ip);
        if (res[k].state == PF_RAIL_OK) {
            pf_node_set_dbl(p, "gbps", round(res[k].gbps * 1000) / 1000);
            pf_buf_addf(&m, "%s%s %.3g Gb/s", ok + bad ? ", " : "", r->iface, res[k].gbps);
            ok++;
        } else {
            pf_buf_addf(&m, "%s%s failed", ok + bad ? ", " : "", r->iface);
            bad++;
        }
        if (res[k].why[0])
            pf_node_set_str(p, res[k].state == PF_RAIL_OK ? "note" : "error", res[k].why);
    }
    if (!mine->n)
        pf_check_set_message(c, "this pod has no rail (no secondary network); the others' were "
                                "probed");
    else if (!ok && !bad)
        pf_check_set_message(c, "%d rail%s, none in a ring of two pods or more: not probed",
                             mine->n, mine->n == 1 ? "" : "s");
    else
        pf_check_set_message(c, "%zu of %zu rail probes to the ring neighbour went through: %s", ok,
                             ok + bad, pf_buf_str(&m));
    pf_buf_free(&m);
}

/* The rails' listeners: one on each rail's own address, all on one port (the one the pod
 * publishes), so that a probe reaches this pod only through the rail it tests and nothing
 * on the cluster network can take its place; where that cannot be had (a rail without an
 * address, the port taken on another rail), one on every address. How many, in lfd. */
static int rails_listen(const struct pf_fleet_rails *mine, int *lfd, int *port)
{
    for (int attempt = 0; attempt < 8; attempt++) {
        int n = 0;
        bool ok = true;
        *port = 0;
        for (int i = 0; i < mine->n && ok; i++) {
            if (!mine->r[i].ip[0]) continue;
            int p = *port;
            if (n == PF_RDV_ACCEPT_LFDS || pf_rdv_listen(&lfd[n], mine->r[i].ip, &p) < 0) {
                ok = false;
                break;
            }
            *port = p;
            n++;
        }
        if (ok && n > 0) return n;
        for (int i = 0; i < n; i++)
            close(lfd[i]);
        if (ok) break; /* no rail with an address */
    }
    *port = 0;
    return pf_rdv_listen(&lfd[0], "", port) == 0 ? 1 : 0;
}

static const char *stage_skip(const struct run_pods *P)
{
    if (P->met == RUN_ALONE) return "world of one: no other pod to probe the rails with";
    if (P->met != RUN_MET || pf_rdv_size(P->rdv) < 2) return "no rendezvous: no pods to probe with";
    if (pf_rdv_stopped(P->rdv)) return "the run stopped before the rails were probed";
    return NULL;
}

/* rails → rank 0 → tasks → probes → results → rank 0 */
int run_stage_rails(struct pf_run *R)
{
    struct run_pods *P = R->pods;
    struct pf_check *c = run_chk(R, CHECK);
    const char *skip = stage_skip(P);
    if (skip) {
        pf_check_skip(c, "%s", skip);
        return 0;
    }
    struct pf_rdv *rdv = P->rdv;
    struct rails_run X;
    memset(&X, 0, sizeof(X));
    X.R = R;
    run_rails_mine(&X.mine, &R->ctx);
    int lfd[PF_RDV_ACCEPT_LFDS], nlfd = 0, port = 0;
    if (X.mine.n > 0 && (nlfd = rails_listen(&X.mine, lfd, &port)) > 0) X.mine.port = port;
    double probe_s = pf_run_wait_s(R, "rails.probe"), step_s = probe_s + PF_RUN_STEP_S;
    run_guard(R, CHECK, "exchanging the rails of %d pods", pf_rdv_size(rdv));
    struct pf_fleet_rail_task t[PF_FLEET_RAIL_TASKS];
    struct pf_fleet_rail_result res[PF_FLEET_RAIL_TASKS];
    size_t nt = 0;
    int nets = 0;
    if (exchange_rails(&X, step_s, &nets, t, &nt) < 0) {
        pf_check_skip(c, "the run stopped while the rails were exchanged");
    } else if (nets == 0) {
        pf_check_skip(c, "no pod has a secondary network (Multus) interface: no rail to probe");
    } else {
        run_guard(R, CHECK, "probing the rails between %d pods on %d networks", pf_rdv_size(rdv),
                  nets);
        size_t nres = run_rails_probe(R, lfd, nlfd, &X.mine, t, nt, probe_s, res);
        pf_ctx_progress(&R->ctx, "rails: %zu probe%s on %d network%s", nres, nres == 1 ? "" : "s",
                        nets, nets == 1 ? "" : "s");
        gather_results(&X, res, nres, step_s);
        my_evidence(R, &X.mine, t, nt, res, nres);
    }
    for (int i = 0; i < nlfd; i++)
        close(lfd[i]);
    if (X.have_plan) pf_fleet_railplan_free(&X.plan);
    free(X.all);
    return 0;
}
