/* Fuzz target: pkg/dl/ldcache.c, the readers of what the dynamic loader reads: an
 * /etc/ld.so.cache as glibc's ldconfig writes it (pf_dl_ldcache_find) and a shared object's
 * DT_RPATH and DT_RUNPATH (pf_dl_elf_search_paths), both of a pod's files. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../pkg/dl/dl.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct buf_reader {
    const uint8_t *b;
    size_t len;
};
static long buf_read(void *arg, void *out, size_t len, uint64_t off)
{
    const struct buf_reader *r = arg;
    if (off >= r->len) return 0;
    size_t n = r->len - off < len ? (size_t)(r->len - off) : len;
    memcpy(out, r->b + off, n);
    return (long)n;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[256], why[200];
    size_t entries = 0;
    why[0] = '\0';
    int rc = pf_dl_ldcache_find(data, size, "libnccl-net.so", path, sizeof(path), &entries, why,
                                sizeof(why));
    if (rc < 0 && !why[0]) abort(); /* a refusal says why */
    if (rc == 1 && !memchr(path, '\0', sizeof(path))) abort();
    if (rc >= 0 && entries > size) abort(); /* no entry past the file */
    struct buf_reader r = {data, size};
    struct pf_dl_elf_paths p;
    why[0] = '\0';
    rc = pf_dl_elf_search_paths(&p, buf_read, &r, why, sizeof(why));
    if (rc < 0 && !why[0]) abort();
    if (rc == 0 &&
        (!memchr(p.rpath, '\0', sizeof(p.rpath)) || !memchr(p.runpath, '\0', sizeof(p.runpath))))
        abort();
    return 0;
}
