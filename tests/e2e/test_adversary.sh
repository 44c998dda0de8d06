#!/usr/bin/env bash
# Strangers against the rendezvous: real `preflight run` processes meet on loopback
# (127.0.0.1, --rank/--world-size/--coordinator given), all with one PREFLIGHT_TOKEN, while a
# stranger (tests/e2e/rdv_stranger.py, from its own loopback address 127.0.0.66..99 so that
# the verdict can tell it from the pods) reaches their ports the way any pod of a cluster can:
#   c1  a JOIN with a wrong MAC claiming rank 3 before the real rank 3 arrives
#   c2  the same after the real rank has joined
#   c3  a JOIN captured by a relay between a real rank and rank 0, replayed in the same run
#       (after the rank joined) and in a later run with the same token (before it joined)
#   c4  2,000 connections while a 3-rank run meets: 1,000 start a JOIN within the limit before
#       authentication and trickle the rest, 1,000 announce a 256 KiB JOIN; rank 0's peak RSS
#       over the flood and the run's verdict
#   c5  idle and garbage connections on one rank's data port during the data mesh: the mesh
#       still forms, and the rank does not busy-loop while they sit
#   c6  rank 0 out of file descriptors (ulimit -n 64, 100 idle connections): no busy loop,
#       the run still passes and the verdict is written
#   c7  a rank out of file descriptors in the data mesh (ulimit -n 40, 60 idle connections on
#       its data port): no busy loop, the mesh still forms
#   c8  a tokenless JOIN whose pod and node fields hold an escape sequence, a carriage return
#       and a newline followed by a forged log line, for a rank that never comes: rank 0's log
#       and every pod's human verdict show those bytes escaped, never raw
#   c9  a fake rank 0 at rank 0's address (a stale DNS record, a reused pod IP) answers every
#       JOIN with a REJECT without MAC for 4 s, then the real rank 0 starts there: the joiner
#       does not believe the REJECT, keeps trying, and the run passes
# What is asserted is docs/threat-model-rendezvous.md: nothing an unauthenticated peer sends
# changes the run (no rank slot taken, no failing finding, no culprit, no warning while the
# rank it claimed joins; rank 0's evidence counts it with its address), and no listener
# spins or grows without bound. Every stranger is bounded in connections and seconds; every
# CPU and memory bound has a wide margin over what a busy machine shows (the measures are
# CPU time and runnable time of the process itself, and a peak that more load can only lower).
#   ONLY="c1 c4" runs those cases alone; KEEP_TMP=1 keeps the files; ADVERSARY_DRY=1 runs
#   every case without its stranger (the control: then every case must pass).
source "$(dirname "$0")/lib.sh"

H="$PREFLIGHT_SRC/tests/e2e/rdv_stranger.py"
for c in ss python3; do
    command -v "$c" >/dev/null || { skip "strangers on the rendezvous ports" "$c not installed"; exit 0; }
done
# c4 holds 2,000 connections in one process (and rank 0 raises its own soft limit)
ulimit -n 8192 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null

TOKEN="adversary-run-token-$$"
CFG="$T/small.yaml"
printf 'tcp: {messageBytes: 1048576, iterations: 2}\nreport: {events: false}\n' >"$CFG"
MARGIN=5 # seconds a process may take past its --timeout (sanitizer exit, verdict write)
BUSY=50  # percent of a window a process may be on a CPU, or runnable while not sleeping (spins)

declare -a BG=()           # helper processes this script started
declare -A PID WRAP RC WALL # per rank of the current case
SC='' PORT='' W='' TO=''

cleanup() {
    local p
    for p in "${PID[@]}" "${BG[@]}"; do kill -KILL "$p" 2>/dev/null; done
    wait 2>/dev/null
    if [ -n "${KEEP_TMP:-}" ]; then echo "# kept $T"; else rm -rf "$T"; fi
}
trap cleanup EXIT
trap 'exit 1' INT TERM

freeport() { python3 "$H" freeport; }

# scenario NAME WORLD TIMEOUT: the next ranks belong to this case, on a fresh port
scenario() {
    SC=$1 W=$2 TO=$3
    PORT=$(freeport)
    mkdir -p "$T/$SC"
    PID=() WRAP=() RC=() WALL=()
}

# launch R [COORDINATOR-PORT [NOFILE]]: starts rank R of the case in the background; its
# output goes to $T/$SC/outR, its verdict to vR.yaml; PID[R] is the preflight process
launch() {
    local r=$1 cport=${2:-$PORT} nofile=${3:-}
    local d="$T/$SC"
    rm -f "$d/res$r" "$d/pid$r"
    (
        [ -n "$nofile" ] && ulimit -n "$nofile"
        s=$(date +%s%N)
        env -u PREFLIGHT_RANK -u PREFLIGHT_WORLD_SIZE -u PREFLIGHT_COORDINATOR -u PREFLIGHT_PORT \
            -u RANK -u WORLD_SIZE -u MASTER_ADDR -u JOB_COMPLETION_INDEX -u PREFLIGHT_CONFIG \
            POD_NAME="trainer-$r" POD_NAMESPACE=ml NODE_NAME="node-$r" PREFLIGHT_TOKEN="$TOKEN" \
            "$PREFLIGHT" run --config "$CFG" --rank "$r" --world-size "$W" \
            --coordinator "127.0.0.1:$cport" --port "$PORT" --verdict "$d/v$r.yaml" \
            --format "${FMT:-yaml}" --timeout "$TO" >>"$d/out$r" 2>&1 &
        echo $! >"$d/pid$r"
        wait $!
        echo "$? $((($(date +%s%N) - s) / 1000000))" >"$d/res$r"
    ) &
    WRAP[$r]=$!
    local k
    for ((k = 0; k < 50; k++)); do [ -s "$d/pid$r" ] && break; sleep 0.1; done
    PID[$r]=$(cat "$d/pid$r" 2>/dev/null)
}

# finish R...: waits for ranks R... (killing one that outlives its --timeout by far) and
# records their exit codes and wall times
finish() {
    local r k
    for r in "$@"; do
        for ((k = 0; k < (TO + MARGIN + 15) * 10; k++)); do
            kill -0 "${WRAP[$r]}" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "${PID[$r]}" 2>/dev/null
        wait "${WRAP[$r]}" 2>/dev/null
        if [ -s "$T/$SC/res$r" ]; then read -r "RC[$r]" "WALL[$r]" <"$T/$SC/res$r"; else
            RC[$r]=none WALL[$r]=0
        fi
    done
}

# stranger NAME ARGS...: runs the helper in the background; its pid in SPID, output $T/$SC/NAME
# (helper NAME ARGS... does the same for a helper that is part of the set-up, not an attack)
helper() {
    local name=$1
    shift
    python3 "$H" "$@" >"$T/$SC/$name" 2>&1 &
    SPID=$!
    BG+=("$SPID")
}
stranger() {
    if [ -n "${ADVERSARY_DRY:-}" ]; then
        echo "flood: no connections open (dry run)" >"$T/$SC/$1"
        SPID=
        return
    fi
    helper "$@"
}
# attack OUT ARGS...: runs the helper in the foreground, output to OUT
attack() {
    local out=$1
    shift
    if [ -n "${ADVERSARY_DRY:-}" ]; then echo "dry run: no stranger" >"$out"; return; fi
    python3 "$H" "$@" >"$out" 2>&1
}
stop() { [ -n "$1" ] || return 0; kill -TERM "$1" 2>/dev/null; wait "$1" 2>/dev/null; true; }

# busy PID SECONDS: how much of the next SECONDS the process was runnable (on a CPU or
# waiting for one, from /proc/PID/schedstat), and its CPU time (utime+stime), both in percent
# of the window; a process that ends early counts as idle for the rest. Prints "RUN CPU".
# Runnable time, unlike CPU time, does not shrink when other work crowds the machine, so a
# busy loop shows as ~100 % on a loaded machine too.
# busy PID SECONDS: "RUN CPU VOL NONVOL" over the window: RUN the percent of it the process's
# main thread was runnable (on a CPU or waiting in the run queue, /proc/PID/schedstat), CPU the
# percent it spent on a CPU (utime + stime), VOL and NONVOL its voluntary and involuntary
# context switches (/proc/PID/status). A process that sleeps between events switches out
# voluntarily each time; one that spins is only ever preempted.
busy() {
    python3 - "$1" "$2" <<'PY'
import os, sys, time
pid, win = int(sys.argv[1]), float(sys.argv[2])
tck = os.sysconf("SC_CLK_TCK")
def sample():
    with open(f"/proc/{pid}/stat") as f:
        p = f.read().rsplit(")", 1)[1].split()
    cpu = (int(p[11]) + int(p[12])) / tck
    try:
        with open(f"/proc/{pid}/schedstat") as f:
            on, wait = f.read().split()[:2]
        run = (int(on) + int(wait)) / 1e9
    except OSError:
        run = cpu
    vol = nonvol = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("voluntary_ctxt_switches:"):
                vol = int(line.split()[1])
            elif line.startswith("nonvoluntary_ctxt_switches:"):
                nonvol = int(line.split()[1])
    return run, cpu, vol, nonvol
try:
    s0 = sample()
except OSError:
    print("0 0 0 0"); sys.exit()
s1, t0 = s0, time.monotonic()
while time.monotonic() - t0 < win:
    time.sleep(0.1)
    try:
        s1 = sample()
    except OSError:
        break
print(f"{100 * (s1[0] - s0[0]) / win:.0f} {100 * (s1[1] - s0[1]) / win:.0f} "
      f"{s1[2] - s0[2]} {s1[3] - s0[3]}")
PY
}

# spins "RUN CPU VOL NONVOL": true when the numbers show a busy loop: on a CPU for BUSY % of the
# window, or runnable that long while it was preempted more often than it went to sleep. On a
# loaded machine a process that only wakes for events waits in the run queue after each wake
# and is runnable much of the time without spinning; and the kernel adds a wait to schedstat
# when the wait ends (sched_info_arrive), so one long wait that began before the window can
# fill it. Such a process still goes to sleep after each wake; a spinning one is preempted.
spins() {
    local run cpu vol nonvol
    read -r run cpu vol nonvol <<<"$1"
    [ "$cpu" -ge "$BUSY" ] || { [ "$run" -ge "$BUSY" ] && [ "$nonvol" -gt "$vol" ]; }
}

# vm PID: VmRSS of a process, KiB
vm() { awk '/^VmRSS:/ {print $2}' "/proc/$1/status" 2>/dev/null || echo 0; }

# expect R RC EXPR...: rank R exited RC within its deadline, no sanitizer report, and every
# Python expression holds over its verdict: d (the verdict), W (world size), check(id),
# findings(id), fails() (every failing finding as "check/code"), tcp(), dump(x) (JSON text)
expect() {
    local r=$1 rc=$2
    local v="$T/$SC/v$r.yaml" name="$SC: rank $r"
    shift 2
    if [ "${RC[$r]}" = "$rc" ]; then ok "$name exits $rc"; else
        notok "$name exits $rc" "exit ${RC[$r]}; last lines: $(tail -n 4 "$T/$SC/out$r" | cut -c1-220 | tr '\n' '|')"
    fi
    if [ "${WALL[$r]}" -le $(((TO + MARGIN) * 1000)) ]; then
        ok "$name finished within --timeout $TO s (${WALL[$r]} ms)"
    else notok "$name finished within --timeout $TO s" "took ${WALL[$r]} ms"; fi
    if grep -qE 'AddressSanitizer|LeakSanitizer|runtime error:' "$T/$SC/out$r"; then
        notok "$name: no sanitizer report" "$(grep -m1 -E 'Sanitizer|runtime error' "$T/$SC/out$r")"
    fi
    [ $# -eq 0 ] && return
    if [ ! -s "$v" ]; then notok "$name verdict written" "no $v"; return; fi
    python3 - "$v" "$name" "$W" "$@" <<'PY'
import json, sys, yaml
path, name, W, exprs = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4:]
with open(path) as f:
    d = yaml.safe_load(f)
def check(cid):
    return next((c for c in d.get("checks") or [] if c["id"] == cid), {})
def findings(cid):
    return check(cid).get("findings") or []
def fails():
    return sorted(f'{c["id"]}/{x["code"]}' for c in d.get("checks") or []
                  for x in c.get("findings") or [] if x.get("status") == "fail")
def tcp():
    return next((c for c in d.get("collectives") or [] if c.get("backend") == "tcp"), {})
def dump(x):
    return json.dumps(x, default=str)
shown = False
for e in exprs:
    try:
        r, err = eval(e), ""
    except Exception as x:
        r, err = False, repr(x)
    if r is True:
        print(f"ok - {name}: {e}")
        continue
    got = ""
    if not shown:  # what the verdict says, once per rank
        got = json.dumps({"verdict": d.get("verdict"), "fails": fails(),
                          "rendezvous": [(x.get("code"), x.get("status"), x.get("message", "")[:200])
                                         for x in findings("rendezvous")],
                          "tcpRanks": tcp().get("ranks"), "culprits": d.get("culprits")},
                         default=str)[:900]
        shown = True
    print(f"not ok - {name}: {e}: {err or r}" + (f" (verdict: {got})" if got else ""))
PY
}

# the run went as if no stranger had come: every rank in it, nothing failing, nobody blamed
# (a slow link on a busy machine may warn: that is not the stranger's doing, and no fail is)
HEALTHY=('d["verdict"] in ("pass", "warn")' 'fails() == []'
    'check("rendezvous")["status"] in ("pass", "warn")'
    'check("collective.tcp")["status"] in ("pass", "warn")'
    'tcp()["ranks"] == W' 'd["fleet"]["ranks"] == W' 'd["culprits"] == []')
# rank 0 counted the refused JOIN from ADDRESS in its evidence (True in a dry run)
refused_seen() {
    if [ -n "${ADVERSARY_DRY:-}" ]; then echo True; return; fi
    echo "check(\"rendezvous\")[\"evidence\"].get(\"refusedJoins\", 0) >= 1 and \"$1\" in check(\"rendezvous\")[\"evidence\"].get(\"lastRefused\", \"\")"
}
# ... and the stranger at ADDRESS shows at most as a warning that names its address
only_warns() {
    echo "all(x[\"status\"] in (\"warn\", \"pass\") and \"$1\" in dump(x) for x in findings(\"rendezvous\"))"
}

# ---- c1. a stranger's JOIN for rank 3 (wrong MAC) before the real rank 3 arrives
sc_c1() {
    scenario c1-join-before 4 30
    local r
    for r in 0 1 2; do launch "$r"; done
    if wait_for_text "$T/$SC/out0" 'rank 1 .*joined' 20 &&
        wait_for_text "$T/$SC/out0" 'rank 2 .*joined' 20; then
        attack "$T/$SC/stranger" join --to "127.0.0.1:$PORT" --src 127.0.0.66 --rank 3 \
            --world 4 --pod trainer-3 --node node-3
        ok "c1: stranger from 127.0.0.66 claimed rank 3 ($(cut -c1-160 "$T/$SC/stranger"))"
    else notok "c1: ranks 1 and 2 joined rank 0" "$(tail -n 2 "$T/$SC/out0" | tr '\n' '|')"; fi
    sleep 1 # time for rank 0 to act on the claim, had it counted
    launch 3
    finish 0 1 2 3
    expect 0 0 "$(refused_seen 127.0.0.66)"
    for r in 0 1 2 3; do expect "$r" 0 "${HEALTHY[@]}" "$(only_warns 127.0.0.66)"; done
}

# ---- c2. the same claim after the real rank 2 has joined
sc_c2() {
    scenario c2-join-after 4 30
    local r
    for r in 0 1 2; do launch "$r"; done
    if wait_for_text "$T/$SC/out0" 'rank 2 .*joined' 20; then
        attack "$T/$SC/stranger" join --to "127.0.0.1:$PORT" --src 127.0.0.67 --rank 2 \
            --world 4 --pod trainer-2 --node node-2
        ok "c2: stranger from 127.0.0.67 claimed rank 2 ($(cut -c1-160 "$T/$SC/stranger"))"
    else notok "c2: rank 2 joined rank 0" "$(tail -n 2 "$T/$SC/out0" | tr '\n' '|')"; fi
    launch 3
    finish 0 1 2 3
    expect 0 0 "$(refused_seen 127.0.0.67)"
    for r in 0 1 2 3; do expect "$r" 0 "${HEALTHY[@]}" "$(only_warns 127.0.0.67)"; done
}

# ---- c3. a replayed JOIN: rank 1 joins through a relay that keeps a copy of its JOIN
# (a real frame with a valid MAC for that connection); the copy is replayed (a) in the same
# run after rank 1 joined and (b) in a later run with the same token, before rank 1 arrives
sc_c3() {
    scenario c3-replay-same-run 3 30
    local relay r frame="$T/join-rank1.frame"
    relay=$(freeport)
    helper relay proxy --listen "127.0.0.1:$relay" --to "127.0.0.1:$PORT" --capture "$frame" \
        --seconds 60
    local rpid=$SPID
    wait_for_text "$T/$SC/relay" 'listening' 10
    launch 0
    wait_for_text "$T/$SC/out0" 'listening on port' 20
    launch 1 "$relay"
    if wait_for_text "$T/$SC/relay" 'saved a JOIN' 20 &&
        wait_for_text "$T/$SC/out0" 'rank 1 .*joined' 20; then
        attack "$T/$SC/replay" replay --to "127.0.0.1:$PORT" --src 127.0.0.77 --frame "$frame"
        if grep -q 'answered: ROSTER' "$T/$SC/replay"; then
            notok "c3: the replayed JOIN is refused" "$(cat "$T/$SC/replay")"
        else ok "c3: the replayed JOIN is refused ($(cut -c1-160 "$T/$SC/replay"))"; fi
    else notok "c3: rank 1 joined through the relay" "$(tail -n 3 "$T/$SC/relay" | tr '\n' '|')"; fi
    launch 2
    finish 0 1 2
    stop "$rpid"
    expect 0 0 "$(refused_seen 127.0.0.77)"
    for r in 0 1 2; do expect "$r" 0 "${HEALTHY[@]}" "$(only_warns 127.0.0.77)"; done

    [ -s "$frame" ] || { notok "c3: a JOIN captured for the later run"; return; }
    scenario c3-replay-later-run 3 30
    launch 0
    launch 2
    if wait_for_text "$T/$SC/out0" 'rank 2 .*joined' 20; then
        attack "$T/$SC/replay" replay --to "127.0.0.1:$PORT" --src 127.0.0.78 --frame "$frame"
        if grep -q 'answered: ROSTER' "$T/$SC/replay"; then
            notok "c3: the JOIN of an earlier run is refused" "$(cat "$T/$SC/replay")"
        else ok "c3: the JOIN of an earlier run is refused ($(cut -c1-160 "$T/$SC/replay"))"; fi
    else notok "c3: rank 2 joined rank 0" "$(tail -n 2 "$T/$SC/out0" | tr '\n' '|')"; fi
    sleep 1
    launch 1
    finish 0 1 2
    expect 0 0 "$(refused_seen 127.0.0.78)"
    for r in 0 1 2; do expect "$r" 0 "${HEALTHY[@]}" "$(only_warns 127.0.0.78)"; done
}

# ---- c4. 2,000 unauthenticated connections during a 3-rank run: 1,000 start a JOIN that fits
# the limit before authentication (30,000 of 32 KiB) and trickle the rest, so rank 0 must hold
# them until the cap or the deadline lets them go; 1,000 announce a 256 KiB JOIN. Both reopen
# what rank 0 closes, for 30 s. Rank 0's VmHWM over the first 6 s of the flood (before the
# ranks come) must stay within RSS_BOUND_MIB of its VmRSS before it; then the ranks join
# through the flood. The whole run's peak is shown.
RSS_BOUND_MIB=32
sc_c4() {
    if [ "$(ulimit -n)" -lt 2100 ]; then
        skip "c4: 2,000 slow JOINs" "needs 2,100 file descriptors (ulimit -n is $(ulimit -n))"
        return
    fi
    scenario c4-slow-joins 3 45
    # ASan keeps freed blocks in a quarantine (256 MiB by default) that would count in RSS
    # as if live; a small one makes the peak reflect what rank 0 holds
    local -x ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}:quarantine_size_mb=4"
    launch 0
    wait_for_text "$T/$SC/out0" 'listening on port' 20 ||
        notok "c4: rank 0 listens" "$(tail -n 2 "$T/$SC/out0")"
    sleep 0.5
    local base
    base=$(vm "${PID[0]}")
    helper rss rss --pid "${PID[0]}" --seconds 90
    local mpid=$SPID
    stranger flood flood --to "127.0.0.1:$PORT" --src 127.0.0.88 --count 1000 --mode slow \
        --claim 30000 --fill 29000 --reopen --budget 100000 --seconds 30
    local fpid=$SPID
    stranger flood2 flood --to "127.0.0.1:$PORT" --src 127.0.0.89 --count 1000 --mode slow \
        --fill 250000 --reopen --budget 100000 --seconds 30
    local f2pid=$SPID
    # the floods run on their own for a while: a slower machine opens fewer connections in
    # it, which can only lower the peak, never raise it; then the ranks join while the floods
    # go on
    sleep 6
    local hwm_flood
    hwm_flood=$(awk '/^VmHWM:/ {print $2}' "/proc/${PID[0]}/status" 2>/dev/null)
    launch 1
    launch 2
    finish 0 1 2
    stop "$fpid"
    stop "$f2pid"
    wait "$mpid" 2>/dev/null
    local hwm rss
    read -r _ hwm rss <"$T/$SC/rss"
    local grew=$(((${hwm_flood:-0} - base) / 1024))
    local fl
    fl="$(tail -n 1 "$T/$SC/flood" | cut -c1-200) | $(tail -n 1 "$T/$SC/flood2" | cut -c1-200)"
    if [ "${hwm_flood:-0}" -gt 0 ] && [ "$grew" -lt "$RSS_BOUND_MIB" ]; then
        ok "c4: rank 0's peak RSS grew ${grew} MiB (< $RSS_BOUND_MIB MiB) over its baseline of $((base / 1024)) MiB under 2,000 stranger connections (whole run: VmHWM $((hwm / 1024)) MiB)"
    else
        notok "c4: rank 0's peak RSS grows < $RSS_BOUND_MIB MiB under 2,000 stranger connections" \
            "VmHWM $((${hwm_flood:-0} / 1024)) MiB, baseline VmRSS $((base / 1024)) MiB: +${grew} MiB; strangers: $fl"
    fi
    echo "# c4 strangers: $fl"
    local dropped='True'
    [ -n "${ADVERSARY_DRY:-}" ] || dropped='check("rendezvous")["evidence"]["droppedConnections"] >= 100'
    expect 0 0 "${HEALTHY[@]}" "$dropped"
    for r in 1 2; do expect "$r" 0 "${HEALTHY[@]}"; done
}

# mesh_case NAME NOFILE IDLE GARBAGE SRC: IDLE idle and GARBAGE garbage connections from SRC on
# rank 1's data port during the mesh, rank 1 under `ulimit -n NOFILE` ("" for none). Rank 2
# joins through a relay that holds rank 0's answers back for 5 s, so ranks 0 and 1 wait in the
# mesh phase for it: rank 1 must wait without spinning while the strangers sit on its port,
# and still take rank 2's data connection.
mesh_case() {
    local name=$1 nofile=$2 idle=$3 garbage=$4 src=$5
    scenario "$name" 3 60
    local relay r
    relay=$(freeport)
    helper relay proxy --listen "127.0.0.1:$relay" --to "127.0.0.1:$PORT" \
        --capture "$T/$SC/join2.frame" --hold-after-hello 5 --seconds 90
    local rpid=$SPID
    wait_for_text "$T/$SC/relay" 'listening' 10
    launch 0
    launch 1 "$PORT" "$nofile"
    local dport=
    if wait_for_text "$T/$SC/out1" 'joined rank 0' 20; then
        dport=$(ss -Hltnp 2>/dev/null | grep "pid=${PID[1]}," | awk '{print $4}' | sed 's/.*://' | head -n 1)
    fi
    if [ -z "$dport" ]; then
        notok "$name: rank 1's data port found (ss -ltnp)" "pid ${PID[1]}"
        finish 0 1
        stop "$rpid"
        return
    fi
    ok "$name: rank 1's data port is $dport (ss -ltnp)"
    stranger idle flood --to "127.0.0.1:$dport" --src "$src" --count "$idle" --mode idle --seconds 40
    local ipid=$SPID gpid=
    wait_for_text "$T/$SC/idle" 'connections open' 15
    if [ "$garbage" -gt 0 ]; then
        stranger garbage flood --to "127.0.0.1:$dport" --src "$src" --count "$garbage" \
            --mode garbage --seconds 40
        gpid=$SPID
    fi
    sleep 0.5
    launch 2 "$relay"
    if wait_for_text "$T/$SC/out1" 'ranks in the run after' 30; then
        local b
        b=$(busy "${PID[1]}" 3)
        local run cpu vol nonvol
        read -r run cpu vol nonvol <<<"$b"
        if ! spins "$b"; then
            ok "$name: rank 1 idles in the mesh while $((idle + garbage)) strangers sit on its data port (runnable $run %, CPU $cpu % of 3 s, $vol sleeps, $nonvol preemptions)"
        else
            notok "$name: rank 1 idles in the mesh while $((idle + garbage)) strangers sit on its data port" \
                "runnable $run % of 3 s (CPU $cpu %, $vol sleeps, $nonvol preemptions): a busy loop"
        fi
    else notok "$name: rank 1 received the roster" "$(tail -n 2 "$T/$SC/out1" | tr '\n' '|')"; fi
    finish 0 1 2
    stop "$ipid"
    stop "$gpid"
    stop "$rpid"
    for r in 0 1 2; do expect "$r" 0 "${HEALTHY[@]}"; done
}

# ---- c5. 40 idle and 10 garbage connections on rank 1's data port (more than its 32
# pending slots)
sc_c5() { mesh_case c5-data-port "" 40 10 127.0.0.90; }

# ---- c7. rank 1 out of file descriptors in the mesh: 60 idle connections against
# ulimit -n 40
sc_c7() { mesh_case c7-data-no-fds 40 60 0 127.0.0.92; }

# ---- c6. rank 0 out of file descriptors: 100 idle connections against ulimit -n 64
# ---- c8. peer bytes on terminals and logs
sc_c8() {
    scenario c8-hostile-names 3 12
    local r forged='2026-01-01T00:00:00Z preflight: verdict pass, all ranks joined'
    FMT=human launch 0
    FMT=human launch 1
    if wait_for_text "$T/$SC/out0" 'rank 1 .*joined' 20; then
        attack "$T/$SC/stranger" join --to "127.0.0.1:$PORT" --src 127.0.0.95 --rank 2 \
            --world 3 --pod $'trainer-2\033[2J\033]0;owned\a\r\n'"$forged" \
            --node $'node-2\r\033[31mFAKE'
        ok "c8: stranger from 127.0.0.95 claimed rank 2 with hostile names"
    else notok "c8: rank 1 joined rank 0" "$(tail -n 2 "$T/$SC/out0" | tr '\n' '|')"; fi
    finish 0 1
    for r in 0 1; do
        if LC_ALL=C grep -q $'[\x01-\x08\x0b-\x1f\x7f]' "$T/$SC/out$r"; then
            notok "c8: rank $r's log and human verdict hold no raw control byte" \
                "$(LC_ALL=C grep -n $'[\x01-\x08\x0b-\x1f\x7f]' "$T/$SC/out$r" | head -3 | cat -v)"
        else ok "c8: rank $r's log and human verdict hold no raw control byte"; fi
        if grep -qF -- "$forged" "$T/$SC/out$r" && grep -E "^ *$forged" "$T/$SC/out$r" >/dev/null; then
            notok "c8: rank $r: the forged line does not start a line" "$(grep -F -- "$forged" "$T/$SC/out$r" | head -2)"
        else ok "c8: rank $r: the forged line does not start a line"; fi
    done
    if [ -z "${ADVERSARY_DRY:-}" ]; then
        check "c8: rank 0 shows the claim, escaped" grep -qF 'trainer-2\x1b[2J' "$T/$SC/out0"
    fi
}

# ---- c9. an unauthenticated REJECT is not believed
sc_c9() {
    scenario c9-fake-root 2 25
    local fpid
    if [ -n "${ADVERSARY_DRY:-}" ]; then fpid=; else
        helper fakeroot fakeroot --listen "127.0.0.1:$PORT" --seconds 4 --world 2
        fpid=$SPID
        wait_for_text "$T/$SC/fakeroot" 'listening' 10
    fi
    launch 1
    [ -n "$fpid" ] && wait "$fpid" 2>/dev/null
    launch 0
    finish 0 1
    if [ -z "${ADVERSARY_DRY:-}" ]; then
        if grep -qE 'answered [1-9][0-9]* JOINs' "$T/$SC/fakeroot"; then
            ok "c9: the fake rank 0 answered rank 1's JOIN ($(tail -n 1 "$T/$SC/fakeroot"))"
        else notok "c9: the fake rank 0 answered rank 1's JOIN" "$(cat "$T/$SC/fakeroot")"; fi
        check "c9: rank 1 said it did not believe the REJECT" grep -q 'fails the token check: not believed' "$T/$SC/out1"
    fi
    for r in 0 1; do expect "$r" 0 "${HEALTHY[@]}"; done
}

sc_c6() {
    scenario c6-no-fds 2 30
    launch 0 "$PORT" 64
    wait_for_text "$T/$SC/out0" 'listening on port' 20 ||
        notok "c6: rank 0 listens" "$(tail -n 2 "$T/$SC/out0")"
    stranger idle flood --to "127.0.0.1:$PORT" --src 127.0.0.95 --count 100 --mode idle --seconds 12
    local ipid=$SPID
    wait_for_text "$T/$SC/idle" 'connections open' 15
    sleep 0.5
    local b
    b=$(busy "${PID[0]}" 3)
    local run cpu vol nonvol
    read -r run cpu vol nonvol <<<"$b"
    if ! spins "$b"; then
        ok "c6: rank 0 at its descriptor limit does not spin (runnable $run %, CPU $cpu % of 3 s, $vol sleeps, $nonvol preemptions)"
    else
        notok "c6: rank 0 at its descriptor limit does not spin" \
            "runnable $run % of 3 s (CPU $cpu %, $vol sleeps, $nonvol preemptions): a busy loop"
    fi
    launch 1
    finish 0 1
    stop "$ipid"
    if [ -z "${ADVERSARY_DRY:-}" ]; then
        if grep -q 'out of file descriptors' "$T/$SC/out0"; then
            ok "c6: rank 0 ran out of descriptors and shed a stranger to accept again"
        else notok "c6: rank 0 ran out of descriptors" "$(grep -m2 dropped "$T/$SC/out0" | tr '\n' '|')"; fi
    fi
    for r in 0 1; do expect "$r" 0 "${HEALTHY[@]}"; done
}

[ -n "${ADVERSARY_DRY:-}" ] && echo "# dry run: every case without its stranger"
for s in c1 c2 c3 c4 c5 c6 c7 c8 c9; do
    [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $s "* ]] || continue
    "sc_$s"
done
