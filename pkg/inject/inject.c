/* `preflight inject`: the gate of manifests/ added to any supported launcher's pod templates,
 * by insertion only (inject.h says why and how). Its parts (internal.h): the positioned tree
 * (tree.c), the added text and the edits (edit.c), the gate in a pod template (gate.c), one
 * function a launcher and the table of kinds (launchers.c); here the plan of one input, its
 * refusals and notes, and the output with its second pass. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- refusals and notes */

int pf_inject_refuse(struct plan *P, const char *fmt, ...)
{
    char msg[PF_BUF_MESSAGE];
    PF_FORMAT_ARGS(msg, fmt);
    if (P->rc == 0) P->rc = pf_err_set(PF_EINVAL, "%s: cannot gate: %s", P->where, msg);
    return -1;
}

void pf_inject_note(struct plan *P, const char *fmt, ...)
{
    char msg[PF_BUF_MESSAGE];
    PF_FORMAT_ARGS(msg, fmt);
    if (P->res) pf_strlist_addf(&P->res->notes, "%s: %s", P->where, msg);
}

/* ---- reading the input */

const struct pf_ynode *pf_inject_named(const struct pf_ynode *seq, const char *name)
{
    if (!seq || seq->kind != PF_Y_SEQ) return NULL;
    for (size_t i = 0; i < seq->n; i++) {
        const char *s = pf_ynode_str(seq->kids[i], "name");
        if (s && strcmp(s, name) == 0) return seq->kids[i];
    }
    return NULL;
}

/* A field that must be a mapping or a sequence (or absent): else refused, with the path. */
int pf_inject_want(struct plan *P, const struct pf_ynode *n, enum pf_ykind kind, const char *path)
{
    if (!n) return 0;
    if (n->kind == PF_Y_ALIAS)
        return pf_inject_refuse(P, "%s is an alias (*name): inject edits only what is written out",
                                path);
    if (n->kind != kind)
        return pf_inject_refuse(P, "%s is not a %s", path,
                                kind == PF_Y_MAP ? "mapping" : "sequence");
    if (n->anchored)
        return pf_inject_refuse(P, "%s has an anchor (&name): an edit would change its aliases too",
                                path);
    return 0;
}

/* A count field: its value, def when absent, -1 when it is not a plain integer. */
long pf_inject_count_of(const struct pf_ynode *map, const char *key, long def)
{
    const struct pf_ynode *v = pf_ynode_get(map, key);
    if (!v) return def;
    if (v->kind != PF_Y_SCALAR || !*v->val) return -1;
    char *end;
    long n = strtol(v->val, &end, 10);
    return *end || n < 0 || n > (1 << 20) ? -1 : n;
}

/* ---- the plan and the output */

static int edit_cmp(const void *a, const void *b)
{
    const struct edit *x = a, *y = b;
    if (x->at != y->at) return x->at < y->at ? -1 : 1;
    if (x->rank != y->rank) return y->rank - x->rank;
    return x->seq - y->seq;
}

static void plan_free(struct plan *P)
{
    pf_strlist_free(&P->runtimes);
    pf_strlist_free(&P->trainjobs);
    for (size_t i = 0; i < P->n; i++)
        free(P->e[i].text);
    free(P->e);
    P->e = NULL;
    P->n = P->cap = 0;
}

/* Plans the edits of in; 0 or -1 (pf_err_msg). */
static int plan_run(struct plan *P, struct pf_ytree *t, const char *in, size_t len)
{
    if (pf_ytree_parse(t, in, len, P->o->name) < 0) return -1;
    P->t = t;
    for (int d = 0; d < t->ndocs; d++) { /* the runtimes a TrainJob may name */
        const struct pf_ynode *o = t->docs[d], *items = pf_ynode_get(o, "items");
        size_t n = items && items->kind == PF_Y_SEQ ? items->n : 1;
        for (size_t i = 0; i < n; i++) {
            const struct pf_ynode *x = items && items->kind == PF_Y_SEQ ? items->kids[i] : o;
            const char *kind = pf_ynode_str(x, "kind");
            const char *name = pf_ynode_str(pf_ynode_get(x, "metadata"), "name");
            if (kind && name && strstr(kind, "TrainingRuntime")) pf_strlist_add(&P->runtimes, name);
            const char *rt =
                pf_ynode_str(pf_ynode_get(pf_ynode_get(x, "spec"), "runtimeRef"), "name");
            if (kind && name && rt && strcmp(kind, "TrainJob") == 0) {
                char pair[PF_BUF_LINE];
                snprintf(pair, sizeof(pair), "%s\t%s", rt, name);
                pf_strlist_add(&P->trainjobs, pair);
            }
        }
    }
    for (int d = 0; d < t->ndocs && P->rc == 0; d++) {
        char label[64];
        snprintf(label, sizeof(label), "document %d", d + 1);
        P->res->documents++;
        pf_inject_object(P, t->docs[d], label);
    }
    return P->rc;
}

int pf_inject(const struct pf_inject_opts *o, const char *in, size_t len, char **out,
              size_t *out_len, struct pf_inject_result *res)
{
    memset(res, 0, sizeof(*res));
    *out = NULL;
    *out_len = 0;
    if (len > PF_INJECT_MAX)
        return pf_err_set(PF_ETOOBIG, "%s: larger than %u bytes", o->name, PF_INJECT_MAX);
    if (memchr(in, '\0', len)) return pf_err_set(PF_EINVAL, "%s: not text (a NUL byte)", o->name);
    if (len >= 2 && ((in[0] == '\xFE' && in[1] == '\xFF') || (in[0] == '\xFF' && in[1] == '\xFE')))
        return pf_err_set(PF_EINVAL, "%s: UTF-16: convert it to UTF-8 first", o->name);
    struct plan P = {.o = o, .res = res};
    struct pf_ytree *t = pf_xcalloc(1, sizeof(*t));
    int r = plan_run(&P, t, in, len);
    if (r == 0) {
        if (P.n) qsort(P.e, P.n, sizeof(*P.e), edit_cmp);
        const char *nl = memchr(in, '\n', len);
        bool crlf = nl && nl > in && nl[-1] == '\r';
        struct pf_buf b;
        pf_buf_init(&b, 2 * (size_t)PF_INJECT_MAX);
        size_t at = 0;
        for (size_t i = 0; i < P.n; i++) {
            if (P.e[i].at < at) { /* inside a deleted range: deletions overlapping it merge */
                if (P.e[i].del_end > at) at = P.e[i].del_end;
                continue; /* an insertion there is lost: the check below refuses the input */
            }
            pf_buf_add(&b, in + at, P.e[i].at - at);
            if (P.e[i].at == len && len && in[len - 1] != '\n' && (i == 0 || P.e[i - 1].at != len))
                pf_buf_add(&b, crlf ? "\r\n" : "\n", crlf ? 2 : 1); /* the last line had none */
            for (const char *c = P.e[i].text; *c; c++)              /* the input's line breaks */
                pf_buf_add(&b, *c == '\n' && crlf ? "\r\n" : c, *c == '\n' && crlf ? 2 : 1);
            at = P.e[i].del_end > P.e[i].at ? P.e[i].del_end : P.e[i].at;
        }
        pf_buf_add(&b, in + at, len - at);
        if (pf_buf_check(&b, "the output") < 0) {
            r = -1;
            pf_buf_free(&b);
        } else {
            *out_len = b.len;
            *out = pf_buf_detach(&b);
        }
    }
    pf_ytree_free(t);
    plan_free(&P);
    if (r == 0 && res->gated) {
        /* the result must read back as YAML and need no edit: else the input had a shape the
         * edits do not fit (refused rather than written wrong) */
        struct pf_inject_result again = {0};
        struct plan Q = {.o = o, .res = &again};
        char *msg = NULL;
        if (plan_run(&Q, t, *out, *out_len) < 0)
            msg = pf_xasprintf("%s", pf_err_msg());
        else if (Q.n) {
            size_t line = 1;
            for (size_t i = 0; i < Q.e[0].at; i++)
                line += (*out)[i] == '\n';
            const char *txt = Q.e[0].text + strspn(Q.e[0].text, " \n");
            msg = pf_xasprintf("a second pass would add %zu more, the first at line %zu: %.*s", Q.n,
                               line, (int)strcspn(txt, "\n"), txt);
        }
        pf_ytree_free(t);
        plan_free(&Q);
        pf_inject_result_free(&again);
        if (msg) {
            r = pf_err_set(PF_EINVAL,
                           "%s: cannot gate: the edits do not fit this input's layout (%s); "
                           "write it in block style (kubectl get -o yaml does)",
                           o->name, msg);
            free(msg);
            free(*out);
            *out = NULL;
            *out_len = 0;
        }
    }
    free(t);
    if (r < 0) pf_strlist_free(&res->notes);
    return r < 0 ? -1 : 0;
}

void pf_inject_result_free(struct pf_inject_result *res)
{
    pf_strlist_free(&res->notes);
}
