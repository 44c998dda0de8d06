/* inject's gate in one pod template: the initContainer `preflight` (manifests/indexed-job.yaml's,
 * with what the trainer gives: its NCCL variables, devices and /dev/shm), the `preflight watch`
 * sidecar, the volumes, and the failure policies of the Job or JobSet around it (preflight's
 * exit codes: docs/scheduling.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static void env_field(struct cn *env, const char *name, const char *path)
{
    struct cn *e = pf_cn_map(env, NULL, false);
    pf_cn_str(e, "name", name);
    struct cn *vf = pf_cn_map(e, "valueFrom", true);
    pf_cn_str(pf_cn_map(vf, "fieldRef", true), "fieldPath", path);
}
static void env_value(struct cn *env, const char *name, const char *value)
{
    struct cn *e = pf_cn_map(env, NULL, false);
    pf_cn_str(e, "name", name);
    pf_cn_str(e, "value", value);
}
static void mount(struct cn *mounts, const char *name, const char *path, bool ro)
{
    struct cn *m = pf_cn_map(mounts, NULL, true);
    pf_cn_str(m, "name", name);
    pf_cn_str(m, "mountPath", path);
    if (ro) pf_cn_raw(m, "readOnly", "true");
}

/* The verdict's emptyDir, which the watch shares with the trainer: its NCCL writes its log
 * there. */
#define WATCH_DIR "/run/preflight"
#define WATCH_FILE WATCH_DIR "/nccl.%h.%p.log"

/* Pod Security "restricted": preflight needs no capability (docs/kubernetes.md) */
static void restricted(struct cn *c)
{
    struct cn *sc = pf_cn_map(c, "securityContext", false);
    pf_cn_raw(sc, "runAsNonRoot", "true");
    pf_cn_raw(sc, "runAsUser", "65532");
    pf_cn_raw(sc, "allowPrivilegeEscalation", "false");
    pf_cn_str(pf_cn_seq(pf_cn_map(sc, "capabilities", false), "drop", true), NULL, "ALL");
    pf_cn_str(pf_cn_map(sc, "seccompProfile", false), "type", "RuntimeDefault");
}

/* What both preflight containers mount: the podinfo, the config, the verdict's folder and the
 * API token. */
static void preflight_mounts(struct cn *mounts)
{
    mount(mounts, "podinfo", "/etc/podinfo", true);
    mount(mounts, "preflight-config", "/etc/preflight", true);
    mount(mounts, "preflight-verdict", WATCH_DIR, false);
    mount(mounts, "preflight-sa", "/var/run/secrets/kubernetes.io/serviceaccount", true);
}

/* The name of the trainer's volume mounted at /dev/shm, or NULL. */
static const char *shm_volume(const struct pf_ynode *trainer)
{
    const struct pf_ynode *m = pf_ynode_get(trainer, "volumeMounts");
    for (size_t i = 0; m && m->kind == PF_Y_SEQ && i < m->n; i++) {
        const char *p = pf_ynode_str(m->kids[i], "mountPath");
        if (p && (strcmp(p, "/dev/shm") == 0 || strcmp(p, "/dev/shm/") == 0))
            return pf_ynode_str(m->kids[i], "name");
    }
    return NULL;
}

/* The initContainer `preflight`: manifests/indexed-job.yaml's, with what this pod gives. */
static struct cn *gate_container(const struct plan *P, const struct pod *pod,
                                 const struct pf_ynode *trainer)
{
    struct cn *c = pf_cn_map(NULL, NULL, false);
    pf_cn_str(c, "name", "preflight");
    pf_cn_str(c, "image", P->o->image ? P->o->image : PF_INJECT_IMAGE);
    pf_cn_str(pf_cn_seq(c, "args", true), NULL, "run");
    pf_cn_str(c, "terminationMessagePolicy", "FallbackToLogsOnError");
    /* the trainer's NCCL variables: its envFrom sources and its NCCL_* values */
    const struct pf_ynode *ef = pf_ynode_get(trainer, "envFrom");
    struct cn *envfrom = NULL;
    for (size_t i = 0; ef && ef->kind == PF_Y_SEQ && i < ef->n; i++) {
        static const char *const refs[] = {"configMapRef", "secretRef"};
        for (size_t k = 0; k < PF_ARRAY_LEN(refs); k++) {
            const char *name = pf_ynode_str(pf_ynode_get(ef->kids[i], refs[k]), "name");
            if (!name) continue;
            if (!envfrom) envfrom = pf_cn_seq(c, "envFrom", false);
            struct cn *src = pf_cn_map(envfrom, NULL, false);
            const char *prefix = pf_ynode_str(ef->kids[i], "prefix");
            if (prefix) pf_cn_str(src, "prefix", prefix);
            struct cn *ref = pf_cn_map(src, refs[k], true);
            pf_cn_str(ref, "name", name);
            const char *opt = pf_ynode_str(pf_ynode_get(ef->kids[i], refs[k]), "optional");
            if (opt && (strcmp(opt, "true") == 0 || strcmp(opt, "false") == 0))
                pf_cn_raw(ref, "optional", opt);
        }
    }
    struct cn *env = pf_cn_seq(c, "env", false);
    env_field(env, "POD_NAME", "metadata.name");
    env_field(env, "POD_NAMESPACE", "metadata.namespace");
    env_field(env, "POD_UID", "metadata.uid");
    env_field(env, "NODE_NAME", "spec.nodeName");
    if (pod->world > 0) {
        char w[32];
        snprintf(w, sizeof(w), "%ld", pod->world);
        env_value(env, "PREFLIGHT_WORLD_SIZE", w);
    }
    if (pod->coordinator) env_value(env, "PREFLIGHT_COORDINATOR", pod->coordinator);
    env_value(env, "PREFLIGHT_CONFIG", "/etc/preflight/config.yaml");
    env_value(env, "PREFLIGHT_TIMEOUT", "900");
    struct cn *tok = pf_cn_map(env, NULL, false);
    pf_cn_str(tok, "name", "PREFLIGHT_TOKEN");
    struct cn *skr = pf_cn_map(pf_cn_map(tok, "valueFrom", true), "secretKeyRef", true);
    /* each job its own token (docs/kubernetes.md, "One token per job") */
    char secret[320];
    snprintf(secret, sizeof(secret), "%s-preflight-token", P->name ? P->name : "preflight");
    pf_cn_str(skr, "name", secret);
    pf_cn_str(skr, "key", "token");
    const struct pf_ynode *tenv = pf_ynode_get(trainer, "env");
    for (size_t i = 0; tenv && tenv->kind == PF_Y_SEQ && i < tenv->n; i++) {
        const char *name = pf_ynode_str(tenv->kids[i], "name");
        const char *value = pf_ynode_str(tenv->kids[i], "value");
        if (name && value && pf_str_starts(name, "NCCL_")) env_value(env, name, value);
    }
    restricted(c);
    /* an initContainer must request the devices to see them: the trainer's extended resources
     * (vendor/name) and its DRA claims */
    const struct pf_ynode *res = pf_ynode_get(trainer, "resources");
    const struct pf_ynode *lim = pf_ynode_get(res, "limits");
    const struct pf_ynode *claims = pf_ynode_get(res, "claims");
    struct cn *rc = NULL, *lc = NULL;
    for (size_t i = 0; lim && lim->kind == PF_Y_MAP && i + 1 < lim->n; i += 2) {
        const struct pf_ynode *k = lim->kids[i], *v = lim->kids[i + 1];
        if (k->kind != PF_Y_SCALAR || v->kind != PF_Y_SCALAR || !strchr(k->val, '/')) continue;
        if (!rc) rc = pf_cn_map(c, "resources", false);
        if (!lc) lc = pf_cn_map(rc, "limits", false);
        struct cn *q = pf_cn_new(CN_STR);
        q->s = pf_xstrdup(v->val);
        /* the key as a plain or quoted scalar: vendor names are [a-z0-9.-]/[a-z0-9_.-] */
        char *key = pf_cn_plain_ok(k->val) ? pf_xstrdup(k->val) : pf_xasprintf("\"%s\"", k->val);
        q->okey = key;
        pf_cn_add(lc, key, q);
    }
    for (size_t i = 0; claims && claims->kind == PF_Y_SEQ && i < claims->n; i++) {
        const char *name = pf_ynode_str(claims->kids[i], "name");
        if (!name) continue;
        if (!rc) rc = pf_cn_map(c, "resources", false);
        struct cn *cl = NULL;
        for (size_t j = 0; j < rc->n; j++)
            if (strcmp(rc->kids[j]->key, "claims") == 0) cl = rc->kids[j];
        if (!cl) cl = pf_cn_seq(rc, "claims", false);
        pf_cn_str(pf_cn_map(cl, NULL, true), "name", name);
    }
    struct cn *mounts = pf_cn_seq(c, "volumeMounts", false);
    preflight_mounts(mounts);
    const char *shm = shm_volume(trainer);
    if (shm) mount(mounts, shm, "/dev/shm", false);
    return c;
}

/* The native sidecar `preflight watch` (a restartPolicy Always initContainer) sharing the
 * verdict's emptyDir with the trainer, whose NCCL writes its log there. */
static struct cn *watch_container(const struct plan *P)
{
    struct cn *c = pf_cn_map(NULL, NULL, false);
    pf_cn_str(c, "name", "preflight-watch");
    pf_cn_str(c, "image", P->o->image ? P->o->image : PF_INJECT_IMAGE);
    pf_cn_str(pf_cn_seq(c, "args", true), NULL, "watch");
    pf_cn_str(c, "restartPolicy", "Always");
    struct cn *env = pf_cn_seq(c, "env", false);
    env_field(env, "POD_NAME", "metadata.name");
    env_field(env, "POD_NAMESPACE", "metadata.namespace");
    env_field(env, "POD_UID", "metadata.uid"); /* the Event's involvedObject.uid */
    env_field(env, "NODE_NAME", "spec.nodeName");
    env_value(env, "PREFLIGHT_CONFIG", "/etc/preflight/config.yaml");
    restricted(c);
    struct cn *r = pf_cn_map(c, "resources", false);
    struct cn *req = pf_cn_map(r, "requests", true);
    pf_cn_str(req, "cpu", "50m");
    pf_cn_str(req, "memory", "64Mi");
    struct cn *lim = pf_cn_map(r, "limits", true);
    pf_cn_str(lim, "memory", "128Mi");
    struct cn *mounts = pf_cn_seq(c, "volumeMounts", false);
    preflight_mounts(mounts);
    return c;
}

static struct cn *volume(const char *name)
{
    struct cn *v = pf_cn_map(NULL, NULL, false);
    pf_cn_str(v, "name", name);
    if (strcmp(name, "preflight-sa") == 0) {
        /* the API token for preflight alone (manifests/indexed-job.yaml) */
        struct cn *src = pf_cn_seq(pf_cn_map(v, "projected", false), "sources", false);
        struct cn *tok = pf_cn_map(pf_cn_map(src, NULL, false), "serviceAccountToken", true);
        pf_cn_str(tok, "path", "token");
        pf_cn_raw(tok, "expirationSeconds", "3600");
        struct cn *cm = pf_cn_map(pf_cn_map(src, NULL, false), "configMap", false);
        pf_cn_str(cm, "name", "kube-root-ca.crt");
        struct cn *it = pf_cn_map(pf_cn_seq(cm, "items", true), NULL, true);
        pf_cn_str(it, "key", "ca.crt");
        pf_cn_str(it, "path", "ca.crt");
        struct cn *da =
            pf_cn_seq(pf_cn_map(pf_cn_map(src, NULL, false), "downwardAPI", false), "items", true);
        struct cn *ns = pf_cn_map(da, NULL, true);
        pf_cn_str(ns, "path", "namespace");
        pf_cn_str(pf_cn_map(ns, "fieldRef", true), "fieldPath", "metadata.namespace");
    } else if (strcmp(name, "podinfo") == 0) {
        struct cn *items = pf_cn_seq(pf_cn_map(v, "downwardAPI", false), "items", false);
        static const char *const what[] = {"annotations", "labels"};
        for (size_t i = 0; i < PF_ARRAY_LEN(what); i++) {
            struct cn *it = pf_cn_map(items, NULL, false);
            pf_cn_str(it, "path", what[i]);
            pf_cn_str(pf_cn_map(it, "fieldRef", true), "fieldPath",
                      i == 0 ? "metadata.annotations" : "metadata.labels");
        }
    } else if (strcmp(name, "preflight-config") == 0) {
        pf_cn_str(pf_cn_map(v, "configMap", true), "name", "preflight-config");
    } else {
        pf_cn_map(v, "emptyDir", true);
    }
    return v;
}

static void add_env_if_absent(struct plan *P, const struct pf_ynode *c, const char *name,
                              const char *value, struct cn **pending)
{
    const struct pf_ynode *env = pf_ynode_get(c, "env");
    if (pf_inject_named(env, name)) return;
    struct cn *e = pf_cn_map(NULL, NULL, false);
    pf_cn_str(e, "name", name);
    pf_cn_str(e, "value", value);
    if (env) {
        struct cn *l = pf_cn_seq(NULL, NULL, false);
        pf_cn_add(l, NULL, e);
        pf_inject_seq_add(P, env, l, false);
        pf_cn_free(l);
    } else {
        if (!*pending) *pending = pf_cn_seq(NULL, NULL, false);
        pf_cn_add(*pending, NULL, e);
    }
}

/* The trainer's part of the watch: its NCCL log into the shared folder. */
static void watch_trainer(struct plan *P, const struct pf_ynode *trainer)
{
    if (pf_inject_want(P, pf_ynode_get(trainer, "env"), PF_Y_SEQ, "the trainer's env") < 0 ||
        pf_inject_want(P, pf_ynode_get(trainer, "volumeMounts"), PF_Y_SEQ,
                       "the trainer's volumeMounts") < 0)
        return;
    struct cn *pending = NULL;
    add_env_if_absent(P, trainer, "NCCL_DEBUG", "INFO", &pending);
    add_env_if_absent(P, trainer, "NCCL_DEBUG_SUBSYS", "INIT,NET", &pending);
    add_env_if_absent(P, trainer, "NCCL_DEBUG_FILE", WATCH_FILE, &pending);
    if (pending) pf_inject_map_add(P, trainer, "env", pending);
    pf_cn_free(pending);
    const struct pf_ynode *vm = pf_ynode_get(trainer, "volumeMounts");
    if (!pf_inject_named(vm, "preflight-verdict")) {
        struct cn *m = pf_cn_seq(NULL, NULL, false);
        mount(m, "preflight-verdict", WATCH_DIR, false);
        if (vm)
            pf_inject_seq_add(P, vm, m, false);
        else
            pf_inject_map_add(P, trainer, "volumeMounts", m);
        pf_cn_free(m);
    }
}

/* The gate in one pod template (a mapping with metadata and spec). */
int pf_inject_gate_pod(struct plan *P, const struct pf_ynode *tpl, const struct pod *pod)
{
    if (!tpl) return pf_inject_refuse(P, "no pod template at %s", pod->label);
    if (pf_inject_want(P, tpl, PF_Y_MAP, pod->label) < 0) return -1;
    const struct pf_ynode *spec = pf_ynode_get(tpl, "spec");
    if (!spec) return pf_inject_refuse(P, "the pod template %s has no spec", pod->label);
    if (pf_inject_want(P, spec, PF_Y_MAP, "the pod template's spec") < 0) return -1;
    const struct pf_ynode *cs = pf_ynode_get(spec, "containers");
    if (pf_inject_want(P, cs, PF_Y_SEQ, "spec.containers") < 0) return -1;
    if (!cs || cs->n == 0 || cs->kids[0]->kind != PF_Y_MAP)
        return pf_inject_refuse(P, "the pod template %s has no containers", pod->label);
    const struct pf_ynode *trainer = cs->kids[0];
    const struct pf_ynode *inits = pf_ynode_get(spec, "initContainers");
    const struct pf_ynode *vols = pf_ynode_get(spec, "volumes");
    if (pf_inject_want(P, inits, PF_Y_SEQ, "spec.initContainers") < 0 ||
        pf_inject_want(P, vols, PF_Y_SEQ, "spec.volumes") < 0)
        return -1;
    size_t before = P->n;
    bool gate = pf_inject_named(inits, "preflight") != NULL;
    bool watch = P->o->watch && !pf_inject_named(inits, "preflight-watch");
    struct cn *add = pf_cn_seq(NULL, NULL, false);
    if (!gate) pf_cn_add(add, NULL, gate_container(P, pod, trainer));
    if (watch) pf_cn_add(add, NULL, watch_container(P));
    /* the gate first: nothing else starts before the node and the job are known good; the
     * watch after it, as it reads the gate's verdict (appended when the gate is there) */
    if (add->n && !inits)
        pf_inject_map_add(P, spec, "initContainers", add);
    else if (add->n)
        pf_inject_seq_add(P, inits, add, !gate);
    pf_cn_free(add);
    if (watch) watch_trainer(P, trainer);
    static const char *const need[] = {"preflight-sa", "podinfo", "preflight-config",
                                       "preflight-verdict"};
    struct cn *vadd = pf_cn_seq(NULL, NULL, false);
    for (size_t i = 0; i < PF_ARRAY_LEN(need); i++)
        if (!pf_inject_named(vols, need[i])) pf_cn_add(vadd, NULL, volume(need[i]));
    if (vadd->n && !vols)
        pf_inject_map_add(P, spec, "volumes", vadd);
    else if (vadd->n)
        pf_inject_seq_add(P, vols, vadd, false);
    pf_cn_free(vadd);
    if (pod->job) {
        const char *rp = pf_ynode_str(spec, "restartPolicy");
        if (!rp) {
            struct cn *v = pf_cn_new(CN_STR);
            v->s = pf_xstrdup("Never");
            pf_inject_map_add(P, spec, "restartPolicy", v);
            pf_cn_free(v);
        }
    }
    const char *sa = pf_ynode_str(spec, "serviceAccountName");
    if (!gate)
        pf_inject_note(
            P,
            "%s: the pods run as service account %s: it needs manifests/rbac.yaml's Role (create "
            "events), and the namespace the ConfigMap preflight-config and the Secret "
            "%s-preflight-token (this job's own token: docs/kubernetes.md)",
            pod->label, sa ? sa : "default", P->name ? P->name : "preflight");
    if (gate && P->n == before)
        P->res->already++;
    else
        P->res->gated++;
    return P->rc;
}

/* A batch/v1 JobSpec's failure policy: preflight's exit codes (docs/scheduling.md). */
void pf_inject_job_policy(struct plan *P, const struct pf_ynode *jobspec, const char *label,
                          bool in_jobset)
{
    const struct pf_ynode *tspec = pf_ynode_get(pf_ynode_get(jobspec, "template"), "spec");
    const char *rp = pf_ynode_str(tspec, "restartPolicy");
    if (rp && strcmp(rp, "Never") != 0) {
        pf_inject_note(
            P,
            "%s: restartPolicy %s: the kubelet retries a failed preflight in place and the pod "
            "never fails, so no podFailurePolicy was added (set restartPolicy: Never)",
            label, rp);
        return;
    }
    const struct pf_ynode *pfp = pf_ynode_get(jobspec, "podFailurePolicy");
    const char *prp = pf_ynode_str(jobspec, "podReplacementPolicy");
    if (!pfp && prp && strcmp(prp, "Failed") != 0) {
        /* the API server refuses a podFailurePolicy beside any other podReplacementPolicy
         * (kubernetes pkg/apis/batch/validation); it writes TerminatingOrFailed itself as the
         * default of a Job without one, so from an object read back that default goes */
        static const char *const key[] = {"podReplacementPolicy"};
        if (!P->from_server || pf_inject_map_del(P, jobspec, key, 1) < 0) {
            pf_inject_note(P,
                           "%s: podReplacementPolicy %s cannot go with a podFailurePolicy (the API "
                           "server allows only Failed there): no podFailurePolicy was added",
                           label, prp);
            return;
        }
    }
    if (pfp) {
        const struct pf_ynode *rules = pf_ynode_get(pfp, "rules");
        bool ours = false;
        for (size_t i = 0; rules && rules->kind == PF_Y_SEQ && i < rules->n; i++) {
            const char *cn =
                pf_ynode_str(pf_ynode_get(rules->kids[i], "onExitCodes"), "containerName");
            if (cn && strcmp(cn, "preflight") == 0) ours = true;
        }
        if (!ours)
            pf_inject_note(
                P,
                "%s: its podFailurePolicy has no rule for the container preflight: kept as it "
                "is (preflight exits 3 on a spec fault, 4 on a node fault, 5 on a peer fault)",
                label);
        return;
    }
    struct cn *p = pf_cn_map(NULL, NULL, false);
    struct cn *rules = pf_cn_seq(p, "rules", false);
    static const struct {
        const char *action, *codes;
    } r[] = {{"FailJob", "[1, 2, 3]"}, {"Count", "[4]"}, {"Count", "[5]"}};
    for (size_t i = 0; i < PF_ARRAY_LEN(r); i++) {
        struct cn *rule = pf_cn_map(rules, NULL, false);
        pf_cn_str(rule, "action", r[i].action);
        struct cn *oc = pf_cn_map(rule, "onExitCodes", true);
        pf_cn_str(oc, "containerName", "preflight");
        pf_cn_str(oc, "operator", "In");
        pf_cn_raw(oc, "values", r[i].codes);
    }
    struct cn *ig = pf_cn_map(rules, NULL, false);
    pf_cn_str(ig, "action", "Ignore");
    struct cn *cond = pf_cn_map(pf_cn_seq(ig, "onPodConditions", true), NULL, true);
    pf_cn_str(cond, "type", "DisruptionTarget");
    pf_cn_str(cond, "status", "True");
    pf_inject_map_add(P, jobspec, "podFailurePolicy", p);
    pf_cn_free(p);
    if (in_jobset && !pf_ynode_get(jobspec, "backoffLimit")) {
        struct cn *v = pf_cn_new(CN_RAW);
        v->s = pf_xstrdup("0"); /* any counted failure fails the Job: the JobSet decides */
        pf_inject_map_add(P, jobspec, "backoffLimit", v);
        pf_cn_free(v);
    }
}

/* A JobSet's failurePolicy (the JobSet of a JobSet or of a TrainingRuntime's template). */
void pf_inject_jobset_policy(struct plan *P, const struct pf_ynode *jsspec)
{
    if (pf_ynode_get(jsspec, "failurePolicy")) return;
    struct cn *p = pf_cn_map(NULL, NULL, false);
    pf_cn_raw(p, "maxRestarts", "3");
    struct cn *rules = pf_cn_seq(p, "rules", false);
    struct cn *a = pf_cn_map(rules, NULL, false);
    pf_cn_str(a, "name", "stopOnSpecFault");
    pf_cn_str(a, "action", "FailJobSet");
    pf_cn_str(pf_cn_seq(a, "onJobFailureReasons", true), NULL, "PodFailurePolicy");
    struct cn *b = pf_cn_map(rules, NULL, false);
    pf_cn_str(b, "name", "restartOnNodeOrPeerFault");
    pf_cn_str(b, "action", "RestartJobSet");
    pf_cn_str(pf_cn_seq(b, "onJobFailureReasons", true), NULL, "BackoffLimitExceeded");
    pf_inject_map_add(P, jsspec, "failurePolicy", p);
    pf_cn_free(p);
}
