/* Blame: from the measured links, which node is slow (all its links out, or in, are slow)
 * and which single links are slow. */
#include "collective.h"

#include <stdlib.h>
#include <string.h>

void pf_coll_blame(struct pf_coll_blame *out, const struct pf_coll_link *links, size_t n,
                   double ratio)
{
    memset(out, 0, sizeof(*out));
    if (n == 0) return;
    double *v = pf_xmalloc(n * sizeof(double));
    int maxrank = 0;
    for (size_t i = 0; i < n; i++) {
        v[i] = links[i].gbps;
        if (links[i].src > maxrank) maxrank = links[i].src;
        if (links[i].dst > maxrank) maxrank = links[i].dst;
    }
    out->median = pf_median(v, n);
    out->threshold = out->median * ratio;
    free(v);

    size_t nr = (size_t)maxrank + 1;
    int *out_tot = pf_xcalloc(nr, sizeof(int)), *out_slow = pf_xcalloc(nr, sizeof(int));
    int *in_tot = pf_xcalloc(nr, sizeof(int)), *in_slow = pf_xcalloc(nr, sizeof(int));
    double *best_slow = pf_xcalloc(nr, sizeof(double));
    for (size_t i = 0; i < n; i++) {
        const struct pf_coll_link *l = &links[i];
        if (l->src < 0 || l->dst < 0 || l->src == l->dst) continue;
        bool slow = l->gbps < out->threshold;
        out_tot[l->src]++;
        in_tot[l->dst]++;
        if (slow) {
            out_slow[l->src]++;
            in_slow[l->dst]++;
        }
    }
    bool *node_out = pf_xcalloc(nr, sizeof(bool)), *node_in = pf_xcalloc(nr, sizeof(bool));
    for (size_t r = 0; r < nr; r++) {
        /* two peers at least: with one, a slow link and a slow node look the same */
        node_out[r] = out_tot[r] >= 2 && out_slow[r] == out_tot[r];
        node_in[r] = in_tot[r] >= 2 && in_slow[r] == in_tot[r];
    }
    for (size_t i = 0; i < n; i++) {
        const struct pf_coll_link *l = &links[i];
        if (l->src < 0 || l->dst < 0 || l->src == l->dst || !(l->gbps < out->threshold)) continue;
        if (node_out[l->src] && l->gbps > best_slow[l->src]) best_slow[l->src] = l->gbps;
        if (node_in[l->dst] && l->gbps > best_slow[l->dst]) best_slow[l->dst] = l->gbps;
        if (node_out[l->src] || node_in[l->dst]) continue;
        out->links = pf_xrealloc(out->links, (out->nlinks + 1) * sizeof(*out->links));
        out->links[out->nlinks++] = *l;
    }
    for (size_t r = 0; r < nr; r++) {
        if (!node_out[r] && !node_in[r]) continue;
        out->nodes = pf_xrealloc(out->nodes, (out->nnodes + 1) * sizeof(*out->nodes));
        struct pf_coll_slow_node *s = &out->nodes[out->nnodes++];
        s->rank = (int)r;
        s->out = node_out[r];
        s->in = node_in[r];
        s->nslow = (node_out[r] ? out_slow[r] : 0) + (node_in[r] ? in_slow[r] : 0);
        s->ntotal = (node_out[r] ? out_tot[r] : 0) + (node_in[r] ? in_tot[r] : 0);
        s->max_gbps = best_slow[r];
    }
    free(out_tot);
    free(out_slow);
    free(in_tot);
    free(in_slow);
    free(best_slow);
    free(node_out);
    free(node_in);
}

void pf_coll_blame_free(struct pf_coll_blame *b)
{
    free(b->nodes);
    free(b->links);
    memset(b, 0, sizeof(*b));
}
