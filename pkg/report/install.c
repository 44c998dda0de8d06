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

/* Copies in to the temporary file t; a negative errno (EIO stands for a failed read). */
static int copy_fd(int in, struct pf_file_tmp *t, int *read_errno)
{
    char buf[1 << 16];
    for (;;) {
        ssize_t n = read(in, buf, sizeof(buf));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            *read_errno = errno;
            return -EIO;
        }
        if (n == 0) return 0;
        int e = pf_file_tmp_write(t, buf, (size_t)n);
        if (e < 0) return e;
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
    char dst[PF_HOST_PATH_MAX];
    size_t len = strlen(dir);
    const char *sep = len > 0 && dir[len - 1] == '/' ? "" : "/";
    struct pf_file_target target;
    if (pf_snprintf(dst, sizeof(dst), "%s%spreflight", dir, sep) < 0 ||
        pf_file_split(&target, dst) < 0)
        return pf_err_set(PF_ETOOBIG, "install: %s: path too long", dir);
    int in = open(SELF, O_RDONLY | O_CLOEXEC);
    if (in < 0) return pf_err_set(PF_ERR, "install: cannot open %s: %s", SELF, strerror(errno));
    struct pf_file_tmp t;
    int read_errno = 0;
    /* 0755 whatever the umask: the next container may run as another user */
    int e = pf_file_tmp_open(&t, &target, 0755, pf_file_random(), true);
    if (e == 0) e = copy_fd(in, &t, &read_errno);
    if (e == 0) e = pf_file_tmp_commit(&t);
    int r = 0;
    if (read_errno) {
        pf_file_tmp_abort(&t);
        r = pf_err_set(PF_ERR, "install: cannot read %s: %s", SELF, strerror(read_errno));
    } else if (e < 0) {
        enum pf_file_step step = t.step;
        pf_file_tmp_abort(&t);
        r = pf_file_error(dst, step, e, lstat(dst, &st) == 0);
        char why[1024];
        pf_strcpy(why, sizeof(why), pf_err_msg());
        r = pf_err_set(r, "install: %s", why);
    } else if (out) {
        pf_strcpy(out, n, dst);
    }
    close(in);
    return r;
}
