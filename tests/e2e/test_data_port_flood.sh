#!/usr/bin/env bash
# Thousands of idle connections queued on one pod's data port: the real peers still get in.
# Three pods (network namespaces on a bridge, tests/e2e/pods.sh) run `preflight run`; before
# the data mesh forms, a stranger on the switch (tests/e2e/idle_stranger.py) opens COUNT idle
# connections to trainer-1's data port and holds them, sending nothing. trainer-1 and
# trainer-2 start first and wait for rank 0; trainer-0 starts only once every stranger
# connection is open, so all of them sit in trainer-1's accept queue ahead of the real peers'
# data connections (net.core.somaxconn is raised to 16384 in trainer-1's namespace, and only
# there, so that the kernel queues all 10,000 rather than dropping SYNs past 4,096).
#   none    no stranger (the control)
#   s2500   2,500 strangers: the mesh formed 128 connections a second before and missed its
#           deadline (every pod exit 5)
#   s10000  10,000 strangers
# Each asserts: every pod passes (exit 0, collective.tcp pass, nobody blamed, its data mesh
# formed before the wait it was given: collective.tcp evidence dataMesh), and trainer-1's
# evidence counts what its data port did (every stranger accepted and closed, both real
# connections taken).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pods.sh"

pods_need "idle strangers on a pod's data port" ip dnsmasq sysctl

N=3
TO=60 # the mesh's own wait is a fifth of what is left (pkg/run/budget.c): about 10 s here
STRANGER=
cleanup() {
    [ -n "$STRANGER" ] && kill "$STRANGER" 2>/dev/null
    pods_end
}
pods_begin "$N" "pfd$$" cleanup
printf 'tcp: {messageBytes: 1048576, iterations: 1}\nreport: {events: false}\n' >"$T/small.yaml"
ip netns exec "$(pods_ns 1)" sysctl -qw net.core.somaxconn=16384 ||
    { notok "net.core.somaxconn in trainer-1's namespace"; exit 1; }

declare -A RC
SC= PORT=

# flood NAME PORT COUNT: COUNT idle strangers on trainer-1's data port before the mesh
flood() {
    SC=$1 PORT=$2
    local count=$3 i
    mkdir -p "$T/$SC"
    pods_run_pod 1
    pods_run_pod 2
    if [ "$count" -gt 0 ]; then
        python3 "$PREFLIGHT_SRC/tests/e2e/idle_stranger.py" --from "$PODS_SW" --seconds 150 \
            --per "$count" --skip "$PORT" "$(pods_ns 1)=$(pods_ip 1)" >"$T/$SC/stranger.out" 2>&1 &
        STRANGER=$!
        if wait_for_text "$T/$SC/stranger.out" "^idle_stranger: $count idle connections open" 60; then
            ok "$SC: $count idle connections open on trainer-1's data port ($(grep -m1 'idle connections to' "$T/$SC/stranger.out"))"
        else
            notok "$SC: $count idle connections open on trainer-1's data port" \
                "$(tail -n 2 "$T/$SC/stranger.out" | tr '\n' '|')"
        fi
    fi
    pods_run_pod 0
    pods_wait_all
    if [ -n "$STRANGER" ]; then
        kill "$STRANGER" 2>/dev/null
        wait "$STRANGER" 2>/dev/null
        STRANGER=
    fi
    for ((i = 0; i < N; i++)); do
        pods_expect collective.tcp "$i" 'd["verdict"] in ("pass", "warn")' \
            'check("collective.tcp")["status"] in ("pass", "warn")' 'culprits() == []' \
            '"peer-lost" not in codes("collective.tcp")' \
            'check("collective.tcp")["evidence"]["dataMesh"]["seconds"] < check("collective.tcp")["evidence"]["dataMesh"]["waitSeconds"]'
        expect_eq "$SC: trainer-$i exit code" "${RC[$i]}" 0
    done
    # trainer-1's data port: the two real connections taken, every stranger accepted and
    # closed, the mesh formed before its deadline
    pods_expect collective.tcp 1 'check("collective.tcp")["evidence"]["dataMesh"]["taken"] == 2' \
        "check('collective.tcp')['evidence']['dataMesh']['accepted'] >= $count + 2" \
        "check('collective.tcp')['evidence']['dataMesh']['closed'] >= $count" \
        'check("collective.tcp")["evidence"]["dataMesh"]["seconds"] < check("collective.tcp")["evidence"]["dataMesh"]["waitSeconds"]'
    echo "# $SC: trainer-1 dataMesh $(python3 -c 'import sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
c = next((c for c in d.get("checks", []) if c["id"] == "collective.tcp"), {})
print((c.get("evidence") or {}).get("dataMesh"))' "$T/$SC/v1.yaml" 2>/dev/null)"
}

# ONLY="s10000" runs that scenario alone
for s in none:0 s2500:2500 s10000:10000; do
    name=${s%%:*}
    [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $name "* ]] || continue
    case $name in none) port=29950 ;; s2500) port=29960 ;; s10000) port=29970 ;; esac
    flood "$name" "$port" "${s#*:}"
done
