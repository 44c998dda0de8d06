#!/usr/bin/env bash
# Why a pod is missing, against a real control plane (tests/k8s/cluster: kube-apiserver,
# kube-controller-manager and kube-scheduler of Kubernetes v1.37.2): the Indexed Job of
# manifests/indexed-job.yaml with 3 ranks of 8 nvidia.com/gpu each on 2 fake Nodes of 8. Ranks
# 0 and 1 are created first (parallelism 2) and bound; then parallelism 3 creates rank 2, which
# the real scheduler cannot place. The test node agent runs the real preflight in place of
# each bound pod's initContainer (the env and downward-API files the pod spec gives; all in
# this host's network namespace, so rank 0 is 127.0.0.1 here); rank 0 has a ServiceAccount
# token from the TokenRequest API and the Role of manifests/rbac.yaml with its
# rendezvous.explainMissing rules. At the join deadline rank 0 lists the Job's pods by its own
# labels and reads the scheduler's word on rank 2: the verdict's evidence, the missing-ranks
# finding, the culprit, the termination message the API server stores, and rank 1's verdict
# all say it. A second namespace whose Role lacks the rules: the reason is "unknown" (HTTP
# 403 from the real RBAC authorizer), the verdict otherwise the same.
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/k8s/cluster.sh
. "$PREFLIGHT_SRC/tests/k8s/cluster.sh"
trap 'k8s_down; rm -rf "$T"' EXIT
if ! k8s_up; then k8s_unavailable "k8s missing"; exit 0; fi
M=$PREFLIGHT_SRC/manifests
k() { "$KUBECTL" "$@"; }
SERVER=$(cat "$KDIR/ready")
HOSTPORT=${SERVER#https://}
mkdir -p "$T/out"

# job NS: manifests/indexed-job.yaml with 3 ranks, 2 of them at first, on pool "miss"
job() {
    python3 - "$M/indexed-job.yaml" "$1" <<'PY'
import json, sys, yaml
d = next(x for x in yaml.safe_load_all(open(sys.argv[1])) if x and x["kind"] == "Job")
d["metadata"]["namespace"] = sys.argv[2]
d["spec"]["completions"], d["spec"]["parallelism"] = 3, 2
p = d["spec"]["template"]["spec"]
p["nodeSelector"] = {"pool": "miss"}
for c in p["initContainers"]:
    for e in c.get("env", []):
        if e["name"] == "PREFLIGHT_WORLD_SIZE":
            e["value"] = "3"
print(json.dumps(d))
PY
}
# the Role of manifests/rbac.yaml; with "explain", its rendezvous.explainMissing rules
# uncommented as a user would
setup_ns() {
    k create namespace "$1" >/dev/null
    python3 - "$M/rbac.yaml" "$2" <<'PY' | k apply -n "$1" -f - >/dev/null
import re, sys
text = open(sys.argv[1]).read()
if sys.argv[2] == "explain":
    text = re.sub(r"(?m)^  # with rendezvous\.explainMissing: true.*\n((?:  # .*\n)+)",
                  lambda m: re.sub(r"(?m)^  # ", "  ", m.group(1)), text)
print(text)
PY
    for f in configmap nccl-env secret; do k apply -n "$1" -f "$M/$f.yaml" >/dev/null; done
}
setup_ns miss explain
setup_ns deny plain
expect_eq "the Role with the explainMissing rules may list pods and events" \
    "$(k auth can-i list pods -n miss --as system:serviceaccount:miss:preflight) $(k auth can-i list events -n miss --as system:serviceaccount:miss:preflight)" "yes yes"
expect_eq "the Role without them may not" \
    "$(k auth can-i list pods -n deny --as system:serviceaccount:deny:preflight)" "no"

cat >"$T/config.yaml" <<EOF
rendezvous:
  timeoutSeconds: 25
  explainMissing: true
EOF
# in place of preflight: the real one, rank 0 with the pod's ServiceAccount token and the
# cluster's CA under its root, as the kubelet mounts them (volume preflight-sa)
cat >"$T/pf.sh" <<'EOF'
ns=$POD_NAMESPACE
case $ns in miss) port=29611 ;; *) port=29612 ;; esac
# the first try of each rank only: a later one (the Job's podFailurePolicy counts exit 5 and
# retries) must not overwrite the answer
mkdir "$T/out/$ns-$JOB_COMPLETION_INDEX.first" 2>/dev/null || exit 0
if [ "$JOB_COMPLETION_INDEX" = 0 ]; then
    sa=$PF_POD_ROOT/var/run/secrets/kubernetes.io/serviceaccount
    mkdir -p "$sa"
    "$KUBECTL" create token preflight -n "$ns" --bound-object-kind Pod --bound-object-name "$POD_NAME" \
        --duration 10m >"$sa/token" 2>"$PF_POD_ROOT/token.err"
    cp "$KDIR/ca.crt" "$sa/ca.crt"
    printf '%s' "$ns" >"$sa/namespace"
    export KUBERNETES_SERVICE_HOST=${HOSTPORT%:*} KUBERNETES_SERVICE_PORT=${HOSTPORT##*:}
fi
"$PREFLIGHT" run --root "$PF_POD_ROOT" --config "$T/config.yaml" \
    --verdict "$T/out/$ns-$JOB_COMPLETION_INDEX.yaml" --format yaml \
    --coordinator 127.0.0.1 --port "$port" --timeout 90 --termination-log "$PF_TERMINATION_LOG" \
    >"$T/out/$ns-$JOB_COMPLETION_INDEX.out" 2>&1
rc=$?
touch "$T/out/$ns-$JOB_COMPLETION_INDEX.done"
exit $rc
EOF
export KUBECTL KDIR HOSTPORT T PREFLIGHT
if ! k8s_agent miss "miss-0,miss-1,deny-0,deny-1" "sh $T/pf.sh" --labels "pool=miss"; then
    notok "k8s missing: the node agent serves its Nodes" "$(tail -2 "$T/agent-miss.log" | tr '\n' ' ')"
    exit 0
fi
# 4 Nodes of 8 GPUs for two namespaces: each Job's third pod still finds none once both
# Jobs' first two are bound (4 x 8 GPUs, 4 pods of 8 bound)

bound() { [ "$(k get pods -n "$1" -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | grep -c .)" = 2 ]; }
for ns in miss deny; do
    job "$ns" >"$T/job-$ns.json"
    k create -f "$T/job-$ns.json" >/dev/null
done
for ns in miss deny; do
    check "k8s missing $ns: ranks 0 and 1 are bound to Nodes" k8s_wait 60 bound "$ns"
done
for ns in miss deny; do
    k patch job trainer -n "$ns" --type merge -p '{"spec":{"parallelism":3}}' >/dev/null
done
pending() {
    k get pods -n "$1" -l batch.kubernetes.io/job-completion-index=2 \
        -o jsonpath='{.items[0].status.conditions[?(@.type=="PodScheduled")].reason}' | grep -q Unschedulable
}
for ns in miss deny; do
    check "k8s missing $ns: the real scheduler leaves rank 2 Pending (Unschedulable)" k8s_wait 30 pending "$ns"
done
SCHED=$(k get pods -n miss -l batch.kubernetes.io/job-completion-index=2 \
    -o jsonpath='{.items[0].status.conditions[?(@.type=="PodScheduled")].message}')
POD2=$(k get pods -n miss -l batch.kubernetes.io/job-completion-index=2 -o jsonpath='{.items[0].metadata.name}')
echo "# the scheduler says of $POD2: $SCHED"
check "k8s missing: the scheduler's message names the GPUs ($SCHED)" grep -q "Insufficient nvidia.com/gpu" <<<"$SCHED"

finished() { [ -f "$T/out/$1-0.done" ] && [ -f "$T/out/$1-1.done" ]; }
for ns in miss deny; do
    check "k8s missing $ns: ranks 0 and 1 end" k8s_wait 120 finished "$ns"
done
V=$T/out/miss-0.yaml
expect_eq "k8s missing: rank 0's verdict fails with class peer" \
    "$(yq "$V" "[d['verdict'], d.get('failureClass')]")" '["fail", "peer"]'
expect_eq "k8s missing: evidence absent names rank 2's pod, Pending, Unschedulable" \
    "$(yq "$V" "[(a['rank'], a['pod'], a.get('phase'), a['reason']) for a in check('rendezvous')['evidence'].get('absent', [])]")" \
    "[[2, \"$POD2\", \"Pending\", \"Unschedulable\"]]"
expect_eq "k8s missing: its message is the scheduler's own" \
    "$(yq "$V" "check('rendezvous')['evidence']['absent'][0]['message']")" "$SCHED"
check "k8s missing: the scheduler's FailedScheduling Event is read" \
    grep -q "^FailedScheduling: 0/4 nodes are available" <<<"$(yq "$V" "check('rendezvous')['evidence']['absent'][0].get('lastWarningEvent', '')")"
WANT="pod $POD2 Pending, Unschedulable: ${SCHED:0:60}"
check "k8s missing: the missing-ranks finding says why" \
    grep -qF -- "$WANT" <<<"$(yq "$V" "[f['message'] for f in check('rendezvous')['findings'] if f['code'] == 'missing-ranks']")"
check "k8s missing: the culprit says why" \
    grep -qF -- "$WANT" <<<"$(yq "$V" "[c['reason'] for c in d.get('culprits', []) if c['rank'] == 2]")"
P0=$(yq "$V" "d['pod']['name']")
term() { k get pod "$P0" -n miss -o jsonpath='{.status.initContainerStatuses[0].state.terminated.message}' | grep -qF -- "$WANT"; }
check "k8s missing: the termination message the API server stores for rank 0's pod says why" k8s_wait 20 term
check "k8s missing: rank 1's verdict says why too (rank 0's SUMMARY)" \
    grep -qF -- "$WANT" <<<"$(yq "$T/out/miss-1.yaml" "[f['message'] for f in check('rendezvous')['findings'] if f['code'] == 'missing-ranks']")"

V=$T/out/deny-0.yaml
expect_eq "k8s missing, no list rights: reason unknown" \
    "$(yq "$V" "check('rendezvous')['evidence']['absent'][0]['reason']")" unknown
check "k8s missing, no list rights: the real authorizer's 403 is named" \
    grep -qF "HTTP 403" <<<"$(yq "$V" "check('rendezvous')['evidence']['absent'][0]['message']")"
expect_eq "k8s missing, no list rights: the verdict is the same (fail, peer)" \
    "$(yq "$V" "[d['verdict'], d.get('failureClass')]")" '["fail", "peer"]'
for ns in miss deny; do k delete job trainer -n "$ns" --wait=false >/dev/null 2>&1; done
