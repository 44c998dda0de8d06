#!/usr/bin/env bash
# Every launcher's pods, named as the launcher names them, find their rank, the world size and
# rank 0 by themselves and meet (docs/launchers.md). First without namespaces: `run --dry-run`
# for each launcher's variables and labels, the exit code of each failure class, and the
# termination message. Then real pods (tests/e2e/pods.sh: network and UTS namespaces, a real
# dnsmasq serving the Service's names): a JobSet of 2 replicatedJobs x 2 replicas x 2 pods, an
# MPIJob's workers and launcher, a TrainJob's nodes; every pod must pass with the rank its
# launcher means. No Kubernetes API server runs here: the labels are downward-API files written
# as the kubelet writes them, the variables those the launchers' sources set.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pods.sh"

EMPTY="$T/empty"
mkdir -p "$EMPTY"

# labels DIR KEY=VALUE...: a downward-API labels file (key="value" lines, sorted); podinfo
# folders live under the root prefix ($EMPTY), as every file preflight reads
labels() {
    local d=$1
    shift
    mkdir -p "$d"
    printf '%s\n' "$@" | sort | sed 's/=\(.*\)$/="\1"/' >"$d/labels"
}

# dry NAME HOST [VAR=VALUE...] -- [ARGS...]: `run --dry-run` under hostname HOST (a UTS
# namespace), output in $T/NAME.out, exit code in $T/NAME.rc
dry() {
    local name=$1 host=$2
    shift 2
    local vars=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do vars+=("$1"); shift; done
    [ "${1:-}" = -- ] && shift
    unshare --uts sh -c 'hostname "$0" && shift && exec "$@"' "$host" -- \
        env -i PATH="$PATH" ASAN_OPTIONS="${ASAN_OPTIONS:-}" PREFLIGHT_PODINFO=/none \
        "${vars[@]}" "$PREFLIGHT" run --dry-run --root "$EMPTY" "$@" >"$T/$name.out" 2>"$T/$name.err"
    echo $? >"$T/$name.rc"
}
id_of() { yq "$T/$1.out" "$2"; }

if [ "$(id -u)" -eq 0 ] && command -v unshare >/dev/null; then
    # JobSet: pod 3 of Job 1 of the replicatedJob "workers" (2 replicas, 4 pods a Job)
    labels "$EMPTY/pi-js" jobset.sigs.k8s.io/jobset-name=myjs jobset.sigs.k8s.io/replicatedjob-name=workers \
        jobset.sigs.k8s.io/replicatedjob-replicas=2 jobset.sigs.k8s.io/global-replicas=2 \
        jobset.sigs.k8s.io/job-index=1 jobset.sigs.k8s.io/job-global-index=1
    dry js myjs-workers-1-3 JOB_COMPLETION_INDEX=3 PREFLIGHT_WORLD_SIZE=8 PREFLIGHT_PODINFO=/pi-js
    expect_eq "dry-run jobset: exit 0" "$(cat "$T/js.rc")" 0
    expect_eq "dry-run jobset: rule, rank 1 x 4 + 3, rank 0 in Job 0" \
        "$(id_of js '[d["identity"]["rule"], d["identity"]["rank"], d["identity"]["coordinator"]]')" \
        '["jobset", 7, "myjs-workers-0-0.myjs"]'
    check "dry-run jobset: from names the labels read" \
        grep -q 'label jobset.sigs.k8s.io/job-global-index=1' "$T/js.out"
    # the same pod without its labels: never guessed
    dry js-nolabels myjs-workers-1-3 JOB_COMPLETION_INDEX=3 PREFLIGHT_WORLD_SIZE=8
    expect_eq "dry-run jobset without labels: exit 2" "$(cat "$T/js-nolabels.rc")" 2
    check "dry-run jobset without labels: says what is missing" \
        grep -q 'rank unknown: .*Job 1 of a JobSet.*PREFLIGHT_RANK' "$T/js-nolabels.err"
    # MPIJob worker: not a PyTorchJob pod waiting for myjob-master-0
    labels "$EMPTY/pi-mpi" training.kubeflow.org/operator-name=mpi-operator \
        training.kubeflow.org/job-name=myjob training.kubeflow.org/job-role=worker \
        training.kubeflow.org/replica-index=1
    dry mpi myjob-worker-1 PREFLIGHT_WORLD_SIZE=2 PREFLIGHT_PODINFO=/pi-mpi
    expect_eq "dry-run mpijob worker: rank 1, rank 0 is worker-0" \
        "$(id_of mpi '[d["identity"]["rule"], d["identity"]["rank"], d["identity"]["coordinator"]]')" \
        '["mpijob", 1, "myjob-worker-0.myjob"]'
    labels "$EMPTY/pi-mpil" training.kubeflow.org/operator-name=mpi-operator \
        training.kubeflow.org/job-name=myjob training.kubeflow.org/job-role=launcher
    dry mpil myjob-launcher PREFLIGHT_PODINFO=/pi-mpil
    expect_eq "dry-run mpijob launcher: no rank, exit 0" \
        "$(id_of mpil 'd["identity"]["member"]') $(cat "$T/mpil.rc")" "False 0"
    dry mpi-noworld myjob-worker-1 PREFLIGHT_PODINFO=/pi-mpi
    expect_eq "dry-run mpijob worker without a world size: exit 2" "$(cat "$T/mpi-noworld.rc")" 2
    check "dry-run mpijob worker without a world size: names PREFLIGHT_WORLD_SIZE" \
        grep -q 'world size unknown: MPIJob.*PREFLIGHT_WORLD_SIZE' "$T/mpi-noworld.err"
    # Volcano, Trainer v2, LeaderWorkerSet, PyTorchJob's initContainer
    dry vc vcjob-worker-2 VC_TASK_INDEX=2 VK_TASK_INDEX=2 VC_WORKER_NUM=4 \
        VC_WORKER_HOSTS=vcjob-worker-0.vcjob,vcjob-worker-1.vcjob,vcjob-worker-2.vcjob,vcjob-worker-3.vcjob
    expect_eq "dry-run volcano: rank, world, first host" \
        "$(id_of vc '[d["identity"][k] for k in ("rule", "rank", "worldSize", "coordinator")]')" \
        '["volcano", 2, 4, "vcjob-worker-0.vcjob"]'
    dry tj tj-node-0-1 PET_NNODES=4 PET_NODE_RANK=1 PET_MASTER_ADDR=tj-node-0-0.tj PET_MASTER_PORT=29500 \
        PET_NPROC_PER_NODE=8 JOB_COMPLETION_INDEX=1
    expect_eq "dry-run trainjob: PET_NNODES pods, not processes" \
        "$(id_of tj '[d["identity"][k] for k in ("rule", "rank", "worldSize", "coordinator")]')" \
        '["trainjob", 1, 4, "tj-node-0-0.tj"]'
    dry lws vllm-1-2 LWS_LEADER_ADDRESS=vllm-1.vllm.default LWS_GROUP_SIZE=4 LWS_WORKER_INDEX=2
    expect_eq "dry-run lws: rank 2 of the group, the leader is rank 0" \
        "$(id_of lws '[d["identity"][k] for k in ("rule", "rank", "worldSize", "coordinator")]')" \
        '["lws", 2, 4, "vllm-1.vllm.default"]'
    labels "$EMPTY/pi-pt" training.kubeflow.org/operator-name=pytorchjob-controller \
        training.kubeflow.org/replica-type=worker training.kubeflow.org/replica-index=0
    dry pt bert-worker-0 PREFLIGHT_WORLD_SIZE=3 PREFLIGHT_PODINFO=/pi-pt
    expect_eq "dry-run pytorchjob initContainer: worker-0 is rank 1, rank 0 the master" \
        "$(id_of pt '[d["identity"][k] for k in ("rule", "rank", "coordinator")]')" \
        '["pytorchjob", 1, "bert-master-0"]'
else
    skip "run --dry-run under launchers' hostnames" "needs root and unshare (a UTS namespace)"
fi

# ---- exit code per failure class, and the termination message
mkdir -p "$T/term"
env -i PATH="$PATH" ASAN_OPTIONS="${ASAN_OPTIONS:-}" NCCL_P2P_DISABLE=1 NODE_NAME=gpu-17 \
    "$PREFLIGHT" env --root "$EMPTY" --format yaml >"$T/spec.yaml" 2>/dev/null
echo $? >"$T/spec.rc"
expect_eq "class spec (p2p-disabled): exit 3, failureClass spec" \
    "$(cat "$T/spec.rc") $(yq "$T/spec.yaml" 'd["failureClass"]')" "3 spec"
# node: a fixture node whose ports are down; it also misses device nodes and /dev/shm (spec),
# and spec wins; with those ignored by the policy the node's class is left
printf 'policy:\n  findings: {uverbs-missing: ignore, rdma-cm-missing: ignore, shm-small: ignore}\n' \
    >"$T/only-node.yaml"
for cfg in none only-node; do
    env -i PATH="$PATH" ASAN_OPTIONS="${ASAN_OPTIONS:-}" "$PREFLIGHT" check --root "$FIX/node-ports-bad" \
        $([ $cfg = none ] || echo --config "$T/$cfg.yaml") --format yaml --verdict - \
        >"$T/node-$cfg.yaml" 2>/dev/null
    echo $? >"$T/node-$cfg.rc"
done
expect_eq "classes spec and node failing: spec wins, exit 3" \
    "$(cat "$T/node-none.rc") $(yq "$T/node-none.yaml" 'd["failureClass"]')" "3 spec"
expect_eq "class node (port-down on a fixture node): exit 4, failureClass node" \
    "$(cat "$T/node-only-node.rc") $(yq "$T/node-only-node.yaml" 'd["failureClass"]')" "4 node"
expect_eq "class node: each failing finding carries its class" \
    "$(yq "$T/node-only-node.yaml" 'sorted({f.get("class") for c in d["checks"] for f in c.get("findings") or [] if f["status"] == "fail"})')" \
    '["node"]'
# peer: rank 0 never answers (a closed port); the termination message says so in one line
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
env -i PATH="$PATH" ASAN_OPTIONS="${ASAN_OPTIONS:-}" NODE_NAME=gpu-17 NCCL_SOCKET_IFNAME=lo \
    PREFLIGHT_TERMINATION_LOG="$T/term/log" "$PREFLIGHT" run --root "$EMPTY" --rank 1 --world-size 2 \
    --coordinator "127.0.0.1:$port" --timeout 4 --verdict "$T/peer.yaml" --format yaml \
    >/dev/null 2>"$T/peer.err"
echo $? >"$T/peer.rc"
expect_eq "class peer (rank 0 never answered): exit 5, failureClass peer" \
    "$(cat "$T/peer.rc") $(yq "$T/peer.yaml" 'd["failureClass"]')" "5 peer"
check "termination message: one line, class, node, check and reason" \
    grep -qx 'fail (peer) gpu-17: rendezvous: rank 0 .*never answered at 127.0.0.1.*' "$T/term/log"
expect_eq "termination message: exactly one line" "$(wc -l <"$T/term/log")" 1
# --strict: a warning fails with its class
env -i PATH="$PATH" ASAN_OPTIONS="${ASAN_OPTIONS:-}" NCCL_DEBUG=TRACE \
    "$PREFLIGHT" env --root "$EMPTY" --strict --format yaml >"$T/strict.yaml" 2>/dev/null
echo $? >"$T/strict.rc"
expect_eq "--strict: debug-verbose (warn, spec) exits 3" \
    "$(cat "$T/strict.rc") $(yq "$T/strict.yaml" 'd["failureClass"]')" "3 spec"
# a termination log in a folder that does not exist: not written, the run unaffected
env -i PATH="$PATH" ASAN_OPTIONS="${ASAN_OPTIONS:-}" PREFLIGHT_TERMINATION_LOG="$T/nowhere/log" \
    "$PREFLIGHT" run --root "$EMPTY" --rank 0 --world-size 1 --verdict "$T/one.yaml" >/dev/null 2>&1
echo $? >"$T/one.rc"
expect_eq "termination log in a missing folder: not written, exit 0" \
    "$(cat "$T/one.rc") $([ -e "$T/nowhere" ] && echo made || echo absent)" "0 absent"

# ---- real pods, named as their launchers name them
pods_need "launchers' pods in network namespaces" ip dnsmasq unshare
pods_begin 8 "pfl$$"
printf 'tcp: {messageBytes: 65536, iterations: 1}\n' >"$T/small.yaml"

# meet SC PORT N: starts pods 0..N-1 (each with $T/SC/envI: its variables, one a line) and
# waits for them; exit codes in $T/SC/rcI, verdicts in $T/SC/vI.yaml
meet() {
    local sc=$1 port=$2 n=$3 i
    local pids=()
    for ((i = 0; i < n; i++)); do
        (
            mapfile -t vars <"$T/$sc/env$i"
            pod_exec_named "$i" env -i PATH="$PATH" ASAN_OPTIONS="${ASAN_OPTIONS:-}" \
                POD_NAME="${POD_HOST[$i]}" POD_NAMESPACE=ml NODE_NAME="node-$i" NCCL_SOCKET_IFNAME=eth0 \
                PREFLIGHT_PORT="$port" PREFLIGHT_PODINFO="/$sc/pi$i" "${vars[@]}" \
                "$PREFLIGHT" run --root "$EMPTY" --config "$T/small.yaml" --timeout 40 \
                --verdict "$T/$sc/v$i.yaml" --format yaml >"$T/$sc/out$i" 2>&1
            echo $? >"$T/$sc/rc$i"
        ) &
        pids+=($!)
    done
    wait "${pids[@]}"
}

# expect SC I RANK RULE: pod I passed as rank RANK by rule RULE, all N pods met
expect() {
    local sc=$1 i=$2 rank=$3 rule=$4 n=$5
    expect_eq "$sc: ${POD_HOST[$i]} exits 0, rank $rank by $rule, $n ranks met" \
        "$(cat "$T/$sc/rc$i") $(yq "$T/$sc/v$i.yaml" '[d["pod"]["rank"], check("rendezvous")["evidence"]["identity"]["rule"], check("rendezvous")["evidence"]["joined"] if d["pod"]["rank"] == 0 else d["pod"]["worldSize"], d["verdict"] != "fail"]')" \
        "0 [$rank, \"$rule\", $n, true]"
}

# JobSet "js": replicatedJobs alpha and beta, 2 replicas each, 2 pods a Job; spec.coordinator
# set, so every pod carries the coordinator label (rank 0 is alpha's Job 0, pod 0)
sc=jobset
mkdir -p "$T/$sc"
i=0
for rj in alpha beta; do
    for job in 0 1; do
        for pod in 0 1; do
            [ "$rj" = beta ] && gi=$((2 + job)) || gi=$job
            pod_name "$i" "js-$rj-$job-$pod" js
            labels "$EMPTY/$sc/pi$i" jobset.sigs.k8s.io/jobset-name=js jobset.sigs.k8s.io/replicatedjob-name=$rj \
                jobset.sigs.k8s.io/replicatedjob-replicas=2 jobset.sigs.k8s.io/global-replicas=4 \
                jobset.sigs.k8s.io/job-index=$job jobset.sigs.k8s.io/job-global-index=$gi \
                jobset.sigs.k8s.io/coordinator=js-alpha-0-0.js batch.kubernetes.io/job-completion-index=$pod
            printf '%s\n' "JOB_COMPLETION_INDEX=$pod" PREFLIGHT_WORLD_SIZE=8 >"$T/$sc/env$i"
            RANK_OF[$i]=$((gi * 2 + pod))
            i=$((i + 1))
        done
    done
done
meet "$sc" 29800 8
for i in 0 1 2 3 4 5 6 7; do expect "$sc" "$i" "${RANK_OF[$i]}" jobset 8; done

# MPIJob "mj": 3 workers in the subdomain mj, no launcher rank; worker 2 without its labels
# (told from a PyTorchJob by the subdomain); the launcher runs but meets nobody
sc=mpijob
mkdir -p "$T/$sc"
for i in 0 1 2; do
    pod_name "$i" "mj-worker-$i" mj
    [ "$i" != 2 ] && labels "$EMPTY/$sc/pi$i" training.kubeflow.org/operator-name=mpi-operator \
        training.kubeflow.org/job-name=mj training.kubeflow.org/job-role=worker \
        training.kubeflow.org/replica-index=$i
    printf '%s\n' PREFLIGHT_WORLD_SIZE=3 >"$T/$sc/env$i"
done
pod_name 3 mj-launcher mj
labels "$EMPTY/$sc/pi3" training.kubeflow.org/operator-name=mpi-operator \
    training.kubeflow.org/job-name=mj training.kubeflow.org/job-role=launcher
printf '%s\n' K_MPI_JOB_ROLE=launcher >"$T/$sc/env3"
meet "$sc" 29810 4
for i in 0 1 2; do expect "$sc" "$i" "$i" mpijob 3; done
expect_eq "$sc: the launcher passes, meets nobody (no rank)" \
    "$(cat "$T/$sc/rc3") $(yq "$T/$sc/v3.yaml" '[check("rendezvous")["status"], check("rendezvous")["evidence"]["identity"]["member"]]')" \
    '0 ["skip", false]'

# TrainJob "tj": numNodes 3, PET_* injected into the initContainer (mlPolicy envInjection)
sc=trainjob
mkdir -p "$T/$sc"
for i in 0 1 2; do
    pod_name "$i" "tj-node-0-$i" tj
    labels "$EMPTY/$sc/pi$i" jobset.sigs.k8s.io/jobset-name=tj jobset.sigs.k8s.io/replicatedjob-name=node \
        jobset.sigs.k8s.io/replicatedjob-replicas=1 jobset.sigs.k8s.io/global-replicas=1 \
        jobset.sigs.k8s.io/job-index=0 jobset.sigs.k8s.io/job-global-index=0
    printf '%s\n' PET_NNODES=3 "PET_NODE_RANK=$i" PET_MASTER_ADDR=tj-node-0-0.tj PET_MASTER_PORT=29500 \
        PET_NPROC_PER_NODE=8 "JOB_COMPLETION_INDEX=$i" >"$T/$sc/env$i"
done
meet "$sc" 29820 3
for i in 0 1 2; do expect "$sc" "$i" "$i" trainjob 3; done
