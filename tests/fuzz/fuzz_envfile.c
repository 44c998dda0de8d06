/* Fuzz target: `preflight env --env-file` KEY=VALUE files (comments, export, quotes), then the
 * lookups a check makes on the result. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../pkg/checks/checks.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct pf_env e = {0};
    (void)pf_env_parse_file(&e, "job.env", (const char *)data, size);
    if (e.vars.n != e.origin.n) abort();
    for (size_t i = 0; i < e.vars.n; i++) {
        const char *eq = strchr(e.vars.v[i], '=');
        if (!eq || eq == e.vars.v[i]) abort();
        char name[8192];
        size_t nl = (size_t)(eq - e.vars.v[i]);
        if (nl >= sizeof(name)) abort();
        memcpy(name, e.vars.v[i], nl);
        name[nl] = '\0';
        if (pf_env_get(&e, name) != eq + 1) abort();
        if (!pf_env_origin(&e, name)) abort();
    }
    /* the nccl.env check on what the file set, as `preflight env --env-file` runs it */
    struct pf_config cfg;
    pf_config_defaults(&cfg);
    struct pf_verdict v;
    pf_verdict_init(&v);
    struct pf_ctx ctx;
    pf_ctx_init(&ctx, &cfg, &v);
    ctx.in_env_mode = true;
    ctx.env = e;
    struct pf_check *c = pf_verdict_add_check(&v, "nccl.env");
    pf_check_nccl_env(c, &ctx);
    pf_verdict_finalize(&v, NULL, NULL);
    char *yaml = NULL;
    size_t len = 0;
    if (pf_verdict_to_yaml(&yaml, &len, &v) == 0) free(yaml);
    pf_ctx_free(&ctx); /* frees e */
    pf_verdict_free(&v);
    pf_config_free(&cfg);
    return 0;
}
