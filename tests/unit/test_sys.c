/* sys.ports over fixture roots, sys.shm over real tmpfs mounts (root only). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../pkg/checks/checks.h"

struct env {
    struct pf_config config;
    struct pf_verdict verdict;
    struct pf_ctx ctx;
    struct pf_check *check;
};

static void open_env(struct env *e, const char *root, const char *id)
{
    pf_config_defaults(&e->config);
    pf_verdict_init(&e->verdict);
    pf_ctx_init(&e->ctx, &e->config, &e->verdict);
    char abs[1024], cwd[512];
    assert_non_null(getcwd(cwd, sizeof(cwd)));
    if (root[0] == '/')
        snprintf(abs, sizeof(abs), "%s", root);
    else
        snprintf(abs, sizeof(abs), "%s/%s", cwd, root);
    assert_int_equal(pf_host_init(&e->ctx.host, abs), 0);
    e->check = pf_verdict_add_check(&e->verdict, id);
}

static void close_env(struct env *e)
{
    pf_ctx_free(&e->ctx);
    pf_verdict_free(&e->verdict);
    pf_config_free(&e->config);
}

static const struct pf_finding *finding(const struct pf_check *c, const char *code)
{
    for (size_t i = 0; i < c->nfindings; i++)
        if (strcmp(c->findings[i].code, code) == 0) return &c->findings[i];
    return NULL;
}

/* ---- sys.ports */

static void test_ports_default_range_passes(void **state)
{
    (void)state;
    struct env e;
    open_env(&e, "fixtures/nccl-ports-default", "sys.ports");
    pf_check_sys_ports(e.check, &e.ctx);
    assert_int_equal(e.check->nfindings, 0);
    assert_int_equal(pf_node_get(e.check->evidence, "low")->i, 32768);
    assert_int_equal(pf_node_get(e.check->evidence, "high")->i, 60999);
    assert_int_equal(pf_node_get(e.check->evidence, "ports")->i, 28232);
    assert_non_null(strstr(e.check->message, "32768-60999"));
    close_env(&e);
}

static void test_ports_narrow_and_rendezvous_inside(void **state)
{
    (void)state;
    struct env e;
    open_env(&e, "fixtures/nccl-ports-narrow", "sys.ports");
    e.config.rendezvous_port = 40500;
    pf_env_set(&e.ctx.env, "MASTER_PORT", "29500", "environment");
    pf_env_set(&e.ctx.env, "NCCL_COMM_ID", "10.201.0.1:40001", "environment");
    pf_check_sys_ports(e.check, &e.ctx);
    const struct pf_finding *f = finding(e.check, "port-range-narrow");
    assert_non_null(f);
    assert_int_equal(f->status, PF_WARN);
    assert_non_null(strstr(f->message, "1000 ports"));
    size_t inside = 0;
    for (size_t i = 0; i < e.check->nfindings; i++)
        if (strcmp(e.check->findings[i].code, "port-in-ephemeral-range") == 0) {
            inside++;
            assert_null(strstr(e.check->findings[i].message, "MASTER_PORT")); /* 29500 is out */
        }
    assert_int_equal(inside, 2); /* rendezvous 40500 and NCCL_COMM_ID's 40001 */
    close_env(&e);
}

static void test_ports_reserved_port_is_safe(void **state)
{
    (void)state;
    struct env e;
    open_env(&e, "fixtures/nccl-ports-reserved", "sys.ports");
    e.config.rendezvous_port = 29400;                              /* reserved: fine */
    pf_env_set(&e.ctx.env, "MASTER_PORT", "30005", "environment"); /* in 30000-30010 */
    pf_env_set(&e.ctx.env, "NCCL_COMM_ID", "[fd00::1]:31000", "environment");
    pf_check_sys_ports(e.check, &e.ctx);
    assert_int_equal(e.check->nfindings, 1);
    assert_string_equal(e.check->findings[0].code, "port-in-ephemeral-range");
    assert_non_null(strstr(e.check->findings[0].message, "31000"));
    close_env(&e);
}

static void test_ports_garbage_is_a_finding(void **state)
{
    (void)state;
    struct env e;
    open_env(&e, "fixtures/nccl-ports-garbage", "sys.ports");
    pf_check_sys_ports(e.check, &e.ctx);
    const struct pf_finding *f = finding(e.check, "port-range-unreadable");
    assert_non_null(f);
    assert_non_null(strstr(f->message, "hello world"));
    close_env(&e);
}

static void test_ports_missing_file_skips(void **state)
{
    (void)state;
    struct env e;
    open_env(&e, "fixtures", "sys.ports"); /* a root without /proc */
    pf_check_sys_ports(e.check, &e.ctx);
    assert_int_equal(e.check->status, PF_SKIP);
    close_env(&e);
}

static void write_range(const char *root, const char *text)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/proc/sys/net/ipv4/ip_local_port_range", root);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_ports_malformed_table(void **state)
{
    (void)state;
    char root[] = "/tmp/pf-sys-ports.XXXXXX";
    assert_non_null(mkdtemp(root));
    char dir[512];
    snprintf(dir, sizeof(dir), "%s/proc/sys/net/ipv4", root);
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "mkdir -p %s", dir);
    assert_int_equal(system(cmd), 0);
    static const struct {
        const char *text;
        const char *code; /* NULL: no finding */
    } cases[] = {
        {"1024\t65535\n", NULL},
        {"1024 65535\n", NULL},
        {"60999\t32768\n", "port-range-unreadable"}, /* low above high */
        {"32768\n", "port-range-unreadable"},
        {"32768\t60999\t7\n", "port-range-unreadable"},
        {"-5\t10\n", "port-range-unreadable"},
        {"0\t70000\n", "port-range-unreadable"},
        {"\n", "port-range-unreadable"},
        {"\x01\x02\xff\n", "port-range-unreadable"},
        {"50000\t50100\n", "port-range-narrow"},
        {"44616\t60999\n", NULL}, /* exactly 16384 ports */
        {"44617\t60999\n", "port-range-narrow"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        write_range(root, cases[i].text);
        struct env e;
        open_env(&e, root, "sys.ports");
        e.config.rendezvous_port = 1000;
        pf_check_sys_ports(e.check, &e.ctx);
        if (!cases[i].code) {
            assert_int_equal(e.check->nfindings, 0);
        } else {
            assert_int_equal(e.check->nfindings, 1);
            assert_string_equal(e.check->findings[0].code, cases[i].code);
        }
        close_env(&e);
    }
    snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
    assert_int_equal(system(cmd), 0);
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
    char cmd[200];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", r->root);
    if (system(cmd) != 0) fprintf(stderr, "cannot remove %s\n", r->root);
}

static void run_shm(struct env *e, struct shmroot *r)
{
    open_env(e, r->root, "sys.shm");
    pf_checks_inventory(&e->ctx);
    pf_check_sys_shm(e->check, &e->ctx);
}

static void test_shm_64m_with_gpus_fails(void **state)
{
    (void)state;
    if (geteuid() != 0) skip();
    struct shmroot r;
    assert_int_equal(mount_shm(&r, "64m", true), 0);
    struct env e;
    run_shm(&e, &r);
    const struct pf_finding *f = finding(e.check, "shm-small");
    assert_non_null(f);
    assert_int_equal(f->status, PF_FAIL);
    assert_non_null(strstr(f->message, "64 MiB"));
    assert_int_equal(pf_node_get(e.check->evidence, "sizeBytes")->i, 64LL << 20);
    assert_true(pf_node_get(e.check->evidence, "tmpfs")->b);
    close_env(&e);
    unmount_shm(&r);
}

static void test_shm_64m_without_gpus_warns(void **state)
{
    (void)state;
    if (geteuid() != 0) skip();
    struct shmroot r;
    assert_int_equal(mount_shm(&r, "64m", false), 0);
    struct env e;
    run_shm(&e, &r);
    const struct pf_finding *f = finding(e.check, "shm-small");
    assert_non_null(f);
    assert_int_equal(f->status, PF_WARN);
    close_env(&e);
    unmount_shm(&r);
}

static void test_shm_large_passes_and_full_warns(void **state)
{
    (void)state;
    if (geteuid() != 0) skip();
    struct shmroot r;
    assert_int_equal(mount_shm(&r, "2g", true), 0);
    struct env e;
    run_shm(&e, &r);
    assert_int_equal(e.check->nfindings, 0);
    assert_non_null(strstr(e.check->message, "2.0 GiB"));
    close_env(&e);
    unmount_shm(&r);

    /* 1 GiB with 900 MiB used: big enough, but nearly full */
    assert_int_equal(mount_shm(&r, "1g", true), 0);
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "dd if=/dev/zero of=%s/fill bs=1M count=900 status=none", r.shm);
    assert_int_equal(system(cmd), 0);
    run_shm(&e, &r);
    const struct pf_finding *f = finding(e.check, "shm-small");
    assert_non_null(f);
    assert_int_equal(f->status, PF_WARN);
    assert_non_null(strstr(f->message, "free"));
    close_env(&e);
    unmount_shm(&r);
}

static void test_shm_missing(void **state)
{
    (void)state;
    struct env e;
    open_env(&e, "fixtures/nccl-ports-default", "sys.shm"); /* a root without /dev/shm */
    pf_check_sys_shm(e.check, &e.ctx);
    const struct pf_finding *f = finding(e.check, "shm-small");
    assert_non_null(f);
    assert_non_null(strstr(f->message, "missing"));
    assert_int_equal(f->status, PF_WARN); /* no GPUs in that root */
    close_env(&e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ports_default_range_passes),
        cmocka_unit_test(test_ports_narrow_and_rendezvous_inside),
        cmocka_unit_test(test_ports_reserved_port_is_safe),
        cmocka_unit_test(test_ports_garbage_is_a_finding),
        cmocka_unit_test(test_ports_missing_file_skips),
        cmocka_unit_test(test_ports_malformed_table),
        cmocka_unit_test(test_shm_64m_with_gpus_fails),
        cmocka_unit_test(test_shm_64m_without_gpus_warns),
        cmocka_unit_test(test_shm_large_passes_and_full_warns),
        cmocka_unit_test(test_shm_missing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
