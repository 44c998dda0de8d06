/* The environment as "KEY=VALUE" strings: look-up, set, and the process's own (env.h). */
#define _GNU_SOURCE
#include "env.h"

#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

static ssize_t find(const struct pf_env *e, const char *name)
{
    size_t len = strlen(name);
    for (size_t i = 0; i < e->vars.n; i++)
        if (strncmp(e->vars.v[i], name, len) == 0 && e->vars.v[i][len] == '=') return (ssize_t)i;
    return -1;
}

const char *pf_env_get(const struct pf_env *e, const char *name)
{
    ssize_t i = find(e, name);
    return i < 0 ? NULL : strchr(e->vars.v[i], '=') + 1;
}

const char *pf_env_origin(const struct pf_env *e, const char *name)
{
    ssize_t i = find(e, name);
    return i < 0 ? NULL : e->origin.v[i];
}

void pf_env_set(struct pf_env *e, const char *name, const char *value, const char *origin)
{
    ssize_t i = find(e, name);
    if (i >= 0) {
        free(e->vars.v[i]);
        e->vars.v[i] = pf_xasprintf("%s=%s", name, value);
        free(e->origin.v[i]);
        e->origin.v[i] = pf_xstrdup(origin);
        return;
    }
    pf_strlist_addf(&e->vars, "%s=%s", name, value);
    pf_strlist_add(&e->origin, origin);
}

void pf_env_free(struct pf_env *e)
{
    pf_strlist_free(&e->vars);
    pf_strlist_free(&e->origin);
}

void pf_env_from_environ(struct pf_env *e, char **env)
{
    for (size_t i = 0; env && env[i] && i < PF_ENV_MAX_VARS; i++) {
        const char *eq = strchr(env[i], '=');
        if (!eq || eq == env[i]) continue;
        pf_strlist_add(&e->vars, env[i]);
        pf_strlist_add(&e->origin, "environment");
    }
}
