/* The dynamic loader's own files, read as glibc writes and reads them, for a search that
 * follows the loader's order without loading anything (pf_check_rdma_efa looks for NCCL's net
 * plugin that way, under the root prefix):
 *   - /etc/ld.so.cache, written by ldconfig (glibc elf/cache.c, save_cache) and read by
 *     _dl_load_cache_lookup (elf/dl-cache.c); its layout in sysdeps/generic/dl-cache.h
 *     (glibc 2.31 to 2.40): the old table "ld.so-1.7.0" (struct cache_file, 12-byte
 *     file_entry) optionally followed, at the next 8-byte boundary, by the new one
 *     "glibc-ld.so.cache1.1" (struct cache_file_new, 24-byte file_entry_new); since glibc
 *     2.32 ldconfig writes the new table alone, at offset 0. The new table's key and value
 *     are offsets from the new header's first byte; the old table's from the end of its own
 *     entries. flags: the type in the low byte (FLAG_ELF_LIBC6 3), the machine above it
 *     (FLAG_X8664_LIB64 0x0300, FLAG_AARCH64_LIB64 0x0a00; sysdeps/generic/ldconfig.h), as
 *     _dl_cache_check_flags of sysdeps/unix/sysv/linux/{x86_64,aarch64}/dl-cache.h compares
 *     them;
 *   - DT_RPATH and DT_RUNPATH of a shared object's dynamic section, found as the loader
 *     finds them: PT_DYNAMIC's entries, DT_STRTAB's address mapped to a file offset through
 *     the PT_LOAD segments (System V ABI, "Dynamic Section"; glibc elf/elf.h). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dl.h"

#define OLD_MAGIC "ld.so-1.7.0"
#define NEW_MAGIC "glibc-ld.so.cache1.1"
#define OLD_HDR 16   /* magic[11], pad, nlibs */
#define OLD_ENTRY 12 /* flags, key, value */
#define NEW_HDR 48   /* magic[17], version[3], nlibs, len_strings, unused[5] */
#define NEW_ENTRY 24 /* flags, key, value, osversion, hwcap */

#if defined(__x86_64__)
#define CACHE_ARCH 0x0300 /* FLAG_X8664_LIB64 */
#elif defined(__aarch64__)
#define CACHE_ARCH 0x0a00 /* FLAG_AARCH64_LIB64 */
#else
#define CACHE_ARCH (-1) /* any */
#endif

static uint32_t u32(const unsigned char *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static bool flags_fit(int32_t flags)
{
    if ((flags & 0xff) != 3 && (flags & 0xff) != 1) return false; /* FLAG_ELF_LIBC6, FLAG_ELF */
    return CACHE_ARCH < 0 || (flags & 0xff00) == CACHE_ARCH;
}

/* The NUL-terminated string at base + off inside [b, b + len), or NULL. */
static const char *str_at(const unsigned char *b, size_t len, size_t base, uint32_t off)
{
    if (base > len || off >= len - base) return NULL;
    const unsigned char *s = b + base + off;
    if (!memchr(s, '\0', len - base - off)) return NULL;
    return (const char *)s;
}

int pf_dl_ldcache_find(const unsigned char *b, size_t len, const char *name, char *path, size_t n,
                       size_t *entries, char *why, size_t wn)
{
    if (path && n) path[0] = '\0';
    if (entries) *entries = 0;
    size_t base = 0, first = 0, count = 0, size = 0;
    if (len >= OLD_HDR && memcmp(b, OLD_MAGIC, sizeof(OLD_MAGIC) - 1) == 0) {
        uint32_t nold = u32(b + 12);
        if (nold > (len - OLD_HDR) / OLD_ENTRY) {
            snprintf(why, wn, "old table: %u entries do not fit in %zu bytes", nold, len);
            return -1;
        }
        size_t end = OLD_HDR + (size_t)nold * OLD_ENTRY;
        size_t aligned = (end + 7) & ~(size_t)7;
        if (aligned + NEW_HDR <= len &&
            memcmp(b + aligned, NEW_MAGIC, sizeof(NEW_MAGIC) - 1) == 0) {
            base = aligned;
        } else {
            /* the old table alone (glibc before 2.2, or ldconfig -c old) */
            base = end;
            first = OLD_HDR;
            count = nold;
            size = OLD_ENTRY;
        }
    } else if (len >= NEW_HDR && memcmp(b, NEW_MAGIC, sizeof(NEW_MAGIC) - 1) == 0) {
        base = 0;
    } else {
        snprintf(why, wn, "%zu bytes without the magic of ldconfig's cache (\"%s\" or \"%s\")", len,
                 NEW_MAGIC, OLD_MAGIC);
        return -1;
    }
    if (size == 0) { /* the new table at base */
        uint32_t nnew = u32(b + base + 20);
        if (nnew > (len - base - NEW_HDR) / NEW_ENTRY) {
            snprintf(why, wn, "new table: %u entries do not fit in %zu bytes", nnew, len);
            return -1;
        }
        first = base + NEW_HDR;
        count = nnew;
        size = NEW_ENTRY;
    }
    if (entries) *entries = count;
    for (size_t i = 0; i < count; i++) {
        const unsigned char *e = b + first + i * size;
        int32_t flags;
        memcpy(&flags, e, 4);
        if (!flags_fit(flags)) continue;
        const char *key = str_at(b, len, base, u32(e + 4));
        const char *value = str_at(b, len, base, u32(e + 8));
        if (!key || !value || strcmp(key, name) != 0) continue;
        if (path && n) snprintf(path, n, "%s", value);
        return 1;
    }
    return 0;
}

/* ---- DT_RPATH and DT_RUNPATH */
static uint64_t get(const unsigned char *p, bool is64)
{
    if (!is64) return u32(p);
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

static uint16_t u16(const unsigned char *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

#define MAX_PHNUM 4096
#define MAX_DYN (1u << 20)
#define MAX_STR 4096

/* The file offset of virtual address a, through the PT_LOAD headers; -1 when none maps it. */
static int64_t vaddr_offset(const unsigned char *ph, size_t phnum, size_t phent, bool is64,
                            uint64_t a)
{
    for (size_t i = 0; i < phnum; i++) {
        const unsigned char *p = ph + i * phent;
        if (u32(p) != 1) continue; /* PT_LOAD */
        uint64_t off = is64 ? get(p + 8, true) : get(p + 4, false);
        uint64_t va = is64 ? get(p + 16, true) : get(p + 8, false);
        uint64_t fsz = is64 ? get(p + 32, true) : get(p + 16, false);
        if (a >= va && a - va < fsz && off <= INT64_MAX - (a - va)) return (int64_t)(off + a - va);
    }
    return -1;
}

int pf_dl_elf_search_paths(struct pf_dl_elf_paths *out, pf_dl_read_at_fn rd, void *arg, char *why,
                           size_t wn)
{
    memset(out, 0, sizeof(*out));
    unsigned char eh[64];
    long got = rd(arg, eh, sizeof(eh), 0);
    char w[160];
    if (got < 0) {
        snprintf(why, wn, "cannot read its ELF header");
        return -1;
    }
    if (!pf_dl_elf_shared(eh, (size_t)got, w, sizeof(w))) {
        snprintf(why, wn, "%s", w);
        return -1;
    }
    const bool is64 = eh[4] == 2;
    if (is64 && got < 64) {
        snprintf(why, wn, "%ld bytes: too short for an ELF64 header", got);
        return -1;
    }
    if (!is64 && got < 52) {
        snprintf(why, wn, "%ld bytes: too short for an ELF32 header", got);
        return -1;
    }
    uint64_t phoff = is64 ? get(eh + 32, true) : get(eh + 28, false);
    size_t phent = is64 ? u16(eh + 54) : u16(eh + 42);
    size_t phnum = is64 ? u16(eh + 56) : u16(eh + 44);
    if (phent < (is64 ? 56u : 32u) || phnum == 0 || phnum > MAX_PHNUM || phoff > INT64_MAX) {
        snprintf(why, wn, "program headers: %zu of %zu bytes at %llu", phnum, phent,
                 (unsigned long long)phoff);
        return -1;
    }
    unsigned char *ph = malloc(phnum * phent);
    unsigned char *dyn = NULL;
    int rc = -1;
    if (!ph || rd(arg, ph, phnum * phent, phoff) != (long)(phnum * phent)) {
        snprintf(why, wn, "program headers at %llu: cut short", (unsigned long long)phoff);
        goto out;
    }
    uint64_t doff = 0, dsz = 0;
    bool have_dyn = false;
    for (size_t i = 0; i < phnum && !have_dyn; i++) {
        const unsigned char *p = ph + i * phent;
        if (u32(p) != 2) continue; /* PT_DYNAMIC */
        doff = is64 ? get(p + 8, true) : get(p + 4, false);
        dsz = is64 ? get(p + 32, true) : get(p + 16, false);
        have_dyn = true;
    }
    if (!have_dyn) {
        snprintf(why, wn, "no PT_DYNAMIC program header");
        goto out;
    }
    if (dsz > MAX_DYN) dsz = MAX_DYN;
    if (doff > INT64_MAX) {
        snprintf(why, wn, "PT_DYNAMIC at offset %llu", (unsigned long long)doff);
        goto out;
    }
    const size_t dent = is64 ? 16 : 8;
    dyn = malloc(dsz ? dsz : 1);
    long dgot = dyn ? rd(arg, dyn, dsz, doff) : -1;
    if (dgot < 0) {
        snprintf(why, wn, "PT_DYNAMIC at %llu: cannot be read", (unsigned long long)doff);
        goto out;
    }
    uint64_t strtab = 0, strsz = 0, rpath = 0, runpath = 0;
    bool have_strtab = false;
    for (size_t i = 0; (i + 1) * dent <= (size_t)dgot; i++) {
        const unsigned char *d = dyn + i * dent;
        uint64_t tag = get(d, is64), val = get(d + dent / 2, is64);
        if (tag == 0) break; /* DT_NULL */
        if (tag == 5) {      /* DT_STRTAB */
            strtab = val;
            have_strtab = true;
        } else if (tag == 10) /* DT_STRSZ */
            strsz = val;
        else if (tag == 15) { /* DT_RPATH */
            rpath = val;
            out->rpath_set = true;
        } else if (tag == 29) { /* DT_RUNPATH */
            runpath = val;
            out->runpath_set = true;
        }
    }
    if (!out->rpath_set && !out->runpath_set) {
        rc = 0;
        goto out;
    }
    int64_t soff = have_strtab ? vaddr_offset(ph, phnum, phent, is64, strtab) : -1;
    if (soff < 0) {
        snprintf(why, wn, "DT_STRTAB %#llx: in no PT_LOAD segment", (unsigned long long)strtab);
        goto out;
    }
    struct {
        bool set;
        uint64_t idx;
        char *dst;
    } want[2] = {{out->rpath_set, rpath, out->rpath}, {out->runpath_set, runpath, out->runpath}};
    for (size_t k = 0; k < 2; k++) {
        if (!want[k].set) continue;
        if (want[k].idx >= strsz || (uint64_t)soff > INT64_MAX - want[k].idx) {
            snprintf(why, wn, "%s at %llu: past DT_STRSZ %llu", k ? "DT_RUNPATH" : "DT_RPATH",
                     (unsigned long long)want[k].idx, (unsigned long long)strsz);
            goto out;
        }
        char s[MAX_STR];
        uint64_t room = strsz - want[k].idx;
        size_t ask = room < sizeof(s) ? (size_t)room : sizeof(s);
        long sg = rd(arg, s, ask, (uint64_t)soff + want[k].idx);
        if (sg <= 0 || !memchr(s, '\0', (size_t)sg)) {
            snprintf(why, wn, "%s at %llu: no string there", k ? "DT_RUNPATH" : "DT_RPATH",
                     (unsigned long long)want[k].idx);
            goto out;
        }
        size_t sl = strlen(s);
        if (sl >= PF_DL_PATH_MAX) {
            snprintf(why, wn, "%s: %zu bytes, longer than preflight reads",
                     k ? "DT_RUNPATH" : "DT_RPATH", sl);
            goto out;
        }
        memcpy(want[k].dst, s, sl + 1);
    }
    rc = 0;
out:
    free(ph);
    free(dyn);
    return rc;
}
