/* Following every file of the shared folder as NCCL writes it.
 *
 * NCCL opens NCCL_DEBUG_FILE once per process with fopen(..., "w") and writes each message with
 * one fprintf and an fflush (src/debug.cc, ncclDebugInit and ncclDebugLog, NVIDIA/nccl
 * v2.3.7-1 to v2.30.7-1), so a line normally arrives whole; a reader can still catch one
 * half written (a line longer than stdio's buffer is written in pieces), and a file may be
 * replaced by a log rotator (new inode under the name) or cut to zero (copytruncate). The
 * folder is watched with inotify (IN_CREATE, IN_MODIFY, IN_MOVED_TO, IN_CLOSE_WRITE); every
 * PF_WATCH_SCAN_S it is also listed again, so a missed or overflowed event costs at most that
 * long. */
#define _GNU_SOURCE
#include "watch.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

#define PF_WATCH_SCAN_S 1.0
/* At most this much of one file is read in one step, so one busy writer cannot starve the
 * others (the next step does not wait while a file is left unread). */
#define READ_PER_STEP (8u << 20)
#define CHUNK (1u << 16)
#define COALESCE_US 50000

static bool ends(const char *name, const char *suffix)
{
    size_t n = strlen(name), k = strlen(suffix);
    return n > k && strcmp(name + n - k, suffix) == 0;
}

static bool excluded(const char *name)
{
    if (name[0] == '.') return true; /* hidden, and the atomic writers' ".NAME.tmp..." */
    if (strcmp(name, PF_WATCH_GATE_FILE) == 0 || strcmp(name, PF_WATCH_OWN_FILE) == 0) return true;
    /* verdicts and metrics, never NCCL's output; a rotator's compressed copies */
    static const char *const skip[] = {".yaml", ".prom", ".json", ".gz", ".xz", ".zst", ".bz2"};
    for (size_t i = 0; i < PF_ARRAY_LEN(skip); i++)
        if (ends(name, skip[i])) return true;
    return false;
}

/* Whether the inode is one followed now or before (a file renamed away by a rotator). */
static bool known_inode(const struct pf_watch *w, const struct stat *st)
{
    for (size_t i = 0; i < w->nfiles; i++)
        if (w->files[i].fd >= 0 && w->files[i].ino == st->st_ino && w->files[i].dev == st->st_dev)
            return true;
    for (size_t i = 0; i < w->nretired; i++)
        if (w->retired[i].ino == st->st_ino && w->retired[i].dev == st->st_dev) return true;
    return false;
}

static void retire(struct pf_watch *w, const struct pf_watch_file *f)
{
    if (w->nretired >= PF_WATCH_FILES_MAX) return;
    w->retired = pf_xrealloc(w->retired, (w->nretired + 1) * sizeof(*w->retired));
    w->retired[w->nretired].dev = f->dev;
    w->retired[w->nretired].ino = f->ino;
    w->nretired++;
}

struct pf_watch_file *pf_watch_file_add(struct pf_watch *w, const char *name)
{
    if (w->nfiles >= PF_WATCH_FILES_MAX) {
        w->files_skipped++;
        return NULL;
    }
    w->files = pf_xrealloc(w->files, (w->nfiles + 1) * sizeof(*w->files));
    struct pf_watch_file *f = &w->files[w->nfiles++];
    memset(f, 0, sizeof(*f));
    f->fd = -1;
    snprintf(f->name, sizeof(f->name), "%s", name);
    f->line = pf_xmalloc(PF_NCCLLOG_LINE_MAX);
    pf_nccllog_file_begin(&w->log, name);
    f->log_index = w->log.nfiles - 1;
    return f;
}

static struct pf_watch_file *find_file(struct pf_watch *w, const char *name)
{
    for (size_t i = 0; i < w->nfiles; i++)
        if (strcmp(w->files[i].name, name) == 0) return &w->files[i];
    return NULL;
}

static void line_done(struct pf_watch *w, struct pf_watch_file *f)
{
    pf_nccllog_file_use(&w->log, f->log_index);
    size_t before = w->log.nccl_lines;
    size_t len = f->linelen >= PF_NCCLLOG_LINE_MAX ? PF_NCCLLOG_LINE_MAX : f->have;
    if (f->linelen >= PF_NCCLLOG_LINE_MAX) w->cut_lines++;
    pf_nccllog_line(&w->log, f->line, len);
    w->lines++;
    f->have = f->linelen = 0;
    if (w->log.nccl_lines > before) {
        long p = pf_nccllog_last_proc(&w->log);
        if (p >= 0) pf_watch_judge_proc(w, (size_t)p);
    }
}

void pf_watch_feed(struct pf_watch *w, struct pf_watch_file *f, const char *data, size_t n)
{
    w->bytes += n;
    size_t i = 0;
    while (i < n) {
        const char *nl = memchr(data + i, '\n', n - i);
        size_t l = nl ? (size_t)(nl - (data + i)) : n - i;
        size_t room = PF_NCCLLOG_LINE_MAX - f->have;
        size_t take = l < room ? l : room;
        memcpy(f->line + f->have, data + i, take);
        f->have += take;
        f->linelen += l;
        i += l;
        if (!nl) break;
        line_done(w, f);
        i++;
    }
}

/* The file's last line, ended by the file itself (rotated away). */
static void flush_partial(struct pf_watch *w, struct pf_watch_file *f)
{
    if (f->linelen > 0) line_done(w, f);
}

/* Reads what f has now; true when more is left than one step reads. */
static bool read_file(struct pf_watch *w, struct pf_watch_file *f, char *buf)
{
    if (f->fd < 0) return false;
    struct stat st;
    if (fstat(f->fd, &st) == 0 && st.st_size < f->off) { /* truncated (copytruncate, "w" again) */
        f->truncations++;
        f->off = 0;
        f->have = f->linelen = 0; /* the cut line's rest is gone with it */
        if (lseek(f->fd, 0, SEEK_SET) < 0) return false;
    }
    size_t total = 0;
    for (;;) {
        ssize_t got = read(f->fd, buf, CHUNK);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) break;
        f->off += got;
        pf_watch_feed(w, f, buf, (size_t)got);
        total += (size_t)got;
        if (total >= READ_PER_STEP) return true;
    }
    return false;
}

static int open_file(struct pf_watch *w, struct pf_watch_file *f, const struct stat *st)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s", w->dir, f->name);
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0) return -1;
    struct stat s2;
    if (fstat(fd, &s2) < 0 || !S_ISREG(s2.st_mode)) {
        close(fd);
        return -1;
    }
    (void)st;
    f->fd = fd;
    f->dev = s2.st_dev;
    f->ino = s2.st_ino;
    f->off = 0;
    f->gone = false;
    return 0;
}

/* Looks at one name of the folder: new, rotated (another inode under it) or as it was. */
static void look(struct pf_watch *w, const char *name, char *buf)
{
    if (excluded(name)) return;
    char path[PATH_MAX];
    if (snprintf(path, sizeof(path), "%s/%s", w->dir, name) >= (int)sizeof(path)) return;
    struct stat st;
    if (stat(path, &st) < 0 || !S_ISREG(st.st_mode)) return;
    struct pf_watch_file *f = find_file(w, name);
    if (!f) {
        if (known_inode(w, &st)) return; /* a followed file under its rotated name */
        f = pf_watch_file_add(w, name);
        if (!f) return;
    } else if (f->fd >= 0 && (st.st_ino != f->ino || st.st_dev != f->dev)) {
        (void)read_file(w, f, buf); /* what the old file still had */
        flush_partial(w, f);
        retire(w, f);
        close(f->fd);
        f->fd = -1;
        f->rotations++;
    }
    if (f->fd < 0) (void)open_file(w, f, &st);
}

static void scan(struct pf_watch *w, char *buf)
{
    w->last_scan = pf_now();
    DIR *d = opendir(w->dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)))
        look(w, e->d_name, buf);
    closedir(d);
    for (size_t i = 0; i < w->nfiles; i++) {
        struct pf_watch_file *f = &w->files[i];
        if (f->fd < 0) continue;
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/%s", w->dir, f->name);
        struct stat st;
        f->gone = stat(path, &st) < 0; /* removed: the open file is read to its end */
    }
}

static bool read_all(struct pf_watch *w, char *buf)
{
    bool more = false;
    for (size_t i = 0; i < w->nfiles; i++)
        more |= read_file(w, &w->files[i], buf);
    return more;
}

int pf_watch_open(struct pf_watch *w, const struct pf_watch_opts *o)
{
    memset(w, 0, sizeof(*w));
    w->o = *o;
    w->inotify_fd = -1;
    w->t0 = pf_now();
    snprintf(w->dir, sizeof(w->dir), "%s", o->dir ? o->dir : "");
    struct stat st;
    if (!w->dir[0] || stat(w->dir, &st) < 0 || !S_ISDIR(st.st_mode))
        return pf_err_set(PF_EUSAGE,
                          "watch: %s is not a folder (the shared folder of "
                          "NCCL_DEBUG_FILE)",
                          w->dir[0] ? w->dir : "\"\"");
    if (o->gate_path)
        snprintf(w->gate_path, sizeof(w->gate_path), "%s", o->gate_path);
    else
        snprintf(w->gate_path, sizeof(w->gate_path), "%s/%s", w->dir, PF_WATCH_GATE_FILE);
    w->gate.hcas = w->gate.gdr = -1;
    pf_watch_gate_refresh(w);
    w->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (w->inotify_fd >= 0 && inotify_add_watch(w->inotify_fd, w->dir,
                                                IN_CREATE | IN_MODIFY | IN_MOVED_TO |
                                                    IN_CLOSE_WRITE | IN_DELETE_SELF) < 0) {
        close(w->inotify_fd);
        w->inotify_fd = -1;
    }
    return 0;
}

void pf_watch_close(struct pf_watch *w)
{
    for (size_t i = 0; i < w->nfiles; i++) {
        if (w->files[i].fd >= 0) close(w->files[i].fd);
        free(w->files[i].line);
    }
    if (w->inotify_fd >= 0) close(w->inotify_fd);
    free(w->files);
    free(w->retired);
    free(w->procs);
    free(w->findings);
    pf_nccllog_free(&w->log);
    memset(w, 0, sizeof(*w));
    w->inotify_fd = -1;
}

/* Drains inotify: true when a name changed that needs a scan (created, moved in, overflow). */
static bool drain_events(struct pf_watch *w)
{
    bool need_scan = false;
    char ev[16384] __attribute__((aligned(__alignof__(struct inotify_event))));
    for (;;) {
        ssize_t n = read(w->inotify_fd, ev, sizeof(ev));
        if (n <= 0) break;
        for (char *p = ev; p < ev + n;) {
            const struct inotify_event *e = (const struct inotify_event *)p;
            if (e->mask & (IN_CREATE | IN_MOVED_TO | IN_Q_OVERFLOW)) need_scan = true;
            p += sizeof(*e) + e->len;
        }
    }
    return need_scan;
}

static int step(struct pf_watch *w, double wait_s)
{
    size_t before = w->nfindings;
    char *buf = pf_xmalloc(CHUNK);
    bool scanned = false;
    if (w->nfiles == 0 || pf_now() - w->last_scan >= PF_WATCH_SCAN_S) {
        scan(w, buf);
        scanned = true;
    }
    bool more = read_all(w, buf);
    if (!more && wait_s > 0 && w->nfindings == before) {
        double left = PF_WATCH_SCAN_S - (pf_now() - w->last_scan);
        if (left > wait_s) left = wait_s;
        if (left < 0) left = 0;
        if (w->inotify_fd >= 0) {
            struct pollfd p = {w->inotify_fd, POLLIN, 0};
            if (poll(&p, 1, (int)(left * 1000)) > 0) {
                /* a writer rarely writes one line alone: the lines of the next few ms are read
                 * together, one pass over the files for many lines (docs/kubernetes.md, the
                 * budget) */
                usleep(COALESCE_US);
                if (drain_events(w) && !scanned) scan(w, buf);
            }
        } else {
            usleep((useconds_t)(left < 0.2 ? left * 1e6 : 2e5));
        }
        (void)read_all(w, buf);
    } else if (w->inotify_fd >= 0) {
        (void)drain_events(w);
    }
    free(buf);
    if (pf_now() - w->gate_checked >= PF_WATCH_SCAN_S && !w->gate.found) pf_watch_gate_refresh(w);
    pf_watch_judge_clock(w);
    return (int)(w->nfindings - before);
}

int pf_watch_step(struct pf_watch *w, double wait_s)
{
    return step(w, wait_s);
}

int pf_watch_poll(struct pf_watch *w)
{
    w->last_scan = 0;
    return step(w, 0);
}

const struct pf_watch_finding *pf_watch_take(struct pf_watch *w)
{
    return w->reported < w->nfindings ? &w->findings[w->reported++] : NULL;
}
