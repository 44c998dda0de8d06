/* dl (private): the one loader every library goes through, shared by dl.c (NCCL, CUDA,
 * libibverbs) and curl.c (libcurl). A library is a table of symbols resolved into a struct
 * of pointers whose first members are the handle and the loaded file's path. Not part of
 * dl.h. */
#ifndef PF_DL_INTERNAL_H
#define PF_DL_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "dl.h"

/* One symbol: its name, an optional version (dlvsym), an alternative name tried after it,
 * where its pointer goes, and whether the load fails without it. */
struct pf_dl_sym {
    const char *name;
    const char *version;
    const char *alt;
    size_t offset;
    bool required;
};

#define PF_DL_SYM(T, field, name, ver, alt, req)                                                   \
    {                                                                                              \
        name, ver, alt, offsetof(T, field), req                                                    \
    }
#define REQ(T, field, name) PF_DL_SYM(T, field, name, NULL, NULL, true)
#define REQ2(T, field, name, alt) PF_DL_SYM(T, field, name, NULL, alt, true)
#define OPT(T, field, name) PF_DL_SYM(T, field, name, NULL, NULL, false)
#define OPT2(T, field, name, alt) PF_DL_SYM(T, field, name, NULL, alt, false)
#define VREQ(T, field, name, ver) PF_DL_SYM(T, field, name, ver, NULL, true)
#define VOPT(T, field, name, ver) PF_DL_SYM(T, field, name, ver, NULL, false)

struct pf_dl_lib {
    const char *what;         /* "libnccl.so.2" */
    const char *env;          /* override variable */
    const char *env_alias;    /* an older name of it, read when env is unset; or NULL */
    const char *const *names; /* sonames and usual places, tried in order (globs allowed) */
    const struct pf_dl_sym *syms;
    size_t nsyms;
    size_t size; /* of the struct */
};

/* Loads lib from path (NULL: the override variables, then lib->names) into out, a struct of
 * lib->size bytes that starts with the handle and char path[PF_DL_PATH_MAX]. */
int pf_dl_open_lib(void *out, const struct pf_dl_lib *lib, const char *path);

/* Load once: the result and its message are kept for every later call. */
struct pf_dl_once {
    pthread_mutex_t lock;
    bool done;
    int rc;
    char msg[600];
};
#define PF_DL_ONCE_INIT                                                                            \
    {                                                                                              \
        PTHREAD_MUTEX_INITIALIZER, false, 0, ""                                                    \
    }

/* The first call runs open_fn(out, path) and keeps its result; later calls (whatever their
 * path) return it again, setting the same message on failure. */
int pf_dl_load_once(struct pf_dl_once *o, void *out, const char *path,
                    int (*open_fn)(void *out, const char *path));

#endif
