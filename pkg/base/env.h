/* base/env.h: the environment a check or a stage reads: the process's own, or a KEY=VALUE
 * file (`preflight env --env-file`), held as "KEY=VALUE" strings with where each came from.
 * The readers of files (an env file, NCCL's config files) need the host and the verdict's
 * secret names: they are in pkg/context (env.c, declared in context.h). */
#ifndef PF_BASE_ENV_H
#define PF_BASE_ENV_H

#include "base.h"

struct pf_env {
    struct pf_strlist vars;   /* "KEY=VALUE" */
    struct pf_strlist origin; /* parallel to vars: "environment", or the file:line */
};
/* At most this many variables are kept. */
#define PF_ENV_MAX_VARS 4096
void pf_env_from_environ(struct pf_env *e, char **environ_);
const char *pf_env_get(const struct pf_env *e, const char *name);
const char *pf_env_origin(const struct pf_env *e, const char *name);
void pf_env_set(struct pf_env *e, const char *name, const char *value, const char *origin);
void pf_env_free(struct pf_env *e);

#endif
