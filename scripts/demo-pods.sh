#!/usr/bin/env bash
# A real 4-pod `preflight run` on this machine: as root, four "pods" in network and UTS
# namespaces on a bridge, finding rank 0 through dnsmasq as in Kubernetes
# (tests/e2e/pods.sh); otherwise four processes on loopback. Prints rank 0's log as
# `kubectl logs` of its initContainer would show it (progress lines, then the human verdict),
# and the start of its YAML verdict. Leaves no process or namespace behind.
set -uo pipefail
cd "$(dirname "$0")/.."
bin=${PREFLIGHT:-bin/preflight}
[ -x "$bin" ] || { echo "demo-pods: $bin is not built (make bin/preflight)" >&2; exit 1; }
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
tmp=$(mktemp -d /tmp/preflight-demo-pods.XXXXXX)
printf 'tcp: {messageBytes: 16777216, iterations: 3}\n' >"$tmp/config.yaml"
pids=()
netns=false
if [ "$(id -u)" -eq 0 ] && command -v ip >/dev/null && command -v dnsmasq >/dev/null &&
    command -v unshare >/dev/null; then
    netns=true
fi
cleanup() {
    local p
    for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null; done
    $netns && pods_cleanup
    wait 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

if $netns; then
    source tests/e2e/pods.sh
    echo "setting up 4 pods: network namespaces on a bridge, dnsmasq serving trainer-N.$PODS_DOMAIN"
    pods_setup 4 "pfd$$" || { echo "demo-pods: cannot set up the pods" >&2; exit 1; }
    for i in 0 1 2 3; do
        pod_start "$i" "$tmp/out$i" env POD_NAME="trainer-$i" POD_NAMESPACE=ml \
            NODE_NAME="node-$i" PREFLIGHT_WORLD_SIZE=4 NCCL_SOCKET_IFNAME=eth0 \
            "$bin" run --config "$tmp/config.yaml" --verdict "$tmp/v$i.yaml" \
            --timeout 60
        pids+=("${POD_PID[$i]}")
    done
    echo "started trainer-0..3: each derives its rank from its hostname and finds rank 0 at"
    echo "trainer-0.$PODS_DOMAIN (no --rank, no --coordinator)"
else
    echo "not root: 4 preflight processes on loopback (127.0.0.1) instead of network namespaces"
    port=$((29500 + $$ % 400))
    for i in 0 1 2 3; do
        env POD_NAME="trainer-$i" POD_NAMESPACE=ml NODE_NAME=localhost NCCL_SOCKET_IFNAME=lo \
            "$bin" run --rank "$i" --world-size 4 --coordinator 127.0.0.1 --port "$port" \
            --config "$tmp/config.yaml" --verdict "$tmp/v$i.yaml" --timeout 60 \
            >"$tmp/out$i" 2>&1 &
        pids+=($!)
    done
fi
rc=0
for i in 0 1 2 3; do
    wait "${pids[$i]}"
    r=$?
    [ "$r" -gt "$rc" ] && rc=$r
    echo "trainer-$i finished: exit $r"
done
pids=()
if [ -s "$tmp/v0.yaml" ]; then
    printf '\n\033[1m== rank 0'"'"'s log, as kubectl logs shows it (%s lines)\033[0m\n' "$(wc -l <"$tmp/out0")"
    cat "$tmp/out0"
    printf '\n\033[1m== the start of rank 0'"'"'s YAML verdict (%s, %s lines)\033[0m\n' \
        "$tmp/v0.yaml" "$(wc -l <"$tmp/v0.yaml")"
    head -12 "$tmp/v0.yaml"
    echo "..."
else
    echo "rank 0 wrote no verdict; its output:"
    tail -20 "$tmp/out0"
fi
exit "$rc"
