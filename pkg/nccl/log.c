/* NCCL's INFO log: NCCL_DEBUG and NCCL_DEBUG_FILE set up before NCCL's first line, the log
 * read back for the transport NCCL chose (pkg/nccllog), kept beside the verdict, and the
 * private folder removed. */
#define _GNU_SOURCE
#include "internal.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,NET and NCCL_DEBUG_FILE in a private folder, in
 * this process only, before NCCL's first log line; the user's own values are kept. */
void nc_debug_setup(struct stage *st)
{
    const char *dbg = getenv("NCCL_DEBUG");
    const char *sub = getenv("NCCL_DEBUG_SUBSYS");
    const char *file = getenv("NCCL_DEBUG_FILE");
    size_t used = 0;
    st->debug_note[0] = '\0';
    if (dbg && *dbg) {
        if (strcasecmp(dbg, "INFO") != 0 && strcasecmp(dbg, "TRACE") != 0)
            used += (size_t)snprintf(st->debug_note + used, sizeof(st->debug_note) - used,
                                     "NCCL_DEBUG=%s is set (kept): NCCL logs no transport "
                                     "below INFO; ",
                                     dbg);
    } else {
        setenv("NCCL_DEBUG", "INFO", 1);
    }
    if (sub && *sub) {
        if (used < sizeof(st->debug_note))
            used += (size_t)snprintf(st->debug_note + used, sizeof(st->debug_note) - used,
                                     "NCCL_DEBUG_SUBSYS=%s is set (kept); ", sub);
    } else {
        setenv("NCCL_DEBUG_SUBSYS", "INIT,NET", 1);
    }
    if (file && *file) {
        /* NCCL expands %h (hostname cut at the first '.', '%' and '/' made '-') and %p */
        char host[256] = "";
        if (gethostname(host, sizeof(host)) != 0) host[0] = '\0';
        host[sizeof(host) - 1] = '\0';
        host[strcspn(host, ".")] = '\0';
        for (char *h = host; *h; h++)
            if (*h == '%' || *h == '/') *h = '-';
        size_t o = 0;
        for (const char *f = file; *f && o + 32 < sizeof(st->logpath); f++) {
            if (f[0] == '%' && f[1] == 'h') {
                o += (size_t)snprintf(st->logpath + o, sizeof(st->logpath) - o, "%.200s", host);
                f++;
            } else if (f[0] == '%' && f[1] == 'p') {
                o +=
                    (size_t)snprintf(st->logpath + o, sizeof(st->logpath) - o, "%d", (int)getpid());
                f++;
            } else if (f[0] == '%' && f[1] == '%') {
                st->logpath[o++] = '%';
                f++;
            } else {
                st->logpath[o++] = *f;
            }
        }
        st->logpath[o] = '\0';
        if (used < sizeof(st->debug_note))
            snprintf(st->debug_note + used, sizeof(st->debug_note) - used,
                     "NCCL_DEBUG_FILE=%s is set (kept)", file);
        return;
    }
    snprintf(st->logdir, sizeof(st->logdir), "/tmp/preflight-nccl.XXXXXX");
    if (!mkdtemp(st->logdir)) {
        st->logdir[0] = '\0';
        return; /* NCCL logs to stdout then; the transport stays unknown */
    }
    char f[256];
    snprintf(f, sizeof(f), "%s/nccl.%%h.%%p.log", st->logdir);
    setenv("NCCL_DEBUG_FILE", f, 1);
}

/* Reads NCCL's log of this process (the one file in the private folder, or the user's). */
void nc_read_log(struct stage *st, struct pf_nccllog *log, char *found, size_t fn)
{
    found[0] = '\0';
    char path[PF_HOST_PATH_MAX] = "";
    if (st->logpath[0]) {
        snprintf(path, sizeof(path), "%s", st->logpath);
    } else if (st->logdir[0]) {
        DIR *d = opendir(st->logdir);
        if (!d) return;
        struct dirent *e;
        while ((e = readdir(d))) {
            if (strncmp(e->d_name, "nccl.", 5) == 0) {
                snprintf(path, sizeof(path), "%s/%s", st->logdir, e->d_name);
                break;
            }
        }
        closedir(d);
    }
    if (!path[0]) return;
    FILE *f = fopen(path, "r");
    if (!f) return;
    char *line = NULL;
    size_t cap = 0, total = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, f)) > 0 && total < LOG_MAX) {
        pf_nccllog_line(log, line, (size_t)n);
        total += (size_t)n;
    }
    free(line);
    fclose(f);
    snprintf(found, fn, "%s", path);
}

/* Copies NCCL's log next to the verdict as nccl-rank<N>.log; out gets where it is now. */
void nc_keep_log(struct stage *st, const char *src, char *out, size_t n)
{
    snprintf(out, n, "%s", src);
    const char *vp = st->ctx->verdict_path;
    if (!vp || !*vp || strcmp(vp, "-") == 0) return;
    char dir[PF_HOST_PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", vp);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    else
        snprintf(dir, sizeof(dir), ".");
    char dst[PF_HOST_PATH_MAX];
    if (pf_snprintf(dst, sizeof(dst), "%s/nccl-rank%d.log", dir[0] ? dir : "/", st->rank) < 0)
        return;
    /* the verdict's folder may be shared: a fresh O_EXCL|O_NOFOLLOW temporary file renamed
     * over the target, never a write through a name someone else may have planted */
    struct pf_file_target target;
    if (pf_file_split(&target, dst) < 0) return;
    FILE *in = fopen(src, "r");
    if (!in) return;
    struct pf_file_tmp t;
    if (pf_file_tmp_open(&t, &target, 0644, pf_file_random(), true) < 0) {
        fclose(in);
        return;
    }
    char buf[65536];
    size_t k, total = 0;
    int e = 0;
    while (e == 0 && total < LOG_MAX && (k = fread(buf, 1, sizeof(buf), in)) > 0) {
        e = pf_file_tmp_write(&t, buf, k);
        total += k;
    }
    fclose(in);
    if (e < 0) {
        pf_file_tmp_abort(&t);
        return;
    }
    if (pf_file_tmp_commit(&t) == 0) snprintf(out, n, "%s", dst);
}

void nc_remove_logdir(struct stage *st)
{
    if (!st->logdir[0]) return;
    DIR *d = opendir(st->logdir);
    if (d) {
        struct dirent *e;
        while ((e = readdir(d))) {
            if (e->d_name[0] == '.') continue;
            char p[PF_HOST_PATH_MAX];
            if (pf_snprintf(p, sizeof(p), "%s/%s", st->logdir, e->d_name) == 0) unlink(p);
        }
        closedir(d);
    }
    rmdir(st->logdir);
}
