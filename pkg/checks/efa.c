/* rdma.efa: an AWS EFA pod. EFA devices (the efa driver's, whatever their name: efa_N from the
 * kernel, rdmapXsY after rdma-core's udev rules; providers.c tells them) report ACTIVE ports
 * even where NCCL cannot use them: NCCL reaches EFA only through the aws-ofi-nccl net plugin
 * (libfabric's efa provider), never through its own IB transport. So: the plugin library
 * where NCCL looks for it (NCCL_NET_PLUGIN, src/plugin/net.cc and plugin_open.cc: a comma
 * list, each name tried as given and as libnccl-net-<name>.so, "none" for no plugin; unset:
 * libnccl-net.so), FI_PROVIDER (aws-ofi-nccl's platform-aws.cpp selects EFA only when it is
 * unset or exactly "efa"), and NCCL_NET against the names the plugin answers to. */
#define _GNU_SOURCE
#include "checks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The folders the dynamic loader searches without LD_LIBRARY_PATH (glibc's trusted folders on
 * the usual targets), before /etc/ld.so.conf's. */
static const char *const system_dirs[] = {
    "/lib/x86_64-linux-gnu",
    "/usr/lib/x86_64-linux-gnu",
    "/lib/aarch64-linux-gnu",
    "/usr/lib/aarch64-linux-gnu",
    "/lib64",
    "/usr/lib64",
    "/lib",
    "/usr/lib",
};
/* Where the EFA installer and AWS images put the plugin: not searched by the loader. */
static const char *const ofi_dirs[] = {
    "/opt/amazon/ofi-nccl/lib",
    "/opt/amazon/ofi-nccl/lib64",
    "/opt/amazon/aws-ofi-nccl/lib",
    "/opt/aws-ofi-nccl/lib",
};

static void add_dir(struct pf_strlist *dirs, const char *d)
{
    if (d[0] == '/' && !pf_strlist_has(dirs, d)) pf_strlist_add(dirs, d);
}

/* LD_LIBRARY_PATH, the system folders, then the folders named in /etc/ld.so.conf.d (its
 * .conf files). */
static void search_dirs(struct pf_strlist *dirs, const struct pf_ctx *ctx)
{
    const char *llp = pf_env_get(&ctx->env, "LD_LIBRARY_PATH");
    if (llp) {
        char *copy = pf_xstrdup(llp);
        for (char *save = NULL, *t = strtok_r(copy, ":;", &save); t;
             t = strtok_r(NULL, ":;", &save))
            add_dir(dirs, t);
        free(copy);
    }
    for (size_t i = 0; i < PF_ARRAY_LEN(system_dirs); i++)
        add_dir(dirs, system_dirs[i]);
    struct pf_strlist confs = {0};
    (void)pf_host_list(&confs, &ctx->host, "/etc/ld.so.conf.d");
    for (size_t i = 0; i < confs.n; i++) {
        char *text = NULL;
        size_t len = strlen(confs.v[i]);
        if (len < 5 || strcmp(confs.v[i] + len - 5, ".conf") != 0 ||
            pf_host_read_all(&text, NULL, 1 << 16, &ctx->host, "/etc/ld.so.conf.d/%s", confs.v[i]) <
                0)
            continue;
        for (char *save = NULL, *l = strtok_r(text, "\n", &save); l;
             l = strtok_r(NULL, "\n", &save))
            add_dir(dirs, pf_trim(l));
        free(text);
    }
    pf_strlist_free(&confs);
    pf_err_clear();
}

/* The library file names NCCL tries for one NCCL_NET_PLUGIN entry (or the default). */
static void candidates(struct pf_strlist *out, const char *name)
{
    if (!name || !*name) {
        pf_strlist_add(out, "libnccl-net.so");
        return;
    }
    pf_strlist_add(out, name);
    size_t n = strlen(name);
    bool lib_so = strncmp(name, "lib", 3) == 0 && n >= 3 && strcmp(name + n - 3, ".so") == 0;
    if (!strchr(name, '/') && !lib_so) pf_strlist_addf(out, "libnccl-net-%s.so", name);
}

/* Looks the plugin up as the loader would; the path found into out (""), and into near a
 * copy in a folder the loader does not search. */
static bool find_plugin(char *out, size_t n, char *near, size_t nn, const struct pf_ctx *ctx,
                        const struct pf_strlist *dirs, const char *setting)
{
    struct pf_strlist names = {0};
    if (!setting)
        candidates(&names, NULL);
    else {
        char *copy = pf_xstrdup(setting);
        for (char *save = NULL, *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save))
            candidates(&names, t);
        free(copy);
    }
    bool found = false;
    out[0] = near[0] = '\0';
    for (size_t i = 0; i < names.n && !found; i++) {
        const char *f = names.v[i];
        if (strchr(f, '/')) {
            if (f[0] == '/' && pf_host_exists(&ctx->host, "%s", f)) {
                snprintf(out, n, "%s", f);
                found = true;
            }
            continue;
        }
        for (size_t d = 0; d < dirs->n && !found; d++)
            if (pf_host_exists(&ctx->host, "%s/%s", dirs->v[d], f)) {
                snprintf(out, n, "%s/%s", dirs->v[d], f);
                found = true;
            }
        for (size_t d = 0; d < PF_ARRAY_LEN(ofi_dirs) && !found && !near[0]; d++)
            if (pf_host_exists(&ctx->host, "%s/%s", ofi_dirs[d], f))
                snprintf(near, nn, "%s/%s", ofi_dirs[d], f);
    }
    pf_strlist_free(&names);
    pf_err_clear();
    return found;
}

static bool ofi_net_name(const char *net)
{
    return strcasecmp(net, "OFI") == 0 || strcasecmp(net, "Libfabric") == 0 ||
           strcasecmp(net, "AWS Libfabric") == 0;
}

void pf_check_rdma_efa(struct pf_check *out, struct pf_ctx *ctx)
{
    const struct pf_config *cfg = ctx->config;
    const bool want_ofi = cfg && strcasecmp(cfg->expect_transport, "OFI") == 0;
    struct pf_node *ev = out->evidence;
    struct pf_node *devs = pf_node_set_seq(ev, "efaDevices");
    size_t nefa = 0;
    for (size_t i = 0; i < ctx->hcas.n; i++) {
        struct pf_rdma_ident id;
        pf_rdma_identify(&id, &ctx->host, ctx->hcas.v[i]);
        if (strcmp(id.provider->name, "efa") != 0) continue;
        pf_node_add_str(devs, ctx->hcas.v[i]);
        nefa++;
    }
    if (nefa == 0 && !want_ofi) {
        pf_check_skip(out, "no EFA devices (no device of the efa driver in /sys/class/infiniband)");
        return;
    }
    if (nefa == 0) {
        pf_check_add_finding(out, "efa-plugin-missing", PF_FAIL, NULL,
                             "expect.transport is OFI but the pod has no EFA device (none of the "
                             "efa driver in /sys/class/infiniband): did the pod request "
                             "vpc.amazonaws.com/efa?");
        return;
    }
    /* without an expectation, a missing plugin is a fallback to sockets, not a broken pod */
    const enum pf_status sev = want_ofi || ctx->gpus.n > 0 ? PF_FAIL : PF_WARN;
    const char *setting = pf_env_get(&ctx->env, "NCCL_NET_PLUGIN");
    const char *net = pf_env_get(&ctx->env, "NCCL_NET");
    const char *prov = pf_env_get(&ctx->env, "FI_PROVIDER");
    const char *rdma = pf_env_get(&ctx->env, "FI_EFA_USE_DEVICE_RDMA");
    if (setting) pf_node_set_str(ev, "ncclNetPlugin", setting);
    if (prov) pf_node_set_str(ev, "fiProvider", prov);
    if (rdma) pf_node_set_str(ev, "fiEfaUseDeviceRdma", rdma);

    char path[1200] = "", near[600] = "";
    bool none = setting && strcasecmp(setting, "none") == 0;
    struct pf_strlist dirs = {0};
    search_dirs(&dirs, ctx);
    bool found = !none && find_plugin(path, sizeof(path), near, sizeof(near), ctx, &dirs,
                                      setting && *setting ? setting : NULL);
    if (found) pf_node_set_str(ev, "plugin", path);
    if (none)
        pf_check_add_finding(out, "efa-plugin-missing", sev, NULL,
                             "NCCL_NET_PLUGIN=%s turns off net plugins: NCCL cannot use the %zu "
                             "EFA device%s and falls back to TCP sockets",
                             setting, nefa, nefa == 1 ? "" : "s");
    else if (!found) {
        char where[400];
        pf_strlist_join(where, sizeof(where), &dirs, ":");
        char hint[800] = "";
        if (near[0])
            snprintf(hint, sizeof(hint),
                     "; %s exists but the loader does not search its folder "
                     "(add it to LD_LIBRARY_PATH)",
                     near);
        pf_check_add_finding(out, "efa-plugin-missing", sev, NULL,
                             "the aws-ofi-nccl plugin (%s) is not where NCCL looks for it (%s)%s: "
                             "NCCL cannot use the %zu EFA device%s and falls back to TCP sockets",
                             setting && *setting ? setting : "libnccl-net.so", where, hint, nefa,
                             nefa == 1 ? "" : "s");
    }
    pf_strlist_free(&dirs);

    if (prov && strcmp(prov, "efa") != 0)
        pf_check_add_finding(out, "fi-provider-not-efa", sev, NULL,
                             "FI_PROVIDER=%s: aws-ofi-nccl uses the EFA provider only when "
                             "FI_PROVIDER is unset or exactly \"efa\"; with %s libfabric does not "
                             "drive the %zu EFA device%s",
                             prov, prov, nefa, nefa == 1 ? "" : "s");
    if (net && *net && !ofi_net_name(net))
        pf_check_add_finding(out, "efa-net-mismatch", PF_FAIL, NULL,
                             "NCCL_NET=%s, but EFA is reached only through the aws-ofi-nccl "
                             "plugin (NCCL_NET=OFI, Libfabric or \"AWS Libfabric\"): NCCL %s",
                             net,
                             strcasecmp(net, "Socket") == 0
                                 ? "uses TCP sockets"
                                 : "skips EFA ports in its IB transport (their link layer is "
                                   "Unknown, not InfiniBand or Ethernet) and fails at init");
    if (out->nfindings == 0)
        pf_check_set_message(out, "%zu EFA device%s; plugin %s; FI_PROVIDER %s", nefa,
                             nefa == 1 ? "" : "s", path, prov ? prov : "unset (efa)");
}
