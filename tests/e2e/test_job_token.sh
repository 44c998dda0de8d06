#!/usr/bin/env bash
# Two jobs that share one PREFLIGHT_TOKEN (one Secret for a namespace): job A is an Indexed Job
# "trainer" of three pods (hostnames trainer-0..2, JOB_COMPLETION_INDEX, the Job controller's
# labels job-name and controller-uid in the podinfo labels file, as the kubelet writes a
# downward-API file); job B's pod "other-1" (Job "other", another uid, index 1) carries a
# coordinator value copied from job A (PREFLIGHT_COORDINATOR=trainer-0.trainer). It reaches job
# A's rank 0 while job A's rank 1 has not come yet. Every pod is a real `preflight run` in a
# network namespace of its own on a bridge (tests/e2e/pods.sh).
# Asserted (docs/security.md, "One job's pods"): rank 0 refuses job B's pod with
# job-mismatch naming both jobs (a warning on job A's side: its ranks are not at fault; a
# failure, class spec, on job B's pod, which exits 3); job B's pod takes no rank, so job A's
# real rank 1 joins and job A's three pods complete the all-reduce together (exit 0, the ranks
# list names trainer-0..2). A second case: the same two jobs, each with a token of its own
# (what the chart and the manifests give each job): job B's pod is a stranger to rank 0.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pods.sh"

pods_need "two jobs' pods in network namespaces" ip dnsmasq unshare
# pods 0..2 are job A (trainer-0..2); pod 3 is job B's pod other-1
pods_begin 4 "pfj$$"
pod_name 3 other-1 trainer # in the same headless Service: a name that outlived its job

printf 'tcp: {messageBytes: 1048576, iterations: 2}\n' >"$T/small.yaml"
# the downward API's labels file (key="value" lines), as the Job controller labels its pods
UID_A=5b1f2c3e-0a11-4c6e-9d0e-3f6a7b8c9d01
UID_B=c0ffee00-1b22-4d7f-8e1f-4a7b8c9d0e12
mkdir -p "$T/podinfo-a" "$T/podinfo-b"
printf 'batch.kubernetes.io/controller-uid="%s"\nbatch.kubernetes.io/job-name="trainer"\ncontroller-uid="%s"\njob-name="trainer"\n' \
    "$UID_A" "$UID_A" >"$T/podinfo-a/labels"
printf 'batch.kubernetes.io/controller-uid="%s"\nbatch.kubernetes.io/job-name="other"\ncontroller-uid="%s"\njob-name="other"\n' \
    "$UID_B" "$UID_B" >"$T/podinfo-b/labels"

N=3
TO=25
declare -a RC=()
SC='' PORT=''

# start I INDEX PODINFO TOKEN [VAR=VALUE...]: pod I runs `preflight run` as pod INDEX of its
# Job; output $T/$SC/outI, verdict vI.yaml, exit code rcI
start() {
    local i=$1 idx=$2 info=$3 tok=$4
    shift 4
    local name="${POD_HOST[$i]:-trainer-$i}"
    (
        pod_exec_named "$i" env POD_NAME="$name" POD_NAMESPACE=ml NODE_NAME="node-$i" \
            JOB_COMPLETION_INDEX="$idx" PREFLIGHT_PODINFO="$info" PREFLIGHT_WORLD_SIZE=$N \
            PREFLIGHT_PORT="$PORT" PREFLIGHT_TOKEN="$tok" NCCL_SOCKET_IFNAME=eth0 "$@" \
            "$PREFLIGHT" run --config "$T/small.yaml" --verdict "$T/$SC/v$i.yaml" \
            --format yaml --timeout "$TO" >>"$T/$SC/out$i" 2>&1
        echo $? >"$T/$SC/rc$i"
    ) &
    POD_PID[$i]=$!
}

wait_pods() {
    local i
    for i in "$@"; do
        wait "${POD_PID[$i]}" 2>/dev/null
        RC[$i]=$(cat "$T/$SC/rc$i" 2>/dev/null || echo none)
    done
}

rc_of() { # NAME I RC
    if [ "${RC[$2]}" = "$3" ]; then ok "$1 exits $3"; else
        notok "$1 exits $3" "exit ${RC[$2]}; last lines: $(tail -n 3 "$T/$SC/out$2" | tr '\n' '|')"
    fi
}

JOB_A="Job ml/trainer (uid $UID_A)"
JOB_B="Job ml/other (uid $UID_B)"
A_MET=('d["verdict"] in ("pass", "warn")' 'check("collective.tcp")["status"] == "pass"'
    'next(c for c in d["collectives"] if c["backend"] == "tcp")["ranks"] == 3'
    'd["fleet"]["ranks"] == 3' 'd["culprits"] == []'
    "check(\"rendezvous\")[\"evidence\"][\"identity\"][\"job\"] == \"$JOB_A\"")

# ---- a. one token for both jobs: job B's pod reaches job A's rank 0 before job A's rank 1
sc_a() {
    SC=a-shared-token PORT=29810
    mkdir -p "$T/$SC"
    local tok=one-token-for-the-namespace
    start 0 0 "$T/podinfo-a" "$tok"
    start 2 2 "$T/podinfo-a" "$tok"
    wait_for_text "$T/$SC/out0" 'rank 2 .*joined' 15 || notok "$SC: rank 2 joined rank 0"
    start 3 1 "$T/podinfo-b" "$tok" PREFLIGHT_COORDINATOR=trainer-0.trainer
    # rank 0 answers job B's pod: refused (or, without the job in the JOIN, let in as rank 1)
    if wait_for_text "$T/$SC/out0" 'other-1' 15; then ok "$SC: job B's pod reached job A's rank 0"
    else notok "$SC: job B's pod reached job A's rank 0" "$(tail -n 3 "$T/$SC/out3" | tr '\n' '|')"; fi
    sleep 1 # the slot, had rank 0 given it away, is taken by now
    start 1 1 "$T/podinfo-a" "$tok"
    wait_pods 0 1 2 3
    rc_of "$SC: job B's pod" 3 3
    pods_expect rendezvous 3 'd["verdict"] == "fail"' 'd["failureClass"] == "spec"' \
        '"job-mismatch" in codes("rendezvous")' \
        "\"$JOB_B\" in finding(\"rendezvous\", \"job-mismatch\")" \
        "\"$JOB_A\" in finding(\"rendezvous\", \"job-mismatch\")" \
        "check(\"rendezvous\")[\"evidence\"][\"identity\"][\"job\"] == \"$JOB_B\"" \
        '"one-token" not in open(path).read()'
    local i
    for i in 0 1 2; do
        rc_of "$SC: job A's trainer-$i" "$i" 0
        pods_expect rendezvous "$i" "${A_MET[@]}" \
            "\"$JOB_B\" in finding(\"rendezvous\", \"job-mismatch\")" \
            "\"$JOB_A\" in finding(\"rendezvous\", \"job-mismatch\")" \
            "\"$(pods_ip 3)\" in finding(\"rendezvous\", \"job-mismatch\")" \
            'all(x["status"] == "warn" for x in check("rendezvous")["findings"])'
    done
    pods_expect rendezvous 0 \
        '[(r["rank"], r["pod"], r["state"]) for r in d["ranks"]] == [(0, "trainer-0", "joined"), (1, "trainer-1", "joined"), (2, "trainer-2", "joined")]'
}

# ---- b. each job its own token: job B's pod is a stranger to job A's rank 0 (its JOIN is not
# believed), and job A completes the same
sc_b() {
    SC=b-own-tokens PORT=29820
    mkdir -p "$T/$SC"
    start 0 0 "$T/podinfo-a" token-of-job-a
    start 2 2 "$T/podinfo-a" token-of-job-a
    wait_for_text "$T/$SC/out0" 'rank 2 .*joined' 15 || notok "$SC: rank 2 joined rank 0"
    start 3 1 "$T/podinfo-b" token-of-job-b PREFLIGHT_COORDINATOR=trainer-0.trainer
    wait_for_text "$T/$SC/out0" "refused a pod at $(pods_ip 3)" 15 ||
        notok "$SC: rank 0 refused job B's pod" "$(tail -n 3 "$T/$SC/out0" | tr '\n' '|')"
    start 1 1 "$T/podinfo-a" token-of-job-a
    # job B's pod does not believe rank 0's REJECT either (its MAC fails with B's token): it
    # tries until its join deadline, then ends auth-failed (a token shown wrong: spec, exit 3)
    wait_pods 0 1 2 3
    rc_of "$SC: job B's pod" 3 3
    pods_expect rendezvous 3 '"auth-failed" in codes("rendezvous")'
    local i
    for i in 0 1 2; do
        rc_of "$SC: job A's trainer-$i" "$i" 0
        pods_expect rendezvous "$i" "${A_MET[@]}" '"job-mismatch" not in codes("rendezvous")'
    done
    pods_expect rendezvous 0 'check("rendezvous")["evidence"]["refusedJoins"] >= 1' \
        "\"$(pods_ip 3)\" in check(\"rendezvous\")[\"evidence\"][\"lastRefused\"]"
}

# ONLY="a" runs that case alone
for s in a b; do
    [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $s "* ]] || continue
    "sc_$s"
done
