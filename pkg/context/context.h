/* context: what every check and every stage of the run reads: the root-prefixed host, the
 * config, the environment (struct pf_env), the verdict being filled, the inventory, and the
 * progress callback of the command line. struct pf_env and its look-ups are in
 * pkg/base/env.h; the readers of env files below are in env.c. */
#ifndef PF_CONTEXT_H
#define PF_CONTEXT_H

#include <stdbool.h>
#include <stddef.h>

#include "../base/base.h"
#include "../base/env.h"
#include "../config/config.h"
#include "../host/host.h"
#include "../verdict/verdict.h"

/* The environment a check reads (struct pf_env, pkg/base/env.h); its readers of files are in
 * pkg/context/env.c. NCCL_CONF_FILE /
 * ~/.nccl.conf / /etc/nccl.conf values are added by pf_env_load_nccl_conf with NCCL's own
 * precedence (a real variable wins).
 *
 * Parses an env file: KEY=VALUE lines, '#' comments, blank lines, an optional "export "
 * prefix, and single or double quotes around the whole value. PF_EUSAGE naming file:line on
 * a malformed line. */
int pf_env_parse_file(struct pf_env *e, const char *name, const char *text, size_t len);
int pf_env_load_file(struct pf_env *e, const char *path, double deadline);
/* Adds the values of NCCL's config files (NCCL_CONF_FILE, else $HOME/.nccl.conf, then
 * /etc/nccl.conf under the root) where the environment does not set them. */
void pf_env_load_nccl_conf(struct pf_env *e, const struct pf_host *h);

/* What the run reads from outside once and more than one stage uses: the DRA
 * ResourceClaims (net.multus reads them, the rails stage uses them again; pkg/checks/
 * attach.c). Allocated by pf_ctx_init, so that a stage holding a const context still fills
 * it. */
struct pf_ctx_memo {
    bool claims_read;         /* asked once: the bodies below, or nothing to use */
    struct pf_strlist claims; /* each ResourceClaim's JSON as the API server sent it */
};

/* What every check sees. */
struct pf_ctx {
    struct pf_host host;
    const struct pf_config *config;
    struct pf_env env;
    struct pf_verdict *verdict;
    /* inventory, gathered once by pf_checks_inventory before the checks run */
    struct pf_strlist hcas;   /* /sys/class/infiniband/<name> */
    struct pf_strlist gpus;   /* PCI bus ids from /proc/driver/nvidia/gpus */
    bool in_env_mode;         /* `preflight env`: only the environment is looked at */
    const char *env_file;     /* `preflight env --env-file F`: F (the pod's env, read here) */
    const char *verdict_path; /* where the verdict goes (NULL or "-": no file); logs such
                               * as nccl-rank<N>.log are written next to it */
    /* Progress lines for a human watching `kubectl logs` (set by the command line; pkg/
     * never prints itself). NULL: silent. */
    void (*progress)(void *arg, const char *line);
    void *progress_arg;
    /* When the waits of the stage under way must end (a pf_now() time; 0: none): set by
     * pkg/run before each stage, from the run's deadline (--timeout). */
    double deadline;
    /* The longest the API server's requests of one check may take together, in seconds
     * (pkg/run: PF_RUN_API_S); 0: deadline alone. */
    double api_s;
    struct pf_ctx_memo *memo; /* NULL in a context pf_ctx_init did not make: nothing kept */
};

/* The seconds left before ctx->deadline less margin, 0 when past; with no deadline 1e9 (the
 * caller's own bound alone decides, as in a unit test that sets none). */
double pf_ctx_left(const struct pf_ctx *ctx, double margin);

/* Reports one progress line ("waiting for 3 of 16 ranks: 5, 11, 12") through ctx->progress. */
void pf_ctx_progress(struct pf_ctx *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

void pf_ctx_init(struct pf_ctx *ctx, const struct pf_config *config, struct pf_verdict *v);
void pf_ctx_free(struct pf_ctx *ctx);

#endif
