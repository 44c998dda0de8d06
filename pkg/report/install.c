/* `preflight install DIR`: an initContainer from preflight's image copies the binary into a
 * shared emptyDir, so that a later initContainer can run it inside the training image itself
 * (with that image's libnccl, libibverbs and libcuda). */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "report.h"

#define SELF "/proc/self/exe"

static int copy_fd(int in, int out, const char *src, const char *dst)
{
    char buf[1 << 16];
    for (;;) {
        ssize_t n = read(in, buf, sizeof(buf));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return pf_err_set(PF_ERR, "cannot read %s: %s", src, strerror(errno));
        if (n == 0) return 0;
        for (ssize_t off = 0; off < n;) {
            ssize_t w = write(out, buf + off, (size_t)(n - off));
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0)
                return pf_err_set(PF_ERR, "cannot write %s: %s", dst,
                                  w < 0 ? strerror(errno) : "short write");
            off += w;
        }
    }
}

int pf_report_install_self(char *out, size_t n, const char *dir)
{
    struct stat st;
    if (!dir || !*dir)
        return pf_err_set(PF_EUSAGE,
                          "install needs a folder (e.g. preflight install /opt/preflight)");
    if (stat(dir, &st) < 0) return pf_err_set(PF_ERR, "install: %s: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode)) return pf_err_set(PF_ERR, "install: %s is not a folder", dir);
    char dst[PF_HOST_PATH_MAX], tmp[PF_HOST_PATH_MAX + 32];
    size_t len = strlen(dir);
    const char *sep = len > 0 && dir[len - 1] == '/' ? "" : "/";
    if (pf_snprintf(dst, sizeof(dst), "%s%spreflight", dir, sep) < 0 ||
        pf_snprintf(tmp, sizeof(tmp), "%s%s.preflight.tmp.%d", dir, sep, (int)getpid()) < 0)
        return pf_err_set(PF_ETOOBIG, "install: %s: path too long", dir);
    int in = open(SELF, O_RDONLY | O_CLOEXEC);
    if (in < 0) return pf_err_set(PF_ERR, "install: cannot open %s: %s", SELF, strerror(errno));
    int r = 0;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0700);
    if (fd < 0) {
        r = pf_err_set(PF_ERR, "install: cannot create %s: %s", tmp, strerror(errno));
        goto out_in;
    }
    r = copy_fd(in, fd, SELF, tmp);
    /* 0755 whatever the umask: the next container may run as another user */
    if (r == 0 && fchmod(fd, 0755) < 0)
        r = pf_err_set(PF_ERR, "install: chmod %s: %s", tmp, strerror(errno));
    if (r == 0 && fsync(fd) < 0)
        r = pf_err_set(PF_ERR, "install: fsync %s: %s", tmp, strerror(errno));
    if (close(fd) < 0 && r == 0)
        r = pf_err_set(PF_ERR, "install: close %s: %s", tmp, strerror(errno));
    if (r == 0 && rename(tmp, dst) < 0)
        r = pf_err_set(PF_ERR, "install: cannot rename %s to %s: %s", tmp, dst, strerror(errno));
    if (r < 0)
        unlink(tmp);
    else if (out)
        pf_strcpy(out, n, dst);
out_in:
    close(in);
    return r;
}
