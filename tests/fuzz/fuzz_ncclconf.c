/* Fuzz target: NCCL's config file (/etc/nccl.conf under a root prefix: VAR=value lines, '#'
 * comments), applied with NCCL's precedence over a small environment, then the nccl.env check
 * on the result, as `preflight env` runs it. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../pkg/checks/checks.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char root[64];
static char conf[128];

static void cleanup(void)
{
    unlink(conf);
    char d[128];
    snprintf(d, sizeof(d), "%s/etc", root);
    rmdir(d);
    rmdir(root);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    snprintf(root, sizeof(root), "/tmp/pf-fuzz-ncclconf.XXXXXX");
    if (!mkdtemp(root)) abort();
    char d[128];
    snprintf(d, sizeof(d), "%s/etc", root);
    if (mkdir(d, 0755) != 0) abort();
    snprintf(conf, sizeof(conf), "%s/etc/nccl.conf", root);
    atexit(cleanup);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = open(conf, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) abort();
    if (size && write(fd, data, size) != (ssize_t)size) abort();
    close(fd);

    struct pf_config cfg;
    pf_config_defaults(&cfg);
    struct pf_verdict v;
    pf_verdict_init(&v);
    struct pf_ctx ctx;
    pf_ctx_init(&ctx, &cfg, &v);
    if (pf_host_init(&ctx.host, root) < 0) abort();
    ctx.in_env_mode = true;
    pf_env_set(&ctx.env, "HOME", "/nonexistent", "environment");
    pf_env_set(&ctx.env, "NCCL_SHM_DISABLE", "0", "environment");
    pf_env_load_nccl_conf(&ctx.env, &ctx.host);
    if (ctx.env.vars.n != ctx.env.origin.n) abort();
    if (strcmp(pf_env_get(&ctx.env, "NCCL_SHM_DISABLE"), "0") != 0) abort(); /* env wins */
    struct pf_check *c = pf_verdict_add_check(&v, "nccl.env");
    pf_check_nccl_env(c, &ctx);
    pf_verdict_finalize(&v, NULL, NULL);
    char *yaml = NULL;
    size_t len = 0;
    if (pf_verdict_to_yaml(&yaml, &len, &v) == 0) free(yaml);
    pf_ctx_free(&ctx);
    pf_verdict_free(&v);
    pf_config_free(&cfg);
    return 0;
}
