/* The unit tests' shared harness (helpers.h). */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "helpers.h"

void th_sh(const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    if (len < 0 || (size_t)len >= sizeof(cmd)) fail_msg("command too long: %.200s", cmd);
    int rc = system(cmd);
    if (rc != 0) fail_msg("command failed (%d): %s", rc, cmd);
}

void th_tmpdir(char *dir, size_t n, const char *tag)
{
    snprintf(dir, n, "/tmp/pf-%s-XXXXXX", tag);
    if (!mkdtemp(dir)) fail_msg("mkdtemp %s failed", dir);
}

bool th_rmtree(const char *dir)
{
    if (!dir || !dir[0]) return true;
    char cmd[4200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd) == 0;
}

void th_abs_path(char *out, size_t n, const char *rel)
{
    if (rel[0] == '/') {
        snprintf(out, n, "%s", rel);
        return;
    }
    char cwd[2048];
    assert_non_null(getcwd(cwd, sizeof(cwd)));
    snprintf(out, n, "%s/%s", cwd, rel);
}

char *th_slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *s = malloc(cap);
    for (size_t k; s && (k = fread(s + n, 1, cap - n - 1, f)) > 0;) {
        n += k;
        if (n + 1 == cap) {
            char *t = realloc(s, cap * 2);
            if (!t) free(s);
            s = t;
            cap *= 2;
        }
    }
    int err = ferror(f);
    fclose(f);
    if (!s || err) {
        free(s);
        return NULL;
    }
    s[n] = '\0';
    if (len) *len = n;
    return s;
}

void th_write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f) fail_msg("cannot write %s", path);
    fputs(text, f);
    if (fclose(f) != 0) fail_msg("cannot write %s", path);
}

void th_golden(const char *path, const char *actual)
{
    if (getenv("PF_UPDATE_GOLDEN")) th_write_file(path, actual);
    char *want = th_slurp(path, NULL);
    if (!want) fail_msg("golden file %s missing (PF_UPDATE_GOLDEN=1 writes it)", path);
    assert_string_equal(actual, want);
    free(want);
}

void th_env_open(struct th_env *e, const char *fixture, enum th_root how)
{
    memset(e, 0, sizeof(*e));
    pf_config_defaults(&e->cfg);
    if (how == TH_IN_PLACE) {
        th_abs_path(e->root, sizeof(e->root), fixture);
        return;
    }
    th_tmpdir(e->dir, sizeof(e->dir), how == TH_COPY ? "copy" : "tree");
    snprintf(e->root, sizeof(e->root), "%s/root", e->dir);
    if (how == TH_COPY) {
        char src[4096];
        th_abs_path(src, sizeof(src), fixture);
        th_sh("cp -a '%s' '%s'", src, e->root);
    } else {
        th_sh("fixtures/materialize.sh fixtures/%s %s 2>/dev/null", fixture, e->root);
    }
}

void th_env_start(struct th_env *e)
{
    assert_false(e->started);
    e->started = true;
    pf_verdict_init(&e->v);
    pf_ctx_init(&e->ctx, &e->cfg, &e->v);
    assert_int_equal(pf_host_init(&e->ctx.host, e->root), 0);
}

struct pf_check *th_env_check(struct th_env *e, const char *id, pf_check_fn fn)
{
    if (!e->started) th_env_start(e);
    pf_checks_inventory(&e->ctx);
    e->c = pf_verdict_add_check(&e->v, id);
    fn(e->c, &e->ctx);
    return e->c;
}

void th_env_set(struct th_env *e, const char *name, const char *value)
{
    pf_env_set(&e->ctx.env, name, value, "test");
}

void th_env_close(struct th_env *e)
{
    if (e->started) {
        pf_ctx_free(&e->ctx);
        pf_verdict_free(&e->v);
    }
    pf_config_free(&e->cfg);
    if (!th_rmtree(e->dir)) fail_msg("cannot remove %s", e->dir);
}

void th_codes(char *out, size_t n, const struct pf_check *c)
{
    struct pf_strlist l = {0};
    for (size_t i = 0; i < c->nfindings; i++)
        if (!pf_strlist_has(&l, c->findings[i].code)) pf_strlist_add(&l, c->findings[i].code);
    pf_strlist_sort(&l);
    pf_strlist_join(out, n, &l, ",");
    pf_strlist_free(&l);
}

const char *th_codes_status(const struct pf_check *c)
{
    static char buf[1024];
    buf[0] = '\0';
    for (size_t i = 0; i < c->nfindings; i++) {
        size_t l = strlen(buf);
        snprintf(buf + l, sizeof(buf) - l, "%s%s:%s", i ? "," : "", c->findings[i].code,
                 pf_status_name(c->findings[i].status));
    }
    return buf;
}

const struct pf_finding *th_finding(const struct pf_check *c, const char *code, const char *needle)
{
    for (size_t i = 0; i < c->nfindings; i++)
        if (strcmp(c->findings[i].code, code) == 0 &&
            (!needle || strstr(c->findings[i].message, needle)))
            return &c->findings[i];
    return NULL;
}
