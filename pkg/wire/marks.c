/* The marks: ranks lost, or that reported a failure, each once with why. */
#include "wire.h"

#include <stdlib.h>

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
