#!/usr/bin/env bash
# `preflight inject`: every launcher manifest of manifests/ stripped of preflight (PyYAML,
# inject_check.py) and injected again gives the shipped initContainer, volumes, variables and
# failure policies; a second run and a run on the shipped file change no byte; the launchers'
# own published examples (tests/fixtures/inject/SOURCES.md) are gated with only insertions
# (every line, comment and field kept) and validate against the Kubernetes API schemas and the
# launchers' CRDs (tests/k8s/validate.js, when its tools can be had); `kubectl get -o yaml`
# and `-o json` output through a pipe; a List; --watch; and every refusal with its reason,
# exit 1 and nothing on stdout.
. "$(dirname "$0")/lib.sh"
CHECK="python3 $PREFLIGHT_SRC/tests/e2e/inject_check.py"
M=$PREFLIGHT_SRC/manifests
U=$FIX/inject/upstream

inject() { "$PREFLIGHT" inject "$@" 2>>"$T/stderr"; }

# ---- manifests/: stripped, injected, compared with what ships
for n in indexed-job indexed-job-training-image jobset leaderworkerset mpijob pytorchjob \
    statefulset statefulset-training-image trainjob volcano-job; do
    f=$M/$n.yaml
    $CHECK strip "$f" "$T/$n.stripped.yaml"
    if ! inject "$T/$n.stripped.yaml" >"$T/$n.injected.yaml"; then
        notok "manifests/$n.yaml stripped: injected" "$(tail -1 "$T/stderr")"
        continue
    fi
    $CHECK same "$f" "$T/$n.injected.yaml"
    $CHECK added "$T/$n.stripped.yaml" "$T/$n.injected.yaml" "manifests/$n.yaml stripped, injected"
    inject "$T/$n.injected.yaml" >"$T/$n.again.yaml"
    check "manifests/$n.yaml: a second inject changes no byte" cmp -s "$T/$n.injected.yaml" "$T/$n.again.yaml"
    inject "$f" >"$T/$n.shipped.yaml"
    check "manifests/$n.yaml as shipped: inject changes no byte (already gated)" cmp -s "$f" "$T/$n.shipped.yaml"
done

# ---- the launchers' published examples
. "$PREFLIGHT_SRC/tests/k8s/tools.sh"
# no_new_errors NAME BEFORE AFTER: the injected file is valid wherever its input is (an
# example may use a field of a newer launcher than the CRD in tests/k8s/crds, and `kubectl get`
# output carries the server's metadata, which the schemas of a request refuse: those errors
# are the input's, and must be the only ones)
no_new_errors() {
    $VALIDATE "$2" 2>&1 | grep '^error' | sed 's|^error [^:]*: ||' | sort >"$T/val0"
    $VALIDATE "$3" >"$T/val" 2>&1
    grep '^error' "$T/val" | sed 's|^error [^:]*: ||' | sort >"$T/val1"
    local new
    new=$(comm -13 "$T/val0" "$T/val1" | head -3 | tr '\n' '|')
    if [ -z "$new" ] && grep -q '^ok\|^error' "$T/val"; then
        ok "$1 injected: valid against the API schemas and CRDs ($(grep -c '^ok' "$T/val") objects; $(wc -l <"$T/val0") errors of the input itself, none added)"
    else
        notok "$1 injected: schemas" "new errors: $new"
    fi
}
HAVE_VALIDATE=1
k8s_tools || HAVE_VALIDATE=0
for f in "$U"/*.yaml; do
    n=$(basename "$f")
    if ! inject "$f" >"$T/$n"; then
        notok "upstream $n: injected" "$(tail -1 "$T/stderr")"
        continue
    fi
    $CHECK added "$f" "$T/$n" "upstream $n"
    inject "$T/$n" >"$T/$n.again"
    check "upstream $n: a second inject changes no byte" cmp -s "$T/$n" "$T/$n.again"
    expect_eq "upstream $n: every pod template has the initContainer preflight first" \
        "$(python3 - "$T/$n" <<'PY'
import sys, yaml
sys.path.insert(0, sys.argv[0] and "")
def specs(n):
    if isinstance(n, dict):
        if isinstance(n.get("containers"), list): yield n
        for v in n.values(): yield from specs(v)
    elif isinstance(n, list):
        for v in n: yield from specs(v)
bad = []
for d in yaml.safe_load_all(open(sys.argv[1])):
    for s in specs(d):
        if s.get("initContainers", [{}])[0].get("name") != "preflight" and \
                not (d["kind"] == "MPIJob" and s["containers"][0]["name"].endswith("launcher")):
            bad.append(s["containers"][0]["name"])
print(bad or "ok")
PY
)" "ok"
    if [ $HAVE_VALIDATE = 1 ]; then
        # a v1alpha1 JobSet is validated as v1alpha2, a ClusterTrainingRuntime as a
        # TrainingRuntime (SOURCES.md): the CRDs in tests/k8s/crds serve those
        sed -e 's|^apiVersion: jobset.x-k8s.io/v1alpha1$|apiVersion: jobset.x-k8s.io/v1alpha2|' \
            -e 's|^kind: ClusterTrainingRuntime$|kind: TrainingRuntime|' "$f" >"$T/v0-$n"
        sed -e 's|^apiVersion: jobset.x-k8s.io/v1alpha1$|apiVersion: jobset.x-k8s.io/v1alpha2|' \
            -e 's|^kind: ClusterTrainingRuntime$|kind: TrainingRuntime|' "$T/$n" >"$T/v-$n"
        no_new_errors "upstream $n" "$T/v0-$n" "$T/v-$n"
    else
        skip "upstream $n injected: schemas" "$TOOLS_WHY"
    fi
done
if [ $HAVE_VALIDATE = 1 ]; then
    for n in indexed-job jobset leaderworkerset mpijob pytorchjob statefulset trainjob volcano-job; do
        if $VALIDATE "$T/$n.injected.yaml" >"$T/val" 2>&1; then
            ok "manifests/$n.yaml stripped and injected: valid against the API schemas and CRDs"
        else
            notok "manifests/$n.yaml stripped and injected: schemas" "$(grep '^error' "$T/val" | head -3 | tr '\n' '|')"
        fi
    done
fi

# ---- kubectl get -o yaml | preflight inject (stdin), and -o json
G=$FIX/inject/kubectl-get-job.yaml
"$PREFLIGHT" inject <"$G" >"$T/get.yaml" 2>"$T/get.err"
expect_eq "kubectl get -o yaml through stdin: exit 0" "$?" "0"
$CHECK server "$G" "$T/get.yaml" "kubectl get -o yaml"
inject "$T/get.yaml" >"$T/get-again.yaml"
check "kubectl get -o yaml: a second inject changes no byte" cmp -s "$T/get.yaml" "$T/get-again.yaml"
expect_eq "kubectl get -o yaml: the gate, the Job's failure policy; the subdomain and restartPolicy kept" \
    "$(yq "$T/get.yaml" '[d["spec"]["template"]["spec"]["initContainers"][0]["name"], len(d["spec"]["podFailurePolicy"]["rules"]), d["spec"]["template"]["spec"]["subdomain"], d["spec"]["template"]["spec"]["restartPolicy"], [e.get("value") for e in d["spec"]["template"]["spec"]["initContainers"][0]["env"] if e["name"] == "PREFLIGHT_WORLD_SIZE"], d["spec"]["template"]["spec"]["initContainers"][0]["resources"]]')" \
    '["preflight", 4, "trainer", "Never", ["2"], {"limits": {"nvidia.com/gpu": "8"}}]'
if [ $HAVE_VALIDATE = 1 ]; then
    no_new_errors "kubectl get -o yaml" "$G" "$T/get.yaml"
fi
python3 -c 'import json, sys, yaml; json.dump(yaml.safe_load(open(sys.argv[1])), open(sys.argv[2], "w"), indent=4)' "$G" "$T/get.json"
inject <"$T/get.json" >"$T/get-out.json"
expect_eq "kubectl get -o json: the output is still JSON, with the gate" \
    "$(python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(d["spec"]["template"]["spec"]["initContainers"][0]["name"], sorted(v["name"] for v in d["spec"]["template"]["spec"]["volumes"]))' "$T/get-out.json" 2>&1)" \
    "preflight ['podinfo', 'preflight-config', 'preflight-sa', 'preflight-verdict']"
inject "$T/get-out.json" >"$T/get-again.json"
check "kubectl get -o json: a second inject changes no byte" cmp -s "$T/get-out.json" "$T/get-again.json"

# ---- a List (kubectl get jobs -o yaml), several documents, -f
python3 - "$G" "$T/list.yaml" <<'PY'
import copy, sys, yaml
j = yaml.safe_load(open(sys.argv[1]))
k = copy.deepcopy(j); k["metadata"]["name"] = "second"; k["spec"]["completions"] = 3
yaml.safe_dump({"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""},
                "items": [j, k]}, open(sys.argv[2], "w"), sort_keys=False)
PY
inject -f "$T/list.yaml" >"$T/list-out.yaml"
expect_eq "a List: every item gated, each with its own world size" \
    "$(yq "$T/list-out.yaml" '[[e.get("value") for e in i["spec"]["template"]["spec"]["initContainers"][0]["env"] if e["name"] == "PREFLIGHT_WORLD_SIZE"] for i in d["items"]]')" \
    '[["2"], ["3"]]'
{ cat "$M/service.yaml"; echo ---; cat "$M/configmap.yaml"; echo ---; cat "$T/indexed-job.stripped.yaml"; } >"$T/stream.yaml"
"$PREFLIGHT" inject "$T/stream.yaml" >"$T/stream-out.yaml" 2>"$T/stream.err"
cat "$M/service.yaml" "$M/configmap.yaml" >"$T/stream.yaml.cat"
expect_eq "a stream of documents: the Service and ConfigMap passed, the Job gated" \
    "$(grep -c '^preflight: inject: 1 pod template gated, 0 already gated, 2 objects passed through' "$T/stream.err")" "1"

# ---- --watch: the native sidecar of `preflight watch`, sharing preflight-verdict
inject --watch "$T/jobset.injected.yaml" >"$T/watch.yaml"
expect_eq "--watch on a gated JobSet: preflight-watch after preflight, restartPolicy Always, the shared emptyDir" \
    "$(yq "$T/watch.yaml" '[[c["name"] for c in d["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["initContainers"]], d["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["initContainers"][1]["restartPolicy"], [m["mountPath"] for m in d["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["initContainers"][1]["volumeMounts"] if m["name"] == "preflight-verdict"]]')" \
    '[["preflight", "preflight-watch"], "Always", ["/run/preflight"]]'
expect_eq "--watch: the trainer's NCCL log goes to the shared folder, one file a process" \
    "$(yq "$T/watch.yaml" '{e["name"]: e["value"] for e in d["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"][0].get("env", []) if e["name"].startswith("NCCL_DEBUG")}')" \
    '{"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET", "NCCL_DEBUG_FILE": "/run/preflight/nccl.%h.%p.log"}'
expect_eq "--watch: the sidecar names its pod by uid (the Event's involvedObject.uid, which kubectl describe pod matches)" \
    "$(yq "$T/watch.yaml" '[e["valueFrom"]["fieldRef"]["fieldPath"] for e in d["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["initContainers"][1]["env"] if e["name"] == "POD_UID"]')" \
    '["metadata.uid"]'
inject --watch "$T/watch.yaml" >"$T/watch-again.yaml"
check "--watch: a second run changes no byte" cmp -s "$T/watch.yaml" "$T/watch-again.yaml"
expect_eq "without --watch: no sidecar" "$(grep -c 'preflight-watch' "$T/jobset.injected.yaml")" "0"
inject --watch "$T/indexed-job.stripped.yaml" >"$T/watch-job.yaml"
expect_eq "--watch on an ungated Job: both added, the gate first" \
    "$(yq "$T/watch-job.yaml" '[c["name"] for c in d["spec"]["template"]["spec"]["initContainers"]]')" \
    '["preflight", "preflight-watch"]'
inject --image registry.example.com/preflight:9.9 "$T/indexed-job.stripped.yaml" >"$T/image.yaml"
expect_eq "--image names the image" \
    "$(yq "$T/image.yaml" 'd["spec"]["template"]["spec"]["initContainers"][0]["image"]')" \
    "registry.example.com/preflight:9.9"

# ---- refusals: exit 1, the reason, nothing on stdout
refuse() { # NAME TEXT (the input on stdin)
    "$PREFLIGHT" inject >"$T/r.out" 2>"$T/r.err"
    local rc=$?
    if [ $rc = 1 ] && [ ! -s "$T/r.out" ] && grep -qF -- "$2" "$T/r.err"; then
        ok "refused: $1 ($(head -c 160 "$T/r.err" | tr '\n' ' ')...)"
    else
        notok "refused: $1" "exit $rc, $(wc -c <"$T/r.out") bytes out, stderr: $(head -c 300 "$T/r.err")"
    fi
}
refuse "a Deployment" "Deployment's pods restart for ever" <<'EOF'
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: nginx}]
EOF
refuse "a TrainJob without its runtime" "a TrainJob has no pod template" <<'EOF'
apiVersion: trainer.kubeflow.org/v1alpha1
kind: TrainJob
metadata: {name: t}
spec:
  runtimeRef: {name: torch-distributed}
EOF
refuse "a Job that is not Indexed" "completionMode is NonIndexed (the default), not Indexed" <<'EOF'
apiVersion: batch/v1
kind: Job
metadata: {name: j}
spec:
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: busybox}]
EOF
refuse "an unknown kind" "unknown kind RayJob of ray.io/v1" <<'EOF'
apiVersion: ray.io/v1
kind: RayJob
metadata: {name: r}
EOF
refuse "a JobSet without a pod template" "no pod template at spec.replicatedJobs[0].template.spec.template" <<'EOF'
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata: {name: js}
spec:
  replicatedJobs:
    - name: w
      template:
        spec: {completions: 2}
EOF
refuse "a pod spec behind an alias" "is an alias" <<'EOF'
apiVersion: v1
kind: ConfigMap
metadata: {name: shared}
data: {x: &pod {containers: [{name: c, image: i}]}}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: s}
spec:
  serviceName: s
  template:
    spec: *pod
EOF
refuse "not YAML" "not YAML" <<'EOF'
apiVersion: batch/v1
kind: Job
metadata: {name: [
EOF
refuse "a bare Pod" "a bare Pod has no launcher" <<'EOF'
apiVersion: v1
kind: Pod
metadata: {name: p}
spec: {containers: [{name: c, image: i}]}
EOF
refuse "a Deployment in a List among Jobs: nothing written" "item 2 (Deployment web)" <<'EOF'
apiVersion: v1
kind: List
items:
- apiVersion: batch/v1
  kind: Job
  metadata: {name: j}
  spec:
    completionMode: Indexed
    completions: 2
    template:
      spec:
        restartPolicy: Never
        containers: [{name: c, image: i}]
- apiVersion: apps/v1
  kind: Deployment
  metadata: {name: web}
  spec: {}
EOF
refuse "two documents without --- between them" "the key apiVersion appears twice" <"$T/stream.yaml.cat"
"$PREFLIGHT" inject "$T/no-such-file.yaml" >/dev/null 2>"$T/nf.err"
expect_eq "a missing file: exit 2 with its name" "$?:$(grep -c 'no-such-file.yaml: No such file' "$T/nf.err")" "2:1"
"$PREFLIGHT" check --watch >/dev/null 2>"$T/opt.err"
expect_eq "--watch on another command: a usage error" "$?:$(grep -c "is an option of 'preflight inject'" "$T/opt.err")" "2:1"

# ---- the hints: what a launcher does not create
"$PREFLIGHT" inject "$T/mpijob.stripped.yaml" >/dev/null 2>"$T/mpi.err"
expect_eq "MPIJob: the hint names the rank-0 Service" "$(grep -c 'apply the headless Service trainer-rank0' "$T/mpi.err")" "1"
python3 - "$FIX/inject/kubectl-get-job.yaml" "$T/nosub.yaml" <<'PY'
import sys
t = open(sys.argv[1]).read().replace("      subdomain: trainer\n", "")
open(sys.argv[2], "w").write(t)
PY
"$PREFLIGHT" inject "$T/nosub.yaml" >"$T/nosub-out.yaml" 2>"$T/nosub.err"
expect_eq "a Job without a subdomain: subdomain added, the Service it needs named" \
    "$(yq "$T/nosub-out.yaml" 'd["spec"]["template"]["spec"]["subdomain"]'):$(grep -c 'a headless Service of that name' "$T/nosub.err")" "trainer:1"
