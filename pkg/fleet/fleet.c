/* The fleet's state, its findings and culprits, and the names of ranks. */
#include "fleet.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct pf_strlist no_env;

void pf_fleet_init(struct pf_fleet *f, int world)
{
    memset(f, 0, sizeof(*f));
    f->world = world;
    f->r = pf_xcalloc(world > 0 ? (size_t)world : 1, sizeof(*f->r));
    for (int i = 0; i < world; i++) {
        struct pf_fleet_rank *r = &f->r[i];
        r->pod = r->node = r->addr = r->why = r->version = r->digest = r->nccl_version = r->fabric =
            r->refused_claim = "";
        r->env = &no_env;
        r->ports_down = -1;
    }
    f->out.expected = -1;
}

static void rank_free(struct pf_fleet_rank *r)
{
    for (size_t i = 0; i < r->nbad; i++) {
        pf_strlist_free(&r->bad[i].codes);
        free(r->bad[i].own_id);
    }
    free(r->bad);
    free(r->st);
    r->bad = NULL;
    r->st = NULL;
    r->nbad = r->nst = r->passed = 0;
}

const char *pf_fleet_check_id(const struct pf_fleet *f, const struct pf_fleet_check *c)
{
    if (c->own_id) return c->own_id;
    return c->id < f->ids.n ? f->ids.v[c->id] : "?";
}

const char *pf_fleet_keep(struct pf_fleet *f, const char *s)
{
    pf_strlist_add(&f->kept, s ? s : "");
    return f->kept.v[f->kept.n - 1];
}

void pf_fleet_summary_free(struct pf_fleet_summary *s)
{
    for (size_t i = 0; i < s->nfindings; i++) {
        free(s->findings[i].check);
        free(s->findings[i].code);
        free(s->findings[i].remedy);
        free(s->findings[i].message);
    }
    for (size_t i = 0; i < s->nculprits; i++) {
        free(s->culprits[i].pod);
        free(s->culprits[i].node);
        free(s->culprits[i].reason);
    }
    free(s->findings);
    free(s->culprits);
    memset(s, 0, sizeof(*s));
    s->expected = -1;
}

void pf_fleet_free(struct pf_fleet *f)
{
    if (f->r)
        for (int i = 0; i < f->world; i++)
            rank_free(&f->r[i]);
    free(f->r);
    for (uint32_t i = 0; i < f->gang.n; i++)
        free(f->gang.v[i]);
    free(f->gang.v);
    free(f->gang.slot);
    pf_strlist_free(&f->ids);
    pf_strlist_free(&f->kept);
    pf_fleet_summary_free(&f->out);
    memset(f, 0, sizeof(*f));
}

void pf_fleet_who(char *out, size_t n, const struct pf_fleet *f, int rank)
{
    const char *pod = rank >= 0 && rank < f->world ? f->r[rank].pod : "";
    if (*pod)
        snprintf(out, n, "rank %d (%s)", rank, pod);
    else
        snprintf(out, n, "rank %d", rank);
}

static bool has_finding(const struct pf_fleet_summary *s, const char *check, const char *code,
                        const char *msg)
{
    for (size_t i = 0; i < s->nfindings; i++)
        if (strcmp(s->findings[i].check, check) == 0 && strcmp(s->findings[i].code, code) == 0 &&
            strcmp(s->findings[i].message, msg) == 0)
            return true;
    return false;
}

void pf_fleet_finding(struct pf_fleet_summary *s, const char *check, const char *code,
                      enum pf_status st, const char *remedy, const char *fmt, ...)
{
    char msg[2048];
    PF_FORMAT_ARGS(msg, fmt);
    if (has_finding(s, check, code, msg)) return;
    s->findings = pf_xrealloc(s->findings, (s->nfindings + 1) * sizeof(*s->findings));
    struct pf_fleet_finding *x = &s->findings[s->nfindings++];
    x->check = pf_xstrdup(check);
    x->code = pf_xstrdup(code);
    x->status = st;
    x->remedy = pf_xstrdup(remedy ? remedy : "");
    x->message = pf_xstrdup(msg);
}

static void culprit_v(struct pf_fleet_summary *s, int rank, const char *pod, const char *node,
                      const char *fmt, va_list ap)
{
    char why[1024];
    vsnprintf(why, sizeof(why), fmt, ap);
    s->culprits = pf_xrealloc(s->culprits, (s->nculprits + 1) * sizeof(*s->culprits));
    struct pf_fleet_culprit *c = &s->culprits[s->nculprits++];
    c->rank = rank;
    c->pod = pf_xstrdup(pod ? pod : "");
    c->node = pf_xstrdup(node ? node : "");
    c->reason = pf_xstrdup(why);
}

void pf_fleet_culprit(struct pf_fleet_summary *s, int rank, const char *pod, const char *node,
                      const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    culprit_v(s, rank, pod, node, fmt, ap);
    va_end(ap);
}

void pf_fleet_blame(struct pf_fleet *f, int rank, const char *fmt, ...)
{
    bool in = rank >= 0 && rank < f->world;
    va_list ap;
    va_start(ap, fmt);
    culprit_v(&f->out, rank, in ? f->r[rank].pod : "", in ? f->r[rank].node : "", fmt, ap);
    va_end(ap);
}
