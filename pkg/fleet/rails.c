/* The rails of every pod, judged at rank 0 (check `net.rails`, docs/checks/38-net-rails.md):
 * the same networks in every pod, one subnet and one MTU per network, every rail up; one
 * probe a rail along each network's ring; who is unreachable, who drops full-MTU frames, who
 * is slow. Pure functions of what the ranks reported; values are counted by sorting (O(N log
 * N)), a pod's probes looked up by its ring index (O(1)), never compared pairwise. */
#include "fleet.h"

#include <arpa/inet.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the plan */

static int net_index(struct pf_fleet_railplan *p, const char *name)
{
    for (int k = 0; k < p->nnet; k++)
        if (strcmp(p->net[k].name, name) == 0) return k;
    if (p->nnet == PF_FLEET_RAIL_NETS) return -1;
    struct pf_fleet_railnet *x = &p->net[p->nnet];
    memset(x, 0, sizeof(*x));
    pf_strcpy(x->name, sizeof(x->name), name);
    size_t n = p->n > 0 ? (size_t)p->n : 1;
    x->ring = pf_xcalloc(n, sizeof(*x->ring));
    x->at = pf_xmalloc(n * sizeof(*x->at));
    x->rail = pf_xmalloc(n * sizeof(*x->rail));
    x->res = pf_xcalloc(n, sizeof(*x->res));
    for (size_t i = 0; i < n; i++)
        x->at[i] = x->rail[i] = -1;
    return p->nnet++;
}

void pf_fleet_rails_plan(struct pf_fleet_railplan *out, const struct pf_fleet_rails *rails, int n)
{
    memset(out, 0, sizeof(*out));
    out->n = n;
    out->rails = rails;
    int more = 0;
    for (int pos = 0; pos < n; pos++)
        for (int i = 0; i < rails[pos].n && i < PF_FLEET_RAILS_MAX; i++) {
            const struct pf_fleet_rail *r = &rails[pos].r[i];
            int k = net_index(out, r->net);
            if (k < 0) {
                more++;
                continue;
            }
            struct pf_fleet_railnet *x = &out->net[k];
            if (x->rail[pos] >= 0) continue; /* a network twice in one pod: the first counts */
            x->rail[pos] = i;
            x->pods++;
            if (r->up && r->ip[0] && rails[pos].port > 0) {
                x->at[pos] = x->nring;
                x->ring[x->nring++] = pos;
            }
        }
    out->more_nets = more;
    for (int k = 0; k < out->nnet; k++)
        for (int i = 0; i < out->net[k].nring; i++)
            out->net[k].res[i].dst = out->net[k].ring[(i + 1) % out->net[k].nring];
}

void pf_fleet_railplan_free(struct pf_fleet_railplan *p)
{
    for (int k = 0; k < p->nnet; k++) {
        free(p->net[k].ring);
        free(p->net[k].at);
        free(p->net[k].rail);
        free(p->net[k].res);
    }
    memset(p, 0, sizeof(*p));
}

size_t pf_fleet_rails_tasks(struct pf_fleet_rail_task *out, const struct pf_fleet_railplan *p,
                            int pos)
{
    size_t n = 0;
    if (pos < 0 || pos >= p->n) return 0;
    for (int k = 0; k < p->nnet && n + 2 <= PF_FLEET_RAIL_TASKS; k++) {
        const struct pf_fleet_railnet *x = &p->net[k];
        int i = x->at[pos];
        if (i < 0 || x->nring < 2) continue;
        int next = x->ring[(i + 1) % x->nring], prev = x->ring[(i + x->nring - 1) % x->nring];
        const struct pf_fleet_rail *nr = &p->rails[next].r[x->rail[next]];
        struct pf_fleet_rail_task *t = &out[n++];
        memset(t, 0, sizeof(*t));
        t->net = k;
        pf_strcpy(t->name, sizeof(t->name), x->name);
        t->send = true;
        t->peer = next;
        pf_strcpy(t->ip, sizeof(t->ip), nr->ip);
        t->port = p->rails[next].port;
        t = &out[n++];
        memset(t, 0, sizeof(*t));
        t->net = k;
        pf_strcpy(t->name, sizeof(t->name), x->name);
        t->peer = prev;
    }
    return n;
}

void pf_fleet_rails_add(struct pf_fleet_railplan *p, int src, const struct pf_fleet_rail_result *r,
                        size_t n)
{
    if (src < 0 || src >= p->n) return;
    for (size_t j = 0; j < n; j++) {
        if (r[j].net < 0 || r[j].net >= p->nnet) continue;
        struct pf_fleet_railnet *x = &p->net[r[j].net];
        int i = x->at[src];
        if (i < 0 || x->nring < 2 || x->res[i].dst != r[j].dst) continue;
        x->res[i] = r[j];
    }
}

/* ---- naming */

/* "rank 3 (trainer-3) on node-3, net2 (RDMA device mlx5_4)" */
static void rail_who(char *out, size_t n, const struct pf_fleet *f,
                     const struct pf_fleet_railplan *p, int k, int pos)
{
    int rank = f->roster ? f->roster[pos] : pos;
    char w[200];
    pf_fleet_who(w, sizeof(w), f, rank);
    const char *node = rank >= 0 && rank < f->world ? f->r[rank].node : "";
    int ri = p->net[k].rail[pos];
    const struct pf_fleet_rail *r = ri >= 0 ? &p->rails[pos].r[ri] : NULL;
    struct pf_buf b;
    pf_buf_init(&b, n);
    pf_buf_addf(&b, "%s", w);
    if (*node) pf_buf_addf(&b, " on %s", node);
    if (r) pf_buf_addf(&b, ", %s", r->iface);
    if (r && r->rdma[0]) pf_buf_addf(&b, " (RDMA device %s)", r->rdma);
    pf_strcpy(out, n, pf_buf_str(&b)); /* a name cut at n is still a name */
    pf_buf_free(&b);
}

static int rank_of(const struct pf_fleet *f, int pos)
{
    return f->roster ? f->roster[pos] : pos;
}

/* A culprit once per rank, whatever the findings that name it. */
static void blame_once(struct pf_fleet *f, int pos, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void blame_once(struct pf_fleet *f, int pos, const char *fmt, ...)
{
    int rank = rank_of(f, pos);
    for (size_t i = 0; i < f->out.nculprits; i++)
        if (f->out.culprits[i].rank == rank) return;
    char why[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    pf_fleet_blame(f, rank, "%s", why);
}

/* A list of items in b, PF_WIRE_LIST_MAX at most, then "and N more". */
struct list {
    struct pf_buf b;
    size_t n;
};
static void list_init(struct list *l)
{
    pf_buf_init(&l->b, 1 << 16);
    l->n = 0;
}
static void list_add(struct list *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void list_add(struct list *l, const char *fmt, ...)
{
    if (l->n++ >= PF_WIRE_LIST_MAX) return;
    if (l->n > 1) pf_buf_addf(&l->b, "; ");
    va_list ap;
    va_start(ap, fmt);
    pf_buf_vaddf(&l->b, fmt, ap);
    va_end(ap);
}
static const char *list_text(struct list *l)
{
    if (l->n > PF_WIRE_LIST_MAX) {
        pf_buf_addf(&l->b, "; and %zu more", l->n - PF_WIRE_LIST_MAX);
        l->n = PF_WIRE_LIST_MAX; /* once */
    }
    return pf_buf_str(&l->b);
}

/* ---- counting values */

struct val {
    char v[64];
    int pos;
};
static int cmp_val(const void *a, const void *b)
{
    const struct val *x = a, *y = b;
    int c = strcmp(x->v, y->v);
    return c ? c : (x->pos > y->pos) - (x->pos < y->pos);
}
/* Sorts v; returns the index of the first entry of the most common value (the group of the
 * lowest position on a tie), and its count in *count. */
static int majority(struct val *v, int n, int *count)
{
    qsort(v, (size_t)n, sizeof(*v), cmp_val);
    int best = -1, bestc = 0, bestpos = INT_MAX;
    for (int i = 0; i < n;) {
        int j = i;
        while (j < n && strcmp(v[j].v, v[i].v) == 0)
            j++;
        if (j - i > bestc || (j - i == bestc && v[i].pos < bestpos)) {
            best = i;
            bestc = j - i;
            bestpos = v[i].pos;
        }
        i = j;
    }
    *count = bestc;
    return best;
}

static void subnet_text(char *out, size_t n, const struct pf_fleet_rail *r)
{
    struct in_addr a;
    if (inet_pton(AF_INET, r->ip, &a) != 1) {
        snprintf(out, n, "none");
        return;
    }
    uint32_t mask = r->prefix <= 0 ? 0 : 0xffffffffu << (32 - r->prefix);
    a.s_addr = htonl(ntohl(a.s_addr) & mask);
    char t[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &a, t, sizeof(t));
    snprintf(out, n, "%s/%d", t, r->prefix);
}

/* The values of network k's rails: subnets (of the rails in its ring) or MTUs (of every rail
 * with one). The count of entries in v (p->n of room). */
static int net_values(struct val *v, const struct pf_fleet_railplan *p, int k, bool subnet)
{
    const struct pf_fleet_railnet *x = &p->net[k];
    int m = 0;
    for (int pos = 0; pos < p->n; pos++) {
        if (x->rail[pos] < 0 || (subnet && x->at[pos] < 0)) continue;
        const struct pf_fleet_rail *r = &p->rails[pos].r[x->rail[pos]];
        if (!subnet && r->mtu <= 0) continue;
        if (subnet)
            subnet_text(v[m].v, sizeof(v[m].v), r);
        else
            snprintf(v[m].v, sizeof(v[m].v), "%d", r->mtu);
        v[m++].pos = pos;
    }
    return m;
}

/* ---- agreement */

/* rail-network-missing / rail-network-extra: a network on at least half the pods that
 * reported is expected on all of them; one on fewer is extra where it is. */
static void agree_networks(struct pf_fleet *f, const struct pf_fleet_railplan *p)
{
    int reported = 0;
    for (int pos = 0; pos < p->n; pos++)
        reported += p->rails[pos].reported;
    for (int k = 0; k < p->nnet; k++) {
        const struct pf_fleet_railnet *x = &p->net[k];
        if (x->pods >= reported) continue;
        bool expected = 2 * x->pods >= reported;
        struct list l;
        list_init(&l);
        for (int pos = 0; pos < p->n; pos++) {
            if (!p->rails[pos].reported || (x->rail[pos] >= 0) == expected) continue;
            char w[320];
            rail_who(w, sizeof(w), f, p, k, pos);
            list_add(&l, "%s", w);
            if (expected)
                blame_once(f, pos, "net.rails: network %s is not attached to this pod", x->name);
        }
        if (expected)
            pf_fleet_finding(&f->out, "net.rails", "rail-network-missing", PF_FAIL, NULL,
                             "network %s is attached to %d of %d pods; not to %s", x->name, x->pods,
                             reported, list_text(&l));
        else
            pf_fleet_finding(&f->out, "net.rails", "rail-network-extra", PF_WARN, NULL,
                             "network %s is attached to only %d of %d pods: %s", x->name, x->pods,
                             reported, list_text(&l));
        pf_buf_free(&l.b);
    }
}

/* rail-subnet-mismatch (fail) or rail-mtu-mismatch (warn) on network k: the rails whose
 * value is not the most common one. */
static void agree_values(struct pf_fleet *f, const struct pf_fleet_railplan *p, int k, bool subnet,
                         struct val *v)
{
    const struct pf_fleet_railnet *x = &p->net[k];
    int m = net_values(v, p, k, subnet), count = 0;
    int best = majority(v, m, &count);
    if (best < 0 || count == m) return;
    char major[64];
    pf_strcpy(major, sizeof(major), v[best].v);
    struct list l;
    list_init(&l);
    for (int i = 0; i < m; i++) {
        if (strcmp(v[i].v, major) == 0) continue;
        const struct pf_fleet_rail *r = &p->rails[v[i].pos].r[x->rail[v[i].pos]];
        char w[320];
        rail_who(w, sizeof(w), f, p, k, v[i].pos);
        if (subnet) {
            list_add(&l, "%s has %s/%d", w, r->ip, r->prefix);
            blame_once(f, v[i].pos, "net.rails: %s (network %s) is on subnet %s, the others on %s",
                       r->iface, x->name, v[i].v, major);
        } else {
            list_add(&l, "%s has MTU %s", w, v[i].v);
        }
    }
    if (subnet)
        pf_fleet_finding(&f->out, "net.rails", "rail-subnet-mismatch", PF_FAIL, NULL,
                         "network %s: %d of %d pods are on another subnet than %s: %s", x->name,
                         m - count, m, major, list_text(&l));
    else
        pf_fleet_finding(&f->out, "net.rails", "rail-mtu-mismatch", PF_WARN, NULL,
                         "network %s: %d of %d pods have another MTU than %s: %s", x->name,
                         m - count, m, major, list_text(&l));
    pf_buf_free(&l.b);
}

/* rail-down: a rail that is down, or up without an IPv4 address. */
static void agree_down(struct pf_fleet *f, const struct pf_fleet_railplan *p, int k)
{
    const struct pf_fleet_railnet *x = &p->net[k];
    struct list l;
    list_init(&l);
    for (int pos = 0; pos < p->n; pos++) {
        if (x->rail[pos] < 0 || x->at[pos] >= 0) continue;
        const struct pf_fleet_rail *r = &p->rails[pos].r[x->rail[pos]];
        const char *what = !r->up ? "is down" : !r->ip[0] ? "has no IPv4 address" : "has no port";
        char w[320];
        rail_who(w, sizeof(w), f, p, k, pos);
        list_add(&l, "%s %s", w, what);
        blame_once(f, pos, "net.rails: %s (network %s) %s", r->iface, x->name, what);
    }
    if (l.n)
        pf_fleet_finding(&f->out, "net.rails", "rail-down", PF_FAIL, NULL,
                         "network %s: %zu of %d pods cannot use their rail: %s", x->name, l.n,
                         x->pods, list_text(&l));
    pf_buf_free(&l.b);
}

void pf_fleet_rails_agree(struct pf_fleet *f, const struct pf_fleet_railplan *p)
{
    agree_networks(f, p);
    struct val *v = pf_xcalloc(p->n > 0 ? (size_t)p->n : 1, sizeof(*v));
    for (int k = 0; k < p->nnet; k++) {
        agree_down(f, p, k);
        agree_values(f, p, k, true, v);
        agree_values(f, p, k, false, v);
    }
    free(v);
    if (p->more_nets)
        pf_fleet_finding(&f->out, "net.rails", "rail-network-extra", PF_WARN, NULL,
                         "%d rails are on networks past the first %d; they were not probed",
                         p->more_nets, PF_FLEET_RAIL_NETS);
}

/* ---- the probes */

static bool bad(const struct pf_fleet_rail_result *r)
{
    return r->state == PF_RAIL_UNREACHABLE || r->state == PF_RAIL_STALLED;
}

/* Every probe on network k failed: the network, not a pod, is named. */
static void judge_all_bad(struct pf_fleet *f, const struct pf_fleet_railplan *p, int k)
{
    const struct pf_fleet_railnet *x = &p->net[k];
    int stalled = 0;
    for (int i = 0; i < x->nring; i++)
        stalled += x->res[i].state == PF_RAIL_STALLED;
    int state = 2 * stalled > x->nring ? PF_RAIL_STALLED : PF_RAIL_UNREACHABLE;
    const struct pf_fleet_rail_result *e = &x->res[0];
    char w[320];
    rail_who(w, sizeof(w), f, p, k, x->ring[0]);
    pf_fleet_finding(&f->out, "net.rails",
                     state == PF_RAIL_STALLED ? "rail-mtu-blackhole" : "rail-unreachable", PF_FAIL,
                     NULL,
                     "network %s: every one of the %d probes between its pods failed (%s, e.g. "
                     "%s: %s): the network itself, not one pod",
                     x->name, x->nring,
                     state == PF_RAIL_STALLED ? "connected, but no full-MTU frame went through"
                                              : "no connection",
                     w, e->why[0] ? e->why : "no answer");
}

/* A pod both of whose probes on network k failed (its own and the one to it): the pod's rail
 * is named, with its class (unreachable unless both stalled). */
static void judge_pod(struct pf_fleet *f, const struct pf_fleet_railplan *p, int k, int i,
                      struct list *l, int state)
{
    const struct pf_fleet_railnet *x = &p->net[k];
    int m = x->nring, pos = x->ring[i];
    const struct pf_fleet_rail_result *out = &x->res[i], *in = &x->res[(i + m - 1) % m];
    const struct pf_fleet_rail *r = &p->rails[pos].r[x->rail[pos]];
    char w[320], to[200], from[200];
    rail_who(w, sizeof(w), f, p, k, pos);
    pf_fleet_who(to, sizeof(to), f, rank_of(f, out->dst));
    pf_fleet_who(from, sizeof(from), f, rank_of(f, x->ring[(i + m - 1) % m]));
    if (state == PF_RAIL_STALLED) {
        list_add(l,
                 "%s, %s/%d MTU %d: its probe to %s and the one from %s connected, but no "
                 "full-MTU-sized data went through (%s)",
                 w, r->ip, r->prefix, r->mtu, to, from, out->why);
        blame_once(f, pos, "net.rails: %s (network %s) drops full-MTU frames (MTU %d)", r->iface,
                   x->name, r->mtu);
    } else {
        list_add(l, "%s, %s/%d: to %s: %s; from %s: %s", w, r->ip, r->prefix, to,
                 out->why[0] ? out->why : "failed", from, in->why[0] ? in->why : "failed");
        blame_once(f, pos, "net.rails: %s (network %s, %s) is unreachable from the other pods",
                   r->iface, x->name, r->ip);
    }
}

/* rail-unreachable / rail-mtu-blackhole on network k: pods whose probes both failed; then
 * the failed probes between two pods that are otherwise fine. */
static void judge_failures(struct pf_fleet *f, const struct pf_fleet_railplan *p, int k)
{
    const struct pf_fleet_railnet *x = &p->net[k];
    int m = x->nring;
    struct list l[2], pairs[2];
    for (int c = 0; c < 2; c++) {
        list_init(&l[c]);
        list_init(&pairs[c]);
    }
    unsigned char *pod_bad = pf_xcalloc((size_t)m, 1);
    for (int i = 0; i < m && m >= 3; i++) {
        const struct pf_fleet_rail_result *out = &x->res[i], *in = &x->res[(i + m - 1) % m];
        if (!bad(out) || !bad(in)) continue;
        int state = out->state == PF_RAIL_STALLED && in->state == PF_RAIL_STALLED
                        ? PF_RAIL_STALLED
                        : PF_RAIL_UNREACHABLE;
        pod_bad[i] = 1;
        judge_pod(f, p, k, i, &l[state == PF_RAIL_STALLED], state);
    }
    for (int i = 0; i < m; i++) {
        const struct pf_fleet_rail_result *e = &x->res[i];
        if (!bad(e) || pod_bad[i] || pod_bad[(i + 1) % m]) continue;
        char a[320], b[320];
        rail_who(a, sizeof(a), f, p, k, x->ring[i]);
        rail_who(b, sizeof(b), f, p, k, e->dst);
        list_add(&pairs[e->state == PF_RAIL_STALLED], "from %s to %s: %s", a, b,
                 e->why[0] ? e->why : "failed");
    }
    for (int c = 0; c < 2; c++) {
        if (l[c].n)
            pf_fleet_finding(&f->out, "net.rails", c ? "rail-mtu-blackhole" : "rail-unreachable",
                             PF_FAIL, NULL, "network %s: %s", x->name, list_text(&l[c]));
        if (pairs[c].n)
            pf_fleet_finding(&f->out, "net.rails", c ? "rail-mtu-blackhole" : "rail-unreachable",
                             PF_FAIL, NULL,
                             "network %s: %zu probe%s failed between pods that are otherwise "
                             "fine (the path between them): %s",
                             x->name, pairs[c].n, pairs[c].n == 1 ? "" : "s", list_text(&pairs[c]));
        pf_buf_free(&l[c].b);
        pf_buf_free(&pairs[c].b);
    }
    free(pod_bad);
}

/* The median rate of network k's completed probes; 0 with fewer than min of them. */
static double net_median(const struct pf_fleet_railnet *x, int min)
{
    double *g = pf_xcalloc(x->nring > 0 ? (size_t)x->nring : 1, sizeof(*g));
    int n = 0;
    for (int i = 0; i < x->nring; i++)
        if (x->res[i].state == PF_RAIL_OK && x->res[i].gbps > 0) g[n++] = x->res[i].gbps;
    double med = n >= min ? pf_median(g, (size_t)n) : 0;
    free(g);
    return med;
}

/* rail-slow: a pod both of whose probes on network k (from it, to it) are under
 * PF_FLEET_RAIL_SLOW_RATIO x the network's median, with four probes or more to compare:
 * never one sample alone. A warning: a slow rail works. */
static void judge_slow(struct pf_fleet *f, const struct pf_fleet_railplan *p, int k)
{
    const struct pf_fleet_railnet *x = &p->net[k];
    int m = x->nring;
    double med = net_median(x, 4);
    if (med <= 0) return;
    double lim = med * PF_FLEET_RAIL_SLOW_RATIO;
    struct list l;
    list_init(&l);
    for (int i = 0; i < m; i++) {
        const struct pf_fleet_rail_result *out = &x->res[i], *in = &x->res[(i + m - 1) % m];
        if (out->state != PF_RAIL_OK || in->state != PF_RAIL_OK || out->gbps >= lim ||
            in->gbps >= lim)
            continue;
        char w[320];
        rail_who(w, sizeof(w), f, p, k, x->ring[i]);
        list_add(&l, "%s: %.3g Gb/s out, %.3g Gb/s in", w, out->gbps, in->gbps);
    }
    if (l.n)
        pf_fleet_finding(&f->out, "net.rails", "rail-slow", PF_WARN, NULL,
                         "network %s: %zu pod%s under %.0f%% of the network's median %.3g Gb/s "
                         "both ways: %s",
                         x->name, l.n, l.n == 1 ? " is" : "s are", PF_FLEET_RAIL_SLOW_RATIO * 100,
                         med, list_text(&l));
    pf_buf_free(&l.b);
}

void pf_fleet_rails_judge(struct pf_fleet *f, const struct pf_fleet_railplan *p)
{
    for (int k = 0; k < p->nnet; k++) {
        const struct pf_fleet_railnet *x = &p->net[k];
        if (x->nring < 2) continue;
        int nbad = 0;
        for (int i = 0; i < x->nring; i++)
            nbad += bad(&x->res[i]);
        if (nbad == x->nring && x->nring >= 3) {
            judge_all_bad(f, p, k);
            continue;
        }
        if (nbad) judge_failures(f, p, k);
        judge_slow(f, p, k);
    }
}

void pf_fleet_rails_evidence(const struct pf_fleet_railplan *p, struct pf_node *networks)
{
    struct val *v = pf_xcalloc(p->n > 0 ? (size_t)p->n : 1, sizeof(*v));
    for (int k = 0; k < p->nnet; k++) {
        const struct pf_fleet_railnet *x = &p->net[k];
        struct pf_node *e = pf_node_add_map(networks);
        pf_node_set_str(e, "name", x->name);
        pf_node_set_int(e, "pods", x->pods);
        pf_node_set_int(e, "probed", x->nring >= 2 ? x->nring : 0);
        int count = 0, m = net_values(v, p, k, true), best = majority(v, m, &count);
        if (best >= 0) pf_node_set_str(e, "subnet", v[best].v);
        m = net_values(v, p, k, false);
        best = majority(v, m, &count);
        if (best >= 0) pf_node_set_int(e, "mtu", atoi(v[best].v));
        double med = net_median(x, 1);
        if (med > 0) pf_node_set_dbl(e, "medianGbps", (double)(long long)(med * 1000) / 1000);
    }
    free(v);
}
