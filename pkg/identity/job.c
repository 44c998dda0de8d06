/* Which job a pod belongs to, from what its launcher puts on it (docs/launchers.md, "The job";
 * the launcher's source each rule follows is cited at the rule). A JOIN carries it under
 * the MAC, so that a pod of another job that shares the token is refused by rank 0
 * (pkg/rendezvous/admit.c). Pure: the environment and the podinfo labels/annotations. */
#define _GNU_SOURCE
#include "internal.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

static void put(struct pf_identity_job *j, const char *kind, const char *name, const char *uid,
                const char *from)
{
    pf_strcpy(j->kind, sizeof(j->kind), kind);
    pf_strcpy(j->name, sizeof(j->name), name ? name : "");
    pf_strcpy(j->uid, sizeof(j->uid), uid ? uid : "");
    pf_strcpy(j->from, sizeof(j->from), from);
}

/* The first of a label/annotation pair's keys that is set. */
static const char *meta2(const struct pf_identity_podinfo *pi, const char *a, const char *b)
{
    const char *v = pf_identity_meta(pi, a);
    return v ? v : pf_identity_meta(pi, b);
}

void pf_identity_job_of(struct pf_identity_job *out, const struct pf_env *env,
                        const struct pf_identity_podinfo *pi)
{
    memset(out, 0, sizeof(*out));
    struct pf_identity_podinfo none = {0};
    if (!pi) pi = &none;
    const char *ns = pf_identity_env(env, "POD_NAMESPACE");
    const char *v, *u;
    char from[160];
    if ((v = pf_identity_env(env, "PREFLIGHT_JOB"))) {
        /* the operator's own name for the run (a launcher's run id, a release, a UUID) */
        put(out, "run", v, NULL, "PREFLIGHT_JOB");
    } else if ((v = pf_identity_meta(pi, "jobset.sigs.k8s.io/jobset-name"))) {
        /* kubernetes-sigs/jobset pkg/controllers/jobset_controller.go labelAndAnnotateObject:
         * jobset-name and jobset-uid on every pod (a TrainJob is a JobSet of its name) */
        u = pf_identity_meta(pi, "jobset.sigs.k8s.io/jobset-uid");
        put(out, "JobSet", v, u,
            u ? "labels jobset.sigs.k8s.io/jobset-name and jobset-uid"
              : "label jobset.sigs.k8s.io/jobset-name");
    } else if ((v = pf_identity_meta(pi, "leaderworkerset.sigs.k8s.io/name"))) {
        /* kubernetes-sigs/lws pkg/webhooks/pod_webhook.go: name and group-index; each group is
         * a collective of its own (its leader is its rank 0) */
        const char *g = pf_identity_meta(pi, "leaderworkerset.sigs.k8s.io/group-index");
        char name[256];
        snprintf(name, sizeof(name), "%s group %s", v, g ? g : "?");
        put(out, "LeaderWorkerSet", name, NULL,
            "labels leaderworkerset.sigs.k8s.io/name and group-index");
    } else if ((v = pf_identity_meta(pi, "volcano.sh/job-name"))) {
        /* volcano-sh/volcano staging/src/volcano.sh/apis/pkg/apis/batch/v1alpha1/labels.go:
         * job-name and job-namespace; no uid on the pod */
        put(out, "Volcano Job", v, NULL, "label volcano.sh/job-name");
        const char *jn = pf_identity_meta(pi, "volcano.sh/job-namespace");
        if (jn) ns = jn;
    } else if ((v = pf_identity_meta(pi, "training.kubeflow.org/job-name"))) {
        /* kubeflow/training-operator v1.9.0 job_controller.go GenLabels, kubeflow/mpi-operator
         * defaultLabels: job-name and operator-name; no uid on the pod */
        const char *op = pf_identity_meta(pi, "training.kubeflow.org/operator-name");
        const char *kind = op && strcmp(op, "pytorchjob-controller") == 0 ? "PyTorchJob"
                           : op && strcmp(op, "mpi-operator") == 0        ? "MPIJob"
                                                                          : "Kubeflow job";
        put(out, kind, v, NULL, "label training.kubeflow.org/job-name");
    } else if ((v = meta2(pi, "batch.kubernetes.io/job-name", "job-name"))) {
        /* kubernetes pkg/controller/job: job-name and controller-uid (and their
         * batch.kubernetes.io/ forms) on every pod of a Job */
        u = meta2(pi, "batch.kubernetes.io/controller-uid", "controller-uid");
        snprintf(from, sizeof(from), "label batch.kubernetes.io/job-name%s",
                 u ? " and controller-uid" : "");
        put(out, "Job", v, u, from);
    } else if ((v = pf_identity_meta(pi, "statefulset.kubernetes.io/pod-name"))) {
        /* kubernetes pkg/controller/statefulset/stateful_set_utils.go: pod name <sts>-<ordinal>;
         * no uid of the StatefulSet on the pod */
        char sts[256];
        long ord;
        if (!pf_identity_trailing_ordinal(v, sts, sizeof(sts), &ord)) return;
        put(out, "StatefulSet", sts, NULL, "label statefulset.kubernetes.io/pod-name");
    } else {
        return; /* unknown: nothing names the job */
    }
    pf_strcpy(out->ns, sizeof(out->ns), ns ? ns : "");
}

/* The labels that list a job's pods, by launcher: the first of each row's keys the pod's labels
 * hold is the selector (with the row's second key when both pieces are needed). Each key is
 * put on every pod of the job by its launcher:
 *   kubernetes-sigs/jobset pkg/controllers/jobset_controller.go labelAndAnnotateObject;
 *   kubernetes v1.37.2 pkg/controller/job/job_controller.go (the Job's selector labels
 *     batch.kubernetes.io/controller-uid and job-name, and their older unprefixed forms);
 *   kubernetes-sigs/lws pkg/webhooks/pod_webhook.go (name and group-index: one group is one
 *     collective);
 *   volcano-sh/volcano staging/src/volcano.sh/apis/pkg/apis/batch/v1alpha1/labels.go;
 *   kubeflow/training-operator v1.9.0 job_controller.go GenLabels, kubeflow/mpi-operator
 *     defaultLabels. */
static const struct {
    const char *a, *b; /* b: also required, "" none */
} selector_keys[] = {
    {"jobset.sigs.k8s.io/jobset-uid", ""},
    {"jobset.sigs.k8s.io/jobset-name", ""},
    {"leaderworkerset.sigs.k8s.io/name", "leaderworkerset.sigs.k8s.io/group-index"},
    {"volcano.sh/job-name", ""},
    {"training.kubeflow.org/job-name", ""},
    {"batch.kubernetes.io/controller-uid", ""},
    {"controller-uid", ""},
    {"batch.kubernetes.io/job-name", ""},
    {"job-name", ""},
};

/* A label value as a selector may carry it: Kubernetes label values are [A-Za-z0-9._-] (at most
 * 63, apimachinery validation IsValidLabelValue); anything else is no selector. */
static bool selector_value(const char *v)
{
    size_t n = strlen(v);
    if (n == 0 || n > 63) return false;
    for (const char *p = v; *p; p++)
        if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_' && *p != '.') return false;
    return true;
}

void pf_identity_selector(char *out, size_t n, const struct pf_identity_podinfo *pi)
{
    if (n) out[0] = '\0';
    if (!pi || !pi->labels) return;
    for (size_t i = 0; i < PF_ARRAY_LEN(selector_keys); i++) {
        const char *va = pf_k8s_map_get(pi->labels, selector_keys[i].a);
        if (!va || !selector_value(va)) continue;
        const char *vb = NULL;
        if (selector_keys[i].b[0]) {
            vb = pf_k8s_map_get(pi->labels, selector_keys[i].b);
            if (!vb || !selector_value(vb)) continue;
        }
        if (vb)
            pf_snprintf(out, n, "%s=%s,%s=%s", selector_keys[i].a, va, selector_keys[i].b, vb);
        else
            pf_snprintf(out, n, "%s=%s", selector_keys[i].a, va);
        return;
    }
}

void pf_identity_job_text(char *out, size_t n, const struct pf_identity_job *j)
{
    if (!j->kind[0]) {
        pf_snprintf(out, n, "unknown");
        return;
    }
    pf_snprintf(out, n, "%s %s%s%s%s%s%s", j->kind, j->ns, j->ns[0] ? "/" : "", j->name,
                j->uid[0] ? " (uid " : "", j->uid, j->uid[0] ? ")" : "");
}

static bool differ(const char *a, const char *b)
{
    return a[0] && b[0] && strcmp(a, b) != 0;
}

bool pf_identity_job_other(const struct pf_identity_job *a, const struct pf_identity_job *b)
{
    if (!a->kind[0] || !b->kind[0] || strcmp(a->kind, b->kind) != 0) return false;
    return differ(a->ns, b->ns) || differ(a->name, b->name) || differ(a->uid, b->uid);
}
