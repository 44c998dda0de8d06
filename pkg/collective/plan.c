/* The probe plan and the judgement: which pairs of positions to probe in each round, and
 * from every sample taken, which node or link is slow. Pure functions of their arguments:
 * the run decides when a round starts and feeds back what it measured.
 *
 * Both share one analysis of the samples so far: samples grouped by link, the survey's
 * median and threshold, the suspects (the ends of a slow survey link), the ranks the survey
 * showed good (measured, and no slow survey link), and per position and direction whether
 * it is cleared (one fast link proves the direction can run fast: noise only slows) or a
 * slow node (every link slow, and at least PF_COLL_NODE_PARTNERS of them against good
 * partners in confirmation rounds). Time and memory are O(n + s log s) for s samples,
 * plus the search for fresh partners of the few suspects. */
#include "collective.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

double pf_coll_sample_gbps(const struct pf_coll_sample *s)
{
    return s->seconds > 0 ? (double)s->bytes * 8.0 / s->seconds / 1e9 : 0;
}

size_t pf_coll_probe_bytes(double gbps)
{
    if (!(gbps > 0) || !isfinite(gbps)) return PF_COLL_PROBE_START;
    double b = gbps * 1e9 / 8.0 * PF_COLL_PROBE_TARGET_S;
    if (b < PF_COLL_PROBE_MIN_BYTES) b = PF_COLL_PROBE_MIN_BYTES;
    if (b > PF_COLL_PROBE_MAX_BYTES) b = PF_COLL_PROBE_MAX_BYTES;
    size_t unit = 64u << 10;
    size_t v = ((size_t)b + unit - 1) / unit * unit;
    return v > PF_COLL_PROBE_MAX_BYTES ? PF_COLL_PROBE_MAX_BYTES : v;
}

int pf_coll_survey_rounds(int n)
{
    if (n < 2) return 0;
    return n - 1 < PF_COLL_SURVEY_ROUNDS ? n - 1 : PF_COLL_SURVEY_ROUNDS;
}

int pf_coll_survey_shift(int n, int round)
{
    int k = pf_coll_survey_rounds(n);
    if (round < 0 || round >= k) return 0;
    /* neighbours, the far side, between; then the next unused shifts for small n */
    int want[PF_COLL_SURVEY_ROUNDS] = {1, n / 2, n / 4 + 1};
    int got[PF_COLL_SURVEY_ROUNDS], ng = 0;
    for (int i = 0; i < PF_COLL_SURVEY_ROUNDS && ng < k; i++) {
        int d = ((want[i] % n) + n) % n;
        bool dup = d == 0;
        for (int j = 0; j < ng; j++)
            dup = dup || got[j] == d;
        if (!dup) got[ng++] = d;
    }
    for (int d = 1; d < n && ng < k; d++) {
        bool dup = false;
        for (int j = 0; j < ng; j++)
            dup = dup || got[j] == d;
        if (!dup) got[ng++] = d;
    }
    return got[round];
}

int pf_coll_plan_max_rounds(int n)
{
    if (n < 2) return 0;
    int lg = 0;
    while ((1 << lg) < n && lg < 30)
        lg++;
    return pf_coll_survey_rounds(n) + 2 + lg;
}

/* ---- the analysis */

struct link_stat {
    int src, dst;
    size_t first, count; /* into an->order */
    double best;         /* the fastest sample */
    double survey_best;  /* the fastest survey sample (-1: none) */
    int nbelow;          /* samples below the threshold */
    int nlow;            /* of those, the ones long enough to count as evidence, taken
                          * while neither end was CPU-starved */
    int nstarved;        /* slow samples taken while an end was CPU-starved: no evidence */
    int nfine;           /* samples at or above the threshold */
    int nconfirm;        /* samples of confirmation rounds */
};

struct dir_stat {
    int nlinks, nfine, ngood_low; /* ngood_low: slow links to good partners, confirmed */
    double best_low;              /* the fastest of its slow links */
};

struct analysis {
    int n, survey;
    double median, thr;
    const struct pf_coll_sample *s;
    size_t *order; /* valid samples, sorted by (src, dst, round) */
    size_t nvalid;
    struct link_stat *l;
    size_t nl;
    bool *measured, *suspect, *good;
    int ngood;
    /* a suspect all of whose slow survey links have one other end r: only_with = r (-2:
     * several, -1: none); it is good for r all the same, and nonly[r] counts those */
    int *only_with, *nonly;
    bool *has_fine; /* a fast link in or out with a partner other than only_with */
    struct dir_stat *out, *in;
};

struct key {
    int src, dst, round;
    size_t i;
};

static int cmp_key(const void *a, const void *b)
{
    const struct key *x = a, *y = b;
    if (x->src != y->src) return x->src < y->src ? -1 : 1;
    if (x->dst != y->dst) return x->dst < y->dst ? -1 : 1;
    if (x->round != y->round) return x->round < y->round ? -1 : 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

static bool sample_ok(const struct pf_coll_sample *s, int n, int before_round)
{
    return s->src >= 0 && s->src < n && s->dst >= 0 && s->dst < n && s->src != s->dst &&
           s->round >= 0 && s->round < before_round && s->seconds > 0 && isfinite(s->seconds);
}

/* Slow: no sample reached the threshold (a short one makes it a suspect, not evidence). */
static bool link_slow(const struct link_stat *l)
{
    return l->nfine == 0 && l->nbelow > 0;
}

static void group_links(struct analysis *an)
{
    an->l = pf_xcalloc(an->nvalid ? an->nvalid : 1, sizeof(*an->l));
    for (size_t i = 0; i < an->nvalid;) {
        const struct pf_coll_sample *x = &an->s[an->order[i]];
        struct link_stat *l = &an->l[an->nl++];
        l->src = x->src;
        l->dst = x->dst;
        l->first = i;
        l->survey_best = -1;
        while (i < an->nvalid && an->s[an->order[i]].src == x->src &&
               an->s[an->order[i]].dst == x->dst) {
            const struct pf_coll_sample *y = &an->s[an->order[i]];
            double g = pf_coll_sample_gbps(y);
            if (g > l->best) l->best = g;
            if (y->round < an->survey && g > l->survey_best) l->survey_best = g;
            if (y->round >= an->survey) l->nconfirm++;
            l->count++;
            i++;
        }
    }
}

/* The reference rate and the threshold: the median over positions of each one's median
 * survey link (in and out, each link by its fastest survey sample). A slow node or link
 * moves only its own ends' entries, so the reference stands even when a slow node's links
 * are half of all (a small fleet). O(s log s) over the links. */
static void survey_median(struct analysis *an, double ratio)
{
    size_t nl = an->nl ? an->nl : 1;
    struct end {
        int pos;
        double g;
    } *e = pf_xmalloc(2 * nl * sizeof(*e));
    size_t ne = 0;
    for (size_t i = 0; i < an->nl; i++) {
        const struct link_stat *l = &an->l[i];
        if (l->survey_best < 0) continue;
        e[ne++] = (struct end){l->src, l->survey_best};
        e[ne++] = (struct end){l->dst, l->survey_best};
    }
    /* group by position: a counting pass, then each position's values together */
    size_t *start = pf_xcalloc((size_t)an->n + 1, sizeof(size_t));
    for (size_t i = 0; i < ne; i++)
        start[e[i].pos + 1]++;
    for (int r = 0; r < an->n; r++)
        start[r + 1] += start[r];
    double *v = pf_xmalloc((ne ? ne : 1) * sizeof(double));
    size_t *fill = pf_xmalloc(((size_t)an->n + 1) * sizeof(size_t));
    memcpy(fill, start, ((size_t)an->n + 1) * sizeof(size_t));
    for (size_t i = 0; i < ne; i++)
        v[fill[e[i].pos]++] = e[i].g;
    double *med = pf_xmalloc(((size_t)an->n + 1) * sizeof(double));
    size_t k = 0;
    for (int r = 0; r < an->n; r++)
        if (start[r + 1] > start[r]) med[k++] = pf_median(v + start[r], start[r + 1] - start[r]);
    if (k) an->median = pf_median(med, k);
    an->thr = an->median * ratio;
    free(med);
    free(fill);
    free(v);
    free(start);
    free(e);
}

static void only_note(struct analysis *an, int r, int other)
{
    int *o = &an->only_with[r];
    *o = *o == -1 ? other : *o == other ? other : -2;
}

/* g can vouch for r: good, or slow with none but r and fast with another partner (a partner
 * of a slow node is a suspect only because of it: in a small fleet every rank is one) */
static bool good_for(const struct analysis *an, int g, int r)
{
    return g != r && (an->good[g] || (an->only_with[g] == r && an->has_fine[g] && an->measured[g]));
}

static void classify(struct analysis *an)
{
    for (size_t i = 0; i < an->nl; i++) {
        struct link_stat *l = &an->l[i];
        bool survey_low = false, survey_fine = false;
        for (size_t k = 0; k < l->count; k++) {
            const struct pf_coll_sample *y = &an->s[an->order[l->first + k]];
            double g = pf_coll_sample_gbps(y);
            bool fine = g >= an->thr;
            l->nfine += fine;
            l->nbelow += !fine;
            /* a starved end slows a probe as a slow wire does: such a sample makes the
             * link a suspect, measured again at another moment, and is never evidence */
            l->nlow += !fine && !y->starved && y->seconds >= PF_COLL_PROBE_MIN_S;
            l->nstarved += !fine && y->starved;
            if (y->round < an->survey) {
                survey_fine = survey_fine || fine;
                survey_low = survey_low || !fine;
            }
            an->measured[y->src] = an->measured[y->dst] = true;
        }
        if (survey_low && !survey_fine) {
            an->suspect[l->src] = an->suspect[l->dst] = true;
            only_note(an, l->src, l->dst);
            only_note(an, l->dst, l->src);
        }
    }
    for (size_t i = 0; i < an->nl; i++) {
        const struct link_stat *l = &an->l[i];
        if (l->nfine == 0) continue;
        if (an->only_with[l->src] != l->dst) an->has_fine[l->src] = true;
        if (an->only_with[l->dst] != l->src) an->has_fine[l->dst] = true;
    }
    for (int r = 0; r < an->n; r++)
        if (an->only_with[r] >= 0 && an->has_fine[r]) an->nonly[an->only_with[r]]++;
    for (int r = 0; r < an->n; r++) {
        an->good[r] = an->measured[r] && !an->suspect[r];
        an->ngood += an->good[r];
    }
    for (size_t i = 0; i < an->nl; i++) {
        const struct link_stat *l = &an->l[i];
        struct dir_stat *o = &an->out[l->src], *in = &an->in[l->dst];
        bool slow = link_slow(l);
        o->nlinks++;
        in->nlinks++;
        o->nfine += l->nfine > 0;
        in->nfine += l->nfine > 0;
        if (slow && l->best > o->best_low) o->best_low = l->best;
        if (slow && l->best > in->best_low) in->best_low = l->best;
        bool evidence = slow && l->nlow > 0 && l->nconfirm > 0;
        if (evidence && good_for(an, l->dst, l->src)) o->ngood_low++;
        if (evidence && good_for(an, l->src, l->dst)) in->ngood_low++;
    }
}

static void analyse(struct analysis *an, int n, const struct pf_coll_sample *s, size_t ns,
                    int before_round, double ratio)
{
    memset(an, 0, sizeof(*an));
    an->n = n;
    an->s = s;
    an->survey = pf_coll_survey_rounds(n);
    struct key *keys = pf_xmalloc((ns ? ns : 1) * sizeof(*keys));
    for (size_t i = 0; i < ns; i++)
        if (sample_ok(&s[i], n, before_round))
            keys[an->nvalid++] = (struct key){s[i].src, s[i].dst, s[i].round, i};
    qsort(keys, an->nvalid, sizeof(*keys), cmp_key);
    an->order = pf_xmalloc((an->nvalid ? an->nvalid : 1) * sizeof(size_t));
    for (size_t i = 0; i < an->nvalid; i++)
        an->order[i] = keys[i].i;
    free(keys);
    size_t un = (size_t)n;
    an->measured = pf_xcalloc(un, sizeof(bool));
    an->suspect = pf_xcalloc(un, sizeof(bool));
    an->good = pf_xcalloc(un, sizeof(bool));
    an->only_with = pf_xmalloc(un * sizeof(int));
    an->nonly = pf_xcalloc(un, sizeof(int));
    an->has_fine = pf_xcalloc(un, sizeof(bool));
    for (int r = 0; r < n; r++)
        an->only_with[r] = -1;
    an->out = pf_xcalloc(un, sizeof(struct dir_stat));
    an->in = pf_xcalloc(un, sizeof(struct dir_stat));
    group_links(an);
    survey_median(an, ratio);
    classify(an);
}

static void analysis_free(struct analysis *an)
{
    free(an->order);
    free(an->l);
    free(an->measured);
    free(an->suspect);
    free(an->good);
    free(an->only_with);
    free(an->nonly);
    free(an->has_fine);
    free(an->out);
    free(an->in);
    memset(an, 0, sizeof(*an));
}

static bool node_dir(const struct analysis *an, int r, const struct dir_stat *d)
{
    return an->suspect[r] && d->nlinks > 0 && d->nfine == 0 &&
           d->ngood_low >= PF_COLL_NODE_PARTNERS;
}

static bool cleared(const struct dir_stat *d)
{
    return d->nfine > 0;
}

/* No good partner other than r itself: a fleet too small to tell a node from a link. */
static bool untestable(const struct analysis *an, int r)
{
    return an->ngood - (an->good[r] ? 1 : 0) + an->nonly[r] == 0;
}

static const struct link_stat *find_link(const struct analysis *an, int src, int dst)
{
    size_t lo = 0, hi = an->nl;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct link_stat *l = &an->l[mid];
        if (l->src == src && l->dst == dst) return l;
        if (l->src < src || (l->src == src && l->dst < dst))
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* Whether the slow link l is explained by a slow node at one of its ends. */
static bool explained(const struct analysis *an, const struct link_stat *l)
{
    return node_dir(an, l->src, &an->out[l->src]) || node_dir(an, l->dst, &an->in[l->dst]);
}

/* An end of a slow link is ready for the link to be judged: fast with another partner. */
static bool end_ready(const struct analysis *an, int r, const struct dir_stat *d)
{
    return cleared(d) || untestable(an, r);
}

/* ---- the plan */

static double median_rate(const struct analysis *an)
{
    if (an->median > 0) return an->median;
    double *v = pf_xmalloc((an->nvalid ? an->nvalid : 1) * sizeof(double));
    for (size_t i = 0; i < an->nvalid; i++)
        v[i] = pf_coll_sample_gbps(&an->s[an->order[i]]);
    double m = 0;
    if (an->nvalid) {
        pf_sort_dbl(v, an->nvalid);
        m = v[an->nvalid / 2];
    }
    free(v);
    return m;
}

struct slots {
    bool *out_busy, *in_busy;
    struct pf_coll_pair *v;
    size_t n, cap;
};

static void slots_add(struct slots *sl, int src, int dst, size_t bytes)
{
    if (sl->n == sl->cap) {
        sl->cap = sl->cap ? sl->cap * 2 : 16;
        sl->v = pf_xrealloc(sl->v, sl->cap * sizeof(*sl->v));
    }
    sl->v[sl->n++] = (struct pf_coll_pair){src, dst, bytes};
    sl->out_busy[src] = sl->in_busy[dst] = true;
}

/* A good partner for r in this round that r has not been measured with in this direction;
 * -1 when none. The search starts at a point that depends on r and the round, so suspects
 * spread over the good positions. */
/* Whether g may be r's partner now: not busy this round, and (fresh) never measured with r
 * in this direction, or (again) measured but never in a confirmation round. */
static bool partner_ok(const struct analysis *an, int g, int r, bool out_dir,
                       const struct slots *sl, bool fresh)
{
    if (g == r || (out_dir ? sl->in_busy[g] : sl->out_busy[g])) return false;
    const struct link_stat *l = out_dir ? find_link(an, r, g) : find_link(an, g, r);
    return fresh ? l == NULL : l != NULL && l->nconfirm == 0;
}

/* A partner good for r in this round that r has not been measured with in this direction
 * (in a fleet too small for that: one not measured in a confirmation round yet); -1 when
 * none. The search starts at a point that depends on r and the round, so suspects spread
 * over the good positions. */
static int fresh_partner(const struct analysis *an, const int *goods, int r, bool out_dir,
                         int round, const struct slots *sl)
{
    uint64_t h = (uint64_t)(unsigned)r * 2654435761u + (uint64_t)(unsigned)round * 40503u;
    for (int pass = 0; pass < 2; pass++) {
        bool fresh = pass == 0;
        if (an->ngood > 0) {
            size_t start = (size_t)(h % (uint64_t)an->ngood);
            for (int k = 0; k < an->ngood; k++) {
                int g = goods[(start + (size_t)k) % (size_t)an->ngood];
                if (partner_ok(an, g, r, out_dir, sl, fresh)) return g;
            }
        }
        if (an->nonly[r] > 0)
            for (int g = 0; g < an->n; g++)
                if (an->only_with[g] == r && an->has_fine[g] &&
                    partner_ok(an, g, r, out_dir, sl, fresh))
                    return g;
    }
    return -1;
}

static void plan_confirm(struct slots *sl, const struct analysis *an, int round, size_t bytes)
{
    int *goods = pf_xmalloc((size_t)an->n * sizeof(int));
    int k = 0;
    for (int r = 0; r < an->n; r++)
        if (an->good[r]) goods[k++] = r;
    /* first, suspects whose links one way are all slow: against fresh good partners */
    for (int r = 0; r < an->n; r++) {
        if (!an->suspect[r]) continue;
        const struct dir_stat *o = &an->out[r], *in = &an->in[r];
        if (o->nlinks && !cleared(o) && !node_dir(an, r, o) && !sl->out_busy[r]) {
            int g = fresh_partner(an, goods, r, true, round, sl);
            if (g >= 0) slots_add(sl, r, g, bytes);
        }
        if (in->nlinks && !cleared(in) && !node_dir(an, r, in) && !sl->in_busy[r]) {
            int g = fresh_partner(an, goods, r, false, round, sl);
            if (g >= 0) slots_add(sl, g, r, bytes);
        }
    }
    /* then slow links whose ends are both fast elsewhere: measure the link itself again */
    for (size_t i = 0; i < an->nl; i++) {
        const struct link_stat *l = &an->l[i];
        if (!link_slow(l) || l->nlow >= PF_COLL_LINK_SAMPLES || explained(an, l)) continue;
        if (!end_ready(an, l->src, &an->out[l->src]) || !end_ready(an, l->dst, &an->in[l->dst]))
            continue;
        if (sl->out_busy[l->src] || sl->in_busy[l->dst]) continue;
        slots_add(sl, l->src, l->dst, bytes);
    }
    free(goods);
}

int pf_coll_plan(struct pf_coll_pair **out, size_t *nout, int n, int round,
                 const struct pf_coll_sample *s, size_t ns, double ratio)
{
    *out = NULL;
    *nout = 0;
    if (n < 2 || round < 0 || (ns && !s) || !(ratio > 0 && ratio < 1))
        return pf_err_set(PF_EINVAL, "probe plan: %d positions, round %d, ratio %g", n, round,
                          ratio);
    if (round >= pf_coll_plan_max_rounds(n)) return 0;
    struct analysis an;
    analyse(&an, n, s, ns, round, ratio);
    size_t bytes = pf_coll_probe_bytes(median_rate(&an));
    struct slots sl = {0};
    sl.out_busy = pf_xcalloc((size_t)n, sizeof(bool));
    sl.in_busy = pf_xcalloc((size_t)n, sizeof(bool));
    int d = pf_coll_survey_shift(n, round);
    if (d > 0) {
        for (int p = 0; p < n; p++)
            slots_add(&sl, p, (p + d) % n, bytes);
    } else {
        plan_confirm(&sl, &an, round, bytes);
    }
    free(sl.out_busy);
    free(sl.in_busy);
    analysis_free(&an);
    *out = sl.v;
    *nout = sl.n;
    return 0;
}

/* ---- the judgement */

static void add_ev(struct pf_coll_culprit *c, const struct pf_coll_sample *s)
{
    if (c->nev < PF_COLL_EVIDENCE_MAX) c->ev[c->nev++] = *s;
}

static struct pf_coll_culprit *new_culprit(struct pf_coll_judgement *j)
{
    j->v = pf_xrealloc(j->v, (j->n + 1) * sizeof(*j->v));
    struct pf_coll_culprit *c = &j->v[j->n++];
    memset(c, 0, sizeof(*c));
    return c;
}

/* The fastest sample of a link of r's in one direction, other than the link to `not`. */
static struct pf_coll_sample fastest_other(const struct analysis *an, int r, bool out_dir, int not )
{
    struct pf_coll_sample best = {-1, -1, -1, 0, 0, 0};
    double bg = -1;
    for (size_t i = 0; i < an->nl; i++) {
        const struct link_stat *l = &an->l[i];
        if (out_dir ? l->src != r || l->dst == not : l->dst != r || l->src == not ) continue;
        for (size_t k = 0; k < l->count; k++) {
            const struct pf_coll_sample *y = &an->s[an->order[l->first + k]];
            double g = pf_coll_sample_gbps(y);
            if (g > bg) {
                bg = g;
                best = *y;
            }
        }
    }
    return best;
}

static void judge_nodes(struct pf_coll_judgement *j, const struct analysis *an)
{
    for (int r = 0; r < an->n; r++) {
        bool o = node_dir(an, r, &an->out[r]), in = node_dir(an, r, &an->in[r]);
        if (!o && !in) continue;
        struct pf_coll_culprit *c = new_culprit(j);
        c->kind = PF_COLL_CULPRIT_NODE;
        c->src = c->dst = r;
        c->out = o;
        c->in = in;
        c->gbps = 0;
        if (o && an->out[r].best_low > c->gbps) c->gbps = an->out[r].best_low;
        if (in && an->in[r].best_low > c->gbps) c->gbps = an->in[r].best_low;
        /* the evidence: its slow links to good partners, confirmation samples first */
        for (int pass = 0; pass < 2; pass++)
            for (size_t i = 0; i < an->nl; i++) {
                const struct link_stat *l = &an->l[i];
                bool mine = (o && l->src == r && good_for(an, l->dst, r)) ||
                            (in && l->dst == r && good_for(an, l->src, r));
                if (!mine || !link_slow(l) || (pass == 0) != (l->nconfirm > 0)) continue;
                for (size_t k = 0; k < l->count; k++)
                    add_ev(c, &an->s[an->order[l->first + k]]);
            }
    }
}

/* The slowest of a link's samples taken while an end was starved. */
static struct pf_coll_sample starved_sample(const struct analysis *an, const struct link_stat *l)
{
    struct pf_coll_sample best = an->s[an->order[l->first]];
    double bg = 1e300;
    for (size_t k = 0; k < l->count; k++) {
        const struct pf_coll_sample *y = &an->s[an->order[l->first + k]];
        double g = pf_coll_sample_gbps(y);
        if (y->starved && g < bg) {
            bg = g;
            best = *y;
        }
    }
    return best;
}

static void judge_links(struct pf_coll_judgement *j, const struct analysis *an)
{
    for (size_t i = 0; i < an->nl; i++) {
        const struct link_stat *l = &an->l[i];
        if (!link_slow(l) || explained(an, l)) continue;
        bool ready =
            end_ready(an, l->src, &an->out[l->src]) && end_ready(an, l->dst, &an->in[l->dst]);
        if (l->nlow < PF_COLL_LINK_SAMPLES && l->nstarved > 0) {
            /* slow only, or too few times, while an end was starved: the CPU, not the link */
            if (j->nstarved < PF_COLL_EVIDENCE_MAX) j->starved[j->nstarved] = starved_sample(an, l);
            j->nstarved++;
            continue;
        }
        if (!ready || l->nlow < PF_COLL_LINK_SAMPLES) {
            if (j->nunresolved < PF_COLL_EVIDENCE_MAX)
                j->unresolved[j->nunresolved] = an->s[an->order[l->first]];
            j->nunresolved++;
            continue;
        }
        struct pf_coll_culprit *c = new_culprit(j);
        c->kind = PF_COLL_CULPRIT_LINK;
        c->src = l->src;
        c->dst = l->dst;
        c->gbps = l->best;
        for (size_t k = 0; k < l->count; k++)
            add_ev(c, &an->s[an->order[l->first + k]]);
        struct pf_coll_sample none = {-1, -1, -1, 0, 0, 0};
        c->clear_src = cleared(&an->out[l->src]) ? fastest_other(an, l->src, true, l->dst) : none;
        c->clear_dst = cleared(&an->in[l->dst]) ? fastest_other(an, l->dst, false, l->src) : none;
    }
}

int pf_coll_judge(struct pf_coll_judgement *out, int n, const struct pf_coll_sample *s, size_t ns,
                  double ratio)
{
    memset(out, 0, sizeof(*out));
    if (n < 2 || (ns && !s) || !(ratio > 0 && ratio < 1))
        return pf_err_set(PF_EINVAL, "probe judgement: %d positions, ratio %g", n, ratio);
    struct analysis an;
    analyse(&an, n, s, ns, INT32_MAX, ratio);
    out->median = an.median;
    out->threshold = an.thr;
    out->nsamples = an.nvalid;
    out->npairs = an.nl;
    for (size_t i = 0; i < an.nvalid; i++)
        if (s[an.order[i]].round + 1 > out->rounds) out->rounds = s[an.order[i]].round + 1;
    judge_nodes(out, &an);
    judge_links(out, &an);
    analysis_free(&an);
    return 0;
}

void pf_coll_judgement_free(struct pf_coll_judgement *j)
{
    free(j->v);
    memset(j, 0, sizeof(*j));
}
