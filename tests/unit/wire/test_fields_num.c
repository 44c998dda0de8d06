/* wire: the one decoder of decimal numbers a peer sends (pf_wire_fields_num): the whole
 * field, finite, nothing around it; every refusal names the field. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../pkg/wire/wire.h"

static const struct {
    const char *text;
    int rc;
    double v;
} cases[] = {
    /* what the encoders write: %.9f, %.6f, %.3f, %g, %.9g */
    {"0.004100000", 0, 0.0041},
    {"0.383625", 0, 0.383625},
    {"9.120", 0, 9.12},
    {"0.5", 0, 0.5},
    {"1e-05", 0, 1e-05},
    {"2.5e+10", 0, 2.5e10},
    {"12", 0, 12},
    {"-3.25", 0, -3.25},
    {".5", 0, 0.5},
    {"5.", 0, 5},
    {"0", 0, 0},
    {"1e-400", 0, 0}, /* finite: it rounds to zero */
    /* refused: not finite, garbage around the number, other syntaxes strtod takes */
    {"nan", PF_EINVAL, 0},
    {"NAN", PF_EINVAL, 0},
    {"-nan", PF_EINVAL, 0},
    {"inf", PF_EINVAL, 0},
    {"-inf", PF_EINVAL, 0},
    {"infinity", PF_EINVAL, 0},
    {"1e999", PF_EINVAL, 0}, /* overflows to infinity */
    {"-1e999", PF_EINVAL, 0},
    {"0x1p4", PF_EINVAL, 0},
    {"0x10", PF_EINVAL, 0},
    {" 1.5", PF_EINVAL, 0},
    {"1.5 ", PF_EINVAL, 0},
    {"+1.5", PF_EINVAL, 0},
    {"1.5x", PF_EINVAL, 0},
    {"1.5e", PF_EINVAL, 0},
    {"1..5", PF_EINVAL, 0},
    {"1-2", PF_EINVAL, 0},
    {"--1", PF_EINVAL, 0},
    {"-", PF_EINVAL, 0},
    {".", PF_EINVAL, 0},
    {"e5", PF_EINVAL, 0},
    {"", PF_EINVAL, 0},
    {"fast", PF_EINVAL, 0},
    {"1,5", PF_EINVAL, 0},
    {"1.5\n", PF_EINVAL, 0},
    {"\x1b[31m1", PF_EINVAL, 0},
    {"1\xc2\xa0", PF_EINVAL, 0},
};

static int decode_one(double *v, const char *text, size_t len)
{
    struct pf_buf b;
    pf_buf_init(&b, 1024);
    assert_int_equal(pf_wire_put(&b, "busbw", text, len), 0);
    struct pf_wire_fields f;
    assert_int_equal(pf_wire_fields_decode(&f, (const uint8_t *)b.data, b.len), 0);
    int rc = pf_wire_fields_num(v, &f, "busbw");
    pf_wire_fields_free(&f);
    pf_buf_free(&b);
    return rc;
}

static void test_num_table(void **state)
{
    (void)state;
    for (size_t i = 0; i < PF_ARRAY_LEN(cases); i++) {
        double v = -7;
        int rc = decode_one(&v, cases[i].text, strlen(cases[i].text));
        if (rc != cases[i].rc) print_message("num \"%s\": rc %d v %g\n", cases[i].text, rc, v);
        assert_int_equal(rc, cases[i].rc);
        if (rc == 0) {
            assert_true(isfinite(v));
            assert_true(fabs(v - cases[i].v) <= 1e-12 * fabs(cases[i].v));
            continue;
        }
        /* refused: the value is untouched and the message names the field */
        assert_true(v == -7);
        assert_non_null(strstr(pf_err_msg(), "field busbw"));
    }
}

static void test_num_messages(void **state)
{
    (void)state;
    double v = 0;
    /* printable text is quoted as it came */
    assert_int_equal(decode_one(&v, "nan", 3), PF_EINVAL);
    assert_string_equal(pf_err_msg(), "field busbw: \"nan\" is not a finite decimal number");
    /* bytes that would garble a terminal are named, never printed */
    assert_int_equal(decode_one(&v, "\x1b[2J", 4), PF_EINVAL);
    assert_string_equal(pf_err_msg(),
                        "field busbw is not a finite decimal number (it holds a byte 0x1b)");
    assert_int_equal(decode_one(&v, "0.5\xff", 4), PF_EINVAL);
    assert_string_equal(pf_err_msg(),
                        "field busbw is not a finite decimal number (it holds a byte 0xff)");
    /* the integer decoder refuses the same way */
    struct pf_buf b;
    pf_buf_init(&b, 64);
    pf_wire_put_str(&b, "rank", "\x1b]0;x\a7");
    struct pf_wire_fields f;
    assert_int_equal(pf_wire_fields_decode(&f, (const uint8_t *)b.data, b.len), 0);
    long long n = 0;
    assert_int_equal(pf_wire_fields_int(&n, &f, "rank"), PF_EINVAL);
    assert_string_equal(pf_err_msg(), "field rank is not a number (it holds a byte 0x1b)");
    pf_wire_fields_free(&f);
    pf_buf_free(&b);
    /* a NUL inside, an absent field, a value too long to be a number */
    assert_int_equal(decode_one(&v, "1\0002", 3), PF_EINVAL);
    assert_non_null(strstr(pf_err_msg(), "busbw"));
    char longnum[200];
    memset(longnum, '1', sizeof(longnum));
    assert_int_equal(decode_one(&v, longnum, sizeof(longnum)), PF_ETOOBIG);
    assert_non_null(strstr(pf_err_msg(), "field busbw"));
    struct pf_wire_fields none = {0};
    assert_int_equal(pf_wire_fields_num(&v, &none, "busbw"), PF_ENOENT);
    assert_non_null(strstr(pf_err_msg(), "busbw"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_num_table),
        cmocka_unit_test(test_num_messages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
