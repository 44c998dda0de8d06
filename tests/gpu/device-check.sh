#!/usr/bin/env bash
# Everything preflight's GPU half must show on a real NVIDIA GPU, in one call that ends within
# DEVICE_CHECK_SECONDS (default 420), with every figure and log under one folder:
#
#   1. the machine: nvidia-smi, /proc/driver/nvidia, the device nodes, the NCCL and CUDA
#      libraries and where preflight finds them by itself (no PREFLIGHT_NCCL_LIB);
#   2. `preflight check` on that machine, its GPU checks set against nvidia-smi (gpu.health's
#      evidence beside nvidia-smi -q, nvlink -s and the remapped rows: compare_health.py);
#   3. tests/gpu/e2e.sh at 2 pods (network and UTS namespaces on one bridge, NET/Socket);
#   4. side by side, same layout, same GPU: preflight's NCCL all-reduce against nccl-tests'
#      all_reduce_perf, 4 B to 1 GiB;
#   6. failure paths for real: a rank that never joins NCCL's init, a rank killed in the
#      middle of the all-reduce, NCCL_NET=IB where there is no InfiniBand;
#   5. the other collectives (all-gather, reduce-scatter, all-to-all) against nccl-tests, and
#      torch.distributed all_reduce on the sizes of 4;
#   7. tests/gpu/e2e.sh at 4 pods, and nccl-tests / torch at 4 ranks;
# in that order, each step only while the time left allows it;
# then summary.md (the tables for docs/performance.md), results.json and logs.tar.gz.
#
#   tests/gpu/device-check.sh [OUTDIR]        # default $OUT, else /tmp/preflight-device-check
#
# What it takes along (tests/gpu/bundle.sh makes it, in .gpu/ or DEVICE_BUNDLE): a release
# bin/preflight, nccl-tests built against tests/gpu/minimpi (build-nccl-tests.sh), the NCCL
# test double (only for the rank that never joins), and ip/dnsmasq/hostname for machines that
# lack them. The NCCL measured is the machine's own: PREFLIGHT_NCCL_LIB, else the one PyTorch
# loads, else the first libnccl.so.2 found. Without a GPU it says why and exits 77; exit 0:
# every check passed, 1: one failed (each "not ok" line says which).
set -u
cd "$(dirname "$0")/../.." || exit 2
SRC=$PWD
OUTDIR=${1:-${OUT:-/tmp/preflight-device-check}}
LIMIT=${DEVICE_CHECK_SECONDS:-420}
BUNDLE=${DEVICE_BUNDLE:-$SRC/.gpu}
T0=$(date +%s)
mkdir -p "$OUTDIR"
OUTDIR=$(cd "$OUTDIR" && pwd)
L=$OUTDIR/logs
mkdir -p "$L"
STEPS=$L/steps.log
RESULTS=$L/results.jsonl
: >"$RESULTS"
FAILED=0

el() { echo $(($(date +%s) - T0)); }
left() { echo $((LIMIT - $(el))); }
say() { echo "[$(el)s] $*" | tee -a "$STEPS"; }
ok() { say "ok - $1"; }
notok() {
    say "not ok - $1${2:+: $2}"
    FAILED=1
}
result() { echo "$1" >>"$RESULTS"; } # one JSON object a line
# have SECONDS [PHASE]: true when that much time is left, and PHASE is among DEVICE_CHECK_ONLY
# (a comma-separated list of e2e2 sweep fail coll torch four; default all)
have() {
    [ "$(left)" -ge "$1" ] || return 1
    [ -z "${2:-}" ] || [ -z "${DEVICE_CHECK_ONLY:-}" ] || [[ ",$DEVICE_CHECK_ONLY," == *",$2,"* ]]
}

finish() {
    trap - EXIT
    [ -n "${PODS_N:-}" ] && pods_cleanup >/dev/null 2>&1
    python3 "$SRC/tests/gpu/summary.py" "$RESULTS" "$OUTDIR" >"$OUTDIR/summary.md" 2>>"$STEPS" ||
        echo "summary.py failed (see steps.log)" >>"$OUTDIR/summary.md"
    cp "$STEPS" "$OUTDIR/steps.log" 2>/dev/null
    cp "$RESULTS" "$OUTDIR/results.jsonl" 2>/dev/null
    tar -C "$OUTDIR" -czf "$OUTDIR/logs.tar.gz" logs 2>/dev/null && rm -rf "$L"
    cat "$OUTDIR/summary.md"
    echo "device-check: $([ "$FAILED" = 0 ] && echo passed || echo FAILED) in $(el) s; figures and logs in $OUTDIR"
    exit "$FAILED"
}

# ---- 0. a GPU, or skip. DEVICE_CHECK_REHEARSE=1 runs every step on a machine without one (the
# steps fail, but the script's own plumbing is exercised before a GPU slot is spent on it)
if [ -z "${DEVICE_CHECK_REHEARSE:-}" ] && [ ! -e /dev/nvidia0 ] && [ ! -d /proc/driver/nvidia/gpus ]; then
    echo "tests/gpu/device-check.sh: skipped: no NVIDIA GPU here (no /dev/nvidia0, no /proc/driver/nvidia/gpus)" >&2
    exit 77
fi
[ "$(id -u)" -eq 0 ] || { echo "tests/gpu/device-check.sh: skipped: needs root (namespaces)" >&2; exit 77; }
trap finish EXIT

PREFLIGHT=${PREFLIGHT:-$BUNDLE/bin/preflight}
if [ ! -x "$PREFLIGHT" ]; then
    make -s bin/preflight >"$L/build.log" 2>&1 && PREFLIGHT=$SRC/bin/preflight ||
        { notok "a preflight binary" "none in $BUNDLE/bin and make failed (logs/build.log)"; exit 1; }
fi
NT=${NCCL_TESTS_DIR:-$BUNDLE/nccl-tests}
for t in ip dnsmasq hostname; do
    command -v "$t" >/dev/null 2>&1 || { [ -x "$BUNDLE/tools/bin/$t" ] && PATH=$PATH:$BUNDLE/tools/bin; }
done
export PATH

# ---- 1. the machine
say "machine: $(uname -srm); preflight $("$PREFLIGHT" version 2>&1 | head -1)"
{
    nvidia-smi
    nvidia-smi -q
    nvidia-smi topo -m
    echo "== /proc/driver/nvidia/version"
    cat /proc/driver/nvidia/version
    for g in /proc/driver/nvidia/gpus/*/information; do echo "== $g"; cat "$g"; done
    echo "== device nodes"
    ls -l /dev/nvidia* /dev/nvidia-caps 2>&1
    echo "== /dev/infiniband"
    ls -l /dev/infiniband 2>&1
    echo "== libraries"
    ldconfig -p | grep -E 'libcuda\.so|libnccl|libnvidia-ml'
    find / -xdev \( -name 'libnccl.so*' -o -name 'libcuda.so.1' -o -name 'libnvidia-ml.so.1' \) 2>/dev/null
    echo "== tools"
    for t in ip dnsmasq hostname unshare nsenter getent python3 nvcc; do printf '%s: %s\n' "$t" "$(command -v "$t")"; done
    echo "== kernel"
    cat /proc/version
    grep -E 'veth|bridge' /proc/modules 2>&1
} >"$L/machine.txt" 2>&1
GPU_NAME=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
DRIVER=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)
CUDA_DRV=$(nvidia-smi 2>/dev/null | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p' | head -1)
TORCH_INFO=$(timeout 60 python3 -c '
import json, torch
print(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda, "cudaOk": torch.cuda.is_available(),
 "nccl": ".".join(map(str, torch.cuda.nccl.version()))}))' 2>>"$L/machine.txt")
TORCH_NCCL_LIB=$(timeout 60 python3 -c '
import ctypes, torch, torch.distributed
torch.cuda.nccl.version()
for l in open("/proc/self/maps"):
    if "libnccl.so" in l:
        print(l.split()[-1]); break' 2>>"$L/machine.txt")
say "GPU: ${GPU_NAME:-?}, driver ${DRIVER:-?}, CUDA ${CUDA_DRV:-?}; torch: ${TORCH_INFO:-not importable}"
say "torch loads NCCL from: ${TORCH_NCCL_LIB:-?}"

# where preflight finds NCCL by itself
"$PREFLIGHT" check --format yaml --verdict "$L/check-autodiscover.yaml" >"$L/check-autodiscover.out" 2>&1
AUTO=$(python3 - "$L/check-autodiscover.yaml" <<'PY'
import sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
c = next((c for c in d["checks"] if c["id"] == "nccl.library"), {})
print(c.get("status"), "|", c.get("message"))
PY
)
say "nccl.library without PREFLIGHT_NCCL_LIB: $AUTO"
if [ -n "$TORCH_NCCL_LIB" ]; then
    case "$AUTO" in *"$TORCH_NCCL_LIB"*) ok "preflight finds by itself the NCCL torch loads" ;;
    *) notok "preflight finds by itself the NCCL torch loads" "torch: $TORCH_NCCL_LIB; preflight: $AUTO" ;; esac
fi
result "{\"kind\": \"machine\", \"gpu\": \"${GPU_NAME}\", \"driver\": \"${DRIVER}\", \"cuda\": \"${CUDA_DRV}\", \"kernel\": \"$(uname -r)\", \"torch\": ${TORCH_INFO:-null}, \"torchNcclLib\": \"${TORCH_NCCL_LIB}\", \"ncclAuto\": \"$(echo "$AUTO" | tr -d '"\\')\"}"

NCCL_LIB=${PREFLIGHT_NCCL_LIB:-$TORCH_NCCL_LIB}
[ -n "$NCCL_LIB" ] || NCCL_LIB=$(find / -xdev -name 'libnccl.so.2' 2>/dev/null | head -1)
[ -n "$NCCL_LIB" ] || { notok "libnccl.so.2 on this machine" "none found"; exit 1; }
export PREFLIGHT_NCCL_LIB=$NCCL_LIB
NCCL_LD=$(dirname "$NCCL_LIB")
NCCL_CODE=$(python3 -c '
import ctypes, sys
v = ctypes.c_int()
ctypes.CDLL(sys.argv[1]).ncclGetVersion(ctypes.byref(v))
print(v.value)' "$NCCL_LIB" 2>/dev/null)
say "NCCL measured: $NCCL_LIB (version code ${NCCL_CODE:-?})"

# ---- 2. preflight check on this machine against nvidia-smi
"$PREFLIGHT" check --format yaml --verdict "$L/check.yaml" >"$L/check.out" 2>&1
echo "rc $?" >>"$L/check.out"
NCCL_MNNVL_ENABLE=1 "$PREFLIGHT" check --format yaml --verdict "$L/check-mnnvl.yaml" >"$L/check-mnnvl.out" 2>&1
python3 "$SRC/tests/gpu/compare_check.py" "$L/check.yaml" "$L/check-mnnvl.yaml" >"$L/compare-check.txt" 2>&1
rc=$?
while read -r line; do say "  $line"; done <"$L/compare-check.txt"
[ "$rc" = 0 ] && ok "preflight check's GPU facts match nvidia-smi" ||
    notok "preflight check's GPU facts against nvidia-smi" "see logs/compare-check.txt"
# gpu.health's evidence (NVML through preflight's loader) beside nvidia-smi's view of the same
# GPUs; nvidia-smi -q itself goes to logs/NVIDIA-SMI-Q.txt
python3 "$SRC/tests/gpu/compare_health.py" "$L/check.yaml" >"$L/compare-health.txt" 2>&1
rc=$?
while read -r line; do say "  $line"; done <"$L/compare-health.txt"
[ "$rc" = 0 ] && ok "gpu.health's facts match nvidia-smi" ||
    notok "gpu.health's facts against nvidia-smi" "see logs/compare-health.txt"

# ---- the layout: pods in namespaces (as e2e.sh), else processes on loopback told apart by
# NCCL_HOSTID (what NCCL hashes to tell nodes apart: src/misc/utils.cc, getHostHash)
source "$SRC/tests/e2e/pods.sh"
LAYOUT=host
if command -v ip >/dev/null && command -v dnsmasq >/dev/null &&
    pods_setup 4 "pfd$$" >"$L/pods-setup.log" 2>&1; then
    LAYOUT=pods
    IFNAME=eth0
    COORD="trainer-0.$PODS_DOMAIN"
    ADDR0=$(pods_ip 0)
else
    pods_cleanup >/dev/null 2>&1
    PODS_N=
    IFNAME=lo
    COORD=127.0.0.1
    ADDR0=127.0.0.1
fi
say "layout: $LAYOUT (NET/Socket over $IFNAME between ranks on the one GPU)"
result "{\"kind\": \"layout\", \"layout\": \"$LAYOUT\"}"
NCCL_VARS=(CUDA_VISIBLE_DEVICES=0 NCCL_SOCKET_IFNAME=$IFNAME NCCL_IB_DISABLE=1 NCCL_NET_PLUGIN=none)
declare -a RPID=()
# launch RANK OUTFILE CMD...: in pod RANK, or on this host as node "gpuhost-RANK"
launch() {
    local i=$1 out=$2
    shift 2
    if [ "$LAYOUT" = pods ]; then
        pod_start "$i" "$out" "$@"
        RPID[$i]=${POD_PID[$i]}
    else
        env NCCL_HOSTID="gpuhost-$i" "$@" >"$out" 2>&1 &
        RPID[$i]=$!
    fi
}
waitall() { # waitall N SECONDS: wait for ranks 0..N-1, killing them after SECONDS
    local n=$1 lim=$2 i t=0
    while [ "$t" -lt $((lim * 10)) ]; do
        local alive=0
        for ((i = 0; i < n; i++)); do kill -0 "${RPID[$i]}" 2>/dev/null && alive=1; done
        [ "$alive" = 0 ] && break
        sleep 0.1
        t=$((t + 1))
    done
    for ((i = 0; i < n; i++)); do
        kill -0 "${RPID[$i]}" 2>/dev/null && { kill -KILL "${RPID[$i]}" 2>/dev/null; echo "rank $i killed at ${lim}s" >>"$STEPS"; }
        wait "${RPID[$i]}" 2>/dev/null
        echo $? >"$L/last-rc-$i"
    done
}

# preflight_run TAG N BYTES CONFIG_EXTRA [ENV...]: N ranks of `preflight run`; verdicts under logs/TAG
preflight_run() {
    local tag=$1 n=$2 bytes=$3 extra=$4 lim=${PF_LIMIT:-150}
    shift 4
    local d=$L/$tag i
    mkdir -p "$d"
    cat >"$d/config.yaml" <<EOF
messageBytes: $bytes
expect: {transport: Socket}
nccl: {iterations: ${PF_ITERS:-20}, warmup: ${PF_WARMUP:-5}, timeoutSeconds: ${PF_NCCL_TIMEOUT:-120}}
tcp: {messageBytes: 1048576, iterations: 2}
$extra
EOF
    for ((i = 0; i < n; i++)); do
        mkdir -p "$d/rank-$i"
        launch "$i" "$d/rank-$i/out" env PREFLIGHT_TOKEN=gpu-device-check "${NCCL_VARS[@]}" \
            ${RANK_ENV[$i]:-PF_NOTHING=} "$@" \
            "$PREFLIGHT" run --config "$d/config.yaml" --verdict "$d/rank-$i/verdict.yaml" \
            --format yaml --rank "$i" --world-size "$n" --coordinator "$COORD" --port 29400 \
            --timeout "$lim"
    done
    local t1
    t1=$(date +%s.%N)
    waitall "$n" $((lim + 20))
    date +%s.%N >"$d/end"
    echo "$(python3 -c "import time; print(round(time.time() - $t1, 1))")" >"$d/wall"
    for ((i = 0; i < n; i++)); do cp "$L/last-rc-$i" "$d/rank-$i/rc"; done
    python3 "$SRC/tests/gpu/verdicts.py" "$d" "$n" "$tag" >>"$RESULTS" 2>>"$STEPS"
}
# check one rank's collective.nccl: pf_expect TAG RANK FIELD VALUE
pf_field() { python3 "$SRC/tests/gpu/verdicts.py" --get "$L/$1" "$2" "$3" 2>/dev/null; }

nccl_tests() { # nccl_tests TAG N BIN ARGS...
    local tag=$1 n=$2 bin=$3 i
    shift 3
    [ -x "$NT/$bin" ] || { notok "nccl-tests $bin" "not built ($NT)"; return 1; }
    for ((i = 0; i < n; i++)); do
        launch "$i" "$L/$tag-$i.out" env "${NCCL_VARS[@]}" LD_LIBRARY_PATH="$NCCL_LD" \
            NCCL_TESTS_DEVICE=0 MINIMPI_RANK=$i MINIMPI_SIZE=$n MINIMPI_SOCK="/tmp/pfd-mpi-$$-$tag" \
            NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET NCCL_DEBUG_FILE="$L/$tag-nccl.%h.%p.log" \
            "$NT/$bin" -g 1 "$@"
    done
    waitall "$n" "${NT_LIMIT:-150}"
    local rows
    rows=$(python3 "$SRC/tests/gpu/parse_nccl_tests.py" "$L/$tag-0.out" "$tag" "$bin" "$n" | tee -a "$RESULTS" | grep -c '"bytes"')
    [ "$rows" -gt 0 ] && ok "nccl-tests $bin at $n ranks: $rows sizes" ||
        notok "nccl-tests $bin at $n ranks" "no figures (logs/$tag-0.out: $(tail -2 "$L/$tag-0.out" | tr '\n' ' '))"
}

torch_run() { # torch_run TAG N SIZES
    local tag=$1 n=$2 sizes=$3 i
    case "$TORCH_INFO" in *'"cudaOk": true'*) ;; *) say "torch: no CUDA-capable torch here: no PyTorch comparison"; return 0 ;; esac
    for ((i = 0; i < n; i++)); do
        launch "$i" "$L/$tag-$i.out" env "${NCCL_VARS[@]}" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET \
            NCCL_DEBUG_FILE="$L/$tag-nccl.%h.%p.log" python3 "$SRC/tests/gpu/torch_allreduce.py" \
            --rank "$i" --world-size "$n" --master "$ADDR0" --port 29500 --bytes "$sizes" \
            --iters 20 --warmup 5
    done
    waitall "$n" "${TORCH_LIMIT:-150}"
    local rows
    rows=$(grep -c '^{' "$L/$tag-0.out")
    [ "$rows" -gt 0 ] && ok "torch.distributed all_reduce at $n ranks: $rows sizes" ||
        notok "torch.distributed all_reduce at $n ranks" "no figures (logs/$tag-0.out)"
    grep -h '^{' "$L/$tag-0.out" | python3 -c '
import json, sys
for l in sys.stdin:
    d = json.loads(l); d.update(kind="torch", tag=sys.argv[1]); print(json.dumps(d))' "$tag" >>"$RESULTS"
}

SIZES="4 65536 1048576 16777216 268435456 1073741824"  # as nccl-tests -b 4 -f 4 steps

# ---- 3. e2e.sh at 2 pods (its own namespaces: run before ours are in use, so tear ours down)
run_e2e() {
    local n=$1
    [ "$LAYOUT" = pods ] || { say "e2e.sh: no network namespaces here (see logs/pods-setup.log): not run"; return; }
    GPU_E2E_OUT="$L/e2e-$n" GPU_E2E_PODS=$n PREFLIGHT=$PREFLIGHT timeout "${E2E_LIMIT:-200}" \
        bash "$SRC/tests/gpu/e2e.sh" >"$L/e2e-$n.out" 2>&1
    local rc=$?
    grep -E '^(ok|not ok)' "$L/e2e-$n.out" | sed 's/^/  /' | tee -a "$STEPS" >/dev/null
    [ "$rc" = 0 ] && ok "tests/gpu/e2e.sh at $n pods" || notok "tests/gpu/e2e.sh at $n pods" "rc $rc (logs/e2e-$n.out)"
    python3 "$SRC/tests/gpu/verdicts.py" "$L/e2e-$n" "$n" "e2e-$n" >>"$RESULTS" 2>/dev/null
}
have 60 e2e2 && run_e2e 2

# ---- 4. side by side at 2 ranks: 4 B to 1 GiB (torch after the failure paths)
if have 120 sweep; then
    for s in $SIZES; do
        have 60 || break
        preflight_run "pf-ar2-$s" 2 "$s" ""
        st=$(pf_field "pf-ar2-$s" 0 status)
        [ "$st" = pass ] && ok "preflight all-reduce, 2 ranks, $s B: pass" ||
            notok "preflight all-reduce, 2 ranks, $s B" "collective.nccl $st (logs/pf-ar2-$s)"
    done
fi
have 60 sweep && nccl_tests nt-ar2 2 all_reduce_perf -b 4 -e 1G -f 4 -n 20 -w 5
# ---- 6. failure paths, each within its deadline
# a rank that never joins NCCL's init: rank 1 loads the test double, which takes the unique id
# and never connects; rank 0's real NCCL waits in its bootstrap until preflight aborts it
if have 70 fail; then
    RANK_ENV=("" "PREFLIGHT_NCCL_LIB=$BUNDLE/double/libnccl-double.so DOUBLE_NCCL_NET=Socket")
    PF_NCCL_TIMEOUT=20 PF_LIMIT=60 preflight_run fail-noinit 2 1048576 "" DOUBLE_NCCL_FAIL=hang \
        DOUBLE_NCCL_VERSION="${NCCL_CODE:-0}"
    RANK_ENV=()
    w=$(cat "$L/fail-noinit/wall")
    c=$(pf_field fail-noinit 0 codes)
    m=$(pf_field fail-noinit 0 message)
    say "  never joins: rank 0 codes [$c] in ${w}s: $m"
    case "$c" in *timeout* | *init-failed* | *peer*) ok "a rank that never joins init: rank 0 reports it ($c) in ${w}s" ;;
    *) notok "a rank that never joins init" "rank 0 codes [$c]" ;; esac
    python3 -c "import sys; sys.exit(0 if float('$w') < 60 else 1)" && ok "  ... within the deadline (${w}s < 60s)" ||
        notok "  never-joins within the deadline" "${w}s"
fi
# a rank killed in the middle of the all-reduce: 10,000 iterations of 256 MiB take minutes,
# so rank 1 is killed inside them, a few seconds after it made its CUDA context
if have 80 fail; then
    d=$L/fail-kill
    (
        pid=
        for _ in $(seq 1 900); do
            pid=$(pgrep -f -- "$d/rank-1/verdict.yaml" | head -1)
            [ -n "$pid" ] && nvidia-smi --query-compute-apps=pid --format=csv,noheader 2>/dev/null |
                grep -qw "$pid" && break
            sleep 0.1
        done
        sleep "${KILL_AFTER:-8}"
        date +%s.%N >"$d/killed-at"
        echo "killing rank 1 (pid ${pid:-?})" >>"$STEPS"
        [ -n "$pid" ] && kill -KILL "$pid"
    ) &
    killer=$!
    PF_ITERS=10000 PF_NCCL_TIMEOUT=40 PF_LIMIT=80 preflight_run fail-kill 2 268435456 ""
    kill "$killer" 2>/dev/null
    wait "$killer" 2>/dev/null
    c=$(pf_field fail-kill 0 codes)
    m=$(pf_field fail-kill 0 message)
    k=$(python3 -c "print(round($(cat "$d/end" 2>/dev/null || echo 0) - $(cat "$d/killed-at" 2>/dev/null || echo 0), 1))")
    say "  killed mid all-reduce: rank 0 codes [$c], its verdict ${k}s after the kill: $m"
    result "{\"kind\": \"kill\", \"afterKillSeconds\": $k}"
    [ -s "$d/killed-at" ] || notok "a rank killed mid all-reduce" "rank 1 was never seen on the GPU, so never killed"
    case "$c" in *peer-lost*) ok "a rank killed mid all-reduce: rank 0 says peer-lost ($c)" ;;
    *) notok "a rank killed mid all-reduce" "rank 0 codes [$c] status $(pf_field fail-kill 0 status)" ;; esac
    python3 -c "import sys; sys.exit(0 if 0 < $k < 30 else 1)" &&
        ok "  ... rank 0's verdict ${k}s after the kill, well inside nccl.timeoutSeconds (40)" ||
        notok "  killed mid all-reduce: seen before the deadline" "${k}s after the kill"
fi
# NCCL_NET=IB where there is no InfiniBand
if have 50 fail; then
    NCCL_VARS_SAVE=("${NCCL_VARS[@]}")
    NCCL_VARS=(CUDA_VISIBLE_DEVICES=0 NCCL_SOCKET_IFNAME=$IFNAME NCCL_NET=IB)
    PF_NCCL_TIMEOUT=30 PF_LIMIT=60 preflight_run fail-netib 2 1048576 ""
    NCCL_VARS=("${NCCL_VARS_SAVE[@]}")
    c=$(pf_field fail-netib 0 codes)
    m=$(pf_field fail-netib 0 message)
    w=$(cat "$L/fail-netib/wall")
    say "  NCCL_NET=IB without IB: rank 0 codes [$c] in ${w}s: $m"
    st=$(pf_field fail-netib 0 status)
    [ "$st" = fail ] && ok "NCCL_NET=IB without IB: collective.nccl fails ($c) in ${w}s" ||
        notok "NCCL_NET=IB without IB" "collective.nccl $st [$c]"
fi

# ---- 5. the other collectives, 256 MiB, 2 ranks
if have 90 coll; then
    preflight_run pf-coll2 2 268435456 "collectives: [allreduce, allgather, reducescatter, alltoall]"
    st=$(pf_field pf-coll2 0 status)
    [ "$st" = pass ] && ok "preflight all-gather, reduce-scatter, all-to-all: pass" ||
        notok "preflight's other collectives" "collective.nccl $st (logs/pf-coll2)"
    for b in all_gather_perf reduce_scatter_perf alltoall_perf; do
        have 30 && nccl_tests "nt-${b%_perf}2" 2 "$b" -b 256M -e 256M -n 20 -w 5
    done
fi

# torch.distributed at 2 ranks, the same sizes
have 60 torch && torch_run torch-ar2 2 "$(echo $SIZES | tr ' ' ,)"


# ---- 7. four ranks
have 80 four && run_e2e 4
have 50 four && nccl_tests nt-ar4 4 all_reduce_perf -b 256M -e 256M -n 20 -w 5
have 50 four && torch_run torch-ar4 4 268435456
if have 40 four; then
    preflight_run pf-ar4-268435456 4 268435456 ""
    st=$(pf_field pf-ar4-268435456 0 status)
    [ "$st" = pass ] && ok "preflight all-reduce, 4 ranks, 256 MiB: pass" ||
        notok "preflight all-reduce, 4 ranks, 256 MiB" "collective.nccl $st"
fi
say "done: $(left)s of ${LIMIT}s left"
