#!/usr/bin/env bash
# collective.nccl without a GPU: how `preflight run` handles what libcuda and libnccl return.
#
# TEST DOUBLES, FOR ERROR HANDLING ONLY. The libraries built here from tests/e2e/nccl-double/
# export the CUDA driver and NCCL symbols pkg/dl loads (through PREFLIGHT_CUDA_LIB and
# PREFLIGHT_NCCL_LIB) and return failures chosen per run: an init error, an asynchronous error
# during init, an init that never completes (preflight must abort it at its deadline), a wrong
# element, a log that names NET/Socket or IB without GPUDirect RDMA. Their "GPUs" are host
# memory and their "collectives" are loops on the host, timed by a virtual clock, so the
# bandwidth checked here is arithmetic on made-up times. Passing these tests says preflight
# reacts correctly to those answers; it says nothing about whether the GPU path works on real
# GPUs. That is tests/gpu/e2e.sh's job, on a machine with a GPU.
#
# Also: with no libcuda at all the check skips and says why.
source "$(dirname "$0")/lib.sh"

D="$PREFLIGHT_SRC/tests/e2e/nccl-double"
CC=${CC:-cc}
if ! $CC -std=c11 -O1 -g -Wall -Wextra -Werror -shared -fPIC -o "$T/libcuda-double.so" "$D/cuda.c" \
    2>"$T/cc.err" ||
    ! $CC -std=c11 -O1 -g -Wall -Wextra -Werror -shared -fPIC -o "$T/libnccl-double.so" "$D/nccl.c" \
        2>>"$T/cc.err"; then
    notok "nccl: the test doubles build" "$(head -c 600 "$T/cc.err")"
    exit 0
fi
ok "nccl: the test doubles build"

mkdir -p "$T/root"
cat >"$T/base.yaml" <<'EOF'
messageBytes: 1048576
tcp: {messageBytes: 1048576, iterations: 2}
nccl: {iterations: 4, warmup: 1, timeoutSeconds: 3}
EOF

# gpu NAME CONFIG [VAR=VALUE...] [-- ARGS...]: `preflight run` as rank 0 of 1 with the doubles;
# verdict in $T/NAME/v.yaml (NCCL's log is kept next to it), exit code in $T/NAME/rc, seconds
# in $T/NAME/secs
gpu() {
    local name=$1 config=$2
    shift 2
    local vars=() args=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do vars+=("$1"); shift; done
    [ $# -gt 0 ] && shift
    args=("$@")
    [ ${#args[@]} -eq 0 ] && args=(--rank 0 --world-size 1 --coordinator 127.0.0.1 --port 29851)
    mkdir -p "$T/$name"
    local t0 t1
    t0=$(date +%s.%N)
    env -i PATH="$PATH" HOME=/nonexistent NO_COLOR=1 \
        ASAN_OPTIONS="${ASAN_OPTIONS:-}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-}" \
        PREFLIGHT_CUDA_LIB="$T/libcuda-double.so" PREFLIGHT_NCCL_LIB="$T/libnccl-double.so" \
        DOUBLE_GPUS=4 "${vars[@]}" \
        timeout 60 "$PREFLIGHT" run --root "$T/root" --config "$config" --format yaml \
        --verdict "$T/$name/v.yaml" --timeout 40 "${args[@]}" >"$T/$name/out" 2>"$T/$name/err"
    echo $? >"$T/$name/rc"
    t1=$(date +%s.%N)
    python3 -c "print(round($t1 - $t0, 1))" >"$T/$name/secs"
}

# nccl NAME: "status [codes]" of collective.nccl
nccl() {
    yq "$T/$1/v.yaml" "check('collective.nccl')['status'] + ' [' + ','.join(codes('collective.nccl')) + ']'"
}
# coll NAME EXPR: a Python expression over the verdict's collectives list `c`
coll() { yq "$T/$1/v.yaml" "(lambda c: $2)(d.get('collectives') or [])"; }
msg() { yq "$T/$1/v.yaml" "check('collective.nccl')['message'] + ' | ' + ' | '.join(f['message'] for f in check('collective.nccl').get('findings') or [])"; }
rc_of() { cat "$T/$1/rc"; }
# clean NAME: no sanitizer report on stderr (the doubles are dlopen'ed into the ASan build)
clean() {
    if grep -qE 'AddressSanitizer|LeakSanitizer|runtime error:' "$T/$1/err"; then
        notok "nccl: $1: no sanitizer report" "$(grep -m3 -E 'Sanitizer|runtime error' "$T/$1/err")"
    else
        ok "nccl: $1: no sanitizer report"
    fi
}
contains() { # NAME HAYSTACK NEEDLE
    case "$2" in *"$3"*) ok "$1" ;; *) notok "$1" "'$3' not in: $(printf %s "$2" | head -c 400)" ;; esac
}

# ---- no GPU, no driver: skip with the reason
gpu nolib "$T/base.yaml" PREFLIGHT_CUDA_LIB=/nonexistent/libcuda.so.1
expect_eq "nccl: no libcuda: collective.nccl skips" "$(nccl nolib)" "skip []"
contains "nccl: no libcuda: the reason names libcuda" "$(msg nolib)" "libcuda.so.1 does not load"
expect_eq "nccl: no libcuda: exit 0" "$(rc_of nolib)" 0
gpu nodevice "$T/base.yaml" DOUBLE_CUDA_FAIL=nodevice
expect_eq "nccl: cuInit says no device: skip" "$(nccl nodevice)" "skip []"
contains "nccl: cuInit says no device: the reason" "$(msg nodevice)" "no CUDA device visible"
gpu zero "$T/base.yaml" DOUBLE_GPUS=0
expect_eq "nccl: zero devices: skip" "$(nccl zero)" "skip []"
gpu nonccl "$T/base.yaml" PREFLIGHT_NCCL_LIB=/nonexistent/libnccl.so.2
expect_eq "nccl: no libnccl (and no GPU in /proc): skip" "$(nccl nonccl)" "skip []"
contains "nccl: no libnccl: the reason names libnccl" "$(msg nonccl)" "libnccl.so.2 does not load"
gpu cudainit "$T/base.yaml" DOUBLE_CUDA_FAIL=init
expect_eq "nccl: cuInit fails: init-failed" "$(nccl cudainit)" "fail [init-failed]"
contains "nccl: cuInit fails: the CUDA error is named" "$(msg cudainit)" "CUDA_ERROR_NOT_INITIALIZED"

# ---- the double's happy path: 4 "GPUs" in one pod, 1 MiB, 1000 virtual us per op
gpu happy "$T/base.yaml"
expect_eq "nccl: happy: pass, no findings" "$(nccl happy)" "pass []"
expect_eq "nccl: happy: exit 0" "$(rc_of happy)" 0
expect_eq "nccl: happy: one allreduce entry over 4 ranks, exact" \
    "$(coll happy "[(x['backend'], x['op'], x['ranks'], x['bytes'], x['correct']) for x in c]")" \
    '[["nccl", "allreduce", 4, 1048576, true]]'
# algbw = 1048576 B / 1e9 / 1 ms = 1.048576 GB/s; busbw = algbw x 2(n-1)/n = x 1.5
expect_eq "nccl: happy: algbw and busbw (nccl-tests factor 2(n-1)/n)" \
    "$(coll happy "[(x['timeUs'], x['algbwGBps'], x['busbwGBps']) for x in c]")" '[[1000.0, 1.05, 1.57]]'
expect_eq "nccl: happy: transport and GPUDirect RDMA from the log" \
    "$(coll happy "[(x['transport'], x['gpuDirectRdma']) for x in c]")" '[["IB", true]]'
expect_eq "nccl: happy: HCAs in the evidence" \
    "$(yq "$T/happy/v.yaml" "check('collective.nccl')['evidence']['hcas']")" '["mlx5_0:1/IB", "mlx5_1:1/IB"]'
expect_eq "nccl: happy: NCCL's log kept next to the verdict" \
    "$(yq "$T/happy/v.yaml" "check('collective.nccl')['evidence']['ncclLog']")" "$T/happy/nccl-rank0.log"
check "nccl: happy: the kept log is NCCL's INFO log" grep -q "NCCL INFO Using network IB" "$T/happy/nccl-rank0.log"
expect_eq "nccl: happy: environment has ncclVersion and the CUDA devices" \
    "$(yq "$T/happy/v.yaml" "(d['environment'].get('ncclVersion'), len(d['environment'].get('cudaDevices', [])))")" \
    "('2.28.9', 4)"
clean happy

# two "GPUs": the factor 2(n-1)/n is 1, busbw = algbw
gpu two "$T/base.yaml" DOUBLE_GPUS=2
expect_eq "nccl: 2 ranks: busbw = algbw" \
    "$(coll two "[(x['ranks'], x['algbwGBps'], x['busbwGBps']) for x in c]")" '[[2, 1.05, 1.05]]'

# every collective a workload can ask for, with its own size S and busbw factor
cat >"$T/all.yaml" <<'EOF'
messageBytes: 1048576
tcp: {messageBytes: 1048576, iterations: 2}
nccl: {iterations: 3, warmup: 1, timeoutSeconds: 3}
collectives: [allreduce, allgather, reducescatter, alltoall]
EOF
gpu all "$T/all.yaml"
expect_eq "nccl: allgather, reducescatter, alltoall: pass, exact" "$(nccl all)" "pass []"
# S = count x n x 4 = 1 MiB for each; factor (n-1)/n = 0.75 -> 0.79 GB/s
expect_eq "nccl: every op's bytes, busbw and correctness" \
    "$(coll all "[(x['op'], x['bytes'], x['busbwGBps'], x['correct']) for x in c]")" \
    '[["allreduce", 1048576, 1.57, true], ["allgather", 1048576, 0.79, true], ["reducescatter", 1048576, 0.79, true], ["alltoall", 1048576, 0.79, true]]'
printf 'messageBytes: 1048576\ntcp: {messageBytes: 1048576, iterations: 2}\nnccl: {iterations: 2, timeoutSeconds: 3}\nworkload: fsdp\n' >"$T/fsdp.yaml"
gpu fsdp "$T/fsdp.yaml"
expect_eq "nccl: workload fsdp runs allreduce, allgather, reducescatter" \
    "$(coll fsdp "[x['op'] for x in c]")" '["allreduce", "allgather", "reducescatter"]'
printf 'messageBytes: 1048576\ntcp: {messageBytes: 1048576, iterations: 2}\nnccl: {iterations: 2, timeoutSeconds: 3}\nworkload: moe\n' >"$T/moe.yaml"
gpu moe "$T/moe.yaml"
expect_eq "nccl: workload moe runs allreduce, alltoall" "$(coll moe "[x['op'] for x in c]")" '["allreduce", "alltoall"]'

# ---- wrong data
gpu wrong "$T/base.yaml" DOUBLE_NCCL_FAIL=wrong
expect_eq "nccl: a wrong element: wrong-result" "$(nccl wrong)" "fail [wrong-result]"
expect_eq "nccl: a wrong element: exit 5 (peer)" "$(rc_of wrong)" 5
expect_eq "nccl: a wrong element: the entry says correct: false" "$(coll wrong "[x['correct'] for x in c]")" '[false]'
contains "nccl: a wrong element: names the rank and element" "$(msg wrong)" "1 wrong elements (first on rank 3 (GPU 3) element 0"
clean wrong

# ---- init fails at once
gpu init "$T/base.yaml" DOUBLE_NCCL_FAIL=init
expect_eq "nccl: init error: init-failed" "$(nccl init)" "fail [init-failed]"
expect_eq "nccl: init error: exit 4 (node)" "$(rc_of init)" 4
contains "nccl: init error: NCCL's result and last error in the message" "$(msg init)" \
    "ncclSystemError 2: unhandled system error"
contains "nccl: init error: ncclGetLastError text kept" "$(msg init)" "Connect to 10.0.0.5<43771> failed"
expect_eq "nccl: init error: no collectives entry" "$(coll init "len(c)")" 0
expect_eq "nccl: init error: NCCL's WARN line in the evidence" \
    "$(yq "$T/init/v.yaml" "check('collective.nccl')['evidence']['ncclWarnings'][0]")" \
    "misc/socket.cc:484 socketStartConnect: Connect to 10.0.0.5<43771> failed : Connection refused"
clean init

# ---- an asynchronous error while the non-blocking init runs
gpu async "$T/base.yaml" DOUBLE_NCCL_FAIL=async
expect_eq "nccl: async error during init: init-failed" "$(nccl async)" "fail [init-failed]"
contains "nccl: async error during init: ncclRemoteError named" "$(msg async)" \
    "ncclRemoteError 6: remote process exited or there was a network error"
clean async

# ---- init never completes: aborted at the deadline (nccl.timeoutSeconds: 3)
gpu hang "$T/base.yaml" DOUBLE_NCCL_FAIL=hang
expect_eq "nccl: init hangs: timeout" "$(nccl hang)" "fail [timeout]"
expect_eq "nccl: init hangs: exit 5 (peer: timeout)" "$(rc_of hang)" 5
secs=$(cat "$T/hang/secs")
check "nccl: init hangs: the run ends in bounded time (${secs}s, deadline 3s)" \
    python3 -c "import sys; sys.exit(0 if 3 <= $secs < 20 else 1)"
check "nccl: init hangs: ncclCommAbort was called" grep -q "Abort COMPLETE" "$T/hang/nccl-rank0.log"
contains "nccl: init hangs: the message says the deadline passed" "$(msg hang)" "did not complete within the deadline"
clean hang

# ---- transport verification from the log the double writes
printf 'messageBytes: 1048576\ntcp: {messageBytes: 1048576, iterations: 2}\nnccl: {iterations: 2, timeoutSeconds: 3}\nexpect: {transport: IB}\n' >"$T/ib.yaml"
gpu socket "$T/ib.yaml" DOUBLE_NCCL_NET=Socket
expect_eq "nccl: NET/Socket while expect.transport is IB: socket-fallback" "$(nccl socket)" "fail [socket-fallback]"
expect_eq "nccl: NET/Socket: the entry says Socket, no GDR" \
    "$(coll socket "[(x['transport'], x['gpuDirectRdma']) for x in c]")" '[["Socket", false]]'
contains "nccl: NET/Socket: names the interface" "$(msg socket)" "NCCL chose NET/Socket (eth0:10.0.0.5)"
gpu socketok "$T/base.yaml" DOUBLE_NCCL_NET=Socket
expect_eq "nccl: NET/Socket with no RDMA here and no expectation: pass" "$(nccl socketok)" "pass []"
# a pod with RDMA devices (the node-roce fixture through --root): NET/Socket is a fallback,
# unless expect.transport says Socket
"$FIX/materialize.sh" "$FIX/node-roce" "$T/roce" >/dev/null 2>&1
gpu sockhca "$T/base.yaml" DOUBLE_NCCL_NET=Socket -- --root "$T/roce" --rank 0 --world-size 1 \
    --coordinator 127.0.0.1 --port 29851
expect_eq "nccl: NET/Socket in a pod with HCAs: socket-fallback" "$(nccl sockhca)" "fail [socket-fallback]"
contains "nccl: NET/Socket in a pod with HCAs: says so" "$(msg sockhca)" "while this pod has RDMA devices"
printf 'messageBytes: 1048576\ntcp: {messageBytes: 1048576, iterations: 2}\nnccl: {iterations: 2, timeoutSeconds: 3}\nexpect: {transport: Socket}\n' >"$T/sock.yaml"
gpu sockwanted "$T/sock.yaml" DOUBLE_NCCL_NET=Socket -- --root "$T/roce" --rank 0 --world-size 1 \
    --coordinator 127.0.0.1 --port 29851
expect_eq "nccl: NET/Socket with HCAs but expect.transport Socket: pass" "$(nccl sockwanted)" "pass []"
gpu ibunwanted "$T/sock.yaml"
expect_eq "nccl: IB while expect.transport is Socket: flagged" "$(nccl ibunwanted)" "fail [socket-fallback]"
gpu nogdr "$T/base.yaml" DOUBLE_NCCL_NET=IB-nogdr
expect_eq "nccl: IB without GDRDMA channels: no-gdr (warn)" "$(nccl nogdr)" "warn [no-gdr]"
expect_eq "nccl: IB without GDRDMA: exit 0 (warn)" "$(rc_of nogdr)" 0
expect_eq "nccl: IB without GDRDMA: gpuDirectRdma false" "$(coll nogdr "[x['gpuDirectRdma'] for x in c]")" '[false]'
# IB, and no channel line at all: whether GPUDirect RDMA was used is unknown, not no-gdr
gpu nochan "$T/base.yaml" DOUBLE_NCCL_NET=IB-nochannels
expect_eq "nccl: IB without channel lines: pass, not no-gdr" "$(nccl nochan)" "pass []"
expect_eq "nccl: IB without channel lines: no-gdr is unknown, naming what is missing" \
    "$(yq "$T/nochan/v.yaml" "[u['code'] + ': ' + u['missing'] for u in check('collective.nccl')['evidence']['unknown']]")" \
    '["no-gdr: NCCL used IB and logged no channel line and no \"GPU Direct RDMA\" line"]'
clean nochan
gpu nogdrstrict "$T/base.yaml" DOUBLE_NCCL_NET=IB-nogdr -- --rank 0 --world-size 1 \
    --coordinator 127.0.0.1 --port 29851 --strict
# the root holds no dev/shm (unknown, no finding): no-gdr is the only warning, and --strict fails
# the run with its class
expect_eq "nccl: IB without GDRDMA under --strict: exit 4 (no-gdr's class, node)" "$(rc_of nogdrstrict)" 4

# ---- expectations: a floor, and the curve applies only between nodes
printf 'messageBytes: 1048576\ntcp: {messageBytes: 1048576, iterations: 2}\nnccl: {iterations: 2, timeoutSeconds: 3}\nexpect: {busbwGBps: 5}\n' >"$T/floor.yaml"
gpu floor "$T/floor.yaml"
expect_eq "nccl: busbw 1.57 under expect.busbwGBps 5: below-threshold" "$(nccl floor)" "fail [below-threshold]"
expect_eq "nccl: the floor is in the entry" "$(coll floor "[x['expectedMinBusbwGBps'] for x in c]")" '[5.0]'
printf 'messageBytes: 1048576\ntcp: {messageBytes: 1048576, iterations: 2}\nnccl: {iterations: 2, timeoutSeconds: 3}\nexpect: {busbwGBps: 1.5}\n' >"$T/floor2.yaml"
gpu floor2 "$T/floor2.yaml"
expect_eq "nccl: busbw 1.57 over expect.busbwGBps 1.5: pass" "$(nccl floor2)" "pass []"
printf 'messageBytes: 1048576\ntcp: {messageBytes: 1048576, iterations: 2}\nnccl: {iterations: 2, timeoutSeconds: 3}\nexpect: {lineRateGbps: 3200}\n' >"$T/line.yaml"
gpu line "$T/line.yaml"
expect_eq "nccl: lineRateGbps with one node: no floor, the rule says why" \
    "$(coll line "[(x['expectedMinBusbwGBps'], x['rule'].startswith('none')) for x in c]")" '[[null, true]]'

# ---- two pods on loopback: a failure on one rank reaches both, in bounded time
two_pods() { # NAME RANK1-VARS...: rank 0 healthy, rank 1 with the given variables
    local name=$1 port=$2
    shift 2
    gpu "$name-0" "$T/base.yaml" DOUBLE_GPUS=2 -- --rank 0 --world-size 2 \
        --coordinator 127.0.0.1 --port "$port" &
    gpu "$name-1" "$T/base.yaml" DOUBLE_GPUS=2 "$@" -- --rank 1 --world-size 2 \
        --coordinator 127.0.0.1 --port "$port" &
    wait
}
two_pods pods-hang 29853 DOUBLE_NCCL_FAIL=hang
expect_eq "nccl: 2 pods, rank 1 hangs in init: rank 0 says timeout" "$(nccl pods-hang-0)" "fail [timeout]"
expect_eq "nccl: 2 pods, rank 1 hangs in init: rank 1 says timeout" "$(nccl pods-hang-1)" "fail [timeout]"
contains "nccl: 2 pods: rank 0 names rank 1" "$(msg pods-hang-0)" "(4 ranks): rank 1: ncclCommInitRankConfig did not complete"
secs=$(cat "$T/pods-hang-0/secs")
check "nccl: 2 pods, hang: rank 0 ends in bounded time (${secs}s)" \
    python3 -c "import sys; sys.exit(0 if $secs < 25 else 1)"
# the id rank 0 made reached rank 1 intact (the double refuses any other id)
check "nccl: 2 pods: rank 1's communicators were made from rank 0's id" \
    grep -q "rank 3 nRanks 4" "$T/pods-hang-1/nccl-rank1.log"
clean pods-hang-0
clean pods-hang-1
two_pods pods-async 29855 DOUBLE_NCCL_FAIL=async
expect_eq "nccl: 2 pods, async error on rank 1: rank 0 init-failed" "$(nccl pods-async-0)" "fail [init-failed]"
contains "nccl: 2 pods, async error on rank 1: rank 0 names rank 1 and the error" \
    "$(msg pods-async-0)" "rank 1: ncclCommInitRankConfig (GPU 0): ncclRemoteError 6"

# ---- a pod killed during a later stage (the GPU stage, after the TCP collectives): no other
# rank reports a failure of its own, and the peer-lost message still reads cleanly
gpu killed-0 "$T/base.yaml" DOUBLE_GPUS=2 -- --rank 0 --world-size 2 \
    --coordinator 127.0.0.1 --port 29857 &
k0=$!
gpu killed-1 "$T/base.yaml" DOUBLE_GPUS=2 DOUBLE_NCCL_FAIL=hang -- --rank 1 --world-size 2 \
    --coordinator 127.0.0.1 --port 29857 &
k1=$!
# kill_in_nccl VICTIM [OTHER...]: SIGKILL the preflight of run VICTIM once it and every OTHER
# run are creating their communicators; killed=1 when it was killed
kill_in_nccl() {
    local victim=$1 n pid
    killed=
    for _ in $(seq 1 300); do
        local all=1
        for n in "$@"; do grep -q "NCCL: creating" "$T/$n/err" 2>/dev/null || all=; done
        if [ -n "$all" ]; then
            # the preflight process of this run alone: its verdict path is unique
            pid=$(pgrep -f -- "--verdict $T/$victim/v.yaml" | while read -r p; do
                [ "$(cat "/proc/$p/comm" 2>/dev/null)" = preflight ] && echo "$p"; done | head -1)
            [ -n "$pid" ] && kill -KILL "$pid" && killed=1
            return
        fi
        sleep 0.1
    done
}
kill_in_nccl killed-1
wait $k0 $k1
if [ -n "$killed" ]; then
    ok "nccl: rank 1 killed during the GPU stage"
    lost=$(yq "$T/killed-0/v.yaml" "' | '.join(f['message'] for f in check('collective.tcp').get('findings') or [] if f['code'] == 'peer-lost')")
    contains "nccl: killed in the GPU stage: rank 0 reports peer-lost naming rank 1" "$lost" "rank 1"
    case "$lost" in
    *"(null)"*) notok "nccl: killed in the GPU stage: the peer-lost message has no (null)" "$lost" ;;
    *) ok "nccl: killed in the GPU stage: the peer-lost message has no (null)" ;;
    esac
    # rank 1 is the only culprit: rank 0's failed collectives are a peer's fault (exit 5)
    expect_eq "nccl: killed in the GPU stage: rank 0 fails as a peer" "$(rc_of killed-0)" 5
    clean killed-0
else
    notok "nccl: rank 1 killed during the GPU stage" "it never reached the GPU stage"
fi

# ---- the watch on the pods while NCCL is waited on: both pods' communicators hang in init
# (the double), rank 1 is killed; rank 0 sees its rendezvous connection close and aborts at
# once with peer-lost naming rank 1, where without the watch it would wait out
# nccl.timeoutSeconds (30 s here, under --timeout 40) and say timeout
sed 's/timeoutSeconds: [0-9]*/timeoutSeconds: 30/' "$T/base.yaml" >"$T/watch.yaml"
grep -q 'timeoutSeconds: 30' "$T/watch.yaml" || printf 'nccl: {timeoutSeconds: 30}\n' >>"$T/watch.yaml"
gpu watch-0 "$T/watch.yaml" DOUBLE_GPUS=1 DOUBLE_NCCL_FAIL=hang -- --rank 0 --world-size 2 \
    --coordinator 127.0.0.1 --port 29863 &
w0=$!
gpu watch-1 "$T/watch.yaml" DOUBLE_GPUS=1 DOUBLE_NCCL_FAIL=hang -- --rank 1 --world-size 2 \
    --coordinator 127.0.0.1 --port 29863 &
w1=$!
kill_in_nccl watch-1 watch-0
wait $w0 $w1
if [ -n "$killed" ]; then
    expect_eq "nccl: rank 1 killed while the communicators hang: rank 0 says peer-lost" \
        "$(nccl watch-0)" "fail [peer-lost]"
    contains "nccl: ... naming rank 1 and its closed connection" "$(msg watch-0)" \
        "was lost during"
    contains "nccl: ... the lost rank is rank 1" "$(msg watch-0)" "rank 1"
    contains "nccl: ... seen by the watch (its rendezvous connection)" "$(msg watch-0)" \
        "its connection to the rendezvous closed"
    expect_eq "nccl: ... rank 0 fails as a peer" "$(rc_of watch-0)" 5
    clean watch-0
else
    notok "nccl: rank 1 killed while the communicators hang" "it never reached the GPU stage"
fi
