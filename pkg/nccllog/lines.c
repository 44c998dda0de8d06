/* Classifying NCCL's lines (docs/checks/80-collective-nccl.md, `nccl.log`):
 * `host:pid:tid [dev] NCCL INFO msg`, `... file:line (func) NCCL WARN msg`, bare `NCCL
 * version` lines, and what each INFO message of NCCL 2.3 to 2.2x says about the network. */
#define _GNU_SOURCE
#include "internal.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void nl_copy(char *out, size_t n, const char *s, size_t len)
{
    if (n == 0) return;
    if (len >= n) len = n - 1;
    memcpy(out, s, len);
    out[len] = '\0';
}

void nl_list_add(struct pf_strlist *l, const char *s)
{
    if (s[0] && l->n < NL_LIST_MAX && !pf_strlist_has(l, s)) pf_strlist_add(l, s);
}

static void add_int(struct pf_strlist *l, long v)
{
    if (v < 0 || v > 1000000 || l->n >= NL_LIST_MAX) return;
    char b[16];
    snprintf(b, sizeof(b), "%ld", v);
    nl_list_add(l, b);
}

/* The number after key in s ("nranks 16"), -1 when absent. */
static long num_after(const char *s, const char *key)
{
    const char *k = strstr(s, key);
    if (!k) return -1;
    k += strlen(key);
    while (*k == ' ')
        k++;
    if (!isdigit((unsigned char)*k)) return -1;
    long v = strtol(k, NULL, 10);
    return v > 10000000 ? -1 : v;
}

bool nl_parse_version(char *ver, size_t vn, char *cuda, size_t cn, const char *msg)
{
    const char *v = strstr(msg, "NCCL version ");
    if (!v) return false;
    v += strlen("NCCL version ");
    size_t k = 0;
    while (v[k] && (isdigit((unsigned char)v[k]) || v[k] == '.'))
        k++;
    if (k == 0 || !isdigit((unsigned char)v[0])) return false;
    nl_copy(ver, vn, v, k);
    const char *c = strstr(v, "+cuda");
    if (c) {
        c += 5;
        size_t m = 0;
        while (c[m] && (isdigit((unsigned char)c[m]) || c[m] == '.'))
            m++;
        nl_copy(cuda, cn, c, m);
    }
    return true;
}

/* Device lists of every era, into devs (and the OOB interface into oob):
 *   "[0]mlx5_0:1/IB [1]mlx5_3:1/RoCE [RO]; OOB eth0:10.0.0.5<0>"    (2.4+)
 *   "[0]mlx5_0:1/IB/SHARP [1]..."                                     (SHARP plugin)
 *   "[0]={[0] mlx5_2:1/RoCE, [1] mlx5_3:1/RoCE} [1]=..."              (merged NICs)
 *   "[0] mlx5_1:1/IB"                                                 (2.3, one a line) */
static void parse_devs(struct pf_nccllog_proc *p, struct pf_strlist *devs, const char *s, bool oob)
{
    char buf[PF_NCCLLOG_LINE_MAX];
    snprintf(buf, sizeof(buf), "%s", s);
    char *semi = strchr(buf, ';');
    if (semi) *semi = '\0';
    for (char *q = buf; *q; q++)
        if (*q == '{' || *q == '}' || *q == ',' || *q == '=') *q = ' ';
    char *save = NULL;
    char *pending_idx = NULL;
    for (char *t = strtok_r(buf, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
        char *name = t;
        if (t[0] == '[') {
            char *close = strchr(t, ']');
            if (!close || !isdigit((unsigned char)t[1])) continue;
            if (!close[1]) { /* "[0] mlx5_1:1/IB": the name is the next token */
                pending_idx = t;
                continue;
            }
            name = close + 1;
        } else if (!pending_idx) {
            continue;
        }
        pending_idx = NULL;
        char *lt = strchr(name, '<');
        if (lt) *lt = '\0';
        char *sharp = strstr(name, "/SHARP");
        if (sharp) {
            p->sharp = true;
            *sharp = '\0';
        }
        if (strchr(name, ':') || strchr(name, '/')) nl_list_add(devs, name);
    }
    if (semi && oob) {
        const char *o = strstr(semi + 1, "OOB ");
        if (o) {
            o += 4;
            char ifc[128];
            nl_copy(ifc, sizeof(ifc), o, strcspn(o, "< "));
            nl_list_add(&p->ifaces, ifc);
        }
    }
}

static void set_word(char *out, size_t n, const char *s, const char *stop)
{
    char w[64];
    nl_copy(w, sizeof(w), s, strcspn(s, stop));
    pf_trim(w);
    if (w[0]) snprintf(out, n, "%s", w);
}

/* "Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA" and NCCL <= 2.5's
 * "Ring 00 : 7 -> 8 [send] via NET/AWS Libfabric/0". */
static void parse_channel(struct pf_nccllog_proc *p, const char *msg, const char *via)
{
    const char *arrow = strstr(msg, " -> ");
    const char *colon = strstr(msg, " : ");
    bool recv = strstr(msg, "[receive]") != NULL;
    if (arrow && colon && colon < arrow) {
        long left = strtol(colon + 3, NULL, 10);
        long right = strtol(arrow + 4, NULL, 10);
        add_int(&p->ranks, recv ? right : left);
    }
    const char *t = via + 5;
    if (strncmp(t, "NET/", 4) == 0) {
        p->net_channels++;
        if (!p->chan_net[0]) set_word(p->chan_net, sizeof(p->chan_net), t + 4, "/(");
        if (strstr(t, "/GDRDMA")) p->gdr_channels++;
    } else if (strncmp(t, "P2P", 3) == 0) {
        p->p2p_channels++;
    } else if (strncmp(t, "SHM", 3) == 0 || strncmp(t, "direct shared memory", 20) == 0) {
        p->shm_channels++;
    } else if (strncasecmp(t, "NVLS", 4) == 0) {
        p->nvls = true;
    } else if (strncasecmp(t, "COLLNET", 7) == 0) {
        p->collnet = true;
    }
}

static void parse_network(struct pf_nccllog_proc *p, const char *msg)
{
    const char *s;
    if ((s = strstr(msg, "Using network ")))
        set_word(p->network, sizeof(p->network), s + 14, "\r\n");
    else if ((s = strstr(msg, "Using internal Network "))) /* 2.3 */
        set_word(p->network, sizeof(p->network), s + 23, " \r\n");
    else if ((s = strstr(msg, "Assigned NET plugin "))) { /* 2.2x */
        char n[64] = "";
        set_word(n, sizeof(n), s + 20, "\r\n");
        char *to = strstr(n, " to comm");
        if (to) *to = '\0';
        snprintf(p->network, sizeof(p->network), "%s", n);
    } else if (strncmp(msg, "CUDA Dev ", 9) == 0 && (s = strstr(msg, "], ")) &&
               strstr(s, " NIC distance")) { /* 2.4: "CUDA Dev 0[0], Socket NIC distance" */
        char n[64] = "";
        set_word(n, sizeof(n), s + 3, "\r\n");
        char *d = strstr(n, " NIC distance");
        if (d) *d = '\0';
        if (!p->network[0]) snprintf(p->network, sizeof(p->network), "%s", n);
    } else if ((s = strstr(msg, "NCCLNet device used on ")) && (s = strstr(s, " is ")))
        set_word(p->network, sizeof(p->network), s + 4, ".\r\n");
    if (strncmp(msg, "P2P plugin ", 11) == 0 && !p->network[0]) /* the net plugin's name */
        set_word(p->network, sizeof(p->network), msg + 11, " \r\n");
    /* a network plugin's own lines name it: Google's "NET/gIB : GPU Direct RDMA Enabled for
     * HCA 0 'mlx5_0'", GPUDirect-TCPX(O)'s "NET/GPUDirectTCPX ver. 3.1.8." */
    static const char *const plugins[] = {"NET/gIB", "NET/GPUDirectTCPX", "NET/FasTrak"};
    for (size_t i = 0; i < sizeof(plugins) / sizeof(plugins[0]) && !p->network[0]; i++) {
        size_t n = strlen(plugins[i]);
        if (strncmp(msg, plugins[i], n) == 0 && !isalnum((unsigned char)msg[n]))
            snprintf(p->network, sizeof(p->network), "%s", plugins[i] + 4);
    }
    if ((s = strcasestr(msg, "Selected provider is "))) {
        s += strlen("Selected provider is ");
        set_word(p->ofi_provider, sizeof(p->ofi_provider), s, ", \r\n");
    }
}

static void parse_nets(struct pf_nccllog_proc *p, const char *msg)
{
    const char *s;
    if ((s = strstr(msg, "NET/IB : Using ")) || (s = strstr(msg, "NET/IB: Using ")))
        parse_devs(p, &p->hcas, strstr(s, "Using ") + 6, true);
    else if (strncmp(msg, "NET/IB: [", 9) == 0) { /* 2.3: "NET/IB: [0] mlx5_0:1/IB" */
        char d[PF_NCCLLOG_LINE_MAX];
        snprintf(d, sizeof(d), "%s", msg + 8);
        /* 2.27+: "NET/IB: [0] mlx5_0:uverbs0:1/IB provider=Mlx5 ...": name:port/LL as above */
        char *c1 = strchr(d, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL, *sl = strchr(d, '/');
        if (c2 && sl && c2 < sl) memmove(c1, c2, strlen(c2) + 1);
        parse_devs(p, &p->hcas, d, false);
    } else if (strstr(msg, "NET/IB : No device found") || strstr(msg, "NET/IB: No device found"))
        p->ib_no_device = true;
    if ((s = strstr(msg, "NET/Socket : Using ")) || (s = strstr(msg, "NET/Socket: Using "))) {
        parse_devs(p, &p->ifaces, strstr(s, "Using ") + 6, false);
        /* the socket plugin came up: NCCL <= 2.5 uses it when NET/IB found nothing */
        p->socket_up = true;
    } else if (strncmp(msg, "NET : Using interface ", 22) == 0) { /* 2.3 */
        char ifc[128];
        nl_copy(ifc, sizeof(ifc), msg + 22, strcspn(msg + 22, "< "));
        nl_list_add(&p->ifaces, ifc);
    }
    if ((s = strstr(msg, "Bootstrap : Using ")) || (s = strstr(msg, "Bootstrap: Using "))) {
        s = strstr(s, "Using ") + 6;
        if (s[0] == '[') s = strchr(s, ']') ? strchr(s, ']') + 1 : s;
        nl_copy(p->bootstrap, sizeof(p->bootstrap), s, strcspn(s, "< \r\n"));
    }
}

/* GPUDirect RDMA per HCA: "GPU Direct RDMA Enabled for HCA 0 'mlx5_0'", "... Disabled for
 * HCA 0 'mlx5_0' (no module)", 2.4's "GPU Direct RDMA Disabled for GPU 0[0] / HCA 0 (...)". */
static void parse_gdr(struct pf_nccllog_proc *p, const char *msg)
{
    const char *s = strstr(msg, "GPU Direct RDMA ");
    if (!s || strstr(msg, "NET/Socket")) return;
    bool on = strncmp(s + 16, "Enabled", 7) == 0;
    if (!on && strncmp(s + 16, "Disabled", 8) != 0) return;
    if (on)
        p->gdr_enabled++;
    else
        p->gdr_disabled++;
    char name[64] = "";
    const char *q = strchr(s, '\'');
    if (q) {
        nl_copy(name, sizeof(name), q + 1, strcspn(q + 1, "'"));
    } else if ((q = strstr(s, "HCA "))) {
        snprintf(name, sizeof(name), "HCA %ld", strtol(q + 4, NULL, 10));
    }
    if (name[0]) nl_list_add(on ? &p->gdr_on : &p->gdr_off, name);
}

static void parse_comm(struct pf_nccllog_proc *p, const char *msg)
{
    long v;
    if (strstr(msg, " rank ") || strncmp(msg, "rank ", 5) == 0) {
        long nr = num_after(msg, "nranks ");
        if (nr < 0) nr = num_after(msg, "nRanks ");
        if (nr > 0) {
            const char *r = strncmp(msg, "rank ", 5) == 0 ? msg : strstr(msg, " rank ");
            long rank = strtol(r + (r == msg ? 5 : 6), NULL, 10);
            bool valid = rank >= 0 && rank < nr && nr < 10000000;
            if (valid && (nr > p->nranks || (nr == p->nranks && !p->world_rank1)))
                p->world_rank1 = (int)rank + 1;
            if (nr > p->nranks && nr < 10000000) p->nranks = (int)nr;
            add_int(&p->ranks, rank);
        }
    }
    if ((v = num_after(msg, "nNodes ")) > p->nnodes && v < 1000000) p->nnodes = (int)v;
    if ((v = num_after(msg, "localRanks ")) > p->local_ranks && v < 1000000)
        p->local_ranks = (int)v;
    /* the NCCL_PARAM line: "NCCL_IB_DISABLE set by environment to 1." */
    if (strncmp(msg, "NCCL_IB_DISABLE set by environment to ", 38) == 0 && atoi(msg + 38) != 0)
        p->ib_disabled = true;
    /* NCCL's node identity is hostname + boot_id unless NCCL_HOSTID replaces it
     * (src/misc/utils.cc getHostHash): processes with one NCCL_HOSTID are one node to NCCL */
    if (strncmp(msg, "NCCL_HOSTID set by environment to ", 34) == 0)
        nl_copy(p->hostid, sizeof(p->hostid), msg + 34, strcspn(msg + 34, " \r\n"));
    if (strstr(msg, "Init COMPLETE")) p->init_complete++;
    const char *t = strstr(msg, "Init timings");
    if (t && (t = strstr(t, "total "))) {
        double sec = strtod(t + 6, NULL);
        if (sec > p->init_seconds && sec < 1e6) p->init_seconds = sec;
    }
}

static void parse_nvls_collnet(struct pf_nccllog_proc *p, const char *msg)
{
    if (strstr(msg, "NVLS multicast support is available")) p->nvls_cap = true;
    /* NVLS buffers set up ("NVLS comm 0x... headRank 0 nHeads 8 ...") or connected */
    if (strstr(msg, "Connected NVLS") || strncmp(msg, "NVLS comm ", 10) == 0 ||
        strncmp(msg, "NVLS Head ", 10) == 0 || strncmp(msg, "NVLS Creat", 10) == 0)
        p->nvls = true;
    if (strstr(msg, " nvls channels")) {
        const char *s = strstr(msg, " nvls channels");
        while (s > msg && s[-1] != ' ')
            s--;
        if (atoi(s) > 0) p->nvls = true;
    }
    /* "%d coll channels, %d collnet channels, ...": 2.20 prints comm->collNetChannels there,
     * 2.21 to 2.30 comm->nChannels again (src/init.cc at those tags): the version decides */
    const char *cn = strstr(msg, " collnet channels");
    if (cn && strstr(msg, " coll channels, ")) {
        while (cn > msg && cn[-1] != ' ')
            cn--;
        if (atoi(cn) > p->collnet_logged) p->collnet_logged = atoi(cn);
    }
    if (strstr(msg, "Connected CollNet") || strstr(msg, "via COLLNET")) p->collnet = true;
    if (strstr(msg, "Loaded collnet plugin SHARP")) p->sharp = true;
}

void nl_parse_info(struct pf_nccllog *log, struct pf_nccllog_proc *p, const char *msg)
{
    (void)log;
    const char *via;
    if ((strncmp(msg, "Channel ", 8) == 0 || strncmp(msg, "Ring ", 5) == 0) &&
        (via = strstr(msg, " via ")))
        parse_channel(p, msg, via);
    else if (strstr(msg, "NCCL version "))
        nl_parse_version(p->version, sizeof(p->version), p->cuda, sizeof(p->cuda), msg);
    else if (strncmp(msg, "NET/", 4) == 0 || strstr(msg, "Using ") || strstr(msg, "NET plugin") ||
             strncmp(msg, "CUDA Dev ", 9) == 0 || strncmp(msg, "P2P plugin ", 11) == 0)
        parse_network(p, msg);
    parse_nets(p, msg);
    parse_gdr(p, msg);
    parse_comm(p, msg);
    parse_nvls_collnet(p, msg);
}

static int warn_kind(const char *m)
{
    if (strcasestr(m, "connection refused")) return PF_NCCLLOG_W_REFUSED;
    if (strcasestr(m, "closed by remote") || strcasestr(m, "connection closed") ||
        strcasestr(m, "connection reset") || strcasestr(m, "remote process exited"))
        return PF_NCCLLOG_W_CLOSED;
    if (strcasestr(m, "timeout") || strcasestr(m, "timed out")) return PF_NCCLLOG_W_TIMEOUT;
    if (strstr(m, "ibv_") || strstr(m, "libibverbs") || strstr(m, "Got completion") ||
        strstr(m, "NET/IB"))
        return PF_NCCLLOG_W_IBV;
    /* CUDACHECK's "Cuda failure", P2P's "CUDA IPC handle" / cudaIpc* and alloc.h's "Failed to
     * CUDA malloc" (NVIDIA/nccl src/include/checks.h, transport/p2p.cc, include/alloc.h) */
    if (strcasestr(m, "cuda failure") || strcasestr(m, "cuda error") || strcasestr(m, "cuda ipc") ||
        strstr(m, "cudaIpc") || strstr(m, "Failed to CUDA "))
        return PF_NCCLLOG_W_CUDA;
    /* shm.h's "shm_open failed", proxy.cc's "shm unlink failed" (2.3 to 2.30) */
    if (strstr(m, "/dev/shm") || strcasestr(m, "shared memory") || strstr(m, "shm_open") ||
        strstr(m, " shm "))
        return PF_NCCLLOG_W_SHM;
    if (strstr(m, "NET/OFI") || strcasestr(m, "plugin")) return PF_NCCLLOG_W_PLUGIN;
    /* SYSCHECK's "Call to NAME failed" and socket.h / socket.cc's "Net : ..." errors */
    const char *call = strstr(m, "Call to ");
    if (strcasestr(m, "system error") || strcasestr(m, "socket") || strcasestr(m, "connect") ||
        strcasestr(m, "unreachable") || strncmp(m, "Net : ", 6) == 0 ||
        (call && strstr(call, " failed")))
        return PF_NCCLLOG_W_SYSERR;
    return PF_NCCLLOG_W_OTHER;
}

void nl_parse_warn(struct pf_nccllog_proc *p, const char *where, size_t wlen, const char *msg,
                   int repeat)
{
    p->nwarns += (size_t)repeat;
    p->warns_by_kind[warn_kind(msg)] += repeat;
    /* What the line proves follows from who printed it: net_ib.cc's completion path (the
     * file:line NCCL's WARN carries, or the "NET/IB" its format starts with) ran on a connected
     * IB queue pair. A WARN of the socket layer (misc/socket.cc, transport/net_socket.cc) proves
     * nothing of the net: the bootstrap uses sockets whatever the net. */
    bool from_ib =
        (wlen >= 6 && memmem(where, wlen, "net_ib", 6)) || strncmp(msg, "NET/IB", 6) == 0;
    if (from_ib && strstr(msg, "Got completion")) p->ib_completion = true;
    if (p->warns.n >= NL_WARNS_KEPT) return;
    char w[1024];
    while (wlen > 0 && where[wlen - 1] == ' ')
        wlen--;
    if (wlen > 0)
        snprintf(w, sizeof(w), "%.*s %s", (int)(wlen > 200 ? 200 : wlen), where, msg);
    else
        snprintf(w, sizeof(w), "%s", msg);
    pf_trim(w);
    pf_strlist_add(&p->warns, w);
}

static const char *const kind_names[PF_NCCLLOG_W_KINDS] = {
    "connection-refused",
    "connection-closed",
    "timeout",
    "system-error",
    "ibverbs",
    "cuda",
    "shm",
    "plugin",
    "other",
};

const char *pf_nccllog_warn_kind_name(int kind)
{
    return kind >= 0 && kind < PF_NCCLLOG_W_KINDS ? kind_names[kind] : "other";
}
