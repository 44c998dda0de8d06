/* pkg/host: every read goes under the root prefix, a file that does not fit is an error
 * naming it (never cut), integers in decimal or hex, listings in natural order, symlinks read
 * as written. On a real folder tree made for the test. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../pkg/host/host.h"
#include "../helpers/helpers.h"

static char root[128];
static struct pf_host H;

static int setup(void **state)
{
    (void)state;
    th_tmpdir(root, sizeof(root), "host");
    th_sh("cd %s && mkdir -p sys/class/infiniband proc etc &&"
          " for d in mlx5_10 mlx5_2 mlx5_1 ib0; do mkdir sys/class/infiniband/$d; done &&"
          " printf 'ACTIVE\\n' >sys/state && printf '4: ACTIVE\\n\\n' >sys/two_lines &&"
          " printf '' >sys/empty && printf '0x1d0f\\n' >sys/vendor && printf ' 42 \\n' >sys/num &&"
          " printf 'fast\\n' >sys/bad_num && printf '1234567890' >sys/ten &&"
          " ln -s ../../../devices/pci0000:00/0000:07:00.0 sys/device",
          root);
    assert_int_equal(pf_host_init(&H, root), 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    th_rmtree(root);
    return 0;
}

static void test_init_and_path(void **state)
{
    (void)state;
    struct pf_host h;
    char p[256];
    assert_int_equal(pf_host_init(&h, "/"), 0);
    assert_string_equal(h.root, "");
    assert_int_equal(pf_host_path(p, sizeof(p), &h, "/sys/class/net/%s", "eth0"), 0);
    assert_string_equal(p, "/sys/class/net/eth0");
    char slashes[160];
    snprintf(slashes, sizeof(slashes), "%s///", root);
    assert_int_equal(pf_host_init(&h, slashes), 0);
    assert_string_equal(h.root, root);
    assert_int_equal(pf_host_path(p, sizeof(p), &h, "/proc/%d/status", 1), 0);
    char want[256];
    snprintf(want, sizeof(want), "%s/proc/1/status", root);
    assert_string_equal(p, want);
    /* a root that is not a folder, or not absolute, is a usage error naming it */
    assert_int_equal(pf_host_init(&h, "relative/root"), PF_EUSAGE);
    assert_non_null(strstr(pf_err_msg(), "relative/root"));
    snprintf(slashes, sizeof(slashes), "%s/sys/state", root);
    assert_int_equal(pf_host_init(&h, slashes), PF_EUSAGE);
    assert_non_null(strstr(pf_err_msg(), "not a directory"));
    assert_int_equal(pf_host_init(&h, "/"), 0);
    /* a path that does not fit is refused, not cut */
    char small[8];
    assert_true(pf_host_path(small, sizeof(small), &h, "/sys/class/net") < 0);
}

static void test_read(void **state)
{
    (void)state;
    char out[64];
    assert_int_equal(pf_host_read(out, sizeof(out), &H, "/sys/state"), 6);
    assert_string_equal(out, "ACTIVE"); /* one trailing newline stripped */
    assert_true(pf_host_read(out, sizeof(out), &H, "/sys/two_lines") >= 0);
    assert_string_equal(out, "4: ACTIVE\n"); /* only one */
    assert_int_equal(pf_host_read(out, sizeof(out), &H, "/sys/empty"), 0);
    assert_string_equal(out, "");
    assert_int_equal(pf_host_read(out, sizeof(out), &H, "/sys/missing"), PF_ENOENT);
    assert_non_null(strstr(pf_err_msg(), "/sys/missing"));
    char five[5];
    assert_int_equal(pf_host_read(five, sizeof(five), &H, "/sys/ten"), PF_ETOOBIG);
    assert_non_null(strstr(pf_err_msg(), "/sys/ten"));
}

static void test_read_all(void **state)
{
    (void)state;
    char *text = NULL;
    size_t len = 99;
    assert_int_equal(pf_host_read_all(&text, &len, 64, &H, "/sys/ten"), 0);
    assert_int_equal(len, 10);
    assert_string_equal(text, "1234567890");
    free(text);
    text = NULL;
    assert_int_equal(pf_host_read_all(&text, &len, 64, &H, "/sys/empty"), 0);
    assert_int_equal(len, 0);
    assert_string_equal(text, ""); /* the caller's own, freed like any other */
    free(text);
    text = NULL;
    assert_int_equal(pf_host_read_all(&text, &len, 9, &H, "/sys/ten"), PF_ETOOBIG);
    assert_null(text);
    assert_non_null(strstr(pf_err_msg(), "larger than 9 bytes"));
    assert_true(pf_host_read_all(&text, &len, 64, &H, "/sys/missing") < 0);
    assert_null(text);
}

static void test_read_ll(void **state)
{
    (void)state;
    long long v = 0;
    assert_int_equal(pf_host_read_ll(&v, &H, "/sys/num"), 0);
    assert_int_equal(v, 42);
    assert_int_equal(pf_host_read_ll(&v, &H, "/sys/vendor"), 0);
    assert_int_equal(v, 0x1d0f);
    assert_int_equal(pf_host_read_ll(&v, &H, "/sys/bad_num"), PF_EINVAL);
    assert_non_null(strstr(pf_err_msg(), "expected an integer, found \"fast\""));
    assert_int_equal(pf_host_read_ll(&v, &H, "/sys/empty"), PF_EINVAL);
    assert_int_equal(pf_host_read_ll(&v, &H, "/sys/missing"), PF_ENOENT);
}

static void test_list_natural_order(void **state)
{
    (void)state;
    struct pf_strlist l = {0};
    assert_int_equal(pf_host_list(&l, &H, "/sys/class/%s", "infiniband"), 0);
    assert_int_equal(l.n, 4);
    assert_string_equal(l.v[0], "ib0");
    assert_string_equal(l.v[1], "mlx5_1");
    assert_string_equal(l.v[2], "mlx5_2");
    assert_string_equal(l.v[3], "mlx5_10");
    pf_strlist_free(&l);
    assert_int_equal(pf_host_list(&l, &H, "/sys/class/net"), PF_ENOENT);
    pf_strlist_free(&l);
    assert_true(pf_host_natcmp("mlx5_2", "mlx5_10") < 0);
    assert_true(pf_host_natcmp("eth10", "eth9") > 0);
    assert_int_equal(pf_host_natcmp("ib0", "ib0"), 0);
}

static void test_links_and_stat(void **state)
{
    (void)state;
    char out[256];
    assert_true(pf_host_readlink(out, sizeof(out), &H, "/sys/device") > 0);
    assert_string_equal(out, "../../../devices/pci0000:00/0000:07:00.0"); /* as written */
    assert_true(pf_host_link_basename(out, sizeof(out), &H, "/sys/device") >= 0);
    assert_string_equal(out, "0000:07:00.0");
    assert_true(pf_host_readlink(out, sizeof(out), &H, "/sys/state") < 0); /* not a link */
    assert_true(pf_host_exists(&H, "/sys/state"));
    assert_true(pf_host_exists(&H, "/sys/class/infiniband/mlx5_%d", 10));
    assert_false(pf_host_exists(&H, "/sys/missing"));
    struct stat st;
    assert_int_equal(pf_host_stat(&st, &H, "/sys/ten"), 0);
    assert_int_equal(st.st_size, 10);
    assert_int_equal(pf_host_stat(&st, &H, "/sys/missing"), PF_ENOENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_and_path),      cmocka_unit_test(test_read),
        cmocka_unit_test(test_read_all),           cmocka_unit_test(test_read_ll),
        cmocka_unit_test(test_list_natural_order), cmocka_unit_test(test_links_and_stat),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
