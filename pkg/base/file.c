/* Replacing a file safely in a folder others may write to (docs/security.md, "Threat model
 * and file safety"): the new content goes to a temporary file of an unpredictable name in
 * the target's folder, created with O_CREAT|O_EXCL|O_NOFOLLOW (a planted name or symlink is
 * never opened), written completely, fsync'ed, renamed over the target, and the folder is
 * fsync'ed. On any failure the temporary file is removed and the target is left as it was.
 * A target that is not a regular file (a device, a FIFO, /dev/stdout) is written in place.
 * The core (pf_file_replace_raw) calls only async-signal-safe functions, so that the verdict
 * guard's signal handler shares it. */
#define _GNU_SOURCE
#include "base.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define TMP_PREFIX ".pf."
#define TMP_RAND 10 /* characters of base-32: 50 bits */
#define TMP_TRIES 16

/* The temporary file being written right now (the main flow's), so that a signal handler
 * ending the process can remove it: pf_file_inflight_unlink. */
static char inflight_dir[PF_FILE_PATH_MAX];
static char inflight_name[sizeof(TMP_PREFIX) + TMP_RAND];
static volatile sig_atomic_t inflight_set;

int pf_file_split(struct pf_file_target *out, const char *path)
{
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/')
        len--;
    const char *slash = NULL;
    for (size_t i = 0; i < len; i++)
        if (path[i] == '/') slash = path + i;
    const char *base = slash ? slash + 1 : path;
    size_t blen = len - (size_t)(base - path);
    size_t dlen = slash ? (slash == path ? 1 : (size_t)(slash - path)) : 1;
    if (blen == 0 || (blen == 1 && base[0] == '.') || (blen == 2 && !memcmp(base, "..", 2)))
        return pf_err_set(PF_EINVAL, "%s: not a file name", path);
    if (blen >= sizeof(out->base) || dlen >= sizeof(out->dir))
        return pf_err_set(PF_ETOOBIG, "%s: path too long", path);
    memcpy(out->dir, slash ? path : ".", dlen);
    out->dir[dlen] = '\0';
    memcpy(out->base, base, blen);
    out->base[blen] = '\0';
    return 0;
}

uint64_t pf_file_random(void)
{
    uint64_t v = 0;
    if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v)) {
        /* no entropy yet (early boot): the clock still makes names unlikely to be guessed,
         * and O_EXCL makes a guessed name fail rather than be followed */
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        v ^= (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)ts.tv_sec ^
             ((uint64_t)getpid() << 32);
    }
    return v;
}

/* splitmix64: spreads a seed and the try number over all the name's characters. */
static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

static void tmp_name(char *out, uint64_t seed, unsigned attempt)
{
    static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz234567";
    uint64_t x = mix(seed + attempt * 0x632be59bd9b4e019ull);
    memcpy(out, TMP_PREFIX, sizeof(TMP_PREFIX) - 1);
    for (size_t i = 0; i < TMP_RAND; i++, x >>= 5)
        out[sizeof(TMP_PREFIX) - 1 + i] = alphabet[x & 31];
    out[sizeof(TMP_PREFIX) - 1 + TMP_RAND] = '\0';
}

int pf_file_write_all(int fd, const void *data, size_t len)
{
    const char *p = data;
    while (len) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return -errno;
        if (w == 0) return -ENOSPC;
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

static void copy_str(char *out, size_t n, const char *s)
{
    size_t i = 0;
    for (; s[i] && i + 1 < n; i++)
        out[i] = s[i];
    out[i] = '\0';
}

int pf_file_tmp_open(struct pf_file_tmp *t, const struct pf_file_target *target, unsigned mode,
                     uint64_t seed, bool track)
{
    t->fd = -1;
    t->dirfd = -1;
    t->tracked = false;
    t->name[0] = '\0';
    t->step = PF_FILE_STEP_FOLDER;
    t->target = target;
    t->mode = mode;
    t->dirfd = open(target->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (t->dirfd < 0) return -errno;
    t->step = PF_FILE_STEP_CREATE;
    for (unsigned i = 0; i < TMP_TRIES; i++) {
        tmp_name(t->name, seed, i);
        if (track) {
            /* recorded before the file exists: a handler may find nothing to remove */
            copy_str(inflight_dir, sizeof(inflight_dir), target->dir);
            copy_str(inflight_name, sizeof(inflight_name), t->name);
            atomic_signal_fence(memory_order_seq_cst);
            inflight_set = 1;
            t->tracked = true;
        }
        t->fd =
            openat(t->dirfd, t->name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (t->fd >= 0) return 0;
        int e = errno;
        if (track) inflight_set = 0;
        t->tracked = false;
        if (e != EEXIST) {
            close(t->dirfd);
            t->dirfd = -1;
            return -e;
        }
    }
    close(t->dirfd);
    t->dirfd = -1;
    return -EEXIST;
}

int pf_file_tmp_write(struct pf_file_tmp *t, const void *data, size_t len)
{
    t->step = PF_FILE_STEP_WRITE;
    return pf_file_write_all(t->fd, data, len);
}

void pf_file_tmp_abort(struct pf_file_tmp *t)
{
    if (t->fd >= 0) close(t->fd);
    if (t->dirfd >= 0) {
        unlinkat(t->dirfd, t->name, 0);
        close(t->dirfd);
    }
    if (t->tracked) inflight_set = 0;
    t->fd = t->dirfd = -1;
    t->tracked = false;
}

int pf_file_tmp_commit(struct pf_file_tmp *t)
{
    int e = 0;
    t->step = PF_FILE_STEP_SYNC;
    /* the mode whatever the umask: readers may run as another user in another container */
    if (fchmod(t->fd, t->mode) < 0 || fsync(t->fd) < 0) e = -errno;
    int fd = t->fd;
    t->fd = -1;
    if (close(fd) < 0 && e == 0) e = errno == EINTR ? 0 : -errno;
    if (e == 0) {
        t->step = PF_FILE_STEP_RENAME;
        if (renameat(t->dirfd, t->name, t->dirfd, t->target->base) < 0) e = -errno;
    }
    if (e < 0) {
        pf_file_tmp_abort(t);
        return e;
    }
    if (t->tracked) inflight_set = 0;
    t->tracked = false;
    /* the rename is done and atomic; a folder that cannot be synced (some file systems
     * refuse fsync on folders) changes nothing a reader sees */
    (void)fsync(t->dirfd);
    close(t->dirfd);
    t->dirfd = -1;
    return 0;
}

/* A folder of the kernel's (/dev, /proc): never a place for a temporary file and a rename;
 * /dev/stdout and /proc/self/fd/N lead to whatever the descriptor is, a regular file too. */
static bool in_dev_or_proc(const char *dir)
{
    return !strcmp(dir, "/dev") || !strncmp(dir, "/dev/", 5) || !strcmp(dir, "/proc") ||
           !strncmp(dir, "/proc/", 6);
}

/* A target that exists and is not a regular file (a device such as /dev/null, a FIFO, a
 * terminal, /dev/stdout, or a symlink to one of them) is written in place, the way every Unix
 * tool writes to it: renaming a temporary file over it would put a regular file where the
 * device was; the same for anything in /dev or /proc. Returns 1 when the target is a regular
 * file elsewhere, a folder or absent (the caller
 * replaces it), else 0 or a negative errno. A FIFO without a reader is ENXIO, not a wait:
 * the open is non-blocking. Async-signal-safe. */
static int write_in_place(const struct pf_file_target *target, const void *data, size_t len,
                          enum pf_file_step *step)
{
    int dfd = open(target->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return 1;
    struct stat st;
    if (fstatat(dfd, target->base, &st, 0) != 0 || S_ISDIR(st.st_mode) ||
        (S_ISREG(st.st_mode) && !in_dev_or_proc(target->dir))) {
        close(dfd);
        return 1;
    }
    *step = PF_FILE_STEP_WRITE;
    struct stat out;
    if (fstat(STDOUT_FILENO, &out) == 0 && out.st_dev == st.st_dev && out.st_ino == st.st_ino) {
        /* the process' own stdout (/dev/stdout, /proc/self/fd/1): through fd 1 itself, so
         * that what the process prints after it follows it instead of writing over it */
        close(dfd);
        return pf_file_write_all(STDOUT_FILENO, data, len);
    }
    /* O_APPEND: /dev/stdout redirected to a file shares that file with the process' own
     * writes to fd 1 (no effect on devices and FIFOs) */
    int fd = openat(dfd, target->base, O_WRONLY | O_APPEND | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    int e = fd < 0 ? -errno : 0;
    close(dfd);
    if (e < 0) return e;
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    e = pf_file_write_all(fd, data, len);
    close(fd);
    return e;
}

int pf_file_replace_raw(const struct pf_file_target *target, const void *data, size_t len,
                        unsigned mode, uint64_t seed, bool track, enum pf_file_step *step)
{
    enum pf_file_step in_place_step = PF_FILE_STEP_FOLDER;
    int w = write_in_place(target, data, len, &in_place_step);
    if (w <= 0) {
        if (step) *step = in_place_step;
        return w;
    }
    struct pf_file_tmp t;
    int e = pf_file_tmp_open(&t, target, mode, seed, track);
    if (e == 0) e = pf_file_tmp_write(&t, data, len);
    if (e == 0) e = pf_file_tmp_commit(&t);
    if (step) *step = t.step;
    if (e < 0) pf_file_tmp_abort(&t);
    return e;
}

void pf_file_inflight_unlink(void)
{
    if (!inflight_set) return;
    int dfd = open(inflight_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return;
    unlinkat(dfd, inflight_name, 0);
    close(dfd);
    inflight_set = 0;
}

const char *pf_file_errno_text(int e)
{
    switch (e) {
    case ENOSPC:
        return "no space left on device";
    case EDQUOT:
        return "disk quota exceeded";
    case EROFS:
        return "read-only file system";
    case EACCES:
    case EPERM:
        return "permission denied";
    case ENOENT:
        return "no such folder";
    case ENOTDIR:
        return "not a folder";
    case EEXIST:
        return "every temporary name tried was taken";
    case EIO:
        return "input/output error";
    case EISDIR:
        return "the target is a folder";
    default:
        return "write error";
    }
}

const char *pf_file_step_name(enum pf_file_step s)
{
    static const char *const names[] = {
        [PF_FILE_STEP_FOLDER] = "open the folder",
        [PF_FILE_STEP_CREATE] = "create a temporary file",
        [PF_FILE_STEP_WRITE] = "write",
        [PF_FILE_STEP_SYNC] = "sync",
        [PF_FILE_STEP_RENAME] = "rename",
    };
    return pf_name_of(names, PF_ARRAY_LEN(names), (int)s, "write");
}

int pf_file_error(const char *path, enum pf_file_step step, int neg_errno, bool existed)
{
    return pf_err_set(PF_ERR, "cannot write %s (%s: %s); %s", path, pf_file_step_name(step),
                      strerror(-neg_errno),
                      existed ? "the file there is left as it was" : "nothing was written");
}

int pf_file_mkdir_parents(const char *path)
{
    char tmp[PF_FILE_PATH_MAX];
    if (pf_strcpy(tmp, sizeof(tmp), path) < 0) return PF_ETOOBIG;
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/') continue;
        *p = '\0';
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return PF_ERR;
        *p = '/';
    }
    return 0;
}

int pf_file_replace(const char *path, const void *data, size_t len, unsigned mode)
{
    struct pf_file_target target;
    int r = pf_file_split(&target, path);
    if (r < 0) return r;
    enum pf_file_step step;
    int e = pf_file_replace_raw(&target, data, len, mode, pf_file_random(), true, &step);
    if (e == 0) return 0;
    struct stat st;
    return pf_file_error(path, step, e, lstat(path, &st) == 0);
}

ssize_t pf_file_read_by(int fd, void *buf, size_t n, double deadline)
{
    for (;;) {
        if (deadline > 0 && pf_now() >= deadline) return -2;
        struct pollfd pfd = {fd, POLLIN, 0};
        int ms = deadline > 0 ? (int)((deadline - pf_now()) * 1000) + 1 : -1;
        int p = poll(&pfd, 1, ms);
        if (p < 0 && errno != EINTR) return -1;
        if (p <= 0) continue;
        ssize_t got = read(fd, buf, n);
        if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) continue;
        return got;
    }
}

int pf_file_read_named(struct pf_buf *b, const char *flag, const char *path, double deadline)
{
    /* non-blocking, and polled before every read (pf_file_read_by): a FIFO nobody writes to
     * (whose read says "end" at once), a terminal or a device that never ends the file is
     * waited for until the deadline, never longer, and a file without end (/dev/zero) ends at
     * the size limit */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return pf_err_set(PF_EUSAGE, "%s %s: %s", flag, path, strerror(errno));
    double t0 = pf_now();
    if (deadline <= 0) deadline = t0 + PF_FILE_READ_WAIT_S;
    char chunk[4096];
    int r = 0;
    ssize_t got;
    while ((got = pf_file_read_by(fd, chunk, sizeof(chunk), deadline)) > 0)
        if (pf_buf_add(b, chunk, (size_t)got) < 0) {
            r = pf_err_set(PF_EUSAGE, "%s %s: larger than %zu bytes", flag, path, b->max);
            break;
        }
    if (r == 0 && got == -2)
        r = pf_err_set(PF_EUSAGE, "%s %s: %s within %.0f s (a FIFO or a device nobody writes to?)",
                       flag, path, b->len ? "no end of the file" : "nothing to read",
                       deadline - t0);
    else if (r == 0 && got < 0)
        r = pf_err_set(PF_EUSAGE, "%s %s: %s", flag, path, strerror(errno));
    close(fd);
    return r;
}
