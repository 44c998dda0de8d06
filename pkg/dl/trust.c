/* Which files preflight itself picks to load, beyond what the dynamic loader's own search
 * (the soname) and an override the operator names: only those in a tree no one else can
 * change, and torch's presence only where a real shared object says so.
 *
 * The rule follows the dynamic loader's secure mode. glibc, for a process with AT_SECURE
 * (elf/rtld.c process_envvars drops LD_LIBRARY_PATH and the other variables of
 * sysdeps/generic/unsecvars.h; elf/dl-load.c fillin_rpath/_dl_dst_substitute keep an
 * expanded $ORIGIN only when is_trusted_path_normalize finds it among the system directories,
 * and open_path takes an LD_PRELOAD library in secure mode only from those directories and
 * only when it is set-user-ID; glibc 2.36, tag glibc-2.36), loads only from places root
 * alone can write. The search trees of a training image (/opt/<app>/.venv, /venv, ...) are
 * not system directories, so the same property is checked on the file system instead: the
 * file and every directory from it up to / owned by root or by this process's effective uid,
 * and none of them writable by its group or by others (the test OpenSSH applies to its
 * configuration and keys, misc.c safe_path, openssh-portable tag V_9_9_P1; a sticky
 * world-writable directory is refused too). A tree failing it is skipped, and why is kept
 * for nccl.library's evidence. */
#define _GNU_SOURCE
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* One name's verdict on st (a file or a directory); false with why set. */
static bool owner_ok(const char *name, const struct stat *st, char *why, size_t n)
{
    uid_t me = geteuid();
    if (st->st_uid != 0 && st->st_uid != me) {
        snprintf(why, n, "%s is owned by uid %u (only root or uid %u, this process, is trusted)",
                 name, (unsigned)st->st_uid, (unsigned)me);
        return false;
    }
    if (st->st_mode & (S_IWGRP | S_IWOTH)) {
        snprintf(why, n, "%s is writable by its %s (mode %04o)", name,
                 (st->st_mode & S_IWOTH) ? "others" : "group", (unsigned)(st->st_mode & 07777));
        return false;
    }
    return true;
}

bool pf_dl_path_trusted(const char *path, char *resolved, size_t rn, char *why, size_t n)
{
    char real[PATH_MAX];
    if (resolved && rn) resolved[0] = '\0';
    if (!realpath(path, real)) {
        snprintf(why, n, "%s: %s", path, strerror(errno));
        return false;
    }
    struct stat st;
    if (stat(real, &st) != 0) {
        snprintf(why, n, "%s: %s", real, strerror(errno));
        return false;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(why, n, "%s is not a regular file", real);
        return false;
    }
    if (!owner_ok(real, &st, why, n)) return false;
    /* each directory above it, up to and including / (realpath gave no "..", no links) */
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", real);
    for (;;) {
        char *slash = strrchr(dir, '/');
        if (!slash) break;
        if (slash == dir)
            slash[1] = '\0'; /* "/" */
        else
            *slash = '\0';
        if (stat(dir, &st) != 0) {
            snprintf(why, n, "%s: %s", dir, strerror(errno));
            return false;
        }
        if (!owner_ok(dir, &st, why, n)) return false;
        if (strcmp(dir, "/") == 0) break;
    }
    if (resolved && rn) snprintf(resolved, rn, "%s", real);
    return true;
}

/* The ELF identification of the running process, as the loader would require of a library
 * it maps (elf/dl-load.c open_verify compares e_ident's class and data and e_machine). */
#if defined(__x86_64__)
#define PF_ELF_MACHINE 62 /* EM_X86_64 */
#elif defined(__aarch64__)
#define PF_ELF_MACHINE 183 /* EM_AARCH64 */
#elif defined(__powerpc64__)
#define PF_ELF_MACHINE 21 /* EM_PPC64 */
#else
#define PF_ELF_MACHINE 0 /* not compared */
#endif

bool pf_dl_elf_shared(const unsigned char *b, size_t len, char *why, size_t n)
{
    /* e_ident (16 bytes), e_type (2), e_machine (2): the same offsets in ELF32 and ELF64
     * (System V ABI, "ELF Header"; glibc elf/elf.h) */
    if (len < 20) {
        snprintf(why, n, "%zu bytes: too short for an ELF header", len);
        return false;
    }
    if (memcmp(b, "\177ELF", 4) != 0) {
        snprintf(why, n, "not an ELF file (no \\177ELF magic)");
        return false;
    }
    unsigned want_class = sizeof(void *) == 8 ? 2 : 1; /* ELFCLASS64 : ELFCLASS32 */
    if (b[4] != want_class) {
        snprintf(why, n, "ELF class %u, not this process's %u", b[4], want_class);
        return false;
    }
    const union {
        uint16_t u;
        unsigned char c[2];
    } probe = {1};
    unsigned want_data = probe.c[0] ? 1 : 2; /* ELFDATA2LSB : ELFDATA2MSB */
    if (b[5] != want_data) {
        snprintf(why, n, "ELF data encoding %u, not this process's %u", b[5], want_data);
        return false;
    }
    uint16_t type =
        want_data == 1 ? (uint16_t)(b[16] | b[17] << 8) : (uint16_t)(b[16] << 8 | b[17]);
    uint16_t machine =
        want_data == 1 ? (uint16_t)(b[18] | b[19] << 8) : (uint16_t)(b[18] << 8 | b[19]);
    if (type != 3) { /* ET_DYN */
        snprintf(why, n, "ELF type %u, not a shared object (ET_DYN 3)", type);
        return false;
    }
    if (PF_ELF_MACHINE && machine != PF_ELF_MACHINE) {
        snprintf(why, n, "ELF machine %u, not this process's %u", machine, PF_ELF_MACHINE);
        return false;
    }
    return true;
}

bool pf_dl_torch_proof(const char *nccl_path, char *torch, size_t n, char *why, size_t whyn)
{
    if (why && whyn) why[0] = '\0';
    char scratch[8];
    if (!why || !whyn) {
        why = scratch;
        whyn = sizeof(scratch);
    }
    size_t len = strlen(nccl_path), t = strlen(PF_DL_WHEEL_NCCL);
    if (len <= t || strcmp(nccl_path + len - t, PF_DL_WHEEL_NCCL) != 0) {
        snprintf(why, whyn, "not a wheel's NCCL");
        return false;
    }
    char lib[PF_DL_PATH_MAX + 64];
    snprintf(lib, sizeof(lib), "%.*s/torch/lib/libtorch_cuda.so", (int)(len - t), nccl_path);
    if (access(lib, F_OK) != 0) {
        snprintf(why, whyn, "no %s", lib);
        return false;
    }
    char w[600], real[PATH_MAX];
    if (!pf_dl_path_trusted(lib, real, sizeof(real), w, sizeof(w))) {
        snprintf(why, whyn, "%s not trusted: %s", lib, w);
        return false;
    }
    unsigned char hdr[64];
    ssize_t got = -1;
    int fd = open(real, O_RDONLY | O_CLOEXEC | O_NOFOLLOW); /* the file judged, no link */
    if (fd >= 0) {
        got = read(fd, hdr, sizeof(hdr));
        close(fd);
    }
    if (got < 0) {
        snprintf(why, whyn, "%s: %s", lib, strerror(errno));
        return false;
    }
    if (!pf_dl_elf_shared(hdr, (size_t)got, w, sizeof(w))) {
        snprintf(why, whyn, "%s is not torch's library: %s", lib, w);
        return false;
    }
    if (torch && n) snprintf(torch, n, "%s", lib);
    return true;
}

bool pf_dl_torch_beside(const char *nccl_path, char *torch, size_t n)
{
    return pf_dl_torch_proof(nccl_path, torch, n, NULL, 0);
}

/* ---- what was skipped, process-wide, for the evidence */
static pthread_mutex_t skipped_lock = PTHREAD_MUTEX_INITIALIZER;
static struct pf_strlist skipped;

void pf_dl_skip_note(const char *what, const char *path, const char *why)
{
    char line[2048];
    snprintf(line, sizeof(line), "%s %s: %s", what, path, why);
    pthread_mutex_lock(&skipped_lock);
    if (!pf_strlist_has(&skipped, line) && skipped.n < 64) pf_strlist_add(&skipped, line);
    pthread_mutex_unlock(&skipped_lock);
}

void pf_dl_skipped(struct pf_strlist *out, const char *what)
{
    size_t wl = strlen(what);
    pthread_mutex_lock(&skipped_lock);
    for (size_t i = 0; i < skipped.n; i++)
        if (strncmp(skipped.v[i], what, wl) == 0 && skipped.v[i][wl] == ' ')
            pf_strlist_add(out, skipped.v[i] + wl + 1);
    pthread_mutex_unlock(&skipped_lock);
}
