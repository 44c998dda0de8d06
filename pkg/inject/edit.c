/* inject's text: what is added (a small tree of keys and values, written in block or flow
 * style with the indentation of its neighbours) and the edits, inserted or deleted at the byte
 * offsets that libyaml's marks give the positioned tree (tree.c). */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

/* ---- what is added: a small tree of keys and values, written in block or flow style */

struct cn *pf_cn_new(enum cn_kind k)
{
    struct cn *c = pf_xcalloc(1, sizeof(*c));
    c->kind = k;
    return c;
}
struct cn *pf_cn_add(struct cn *parent, const char *key, struct cn *kid)
{
    kid->key = key;
    if (parent->n == parent->cap) {
        parent->cap = parent->cap ? parent->cap * 2 : 8;
        parent->kids = pf_xrealloc(parent->kids, parent->cap * sizeof(*parent->kids));
    }
    parent->kids[parent->n++] = kid;
    return kid;
}
struct cn *pf_cn_str(struct cn *parent, const char *key, const char *s)
{
    struct cn *c = pf_cn_new(CN_STR);
    c->s = pf_xstrdup(s);
    return pf_cn_add(parent, key, c);
}
struct cn *pf_cn_raw(struct cn *parent, const char *key, const char *s)
{
    struct cn *c = pf_cn_new(CN_RAW);
    c->s = pf_xstrdup(s);
    return pf_cn_add(parent, key, c);
}
struct cn *pf_cn_map(struct cn *parent, const char *key, bool compact)
{
    struct cn *c = pf_cn_new(CN_MAP);
    c->compact = compact;
    return parent ? pf_cn_add(parent, key, c) : c;
}
struct cn *pf_cn_seq(struct cn *parent, const char *key, bool compact)
{
    struct cn *c = pf_cn_new(CN_SEQ);
    c->compact = compact;
    return parent ? pf_cn_add(parent, key, c) : c;
}
void pf_cn_free(struct cn *c)
{
    if (!c) return;
    for (size_t i = 0; i < c->n; i++)
        pf_cn_free(c->kids[i]);
    free(c->kids);
    free(c->s);
    free(c->okey);
    free(c);
}

/* A string that reads back as the same string under YAML 1.1 and 1.2 when plain; else in
 * double quotes. */
bool pf_cn_plain_ok(const char *s)
{
    static const char *const words[] = {"y",   "n",    "yes",   "no",   "on",
                                        "off", "true", "false", "null", "~"};
    if (!*s || !(isalpha((unsigned char)*s) || *s == '/' || *s == '_')) return false;
    for (size_t i = 0; i < PF_ARRAY_LEN(words); i++)
        if (strcasecmp(s, words[i]) == 0) return false;
    for (const char *p = s; *p; p++) {
        unsigned char c = (unsigned char)*p;
        if (isalnum(c) || c == '-' || c == '_' || c == '.' || c == '/') continue;
        if (c == ':' && p[1] && p[1] != ' ' && !isdigit((unsigned char)s[0])) continue;
        return false;
    }
    return true;
}
static void put_scalar(struct pf_buf *b, const struct cn *c, bool json)
{
    if (c->kind == CN_RAW || (!json && pf_cn_plain_ok(c->s))) {
        pf_buf_add(b, c->s, strlen(c->s));
        return;
    }
    pf_buf_add(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)c->s; *p; p++) {
        if (*p == '"' || *p == '\\')
            pf_buf_addf(b, "\\%c", *p);
        else if (*p < 0x20 || *p == 0x7f)
            pf_buf_addf(b, "\\u%04x", *p); /* YAML and JSON both */
        else
            pf_buf_add(b, p, 1);
    }
    pf_buf_add(b, "\"", 1);
}

/* Flow style; json: every string and key in double quotes, so that JSON input (kubectl get
 * -o json) stays JSON. */
static void put_flow(struct pf_buf *b, const struct cn *c, bool json)
{
    if (c->kind == CN_STR || c->kind == CN_RAW) {
        put_scalar(b, c, json);
        return;
    }
    bool map = c->kind == CN_MAP;
    pf_buf_add(b, map ? "{" : "[", 1);
    for (size_t i = 0; i < c->n; i++) {
        if (i) pf_buf_add(b, ", ", 2);
        if (map && json && c->kids[i]->key[0] != '"')
            pf_buf_addf(b, "\"%s\": ", c->kids[i]->key);
        else if (map)
            pf_buf_addf(b, "%s: ", c->kids[i]->key);
        put_flow(b, c->kids[i], json);
    }
    pf_buf_add(b, map ? "}" : "]", 1);
}

static void put_indent(struct pf_buf *b, int n)
{
    for (int i = 0; i < n; i++)
        pf_buf_add(b, " ", 1);
}

static void put_block(struct pf_buf *b, const struct cn *c, int indent, bool first_inline);

/* "key: value" or "key:" and the collection below it, at indent (the first line's indent
 * already written when first_inline). */
static void put_entry(struct pf_buf *b, const struct cn *kid, int indent, bool first_inline)
{
    if (!first_inline) put_indent(b, indent);
    if (kid->key) pf_buf_addf(b, "%s:", kid->key);
    bool coll = kid->kind == CN_MAP || kid->kind == CN_SEQ;
    if (!coll || kid->compact || kid->n == 0) {
        if (kid->key) pf_buf_add(b, " ", 1);
        put_flow(b, kid, false);
        pf_buf_add(b, "\n", 1);
        return;
    }
    pf_buf_add(b, "\n", 1);
    put_block(b, kid, indent + 2, false);
}

/* A block collection, every line at indent (the first one's indent already written when
 * first_inline: after "- "). */
static void put_block(struct pf_buf *b, const struct cn *c, int indent, bool first_inline)
{
    for (size_t i = 0; i < c->n; i++) {
        const struct cn *kid = c->kids[i];
        bool inl = first_inline && i == 0;
        if (c->kind == CN_MAP) {
            put_entry(b, kid, indent, inl);
            continue;
        }
        if (!inl) put_indent(b, indent);
        pf_buf_add(b, "- ", 2);
        if (kid->kind == CN_MAP && !kid->compact && kid->n)
            put_block(b, kid, indent + 2, true);
        else {
            put_flow(b, kid, false);
            pf_buf_add(b, "\n", 1);
        }
    }
}

/* ---- the edits: text inserted at offsets of the input */

static void edit_add(struct plan *P, size_t at, int rank, char *text)
{
    if (P->n == P->cap) {
        P->cap = P->cap ? P->cap * 2 : 16;
        P->e = pf_xrealloc(P->e, P->cap * sizeof(*P->e));
    }
    P->e[P->n] = (struct edit){at, 0, rank, (int)P->n, text};
    P->n++;
}

/* Deletes [from, to): after any insertion at from. */
static void edit_del(struct plan *P, size_t from, size_t to)
{
    edit_add(P, from, -1000, pf_xstrdup(""));
    P->e[P->n - 1].del_end = to;
}

/* The offset where a new line after the one holding off begins (a trailing comment stays on
 * its line); the end of the input when it ends without a line break there (pf_inject then
 * writes one before the first insertion). */
static size_t line_after(const struct plan *P, size_t off)
{
    const char *in = P->t->in;
    if (off > 0 && (in[off - 1] == '\n' || in[off - 1] == '\r')) return off;
    for (size_t i = off; i < P->t->len; i++)
        if (in[i] == '\n') return i + 1;
    return P->t->len;
}

static bool only_spaces(const struct plan *P, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++)
        if (P->t->in[i] != ' ') return false;
    return true;
}

void pf_inject_map_add(struct plan *P, const struct pf_ynode *map, const char *key, struct cn *val)
{
    struct pf_buf b;
    pf_buf_init(&b, PF_INJECT_MAX);
    val->key = key;
    if (map->flow) {
        if (map->n) pf_buf_add(&b, ", ", 2);
        pf_buf_addf(&b, "\"%s\": ", key);
        put_flow(&b, val, true);
        edit_add(P, map->close, 0, pf_buf_detach(&b));
        return;
    }
    /* before the first key when it begins its line: nothing the user wrote after the mapping
     * (a block scalar's last line, a comment, the end of the input) is touched; else (a
     * mapping after "- ") after its last line */
    size_t ls = map->n ? pf_ytree_line_start(P->t, map->kids[0]->start) : 0;
    size_t at = map->n && only_spaces(P, ls, map->kids[0]->start) ? ls : line_after(P, map->end);
    put_entry(&b, val, map->col, false);
    edit_add(P, at, 2 * map->col, pf_buf_detach(&b));
}

/* The items of list (a CN_SEQ) at the start (first) or the end of a sequence. */
void pf_inject_seq_add(struct plan *P, const struct pf_ynode *seq, const struct cn *list,
                       bool first)
{
    struct pf_buf b;
    pf_buf_init(&b, PF_INJECT_MAX);
    const struct cn wrap = *list;
    if (seq->flow) {
        if (!first && seq->n) pf_buf_add(&b, ", ", 2);
        for (size_t i = 0; i < list->n; i++) {
            if (i) pf_buf_add(&b, ", ", 2);
            put_flow(&b, list->kids[i], true);
        }
        if (first && seq->n) pf_buf_add(&b, ", ", 2);
        edit_add(P, first ? seq->start + 1 : seq->close, 0, pf_buf_detach(&b));
        return;
    }
    size_t ls = pf_ytree_line_start(P->t, seq->start);
    if (first && only_spaces(P, ls, seq->start)) {
        put_block(&b, &wrap, seq->col, false);
        edit_add(P, ls, 2 * seq->col + 1, pf_buf_detach(&b));
        return;
    }
    size_t at = line_after(P, seq->end);
    put_block(&b, &wrap, seq->col, false);
    edit_add(P, at, 2 * seq->col + 1, pf_buf_detach(&b));
}

/* Deletes the entries of a mapping whose key is one of keys[0..n): whole lines in block style
 * (when the key begins its line); in flow style each run of deleted entries with one comma,
 * so that what is left is JSON when the input was. 0, or -1 when one cannot be deleted. */
int pf_inject_map_del(struct plan *P, const struct pf_ynode *map, const char *const *keys, size_t n)
{
    if (!map || map->kind != PF_Y_MAP) return 0;
    size_t entries = map->n / 2;
    bool *del = pf_xcalloc(entries ? entries : 1, sizeof(*del));
    for (size_t e = 0; e < entries; e++)
        for (size_t k = 0; k < n; k++)
            if (map->kids[2 * e]->kind == PF_Y_SCALAR &&
                strcmp(map->kids[2 * e]->val, keys[k]) == 0)
                del[e] = true;
    int r = 0;
    for (size_t a = 0; a < entries; a++) {
        if (!del[a]) continue;
        size_t b = a;
        while (b + 1 < entries && del[b + 1])
            b++;
        const struct pf_ynode *ka = map->kids[2 * a], *vb = map->kids[2 * b + 1];
        if (map->flow) {
            if (b + 1 < entries)
                edit_del(P, ka->start, map->kids[2 * (b + 1)]->start);
            else if (a > 0)
                edit_del(P, map->kids[2 * a - 1]->end, vb->end);
            else
                edit_del(P, ka->start, vb->end);
        } else {
            for (size_t e = a; e <= b; e++) {
                const struct pf_ynode *k = map->kids[2 * e], *v = map->kids[2 * e + 1];
                size_t ls = pf_ytree_line_start(P->t, k->start);
                if (!only_spaces(P, ls, k->start)) {
                    r = -1;
                    continue;
                }
                edit_del(P, ls, line_after(P, v->end > k->end ? v->end : k->end));
            }
        }
        P->res->removed += (int)(b - a + 1);
        a = b;
    }
    free(del);
    return r;
}
