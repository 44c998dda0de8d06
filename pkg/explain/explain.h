/* explain: the text of docs/checks.md, built into the binary, looked up by check id or
 * finding code. docs/checks.md is the one source for `preflight explain` and for the remedy
 * a finding carries when its check gives none. */
#ifndef PF_EXPLAIN_H
#define PF_EXPLAIN_H

#include <stddef.h>

#include "../base/base.h"

/* Appends the explanation of a check id ("nccl.env"), a finding code ("p2p-disabled"; every
 * check that has it), or "id/code" to out. PF_ENOENT with a did-you-mean message when
 * unknown. */
int pf_explain(struct pf_buf *out, const char *what);

/* The one-paragraph remedy of code under check_id, joined into one line; when check_id has
 * none, the one under `preflight` (the run's timeout and interrupted), else under any check.
 * check_id NULL: under any check. PF_ENOENT when the docs have none. */
int pf_explain_remedy(char *out, size_t n, const char *check_id, const char *code);

/* Every check id ("## `id`") and every "id/code" ("### `code`" under it) in the document. */
void pf_explain_list(struct pf_strlist *ids, struct pf_strlist *codes);

/* Appends md rendered for reading: headings underlined, paragraphs and list items re-wrapped
 * to width with hanging indents, **bold** and `code` as ANSI (ansi) or as plain text with
 * the markup characters dropped. */
void pf_explain_render(struct pf_buf *out, const char *md, bool ansi, int width);

/* Failure classes (docs/checks.md "class"), ordered so that the one that wins is the largest:
 * spec over node over peer. */
enum pf_class { PF_CLASS_NONE = 0, PF_CLASS_PEER, PF_CLASS_NODE, PF_CLASS_SPEC };
const char *pf_class_name(enum pf_class c);  /* "spec", "node", "peer"; "" for none */
enum pf_class pf_class_parse(const char *s); /* PF_CLASS_NONE when not a class name */

/* The class of code under check_id, read from its "**Class:**" line; with the same fallbacks
 * as pf_explain_remedy (the `preflight` section, then any check). PF_CLASS_NONE when the docs
 * give none. docs/checks.md is the one table of classes. */
enum pf_class pf_explain_class(const char *check_id, const char *code);

#endif
