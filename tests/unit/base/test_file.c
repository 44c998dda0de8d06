/* pf_file_replace: a new file appears whole or not at all, a planted name or symlink in the
 * folder is never opened, a failure leaves the old file and says so, and the temporary name
 * fits whatever the target's name length. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../../pkg/base/base.h"
#include "../helpers/helpers.h"

static char dir[64];

static int setup(void **state)
{
    (void)state;
    th_tmpdir(dir, sizeof(dir), "file-test");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    return th_rmtree(dir) ? 0 : -1;
}

/* The file's text, kept until the next call; NULL when it cannot be read. */
static char *slurp(const char *path)
{
    static char *last;
    free(last);
    last = th_slurp(path, NULL);
    return last;
}

static int entries(void)
{
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return n;
}

static void test_replace_and_mode(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof(path), "%s/v.yaml", dir);
    mode_t old = umask(077);
    assert_int_equal(pf_file_replace(path, "one\n", 4, 0644), 0);
    umask(old);
    assert_string_equal(slurp(path), "one\n");
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0644);
    assert_int_equal(pf_file_replace(path, "two\n", 4, 0644), 0);
    assert_string_equal(slurp(path), "two\n");
    assert_int_equal(entries(), 1); /* no temporary file left */
}

/* A symlink planted at the target is replaced, not followed. */
static void test_symlink_target_replaced(void **state)
{
    (void)state;
    char path[128], victim[128];
    snprintf(victim, sizeof(victim), "%s/victim", dir);
    snprintf(path, sizeof(path), "%s/v.yaml", dir);
    int fd = open(victim, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(write(fd, "keep", 4) == 4);
    close(fd);
    assert_int_equal(symlink(victim, path), 0);
    assert_int_equal(pf_file_replace(path, "new", 3, 0644), 0);
    assert_string_equal(slurp(victim), "keep");
    struct stat st;
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISREG(st.st_mode));
}

/* Every temporary name taken by a symlink (a seed known to the test): the replacement fails
 * with nothing followed and the old file kept. */
static void test_planted_temporary_names(void **state)
{
    (void)state;
    char path[128], victim[128];
    snprintf(victim, sizeof(victim), "%s/victim", dir);
    snprintf(path, sizeof(path), "%s/v.yaml", dir);
    assert_int_equal(pf_file_replace(path, "old", 3, 0644), 0);
    int fd = open(victim, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(write(fd, "keep", 4) == 4);
    close(fd);
    struct pf_file_target t;
    assert_int_equal(pf_file_split(&t, path), 0);
    /* learn the names seed 42 tries, by creating and aborting */
    char names[16][16];
    int planted = 0;
    for (int i = 0; i < 16; i++) {
        struct pf_file_tmp tmp;
        assert_int_equal(pf_file_tmp_open(&tmp, &t, 0644, 42, false), 0);
        strcpy(names[i], tmp.name);
        pf_file_tmp_abort(&tmp);
        char link[192];
        snprintf(link, sizeof(link), "%s/%s", dir, names[i]);
        assert_int_equal(symlink(victim, link), 0);
        planted++;
    }
    assert_int_equal(planted, 16);
    enum pf_file_step step;
    int e = pf_file_replace_raw(&t, "new", 3, 0644, 42, false, &step);
    assert_int_equal(e, -EEXIST);
    assert_int_equal(step, PF_FILE_STEP_CREATE);
    assert_string_equal(slurp(victim), "keep");
    assert_string_equal(slurp(path), "old");
    /* another seed gets a free name */
    assert_int_equal(pf_file_replace_raw(&t, "new", 3, 0644, 43, false, &step), 0);
    assert_string_equal(slurp(path), "new");
    assert_string_equal(slurp(victim), "keep");
}

/* A 250-byte file name: the temporary name does not grow with it. */
static void test_long_name(void **state)
{
    (void)state;
    char path[400];
    int n = snprintf(path, sizeof(path), "%s/", dir);
    memset(path + n, 'v', 250);
    path[n + 250] = '\0';
    assert_int_equal(pf_file_replace(path, "x", 1, 0644), 0);
    assert_string_equal(slurp(path), "x");
    /* 256 bytes is over NAME_MAX: an error naming the path, not a crash */
    memset(path + n, 'v', 256);
    path[n + 256] = '\0';
    assert_true(pf_file_replace(path, "x", 1, 0644) < 0);
    assert_non_null(strstr(pf_err_msg(), "path too long"));
}

static void test_split(void **state)
{
    (void)state;
    struct pf_file_target t;
    assert_int_equal(pf_file_split(&t, "v.yaml"), 0);
    assert_string_equal(t.dir, ".");
    assert_string_equal(t.base, "v.yaml");
    assert_int_equal(pf_file_split(&t, "/v.yaml"), 0);
    assert_string_equal(t.dir, "/");
    assert_int_equal(pf_file_split(&t, "/a/b/v.yaml"), 0);
    assert_string_equal(t.dir, "/a/b");
    assert_string_equal(t.base, "v.yaml");
    assert_true(pf_file_split(&t, "/a/b/") == 0 && strcmp(t.base, "b") == 0);
    assert_int_equal(pf_file_split(&t, "/a/.."), PF_EINVAL);
    assert_int_equal(pf_file_split(&t, ""), PF_EINVAL);
}

/* A folder that is not there: an error that says nothing was written. */
static void test_missing_folder(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof(path), "%s/no/such/v.yaml", dir);
    assert_true(pf_file_replace(path, "x", 1, 0644) < 0);
    assert_non_null(strstr(pf_err_msg(), "open the folder"));
    assert_non_null(strstr(pf_err_msg(), "nothing was written"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_replace_and_mode, setup, teardown),
        cmocka_unit_test_setup_teardown(test_symlink_target_replaced, setup, teardown),
        cmocka_unit_test_setup_teardown(test_planted_temporary_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_long_name, setup, teardown),
        cmocka_unit_test(test_split),
        cmocka_unit_test_setup_teardown(test_missing_folder, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
