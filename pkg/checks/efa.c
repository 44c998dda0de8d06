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

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../dl/dl.h"

/* The loader's default folders (glibc's system search path on the usual targets: Debian's
 * multiarch folders, then lib64 and lib), searched last. */
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
/* Where aws-ofi-nccl's packages put the plugin (contrib/fedora/aws-ofi-nccl.spec at v1.13.0:
 * prefix /opt/amazon/ofi-nccl, its lib folder named in /etc/ld.so.conf.d/100_ofinccl.conf and
 * ldconfig run after install; older images /opt/amazon/aws-ofi-nccl and /opt/aws-ofi-nccl):
 * the loader does not search them by themselves, so finding the plugin there is a hint. */
static const char *const ofi_dirs[] = {
    "/opt/amazon/ofi-nccl/lib",
    "/opt/amazon/ofi-nccl/lib64",
    "/opt/amazon/aws-ofi-nccl/lib",
    "/opt/aws-ofi-nccl/lib",
};

/* What the search knows: the libnccl.so.2 that dlopens the plugin (its DT_RPATH and
 * DT_RUNPATH), the pod's LD_LIBRARY_PATH, /etc/ld.so.cache, and what it could not read. */
struct search {
    const struct pf_ctx *ctx;
    char nccl[PF_DL_PATH_MAX]; /* "" when not resolved */
    struct pf_dl_elf_paths np;
    struct pf_strlist rpath, llp, runpath; /* folders, $ORIGIN expanded */
    unsigned char *cache;
    size_t cache_len, cache_entries;
    int cache_state;         /* 1 read, 0 absent, -1 unreadable */
    struct pf_strlist hints; /* folders not searched: ld.so.conf.d's, the packages' */
    struct pf_strlist missing;
    struct pf_strlist searched; /* in order, for the message */
};

static void add_dir(struct pf_strlist *dirs, const char *d)
{
    if (d[0] == '/' && !pf_strlist_has(dirs, d)) pf_strlist_add(dirs, d);
}

/* A search path as the loader splits it (':' and, for LD_LIBRARY_PATH, ';'); $ORIGIN and
 * ${ORIGIN} become origin; an empty or relative entry (the trainer's working folder) and
 * $LIB or $PLATFORM are not known here: noted in s->missing. */
static void split_path(struct search *s, struct pf_strlist *out, const char *list,
                       const char *origin, const char *what)
{
    char *copy = pf_xstrdup(list);
    char *p = copy;
    for (;;) {
        char *end = p + strcspn(p, ":;");
        char sep = *end;
        *end = '\0';
        char dir[PF_DL_PATH_MAX];
        const char *o = strstr(p, "$ORIGIN")     ? "$ORIGIN"
                        : strstr(p, "${ORIGIN}") ? "${ORIGIN}"
                                                 : NULL;
        if (o && origin) {
            const char *at = strstr(p, o);
            snprintf(dir, sizeof(dir), "%.*s%s%s", (int)(at - p), p, origin, at + strlen(o));
        } else
            snprintf(dir, sizeof(dir), "%s", p);
        if (dir[0] == '/' && !strchr(dir, '$'))
            add_dir(out, dir);
        else
            pf_strlist_addf(&s->missing, "the folder \"%s\" of %s (%s)", dir, what,
                            dir[0] == '\0' || (dir[0] != '/' && !strchr(dir, '$'))
                                ? "the trainer's working folder"
                                : "a loader token preflight does not expand");
        if (!sep) break;
        p = end + 1;
    }
    free(copy);
}

struct fd_reader {
    int fd;
};
static long read_at(void *arg, void *buf, size_t len, uint64_t off)
{
    const struct fd_reader *r = arg;
    size_t done = 0;
    while (done < len) {
        ssize_t got = pread(r->fd, (char *)buf + done, len - done, (off_t)(off + done));
        if (got < 0) return -1;
        if (got == 0) break;
        done += (size_t)got;
    }
    return (long)done;
}

/* The pod's file at path exists (under the root prefix) and is not a folder. */
static bool is_file(const struct pf_ctx *ctx, const char *path)
{
    struct stat st;
    return pf_host_stat(&st, &ctx->host, "%s", path) == 0 && !S_ISDIR(st.st_mode);
}

/* Looks f up in the cache: 1 (path), 0, or -1 when the cache is not there to read. */
static int cache_find(struct search *s, const char *f, char *path, size_t n)
{
    if (s->cache_state != 1) return -1;
    char why[200];
    return pf_dl_ldcache_find(s->cache, s->cache_len, f, path, n, NULL, why, sizeof(why)) == 1;
}

/* libnccl.so.2 as the loader finds it from the pod's LD_LIBRARY_PATH, the cache and the
 * default folders (under a root prefix), or the one preflight loaded (without one). */
static void resolve_nccl(struct search *s)
{
    const struct pf_ctx *ctx = s->ctx;
#ifndef PF_STATIC
    if (!ctx->host.root[0]) {
        const struct pf_dl_nccl *n = NULL;
        if (pf_dl_nccl(&n) == 0 && n->path[0])
            snprintf(s->nccl, sizeof(s->nccl), "%s", n->path);
        else
            pf_strlist_addf(&s->missing, "libnccl.so.2 (it does not load: %s)", pf_err_msg());
        pf_err_clear();
        return;
    }
#endif
    char p[PF_DL_PATH_MAX];
    for (size_t i = 0; i < s->llp.n && !s->nccl[0]; i++)
        if (snprintf(p, sizeof(p), "%s/libnccl.so.2", s->llp.v[i]) < (int)sizeof(p) &&
            is_file(ctx, p))
            snprintf(s->nccl, sizeof(s->nccl), "%s", p);
    if (!s->nccl[0] && cache_find(s, "libnccl.so.2", p, sizeof(p)) == 1 && is_file(ctx, p))
        snprintf(s->nccl, sizeof(s->nccl), "%s", p);
    for (size_t i = 0; i < PF_ARRAY_LEN(system_dirs) && !s->nccl[0]; i++)
        if (snprintf(p, sizeof(p), "%s/libnccl.so.2", system_dirs[i]) < (int)sizeof(p) &&
            is_file(ctx, p))
            snprintf(s->nccl, sizeof(s->nccl), "%s", p);
    if (!s->nccl[0])
        pf_strlist_addf(&s->missing,
                        "libnccl.so.2 (in none of LD_LIBRARY_PATH, ld.so.cache and the system "
                        "folders of %s: its DT_RUNPATH names folders NCCL's dlopen searches)",
                        ctx->host.root[0] ? ctx->host.root : "/");
}

static void read_nccl_paths(struct search *s)
{
    if (!s->nccl[0]) return;
    char real[PF_HOST_PATH_MAX + PF_DL_PATH_MAX], why[200] = "";
    int rc = -1;
    if (pf_host_path(real, sizeof(real), &s->ctx->host, "%s", s->nccl) == 0) {
        struct fd_reader r = {open(real, O_RDONLY | O_CLOEXEC)};
        if (r.fd >= 0) {
            rc = pf_dl_elf_search_paths(&s->np, read_at, &r, why, sizeof(why));
            close(r.fd);
        } else
            snprintf(why, sizeof(why), "%s", strerror(errno));
    }
    pf_err_clear();
    if (rc < 0) {
        pf_strlist_addf(&s->missing, "the DT_RUNPATH of %s (%s)", s->nccl, why);
        return;
    }
    char origin[PF_DL_PATH_MAX];
    snprintf(origin, sizeof(origin), "%s", s->nccl);
    char *slash = strrchr(origin, '/');
    if (slash) *slash = '\0';
    char what[PF_DL_PATH_MAX + 32];
    /* DT_RPATH counts only when there is no DT_RUNPATH (glibc elf/dl-load.c, _dl_map_object) */
    if (s->np.rpath_set && !s->np.runpath_set) {
        snprintf(what, sizeof(what), "the DT_RPATH of %s", s->nccl);
        split_path(s, &s->rpath, s->np.rpath, origin, what);
    }
    if (s->np.runpath_set) {
        snprintf(what, sizeof(what), "the DT_RUNPATH of %s", s->nccl);
        split_path(s, &s->runpath, s->np.runpath, origin, what);
    }
}

static void search_open(struct search *s, const struct pf_ctx *ctx)
{
    memset(s, 0, sizeof(*s));
    s->ctx = ctx;
    const char *llp = pf_env_get(&ctx->env, "LD_LIBRARY_PATH");
    if (llp && *llp) split_path(s, &s->llp, llp, NULL, "LD_LIBRARY_PATH");
    char *cache = NULL;
    int rc = pf_host_read_all(&cache, &s->cache_len, 64u << 20, &ctx->host, "/etc/ld.so.cache");
    if (rc == PF_ENOENT)
        s->cache_state = 0;
    else if (rc < 0)
        pf_strlist_addf(&s->missing, "/etc/ld.so.cache (%s)", pf_err_msg());
    else {
        char why[200];
        s->cache = (unsigned char *)cache;
        cache = NULL;
        if (pf_dl_ldcache_find(s->cache, s->cache_len, "", NULL, 0, &s->cache_entries, why,
                               sizeof(why)) < 0) {
            s->cache_state = -1;
            pf_strlist_addf(&s->missing, "/etc/ld.so.cache (%s)", why);
        } else
            s->cache_state = 1;
    }
    free(cache);
    pf_err_clear();
    resolve_nccl(s);
    read_nccl_paths(s);
    /* the folders /etc/ld.so.conf.d names: the loader reads only what ldconfig cached */
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
            add_dir(&s->hints, pf_trim(l));
        free(text);
    }
    pf_strlist_free(&confs);
    for (size_t i = 0; i < PF_ARRAY_LEN(ofi_dirs); i++)
        add_dir(&s->hints, ofi_dirs[i]);
    pf_err_clear();
}

static void search_close(struct search *s)
{
    pf_strlist_free(&s->rpath);
    pf_strlist_free(&s->llp);
    pf_strlist_free(&s->runpath);
    pf_strlist_free(&s->hints);
    pf_strlist_free(&s->missing);
    pf_strlist_free(&s->searched);
    free(s->cache);
}

/* The library file names NCCL tries for one NCCL_NET_PLUGIN entry (or the default):
 * openPluginLib in src/plugin/plugin_open.cc (v2.28.9-1): the name as given, then
 * libnccl-net-<name>.so unless the name has a '/' or is already "lib...so". NCCL 2.23 to 2.26
 * (openNetPluginLib, src/net.cc at v2.23.4-1) tried both for every name, and took the whole
 * value as one name; NCCL 2.27 made it a comma list. */
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

/* Whether NCCL takes the entry for its own executable: tryOpenLib (plugin_open.cc, NCCL 2.24
 * on) dlopens NULL when the name is a prefix of "STATIC_PLUGIN", case ignored. */
static bool static_plugin(const char *name)
{
    size_t n = strlen(name);
    return n > 0 && n <= 13 && strncasecmp(name, "STATIC_PLUGIN", n) == 0;
}

/* Looks file name f up as glibc's dlopen from libnccl does (elf/dl-load.c, _dl_map_object):
 * libnccl's DT_RPATH when it has no DT_RUNPATH, LD_LIBRARY_PATH, its DT_RUNPATH,
 * /etc/ld.so.cache, the default folders. */
static bool lookup(struct search *s, const char *f, char *out, size_t n, char *from, size_t fn)
{
    const struct pf_ctx *ctx = s->ctx;
    char p[PF_DL_PATH_MAX];
    const struct {
        const struct pf_strlist *dirs;
        const char *what;
    } lists[] = {{&s->rpath, "libnccl's DT_RPATH"},
                 {&s->llp, "LD_LIBRARY_PATH"},
                 {&s->runpath, "libnccl's DT_RUNPATH"}};
    for (size_t k = 0; k < PF_ARRAY_LEN(lists); k++)
        for (size_t d = 0; d < lists[k].dirs->n; d++) {
            add_dir(&s->searched, lists[k].dirs->v[d]);
            if (snprintf(p, sizeof(p), "%s/%s", lists[k].dirs->v[d], f) < (int)sizeof(p) &&
                is_file(ctx, p)) {
                snprintf(out, n, "%s", p);
                snprintf(from, fn, "%s", lists[k].what);
                return true;
            }
        }
    if (cache_find(s, f, p, sizeof(p)) == 1 && is_file(ctx, p)) {
        snprintf(out, n, "%s", p);
        snprintf(from, fn, "ld.so.cache");
        return true;
    }
    for (size_t d = 0; d < PF_ARRAY_LEN(system_dirs); d++) {
        add_dir(&s->searched, system_dirs[d]);
        if (snprintf(p, sizeof(p), "%s/%s", system_dirs[d], f) < (int)sizeof(p) &&
            is_file(ctx, p)) {
            snprintf(out, n, "%s", p);
            snprintf(from, fn, "a default folder");
            return true;
        }
    }
    return false;
}

/* The plugin as NCCL would load it: true with its path and where it was found; false with,
 * in near, a copy in a folder the loader does not search. */
static bool find_plugin(struct search *s, char *out, size_t n, char *from, size_t fn, char *near,
                        size_t nn, const char *setting)
{
    struct pf_strlist names = {0};
    if (!setting)
        candidates(&names, NULL);
    else {
        char *copy = pf_xstrdup(setting);
        for (char *save = NULL, *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save))
            if (static_plugin(t))
                pf_strlist_addf(&s->missing,
                                "the trainer's executable (NCCL_NET_PLUGIN entry \"%s\" makes NCCL "
                                "look for a plugin linked into it)",
                                t);
            else
                candidates(&names, t);
        free(copy);
    }
    bool found = false;
    out[0] = near[0] = '\0';
    for (size_t i = 0; i < names.n && !found; i++) {
        const char *f = names.v[i];
        if (strchr(f, '/')) {
            if (f[0] == '/') {
                if (is_file(s->ctx, f)) {
                    snprintf(out, n, "%s", f);
                    snprintf(from, fn, "NCCL_NET_PLUGIN");
                    found = true;
                }
            } else
                pf_strlist_addf(&s->missing, "the trainer's working folder (\"%s\" is relative)",
                                f);
            continue;
        }
        found = lookup(s, f, out, n, from, fn);
        for (size_t d = 0; d < s->hints.n && !found && !near[0]; d++) {
            char p[PF_DL_PATH_MAX];
            if (snprintf(p, sizeof(p), "%s/%s", s->hints.v[d], f) < (int)sizeof(p) &&
                is_file(s->ctx, p))
                snprintf(near, nn, "%s", p);
        }
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
        struct stat st;
        if (pf_host_stat(&st, &ctx->host, "/sys/class/infiniband") < 0 || !S_ISDIR(st.st_mode)) {
            /* no listing to be absent from */
            pf_check_unknown(out, "efa-plugin-missing",
                             "expect.transport is OFI, but /sys/class/infiniband cannot be read "
                             "(%s): whether the pod has EFA devices is not known",
                             pf_err_msg());
            pf_err_clear();
            return;
        }
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

    char path[PF_DL_PATH_MAX] = "", near[PF_DL_PATH_MAX] = "", from[64] = "";
    bool none = setting && strcasecmp(setting, "none") == 0;
    struct search s;
    search_open(&s, ctx);
    bool found = !none && find_plugin(&s, path, sizeof(path), from, sizeof(from), near,
                                      sizeof(near), setting && *setting ? setting : NULL);
    if (s.nccl[0]) {
        pf_node_set_str(ev, "libnccl", s.nccl);
        if (s.np.runpath_set) pf_node_set_str(ev, "libncclRunpath", s.np.runpath);
        if (s.np.rpath_set) pf_node_set_str(ev, "libncclRpath", s.np.rpath);
    }
    if (s.cache_state == 1)
        pf_node_set_strf(ev, "ldCache", "%zu entries", s.cache_entries);
    else if (s.cache_state == 0)
        pf_node_set_str(ev, "ldCache", "absent");
    if (found) {
        pf_node_set_str(ev, "plugin", path);
        pf_node_set_str(ev, "pluginFrom", from);
    }
    if (none)
        pf_check_add_finding(out, "efa-plugin-missing", sev, NULL,
                             "NCCL_NET_PLUGIN=%s turns off net plugins: NCCL cannot use the %zu "
                             "EFA device%s and falls back to TCP sockets",
                             setting, nefa, nefa == 1 ? "" : "s");
    else if (!found) {
        char where[600], hint[800] = "", cachew[160];
        pf_strlist_join(where, sizeof(where), &s.searched, ":");
        if (s.cache_state == 1)
            snprintf(cachew, sizeof(cachew), "/etc/ld.so.cache (%zu entries)", s.cache_entries);
        else
            snprintf(cachew, sizeof(cachew), "no /etc/ld.so.cache");
        if (near[0])
            snprintf(hint, sizeof(hint),
                     "; %s exists but the loader does not search its folder (add it to "
                     "LD_LIBRARY_PATH, or name it in /etc/ld.so.conf.d and run ldconfig)",
                     near);
        const char *want = setting && *setting ? setting : "libnccl-net.so";
        /* a copy in a folder ld.so.conf.d names, with no cache to say whether ldconfig ran,
         * is as likely found as not */
        if (near[0] && s.cache_state == 0)
            pf_strlist_addf(&s.missing,
                            "/etc/ld.so.cache (absent, while %s sits in a folder "
                            "/etc/ld.so.conf.d or the plugin's package names)",
                            near);
        if (s.missing.n) {
            char miss[1200];
            pf_strlist_join(miss, sizeof(miss), &s.missing, "; ");
            pf_check_unknown(out, "efa-plugin-missing",
                             "the aws-ofi-nccl plugin (%s) is in none of %s nor %s, but the "
                             "loader's search could not be followed to its end: not read: %s",
                             want, where, cachew, miss);
        } else
            pf_check_add_finding(out, "efa-plugin-missing", sev, NULL,
                                 "the aws-ofi-nccl plugin (%s) is not where NCCL's dlopen from "
                                 "%s looks for it (%s, %s)%s: NCCL cannot use the %zu EFA "
                                 "device%s and falls back to TCP sockets",
                                 want, s.nccl, where, cachew, hint, nefa, nefa == 1 ? "" : "s");
    }
    search_close(&s);

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
                             nefa == 1 ? "" : "s", path[0] ? path : "not found",
                             prov ? prov : "unset (efa)");
}
