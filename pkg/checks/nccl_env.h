/* nccl.env's shared state and helpers (nccl_env.c, nccl_conf.c): the check being filled, the
 * context, and buffers for "where a value came from" and the remedy. Internal to pkg/checks. */
#ifndef PF_CHECKS_NCCL_ENV_H
#define PF_CHECKS_NCCL_ENV_H

#include "checks.h"

struct envcheck {
    struct pf_check *out;
    struct pf_ctx *ctx;
    char where[1200];
    char remedy[1600];
    char shown[256];
};

/* "the environment" or the config file (with line) a value came from. */
const char *ne_from(struct envcheck *e, const char *name);
/* The value as it may appear in a message (secrets masked, long values cut). */
const char *ne_shown(struct envcheck *e, const char *name, const char *value);
/* Where to change the variable: the pod spec's env, or the config file it came from. */
const char *ne_fix(struct envcheck *e, const char *name, const char *what);
/* The variable's value (environment and config files merged), or NULL. */
const char *ne_get(struct envcheck *e, const char *name);
/* Whether the value came from a config file. */
bool ne_from_conf(struct envcheck *e, const char *name);
/* The loaded libnccl's version code, or 0. */
int ne_loaded_version(struct pf_ctx *ctx);
/* nccl_conf.c: a blank as NCCL's config reader keeps it (space or tab) */
bool ne_blank(char c);
/* nccl_conf.c: the config files' lines NCCL keeps other than meant. */
void ne_check_conf_text(struct envcheck *e, const struct pf_strlist *names);

#endif
