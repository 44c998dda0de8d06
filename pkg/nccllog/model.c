/* Processes, files and hosts: which process a line belongs to, what a bare version line
 * belongs to, and per host which network carried inter-node traffic. */
#define _GNU_SOURCE
#include "internal.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <poll.h>
#include <fcntl.h>
#include <strings.h>

static size_t hash_key(const char *host, long pid, const char *pod)
{
    size_t h = 1469598103934665603ull;
    for (const char *s = host; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    h = (h ^ (size_t)pid) * 1099511628211ull;
    if (pid == 0)
        for (const char *s = pod; *s; s++)
            h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static bool same(const struct pf_nccllog_proc *p, const char *host, long pid, const char *pod)
{
    return p->pid == pid && strcmp(p->host, host) == 0 && (pid != 0 || strcmp(p->pod, pod) == 0);
}

struct pf_nccllog_proc *nl_find_proc(struct pf_nccllog *log, const char *host, long pid,
                                     const char *pod)
{
    if (!log->hash) {
        log->hash_cap = 2 * NL_PROCS_MAX;
        log->hash = pf_xcalloc(log->hash_cap, sizeof(*log->hash));
    }
    size_t i = hash_key(host, pid, pod) % log->hash_cap;
    for (; log->hash[i]; i = (i + 1) % log->hash_cap)
        if (same(&log->v[log->hash[i] - 1], host, pid, pod)) return &log->v[log->hash[i] - 1];
    if (log->n >= NL_PROCS_MAX) return NULL;
    log->v = pf_xrealloc(log->v, (log->n + 1) * sizeof(*log->v));
    struct pf_nccllog_proc *p = &log->v[log->n++];
    memset(p, 0, sizeof(*p));
    snprintf(p->host, sizeof(p->host), "%s", host);
    snprintf(p->pod, sizeof(p->pod), "%s", pod);
    p->pid = pid;
    p->file = log->cur ? (int)log->cur - 1 : log->nfiles ? (int)log->nfiles - 1 : 0;
    log->hash[i] = log->n;
    log->finished = false;
    return p;
}

void nl_proc_name(char *out, size_t n, const struct pf_nccllog_proc *p)
{
    if (p->pid)
        snprintf(out, n, "%s:%ld%s%s%s", p->host, p->pid, p->pod[0] ? " (pod " : "", p->pod,
                 p->pod[0] ? ")" : "");
    else
        snprintf(out, n, "%s", p->pod[0] ? p->pod : p->host);
}

void pf_nccllog_file_begin(struct pf_nccllog *log, const char *name)
{
    log->files = pf_xrealloc(log->files, (log->nfiles + 1) * sizeof(*log->files));
    struct pf_nccllog_file *f = &log->files[log->nfiles++];
    memset(f, 0, sizeof(*f));
    snprintf(f->name, sizeof(f->name), "%s", name);
    log->cur = 0;
}

void pf_nccllog_file_use(struct pf_nccllog *log, size_t index)
{
    if (index < log->nfiles) log->cur = index + 1;
}

static struct pf_nccllog_file *cur_file(struct pf_nccllog *log)
{
    if (log->nfiles == 0) pf_nccllog_file_begin(log, "");
    return &log->files[log->cur ? log->cur - 1 : log->nfiles - 1];
}

long pf_nccllog_last_proc(const struct pf_nccllog *log)
{
    if (log->nfiles == 0) return -1;
    const struct pf_nccllog_file *f = &log->files[log->cur ? log->cur - 1 : log->nfiles - 1];
    return f->last_proc ? (long)f->last_proc - 1 : -1;
}

/* "host:pid:tid" -> host, pid; false when the token is not of that shape. */
static bool parse_hpt(const char *tok, size_t len, char *host, size_t hn, long *pid)
{
    /* "host:num:num": pid and tid redacted by whoever pasted the log */
    if (len > 8 && memcmp(tok + len - 8, ":num:num", 8) == 0) {
        nl_copy(host, hn, tok, len - 8);
        *pid = 0;
        return host[0] != '\0';
    }
    size_t i = len, nd = 0;
    while (i > 0 && isdigit((unsigned char)tok[i - 1]))
        i--, nd++;
    if (nd == 0 || i == 0 || tok[i - 1] != ':') return false;
    i--;
    nd = 0;
    while (i > 0 && isdigit((unsigned char)tok[i - 1]))
        i--, nd++;
    if (nd == 0 || nd > 10 || i < 2 || tok[i - 1] != ':') return false;
    *pid = strtol(tok + i, NULL, 10);
    const char *h = tok;
    const char *t = nl_skip_timestamp(h); /* a collector's timestamp glued to the host */
    if (t > h && t < tok + i - 1) h = t;
    /* a launcher's "[...]:" glued to the host ("[host:2]:host:pid:tid"): the host follows it */
    for (const char *q = h; q < tok + i - 1; q++)
        if (q[0] == ']' && q + 1 < tok + i - 1) h = q[1] == ':' ? q + 2 : q + 1;
    /* prose glued in front ("The error is:node-a:11:11"): NCCL's <host> is the hostname cut
     * at its first '.' (src/debug.cc, getHostName), so it holds no ':' and no quote; the host
     * is the run of hostname characters that ends at ":pid" */
    const char *end = tok + i - 1, *b = end;
    while (b > h && (isalnum((unsigned char)b[-1]) || b[-1] == '-' || b[-1] == '_' || b[-1] == '.'))
        b--;
    if (b == end || (b > h && !strchr(":\"'(=,`", b[-1])))
        b = h; /* no such run, or some other mark ("<cluster_name>"): the token as it was */
    nl_copy(host, hn, b, (size_t)(end - b));
    return host[0] != '\0' && *pid >= 0;
}

static bool parse_dev(const char *tok, size_t len)
{
    if (len < 3 || tok[0] != '[' || tok[len - 1] != ']') return false;
    for (size_t i = 1; i + 1 < len; i++)
        if (!isdigit((unsigned char)tok[i]) && !(i == 1 && tok[i] == '-')) return false;
    return true;
}

/* Finds "host:pid:tid [dev]" before mark; where gets what follows [dev] (WARN's file:line). */
static bool find_prefix(const char *s, const char *mark, char *host, size_t hn, long *pid,
                        char *dev, size_t dn, const char **where)
{
    const char *q = s;
    while (q < mark) {
        while (q < mark && *q == ' ')
            q++;
        const char *t = q;
        while (q < mark && *q != ' ')
            q++;
        if (q == t) break;
        if (!parse_hpt(t, (size_t)(q - t), host, hn, pid)) continue;
        const char *r = q;
        while (r < mark && *r == ' ')
            r++;
        const char *d = r;
        while (r < mark && *r != ' ')
            r++;
        if (parse_dev(d, (size_t)(r - d))) {
            nl_copy(dev, dn, d + 1, (size_t)(r - d - 2));
            *where = r;
            return true;
        }
    }
    return false;
}

static void bare_version(struct pf_nccllog *log, const char *v, const struct nl_decor *d)
{
    struct pf_nccllog_file *f = cur_file(log);
    char ver[32] = "", cuda[16] = "";
    if (!nl_parse_version(ver, sizeof(ver), cuda, sizeof(cuda), v)) return;
    log->nccl_lines++;
    struct pf_nccllog_proc *p = f->last_proc ? &log->v[f->last_proc - 1] : NULL;
    if (p && strcmp(f->last_tag, d->tag) == 0 && (!p->version[0] || !strcmp(p->version, ver))) {
        snprintf(p->version, sizeof(p->version), "%s", ver);
        snprintf(p->cuda, sizeof(p->cuda), "%s", cuda);
        return;
    }
    snprintf(f->pending_version, sizeof(f->pending_version), "%s", ver);
    snprintf(f->pending_cuda, sizeof(f->pending_cuda), "%s", cuda);
}

static void nccl_line(struct pf_nccllog *log, char *s, const struct nl_decor *d)
{
    bool warn = false;
    char *mark = strstr(s, "NCCL INFO ");
    size_t mlen = 10;
    if (!mark && (mark = strstr(s, "NCCL WARN "))) warn = true;
    if (!mark && (mark = strstr(s, "] INFO "))) mark++, mlen = 5; /* NCCL <= 2.2 */
    if (!mark) {
        const char *v = strstr(s, "NCCL version ");
        /* a bare version line (NCCL's VERSION level prints no prefix, src/debug.cc), also
         * behind an editor's line number ("12  NCCL version ...", "12 | NCCL version ...") */
        const char *q = s;
        while (q < v && isdigit((unsigned char)*q))
            q++;
        if (v && q > s && q - s <= 7) {
            while (q < v && (*q == ' ' || *q == '|' || *q == ':' || *q == '.'))
                q++;
        }
        if (v && (v == s || q == v)) bare_version(log, v, d);
        return;
    }
    char host[128] = "", dev[16] = "";
    long pid = 0;
    const char *where = NULL;
    struct pf_nccllog_file *f = cur_file(log);
    if (!find_prefix(s, mark, host, sizeof(host), &pid, dev, sizeof(dev), &where)) {
        /* "NCCL INFO" inside some other text is not NCCL's; what is left of a prefix the poster
         * cut ("11:11 [0] ", "[3] ", ":2201:2201 [0] ") is: digits, ':', brackets, spaces */
        if (mark != s && (mark - s > 40 || strspn(s, "0123456789:[]- ") < (size_t)(mark - s)))
            return;
        /* NCCL's message without its prefix (cut by whoever pasted it): the file's */
        snprintf(host, sizeof(host), "-");
        pid = 0;
    }
    const char *base = strrchr(f->name, '/');
    const char *pod = d->pod[0] ? d->pod : pid != 0 ? "" : base ? base + 1 : f->name;
    struct pf_nccllog_proc *p = nl_find_proc(log, host, pid, pid ? "" : pod);
    if (!p) return;
    log->nccl_lines++;
    if (d->pod[0] && !p->pod[0]) snprintf(p->pod, sizeof(p->pod), "%s", d->pod);
    if (dev[0] && dev[0] != '-') nl_list_add(&p->devs, dev);
    f->last_proc = (size_t)(p - log->v) + 1;
    snprintf(f->last_tag, sizeof(f->last_tag), "%s", d->tag);
    if (f->pending_version[0] && !p->version[0]) {
        snprintf(p->version, sizeof(p->version), "%s", f->pending_version);
        snprintf(p->cuda, sizeof(p->cuda), "%s", f->pending_cuda);
        f->pending_version[0] = '\0';
    }
    const char *msg = mark + mlen;
    if (!warn)
        nl_parse_info(log, p, msg);
    else
        nl_parse_warn(p, where ? where : "", where ? (size_t)(mark - where) : 0, msg, d->repeat);
}

void pf_nccllog_line(struct pf_nccllog *log, const char *line, size_t len)
{
    log->lines++;
    if (len >= PF_NCCLLOG_LINE_MAX) {
        log->cut_lines++;
        len = PF_NCCLLOG_LINE_MAX - 1;
    }
    if (!memmem(line, len, "NCCL", 4) && !memmem(line, len, "] INFO ", 7)) return;
    char buf[PF_NCCLLOG_LINE_MAX];
    memcpy(buf, line, len);
    buf[len] = '\0';
    for (size_t i = 0; i < len; i++)
        if (buf[i] == '\0') buf[i] = ' ';
    struct nl_decor d;
    char *s = nl_decor_strip(buf, &d);
    nccl_line(log, s, &d);
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

int pf_nccllog_read_file(struct pf_nccllog *log, const char *path, double deadline)
{
    bool in = strcmp(path, "-") == 0;
    int fd = in ? STDIN_FILENO : open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return pf_err_set(PF_EUSAGE, "log: cannot read %s: %s", path, strerror(errno));
    pf_nccllog_file_begin(log, in ? "stdin" : path);
    enum { CHUNK = 1 << 16 };
    char *buf = pf_xmalloc(CHUNK + PF_NCCLLOG_LINE_MAX);
    size_t have = 0;    /* bytes of the current line kept (at most PF_NCCLLOG_LINE_MAX) */
    size_t linelen = 0; /* its whole length, cut part included */
    char *chunk = buf + PF_NCCLLOG_LINE_MAX;
    ssize_t got;
    size_t total = 0;
    int r = 0;
    while ((got = pf_file_read_by(fd, chunk, CHUNK, deadline)) > 0) {
        size_t n = (size_t)got;
        total += n;
        size_t i = 0;
        while (i < n) {
            char *nl = memchr(chunk + i, '\n', n - i);
            size_t l = nl ? (size_t)(nl - (chunk + i)) : n - i;
            size_t room = PF_NCCLLOG_LINE_MAX - have;
            memcpy(buf + have, chunk + i, l < room ? l : room);
            have += l < room ? l : room;
            linelen += l;
            i += l;
            if (!nl) break;
            pf_nccllog_line(log, buf, linelen >= PF_NCCLLOG_LINE_MAX ? PF_NCCLLOG_LINE_MAX : have);
            have = linelen = 0;
            i++;
        }
    }
    if (got == -2)
        r = pf_err_set(PF_EUSAGE,
                       "log: %s: %s by the deadline (--timeout): a FIFO or a device nobody "
                       "ends?",
                       path, total ? "no end of the file" : "nothing to read");
    else if (got < 0)
        r = pf_err_set(PF_EUSAGE, "log: error reading %s: %s", path, strerror(errno));
    if (linelen > 0)
        pf_nccllog_line(log, buf, linelen >= PF_NCCLLOG_LINE_MAX ? PF_NCCLLOG_LINE_MAX : have);
    free(buf);
    if (!in) close(fd);
    return r;
}

static void proc_free(struct pf_nccllog_proc *p)
{
    pf_strlist_free(&p->devs);
    pf_strlist_free(&p->hcas);
    pf_strlist_free(&p->ifaces);
    pf_strlist_free(&p->gdr_on);
    pf_strlist_free(&p->gdr_off);
    pf_strlist_free(&p->ranks);
    pf_strlist_free(&p->warns);
}

void nl_host_free(struct pf_nccllog_host *h)
{
    free(h->procs);
    pf_strlist_free(&h->hcas);
    pf_strlist_free(&h->ifaces);
    pf_strlist_free(&h->versions);
    pf_strlist_free(&h->ranks);
    pf_strlist_free(&h->pods);
}

void pf_nccllog_free(struct pf_nccllog *log)
{
    for (size_t i = 0; i < log->n; i++)
        proc_free(&log->v[i]);
    for (size_t i = 0; i < log->nhosts; i++)
        nl_host_free(&log->hosts[i]);
    free(log->hosts);
    free(log->v);
    free(log->files);
    free(log->hash);
    memset(log, 0, sizeof(*log));
}

bool nl_proc_collnet(const struct pf_nccllog_proc *p)
{
    return p->collnet || (p->collnet_logged > 0 && strncmp(p->version, "2.20.", 5) == 0);
}

int pf_nccllog_gdr(const struct pf_nccllog_proc *p)
{
    if (p->gdr_channels > 0) return 1;
    if (p->net_channels > 0) return 0;
    if (p->gdr_enabled > 0) return 1;
    if (p->gdr_disabled > 0) return 0;
    return -1;
}

enum pf_nccllog_class pf_nccllog_classify(const char *n, const char *provider)
{
    if (!n || !n[0]) return PF_NCCLLOG_NONE;
    if (strcasecmp(n, "Socket") == 0) return PF_NCCLLOG_SOCKET;
    bool ofi = strcasestr(n, "Libfabric") || strcasecmp(n, "OFI") == 0 || strcasestr(n, "AWS");
    if (ofi && provider &&
        (strcasecmp(provider, "tcp") == 0 || strcasestr(provider, "sockets") ||
         strncasecmp(provider, "tcp;", 4) == 0))
        return PF_NCCLLOG_SOCKET;
    if (ofi || strncmp(n, "IB", 2) == 0 || strcasecmp(n, "gIB") == 0 || strcasestr(n, "RDMA") ||
        strcasestr(n, "UCX") || strcasestr(n, "RoCE") || strcasestr(n, "SHARP"))
        return PF_NCCLLOG_RDMA;
    return PF_NCCLLOG_OTHER;
}

const char *pf_nccllog_class_name(enum pf_nccllog_class c)
{
    static const char *const names[] = {
        [PF_NCCLLOG_RDMA] = "rdma", [PF_NCCLLOG_SOCKET] = "socket", [PF_NCCLLOG_OTHER] = "unknown"};
    return pf_name_of(names, PF_ARRAY_LEN(names), (int)c, "none");
}
