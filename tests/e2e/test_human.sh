#!/usr/bin/env bash
# The human verdict, golden files: `preflight check` on every fixture node
# (tests/fixtures/node-*, cpu-node) compared exactly with tests/fixtures/golden/human-*.txt;
# PF_UPDATE_GOLDEN=1 rewrites them. Then what a reader relies on, whatever the goldens say:
# one header line, failures before warnings before passes, no check's message repeated by its
# first finding, a remedy printed once for every port it fixes, every line within 80 columns
# (COLUMNS respected), skips folded (-v unfolds them), colour only with a terminal, never
# with NO_COLOR, and stdout human by default when it is a pipe.
#
# What the machine would make differ is pinned: a network namespace of its own (lo and a dummy
# veth pair eth0 192.0.2.10/24 + peer0, so net.interfaces sees the same interfaces everywhere), a 16 GiB tmpfs at the tree's /dev/shm
# where the fixture has one, libnccl and libcuda pointed nowhere, the counter window 0, the
# fixture's path written as <root>. Needs root (unshare, mount); libibverbs, where installed,
# lists no device here (no RDMA NIC), so rdma.verbs skips under the fixture root either way
# only when it is installed; without it rdma.verbs fails, and the goldens assume it installed
# (scripts/deps.sh test installs libibverbs1).
source "$(dirname "$0")/lib.sh"

GOLD=$PREFLIGHT_SRC/tests/fixtures/golden
need_root "human goldens" || exit 0
if ! command -v unshare >/dev/null || ! command -v ip >/dev/null; then
    skip "human goldens" "needs unshare (util-linux) and ip (iproute2)"
    exit 0
fi
if ! ldconfig -p 2>/dev/null | grep -q 'libibverbs\.so\.1' || [ -d /sys/class/infiniband ]; then
    skip "human goldens" "the goldens assume libibverbs installed and no real HCA"
    exit 0
fi

MOUNTS=()
cleanup() {
    local m
    for m in "${MOUNTS[@]}"; do umount "$m" 2>/dev/null; done
    rm -rf "$T"
}
trap cleanup EXIT

# human NAME ROOT [VAR=VALUE...] -- ARGS...: `preflight check` in a fresh network namespace;
# stdout to $T/NAME.txt with the root's path replaced by <root>, exit code to $T/NAME.rc
human() {
    local name=$1 root=$2
    shift 2
    local vars=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do vars+=("$1"); shift; done
    shift
    unshare -n bash -c 'ip link add eth0 type veth peer name peer0 && ip link set peer0 up &&
        ip addr add 192.0.2.10/24 dev eth0 &&
        ip link set eth0 up && ip link set lo up && exec "$@"' _ env -i PATH="$PATH" HOME=/nonexistent NO_COLOR=1 \
        ASAN_OPTIONS="${ASAN_OPTIONS:-}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-}" \
        POD_NAME=trainer-0 POD_NAMESPACE=ml NODE_NAME=gpu-node-01 PREFLIGHT_COUNTERS_WINDOW=0 \
        PREFLIGHT_NCCL_LIB=/nonexistent/libnccl.so.2 PREFLIGHT_CUDA_LIB=/nonexistent/libcuda.so.1 \
        PREFLIGHT_NVML_LIB=/nonexistent/libnvidia-ml.so.1 \
        "${vars[@]}" "$PREFLIGHT" check --root "$root" "$@" >"$T/$name.raw" 2>"$T/$name.err"
    echo $? >"$T/$name.rc"
    sed "s#$root#<root>#g" "$T/$name.raw" >"$T/$name.txt"
}

golden() { # NAME: compares $T/NAME.txt with the golden file, or rewrites it
    local g=$GOLD/human-$1.txt
    if [ -n "${PF_UPDATE_GOLDEN:-}" ]; then
        cp "$T/$1.txt" "$g"
        ok "human $1: golden rewritten"
    elif diff -u "$g" "$T/$1.txt" >"$T/$1.diff" 2>&1; then
        ok "human $1: matches golden (exit $(cat "$T/$1.rc"))"
    else
        notok "human $1: matches golden" "$(head -30 "$T/$1.diff" | tr '\n' '|') (PF_UPDATE_GOLDEN=1 to accept)"
    fi
}

# per fixture: the NCCL variables a pod on it would carry
declare -A VARS=(
    [node-8gpu-ndr]="NCCL_IB_HCA==mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_7"
    [node-ports-bad]="NCCL_P2P_DISABLE=1 NCCL_SOCKET_IFNAME=lo"
    [node-roce]="NCCL_IB_GID_INDEX=3"
    [node-garbage]="NCCL_DEBUG=TRACE"
    [node-no-devinfiniband]="NCCL_IB_HCA=mlx5"
    [cpu-node]="NCCL_SOCKET_IFNAME=eth9"
)
for fx in cpu-node node-8gpu-ndr node-garbage node-no-devinfiniband node-ports-bad node-roce; do
    r=$T/$fx
    if ! "$FIX/materialize.sh" "$FIX/$fx" "$r" >/dev/null 2>&1; then
        notok "human $fx: materialize"
        continue
    fi
    if [ -d "$r/dev/shm" ] && mount -t tmpfs -o size=16g tmpfs "$r/dev/shm" 2>/dev/null; then
        MOUNTS+=("$r/dev/shm")
    fi
    # shellcheck disable=SC2086
    human "$fx" "$r" ${VARS[$fx]} --
    golden "$fx"
done
human node-ports-bad-v "$T/node-ports-bad" NCCL_P2P_DISABLE=1 NCCL_SOCKET_IFNAME=lo -- -v
golden node-ports-bad-v
human node-ports-bad-60 "$T/node-ports-bad" NCCL_P2P_DISABLE=1 NCCL_SOCKET_IFNAME=lo COLUMNS=60 --
golden node-ports-bad-60

# ---- what holds whatever the goldens say
B=$T/node-ports-bad.txt
# NCCL_P2P_DISABLE=1 (spec) wins over the down ports (node): exit 3
expect_eq "ports-bad: exit code 3 (spec)" "$(cat "$T/node-ports-bad.rc")" 3
header=$(awk 'NR == 1 { h = $0; next } /^  / { sub(/^ +/, " "); h = h $0; next } { print h; exit }' "$B")
check "ports-bad: one header line (wrapped at most): verdict, counts, pod, node" \
    grep -qxE 'preflight FAIL: 2 failed, 1 warning, [0-9]+ passed, [0-9]+ skipped; pod ml/trainer-0, node gpu-node-01' <<<"$header"
first_fail=$(grep -nE '^fail ' "$B" | head -1 | cut -d: -f1)
last_fail=$(grep -nE '^fail ' "$B" | tail -1 | cut -d: -f1)
first_warn=$(grep -nE '^warn ' "$B" | head -1 | cut -d: -f1)
first_pass=$(grep -nE '^pass ' "$B" | head -1 | cut -d: -f1)
check "ports-bad: failures, then warnings, then passes" \
    test "$first_fail" -lt "$first_warn" -a "$last_fail" -lt "$first_warn" -a "$first_warn" -lt "$first_pass"
check "ports-bad: every line within 80 columns" bash -c "! grep -qE '^.{81}' '$B'"
check "ports-bad: COLUMNS=60: every line within 60 columns" bash -c "! grep -qE '^.{61}' '$T/node-ports-bad-60.txt'"
expect_eq "ports-bad: the check's message is not repeated by its first finding" \
    "$(grep -c 'NCCL_P2P_DISABLE=1 (from the environment) turns off' "$B")" 1
expect_eq "ports-bad: port-down's remedy printed once for both ports" \
    "$(grep -c 'fix for port-down (mlx5_1 port 1, mlx5_2 port 1):' "$B")" 1
# skipped checks share one line; one that left something unknown (sys.shm: the tree holds no
# dev/shm) has its own, with what is unknown under it
expect_eq "ports-bad: one line for every skipped check, one for a skip with unknowns" \
    "$(grep -c '^skip ' "$B")" 2
expect_eq "ports-bad: sys.shm's skip names what is unknown" \
    "$(grep -A1 '^skip  sys.shm' "$B" | tail -1 | sed 's/^ *//')" \
    "- unknown shm-small: /dev/shm is not in the tree under the root prefix"
check "ports-bad: -v: skipped checks each with the reason" \
    bash -c "[ \$(grep -c '^skip ' '$T/node-ports-bad-v.txt') -gt 1 ] && ! grep -q 'says why' '$T/node-ports-bad-v.txt'"
check "ports-bad: no escape sequence with NO_COLOR and a pipe" bash -c "! grep -q $'\033' '$B'"
check "ports-bad: not YAML on a pipe" bash -c "! grep -q '^apiVersion:' '$B'"

# colour: only on a terminal (script(1) gives one), never with NO_COLOR
if command -v script >/dev/null; then
    tty_run() { # OUT [VAR=VALUE...]
        local out=$1
        shift
        script -qec "env -i PATH='$PATH' TERM=xterm PREFLIGHT_COUNTERS_WINDOW=0 PREFLIGHT_NVML_LIB=/nonexistent/libnvidia-ml.so.1 $* '$PREFLIGHT' check --root '$T/node-ports-bad'" /dev/null >"$out" 2>&1
    }
    tty_run "$T/tty.txt"
    check "terminal: colour" grep -q $'\033\\[31m' "$T/tty.txt"
    tty_run "$T/tty-nc.txt" NO_COLOR=1
    check "terminal with NO_COLOR: no colour" bash -c "! grep -q $'\033\\[3' '$T/tty-nc.txt'"
    tty_run "$T/tty-dumb.txt" TERM=dumb
    check "terminal with TERM=dumb: no colour" bash -c "! grep -q $'\033\\[3' '$T/tty-dumb.txt'"
else
    skip "terminal colour" "needs script (util-linux)"
fi
