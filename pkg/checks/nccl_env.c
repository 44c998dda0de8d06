/* nccl.env: the NCCL_* variables (environment and NCCL's config files), read the way NCCL
 * reads them (pkg/ncclenv), against the RDMA devices of the pod. */
#define _GNU_SOURCE
#include "checks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "../dl/dl.h"
#include "../ncclenv/ncclenv.h"
#include "../netif/netif.h"
#include "nccl_env.h"

#define SOCKET_MAX_THREADS 16 /* net_socket.cc MAX_THREADS */
#define SOCKET_MAX_SOCKETS 64 /* net_socket.cc MAX_SOCKETS */

/* "the environment" or the config file (with line) a value came from. */
const char *ne_from(struct envcheck *e, const char *name)
{
    const char *o = pf_env_origin(&e->ctx->env, name);
    if (!o || strcmp(o, "environment") == 0)
        snprintf(e->where, sizeof(e->where), "from the environment");
    else
        snprintf(e->where, sizeof(e->where), "from %s", o);
    return e->where;
}

/* The value as it may appear in a message (secrets masked, long values cut). */
const char *ne_shown(struct envcheck *e, const char *name, const char *value)
{
    if (pf_verdict_is_secret_name(name))
        snprintf(e->shown, sizeof(e->shown), "***");
    else if (strlen(value) > 80)
        snprintf(e->shown, sizeof(e->shown), "%.77s...", value);
    else
        snprintf(e->shown, sizeof(e->shown), "%s", value);
    return e->shown;
}

/* Where to change the variable: the pod spec's env, or the config file it came from. */
const char *ne_fix(struct envcheck *e, const char *name, const char *what)
{
    const char *o = pf_env_origin(&e->ctx->env, name);
    const char *ef = e->ctx->env_file;
    if (!o || strcmp(o, "environment") == 0) {
        snprintf(e->remedy, sizeof(e->remedy),
                 "%s (it is set in the container's environment: the pod spec's env or envFrom, "
                 "or the image's ENV)",
                 what);
    } else if (ef && pf_str_starts(o, ef) && o[strlen(ef)] == ':') {
        /* --env-file: a dump of the pod's environment, not a file NCCL reads */
        snprintf(e->remedy, sizeof(e->remedy),
                 "%s: %.300s is the pod's environment, so change it where the pod gets it "
                 "(the pod spec's env or envFrom, or the image's ENV)",
                 what, ef);
    } else {
        char file[1100];
        snprintf(file, sizeof(file), "%s", o);
        char *colon = strrchr(file, ':');
        if (colon && colon[1] >= '0' && colon[1] <= '9') *colon = '\0';
        snprintf(e->remedy, sizeof(e->remedy),
                 "%s: NCCL reads it from %s (fix the image, or the ConfigMap mounted there)", what,
                 file);
    }
    return e->remedy;
}

const char *ne_get(struct envcheck *e, const char *name)
{
    return pf_env_get(&e->ctx->env, name);
}

/* Whether the value came from a config file NCCL reads itself (NCCL_CONF_FILE,
 * ~/.nccl.conf, /etc/nccl.conf), not the environment or an --env-file dump of it. */
bool ne_from_conf(struct envcheck *e, const char *name)
{
    const char *o = pf_env_origin(&e->ctx->env, name);
    const char *ef = e->ctx->env_file;
    if (!o || strcmp(o, "environment") == 0) return false;
    return !(ef && pf_str_starts(o, ef) && o[strlen(ef)] == ':');
}

/* ---- names */

/* Variables NCCL itself does not read but a plugin NCCL loads does: name, and who reads it. */
static const char *plugin_variable(const char *name)
{
    static const char *const vars[][2] = {
        /* NVIDIA/nccl ext-tuner/example/plugin.c (v2.23+): the example tuner's CSV */
        {"NCCL_TUNER_CONFIG_FILE",
         "read by NCCL's example tuner plugin (NVIDIA/nccl ext-tuner/example) that "
         "NCCL_TUNER_PLUGIN loads, not by NCCL"},
    };
    for (size_t i = 0; i < PF_ARRAY_LEN(vars); i++)
        if (strcmp(vars[i][0], name) == 0) return vars[i][1];
    return NULL;
}

/* The plugin setting that makes NCCL load a plugin (src/plugin/ reads these names; a net
 * plugin other than IB or Socket by NCCL_NET), as "NCCL_TUNER_PLUGIN=x"; NULL when none is set. */
static const char *plugin_loaded(struct envcheck *e)
{
    static char buf[160];
    static const char *const sel[] = {"NCCL_NET_PLUGIN",      "NCCL_TUNER_PLUGIN",
                                      "NCCL_PROFILER_PLUGIN", "NCCL_ENV_PLUGIN",
                                      "NCCL_GIN_PLUGIN",      "NCCL_RMA_PLUGIN"};
    for (size_t i = 0; i < PF_ARRAY_LEN(sel); i++) {
        const char *v = ne_get(e, sel[i]);
        if (v && *v && strcasecmp(v, "none") != 0) {
            snprintf(buf, sizeof(buf), "the plugin %s=%.100s", sel[i], v);
            return buf;
        }
    }
    const char *net = ne_get(e, "NCCL_NET");
    if (net && *net && strcasecmp(net, "IB") != 0 && strcasecmp(net, "Socket") != 0) {
        snprintf(buf, sizeof(buf), "the net plugin of NCCL_NET=%.100s", net);
        return buf;
    }
    return NULL;
}

static void check_names(struct envcheck *e, struct pf_strlist *names)
{
    for (size_t i = 0; i < names->n; i++) {
        const char *n = names->v[i];
        if (n[0] && ne_blank(n[strlen(n) - 1]) && ne_from_conf(e, n)) continue; /* conf-blanks */
        if (pf_ncclenv_known(n)) {
            const char *obs = pf_ncclenv_obsolete(n);
            if (obs) {
                char what[256];
                snprintf(what, sizeof(what), "remove %s", n);
                pf_check_add_finding(e->out, "obsolete-variable", PF_WARN, ne_fix(e, n, what),
                                     "%s (%s) has no effect: %s", n, ne_from(e, n), obs);
            }
            continue;
        }
        const char *foreign = pf_ncclenv_foreign(n);
        if (foreign) continue; /* recorded in the evidence; not a mistake */
        const char *reader = plugin_variable(n);
        if (reader) {
            pf_node_add_strf(pf_node_get(e->out->evidence, "readByPlugins")
                                 ? pf_node_get(e->out->evidence, "readByPlugins")
                                 : pf_node_set_seq(e->out->evidence, "readByPlugins"),
                             "%s: %s", n, reader);
            continue;
        }
        const char *sug = pf_ncclenv_suggest(n);
        const char *plugin = plugin_loaded(e);
        if (!sug && plugin) {
            /* NCCL loads a plugin that may read it (plugins read NCCL_* variables of their
             * own): not NCCL's, but not known to be ignored either */
            pf_check_unknown(e->out, "unknown-variable",
                             "%s (%s) is not a variable NCCL reads; %s may read it", n,
                             ne_from(e, n), plugin);
            continue;
        }
        char what[256];
        if (sug) {
            snprintf(what, sizeof(what), "rename %s to %s", n, sug);
            pf_check_add_finding(e->out, "unknown-variable", PF_WARN, ne_fix(e, n, what),
                                 "%s (%s) is not a variable NCCL reads: did you mean %s?", n,
                                 ne_from(e, n), sug);
        } else {
            snprintf(what, sizeof(what), "remove %s or correct its name", n);
            pf_check_add_finding(e->out, "unknown-variable", PF_WARN, ne_fix(e, n, what),
                                 "%s (%s) is not a variable NCCL reads: NCCL ignores it", n,
                                 ne_from(e, n));
        }
    }
}

/* ---- integers */

static void check_ints(struct envcheck *e, struct pf_strlist *names)
{
    for (size_t i = 0; i < names->n; i++) {
        const char *n = names->v[i];
        if (!pf_ncclenv_is_int_param(n)) continue;
        const char *s = ne_get(e, n);
        long long v;
        enum pf_ncclenv_int_kind k = pf_ncclenv_param(s, 0, &v);
        char what[256];
        snprintf(what, sizeof(what), "set %s to a decimal number", n);
        if (k == PF_NCCLENV_INT_PARTIAL) {
            const char *effect = "";
            if (strcmp(n, "NCCL_IB_DISABLE") == 0 && v == 0)
                effect = ", so IB is NOT disabled";
            else if (strcmp(n, "NCCL_SHM_DISABLE") == 0 && v != 1)
                effect = ", so SHM is NOT disabled";
            if (pf_ncclenv_is_octal(s))
                pf_check_add_finding(e->out, "invalid-value", PF_WARN, ne_fix(e, n, what),
                                     "%s=%s (%s) is read as octal (a leading 0) and stops at "
                                     "the first digit that is not octal: NCCL uses %lld%s",
                                     n, ne_shown(e, n, s), ne_from(e, n), v, effect);
            else
                pf_check_add_finding(e->out, "invalid-value", PF_WARN, ne_fix(e, n, what),
                                     "%s=%s (%s) is not a number: NCCL silently uses %lld%s", n,
                                     ne_shown(e, n, s), ne_from(e, n), v, effect);
        } else if (k == PF_NCCLENV_INT_RANGE) {
            pf_check_add_finding(e->out, "invalid-value", PF_WARN, ne_fix(e, n, what),
                                 "%s=%s (%s) is out of range: NCCL ignores it and uses its "
                                 "default",
                                 n, ne_shown(e, n, s), ne_from(e, n));
        } else if (k == PF_NCCLENV_INT_CLEAN && pf_ncclenv_is_octal(s) && v != 0) {
            pf_check_add_finding(e->out, "octal-value", PF_WARN, ne_fix(e, n, what),
                                 "%s=%s (%s) has a leading 0, so NCCL reads it as octal: %lld, "
                                 "not %s",
                                 n, ne_shown(e, n, s), ne_from(e, n), v, s);
        }
    }
}

/* ---- transports */

static void check_p2p(struct envcheck *e)
{
    const char *s = ne_get(e, "NCCL_P2P_DISABLE");
    if (s) {
        bool clean;
        /* ncclGetLevel: int disable = strtol(str, NULL, 0); only 1 disables */
        int v = (int)pf_ncclenv_int(s, &clean);
        char what[256];
        snprintf(what, sizeof(what), "remove NCCL_P2P_DISABLE");
        if (v == 1) {
            pf_check_add_finding(e->out, "p2p-disabled", PF_FAIL,
                                 ne_fix(e, "NCCL_P2P_DISABLE", what),
                                 "NCCL_P2P_DISABLE=%s (%s) turns off GPU peer-to-peer (NVLink "
                                 "and PCIe): traffic between GPUs of this pod goes through host "
                                 "memory",
                                 s, ne_from(e, "NCCL_P2P_DISABLE"));
            return; /* NCCL_P2P_LEVEL is not read then */
        }
        if (*s && !clean)
            pf_check_add_finding(e->out, "invalid-value", PF_WARN,
                                 ne_fix(e, "NCCL_P2P_DISABLE", "set NCCL_P2P_DISABLE to 0 or 1"),
                                 "NCCL_P2P_DISABLE=%s (%s) is not a number: NCCL reads %d and "
                                 "leaves P2P enabled",
                                 s, ne_from(e, "NCCL_P2P_DISABLE"), v);
        else if (*s && v != 0)
            pf_check_add_finding(e->out, "invalid-value", PF_WARN,
                                 ne_fix(e, "NCCL_P2P_DISABLE", "set NCCL_P2P_DISABLE to 0 or 1"),
                                 "NCCL_P2P_DISABLE=%s (%s): NCCL disables P2P only for exactly 1, "
                                 "so P2P stays enabled",
                                 s, ne_from(e, "NCCL_P2P_DISABLE"));
    }
    static const char *const levels[] = {"NCCL_P2P_LEVEL", "NCCL_NET_GDR_LEVEL"};
    for (size_t i = 0; i < PF_ARRAY_LEN(levels); i++) {
        const char *n = levels[i];
        const char *lv = ne_get(e, n);
        if (!lv) continue;
        const char *l = pf_ncclenv_level(lv);
        char what[256];
        if (!l) {
            snprintf(what, sizeof(what),
                     "set %s to one of %s (case-sensitive), or remove it to let NCCL choose", n,
                     pf_ncclenv_level_names());
            pf_check_add_finding(e->out, "invalid-value", PF_WARN, ne_fix(e, n, what),
                                 "%s=%s (%s) is not a level NCCL knows (%s, or 0-4): NCCL "
                                 "ignores it and picks the level itself",
                                 n, ne_shown(e, n, lv), ne_from(e, n), pf_ncclenv_level_names());
            continue;
        }
        if (strcmp(l, "LOC") != 0) continue;
        snprintf(what, sizeof(what), "remove %s", n);
        if (i == 0)
            pf_check_add_finding(e->out, "p2p-disabled", PF_FAIL, ne_fix(e, n, what),
                                 "NCCL_P2P_LEVEL=%s (%s) means LOC: NCCL never uses "
                                 "peer-to-peer between GPUs, as if NCCL_P2P_DISABLE=1",
                                 lv, ne_from(e, n));
        else if (e->ctx->hcas.n > 0)
            pf_check_add_finding(e->out, "gdr-disabled", PF_WARN, ne_fix(e, n, what),
                                 "NCCL_NET_GDR_LEVEL=%s (%s) means LOC: GPUDirect RDMA is never "
                                 "used, every network transfer is staged through host memory",
                                 lv, ne_from(e, n));
    }
}

static void check_shm(struct envcheck *e)
{
    const char *s = ne_get(e, "NCCL_SHM_DISABLE");
    long long v;
    if (pf_ncclenv_param(s, 0, &v) == PF_NCCLENV_INT_UNSET || v != 1) return;
    pf_check_add_finding(e->out, "shm-disabled", PF_FAIL,
                         ne_fix(e, "NCCL_SHM_DISABLE", "remove NCCL_SHM_DISABLE"),
                         "NCCL_SHM_DISABLE=%s (%s) turns off the shared-memory transport: GPUs "
                         "without P2P in this pod fall back to the network",
                         s, ne_from(e, "NCCL_SHM_DISABLE"));
}

static void check_ib(struct envcheck *e)
{
    const struct pf_strlist *hcas = &e->ctx->hcas;
    char have[512];
    pf_strlist_join(have, sizeof(have), hcas, ", ");
    const char *s = ne_get(e, "NCCL_IB_DISABLE");
    long long v;
    if (pf_ncclenv_param(s, 0, &v) != PF_NCCLENV_INT_UNSET && v != 0) {
        if (hcas->n > 0)
            pf_check_add_finding(e->out, "ib-disabled", PF_FAIL,
                                 ne_fix(e, "NCCL_IB_DISABLE", "remove NCCL_IB_DISABLE"),
                                 "NCCL_IB_DISABLE=%s (%s) turns off the IB/RoCE transport while "
                                 "%zu RDMA device%s %s present (%s): NCCL falls back to TCP "
                                 "sockets",
                                 s, ne_from(e, "NCCL_IB_DISABLE"), hcas->n, hcas->n == 1 ? "" : "s",
                                 hcas->n == 1 ? "is" : "are", have);
        else
            pf_check_add_finding(e->out, "ib-disabled", PF_WARN,
                                 ne_fix(e, "NCCL_IB_DISABLE",
                                        "remove NCCL_IB_DISABLE once the pod has RDMA devices"),
                                 "NCCL_IB_DISABLE=%s (%s) turns off the IB/RoCE transport (no "
                                 "RDMA devices are visible here either): NCCL uses TCP sockets",
                                 s, ne_from(e, "NCCL_IB_DISABLE"));
    }
    const char *net = ne_get(e, "NCCL_NET");
    if (net && strcasecmp(net, "Socket") == 0 && hcas->n > 0)
        pf_check_add_finding(e->out, "ib-disabled", PF_FAIL,
                             ne_fix(e, "NCCL_NET", "remove NCCL_NET (or set it to IB)"),
                             "NCCL_NET=%s (%s) forces the TCP socket transport while %zu RDMA "
                             "device%s %s present (%s)",
                             net, ne_from(e, "NCCL_NET"), hcas->n, hcas->n == 1 ? "" : "s",
                             hcas->n == 1 ? "is" : "are", have);
}

static void check_hca(struct envcheck *e)
{
    const char *s = ne_get(e, "NCCL_IB_HCA");
    if (!s) return;
    const struct pf_strlist *hcas = &e->ctx->hcas;
    struct pf_ncclenv_list l;
    if (pf_ncclenv_list_parse(&l, s) < 0)
        pf_check_add_finding(e->out, "invalid-value", PF_WARN,
                             ne_fix(e, "NCCL_IB_HCA", "correct NCCL_IB_HCA"),
                             "NCCL_IB_HCA=%s (%s): %s", s, ne_from(e, "NCCL_IB_HCA"), pf_err_msg());
    struct pf_node *sel = pf_node_set_seq(e->out->evidence, "selectedHcas");
    size_t nsel = 0;
    for (size_t i = 0; i < hcas->n; i++)
        if (pf_ncclenv_list_match(&l, hcas->v[i], -1)) {
            pf_node_add_str(sel, hcas->v[i]);
            nsel++;
        }
    char have[512];
    pf_strlist_join(have, sizeof(have), hcas, ", ");
    if (hcas->n == 0) {
        pf_check_add_finding(e->out, "hca-no-match", PF_WARN, NULL,
                             "NCCL_IB_HCA=%s (%s) is set but no RDMA devices are visible in "
                             "/sys/class/infiniband",
                             s, ne_from(e, "NCCL_IB_HCA"));
        return;
    }
    if (nsel == 0) {
        char what[700];
        snprintf(what, sizeof(what), "set NCCL_IB_HCA to devices that exist (have: %s)", have);
        pf_check_add_finding(e->out, "hca-no-match", PF_FAIL, ne_fix(e, "NCCL_IB_HCA", what),
                             "NCCL_IB_HCA=%s (%s) selects none of the %zu RDMA devices (have: "
                             "%s): NCCL finds no IB device and falls back to TCP sockets",
                             s, ne_from(e, "NCCL_IB_HCA"), hcas->n, have);
        return;
    }
    if (l.exact) return;
    /* mlx5_1 also selects (or excludes) mlx5_10.. when mlx5_1 is itself a device */
    for (size_t k = 0; k < l.n; k++) {
        const char *ent = l.v[k].name;
        if (!pf_strlist_has(hcas, ent)) continue;
        struct pf_strlist extra = {0};
        for (size_t i = 0; i < hcas->n; i++)
            if (strcmp(hcas->v[i], ent) != 0 && strncmp(hcas->v[i], ent, strlen(ent)) == 0)
                pf_strlist_add(&extra, hcas->v[i]);
        if (extra.n) {
            char also[512], what[700];
            pf_strlist_join(also, sizeof(also), &extra, ", ");
            snprintf(what, sizeof(what), "write NCCL_IB_HCA=%s%s for an exact match",
                     l.exclude ? "^=" : "=", s + (l.exclude ? 1 : 0));
            pf_check_add_finding(e->out, "hca-no-match", PF_WARN, ne_fix(e, "NCCL_IB_HCA", what),
                                 "NCCL_IB_HCA=%s (%s): \"%s\" is a prefix, so it also %s %s", s,
                                 ne_from(e, "NCCL_IB_HCA"), ent, l.exclude ? "excludes" : "selects",
                                 also);
        }
        pf_strlist_free(&extra);
    }
}

/* `preflight env` in the pod: the list against the pod's real interfaces, as net.interfaces
 * checks it under `check` (an env file is another machine's: not compared). */
static void socket_ifaces(struct envcheck *e, const char *ifn)
{
    struct pf_ncclenv_list l;
    struct pf_netif_list ifs = {0};
    if (pf_ncclenv_list_parse(&l, ifn) < 0 || l.exclude || pf_netif_list(&ifs) < 0) {
        pf_err_clear();
        pf_netif_list_free(&ifs);
        return;
    }
    bool named = false;
    for (size_t i = 0; i < ifs.n && !named; i++)
        named = pf_ncclenv_list_match(&l, ifs.v[i].name, -1);
    if (!named) pf_checks_ifname_no_match(e->out, e->ctx, &ifs, &l);
    pf_netif_list_free(&ifs);
}

static void check_socket(struct envcheck *e)
{
    const char *ifn = ne_get(e, "NCCL_SOCKET_IFNAME");
    if (ifn) {
        struct pf_ncclenv_list l;
        if (strlen(ifn) <= 1)
            pf_check_add_finding(e->out, "invalid-value", PF_WARN,
                                 ne_fix(e, "NCCL_SOCKET_IFNAME",
                                        "give NCCL_SOCKET_IFNAME an interface name or prefix of 2 "
                                        "or more characters, or remove it"),
                                 "NCCL_SOCKET_IFNAME=\"%s\" (%s) is ignored: NCCL reads it only "
                                 "when it is longer than one character",
                                 ifn, ne_from(e, "NCCL_SOCKET_IFNAME"));
        else if (pf_ncclenv_list_parse(&l, ifn) < 0)
            pf_check_add_finding(e->out, "invalid-value", PF_WARN,
                                 ne_fix(e, "NCCL_SOCKET_IFNAME", "correct NCCL_SOCKET_IFNAME"),
                                 "NCCL_SOCKET_IFNAME=%s (%s): %s", ifn,
                                 ne_from(e, "NCCL_SOCKET_IFNAME"), pf_err_msg());
    }
    if (ifn && strlen(ifn) > 1 && e->ctx->in_env_mode && !e->ctx->env_file) socket_ifaces(e, ifn);
    const char *fam = ne_get(e, "NCCL_SOCKET_FAMILY");
    if (fam && strcmp(fam, "AF_INET") != 0 && strcmp(fam, "AF_INET6") != 0)
        pf_check_add_finding(e->out, "invalid-value", PF_WARN,
                             ne_fix(e, "NCCL_SOCKET_FAMILY",
                                    "set NCCL_SOCKET_FAMILY to AF_INET or AF_INET6, or remove it"),
                             "NCCL_SOCKET_FAMILY=%s (%s) is neither AF_INET nor AF_INET6: NCCL "
                             "ignores it and uses both families",
                             fam, ne_from(e, "NCCL_SOCKET_FAMILY"));

    const char *st = ne_get(e, "NCCL_SOCKET_NTHREADS"), *ss = ne_get(e, "NCCL_NSOCKS_PERTHREAD");
    long long nt, ns;
    enum pf_ncclenv_int_kind kt = pf_ncclenv_param(st, -2, &nt);
    enum pf_ncclenv_int_kind ks = pf_ncclenv_param(ss, -2, &ns);
    if (kt != PF_NCCLENV_INT_UNSET && (nt < 0 && nt != -2))
        pf_check_add_finding(e->out, "invalid-value", PF_WARN,
                             ne_fix(e, "NCCL_SOCKET_NTHREADS",
                                    "set NCCL_SOCKET_NTHREADS between 1 and 16, or remove it"),
                             "NCCL_SOCKET_NTHREADS=%s (%s) is negative", st,
                             ne_from(e, "NCCL_SOCKET_NTHREADS"));
    if (ks != PF_NCCLENV_INT_UNSET && (ns < 0 && ns != -2))
        pf_check_add_finding(e->out, "invalid-value", PF_WARN,
                             ne_fix(e, "NCCL_NSOCKS_PERTHREAD",
                                    "set NCCL_NSOCKS_PERTHREAD to 1 or more, or remove it"),
                             "NCCL_NSOCKS_PERTHREAD=%s (%s) is negative", ss,
                             ne_from(e, "NCCL_NSOCKS_PERTHREAD"));
    if (nt > SOCKET_MAX_THREADS)
        pf_check_add_finding(
            e->out, "socket-thread-product", PF_WARN,
            ne_fix(e, "NCCL_SOCKET_NTHREADS", "set NCCL_SOCKET_NTHREADS to 16 or less"),
            "NCCL_SOCKET_NTHREADS=%s (%s) is above NCCL's maximum of %d: NCCL "
            "uses %d threads",
            st, ne_from(e, "NCCL_SOCKET_NTHREADS"), SOCKET_MAX_THREADS, SOCKET_MAX_THREADS);
    if (kt != PF_NCCLENV_INT_UNSET && ks != PF_NCCLENV_INT_UNSET && nt > 0 && ns > 0 &&
        nt <= 1 << 20 && ns <= 1 << 20 && nt * ns > SOCKET_MAX_SOCKETS) {
        long long eff_t = nt > SOCKET_MAX_THREADS ? SOCKET_MAX_THREADS : nt;
        long long eff_s = eff_t * ns > SOCKET_MAX_SOCKETS ? SOCKET_MAX_SOCKETS / eff_t : ns;
        char what[256], where_t[1200];
        snprintf(what, sizeof(what),
                 "choose NCCL_SOCKET_NTHREADS x NCCL_NSOCKS_PERTHREAD <= 64 (e.g. %lld x %lld)",
                 eff_t, SOCKET_MAX_SOCKETS / eff_t);
        snprintf(where_t, sizeof(where_t), "%s", ne_from(e, "NCCL_SOCKET_NTHREADS"));
        const char *where_s = ne_from(e, "NCCL_NSOCKS_PERTHREAD");
        char where[2500];
        if (strcmp(where_t, where_s) == 0)
            snprintf(where, sizeof(where), "both %s", where_t);
        else
            snprintf(where, sizeof(where), "%s, %s", where_t, where_s);
        pf_check_add_finding(e->out, "socket-thread-product", PF_FAIL,
                             ne_fix(e, "NCCL_NSOCKS_PERTHREAD", what),
                             "NCCL_SOCKET_NTHREADS=%s x NCCL_NSOCKS_PERTHREAD=%s (%s) = %lld "
                             "sockets, above NCCL's limit of %d: NCCL cuts it to %lld threads x "
                             "%lld sockets",
                             st, ss, where, nt * ns, SOCKET_MAX_SOCKETS, eff_t, eff_s);
    }
}

/* ---- debug */

static const char *const subsystems[] = {"INIT",    "COLL",   "P2P",     "SHM",       "NET",
                                         "GRAPH",   "TUNING", "ENV",     "ALLOC",     "ALLOC_HOST",
                                         "CALL",    "PROXY",  "NVLS",    "BOOTSTRAP", "REG",
                                         "PROFILE", "RAS",    "DESTROY", "ALL"};

static bool subsys_has_all(struct envcheck *e, const char *s)
{
    bool all = false, negate = s[0] == '^';
    char *copy = pf_xstrdup(negate ? s + 1 : s), *save = NULL;
    for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        bool known = false;
        for (size_t i = 0; i < PF_ARRAY_LEN(subsystems); i++)
            if (strcasecmp(t, subsystems[i]) == 0) known = true;
        if (strcasecmp(t, "ALL") == 0) all = true;
        if (!known)
            pf_check_add_finding(
                e->out, "invalid-value", PF_WARN,
                ne_fix(e, "NCCL_DEBUG_SUBSYS",
                       "use subsystem names NCCL knows (INIT, COLL, P2P, SHM, NET, "
                       "GRAPH, TUNING, ENV, ALLOC, CALL, PROXY, NVLS, BOOTSTRAP, "
                       "REG, PROFILE, RAS, ALL)"),
                "NCCL_DEBUG_SUBSYS=%s (%s): \"%.40s\" is not a subsystem NCCL "
                "knows: it is ignored",
                s, ne_from(e, "NCCL_DEBUG_SUBSYS"), t);
    }
    free(copy);
    return all && !negate;
}

static void check_debug(struct envcheck *e)
{
    const char *d = ne_get(e, "NCCL_DEBUG");
    const char *sub = ne_get(e, "NCCL_DEBUG_SUBSYS");
    bool sub_all = sub ? subsys_has_all(e, sub) : false;
    if (!d) return;
    static const char *const levels[] = {"VERSION", "WARN", "INFO", "ABORT", "TRACE"};
    bool known = false;
    for (size_t i = 0; i < PF_ARRAY_LEN(levels); i++)
        if (strcasecmp(d, levels[i]) == 0) known = true;
    if (!known) {
        pf_check_add_finding(e->out, "invalid-value", PF_WARN,
                             ne_fix(e, "NCCL_DEBUG", "set NCCL_DEBUG to WARN (or INFO to debug)"),
                             "NCCL_DEBUG=%s (%s) is not a level NCCL knows (VERSION, WARN, "
                             "INFO, ABORT, TRACE): NCCL prints nothing, not even its warnings",
                             d, ne_from(e, "NCCL_DEBUG"));
        return;
    }
    if (strcasecmp(d, "TRACE") == 0)
        pf_check_add_finding(e->out, "debug-verbose", PF_WARN,
                             ne_fix(e, "NCCL_DEBUG", "set NCCL_DEBUG=WARN (or INFO) for training"),
                             "NCCL_DEBUG=%s (%s) logs every call (and needs an NCCL built with "
                             "TRACE): it slows training and floods the logs",
                             d, ne_from(e, "NCCL_DEBUG"));
    else if (strcasecmp(d, "INFO") == 0 && sub_all)
        pf_check_add_finding(e->out, "debug-verbose", PF_WARN,
                             ne_fix(e, "NCCL_DEBUG_SUBSYS",
                                    "remove NCCL_DEBUG_SUBSYS (the default is INIT,BOOTSTRAP,ENV) "
                                    "or name the few subsystems you need"),
                             "NCCL_DEBUG=INFO with NCCL_DEBUG_SUBSYS=%s (%s) logs every "
                             "subsystem, collectives included: it slows training and floods the "
                             "logs",
                             sub, ne_from(e, "NCCL_DEBUG_SUBSYS"));
}

/* ---- files */

#define TOPO_FILE_MAX (4u << 20)

/* The PCI devices the topology file names must exist here: a file written for another node
 * type gives NCCL a wrong GPU/NIC affinity. */
static void check_topo_busids(struct envcheck *e, const char *t)
{
    char *text = NULL;
    size_t len = 0;
    if (pf_host_read_all(&text, &len, TOPO_FILE_MAX, &e->ctx->host, "%s", t) < 0) {
        /* the file is there (stat said so); what preflight cannot read (over its size bound,
         * or closed to its uid) NCCL, another process, may still load: the comparison is
         * unknown, not a fault */
        pf_check_unknown(e->out, "topo-file-mismatch",
                         "NCCL_TOPO_FILE=%s (%s) exists but preflight cannot read it (%s): its "
                         "PCI bus ids are not compared",
                         t, ne_from(e, "NCCL_TOPO_FILE"), pf_err_msg());
        pf_err_clear();
        return;
    }
    struct pf_strlist ids = {0};
    (void)pf_topo_busids(&ids, text, len);
    free(text);
    char missing[256] = "";
    size_t nmissing = 0;
    for (size_t i = 0; i < ids.n; i++) {
        struct stat st;
        if (pf_host_stat(&st, &e->ctx->host, "/sys/bus/pci/devices/%s", ids.v[i]) == 0) continue;
        if (nmissing < 5) {
            size_t l = strlen(missing);
            snprintf(missing + l, sizeof(missing) - l, "%s%s", l ? ", " : "", ids.v[i]);
        }
        nmissing++;
    }
    pf_node_set_int(e->out->evidence, "topoFileBusIds", (long long)ids.n);
    if (nmissing)
        pf_check_add_finding(e->out, "topo-file-mismatch", PF_WARN, NULL,
                             "NCCL_TOPO_FILE=%s (%s) names %zu of its %zu GPUs and NICs at PCI "
                             "bus ids not on this node (%s%s): the file was written for another "
                             "node type",
                             t, ne_from(e, "NCCL_TOPO_FILE"), nmissing, ids.n, missing,
                             nmissing > 5 ? ", ..." : "");
    pf_strlist_free(&ids);
}

static void check_topo_file(struct envcheck *e)
{
    const char *t = ne_get(e, "NCCL_TOPO_FILE");
    if (!t || !*t) return;
    if (t[0] != '/') {
        pf_check_add_finding(e->out, "topo-file-missing", PF_WARN,
                             ne_fix(e, "NCCL_TOPO_FILE", "give NCCL_TOPO_FILE an absolute path"),
                             "NCCL_TOPO_FILE=%s (%s) is a relative path: NCCL opens it from the "
                             "working directory of the training process",
                             t, ne_from(e, "NCCL_TOPO_FILE"));
        return;
    }
    if (e->ctx->in_env_mode) return; /* a file on another machine: only the environment is linted */
    struct stat st;
    int r = pf_host_stat(&st, &e->ctx->host, "%s", t);
    if (r == 0 && !S_ISDIR(st.st_mode)) {
        check_topo_busids(e, t);
        return;
    }
    if (r < 0 && r != PF_ENOENT) {
        /* not "no such file": a permission or a link preflight resolves otherwise than the
         * trainer (under a root prefix, an absolute link leads out of the tree) */
        pf_check_unknown(e->out, "topo-file-missing",
                         "NCCL_TOPO_FILE=%s (%s) cannot be looked up (%s): whether NCCL finds "
                         "it is not known",
                         t, ne_from(e, "NCCL_TOPO_FILE"), pf_err_msg());
        pf_err_clear();
        return;
    }
    pf_check_add_finding(e->out, "topo-file-missing", PF_FAIL,
                         ne_fix(e, "NCCL_TOPO_FILE",
                                "mount the topology file at that path (a ConfigMap or hostPath "
                                "volume) or remove NCCL_TOPO_FILE"),
                         "NCCL_TOPO_FILE=%s (%s) %s: NCCL fails to load the topology", t,
                         ne_from(e, "NCCL_TOPO_FILE"),
                         r == 0 ? "is a directory, not a file" : "does not exist");
}

/* ---- settings NCCL releases changed (pkg/ncclenv's table; docs/checks/40-nccl-env.md) */

/* "NCCL 2.21" for a version code of a minor release's first version. */
static void minor_name(char *out, size_t n, int code)
{
    snprintf(out, n, "NCCL %d.%d", code / 10000, code / 100 % 100);
}

/* How many of the pod's RDMA ports are Ethernet (RoCE) and how many InfiniBand. */
static void count_link_layers(struct envcheck *e, size_t *roce, size_t *ib)
{
    *roce = *ib = 0;
    for (size_t i = 0; i < e->ctx->hcas.n; i++) {
        struct pf_strlist ports = {0};
        if (pf_host_list(&ports, &e->ctx->host, "/sys/class/infiniband/%s/ports",
                         e->ctx->hcas.v[i]) < 0) {
            pf_err_clear();
            continue;
        }
        for (size_t p = 0; p < ports.n; p++) {
            char ll[32];
            if (pf_host_read(ll, sizeof(ll), &e->ctx->host,
                             "/sys/class/infiniband/%s/ports/%s/"
                             "link_layer",
                             e->ctx->hcas.v[i], ports.v[p]) < 0) {
                pf_err_clear();
                continue;
            }
            if (strcmp(ll, "Ethernet") == 0) (*roce)++;
            if (strcmp(ll, "InfiniBand") == 0) (*ib)++;
        }
        pf_strlist_free(&ports);
    }
}

/* A fixed NCCL_IB_GID_INDEX where NCCL would pick the RoCE GID itself. */
static void check_gid_index(struct envcheck *e, int version, const char *loaded)
{
    const char *s = ne_get(e, "NCCL_IB_GID_INDEX");
    long long v;
    if (pf_ncclenv_param(s, -1, &v) == PF_NCCLENV_INT_UNSET || v < 0) return;
    if (version && version < PF_NCCLENV_GID_AUTO_SINCE) return; /* that NCCL needs it on RoCE */
    size_t roce, ib;
    count_link_layers(e, &roce, &ib);
    if (roce == 0 && ib > 0) return; /* GID 0 on InfiniBand; 2.22 and later ignore it there */
    char who[64];
    if (version)
        snprintf(who, sizeof(who), "the loaded %s picks", loaded);
    else
        snprintf(who, sizeof(who), "NCCL 2.21 and later pick");
    pf_check_add_finding(e->out, "gid-index-fixed", PF_WARN,
                         ne_fix(e, "NCCL_IB_GID_INDEX",
                                "remove NCCL_IB_GID_INDEX (steer the choice with "
                                "NCCL_IB_ADDR_FAMILY or NCCL_IB_ADDR_RANGE if needed)"),
                         "NCCL_IB_GID_INDEX=%s (%s) pins the RoCE GID index, while %s the GID "
                         "itself (RoCE v2 and IPv4 unless NCCL_IB_ADDR_FAMILY or "
                         "NCCL_IB_ADDR_RANGE say otherwise): a fixed index breaks connections "
                         "where the GID table differs",
                         ne_shown(e, "NCCL_IB_GID_INDEX", s), ne_from(e, "NCCL_IB_GID_INDEX"), who);
}

/* One variable that only some releases read, against the loaded version (0: unknown). */
static void check_change(struct envcheck *e, const struct pf_ncclenv_change *c, int version,
                         const char *loaded)
{
    const char *n = c->name;
    char rel[32];
    if (c->until && (version == 0 || version >= c->until)) {
        minor_name(rel, sizeof(rel), c->until);
        char what[256];
        if (c->replacement)
            snprintf(what, sizeof(what), "replace %s with %s", n, c->replacement);
        else
            snprintf(what, sizeof(what), "remove %s", n);
        char head[160];
        if (version)
            snprintf(head, sizeof(head), "the loaded %s does not read it", loaded);
        else
            snprintf(head, sizeof(head), "%s and later do not read it", rel);
        if (c->replacement)
            pf_check_add_finding(e->out, "nccl-setting-renamed", PF_WARN, ne_fix(e, n, what),
                                 "%s (%s) has no effect: %s (%s replaced it with %s: %s)", n,
                                 ne_from(e, n), head, rel, c->replacement, c->note);
        else
            pf_check_add_finding(e->out, "nccl-setting-obsolete", PF_WARN, ne_fix(e, n, what),
                                 "%s (%s) has no effect: %s (gone since %s: %s)", n, ne_from(e, n),
                                 head, rel, c->note);
        return;
    }
    if (c->since && version && version < c->since) {
        minor_name(rel, sizeof(rel), c->since);
        char what[256];
        snprintf(what, sizeof(what), "upgrade NCCL to %s or later, or remove %s", rel + 5, n);
        pf_check_add_finding(e->out, "nccl-setting-unsupported", PF_WARN, ne_fix(e, n, what),
                             "%s (%s) has no effect: the loaded %s does not read it yet (%s "
                             "and later do: %s)",
                             n, ne_from(e, n), loaded, rel, c->note);
    }
}

void pf_nccl_env_version_rules(struct pf_check *out, struct pf_ctx *ctx, int version)
{
    struct envcheck e = {.out = out, .ctx = ctx};
    char loaded[48] = "";
    if (version) {
        char v[32];
        pf_nccl_version_string(v, sizeof(v), version);
        snprintf(loaded, sizeof(loaded), "NCCL %s", v);
        pf_node_set_str(out->evidence, "ncclVersion", v);
    }
    for (size_t i = 0; i < ctx->env.vars.n; i++) {
        const char *kv = ctx->env.vars.v[i];
        const char *eq = strchr(kv, '=');
        if (!eq || (size_t)(eq - kv) >= 64) continue;
        char name[64];
        memcpy(name, kv, (size_t)(eq - kv));
        name[eq - kv] = '\0';
        const struct pf_ncclenv_change *c = pf_ncclenv_change(name);
        if (c) check_change(&e, c, version, loaded);
    }
    check_gid_index(&e, version, loaded);
}

/* The loaded NCCL's version code; 0 in `preflight env` (an environment meant for another
 * machine), in the static binary (no dlopen), or when libnccl.so.2 does not load. */
int ne_loaded_version(struct pf_ctx *ctx)
{
#ifdef PF_STATIC
    (void)ctx;
    return 0;
#else
    if (ctx->in_env_mode) return 0;
    const struct pf_dl_nccl *n = NULL;
    if (pf_dl_nccl(&n) < 0) {
        pf_err_clear();
        return 0;
    }
    int code = 0;
    if (n->GetVersion(&code) != PF_NCCL_SUCCESS || code <= 0) return 0;
    return code;
#endif
}

/* ---- evidence */

static void record(struct envcheck *e, struct pf_strlist *names)
{
    struct pf_node *vars = pf_node_set_map(e->out->evidence, "variables");
    for (size_t i = 0; i < names->n; i++) {
        const char *n = names->v[i];
        struct pf_node *m = pf_node_set_map(vars, n);
        const char *v = ne_get(e, n);
        pf_node_set_str(m, "value", pf_verdict_is_secret_name(n) ? "***" : v);
        const char *o = pf_env_origin(&e->ctx->env, n);
        pf_node_set_str(m, "origin", o ? o : "environment");
        const char *foreign = pf_ncclenv_foreign(n);
        if (foreign)
            pf_node_set_str(m, "note", foreign);
        else if (!pf_ncclenv_known(n))
            pf_node_set_bool(m, "known", false);
    }
    struct pf_node *h = pf_node_set_seq(e->out->evidence, "hcas");
    for (size_t i = 0; i < e->ctx->hcas.n; i++)
        pf_node_add_str(h, e->ctx->hcas.v[i]);
}

void pf_check_nccl_env(struct pf_check *out, struct pf_ctx *ctx)
{
    struct envcheck e = {.out = out, .ctx = ctx};
    struct pf_strlist names = {0};
    for (size_t i = 0; i < ctx->env.vars.n; i++) {
        const char *kv = ctx->env.vars.v[i];
        const char *eq = strchr(kv, '=');
        if (!eq || strncasecmp(kv, "NCCL_", 5) != 0) continue;
        pf_strlist_addn(&names, kv, (size_t)(eq - kv));
    }
    pf_strlist_sort(&names);
    record(&e, &names);

    ne_check_conf_text(&e, &names);
    check_names(&e, &names);
    check_ints(&e, &names);
    check_p2p(&e);
    check_shm(&e);
    check_ib(&e);
    check_hca(&e);
    check_socket(&e);
    check_debug(&e);
    check_topo_file(&e);
    pf_nccl_env_version_rules(out, ctx, ne_loaded_version(ctx));
    static const char *const fallback[] = {"hca-no-match", NULL};
    pf_checks_net_remedies(out, ctx, 0, fallback);
    pf_checks_record_advice(out, ctx);

    if (names.n == 0)
        pf_check_set_message(out, "no NCCL_* variables set: NCCL uses its defaults");
    else
        pf_check_set_message(out, "%zu NCCL_* variable%s, read as intended", names.n,
                             names.n == 1 ? "" : "s");
    pf_strlist_free(&names);
}
