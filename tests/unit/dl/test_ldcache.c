/* pkg/dl/ldcache.c against the real writers: ld.so.cache files written by this machine's
 * glibc ldconfig in each of its formats (new, compat, old), and shared objects linked by the
 * C compiler with DT_RUNPATH or DT_RPATH (tests/fixtures/loader/make-tree.sh). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../../../pkg/dl/dl.h"
#include "../helpers/helpers.h"

#define MAKE "fixtures/loader/make-tree.sh"

struct buf_reader {
    const unsigned char *b;
    size_t len;
};
static long buf_read(void *arg, void *out, size_t len, uint64_t off)
{
    const struct buf_reader *r = arg;
    if (off >= r->len) return 0;
    size_t n = r->len - off < len ? (size_t)(r->len - off) : len;
    memcpy(out, r->b + off, n);
    return (long)n;
}

static int paths_of(struct pf_dl_elf_paths *p, const char *file, char *why, size_t wn)
{
    size_t len = 0;
    unsigned char *b = (unsigned char *)th_slurp(file, &len);
    assert_non_null(b);
    struct buf_reader r = {b, len};
    int rc = pf_dl_elf_search_paths(p, buf_read, &r, why, wn);
    free(b);
    return rc;
}

/* The cache this machine's loader reads: libc.so.6 is in it, at a file that exists. */
static void test_host_cache(void **state)
{
    (void)state;
    size_t len = 0;
    unsigned char *b = (unsigned char *)th_slurp("/etc/ld.so.cache", &len);
    if (!b) skip();
    char path[1024], why[200];
    size_t entries = 0;
    assert_int_equal(
        pf_dl_ldcache_find(b, len, "libc.so.6", path, sizeof(path), &entries, why, sizeof(why)), 1);
    assert_true(entries > 1);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(pf_dl_ldcache_find(b, len, "libnot-a-library-anywhere.so", path, sizeof(path),
                                        NULL, why, sizeof(why)),
                     0);
    /* every cut of the file: never a crash, never an entry past the cut */
    for (size_t cut = 0; cut < len && cut < 8192; cut += 7)
        (void)pf_dl_ldcache_find(b, cut, "libc.so.6", path, sizeof(path), NULL, why, sizeof(why));
    free(b);
}

/* ldconfig's three formats, from one tree */
static void test_formats(void **state)
{
    (void)state;
    char root[128];
    th_tmpdir(root, sizeof(root), "ldcache");
    th_sh(MAKE " %s lib opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so libnccl-net-ofi.so", root);
    th_sh(MAKE " %s lib usr/lib/libnccl.so.2 libnccl.so.2", root);
    th_sh("mkdir -p %s/etc && echo /opt/amazon/ofi-nccl/lib >%s/etc/ld.so.conf", root, root);
    static const char *const formats[] = {"new", "compat", "old"};
    for (size_t i = 0; i < 3; i++) {
        th_sh(MAKE " %s ldconfig %s", root, formats[i]);
        char file[256], path[1024], why[200] = "";
        snprintf(file, sizeof(file), "%s/etc/ld.so.cache", root);
        size_t len = 0, entries = 0;
        unsigned char *b = (unsigned char *)th_slurp(file, &len);
        assert_non_null(b);
        int rc = pf_dl_ldcache_find(b, len, "libnccl-net-ofi.so", path, sizeof(path), &entries, why,
                                    sizeof(why));
        if (rc != 1) fail_msg("format %s: %d (%s)", formats[i], rc, why);
        assert_string_equal(path, "/opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so");
        assert_int_equal(entries, 2);
        assert_int_equal(pf_dl_ldcache_find(b, len, "libnccl-net.so", path, sizeof(path), NULL, why,
                                            sizeof(why)),
                         0);
        for (size_t cut = 0; cut < len; cut++)
            (void)pf_dl_ldcache_find(b, cut, "libnccl-net-ofi.so", path, sizeof(path), NULL, why,
                                     sizeof(why));
        free(b);
    }
    /* not a cache */
    char why[200] = "";
    static const unsigned char junk[] = "glibc-ld.so.cache1.0 not really";
    assert_int_equal(pf_dl_ldcache_find(junk, sizeof(junk), "x", NULL, 0, NULL, why, sizeof(why)),
                     -1);
    assert_non_null(strstr(why, "without the magic"));
    th_rmtree(root);
}

static void test_elf_paths(void **state)
{
    (void)state;
    char root[128], file[256], why[200] = "";
    th_tmpdir(root, sizeof(root), "elfpaths");
    th_sh(MAKE " %s lib a.so liba.so runpath '$ORIGIN/../plugins:/opt/x/lib'", root);
    th_sh(MAKE " %s lib b.so libb.so rpath /opt/y/lib", root);
    th_sh(MAKE " %s lib c.so libc-none.so", root);
    struct pf_dl_elf_paths p;
    snprintf(file, sizeof(file), "%s/a.so", root);
    assert_int_equal(paths_of(&p, file, why, sizeof(why)), 0);
    assert_true(p.runpath_set);
    assert_false(p.rpath_set);
    assert_string_equal(p.runpath, "$ORIGIN/../plugins:/opt/x/lib");
    snprintf(file, sizeof(file), "%s/b.so", root);
    assert_int_equal(paths_of(&p, file, why, sizeof(why)), 0);
    assert_true(p.rpath_set);
    assert_false(p.runpath_set);
    assert_string_equal(p.rpath, "/opt/y/lib");
    snprintf(file, sizeof(file), "%s/c.so", root);
    assert_int_equal(paths_of(&p, file, why, sizeof(why)), 0);
    assert_false(p.rpath_set || p.runpath_set);
    /* every cut of a.so: refused with a reason, or read whole */
    size_t len = 0;
    snprintf(file, sizeof(file), "%s/a.so", root);
    unsigned char *b = (unsigned char *)th_slurp(file, &len);
    assert_non_null(b);
    for (size_t cut = 0; cut < len; cut += 3) {
        struct buf_reader r = {b, cut};
        why[0] = '\0';
        if (pf_dl_elf_search_paths(&p, buf_read, &r, why, sizeof(why)) < 0 && !why[0])
            fail_msg("cut %zu: refused without a reason", cut);
    }
    free(b);
    /* a text file */
    snprintf(file, sizeof(file), "%s/t.so", root);
    th_write_file(file, "/* GNU ld script */\nINPUT(-lfoo)\n");
    assert_int_equal(paths_of(&p, file, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "not an ELF file"));
    th_rmtree(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_cache),
        cmocka_unit_test(test_formats),
        cmocka_unit_test(test_elf_paths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
