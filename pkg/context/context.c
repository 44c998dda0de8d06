/* The context's life cycle and its progress lines. */
#include "context.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void pf_ctx_init(struct pf_ctx *ctx, const struct pf_config *config, struct pf_verdict *v)
{
    memset(ctx, 0, sizeof(*ctx));
    pf_host_init(&ctx->host, "/");
    ctx->config = config;
    ctx->verdict = v;
    ctx->memo = pf_xcalloc(1, sizeof(*ctx->memo));
}

void pf_ctx_free(struct pf_ctx *ctx)
{
    pf_env_free(&ctx->env);
    pf_strlist_free(&ctx->hcas);
    pf_strlist_free(&ctx->gpus);
    if (ctx->memo) pf_strlist_free(&ctx->memo->claims);
    free(ctx->memo);
    ctx->memo = NULL;
}

double pf_ctx_left(const struct pf_ctx *ctx, double margin)
{
    if (ctx->deadline <= 0) return 1e9;
    double left = ctx->deadline - margin - pf_now();
    return left > 0 ? left : 0;
}

void pf_ctx_progress(struct pf_ctx *ctx, const char *fmt, ...)
{
    if (!ctx->progress) return;
    char line[1024];
    PF_FORMAT_ARGS(line, fmt);
    ctx->progress(ctx->progress_arg, line);
}
