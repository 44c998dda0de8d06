/* What launchers and log collectors put around NCCL's lines: Open MPI `[1,26]<stdout>:`,
 * torchrun `[rank0]:` / `[default0]:`, `kubectl logs --prefix` `[pod/NAME/CONTAINER]`, Slurm
 * `srun -l` `12: `, MPICH `-l` `[12] `, `[host:slot]:`, pdsh `host: `, Ray `(pid=123, ip=10.0.0.1)`
 * and ` [repeated 15x across cluster]`, docker compose `name_1  | `, ISO and syslog timestamps,
 * ANSI colour codes and CRLF (docs/checks.md, `nccl.log`). */
#define _GNU_SOURCE
#include "internal.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* Length of a valid UTF-8 sequence at s (1..4), 0 when invalid. */
static int utf8_len(const unsigned char *s)
{
    unsigned c = s[0];
    int n = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
    for (int i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    return n;
}

/* ANSI escapes removed, control bytes to spaces, invalid UTF-8 to '?', trailing space cut. */
static void clean(char *buf)
{
    unsigned char *r = (unsigned char *)buf, *w = r;
    while (*r) {
        if (*r == 0x1b) { /* ESC [ params letter, or ESC and one byte */
            r++;
            if (*r == '[') {
                r++;
                while (*r && !isalpha(*r))
                    r++;
            }
            if (*r) r++;
            continue;
        }
        if (*r < 0x20 || *r == 0x7f) {
            *w++ = ' ';
            r++;
        } else if (*r < 0x80) {
            *w++ = *r++;
        } else {
            int n = utf8_len(r);
            if (n == 0) {
                *w++ = '?';
                r++;
            } else {
                while (n-- > 0)
                    *w++ = *r++;
            }
        }
    }
    while (w > (unsigned char *)buf && w[-1] == ' ')
        w--;
    *w = '\0';
}

static bool digits(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isdigit((unsigned char)s[i])) return false;
    return n > 0;
}

/* "YYYY-MM-DD[T ]hh:mm:ss[.frac][Z|+hh:mm|+hhmm]" */
static const char *skip_iso(const char *s)
{
    if (!(digits(s, 4) && s[4] == '-' && digits(s + 5, 2) && s[7] == '-' && digits(s + 8, 2)))
        return s;
    const char *p = s + 10;
    if (*p != 'T' && *p != ' ') return p;
    p++;
    if (!(digits(p, 2) && p[2] == ':' && digits(p + 3, 2) && p[5] == ':' && digits(p + 6, 2)))
        return s;
    p += 8;
    if (*p == '.' || *p == ',')
        for (p++; isdigit((unsigned char)*p); p++)
            ;
    if (*p == 'Z') {
        p++;
    } else if ((*p == '+' || *p == '-') && digits(p + 1, 2)) {
        p += 3;
        if (*p == ':') p++;
        if (digits(p, 2)) p += 2;
    }
    return p;
}

/* syslog "Mar  4 10:11:12 host prog[pid]: " (the host and program are the collector's) */
static const char *skip_syslog(const char *s)
{
    static const char months[] = "JanFebMarAprMayJunJulAugSepOctNovDec";
    bool month = false;
    for (int i = 0; i < 12 && !month; i++)
        month = strncmp(s, months + 3 * i, 3) == 0;
    if (!month || s[3] != ' ') return s;
    const char *p = s + 4;
    if (*p == ' ') p++;
    while (isdigit((unsigned char)*p))
        p++;
    if (*p != ' ' || !(digits(p + 1, 2) && p[3] == ':' && digits(p + 4, 2) && p[6] == ':'))
        return s;
    p += 9;
    /* "host prog[pid]: " when present */
    const char *colon = strstr(p, ": ");
    const char *nccl = strstr(p, "NCCL");
    if (colon && (!nccl || colon < nccl) && colon - p < 128 && memchr(p, ' ', (size_t)(colon - p)))
        return colon + 2;
    return p;
}

const char *nl_skip_timestamp(const char *s)
{
    if (s[0] == '[') {
        const char *e = skip_iso(s + 1);
        if (e != s + 1 && *e == ']') return e + 1;
    }
    const char *e = skip_iso(s);
    if (e != s) return e;
    return skip_syslog(s);
}

static void set(char *out, size_t n, const char *s, size_t len)
{
    nl_copy(out, n, s, len);
}

/* One prefix at s; returns the text after it, or s when none matched. */
static const char *strip_one(const char *s, struct nl_decor *d)
{
    const char *close;
    if (strncmp(s, "[pod/", 5) == 0 && (close = strchr(s, ']'))) {
        const char *name = s + 5;
        const char *slash = memchr(name, '/', (size_t)(close - name));
        set(d->pod, sizeof(d->pod), name, (size_t)((slash ? slash : close) - name));
        return close + 1;
    }
    if (s[0] == '[' && (close = strchr(s, ']')) && close - s < 40) {
        const char *in = s + 1;
        size_t n = (size_t)(close - in);
        const char *comma = memchr(in, ',', n);
        if (comma && digits(in, (size_t)(comma - in)) &&
            digits(comma + 1, (size_t)(close - comma - 1))) {
            /* Open MPI --tag-output "[1,26]<stdout>:" */
            set(d->tag, sizeof(d->tag), comma + 1, (size_t)(close - comma - 1));
            const char *p = close + 1;
            if (*p == '<') {
                const char *gt = strchr(p, '>');
                if (gt) p = gt + 1;
            }
            return *p == ':' ? p + 1 : p;
        }
        size_t k = strncmp(in, "rank", 4) == 0 ? 4 : strncmp(in, "default", 7) == 0 ? 7 : 0;
        if (digits(in + k, n - k) && (close[1] == ':' || close[1] == ' ')) {
            /* torchrun "[rank3]:", "[default3]:"; MPICH -l "[3] " */
            set(d->tag, sizeof(d->tag), in + k, n - k);
            return close[1] == ':' ? close + 2 : close + 1;
        }
        const char *colon = memrchr(in, ':', n);
        if (colon && colon > in && close[1] == ':' && !memchr(in, ' ', n) &&
            digits(colon + 1, (size_t)(close - colon - 1))) {
            /* "[nccl-e9ef-7d4f-1:2]:" host and local slot, as SkyPilot's runs print them */
            set(d->tag, sizeof(d->tag), colon + 1, (size_t)(close - colon - 1));
            return close + 2;
        }
        const char *t = nl_skip_timestamp(s);
        if (t != s) return t;
        return s;
    }
    if (s[0] == '(' && (close = strchr(s, ')')) && close - s < 160) {
        /* Ray "(pid=123, ip=10.0.0.1)", "(RayWorkerWrapper pid=1019)" */
        const char *pid = strstr(s, "pid=");
        if (pid && pid < close) {
            const char *ip = strstr(s, "ip=");
            if (ip && ip < close) set(d->pod, sizeof(d->pod), ip + 3, strcspn(ip + 3, ",)"));
            return close + 1;
        }
        return s;
    }
    if (s[0] == '>' && s[1] == ' ') return s + 2; /* quoted when pasted */
    if (s[0] == '|' && s[1] == ' ') return s + 2; /* log collectors' columns */
    const char *t = nl_skip_timestamp(s);
    if (t != s) return t;
    /* one token, then ":" + space (srun -l "12: ", pdsh "host: ") or spaces + "| " (compose) */
    size_t tl = strcspn(s, " \t");
    if (tl > 0 && tl < 100) {
        if (s[tl - 1] == ':' && s[tl] == ' ' && !memchr(s, ':', tl - 1)) {
            if (digits(s, tl - 1)) set(d->tag, sizeof(d->tag), s, tl - 1);
            return s + tl + 1;
        }
        const char *p = s + tl;
        while (*p == ' ')
            p++;
        if (p > s + tl && p[0] == '|' && (p[1] == ' ' || p[1] == '\0') && !memchr(s, ':', tl)) {
            set(d->pod, sizeof(d->pod), s, tl);
            return p[1] ? p + 2 : p + 1;
        }
    }
    return s;
}

char *nl_decor_strip(char *buf, struct nl_decor *d)
{
    memset(d, 0, sizeof(*d));
    d->repeat = 1;
    clean(buf);
    char *rep = strstr(buf, " [repeated ");
    if (rep && strstr(rep, "x across cluster]")) {
        d->repeat = atoi(rep + 11);
        if (d->repeat < 1 || d->repeat > 1000000) d->repeat = 1;
        *rep = '\0';
    }
    const char *s = buf;
    for (int i = 0; i < 12; i++) {
        while (*s == ' ')
            s++;
        /* NCCL's own text: stop before reading it as a prefix */
        if (strncmp(s, "NCCL ", 5) == 0) break;
        const char *n = strip_one(s, d);
        if (n == s) break;
        s = n;
    }
    while (*s == ' ')
        s++;
    return (char *)s;
}
