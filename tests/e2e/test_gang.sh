#!/usr/bin/env bash
# Check gang end to end: six pods (network namespaces, tests/e2e/pods.sh), each a real
# `preflight run` with its own --root (PREFLIGHT_ROOT), a fixture node tree: the 8-GPU,
# 8-HCA NDR node of tests/fixtures/node-8gpu-ndr, with its NICs' PCIe links (x16 at 32 GT/s)
# written into the copy. No `expect` block in the config: every difference is found by
# comparing the pods. Each scenario gives one pod a node that differs and asserts, on every
# pod's verdict, the gang finding and that the culprits name that pod and no other:
#   healthy   all six alike: gang passes, no finding, no culprit
#   nohca     trainer-3's node has no RDMA device: gang-hca-count names it, culprit 3
#   nogpu     trainer-2's node has no GPU: gang-gpu-count names it, culprit 2
#   rail      trainer-4's mlx5_3 port DOWN: gang-ports names it (rdma.ports fails there too,
#             so trainer-4 is a culprit twice: its failed local check and the gang), culprit 4
#   pcie      trainer-1's mlx5_5 trained at x8: gang-pcie names it (a warning), no culprit
#   nic       trainer-5's node lacks mlx5_7: gang-hca-count names it, culprit 5
#   firmware  trainer-0's HCAs run other firmware: gang-firmware names it (a warning)
#   unknown   a whole gang on a platform no rule knows (NICs of a made-up provider at a rate
#             no table has, on a GPU model no table has): all agree, gang passes, nothing
#             fails
#   pair      two pods, one with 8 GPUs and 8 HCAs, one with none (the default config):
#             gang-undecided, no culprit (which of the two is wrong cannot be told)
#   scale     1,024 ranks (rank 0 real, the others simulated by tests/bench/rdv_load.py,
#             each sending the fixture's inventory), one with 7 ports ACTIVE: named alone
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pods.sh"

pods_need "gang among pods in network namespaces" ip dnsmasq python3

N=6
TO=90
pods_begin "$N" "pfg$$"

# the fixture has no NCCL library to load (this machine's is not the node's)
printf 'tcp: {messageBytes: 65536, iterations: 1}\npolicy: {findings: {nccl-missing: ignore}}\n' \
    >"$T/small.yaml"

# the base node: the NDR fixture with its NICs' PCIe links as sysfs shows a healthy one
# (drivers/pci/pci-sysfs.c: current_link_speed "32.0 GT/s PCIe", current_link_width "16")
BASE=$T/base
"$FIX/materialize.sh" "$FIX/node-8gpu-ndr" "$BASE" 2>/dev/null || { notok "materialize the base node"; exit 1; }
for d in "$BASE"/sys/class/infiniband/*; do
    dev=$(readlink -f "$d/device")
    mkdir -p "$dev"
    for a in current_link_speed max_link_speed; do echo "32.0 GT/s PCIe" >"$dev/$a"; done
    for a in current_link_width max_link_width; do echo 16 >"$dev/$a"; done
done
# node NAME: a copy of the base node to change
node() {
    rm -rf "$T/$1"
    cp -a "$BASE" "$T/$1"
    echo "$T/$1"
}

declare -A RC
declare -a ROOT
SC= PORT=

# run_all NAME: every pod under ROOT[i] (the base node when unset)
run_all() {
    SC=$1
    PORT=$(free_port)
    local i
    mkdir -p "$T/$SC"
    for ((i = 0; i < N; i++)); do
        pods_run_pod "$i" env PREFLIGHT_ROOT="${ROOT[$i]:-$BASE}"
    done
    pods_wait_all
    ROOT=()
}

export VEXPECT_IGNORE_CODES=
expect() { pods_expect gang "$@"; }

# named SC BAD CODE CULPRITS: every pod carries CODE naming trainer-BAD and no other pod,
# and the culprits are CULPRITS (a Python list)
named() {
    local bad=$2 code=$3 cul=$4 i
    for ((i = 0; i < N; i++)); do
        expect "$i" "'$code' in codes('gang')" \
            "others(finding('gang', '$code'), -1) == [$bad]" \
            "sorted(set(culprits())) == $cul"
    done
}

# ---- healthy
run_all healthy
for ((i = 0; i < N; i++)); do
    expect "$i" 'check("gang")["status"] == "pass"' 'codes("gang") == []' 'culprits() == []' \
        'check("gang")["evidence"]["inventory"]["hcas"] == "8"' \
        'check("gang")["evidence"]["inventory"]["pcie"] == "x16 at 32.0 GT/s"'
done
expect 0 'check("gang")["evidence"]["gang"]["ranksCompared"] == 6' \
    'check("gang")["evidence"]["gang"]["groups"][0]["traits"]["gpus"] == "8"'

# ---- nohca: trainer-3's node has no RDMA device
r=$(node nohca)
rm -rf "$r/sys/class/infiniband" "$r/sys/class/infiniband_verbs" "$r/dev/infiniband"
ROOT[3]=$r
run_all nohca
named nohca 3 gang-hca-count '[3]'
expect 0 '"0 HCAs; its 5 peers have 8 HCAs" in finding("gang", "gang-hca-count")'

# ---- nogpu: trainer-2's node has no GPU
r=$(node nogpu)
rm -rf "$r"/proc/driver/nvidia/gpus/* "$r"/dev/nvidia[0-9]*
ROOT[2]=$r
run_all nogpu
named nogpu 2 gang-gpu-count '[2]'
expect 0 '"0 GPUs; its 5 peers have 8 GPUs" in finding("gang", "gang-gpu-count")'

# ---- rail: trainer-4's mlx5_3 port 1 DOWN
r=$(node rail)
echo "1: DOWN" >"$r/sys/class/infiniband/mlx5_3/ports/1/state"
ROOT[4]=$r
run_all rail
named rail 4 gang-ports '[4]'
expect 4 '"port-down" in codes("rdma.ports")'
expect 0 '"7 ports ACTIVE; its 5 peers have 8 ports ACTIVE" in finding("gang", "gang-ports")'

# ---- pcie: trainer-1's mlx5_5 at x8
r=$(node pcie)
echo 8 >"$(readlink -f "$r/sys/class/infiniband/mlx5_5/device")/current_link_width"
ROOT[1]=$r
run_all pcie
named pcie 1 gang-pcie '[]'
expect 0 'next(x for x in check("gang")["findings"] if x["code"] == "gang-pcie")["status"] == "warn"'

# ---- nic: trainer-5's node lacks mlx5_7
r=$(node nic)
rm -rf "$r/sys/class/infiniband/mlx5_7" "$r/sys/class/infiniband_verbs/uverbs7"
ROOT[5]=$r
run_all nic
named nic 5 gang-hca-count '[5]'
expect 0 '"7 HCAs; its 5 peers have 8 HCAs" in finding("gang", "gang-hca-count")'

# ---- firmware: trainer-0's HCAs on other firmware
r=$(node firmware)
for f in "$r"/sys/class/infiniband/*/fw_ver; do echo "28.36.1010" >"$f"; done
ROOT[0]=$r
run_all firmware
named firmware 0 gang-firmware '[]'
expect 3 '"HCA firmware 28.36.1010" in finding("gang", "gang-firmware")'

# ---- unknown: every pod on a platform no rule knows, alike
r=$(node unknown)
for d in "$r"/sys/class/infiniband/*; do
    echo "ZX9000" >"$d/hca_type"
    echo "ZZZ0000000042" >"$d/board_id"
    echo "7.1.0042" >"$d/fw_ver"
    echo "1600 Gb/sec (8X ZDR)" >"$d/ports/1/rate"
done
for g in "$r"/proc/driver/nvidia/gpus/*/information; do
    sed -i 's/^Model:.*/Model: \t\t Quantum Tensor Unit QX-1/' "$g"
done
for ((i = 0; i < N; i++)); do ROOT[$i]=$r; done
run_all unknown
for ((i = 0; i < N; i++)); do
    expect "$i" 'check("gang")["status"] == "pass"' 'codes("gang") == []' \
        '"gang" not in str([c.get("reason") for c in d.get("culprits") or []])' \
        'check("gang")["evidence"]["inventory"]["rate"] == "1600 Gb/s"'
done

# ---- pair: 8 GPUs and 8 HCAs against none, the default config
NFULL=$N
N=2
ROOT[1]=$T/cpu
"$FIX/materialize.sh" "$FIX/cpu-node" "$T/cpu" 2>/dev/null
run_all pair
for i in 0 1; do
    expect "$i" '"gang-undecided" in codes("gang")' 'culprits() == []' \
        '"cannot tell which rank differs (gang-hca-count)" in finding("gang", "gang-undecided")' \
        '"cannot tell which rank differs (gang-gpu-count)" in finding("gang", "gang-undecided")' \
        'd["verdict"] != "pass"'
done
N=$NFULL

# ---- scale: 1,024 ranks, one outlier (rank 0 real, the others simulated)
ulimit -n 4096 2>/dev/null || true
if [ "$(ulimit -n)" -lt 1300 ]; then
    skip "scale: 1,024 ranks" "open files $(ulimit -n) < 1300"
else
    out=$(timeout 600 python3 "$PREFLIGHT_SRC/tests/bench/rdv_load.py" drive --binary "$PREFLIGHT" \
        --world 1024 --workers 2 --timeout 240 --as-mib 0 --root "$BASE" --outlier 613:ports=7 2>&1 | tail -1)
    echo "$out" >"$T/scale.json"
    check "scale: 1,024 ranks, every simulated rank got its SUMMARY" \
        python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); sys.exit(j.get("done") != 1023)' "$T/scale.json"
    check "scale: rank 613 named by gang-ports, the only culprit" \
        python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); g=j["gang"]; sys.exit(not (g["codes"] == ["gang-ports"] and j["culpritRanks"] == [613] and "rank 613 (load-613): 7 ports ACTIVE; its 1023 peers have 8 ports ACTIVE" in g["messages"][0]))' "$T/scale.json" ||
        echo "# $out"
fi
