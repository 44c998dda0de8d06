/* k8s/map.h: the downward-API map files (`key="Go-quoted value"` lines) and Go's quoted
 * literals, as pure text functions; part of k8s.h, and alone for a module that only takes a
 * parsed map (pkg/rendezvous' identity rules). */
#ifndef PF_K8S_MAP_H
#define PF_K8S_MAP_H

#include <stddef.h>

#include "../base/base.h"

#define PF_K8S_MAX_ENTRIES 4096 /* lines of a downward-API file */

/* ---- Go strconv.Quote literals. */

/* Unquotes s[0..n), a Go double-quoted literal as strconv.Quote writes it (quotes included):
 * \" \\ \a \b \f \n \r \t \v, \xNN, \NNN (octal), \uNNNN, \UNNNNNNNN (valid runes only),
 * raw UTF-8 for anything printable. Strict: a raw newline or control byte, invalid UTF-8, an
 * unknown or short escape, a surrogate or out-of-range rune, text after the closing quote
 * are errors (PF_EINVAL, the message names the byte offset). *out is NUL-terminated and
 * may hold NUL bytes (\x00); *out_len is its length. Caller frees. */
int pf_k8s_unquote(char **out, size_t *out_len, const char *s, size_t n);

/* ---- Downward-API map files (`fieldPath: metadata.annotations` / `metadata.labels`):
 * lines `key="quoted value"` joined with \n, keys sorted. */
struct pf_k8s_kv {
    char *key;
    char *value;      /* unquoted, NUL-terminated */
    size_t value_len; /* may be longer than strlen(value) when it holds NUL bytes */
};
struct pf_k8s_map {
    struct pf_k8s_kv *v;
    size_t n;
};

/* Parses a map file; name is used in messages ("NAME:LINE: problem"). An empty text is an
 * empty map. A malformed line, a duplicate key or more than PF_K8S_MAX_ENTRIES lines is
 * PF_EINVAL; *out is then empty. */
int pf_k8s_map_parse(struct pf_k8s_map *out, const char *name, const char *text, size_t len);
const struct pf_k8s_kv *pf_k8s_map_find(const struct pf_k8s_map *m, const char *key);
const char *pf_k8s_map_get(const struct pf_k8s_map *m, const char *key);
void pf_k8s_map_free(struct pf_k8s_map *m);

#endif
