#!/usr/bin/env bash
# The rendezvous and the TCP all-reduce end to end: every "pod" is a real `preflight run` in a
# network namespace and a UTS namespace of its own (hostname trainer-N) on a bridge
# (tests/e2e/pods.sh). The pods derive their rank from the hostname and find rank 0 as
# <hostname-prefix>-0.<subdomain> through a real dnsmasq serving the headless Service's names,
# with a Kubernetes-like resolv.conf (search domains, ndots:5): no --rank, no --coordinator.
# Each scenario breaks one thing (a late pod, a missing one, one killed or frozen in the middle
# of the all-reduce, a wrong world size, a duplicate rank, a wrong token, garbage on the
# rendezvous port, a throttled link, a name that resolves late, a restarting pod, a world of
# one, NCCL_* variables over the JOIN's size) and asserts the verdict of every surviving pod
# (status, finding codes, the culprit named), its exit code, and that it finished before its
# --timeout.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pods.sh"

pods_need "rendezvous among pods in network namespaces" ip dnsmasq unshare tc
# pods 0..3 are the job; pod 4 (trainer-4) is the intruder: a duplicate, a garbage client
pods_begin 5 "pfr$$"

printf 'tcp: {messageBytes: 1048576, iterations: 2}\n' >"$T/small.yaml"
# big enough that the all-reduce lasts seconds: time to kill or freeze a pod in the middle
printf 'tcp: {messageBytes: 67108864, iterations: 60}\n' >"$T/big.yaml"
MARGIN=3 # seconds a pod may take past its --timeout (sanitizer exit, verdict write)

declare -A RC WALL
SC= PORT= TO= CFG=

# scenario NAME PORT TIMEOUT CONFIG: the next pods belong to this scenario
scenario() {
    SC=$1 PORT=$2 TO=$3 CFG=$4
    mkdir -p "$T/$SC"
    RC=() WALL=()
}

# launch I [VAR=VALUE...]: starts pod I's `preflight run` in the background; what it prints
# goes to $T/$SC/outI, its verdict to $T/$SC/vI.yaml, its exit code and wall time to resI
launch() {
    local i=$1
    shift
    local res="$T/$SC/res$i"
    rm -f "$res"
    (
        s=$(date +%s%N)
        pod_exec "$i" env POD_NAME="trainer-$i" POD_NAMESPACE=ml NODE_NAME="node-$i" \
            PREFLIGHT_WORLD_SIZE=4 PREFLIGHT_PORT="$PORT" NCCL_SOCKET_IFNAME=eth0 "$@" \
            "$PREFLIGHT" run --config "$CFG" --verdict "$T/$SC/v$i.yaml" --format yaml \
            --timeout "$TO" >>"$T/$SC/out$i" 2>&1
        rc=$?
        echo "$rc $((($(date +%s%N) - s) / 1000000))" >"$res"
    ) &
    POD_PID[$i]=$!
}

# the preflight processes running in pod I
pod_pids() { ip netns pids "$(pods_ns "$1")" 2>/dev/null | while read -r p; do
    [ "$(cat "/proc/$p/comm" 2>/dev/null)" = preflight ] && echo "$p"; done; }
pod_signal() { local p; for p in $(pod_pids "$1"); do kill "-$2" "$p" 2>/dev/null; done; }

# finish I...: waits for pods I..., records exit code and wall time
finish() {
    local i
    for i in "$@"; do
        wait "${POD_PID[$i]}" 2>/dev/null
        if [ -s "$T/$SC/res$i" ]; then
            read -r RC[$i] WALL[$i] <"$T/$SC/res$i"
        else
            RC[$i]=none WALL[$i]=0
        fi
    done
}

# expect_pod I RC EXPR...: pod I exited RC within its deadline and every Python expression
# holds over its verdict (see lib.sh's yq: d, check(), codes(); culprit(r) is the culprit
# entry of rank r)
expect_pod() {
    local i=$1 rc=$2
    local v="$T/$SC/v$i.yaml"
    shift 2
    local name="$SC: trainer-$i"
    if [ "${RC[$i]}" = "$rc" ]; then ok "$name exits $rc"; else
        notok "$name exits $rc" "exit ${RC[$i]}; last lines: $(tail -n 3 "$T/$SC/out$i" | tr '\n' '|')"
    fi
    if [ "${WALL[$i]}" -le $(((TO + MARGIN) * 1000)) ]; then
        ok "$name finished within --timeout $TO s (${WALL[$i]} ms)"
    else notok "$name finished within --timeout $TO s" "took ${WALL[$i]} ms"; fi
    if grep -qE 'AddressSanitizer|LeakSanitizer|runtime error:' "$T/$SC/out$i"; then
        notok "$name: no sanitizer report" "$(grep -m1 -E 'Sanitizer|runtime error' "$T/$SC/out$i")"
    fi
    [ $# -eq 0 ] && return
    if [ ! -s "$v" ]; then
        notok "$name verdict written" "no $v"
        return
    fi
    python3 - "$v" "$name" "$@" <<'PY'
import json, sys, yaml
path, name, exprs = sys.argv[1], sys.argv[2], sys.argv[3:]
with open(path) as f:
    d = yaml.safe_load(f)
def check(cid):
    for c in d.get("checks", []):
        if c["id"] == cid:
            return c
    return {}
def codes(cid):
    return sorted(x["code"] for x in (check(cid).get("findings") or []))
def finding(cid, code):
    for x in check(cid).get("findings") or []:
        if x["code"] == code:
            return x.get("message", "")
    return ""
def culprit(r):
    for c in d.get("culprits") or []:
        if c.get("rank") == r:
            return c
    return None
def tcp():
    return next((c for c in d.get("collectives") or [] if c.get("backend") == "tcp"), {})
for e in exprs:
    try:
        r = eval(e)
    except Exception as x:
        r, err = False, repr(x)
    else:
        err = ""
    if r is True:
        print(f"ok - {name}: {e}")
    else:
        got = {"verdict": d.get("verdict"),
               "rendezvous": [check("rendezvous").get("status"), codes("rendezvous")],
               "collective.tcp": [check("collective.tcp").get("status"), codes("collective.tcp")],
               "culprits": d.get("culprits")}
        print(f"not ok - {name}: {e}: {err or r} ({json.dumps(got)[:600]})")
PY
}

# common expressions
# rank 0's ranks list: an entry a rank, each listing only its checks that are neither pass nor
# skip, with how many passed; no other rank has the list
RANKS_LISTED='[r["rank"] for r in d["ranks"]] == [0, 1, 2, 3] and all(r["state"] == "joined" and r["pod"] == "trainer-%d" % r["rank"] and r["checksPassed"] > 0 and sum(c["status"] == "pass" for c in r["checks"]) == r["checksPassed"] and all(set(c) == {"id", "status", "findings"} for c in r["checks"]) for r in d["ranks"]) if d["pod"]["rank"] == 0 else "ranks" not in d'
HEALTHY=('d["verdict"] in ("pass", "warn")' 'check("rendezvous")["status"] == "pass"'
    'check("collective.tcp")["status"] == "pass"' 'tcp()["correct"] is True'
    'tcp()["busbwGBps"] > 0' 'tcp()["ranks"] == 4' 'd["culprits"] == []'
    'd["fleet"]["ranks"] == 4' 'check("rendezvous")["evidence"]["coordinatorFrom"] == "hostname and subdomain" if d["pod"]["rank"] else True'
    'check("rendezvous")["evidence"]["rankFrom"].startswith("hostname")'
    "$RANKS_LISTED")
# names rank R and its pod in the culprits
names() { echo "culprit($1) is not None and culprit($1)[\"pod\"] == \"trainer-$1\""; }

# ---- a. four healthy pods
sc_a() {
    scenario a-healthy 29610 30 "$T/small.yaml"
    for i in 0 1 2 3; do launch "$i"; done
    finish 0 1 2 3
    for i in 0 1 2 3; do expect_pod "$i" 0 "${HEALTHY[@]}"; done
}

# ---- b. one pod starts 5 s late: the others wait for it
sc_b() {
    scenario b-late 29620 30 "$T/small.yaml"
    for i in 0 1 2; do launch "$i"; done
    sleep 5
    launch 3
    finish 0 1 2 3
    for i in 0 1 2 3; do expect_pod "$i" 0 "${HEALTHY[@]}"; done
}

# ---- c. one pod never starts: the others fail on time and name it
sc_c() {
    scenario c-missing 29630 15 "$T/small.yaml"
    for i in 0 1 2; do launch "$i"; done
    finish 0 1 2
    for i in 0 1 2; do
        expect_pod "$i" 5 'd["verdict"] == "fail"' '"missing-ranks" in codes("rendezvous")' \
            '"rank 3" in finding("rendezvous", "missing-ranks")' \
            '"trainer-3" in finding("rendezvous", "missing-ranks")' "$(names 3)" \
            'len(d["culprits"]) == 1' \
            '[(r["state"], r["verdict"], "checksPassed" in r, "checks" in r) for r in d["ranks"]][3] == ("missing", "fail", False, False) if d["pod"]["rank"] == 0 else True'
    done
}

# ---- d. one pod killed (SIGKILL) in the middle of the all-reduce
sc_d() {
    scenario d-killed 29640 40 "$T/big.yaml"
    for i in 0 1 2 3; do launch "$i"; done
    if wait_for_text "$T/$SC/out2" 'tcp all-reduce:' 25; then
        sleep 1
        pod_signal 2 KILL
        ok "d-killed: trainer-2 killed during the all-reduce"
    else notok "d-killed: trainer-2 reached the all-reduce"; fi
    finish 0 1 2 3
    for i in 0 1 3; do
        expect_pod "$i" 5 'd["verdict"] == "fail"' '"peer-lost" in codes("collective.tcp")' \
            '"trainer-2" in finding("collective.tcp", "peer-lost")' "$(names 2)"
    done
}

# ---- e. one pod frozen (SIGSTOP) in the middle of the all-reduce
sc_e() {
    scenario e-frozen 29650 30 "$T/big.yaml"
    for i in 0 1 2 3; do launch "$i"; done
    if wait_for_text "$T/$SC/out1" 'tcp all-reduce:' 20; then
        sleep 1
        pod_signal 1 STOP
        ok "e-frozen: trainer-1 frozen during the all-reduce"
    else notok "e-frozen: trainer-1 reached the all-reduce"; fi
    finish 0 2 3
    pod_signal 1 KILL
    pod_signal 1 CONT
    finish 1
    for i in 0 2 3; do
        expect_pod "$i" 5 'd["verdict"] == "fail"' \
            '"peer-lost" in codes("collective.tcp") or "timeout" in codes("rendezvous")' \
            "$(names 1)"
    done
}

# ---- f. one pod with another world size
sc_f() {
    scenario f-world 29660 20 "$T/small.yaml"
    for i in 0 1 3; do launch "$i"; done
    launch 2 PREFLIGHT_WORLD_SIZE=5
    finish 0 1 2 3
    for i in 0 1 2 3; do
        expect_pod "$i" 3 'd["verdict"] == "fail"' '"world-size-mismatch" in codes("rendezvous")' \
            '"rank 2" in finding("rendezvous", "world-size-mismatch")' "$(names 2)"
    done
}

# ---- g. two pods claim rank 1 (trainer-4 says PREFLIGHT_RANK=1)
sc_g() {
    scenario g-duplicate 29670 20 "$T/small.yaml"
    # trainer-3 comes last, so that the run is still gathering when trainer-4 claims rank 1
    for i in 0 1 2; do launch "$i"; done
    wait_for_text "$T/$SC/out1" 'joined rank 0' 15
    launch 4 PREFLIGHT_RANK=1
    wait_for_text "$T/$SC/out4" 'refused' 15
    launch 3
    finish 0 1 2 3 4
    for i in 0 1 2 3; do
        expect_pod "$i" 3 'd["verdict"] == "fail"' '"duplicate-rank" in codes("rendezvous")' \
            '"trainer-1" in finding("rendezvous", "duplicate-rank")' \
            '"trainer-4" in finding("rendezvous", "duplicate-rank")'
    done
    expect_pod 4 3 'd["verdict"] == "fail"' '"duplicate-rank" in codes("rendezvous")'
}

# ---- h. one pod with a wrong PREFLIGHT_TOKEN. Rank 0 cannot tell it from a stranger, so it
# believes nothing its JOIN claims. Nor does that pod believe rank 0's REJECT, whose MAC fails
# with its token (it could come from anyone at rank 0's address): it keeps trying until its join
# deadline and then fails with auth-failed in its own verdict (exit 3, spec); the others start without it at the join deadline, name it in missing-ranks (exit 5,
# peer) and warn that a JOIN claiming its rank from its address failed the token check
sc_h() {
    scenario h-token 29680 20 "$T/small.yaml"
    for i in 0 1 3; do launch "$i" PREFLIGHT_TOKEN=s3cret-run-17; done
    launch 2 PREFLIGHT_TOKEN=s3cret-run-16
    finish 0 1 2 3
    expect_pod 2 3 'd["verdict"] == "fail"' '"auth-failed" in codes("rendezvous")' \
        '"PREFLIGHT_TOKEN differs" in finding("rendezvous", "auth-failed")' \
        '"s3cret" not in open(path).read()'
    for i in 0 1 3; do
        expect_pod "$i" 5 'd["verdict"] == "fail"' 'd["failureClass"] == "peer"' \
            '"trainer-2" in finding("rendezvous", "missing-ranks")' "$(names 2)" \
            '"rank 2 never joined" in finding("rendezvous", "stranger-refused")' \
            "\"$(pods_ip 2)\" in finding(\"rendezvous\", \"stranger-refused\")" \
            '"s3cret" not in open(path).read()' \
            'set(codes("rendezvous")) == {"missing-ranks", "stranger-refused"}' \
            'check("collective.tcp")["status"] == "pass"' 'tcp()["ranks"] == 3' \
            'len(d["culprits"]) == 1'
    done
    expect_pod 0 5 'check("rendezvous")["evidence"]["refusedJoins"] >= 1' \
        "\"$(pods_ip 2)\" in check(\"rendezvous\")[\"evidence\"][\"lastRefused\"]"
}

# ---- i. strangers on the rendezvous port while the pods meet
sc_i() {
    scenario i-garbage 29690 30 "$T/small.yaml"
    for i in 0 1 2; do launch "$i"; done
    wait_for_text "$T/$SC/out0" 'listening on port' 15
    # from trainer-4: one sends garbage, one connects and says nothing, one scans
    pod_exec 4 python3 - 10.213.0.10 "$PORT" >"$T/$SC/strangers" 2>&1 <<'PY' &
import os, socket, sys, threading, time
addr = (sys.argv[1], int(sys.argv[2]))
def garbage():
    s = socket.create_connection(addr)
    s.sendall(os.urandom(4096) + b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" + b"\xff" * 70000)
    time.sleep(4)
def silent():
    s = socket.create_connection(addr)
    time.sleep(8)
def scan():
    for _ in range(30):
        try:
            socket.create_connection(addr, timeout=1).close()
        except OSError:
            pass
        time.sleep(0.05)
ts = [threading.Thread(target=f) for f in (garbage, silent, scan)]
for t in ts: t.start()
for t in ts: t.join()
print("strangers done")
PY
    local spid=$!
    sleep 2
    launch 3
    finish 0 1 2 3
    wait "$spid" 2>/dev/null
    for i in 0 1 2 3; do expect_pod "$i" 0 "${HEALTHY[@]}"; done
    expect_pod 0 0 'check("rendezvous")["evidence"]["droppedConnections"] >= 3'
}

# ---- j. one pod's link throttled (tc tbf both ways: its eth0, and its port on the switch)
sc_j() {
    scenario j-throttled 29700 40 "$T/small.yaml"
    ip netns exec "$(pods_ns 3)" tc qdisc add dev eth0 root tbf rate 40mbit burst 16kb latency 500ms &&
        ip netns exec "$PODS_SW" tc qdisc add dev "${PODS_PREFIX}v3" root tbf rate 40mbit burst 16kb \
            latency 500ms || { notok "j-throttled: tc tbf on trainer-3's link"; return; }
    for i in 0 1 2 3; do launch "$i"; done
    finish 0 1 2 3
    ip netns exec "$(pods_ns 3)" tc qdisc del dev eth0 root
    ip netns exec "$PODS_SW" tc qdisc del dev "${PODS_PREFIX}v3" root
    for i in 0 1 2 3; do
        # the slow pod is the culprit: its node is unfit (4); the others' peer is (5)
        expect_pod "$i" "$([ "$i" = 3 ] && echo 4 || echo 5)" 'd["verdict"] == "fail"' '"slow-node" in codes("collective.tcp")' \
            '"trainer-3" in finding("collective.tcp", "slow-node")' "$(names 3)" \
            'len(d["culprits"]) == 1' 'tcp()["correct"] is True'
    done
}

# ---- k. rank 0's name resolves only after a few seconds (DNS records come late)
sc_k() {
    scenario k-late-dns 29710 30 "$T/small.yaml"
    pods_dns_del 0
    for i in 0 1 2 3; do launch "$i"; done
    sleep 3
    pods_dns_add 0
    finish 0 1 2 3
    for i in 0 1 2 3; do expect_pod "$i" 0 "${HEALTHY[@]}"; done
}

# ---- l. a pod whose preflight restarts while the others wait: it rejoins the same run
sc_l() {
    scenario l-restart 29720 30 "$T/small.yaml"
    for i in 0 1 2; do launch "$i"; done
    if wait_for_text "$T/$SC/out2" 'joined rank 0' 15; then
        pod_signal 2 KILL
        finish 2
        ok "l-restart: trainer-2 killed while waiting for the others"
    else notok "l-restart: trainer-2 joined rank 0"; fi
    launch 2
    wait_for_text "$T/$SC/out0" 'rank 2 .*joined' 15
    launch 3
    finish 0 1 2 3
    for i in 0 1 2 3; do expect_pod "$i" 0 "${HEALTHY[@]}"; done
}

# ---- n. one pod's NCCL_* variables are more than its JOIN holds (32 KiB): the JOIN says how
# many it left out, and both the pod and rank 0 show it (evidence and a log line)
sc_n() {
    scenario n-env-left-out 29740 30 "$T/small.yaml"
    local -a many=()
    local k fill
    fill=$(printf 'x%.0s' $(seq 60))
    for ((k = 0; k < 600; k++)); do many+=("$(printf 'NCCL_PF_FILL_%03d=%s' "$k" "$fill")"); done
    for i in 0 1 3; do launch "$i"; done
    launch 2 "${many[@]}"
    finish 0 1 2 3
    # trainer-2's variables differ from the others': env-mismatch, a warning, and the run goes on
    local -a warned=('d["verdict"] == "warn"' 'check("rendezvous")["status"] == "warn"'
        'codes("rendezvous") == ["env-mismatch"]' 'check("collective.tcp")["status"] == "pass"'
        'tcp()["ranks"] == 4' 'd["culprits"] == []')
    expect_pod 0 0 "${warned[@]}" \
        'check("rendezvous")["evidence"]["envLeftOutRanks"] == 1' \
        '"rank 2 (trainer-2)" in check("rendezvous")["evidence"]["lastEnvLeftOut"]'
    expect_pod 2 0 "${warned[@]}" '0 < check("rendezvous")["evidence"]["joinEnvLeftOut"] < 600'
    for i in 1 3; do
        expect_pod "$i" 0 "${warned[@]}" '"joinEnvLeftOut" not in check("rendezvous")["evidence"]'
    done
    if grep -q "of its NCCL_\* variables did not fit its JOIN" "$T/$SC/out0" &&
        grep -q "of this pod's NCCL_\* variables do not fit its JOIN" "$T/$SC/out2"; then
        ok "n-env-left-out: rank 0's log and trainer-2's say what was left out"
    else notok "n-env-left-out: rank 0's log and trainer-2's say what was left out" \
        "$(grep -h 'JOIN' "$T/$SC/out0" "$T/$SC/out2" | head -3 | tr '\n' '|')"; fi
}

# ---- m. a world of one: nothing to meet, so no rendezvous, no listening socket, no waiting
# m_run OUT [PREFIX...]: trainer-0 alone (world size 1); PREFIX runs it (strace)
m_run() {
    local out=$1
    shift
    pod_exec 0 env POD_NAME=trainer-0 POD_NAMESPACE=ml NODE_NAME=node-0 PREFLIGHT_WORLD_SIZE=1 \
        PREFLIGHT_PORT="$PORT" "$@" "$PREFLIGHT" run --config "$CFG" \
        --verdict "$T/$SC/v$out.yaml" --format yaml --timeout "$TO" >"$T/$SC/out$out" 2>&1
}
sc_m() {
    scenario m-one 29730 30 "$T/small.yaml"
    # another process holds the rendezvous port: a pod that listened would fail (listen-failed)
    pod_exec 0 python3 -c 'import socket, time
s = socket.socket(); s.bind(("", 29730)); s.listen(); time.sleep(60)' &
    local holder=$!
    local s
    s=$(date +%s%N)
    m_run 0
    RC[0]=$? WALL[0]=$((($(date +%s%N) - s) / 1000000))
    expect_pod 0 0 'check("rendezvous")["status"] == "pass"' \
        'check("rendezvous")["message"] == "world of one: no other pod to meet"' \
        'codes("rendezvous") == []' 'd["pod"]["worldSize"] == 1' \
        'check("collective.tcp")["status"] == "skip"' \
        '"world of one" in check("collective.tcp")["message"]'
    # not a race with the deadline: nothing waits, so it ends long before --timeout 30
    if [ "${WALL[0]}" -lt 10000 ]; then ok "m-one: done in under 10 s of --timeout 30 (${WALL[0]} ms)"
    else notok "m-one: done in under 10 s of --timeout 30" "took ${WALL[0]} ms"; fi
    # strace records every listen(2) of a second run: there must be none (LeakSanitizer
    # cannot run under ptrace, so it is off for this run only)
    local tr="$T/$SC/listen.trace"
    if ! command -v strace >/dev/null; then
        skip "m-one: no listen(2) call" "strace not installed"
    elif m_run 1 ASAN_OPTIONS=detect_leaks=0 strace -f -qq -e trace=listen -o "$tr" &&
        [ -f "$tr" ] && ! grep -q 'listen(' "$tr"; then
        ok "m-one: no listen(2) call"
    else notok "m-one: no listen(2) call" "$(grep -m2 'listen(' "$tr" 2>/dev/null | tr '\n' '|')"; fi
    kill "$holder" 2>/dev/null
    wait "$holder" 2>/dev/null || true
}

# ONLY="c d" runs those scenarios alone
for s in a b c d e f g h i j k l m n; do
    [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $s "* ]] || continue
    "sc_$s"
done
