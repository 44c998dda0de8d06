#!/usr/bin/env bash
# `preflight watch`, end to end: NCCL logs of tests/fixtures replayed into the shared folder by
# a process in its own PID and network namespaces (unshare), at the pace of their timestamps
# (or a fixed gap) and faster, lines written in pieces; the watch follows the folder from
# before the first file appears. Each finding must come after the line that decides it was
# written, and at most 2 s later (the times: watch_replay.py's record of each line once whole,
# and the arrival of the watch's log line, on one clock). A clean run gives no finding. The
# stop policy ends a stand-in trainer for real and the job's exit code follows; the Event lands
# on a stand-in API server (kapi_standin.py): the real control plane is exercised only in the
# opt-in Kubernetes tests (tests/k8s).
. "$(dirname "$0")/lib.sh"

for tool in python3 unshare; do
    command -v $tool >/dev/null || { skip "watch" "$tool missing"; exit 0; }
done
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY
R="$PREFLIGHT_SRC/tests/e2e/watch_replay.py"
NL=$FIX/nccl-logs
if unshare --pid --net --fork --map-root-user --mount-proc true 2>/dev/null; then
    NS=(unshare --pid --net --fork --map-root-user --mount-proc)
else
    skip "watch: replays in their own namespaces" "unshare --pid --net refused here"
    NS=()
fi

# gate DIR VERSION NETWORK HCAS GDR: the gate's verdict as `preflight run` writes its NCCL facts
gate() {
    local hl="" i
    for i in $(seq 0 $(($4 - 1))); do hl="$hl${hl:+, }mlx5_$i:1/IB"; done
    cat >"$1/verdict.yaml" <<EOF
apiVersion: preflight/v1
kind: Verdict
verdict: pass
summary: "14 of 14 checks passed"
environment:
  ncclVersion: "$2"
  ncclNetwork: $3
checks:
- id: collective.nccl
  status: pass
  evidence:
    transport: $3
    hcas: [$hl]
collectives:
- backend: nccl
  op: allreduce
  transport: $3
  gpuDirectRdma: $5
EOF
}

# scenario NAME CONFIG SPEED GAP LOG...: the watch on $T/NAME/dir while the logs are replayed;
# $T/NAME/out.json (the watch's lines with arrival times), $T/NAME/rec (the lines written)
scenario() {
    local name=$1 cfg=$2 speed=$3 gap=$4
    shift 4
    mkdir -p "$T/$name/dir"
    : >"$T/$name/rec"
    [ -f "$T/$name/gate" ] && cp "$T/$name/gate" "$T/$name/dir/verdict.yaml"
    POD_NAME=trainer-0 POD_NAMESPACE=ml python3 "$R" drive "$T/$name/out.json" -- \
        "$PREFLIGHT" watch "$T/$name/dir" --config "$cfg" ++ \
        "${NS[@]}" python3 "$R" replay "$T/$name/dir" "$T/$name/rec" "$speed" "$gap" "$@"
}

# latency NAME CODE REGEX: seconds from the write of the first line matching REGEX to the
# watch's line for CODE; "none" when either is missing
latency() {
    python3 - "$T/$1" "$2" "$3" <<'PY'
import json, re, sys
d, code, rx = sys.argv[1:4]
w = None
for l in open(d + "/rec"):
    t, f, line = l.rstrip("\n").split(" ", 2)
    if re.search(rx, line):
        w = float(t); break
r = None
for t, line in json.load(open(d + "/out.json"))["lines"]:
    if (" " + code + ": ") in line:
        r = t; break
print("none" if w is None or r is None else "%.3f" % (r - w))
PY
}
within2() { python3 -c "import sys; v=sys.argv[1]; sys.exit(0 if v!='none' and 0 <= float(v) <= 2.0 else 1)" "$1"; }
findings() { python3 -c 'import json,sys; print(sum(1 for t,l in json.load(open(sys.argv[1]))["lines"] if " warn " in l or " fail " in l))' "$T/$1/out.json"; }
wrc() { python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["rc"])' "$T/$1/out.json"; }

printf 'watch:\n  windowSeconds: 120\n  stallSeconds: 60\nreport:\n  events: false\n' >"$T/cfg.yaml"

# ---- a clean run: as the gate measured (IB, 4 NICs, GDRDMA, 2.21.5): no finding
mkdir -p "$T/clean"
gate "$T/clean" 2.21.5 IB 4 true && mv "$T/clean/verdict.yaml" "$T/clean/gate"
scenario clean "$T/cfg.yaml" 1 0.05 "$NL/ib-gdr.log"
expect_eq "watch clean: no finding" "$(findings clean)" "0"
expect_eq "watch clean: exit 0 on SIGTERM" "$(wrc clean)" "0"
V=$T/clean/dir/watch.yaml
expect_eq "watch clean: verdict pass" "$(yq "$V" 'd["verdict"]')" "pass"
expect_eq "watch clean: both processes complete, IB with GDR" \
    "$(yq "$V" '[(p["step"], p["network"], p["gpuDirectRdma"], p["ncclVersion"]) for p in check("watch")["evidence"]["processes"]]')" \
    '[["complete", "IB", true, "2.21.5"], ["complete", "IB", true, "2.21.5"]]'
expect_eq "watch clean: lines written in pieces read whole" \
    "$(yq "$V" 'check("watch")["evidence"]["files"]["lines"]')" "$(grep -c NCCL "$NL/ib-gdr.log")"

# ---- a socket fallback and fewer NICs, at the replay's pace and 50 times faster
for speed in 1 50; do
    n=socket-$speed
    mkdir -p "$T/$n"
    gate "$T/$n" 2.21.5 IB 4 true && mv "$T/$n/verdict.yaml" "$T/$n/gate"
    scenario "$n" "$T/cfg.yaml" "$speed" 0.2 "$NL/socket-fallback.log"
    l=$(latency "$n" trainer-socket-fallback 'trainer-1:81:.*Using network Socket')
    check "watch x$speed: socket fallback within 2 s of its deciding line ($l s)" within2 "$l"
    l=$(latency "$n" trainer-fewer-nics 'trainer-0:77:.*Using network IB')
    check "watch x$speed: 2 NICs of 4 within 2 s of the deciding line ($l s)" within2 "$l"
    expect_eq "watch x$speed: exit code of a failing verdict (class spec)" "$(wrc "$n")" "3"
    expect_eq "watch x$speed: the verdict names both" \
        "$(yq "$T/$n/dir/watch.yaml" 'codes("watch")')" \
        '["trainer-fewer-nics", "trainer-socket-fallback"]'
done

# ---- GDR off where the gate used it (a real log: NCCL 2.22, IB channels without /GDRDMA)
mkdir -p "$T/nogdr"
gate "$T/nogdr" 2.22.3 IB 1 true && mv "$T/nogdr/verdict.yaml" "$T/nogdr/gate"
scenario nogdr "$T/cfg.yaml" 1 0.1 "$NL/real/nccl-1412-ib-no-gdr-2.22.log"
l=$(latency nogdr trainer-no-gdr 'via NET/IB/3')
check "watch: GDR off within 2 s of the first NET channel line ($l s)" within2 "$l"

# ---- another NCCL version than the gate loaded
mkdir -p "$T/version"
gate "$T/version" 2.21.5 IB 1 true && mv "$T/version/verdict.yaml" "$T/version/gate"
scenario version "$T/cfg.yaml" 1 0.1 "$NL/version-mismatch.log"
l=$(latency version trainer-nccl-version 'ws-1:200:.*NCCL version 2.18.3')
check "watch: NCCL 2.18.3 against the gate's 2.21.5 within 2 s ($l s)" within2 "$l"
expect_eq "watch: only the process on another version" \
    "$(yq "$T/version/dir/watch.yaml" '[f["message"].split(":")[0] for f in check("watch")["findings"]]')" \
    '["ws-1"]'

# ---- a real log paced by its timestamps (NCCL 2.3.7, bare VERSION line): as the gate measured
mkdir -p "$T/paced"
gate "$T/paced" 2.3.7 IB 4 true && mv "$T/paced/verdict.yaml" "$T/paced/gate"
scenario paced "$T/cfg.yaml" 1 0.05 "$NL/real/nccl-179-ib-internal-2.3.7.log"
expect_eq "watch paced 2.3.7: no finding" "$(findings paced)" "0"
expect_eq "watch paced 2.3.7: the bare version line counted" \
    "$(yq "$T/paced/dir/watch.yaml" '[p.get("ncclVersion") for p in check("watch")["evidence"]["processes"]][0]')" \
    "2.3.7"

# ---- an init stall: no Init COMPLETE, and a third process whose file never appears
mkdir -p "$T/stall"
grep -v "Init COMPLETE" "$NL/ib-gdr.log" >"$T/stall/log"
printf 'watch:\n  windowSeconds: 120\n  stallSeconds: 2\n  processes: 3\nreport:\n  events: false\n' >"$T/stall/cfg.yaml"
SETTLE=4 scenario stall "$T/stall/cfg.yaml" 1 0.05 "$T/stall/log"
l=$(latency stall init-stall 'node-b:3307:.*Bootstrap')
check "watch stall: reported 2 to 4 s after the last process started ($l s)" \
    python3 -c "import sys; v=sys.argv[1]; sys.exit(0 if v!='none' and 2.0 <= float(v) <= 4.0 else 1)" "$l"
msg=$(yq "$T/stall/dir/watch.yaml" '[f["message"] for f in check("watch")["findings"] if f["code"]=="init-stall"][0]')
check "watch stall: the missing process is counted" grep -q "1 of 3 expected processes wrote no NCCL line" <<<"$msg"
check "watch stall: the steps reached are named" grep -q "connecting: 2 (node-a:2101 (rank" <<<"$msg"

# ---- no gate verdict: facts reported, nothing compared, the evidence says why
mkdir -p "$T/nogate"
scenario nogate "$T/cfg.yaml" 20 0.05 "$NL/socket-fallback.log"
expect_eq "watch without a gate verdict: no finding" "$(findings nogate)" "0"
expect_eq "watch without a gate verdict: evidence says so" \
    "$(yq "$T/nogate/dir/watch.yaml" 'check("watch")["evidence"]["gate"]["unknown"]')" "no gate verdict"

# ---- the stop policy: a stand-in trainer (its NCCL lines name this host and its own pid, as
# NCCL's do) falls back to Socket; the watch stops it and the job's exit code follows
mkdir -p "$T/stop/dir"
gate "$T/stop/dir" 2.21.5 IB 2 true
printf 'watch:\n  windowSeconds: 60\n  onMismatch: stop\n  stopGraceSeconds: 2\nreport:\n  events: false\n' >"$T/stop/cfg.yaml"
cat >"$T/stop/trainer.py" <<'PY'
import os, socket, sys, time
d = sys.argv[1]
h, p = socket.gethostname().split(".")[0], os.getpid()
f = open("%s/nccl.%s.%d" % (d, h, p), "w")
for m in ["NCCL version 2.21.5+cuda12.4", "NET/IB : No device found.",
          "NET/Socket : Using [0]eth0:10.0.0.9<0>", "Using network Socket"]:
    f.write("%s:%d:%d [0] NCCL INFO %s\n" % (h, p, p, m)); f.flush()
    if "Socket" in m and "Using network" in m:
        open(d + "/../written", "w").write("%.6f" % time.time())
    time.sleep(0.2)
time.sleep(60)  # training
PY
"$PREFLIGHT" watch "$T/stop/dir" --config "$T/stop/cfg.yaml" 2>"$T/stop/watch.err" &
WPID=$!
sleep 0.5
t0=$(date +%s.%N)
( python3 "$T/stop/trainer.py" "$T/stop/dir" & wait $!; exit $? )
JOB_RC=$?
t1=$(date +%s.%N)
wait $WPID
expect_eq "watch stop: the job's exit code follows the SIGTERM" "$JOB_RC" "143"
check "watch stop: the trainer ended within 2 s of its Socket line" \
    python3 -c "import sys; w=float(open(sys.argv[1]).read()); sys.exit(0 if $t1 - w <= 2.0 else 1)" "$T/stop/written"
check "watch stop: the watch ended with the trainer" grep -q "the trainer's processes ended" "$T/stop/watch.err"
expect_eq "watch stop: the verdict names the pid stopped" \
    "$(yq "$T/stop/dir/watch.yaml" 'len(check("watch")["evidence"]["stoppedPids"])')" "1"

# ---- the stop policy never signals a pid named by lines of another host (another PID
# namespace): the replayed fixture's pids 77 and 81 may exist here
mkdir -p "$T/nostop"
gate "$T/nostop" 2.21.5 IB 4 true && mv "$T/nostop/verdict.yaml" "$T/nostop/gate"
printf 'watch:\n  windowSeconds: 60\n  onMismatch: stop\nreport:\n  events: false\n' >"$T/nostop/cfg.yaml"
scenario nostop "$T/nostop/cfg.yaml" 20 0.05 "$NL/socket-fallback.log"
check "watch stop: nothing signalled for another host's pids" \
    grep -q "no trainer process visible to stop" <<<"$(python3 -c 'import json,sys; print("\n".join(l for t,l in json.load(open(sys.argv[1]))["lines"]))' "$T/nostop/out.json")"

# ---- the Event, on a stand-in API server (kapi_standin.py; HTTPS, bearer token)
if command -v openssl >/dev/null; then
    SA=$T/root/var/run/secrets/kubernetes.io/serviceaccount
    mkdir -p "$SA" "$T/ca"
    TOKEN="watch-token-$$"
    printf '%s' "$TOKEN" >"$SA/token"
    printf 'ml' >"$SA/namespace"
    (
        cd "$T/ca"
        openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj "/CN=t-ca" 2>/dev/null
        openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj "/CN=kubernetes" 2>/dev/null
        printf 'subjectAltName=IP:127.0.0.1\n' >ext.cnf
        openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt -days 2 -extfile ext.cnf 2>/dev/null
    )
    cp "$T/ca/ca.crt" "$SA/ca.crt"
    echo '{}' >"$T/routes.json"
    python3 "$PREFLIGHT_SRC/tests/e2e/kapi_standin.py" "$T/ca" "$T/port" "$T/requests.jsonl" "$TOKEN" "$T/routes.json" &
    SPID=$!
    for _ in $(seq 1 100); do [ -s "$T/port" ] && break; sleep 0.1; done
    mkdir -p "$T/event"
    gate "$T/event" 2.21.5 IB 4 true && mv "$T/event/verdict.yaml" "$T/event/gate"
    printf 'watch:\n  windowSeconds: 60\nreport:\n  events: true\n  annotate: true\n' >"$T/event/cfg.yaml"
    KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT=$(cat "$T/port") PREFLIGHT_ROOT=$T/root \
        scenario event "$T/event/cfg.yaml" 20 0.05 "$NL/socket-fallback.log"
    kill $SPID 2>/dev/null; wait $SPID 2>/dev/null
    ev=$(python3 - "$T/requests.jsonl" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    r = json.loads(l)
    # an Event per batch of findings: the warning (fewer NICs) may come alone first
    if r["method"] == "POST" and r["path"] == "/api/v1/namespaces/ml/events" and r["auth"]:
        b = json.loads(r["body"])
        if b["reason"] != "PreflightFailed":
            continue
        print(b["involvedObject"]["name"], b["reason"], "Socket" in b["message"])
        break
PY
)
    expect_eq "watch: the Event lands on the pod (stand-in API server)" "$ev" "trainer-0 PreflightFailed True"
    check "watch: no Event posted twice with the same message (its end tells nothing new)" \
        python3 -c "import collections,json,sys; c=collections.Counter(json.loads(json.loads(l)['body'])['message'] for l in open(sys.argv[1]) if json.loads(l)['method']=='POST'); sys.exit(not c or max(c.values()) != 1)" "$T/requests.jsonl"
    check "watch: never patches the pod (the annotation is the gate's)" \
        python3 -c "import json,sys; sys.exit(any(json.loads(l)['method']!='POST' for l in open(sys.argv[1])))" "$T/requests.jsonl"
else
    skip "watch: Event" "openssl missing"
fi
