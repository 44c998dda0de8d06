/* base: outside text made safe for terminals and logs (pf_text_escape): control sequences,
 * carriage returns and newlines visible, C1 controls and bidirectional overrides named,
 * bytes that are not UTF-8 shown as bytes; ordinary text, UTF-8 included, unchanged. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "../../../pkg/base/base.h"

static void expect(const char *in, bool keep_nl, const char *want)
{
    struct pf_buf b;
    pf_buf_init(&b, 4096);
    assert_int_equal(pf_text_escape(&b, in, keep_nl), 0);
    assert_string_equal(pf_buf_str(&b), want);
    assert_int_equal(pf_text_is_safe(in, keep_nl), strcmp(in, want) == 0);
    pf_buf_free(&b);
}

static void test_escape_table(void **state)
{
    (void)state;
    expect("trainer-3", false, "trainer-3");
    expect("", false, "");
    expect("naïve 東京 ✓", false, "naïve 東京 ✓");
    expect("a\tb", false, "a\tb");
    /* a forged log line: carriage return, newline, and a colour sequence */
    expect("x\r\n2026-01-01T00:00:00Z preflight: \033[32mverdict pass\033[0m", false,
           "x\\r\\n2026-01-01T00:00:00Z preflight: \\x1b[32mverdict pass\\x1b[0m");
    expect("line1\nline2", true, "line1\nline2");
    expect("bell\a back\b del\x7f", false, "bell\\x07 back\\x08 del\\x7f");
    /* C1 CSI as UTF-8 (U+009B) and as a lone byte, which is not UTF-8 */
    expect("\xc2\x9b"
           "2J",
           false, "\\u009b2J");
    expect("\x9b"
           "2J",
           false, "\\x9b2J");
    /* overlong '/', a surrogate, a cut sequence */
    expect("\xc0\xaf", false, "\\xc0\\xaf");
    expect("\xed\xa0\x80", false, "\\xed\\xa0\\x80");
    expect("ab\xe2\x82", false, "ab\\xe2\\x82");
    /* right-to-left override and a Unicode line separator */
    expect("pod\xe2\x80\xae"
           "gnp.exe",
           false, "pod\\u202egnp.exe");
    expect("a\xe2\x80\xa8"
           "b",
           false, "a\\u2028b");
}

static void test_escape_bounded(void **state)
{
    (void)state;
    struct pf_buf b;
    pf_buf_init(&b, 8);
    assert_true(pf_text_escape(&b, "\033\033\033\033", false) < 0);
    pf_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_escape_table),
        cmocka_unit_test(test_escape_bounded),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
