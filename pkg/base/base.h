/* base: errors, bounded buffers and string lists shared by every module. */
#ifndef PF_BASE_H
#define PF_BASE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define PF_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

/* Room for "rank 5 (trainer-5)": a rank and its pod's name (pf_fleet_who, pf_rdv_who). */
#define PF_WHO_MAX 160

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
    PF_EPROTO = -8,   /* a peer speaks another protocol version */
};

/* Sets the thread's last error message (one line, no trailing period) and returns code. */
int pf_err_set(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The thread's last error message ("" when none). */
const char *pf_err_msg(void);
void pf_err_clear(void);

/* Growable byte buffer with a hard maximum (like curl's dynbuf). After pf_buf_init, data is
 * never NULL: it points at a shared, read-only "" until the first add (git's strbuf_slopbuf),
 * so b.data is always text; write into it only through the pf_buf functions. An add over the
 * maximum fails with PF_ETOOBIG and leaves the buffer as it was, and `over` stays set (sticky)
 * so that a caller who adds many parts checks once, at the end (pf_buf_check). */
struct pf_buf {
    char *data;
    size_t len;
    size_t cap;
    size_t max;
    bool over; /* an add was refused: the content is incomplete */
};
/* The maxima of pf_buf_init, by what a buffer holds (like curl's DYN_* limits). */
#define PF_BUF_LINE 1024                      /* a line of evidence or a list */
#define PF_BUF_MESSAGE 4096                   /* one message: a finding's text, a reason */
#define PF_BUF_TEXT (64u << 10)               /* a record, a section, a paragraph */
#define PF_BUF_HTTP (64u << 10)               /* an HTTP request or response body */
#define PF_BUF_DOCUMENT (1u << 20)            /* a whole file: the verdict, a config, the docs */
#define PF_BUF_RENDERED (2 * PF_BUF_DOCUMENT) /* a document rendered for the terminal */
void pf_buf_init(struct pf_buf *b, size_t max);
int pf_buf_add(struct pf_buf *b, const void *p, size_t n);
int pf_buf_addf(struct pf_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Appends base64 of data[0..n) with padding (RFC 4648): section 4's alphabet, or with url
 * section 5's URL and filename safe one. Nothing for n == 0. */
int pf_buf_base64(struct pf_buf *b, const void *data, size_t n, bool url);
int pf_buf_vaddf(struct pf_buf *b, const char *fmt, va_list ap);
void pf_buf_reset(struct pf_buf *b);
void pf_buf_free(struct pf_buf *b);
/* The text, malloc'ed, now the caller's ("" when nothing was added); b is empty again. */
char *pf_buf_detach(struct pf_buf *b);
/* The text so far; "" when nothing was added. Never NULL (also for a zeroed struct). */
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
/* names[i] of a table indexed by an enum ({[PF_X] = "x", ...}); dflt when i is outside it or
 * has no name. */
const char *pf_name_of(const char *const *names, size_t n, int i, const char *dflt);
/* Levenshtein distance, capped at limit+1 (for did-you-mean). */
int pf_edit_distance(const char *a, const char *b, int limit);
/* An http:// or https:// URL with a host and no user:password@ (which would show wherever
 * the URL is printed); PF_EUSAGE naming `what` otherwise. */
int pf_http_url_check(const char *what, const char *url);

/* Resolves host (and port, or NULL) with getaddrinfo(hints) before deadline (a pf_now()
 * time; 0: none, the caller's thread waits as long as getaddrinfo does): 0 with *out for
 * freeaddrinfo. The lookup runs on a thread nobody waits for past the deadline (resolve.c), so
 * a slow or silent resolver costs the caller its deadline, not resolv.conf's timeouts. An
 * address is answered at once. PF_ETIMEOUT "resolving HOST took longer than the deadline",
 * or PF_ENOENT "cannot resolve HOST: <getaddrinfo's words>". */
struct addrinfo;
int pf_resolve_by(struct addrinfo **out, const char *host, const char *port,
                  const struct addrinfo *hints, double deadline);

/* Monotonic clock in seconds. */
double pf_now(void);
/* The deadline secs from now, never later than cutoff (a pf_now() time). */
double pf_deadline_in(double secs, double cutoff);
/* now + share of what is left before deadline, at least lo and at most hi seconds, never
 * past deadline (a pf_now() time; 0: none, then now + hi). The one way a wait
 * of `preflight run` is cut from the time left (pkg/run/budget.c). */
double pf_deadline_share(double deadline, double share, double lo, double hi);
/* v clamped to [lo, hi]. */
double pf_clampd(double v, double lo, double hi);
/* v[0..n) sorted ascending, in place. */
void pf_sort_dbl(double *v, size_t n);
/* The median of v[0..n) (the mean of the middle two when n is even), sorting v in place; 0
 * when n is 0. */
double pf_median(double *v, size_t n);
/* Wall clock as "YYYY-MM-DDTHH:MM:SSZ". */
void pf_utc_timestamp(char *out, size_t n);

/* ---- Replacing a file in a folder others may write to (pkg/base/file.c). The new content
 * goes to ".pf.<random>" in the target's folder, created O_CREAT|O_EXCL|O_NOFOLLOW, is
 * written completely, fsync'ed, renamed over the target; the folder is fsync'ed. On failure
 * the temporary file is removed and the target left as it was. */
#define PF_FILE_PATH_MAX 4096
struct pf_file_target {
    char dir[PF_FILE_PATH_MAX]; /* "." when the path has no folder */
    char base[256];
};
/* Splits path into folder and file name; PF_EINVAL or PF_ETOOBIG naming the path. */
int pf_file_split(struct pf_file_target *out, const char *path);

/* Where a replacement failed, for the message. */
enum pf_file_step {
    PF_FILE_STEP_FOLDER,
    PF_FILE_STEP_CREATE,
    PF_FILE_STEP_WRITE,
    PF_FILE_STEP_SYNC,
    PF_FILE_STEP_RENAME,
};
/* A replacement under way, for content written in pieces (pf_report_install_self). */
struct pf_file_tmp {
    int fd;
    int dirfd;
    bool tracked;
    unsigned mode;
    enum pf_file_step step;
    const struct pf_file_target *target;
    char name[16];
};
/* Each returns 0 or a negative errno; async-signal-safe. track: record the temporary file so
 * that pf_file_inflight_unlink removes it (the main flow's writes, not a handler's own). */
int pf_file_tmp_open(struct pf_file_tmp *t, const struct pf_file_target *target, unsigned mode,
                     uint64_t seed, bool track);
int pf_file_tmp_write(struct pf_file_tmp *t, const void *data, size_t len);
/* fchmod(mode), fsync, close, rename over the target, fsync the folder; aborts on failure. */
int pf_file_tmp_commit(struct pf_file_tmp *t);
/* Closes and removes the temporary file (safe to call twice). */
void pf_file_tmp_abort(struct pf_file_tmp *t);
/* The whole replacement in one call: 0 or a negative errno, *step where it failed.
 * Async-signal-safe (the verdict guard's handler uses it). */
int pf_file_replace_raw(const struct pf_file_target *target, const void *data, size_t len,
                        unsigned mode, uint64_t seed, bool track, enum pf_file_step *step);
/* Writes all of data to fd, retrying on EINTR: 0, or a negative errno (-ENOSPC when fd takes
 * no more). Async-signal-safe. */
int pf_file_write_all(int fd, const void *data, size_t len);
/* Removes the temporary file the main flow is writing, if any (async-signal-safe). */
void pf_file_inflight_unlink(void);
/* A short text for an errno (async-signal-safe: string literals only). */
const char *pf_file_errno_text(int e);
/* A seed for temporary names (getrandom). */
uint64_t pf_file_random(void);
/* What the step did ("create a temporary file"); async-signal-safe. */
const char *pf_file_step_name(enum pf_file_step s);
/* Sets the message for a failed replacement: "cannot write PATH (STEP: ERROR); the file there
 * is left as it was" (or "nothing was written" when there was none); returns PF_ERR. */
int pf_file_error(const char *path, enum pf_file_step step, int neg_errno, bool existed);
/* Creates the folders above path that are missing (mode 0755); PF_ERR when one cannot be. */
int pf_file_mkdir_parents(const char *path);
/* Replaces path with data (mode set whatever the umask); a path that is a device, a FIFO or
 * a symlink to one is written in place. 0, or PF_ERR with the message. */
int pf_file_replace(const char *path, const void *data, size_t len, unsigned mode);
/* Reads a file the user named (a flag's value, not under --root) whole into b, whose max is
 * the limit, before deadline (0: PF_FILE_READ_WAIT_S from now): 0, or PF_EUSAGE "FLAG PATH:
 * why" (cannot open, larger than the limit, read error, no end by the deadline: a FIFO
 * without a writer, a device). */
#define PF_FILE_READ_WAIT_S 60.0
/* The next bytes of fd, polled first, before deadline (0: none): what read() gives (0 at the
 * end), -1 with errno, or -2 when the deadline passed with nothing to read (a FIFO nobody
 * writes to, a terminal). EAGAIN and EINTR are waited out. */
ssize_t pf_file_read_by(int fd, void *buf, size_t n, double deadline);
int pf_file_read_named(struct pf_buf *b, const char *flag, const char *path, double deadline);

/* In a function taking (..., const char *fmt, ...): formats the arguments after fmt into
 * buf, a char array (cut at its size, as snprintf does). */
#define PF_FORMAT_ARGS(buf, fmt)                                                                   \
    do {                                                                                           \
        va_list ap_;                                                                               \
        va_start(ap_, fmt);                                                                        \
        vsnprintf(buf, sizeof(buf), fmt, ap_);                                                     \
        va_end(ap_);                                                                               \
    } while (0)

/* Appends s to out with what a terminal or a log would act on made visible: C0 controls
 * (ESC, CR, BEL, ...) and DEL as \xNN, \r and \n as two characters (newlines kept as they
 * are with keep_newlines), C1 controls and Unicode line breaks and bidirectional overrides
 * as \uNNNN, bytes that are not UTF-8 as \xNN. 0, or the pf_buf error when out is full. */
int pf_text_escape(struct pf_buf *out, const char *s, bool keep_newlines);
/* Whether pf_text_escape would leave s as it is (the common case: no copy needed). */
bool pf_text_is_safe(const char *s, bool keep_newlines);

#endif
