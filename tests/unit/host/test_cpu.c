/* host: the CPU pressure reader, on fixture trees (--root) holding what the kernel writes:
 * /proc/pressure/cpu and a cgroup's cpu.pressure (kernel/sched/psi.c, psi_show), /proc/stat
 * (fs/proc/stat.c), /proc/self/task/<tid>/schedstat (fs/proc/base.c). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../../pkg/host/host.h"

static void put(const char *root, const char *rel, const char *text)
{
    char path[4096], cmd[4200];
    snprintf(path, sizeof(path), "%s%s", root, rel);
    snprintf(cmd, sizeof(cmd), "mkdir -p \"$(dirname '%s')\"", path);
    assert_int_equal(system(cmd), 0);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_psi_parse(void **state)
{
    (void)state;
    long long t;
    double a;
    assert_int_equal(
        pf_host_psi_parse(&t, &a,
                          "some avg10=95.80 avg60=94.56 avg300=96.40 total=2105239131\n"
                          "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"),
        0);
    assert_int_equal(t, 2105239131LL);
    assert_true(a > 95.79 && a < 95.81);
    /* a cgroup's file has the "full" line first in no kernel, but order must not matter */
    assert_int_equal(pf_host_psi_parse(&t, &a,
                                       "full avg10=1.00 avg60=0 avg300=0 total=5\n"
                                       "some avg10=2.50 avg60=0 avg300=0 total=7\n"),
                     0);
    assert_int_equal(t, 7);
    assert_int_equal(pf_host_psi_parse(&t, &a, ""), PF_EINVAL);
    assert_int_equal(pf_host_psi_parse(&t, &a, "some avg10=x total=1\n"), PF_EINVAL);
    assert_int_equal(pf_host_psi_parse(&t, &a, "some avg10=1.0\nfull total=3\n"), PF_EINVAL);
    assert_int_equal(pf_host_psi_parse(&t, &a, "some avg10=101.0 total=3\n"), PF_EINVAL);
}

static void test_read_fixture(void **state)
{
    (void)state;
    char root[] = "/tmp/pf-cpu-XXXXXX";
    assert_non_null(mkdtemp(root));
    put(root, "/proc/self/task/100/schedstat", "5000000 2000000 7\n");
    put(root, "/proc/self/task/101/schedstat", "1000 3000000 2\n");
    put(root, "/proc/stat", "cpu  100 0 50 800 10 0 0 40 0 0\ncpu0 50 0 25 400 5 0 0 20 0 0\n");
    put(root, "/proc/self/cgroup", "0::/kubepods/pod1/c1\n");
    put(root, "/sys/fs/cgroup/kubepods/pod1/c1/cpu.pressure",
        "some avg10=40.00 avg60=10.00 avg300=1.00 total=123456\n"
        "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n");
    put(root, "/proc/pressure/cpu", "some avg10=99.00 avg60=0 avg300=0 total=999\n");
    struct pf_host h;
    assert_int_equal(pf_host_init(&h, root), 0);
    struct pf_host_cpu c;
    pf_host_cpu_read(&c, &h);
    assert_int_equal(c.wait_ns, 5000000LL);
    assert_int_equal(c.steal, 40);
    assert_int_equal(c.total, 1000);
    assert_true(c.psi_own);
    assert_int_equal(c.psi_us, 123456);
    assert_true(c.psi_avg10 > 39.9 && c.psi_avg10 < 40.1);
    /* in the root cgroup the only pressure is the host's: read, but not the pod's own */
    put(root, "/proc/self/cgroup", "0::/\n");
    pf_host_cpu_read(&c, &h);
    assert_false(c.psi_own);
    assert_int_equal(c.psi_us, 999);
    char cmd[200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    assert_int_equal(system(cmd), 0);
    /* an empty root: nothing known, nothing made up */
    char empty[] = "/tmp/pf-cpu-XXXXXX";
    assert_non_null(mkdtemp(empty));
    assert_int_equal(pf_host_init(&h, empty), 0);
    pf_host_cpu_read(&c, &h);
    assert_int_equal(c.wait_ns, -1);
    assert_int_equal(c.steal, -1);
    assert_int_equal(c.psi_us, -1);
    rmdir(empty);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_psi_parse),
        cmocka_unit_test(test_read_fixture),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
