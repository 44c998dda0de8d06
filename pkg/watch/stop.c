/* The trainer's processes, as NCCL named them (the pid of "host:pid:tid" and of
 * NCCL_DEBUG_FILE's %p): whether they still run, and stopping them (watch.onMismatch: stop).
 *
 * They are visible only when the pod shares one PID namespace (shareProcessNamespace: true;
 * docs/kubernetes.md says what that costs). A pid is taken for the trainer's only when
 * /proc/PID/stat (proc(5), field 22 starttime, clock ticks after boot) says the process started
 * before its first NCCL line was read here: a pid of another namespace, or one reused after the
 * trainer's process ended, is never signalled. */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

/* Start time of pid, seconds after boot; -1 when there is no such process. */
static double start_after_boot(long pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "re");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* "pid (comm) state ppid ...": comm may hold spaces and ')', the last ')' ends it */
    char *p = strrchr(buf, ')');
    if (!p) return -1;
    p++;
    for (int field = 3; field < 22 && p; field++) {
        p = strchr(p + 1, ' ');
    }
    if (!p) return -1;
    long long ticks = strtoll(p + 1, NULL, 10);
    long hz = sysconf(_SC_CLK_TCK);
    return hz > 0 ? (double)ticks / (double)hz : -1;
}

/* pf_now() (CLOCK_MONOTONIC) as seconds after boot (CLOCK_BOOTTIME, what starttime counts). */
static double boot_of(double mono)
{
    struct timespec b, m;
    clock_gettime(CLOCK_BOOTTIME, &b);
    clock_gettime(CLOCK_MONOTONIC, &m);
    return mono + ((double)b.tv_sec + b.tv_nsec / 1e9) - ((double)m.tv_sec + m.tv_nsec / 1e9);
}

/* Whether pid has a command line: a kernel thread has none (proc(5), /proc/PID/cmdline). */
static bool has_cmdline(long pid)
{
    char path[64], c;
    snprintf(path, sizeof(path), "/proc/%ld/cmdline", pid);
    FILE *f = fopen(path, "re");
    if (!f) return false;
    bool r = fread(&c, 1, 1, f) == 1;
    fclose(f);
    return r;
}

/* NCCL's <host>: gethostname() cut at the first '.' (src/debug.cc, getHostName). The
 * containers of one pod share its hostname, so a process of this pod names this host. */
static bool same_host(const char *host)
{
    char h[256];
    if (gethostname(h, sizeof(h)) != 0) return false;
    h[sizeof(h) - 1] = '\0';
    h[strcspn(h, ".")] = '\0';
    return strcmp(h, host) == 0;
}

/* Whether process i's pid is the process that wrote its lines and still runs: NCCL named this
 * pod's host, the pid is neither init, this process nor its parent, nor a kernel thread, and
 * it started before its first line was read. */
static bool is_trainer(const struct pf_watch *w, size_t i)
{
    const struct pf_watch_proc *s = &w->procs[i];
    if (s->pid <= 1 || s->pid == (long)getpid() || s->pid == (long)getppid() || s->first_at <= 0)
        return false;
    if (i >= w->log.n || !same_host(w->log.v[i].host) || !has_cmdline(s->pid)) return false;
    double st = start_after_boot(s->pid);
    if (st < 0) return false;
    /* one clock tick and the two clocks' reading apart: 1 s of slack */
    return st <= boot_of(s->first_at) + 1.0;
}

int pf_watch_trainer_alive(struct pf_watch *w)
{
    int alive = 0;
    for (size_t i = 0; i < w->nprocs; i++) {
        if (is_trainer(w, i)) {
            w->procs[i].seen_alive = true;
            alive++;
        }
    }
    return alive;
}

bool pf_watch_trainer_ended(struct pf_watch *w)
{
    bool seen = false;
    int alive = pf_watch_trainer_alive(w);
    for (size_t i = 0; i < w->nprocs; i++)
        seen |= w->procs[i].seen_alive;
    return seen && alive == 0;
}

int pf_watch_stop_trainer(struct pf_watch *w, double grace_s, struct pf_strlist *signalled)
{
    int n = 0;
    for (size_t i = 0; i < w->nprocs; i++) {
        if (!is_trainer(w, i)) continue;
        int r = kill((pid_t)w->procs[i].pid, SIGTERM);
        if (r < 0 && errno == EPERM) w->stop_refused++; /* another UID, no CAP_KILL */
        if (r == 0) {
            w->procs[i].signalled = true;
            w->procs[i].seen_alive = true;
            n++;
            if (signalled) pf_strlist_addf(signalled, "%ld", w->procs[i].pid);
        }
    }
    double end = pf_now() + grace_s;
    for (;;) {
        bool left = false;
        for (size_t i = 0; i < w->nprocs; i++)
            if (w->procs[i].signalled && is_trainer(w, i)) left = true;
        if (!left) break;
        if (pf_now() >= end) {
            for (size_t i = 0; i < w->nprocs; i++)
                if (w->procs[i].signalled && is_trainer(w, i))
                    (void)kill((pid_t)w->procs[i].pid, SIGKILL);
            break;
        }
        usleep(50000);
    }
    return n;
}
