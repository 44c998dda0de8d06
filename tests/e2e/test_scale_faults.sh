#!/usr/bin/env bash
# The link probes name the planted culprit, and only it: eight pods (network namespaces on a
# bridge, tests/e2e/pods.sh), each scenario plants one fault and asserts every pod's verdict.
#   link  one direction of one link shaped with tc (trainer-2 -> trainer-5 at 40 Mbit/s, an
#         htb class and a u32 filter on trainer-2's eth0 for trainer-5's address): a
#         slow-link finding naming both ends, no slow node, no culprit
#   strangers  the same, with a stranger holding an idle connection on every port the pods
#         listen on (data ports included, during the confirmation probes): the same verdicts
#   node  every link of trainer-4 shaped (its eth0 and its port on the switch, 40 Mbit/s):
#         a slow-node finding and exactly one culprit, trainer-4
#   cpu   trainer-6 pinned to one core that two busy loops hold: no slow link, and no culprit
#         other than trainer-6 (a starved CPU may slow a pod; it never blames another)
# The rates are far apart whatever the machine's load: 40 Mbit/s against veth pairs that
# carry Gbit/s, and the timeouts leave minutes for a busy two-core host.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pods.sh"

pods_need "link probes among pods in network namespaces" ip dnsmasq tc taskset

N=8
TO=90
BUSY=()
cleanup() {
    local p
    for p in "${BUSY[@]}"; do kill "$p" 2>/dev/null; done
    pods_end
}
pods_begin "$N" "pfs$$" cleanup
printf 'tcp: {messageBytes: 1048576, iterations: 1}\n' >"$T/small.yaml"

declare -A RC
SC= PORT=

# run_all NAME PORT [I CMD-PREFIX...]: every pod, pod I under CMD-PREFIX when given
run_all() {
    SC=$1 PORT=$2
    local special=${3:--1} i
    shift 3 2>/dev/null || shift $#
    mkdir -p "$T/$SC"
    for ((i = 0; i < N; i++)); do
        if [ "$i" = "$special" ]; then pods_run_pod "$i" "$@"; else pods_run_pod "$i"; fi
    done
    pods_wait_all
}

# expect I EXPR...: every Python expression holds over pod I's verdict (tests/e2e/vexpect.py:
# d, check(id), codes(id), finding(id, code), culprits())
expect() { pods_expect collective.tcp "$@"; }

tbf='tbf rate 40mbit burst 16kb latency 500ms'

# ---- link: trainer-2 -> trainer-5 only (strangers: the same, with a stranger on the switch
# holding one idle connection to every port the pods listen on, the data ports during the
# confirmation probes included; it changes nothing)
sc_link() {
    local ns2 name=${1:-link} port=${2:-29810} stranger=
    ns2=$(pods_ns 2)
    # htb with one shaped class; what no filter picks bypasses it (default 0)
    ip netns exec "$ns2" tc qdisc add dev eth0 root handle 1: htb default 0 &&
        ip netns exec "$ns2" tc class add dev eth0 parent 1: classid 1:10 htb rate 40mbit \
            ceil 40mbit burst 16kb 2>/dev/null &&
        ip netns exec "$ns2" tc filter add dev eth0 parent 1: protocol ip prio 1 u32 \
            match ip dst "$(pods_ip 5)/32" flowid 1:10 ||
        { notok "link: tc on trainer-2 for trainer-5"; return; }
    if [ "$name" = strangers ]; then
        local targets=() k
        for ((k = 0; k < N; k++)); do targets+=("$(pods_ns "$k")=$(pods_ip "$k")"); done
        mkdir -p "$T/$name"
        python3 "$PREFLIGHT_SRC/tests/e2e/idle_stranger.py" --from "$PODS_SW" --seconds 120 \
            --per 1 --skip "$port" "${targets[@]}" >"$T/$name/stranger.out" 2>&1 &
        stranger=$!
    fi
    run_all "$name" "$port"
    ip netns exec "$ns2" tc qdisc del dev eth0 root
    if [ -n "$stranger" ]; then
        kill "$stranger" 2>/dev/null
        wait "$stranger" 2>/dev/null
        local held
        held=$(sed -nE 's/^idle_stranger: held ([0-9]+) .*/\1/p' "$T/$name/stranger.out")
        if [ "${held:-0}" -ge "$N" ]; then ok "strangers: idle connections on the pods' ports ($held)"
        else notok "strangers: idle connections on the pods' ports" "$(tail -n 2 "$T/$name/stranger.out")"; fi
    fi
    local i
    for ((i = 0; i < N; i++)); do
        expect "$i" 'd["verdict"] == "warn"' 'codes("collective.tcp") == ["slow-link"]' \
            '"rank 2 (trainer-2) to rank 5 (trainer-5)" in finding("collective.tcp", "slow-link")' \
            'culprits() == []'
    done
    # rank 0 lists every sample, the shaped link's among them: in links up to 48 samples, in
    # linkRates (all of linksMeasured) above (docs/verdict.md)
    expect 0 '(lambda e: (sum(len(v.split()) for v in e["linkRates"].values()) == e["linksMeasured"] > 48 and any(x.startswith("5=") for x in e["linkRates"]["2"].split())) if "linkRates" in e else (len(e["links"]) <= 48 and "linksMeasured" not in e and any((l["from"], l["to"]) == (2, 5) for l in e["links"])))(check("collective.tcp")["evidence"])'
}

# ---- node: every link of trainer-4
sc_node() {
    ip netns exec "$(pods_ns 4)" tc qdisc add dev eth0 root $tbf &&
        ip netns exec "$PODS_SW" tc qdisc add dev "${PODS_PREFIX}v4" root $tbf ||
        { notok "node: tc on trainer-4's link"; return; }
    run_all node 29820
    ip netns exec "$(pods_ns 4)" tc qdisc del dev eth0 root
    ip netns exec "$PODS_SW" tc qdisc del dev "${PODS_PREFIX}v4" root
    local i
    for ((i = 0; i < N; i++)); do
        expect "$i" 'd["verdict"] == "fail"' '"slow-node" in codes("collective.tcp")' \
            '"slow-link" not in codes("collective.tcp")' \
            '"rank 4 (trainer-4)" in finding("collective.tcp", "slow-node")' \
            'culprits() == [4]'
    done
}

# ---- cpu: trainer-6 on one core that two busy loops hold
sc_cpu() {
    local k
    for k in 1 2; do
        taskset -c 0 sh -c 'while :; do :; done' &
        BUSY+=($!)
    done
    run_all cpu 29830 6 taskset -c 0
    for k in "${BUSY[@]}"; do kill "$k" 2>/dev/null; done
    BUSY=()
    local i
    for ((i = 0; i < N; i++)); do
        expect "$i" '"slow-link" not in codes("collective.tcp")' 'culprits() in ([], [6])' \
            'check("collective.tcp")["status"] in ("pass", "fail")'
    done
}

sc_strangers() { sc_link strangers 29840; }

# ONLY="link node" runs those scenarios alone
for s in link strangers node cpu; do
    [ -z "${ONLY:-}" ] || [[ " $ONLY " == *" $s "* ]] || continue
    "sc_$s"
done
