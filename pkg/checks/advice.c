/* Advice that is not a finding: NCCL_NET left unset where the pod means to use RDMA. NCCL
 * compares NCCL_NET with each net plugin's name (strcasecmp, src/plugin/net.cc ncclNetInit)
 * and, when none of the named plugins initializes, fails the communicator ("Failed to
 * initialize any NET plugin"); unset, it takes the first plugin that works, down to TCP
 * sockets, without a word above INFO. */
#define _GNU_SOURCE
#include "checks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The NCCL_NET the pod's devices call for, by their providers (providers.c): "OFI" when every
 * one is reached through a net plugin (EFA), "IB" when one is NCCL's IB transport's, NULL when
 * none of NCCL's nets uses them (iWARP, MANA). */
static const char *devices_net(const struct pf_ctx *ctx)
{
    size_t ofi = 0, ib = 0;
    for (size_t i = 0; i < ctx->hcas.n; i++) {
        struct pf_rdma_ident id;
        pf_rdma_identify(&id, &ctx->host, ctx->hcas.v[i]);
        const char *net = pf_rdma_nccl_net(&id);
        ofi += net && strcmp(net, "OFI") == 0;
        ib += net && strcmp(net, "IB") == 0;
    }
    if (ofi && ofi == ctx->hcas.n) return "OFI";
    return ib ? "IB" : NULL;
}

static size_t uverbs_nodes(const struct pf_ctx *ctx)
{
    struct pf_strlist l = {0};
    (void)pf_host_list(&l, &ctx->host, "/dev/infiniband");
    pf_err_clear();
    size_t n = 0;
    for (size_t i = 0; i < l.n; i++)
        n += pf_str_starts(l.v[i], "uverbs");
    pf_strlist_free(&l);
    return n;
}

const char *pf_checks_net_advice(char *why, size_t n, const struct pf_ctx *ctx)
{
    const struct pf_config *cfg = ctx->config;
    const char *net = pf_env_get(&ctx->env, "NCCL_NET");
    if ((net && *net) || (cfg && cfg->expect_rdma == PF_RDMA_NONE)) return NULL;
    const char *transport = cfg ? cfg->expect_transport : "";
    const char *hca = pf_env_get(&ctx->env, "NCCL_IB_HCA");
    const char *devnet = ctx->in_env_mode || ctx->hcas.n == 0 ? "IB" : devices_net(ctx);
    bool ofi = strcasecmp(transport, "OFI") == 0 ||
               (strcasecmp(transport, "IB") != 0 && devnet && strcmp(devnet, "OFI") == 0);
    if (strcasecmp(transport, "IB") == 0 || strcasecmp(transport, "OFI") == 0)
        snprintf(why, n, "expect.transport is %s", transport);
    else if (cfg && cfg->expect_rdma == PF_RDMA_REQUIRED)
        snprintf(why, n, "expect.rdma is required");
    else if (hca && *hca)
        snprintf(why, n, "NCCL_IB_HCA is set");
    else if (!ctx->in_env_mode && ctx->hcas.n > 0 && devnet && uverbs_nodes(ctx) > 0)
        snprintf(why, n, "the pod has RDMA devices with uverbs nodes");
    else
        return NULL;
    return ofi ? "OFI" : "IB";
}

/* The sentence a remedy gains, for net name name. */
static void sentence(char *out, size_t n, const char *name)
{
    if (strcmp(name, "OFI") == 0)
        snprintf(out, n,
                 "set NCCL_NET=OFI in the pod spec's env (aws-ofi-nccl 1.13 and later answer to "
                 "OFI, every release to \"AWS Libfabric\"): NCCL then fails at init when the EFA "
                 "plugin cannot run, instead of falling back to TCP sockets");
    else
        snprintf(out, n,
                 "set NCCL_NET=IB in the pod spec's env: NCCL then fails at init (\"Failed to "
                 "initialize any NET plugin\") when it cannot use the HCAs, instead of falling "
                 "back to TCP sockets");
}

void pf_checks_net_remedies(struct pf_check *c, const struct pf_ctx *ctx, size_t from,
                            const char *const *codes)
{
    char why[160];
    const char *name = pf_checks_net_advice(why, sizeof(why), ctx);
    if (!name) return;
    char add[400];
    sentence(add, sizeof(add), name);
    for (size_t i = from; i < c->nfindings; i++) {
        struct pf_finding *f = &c->findings[i];
        if (f->status < PF_WARN || !f->remedy) continue;
        bool listed = false;
        for (size_t k = 0; codes[k] && !listed; k++)
            listed = strcmp(codes[k], f->code) == 0;
        if (!listed || strstr(f->remedy, "NCCL_NET=")) continue;
        char *r = pf_xasprintf("%s; and %s", f->remedy, add);
        free(f->remedy);
        f->remedy = r;
    }
}

void pf_checks_record_advice(struct pf_check *c, const struct pf_ctx *ctx)
{
    char why[160];
    const char *name = pf_checks_net_advice(why, sizeof(why), ctx);
    if (!name) return;
    char add[400];
    sentence(add, sizeof(add), name);
    struct pf_node *seq = pf_node_get(c->evidence, "advice");
    if (!seq) seq = pf_node_set_seq(c->evidence, "advice");
    pf_node_add_strf(seq, "NCCL_NET is not set although %s: %s", why, add);
}

void pf_checks_advice(struct pf_strlist *out, const struct pf_verdict *v)
{
    for (size_t i = 0; i < v->nchecks; i++) {
        const struct pf_node *seq = pf_node_get(v->checks[i].evidence, "advice");
        if (!seq || seq->kind != PF_NODE_SEQ) continue;
        for (const struct pf_node *a = seq->first; a; a = a->next)
            if (a->kind == PF_NODE_STR) pf_strlist_addf(out, "%s: %s", v->checks[i].id, a->str);
    }
}
