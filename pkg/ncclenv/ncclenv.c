/* ncclenv: NCCL's environment syntax, read the way NCCL 2.x reads it (src/misc/utils.cc
 * parseStringList/matchIfList, src/misc/param.cc ncclLoadParam, src/graph/paths.cc
 * ncclGetLevel, src/misc/socket.cc ncclFindInterfaces, src/os/linux.cc). */
#define _GNU_SOURCE
#include "ncclenv.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#define NAME_MAX_NCCL 63 /* NCCL keeps 63 characters of an entry (char prefix[64]) */
#define SOCKET_MAX_IFS 16

/* ---- lists */

/* Parses one ":"-separated field the way atoi does; *clean false on anything else. */
static int field_int(const char *s, size_t n, bool *clean)
{
    char buf[32];
    if (n >= sizeof(buf)) {
        *clean = false;
        n = sizeof(buf) - 1;
    }
    memcpy(buf, s, n);
    buf[n] = '\0';
    char *end;
    errno = 0;
    long v = strtol(buf, &end, 10);
    if (end == buf || *end != '\0' || errno || v < 0 || v > INT_MAX) *clean = false;
    if (errno || v > INT_MAX || v < INT_MIN)
        return (int)(v > 0 ? INT_MAX : INT_MIN); /* atoi's result is undefined here anyway */
    return (int)v;
}

int pf_ncclenv_list_parse(struct pf_ncclenv_list *out, const char *text)
{
    memset(out, 0, sizeof(*out));
    if (!text) return 0;
    const char *p = text;
    char problem[256] = "";
#define PROBLEM(...)                                                                               \
    do {                                                                                           \
        if (!problem[0]) snprintf(problem, sizeof(problem), __VA_ARGS__);                          \
    } while (0)
    if (*p == '^') {
        out->exclude = true;
        p++;
    }
    if (*p == '=') {
        out->exact = true;
        p++;
    }
    if (text[0] == '=' && text[1] == '^')
        PROBLEM("\"=^\" is not an exclusion: NCCL reads \"^\" only as the first character "
                "(write \"^=\")");
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        const char *entry = p;
        p = comma ? comma + 1 : p + len;
        if (len == 0) continue; /* strtok skips empty entries */
        /* name[:port[:rail[:plane]]] */
        const char *colon = memchr(entry, ':', len);
        size_t nlen = colon ? (size_t)(colon - entry) : len;
        if (nlen == 0) {
            PROBLEM("entry \"%.*s\" has no name: NCCL skips it", (int)(len > 40 ? 40 : len), entry);
            continue;
        }
        if (out->n >= PF_NCCLENV_LIST_MAX) {
            PROBLEM("more than %d entries: NCCL ignores the rest", PF_NCCLENV_LIST_MAX);
            continue;
        }
        struct pf_ncclenv_entry *e = &out->v[out->n++];
        size_t keep = nlen > NAME_MAX_NCCL ? NAME_MAX_NCCL : nlen;
        memcpy(e->name, entry, keep);
        e->name[keep] = '\0';
        e->port = -1;
        if (nlen > NAME_MAX_NCCL)
            PROBLEM("entry \"%.40s...\" is longer than %d characters: NCCL cuts it", e->name,
                    NAME_MAX_NCCL);
        for (size_t k = 0; k < nlen; k++)
            if (isspace((unsigned char)entry[k])) {
                PROBLEM("entry \"%.*s\" holds a blank: NCCL does not trim, so it matches no "
                        "device",
                        (int)(nlen > 40 ? 40 : nlen), entry);
                break;
            }
        if (colon) {
            const char *f = colon + 1;
            const char *lend = entry + len;
            int field = 0;
            while (f <= lend && field < 3) {
                const char *c2 = memchr(f, ':', (size_t)(lend - f));
                size_t flen = c2 ? (size_t)(c2 - f) : (size_t)(lend - f);
                if (flen > 0) {
                    bool clean = true;
                    int v = field_int(f, flen, &clean);
                    if (field == 0) {
                        e->port = v;
                        if (!clean)
                            PROBLEM("port \"%.*s\" of %s is not a number: NCCL reads %d",
                                    (int)(flen > 20 ? 20 : flen), f, e->name, v);
                        else if (v == 0)
                            PROBLEM("port 0 of %s: ports count from 1, so it matches nothing",
                                    e->name);
                    } else if (!clean) {
                        PROBLEM("%s \"%.*s\" of %s is not a number", field == 1 ? "rail" : "plane",
                                (int)(flen > 20 ? 20 : flen), f, e->name);
                    }
                }
                field++;
                if (!c2) break;
                f = c2 + 1;
            }
        }
    }
    if (out->n == 0 && text[0])
        PROBLEM("no entries: NCCL treats an empty list as \"%s\"",
                out->exclude ? "exclude everything" : "select everything");
#undef PROBLEM
    if (problem[0]) return pf_err_set(PF_EINVAL, "%s", problem);
    return 0;
}

bool pf_ncclenv_list_match(const struct pf_ncclenv_list *l, const char *name, int port)
{
    bool m = l->n == 0; /* NCCL: no list means everything */
    for (size_t i = 0; i < l->n && !m; i++) {
        const struct pf_ncclenv_entry *e = &l->v[i];
        bool name_ok =
            l->exact ? strcmp(name, e->name) == 0 : strncmp(name, e->name, strlen(e->name)) == 0;
        bool port_ok = port == -1 || e->port == -1 || port == e->port;
        m = name_ok && port_ok;
    }
    return m != l->exclude;
}

/* ---- integers */

static const char *skip_blanks(const char *s)
{
    while (*s && isspace((unsigned char)*s))
        s++;
    return s;
}

long long pf_ncclenv_int(const char *s, bool *clean)
{
    if (clean) *clean = false;
    if (!s || !*s) return 0;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 0);
    bool ok = end != s && errno == 0 && *skip_blanks(end) == '\0';
    if (clean) *clean = ok;
    return v;
}

enum pf_ncclenv_int_kind pf_ncclenv_param(const char *s, long long dflt, long long *out)
{
    *out = dflt;
    if (!s || !*s) return PF_NCCLENV_INT_UNSET;
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 0);
    if (errno == ERANGE) return PF_NCCLENV_INT_RANGE;
    *out = v;
    if (end == s || *skip_blanks(end) != '\0') return PF_NCCLENV_INT_PARTIAL;
    return PF_NCCLENV_INT_CLEAN;
}

bool pf_ncclenv_is_octal(const char *s)
{
    if (!s) return false;
    s = skip_blanks(s);
    if (*s == '+' || *s == '-') s++;
    return s[0] == '0' && isdigit((unsigned char)s[1]);
}

/* ---- levels */

static const char *const level_names[] = {"LOC", "NVL", "NVB", "C2C", "PIX",
                                          "PXB", "P2C", "PXN", "PHB", "SYS"};

const char *pf_ncclenv_level_names(void)
{
    return "LOC NVL NVB C2C PIX PXB P2C PXN PHB SYS";
}

const char *pf_ncclenv_level(const char *s)
{
    if (!s) return NULL;
    for (size_t i = 0; i < PF_ARRAY_LEN(level_names); i++)
        if (strcmp(s, level_names[i]) == 0) return level_names[i];
    if (s[0] >= '0' && s[0] <= '9') {
        /* legacy numbering 0..4: LOC PIX PXB PHB SYS; NCCL clamps above 4 */
        static const char *const old[] = {"LOC", "PIX", "PXB", "PHB", "SYS"};
        errno = 0;
        long v = strtol(s, NULL, 0);
        if (errno || v > INT_MAX) return NULL; /* NCCL's int conversion goes wrong here */
        return old[v > 4 ? 4 : v];
    }
    return NULL;
}

/* ---- names */

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static const char *find_known(const char *name)
{
    const char *const *p = bsearch(&name, pf_ncclenv_names, pf_ncclenv_names_count,
                                   sizeof(pf_ncclenv_names[0]), cmp_name);
    return p ? *p : NULL;
}

bool pf_ncclenv_known(const char *name)
{
    return name && (find_known(name) != NULL || pf_ncclenv_change(name) != NULL);
}

const char *pf_ncclenv_suggest(const char *name)
{
    if (!name || !*name || strlen(name) > 100) return NULL;
    char up[128];
    size_t n = strlen(name);
    for (size_t i = 0; i <= n; i++)
        up[i] = (char)toupper((unsigned char)name[i]);
    if (strcmp(up, name) != 0 && find_known(up))
        return find_known(up); /* a case slip: NCCL's names are case-sensitive */
    /* near misses only: one edit for short names, two for longer, three for long ones */
    int limit = n <= 10 ? 1 : n <= 18 ? 2 : 3;
    const char *best = NULL;
    int best_d = limit + 1;
    for (size_t i = 0; i < pf_ncclenv_names_count; i++) {
        int d = pf_edit_distance(up, pf_ncclenv_names[i], limit);
        if (d < best_d) {
            best_d = d;
            best = pf_ncclenv_names[i];
        }
    }
    if (best && strcmp(best, name) == 0) return NULL;
    return best_d <= limit ? best : NULL;
}

bool pf_ncclenv_is_int_param(const char *name)
{
    if (!name) return false;
    return bsearch(&name, pf_ncclenv_int_names, pf_ncclenv_int_names_count,
                   sizeof(pf_ncclenv_int_names[0]), cmp_name) != NULL;
}

struct note {
    const char *name;
    const char *note;
};

/* env.rst documents these, but NCCL 2.28/2.30 read none of them. */
static const struct note obsolete_names[] = {
    {"NCCL_CHECKS_DISABLE", "deprecated in NCCL 2.2.12, no longer read"},
    {"NCCL_IB_CUDA_SUPPORT", "removed in NCCL 2.4.0: use NCCL_NET_GDR_LEVEL"},
    {"NCCL_IB_GDR_LEVEL", "renamed NCCL_NET_GDR_LEVEL in NCCL 2.4.0, no longer read"},
    {"NCCL_LL_THRESHOLD", "removed in NCCL 2.5: use NCCL_PROTO"},
    {"NCCL_SINGLE_RING_THRESHOLD", "removed in NCCL 2.3"},
    {"NCCL_TREE_THRESHOLD", "removed in NCCL 2.5: use NCCL_ALGO"},
};

/* The note of name in table t[0..n), or NULL. */
static const char *note_of(const struct note *t, size_t n, const char *name)
{
    for (size_t i = 0; name && i < n; i++)
        if (strcmp(name, t[i].name) == 0) return t[i].note;
    return NULL;
}

const char *pf_ncclenv_obsolete(const char *name)
{
    return note_of(obsolete_names, PF_ARRAY_LEN(obsolete_names), name);
}

/* Checked against the NCCL source at each release tag (v2.20.5-1 ... v2.30.7-1):
 * NCCL_MNNVL: NCCL_PARAM(MNNVL, "MNNVL") in src/init.cc of 2.20 only; 2.21 has
 *   NCCL_PARAM(MNNVLEnable, "MNNVL_ENABLE", 2).
 * NCCL_WORK_FIFO_DEPTH: NCCL_PARAM(WorkFifoDepth) in src/init.cc up to 2.21.5; 2.22.3 has
 *   NCCL_PARAM(WorkFifoBytes, "WORK_FIFO_BYTES", 1 << 20) instead.
 * NCCL_PROXY_PROFILE: ncclGetEnv in src/misc/profiler.cc up to 2.22.3; 2.23.4 loads profiler
 *   plugins (NCCL_PROFILER_PLUGIN) there instead.
 * NCCL_CUDA_PATH: ncclGetEnv in src/misc/cudawrap.cc up to 2.20.5; 2.21.5 takes the driver's
 *   entry points from the CUDA runtime (cudaGetDriverEntryPoint).
 * NCCL_IB_ROCE_VERSION_NUM, NCCL_IB_ADDR_FAMILY, NCCL_IB_ADDR_RANGE: src/transport/net_ib.cc
 *   from 2.21.5 (ncclIbGetGidIndex); NCCL_RUNTIME_CONNECT: src/init.cc from 2.22.3. */
static const struct pf_ncclenv_change changes[] = {
    {"NCCL_CUDA_PATH", 0, 22100, NULL,
     "NCCL takes the CUDA driver's entry points from the CUDA runtime"},
    {"NCCL_IB_ADDR_FAMILY", 22100, 0, NULL, "it steers the automatic RoCE GID choice"},
    {"NCCL_IB_ADDR_RANGE", 22100, 0, NULL, "it steers the automatic RoCE GID choice"},
    {"NCCL_IB_ROCE_VERSION_NUM", 22100, 0, NULL, "it steers the automatic RoCE GID choice"},
    {"NCCL_MNNVL", 22000, 22100, "NCCL_MNNVL_ENABLE",
     "multi-node NVLink is switched by NCCL_MNNVL_ENABLE"},
    {"NCCL_MNNVL_ENABLE", 22100, 0, NULL, "NCCL 2.20 reads NCCL_MNNVL instead"},
    {"NCCL_PROFILER_PLUGIN", 22300, 0, NULL, "profiler plugins came with it"},
    {"NCCL_PROXY_PROFILE", 0, 22300, "NCCL_PROFILER_PLUGIN",
     "proxy profiling moved to profiler plugins"},
    {"NCCL_RUNTIME_CONNECT", 22200, 0, NULL, "connections were set up at init before it"},
    {"NCCL_WORK_FIFO_BYTES", 22200, 0, NULL, "older releases read NCCL_WORK_FIFO_DEPTH (entries)"},
    {"NCCL_WORK_FIFO_DEPTH", 0, 22200, "NCCL_WORK_FIFO_BYTES",
     "the work FIFO is sized in bytes (default 1 MiB), not in entries"},
};

const struct pf_ncclenv_change *pf_ncclenv_change(const char *name)
{
    if (!name) return NULL;
    for (size_t i = 0; i < PF_ARRAY_LEN(changes); i++)
        if (strcmp(name, changes[i].name) == 0) return &changes[i];
    return NULL;
}

static const struct note foreign_names[] = {
    {"NCCL_ASYNC_ERROR_HANDLING",
     "PyTorch reads it as a deprecated alias of TORCH_NCCL_ASYNC_ERROR_HANDLING"},
    {"NCCL_BLOCKING_WAIT", "PyTorch reads it as a deprecated alias of TORCH_NCCL_BLOCKING_WAIT"},
    {"NCCL_DESYNC_DEBUG", "PyTorch reads it as a deprecated alias of TORCH_NCCL_DESYNC_DEBUG"},
    {"NCCL_ENABLE_TIMING", "PyTorch reads it as a deprecated alias of TORCH_NCCL_ENABLE_TIMING"},
    {"NCCL_TESTS_MIN_BW", "nccl-tests reads it (minimum average bus bandwidth)"},
    {"NCCL_VERSION", "NVIDIA container images set it to record the installed NCCL version"},
};

const char *pf_ncclenv_foreign(const char *name)
{
    return note_of(foreign_names, PF_ARRAY_LEN(foreign_names), name);
}

/* ---- socket interfaces */

static int family_of(const char *family)
{
    if (!family) return -1;
    if (strcmp(family, "AF_INET") == 0) return AF_INET;
    if (strcmp(family, "AF_INET6") == 0) return AF_INET6;
    return -1;
}

/* ncclOsFindInterfaces: getifaddrs order is every IPv4 address (by interface index), then
 * every IPv6 address; an interface is taken once, at its first qualifying address. */
static void find_ifaces(struct pf_strlist *out, const struct pf_netif_list *ifs,
                        const char *prefix_list, int family)
{
    struct pf_ncclenv_list l;
    (void)pf_ncclenv_list_parse(&l, prefix_list);
    static const int fams[] = {AF_INET, AF_INET6};
    for (size_t f = 0; f < PF_ARRAY_LEN(fams); f++) {
        if (family != -1 && fams[f] != family) continue;
        for (size_t i = 0; i < ifs->n && out->n < SOCKET_MAX_IFS; i++) {
            const struct pf_netif *nif = &ifs->v[i];
            if (!nif->running) continue;
            bool has = false;
            for (size_t a = 0; a < nif->naddrs && !has; a++) {
                const struct pf_netif_addr *ad = &nif->addrs[a];
                if (ad->family != fams[f]) continue;
                if (ad->family == AF_INET6) {
                    struct in6_addr in6;
                    if (inet_pton(AF_INET6, ad->text, &in6) == 1 && IN6_IS_ADDR_LOOPBACK(&in6))
                        continue;
                }
                has = true;
            }
            if (!has || !pf_ncclenv_list_match(&l, nif->name, -1)) continue;
            if (!pf_strlist_has(out, nif->name)) pf_strlist_add(out, nif->name);
        }
    }
}

static bool same_subnet(const struct pf_netif_addr *a, int fam, const unsigned char *remote)
{
    unsigned char local[16];
    if (a->family != fam || inet_pton(fam, a->text, local) != 1) return false;
    int bits = a->prefix_len;
    int total = fam == AF_INET ? 32 : 128;
    if (bits < 0 || bits > total) bits = total;
    for (int i = 0; i < total / 8; i++) {
        int b = bits - i * 8;
        unsigned char mask = b >= 8 ? 0xff : b <= 0 ? 0 : (unsigned char)(0xff << (8 - b));
        if ((local[i] & mask) != (remote[i] & mask)) return false;
    }
    return true;
}

/* The address part of "a.b.c.d:port" or "[v6]:port"; false for a host name. */
static bool comm_id_addr(const char *comm_id, int *fam, unsigned char *addr)
{
    char buf[128];
    if (!comm_id || strlen(comm_id) >= sizeof(buf)) return false;
    snprintf(buf, sizeof(buf), "%s", comm_id);
    if (buf[0] == '[') {
        char *close = strchr(buf, ']');
        if (!close) return false;
        *close = '\0';
        *fam = AF_INET6;
        return inet_pton(AF_INET6, buf + 1, addr) == 1;
    }
    char *colon = strrchr(buf, ':');
    if (colon) *colon = '\0';
    *fam = AF_INET;
    return inet_pton(AF_INET, buf, addr) == 1;
}

int pf_ncclenv_socket_ifaces_ex(struct pf_strlist *out, const struct pf_netif_list *ifs,
                                const char *ifname, const char *family, const char *comm_id)
{
    int fam = family_of(family);
    if (ifname && strlen(ifname) > 1) {
        find_ifaces(out, ifs, ifname, fam);
        return (int)out->n;
    }
    find_ifaces(out, ifs, "ib", fam);
    if (out->n == 0 && comm_id && strlen(comm_id) > 1) {
        /* ncclFindInterfaceMatchSubnet: any interface, running or not, first match only */
        unsigned char remote[16];
        int rfam;
        if (comm_id_addr(comm_id, &rfam, remote)) {
            for (size_t i = 0; i < ifs->n && out->n == 0; i++)
                for (size_t a = 0; a < ifs->v[i].naddrs; a++)
                    if (same_subnet(&ifs->v[i].addrs[a], rfam, remote)) {
                        pf_strlist_add(out, ifs->v[i].name);
                        break;
                    }
        }
    }
    if (out->n == 0) find_ifaces(out, ifs, "^docker,lo,virbr", fam);
    if (out->n == 0) find_ifaces(out, ifs, "docker", fam);
    if (out->n == 0) find_ifaces(out, ifs, "lo", fam);
    if (out->n == 0) find_ifaces(out, ifs, "virbr", fam);
    return (int)out->n;
}

int pf_ncclenv_socket_ifaces(struct pf_strlist *out, const struct pf_netif_list *ifs,
                             const char *ifname, const char *family)
{
    return pf_ncclenv_socket_ifaces_ex(out, ifs, ifname, family, NULL);
}
