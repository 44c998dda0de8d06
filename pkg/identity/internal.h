/* Internal to the identity files: what a launcher rule fills in, and the helpers it uses. */
#ifndef PF_IDENTITY_INTERNAL_H
#define PF_IDENTITY_INTERNAL_H

#include "identity.h"

struct pf_identity_guess {
    struct pf_identity *id;
    const char *host;
    const struct pf_identity_opts *opts;
    /* a piece the rule could not know, and how to give it ("" when it knows or has no idea) */
    char rank_missing[400];
    char world_missing[400];
    char coord_missing[400];
    bool coord_strong;        /* the coordinator came from the launcher's own variable */
    char default_domain[256]; /* the subdomain the launcher sets, used while the FQDN is unknown */
};

/* Each rule returns 1 when it recognises the pod (and fills what it knows), 0 when not,
 * PF_EUSAGE when the pod's inputs are malformed. */
int pf_identity_rule_lws(struct pf_identity_guess *g, const struct pf_env *env,
                         const struct pf_identity_podinfo *pi);
int pf_identity_rule_volcano(struct pf_identity_guess *g, const struct pf_env *env,
                             const struct pf_identity_podinfo *pi);
int pf_identity_rule_kubeflow(struct pf_identity_guess *g, const struct pf_env *env,
                              const struct pf_identity_podinfo *pi);
int pf_identity_rule_torchrun(struct pf_identity_guess *g, const struct pf_env *env,
                              const struct pf_identity_podinfo *pi);
int pf_identity_rule_jobset(struct pf_identity_guess *g, const struct pf_env *env,
                            const struct pf_identity_podinfo *pi);
int pf_identity_rule_indexed_job(struct pf_identity_guess *g, const struct pf_env *env,
                                 const struct pf_identity_podinfo *pi);
int pf_identity_rule_ordinal(struct pf_identity_guess *g, const struct pf_env *env,
                             const struct pf_identity_podinfo *pi);

/* A non-negative decimal integer up to 2^20, nothing else. */
int pf_identity_parse_count(const char *s, long *out);
/* A variable's value, NULL when unset or empty. */
const char *pf_identity_env(const struct pf_env *env, const char *name);
/* A label's value, else the annotation's; NULL when neither (or empty). */
const char *pf_identity_meta(const struct pf_identity_podinfo *pi, const char *key);
/* Whether any label or annotation key starts with prefix. */
bool pf_identity_meta_prefix(const struct pf_identity_podinfo *pi, const char *prefix);
/* Records an input the decision used (evidence `from`). */
void pf_identity_from(struct pf_identity *id, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* "name-12" -> prefix "name", ordinal 12. False when there is no "-<digits>" tail. */
bool pf_identity_trailing_ordinal(const char *h, char *prefix, size_t n, long *ord);

#endif
