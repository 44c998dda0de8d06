#!/usr/bin/env bash
# The JobSet failure recipe of manifests/jobset.yaml, and Kueue's waitForPodsReady over it
# (docs/scheduling.md), run end to end by the real JobSet and Kueue controllers
# (tests/k8s/controllers: JobSet v0.11.1 and Kueue v0.17.1 from their Go modules, their CRDs
# and admission webhooks of the same releases) over the real Job controller and scheduler
# (tests/k8s/cluster: Kubernetes v1.37.2). No kubelet runs here: the test node agent plays it
# for the pods bound to its fake Nodes (8 nvidia.com/gpu each), running a command in place of
# the preflight initContainer and writing its exit code into status.initContainerStatuses.
# Each scenario in its own namespace on its own pool of nodes, at once; the JobSet is
# manifests/jobset.yaml as is (2 Jobs x 2 pods) but its namespace and a node selector:
#   spec   pod trainer-workers-0-1 exits 3: the JobSet fails at once (FailJobSet rule)
#   node   pod trainer-workers-1-0 exits 4 once and its node gets preflight's taint: the
#          JobSet restarts the gang once, the scheduler keeps the retry off that node, and
#          the JobSet completes
#   flaky  pod trainer-workers-1-1 exits 5 once (a peer fault), then passes: the JobSet
#          restarts the gang once and completes
#   pend   4 pods of 8 GPUs on 3 nodes: one never schedules, the others exit 5 after T = 3 s;
#          the JobSet restarts maxRestarts (3) times and fails within the bound
#          docs/scheduling.md states, leaving no pod Pending or Running
#   kueue  the same JobSet queued in Kueue (ClusterQueue of 32 GPUs, waitForPodsReady
#          timeout 20 s, requeuing backoffLimitCount 1) on 3 nodes: the started pods wait
#          (their rendezvous longer than the timeout); Kueue evicts the workload at the
#          timeout, releasing its quota, requeues it once, then deactivates it
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/k8s/cluster.sh
. "$PREFLIGHT_SRC/tests/k8s/cluster.sh"
trap 'k8s_down; rm -rf "$T"' EXIT
if ! k8s_up; then k8s_unavailable "k8s JobSet and Kueue"; exit 0; fi
KTIMEOUT=20
if ! k8s_controllers jobset; then k8s_unavailable "k8s JobSet and Kueue controllers"; exit 0; fi
kueue_ok=1
if ! k8s_controllers kueue "waitForPodsReady:
  timeout: ${KTIMEOUT}s
  requeuingStrategy: {timestamp: Eviction, backoffLimitCount: 1, backoffBaseSeconds: 1, backoffMaxSeconds: 2}"; then
    k8s_unavailable "k8s Kueue controller"
    kueue_ok=0
fi
M=$PREFLIGHT_SRC/manifests
k() { "$KUBECTL" "$@"; }
export KUBECTL T
mkdir -p "$T/state"

# jobset NS POOL [QUEUE]: manifests/jobset.yaml as is but its namespace, a nodeSelector for
# the scenario's pool and, with QUEUE, Kueue's queue-name label (as its comment says)
jobset() {
    python3 - "$M/jobset.yaml" "$@" <<'PY'
import json, sys, yaml
d = next(x for x in yaml.safe_load_all(open(sys.argv[1])) if x and x["kind"] == "JobSet")
ns, pool = sys.argv[2], sys.argv[3]
d["metadata"]["namespace"] = ns
if len(sys.argv) > 4:
    d["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] = sys.argv[4]
for r in d["spec"]["replicatedJobs"]:
    r["template"]["spec"]["template"]["spec"]["nodeSelector"] = {"pool": pool}
print(json.dumps(d))
PY
}
setup_ns() {
    k create namespace "$1" >/dev/null
    k create serviceaccount preflight -n "$1" >/dev/null
    for f in configmap nccl-env secret; do k apply -n "$1" -f "$M/$f.yaml" >/dev/null; done
}
nodes() { local p=$1 n=$2 i out=; for ((i = 0; i < n; i++)); do out+="${out:+,}$p-$i"; done; echo "$out"; }

# the command in place of preflight, per scenario (env: the pod's; pod names are
# <jobset>-<replicatedJob>-<job index>-<completion index>-<suffix>)
cat >"$T/spec.sh" <<'EOF'
case $POD_NAME in trainer-workers-0-1-*)
    echo "spec: env.required/missing PREFLIGHT_TOKEN" >"$PF_TERMINATION_LOG"; exit 3 ;;
esac
sleep 2; exit 0
EOF
cat >"$T/node.sh" <<'EOF'
case $POD_NAME in trainer-workers-1-0-*)
    if mkdir "$T/state/node" 2>/dev/null; then
        echo "$NODE_NAME" >"$T/state/badnode"
        "$KUBECTL" taint node "$NODE_NAME" preflight.dev/unfit=rdma.verbs:NoSchedule >/dev/null
        echo "node: rdma.verbs/no-device" >"$PF_TERMINATION_LOG"; exit 4
    fi
    echo "$NODE_NAME" >"$T/state/retrynode" ;;
esac
exit 0
EOF
cat >"$T/flaky.sh" <<'EOF'
case $POD_NAME in trainer-workers-1-1-*)
    if mkdir "$T/state/flaky" 2>/dev/null; then echo "peer: rendezvous/unreachable rank 0" >"$PF_TERMINATION_LOG"; exit 5; fi ;;
esac
exit 0
EOF
cat >"$T/pend.sh" <<'EOF'
sleep 3; echo "peer: rendezvous/missing-ranks 3" >"$PF_TERMINATION_LOG"; exit 5
EOF
cat >"$T/kueue.sh" <<'EOF'
sleep 300; exit 5
EOF
scen="spec node flaky pend"
[ $kueue_ok = 1 ] && scen+=" kueue"
declare -A start
for s in $scen; do setup_ns "j-$s"; done
for a in "spec 4" "node 5" "flaky 4" "pend 3" "kueue 3"; do
    read -r s n <<<"$a"
    [[ " $scen " == *" $s "* ]] || continue
    if ! k8s_agent "$s" "$(nodes "$s" "$n")" "sh $T/$s.sh" --labels "pool=$s" --main-exit 0; then
        notok "jobset: the node agent for $s serves its $n Nodes" "$(tail -2 "$T/agent-$s.log" | tr '\n' ' ')"
        exit 0
    fi
done
if [ $kueue_ok = 1 ]; then
    k apply -f - >"$T/kueue-objs.log" 2>&1 <<'EOF' || kueue_ok=0
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: gpu}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: gpus}
spec:
  namespaceSelector: {}
  resourceGroups:
    - coveredResources: [nvidia.com/gpu]
      flavors:
        - name: gpu
          resources: [{name: nvidia.com/gpu, nominalQuota: 32}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: team-a, namespace: j-kueue}
spec: {clusterQueue: gpus}
EOF
    check "kueue: ResourceFlavor, ClusterQueue and LocalQueue accepted through Kueue's webhooks" test $kueue_ok = 1 ||
        cat "$T/kueue-objs.log"
fi
for s in $scen; do
    if [ "$s" = kueue ]; then jobset "j-$s" "$s" team-a; else jobset "j-$s" "$s"; fi >"$T/js-$s.json"
    start[$s]=$(date +%s)
    k create -f "$T/js-$s.json" -o jsonpath='{.spec.suspend}' >"$T/create-$s.log" 2>&1 ||
        notok "jobset $s: created" "$(cat "$T/create-$s.log")"
done
[ $kueue_ok = 1 ] && expect_eq "kueue: the queued JobSet as stored at creation: suspended by Kueue's JobSet webhook" \
    "$(cat "$T/create-kueue.log")" "true"

# jsstate NS: "Completed|Failed <reason> | <message> | <restarts>" or nothing
jsstate() {
    k get jobset trainer -n "$1" -o json 2>/dev/null | python3 -c '
import json, sys
j = json.load(sys.stdin)
for c in j["status"].get("conditions", []):
    if c["type"] in ("Completed", "Failed") and c["status"] == "True":
        print(c["type"], c.get("reason", ""), "|", c.get("message", ""), "|", j["status"].get("restarts", 0)); break
'
}
done_() { [ -n "$(jsstate "$1")" ]; }
# wlstate: the Kueue workload's "active <bool> evicted <reason> requeues <n>"
wlstate() {
    k get workloads -n j-kueue -o json 2>/dev/null | python3 -c '
import json, sys
items = json.load(sys.stdin)["items"]
for w in items:
    ev = next((c.get("reason", "") for c in w["status"].get("conditions", []) if c["type"] == "Evicted" and c["status"] == "True"), "-")
    print("active", str(w["spec"].get("active", True)).lower(), "evicted", ev,
          "requeues", w["status"].get("requeueState", {}).get("count", 0))
'
}
inactive() { wlstate | grep -q '^active false'; }
declare -A took
for s in $scen; do
    if [ "$s" = kueue ]; then
        if k8s_wait 240 inactive; then took[$s]=$(( $(date +%s) - start[$s] )); else took[$s]=timeout; fi
        echo "# kueue: workload $(wlstate) after ${took[$s]} s"
        continue
    fi
    if k8s_wait 240 done_ "j-$s"; then took[$s]=$(( $(date +%s) - start[$s] )); else took[$s]=timeout; fi
    echo "# $s: $(jsstate "j-$s") after ${took[$s]} s"
done

# live NS: the pods neither Failed nor Succeeded (Pending or Running: holding a node's GPUs)
live() { k get pods -n "$1" -o jsonpath='{range .items[?(@.status.phase!="Failed")]}{.metadata.name} {.status.phase}{"\n"}{end}' | grep -v ' Succeeded$'; }
gone() { [ -z "$(live "$1")" ]; }

st=$(jsstate j-spec)
expect_eq "jobset spec: exit 3 of one pod fails the whole JobSet at once (rule stopOnSpecFault, no restart)" \
    "$(echo "$st" | cut -d' ' -f1-2; echo "$st" | cut -d'|' -f3)" "Failed FailJobSetFailurePolicyAction
 0"
check "jobset spec: the condition names the failed Job: $(echo "$st" | cut -d'|' -f2)" \
    grep -q "FailJobSet failure policy action (first failed job: trainer-workers-0)" <<<"$st"
expect_eq "jobset spec: that Job failed by its podFailurePolicy (the reason rule stopOnSpecFault matches)" \
    "$(k get job trainer-workers-0 -n j-spec -o jsonpath='{.status.conditions[?(@.type=="Failed")].reason}')" "PodFailurePolicy"
check "jobset spec: within 60 s (took ${took[spec]} s)" test "${took[spec]}" != timeout -a "${took[spec]}" -le 60 2>/dev/null
check "jobset spec: no pod left Pending or Running" k8s_wait 60 gone j-spec

st=$(jsstate j-node)
expect_eq "jobset node: exit 4 of one pod restarts the gang once (rule restartOnNodeOrPeerFault) and the JobSet completes" \
    "$(echo "$st" | cut -d' ' -f1; echo "$st" | cut -d'|' -f3)" "Completed
 1"
bad=$(cat "$T/state/badnode" 2>/dev/null)
again=$(cat "$T/state/retrynode" 2>/dev/null)
check "jobset node: the restarted pod ran on another node ($again) than the tainted one ($bad): the scheduler kept it off" \
    test -n "$bad" -a -n "$again" -a "$bad" != "$again"

st=$(jsstate j-flaky)
expect_eq "jobset flaky peer: exit 5 of one pod restarts the gang once (rule restartOnNodeOrPeerFault) and the JobSet completes" \
    "$(echo "$st" | cut -d' ' -f1; echo "$st" | cut -d'|' -f3)" "Completed
 1"

st=$(jsstate j-pend)
expect_eq "jobset pending pod: the JobSet fails after maxRestarts (3) restarts of the gang (ReachedMaxRestarts)" \
    "$(echo "$st" | cut -d' ' -f1-2; echo "$st" | cut -d'|' -f3)" "Failed ReachedMaxRestarts
 3"
# the bound of docs/scheduling.md: (maxRestarts + 1) x (T + pod start); T = 3 s here, pod start
# and the restart's Job deletion and creation well under 10 s on this control plane:
# 4 x 13 = 52 s, and 30 s of controller slack
check "jobset pending pod: ended within (3 + 1) x (T + 10 s) + 30 s = 82 s (took ${took[pend]} s)" \
    test "${took[pend]}" != timeout -a "${took[pend]}" -le 82 2>/dev/null
check "jobset pending pod: the JobSet controller deleted its Jobs' pods: none left Pending or Running (no GPUs held)" \
    k8s_wait 60 gone j-pend
gone j-pend || echo "# left: $(live j-pend | tr '\n' ';')"
check "jobset pending pod: the scheduler said why it could not place it (Insufficient nvidia.com/gpu)" \
    grep -q "Insufficient nvidia.com/gpu" <(k get events -n j-pend -o jsonpath='{range .items[*]}{.reason} {.message}{"\n"}{end}')

if [ $kueue_ok = 1 ]; then
    # KIND REASON COUNT MESSAGE (the same event repeated is one Event with a count)
    ev=$(k get events -n j-kueue -o jsonpath='{range .items[*]}{.involvedObject.kind} {.reason} {.count} {.message}{"\n"}{end}')
    nev() { awk -v r="$1" '$1 == "Workload" && $2 == r { n += ($3 == "" ? 1 : $3) } END { print n + 0 }' <<<"$ev"; }
    echo "$ev" | grep -i 'workload' | sed 's/^/# /' | head -20
    check "kueue: the JobSet was admitted as one workload (quota of the whole gang reserved)" \
        grep -q "^Workload QuotaReserved\|^Workload Admitted" <<<"$ev"
    check "kueue: the workload was evicted at waitForPodsReady's timeout (PodsReadyTimeout)" \
        grep -q "PodsReadyTimeout\|exceeded the PodsReady timeout" <<<"$ev"
    expect_eq "kueue: evicted once at the timeout and requeued, evicted again and deactivated (backoffLimitCount 1)" \
        "$(nev EvictedDueToPodsReadyTimeout) $(nev QuotaReserved) $(wlstate | cut -d' ' -f1-4)" \
        "1 2 active false evicted DeactivatedDueToRequeuingLimitExceeded"
    # the bound of docs/scheduling.md: (backoffLimitCount + 1) x (timeout + pod start) plus
    # the requeue backoff: 2 x (20 + 10) + 2 = 62 s, and 30 s of controller slack
    check "kueue: deactivated within (1 + 1) x (${KTIMEOUT} s + 10 s) + 32 s = 92 s (took ${took[kueue]} s)" \
        test "${took[kueue]}" != timeout -a "${took[kueue]}" -le 92 2>/dev/null
    check "kueue: the JobSet is left suspended, none of its pods Pending or Running" \
        k8s_wait 60 eval 'gone j-kueue && [ "$(k get jobset trainer -n j-kueue -o jsonpath={.spec.suspend})" = true ]'
    cqres() { k get clusterqueue gpus -o jsonpath='{.status.reservingWorkloads} {.status.admittedWorkloads} {.status.flavorsReservation[0].resources[0].total}'; }
    released() { [ "$(cqres)" = "0 0 0" ]; }
    check "kueue: its quota released (ClusterQueue: 0 reserving, 0 admitted, 0 GPUs reserved; was $(cqres))" \
        k8s_wait 30 released
fi
