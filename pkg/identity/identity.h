/* identity: who this pod is, how many pods the run has and where rank 0 is, for every
 * launcher preflight knows (docs/launchers.md): options first, then the launcher's own
 * variables, labels and names. Pure functions of the environment, the host name and the
 * podinfo folder, tested with tables. A new launcher is one rule in launchers.c plus its row
 * in identity.c's rules[] (internal.h: what a rule fills in). */
#ifndef PF_IDENTITY_H
#define PF_IDENTITY_H

#include <stdbool.h>
#include <stddef.h>

#include "../base/base.h"
#include "../base/env.h"
#include "../k8s/map.h"

/* What the options say (cmd/preflight): each overrides what the launcher gives. */
struct pf_identity_opts {
    int rank;              /* -1: derive (JOB_COMPLETION_INDEX, RANK, hostname) */
    int world_size;        /* -1: derive (PREFLIGHT_WORLD_SIZE, WORLD_SIZE) */
    char coordinator[512]; /* "": derive (MASTER_ADDR, <prefix>-0.<subdomain>) */
    int port;              /* 0: from the config */
    const char *token;     /* PREFLIGHT_TOKEN, or NULL */
};

/* How the pods of this job are named, so that a missing rank can be named too. */
enum pf_identity_naming {
    PF_IDENTITY_NAMING_NONE = 0, /* unknown: ranks are named by number only */
    PF_IDENTITY_NAMING_ORDINAL,  /* <prefix>-<rank> (StatefulSet, Indexed Job, JobSet) */
    PF_IDENTITY_NAMING_PYTORCH,  /* <job>-master-0 is rank 0, <job>-worker-N is rank N+1 */
    PF_IDENTITY_NAMING_JOBSET,   /* <prefix>-<rank / per_job>-<rank % per_job> (JobSet, TrainJob) */
    PF_IDENTITY_NAMING_MPI, /* <job>-worker-<rank - shift>; rank 0 <job>-launcher when shift 1 */
    PF_IDENTITY_NAMING_LWS, /* rank 0 <prefix> (the leader), rank N <prefix>-N */
};

/* Whether the pod carries Kubeflow's training labels (from the podinfo labels file). */
enum pf_identity_pytorch_hint { PF_IDENTITY_PT_UNKNOWN = 0, PF_IDENTITY_PT_YES, PF_IDENTITY_PT_NO };

/* The job this pod belongs to, as its launcher names it (docs/launchers.md, "The job"): what a
 * JOIN says under the MAC, so that rank 0 refuses a pod of another job that shares the token.
 * Each piece is "" when unknown; kind "" means the job is unknown (nothing is invented). */
struct pf_identity_job {
    char kind[32];  /* "JobSet", "Job", "LeaderWorkerSet", "PyTorchJob", "MPIJob", "Volcano Job",
                     * "StatefulSet", "run" (PREFLIGHT_JOB) */
    char ns[64];    /* POD_NAMESPACE (or Volcano's job-namespace label) */
    char name[256]; /* the launcher's name of the job (LWS: "<lws> group <index>") */
    char uid[64];   /* the launcher's uid of it, where the pod carries one */
    char from[160]; /* what it was read from: "label jobset.sigs.k8s.io/jobset-uid", ... */
};

struct pf_identity {
    int rank;
    int world_size;
    char rank_from[96];    /* where the rank came from: "--rank", "hostname trainer-3", ... */
    char world_from[64];   /* "--world-size", "WORLD_SIZE" */
    char coordinator[512]; /* rank 0's host name or address, without the port */
    int port;              /* rank 0's rendezvous port */
    char coord_from[64];   /* "--coordinator", "MASTER_ADDR", "hostname and subdomain" */
    enum pf_identity_naming naming;
    char prefix[256]; /* ORDINAL: "trainer"; PYTORCH: the job name */
    char domain[256]; /* the part of the FQDN after the host label ("" when unknown) */
    /* which launcher rule decided, and from what (docs/launchers.md) */
    char rule[24];      /* "jobset", "indexed-job", "statefulset", "pytorchjob", ... */
    char explain[512];  /* one sentence: why this rule, what it assumed */
    char from[12][160]; /* the inputs used: "JOB_COMPLETION_INDEX=3", "label k=v", ... */
    int nfrom;
    bool member;     /* false: this pod is no rank (an MPIJob launcher): nothing to meet */
    int per_job;     /* JOBSET naming: pods per Job; MPI naming: the shift (0 or 1) */
    int named_ranks; /* naming covers ranks below this (0: all) */
    bool wants_fqdn; /* the result depends on the FQDN: resolve it and call again */
    struct pf_identity_job job; /* which job: pf_identity_job_of */
    /* a label selector that lists this job's pods from the API ("k=v[,k=v]", from the pod's
     * own labels: pf_identity_selector); "" when no label names the job */
    char selector[600];
};

/* What a pod knows about itself besides its environment. */
struct pf_identity_podinfo {
    const char *hostname;                   /* gethostname() */
    const char *fqdn;                       /* canonical name, "" or NULL when unknown */
    const struct pf_k8s_map *labels;        /* the downward-API labels file; NULL: not mounted */
    const struct pf_k8s_map *annotations;   /* the annotations file; NULL: not mounted */
    const struct pf_k8s_map *volcano_hosts; /* /etc/volcano/<task>.host files: task -> text */
};

/* Derives rank, world size and rank 0's address (docs/design.md, "The stages of `preflight run`").
 * env: the process environment (JOB_COMPLETION_INDEX, RANK, WORLD_SIZE, MASTER_ADDR);
 * hostname: gethostname(); fqdn: the canonical name of the host ("" or NULL when unknown);
 * default_port: the config's rendezvous port. PF_EUSAGE with a message naming the variable
 * when something is missing or malformed. A pure function: tested with tables. */
int pf_identity_derive(struct pf_identity *out, const struct pf_identity_opts *o,
                       const struct pf_env *env, const char *hostname, const char *fqdn,
                       enum pf_identity_pytorch_hint hint, int default_port);

/* Derives rank, world size and rank 0's address for every launcher preflight knows
 * (docs/launchers.md): options first, then the launcher's own variables, labels and names.
 * Fills rule, explain and from. PF_EUSAGE naming the missing piece and how to give it. Pure. */
int pf_identity_derive_pod(struct pf_identity *out, const struct pf_identity_opts *o,
                           const struct pf_env *env, const struct pf_identity_podinfo *pi,
                           int default_port);

/* The job of this pod (filled by pf_identity_derive_pod too): PREFLIGHT_JOB first (a launcher's
 * run id, any text), then the launcher's labels or annotations from the podinfo files
 * (JobSet/TrainJob, LeaderWorkerSet, Volcano, Kubeflow, Job, StatefulSet; docs/launchers.md),
 * the namespace from POD_NAMESPACE. Unknown (kind "") when none is there. Pure. */
void pf_identity_job_of(struct pf_identity_job *out, const struct pf_env *env,
                        const struct pf_identity_podinfo *pi);
/* The label selector that lists the pods of this pod's job through the API ("k=v" pairs joined
 * by ","), from the pod's own labels only (pi->labels; the downward-API labels file): the
 * launcher's uid label where the pod carries one, else its name label (JobSet, Job, LWS name
 * and group, Volcano, Kubeflow; docs/launchers.md, "The job"). "" when none is there (a
 * StatefulSet's pods carry no label of their set's own). Pure. */
void pf_identity_selector(char *out, size_t n, const struct pf_identity_podinfo *pi);
/* "JobSet ml/trainer (uid 4f0c...)", "run ml/exp-17", or "unknown". */
void pf_identity_job_text(char *out, size_t n, const struct pf_identity_job *j);
/* Whether a and b are shown to be two jobs: the same kind with another namespace, name or uid
 * (each piece compared where both know it). False when either is unknown or the kinds differ
 * (two ways of naming cannot be compared): no proof, no refusal. */
bool pf_identity_job_other(const struct pf_identity_job *a, const struct pf_identity_job *b);

/* The pod name rank would have under id's naming ("trainer-5"); "" when unknown. */
void pf_identity_pod_name(char *out, size_t n, const struct pf_identity *id, int rank);

/* Splits "host", "host:port", "[v6]:port" or a bare IPv6 address. port is left alone when
 * the text has none. PF_EINVAL on an empty host or a bad port. */
int pf_identity_split_hostport(char *host, size_t n, int *port, const char *text);

#endif
