#!/usr/bin/env bash
# net.multus and net.sriov end to end: `preflight check` inside a network namespace holding real
# veth interfaces named as Multus names them (eth0 for the cluster network, net1, net2), with
# the downward-API folder written as the kubelet writes it (key="Go-quoted value" lines behind
# an atomically swapped ..data link) and the network-status as Multus writes it
# (tests/fixtures/gen-podinfo.py). Each scenario changes one thing (a missing network, a
# missing, down or carrier-less interface, a lost address, the MTU, a VF without RDMA, an
# NCCL_IB_HCA the pod was not given, an annotation arriving late or never) and asserts the
# finding codes and the exit code. Runs against the sanitizer build and bin/preflight-static.
source "$(dirname "$0")/lib.sh"

need_root "net.multus in a network namespace" || exit 0
command -v ip >/dev/null || { skip "net.multus in a network namespace" "ip (iproute2) not installed"; exit 0; }

POD=pfl$$m  # the pod's network namespace
HOST=pfl$$h # the other ends of the veths (the node's side)
cleanup() {
    ip netns del "$POD" 2>/dev/null
    ip netns del "$HOST" 2>/dev/null
    [ -n "${KEEP_TMP:-}" ] && echo "# kept $T" || rm -rf "$T"
}
trap cleanup EXIT
ip netns add "$POD" || { notok "create network namespace $POD"; exit 1; }
ip netns add "$HOST" || { notok "create network namespace $HOST"; exit 1; }
ip -n "$POD" link set lo up

# veth NAME MAC MTU [ADDR/LEN]: NAME in the pod, its peer h-NAME on the node's side, both up
veth() {
    ip link add "h-$1" netns "$HOST" type veth peer name "$1" netns "$POD" || return 1
    ip -n "$HOST" link set "h-$1" mtu "$3" up
    ip -n "$POD" link set "$1" address "$2" mtu "$3"
    [ -n "${4:-}" ] && ip -n "$POD" addr add "$4" dev "$1"
    ip -n "$POD" link set "$1" up
}
veth eth0 0a:58:0a:87:00:93 1500 10.135.0.147/24 &&
    veth net1 d6:25:47:a2:36:6b 9000 10.203.1.11/24 &&
    veth net2 d6:25:47:a2:36:6c 9000 10.203.2.11/24 ||
    { notok "create veth interfaces"; exit 1; }
links_up "$POD" eth0 net1 net2

# ---- the network-status Multus writes for this pod
CLUSTER='{"name": "ovn-kubernetes", "interface": "eth0", "ips": ["10.135.0.147"], "mac": "0a:58:0a:87:00:93", "default": true, "dns": {}}'
NET1='{"name": "ml/sriov-a", "interface": "net1", "ips": ["10.203.1.11"], "mac": "d6:25:47:a2:36:6b", "mtu": 9000, "dns": {}, "device-info": {"type": "pci", "version": "1.1.0", "pci": {"pci-address": "0000:c4:00.2", "rdma-device": "mlx5_3"}}}'
NET2='{"name": "ml/sriov-b", "interface": "net2", "ips": ["10.203.2.11"], "mac": "d6:25:47:a2:36:6c", "mtu": 9000, "dns": {}, "device-info": {"type": "pci", "version": "1.0.0", "pci": {"pci-address": "0000:c4:00.3", "rdma-device": "mlx5_4,mlx5_5"}}}'
NET2_NOIPS='{"name": "ml/sriov-b", "interface": "net2", "mac": "d6:25:47:a2:36:6c", "mtu": 9000, "dns": {}}'
NET3='{"name": "ml/sriov-c", "interface": "net3", "ips": ["10.203.3.11"], "mac": "d6:25:47:a2:36:6d", "mtu": 9000, "dns": {}}'
# the same networks without device-info (as a macvlan or ipvlan attachment writes them), for the
# root that has no sysfs: net.sriov then has nothing to look at
plain() { python3 -c 'import json,sys; e=json.loads(sys.argv[1]); e.pop("device-info",None); print(json.dumps(e))' "$1"; }
PNET1=$(plain "$NET1")
PNET2=$(plain "$NET2")
HEALTHY="[$CLUSTER, $PNET1, $PNET2]"
SRIOV="[$CLUSTER, $NET1, $NET2]"
REQUEST=k8s.v1.cni.cncf.io/networks=ml/sriov-a,ml/sriov-b

# publish DIR JSON [gen-podinfo options]: writes DIR/annotations and DIR/labels the way the
# kubelet's atomic writer does: a fresh ..<timestamp> folder, ..data swapped to it with
# rename(2), annotations and labels as links through ..data
publish() {
    local dir=$1 json=$2 ts
    shift 2
    mkdir -p "$dir"
    ts="..$(date +%Y_%m_%d_%H_%M_%S).$RANDOM$RANDOM"
    printf '%s\n' "$json" >"$T/spec.json"
    python3 "$FIX/gen-podinfo.py" "$dir/$ts" "$T/spec.json" --annotation "$REQUEST" \
        --label batch.kubernetes.io/job-completion-index=3 "$@" || return 1
    ln -sfn "$ts" "$dir/..data_tmp"
    local old
    old=$(readlink "$dir/..data" 2>/dev/null || true)
    mv -T "$dir/..data_tmp" "$dir/..data"
    for f in annotations labels; do [ -L "$dir/$f" ] || ln -s "..data/$f" "$dir/$f"; done
    [ -n "$old" ] && [ "$old" != "$ts" ] && rm -rf "${dir:?}/$old"
    return 0
}

# a root with nothing but the podinfo folder, /dev/shm and the port range, so that the exit
# code depends on the network checks alone
ROOT=$T/root
mkdir -p "$ROOT/dev/shm" "$ROOT/proc/sys/net/ipv4"
printf '32768\t60999\n' >"$ROOT/proc/sys/net/ipv4/ip_local_port_range"
mount -t tmpfs -o size=1g pfl$$shm "$ROOT/dev/shm" 2>/dev/null && SHM_MOUNTED=1
cleanup() {
    [ -n "${SHM_MOUNTED:-}" ] && umount "$ROOT/dev/shm" 2>/dev/null
    [ -n "${SRIOV_SHM:-}" ] && umount "$SRIOV_SHM" 2>/dev/null
    ip netns del "$POD" 2>/dev/null
    ip netns del "$HOST" 2>/dev/null
    [ -n "${KEEP_TMP:-}" ] && echo "# kept $T" || rm -rf "$T"
}
PI=$ROOT/etc/podinfo

cat >"$T/cfg-expect.yaml" <<'EOF'
expect:
  networks: [ml/sriov-a, ml/sriov-b]
  mtu: 9000
podinfo:
  waitSeconds: 2
EOF

# pf NAME ROOT CONFIG [VAR=VALUE...]: `preflight check` in the pod's namespace with a clean
# environment; YAML to $T/NAME.yaml, stderr to $T/NAME.err, exit code to $T/NAME.rc
pf() {
    local name=$1 root=$2 cfg=$3
    shift 3
    ip netns exec "$POD" timeout 60 env -i PATH="$PATH" HOME=/nonexistent NO_COLOR=1 \
        ASAN_OPTIONS="${ASAN_OPTIONS:-}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-}" "$@" \
        "$BIN" check --root "$root" --config "$cfg" --format yaml --verdict - \
        >"$T/$name.yaml" 2>"$T/$name.err"
    echo $? >"$T/$name.rc"
}
rc() { cat "$T/$1.rc"; }
st() { yq "$T/$1.yaml" "(check('$2') or {}).get('status')"; }
codes_() { yq "$T/$1.yaml" "','.join(sorted(f['code'] for f in (check('$2') or {}).get('findings') or []))"; }
# expect_check NAME ID STATUS CODES
expect_check() {
    expect_eq "$L$1: $2 is $3 [$4]" "$(st "$1" "$2") [$(codes_ "$1" "$2")]" "$3 [$4]"
}
expect_rc() { expect_eq "$L$1: exit code $2" "$(rc "$1")" "$2"; }
# expect_msg NAME ID CODE TEXT: a finding CODE of check ID whose message holds TEXT
expect_msg() {
    expect_eq "$L$1: $3 message names '$4'" \
        "$(yq "$T/$1.yaml" "any('''$4''' in f['message'] for f in (check('$2') or {}).get('findings') or [] if f['code'] == '$3')")" \
        True
}
# healthy_rc NAME: 0, unless a check outside the network ones fails here (then say why)
healthy_rc() {
    local r others
    r=$(rc "$1")
    if [ "$r" = 0 ]; then ok "$L$1: exit code 0"; return; fi
    others=$(yq "$T/$1.yaml" "[c['id'] for c in d['checks'] if c['status'] == 'fail' and not c['id'].startswith('net.')]")
    if [ "$others" != "[]" ]; then
        skip "$L$1: exit code 0" "exit $r from checks outside net.*: $others"
    else
        notok "$L$1: exit code 0" "exit $r; $(head -c 300 "$T/$1.err")"
    fi
}

suite() {
    # ---- all healthy
    publish "$PI" "$HEALTHY" || { notok "${L}write podinfo"; return; }
    pf healthy "$ROOT" "$T/cfg-expect.yaml" NCCL_SOCKET_IFNAME=net1
    healthy_rc healthy
    expect_check healthy net.multus pass ""
    expect_check healthy net.interfaces pass ""
    expect_eq "${L}healthy: message" "$(yq "$T/healthy.yaml" "check('net.multus')['message']")" \
        "2 of 2 secondary networks attached and up: ml/sriov-a on net1, ml/sriov-b on net2"
    expect_eq "${L}healthy: net1 state in evidence" \
        "$(yq "$T/healthy.yaml" "[(n['state']['up'], n['state']['carrier'], n['state']['mtu'], n['state']['addresses'][0]) for n in check('net.multus')['evidence']['networks'] if n['name'] == 'ml/sriov-a']")" \
        '[[true, true, 9000, "10.203.1.11/24"]]'
    expect_eq "${L}healthy: pod labels from the podinfo folder" \
        "$(yq "$T/healthy.yaml" "d['pod']['labels']['batch.kubernetes.io/job-completion-index']")" 3

    # ---- a network in expect.networks that Multus did not attach
    sed 's/networks: \[ml\/sriov-a, ml\/sriov-b\]/networks: [ml\/sriov-a, ml\/sriov-b, ml\/sriov-c]/' \
        "$T/cfg-expect.yaml" >"$T/cfg-expect-c.yaml"
    pf netmissing "$ROOT" "$T/cfg-expect-c.yaml"
    expect_rc netmissing 3
    expect_check netmissing net.multus fail "network-missing"
    expect_msg netmissing net.multus network-missing "network ml/sriov-c is not attached (attached: ovn-kubernetes, ml/sriov-a, ml/sriov-b)"

    # ---- the request annotation asks for a network the network-status does not list, with
    # no expect.networks: named, citing both annotations (the JSON form of the request too)
    printf 'podinfo:\n  waitSeconds: 2\n' >"$T/cfg-noexpect.yaml"
    REQUEST=k8s.v1.cni.cncf.io/networks=ml/sriov-a,ml/sriov-b@net2,sriov-c publish "$PI" "$HEALTHY"
    pf reqmissing "$ROOT" "$T/cfg-noexpect.yaml"
    expect_check reqmissing net.multus fail "network-missing"
    expect_msg reqmissing net.multus network-missing "network sriov-c is requested (k8s.v1.cni.cncf.io/networks: \"ml/sriov-a,ml/sriov-b@net2,sriov-c\") but not attached (k8s.v1.cni.cncf.io/network-status in"
    expect_msg reqmissing net.multus network-missing "lists ovn-kubernetes, ml/sriov-a, ml/sriov-b)"
    REQUEST='k8s.v1.cni.cncf.io/networks=[{"name": "sriov-a", "namespace": "ml"}, {"name": "sriov-d", "namespace": "ml", "interface": "net4"}]' \
        publish "$PI" "$HEALTHY"
    pf reqjson "$ROOT" "$T/cfg-noexpect.yaml"
    expect_check reqjson net.multus fail "network-missing"
    expect_msg reqjson net.multus network-missing "network ml/sriov-d is requested"
    # a request Multus could not have read is no evidence: unknown, not a finding
    REQUEST='k8s.v1.cni.cncf.io/networks=[{"name": ' publish "$PI" "$HEALTHY"
    pf reqbad "$ROOT" "$T/cfg-noexpect.yaml"
    expect_check reqbad net.multus pass ""
    expect_eq "${L}reqbad: the unreadable request is unknown" \
        "$(yq "$T/reqbad.yaml" "[u['code'] for u in check('net.multus')['evidence']['unknown']]")" '["network-missing"]'
    publish "$PI" "$HEALTHY"

    # ---- the annotation names an interface the namespace does not have
    publish "$PI" "[$CLUSTER, $PNET1, $PNET2, $NET3]"
    pf ifmissing "$ROOT" "$T/cfg-expect.yaml"
    expect_rc ifmissing 4
    expect_check ifmissing net.multus fail "iface-missing"
    expect_msg ifmissing net.multus iface-missing "has no net3 (have: lo, eth0, net1, net2)"
    publish "$PI" "$HEALTHY"

    # ---- net2 administratively down, then up without carrier (its peer down)
    ip -n "$POD" link set net2 down
    pf down "$ROOT" "$T/cfg-expect.yaml"
    expect_rc down 4
    expect_check down net.multus fail "iface-down"
    expect_msg down net.multus iface-down "net2 (ml/sriov-b) is administratively down"
    ip -n "$POD" link set net2 up
    ip -n "$HOST" link set h-net2 down
    for _ in $(seq 100); do
        ip -n "$POD" -o link show dev net2 | grep -q NO-CARRIER && break
        sleep 0.05
    done
    pf nocarrier "$ROOT" "$T/cfg-expect.yaml"
    expect_check nocarrier net.multus fail "iface-down"
    expect_msg nocarrier net.multus iface-down "is up but has no carrier"
    ip -n "$HOST" link set h-net2 up
    links_up "$POD" net2

    # ---- net2 lost the address IPAM gave it; then an element with no ips on a bare interface
    ip -n "$POD" addr del 10.203.2.11/24 dev net2
    pf noip "$ROOT" "$T/cfg-expect.yaml"
    expect_rc noip 4
    expect_check noip net.multus fail "ip-missing"
    expect_msg noip net.multus ip-missing "net2 (ml/sriov-b) does not hold 10.203.2.11"
    publish "$PI" "[$CLUSTER, $PNET1, $NET2_NOIPS]"
    pf noipam "$ROOT" "$T/cfg-expect.yaml"
    expect_check noipam net.multus warn "ip-missing"
    ip -n "$POD" addr add 10.203.2.11/24 dev net2
    publish "$PI" "$HEALTHY"

    # ---- MTU 1500 where 9000 is expected (and recorded by Multus)
    ip -n "$POD" link set net1 mtu 1500
    pf mtu "$ROOT" "$T/cfg-expect.yaml"
    expect_rc mtu 4
    expect_check mtu net.multus fail "mtu"
    expect_msg mtu net.multus mtu "net1 (ml/sriov-a) has MTU 1500, expect.mtu is 9000 (the annotation says 9000)"
    printf 'podinfo:\n  waitSeconds: 2\n' >"$T/cfg-noexpect.yaml"
    pf mtu-annot "$ROOT" "$T/cfg-noexpect.yaml"
    expect_check mtu-annot net.multus fail "mtu"
    expect_msg mtu-annot net.multus mtu "the annotation says 9000"
    ip -n "$POD" link set net1 mtu 9000
    links_up "$POD" net1

    # ---- a MAC that is not the one Multus recorded
    ip -n "$POD" link set net2 address d6:25:47:a2:36:99
    pf mac "$ROOT" "$T/cfg-expect.yaml"
    expect_check mac net.multus warn "mac-mismatch"
    ip -n "$POD" link set net2 address d6:25:47:a2:36:6c
    links_up "$POD" net2

    # ---- SR-IOV: the VFs of the device-info against the fixture sysfs trees
    local sr
    publish "$PI" "$SRIOV"
    for sr in sriov-healthy sriov-no-rdma; do
        rm -rf "${T:?}/$sr"
        "$FIX/materialize.sh" "$FIX/$sr" "$T/$sr" 2>/dev/null
        mkdir -p "$T/$sr/etc"
        cp -a "$PI" "$T/$sr/etc/podinfo"
    done
    pf vfok "$T/sriov-healthy" "$T/cfg-expect.yaml" \
        PCIDEVICE_MELLANOX_COM_MLNX_SRIOV_RDMA=0000:c4:00.2,0000:c4:00.3
    expect_check vfok net.sriov pass ""
    expect_check vfok net.multus pass ""
    expect_eq "${L}vfok: RDMA devices from device-info" \
        "$(yq "$T/vfok.yaml" "[n['deviceInfo']['rdmaDevices'] for n in check('net.multus')['evidence']['networks'] if 'deviceInfo' in n]")" \
        '[["mlx5_3"], ["mlx5_4", "mlx5_5"]]'
    pf vfnordma "$T/sriov-no-rdma" "$T/cfg-expect.yaml" \
        PCIDEVICE_MELLANOX_COM_MLNX_SRIOV_RDMA=0000:c4:00.2,0000:c4:00.3
    # vf-no-rdma is the node's (exit 4); the tree holds no dev/shm, which is unknown, no spec
    # finding
    expect_rc vfnordma 4
    expect_eq "${L}vfnordma: net.sriov fail" "$(st vfnordma net.sriov)" fail
    expect_eq "${L}vfnordma: vf-no-rdma among the findings" \
        "$(yq "$T/vfnordma.yaml" "'vf-no-rdma' in codes('net.sriov')")" True
    expect_msg vfnordma net.sriov vf-no-rdma "0000:c4:00.3"

    # ---- NCCL_IB_HCA naming a device the pod was not given (mlx5_0 is the PF) or none at all
    pf hcapf "$T/sriov-healthy" "$T/cfg-expect.yaml" \
        PCIDEVICE_MELLANOX_COM_MLNX_SRIOV_RDMA=0000:c4:00.2,0000:c4:00.3 NCCL_IB_HCA==mlx5_0
    expect_rc hcapf 3
    expect_check hcapf net.sriov fail "hca-not-allocated"
    expect_msg hcapf net.sriov hca-not-allocated "its RDMA devices: mlx5_3, mlx5_4, mlx5_5"
    pf hca9 "$T/sriov-healthy" "$T/cfg-expect.yaml" \
        PCIDEVICE_MELLANOX_COM_MLNX_SRIOV_RDMA=0000:c4:00.2,0000:c4:00.3 NCCL_IB_HCA=mlx5_9
    expect_eq "${L}hca9: nccl.env hca-no-match" "$(yq "$T/hca9.yaml" "'hca-no-match' in codes('nccl.env')")" True
    expect_eq "${L}hca9: net.sriov hca-not-allocated" "$(yq "$T/hca9.yaml" "'hca-not-allocated' in codes('net.sriov')")" True

    # ---- the annotation arrives 2 s after preflight started waiting for it
    rm -rf "${PI:?}"
    publish "$PI" "[]" --key none
    printf 'expect:\n  networks: [ml/sriov-a, ml/sriov-b]\npodinfo:\n  waitSeconds: 30\n' >"$T/cfg-late.yaml"
    (sleep 2 && publish "$PI" "$HEALTHY" >/dev/null) &
    local writer=$!
    pf late "$ROOT" "$T/cfg-late.yaml"
    wait "$writer"
    expect_rc late 0
    expect_check late net.multus pass ""
    expect_eq "${L}late: waited for it" "$(yq "$T/late.yaml" "check('net.multus')['evidence'].get('waitedSeconds', 0) > 0")" True
    check "${L}late: progress line says it arrived" grep -q "network-status annotation arrived after" "$T/late.err"

    # ... and present but empty at first (the initContainer's first start, multus-cni #1113)
    rm -rf "${PI:?}"
    publish "$PI" "[]" --key none --annotation k8s.v1.cni.cncf.io/network-status=
    (sleep 2 && publish "$PI" "$HEALTHY" >/dev/null) &
    writer=$!
    pf late-empty "$ROOT" "$T/cfg-late.yaml"
    wait "$writer"
    expect_check late-empty net.multus pass ""

    # ---- never arrives: annotation-missing after podinfo.waitSeconds (2 s)
    rm -rf "${PI:?}"
    publish "$PI" "[]" --key none
    pf never "$ROOT" "$T/cfg-expect.yaml"
    expect_rc never 3
    expect_check never net.multus fail "annotation-missing"
    expect_msg never net.multus annotation-missing "has no k8s.v1.cni.cncf.io/network-status annotation after"
    # ... nor past --timeout, when that ends first (the wait is cut, the verdict still written)
    printf 'expect:\n  networks: [ml/sriov-a]\npodinfo:\n  waitSeconds: 600\n' >"$T/cfg-long.yaml"
    pf never-timeout "$ROOT" "$T/cfg-long.yaml" PREFLIGHT_TIMEOUT=4
    expect_eq "${L}never-timeout: ends with a verdict (not killed)" "$(rc never-timeout)" 3
    expect_check never-timeout net.multus fail "annotation-missing"
    # no podinfo folder at all, with networks expected
    rm -rf "${PI:?}"
    pf nofolder "$ROOT" "$T/cfg-expect.yaml"
    expect_check nofolder net.multus fail "annotation-missing"
    expect_msg nofolder net.multus annotation-missing "/etc/podinfo/annotations does not exist"
    # nothing expected, nothing there: skip
    pf nothing "$ROOT" "$T/cfg-noexpect.yaml"
    expect_check nothing net.multus skip ""
}

both_builds "net.multus suite" suite
