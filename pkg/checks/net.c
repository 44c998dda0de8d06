/* net.interfaces: the interfaces NCCL's socket transport and bootstrap would use, by NCCL's own
 * rules (pkg/ncclenv), on the real interfaces of the pod's network namespace (pkg/netif). */
#define _GNU_SOURCE
#include "checks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "../ncclenv/ncclenv.h"
#include "../netif/netif.h"

static const char *origin_of(struct pf_ctx *ctx, const char *name, char *buf, size_t n)
{
    const char *o = pf_env_origin(&ctx->env, name);
    if (!o || strcmp(o, "environment") == 0)
        snprintf(buf, n, "from the environment");
    else
        snprintf(buf, n, "from %s", o);
    return buf;
}

static bool has_addr(const struct pf_netif *i, int family)
{
    for (size_t a = 0; a < i->naddrs; a++)
        if (family == -1 || i->addrs[a].family == family) return true;
    return false;
}

static void record_iface(struct pf_node *map, const struct pf_netif *i)
{
    struct pf_node *m = pf_node_set_map(map, i->name);
    pf_node_set_str(m, "state", i->up ? (i->running ? "up" : "up, not running") : "down");
    pf_node_set_bool(m, "carrier", i->carrier);
    pf_node_set_int(m, "mtu", i->mtu);
    if (i->mac[0]) pf_node_set_str(m, "mac", i->mac);
    struct pf_node *addrs = pf_node_set_seq(m, "addresses");
    for (size_t a = 0; a < i->naddrs; a++)
        pf_node_add_strf(addrs, "%s/%d", i->addrs[a].text, i->addrs[a].prefix_len);
}

static const char *first_addr(const struct pf_netif *i)
{
    for (size_t a = 0; a < i->naddrs; a++)
        if (i->addrs[a].family == AF_INET) return i->addrs[a].text;
    return i->naddrs ? i->addrs[0].text : "no address";
}

/* The interface a list entry most likely meant: the nearest name within two edits (a
 * transposition, "eht0" for "eth0", is two), or NULL. */
static const char *nearest(const struct pf_netif_list *ifs, const char *entry)
{
    const char *best = NULL;
    int best_d = 3;
    for (size_t i = 0; i < ifs->n; i++) {
        int d = pf_edit_distance(entry, ifs->v[i].name, 2);
        if (d < best_d) {
            best_d = d;
            best = ifs->v[i].name;
        }
    }
    return best_d <= 2 && best_d > 0 ? best : NULL;
}

void pf_checks_ifname_no_match(struct pf_check *out, struct pf_ctx *ctx,
                               const struct pf_netif_list *ifs, const struct pf_ncclenv_list *l)
{
    const char *ifname = pf_env_get(&ctx->env, "NCCL_SOCKET_IFNAME");
    struct pf_strlist all = {0}, meant = {0}, fixed = {0};
    for (size_t i = 0; i < ifs->n; i++)
        pf_strlist_add(&all, ifs->v[i].name);
    char have[1024], where[1200], guess[512] = "", fixit[3000];
    pf_strlist_join(have, sizeof(have), &all, ", ");
    for (size_t e = 0; e < l->n; e++) {
        const char *n = nearest(ifs, l->v[e].name);
        if (n && !pf_strlist_has(&meant, n)) pf_strlist_add(&meant, n);
        pf_strlist_add(&fixed, n ? n : l->v[e].name);
    }
    if (meant.n) {
        char m[400], f[400];
        pf_strlist_join(m, sizeof(m), &meant, " or ");
        pf_strlist_join(f, sizeof(f), &fixed, ",");
        snprintf(guess, sizeof(guess), ": did you mean %s?", m);
        char in[1200] = "the pod spec's env";
        const char *o = pf_env_origin(&ctx->env, "NCCL_SOCKET_IFNAME");
        if (o && strcmp(o, "environment") != 0 &&
            !(ctx->env_file && pf_str_starts(o, ctx->env_file))) {
            snprintf(in, sizeof(in), "%s", o);
            char *colon = strrchr(in, ':');
            if (colon && colon[1] >= '0' && colon[1] <= '9') *colon = '\0';
        }
        snprintf(fixit, sizeof(fixit),
                 "set NCCL_SOCKET_IFNAME=%s%s in %s (the pod has: %s), or remove it",
                 l->exact ? "=" : "", f, in, have);
    } else {
        snprintf(fixit, sizeof(fixit),
                 "set NCCL_SOCKET_IFNAME to the interface NCCL should use (have: %s), e.g. "
                 "the Multus interface net1, or remove it",
                 have);
    }
    pf_check_add_finding(out, "ifname-no-match", PF_FAIL, fixit,
                         "NCCL_SOCKET_IFNAME=%s (%s) matches no interface (have: %s)%s", ifname,
                         origin_of(ctx, "NCCL_SOCKET_IFNAME", where, sizeof(where)), have, guess);
    pf_strlist_free(&all);
    pf_strlist_free(&meant);
    pf_strlist_free(&fixed);
}

/* MTU: against the expectation (expect.mtu), else the chosen interfaces must agree */
static void check_mtu(struct pf_check *out, const struct pf_ctx *ctx,
                      const struct pf_netif_list *ifs, const struct pf_strlist *chosen)
{
    int expect = ctx->config ? ctx->config->expect_mtu : -1;
    struct pf_node *mtus = pf_node_set_map(out->evidence, "mtu");
    int first_mtu = -1;
    const char *first_name = NULL;
    bool disagree = false;
    for (size_t i = 0; i < chosen->n; i++) {
        const struct pf_netif *n = pf_netif_find(ifs, chosen->v[i]);
        if (!n || n->loopback) continue;
        pf_node_set_int(mtus, n->name, n->mtu);
        if (expect > 0 && n->mtu != expect)
            pf_check_add_finding(out, "mtu", PF_FAIL, NULL,
                                 "%s has MTU %d, expected %d (expect.mtu)", n->name, n->mtu,
                                 expect);
        if (first_mtu < 0) {
            first_mtu = n->mtu;
            first_name = n->name;
        } else if (n->mtu != first_mtu) {
            disagree = true;
        }
    }
    if (expect <= 0 && disagree) {
        struct pf_strlist parts = {0};
        for (size_t i = 0; i < chosen->n; i++) {
            const struct pf_netif *n = pf_netif_find(ifs, chosen->v[i]);
            if (n && !n->loopback) pf_strlist_addf(&parts, "%s %d", n->name, n->mtu);
        }
        char list[1024];
        pf_strlist_join(list, sizeof(list), &parts, ", ");
        pf_check_add_finding(out, "mtu", PF_WARN, NULL,
                             "the interfaces NCCL would use disagree on MTU (%s; first %s)", list,
                             first_name);
        pf_strlist_free(&parts);
    }
}

void pf_check_net_interfaces(struct pf_check *out, struct pf_ctx *ctx)
{
    struct pf_netif_list ifs = {0};
    if (pf_netif_list(&ifs) < 0) {
        pf_check_skip(out, "cannot list the network interfaces: %s", pf_err_msg());
        return;
    }
    const char *ifname = pf_env_get(&ctx->env, "NCCL_SOCKET_IFNAME");
    const char *family = pf_env_get(&ctx->env, "NCCL_SOCKET_FAMILY");
    const char *comm_id = pf_env_get(&ctx->env, "NCCL_COMM_ID");
    bool user = ifname && strlen(ifname) > 1;
    int fam = family && strcmp(family, "AF_INET") == 0    ? AF_INET
              : family && strcmp(family, "AF_INET6") == 0 ? AF_INET6
                                                          : -1;
    char where[1200];

    struct pf_strlist chosen = {0}, all = {0};
    pf_ncclenv_socket_ifaces_ex(&chosen, &ifs, ifname, family, comm_id);
    for (size_t i = 0; i < ifs.n; i++)
        pf_strlist_add(&all, ifs.v[i].name);
    char have[1024];
    pf_strlist_join(have, sizeof(have), &all, ", ");

    struct pf_node *ev = out->evidence;
    if (ifname) pf_node_set_str(ev, "ncclSocketIfname", ifname);
    pf_node_set_str(ev, "rule",
                    user ? "NCCL_SOCKET_IFNAME"
                         : "automatic (ib*, then not docker/lo/virbr, then docker, "
                           "lo, virbr)");
    struct pf_node *ch = pf_node_set_seq(ev, "chosen");
    for (size_t i = 0; i < chosen.n; i++)
        pf_node_add_str(ch, chosen.v[i]);
    if (chosen.n) pf_node_set_str(ev, "bootstrap", chosen.v[0]);
    struct pf_node *imap = pf_node_set_map(ev, "interfaces");
    for (size_t i = 0; i < ifs.n; i++)
        record_iface(imap, &ifs.v[i]);

    /* The interfaces the user's list names, whatever their state. */
    struct pf_ncclenv_list l;
    (void)pf_ncclenv_list_parse(&l, user ? ifname : NULL);
    size_t named = 0;
    if (user) {
        for (size_t i = 0; i < ifs.n; i++) {
            const struct pf_netif *n = &ifs.v[i];
            if (!pf_ncclenv_list_match(&l, n->name, -1)) continue;
            named++;
            if (l.exclude) continue; /* an exclusion list names what it leaves out */
            if (!n->up || !n->running) {
                pf_check_add_finding(
                    out, "iface-down", PF_FAIL, NULL,
                    "%s (selected by NCCL_SOCKET_IFNAME=%s) is %s: NCCL skips interfaces that "
                    "are not UP and RUNNING",
                    n->name, ifname,
                    !n->up       ? "down"
                    : n->carrier ? "up but not running"
                                 : "up without carrier");
            } else if (!has_addr(n, fam)) {
                pf_check_add_finding(out, "iface-no-address", PF_FAIL, NULL,
                                     "%s (selected by NCCL_SOCKET_IFNAME=%s) has no %s address: "
                                     "NCCL cannot use it (did the CNI's IPAM assign one?)",
                                     n->name, ifname,
                                     fam == AF_INET    ? "IPv4"
                                     : fam == AF_INET6 ? "IPv6"
                                                       : "IPv4 or IPv6");
            }
        }
        if (named == 0 && !l.exclude) pf_checks_ifname_no_match(out, ctx, &ifs, &l);
    }
    if (chosen.n == 0 && !pf_check_has_finding(out, "ifname-no-match") &&
        !pf_check_has_finding(out, "iface-down") &&
        !pf_check_has_finding(out, "iface-no-address")) {
        if (user)
            pf_check_add_finding(out, "ifname-no-match", PF_FAIL, NULL,
                                 "NCCL_SOCKET_IFNAME=%s (%s) leaves no interface that is running "
                                 "and has an address (have: %s)",
                                 ifname, origin_of(ctx, "NCCL_SOCKET_IFNAME", where, sizeof(where)),
                                 have);
        else
            pf_check_add_finding(out, "iface-no-address", PF_FAIL, NULL,
                                 "no interface is running with an address: NCCL's bootstrap has "
                                 "no interface to use (have: %s)",
                                 have);
    }

    check_mtu(out, ctx, &ifs, &chosen);

    if (chosen.n) {
        const struct pf_netif *b = pf_netif_find(&ifs, chosen.v[0]);
        bool only_lo = true;
        for (size_t i = 0; i < chosen.n; i++) {
            const struct pf_netif *n = pf_netif_find(&ifs, chosen.v[i]);
            if (n && !n->loopback) only_lo = false;
        }
        if (only_lo)
            pf_check_add_finding(out, "loopback-only", PF_WARN, NULL,
                                 "NCCL would use only the loopback interface (%s): other pods "
                                 "cannot reach this one over it",
                                 chosen.v[0]);
        char list[1024];
        pf_strlist_join(list, sizeof(list), &chosen, ", ");
        pf_check_set_message(out, "NCCL would use %s (bootstrap: %s %s)", list, chosen.v[0],
                             b ? first_addr(b) : "");
    }
    pf_strlist_free(&chosen);
    pf_strlist_free(&all);
    pf_netif_list_free(&ifs);
}
