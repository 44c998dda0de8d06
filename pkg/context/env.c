/* The readers of the environment's files (context.h): an env file (`preflight env
 * --env-file`) and NCCL's config files, into struct pf_env (pkg/base/env.h). */
#define _GNU_SOURCE
#include "context.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ENV_FILE_MAX (1u << 20)

static bool valid_name(const char *s, size_t n)
{
    if (n == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_')) return false;
    for (size_t i = 0; i < n; i++)
        if (!(isalnum((unsigned char)s[i]) || s[i] == '_' || s[i] == '.' || s[i] == '-'))
            return false;
    return true;
}

int pf_env_parse_file(struct pf_env *e, const char *name, const char *text, size_t len)
{
    size_t lineno = 0;
    const char *p = text, *end = text + len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        lineno++;
        char line[8192];
        size_t ll = (size_t)(le - p);
        if (ll >= sizeof(line))
            return pf_err_set(PF_EUSAGE, "%s:%zu: line longer than %zu bytes", name, lineno,
                              sizeof(line) - 1);
        memcpy(line, p, ll);
        line[ll] = '\0';
        p = nl ? nl + 1 : end;
        if (memchr(line, '\0', ll))
            return pf_err_set(PF_EUSAGE, "%s:%zu: NUL byte in line", name, lineno);
        if (ll && line[ll - 1] == '\r') line[--ll] = '\0';
        char *s = line;
        while (*s == ' ' || *s == '\t')
            s++;
        if (*s == '\0' || *s == '#') continue;
        if (strncmp(s, "export ", 7) == 0) {
            s += 7;
            while (*s == ' ' || *s == '\t')
                s++;
        }
        char *eq = strchr(s, '=');
        /* the line's text is not echoed: it may be a secret's value */
        if (!eq)
            return pf_err_set(PF_EUSAGE, "%s:%zu: expected KEY=VALUE, found no '=' in %zu bytes",
                              name, lineno, strlen(s));
        size_t nl_ = (size_t)(eq - s);
        while (nl_ && (s[nl_ - 1] == ' ' || s[nl_ - 1] == '\t'))
            nl_--;
        if (!valid_name(s, nl_)) {
            s[nl_] = '\0';
            if (pf_verdict_is_secret_name(s))
                return pf_err_set(PF_EUSAGE,
                                  "%s:%zu: the text before '=' is not a variable name (not shown: "
                                  "it holds TOKEN, SECRET, PASSWORD or KEY)",
                                  name, lineno);
            return pf_err_set(PF_EUSAGE, "%s:%zu: \"%.*s\" is not a variable name", name, lineno,
                              (int)(nl_ > 60 ? 60 : nl_), s);
        }
        s[nl_] = '\0';
        char *v = eq + 1;
        size_t vl = strlen(v);
        if (vl >= 2 && (v[0] == '"' || v[0] == '\'') && v[vl - 1] == v[0]) {
            v[vl - 1] = '\0';
            v++;
        } else if (vl >= 1 && (v[0] == '"' || v[0] == '\'') && (vl == 1 || v[vl - 1] != v[0])) {
            return pf_err_set(PF_EUSAGE, "%s:%zu: %s: unterminated quote", name, lineno, s);
        }
        if (e->vars.n >= PF_ENV_MAX_VARS)
            return pf_err_set(PF_EUSAGE, "%s:%zu: more than %d variables", name, lineno,
                              PF_ENV_MAX_VARS);
        char origin[1100];
        snprintf(origin, sizeof(origin), "%s:%zu", name, lineno);
        pf_env_set(e, s, v, origin);
    }
    return 0;
}

int pf_env_load_file(struct pf_env *e, const char *path, double deadline)
{
    struct pf_buf b;
    pf_buf_init(&b, ENV_FILE_MAX);
    int r = pf_file_read_named(&b, "--env-file", path, deadline);
    if (r == 0) r = pf_env_parse_file(e, path, b.data, b.len);
    pf_buf_free(&b);
    return r;
}

/* As NCCL's setEnvFile (src/misc/param.cc) reads a config file (only the names
 * nccl_conf_name lets in): lines of at most 4095
 * bytes, one trailing '\r' dropped, a line whose first character is '#' skipped (a '#'
 * further on is part of the value), the name everything before the first '=' and the value
 * everything after it, neither trimmed, each cut at 1023 bytes; applied with setenv(..., 0),
 * so a variable already set (the environment, or an earlier file) wins. A name with blanks
 * ("NCCL_IB_DISABLE = 1") is kept as NCCL sets it: a variable NCCL never reads. Each value's
 * origin is "FILE:LINE". */
/* The names a line of NCCL's config files may give: what NCCL and the network plugins it
 * loads read (NCCL_*, aws-ofi-nccl's OFI_NCCL_* and libfabric's FI_*, UCX's UCX_*). NCCL
 * itself sets every line's variable, but a config file of NCCL's is NCCL's input only:
 * preflight's own settings (PREFLIGHT_*: libraries to load, the Pushgateway, claim reading),
 * the identity variables (POD_NAME, RANK, MASTER_ADDR, the launchers'), the API server's
 * address and LD_LIBRARY_PATH (the NCCL search) come from the process's environment, its
 * flags and its config file, never from a file that NCCL_CONF_FILE or $HOME may name. */
static bool nccl_conf_name(const char *k)
{
    static const char *const prefixes[] = {"NCCL_", "OFI_NCCL_", "FI_", "UCX_"};
    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
        if (strncmp(k, prefixes[i], strlen(prefixes[i])) == 0) return true;
    return false;
}

static void apply_conf(struct pf_env *e, const char *label, const char *text)
{
    size_t lineno = 0;
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        lineno++;
        char line[4096];
        if (len > sizeof(line) - 1) len = sizeof(line) - 1;
        memcpy(line, p, len);
        line[len] = '\0';
        p = nl ? nl + 1 : p + strlen(p);
        if (len > 0 && line[len - 1] == '\r') line[--len] = '\0';
        if (line[0] == '#') continue;
        char *eq = strchr(line, '=');
        if (!eq || eq == line) continue; /* no '=', or setenv("") which fails */
        *eq = '\0';
        char *k = line, *v = eq + 1;
        if (strlen(k) > 1023) k[1023] = '\0';
        if (strlen(v) > 1023) v[1023] = '\0';
        if (!nccl_conf_name(k) || pf_env_get(e, k)) continue;
        char origin[1100];
        snprintf(origin, sizeof(origin), "%s:%zu", label, lineno);
        pf_env_set(e, k, v, origin);
    }
}

void pf_env_load_nccl_conf(struct pf_env *e, const struct pf_host *h)
{
    char *text = NULL;
    const char *conf = pf_env_get(e, "NCCL_CONF_FILE");
    if (conf && *conf) {
        if (pf_host_read_all(&text, NULL, ENV_FILE_MAX, h, "%s", conf) == 0)
            apply_conf(e, conf, text);
        free(text);
    } else {
        const char *home = pf_env_get(e, "HOME");
        if (home && home[0] == '/') {
            if (pf_host_read_all(&text, NULL, ENV_FILE_MAX, h, "%s/.nccl.conf", home) == 0) {
                char label[1100];
                snprintf(label, sizeof(label), "%s/.nccl.conf", home);
                apply_conf(e, label, text);
            }
            free(text);
            text = NULL;
        }
    }
    if (pf_host_read_all(&text, NULL, ENV_FILE_MAX, h, "/etc/nccl.conf") == 0)
        apply_conf(e, "/etc/nccl.conf", text);
    free(text);
}
