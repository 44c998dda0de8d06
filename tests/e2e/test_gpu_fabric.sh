#!/usr/bin/env bash
# gpu.fabric's reading of NVML's GPU fabric registration (multi-node NVLink, GB200 NVL72).
#
# No GPU, no NVLink fabric and no libnvidia-ml are on this machine. TEST DOUBLE, FOR ERROR
# HANDLING ONLY: tests/e2e/nccl-double/nvml.c exports the NVML calls pkg/dl/nvml.c loads
# (through PREFLIGHT_NVML_LIB) and answers each GPU's fabric state, status, clique id and
# cluster UUID as the environment chooses. Passing says preflight judges what NVML answers as
# NCCL's src/mnnvl.cc does and reports it; it says nothing about a real fabric.
source "$(dirname "$0")/lib.sh"

D="$PREFLIGHT_SRC/tests/e2e/nccl-double"
CC=${CC:-cc}
if ! $CC -std=c11 -O1 -g -Wall -Wextra -Werror -shared -fPIC -o "$T/libnvml-double.so" "$D/nvml.c" \
    2>"$T/cc.err"; then
    notok "fabric: the NVML double builds" "$(head -c 600 "$T/cc.err")"
    exit 0
fi
ok "fabric: the NVML double builds"
mkdir -p "$T/root" "$T/imex/dev/nvidia-caps-imex-channels"
: >"$T/imex/dev/nvidia-caps-imex-channels/channel0"

# fab NAME ROOT [VAR=VALUE...]: `preflight check` with the NVML double; verdict in $T/NAME/v.yaml
fab() {
    local name=$1 root=$2
    shift 2
    mkdir -p "$T/$name"
    env -i PATH="$PATH" HOME=/nonexistent NO_COLOR=1 \
        ASAN_OPTIONS="${ASAN_OPTIONS:-}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-}" \
        PREFLIGHT_NVML_LIB="$T/libnvml-double.so" "$@" \
        timeout 60 "$PREFLIGHT" check --root "$root" --format yaml \
        >"$T/$name/v.yaml" 2>"$T/$name/err"
    echo $? >"$T/$name/rc"
    if grep -qE 'AddressSanitizer|LeakSanitizer|runtime error:' "$T/$name/err"; then
        notok "fabric: $name: no sanitizer report" "$(grep -m3 -E 'Sanitizer|runtime error' "$T/$name/err")"
    fi
}
st() { yq "$T/$1/v.yaml" "check('gpu.fabric')['status'] + ' ' + ','.join(codes('gpu.fabric'))"; }
ev() { yq "$T/$1/v.yaml" "(lambda e: $2)(check('gpu.fabric').get('evidence') or {})"; }
fmsg() { yq "$T/$1/v.yaml" "' | '.join(f['message'] for f in check('gpu.fabric').get('findings') or [])"; }
contains() { # NAME HAYSTACK NEEDLE
    case "$2" in *"$3"*) ok "$1" ;; *) notok "$1" "'$3' not in: $(printf %s "$2" | head -c 400)" ;; esac
}

# ---- all four GPUs registered in one clique: pass, each GPU in the evidence
fab ready "$T/imex" NCCL_MNNVL_ENABLE=1 DOUBLE_NVML_GPUS=4
expect_eq "fabric: all registered: pass" "$(st ready)" "pass "
expect_eq "fabric: all registered: per-GPU evidence" \
    "$(ev ready "[(g['index'], g['busId'], g['state'], g['cliqueId']) for g in e['fabric']][::3]")" \
    '[[0, "00000000:18:00.0", "COMPLETED", 32766], [3, "00000000:48:00.0", "COMPLETED", 32766]]'
expect_eq "fabric: all registered: the cluster UUID in hex" \
    "$(ev ready "e['fabric'][0]['clusterUuid']")" '5e1f2a90-0000-0000-0000-000000000001'
expect_eq "fabric: all registered: the pod's clique" \
    "$(ev ready "e['clique']")" '5e1f2a90-0000-0000-0000-000000000001/32766'

# ---- GPU 2 still registering: fabric-not-ready names it, its bus id and its state
fab inprog "$T/imex" NCCL_MNNVL_ENABLE=2 DOUBLE_NVML_GPUS=4 DOUBLE_FABRIC=3,3,2,3
expect_eq "fabric: one GPU in progress: fail fabric-not-ready" "$(st inprog)" "fail fabric-not-ready"
expect_eq "fabric: one GPU in progress: the message" "$(fmsg inprog)" \
    "GPU 2 (00000000:38:00.0): fabric registration in progress (state IN_PROGRESS, status 0)"
expect_eq "fabric: one GPU in progress: its state in the evidence" \
    "$(ev inprog "[g['state'] for g in e['fabric']]")" \
    '["COMPLETED", "COMPLETED", "IN_PROGRESS", "COMPLETED"]'
# fabric-not-ready is class node: exit code 4 (docs/scheduling.md)
expect_eq "fabric: exit code 4, the node is unfit" "$(cat "$T/inprog/rc")" 4

# ---- completed with an error status (999 NVML_ERROR_UNKNOWN), and a zero cluster UUID
fab status "$T/imex" NCCL_MNNVL_ENABLE=1 DOUBLE_NVML_GPUS=2 DOUBLE_FABRIC=3:999,3:0:7:0
expect_eq "fabric: error status and zero UUID: two findings" "$(st status)" \
    "fail fabric-not-ready,fabric-not-ready"
contains "fabric: error status: named" "$(fmsg status)" \
    "GPU 0 (00000000:18:00.0): fabric registration completed with NVML error 999"
contains "fabric: zero UUID: named" "$(fmsg status)" "GPU 1 (00000000:28:00.0): fabric registration completed without a cluster UUID"
expect_eq "fabric: no registered GPU: empty clique" "$(ev status "e['clique']")" '/0'

# ---- an older NVML: the versioned call is missing, the unversioned one answers
fab old "$T/imex" NCCL_MNNVL_ENABLE=1 DOUBLE_NVML_GPUS=2 DOUBLE_NVML_NOV=1 DOUBLE_FABRIC=1
expect_eq "fabric: unversioned fallback: not started reported" "$(st old)" \
    "fail fabric-not-ready,fabric-not-ready"
contains "fabric: unversioned fallback: state named" "$(fmsg old)" "(state NOT_STARTED, status 0)"

# ---- no NCCL_MNNVL_ENABLE, but the GPUs are registered on a fabric: NCCL's default (auto)
# uses it, so the check runs; here without the IMEX channel
fab auto "$T/root" DOUBLE_NVML_GPUS=2
expect_eq "fabric: unset but registered: runs, imex-channel-missing" "$(st auto)" \
    "fail imex-channel-missing"
contains "fabric: unset but registered: says why it runs" "$(fmsg auto)" \
    "the GPUs are on an NVLink fabric"
# unset, and every GPU's registration failed (NOT_STARTED, or COMPLETED with an NVML error):
# the GPUs are on a fabric that is not ready, judged, not skipped
fab allfailed "$T/imex" DOUBLE_NVML_GPUS=2 DOUBLE_FABRIC=1,3:999
expect_eq "fabric: unset, every GPU failed registration: fail fabric-not-ready" "$(st allfailed)" \
    "fail fabric-not-ready,fabric-not-ready"
# unset, COMPLETED without a cluster UUID on every GPU: not evidence of a fault, unknown
fab nouuid "$T/imex" DOUBLE_NVML_GPUS=2 DOUBLE_FABRIC=3,3 DOUBLE_FABRIC_UUID=00000000000000000000000000000000
expect_eq "fabric: unset, no cluster UUID, none registered: skip" "$(st nouuid)" "skip "
# unset and no fabric (NOT_SUPPORTED): skip as before
fab nofab "$T/root" DOUBLE_NVML_GPUS=2 DOUBLE_FABRIC=0
expect_eq "fabric: unset, no fabric: skip" "$(st nofab)" "skip "

# ---- NVML missing or failing: no crash, the reason in the evidence
fab nolib "$T/imex" NCCL_MNNVL_ENABLE=1 PREFLIGHT_NVML_LIB=/nonexistent/libnvidia-ml.so.1
expect_eq "fabric: no libnvidia-ml: the IMEX part still passes" "$(st nolib)" "pass "
contains "fabric: no libnvidia-ml: the reason" "$(ev nolib "e['fabricState']")" \
    "NVML not available: /nonexistent/libnvidia-ml.so.1 does not load"
fab noinit "$T/imex" NCCL_MNNVL_ENABLE=1 DOUBLE_NVML_FAIL=init
contains "fabric: nvmlInit fails: the NVML error named" "$(ev noinit "e['fabricState']")" \
    "nvmlInit_v2: NVML_ERROR_DRIVER_NOT_LOADED (Driver Not Loaded)"
# a library without the NVML symbols
printf 'int not_nvml(void);\nint not_nvml(void) { return 0; }\n' >"$T/empty.c"
$CC -shared -fPIC -o "$T/libempty.so" "$T/empty.c"
fab nosym "$T/imex" NCCL_MNNVL_ENABLE=1 PREFLIGHT_NVML_LIB="$T/libempty.so"
contains "fabric: a library without nvmlInit_v2: the symbol named" \
    "$(ev nosym "e['fabricState']")" "symbol nvmlInit_v2 missing"

# ---- clique-mismatch at the rendezvous: two pods on loopback, rank 1 in another clique. Each
# JOIN carries gpu.fabric's `clique`; rank 0 compares them and every rank's verdict says so.
printf 'tcp: {messageBytes: 65536, iterations: 1}\n' >"$T/small.yaml"
rk() { # NAME RANK PORT [VAR=VALUE...]
    local name=$1 rank=$2 port=$3
    shift 3
    mkdir -p "$T/$name"
    env -i PATH="$PATH" HOME=/nonexistent NO_COLOR=1 \
        ASAN_OPTIONS="${ASAN_OPTIONS:-}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-}" \
        PREFLIGHT_NVML_LIB="$T/libnvml-double.so" PREFLIGHT_CUDA_LIB=/nonexistent/libcuda.so.1 \
        POD_NAME="trainer-$rank" "$@" \
        timeout 60 "$PREFLIGHT" run --root "$T/imex" --config "$T/small.yaml" --format yaml \
        --verdict "$T/$name/v.yaml" --timeout 40 --rank "$rank" --world-size 2 \
        --coordinator 127.0.0.1 --port "$port" >"$T/$name/out" 2>"$T/$name/err"
    echo $? >"$T/$name/rc"
}
cm() { yq "$T/$1/v.yaml" "' | '.join(f['message'] for f in check('gpu.fabric').get('findings') or [] if f['code'] == 'clique-mismatch')"; }
rk cq-0 0 29871 NCCL_MNNVL_ENABLE=1 DOUBLE_NVML_GPUS=2 &
rk cq-1 1 29871 NCCL_MNNVL_ENABLE=1 DOUBLE_NVML_GPUS=2 DOUBLE_FABRIC=3:0:7 &
wait
expect_eq "fabric: 2 pods, other clique: rank 0 has clique-mismatch" "$(st cq-0)" "fail clique-mismatch"
expect_eq "fabric: 2 pods, other clique: the message names rank 1 and both cliques" "$(cm cq-0)" \
    "1 of 2 ranks expecting multi-node NVLink are outside the NVLink domain of the others: rank 1 (trainer-1): rank 1 is in clique 7 of cluster 5e1f2a90-0000-0000-0000-000000000001, 1 of 2 ranks in clique 32766"
expect_eq "fabric: 2 pods, other clique: rank 1's verdict has it too" "$(st cq-1)" "fail clique-mismatch"
contains "fabric: 2 pods, other clique: rank 1 is a culprit for it" \
    "$(yq "$T/cq-0/v.yaml" "[c['reason'] for c in d.get('culprits') or [] if c['rank'] == 1]")" \
    "not in the job's NVLink domain: rank 1 is in clique 7"
# a fault of rank 1's node alone: rank 1 exits 4 (node), rank 0 exits 5 (peer) and is no culprit
expect_eq "fabric: 2 pods, other clique: rank 0 class peer, exit 5" \
    "$(yq "$T/cq-0/v.yaml" "d['failureClass']") $(cat "$T/cq-0/rc")" "peer 5"
expect_eq "fabric: 2 pods, other clique: rank 1 class node, exit 4" \
    "$(yq "$T/cq-1/v.yaml" "d['failureClass']") $(cat "$T/cq-1/rc")" "node 4"
expect_eq "fabric: 2 pods, other clique: the culprits are rank 1 alone" \
    "$(yq "$T/cq-0/v.yaml" "sorted(c['rank'] for c in d.get('culprits') or [])")" "[1]"
# the same clique on both: no finding
rk cs-0 0 29872 NCCL_MNNVL_ENABLE=1 DOUBLE_NVML_GPUS=2 &
rk cs-1 1 29872 NCCL_MNNVL_ENABLE=1 DOUBLE_NVML_GPUS=2 &
wait
expect_eq "fabric: 2 pods, one clique: pass on rank 0" "$(st cs-0)" "pass "
expect_eq "fabric: 2 pods, one clique: pass on rank 1" "$(st cs-1)" "pass "
# a rank that does not expect multi-node NVLink (no variable, no fabric) is not compared
rk cn-0 0 29873 NCCL_MNNVL_ENABLE=1 DOUBLE_NVML_GPUS=2 &
rk cn-1 1 29873 DOUBLE_NVML_GPUS=2 DOUBLE_FABRIC=0 &
wait
expect_eq "fabric: 2 pods, one without MNNVL: no clique-mismatch" "$(st cn-0)" "pass "
for n in cq-0 cq-1 cs-0 cs-1 cn-0 cn-1; do
    if grep -qE 'AddressSanitizer|LeakSanitizer|runtime error:' "$T/$n/err"; then
        notok "fabric: $n: no sanitizer report" "$(grep -m3 -E 'Sanitizer|runtime error' "$T/$n/err")"
    fi
done
