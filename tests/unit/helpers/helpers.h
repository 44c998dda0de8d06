/* The unit tests' shared harness, linked into every test binary (tests run from tests/, so
 * "fixtures/..." names a fixture): shell commands and temporary folders that fail the test
 * when they fail, files read whole, golden files, fixture trees as a check's root prefix,
 * and a check's findings as text. Include after <cmocka.h>. */
#ifndef PF_TEST_HELPERS_H
#define PF_TEST_HELPERS_H

#include <stdbool.h>
#include <stddef.h>

#include "../../../pkg/checks/checks.h"

/* ---- the file system */

/* Runs a shell command; the test fails when it exits non-zero. */
void th_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A fresh folder /tmp/pf-<tag>-XXXXXX into dir (at least 64 bytes); fails the test when
 * it cannot be made. */
void th_tmpdir(char *dir, size_t n, const char *tag);
/* Removes a folder and everything in it; false when rm says no. */
bool th_rmtree(const char *dir);
/* rel made absolute against the working folder (tests/); an absolute path is kept. */
void th_abs_path(char *out, size_t n, const char *rel);
/* The whole file, NUL-terminated (caller frees); NULL when it cannot be read. len may be
 * NULL. */
char *th_slurp(const char *path, size_t *len);
/* Writes text to path (created or truncated); fails the test when it cannot. */
void th_write_file(const char *path, const char *text);
/* Compares actual with the golden file at path; PF_UPDATE_GOLDEN=1 rewrites the file
 * first. */
void th_golden(const char *path, const char *actual);

/* ---- a check run on a fixture tree */

enum th_root {
    TH_IN_PLACE,   /* the fixture itself is the root (read-only use) */
    TH_COPY,       /* a copy of the fixture in a temporary folder (cp -a) */
    TH_MATERIALIZE /* fixtures/materialize.sh makes the tree real in a temporary folder */
};

/* Config, verdict and context rooted at a fixture. th_env_open sets the config's defaults
 * (change cfg before th_env_start); th_env_start makes the verdict and the context;
 * th_env_check runs one check (the inventory first) into c; th_env_close frees all and
 * removes the temporary folder. */
struct th_env {
    char dir[64];    /* the temporary folder, "" for TH_IN_PLACE */
    char root[1024]; /* the root prefix, absolute */
    struct pf_config cfg;
    struct pf_verdict v;
    struct pf_ctx ctx;
    struct pf_check *c;
    bool started;
};
void th_env_open(struct th_env *e, const char *fixture, enum th_root how);
void th_env_start(struct th_env *e);
/* th_env_start when not started yet, then the check; returns c. */
struct pf_check *th_env_check(struct th_env *e, const char *id, pf_check_fn fn);
void th_env_close(struct th_env *e);
/* Sets an environment variable in the context (origin "test"). */
void th_env_set(struct th_env *e, const char *name, const char *value);

/* ---- findings as text */

/* Sorted, de-duplicated finding codes joined with ','. */
void th_codes(char *out, size_t n, const struct pf_check *c);
/* "code:status,code:status" of the check's findings, in order (a static buffer). */
const char *th_codes_status(const struct pf_check *c);
/* The first finding with this code whose message contains needle (NULL: any), or NULL. */
const struct pf_finding *th_finding(const struct pf_check *c, const char *code, const char *needle);

#endif
