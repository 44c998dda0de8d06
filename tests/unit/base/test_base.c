/* base: a buffer's text is never NULL, a refused add is remembered (sticky) and named once,
 * and deadlines are clamped to the run's cutoff. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "../../../pkg/base/base.h"

static void test_buf_str_never_null(void **state)
{
    (void)state;
    struct pf_buf b;
    pf_buf_init(&b, 64);
    assert_non_null(pf_buf_str(&b));
    assert_string_equal(pf_buf_str(&b), "");
    /* the format that printed "(null)" when nothing was added */
    char line[128];
    snprintf(line, sizeof(line), "its connection closed%s%s%s", b.len ? " (" : "", pf_buf_str(&b),
             b.len ? ")" : "");
    assert_string_equal(line, "its connection closed");
    pf_buf_reset(&b);
    assert_string_equal(pf_buf_str(&b), "");
    assert_int_equal(pf_buf_addf(&b, "rank %d", 3), 0);
    assert_string_equal(pf_buf_str(&b), "rank 3");
    pf_buf_free(&b);
    assert_string_equal(pf_buf_str(&b), "");
}

/* data is text from pf_buf_init on: every empty buffer shares one read-only "" (a write into
 * it would fault here), and adds, resets, frees and detaches never write there. */
static void test_buf_data_is_text(void **state)
{
    (void)state;
    struct pf_buf a, b;
    pf_buf_init(&a, 8);
    pf_buf_init(&b, 8);
    assert_non_null(a.data);
    assert_ptr_equal(a.data, b.data);
    assert_string_equal(a.data, "");
    pf_buf_reset(&a); /* on the shared "": nothing to clear */
    assert_int_equal(pf_buf_add(&a, "123456789", 9), PF_ETOOBIG);
    assert_ptr_equal(a.data, b.data); /* a refused add allocates nothing */
    pf_buf_reset(&a);
    assert_int_equal(pf_buf_add(&a, "", 0), 0); /* an empty add allocates a's own text */
    assert_ptr_not_equal(a.data, b.data);
    assert_int_equal(pf_buf_addf(&a, "%s", "abc"), 0);
    assert_string_equal(a.data, "abc");
    assert_string_equal(b.data, "");
    pf_buf_reset(&a);
    assert_string_equal(a.data, "");
    pf_buf_free(&a);
    assert_ptr_equal(a.data, b.data);
    pf_buf_free(&a); /* twice is fine */
    pf_buf_reset(&a);
    assert_string_equal(b.data, "");

    char *s = pf_buf_detach(&b); /* empty: a string of the caller's own */
    assert_string_equal(s, "");
    s[0] = '\0';
    free(s);
    assert_int_equal(pf_buf_add(&b, "xy", 2), 0);
    s = pf_buf_detach(&b);
    assert_string_equal(s, "xy");
    assert_int_equal(b.len, 0);
    assert_string_equal(b.data, "");
    assert_int_equal(pf_buf_add(&b, "z", 1), 0); /* usable again, limit kept */
    assert_int_equal(pf_buf_add(&b, "123456789", 9), PF_ETOOBIG);
    free(s);
    pf_buf_free(&b);

    struct pf_buf z = {.max = 8}; /* zeroed, not initialised: the text is still "" */
    assert_string_equal(pf_buf_str(&z), "");
    pf_buf_reset(&z);
    assert_int_equal(pf_buf_add(&z, "q", 1), 0);
    assert_string_equal(z.data, "q");
    pf_buf_free(&z);
}

static void test_buf_over_is_sticky(void **state)
{
    (void)state;
    struct pf_buf b;
    pf_buf_init(&b, 8);
    assert_int_equal(pf_buf_add(&b, "12345", 5), 0);
    assert_int_equal(pf_buf_check(&b, "the list"), 0);
    assert_int_equal(pf_buf_add(&b, "6789", 4), PF_ETOOBIG);
    assert_string_equal(pf_buf_str(&b), "12345"); /* left as it was */
    assert_int_equal(pf_buf_add(&b, "6", 1), 0);  /* a later small add fits ... */
    assert_true(b.over);                          /* ... but the loss is remembered */
    assert_int_equal(pf_buf_check(&b, "the list"), PF_ETOOBIG);
    assert_non_null(strstr(pf_err_msg(), "the list is over its limit of 8 bytes"));
    pf_buf_reset(&b);
    assert_false(b.over);
    pf_buf_free(&b);
}

static void test_deadline_in(void **state)
{
    (void)state;
    double now = pf_now();
    assert_true(pf_deadline_in(5, now + 100) >= now + 5);
    assert_true(pf_deadline_in(5, now + 100) < now + 100);
    assert_true(pf_deadline_in(500, now + 1) == now + 1);
    assert_true(pf_clampd(0.5, 1, 10) == 1);
    assert_true(pf_clampd(50, 1, 10) == 10);
    assert_true(pf_clampd(5, 1, 10) == 5);
}

/* A share of the time left: (seconds left, share, lo, hi) → seconds from now, or the deadline
 * itself when that comes first. Measured between two readings of the clock, never by how
 * long the call took. */
static void test_deadline_share(void **state)
{
    (void)state;
    const struct {
        double left, share, lo, hi;
        double want; /* seconds after now; < 0: the deadline itself */
    } rows[] = {
        {100, 0.3, 3, 60, 30},  /* the share */
        {1000, 0.3, 3, 60, 60}, /* at most hi */
        {5, 0.3, 3, 60, 3},     /* at least lo */
        {2, 0.3, 3, 60, -1},    /* lo would pass the deadline: the deadline */
        {-5, 0.3, 3, 60, -1},   /* past already: the deadline */
        {600, 0.03, 2, 10, 10}, /* a probe at --timeout 600 */
        {60, 0.03, 2, 10, 2},   /* ... at 60 */
        {0, 0.4, 3, 300, 300},  /* no deadline: hi */
    };
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        double before = pf_now();
        double deadline = rows[i].left == 0 ? 0 : before + rows[i].left;
        double d = pf_deadline_share(deadline, rows[i].share, rows[i].lo, rows[i].hi);
        double after = pf_now();
        if (rows[i].want < 0) {
            if (d != deadline) fail_msg("row %zu: %.6f, not the deadline %.6f", i, d, deadline);
        } else if (d < before + rows[i].want - 1e-9 || d > after + rows[i].want + 1e-9) {
            fail_msg("row %zu: %.6f s from now, want %.1f", i, d - before, rows[i].want);
        }
    }
}

/* The median sorts in place: odd, even (the mean of the middle two), one, none. */
static void test_median(void **state)
{
    (void)state;
    double odd[] = {5, 1, 3};
    assert_true(pf_median(odd, 3) == 3);
    assert_true(odd[0] == 1 && odd[1] == 3 && odd[2] == 5);
    double even[] = {8, 2, 6, 4};
    assert_true(pf_median(even, 4) == 5);
    double one[] = {7};
    assert_true(pf_median(one, 1) == 7);
    assert_true(pf_median(one, 0) == 0);
    double v[] = {3, -1, 2};
    pf_sort_dbl(v, 3);
    assert_true(v[0] == -1 && v[1] == 2 && v[2] == 3);
}

/* The URL check: any case of the scheme is a scheme (RFC 3986 §3.1), so "HTTPS://u:pw@h"
 * is refused for its credentials like "https://u:pw@h"; no error message holds a password,
 * whatever the text around it. */
static void test_url_credentials(void **state)
{
    (void)state;
    static const char *const refused[] = {
        "HTTPS://user:s3cr3t@gw:9091", "Http://user:s3cr3t@gw/", "https://user:s3cr3t@gw",
        "htps://user:s3cr3t@gw:9091",  "user:s3cr3t@gw:9091",    "ftp://user:s3cr3t@gw/x@y",
        "hTtP://:s3cr3t@gw",
    };
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        assert_true(pf_http_url_check("url", refused[i]) < 0);
        assert_null(strstr(pf_err_msg(), "s3cr3t"));
    }
    assert_int_equal(pf_http_url_check("url", "HTTPS://gw.example:9091/"), 0);
    assert_int_equal(pf_http_url_check("url", "http://gw/path@v1"), 0); /* '@' in the path */
    assert_true(pf_http_url_check("url", "gw:9091") < 0);
    assert_non_null(strstr(pf_err_msg(), "\"gw:9091\"")); /* nothing to hide: shown */
}

/* RFC 4648 section 10's test vectors, and the two alphabets apart (0xfb 0xff: "+/" and "-_"). */
static void test_base64(void **state)
{
    (void)state;
    static const char *const vec[][2] = {{"", ""},
                                         {"f", "Zg=="},
                                         {"fo", "Zm8="},
                                         {"foo", "Zm9v"},
                                         {"foob", "Zm9vYg=="},
                                         {"fooba", "Zm9vYmE="},
                                         {"foobar", "Zm9vYmFy"}};
    for (size_t i = 0; i < sizeof(vec) / sizeof(vec[0]); i++) {
        struct pf_buf b;
        pf_buf_init(&b, 64);
        assert_int_equal(pf_buf_base64(&b, vec[i][0], strlen(vec[i][0]), false), 0);
        assert_string_equal(pf_buf_str(&b), vec[i][1]);
        pf_buf_free(&b);
    }
    struct pf_buf std, url;
    pf_buf_init(&std, 64);
    pf_buf_init(&url, 64);
    pf_buf_base64(&std, "\xfb\xff", 2, false);
    pf_buf_base64(&url, "\xfb\xff", 2, true);
    assert_string_equal(pf_buf_str(&std), "+/8=");
    assert_string_equal(pf_buf_str(&url), "-_8=");
    pf_buf_free(&std);
    pf_buf_free(&url);
}

/* pf_resolve_by: an address is answered at once, even with the deadline already past (no
 * resolver, no thread); a name in /etc/hosts (localhost) through the thread; a name that is
 * not an address with the deadline past ends PF_ETIMEOUT naming the host, at once (no lookup
 * started; the lookup that outlives its deadline is tests/e2e/test_join_dns.sh's). */
static void test_resolve_by(void **state)
{
    (void)state;
    struct addrinfo hints, *ai = NULL;
    memset(&hints, 0, sizeof(hints));
    hints.ai_socktype = SOCK_STREAM;
    assert_int_equal(pf_resolve_by(&ai, "127.0.0.1", "80", &hints, pf_now() - 1), 0);
    assert_non_null(ai);
    assert_int_equal(ai->ai_family, AF_INET);
    freeaddrinfo(ai);
    ai = NULL;
    assert_int_equal(pf_resolve_by(&ai, "::1", NULL, &hints, pf_now() - 1), 0);
    assert_int_equal(ai->ai_family, AF_INET6);
    freeaddrinfo(ai);
    ai = NULL;
    if (pf_resolve_by(&ai, "localhost", "80", &hints, pf_now() + 10) == 0) {
        assert_non_null(ai);
        freeaddrinfo(ai);
    }
    ai = NULL;
    double t0 = pf_now();
    assert_int_equal(pf_resolve_by(&ai, "rank0.invalid", "80", &hints, pf_now() - 1), PF_ETIMEOUT);
    assert_null(ai);
    assert_true(pf_now() - t0 < 1.0);
    assert_non_null(
        strstr(pf_err_msg(), "resolving rank0.invalid: no time left before the deadline"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_buf_str_never_null),
        cmocka_unit_test(test_url_credentials),
        cmocka_unit_test(test_base64),
        cmocka_unit_test(test_buf_data_is_text),
        cmocka_unit_test(test_buf_over_is_sticky),
        cmocka_unit_test(test_deadline_in),
        cmocka_unit_test(test_deadline_share),
        cmocka_unit_test(test_median),
        cmocka_unit_test(test_resolve_by),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
