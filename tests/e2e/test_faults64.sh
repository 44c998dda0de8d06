#!/usr/bin/env bash
# The rendezvous test's faults (test_rendezvous.sh: a late pod, a missing one, one killed or
# frozen in the middle of the all-reduce) at 64 ranks, where collective.tcp runs the grid
# all-reduce (docs/tcp-allreduce.md: 8x8) instead of the ring. Every rank is a real
# `preflight run` on 127.0.0.1 (--rank, --world-size, --coordinator, --port; a free port per
# scenario, as in test_tcp_grid.sh). Each scenario plants one fault on one rank and asserts,
# for every other rank: its exit code, the finding codes, that the culprits name the planted
# rank and no other, that it ended before its --timeout plus a margin (no hang), and that no
# sanitizer spoke.
#   a-late     rank 37 starts only once rank 0 has seen the 63 others join, 3 s later still:
#              every rank passes (exit 0), the grid says correct
#   b-missing  rank 41 never starts: the others fail at the join deadline (exit 5, peer),
#              missing-ranks and the one culprit name rank 41. The world is 65 ranks, so
#              that the 64 that met still run the grid (63 would run the ring)
#   c-killed   rank 27 SIGKILLed while the grid moves data: peer-lost, culprit 27, exit 5
#   d-frozen   rank 50 SIGSTOPped while the grid moves data (killed at the end): the others
#              fail on time, exit 5, peer-lost (no answer from it) and culprit 50
# "While the grid moves data" is read, not slept: the victim's progress line says the
# all-reduce started, and its TCP sockets (ss -tie) have sent more than 2 MiB, four of the
# all-reduce's chunks, far more than every message before it (the rendezvous, the mesh's
# hellos). The all-reduce of c and d is sized (16 MiB, 1,000 iterations: about 32 GiB to
# send a rank) so that it cannot end before its own deadline: the fault always lands in the
# middle of it.
source "$(dirname "$0")/lib.sh"

N=64
MARGIN=15 # seconds a rank may take past its --timeout (64 sanitizer exits on 2 cores)
EMPTY=$T/empty # a root with nothing in it: the local checks have nothing to look at
mkdir -p "$EMPTY"
printf 'tcp: {messageBytes: 262144, iterations: 1}\n' >"$T/small.yaml"
# the join deadline of b: 25 s, far from --timeout, so the grid among those who met has time
printf 'tcp: {messageBytes: 262144, iterations: 1}\nrendezvous: {timeoutSeconds: 25}\n' \
    >"$T/join25.yaml"
BIG_BYTES=16777216
BUSY_BYTES=2097152
printf 'tcp: {messageBytes: %d, iterations: 1000}\n' "$BIG_BYTES" >"$T/big.yaml"

STOPPED=
cleanup() {
    # a frozen rank left behind by a failed step: thaw it so that it can die
    if [ -n "$STOPPED" ]; then kill -KILL "$STOPPED" 2>/dev/null; kill -CONT "$STOPPED" 2>/dev/null; fi
    [ -n "${KEEP_TMP:-}" ] && echo "# kept $T" || rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM


SC='' PORT='' TO='' CFG='' WORLD=''
# scenario NAME TIMEOUT CONFIG WORLD: the next ranks belong to this scenario
scenario() {
    SC=$1 TO=$2 CFG=$3 WORLD=$4
    PORT=$(free_port)
    mkdir -p "$T/$SC"
}

# launch R: rank R's `preflight run` in the background; its output goes to $T/$SC/outR, its
# verdict to vR.yaml, its pid to pidR (the preflight process itself), its exit code and wall
# time in ms to resR
launch() {
    local r=$1 d="$T/$SC"
    (
        s=$(date +%s%N)
        cd "$T" && timeout $((TO + 120)) sh -c 'echo $$ >"$0"; exec "$@"' "$d/pid$r" \
            env -i PATH="$PATH" HOME=/nonexistent NO_COLOR=1 \
            ASAN_OPTIONS="${ASAN_OPTIONS:-}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-}" \
            "$PREFLIGHT" run --root "$EMPTY" --config "$CFG" --rank "$r" \
            --world-size "$WORLD" --coordinator 127.0.0.1 --port "$PORT" --timeout "$TO" \
            --format yaml --verdict "$d/v$r.yaml" >"$d/out$r" 2>&1
        rc=$?
        echo "$rc $((($(date +%s%N) - s) / 1000000))" >"$d/res$r"
    ) 2>/dev/null & # (the shell's word on a rank killed on purpose)
}

# pid_of R: rank R's preflight process (waits up to 10 s for its pid file)
pid_of() {
    local k
    for ((k = 0; k < 100; k++)); do
        [ -s "$T/$SC/pid$1" ] && { cat "$T/$SC/pid$1"; return 0; }
        sleep 0.1
    done
    return 1
}

# sent PID: the bytes process PID's TCP sockets have sent and seen acknowledged (its
# sockets' inodes from /proc/PID/fd; ss -tie: a socket's inode on its first line, its
# counters on the next). Not ss -p, which reads every process's descriptors: seconds with
# 64 ranks on a busy host.
sent() {
    local inos
    inos=$(readlink "/proc/$1/fd/"* 2>/dev/null | sed -n 's/^socket:\[\([0-9]*\)\]$/\1/p' | tr '\n' ' ')
    ss -tieH 2>/dev/null | awk -v inos=" $inos " '
        match($0, /ino:[0-9]+/) { on = index(inos, " " substr($0, RSTART + 4, RLENGTH - 4) " ") > 0 }
        on && match($0, /bytes_acked:[0-9]+/) { s += substr($0, RSTART + 12, RLENGTH - 12) }
        END { print s + 0 }'
}

# busy R SECONDS: until rank R's all-reduce has started and its sockets sent more than
# BUSY_BYTES (SENT: how many); false when SECONDS pass first
busy() {
    local r=$1 pid end=$((SECONDS + $2))
    SENT=0
    wait_for_text "$T/$SC/out$r" 'tcp all-reduce: ' "$2" || return 1
    pid=$(pid_of "$r") || return 1
    while [ "$SECONDS" -lt "$end" ]; do
        SENT=$(sent "$pid")
        [ "$SENT" -gt "$BUSY_BYTES" ] && return 0
        sleep 0.1
    done
    return 1
}

# expect WHO RC EXPR...: every rank of WHO (a list) exited RC, within --timeout + MARGIN, and
# said nothing of a sanitizer, and every Python expression holds over each one's verdict
# (d; check(id); codes(id); finding(id, code): its messages joined by " | "; culprits(): the
# culprits' ranks; tcp(): the TCP entry of collectives; ranks_in(text): the ranks it names).
# One line per assertion for all the ranks; a failure lists the first few that broke it.
expect() {
    local who=$1 rc=$2
    shift 2
    python3 - "$T/$SC" "$SC" "$who" "$rc" "$(((TO + MARGIN) * 1000))" "$TO" "$@" <<'PY'
import json, os, re, sys, yaml
base, sc, who, want_rc, limit_ms, to = sys.argv[1:7]
exprs = sys.argv[7:]
ranks = [int(x) for x in who.split()]
label = f"{sc}: {len(ranks)} ranks"
def line(ok, what, bad):
    if ok:
        print(f"ok - {label}: {what}")
    else:
        print(f"not ok - {label}: {what}: " + "; ".join(bad[:4])[:900])
res, outs = {}, {}
for r in ranks:
    try:
        with open(f"{base}/res{r}") as f:
            rc, ms = f.read().split()
        res[r] = (rc, int(ms))
    except (OSError, ValueError):
        res[r] = ("none", 0)
    try:
        with open(f"{base}/out{r}", errors="replace") as f:
            outs[r] = f.read()
    except OSError:
        outs[r] = ""
bad = [f"rank {r}: exit {res[r][0]} ({outs[r].strip().splitlines()[-1:] or ''})"
       for r in ranks if res[r][0] != want_rc]
line(not bad, f"exit {want_rc}", bad)
bad = [f"rank {r}: {res[r][1]} ms" for r in ranks if res[r][1] > int(limit_ms) or res[r][0] == "none"]
slowest = max(ms for _, ms in res.values())
line(not bad, f"ended within --timeout {to} s + margin (slowest {slowest} ms)", bad)
pat = re.compile(r"AddressSanitizer|LeakSanitizer|runtime error:")
bad = [f"rank {r}: " + next(l for l in outs[r].splitlines() if pat.search(l))
       for r in ranks if pat.search(outs[r])]
line(not bad, "no sanitizer report", bad)
docs = {}
for r in ranks:
    try:
        with open(f"{base}/v{r}.yaml") as f:
            docs[r] = yaml.safe_load(f)
    except (OSError, yaml.YAMLError) as x:
        docs[r] = None
bad = [f"rank {r}" for r in ranks if not isinstance(docs[r], dict)]
line(not bad, "verdict written", bad)
for e in exprs:
    bad = []
    for r in ranks:
        d = docs[r]
        if not isinstance(d, dict):
            continue
        def check(cid):
            return next((c for c in d.get("checks", []) if c["id"] == cid), {})
        def codes(cid):
            return sorted(x["code"] for x in (check(cid).get("findings") or []))
        def finding(cid, code):
            return " | ".join(x.get("message", "") for x in check(cid).get("findings") or []
                              if x["code"] == code)
        def culprits():
            return sorted(c.get("rank") for c in d.get("culprits") or [])
        def tcp():
            return next((c for c in d.get("collectives") or [] if c.get("backend") == "tcp"), {})
        def ranks_in(text):
            return sorted({int(x) for x in re.findall(r"\brank (\d+)", text)})
        try:
            v, err = eval(e), ""
        except Exception as x:
            v, err = False, repr(x)
        if v is not True:
            got = {"verdict": d.get("verdict"), "class": d.get("failureClass"),
                   "rendezvous": [check("rendezvous").get("status"), codes("rendezvous")],
                   "collective.tcp": [check("collective.tcp").get("status"),
                                      codes("collective.tcp")],
                   "culprits": culprits(),
                   "peer-lost": finding("collective.tcp", "peer-lost")[:200]}
            bad.append(f"rank {r}: {err or v} {json.dumps(got)}")
    line(not bad, e, bad)
PY
}

# every rank of 0..N-1 but those given
others() { seq 0 $((WORLD - 1)) | grep -vxF -f <(printf '%s\n' "$@") | tr '\n' ' '; }
# waits for every rank launched so far
finish() { wait; }

HEALTHY=('d["verdict"] in ("pass", "warn")' 'check("rendezvous")["status"] == "pass"'
    'check("collective.tcp")["status"] == "pass"' 'tcp()["correct"] is True'
    'tcp()["ranks"] == 64' 'check("collective.tcp")["evidence"]["algorithm"] == "grid 8x8"'
    'culprits() == []')

# ---- a. rank 37 late: the others wait for it
sc_a() {
    scenario a-late 180 "$T/small.yaml" $N
    local r
    for r in $(others 37); do launch "$r"; done
    if wait_for_text "$T/$SC/out0" '\(63 of 64\)' 120; then
        ok "a-late: rank 0 saw the 63 others join before rank 37 started"
    else notok "a-late: rank 0 saw the 63 others join" "$(tail -n 2 "$T/$SC/out0" | tr '\n' '|')"; fi
    sleep 3 # the lateness itself; it decides nothing, rank 0 already waits for rank 37 alone
    launch 37
    finish
    expect "$(seq 0 63 | tr '\n' ' ')" 0 "${HEALTHY[@]}"
    check "a-late: rank 37 joined last (64 of 64)" \
        grep -qE 'rank 37 \(.*\) joined from .* \(64 of 64\)' "$T/$SC/out0"
}

# ---- b. rank 41 of 65 never starts: the 64 others fail on time and name it
sc_b() {
    scenario b-missing 120 "$T/join25.yaml" 65
    local r
    for r in $(others 41); do launch "$r"; done
    finish
    expect "$(others 41)" 5 'd["verdict"] == "fail"' 'd["failureClass"] == "peer"' \
        '"missing-ranks" in codes("rendezvous")' \
        'ranks_in(finding("rendezvous", "missing-ranks")) == [41]' 'culprits() == [41]' \
        'check("collective.tcp")["status"] == "pass"' 'tcp()["ranks"] == 64' \
        'check("collective.tcp")["evidence"]["algorithm"] == "grid 8x8"'
}

# ---- c. rank 27 killed (SIGKILL) while the grid moves data
sc_c() {
    scenario c-killed 90 "$T/big.yaml" $N
    local r
    for r in $(seq 0 63); do launch "$r"; done
    if busy 27 120; then
        kill -KILL "$(pid_of 27)"
        echo "# c-killed: rank 27 killed at $(date +%T), after it sent $SENT bytes"
        ok "c-killed: rank 27 killed in the middle of the all-reduce"
    else notok "c-killed: rank 27 reached the all-reduce" "$(tail -n 2 "$T/$SC/out27" | tr '\n' '|')"; fi
    finish
    expect "$(others 27)" 5 'd["verdict"] == "fail"' 'd["failureClass"] == "peer"' \
        '"peer-lost" in codes("collective.tcp")' \
        'codes("collective.tcp").count("peer-lost") == 1' \
        'finding("collective.tcp", "peer-lost").startswith("rank 27 ")' 'culprits() == [27]'
}

# ---- d. rank 50 frozen (SIGSTOP) while the grid moves data; killed once the others ended
sc_d() {
    scenario d-frozen 90 "$T/big.yaml" $N
    local r pid
    for r in $(seq 0 63); do launch "$r"; done
    if busy 50 120; then
        pid=$(pid_of 50)
        kill -STOP "$pid" && STOPPED=$pid
        echo "# d-frozen: rank 50 frozen at $(date +%T), after it sent $SENT bytes"
        ok "d-frozen: rank 50 frozen in the middle of the all-reduce"
    else notok "d-frozen: rank 50 reached the all-reduce" "$(tail -n 2 "$T/$SC/out50" | tr '\n' '|')"; fi
    # the others end on their own; rank 50 stays frozen until they did
    local end=$((SECONDS + TO + MARGIN + 10)) ended
    while [ "$SECONDS" -lt "$end" ]; do
        ended=("$T/$SC"/res*)
        [ -e "${ended[0]}" ] && [ "${#ended[@]}" -ge 63 ] && break
        sleep 0.25
    done
    if [ -n "$STOPPED" ]; then kill -KILL "$STOPPED"; kill -CONT "$STOPPED"; STOPPED=; fi
    finish
    expect "$(others 50)" 5 'd["verdict"] == "fail"' 'd["failureClass"] == "peer"' \
        'codes("collective.tcp").count("peer-lost") == 1' \
        'finding("collective.tcp", "peer-lost").startswith("rank 50 ")' \
        '"no answer within" in finding("collective.tcp", "peer-lost")' 'culprits() == [50]'
}

# ONLY="c d" runs those scenarios alone
for s in a b c d; do
    [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $s "* ]] || continue
    "sc_$s"
done
