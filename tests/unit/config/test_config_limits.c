/* The config file's shape limits, checked on libyaml's events before a document is built:
 * nesting deeper than 32 levels and aliases are usage errors naming the file and line; a
 * deeply nested file of a megabyte is refused at once. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../pkg/config/config.h"

static int parse(const char *yaml, size_t len)
{
    struct pf_config c;
    pf_config_defaults(&c);
    int r = pf_config_parse(&c, "c.yaml", yaml, len);
    pf_config_free(&c);
    return r;
}

/* "expect: " + n '[' + n ']' */
static char *flow(size_t n, size_t *len)
{
    char *s = malloc(8 + 2 * n + 2);
    memcpy(s, "expect: ", 8);
    memset(s + 8, '[', n);
    memset(s + 8 + n, ']', n);
    s[8 + 2 * n] = '\n';
    s[8 + 2 * n + 1] = '\0';
    *len = 8 + 2 * n + 1;
    return s;
}

static void test_depth(void **state)
{
    (void)state;
    size_t len;
    /* 31 lists under the top-level map: 32 levels, allowed by the shape pass (and then a
     * type error of expect, which shows the document was built) */
    char *s = flow(31, &len);
    assert_int_equal(parse(s, len), PF_EUSAGE);
    assert_null(strstr(pf_err_msg(), "nested"));
    assert_non_null(strstr(pf_err_msg(), "c.yaml:1: expect"));
    free(s);
    s = flow(32, &len);
    assert_int_equal(parse(s, len), PF_EUSAGE);
    assert_string_equal(pf_err_msg(), "c.yaml:1: nested more than 32 levels deep");
    free(s);
    /* half a megabyte of '[': refused at the 33rd (libyaml alone takes minutes on it) */
    s = flow(250000, &len);
    assert_int_equal(parse(s, len), PF_EUSAGE);
    assert_string_equal(pf_err_msg(), "c.yaml:1: nested more than 32 levels deep");
    free(s);
    /* block nesting: the line of the 33rd level */
    char block[4096] = "";
    for (int i = 0; i < 40; i++) {
        size_t n = strlen(block);
        snprintf(block + n, sizeof(block) - n, "%*sa:\n", i, "");
    }
    assert_int_equal(parse(block, strlen(block)), PF_EUSAGE);
    assert_string_equal(pf_err_msg(), "c.yaml:33: nested more than 32 levels deep");
}

static void test_aliases(void **state)
{
    (void)state;
    static const char yaml[] = "expect: &e\n  hcas: 2\npolicy:\n  findings: *e\n";
    assert_int_equal(parse(yaml, strlen(yaml)), PF_EUSAGE);
    assert_non_null(strstr(pf_err_msg(), "c.yaml:4: alias *e: aliases are not allowed"));
    /* an anchor alone is harmless */
    static const char anchor[] = "expect: &e\n  hcas: 2\n";
    assert_int_equal(parse(anchor, strlen(anchor)), 0);
    /* a syntax error still reads as one */
    static const char broken[] = "expect: [\n";
    assert_int_equal(parse(broken, strlen(broken)), PF_EUSAGE);
    assert_non_null(strstr(pf_err_msg(), "not valid YAML"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_depth),
        cmocka_unit_test(test_aliases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
