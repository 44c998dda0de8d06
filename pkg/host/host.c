#define _GNU_SOURCE
#include "host.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int pf_host_init(struct pf_host *h, const char *root)
{
    if (!root || !*root) root = "/";
    if (root[0] != '/') return pf_err_set(PF_EUSAGE, "--root %s: must be an absolute path", root);
    if (pf_strcpy(h->root, sizeof(h->root), root) < 0)
        return pf_err_set(PF_EUSAGE, "--root: path too long");
    size_t n = strlen(h->root);
    while (n > 0 && h->root[n - 1] == '/')
        h->root[--n] = '\0';
    struct stat st;
    if (n > 0 && (stat(h->root, &st) != 0 || !S_ISDIR(st.st_mode)))
        return pf_err_set(PF_EUSAGE, "--root %s: not a directory", root);
    return 0;
}

static int vpath(char *out, size_t n, const struct pf_host *h, const char *fmt, va_list ap)
{
    char rel[PF_HOST_PATH_MAX];
    int w = vsnprintf(rel, sizeof(rel), fmt, ap);
    if (w < 0 || (size_t)w >= sizeof(rel)) return pf_err_set(PF_ETOOBIG, "path too long");
    if (rel[0] != '/') return pf_err_set(PF_EINVAL, "%s: not an absolute path", rel);
    return pf_snprintf(out, n, "%s%s", h->root, rel);
}

/* The first lines of every function below that takes (fmt, ...): the root-prefixed path into
 * a local `path`; when it cannot be formed, the function returns `fail` (path_rc is the
 * error code, its message set). */
#define HOST_PATH(h, fmt, fail)                                                                    \
    char path[PF_HOST_PATH_MAX];                                                                   \
    do {                                                                                           \
        va_list ap_;                                                                               \
        va_start(ap_, fmt);                                                                        \
        int path_rc = vpath(path, sizeof(path), h, fmt, ap_);                                      \
        va_end(ap_);                                                                               \
        if (path_rc < 0) return fail;                                                              \
    } while (0)

/* The error of a call on path that set errno: PF_ENOENT when the path is not there. */
static int path_err(const char *path)
{
    return pf_err_set(errno == ENOENT || errno == ENOTDIR ? PF_ENOENT : PF_ERR, "%s: %s", path,
                      strerror(errno));
}

int pf_host_path(char *out, size_t n, const struct pf_host *h, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = vpath(out, n, h, fmt, ap);
    va_end(ap);
    return r;
}

static int read_fd_into(int fd, char *out, size_t n, const char *path)
{
    size_t used = 0;
    for (;;) {
        if (used + 1 >= n) {
            /* one more byte would tell whether the file is longer than the buffer */
            char extra;
            ssize_t r = read(fd, &extra, 1);
            if (r == 0) break;
            if (r < 0 && errno == EINTR) continue;
            if (r < 0) return pf_err_set(PF_ERR, "%s: %s", path, strerror(errno));
            /* a single trailing newline still fits once stripped */
            if (extra == '\n' && used + 1 == n) {
                char more;
                if (read(fd, &more, 1) == 0) break;
            }
            return pf_err_set(PF_ETOOBIG, "%s: longer than %zu bytes", path, n - 1);
        }
        ssize_t r = read(fd, out + used, n - 1 - used);
        if (r == 0) break;
        if (r < 0) {
            if (errno == EINTR) continue;
            return pf_err_set(errno == ENOENT ? PF_ENOENT : PF_ERR, "%s: %s", path,
                              strerror(errno));
        }
        used += (size_t)r;
    }
    if (used > 0 && out[used - 1] == '\n') used--;
    out[used] = '\0';
    return (int)used;
}

int pf_host_read(char *out, size_t n, const struct pf_host *h, const char *fmt, ...)
{
    HOST_PATH(h, fmt, path_rc);
    int r;
    if (n == 0) return pf_err_set(PF_EINVAL, "no room to read %s", path);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) return path_err(path);
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        close(fd);
        return pf_err_set(PF_EINVAL, "%s: is a directory", path);
    }
    r = read_fd_into(fd, out, n, path);
    close(fd);
    return r;
}

int pf_host_read_all(char **out, size_t *out_len, size_t max, const struct pf_host *h,
                     const char *fmt, ...)
{
    *out = NULL;
    if (out_len) *out_len = 0;
    HOST_PATH(h, fmt, path_rc);
    int r = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return path_err(path);
    struct pf_buf b;
    pf_buf_init(&b, max);
    char chunk[8192];
    for (;;) {
        ssize_t got = read(fd, chunk, sizeof(chunk));
        if (got == 0) break;
        if (got < 0) {
            if (errno == EINTR) continue;
            r = pf_err_set(PF_ERR, "%s: %s", path, strerror(errno));
            goto fail;
        }
        if (pf_buf_add(&b, chunk, (size_t)got) < 0) {
            r = pf_err_set(PF_ETOOBIG, "%s: larger than %zu bytes", path, max);
            goto fail;
        }
    }
    close(fd);
    if (out_len) *out_len = b.len;
    *out = pf_buf_detach(&b);
    return 0;
fail:
    close(fd);
    pf_buf_free(&b);
    return r;
}

int pf_host_read_ll(long long *out, const struct pf_host *h, const char *fmt, ...)
{
    HOST_PATH(h, fmt, path_rc);
    char text[64];
    int r;
    r = pf_host_read(text, sizeof(text), &(struct pf_host){.root = ""}, "%s", path);
    if (r < 0) return r;
    pf_trim(text);
    char *end;
    errno = 0;
    long long v = strtoll(text, &end, 0);
    if (text[0] == '\0' || *end != '\0' || errno)
        return pf_err_set(PF_EINVAL, "%s: expected an integer, found \"%s\"", path, text);
    *out = v;
    return 0;
}

int pf_host_natcmp(const char *a, const char *b)
{
    while (*a && *b) {
        if (isdigit((unsigned char)*a) && isdigit((unsigned char)*b)) {
            while (*a == '0' && isdigit((unsigned char)a[1]))
                a++;
            while (*b == '0' && isdigit((unsigned char)b[1]))
                b++;
            size_t la = 0, lb = 0;
            while (isdigit((unsigned char)a[la]))
                la++;
            while (isdigit((unsigned char)b[lb]))
                lb++;
            if (la != lb) return la < lb ? -1 : 1;
            int c = strncmp(a, b, la);
            if (c) return c;
            a += la;
            b += lb;
            continue;
        }
        if (*a != *b) return (unsigned char)*a < (unsigned char)*b ? -1 : 1;
        a++;
        b++;
    }
    return *a ? 1 : *b ? -1 : 0;
}

static int natcmp_p(const void *a, const void *b)
{
    return pf_host_natcmp(*(char *const *)a, *(char *const *)b);
}

int pf_host_list(struct pf_strlist *out, const struct pf_host *h, const char *fmt, ...)
{
    HOST_PATH(h, fmt, path_rc);
    DIR *d = opendir(path);
    if (!d) return path_err(path);
    struct dirent *e;
    size_t count = 0;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        if (++count > 65536) {
            closedir(d);
            return pf_err_set(PF_ETOOBIG, "%s: more than 65536 entries", path);
        }
        pf_strlist_add(out, e->d_name);
    }
    closedir(d);
    if (out->n > 1) qsort(out->v, out->n, sizeof(char *), natcmp_p);
    return 0;
}

int pf_host_readlink(char *out, size_t n, const struct pf_host *h, const char *fmt, ...)
{
    HOST_PATH(h, fmt, path_rc);
    ssize_t len = readlink(path, out, n);
    if (len < 0) return path_err(path);
    if ((size_t)len >= n) return pf_err_set(PF_ETOOBIG, "%s: link target too long", path);
    out[len] = '\0';
    return (int)len;
}

int pf_host_link_basename(char *out, size_t n, const struct pf_host *h, const char *fmt, ...)
{
    HOST_PATH(h, fmt, path_rc);
    char target[PF_HOST_PATH_MAX];
    int r;
    r = pf_host_readlink(target, sizeof(target), &(struct pf_host){.root = ""}, "%s", path);
    if (r < 0) return r;
    size_t len = strlen(target);
    while (len > 1 && target[len - 1] == '/')
        target[--len] = '\0';
    const char *base = strrchr(target, '/');
    base = base ? base + 1 : target;
    if (pf_strcpy(out, n, base) < 0)
        return pf_err_set(PF_ETOOBIG, "%s: link target too long", path);
    return 0;
}

bool pf_host_exists(const struct pf_host *h, const char *fmt, ...)
{
    HOST_PATH(h, fmt, false);
    struct stat st;
    return lstat(path, &st) == 0;
}

int pf_host_stat(struct stat *out, const struct pf_host *h, const char *fmt, ...)
{
    HOST_PATH(h, fmt, path_rc);
    if (stat(path, out) != 0) return path_err(path);
    return 0;
}
