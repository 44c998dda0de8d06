/* The judgement after the collectives: lost peers, wrong results, the bandwidth floor, slow
 * nodes and links (check `collective.tcp`), every rank's statuses and the fleet verdict. */
#include "fleet.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *node_of(const struct pf_fleet *f, int rank)
{
    return rank >= 0 && rank < f->world ? f->r[rank].node : "";
}

/* The ranks of marks [from, n) as "5, 11, 12 and 30 more" in b. */
static void rest_of(struct pf_buf *b, const struct pf_wire_marks *l, size_t from)
{
    for (size_t k = from; k < l->n; k++) {
        if (k - from == PF_WIRE_LIST_MAX) {
            pf_buf_addf(b, " and %zu more", l->n - k);
            break;
        }
        pf_buf_addf(b, "%s%d", k > from ? ", " : "", l->v[k].rank);
    }
}

/* A finding (and a culprit) for each of the first PF_WIRE_LIST_MAX lost ranks, one for the
 * rest: when hundreds are lost the cause is rarely each of them, and a finding per rank in
 * every rank's summary would be O(N^2) bytes. */
static void lost_peers(struct pf_fleet *f, const struct pf_fleet_tcp *t)
{
    struct pf_buf b;
    pf_buf_init(&b, PF_BUF_LINE);
    f->lost_any = f->lost_any || t->lost->n > 0;
    for (size_t i = 0; i < t->lost->n && i < PF_WIRE_LIST_MAX; i++) {
        int r = t->lost->v[i].rank;
        const char *why = t->lost->v[i].why;
        /* everyone's reports of who failed them help the reader (the first few) */
        pf_buf_reset(&b);
        for (size_t k = 0; k < t->failed->n && !b.over; k++) {
            if (t->failed->v[k].rank == r) continue;
            pf_buf_addf(&b, "%srank %d: %s", b.len ? "; " : "", t->failed->v[k].rank,
                        t->failed->v[k].why);
        }
        char w[PF_WHO_MAX];
        pf_fleet_who(w, sizeof(w), f, r);
        pf_fleet_finding(&f->out, "collective.tcp", "peer-lost", PF_FAIL, NULL,
                         "%s was lost after the rendezvous: %s%s%s%s", w, why, b.len ? " (" : "",
                         pf_buf_str(&b), b.len ? ")" : "");
        pf_fleet_blame(f, r, "lost during the collectives: %s", why);
    }
    if (t->lost->n > PF_WIRE_LIST_MAX) {
        pf_buf_reset(&b);
        rest_of(&b, t->lost, PF_WIRE_LIST_MAX);
        pf_fleet_finding(&f->out, "collective.tcp", "peer-lost", PF_FAIL, NULL,
                         "%zu more ranks were lost after the rendezvous (%s); the first: %s",
                         t->lost->n - PF_WIRE_LIST_MAX, pf_buf_str(&b),
                         t->lost->v[PF_WIRE_LIST_MAX].why);
    }
    if (t->lost->n == 0) {
        /* nobody died, yet something failed: name whom the failures point at */
        for (size_t k = 0; k < t->failed->n && k < PF_WIRE_LIST_MAX; k++) {
            char w[PF_WHO_MAX];
            pf_fleet_who(w, sizeof(w), f, t->failed->v[k].rank);
            pf_fleet_finding(&f->out, "collective.tcp", "peer-lost", PF_FAIL, NULL, "%s: %s", w,
                             t->failed->v[k].why);
        }
        if (t->failed->n > PF_WIRE_LIST_MAX) {
            pf_buf_reset(&b);
            rest_of(&b, t->failed, PF_WIRE_LIST_MAX);
            pf_fleet_finding(&f->out, "collective.tcp", "peer-lost", PF_FAIL, NULL,
                             "%zu more ranks reported a failure (%s)",
                             t->failed->n - PF_WIRE_LIST_MAX, pf_buf_str(&b));
        }
    }
    pf_buf_free(&b);
}

static void results(struct pf_fleet *f, const struct pf_fleet_tcp *t)
{
    bool all_done = !t->stopped || t->ok;
    double tsum = 0;
    int tn = 0;
    bool correct = true;
    for (int i = 0; i < f->n; i++) {
        const struct pf_fleet_rank *m = &f->r[f->roster[i]];
        if (!m->ar_done) {
            all_done = false;
            continue;
        }
        tsum += m->ar_seconds;
        tn++;
        if (!m->ar_wrong) continue;
        correct = false;
        char w[PF_WHO_MAX];
        pf_fleet_who(w, sizeof(w), f, f->roster[i]);
        size_t count = (size_t)(t->bytes / 4);
        size_t j = (size_t)m->ar_first_bad;
        float want = 0;
        for (int k = 0; k < f->n; k++)
            want += pf_coll_seed_value(f->roster[k], j);
        pf_fleet_finding(&f->out, "collective.tcp", "wrong-result", PF_FAIL, NULL,
                         "%s: %lld of %zu elements differ from the exact sum (first at index "
                         "%lld, which should be %.0f)",
                         w, m->ar_wrong, count, m->ar_first_bad, want);
        pf_fleet_blame(f, f->roster[i], "its all-reduce result was wrong (%lld elements)",
                       m->ar_wrong);
    }
    if (!(t->ran && all_done && tn == f->n && tn > 1)) return;
    struct pf_fleet_summary *s = &f->out;
    s->have_tcp = true;
    s->seconds = tsum / tn;
    s->algbw = s->seconds > 0 ? (double)t->bytes / s->seconds / 1e9 : 0;
    s->busbw = pf_coll_busbw_allreduce(s->algbw, f->n);
    s->bytes = t->bytes;
    s->ranks = f->n;
    s->correct = correct;
    s->iterations = t->iterations;
    s->expected = t->min_busbw;
    /* a floor, when the config sets one; warn only: TCP is not the training path */
    if (t->min_busbw >= 0 && s->busbw < t->min_busbw)
        pf_fleet_finding(s, "collective.tcp", "below-threshold", PF_WARN, NULL,
                         "all-reduce busbw %.3f GB/s among %d ranks is below %g GB/s "
                         "(tcp.minBusbwGBps)",
                         s->busbw, f->n, t->min_busbw);
}

static int rank_at(const struct pf_fleet *f, int pos)
{
    return f->roster && pos >= 0 && pos < f->n ? f->roster[pos] : pos;
}

/* "to rank 3: 0.04 Gb/s, to rank 9: 0.05 Gb/s" */
static void samples_text(struct pf_buf *b, const struct pf_fleet *f, const struct pf_coll_sample *s,
                         size_t n, int self)
{
    for (size_t i = 0; i < n; i++) {
        bool out = s[i].src == self;
        pf_buf_addf(b, "%s%s rank %d: %.3f Gb/s", i ? ", " : "", out ? "to" : "from",
                    rank_at(f, out ? s[i].dst : s[i].src), pf_coll_sample_gbps(&s[i]));
    }
}

static void judged_node(struct pf_fleet *f, const struct pf_coll_judgement *j,
                        const struct pf_coll_culprit *c)
{
    struct pf_fleet_summary *s = &f->out;
    int r = rank_at(f, c->src);
    char w[PF_WHO_MAX];
    pf_fleet_who(w, sizeof(w), f, r);
    const char *dir = c->out && c->in ? "into and out of" : c->out ? "out of" : "into";
    const char *node = node_of(f, r);
    struct pf_buf ev;
    pf_buf_init(&ev, PF_BUF_LINE);
    samples_text(&ev, f, c->ev, c->nev, c->src);
    pf_fleet_finding(s, "collective.tcp", "slow-node", PF_FAIL, NULL,
                     "%s%s%s: every link %s it is slow, at most %.3f Gb/s, also against "
                     "partners that are fast with others (%s); the median link is %.3f Gb/s "
                     "(%zu samples in %d probe rounds)",
                     w, node[0] ? " on node " : "", node, dir, c->gbps, pf_buf_str(&ev), j->median,
                     j->nsamples, j->rounds);
    pf_buf_free(&ev);
    pf_fleet_blame(f, r,
                   "slow node: its links %s it run at %.3f Gb/s or less, the median link "
                   "%.3f Gb/s",
                   dir, c->gbps, j->median);
}

static void judged_link(struct pf_fleet *f, const struct pf_coll_judgement *j,
                        const struct pf_coll_culprit *c)
{
    char a[PF_WHO_MAX], d[PF_WHO_MAX], clear[2 * PF_WHO_MAX] = "";
    pf_fleet_who(a, sizeof(a), f, rank_at(f, c->src));
    pf_fleet_who(d, sizeof(d), f, rank_at(f, c->dst));
    size_t o = 0;
    if (c->clear_src.seconds > 0)
        o += (size_t)snprintf(clear, sizeof(clear), "; rank %d sends at %.3f Gb/s to rank %d",
                              rank_at(f, c->src), pf_coll_sample_gbps(&c->clear_src),
                              rank_at(f, c->clear_src.dst));
    if (c->clear_dst.seconds > 0 && o < sizeof(clear))
        snprintf(clear + o, sizeof(clear) - o, "; rank %d receives at %.3f Gb/s from rank %d",
                 rank_at(f, c->dst), pf_coll_sample_gbps(&c->clear_dst),
                 rank_at(f, c->clear_dst.src));
    pf_fleet_finding(&f->out, "collective.tcp", "slow-link", PF_WARN, NULL,
                     "the link from %s to %s runs at %.3f Gb/s at most, in all %zu of its "
                     "samples%s; the median link is %.3f Gb/s",
                     a, d, c->gbps, c->nev, clear, j->median);
}

/* The slowest sample and the median, for the summary line. */
static void link_summary(struct pf_fleet *f, const struct pf_fleet_tcp *t, double median)
{
    struct pf_fleet_summary *s = &f->out;
    s->have_links = true;
    s->median = median;
    s->slow_gbps = 1e300;
    for (size_t i = 0; i < t->nlinks; i++)
        if (t->links[i].gbps < s->slow_gbps) {
            s->slow_gbps = t->links[i].gbps;
            s->slow_src = t->links[i].src;
            s->slow_dst = t->links[i].dst;
        }
}

static void blame_judged(struct pf_fleet *f, const struct pf_fleet_tcp *t)
{
    const struct pf_coll_judgement *j = t->judgement;
    if (!t->nlinks) return;
    link_summary(f, t, j->median);
    for (size_t i = 0; i < j->n; i++) {
        if (j->v[i].kind == PF_COLL_CULPRIT_NODE)
            judged_node(f, j, &j->v[i]);
        else
            judged_link(f, j, &j->v[i]);
    }
}

static void blame(struct pf_fleet *f, const struct pf_fleet_tcp *t)
{
    if (t->judgement) {
        blame_judged(f, t);
        return;
    }
    if (!t->nlinks) return;
    struct pf_fleet_summary *s = &f->out;
    struct pf_coll_blame bl;
    pf_coll_blame(&bl, t->links, t->nlinks, PF_COLL_SLOW_RATIO);
    link_summary(f, t, bl.median);
    for (size_t i = 0; i < bl.nnodes; i++) {
        const struct pf_coll_slow_node *sn = &bl.nodes[i];
        char w[PF_WHO_MAX];
        pf_fleet_who(w, sizeof(w), f, sn->rank);
        const char *dir = sn->out && sn->in ? "into and out of" : sn->out ? "out of" : "into";
        const char *node = node_of(f, sn->rank);
        pf_fleet_finding(s, "collective.tcp", "slow-node", PF_FAIL, NULL,
                         "%s%s%s: all %d links %s it are slow (at most %.2f Gb/s; the median of "
                         "all %zu links is %.2f Gb/s)",
                         w, node[0] ? " on node " : "", node, sn->ntotal, dir, sn->max_gbps,
                         t->nlinks, bl.median);
        pf_fleet_blame(f, sn->rank,
                       "slow node: its links %s it run at %.2f Gb/s or less, the median link "
                       "%.2f Gb/s",
                       dir, sn->max_gbps, bl.median);
    }
    for (size_t i = 0; i < bl.nlinks; i++) {
        char a[PF_WHO_MAX], c[PF_WHO_MAX];
        pf_fleet_who(a, sizeof(a), f, bl.links[i].src);
        pf_fleet_who(c, sizeof(c), f, bl.links[i].dst);
        pf_fleet_finding(s, "collective.tcp", "slow-link", PF_WARN, NULL,
                         "the link from %s to %s runs at %.2f Gb/s; the median of all %zu links "
                         "is %.2f Gb/s",
                         a, c, bl.links[i].gbps, t->nlinks, bl.median);
    }
    pf_coll_blame_free(&bl);
}

void pf_fleet_judge_tcp(struct pf_fleet *f, const struct pf_fleet_tcp *t)
{
    lost_peers(f, t);
    results(f, t);
    blame(f, t);
}

static bool is_fleet_check(const char *id)
{
    return strcmp(id, "rendezvous") == 0 || strcmp(id, "collective.tcp") == 0;
}

void pf_fleet_judge_reports(struct pf_fleet *f)
{
    for (int r = 0; r < f->world; r++) {
        const struct pf_fleet_rank *m = &f->r[r];
        if (!m->reported) continue;
        for (size_t k = 0; k < m->nbad; k++) {
            const struct pf_fleet_check *c = &m->bad[k];
            const char *id = pf_fleet_check_id(f, c);
            if (c->status != PF_FAIL + 1 || is_fleet_check(id)) continue;
            /* a collective needs every rank: once one was lost, the others' collectives
             * failed with it, and the lost rank is the culprit already */
            if (f->lost_any && strncmp(id, "collective.", 11) == 0) continue;
            char codes[1024];
            pf_strlist_join(codes, sizeof(codes), &c->codes, ",");
            pf_fleet_blame(f, r, "check %s failed on this pod (%s)", id,
                           codes[0] ? codes : "see its verdict");
        }
    }
}

void pf_fleet_conclude(struct pf_fleet *f, enum pf_status worst, size_t nculprits,
                       const struct pf_node *first_culprit)
{
    enum pf_status fleet = PF_PASS;
    for (int r = 0; r < f->world; r++) {
        const struct pf_fleet_rank *m = &f->r[r];
        int st = m->reported ? pf_status_parse(m->verdict) : (int)PF_FAIL;
        if (st > (int)fleet) fleet = (enum pf_status)st;
    }
    if ((int)worst > (int)fleet) fleet = worst;
    if (nculprits) fleet = PF_FAIL;
    struct pf_fleet_summary *s = &f->out;
    pf_strcpy(s->verdict, sizeof(s->verdict), pf_status_name(fleet));
    if (nculprits && first_culprit) {
        const char *why = pf_node_get_str(first_culprit, "reason");
        const char *pod = pf_node_get_str(first_culprit, "pod");
        const struct pf_node *rk = pf_node_get(first_culprit, "rank");
        snprintf(s->text, sizeof(s->text),
                 "%zu culprit(s) among %d ranks; first: rank %lld%s%s%s: %s", nculprits, f->world,
                 rk ? rk->i : -1LL, pod ? " (" : "", pod ? pod : "", pod ? ")" : "",
                 why ? why : "");
    } else {
        snprintf(s->text, sizeof(s->text), "%d of %d ranks met; fleet verdict %s", f->n, f->world,
                 pf_status_name(fleet));
    }
}

static const char *status_text(uint8_t st)
{
    return st == PF_FLEET_ST_NONE || st >= PF_FLEET_ST_OTHER
               ? "?"
               : pf_status_name((enum pf_status)(st - 1));
}

void pf_fleet_ranks(const struct pf_fleet *f, struct pf_ranks *ranks, const char *my_ip)
{
    static const char *const states[] = {"missing", "joined", "refused", "lost"};
    struct pf_rank_in_check *cs = NULL;
    size_t ncs = 0;
    for (int r = 0; r < f->world; r++) {
        const struct pf_fleet_rank *m = &f->r[r];
        struct pf_rank_in e = {
            .rank = r,
            .pod = m->pod,
            .node = m->node,
            .address = r == 0 ? my_ip : m->addr,
            .state = states[m->state],
            .has_tcp = m->ar_done,
            .tcp_seconds = m->ar_seconds,
            .verdict = m->reported ? m->verdict : "fail",
            .passed = m->reported ? m->passed : -1,
        };
        size_t want = m->reported ? (size_t)m->nst + m->nbad : 0;
        if (want > ncs) {
            ncs = want;
            cs = pf_xrealloc(cs, ncs * sizeof(*cs));
        }
        /* every check the rank reported, with its status (docs/verdict.md: rank 0's verdict
         * carries every rank's check statuses), in the fleet's order of check ids; the codes
         * from the records of the checks that did not pass or skip */
        for (size_t k = 0; m->reported && k < m->nst; k++) {
            if (m->st[k] == PF_FLEET_ST_NONE) continue;
            const struct pf_fleet_check *b = NULL;
            for (size_t j = 0; j < m->nbad && !b; j++)
                if (!m->bad[j].own_id && m->bad[j].id == k) b = &m->bad[j];
            cs[e.nchecks++] =
                (struct pf_rank_in_check){k < f->ids.n ? f->ids.v[k] : "?", status_text(m->st[k]),
                                          b ? b->codes.v : NULL, b ? b->codes.n : 0};
        }
        /* a check past the fleet's table of ids has its own record only */
        for (size_t j = 0; m->reported && j < m->nbad; j++)
            if (m->bad[j].own_id)
                cs[e.nchecks++] =
                    (struct pf_rank_in_check){m->bad[j].own_id, status_text(m->bad[j].status),
                                              m->bad[j].codes.v, m->bad[j].codes.n};
        e.checks = cs;
        pf_ranks_add(ranks, &e);
    }
    free(cs);
}
