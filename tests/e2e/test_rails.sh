#!/usr/bin/env bash
# net.rails end to end: eight pods (network namespaces, tests/e2e/pods.sh), each with its
# cluster interface eth0 and two rails, net1 and net2, veths on two more bridges (br1, br2:
# two "NICs" a pod, one network each), and a downward-API folder holding the Multus
# network-status Multus would write for it (tests/fixtures/gen-podinfo.py; device-info with
# the VF's RDMA device as the SR-IOV device plugin reports it). No RDMA NIC, SR-IOV VF or
# Kubernetes runs here: the rails are veths and the annotation is written by the test.
#   healthy    every rail at MTU 9000 on its subnet: net.rails passes, no rail finding
#   strangers  the same with a stranger holding 3 idle connections on every port the pods
#              listen on (rails' listeners, data ports): still a pass everywhere
#   subnet     trainer-3's net2 on another subnet: rail-subnet-mismatch and rail-unreachable
#              name trainer-3's net2, the only culprit
#   mtu        trainer-5's net1 at MTU 1500, the others 9000: rail-mtu-mismatch names it
#   blackhole  every pod at 9000, but trainer-6's net1 port on the node's side (the bridge)
#              at 1500: full-sized frames are dropped both ways, rail-mtu-blackhole names
#              trainer-6's net1, the only culprit
#   slow       trainer-2's net2 shaped to 40 Mbit/s both ways (tc tbf in the pod and on the
#              bridge's port), the others unshaped (Gb/s even on a busy machine):
#              rail-slow names trainer-2's net2 alone, a warning, no culprit
# Only the slow case reads rates, with a margin of two orders of magnitude (40 Mbit/s against
# the unshaped veths' Gb/s, judged at a quarter of the median); elsewhere rail-slow is left
# out of the codes compared, and a stalled transfer acknowledges nothing however long it is
# given.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pods.sh"

pods_need "rails among pods in network namespaces" ip dnsmasq python3

N=8
TO=150
pods_begin "$N" "pfq$$"

rail_ip() { echo "10.214.$1.$((10 + $2))"; } # NET POD

# the two rails of every pod: veth NAME in the pod, its peer <prefix><a|b>I on bridge brK
setup_rails() {
    local k i ns
    for k in 1 2; do
        ip -n "$PODS_SW" link add "br$k" type bridge || return 1
        ip -n "$PODS_SW" link set "br$k" mtu 9000 up
    done
    for ((i = 0; i < N; i++)); do
        ns=$(pods_ns "$i")
        for k in 1 2; do
            local port="${PODS_PREFIX}$([ $k = 1 ] && echo a || echo b)$i"
            ip link add "$port" netns "$PODS_SW" type veth peer name "net$k" netns "$ns" || return 1
            ip -n "$PODS_SW" link set "$port" mtu 9000 master "br$k" up
            ip -n "$ns" link set "net$k" mtu 9000 up
            ip -n "$ns" addr add "$(rail_ip "$k" "$i")/24" dev "net$k"
        done
    done
}
setup_rails || { notok "set up two rails a pod"; exit 1; }
ok "set up $N pods with two rails each (network namespaces, three bridges, dnsmasq)"
# no SR-IOV VF exists here: net.sriov's vf-missing for the network-status's PCI addresses is
# ignored, the rails' RDMA devices are only named
printf 'tcp: {messageBytes: 1048576, iterations: 1}\npolicy: {findings: {vf-missing: ignore}}\n' >"$T/small.yaml"

# podinfo I: pod I's downward-API folder, the network-status from its interfaces as they are
podinfo() {
    local i=$1 ns dir
    ns=$(pods_ns "$i")
    dir="$T/podinfo$i"
    rm -rf "$dir"
    ip -n "$ns" -j addr show >"$T/addr$i.json"
    python3 - "$T/addr$i.json" "$i" >"$T/ns$i.json" <<'PY'
import json, sys
links = {l["ifname"]: l for l in json.load(open(sys.argv[1]))}
i = int(sys.argv[2])
def ips(name):
    return [a["local"] for a in links[name].get("addr_info", []) if a["family"] == "inet"]
def elem(name, net, rdma, bdf):
    e = {"name": net, "interface": name, "ips": ips(name), "mac": links[name]["address"],
         "mtu": links[name]["mtu"], "dns": {}}
    if rdma:
        e["device-info"] = {"type": "pci", "version": "1.1.0",
                            "pci": {"pci-address": bdf, "rdma-device": rdma}}
    return e
out = [dict(elem("eth0", "cbr0", None, None), default=True),
       elem("net1", "ml/rail-a", "mlx5_%d" % (2 * i), "0000:%02x:00.2" % (0x10 + i)),
       elem("net2", "ml/rail-b", "mlx5_%d" % (2 * i + 1), "0000:%02x:00.3" % (0x10 + i))]
out[0].pop("mtu")
print(json.dumps(out))
PY
    python3 "$FIX/gen-podinfo.py" "$dir" "$T/ns$i.json" \
        --annotation k8s.v1.cni.cncf.io/networks=ml/rail-a,ml/rail-b >/dev/null
}

declare -A RC
SC= PORT=

# run_all NAME PORT: every pod, each with its network-status written from its interfaces as
# they are now
run_all() {
    SC=$1 PORT=$2
    local i
    mkdir -p "$T/$SC"
    for ((i = 0; i < N; i++)); do podinfo "$i"; done
    for ((i = 0; i < N; i++)); do pods_run_pod "$i" env PREFLIGHT_PODINFO="$T/podinfo$i"; done
    pods_wait_all
}

# expect I EXPR...: each Python expression holds over pod I's verdict (tests/e2e/vexpect.py:
# d, check(id), codes(id): here without rail-slow, finding(id, code), culprits(), others())
export VEXPECT_IGNORE_CODES=rail-slow
expect() { pods_expect net.rails "$@"; }

# ---- healthy
run_all healthy 29910
for ((i = 0; i < N; i++)); do
    expect "$i" 'check("net.rails")["status"] == "pass"' 'codes("net.rails") == []' \
        'culprits() == []' 'len(check("net.rails")["evidence"]["rails"]) == 2' \
        'all("gbps" in r["probe"] for r in check("net.rails")["evidence"]["rails"])'
done
expect 0 '[n["name"] for n in check("net.rails")["evidence"]["networks"]] == ["ml/rail-a", "ml/rail-b"]' \
    'all(n["probed"] == 8 and n["mtu"] == 9000 for n in check("net.rails")["evidence"]["networks"])'

# ---- strangers: from the switch (an address on each network), a stranger that finds every
# port the pods listen on (the rails' listeners included) and holds 3 idle connections to
# each, sending nothing: the rails are healthy and must pass as above
ip -n "$PODS_SW" addr add 10.214.1.250/24 dev br1
ip -n "$PODS_SW" addr add 10.214.2.250/24 dev br2
targets=()
for ((i = 0; i < N; i++)); do
    targets+=("$(pods_ns "$i")=$(pods_ip "$i"),$(rail_ip 1 "$i"),$(rail_ip 2 "$i")")
done
mkdir -p "$T/strangers"
python3 "$PREFLIGHT_SRC/tests/e2e/idle_stranger.py" --from "$PODS_SW" --seconds 60 --per 3 \
    --skip 29915 "${targets[@]}" >"$T/strangers/stranger.out" 2>&1 &
STRANGER=$!
run_all strangers 29915
kill "$STRANGER" 2>/dev/null
wait "$STRANGER" 2>/dev/null
# the stranger sat on rails listeners (bound to the rails' own addresses), not only on eth0
if grep -qE 'idle connections to 10\.214\.[12]\.' "$T/strangers/stranger.out"; then
    ok "strangers: idle connections held on the rails' listeners ($(tail -n 1 "$T/strangers/stranger.out"))"
else notok "strangers: idle connections held on the rails' listeners" "$(tail -n 3 "$T/strangers/stranger.out")"; fi
for ((i = 0; i < N; i++)); do
    expect "$i" 'check("net.rails")["status"] == "pass"' 'codes("net.rails") == []' \
        'culprits() == []' 'd["verdict"] in ("pass", "warn")'
    expect_eq "strangers: trainer-$i exit code" "$(cat "$T/$SC/rc$i")" 0
done
ip -n "$PODS_SW" addr del 10.214.1.250/24 dev br1
ip -n "$PODS_SW" addr del 10.214.2.250/24 dev br2

# ---- subnet: trainer-3's net2 on 10.214.9.0/24
ns3=$(pods_ns 3)
ip -n "$ns3" addr flush dev net2
ip -n "$ns3" addr add 10.214.9.13/24 dev net2
run_all subnet 29920
for ((i = 0; i < N; i++)); do
    expect "$i" 'check("net.rails")["status"] == "fail"' \
        'codes("net.rails") == ["rail-subnet-mismatch", "rail-unreachable"]' 'culprits() == [3]' \
        'finding("net.rails", "rail-subnet-mismatch").startswith("network ml/rail-b: 1 of 8 pods are on another subnet than 10.214.2.0/24: rank 3 (trainer-3) on node-3, net2 (RDMA device mlx5_7) has 10.214.9.13/24")' \
        'finding("net.rails", "rail-unreachable").startswith("network ml/rail-b: rank 3 (trainer-3) on node-3, net2 (RDMA device mlx5_7), 10.214.9.13/24: to rank 4 (trainer-4)")' \
        'others(finding("net.rails", "rail-unreachable"), 3) == []' \
        '"otherwise fine" not in finding("net.rails", "rail-unreachable")' \
        "d['failureClass'] == ('node' if $i == 3 else 'peer')"
    # a fault of trainer-3's node: only its pod exits 4 (node); the others exit 5 (peer)
    expect_eq "subnet: trainer-$i exit code" "$(cat "$T/$SC/rc$i")" "$([ "$i" = 3 ] && echo 4 || echo 5)"
done
ip -n "$ns3" addr flush dev net2
ip -n "$ns3" addr add "$(rail_ip 2 3)/24" dev net2

# ---- mtu: trainer-5's net1 at 1500 (both ends: a consistent but different rail)
ns5=$(pods_ns 5)
ip -n "$ns5" link set net1 mtu 1500
ip -n "$PODS_SW" link set "${PODS_PREFIX}a5" mtu 1500
run_all mtu 29930
for ((i = 0; i < N; i++)); do
    expect "$i" 'codes("net.rails") == ["rail-mtu-mismatch"]' 'culprits() == []' \
        'check("net.rails")["status"] == "warn"' \
        'finding("net.rails", "rail-mtu-mismatch") == "network ml/rail-a: 1 of 8 pods have another MTU than 9000: rank 5 (trainer-5) on node-5, net1 (RDMA device mlx5_10) has MTU 1500"'
done
ip -n "$ns5" link set net1 mtu 9000
ip -n "$PODS_SW" link set "${PODS_PREFIX}a5" mtu 9000

# ---- blackhole: trainer-6's net1 port on the bridge at 1500, every interface at 9000
ip -n "$PODS_SW" link set "${PODS_PREFIX}a6" mtu 1500
run_all blackhole 29940
for ((i = 0; i < N; i++)); do
    expect "$i" 'codes("net.rails") == ["rail-mtu-blackhole"]' 'culprits() == [6]' \
        'check("net.rails")["status"] == "fail"' \
        'finding("net.rails", "rail-mtu-blackhole").startswith("network ml/rail-a: rank 6 (trainer-6) on node-6, net1 (RDMA device mlx5_12), 10.214.1.16/24 MTU 9000: its probe to rank 7 (trainer-7) and the one from rank 5 (trainer-5) connected, but no full-MTU-sized data went through")' \
        'others(finding("net.rails", "rail-mtu-blackhole"), 6) == []' \
        "d['failureClass'] == ('node' if $i == 6 else 'peer')"
    expect_eq "blackhole: trainer-$i exit code" "$(cat "$T/$SC/rc$i")" "$([ "$i" = 6 ] && echo 4 || echo 5)"
done
ip -n "$PODS_SW" link set "${PODS_PREFIX}a6" mtu 9000

# ---- slow: trainer-2's net2 at 40 Mbit/s both ways; 4 MiB takes about 0.9 s a way, far
# inside the probe's deadline (8% of the time left: 12 s)
ns2=$(pods_ns 2)
tbf='tbf rate 40mbit burst 16kb latency 500ms'
if ip netns exec "$ns2" tc qdisc add dev net2 root $tbf &&
    ip netns exec "$PODS_SW" tc qdisc add dev "${PODS_PREFIX}b2" root $tbf; then
    run_all slow 29950
    for ((i = 0; i < N; i++)); do
        expect "$i" 'check("net.rails")["status"] == "warn"' 'codes("net.rails") == []' \
            'culprits() == []' \
            '[x["code"] for x in check("net.rails")["findings"]] == ["rail-slow"]' \
            'finding("net.rails", "rail-slow").startswith("network ml/rail-b: 1 pod is under 25% of the network\u0027s median")' \
            '"rank 2 (trainer-2) on node-2, net2 (RDMA device mlx5_5)" in finding("net.rails", "rail-slow")' \
            'others(finding("net.rails", "rail-slow"), 2) == []'
    done
    expect 2 '[r["probe"]["gbps"] < 0.1 for r in check("net.rails")["evidence"]["rails"]] == [False, True]'
else
    skip "slow: trainer-2's net2 shaped" "tc tbf not available"
fi
ip netns exec "$ns2" tc qdisc del dev net2 root 2>/dev/null
ip netns exec "$PODS_SW" tc qdisc del dev "${PODS_PREFIX}b2" root 2>/dev/null
