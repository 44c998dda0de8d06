/* inject's launchers: one function a launcher, where its pod templates are, and the table of
 * kinds (gated; refused, with the reason; passed through untouched). The launchers and where
 * their pod templates are: docs/kubernetes.md "preflight inject", read from each launcher's API
 * types (kubernetes-sigs/jobset api/jobset/v1alpha2/jobset_types.go, kubeflow/training-operator
 * pkg/apis/kubeflow.org/v1/pytorch_types.go v1.9.0, kubeflow/trainer
 * pkg/apis/trainer/v1alpha1/trainingruntime_types.go, kubeflow/mpi-operator
 * pkg/apis/kubeflow/v2beta1/types.go, kubernetes-sigs/lws
 * api/leaderworkerset/v1/leaderworkerset_types.go, volcano-sh/apis
 * pkg/apis/batch/v1alpha1/job.go). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- one launcher a function: where its pod templates are */

static int do_job(struct plan *P, const struct pf_ynode *obj, const char *name)
{
    const struct pf_ynode *spec = pf_ynode_get(obj, "spec");
    if (pf_inject_want(P, spec, PF_Y_MAP, "spec") < 0) return -1;
    const char *mode = pf_ynode_str(spec, "completionMode");
    if (!mode || strcmp(mode, "Indexed") != 0)
        return pf_inject_refuse(
            P,
            "completionMode is %s, not Indexed: its pods have no rank "
            "(JOB_COMPLETION_INDEX) and no stable hostname; set completionMode: "
            "Indexed",
            mode ? mode : "NonIndexed (the default)");
    const struct pf_ynode *tspec = pf_ynode_get(pf_ynode_get(spec, "template"), "spec");
    if (!pf_ynode_get(tspec, "subdomain") && tspec && tspec->kind == PF_Y_MAP) {
        struct cn *v = pf_cn_new(CN_STR);
        v->s = pf_xstrdup(name);
        pf_inject_map_add(P, tspec, "subdomain", v);
        pf_cn_free(v);
        pf_inject_note(
            P,
            "spec.template: subdomain %s added: the pods meet through a headless Service of "
            "that name, which a Job does not create: apply manifests/service.yaml with name %s, "
            "selector batch.kubernetes.io/job-name: %s and publishNotReadyAddresses: true",
            name, name, name);
    }
    struct pod pod = {"spec.template", pf_inject_count_of(spec, "completions", -1), NULL, true};
    if (pf_inject_gate_pod(P, pf_ynode_get(spec, "template"), &pod) < 0) return -1;
    pf_inject_job_policy(P, spec, "spec", false);
    return P->rc;
}

/* The pods of a JobSet's replicatedJobs (all, or only the one named only). */
static int jobset_jobs(struct plan *P, const struct pf_ynode *jsspec, const char *only,
                       const char *path)
{
    const struct pf_ynode *rjs = pf_ynode_get(jsspec, "replicatedJobs");
    if (pf_inject_want(P, rjs, PF_Y_SEQ, "replicatedJobs") < 0) return -1;
    if (!rjs || rjs->n == 0)
        return pf_inject_refuse(P, "%s.replicatedJobs: none, so no pod template", path);
    long world = 0;
    for (size_t i = 0; i < rjs->n; i++) {
        const struct pf_ynode *js = pf_ynode_get(pf_ynode_get(rjs->kids[i], "template"), "spec");
        long r = pf_inject_count_of(rjs->kids[i], "replicas", 1),
             c = pf_inject_count_of(js, "completions", -1);
        if (c < 0) c = pf_inject_count_of(js, "parallelism", -1);
        world = world < 0 || r < 0 || c < 0 ? -1 : world + r * c;
    }
    int gated = 0;
    for (size_t i = 0; i < rjs->n; i++) {
        const char *rname = pf_ynode_str(rjs->kids[i], "name");
        if (only && (!rname || strcmp(rname, only) != 0)) {
            pf_inject_note(P,
                           "%s.replicatedJobs[%zu] (%s): not the trainer's Job %s, left as it is",
                           path, i, rname ? rname : "?", only);
            continue;
        }
        const struct pf_ynode *js = pf_ynode_get(rjs->kids[i], "template");
        if (pf_inject_want(P, js, PF_Y_MAP, "replicatedJobs[].template") < 0) return -1;
        const struct pf_ynode *jspec = pf_ynode_get(js, "spec");
        if (pf_inject_want(P, jspec, PF_Y_MAP, "replicatedJobs[].template.spec") < 0) return -1;
        char label[PF_BUF_LINE];
        snprintf(label, sizeof(label), "%s.replicatedJobs[%zu].template.spec.template", path, i);
        /* a TrainJob's node count comes with PET_NNODES (envInjection), not from the runtime */
        struct pod pod = {label, only ? -1 : world, NULL, true};
        if (pf_inject_gate_pod(P, jspec ? pf_ynode_get(jspec, "template") : NULL, &pod) < 0)
            return -1;
        snprintf(label, sizeof(label), "%s.replicatedJobs[%zu].template.spec", path, i);
        pf_inject_job_policy(P, jspec, label, true);
        gated++;
    }
    if (!gated) return pf_inject_refuse(P, "%s.replicatedJobs: no Job named %s", path, only);
    pf_inject_jobset_policy(P, jsspec);
    return P->rc;
}

static int do_jobset(struct plan *P, const struct pf_ynode *obj, const char *name)
{
    (void)name;
    const struct pf_ynode *spec = pf_ynode_get(obj, "spec");
    if (pf_inject_want(P, spec, PF_Y_MAP, "spec") < 0) return -1;
    return jobset_jobs(P, spec, NULL, "spec");
}

static int do_runtime(struct plan *P, const struct pf_ynode *obj, const char *name)
{
    /* the token is the job's: the one TrainJob of the input on this runtime names it, else the
     * runtime does, and every TrainJob on it shares that Secret (docs/kubernetes.md, "One token
     * per job") */
    const char *job = NULL;
    size_t njobs = 0, nl = strlen(name);
    for (size_t i = 0; i < P->trainjobs.n; i++) {
        const char *pair = P->trainjobs.v[i];
        if (strncmp(pair, name, nl) == 0 && pair[nl] == '\t') {
            job = pair + nl + 1;
            njobs++;
        }
    }
    if (njobs == 1)
        P->name = job;
    else
        pf_inject_note(
            P,
            "the TrainJobs on runtime %s share its Secret %s-preflight-token: give each TrainJob "
            "a runtime of its own for a token of its own",
            name, name);
    const struct pf_ynode *spec = pf_ynode_get(obj, "spec");
    if (pf_inject_want(P, spec, PF_Y_MAP, "spec") < 0) return -1;
    const struct pf_ynode *js = pf_ynode_get(pf_ynode_get(spec, "template"), "spec");
    if (!js) return pf_inject_refuse(P, "spec.template.spec: no JobSet template");
    if (pf_inject_want(P, js, PF_Y_MAP, "spec.template.spec") < 0) return -1;
    /* the PET_* variables into the init container (kubeflow/trainer v2.3+ envInjection) */
    const struct pf_ynode *torch = pf_ynode_get(pf_ynode_get(spec, "mlPolicy"), "torch");
    if (torch && torch->kind == PF_Y_MAP && !pf_ynode_get(torch, "envInjection")) {
        struct cn *ei = pf_cn_map(NULL, NULL, false);
        struct cn *t = pf_cn_map(pf_cn_seq(ei, "targets", false), NULL, false);
        pf_cn_str(t, "jobName", "node");
        pf_cn_str(pf_cn_seq(t, "containerNames", true), NULL, "preflight");
        pf_inject_map_add(P, torch, "envInjection", ei);
        pf_cn_free(ei);
    } else if (!torch) {
        pf_inject_note(P, "spec.mlPolicy.torch: none, so no PET_NNODES for preflight: set "
                          "PREFLIGHT_WORLD_SIZE in its env to the number of nodes");
    }
    return jobset_jobs(P, js, "node", "spec.template.spec");
}

/* The pod templates under a map of replica specs (PyTorchJob, MPIJob). */
static int replica_specs(struct plan *P, const struct pf_ynode *specs, const char *path,
                         const char *only, long world, const char *coordinator)
{
    if (pf_inject_want(P, specs, PF_Y_MAP, path) < 0) return -1;
    if (!specs || specs->n == 0) return pf_inject_refuse(P, "%s: none, so no pod template", path);
    int gated = 0;
    for (size_t i = 0; i + 1 < specs->n; i += 2) {
        const char *role = specs->kids[i]->val ? specs->kids[i]->val : "?";
        if (only && strcmp(role, only) != 0) {
            pf_inject_note(P, "%s.%s: runs no rank, left as it is", path, role);
            continue;
        }
        char label[PF_BUF_LINE];
        snprintf(label, sizeof(label), "%s.%s.template", path, role);
        struct pod pod = {label, world, coordinator, false};
        if (pf_inject_gate_pod(P, pf_ynode_get(specs->kids[i + 1], "template"), &pod) < 0)
            return -1;
        gated++;
    }
    if (!gated) return pf_inject_refuse(P, "%s: no %s", path, only);
    return P->rc;
}

static int do_pytorchjob(struct plan *P, const struct pf_ynode *obj, const char *name)
{
    const struct pf_ynode *specs = pf_ynode_get(pf_ynode_get(obj, "spec"), "pytorchReplicaSpecs");
    long world = 0;
    for (size_t i = 0; specs && specs->kind == PF_Y_MAP && i + 1 < specs->n; i += 2) {
        long r = pf_inject_count_of(specs->kids[i + 1], "replicas", 1);
        world = world < 0 || r < 0 ? -1 : world + r;
    }
    pf_inject_note(
        P,
        "the operator gives each pod a Service of its own name but no subdomain: for "
        "<job>-master-0.<subdomain> set spec.template.spec.subdomain: %s in each replica spec "
        "and apply a headless Service %s with publishNotReadyAddresses: true "
        "(manifests/pytorchjob.yaml)",
        name, name);
    return replica_specs(P, specs, "spec.pytorchReplicaSpecs", NULL, world, NULL);
}

static int do_mpijob(struct plan *P, const struct pf_ynode *obj, const char *name)
{
    const struct pf_ynode *specs = pf_ynode_get(pf_ynode_get(obj, "spec"), "mpiReplicaSpecs");
    long world = pf_inject_count_of(pf_ynode_get(specs, "Worker"), "replicas", 1);
    char *coord = pf_xasprintf("%s-rank0:29400", name);
    pf_inject_note(
        P,
        "worker 0 is not in DNS while preflight runs (no publishNotReadyAddresses on the "
        "operator's Service): apply the headless Service %s-rank0 of manifests/mpijob.yaml "
        "(selector training.kubeflow.org/job-name: %s, replica-index: \"0\", job-role: worker; "
        "publishNotReadyAddresses: true)",
        name, name);
    int r = replica_specs(P, specs, "spec.mpiReplicaSpecs", "Worker", world, coord);
    free(coord);
    return r;
}

static int do_statefulset(struct plan *P, const struct pf_ynode *obj, const char *name)
{
    (void)name;
    const struct pf_ynode *spec = pf_ynode_get(obj, "spec");
    if (pf_inject_want(P, spec, PF_Y_MAP, "spec") < 0) return -1;
    const char *svc = pf_ynode_str(spec, "serviceName");
    const char *pmp = pf_ynode_str(spec, "podManagementPolicy");
    if (!pmp || strcmp(pmp, "Parallel") != 0)
        pf_inject_note(
            P,
            "spec.podManagementPolicy is %s: pod N+1 starts only once pod N is Ready, which "
            "a pod waiting in its init phase for the others never is: set Parallel",
            pmp ? pmp : "OrderedReady (the default)");
    pf_inject_note(P,
                   "the pods meet through the headless Service %s (spec.serviceName): it must have "
                   "publishNotReadyAddresses: true (manifests/service.yaml)",
                   svc ? svc : "(none: set spec.serviceName)");
    struct pod pod = {"spec.template", pf_inject_count_of(spec, "replicas", 1), NULL, false};
    return pf_inject_gate_pod(P, pf_ynode_get(spec, "template"), &pod);
}

static int do_lws(struct plan *P, const struct pf_ynode *obj, const char *name)
{
    (void)name;
    const struct pf_ynode *lwt = pf_ynode_get(pf_ynode_get(obj, "spec"), "leaderWorkerTemplate");
    if (pf_inject_want(P, lwt, PF_Y_MAP, "spec.leaderWorkerTemplate") < 0) return -1;
    if (!lwt) return pf_inject_refuse(P, "spec.leaderWorkerTemplate: none, so no pod template");
    /* the world is the group: LWS_GROUP_SIZE, in init containers too */
    struct pod pod = {"spec.leaderWorkerTemplate.workerTemplate", -1, NULL, false};
    if (pf_inject_gate_pod(P, pf_ynode_get(lwt, "workerTemplate"), &pod) < 0) return -1;
    if (pf_ynode_get(lwt, "leaderTemplate")) {
        pod.label = "spec.leaderWorkerTemplate.leaderTemplate";
        if (pf_inject_gate_pod(P, pf_ynode_get(lwt, "leaderTemplate"), &pod) < 0) return -1;
    }
    return P->rc;
}

static int do_volcano(struct plan *P, const struct pf_ynode *obj, const char *name)
{
    (void)name;
    const struct pf_ynode *spec = pf_ynode_get(obj, "spec");
    if (pf_inject_want(P, spec, PF_Y_MAP, "spec") < 0) return -1;
    const struct pf_ynode *tasks = pf_ynode_get(spec, "tasks");
    if (pf_inject_want(P, tasks, PF_Y_SEQ, "spec.tasks") < 0) return -1;
    if (!tasks || tasks->n == 0) return pf_inject_refuse(P, "spec.tasks: none, so no pod template");
    /* the svc plugin: hostnames, the headless Service and VC_<TASK>_NUM (the world size); the
     * env plugin: VC_TASK_INDEX (the rank) */
    const struct pf_ynode *plugins = pf_ynode_get(spec, "plugins");
    if (!plugins) {
        struct cn *p = pf_cn_map(NULL, NULL, false);
        pf_cn_str(pf_cn_seq(p, "svc", true), NULL, "--publish-not-ready-addresses=true");
        pf_cn_seq(p, "env", true);
        pf_inject_map_add(P, spec, "plugins", p);
        pf_cn_free(p);
    } else if (!pf_ynode_get(plugins, "svc") || !pf_ynode_get(plugins, "env")) {
        pf_inject_note(
            P, "spec.plugins: without both svc (with --publish-not-ready-addresses=true) and "
               "env the pods have no peers' names or no rank");
    }
    if (!pf_ynode_get(spec, "policies")) {
        struct cn *p = pf_cn_seq(NULL, NULL, false);
        static const char *const ev[] = {"PodFailed", "PodEvicted"};
        for (size_t i = 0; i < PF_ARRAY_LEN(ev); i++) {
            struct cn *r = pf_cn_map(p, NULL, false);
            pf_cn_str(r, "event", ev[i]);
            pf_cn_str(r, "action", "RestartJob");
        }
        pf_inject_map_add(P, spec, "policies", p);
        pf_cn_free(p);
    }
    for (size_t i = 0; i < tasks->n; i++) {
        char label[PF_BUF_LINE];
        snprintf(label, sizeof(label), "spec.tasks[%zu].template", i);
        struct pod pod = {label, -1, NULL, false};
        if (pf_inject_gate_pod(P, pf_ynode_get(tasks->kids[i], "template"), &pod) < 0) return -1;
    }
    return P->rc;
}

/* An object as the API server returns it (kubectl get -o yaml): what the server wrote, which
 * a create of the injected object would refuse (resourceVersion, uid) or which would tie it to
 * the old object (a Job's generated selector and controller-uid labels, kubernetes
 * pkg/registry/batch/job/strategy.go generateSelector), is removed, so that the object can be
 * created again. Nothing is removed from an object the user wrote. */
static void server_fields(struct plan *P, const struct pf_ynode *obj, const char *group,
                          const char *kind)
{
    const struct pf_ynode *md = pf_ynode_get(obj, "metadata");
    if (!pf_ynode_get(md, "uid") && !pf_ynode_get(md, "resourceVersion")) return;
    static const char *const meta[] = {"uid",        "resourceVersion", "creationTimestamp",
                                       "generation", "managedFields",   "selfLink"};
    static const char *const status[] = {"status"}, *const selector[] = {"selector"};
    static const char *const uids[] = {"controller-uid", "batch.kubernetes.io/controller-uid"};
    int bad = pf_inject_map_del(P, md, meta, PF_ARRAY_LEN(meta));
    bad |= pf_inject_map_del(P, obj, status, 1);
    if (strcmp(group, "batch") == 0 && strcmp(kind, "Job") == 0) {
        const struct pf_ynode *spec = pf_ynode_get(obj, "spec");
        const char *manual = pf_ynode_str(spec, "manualSelector");
        if (!manual || strcmp(manual, "true") != 0) {
            bad |= pf_inject_map_del(P, spec, selector, 1);
            const struct pf_ynode *labels =
                pf_ynode_get(pf_ynode_get(pf_ynode_get(spec, "template"), "metadata"), "labels");
            bad |= pf_inject_map_del(P, labels, uids, PF_ARRAY_LEN(uids));
        }
    }
    pf_inject_note(
        P,
        "read from the API server: its uid, resourceVersion, status%s removed, so that the "
        "object can be created again (a Job's pod template cannot be updated: kubectl "
        "delete it first, or kubectl replace --force)%s",
        strcmp(kind, "Job") == 0 && strcmp(group, "batch") == 0
            ? " and the Job's generated selector and controller-uid labels"
            : "",
        bad ? "; some could not be removed (not in block style), remove them by hand" : "");
}

/* ---- the kinds */

struct launcher {
    const char *group; /* apiVersion before the "/" ("" for the core group) */
    const char *kind;
    int (*fn)(struct plan *P, const struct pf_ynode *obj, const char *name);
    const char *why; /* when fn is NULL: why it is refused */
};

static const struct launcher launchers[] = {
    {"batch", "Job", do_job, NULL},
    {"jobset.x-k8s.io", "JobSet", do_jobset, NULL},
    {"apps", "StatefulSet", do_statefulset, NULL},
    {"kubeflow.org", "PyTorchJob", do_pytorchjob, NULL},
    {"kubeflow.org", "MPIJob", do_mpijob, NULL},
    {"trainer.kubeflow.org", "TrainingRuntime", do_runtime, NULL},
    {"trainer.kubeflow.org", "ClusterTrainingRuntime", do_runtime, NULL},
    {"leaderworkerset.x-k8s.io", "LeaderWorkerSet", do_lws, NULL},
    {"batch.volcano.sh", "Job", do_volcano, NULL},
    {"trainer.kubeflow.org", "TrainJob", NULL,
     "a TrainJob has no pod template: its pods come from the runtime it names "
     "(spec.runtimeRef): run preflight inject on that TrainingRuntime or "
     "ClusterTrainingRuntime"},
    {"apps", "Deployment", NULL,
     "a Deployment's pods restart for ever, start one by one in a rollout and have no rank or "
     "world size: there is no job to gate (Job, JobSet, StatefulSet, PyTorchJob, "
     "TrainingRuntime, MPIJob, LeaderWorkerSet or Volcano Job)"},
    {"apps", "ReplicaSet", NULL, "a ReplicaSet's pods have no rank or stable name"},
    {"apps", "DaemonSet", NULL,
     "a DaemonSet's pods have no rank and no world size (one a node, as nodes come and go)"},
    {"", "Pod", NULL,
     "a bare Pod has no launcher: no rank, no world size, no peers; wrap it in an Indexed Job"},
    {"", "ReplicationController", NULL, "a ReplicationController's pods have no rank"},
    {"batch", "CronJob", NULL,
     "every run of a CronJob is a Job with a generated name, so the pods' subdomain cannot be "
     "named in advance; gate the Job template as an Indexed Job instead"},
};

/* Kinds passed through untouched: they run no pod. */
static const char *const passive[] = {
    "Service",
    "ConfigMap",
    "Secret",
    "ServiceAccount",
    "Role",
    "RoleBinding",
    "ClusterRole",
    "ClusterRoleBinding",
    "Namespace",
    "PersistentVolumeClaim",
    "PersistentVolume",
    "NetworkPolicy",
    "PodDisruptionBudget",
    "PriorityClass",
    "NetworkAttachmentDefinition",
    "ResourceClaim",
    "ResourceClaimTemplate",
    "PodGroup",
    "Queue",
    "LimitRange",
    "ResourceQuota",
    "CustomResourceDefinition",
    "StorageClass",
    "Endpoints",
    "EndpointSlice",
    "Ingress",
    "HorizontalPodAutoscaler",
};

int pf_inject_object(struct plan *P, const struct pf_ynode *obj, const char *doc_label)
{
    if (!obj || (obj->kind == PF_Y_SCALAR && obj->plain && obj->vlen == 0))
        return 0; /* an empty document: "---" and nothing, or only comments */
    if (obj->kind != PF_Y_MAP) {
        snprintf(P->where, sizeof(P->where), "%s: %s", P->o->name, doc_label);
        return pf_inject_refuse(P, "not a Kubernetes object (a mapping with apiVersion and kind)");
    }
    const char *kind = pf_ynode_str(obj, "kind"), *api = pf_ynode_str(obj, "apiVersion");
    const char *name = pf_ynode_str(pf_ynode_get(obj, "metadata"), "name");
    if (!name) name = pf_ynode_str(pf_ynode_get(obj, "metadata"), "generateName");
    snprintf(P->where, sizeof(P->where), "%s: %s (%s %s)", P->o->name, doc_label,
             kind ? kind : "no kind", name ? name : "without a name");
    if (!kind || !api) return pf_inject_refuse(P, "no %s", !kind ? "kind" : "apiVersion");
    if (strcmp(kind, "List") == 0 ||
        (strlen(kind) > 4 && !strcmp(kind + strlen(kind) - 4, "List"))) {
        const struct pf_ynode *items = pf_ynode_get(obj, "items");
        if (pf_inject_want(P, items, PF_Y_SEQ, "items") < 0) return -1;
        for (size_t i = 0; items && i < items->n; i++) {
            char label[PF_BUF_LINE];
            snprintf(label, sizeof(label), "%s, item %zu", doc_label, i + 1);
            P->res->documents++;
            if (pf_inject_object(P, items->kids[i], label) < 0) return -1;
        }
        return 0;
    }
    char group[256];
    const char *slash = strchr(api, '/');
    snprintf(group, sizeof(group), "%.*s", slash ? (int)(slash - api) : 0, api);
    for (size_t i = 0; i < PF_ARRAY_LEN(launchers); i++) {
        const struct launcher *l = &launchers[i];
        if (strcmp(l->kind, kind) != 0 || strcmp(l->group, group) != 0) continue;
        if (!l->fn && strcmp(kind, "TrainJob") == 0) {
            const char *rt =
                pf_ynode_str(pf_ynode_get(pf_ynode_get(obj, "spec"), "runtimeRef"), "name");
            if (rt && pf_strlist_has(&P->runtimes, rt)) {
                pf_inject_note(P, "runs on the runtime %s of this input, gated there", rt);
                P->res->passed++;
                return 0;
            }
        }
        if (!l->fn) return pf_inject_refuse(P, "%s", l->why);
        if (!name)
            return pf_inject_refuse(P, "metadata.name: none (a generateName cannot name peers)");
        size_t before = P->n;
        const struct pf_ynode *md = pf_ynode_get(obj, "metadata");
        P->from_server = pf_ynode_get(md, "uid") || pf_ynode_get(md, "resourceVersion");
        P->name = name;
        int r = l->fn(P, obj, name);
        if (r == 0 && P->n > before) server_fields(P, obj, group, kind);
        return r;
    }
    for (size_t i = 0; i < PF_ARRAY_LEN(passive); i++)
        if (strcmp(passive[i], kind) == 0) {
            P->res->passed++;
            return 0;
        }
    return pf_inject_refuse(
        P,
        "unknown kind %s of %s: preflight inject gates batch/v1 Job, JobSet, StatefulSet, "
        "PyTorchJob, MPIJob, TrainingRuntime, ClusterTrainingRuntime, LeaderWorkerSet "
        "and Volcano Job (batch.volcano.sh), and passes Services, ConfigMaps, Secrets and "
        "RBAC through",
        kind, api);
}
