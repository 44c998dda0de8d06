#!/usr/bin/env bash
# `make demo`: preflight at work on this machine.
#  1. `preflight check` on a fixture tree that looks like an 8-GPU, 8-HCA (NDR InfiniBand)
#     node, in the human form, and the start of its YAML verdict;
#  2. the same node with a broken port and a stray NCCL_P2P_DISABLE=1, to show a failing verdict;
#  3. a real multi-pod `preflight run` on this machine (network namespaces when root).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=bin/preflight
tmp=$(mktemp -d /tmp/preflight-demo.XXXXXX)
cleanup() {
    local m
    for m in "$tmp/node/dev/shm" "$tmp/bad/dev/shm"; do
        mountpoint -q "$m" 2>/dev/null && umount "$m"
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
bold() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
# The exit code and what it means (docs/verdict.md, "Exit codes"): a failure exits with the
# code of its failure class, spec winning over node and node over peer.
said_exit() {
    local what
    case $1 in
        0) what="pass or warn: the training container would start" ;;
        1) what="fail without a failure class: the training container would not start" ;;
        2) what="usage or config error of preflight itself" ;;
        3) what="fail, class spec: the pod spec or job config is wrong; retrying will not help" ;;
        4) what="fail, class node: this node is unfit; put the pod elsewhere" ;;
        5) what="fail, class peer: another pod, or the path to it, failed; retry the gang" ;;
        *) what="not an exit code preflight gives" ;;
    esac
    echo "exit code: $1 ($what)"
}

tests/fixtures/materialize.sh tests/fixtures/node-8gpu-ndr "$tmp/node" >/dev/null
# the pod's /dev/shm: a 16 GiB memory-backed emptyDir, as the manifests give it (as root)
[ "$(id -u)" -eq 0 ] && mount -t tmpfs -o size=16g tmpfs "$tmp/node/dev/shm" 2>/dev/null || true
# The fixture node has 8 GPUs, so nccl.library wants libnccl.so.2, which a training image
# carries and this machine may not: there, the demo's config makes nccl-missing a warning.
# (`preflight version` prints "libnccl.so.2  missing (why)" when it does not load.)
: >"$tmp/demo.yaml"
if $bin version | grep -qE '^ *libnccl\.so\.2 +missing'; then
    printf 'policy:\n  findings: {nccl-missing: warn}\n' >"$tmp/demo.yaml"
    echo "(no libnccl.so.2 on this machine, unlike a training image: the demo's config makes"
    echo " nccl-missing a warning, policy.findings in $tmp/demo.yaml)"
fi
bold "preflight check on an 8-GPU, 8-HCA NDR node (fixture tree: --root $tmp/node)"
set +e
env NCCL_IB_HCA='=mlx5_0,mlx5_1,mlx5_2,mlx5_3,mlx5_4,mlx5_5,mlx5_6,mlx5_7' \
    POD_NAME=trainer-0 POD_NAMESPACE=ml NODE_NAME=gpu-node-01 PREFLIGHT_COUNTERS_WINDOW=0 \
    $bin check --root "$tmp/node" --config "$tmp/demo.yaml" --verdict "$tmp/verdict.yaml"
said_exit $?
set -e
bold "the start of the YAML verdict ($tmp/verdict.yaml, $(wc -l <"$tmp/verdict.yaml") lines)"
head -12 "$tmp/verdict.yaml"
echo "..."

tests/fixtures/materialize.sh tests/fixtures/node-ports-bad "$tmp/bad" >/dev/null
mkdir -p "$tmp/bad/dev/shm"
[ "$(id -u)" -eq 0 ] && mount -t tmpfs -o size=16g tmpfs "$tmp/bad/dev/shm" 2>/dev/null || true
bold "the same check on a node with broken ports and NCCL_P2P_DISABLE=1 left in the pod spec"
set +e
env NCCL_P2P_DISABLE=1 POD_NAME=trainer-5 POD_NAMESPACE=ml PREFLIGHT_COUNTERS_WINDOW=0 \
    NODE_NAME=gpu-node-22 $bin check --root "$tmp/bad" --config "$tmp/demo.yaml"
said_exit $?
set -e

if [ -x scripts/demo-pods.sh ]; then
    bold "a real 4-pod preflight run on this machine"
    scripts/demo-pods.sh
fi
