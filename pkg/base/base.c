#define _GNU_SOURCE
#include "base.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static _Thread_local char err_msg[1024];

int pf_err_set(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err_msg, sizeof(err_msg), fmt, ap);
    va_end(ap);
    return code;
}

const char *pf_err_msg(void)
{
    return err_msg;
}

void pf_err_clear(void)
{
    err_msg[0] = '\0';
}

void *pf_xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fputs("preflight: out of memory\n", stderr);
        abort();
    }
    return p;
}

void *pf_xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) {
        fputs("preflight: out of memory\n", stderr);
        abort();
    }
    return p;
}

void *pf_xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q) {
        fputs("preflight: out of memory\n", stderr);
        abort();
    }
    return q;
}

char *pf_xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = pf_xmalloc(n);
    memcpy(p, s, n);
    return p;
}

char *pf_xasprintf(const char *fmt, ...)
{
    va_list ap;
    char *s = NULL;
    va_start(ap, fmt);
    int r = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (r < 0) {
        fputs("preflight: out of memory\n", stderr);
        abort();
    }
    return s;
}

/* The text of every buffer that has not allocated yet (git's strbuf_slopbuf). It is const: a
 * write through data before the first add faults instead of passing unnoticed; nothing writes
 * there, because every write is guarded by cap, which stays 0 until data is malloc'ed. */
static const char empty_text[1] = "";

void pf_buf_init(struct pf_buf *b, size_t max)
{
    b->data = (char *)empty_text;
    b->len = 0;
    b->cap = 0;
    b->max = max;
    b->over = false;
}

int pf_buf_add(struct pf_buf *b, const void *p, size_t n)
{
    if (n > b->max || b->len > b->max - n) {
        b->over = true;
        return pf_err_set(PF_ETOOBIG, "buffer limit of %zu bytes exceeded", b->max);
    }
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        b->data = b->cap ? pf_xrealloc(b->data, cap) : pf_xmalloc(cap);
        b->cap = cap;
    }
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

int pf_buf_vaddf(struct pf_buf *b, const char *fmt, va_list ap)
{
    char small[512];
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(small, sizeof(small), fmt, ap2);
    va_end(ap2);
    if (n < 0) return pf_err_set(PF_EINVAL, "format error");
    if ((size_t)n < sizeof(small)) return pf_buf_add(b, small, (size_t)n);
    char *big = pf_xmalloc((size_t)n + 1);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    int r = pf_buf_add(b, big, (size_t)n);
    free(big);
    return r;
}

int pf_buf_addf(struct pf_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = pf_buf_vaddf(b, fmt, ap);
    va_end(ap);
    return r;
}

void pf_buf_reset(struct pf_buf *b)
{
    b->len = 0;
    b->over = false;
    if (b->cap) b->data[0] = '\0';
}

void pf_buf_free(struct pf_buf *b)
{
    if (b->cap) free(b->data);
    b->data = (char *)empty_text;
    b->len = b->cap = 0;
    b->over = false;
}

char *pf_buf_detach(struct pf_buf *b)
{
    char *s = b->cap ? b->data : pf_xstrdup("");
    pf_buf_init(b, b->max);
    return s;
}

const char *pf_buf_str(const struct pf_buf *b)
{
    return b->data ? b->data : "";
}

int pf_buf_check(const struct pf_buf *b, const char *what)
{
    if (!b->over) return 0;
    return pf_err_set(PF_ETOOBIG, "%s is over its limit of %zu bytes", what, b->max);
}

int pf_strlist_addn(struct pf_strlist *l, const char *s, size_t n)
{
    if (l->n + 1 >= l->cap) {
        l->cap = l->cap ? l->cap * 2 : 8;
        l->v = pf_xrealloc(l->v, l->cap * sizeof(char *));
    }
    char *p = pf_xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    l->v[l->n++] = p;
    l->v[l->n] = NULL;
    return 0;
}

int pf_strlist_add(struct pf_strlist *l, const char *s)
{
    return pf_strlist_addn(l, s, strlen(s));
}

int pf_strlist_addf(struct pf_strlist *l, const char *fmt, ...)
{
    va_list ap;
    char *s = NULL;
    va_start(ap, fmt);
    int r = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (r < 0) return pf_err_set(PF_ERR, "out of memory");
    pf_strlist_add(l, s);
    free(s);
    return 0;
}

bool pf_strlist_has(const struct pf_strlist *l, const char *s)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i], s) == 0) return true;
    return false;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void pf_strlist_sort(struct pf_strlist *l)
{
    if (l->n > 1) qsort(l->v, l->n, sizeof(char *), cmp_str);
}

void pf_strlist_join(char *out, size_t n, const struct pf_strlist *l, const char *sep)
{
    size_t used = 0;
    if (n == 0) return;
    out[0] = '\0';
    for (size_t i = 0; i < l->n; i++) {
        int w = snprintf(out + used, n - used, "%s%s", i ? sep : "", l->v[i]);
        if (w < 0 || (size_t)w >= n - used) {
            if (n >= 4) strcpy(out + n - 4, "...");
            return;
        }
        used += (size_t)w;
    }
}

void pf_strlist_free(struct pf_strlist *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    l->v = NULL;
    l->n = l->cap = 0;
}

int pf_snprintf(char *out, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int w = vsnprintf(out, n, fmt, ap);
    va_end(ap);
    if (w < 0 || (size_t)w >= n)
        return pf_err_set(PF_ETOOBIG, "text longer than %zu bytes", n ? n - 1 : 0);
    return 0;
}

int pf_strcpy(char *out, size_t n, const char *s)
{
    size_t len = strlen(s);
    if (n == 0) return PF_ETOOBIG;
    if (len >= n) {
        memcpy(out, s, n - 1);
        out[n - 1] = '\0';
        return PF_ETOOBIG;
    }
    memcpy(out, s, len + 1);
    return 0;
}

char *pf_trim(char *s)
{
    char *p = s;
    while (*p && isspace((unsigned char)*p))
        p++;
    size_t n = strlen(p);
    while (n && isspace((unsigned char)p[n - 1]))
        n--;
    memmove(s, p, n);
    s[n] = '\0';
    return s;
}

bool pf_str_starts(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

int pf_edit_distance(const char *a, const char *b, int limit)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 128 || lb > 128) return limit + 1;
    if ((la > lb ? la - lb : lb - la) > (size_t)limit) return limit + 1;
    int prev[129], cur[129];
    for (size_t j = 0; j <= lb; j++)
        prev[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = (int)i;
        int rowmin = cur[0];
        for (size_t j = 1; j <= lb; j++) {
            int cost = a[i - 1] == b[j - 1] ? 0 : 1;
            int v = prev[j - 1] + cost;
            if (prev[j] + 1 < v) v = prev[j] + 1;
            if (cur[j - 1] + 1 < v) v = cur[j - 1] + 1;
            cur[j] = v;
            if (v < rowmin) rowmin = v;
        }
        if (rowmin > limit) return limit + 1;
        memcpy(prev, cur, sizeof(int) * (lb + 1));
    }
    return prev[lb] > limit ? limit + 1 : prev[lb];
}

double pf_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void pf_utc_timestamp(char *out, size_t n)
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

double pf_deadline_in(double secs, double cutoff)
{
    double d = pf_now() + secs;
    return d < cutoff ? d : cutoff;
}

double pf_deadline_share(double deadline, double share, double lo, double hi)
{
    double now = pf_now();
    if (deadline <= 0) return now + hi;
    double left = deadline - now;
    if (left <= 0) return deadline;
    double d = now + pf_clampd(left * share, lo, hi);
    return d < deadline ? d : deadline;
}

double pf_clampd(double v, double lo, double hi)
{
    return v < lo ? lo : v > hi ? hi : v;
}

static int cmp_dbl(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void pf_sort_dbl(double *v, size_t n)
{
    if (n > 1) qsort(v, n, sizeof(*v), cmp_dbl);
}

double pf_median(double *v, size_t n)
{
    if (n == 0) return 0;
    pf_sort_dbl(v, n);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

const char *pf_name_of(const char *const *names, size_t n, int i, const char *dflt)
{
    return i >= 0 && (size_t)i < n && names[i] ? names[i] : dflt;
}

int pf_buf_base64(struct pf_buf *b, const void *data, size_t n, bool url)
{
    const char *abc = url ? "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
                          : "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const unsigned char *p = data;
    int r = 0;
    for (size_t i = 0; i < n && r == 0; i += 3) {
        unsigned v = (unsigned)p[i] << 16;
        if (i + 1 < n) v |= (unsigned)p[i + 1] << 8;
        if (i + 2 < n) v |= p[i + 2];
        char q[4] = {abc[(v >> 18) & 63], abc[(v >> 12) & 63], i + 1 < n ? abc[(v >> 6) & 63] : '=',
                     i + 2 < n ? abc[v & 63] : '='};
        r = pf_buf_add(b, q, 4);
    }
    return r;
}

int pf_http_url_check(const char *what, const char *url)
{
    /* RFC 3986 §3.1: a scheme is case-insensitive ("HTTPS://" is https://, and libcurl takes
     * it so), so the check of the credentials below must see it too */
    const char *host = strncasecmp(url, "http://", 7) == 0    ? url + 7
                       : strncasecmp(url, "https://", 8) == 0 ? url + 8
                                                              : NULL;
    if (!host || !*host || *host == '/') {
        /* the text may still hold a credential ("htps://user:pw@host", "user:pw@host"): up
         * to the last '@' before the first '/', '?' or '#' after any "://" is not echoed */
        const char *from = strstr(url, "://");
        from = from ? from + 3 : url;
        size_t n = strcspn(from, "/?#");
        const char *at = NULL;
        for (size_t i = 0; i < n; i++)
            if (from[i] == '@') at = from + i;
        if (at)
            return pf_err_set(PF_EUSAGE,
                              "%s: expected an http:// or https:// URL, found \"%.*s***%s\" "
                              "(credentials not shown)",
                              what, (int)(from - url), url, at);
        return pf_err_set(PF_EUSAGE, "%s: expected an http:// or https:// URL, found \"%s\"", what,
                          url);
    }
    size_t n = strcspn(host, "/?#");
    if (memchr(host, '@', n))
        return pf_err_set(PF_EUSAGE,
                          "%s: credentials in the URL would show in the verdict and the logs; "
                          "give them as files (report.pushgatewayAuth)",
                          what);
    return 0;
}
