/* sys.ports over fixture roots, sys.shm over real tmpfs mounts (root only). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../../pkg/checks/checks.h"
#include "../helpers/helpers.h"

/* A context rooted at root (relative to tests/, or absolute) with check id added. */
static void open_env(struct th_env *e, const char *root, const char *id)
{
    th_env_open(e, root, TH_IN_PLACE);
    th_env_start(e);
    e->c = pf_verdict_add_check(&e->v, id);
}

/* ---- sys.ports */

static void test_ports_default_range_passes(void **state)
{
    (void)state;
    struct th_env e;
    open_env(&e, "fixtures/nccl-ports-default", "sys.ports");
    pf_check_sys_ports(e.c, &e.ctx);
    assert_int_equal(e.c->nfindings, 0);
    assert_int_equal(pf_node_get(e.c->evidence, "low")->i, 32768);
    assert_int_equal(pf_node_get(e.c->evidence, "high")->i, 60999);
    assert_int_equal(pf_node_get(e.c->evidence, "ports")->i, 28232);
    assert_non_null(strstr(e.c->message, "32768-60999"));
    th_env_close(&e);
}

static void test_ports_narrow_and_rendezvous_inside(void **state)
{
    (void)state;
    struct th_env e;
    open_env(&e, "fixtures/nccl-ports-narrow", "sys.ports");
    e.cfg.rendezvous_port = 40500;
    pf_env_set(&e.ctx.env, "MASTER_PORT", "29500", "environment");
    pf_env_set(&e.ctx.env, "NCCL_COMM_ID", "10.201.0.1:40001", "environment");
    pf_check_sys_ports(e.c, &e.ctx);
    const struct pf_finding *f = th_finding(e.c, "port-range-narrow", NULL);
    assert_non_null(f);
    assert_int_equal(f->status, PF_WARN);
    assert_non_null(strstr(f->message, "1000 ports"));
    size_t inside = 0;
    for (size_t i = 0; i < e.c->nfindings; i++)
        if (strcmp(e.c->findings[i].code, "port-in-ephemeral-range") == 0) {
            inside++;
            assert_null(strstr(e.c->findings[i].message, "MASTER_PORT")); /* 29500 is out */
        }
    assert_int_equal(inside, 2); /* rendezvous 40500 and NCCL_COMM_ID's 40001 */
    th_env_close(&e);
}

static void test_ports_reserved_port_is_safe(void **state)
{
    (void)state;
    struct th_env e;
    open_env(&e, "fixtures/nccl-ports-reserved", "sys.ports");
    e.cfg.rendezvous_port = 29400;                                 /* reserved: fine */
    pf_env_set(&e.ctx.env, "MASTER_PORT", "30005", "environment"); /* in 30000-30010 */
    pf_env_set(&e.ctx.env, "NCCL_COMM_ID", "[fd00::1]:31000", "environment");
    pf_check_sys_ports(e.c, &e.ctx);
    assert_int_equal(e.c->nfindings, 1);
    assert_string_equal(e.c->findings[0].code, "port-in-ephemeral-range");
    assert_non_null(strstr(e.c->findings[0].message, "31000"));
    th_env_close(&e);
}

/* Whether the check's evidence.unknown has an entry for code whose text holds needle. */
static bool has_unknown(const struct pf_check *c, const char *code, const char *needle)
{
    const struct pf_node *u = pf_node_get(c->evidence, "unknown");
    for (const struct pf_node *n = u ? u->first : NULL; n; n = n->next)
        if (strcmp(pf_node_get_str(n, "code"), code) == 0 &&
            strstr(pf_node_get_str(n, "missing"), needle))
            return true;
    return false;
}

/* A range not in the kernel's form says nothing: unknown, no finding */
static void test_ports_garbage_is_unknown(void **state)
{
    (void)state;
    struct th_env e;
    open_env(&e, "fixtures/nccl-ports-garbage", "sys.ports");
    pf_check_sys_ports(e.c, &e.ctx);
    assert_int_equal(e.c->nfindings, 0);
    assert_true(has_unknown(e.c, "port-range-narrow", "hello world"));
    assert_true(has_unknown(e.c, "port-in-ephemeral-range", "hello world"));
    th_env_close(&e);
}

static void test_ports_missing_file_skips(void **state)
{
    (void)state;
    struct th_env e;
    open_env(&e, "fixtures", "sys.ports"); /* a root without /proc */
    pf_check_sys_ports(e.c, &e.ctx);
    assert_int_equal(e.c->status, PF_SKIP);
    th_env_close(&e);
}

static void write_range(const char *root, const char *text)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/proc/sys/net/ipv4/ip_local_port_range", root);
    th_write_file(path, text);
}

static void test_ports_malformed_table(void **state)
{
    (void)state;
    char root[64];
    th_tmpdir(root, sizeof(root), "sys-ports");
    th_sh("mkdir -p %s/proc/sys/net/ipv4", root);
    static const struct {
        const char *text;
        const char *code; /* NULL: no finding; "?": unknown, no finding */
    } cases[] = {
        {"1024\t65535\n", NULL},
        {"1024 65535\n", NULL},
        {"60999\t32768\n", "?"}, /* low above high */
        {"32768\n", "?"},
        {"32768\t60999\t7\n", "?"},
        {"-5\t10\n", "?"},
        {"0\t70000\n", "?"},
        {"\n", "?"},
        {"\x01\x02\xff\n", "?"},
        {"50000\t50100\n", "port-range-narrow"},
        {"44616\t60999\n", NULL}, /* exactly 16384 ports */
        {"44617\t60999\n", "port-range-narrow"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        write_range(root, cases[i].text);
        struct th_env e;
        open_env(&e, root, "sys.ports");
        e.cfg.rendezvous_port = 1000;
        pf_check_sys_ports(e.c, &e.ctx);
        if (!cases[i].code) {
            assert_int_equal(e.c->nfindings, 0);
        } else if (strcmp(cases[i].code, "?") == 0) {
            assert_int_equal(e.c->nfindings, 0);
            assert_true(has_unknown(e.c, "port-range-narrow", "expected two port numbers"));
        } else {
            assert_int_equal(e.c->nfindings, 1);
            assert_string_equal(e.c->findings[0].code, cases[i].code);
        }
        th_env_close(&e);
    }
    assert_true(th_rmtree(root));
}

/* ---- sys.shm */

struct shmroot {
    char root[64];
    char shm[128];
};

static int mount_shm(struct shmroot *r, const char *size, bool gpu)
{
    snprintf(r->root, sizeof(r->root), "/tmp/pf-sys-shm.XXXXXX");
    if (!mkdtemp(r->root)) return -1;
    snprintf(r->shm, sizeof(r->shm), "%s/dev/shm", r->root);
    char cmd[400];
    snprintf(cmd, sizeof(cmd), "mkdir -p %s", r->shm);
    if (system(cmd) != 0) return -1;
    if (gpu) {
        snprintf(cmd, sizeof(cmd), "mkdir -p %s/proc/driver/nvidia/gpus/0000:18:00.0", r->root);
        if (system(cmd) != 0) return -1;
    }
    char opts[64];
    snprintf(opts, sizeof(opts), "size=%s", size);
    return mount("tmpfs", r->shm, "tmpfs", 0, opts);
}

static void unmount_shm(struct shmroot *r)
{
    umount2(r->shm, MNT_DETACH);
    if (!th_rmtree(r->root)) fprintf(stderr, "cannot remove %s\n", r->root);
}

static void run_shm(struct th_env *e, struct shmroot *r)
{
    open_env(e, r->root, "sys.shm");
    pf_checks_inventory(&e->ctx);
    pf_check_sys_shm(e->c, &e->ctx);
}

static void test_shm_64m_with_gpus_fails(void **state)
{
    (void)state;
    if (geteuid() != 0) skip();
    struct shmroot r;
    assert_int_equal(mount_shm(&r, "64m", true), 0);
    struct th_env e;
    run_shm(&e, &r);
    const struct pf_finding *f = th_finding(e.c, "shm-small", NULL);
    assert_non_null(f);
    assert_int_equal(f->status, PF_FAIL);
    assert_non_null(strstr(f->message, "64 MiB"));
    assert_int_equal(pf_node_get(e.c->evidence, "sizeBytes")->i, 64LL << 20);
    assert_true(pf_node_get(e.c->evidence, "tmpfs")->b);
    th_env_close(&e);
    unmount_shm(&r);
}

static void test_shm_64m_without_gpus_warns(void **state)
{
    (void)state;
    if (geteuid() != 0) skip();
    struct shmroot r;
    assert_int_equal(mount_shm(&r, "64m", false), 0);
    struct th_env e;
    run_shm(&e, &r);
    const struct pf_finding *f = th_finding(e.c, "shm-small", NULL);
    assert_non_null(f);
    assert_int_equal(f->status, PF_WARN);
    th_env_close(&e);
    unmount_shm(&r);
}

static void test_shm_large_passes_and_full_warns(void **state)
{
    (void)state;
    if (geteuid() != 0) skip();
    struct shmroot r;
    assert_int_equal(mount_shm(&r, "2g", true), 0);
    struct th_env e;
    run_shm(&e, &r);
    assert_int_equal(e.c->nfindings, 0);
    assert_non_null(strstr(e.c->message, "2.0 GiB"));
    th_env_close(&e);
    unmount_shm(&r);

    /* 1 GiB with 900 MiB used: big enough, but nearly full */
    assert_int_equal(mount_shm(&r, "1g", true), 0);
    th_sh("dd if=/dev/zero of=%s/fill bs=1M count=900 status=none", r.shm);
    run_shm(&e, &r);
    const struct pf_finding *f = th_finding(e.c, "shm-small", NULL);
    assert_non_null(f);
    assert_int_equal(f->status, PF_WARN);
    assert_non_null(strstr(f->message, "free"));
    th_env_close(&e);
    unmount_shm(&r);
}

static void test_shm_missing(void **state)
{
    (void)state;
    struct th_env e;
    /* a root without /dev/shm: a copy of the tree without it says nothing (unknown); the
     * real /dev/shm missing is a finding, which a test cannot stage without a mount namespace */
    open_env(&e, "fixtures/nccl-ports-default", "sys.shm");
    pf_check_sys_shm(e.c, &e.ctx);
    assert_int_equal(e.c->nfindings, 0);
    assert_int_equal(e.c->status, PF_SKIP);
    assert_true(has_unknown(e.c, "shm-small", "is not in the tree under the root prefix"));
    th_env_close(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ports_default_range_passes),
        cmocka_unit_test(test_ports_narrow_and_rendezvous_inside),
        cmocka_unit_test(test_ports_reserved_port_is_safe),
        cmocka_unit_test(test_ports_garbage_is_unknown),
        cmocka_unit_test(test_ports_missing_file_skips),
        cmocka_unit_test(test_ports_malformed_table),
        cmocka_unit_test(test_shm_64m_with_gpus_fails),
        cmocka_unit_test(test_shm_64m_without_gpus_warns),
        cmocka_unit_test(test_shm_large_passes_and_full_warns),
        cmocka_unit_test(test_shm_missing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
