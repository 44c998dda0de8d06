#!/usr/bin/env bash
# manifests/: every file validated against the Kubernetes 1.30 API schemas (types, required
# and unknown fields) or, for the launchers' custom resources (JobSet, TrainJob, PyTorchJob,
# MPIJob, Volcano Job, LeaderWorkerSet), against the openAPIV3Schema of the launcher's own
# CRD (tests/k8s/crds/, SOURCES.md names where each comes from); the validator itself shown to
# refuse bad objects; the properties the rendezvous depends on; and the ConfigMap's config
# accepted by preflight; the API token mounted by the preflight container alone. No launcher
# controller runs here; test_k8s_manifests.sh applies the same files to a real API server.
. "$(dirname "$0")/lib.sh"
. "$PREFLIGHT_SRC/tests/k8s/tools.sh"
if ! k8s_tools; then skip "manifests" "$TOOLS_WHY"; exit 0; fi
M=$PREFLIGHT_SRC/manifests

for f in "$M"/*.yaml; do
    n=$(basename "$f")
    if $VALIDATE "$f" >"$T/val" 2>&1; then ok "manifests/$n: $(grep -c '^ok' "$T/val") objects valid against the API schemas"
    else notok "manifests/$n: API schemas" "$(grep '^error' "$T/val" | head -3 | tr '\n' '|')"; fi
done
for f in "$PREFLIGHT_SRC"/tests/k8s/bad/*.yaml; do
    n=$(basename "$f")
    if $VALIDATE "$f" >"$T/val" 2>&1; then notok "validator refuses tests/k8s/bad/$n" "accepted"
    else ok "validator refuses tests/k8s/bad/$n ($(grep -c '^error' "$T/val") problems)"; fi
done
expect_eq "validator names the misspelt field" \
    "$($VALIDATE "$PREFLIGHT_SRC/tests/k8s/bad/typo.yaml" | grep -c 'unknown field "publishNotReadyAdresses"')" "1"
$VALIDATE "$PREFLIGHT_SRC/tests/k8s/bad/crd-jobset.yaml" >"$T/val" 2>&1
expect_eq "CRD validator: unknown field deep in a JobSet's pod template, wrong type, bad enum" \
    "$(grep -c -e 'containers/0/terminationMessagePolicyy: unknown field' -e 'replicas: string "2" where integer' -e '"RestartJobsSet" is not one of' "$T/val")" "4"
expect_eq "CRD validator: every launcher's CRD is loaded" \
    "$(for k in JobSet TrainJob TrainingRuntime PyTorchJob MPIJob LeaderWorkerSet; do grep -l "^  names:" "$PREFLIGHT_SRC"/tests/k8s/crds/*.yaml | xargs grep -l "kind: $k\$" | head -1 | wc -l; done | tr -d '\n')" "111111"

q() { python3 - "$@" <<'PY'
import json, sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
def get(kind):
    return next(d for d in docs if d["kind"] == kind)
def pod(kind):
    return get(kind)["spec"]["template"]["spec"]
def c(kind, name):
    p = pod(kind)
    return next(x for x in p.get("initContainers", []) + p["containers"] if x["name"] == name)
def env(kind, name="preflight"):
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in c(kind, name)["env"]}
r = eval(sys.argv[2])
print(json.dumps(r, sort_keys=True) if isinstance(r, (list, dict)) else r)
PY
}
expect_eq "service: headless and publishes not-ready pods" \
    "$(q "$M/service.yaml" '[get("Service")["spec"]["clusterIP"], get("Service")["spec"]["publishNotReadyAddresses"]]')" '["None", true]'
for w in statefulset statefulset-training-image indexed-job indexed-job-training-image; do
    f=$M/$w.yaml
    kind=$(q "$f" 'docs[0]["kind"]')
    expect_eq "$w: pods join the headless Service" \
        "$(q "$f" '(get("'"$kind"'")["spec"].get("serviceName") or pod("'"$kind"'").get("subdomain")) == "trainer" and pod("'"$kind"'") and get("'"$kind"'")["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"] == "trainer"')" "True"
    expect_eq "$w: preflight env (downward API, world size, config, token from the Secret)" \
        "$(q "$f" 'sorted(env("'"$kind"'"))')" '["NODE_NAME", "POD_NAME", "POD_NAMESPACE", "POD_UID", "PREFLIGHT_CONFIG", "PREFLIGHT_TIMEOUT", "PREFLIGHT_TOKEN", "PREFLIGHT_WORLD_SIZE"]'
    expect_eq "$w: token from this job's own Secret (<job>-preflight-token)" "$(q "$f" 'env("'"$kind"'")["PREFLIGHT_TOKEN"]')" '{"secretKeyRef": {"key": "token", "name": "trainer-preflight-token"}}'
    expect_eq "$w: no capability, /dev/shm in memory, podinfo, verdict shared with the trainer" \
        "$(q "$f" '[c("'"$kind"'", "preflight")["securityContext"]["capabilities"], [v["emptyDir"]["medium"] for v in pod("'"$kind"'")["volumes"] if v["name"] == "dshm"], sorted(i["path"] for v in pod("'"$kind"'")["volumes"] if v["name"] == "podinfo" for i in v["downwardAPI"]["items"]), [m["mountPath"] for m in c("'"$kind"'", "trainer")["volumeMounts"] if m["name"] == "preflight-verdict"]]')" \
        '[{"drop": ["ALL"]}, ["Memory"], ["annotations", "labels"], ["/run/preflight"]]'
    # what Pod Security restricted admits; the trainer: root, no capability (baseline)
    expect_eq "$w: preflight runs as the image's non-root user, no capability, RuntimeDefault seccomp; the trainer as root with none" \
        "$(q "$f" '[c("'"$kind"'", "preflight")["securityContext"], c("'"$kind"'", "trainer")["securityContext"]]')" \
        '[{"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}, "runAsNonRoot": true, "runAsUser": 65532, "seccompProfile": {"type": "RuntimeDefault"}}, {"capabilities": {"drop": ["ALL"]}, "runAsNonRoot": false, "runAsUser": 0}]'
done
for w in statefulset statefulset-training-image; do
    expect_eq "$w: podManagementPolicy Parallel" "$(q "$M/$w.yaml" 'get("StatefulSet")["spec"]["podManagementPolicy"]')" "Parallel"
done
for w in indexed-job indexed-job-training-image; do
    expect_eq "$w: subdomain is the headless Service, all pods at once" \
        "$(q "$M/$w.yaml" '[pod("Job")["subdomain"], get("Job")["spec"]["parallelism"] == get("Job")["spec"]["completions"]]')" '["trainer", true]'
done
for w in statefulset statefulset-training-image indexed-job indexed-job-training-image; do
    f=$M/$w.yaml
    kind=$(q "$f" 'docs[0]["kind"]')
    expect_eq "$w: ServiceAccount of rbac.yaml" "$(q "$f" 'pod("'"$kind"'")["serviceAccountName"]')" "preflight"
    expect_eq "$w: preflight requests the trainer's GPUs, shares its /dev/shm" \
        "$(q "$f" '[c("'"$kind"'", "preflight")["resources"]["limits"] == c("'"$kind"'", "trainer")["resources"]["limits"], [m["mountPath"] for m in c("'"$kind"'", "trainer")["volumeMounts"] if m["name"] == "dshm"]]')" \
        '[true, ["/dev/shm"]]'
    # commented examples for the usual RDMA / SR-IOV resources and the Multus annotation
    check "$w: RDMA and SR-IOV resources and the Multus annotation shown (commented)" \
        bash -c "grep -q '# *rdma/hca_shared_devices_a' '$f' && grep -q '# *intel.com/sriov_rdma' '$f' && grep -q '# *openshift.io/mlnxnics' '$f' && grep -q '# *k8s.v1.cni.cncf.io/networks:' '$f'"
done
expect_eq "rbac: the Role creates events, bound to the preflight ServiceAccount" \
    "$(q "$M/rbac.yaml" '[get("Role")["rules"], get("RoleBinding")["roleRef"]["name"], get("RoleBinding")["subjects"]]')" \
    '[[{"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}], "preflight", [{"kind": "ServiceAccount", "name": "preflight"}]]'
expect_eq "secret: the job's own trainer-preflight-token with key token" "$(q "$M/secret.yaml" '[get("Secret")["metadata"]["name"], sorted(get("Secret")["stringData"])]')" '["trainer-preflight-token", ["token"]]'
# no manifest reads a token shared by the namespace: each names its job's own Secret
check "manifests: every PREFLIGHT_TOKEN comes from the job's own Secret, none from a shared preflight-token" \
    bash -c "! grep -rn 'name: preflight-token' '$M' && [ \$(grep -rln 'secretKeyRef: {name: trainer-preflight-token' '$M' | wc -l) -ge 10 ]"
for w in statefulset-training-image indexed-job-training-image; do
    kind=$(q "$M/$w.yaml" 'docs[0]["kind"]')
    expect_eq "$w: the trainer mounts the installed binary too (kubectl exec ... preflight check)" \
        "$(q "$M/$w.yaml" '[m["mountPath"] for m in c("'"$kind"'", "trainer")["volumeMounts"] if m["name"] == "preflight-bin"]')" '["/opt/preflight"]'
done
expect_eq "indexed-job: Indexed, restartPolicy Never, FailJob on preflight's exit 1" \
    "$(q "$M/indexed-job.yaml" '[get("Job")["spec"]["completionMode"], pod("Job")["restartPolicy"], get("Job")["spec"]["podFailurePolicy"]["rules"][0]["onExitCodes"]["containerName"], 1 in get("Job")["spec"]["podFailurePolicy"]["rules"][0]["onExitCodes"]["values"]]')" \
    '["Indexed", "Never", "preflight", true]'
expect_eq "training-image mode: install into an emptyDir, then run from it in the trainer's image" \
    "$(q "$M/indexed-job-training-image.yaml" '[c("Job", "preflight-install")["args"], c("Job", "preflight")["command"], c("Job", "preflight")["image"] == c("Job", "trainer")["image"]]')" \
    '[["install", "/opt/preflight"], ["/opt/preflight/preflight", "run"], true]'

# the ConfigMap's config is one preflight accepts
python3 -c 'import sys, yaml; open(sys.argv[2], "w").write(yaml.safe_load(open(sys.argv[1]))["data"]["config.yaml"])' \
    "$M/configmap.yaml" "$T/config.yaml"
mkdir -p "$T/root"
"$PREFLIGHT" check --config "$T/config.yaml" --root "$T/root" --format yaml --verdict - >/dev/null 2>"$T/err"
rc=$?
if [ $rc -ne 2 ]; then ok "configmap: preflight accepts config.yaml"; else notok "configmap: preflight accepts config.yaml" "$(head -2 "$T/err")"; fi

# ---- the launchers: every pod template in every manifest (found wherever it sits in the
# custom resource) runs preflight as an initContainer that shares with the trainer what it
# checks, and gives what the identity rules read
lq() { python3 - "$@" <<'PY'
import json, sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
def templates(v, out):
    if isinstance(v, dict):
        for k, x in v.items():
            if k in ("template", "workerTemplate", "leaderTemplate") and isinstance(x, dict) and "containers" in (x.get("spec") or {}):
                out.append(x)
            else:
                templates(x, out)
    elif isinstance(v, list):
        for x in v:
            templates(x, out)
    return out
def kind(k):
    return next(d for d in docs if d["kind"] == k)
def inits(t): return t["spec"].get("initContainers", [])
# the pod templates that run preflight (an MPIJob's launcher runs none)
tpls = [t for t in templates(docs, []) if any(c["name"] == "preflight" for c in inits(t))]
def pf(t): return next(c for c in inits(t) if c["name"] == "preflight")
def trainer(t): return t["spec"]["containers"][0]
def env(c): return {e["name"]: e.get("value", e.get("valueFrom")) for e in c.get("env", [])}
r = eval(sys.argv[2])
print(json.dumps(r, sort_keys=True) if isinstance(r, (list, dict)) else r)
PY
}
for f in "$M"/*.yaml; do
    n=$(basename "$f" .yaml)
    [ "$(lq "$f" 'len(tpls)')" = 0 ] && continue
    expect_eq "$n: every initContainer has terminationMessagePolicy FallbackToLogsOnError" \
        "$(lq "$f" 'sorted(set(c.get("terminationMessagePolicy") for t in tpls for c in inits(t)))')" '["FallbackToLogsOnError"]'
    expect_eq "$n: preflight and the trainer share /dev/shm, NCCL env, capabilities (none), resources" \
        "$(lq "$f" 'sorted(set(json.dumps([[m["name"] for m in c["volumeMounts"] if m["mountPath"] == "/dev/shm"] == ["dshm"] for c in (pf(t), trainer(t))] + [pf(t)["envFrom"] == trainer(t)["envFrom"] == [{"configMapRef": {"name": "trainer-nccl"}}], pf(t)["securityContext"]["capabilities"] == trainer(t)["securityContext"]["capabilities"] == {"drop": ["ALL"]}, pf(t)["resources"]["limits"] == trainer(t)["resources"]["limits"]]) for t in tpls))')" \
        '["[true, true, true, true, true]"]'
    expect_eq "$n: the podinfo volume holds labels and annotations; POD_NAME and NODE_NAME set" \
        "$(lq "$f" 'sorted(set(json.dumps([sorted(i["path"] for v in t["spec"]["volumes"] if v["name"] == "podinfo" for i in v["downwardAPI"]["items"]), env(pf(t))["POD_NAME"], env(pf(t))["NODE_NAME"]]) for t in tpls))')" \
        '["[[\"annotations\", \"labels\"], {\"fieldRef\": {\"fieldPath\": \"metadata.name\"}}, {\"fieldRef\": {\"fieldPath\": \"spec.nodeName\"}}]"]'
    expect_eq "$n: preflight runs first (after preflight-install in the training-image mode)" \
        "$(lq "$f" 'all([c["name"] for c in inits(t) if c["name"] != "preflight-watch"] in (["preflight"], ["preflight-install", "preflight"]) and [c["name"] for c in inits(t)][-1] in ("preflight", "preflight-watch") for t in tpls)')" "True"
done
W=$M/indexed-job-watch.yaml
expect_eq "indexed-job-watch: the watch is a native sidecar after the gate, on the folder the trainer's NCCL writes" \
    "$(lq "$W" '[[(c["name"], c.get("restartPolicy"), c["args"]) for c in inits(tpls[0])], env(trainer(tpls[0]))["NCCL_DEBUG_FILE"], [m.get("readOnly", False) for m in trainer(tpls[0])["volumeMounts"] if m["mountPath"] == "/run/preflight"], tpls[0]["spec"]["shareProcessNamespace"]]')" \
    '[[["preflight", null, ["run"]], ["preflight-watch", "Always", ["watch", "/run/preflight"]]], "/run/preflight/nccl.%h.%p", [false], true]'
J=$M/jobset.yaml
expect_eq "jobset: DNS of not-ready pods, Indexed Jobs, world size = Jobs x pods" \
    "$(lq "$J" 'kind("JobSet")["spec"]["network"]["publishNotReadyAddresses"] and all(r["template"]["spec"]["completionMode"] == "Indexed" for r in kind("JobSet")["spec"]["replicatedJobs"]) and int(env(pf(tpls[0]))["PREFLIGHT_WORLD_SIZE"]) == sum(r["replicas"] * r["template"]["spec"]["completions"] for r in kind("JobSet")["spec"]["replicatedJobs"])')" "True"
TJ=$M/trainjob.yaml
expect_eq "trainjob: PET_* injected into the preflight initContainer of the node job" \
    "$(lq "$TJ" '[kind("TrainingRuntime")["spec"]["mlPolicy"]["torch"]["envInjection"]["targets"], [r["name"] for r in kind("TrainingRuntime")["spec"]["template"]["spec"]["replicatedJobs"]], "PREFLIGHT_WORLD_SIZE" in env(pf(tpls[0])), kind("TrainJob")["spec"]["runtimeRef"]["name"] == kind("TrainingRuntime")["metadata"]["name"]]')" \
    '[[{"containerNames": ["preflight"], "jobName": "node"}], ["node"], false, true]'
P=$M/pytorchjob.yaml
expect_eq "pytorchjob: own headless Service publishes not-ready pods; both replica types use it as subdomain" \
    "$(lq "$P" '[kind("Service")["spec"]["clusterIP"], kind("Service")["spec"]["publishNotReadyAddresses"], kind("Service")["spec"]["selector"], sorted(set(t["spec"]["subdomain"] for t in tpls)), len(tpls)]')" \
    '["None", true, {"training.kubeflow.org/job-name": "trainer"}, ["trainer"], 2]'
expect_eq "pytorchjob: world size = master + worker replicas" \
    "$(lq "$P" 'int(env(pf(tpls[0]))["PREFLIGHT_WORLD_SIZE"]) == sum(r["replicas"] for r in kind("PyTorchJob")["spec"]["pytorchReplicaSpecs"].values())')" "True"
MP=$M/mpijob.yaml
expect_eq "mpijob: a headless Service selects worker 0 alone, publishes it not-ready, and is the coordinator" \
    "$(lq "$MP" '[kind("Service")["spec"]["publishNotReadyAddresses"], kind("Service")["spec"]["selector"], env(pf(tpls[-1]))["PREFLIGHT_COORDINATOR"], int(env(pf(tpls[-1]))["PREFLIGHT_WORLD_SIZE"]) == kind("MPIJob")["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"]]')" \
    '[true, {"training.kubeflow.org/job-name": "trainer", "training.kubeflow.org/job-role": "worker", "training.kubeflow.org/replica-index": "0"}, "trainer-rank0:29400", true]'
expect_eq "mpijob: the launcher runs no preflight" \
    "$(lq "$MP" 'kind("MPIJob")["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"].get("initContainers")')" "None"
V=$M/volcano-job.yaml
expect_eq "volcano: svc plugin publishes not-ready pods, env plugin gives VC_TASK_INDEX, gang of all pods" \
    "$(lq "$V" '[kind("Job")["spec"]["plugins"], kind("Job")["spec"]["minAvailable"] == sum(t["replicas"] for t in kind("Job")["spec"]["tasks"]), "PREFLIGHT_WORLD_SIZE" in env(pf(tpls[0]))]')" \
    '[{"env": [], "svc": ["--publish-not-ready-addresses=true"]}, true, false]'
L=$M/leaderworkerset.yaml
expect_eq "leaderworkerset: workers start without waiting for the leader to be Ready; no world size of ours" \
    "$(lq "$L" '[kind("LeaderWorkerSet")["spec"]["startupPolicy"], "PREFLIGHT_WORLD_SIZE" in env(pf(tpls[0])), "PREFLIGHT_COORDINATOR" in env(pf(tpls[0]))]')" '["LeaderCreated", false, false]'

# ---- the exit-code recipes: spec stops, node and peer retry
for w in indexed-job indexed-job-training-image; do
    expect_eq "$w: podFailurePolicy: spec (3) fails the Job, node (4) and peer (5) count against backoffLimitPerIndex 2, one failed index fails the Job" \
        "$(q "$M/$w.yaml" '[[(r["action"], r["onExitCodes"]["values"]) for r in get("Job")["spec"]["podFailurePolicy"]["rules"] if "onExitCodes" in r and r["onExitCodes"]["containerName"] == "preflight"], get("Job")["spec"]["backoffLimitPerIndex"], get("Job")["spec"]["maxFailedIndexes"], "activeDeadlineSeconds" in get("Job")["spec"]]')" \
        '[[["FailJob", [1, 2, 3]], ["Count", [4]], ["Count", [5]]], 2, 0, false]'
done
for w in jobset trainjob; do
    expect_eq "$w: child Jobs fail on spec (3) by podFailurePolicy, on node/peer by backoffLimit 0; the set stops on the first, restarts on the second" \
        "$(lq "$M/$w.yaml" 'json.dumps([[(r["action"], r.get("onExitCodes", {}).get("values")) for r in rj["template"]["spec"]["podFailurePolicy"]["rules"]] + [rj["template"]["spec"]["backoffLimit"]] for rj in (kind("JobSet") if "JobSet" in [d["kind"] for d in docs] else kind("TrainingRuntime")["spec"]["template"])["spec"]["replicatedJobs"]]) + " " + json.dumps([(r["action"], r["onJobFailureReasons"]) for r in (kind("JobSet")["spec"] if "JobSet" in [d["kind"] for d in docs] else kind("TrainingRuntime")["spec"]["template"]["spec"])["failurePolicy"]["rules"]])')" \
        '[[["FailJob", [1, 2, 3]], ["Count", [4]], ["Count", [5]], ["Ignore", null], 0]] [["FailJobSet", ["PodFailurePolicy"]], ["RestartJobSet", ["BackoffLimitExceeded"]]]'
done

# ---- the API token goes to the preflight container alone: every pod of the ServiceAccount
# preflight automounts none, its preflight container mounts a projected, expiring token
# read-only at the folder preflight reads (pkg/report/report.h), the trainer nothing of it
SA_DIR=$(sed -nE 's/^#define PF_REPORT_SA_DIR "([^"]+)".*/\1/p' "$PREFLIGHT_SRC/pkg/report/report.h")
for f in "$M"/*.yaml; do
    n=$(basename "$f" .yaml)
    want=$(grep -cE '^ *serviceAccountName: preflight\b' "$f")
    [ "$want" -gt 0 ] || continue
    got=$(python3 "$PREFLIGHT_SRC/tests/k8s/tokenmounts.py" "$f" "$SA_DIR" sa | grep -F '(preflight):' |
        grep -cE ': automount=False mounts=preflight\(ro\)(,preflight-watch\(ro\))? files=ca.crt,namespace,token exp=\[3600\]$')
    expect_eq "$n: its $want pod template(s) with the ServiceAccount preflight automount no token; preflight's containers alone (the gate, its watch) mount it (read-only, expiring, at $SA_DIR)" "$got" "$want"
done
expect_eq "rbac: the ServiceAccount automounts no token" \
    "$(q "$M/rbac.yaml" 'get("ServiceAccount").get("automountServiceAccountToken")')" "False"
