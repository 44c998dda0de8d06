/* The verdict's ranks list (rank 0): flat entries and one pool of interned strings, written
 * straight into the YAML by emit.c. At 16,384 ranks a node tree of every rank's checks took
 * about 7.5 KiB a rank; an entry here is 48 bytes, plus its pod, node and address once. */
#include "verdict.h"

#include <stdlib.h>
#include <string.h>

struct pf_rank_row {
    int rank;
    uint32_t pod, node, address, state, verdict; /* offsets into the strings, 0: "" */
    int32_t passed;
    uint32_t bad0; /* its first check in bad[] */
    uint16_t nbad;
    bool has_tcp;
    double tcp_seconds;
};

struct pf_rank_bad {
    uint32_t id, status;
    uint32_t code0, ncodes; /* its codes: code[code0 .. code0 + ncodes) */
};

static uint32_t hash_of(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 16777619u;
    return h;
}

static void hash_put(struct pf_ranks *l, uint32_t off)
{
    size_t m = l->hcap - 1;
    size_t i = hash_of(l->s + off) & m;
    while (l->hash[i])
        i = (i + 1) & m;
    l->hash[i] = off;
}

static void hash_grow(struct pf_ranks *l)
{
    uint32_t *old = l->hash;
    size_t oldcap = l->hcap;
    l->hcap = oldcap ? oldcap * 2 : 256;
    l->hash = pf_xcalloc(l->hcap, sizeof(*l->hash));
    for (size_t i = 0; i < oldcap; i++)
        if (old[i]) hash_put(l, old[i]);
    free(old);
}

/* The offset of s in the pool, added once (NULL and "" are offset 0). */
static uint32_t intern(struct pf_ranks *l, const char *s)
{
    if (!s || !*s) return 0;
    if ((l->hn + 1) * 2 > l->hcap) hash_grow(l);
    size_t m = l->hcap - 1;
    for (size_t i = hash_of(s) & m; l->hash[i]; i = (i + 1) & m)
        if (strcmp(l->s + l->hash[i], s) == 0) return l->hash[i];
    size_t slen = strlen(s) + 1;
    size_t len = slen + (l->slen == 0); /* offset 0: "" */
    if (l->slen + len > l->scap) {
        l->scap = l->scap ? l->scap * 2 : 4096;
        while (l->slen + len > l->scap)
            l->scap *= 2;
        l->s = pf_xrealloc(l->s, l->scap);
    }
    if (l->slen == 0) l->s[l->slen++] = '\0';
    uint32_t off = (uint32_t)l->slen;
    memcpy(l->s + off, s, slen);
    l->slen += slen;
    hash_put(l, off);
    l->hn++;
    return off;
}

#define GROW(arr, n, cap, want)                                                                    \
    do {                                                                                           \
        if ((n) + (want) > (cap)) {                                                                \
            (cap) = (cap) ? (cap)*2 : 64;                                                          \
            while ((n) + (want) > (cap))                                                           \
                (cap) *= 2;                                                                        \
            (arr) = pf_xrealloc((arr), (cap) * sizeof(*(arr)));                                    \
        }                                                                                          \
    } while (0)

void pf_ranks_add(struct pf_ranks *l, const struct pf_rank_in *e)
{
    GROW(l->row, l->n, l->cap, 1);
    struct pf_rank_row *r = &l->row[l->n++];
    *r = (struct pf_rank_row){
        .rank = e->rank,
        .pod = intern(l, e->pod),
        .node = intern(l, e->node),
        .address = intern(l, e->address),
        .state = intern(l, e->state),
        .verdict = intern(l, e->verdict),
        .passed = e->passed,
        .bad0 = (uint32_t)l->nbad,
        .nbad = (uint16_t)(e->nchecks > UINT16_MAX ? UINT16_MAX : e->nchecks),
        .has_tcp = e->has_tcp,
        .tcp_seconds = e->tcp_seconds,
    };
    GROW(l->bad, l->nbad, l->capbad, r->nbad);
    for (size_t k = 0; k < r->nbad; k++) {
        const struct pf_rank_in_check *c = &e->checks[k];
        GROW(l->code, l->ncode, l->capcode, c->ncodes);
        struct pf_rank_bad *b = &l->bad[l->nbad++];
        *b = (struct pf_rank_bad){intern(l, c->id), intern(l, c->status), (uint32_t)l->ncode,
                                  (uint32_t)c->ncodes};
        for (size_t j = 0; j < c->ncodes; j++)
            l->code[l->ncode++] = intern(l, c->codes[j]);
    }
}

void pf_ranks_free(struct pf_ranks *l)
{
    free(l->row);
    free(l->bad);
    free(l->code);
    free(l->s);
    free(l->hash);
    memset(l, 0, sizeof(*l));
}

static void *dup_of(const void *p, size_t n, size_t size)
{
    if (!p || !n) return NULL;
    void *d = pf_xmalloc(n * size);
    memcpy(d, p, n * size);
    return d;
}

void pf_ranks_clone(struct pf_ranks *out, const struct pf_ranks *l)
{
    *out = *l;
    out->row = dup_of(l->row, l->cap, sizeof(*l->row));
    out->bad = dup_of(l->bad, l->capbad, sizeof(*l->bad));
    out->code = dup_of(l->code, l->capcode, sizeof(*l->code));
    out->s = dup_of(l->s, l->scap, 1);
    out->hash = dup_of(l->hash, l->hcap, sizeof(*l->hash));
}

static const char *at(const struct pf_ranks *l, uint32_t off)
{
    return l->s ? l->s + off : "";
}

void pf_ranks_get(const struct pf_ranks *l, size_t i, struct pf_rank_in *out)
{
    const struct pf_rank_row *r = &l->row[i];
    *out = (struct pf_rank_in){
        .rank = r->rank,
        .pod = at(l, r->pod),
        .node = at(l, r->node),
        .address = at(l, r->address),
        .state = at(l, r->state),
        .verdict = at(l, r->verdict),
        .has_tcp = r->has_tcp,
        .tcp_seconds = r->tcp_seconds,
        .passed = r->passed,
        .nchecks = r->nbad,
    };
}

void pf_ranks_check(const struct pf_ranks *l, size_t i, size_t k, struct pf_rank_in_check *out)
{
    const struct pf_rank_bad *b = &l->bad[l->row[i].bad0 + k];
    *out = (struct pf_rank_in_check){at(l, b->id), at(l, b->status), NULL, b->ncodes};
}

const char *pf_ranks_code(const struct pf_ranks *l, size_t i, size_t k, size_t j)
{
    const struct pf_rank_bad *b = &l->bad[l->row[i].bad0 + k];
    return at(l, l->code[b->code0 + j]);
}

const char *pf_ranks_node(const struct pf_ranks *l, long long rank)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->row[i].rank == rank) return at(l, l->row[i].node);
    return "";
}
