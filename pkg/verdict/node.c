#define _GNU_SOURCE
#include "verdict.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct pf_node *node_new(enum pf_node_kind kind)
{
    struct pf_node *n = pf_xcalloc(1, sizeof(*n));
    n->kind = kind;
    return n;
}

struct pf_node *pf_node_new_map(void)
{
    return node_new(PF_NODE_MAP);
}

struct pf_node *pf_node_new_seq(void)
{
    return node_new(PF_NODE_SEQ);
}

void pf_node_free(struct pf_node *n)
{
    while (n) {
        struct pf_node *next = n->next;
        pf_node_free(n->first);
        free(n->key);
        free(n->str);
        free(n);
        n = next;
    }
}

static void clear_value(struct pf_node *n)
{
    pf_node_free(n->first);
    n->first = n->last = NULL;
    n->count = 0;
    free(n->str);
    n->str = NULL;
}

struct pf_node *pf_node_get(const struct pf_node *map, const char *key)
{
    if (!map || map->kind != PF_NODE_MAP) return NULL;
    for (struct pf_node *c = map->first; c; c = c->next)
        if (c->key && strcmp(c->key, key) == 0) return c;
    return NULL;
}

const char *pf_node_get_str(const struct pf_node *map, const char *key)
{
    struct pf_node *n = pf_node_get(map, key);
    return n && n->kind == PF_NODE_STR ? n->str : NULL;
}

static void link_child(struct pf_node *parent, struct pf_node *child)
{
    child->next = NULL;
    if (parent->last)
        parent->last->next = child;
    else
        parent->first = child;
    parent->last = child;
    parent->count++;
}

/* Returns the member of map named key, reset to kind, creating it at the end if absent. */
static struct pf_node *member(struct pf_node *map, const char *key, enum pf_node_kind kind)
{
    struct pf_node *n = pf_node_get(map, key);
    if (n) {
        clear_value(n);
        n->kind = kind;
        return n;
    }
    n = node_new(kind);
    n->key = pf_xstrdup(key);
    link_child(map, n);
    return n;
}

struct pf_node *pf_node_set_str(struct pf_node *map, const char *key, const char *value)
{
    struct pf_node *n = member(map, key, value ? PF_NODE_STR : PF_NODE_NULL);
    if (value) n->str = pf_xstrdup(value);
    return n;
}

struct pf_node *pf_node_append_str(struct pf_node *map, const char *key, const char *value)
{
    struct pf_node *n = node_new(PF_NODE_STR);
    n->key = pf_xstrdup(key);
    n->str = pf_xstrdup(value);
    link_child(map, n);
    return n;
}

struct pf_node *pf_node_set_strf(struct pf_node *map, const char *key, const char *fmt, ...)
{
    va_list ap;
    char *s = NULL;
    va_start(ap, fmt);
    if (vasprintf(&s, fmt, ap) < 0) s = NULL;
    va_end(ap);
    struct pf_node *n = pf_node_set_str(map, key, s ? s : "");
    free(s);
    return n;
}

struct pf_node *pf_node_set_int(struct pf_node *map, const char *key, long long v)
{
    struct pf_node *n = member(map, key, PF_NODE_INT);
    n->i = v;
    return n;
}

struct pf_node *pf_node_set_dbl(struct pf_node *map, const char *key, double v)
{
    struct pf_node *n = member(map, key, PF_NODE_DBL);
    n->d = v;
    return n;
}

struct pf_node *pf_node_set_bool(struct pf_node *map, const char *key, bool v)
{
    struct pf_node *n = member(map, key, PF_NODE_BOOL);
    n->b = v;
    return n;
}

struct pf_node *pf_node_set_null(struct pf_node *map, const char *key)
{
    return member(map, key, PF_NODE_NULL);
}

struct pf_node *pf_node_set_map(struct pf_node *map, const char *key)
{
    return member(map, key, PF_NODE_MAP);
}

struct pf_node *pf_node_set_seq(struct pf_node *map, const char *key)
{
    return member(map, key, PF_NODE_SEQ);
}

static struct pf_node *append(struct pf_node *seq, enum pf_node_kind kind)
{
    struct pf_node *n = node_new(kind);
    link_child(seq, n);
    return n;
}

struct pf_node *pf_node_add_str(struct pf_node *seq, const char *value)
{
    struct pf_node *n = append(seq, PF_NODE_STR);
    n->str = pf_xstrdup(value ? value : "");
    return n;
}

struct pf_node *pf_node_add_strf(struct pf_node *seq, const char *fmt, ...)
{
    va_list ap;
    char *s = NULL;
    va_start(ap, fmt);
    if (vasprintf(&s, fmt, ap) < 0) s = NULL;
    va_end(ap);
    struct pf_node *n = pf_node_add_str(seq, s ? s : "");
    free(s);
    return n;
}

struct pf_node *pf_node_add_map(struct pf_node *seq)
{
    return append(seq, PF_NODE_MAP);
}

struct pf_node *pf_node_clone(const struct pf_node *n)
{
    if (!n) return NULL;
    struct pf_node *c = node_new(n->kind);
    c->key = n->key ? pf_xstrdup(n->key) : NULL;
    c->str = n->str ? pf_xstrdup(n->str) : NULL;
    c->i = n->i;
    c->d = n->d;
    c->b = n->b;
    for (const struct pf_node *ch = n->first; ch; ch = ch->next)
        link_child(c, pf_node_clone(ch));
    return c;
}
