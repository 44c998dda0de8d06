/* base: errors, bounded buffers and string lists shared by every module. */
#ifndef PF_BASE_H
#define PF_BASE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>

#define PF_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* The build sets these (Makefile DEFS); the fallbacks keep a bare compile working. */
#ifndef PF_VERSION
#define PF_VERSION "0.0.0-dev"
#endif
#ifndef PF_GIT
#define PF_GIT "unknown"
#endif

/* Error codes returned (negated) by pf_ functions; the message is in pf_err_msg(). */
enum {
    PF_OK = 0,
    PF_ERR = -1,      /* generic failure */
    PF_ENOENT = -2,   /* a file, key or name that is not there */
    PF_EINVAL = -3,   /* input that does not parse or is out of range */
    PF_ETOOBIG = -4,  /* input over a size limit */
    PF_ETIMEOUT = -5, /* a deadline passed */
    PF_EUSAGE = -6,   /* a usage or config error: exit code 2 */
    PF_EUNAVAIL = -7, /* an optional library or facility is missing */
};

/* Sets the thread's last error message (one line, no trailing period) and returns code. */
int pf_err_set(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The thread's last error message ("" when none). */
const char *pf_err_msg(void);
void pf_err_clear(void);

/* Growable byte buffer with a hard maximum (like curl's dynbuf). data is NULL until the first
 * add: read the text with pf_buf_str(), which is never NULL. An add over the maximum fails
 * with PF_ETOOBIG and leaves the buffer as it was, and `over` stays set (sticky) so that a
 * caller who adds many parts checks once, at the end (pf_buf_check). */
struct pf_buf {
    char *data;
    size_t len;
    size_t cap;
    size_t max;
    bool over; /* an add was refused: the content is incomplete */
};
void pf_buf_init(struct pf_buf *b, size_t max);
int pf_buf_add(struct pf_buf *b, const void *p, size_t n);
int pf_buf_addf(struct pf_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int pf_buf_vaddf(struct pf_buf *b, const char *fmt, va_list ap);
void pf_buf_reset(struct pf_buf *b);
void pf_buf_free(struct pf_buf *b);
/* The text so far; "" when nothing was added. Never NULL. */
const char *pf_buf_str(const struct pf_buf *b);
/* 0, or PF_ETOOBIG naming what (e.g. "the SUMMARY message") when an add was refused. */
int pf_buf_check(const struct pf_buf *b, const char *what);

/* A list of owned strings. */
struct pf_strlist {
    char **v;
    size_t n;
    size_t cap;
};
int pf_strlist_add(struct pf_strlist *l, const char *s);
int pf_strlist_addn(struct pf_strlist *l, const char *s, size_t n);
int pf_strlist_addf(struct pf_strlist *l, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
bool pf_strlist_has(const struct pf_strlist *l, const char *s);
void pf_strlist_sort(struct pf_strlist *l);
/* Joins with sep into out (truncates with "..." when out is too small). */
void pf_strlist_join(char *out, size_t n, const struct pf_strlist *l, const char *sep);
void pf_strlist_free(struct pf_strlist *l);

/* Allocation that never returns NULL (aborts on out-of-memory: nothing sane can follow). */
void *pf_xmalloc(size_t n);
void *pf_xcalloc(size_t n, size_t size);
void *pf_xrealloc(void *p, size_t n);
char *pf_xstrdup(const char *s);
char *pf_xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* snprintf that reports truncation: 0, or PF_ETOOBIG. */
int pf_snprintf(char *out, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* strlcpy-like copy; returns PF_ETOOBIG when cut. */
int pf_strcpy(char *out, size_t n, const char *s);
/* Trims ASCII whitespace at both ends, in place; returns s. */
char *pf_trim(char *s);
bool pf_str_starts(const char *s, const char *prefix);
/* Levenshtein distance, capped at limit+1 (for did-you-mean). */
int pf_edit_distance(const char *a, const char *b, int limit);

/* Monotonic clock in seconds. */
double pf_now(void);
/* The deadline secs from now, never later than cutoff (a pf_now() time). */
double pf_deadline_in(double secs, double cutoff);
/* v clamped to [lo, hi]. */
double pf_clampd(double v, double lo, double hi);
/* Wall clock as "YYYY-MM-DDTHH:MM:SSZ". */
void pf_utc_timestamp(char *out, size_t n);

#endif
