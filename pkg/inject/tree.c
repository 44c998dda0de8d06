/* The input as a tree of nodes that know their byte offsets, from libyaml's events.
 *
 * libyaml (yaml.h, 0.2.5) gives every event a start and an end mark: line and column count
 * characters, after its reader has decoded the input (scanner.c SKIP/SKIP_LINE: a CR LF pair,
 * CR, LF, NEL, LS and PS each end a line; a UTF-8 BOM is skipped before the first mark). The
 * byte offset of a mark is therefore the start of its line (found here with the same line
 * breaks) plus its column counted in UTF-8 characters; the mark's own `index` is not used. */
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

#include "internal.h"

/* The start of every line, with libyaml's line breaks. */
static void lines_build(struct pf_ytree *t)
{
    size_t cap = 64, n = 0;
    size_t *v = pf_xmalloc(cap * sizeof(*v));
    const unsigned char *s = (const unsigned char *)t->in;
    size_t i = 0;
    if (t->len >= 3 && s[0] == 0xEF && s[1] == 0xBB && s[2] == 0xBF) i = 3;
    v[n++] = i;
    while (i < t->len) {
        size_t brk = 0;
        if (s[i] == '\r' && i + 1 < t->len && s[i + 1] == '\n')
            brk = 2;
        else if (s[i] == '\n' || s[i] == '\r')
            brk = 1;
        else if (s[i] == 0xC2 && i + 1 < t->len && s[i + 1] == 0x85)
            brk = 2;
        else if (s[i] == 0xE2 && i + 2 < t->len && s[i + 1] == 0x80 &&
                 (s[i + 2] == 0xA8 || s[i + 2] == 0xA9))
            brk = 3;
        if (!brk) {
            i++;
            continue;
        }
        i += brk;
        if (n == cap) v = pf_xrealloc(v, (cap *= 2) * sizeof(*v));
        v[n++] = i;
    }
    t->lines = v;
    t->nlines = n;
}

/* The byte offset of a mark; -1 when it is not in the input. */
static long mark_off(const struct pf_ytree *t, yaml_mark_t m)
{
    if (m.line >= t->nlines) return m.column == 0 && m.line == t->nlines ? (long)t->len : -1;
    size_t i = t->lines[m.line];
    const unsigned char *s = (const unsigned char *)t->in;
    for (size_t c = 0; c < m.column; c++) {
        if (i >= t->len) return -1;
        unsigned char b = s[i];
        i += b < 0x80 ? 1 : (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : 4;
    }
    return i > t->len ? -1 : (long)i;
}

static struct pf_ynode *node_new(struct pf_ytree *t, enum pf_ykind kind, long start, int col)
{
    struct pf_ynode *n = pf_xcalloc(1, sizeof(*n));
    n->kind = kind;
    n->start = (size_t)start;
    n->col = col;
    n->next_all = t->all;
    t->all = n;
    return n;
}

static void node_push(struct pf_ynode *parent, struct pf_ynode *kid)
{
    /* an empty value (`key:` and nothing) is marked where the next token starts, perhaps lines
     * further on: it ends where its key ends */
    if (kid->kind == PF_Y_SCALAR && kid->plain && kid->vlen == 0 && parent->kind == PF_Y_MAP &&
        parent->n % 2 == 1)
        kid->start = kid->end = parent->kids[parent->n - 1]->end;
    if (parent->n == parent->cap) {
        parent->cap = parent->cap ? parent->cap * 2 : 8;
        parent->kids = pf_xrealloc(parent->kids, parent->cap * sizeof(*parent->kids));
    }
    parent->kids[parent->n++] = kid;
}

/* The second of two equal scalar keys of a mapping, or NULL (mappings of up to 1024 keys:
 * every Kubernetes object's; a larger one, such as a ConfigMap's data, is not looked at). */
static const struct pf_ynode *dup_key(const struct pf_ynode *map)
{
    if (map->n > 2048) return NULL;
    for (size_t i = 2; i < map->n; i += 2)
        for (size_t j = 0; j < i; j += 2)
            if (map->kids[i]->kind == PF_Y_SCALAR && map->kids[j]->kind == PF_Y_SCALAR &&
                strcmp(map->kids[i]->val, map->kids[j]->val) == 0)
                return map->kids[i];
    return NULL;
}

/* The index in t->lines of the line that holds off. */
static size_t line_index(const struct pf_ytree *t, size_t off)
{
    size_t lo = 0, hi = t->nlines;
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (t->lines[mid] <= off)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

static size_t line_of(const struct pf_ytree *t, size_t off)
{
    return line_index(t, off) + 1;
}

/* A nesting deeper than this is refused (a pod spec is about 12 deep). */
#define DEPTH_MAX 200

int pf_ytree_parse(struct pf_ytree *t, const char *in, size_t len, const char *name)
{
    memset(t, 0, sizeof(*t));
    t->in = in;
    t->len = len;
    lines_build(t);
    yaml_parser_t p;
    if (!yaml_parser_initialize(&p)) return pf_err_set(PF_ERR, "%s: out of memory", name);
    yaml_parser_set_input_string(&p, (const unsigned char *)in, len);
    yaml_parser_set_encoding(&p, YAML_UTF8_ENCODING);
    struct pf_ynode *stack[DEPTH_MAX];
    int depth = 0, r = 0;
    struct pf_ynode *root = NULL;
    size_t doc_start = 0;
    for (bool done = false; !done;) {
        yaml_event_t e;
        if (!yaml_parser_parse(&p, &e)) {
            r = pf_err_set(PF_EINVAL, "%s: not YAML: %s at line %zu column %zu", name,
                           p.problem ? p.problem : "error", p.problem_mark.line + 1,
                           p.problem_mark.column + 1);
            break;
        }
        long s = mark_off(t, e.start_mark), en = mark_off(t, e.end_mark);
        if (s < 0 || en < 0) {
            yaml_event_delete(&e);
            r = pf_err_set(PF_EINVAL, "%s: a position libyaml reports is outside the input", name);
            break;
        }
        struct pf_ynode *n = NULL;
        switch (e.type) {
        case YAML_STREAM_END_EVENT:
            done = true;
            break;
        case YAML_DOCUMENT_START_EVENT:
            root = NULL;
            doc_start = (size_t)s;
            break;
        case YAML_DOCUMENT_END_EVENT:
            if (t->ndocs == PF_YTREE_DOCS_MAX) {
                r = pf_err_set(PF_ETOOBIG, "%s: more than %d documents", name, PF_YTREE_DOCS_MAX);
                done = true;
                break;
            }
            t->docs[t->ndocs] = root;
            t->doc_start[t->ndocs++] = doc_start;
            break;
        case YAML_SCALAR_EVENT:
        case YAML_ALIAS_EVENT:
            n = node_new(t, e.type == YAML_ALIAS_EVENT ? PF_Y_ALIAS : PF_Y_SCALAR, s,
                         (int)e.start_mark.column);
            n->end = (size_t)en;
            if (e.type == YAML_SCALAR_EVENT) {
                n->val = pf_xmalloc(e.data.scalar.length + 1);
                memcpy(n->val, e.data.scalar.value, e.data.scalar.length);
                n->val[e.data.scalar.length] = '\0';
                n->vlen = e.data.scalar.length;
                n->plain = e.data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
                n->tagged = e.data.scalar.tag != NULL;
            }
            n->anchored = e.type == YAML_SCALAR_EVENT && e.data.scalar.anchor;
            break;
        case YAML_SEQUENCE_START_EVENT:
        case YAML_MAPPING_START_EVENT:
            if (depth == DEPTH_MAX) {
                yaml_event_delete(&e);
                r = pf_err_set(PF_EINVAL, "%s: nested deeper than %d at line %zu", name, DEPTH_MAX,
                               e.start_mark.line + 1);
                done = true;
                continue;
            }
            n = node_new(t, e.type == YAML_SEQUENCE_START_EVENT ? PF_Y_SEQ : PF_Y_MAP, s,
                         (int)e.start_mark.column);
            n->flow = e.type == YAML_SEQUENCE_START_EVENT
                          ? e.data.sequence_start.style == YAML_FLOW_SEQUENCE_STYLE
                          : e.data.mapping_start.style == YAML_FLOW_MAPPING_STYLE;
            n->anchored = e.type == YAML_SEQUENCE_START_EVENT ? e.data.sequence_start.anchor != NULL
                                                              : e.data.mapping_start.anchor != NULL;
            break;
        case YAML_SEQUENCE_END_EVENT:
        case YAML_MAPPING_END_EVENT: {
            struct pf_ynode *c = stack[--depth];
            if (c->flow) {
                c->close = (size_t)s; /* the ] or } */
                c->end = (size_t)en;
            } else {
                c->end = c->n ? c->kids[c->n - 1]->end : c->start;
            }
            const struct pf_ynode *dup = c->kind == PF_Y_MAP ? dup_key(c) : NULL;
            if (dup) {
                r = pf_err_set(PF_EINVAL,
                               "%s: line %zu: the key %s appears twice in one mapping (the API "
                               "server refuses it; a missing --- between two documents?)",
                               name, line_of(t, dup->start), dup->val);
                done = true;
            }
            break;
        }
        default:
            break;
        }
        if (n) {
            if (depth > 0)
                node_push(stack[depth - 1], n);
            else
                root = n;
            if (n->kind == PF_Y_SEQ || n->kind == PF_Y_MAP) stack[depth++] = n;
        }
        yaml_event_delete(&e);
    }
    yaml_parser_delete(&p);
    if (r < 0) pf_ytree_free(t);
    return r;
}

void pf_ytree_free(struct pf_ytree *t)
{
    for (struct pf_ynode *n = t->all, *next; n; n = next) {
        next = n->next_all;
        free(n->val);
        free(n->kids);
        free(n);
    }
    free(t->lines);
    t->all = NULL;
    t->lines = NULL;
    t->ndocs = 0;
}

struct pf_ynode *pf_ynode_get(const struct pf_ynode *map, const char *key)
{
    if (!map || map->kind != PF_Y_MAP) return NULL;
    for (size_t i = 0; i + 1 < map->n; i += 2)
        if (map->kids[i]->kind == PF_Y_SCALAR && strcmp(map->kids[i]->val, key) == 0)
            return map->kids[i + 1];
    return NULL;
}

const char *pf_ynode_str(const struct pf_ynode *map, const char *key)
{
    const struct pf_ynode *v = pf_ynode_get(map, key);
    return v && v->kind == PF_Y_SCALAR ? v->val : NULL;
}

size_t pf_ytree_line_start(const struct pf_ytree *t, size_t off)
{
    return t->lines[line_index(t, off)];
}
