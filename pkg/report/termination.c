/* The termination message: the one line Kubernetes shows for a terminated container
 * (`kubectl describe pod`, status.initContainerStatuses[].state.terminated.message), and what a
 * Job's podFailurePolicy or a controller reads besides the exit code. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "report.h"

int pf_report_termination_path(char *out, size_t n, const char *configured)
{
    if (n == 0) return PF_ETOOBIG;
    out[0] = '\0';
    struct stat st;
    if (!configured || !*configured) {
        /* the kubelet creates this file in every container; outside a pod it is not there and
         * nothing is written */
        if (stat(PF_REPORT_TERMINATION_DEFAULT, &st) == 0 && S_ISREG(st.st_mode))
            pf_strcpy(out, n, PF_REPORT_TERMINATION_DEFAULT);
        return 0;
    }
    char dir[PATH_MAX];
    if (pf_strcpy(dir, sizeof(dir), configured) < 0 || pf_strcpy(out, n, configured) < 0) {
        out[0] = '\0';
        return pf_err_set(PF_ETOOBIG, "termination log %.80s...: path too long", configured);
    }
    char *slash = strrchr(dir, '/');
    if (slash == dir)
        dir[1] = '\0';
    else if (slash)
        *slash = '\0';
    else
        pf_strcpy(dir, sizeof(dir), ".");
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) out[0] = '\0'; /* written only then */
    return 0;
}

int pf_report_termination_write(const struct pf_verdict *v, const char *path)
{
    if (!path || !*path) return 0;
    char line[PF_REPORT_TERMINATION_MAX];
    pf_verdict_reason_line(line, sizeof(line) - 1, v);
    size_t len = strlen(line);
    line[len++] = '\n';
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return pf_err_set(PF_ERR, "termination log %s: %s", path, strerror(errno));
    size_t off = 0;
    int r = 0;
    while (off < len) {
        ssize_t w = write(fd, line + off, len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            r = pf_err_set(PF_ERR, "termination log %s: %s", path,
                           w < 0 ? strerror(errno) : "short write");
            break;
        }
        off += (size_t)w;
    }
    close(fd);
    return r;
}
