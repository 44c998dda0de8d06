#!/usr/bin/env bash
# The GPU path for real: `preflight run` in 2-4 "pods" that share one NVIDIA GPU, each in its
# own network namespace and UTS namespace (its own hostname, so NCCL treats every pod as a
# node of its own and moves data over NET/Socket) on a bridge, with dnsmasq serving the
# headless Service's names (tests/e2e/pods.sh). It checks that every pod's collective.nccl
# passes with an exact result, that the transport read from NCCL's own log is Socket and that
# busbw is reported; then it runs PyTorch's torch.distributed all_reduce in the same layout on
# the same size (tests/gpu/torch_allreduce.py) when torch imports, and prints a table for
# docs/performance.md.
#
# Needs: Linux, an NVIDIA GPU with its driver (libcuda.so.1), libnccl.so.2 where preflight
# finds it (or PREFLIGHT_NCCL_LIB), root (namespaces), iproute2, util-linux unshare, dnsmasq,
# python3 with PyYAML. Without a GPU it says so and exits 77 (the automake "skipped" status);
# the same for any other missing piece. Exit 0: every check passed; 1: one failed.
#
#   sudo tests/gpu/e2e.sh                 # 2 pods, 256 MiB
#   sudo GPU_E2E_PODS=4 GPU_E2E_BYTES=67108864 tests/gpu/e2e.sh
# Other knobs: GPU_E2E_ITERS (20), GPU_E2E_WARMUP (5), GPU_E2E_DEVICE (0: the GPU every pod
# uses), PREFLIGHT (a preflight binary; default: `make bin/preflight` and use it), GPU_E2E_OUT
# (a folder to copy the verdicts, NCCL logs and tables to).
set -u
cd "$(dirname "$0")/../.." || exit 2
SRC=$PWD
PODS=${GPU_E2E_PODS:-2}
BYTES=${GPU_E2E_BYTES:-268435456}
ITERS=${GPU_E2E_ITERS:-20}
WARMUP=${GPU_E2E_WARMUP:-5}
DEV=${GPU_E2E_DEVICE:-0}

skip() {
    echo "tests/gpu/e2e.sh: skipped: $*" >&2
    exit 77
}

# ---- what this machine has
[ "$(uname -s)" = Linux ] || skip "not Linux"
if [ ! -e /dev/nvidia0 ] && [ ! -d /proc/driver/nvidia/gpus ]; then
    skip "no NVIDIA GPU on this machine (no /dev/nvidia0, no /proc/driver/nvidia/gpus); run it on a GPU node"
fi
if ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1' && [ -z "${PREFLIGHT_CUDA_LIB:-}" ]; then
    skip "an NVIDIA device node exists but libcuda.so.1 (the driver's library) is not installed"
fi
case "$PODS" in 2 | 3 | 4) ;; *) echo "GPU_E2E_PODS must be 2, 3 or 4" >&2; exit 2 ;; esac
[ "$(id -u)" -eq 0 ] || skip "needs root for network and UTS namespaces (run with sudo)"
for tool in ip unshare dnsmasq python3; do
    command -v "$tool" >/dev/null || skip "$tool is not installed"
done
python3 -c 'import yaml' 2>/dev/null || skip "python3 has no PyYAML (apt install python3-yaml)"

if [ -z "${PREFLIGHT:-}" ]; then
    make -s bin/preflight || { echo "make bin/preflight failed" >&2; exit 1; }
    PREFLIGHT=$SRC/bin/preflight
fi
"$PREFLIGHT" version >/dev/null || { echo "$PREFLIGHT does not run" >&2; exit 1; }
if ! "$PREFLIGHT" check --format yaml --verdict - 2>/dev/null |
    python3 -c 'import sys, yaml; d = yaml.safe_load(sys.stdin); sys.exit(0 if any(c["id"] == "nccl.library" and c["status"] in ("pass", "warn") for c in d["checks"]) else 1)'; then
    skip "libnccl.so.2 does not load here (install NCCL, or set PREFLIGHT_NCCL_LIB)"
fi

W=$(mktemp -d /tmp/preflight-gpu-e2e.XXXXXX)
source "$SRC/tests/e2e/pods.sh"
cleanup() { pods_cleanup; }
trap cleanup EXIT
pods_setup "$PODS" "pfg$$" || { echo "could not create the pods' namespaces" >&2; exit 1; }

FAILED=0
ok() { echo "ok - $1"; }
notok() { echo "not ok - $1${2:+: $2}"; FAILED=1; }

# NCCL in every pod: only eth0, no InfiniBand and no net plugin, so the path between "nodes"
# is NET/Socket whatever HCAs the machine has; the pods' different hostnames give different
# host hashes, so NCCL neither uses P2P/SHM between them nor rejects the shared GPU.
NCCL_VARS=(CUDA_VISIBLE_DEVICES="$DEV" NCCL_SOCKET_IFNAME=eth0 NCCL_IB_DISABLE=1
    NCCL_NET_PLUGIN=none)
cat >"$W/config.yaml" <<EOF
messageBytes: $BYTES
expect: {transport: Socket}
nccl: {iterations: $ITERS, warmup: $WARMUP, timeoutSeconds: 300}
tcp: {messageBytes: 16777216}
EOF

# ---- preflight in every pod
mkdir -p "$W/root"
for ((i = 0; i < PODS; i++)); do
    mkdir -p "$W/pod-$i"
    pod_start "$i" "$W/pod-$i/out" env PREFLIGHT_TOKEN=gpu-e2e "${NCCL_VARS[@]}" \
        "$PREFLIGHT" run --config "$W/config.yaml" --verdict "$W/pod-$i/verdict.yaml" \
        --format yaml --rank "$i" --world-size "$PODS" \
        --coordinator "trainer-0.$PODS_DOMAIN" --port 29400 --timeout 600
done
for ((i = 0; i < PODS; i++)); do wait "${POD_PID[$i]}"; echo $? >"$W/pod-$i/rc"; done

python3 - "$W" "$PODS" >"$W/preflight.json" 2>"$W/check.err" <<'PY'
import json, sys, yaml
w, n = sys.argv[1], int(sys.argv[2])
out = []
for i in range(n):
    try:
        d = yaml.safe_load(open("%s/pod-%d/verdict.yaml" % (w, i)))
    except Exception as e:
        out.append({"pod": i, "error": "no verdict: %s" % e})
        continue
    c = next((c for c in d["checks"] if c["id"] == "collective.nccl"), None) or {}
    col = next((x for x in d.get("collectives") or [] if x.get("backend") == "nccl"
                and x.get("op") == "allreduce"), None) or {}
    out.append({"pod": i, "status": c.get("status"), "message": c.get("message"),
                "codes": sorted(f["code"] for f in c.get("findings") or []),
                "ncclVersion": d.get("environment", {}).get("ncclVersion"), **col})
print(json.dumps(out))
PY
for ((i = 0; i < PODS; i++)); do
    r=$(python3 -c "
import json, sys
p = json.load(open('$W/preflight.json'))[$i]
if 'error' in p: print('error', p['error']); sys.exit()
print(p['status'], p.get('transport'), p.get('correct'), p.get('busbwGBps'), p['codes'], '|', p['message'])")
    set -- $r
    if [ "$1" = pass ]; then ok "pod $i: collective.nccl passes"; else notok "pod $i: collective.nccl" "$r"; fi
    if [ "${2:-}" = Socket ]; then ok "pod $i: transport Socket read from NCCL's log"; else notok "pod $i: transport" "$r"; fi
    if [ "${3:-}" = True ]; then ok "pod $i: the all-reduce result is exact"; else notok "pod $i: result" "$r"; fi
    case "${4:-None}" in None | 0 | 0.0) notok "pod $i: busbw reported" "$r" ;; *) ok "pod $i: busbw reported (${4} GB/s)" ;; esac
    [ -s "$W/pod-$i/nccl-rank$i.log" ] && ok "pod $i: NCCL's log kept next to the verdict" ||
        notok "pod $i: NCCL's log kept" "no $W/pod-$i/nccl-rank$i.log"
done

# ---- PyTorch in the same layout
TORCH_JSON=""
if pod_exec 0 python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    for ((i = 0; i < PODS; i++)); do
        pod_start "$i" "$W/torch-$i.out" env "${NCCL_VARS[@]}" NCCL_DEBUG=INFO \
            NCCL_DEBUG_FILE="$W/torch-nccl.%h.%p.log" python3 "$SRC/tests/gpu/torch_allreduce.py" \
            --rank "$i" --world-size "$PODS" --master "$(pods_ip 0)" --port 29500 \
            --bytes "$BYTES" --iters "$ITERS" --warmup "$WARMUP"
    done
    for ((i = 0; i < PODS; i++)); do wait "${POD_PID[$i]}"; done
    TORCH_JSON=$(grep -h '^{' "$W/torch-0.out" | tail -1)
    if [ -n "$TORCH_JSON" ]; then
        ok "torch.distributed all_reduce ran in the same layout"
        grep -lq "Using network Socket\|NET/Socket : Using" "$W"/torch-nccl.*.log 2>/dev/null &&
            ok "torch's NCCL used NET/Socket too" || notok "torch's NCCL transport" "not Socket in its log"
    else
        notok "torch.distributed all_reduce" "$(tail -5 "$W/torch-0.out")"
    fi
else
    echo "torch: not importable here (or no CUDA in it): no PyTorch comparison"
fi

# ---- the table
python3 - "$W/preflight.json" "$TORCH_JSON" "$PODS" <<'PY'
import json, subprocess, sys
p = json.load(open(sys.argv[1]))
t = json.loads(sys.argv[2]) if sys.argv[2] else None
n = int(sys.argv[3])
gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                     capture_output=True, text=True).stdout.strip().splitlines()
print()
print("GPU: %s; %d pods (network + UTS namespaces on one bridge) on that one GPU" %
      (gpu[0] if gpu else "unknown", n))
print()
print("| runner | NCCL | ranks | bytes | transport | time/iter | algbw GB/s | busbw GB/s | exact |")
print("|---|---|---|---|---|---|---|---|---|")
r = p[0]
if "error" not in r:
    print("| preflight collective.nccl | %s | %s | %s | %s | %s us | %s | %s | %s |" % (
        r.get("ncclVersion"), r.get("ranks"), r.get("bytes"), r.get("transport"), r.get("timeUs"),
        r.get("algbwGBps"), r.get("busbwGBps"), r.get("correct")))
if t:
    print("| torch.distributed all_reduce (torch %s) | %s | %s | %s | Socket | %s us | %s | %s | %s |" % (
        t["torch"], t["nccl"], t["ranks"], t["bytes"], t["timeUs"], t["algbwGBps"],
        t["busbwGBps"], t["correct"]))
else:
    print("| torch.distributed all_reduce | - | - | - | - | not run: torch not importable | - | - | - |")
PY
echo
echo "verdicts and logs: $W"
if [ -n "${GPU_E2E_OUT:-}" ]; then
    mkdir -p "$GPU_E2E_OUT" && cp -r "$W"/. "$GPU_E2E_OUT"/
fi
trap - EXIT
pods_cleanup
exit "$FAILED"
