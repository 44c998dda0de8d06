/* host: every read of /sys, /dev, /proc, /etc and the podinfo folder, under one root prefix. */
#ifndef PF_HOST_H
#define PF_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "../base/base.h"

#define PF_HOST_PATH_MAX 4096

struct pf_host {
    char root[PF_HOST_PATH_MAX]; /* "" means "/" */
};

/* Sets the root prefix ("/" or "" for the real system); strips trailing slashes. */
int pf_host_init(struct pf_host *h, const char *root);

/* Joins root and a printf-style absolute path into out. */
int pf_host_path(char *out, size_t n, const struct pf_host *h, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Reads a small text file (sysfs style) into out, stripping one trailing newline.
 * Returns its length, PF_ENOENT when absent, PF_ETOOBIG when it does not fit (never cut
 * silently), or another negative code; the message names the path. */
int pf_host_read(char *out, size_t n, const struct pf_host *h, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Reads a file of any size up to max bytes into a fresh buffer (caller frees). */
int pf_host_read_all(char **out, size_t *out_len, size_t max, const struct pf_host *h,
                     const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Reads a file holding one integer (decimal or 0x hex). */
int pf_host_read_ll(long long *out, const struct pf_host *h, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Lists the entries of a directory (no "." or ".."), sorted by natural order
 * (mlx5_2 before mlx5_10). PF_ENOENT when the directory is absent. */
int pf_host_list(struct pf_strlist *out, const struct pf_host *h, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Reads a symlink; out gets the target as written (not resolved). */
int pf_host_readlink(char *out, size_t n, const struct pf_host *h, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Last path component of a symlink target (e.g. the PCI address of .../device). */
int pf_host_link_basename(char *out, size_t n, const struct pf_host *h, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

bool pf_host_exists(const struct pf_host *h, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* stat() under the root; PF_ENOENT when absent. */
int pf_host_stat(struct stat *out, const struct pf_host *h, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Natural-order comparison: digit runs compare by value. */
int pf_host_natcmp(const char *a, const char *b);

/* How much CPU this process waited for: cumulative counters since boot, so that a reading is
 * compared with the one before it (pkg/run/probes.c, one probe round). Each field is the
 * kernel's own:
 *   wait_ns   run_delay, the 2nd field of /proc/self/task/<tid>/schedstat, summed over this
 *             process's threads (fs/proc/base.c, proc_pid_schedstat): time runnable, not run
 *   steal, total  /proc/stat's "cpu" line: its 8th number (steal) and the sum of all, in
 *             USER_HZ ticks (fs/proc/stat.c, show_stat)
 *   psi_us, psi_avg10  "some" of cpu.pressure (kernel/sched/psi.c, psi_show: "some avg10=A.BB
 *             avg60=.. avg300=.. total=US", total in microseconds), from the process's own
 *             cgroup v2 when /proc/self/cgroup names one other than "/" (psi_own), else from
 *             /proc/pressure/cpu, which is the whole host's
 * A counter the kernel does not have is -1. */
struct pf_host_cpu {
    long long wait_ns;
    long long steal, total;
    long long psi_us;
    double psi_avg10;
    bool psi_own;
};
/* Never fails: what cannot be read is -1. */
void pf_host_cpu_read(struct pf_host_cpu *out, const struct pf_host *h);
/* Parses a cpu.pressure text (the "some" line); 0, or PF_EINVAL. Peer-free, but fuzzed all
 * the same: the kernel's format may grow. */
int pf_host_psi_parse(long long *total_us, double *avg10, const char *text);

#endif
