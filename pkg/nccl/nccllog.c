/* Reading NCCL_DEBUG=INFO output (REFERENCE.md §6): which network each process used, its
 * HCAs or interfaces, GPUDirect RDMA, NVLS/CollNet, versions and every WARN line. Input comes
 * from outside (kubectl logs of any job), so every field is bounded and odd lines are
 * ignored, never trusted. */
#define _GNU_SOURCE
#include "nccl.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LINE_MAX_ 4096
#define PROCS_MAX 4096
#define WARNS_KEPT 64
#define LIST_MAX 64

static void copy_n(char *out, size_t n, const char *s, size_t len)
{
    if (len >= n) len = n - 1;
    memcpy(out, s, len);
    out[len] = '\0';
}

static void add_unique(struct pf_strlist *l, const char *s)
{
    if (l->n < LIST_MAX && !pf_strlist_has(l, s)) pf_strlist_add(l, s);
}

static struct pf_nccllog_proc *find_proc(struct pf_nccllog *log, const char *host, long pid,
                                         const char *pod)
{
    for (size_t i = 0; i < log->n; i++) {
        struct pf_nccllog_proc *p = &log->v[i];
        if (p->pid == pid && strcmp(p->host, host) == 0 && (pid != 0 || strcmp(p->pod, pod) == 0))
            return p;
    }
    if (log->n >= PROCS_MAX) return NULL;
    log->v = pf_xrealloc(log->v, (log->n + 1) * sizeof(*log->v));
    struct pf_nccllog_proc *p = &log->v[log->n++];
    memset(p, 0, sizeof(*p));
    snprintf(p->host, sizeof(p->host), "%s", host);
    snprintf(p->pod, sizeof(p->pod), "%s", pod);
    p->pid = pid;
    return p;
}

/* "host:pid:tid" -> host, pid; false when the token is not of that shape. */
static bool parse_hpt(const char *tok, size_t len, char *host, size_t hn, long *pid)
{
    /* from the right: digits, ':', digits, ':', host */
    size_t i = len;
    size_t ndig = 0;
    while (i > 0 && isdigit((unsigned char)tok[i - 1]))
        i--, ndig++;
    if (ndig == 0 || i == 0 || tok[i - 1] != ':') return false;
    i--;
    size_t pend = i;
    ndig = 0;
    while (i > 0 && isdigit((unsigned char)tok[i - 1]))
        i--, ndig++;
    if (ndig == 0 || ndig > 10 || i < 2 || tok[i - 1] != ':') return false;
    *pid = strtol(tok + i, NULL, 10);
    (void)pend;
    copy_n(host, hn, tok, i - 1);
    return host[0] != '\0';
}

/* "[N]" -> N as text; false otherwise. */
static bool parse_dev(const char *tok, size_t len, char *out, size_t n)
{
    if (len < 3 || tok[0] != '[' || tok[len - 1] != ']') return false;
    for (size_t i = 1; i + 1 < len; i++)
        if (!isdigit((unsigned char)tok[i]) && !(i == 1 && tok[i] == '-')) return false;
    copy_n(out, n, tok + 1, len - 2);
    return true;
}

/* kubectl logs --prefix: "[pod/NAME/CONTAINER] " at the start of the line. */
static void parse_pod_prefix(const char *s, char *pod, size_t n)
{
    pod[0] = '\0';
    if (strncmp(s, "[pod/", 5) != 0) return;
    const char *end = strchr(s, ']');
    if (!end) return;
    const char *name = s + 5;
    const char *slash = memchr(name, '/', (size_t)(end - name));
    copy_n(pod, n, name, (size_t)((slash ? slash : end) - name));
}

/* "NCCL version 2.21.5+cuda12.4" anywhere in msg. */
static void parse_version(struct pf_nccllog_proc *p, const char *msg)
{
    const char *v = strstr(msg, "NCCL version ");
    if (!v) return;
    v += strlen("NCCL version ");
    size_t k = 0;
    while (v[k] && (isdigit((unsigned char)v[k]) || v[k] == '.'))
        k++;
    if (k == 0) return;
    copy_n(p->version, sizeof(p->version), v, k);
    const char *c = strstr(v, "+cuda");
    if (c) {
        c += 5;
        size_t m = 0;
        while (c[m] && (isdigit((unsigned char)c[m]) || c[m] == '.'))
            m++;
        copy_n(p->cuda, sizeof(p->cuda), c, m);
    }
}

/* "[0]mlx5_0:1/IB [1]mlx5_3:1/RoCE [RO]; OOB eth0:10.0.0.5<0>" -> devices and OOB. */
static void parse_using_list(struct pf_strlist *devs, struct pf_strlist *oob, const char *s)
{
    char buf[LINE_MAX_];
    snprintf(buf, sizeof(buf), "%s", s);
    char *semi = strchr(buf, ';');
    if (semi) *semi = '\0';
    char *save = NULL;
    for (char *t = strtok_r(buf, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
        if (t[0] != '[' || !isdigit((unsigned char)t[1])) continue;
        char *close = strchr(t, ']');
        if (!close || !close[1]) continue;
        char *name = close + 1;
        char *lt = strchr(name, '<');
        if (lt) *lt = '\0';
        add_unique(devs, name);
    }
    if (semi && oob) {
        const char *o = strstr(semi + 1, "OOB ");
        if (o) {
            char ifc[128];
            size_t k = 0;
            o += 4;
            while (o[k] && o[k] != '<' && o[k] != ' ' && k + 1 < sizeof(ifc))
                k++;
            copy_n(ifc, sizeof(ifc), o, k);
            if (ifc[0]) add_unique(oob, ifc);
        }
    }
}

/* "Using network IB" and friends. The name is the rest of the line. */
static void set_network(struct pf_nccllog_proc *p, const char *name)
{
    char n[32];
    size_t k = strcspn(name, "\r\n");
    copy_n(n, sizeof(n), name, k);
    pf_trim(n);
    if (n[0]) snprintf(p->network, sizeof(p->network), "%s", n);
}

static void parse_info(struct pf_nccllog_proc *p, const char *msg)
{
    const char *s;
    parse_version(p, msg);
    if ((s = strstr(msg, "Using network ")))
        set_network(p, s + strlen("Using network "));
    else if (!p->network[0] && (s = strstr(msg, "Assigned NET plugin "))) {
        set_network(p, s + strlen("Assigned NET plugin "));
        char *to = strstr(p->network, " to comm");
        if (to) *to = '\0';
    }
    if ((s = strstr(msg, "NET/IB : Using ")) || (s = strstr(msg, "NET/IB: Using ")))
        parse_using_list(&p->hcas, &p->ifaces, strstr(s, "Using ") + 6);
    else if (strstr(msg, "NET/IB : No device found") || strstr(msg, "NET/IB: No device found"))
        p->ib_no_device = true;
    if ((s = strstr(msg, "NET/Socket : Using ")) || (s = strstr(msg, "NET/Socket: Using ")))
        if (strchr(s, '[')) parse_using_list(&p->ifaces, NULL, strstr(s, "Using ") + 6);
    if ((s = strstr(msg, "Bootstrap : Using ")) || (s = strstr(msg, "Bootstrap: Using "))) {
        s = strstr(s, "Using ") + 6;
        size_t k = strcspn(s, "< \r\n");
        copy_n(p->bootstrap, sizeof(p->bootstrap), s, k);
    }
    if ((s = strstr(msg, "Selected provider is "))) {
        s += strlen("Selected provider is ");
        copy_n(p->ofi_provider, sizeof(p->ofi_provider), s, strcspn(s, ", \r\n"));
    }
    if (strstr(msg, "Channel ") && (s = strstr(msg, " via NET/"))) {
        p->net_channels++;
        if (strstr(s, "/GDRDMA")) p->gdr_channels++;
    }
    if (strstr(msg, "GPU Direct RDMA Enabled for"))
        p->gdr_enabled++;
    else if (strstr(msg, "GPU Direct RDMA Disabled for"))
        p->gdr_disabled++;
    if ((strstr(msg, "NVLS multicast support is available") && !strstr(msg, "not available")) ||
        strstr(msg, "Connected NVLS") || strstr(msg, "via NVLS"))
        p->nvls = true;
    if (strstr(msg, "Loaded collnet plugin") || strstr(msg, "Connected CollNet") ||
        strstr(msg, "via COLLNET") || strstr(msg, "CollNet channels"))
        p->collnet = true;
}

void pf_nccllog_line(struct pf_nccllog *log, const char *line, size_t len)
{
    char buf[LINE_MAX_];
    copy_n(buf, sizeof(buf), line, len);
    buf[strcspn(buf, "\r\n")] = '\0';
    log->lines++;
    char pod[128];
    parse_pod_prefix(buf, pod, sizeof(pod));

    const char *kind = NULL;
    char *mark = strstr(buf, "NCCL INFO ");
    if (mark)
        kind = "INFO";
    else if ((mark = strstr(buf, "NCCL WARN ")))
        kind = "WARN";
    if (!mark) {
        /* NCCL_DEBUG=VERSION/WARN prints the version line bare */
        const char *v = strstr(buf, "NCCL version ");
        if (v && isdigit((unsigned char)v[13])) {
            struct pf_nccllog_proc *p = find_proc(log, pod[0] ? pod : "-", 0, pod);
            if (p) {
                parse_version(p, v);
                log->nccl_lines++;
            }
        }
        return;
    }
    /* tokens before the mark: find "host:pid:tid" followed by "[dev]" */
    char host[128] = "";
    char dev[16] = "";
    long pid = 0;
    const char *file_part = NULL;
    const char *q = buf;
    while (q < mark) {
        while (q < mark && *q == ' ')
            q++;
        const char *t = q;
        while (q < mark && *q != ' ')
            q++;
        size_t tl = (size_t)(q - t);
        if (tl == 0) break;
        char h[128];
        long pd;
        if (!host[0] && parse_hpt(t, tl, h, sizeof(h), &pd)) {
            const char *r = q;
            while (r < mark && *r == ' ')
                r++;
            const char *d = r;
            while (r < mark && *r != ' ')
                r++;
            if (parse_dev(d, (size_t)(r - d), dev, sizeof(dev))) {
                snprintf(host, sizeof(host), "%s", h);
                pid = pd;
                q = r;
                file_part = r;
            }
        }
    }
    if (!host[0]) return; /* "NCCL INFO" in some other text: not NCCL's line format */
    struct pf_nccllog_proc *p = find_proc(log, host, pid, pod);
    if (!p) return;
    log->nccl_lines++;
    if (pod[0] && !p->pod[0]) snprintf(p->pod, sizeof(p->pod), "%s", pod);
    if (dev[0] && dev[0] != '-') add_unique(&p->devs, dev);
    const char *msg = mark + 10;
    if (strcmp(kind, "INFO") == 0) {
        parse_info(p, msg);
        return;
    }
    p->nwarns++;
    if (p->warns.n < WARNS_KEPT) {
        char w[1024];
        while (file_part && *file_part == ' ')
            file_part++;
        size_t fl = file_part ? (size_t)(mark - file_part) : 0;
        while (fl > 0 && file_part[fl - 1] == ' ')
            fl--;
        if (fl > 0)
            snprintf(w, sizeof(w), "%.*s %s", (int)(fl > 200 ? 200 : fl), file_part, msg);
        else
            snprintf(w, sizeof(w), "%s", msg);
        pf_trim(w);
        pf_strlist_add(&p->warns, w);
    }
}

void pf_nccllog_text(struct pf_nccllog *log, const char *text, size_t len)
{
    size_t i = 0;
    while (i < len) {
        const char *nl = memchr(text + i, '\n', len - i);
        size_t l = nl ? (size_t)(nl - (text + i)) : len - i;
        pf_nccllog_line(log, text + i, l);
        i += l + 1;
    }
}

void pf_nccllog_free(struct pf_nccllog *log)
{
    for (size_t i = 0; i < log->n; i++) {
        pf_strlist_free(&log->v[i].devs);
        pf_strlist_free(&log->v[i].hcas);
        pf_strlist_free(&log->v[i].ifaces);
        pf_strlist_free(&log->v[i].warns);
    }
    free(log->v);
    memset(log, 0, sizeof(*log));
}

int pf_nccllog_gdr(const struct pf_nccllog_proc *p)
{
    if (p->gdr_channels > 0) return 1;
    if (p->net_channels > 0) return 0;
    if (p->gdr_enabled > 0) return 1;
    if (p->gdr_disabled > 0) return 0;
    return -1;
}

static bool is_rdma_network(const char *n)
{
    return strcmp(n, "IB") == 0 || strstr(n, "Libfabric") || strcmp(n, "OFI") == 0;
}

static bool is_socket(const char *n)
{
    return strcmp(n, "Socket") == 0;
}

static void proc_name(char *out, size_t n, const struct pf_nccllog_proc *p)
{
    if (p->pid)
        snprintf(out, n, "%s:%ld%s%s%s", p->host, p->pid, p->pod[0] ? " (pod " : "", p->pod,
                 p->pod[0] ? ")" : "");
    else
        snprintf(out, n, "%s", p->pod[0] ? p->pod : p->host);
}

static void add_list(struct pf_node *map, const char *key, const struct pf_strlist *l)
{
    struct pf_node *s = pf_node_set_seq(map, key);
    for (size_t i = 0; i < l->n; i++)
        pf_node_add_str(s, l->v[i]);
}

void pf_nccllog_evidence(struct pf_node *evidence, const struct pf_nccllog *log)
{
    pf_node_set_int(evidence, "lines", (long long)log->lines);
    pf_node_set_int(evidence, "ncclLines", (long long)log->nccl_lines);
    struct pf_node *seq = pf_node_set_seq(evidence, "processes");
    for (size_t i = 0; i < log->n; i++) {
        const struct pf_nccllog_proc *p = &log->v[i];
        struct pf_node *m = pf_node_add_map(seq);
        pf_node_set_str(m, "host", p->host);
        if (p->pid) pf_node_set_int(m, "pid", p->pid);
        if (p->pod[0]) pf_node_set_str(m, "pod", p->pod);
        if (p->devs.n) add_list(m, "cudaDevs", &p->devs);
        if (p->version[0]) pf_node_set_str(m, "ncclVersion", p->version);
        if (p->cuda[0]) pf_node_set_str(m, "cuda", p->cuda);
        if (p->network[0]) pf_node_set_str(m, "network", p->network);
        if (p->ofi_provider[0]) pf_node_set_str(m, "ofiProvider", p->ofi_provider);
        if (p->hcas.n) add_list(m, "hcas", &p->hcas);
        if (p->ifaces.n) add_list(m, "interfaces", &p->ifaces);
        if (p->bootstrap[0]) pf_node_set_str(m, "bootstrap", p->bootstrap);
        int g = pf_nccllog_gdr(p);
        if (g >= 0) pf_node_set_bool(m, "gpuDirectRdma", g == 1);
        if (p->net_channels)
            pf_node_set_strf(m, "netChannels", "%d (%d GDRDMA)", p->net_channels, p->gdr_channels);
        if (p->nvls) pf_node_set_bool(m, "nvls", true);
        if (p->collnet) pf_node_set_bool(m, "collnet", true);
        if (p->nwarns) {
            add_list(m, "warnings", &p->warns);
            if (p->nwarns > p->warns.n)
                pf_node_set_int(m, "warningsNotShown", (long long)(p->nwarns - p->warns.n));
        }
    }
}

void pf_nccllog_findings(struct pf_check *out, const struct pf_nccllog *log,
                         const char *expect_transport)
{
    bool expect_rdma = expect_transport && (strcasecmp(expect_transport, "IB") == 0 ||
                                            strcasecmp(expect_transport, "OFI") == 0);
    /* Does anything in the log say this job had an RDMA network? */
    bool any_rdma = false;
    for (size_t i = 0; i < log->n; i++)
        any_rdma |= is_rdma_network(log->v[i].network);

    struct pf_strlist versions = {0};
    char who[300];
    size_t nsocket = 0, nnogdr = 0;
    for (size_t i = 0; i < log->n; i++) {
        const struct pf_nccllog_proc *p = &log->v[i];
        proc_name(who, sizeof(who), p);
        if (p->version[0] && !pf_strlist_has(&versions, p->version))
            pf_strlist_add(&versions, p->version);
        if (is_socket(p->network)) {
            nsocket++;
            char ifs[256] = "";
            pf_strlist_join(ifs, sizeof(ifs), &p->ifaces, ", ");
            enum pf_status st = (expect_rdma || any_rdma) ? PF_FAIL : PF_WARN;
            const char *why = expect_rdma       ? "expect.transport says RDMA"
                              : any_rdma        ? "other ranks of this job use RDMA"
                              : p->ib_no_device ? "NET/IB found no device"
                                                : "no RDMA network in this log";
            pf_check_add_finding(out, "socket-fallback", st, NULL,
                                 "%s used NET/Socket (%s) for inter-node traffic: %s", who,
                                 ifs[0] ? ifs : "interfaces not logged", why);
        }
        if (is_rdma_network(p->network) && pf_nccllog_gdr(p) == 0) {
            nnogdr++;
            pf_check_add_finding(out, "no-gdr", PF_WARN, NULL,
                                 "%s used %s without GPUDirect RDMA (%d of %d network channels "
                                 "via GDRDMA)",
                                 who, p->network, p->gdr_channels, p->net_channels);
        }
        if (p->nwarns)
            pf_check_add_finding(out, "nccl-warn", PF_WARN, NULL, "%s logged %zu NCCL WARN: %s",
                                 who, p->nwarns, p->warns.n ? p->warns.v[0] : "");
    }
    if (versions.n > 1) {
        pf_strlist_sort(&versions);
        char vs[256];
        pf_strlist_join(vs, sizeof(vs), &versions, ", ");
        char where[512] = "";
        size_t used = 0;
        for (size_t i = 0; i < log->n && used + 1 < sizeof(where); i++) {
            if (!log->v[i].version[0]) continue;
            proc_name(who, sizeof(who), &log->v[i]);
            int k = snprintf(where + used, sizeof(where) - used, "%s%s %s", used ? ", " : "", who,
                             log->v[i].version);
            if (k < 0 || (size_t)k >= sizeof(where) - used) break;
            used += (size_t)k;
        }
        pf_check_add_finding(out, "nccl-version-mismatch", PF_FAIL, NULL,
                             "ranks run different NCCL versions (%s): %s", vs, where);
    }
    size_t nproc = 0;
    for (size_t i = 0; i < log->n; i++)
        nproc += log->v[i].pid != 0;
    char vs[128] = "";
    pf_strlist_join(vs, sizeof(vs), &versions, ", ");
    pf_check_set_message(out, "%zu NCCL process%s, NCCL %s; %zu on Socket, %zu without GDR", nproc,
                         nproc == 1 ? "" : "es", vs[0] ? vs : "version not logged", nsocket,
                         nnogdr);
    pf_strlist_free(&versions);
}
