/* One name per check: every entry of pf_checks_table (pkg/checks/checks.c) is held to what it
 * names. Its id is a check of the built-in docs; its docs fragment has the id's heading; its
 * source file defines pf_check_<id> (local checks), or its source files (stage checks) use the
 * id and decide every finding code the docs give it (a stage's `timeout` is the guard's); its test
 * file exists and names the id or the function. Both ways: every check id of the docs and
 * every "## `id`" heading of docs/checks/ is in the table, once. The stage checks against
 * pkg/run's stage tables are in tests/unit/run/test_stages.c. Tests run from tests/, so the
 * repository's root is "..". */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../../pkg/base/base.h"
#include "../../../pkg/checks/checks.h"
#include "../../../pkg/explain/explain.h"
#include "../helpers/helpers.h"

static const struct pf_check_def *find(const char *id)
{
    for (size_t i = 0; i < pf_checks_count; i++)
        if (strcmp(pf_checks_table[i].id, id) == 0) return &pf_checks_table[i];
    return NULL;
}

/* The file at the repository's root relative path rel, whole (the test fails without it). */
static char *repo_file(const char *rel)
{
    char path[512];
    snprintf(path, sizeof(path), "../%s", rel);
    char *text = th_slurp(path, NULL);
    if (!text) fail_msg("%s: cannot be read", rel);
    return text;
}

static void test_ids_unique_and_well_formed(void **state)
{
    (void)state;
    assert_true(pf_checks_count >= 25);
    for (size_t i = 0; i < pf_checks_count; i++) {
        const struct pf_check_def *d = &pf_checks_table[i];
        assert_non_null(d->id);
        for (const char *p = d->id; *p; p++)
            if (!((*p >= 'a' && *p <= 'z') || *p == '.'))
                fail_msg("check id '%s': only a-z and '.'", d->id);
        for (size_t j = 0; j < i; j++)
            if (strcmp(pf_checks_table[j].id, d->id) == 0) fail_msg("'%s' twice", d->id);
        assert_non_null(d->what);
        assert_non_null(d->source);
        assert_non_null(d->doc);
        assert_non_null(d->test);
        /* a function exactly for the checks pf_checks_run calls; stages for stage checks */
        bool local = d->modes & (PF_MODE_LOCAL | PF_MODE_ENV);
        if (local != (d->fn != NULL)) fail_msg("'%s': a function iff local", d->id);
        if (((d->modes & PF_MODE_STAGE) != 0) != (d->stages != NULL))
            fail_msg("'%s': stages iff a stage check", d->id);
    }
}

/* The files of a source column ("a.c b.c"), one after the other. */
static char *source_files(const char *source)
{
    struct pf_buf all;
    pf_buf_init(&all, 16u << 20);
    char *list = strdup(source), *save = NULL;
    assert_non_null(list);
    for (char *f = strtok_r(list, " ", &save); f; f = strtok_r(NULL, " ", &save)) {
        char *text = repo_file(f);
        pf_buf_add(&all, text, strlen(text));
        free(text);
    }
    free(list);
    char *out = strdup(pf_buf_str(&all));
    assert_non_null(out);
    pf_buf_free(&all);
    return out;
}

/* The function's name is the id's: "a.b" -> pf_check_a_b, defined in the entry's source. */
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
static void test_source_defines_it(void **state)
{
    (void)state;
    for (size_t i = 0; i < pf_checks_count; i++) {
        const struct pf_check_def *d = &pf_checks_table[i];
        char *src = d->fn ? repo_file(d->source) : source_files(d->source);
        char want[160];
        if (d->fn) {
            snprintf(want, sizeof(want), "void pf_check_%s(struct pf_check *out", d->id);
            for (char *p = want; *p; p++)
                if (*p == '.') *p = '_';
        } else {
            /* a stage check's code uses the id, or defines its function under the id's
             * name with the stage's own arguments (rdma.counters) */
            const char *forms[] = {"\"%s\"", "`%s`", "void pf_check_%s("};
            for (size_t k = 0; k < 3; k++) {
                snprintf(want, sizeof(want), forms[k], d->id);
                if (k == 2)
                    for (char *p = want; *p; p++)
                        if (*p == '.') *p = '_';
                if (strstr(src, want)) break;
            }
        }
        if (!strstr(src, want)) fail_msg("%s: %s does not have %s", d->id, d->source, want);
        free(src);
    }
}

/* A stage check's source files decide its findings: each code the docs give it is written
 * there ("code"), except `timeout`, which the guard writes for the stage under way. */
static void test_stage_source_decides_codes(void **state)
{
    (void)state;
    struct pf_strlist ids = {0}, codes = {0};
    pf_explain_list(&ids, &codes);
    size_t checked = 0;
    for (size_t i = 0; i < codes.n; i++) {
        const char *slash = strchr(codes.v[i], '/');
        assert_non_null(slash);
        char id[64];
        snprintf(id, sizeof(id), "%.*s", (int)(slash - codes.v[i]), codes.v[i]);
        const struct pf_check_def *d = find(id);
        if (!d || d->fn || (d->modes & PF_MODE_LOG) ||
            (strcmp(slash + 1, "timeout") == 0 && strcmp(id, "preflight") != 0))
            continue;
        char *src = source_files(d->source);
        char want[96];
        snprintf(want, sizeof(want), "\"%s\"", slash + 1);
        if (!strstr(src, want)) fail_msg("%s: %s decides no %s", id, d->source, want);
        free(src);
        checked++;
    }
    assert_true(checked >= 30);
    pf_strlist_free(&ids);
    pf_strlist_free(&codes);
}

static void test_doc_fragment_has_it(void **state)
{
    (void)state;
    for (size_t i = 0; i < pf_checks_count; i++) {
        const struct pf_check_def *d = &pf_checks_table[i];
        char *doc = repo_file(d->doc);
        char want[160];
        snprintf(want, sizeof(want), "## `%s`\n", d->id);
        bool at_start = strncmp(doc, want, strlen(want)) == 0;
        snprintf(want, sizeof(want), "\n## `%s`\n", d->id);
        if (!at_start && !strstr(doc, want))
            fail_msg("%s: %s has no heading ## `%s`", d->id, d->doc, d->id);
        free(doc);
        /* and the built-in docs (what `preflight explain` prints) know it */
        struct pf_buf b;
        pf_buf_init(&b, 1 << 20);
        if (pf_explain(&b, d->id) != 0) fail_msg("explain %s fails", d->id);
        assert_non_null(strstr(pf_buf_str(&b), d->id));
        pf_buf_free(&b);
    }
}

static void test_test_file_names_it(void **state)
{
    (void)state;
    for (size_t i = 0; i < pf_checks_count; i++) {
        const struct pf_check_def *d = &pf_checks_table[i];
        char *t = repo_file(d->test);
        char fn[160];
        snprintf(fn, sizeof(fn), "pf_check_%s", d->id);
        for (char *p = fn; *p; p++)
            if (*p == '.') *p = '_';
        if (!strstr(t, d->id) && !(d->fn && strstr(t, fn)))
            fail_msg("%s: %s names neither the id nor %s", d->id, d->test, fn);
        free(t);
    }
}

/* Every check the docs know is in the table, and every heading of the fragments. */
static void test_docs_and_table_agree(void **state)
{
    (void)state;
    struct pf_strlist ids = {0}, codes = {0};
    pf_explain_list(&ids, &codes);
    assert_true(ids.n >= 25);
    for (size_t i = 0; i < ids.n; i++)
        if (!find(ids.v[i])) fail_msg("the docs have check '%s', the table not", ids.v[i]);
    assert_int_equal(ids.n, pf_checks_count);
    pf_strlist_free(&ids);
    pf_strlist_free(&codes);

    /* the fragments' headings, read from the files themselves */
    FILE *p = popen("cat ../docs/checks/*.md | sed -n 's/^## `\\([a-z.]*\\)`$/\\1/p'", "r");
    assert_non_null(p);
    char line[128];
    size_t n = 0;
    while (fgets(line, sizeof(line), p)) {
        line[strcspn(line, "\n")] = '\0';
        if (!find(line)) fail_msg("docs/checks/ has ## `%s`, the table not", line);
        n++;
    }
    assert_int_equal(pclose(p), 0);
    assert_int_equal(n, pf_checks_count);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ids_unique_and_well_formed),
        cmocka_unit_test(test_source_defines_it),
        cmocka_unit_test(test_stage_source_decides_codes),
        cmocka_unit_test(test_doc_fragment_has_it),
        cmocka_unit_test(test_test_file_names_it),
        cmocka_unit_test(test_docs_and_table_agree),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
