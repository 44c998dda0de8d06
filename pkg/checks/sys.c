/* sys.shm and sys.ports: /dev/shm size and the ephemeral port range, under the root prefix. */
#define _GNU_SOURCE
#include "checks.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>

#define GIB (1024.0 * 1024.0 * 1024.0)
#define MIB (1024.0 * 1024.0)
#define SHM_MIN_BYTES (1ULL << 30)        /* below this: shm-small */
#define SHM_MIN_FREE_BYTES (256ULL << 20) /* a big /dev/shm with less free than this */
#define TMPFS_MAGIC_ 0x01021994
#define PORTS_MIN 16384

static void size_text(char *out, size_t n, double bytes)
{
    if (bytes >= GIB)
        snprintf(out, n, "%.1f GiB", bytes / GIB);
    else
        snprintf(out, n, "%.0f MiB", bytes / MIB);
}

void pf_check_sys_shm(struct pf_check *out, struct pf_ctx *ctx)
{
    char path[PF_HOST_PATH_MAX];
    if (pf_host_path(path, sizeof(path), &ctx->host, "/dev/shm") < 0) {
        pf_check_skip(out, "%s", pf_err_msg());
        return;
    }
    bool gpus = ctx->gpus.n > 0;
    enum pf_status st = gpus ? PF_FAIL : PF_WARN;
    struct statvfs vfs;
    if (statvfs(path, &vfs) != 0) {
        if (errno == ENOENT && ctx->host.root[0]) {
            /* a tree under --root that holds no dev/shm is a copy without it, not a pod the
             * container runtime gave none (it mounts /dev/shm in every container) */
            pf_check_unknown(out, "shm-small", "/dev/shm is not in the tree under the root prefix");
            pf_check_skip(out, "/dev/shm is not under the root prefix: unknown");
            return;
        }
        pf_check_add_finding(out, "shm-small", st, NULL,
                             "/dev/shm is missing (%s: %s): NCCL cannot create its shared-memory "
                             "segments",
                             path, strerror(errno));
        return;
    }
    double size = (double)vfs.f_blocks * (double)vfs.f_frsize;
    double avail = (double)vfs.f_bavail * (double)vfs.f_frsize;
    struct statfs fs;
    bool tmpfs = statfs(path, &fs) == 0 && (unsigned long)fs.f_type == TMPFS_MAGIC_;
    struct pf_node *ev = out->evidence;
    pf_node_set_str(ev, "path", "/dev/shm");
    pf_node_set_int(ev, "sizeBytes", (long long)size);
    pf_node_set_int(ev, "availableBytes", (long long)avail);
    pf_node_set_bool(ev, "tmpfs", tmpfs);
    pf_node_set_int(ev, "minimumBytes", (long long)SHM_MIN_BYTES);
    pf_node_set_int(ev, "gpus", (long long)ctx->gpus.n);
    const char *cumem = pf_env_get(&ctx->env, "NCCL_CUMEM_HOST_ENABLE");
    if (cumem) pf_node_set_str(ev, "ncclCumemHostEnable", cumem);

    char ssize[32], savail[32];
    size_text(ssize, sizeof(ssize), size);
    size_text(savail, sizeof(savail), avail);
    if (size < (double)SHM_MIN_BYTES) {
        pf_check_add_finding(
            out, "shm-small", st, NULL,
            "/dev/shm is %s (%s free), below 1 GiB%s: NCCL fails with \"failed "
            "to extend /dev/shm\" when it needs shared-memory buffers",
            ssize, savail, size <= 64 * MIB + 1 ? " (the container runtime's 64 MiB default)" : "");
    } else if (avail < (double)SHM_MIN_FREE_BYTES) {
        pf_check_add_finding(out, "shm-small", PF_WARN, NULL,
                             "/dev/shm is %s but only %s is free: something else fills it", ssize,
                             savail);
    }
    pf_check_set_message(out, "/dev/shm is %s (%s free)%s", ssize, savail,
                         tmpfs ? "" : ", not a tmpfs");
}

/* "32768\t60999": exactly two integers separated by blanks. */
static bool parse_range(const char *s, long *lo, long *hi)
{
    char *end;
    errno = 0;
    *lo = strtol(s, &end, 10);
    if (end == s || errno || !(*end == '\t' || *end == ' ')) return false;
    s = end;
    while (*s == '\t' || *s == ' ')
        s++;
    errno = 0;
    *hi = strtol(s, &end, 10);
    if (end == s || errno) return false;
    while (*end && isspace((unsigned char)*end))
        end++;
    return *end == '\0' && *lo >= 0 && *hi <= 65535 && *lo <= *hi;
}

/* Whether port is in ip_local_reserved_ports ("29400,30000-30010"). */
static bool reserved(const char *list, long port)
{
    const char *p = list;
    while (p && *p) {
        char *end;
        long a = strtol(p, &end, 10), b = a;
        if (end == p) return false;
        if (*end == '-') {
            const char *q = end + 1;
            b = strtol(q, &end, 10);
            if (end == q) return false;
        }
        if (port >= a && port <= b) return true;
        p = strchr(end, ',');
        if (p) p++;
    }
    return false;
}

/* The port of "host:port" / "[v6]:port"; -1 when none. */
static long port_of(const char *s)
{
    if (!s) return -1;
    const char *c = strrchr(s, ':');
    const char *p = c ? c + 1 : s;
    char *end;
    errno = 0;
    long v = strtol(p, &end, 10);
    if (end == p || *end || errno || v <= 0 || v > 65535) return -1;
    return v;
}

void pf_check_sys_ports(struct pf_check *out, struct pf_ctx *ctx)
{
    static const char file[] = "/proc/sys/net/ipv4/ip_local_port_range";
    char buf[128];
    int r = pf_host_read(buf, sizeof(buf), &ctx->host, "%s", file);
    if (r == PF_ENOENT) {
        pf_check_skip(out, "%s is not there", file);
        return;
    }
    long lo, hi;
    if (r < 0 || !parse_range(buf, &lo, &hi)) {
        char shown[64];
        size_t k = 0;
        for (size_t i = 0; r >= 0 && buf[i] && k + 4 < sizeof(shown); i++)
            shown[k++] = isprint((unsigned char)buf[i]) ? buf[i] : '?';
        shown[k] = '\0';
        /* the kernel writes "%d\t%d\n" (ipv4_local_port_range, net/ipv4/sysctl_net_ipv4.c):
         * anything else says nothing about the range, so neither finding can be judged */
        char what[400];
        snprintf(what, sizeof(what),
                 "%s %s%s%s: expected two port numbers separated by a tab (like "
                 "\"32768\t60999\")",
                 file, r < 0 ? "cannot be read: " : "holds \"", r < 0 ? pf_err_msg() : shown,
                 r < 0 ? "" : "\"");
        pf_check_unknown(out, "port-range-narrow", "%s", what);
        pf_check_unknown(out, "port-in-ephemeral-range", "%s", what);
        pf_check_set_message(out, "the ephemeral port range is unknown");
        return;
    }
    long count = hi - lo + 1;
    struct pf_node *ev = out->evidence;
    pf_node_set_int(ev, "low", lo);
    pf_node_set_int(ev, "high", hi);
    pf_node_set_int(ev, "ports", count);
    char res[4096] = "";
    if (pf_host_read(res, sizeof(res), &ctx->host, "/proc/sys/net/ipv4/ip_local_reserved_ports") <
        0)
        res[0] = '\0';
    if (res[0]) pf_node_set_str(ev, "reserved", res);

    if (count < PORTS_MIN)
        pf_check_add_finding(out, "port-range-narrow", PF_WARN, NULL,
                             "the ephemeral port range %ld-%ld has %ld ports, fewer than %d: a "
                             "large job's many NCCL connections can run out of local ports",
                             lo, hi, count, PORTS_MIN);

    struct {
        const char *what;
        long port;
    } ports[3] = {
        {"the rendezvous port (rendezvous.port)", ctx->config ? ctx->config->rendezvous_port : -1},
        {"MASTER_PORT", port_of(pf_env_get(&ctx->env, "MASTER_PORT"))},
        {"the port of NCCL_COMM_ID", port_of(pf_env_get(&ctx->env, "NCCL_COMM_ID"))},
    };
    pf_node_set_int(ev, "rendezvousPort", ports[0].port);
    for (size_t i = 0; i < PF_ARRAY_LEN(ports); i++) {
        long p = ports[i].port;
        if (p <= 0 || p < lo || p > hi || reserved(res, p)) continue;
        pf_check_add_finding(out, "port-in-ephemeral-range", PF_WARN, NULL,
                             "%s %ld lies inside the ephemeral range %ld-%ld: an outgoing "
                             "connection can take it first, and the listener fails with "
                             "\"address already in use\"",
                             ports[i].what, p, lo, hi);
    }
    pf_check_set_message(out, "ephemeral ports %ld-%ld (%ld ports)", lo, hi, count);
}
