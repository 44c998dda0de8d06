#!/usr/bin/env bash
# The Indexed Job failure recipe of manifests/indexed-job.yaml (docs/scheduling.md) run end
# to end by the real Job controller and the real scheduler (tests/k8s/cluster: Kubernetes
# v1.37.2 from its Go modules). No kubelet runs here: a test node agent plays it for the pods
# bound to its fake Nodes (8 nvidia.com/gpu each), running a command in place of the
# preflight initContainer with the env the pod spec gives it and writing that command's exit
# code into status.initContainerStatuses, as the kubelet would for preflight's own. Four
# scenarios, each in its own namespace on its own pool of nodes, at once:
#   spec   one rank exits 3: the Job fails at once (reason PodFailurePolicy)
#   node   one rank exits 4 and its node gets preflight's taint: the rank is retried on
#          another node by the scheduler, the Job completes
#   flaky  every rank exits 5 once, then passes: retried, the Job completes
#   pend   4 pods of 8 GPUs on 3 nodes: one never schedules, the others exit 5 after T = 3 s;
#          the Job fails with MaxFailedIndexesExceeded within the bound docs/scheduling.md
#          states, the Pending pod deleted
# The JobSet and Kueue recipes are run by their own controllers in test_k8s_jobset.sh.
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/k8s/cluster.sh
. "$PREFLIGHT_SRC/tests/k8s/cluster.sh"
trap 'k8s_down; rm -rf "$T"' EXIT
if ! k8s_up; then k8s_unavailable "k8s recipes"; exit 0; fi
M=$PREFLIGHT_SRC/manifests
k() { "$KUBECTL" "$@"; }
export KUBECTL T
mkdir -p "$T/state"

# job NS POOL N: manifests/indexed-job.yaml as is but its name, namespace, size and a
# nodeSelector for the scenario's pool
job() {
    python3 - "$M/indexed-job.yaml" "$1" "$2" "$3" <<'PY'
import json, sys, yaml
d = next(x for x in yaml.safe_load_all(open(sys.argv[1])) if x and x["kind"] == "Job")
ns, pool, n = sys.argv[2], sys.argv[3], int(sys.argv[4])
d["metadata"]["namespace"] = ns
d["spec"]["completions"] = d["spec"]["parallelism"] = n
p = d["spec"]["template"]["spec"]
p["nodeSelector"] = {"pool": pool}
for c in p["initContainers"]:
    for e in c.get("env", []):
        if e["name"] == "PREFLIGHT_WORLD_SIZE":
            e["value"] = str(n)
print(json.dumps(d))
PY
}
setup_ns() {
    k create namespace "$1" >/dev/null
    k create serviceaccount preflight -n "$1" >/dev/null
    for f in configmap nccl-env secret; do k apply -n "$1" -f "$M/$f.yaml" >/dev/null; done
}
nodes() { local p=$1 n=$2 i out=; for ((i = 0; i < n; i++)); do out+="${out:+,}$p-$i"; done; echo "$out"; }

# the command in place of preflight, per scenario (env: the pod's)
cat >"$T/spec.sh" <<'EOF'
if [ "$JOB_COMPLETION_INDEX" = 1 ]; then echo "spec: env.required/missing PREFLIGHT_TOKEN" >"$PF_TERMINATION_LOG"; exit 3; fi
sleep 2; exit 0
EOF
cat >"$T/node.sh" <<'EOF'
if [ "$JOB_COMPLETION_INDEX" = 2 ] && mkdir "$T/state/node-2" 2>/dev/null; then
    echo "$NODE_NAME" >"$T/state/badnode"
    # what preflight's report.markNode=taint writes (test_k8s_rbac.sh: with its own rights)
    "$KUBECTL" taint node "$NODE_NAME" preflight.dev/unfit=rdma.verbs:NoSchedule >/dev/null
    echo "node: rdma.verbs/no-device" >"$PF_TERMINATION_LOG"; exit 4
fi
exit 0
EOF
cat >"$T/flaky.sh" <<'EOF'
if mkdir "$T/state/flaky-$JOB_COMPLETION_INDEX" 2>/dev/null; then echo "peer: rank 3 unreachable" >"$PF_TERMINATION_LOG"; exit 5; fi
exit 0
EOF
cat >"$T/pend.sh" <<'EOF'
sleep 3; echo "peer: rendezvous/missing-ranks 3" >"$PF_TERMINATION_LOG"; exit 5
EOF
declare -A start
for s in spec node flaky pend; do setup_ns "r-$s"; done
for a in "spec 4" "node 5" "flaky 4" "pend 3"; do
    read -r s n <<<"$a"
    if ! k8s_agent "$s" "$(nodes "$s" "$n")" "sh $T/$s.sh" --labels "pool=$s" --main-exit 0; then
        notok "recipes: the node agent for $s serves its $n Nodes" "$(tail -2 "$T/agent-$s.log" | tr '\n' ' ')"
        exit 0
    fi
done
for s in spec node flaky pend; do
    job "r-$s" "$s" 4 >"$T/job-$s.json"
    start[$s]=$(date +%s)
    k create -f "$T/job-$s.json" >/dev/null
done

# jstate NS: "Complete", "Failed <reason>" or nothing
jstate() {
    k get job trainer -n "$1" -o json 2>/dev/null | python3 -c '
import json, sys
j = json.load(sys.stdin)
for c in j["status"].get("conditions", []):
    if c["type"] in ("Complete", "Failed") and c["status"] == "True":
        print(c["type"], c.get("reason", ""), "|", c.get("message", ""), "|", j["status"].get("failed", 0), j["status"].get("succeeded", 0)); break
'
}
done_() { [ -n "$(jstate "$1")" ]; }
declare -A took
for s in spec node flaky pend; do
    if k8s_wait 240 done_ "r-$s"; then took[$s]=$(( $(date +%s) - start[$s] )); else took[$s]=timeout; fi
    echo "# $s: $(jstate "r-$s") after ${took[$s]} s"
done

st=$(jstate r-spec)
expect_eq "recipe spec: exit 3 of one rank fails the Job at once (FailJob, reason PodFailurePolicy)" \
    "$(echo "$st" | cut -d' ' -f1-2)" "Failed PodFailurePolicy"
check "recipe spec: the condition names the container and code: $(echo "$st" | cut -d'|' -f2)" \
    grep -q "Container preflight for pod r-spec/trainer-1-.* failed with exit code 3 matching FailJob rule" <<<"$st"
check "recipe spec: within 60 s (took ${took[spec]} s)" test "${took[spec]}" != timeout -a "${took[spec]}" -le 60 2>/dev/null
expect_eq "recipe spec: the termination message as the API server stores it" \
    "$(k get pods -n r-spec -l batch.kubernetes.io/job-completion-index=1 -o jsonpath='{.items[0].status.initContainerStatuses[0].state.terminated.exitCode} {.items[0].status.initContainerStatuses[0].state.terminated.message}')" \
    "3 spec: env.required/missing PREFLIGHT_TOKEN"

st=$(jstate r-node)
expect_eq "recipe node: exit 4 of one rank is retried and the Job completes (1 failed pod)" \
    "$(echo "$st" | cut -d' ' -f1; echo "$st" | cut -d'|' -f3)" "Complete
 1 4"
bad=$(cat "$T/state/badnode" 2>/dev/null)
again=$(k get pods -n r-node -l batch.kubernetes.io/job-completion-index=2 \
    -o jsonpath='{range .items[?(@.status.phase=="Succeeded")]}{.spec.nodeName}{end}')
check "recipe node: the retry ran on another node ($again) than the tainted one ($bad): the scheduler kept it off" \
    test -n "$bad" -a -n "$again" -a "$bad" != "$again"

st=$(jstate r-flaky)
expect_eq "recipe flaky peer: every rank's exit 5 is retried once and the Job completes (4 failed pods)" \
    "$(echo "$st" | cut -d' ' -f1; echo "$st" | cut -d'|' -f3)" "Complete
 4 4"

st=$(jstate r-pend)
expect_eq "recipe pending pod: the Job fails when the others' peer retries run out (MaxFailedIndexesExceeded)" \
    "$(echo "$st" | cut -d' ' -f1-2)" "Failed MaxFailedIndexesExceeded"
# the bound of docs/scheduling.md: 3 x (T + pod start) + 30 s of per-index backoff; T = 3 s
# here, pod start well under 10 s on this control plane: 3 x 13 + 30 = 69 s, and 30 s of
# controller resync slack
check "recipe pending pod: ended within 3 x (T + 10 s) + 60 s = 99 s (took ${took[pend]} s)" \
    test "${took[pend]}" != timeout -a "${took[pend]}" -le 99 2>/dev/null
# the Job controller deletes the active pods, the Pending one too; the failed pods stay (with
# their exit codes) until the Job goes, and the scheduler counts no terminal pod's requests
live() { k get pods -n r-pend -o jsonpath='{range .items[?(@.status.phase!="Failed")]}{.metadata.name} {.status.phase}{"\n"}{end}'; }
gone() { [ -z "$(live)" ]; }
check "recipe pending pod: no pod left Pending or Running (no GPUs held); $(k get pods -n r-pend --no-headers | wc -l) failed pods kept" k8s_wait 60 gone
[ -z "$(live)" ] || echo "# left: $(live | tr '\n' ';')"
check "recipe pending pod: the scheduler said why it could not place it (Insufficient nvidia.com/gpu)" \
    grep -q "Insufficient nvidia.com/gpu" <(k get events -n r-pend -o jsonpath='{range .items[*]}{.reason} {.message}{"\n"}{end}')
