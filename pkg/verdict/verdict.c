#define _GNU_SOURCE
#include "verdict.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../explain/explain.h"

static const char *const status_names[] = {"skip", "pass", "warn", "fail"};

const char *pf_status_name(enum pf_status s)
{
    return (unsigned)s < PF_ARRAY_LEN(status_names) ? status_names[s] : "unknown";
}

int pf_status_parse(const char *s)
{
    for (size_t i = 0; i < PF_ARRAY_LEN(status_names); i++)
        if (strcmp(s, status_names[i]) == 0) return (int)i;
    return -1;
}

static char *vdup(const char *fmt, va_list ap)
{
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0) return pf_xstrdup("");
    return s;
}

struct pf_finding *pf_check_add_finding(struct pf_check *c, const char *code, enum pf_status status,
                                        const char *remedy, const char *fmt, ...)
{
    c->findings = pf_xrealloc(c->findings, (c->nfindings + 1) * sizeof(*c->findings));
    struct pf_finding *f = &c->findings[c->nfindings++];
    memset(f, 0, sizeof(*f));
    pf_strcpy(f->code, sizeof(f->code), code);
    f->status = status;
    va_list ap;
    va_start(ap, fmt);
    f->message = vdup(fmt, ap);
    va_end(ap);
    f->remedy = remedy ? pf_xstrdup(remedy) : NULL;
    return f;
}

static void set_message_v(struct pf_check *c, const char *fmt, va_list ap)
{
    free(c->message);
    c->message = vdup(fmt, ap);
}

void pf_check_set_message(struct pf_check *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_message_v(c, fmt, ap);
    va_end(ap);
}

void pf_check_skip(struct pf_check *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_message_v(c, fmt, ap);
    va_end(ap);
    c->status = PF_SKIP;
}

bool pf_check_has_finding(const struct pf_check *c, const char *code)
{
    for (size_t i = 0; i < c->nfindings; i++)
        if (strcmp(c->findings[i].code, code) == 0) return true;
    return false;
}

void pf_check_unknown(struct pf_check *c, const char *code, const char *fmt, ...)
{
    struct pf_node *seq = pf_node_get(c->evidence, "unknown");
    if (!seq || seq->kind != PF_NODE_SEQ) seq = pf_node_set_seq(c->evidence, "unknown");
    va_list ap;
    va_start(ap, fmt);
    char *missing = vdup(fmt, ap);
    va_end(ap);
    /* one entry per code and text */
    for (struct pf_node *e = seq->first; e; e = e->next) {
        const char *ec = pf_node_get_str(e, "code"), *em = pf_node_get_str(e, "missing");
        if (ec && em && strcmp(ec, code) == 0 && strcmp(em, missing) == 0) {
            free(missing);
            return;
        }
    }
    struct pf_node *m = pf_node_add_map(seq);
    pf_node_set_str(m, "code", code);
    pf_node_set_str(m, "missing", missing);
    free(missing);
}

size_t pf_check_unknowns(const struct pf_check *c)
{
    const struct pf_node *seq = c->evidence ? pf_node_get(c->evidence, "unknown") : NULL;
    return seq && seq->kind == PF_NODE_SEQ ? seq->count : 0;
}

void pf_verdict_init(struct pf_verdict *v)
{
    memset(v, 0, sizeof(*v));
    v->verdict = PF_PASS;
    v->pod = pf_node_new_map();
    v->environment = pf_node_new_map();
    v->collectives = pf_node_new_seq();
    v->culprits = pf_node_new_seq();
    v->extra = pf_node_new_map();
    pf_utc_timestamp(v->generated_at, sizeof(v->generated_at));
}

static void check_free(struct pf_check *c)
{
    for (size_t i = 0; i < c->nfindings; i++) {
        free(c->findings[i].message);
        free(c->findings[i].remedy);
    }
    free(c->findings);
    free(c->message);
    pf_node_free(c->evidence);
}

void pf_verdict_free(struct pf_verdict *v)
{
    for (size_t i = 0; i < v->nchecks; i++)
        check_free(&v->checks[i]);
    free(v->checks);
    pf_ranks_free(&v->ranks);
    struct pf_node *trees[] = {v->pod, v->environment, v->collectives, v->culprits, v->extra};
    for (size_t i = 0; i < PF_ARRAY_LEN(trees); i++)
        pf_node_free(trees[i]);
    memset(v, 0, sizeof(*v));
}

struct pf_check *pf_verdict_find_check(struct pf_verdict *v, const char *id)
{
    for (size_t i = 0; i < v->nchecks; i++)
        if (strcmp(v->checks[i].id, id) == 0) return &v->checks[i];
    return NULL;
}

struct pf_check *pf_verdict_add_check(struct pf_verdict *v, const char *id)
{
    struct pf_check *c = pf_verdict_find_check(v, id);
    if (c) return c;
    v->checks = pf_xrealloc(v->checks, (v->nchecks + 1) * sizeof(*v->checks));
    c = &v->checks[v->nchecks++];
    memset(c, 0, sizeof(*c));
    pf_strcpy(c->id, sizeof(c->id), id);
    c->status = PF_PASS;
    c->evidence = pf_node_new_map();
    return c;
}

void pf_verdict_add_culprit(struct pf_verdict *v, int rank, const char *pod, const char *node,
                            const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *reason = vdup(fmt, ap);
    va_end(ap);
    /* one entry per rank and reason */
    for (struct pf_node *c = v->culprits->first; c; c = c->next) {
        struct pf_node *r = pf_node_get(c, "rank");
        const char *why = pf_node_get_str(c, "reason");
        if (r && r->i == rank && why && strcmp(why, reason) == 0) {
            free(reason);
            return;
        }
    }
    struct pf_node *m = pf_node_add_map(v->culprits);
    pf_node_set_int(m, "rank", rank);
    if (pod && *pod) pf_node_set_str(m, "pod", pod);
    if (node && *node) pf_node_set_str(m, "node", node);
    pf_node_set_str(m, "reason", reason);
    free(reason);
}

bool pf_verdict_is_secret_name(const char *name)
{
    /* case-insensitive, over the whole name whatever its length */
    static const char *const words[] = {"TOKEN", "SECRET", "PASSWORD", "KEY"};
    for (size_t w = 0; w < PF_ARRAY_LEN(words); w++)
        if (strcasestr(name, words[w])) return true;
    return false;
}

void pf_verdict_finalize(struct pf_verdict *v, pf_policy_fn policy, void *arg)
{
    size_t nfail = 0, nwarn = 0, nskip = 0;
    char failed[400] = "", warned[400] = "";
    enum pf_status worst = PF_PASS;

    for (size_t i = 0; i < v->nchecks; i++) {
        struct pf_check *c = &v->checks[i];
        size_t keep = 0;
        enum pf_status cworst = PF_PASS;
        const struct pf_finding *first_worst = NULL;
        for (size_t j = 0; j < c->nfindings; j++) {
            struct pf_finding f = c->findings[j];
            int st = policy ? policy(arg, c->id, f.code, f.status) : (int)f.status;
            if (st < 0) {
                free(f.message);
                free(f.remedy);
                continue;
            }
            f.status = (enum pf_status)st;
            if (!f.remedy) {
                char remedy[2048];
                if (pf_explain_remedy(remedy, sizeof(remedy), c->id, f.code) == 0)
                    f.remedy = pf_xstrdup(remedy);
            }
            if (f.cls == PF_CLASS_NONE) f.cls = pf_explain_class(c->id, f.code);
            c->findings[keep++] = f;
        }
        c->nfindings = keep;
        for (size_t j = 0; j < c->nfindings; j++)
            if (!first_worst || c->findings[j].status > first_worst->status)
                first_worst = &c->findings[j];
        if (first_worst && first_worst->status > cworst) cworst = first_worst->status;
        if (c->status != PF_SKIP || c->nfindings > 0) {
            c->status = cworst;
            /* a problem leads: the first worst finding is the line a human reads first */
            if (first_worst && (cworst > PF_PASS || !c->message)) {
                free(c->message);
                c->message = pf_xstrdup(first_worst->message);
            }
        }
        if (!c->message) c->message = pf_xstrdup(c->status == PF_SKIP ? "skipped" : "ok");
        if (c->status == PF_PASS && pf_check_unknowns(c) > 0) {
            /* what could not be decided, on the line a human reads first */
            const struct pf_node *u = pf_node_get(c->evidence, "unknown")->first;
            size_t nu = pf_check_unknowns(c);
            char *msg = NULL;
            if (asprintf(&msg, "%s; unknown %s: %s%s", c->message, pf_node_get_str(u, "code"),
                         pf_node_get_str(u, "missing"),
                         nu > 1 ? " (and more: evidence.unknown)" : "") >= 0) {
                free(c->message);
                c->message = msg;
            }
        }
        char *list = c->status == PF_FAIL ? failed : c->status == PF_WARN ? warned : NULL;
        if (list) {
            size_t len = strlen(list);
            snprintf(list + len, sizeof(failed) - len, "%s%s", len ? ", " : "", c->id);
        }
        if (c->status == PF_FAIL)
            nfail++;
        else if (c->status == PF_WARN)
            nwarn++;
        else if (c->status == PF_SKIP)
            nskip++;
        if (c->status > worst) worst = c->status;
    }
    if (v->culprits->count > 0 && worst < PF_FAIL) {
        /* a named culprit always fails the gate */
        worst = PF_FAIL;
    }
    v->verdict = worst;
    pf_verdict_classify(v);
    if (nfail)
        snprintf(v->summary, sizeof(v->summary), "%zu of %zu checks failed: %s%s%s", nfail,
                 v->nchecks, failed, nwarn ? "; warnings: " : "", nwarn ? warned : "");
    else if (worst == PF_FAIL)
        snprintf(v->summary, sizeof(v->summary), "%zu culprit(s) named", v->culprits->count);
    else if (nwarn)
        snprintf(v->summary, sizeof(v->summary), "%zu of %zu checks warn: %s", nwarn, v->nchecks,
                 warned);
    else
        snprintf(v->summary, sizeof(v->summary), "all %zu checks passed", v->nchecks - nskip);
    if (!nfail && !nwarn && nskip) {
        size_t len = strlen(v->summary);
        snprintf(v->summary + len, sizeof(v->summary) - len, " (%zu skipped)", nskip);
    }
}

void pf_verdict_clone(struct pf_verdict *out, const struct pf_verdict *v)
{
    *out = *v;
    out->pod = pf_node_clone(v->pod);
    out->environment = pf_node_clone(v->environment);
    out->collectives = pf_node_clone(v->collectives);
    out->culprits = pf_node_clone(v->culprits);
    pf_ranks_clone(&out->ranks, &v->ranks);
    out->extra = pf_node_clone(v->extra);
    out->checks = pf_xcalloc(v->nchecks ? v->nchecks : 1, sizeof(*out->checks));
    for (size_t i = 0; i < v->nchecks; i++) {
        const struct pf_check *s = &v->checks[i];
        struct pf_check *d = &out->checks[i];
        *d = *s;
        d->message = s->message ? pf_xstrdup(s->message) : NULL;
        d->evidence = pf_node_clone(s->evidence);
        d->findings = pf_xcalloc(s->nfindings ? s->nfindings : 1, sizeof(*d->findings));
        for (size_t j = 0; j < s->nfindings; j++) {
            d->findings[j] = s->findings[j];
            d->findings[j].message =
                s->findings[j].message ? pf_xstrdup(s->findings[j].message) : NULL;
            d->findings[j].remedy =
                s->findings[j].remedy ? pf_xstrdup(s->findings[j].remedy) : NULL;
        }
    }
}
