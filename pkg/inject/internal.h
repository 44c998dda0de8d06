/* inject's parts: the positioned tree (tree.c), for inject.c and the tests. */
#ifndef PF_INJECT_INTERNAL_H
#define PF_INJECT_INTERNAL_H

#include "inject.h"

enum pf_ykind { PF_Y_SCALAR, PF_Y_SEQ, PF_Y_MAP, PF_Y_ALIAS };

/* One node: where it starts (byte offset and column in characters), where its content ends
 * (a scalar's end; a flow collection's closing bracket and the byte after it; a block
 * collection's last child's end: trailing comments and blank lines are not its), and for a
 * mapping its keys and values alternating in kids. */
struct pf_ynode {
    enum pf_ykind kind;
    bool flow, plain, tagged, anchored;
    size_t start, end, close;
    int col;
    char *val; /* a scalar's value */
    size_t vlen;
    struct pf_ynode **kids;
    size_t n, cap;
    struct pf_ynode *next_all;
};

#define PF_YTREE_DOCS_MAX 4096

struct pf_ytree {
    const char *in;
    size_t len;
    size_t *lines; /* the byte offset of each line's start */
    size_t nlines;
    struct pf_ynode *docs[PF_YTREE_DOCS_MAX]; /* each document's root (NULL: empty) */
    size_t doc_start[PF_YTREE_DOCS_MAX];
    int ndocs;
    struct pf_ynode *all;
};

/* Parses in[0..len) (UTF-8). -1 with "NAME: not YAML: ... at line L column C". */
int pf_ytree_parse(struct pf_ytree *t, const char *in, size_t len, const char *name);
void pf_ytree_free(struct pf_ytree *t);
/* The value of key in a mapping; NULL when map is no mapping or has no such key. */
struct pf_ynode *pf_ynode_get(const struct pf_ynode *map, const char *key);
/* The value of key when it is a scalar, else NULL. */
const char *pf_ynode_str(const struct pf_ynode *map, const char *key);
/* The offset of the start of the line that holds off. */
size_t pf_ytree_line_start(const struct pf_ytree *t, size_t off);

#endif
