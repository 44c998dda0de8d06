/* gpu.fabric's cross-rank part: the NVLink fabric identity (cluster UUID and clique id) every
 * rank of a multi-node NVLink job must share, compared among the ranks' JOIN claims. */
#define _GNU_SOURCE
#include "fleet.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int pf_fleet_fabric_parse(struct pf_fleet_fabric *r, const char *text)
{
    const char *slash = text ? strrchr(text, '/') : NULL;
    if (!slash || (size_t)(slash - text) >= sizeof(r->cluster_uuid) || !slash[1]) return -1;
    char *end;
    errno = 0;
    unsigned long v = strtoul(slash + 1, &end, 10);
    if (*end || errno || v > 0xffffffffUL || slash[1] < '0' || slash[1] > '9') return -1;
    snprintf(r->cluster_uuid, sizeof(r->cluster_uuid), "%.*s", (int)(slash - text), text);
    r->clique = (unsigned)v;
    return 0;
}

static bool same(const struct pf_fleet_fabric *a, const struct pf_fleet_fabric *b)
{
    return a->clique == b->clique && strcmp(a->cluster_uuid, b->cluster_uuid) == 0;
}

size_t pf_fleet_fabric_compare(struct pf_fleet_fabric_mismatch *out, size_t max,
                               const struct pf_fleet_fabric *ranks, size_t n)
{
    if (n == 0) return 0;
    /* the identity most ranks share; on a tie, the one of the lowest rank */
    size_t best = 0, best_count = 0;
    int best_rank = 0;
    for (size_t i = 0; i < n; i++) {
        size_t count = 0;
        int low = ranks[i].rank;
        for (size_t j = 0; j < n; j++)
            if (same(&ranks[i], &ranks[j])) {
                count++;
                if (ranks[j].rank < low) low = ranks[j].rank;
            }
        if (count > best_count || (count == best_count && low < best_rank)) {
            best = i;
            best_count = count;
            best_rank = low;
        }
    }
    const struct pf_fleet_fabric *want = &ranks[best];
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const struct pf_fleet_fabric *r = &ranks[i];
        if (same(r, want)) continue;
        if (k < max) {
            out[k].rank = r->rank;
            if (!r->cluster_uuid[0])
                snprintf(out[k].message, sizeof(out[k].message),
                         "rank %d has no NVLink fabric; %zu of %zu ranks are in cluster %s "
                         "clique %u",
                         r->rank, best_count, n, want->cluster_uuid, want->clique);
            else if (strcmp(r->cluster_uuid, want->cluster_uuid) != 0)
                snprintf(out[k].message, sizeof(out[k].message),
                         "rank %d is in NVLink cluster %s, %zu of %zu ranks in %s", r->rank,
                         r->cluster_uuid, best_count, n,
                         want->cluster_uuid[0] ? want->cluster_uuid : "none");
            else
                snprintf(out[k].message, sizeof(out[k].message),
                         "rank %d is in clique %u of cluster %s, %zu of %zu ranks in clique %u",
                         r->rank, r->clique, r->cluster_uuid, best_count, n, want->clique);
        }
        k++;
    }
    return k;
}

void pf_fleet_fabric_agree(struct pf_fleet *f)
{
    struct pf_fleet_fabric *ranks = pf_xcalloc((size_t)f->world + 1, sizeof(*ranks));
    size_t n = 0;
    for (int r = 0; r < f->world; r++) {
        if (f->r[r].state != PF_FLEET_JOINED || !f->r[r].fabric[0] ||
            pf_fleet_fabric_parse(&ranks[n], f->r[r].fabric) < 0)
            continue;
        ranks[n++].rank = r;
    }
    struct pf_fleet_fabric_mismatch mm[PF_WIRE_LIST_MAX];
    size_t k = pf_fleet_fabric_compare(mm, PF_WIRE_LIST_MAX, ranks, n);
    if (k) {
        struct pf_buf b;
        pf_buf_init(&b, 1 << 16);
        for (size_t i = 0; i < k && i < PF_WIRE_LIST_MAX; i++) {
            char w[160];
            pf_fleet_who(w, sizeof(w), f, mm[i].rank);
            pf_buf_addf(&b, "%s%s: %s", i ? "; " : "", w, mm[i].message);
            pf_fleet_blame(f, mm[i].rank, "not in the job's NVLink domain: %s", mm[i].message);
        }
        if (k > PF_WIRE_LIST_MAX) pf_buf_addf(&b, "; and %zu more", k - PF_WIRE_LIST_MAX);
        pf_fleet_finding(&f->out, "gpu.fabric", "clique-mismatch", PF_FAIL, NULL,
                         "%zu of %zu ranks expecting multi-node NVLink are outside the NVLink "
                         "domain of the others: %s",
                         k, n, pf_buf_str(&b));
        pf_buf_free(&b);
    }
    free(ranks);
}
