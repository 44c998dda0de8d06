/* nccl.env, its part on NCCL's config files: what NCCL keeps of a line that a person did not
 * mean (quotes, blanks, CR line ends), read as NCCL's setEnvFile reads it. */
#define _GNU_SOURCE
#include "checks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../ncclenv/ncclenv.h"
#include "nccl_env.h"

/* ---- config files: NCCL's setEnvFile (src/misc/param.cc, every tag v2.3.7-1..v2.30.7-1)
 * sets everything before the first '=' as the name and everything after it as the value,
 * verbatim: no trimming, no quote removal (unlike a shell or an env file). */

bool ne_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* What NCCL makes of a value with quotes or blanks around it, for the message. */
static void verbatim_effect(char *out, size_t n, const char *name, const char *v)
{
    if (pf_ncclenv_is_int_param(name)) {
        bool clean = true;
        long long x = pf_ncclenv_int(v, &clean);
        snprintf(out, n, "NCCL reads the number at its start, %lld", x);
    } else if (strcmp(name, "NCCL_IB_HCA") == 0 || strcmp(name, "NCCL_SOCKET_IFNAME") == 0 ||
               strcmp(name, "NCCL_IB_ADDR_RANGE") == 0) {
        char first[64];
        snprintf(first, sizeof(first), "%.*s", (int)strcspn(v, ","), v);
        snprintf(out, n,
                 "the list's first entry is \"%s\" (so neither '^' nor '=' applies), which "
                 "matches no %s",
                 first, strcmp(name, "NCCL_IB_HCA") == 0 ? "device" : "interface");
    } else {
        snprintf(out, n, "the value NCCL uses includes them");
    }
}

/* Whether line lineno of file (under the root) ends in '\r': NCCL before 2.30.3 kept it in
 * the value (setEnvFile dropped only '\n'). */
static bool conf_line_has_cr(struct envcheck *e, const char *origin)
{
    char file[1100];
    snprintf(file, sizeof(file), "%s", origin);
    char *colon = strrchr(file, ':');
    if (!colon) return false;
    *colon = '\0';
    long want = strtol(colon + 1, NULL, 10);
    char *text = NULL;
    size_t len = 0;
    bool cr = false;
    if (want > 0 && pf_host_read_all(&text, &len, 1 << 20, &e->ctx->host, "%s", file) == 0) {
        long line = 1;
        for (size_t i = 0; i < len && line <= want; i++) {
            if (text[i] != '\n') continue;
            if (line == want) cr = i > 0 && text[i - 1] == '\r';
            line++;
        }
    } else {
        pf_err_clear();
    }
    free(text);
    return cr;
}

/* One finding per config file with CR LF line ends, naming its variables. */
static void check_conf_crlf(struct envcheck *e, const struct pf_strlist *names)
{
    int v = ne_loaded_version(e->ctx);
    if (v >= 23003) return; /* 2.30.3 on drop a trailing '\r' */
    struct pf_strlist files = {0};
    for (size_t i = 0; i < names->n; i++) {
        const char *n = names->v[i];
        const char *o = pf_env_origin(&e->ctx->env, n);
        if (!ne_from_conf(e, n) || !o || !conf_line_has_cr(e, o)) continue;
        char file[1100];
        snprintf(file, sizeof(file), "%s", o);
        char *colon = strrchr(file, ':');
        if (colon) *colon = '\0';
        if (pf_strlist_has(&files, file)) continue;
        pf_strlist_add(&files, file);
        char what[1400];
        snprintf(what, sizeof(what),
                 "convert %s to Unix line ends (dos2unix, or sed -i 's/\\r$//')", file);
        pf_check_add_finding(e->out, "conf-crlf", PF_WARN, ne_fix(e, n, what),
                             "%s has Windows line ends (CR LF): NCCL before 2.30.3 keeps the '\\r' "
                             "at the end of each value (%s=\"%s\\r\", %s), so a list's last entry "
                             "matches nothing%s",
                             file, n, ne_shown(e, n, ne_get(e, n)), ne_from(e, n),
                             v ? "" : " (the NCCL version that will read it is not known here)");
    }
    pf_strlist_free(&files);
}

void ne_check_conf_text(struct envcheck *e, const struct pf_strlist *names)
{
    check_conf_crlf(e, names);
    for (size_t i = 0; i < names->n; i++) {
        const char *n = names->v[i];
        if (!ne_from_conf(e, n)) continue;
        const char *v = ne_get(e, n);
        size_t nl = strlen(n), vl = v ? strlen(v) : 0;
        char what[512], effect[256];
        if (nl && ne_blank(n[nl - 1])) {
            char bare[256];
            snprintf(bare, sizeof(bare), "%.*s", (int)nl, n);
            pf_trim(bare);
            char val[256];
            snprintf(val, sizeof(val), "%s", v ? v : "");
            pf_trim(val);
            snprintf(what, sizeof(what), "write %s=%s with no blank around '='", bare,
                     ne_shown(e, bare, val));
            pf_check_add_finding(e->out, "conf-blanks", PF_WARN, ne_fix(e, n, what),
                                 "\"%s\" (%s): NCCL does not trim, so it sets a variable named "
                                 "\"%s\" (with the blank), which it never reads: %s stays %s",
                                 n, ne_from(e, n), n, bare,
                                 ne_get(e, bare) ? "as set elsewhere" : "unset");
            continue;
        }
        if (!v || vl == 0) continue;
        if (v[0] == '"' || v[0] == '\'') {
            verbatim_effect(effect, sizeof(effect), n, v);
            char inner[1100];
            snprintf(inner, sizeof(inner), "%.*s",
                     (int)(vl >= 2 && v[vl - 1] == v[0] ? vl - 2 : vl - 1), v + 1);
            snprintf(what, sizeof(what), "write %s=%s without quotes", n, ne_shown(e, n, inner));
            pf_check_add_finding(e->out, "conf-quotes", PF_WARN, ne_fix(e, n, what),
                                 "%s=%s (%s): NCCL keeps the quotes of a config file's value: %s",
                                 n, ne_shown(e, n, v), ne_from(e, n), effect);
        } else if (ne_blank(v[0]) || ne_blank(v[vl - 1])) {
            verbatim_effect(effect, sizeof(effect), n, v);
            char inner[1100];
            snprintf(inner, sizeof(inner), "%s", v);
            pf_trim(inner);
            snprintf(what, sizeof(what), "write %s=%s with no blank around the value", n,
                     ne_shown(e, n, inner));
            pf_check_add_finding(e->out, "conf-blanks", PF_WARN, ne_fix(e, n, what),
                                 "%s=\"%s\" (%s): NCCL does not trim a config file's value: %s", n,
                                 ne_shown(e, n, v), ne_from(e, n), effect);
        }
    }
}
