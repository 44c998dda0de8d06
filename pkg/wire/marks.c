/* The marks: ranks lost, or that reported a failure, each once with why; and the words of a
 * REJECT. */
#include "wire.h"

#include <stdlib.h>
#include <string.h>

/* by enum pf_wire_refusal; the words protocol 4's rank 0 sends (pkg/rendezvous/admit.c) */
static const char *const refusal_words[PF_WIRE_REFUSED_END] = {
    [PF_WIRE_REFUSED_TOKEN] = "auth-failed",        [PF_WIRE_REFUSED_RUN] = "version-mismatch",
    [PF_WIRE_REFUSED_DUPLICATE] = "duplicate-rank", [PF_WIRE_REFUSED_WORLD] = "world-size-mismatch",
    [PF_WIRE_REFUSED_LATE] = "missing-ranks",       [PF_WIRE_REFUSED_JOB] = "job-mismatch",
};

const char *pf_wire_refusal_code(enum pf_wire_refusal r)
{
    return (unsigned)r < PF_WIRE_REFUSED_END ? refusal_words[r] : "";
}

int pf_wire_refusal_parse(const char *code, enum pf_wire_refusal *out)
{
    for (int k = 0; k < PF_WIRE_REFUSED_END; k++)
        if (code && strcmp(code, refusal_words[k]) == 0) {
            *out = (enum pf_wire_refusal)k;
            return 0;
        }
    return pf_err_set(PF_EINVAL, "a REJECT with the code \"%s\", which this version does not know",
                      code ? code : "");
}

void pf_wire_mark(struct pf_wire_marks *l, int rank, const char *why)
{
    if (pf_wire_marked(l, rank)) return;
    l->v = pf_xrealloc(l->v, (l->n + 1) * sizeof(*l->v));
    l->v[l->n].rank = rank;
    l->v[l->n].why = pf_xstrdup(why && *why ? why : "failed");
    l->n++;
}

bool pf_wire_marked(const struct pf_wire_marks *l, int rank)
{
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i].rank == rank) return true;
    return false;
}

void pf_wire_marks_free(struct pf_wire_marks *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i].why);
    free(l->v);
    l->v = NULL;
    l->n = 0;
}
