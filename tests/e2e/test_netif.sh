#!/usr/bin/env bash
# net.interfaces end to end: `preflight check` inside a network namespace holding real veth
# interfaces (eth0, net1, net2, docker0, and ib0 for a while): which interfaces NCCL would
# pick by its own rules (ib* first, then NCCL_COMM_ID's subnet, then not docker/lo/virbr;
# NCCL_SOCKET_IFNAME with ^ and =), and the findings when NCCL_SOCKET_IFNAME matches nothing
# or an interface it selects is down, without carrier, without an address or at the wrong MTU.
# Runs against the sanitizer build and bin/preflight-static.
source "$(dirname "$0")/lib.sh"

need_root "net.interfaces in a network namespace" || exit 0
command -v ip >/dev/null || { skip "net.interfaces in a network namespace" "ip (iproute2) not installed"; exit 0; }

POD=pfl$$n  # the pod's network namespace
HOST=pfl$$o # the other ends of the veths
LONE=pfl$$l # a namespace with nothing but loopback
cleanup() {
    ip netns del "$POD" 2>/dev/null
    ip netns del "$HOST" 2>/dev/null
    ip netns del "$LONE" 2>/dev/null
    [ -n "${KEEP_TMP:-}" ] && echo "# kept $T" || rm -rf "$T"
}
trap cleanup EXIT
for ns in "$POD" "$HOST" "$LONE"; do
    ip netns add "$ns" || { notok "create network namespace $ns"; exit 1; }
    ip -n "$ns" link set lo up
done

# veth NAME MTU [ADDR/LEN]: NAME in the pod, its peer h-NAME on the other side, both up
veth() {
    ip link add "h-$1" netns "$HOST" type veth peer name "$1" netns "$POD" || return 1
    ip -n "$HOST" link set "h-$1" mtu "$2" up
    ip -n "$POD" link set "$1" mtu "$2"
    [ -n "${3:-}" ] && ip -n "$POD" addr add "$3" dev "$1"
    ip -n "$POD" link set "$1" up
}
veth eth0 1500 10.135.0.147/24 &&
    veth net1 9000 10.203.1.11/24 &&
    veth net2 9000 10.203.2.11/24 &&
    veth docker0 1500 172.17.0.1/16 ||
    { notok "create veth interfaces"; exit 1; }
links_up "$POD" eth0 net1 net2 docker0

ROOT=$T/root
mkdir -p "$ROOT"
printf 'expect:\n  mtu: 9000\n' >"$T/cfg-mtu.yaml"
: >"$T/cfg-none.yaml"

# pf NAME [VAR=VALUE...] [-- preflight options]: `preflight check` in the pod's namespace
# (NS=... for another one) with a clean environment
pf() {
    local name=$1
    shift
    local vars=() opts=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do vars+=("$1"); shift; done
    [ "${1:-}" = -- ] && shift && opts=("$@")
    ip netns exec "${NS:-$POD}" timeout 60 env -i PATH="$PATH" HOME=/nonexistent NO_COLOR=1 \
        ASAN_OPTIONS="${ASAN_OPTIONS:-}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-}" "${vars[@]}" \
        "$BIN" check --root "$ROOT" --config "$T/cfg-none.yaml" --format yaml --verdict - \
        "${opts[@]}" >"$T/$name.yaml" 2>"$T/$name.err"
    echo $? >"$T/$name.rc"
}
ev() { yq "$T/$1.yaml" "(check('net.interfaces') or {}).get('evidence', {}).get('$2')"; }
st() { yq "$T/$1.yaml" "(check('net.interfaces') or {}).get('status')"; }
codes_() { yq "$T/$1.yaml" "','.join(sorted(f['code'] for f in (check('net.interfaces') or {}).get('findings') or []))"; }
expect_check() { # NAME STATUS CODES
    expect_eq "$L$1: net.interfaces is $2 [$3]" "$(st "$1") [$(codes_ "$1")]" "$2 [$3]"
}
expect_msg() { # NAME CODE TEXT
    expect_eq "$L$1: $2 message names '$3'" \
        "$(yq "$T/$1.yaml" "any('''$3''' in f['message'] for f in (check('net.interfaces') or {}).get('findings') or [] if f['code'] == '$2')")" \
        True
}
expect_chosen() { # NAME JSON-LIST BOOTSTRAP
    expect_eq "$L$1: NCCL would use $2" "$(ev "$1" chosen)" "$2"
    expect_eq "$L$1: bootstrap on $3" "$(ev "$1" bootstrap)" "$3"
}

suite() {
    # ---- NCCL's automatic choice: not docker/lo/virbr; MTUs that disagree are a warning
    pf auto
    expect_chosen auto '["eth0", "net1", "net2"]' eth0
    expect_check auto warn "mtu"
    expect_msg auto mtu "disagree on MTU (eth0 1500, net1 9000, net2 9000; first eth0)"
    expect_eq "${L}auto: net1 recorded as it is" \
        "$(yq "$T/auto.yaml" "[check('net.interfaces')['evidence']['interfaces']['net1'][k] for k in ('state', 'carrier', 'mtu')] + [check('net.interfaces')['evidence']['interfaces']['net1']['addresses'][0]]")" \
        '["up", true, 9000, "10.203.1.11/24"]'

    # ... an ib* interface wins over all of them
    veth ib0 2044 10.204.0.11/24 && links_up "$POD" ib0
    pf ib
    expect_chosen ib '["ib0"]' ib0
    expect_check ib pass ""
    ip -n "$POD" link del ib0

    # ... NCCL_COMM_ID's subnet, when there is no ib*
    pf commid NCCL_COMM_ID=10.203.2.99:29500
    expect_chosen commid '["net2"]' net2
    expect_check commid pass ""
    expect_eq "${L}commid: message" "$(yq "$T/commid.yaml" "check('net.interfaces')['message']")" \
        "NCCL would use net2 (bootstrap: net2 10.203.2.11)"

    # ---- NCCL_SOCKET_IFNAME
    pf prefix NCCL_SOCKET_IFNAME=net
    expect_chosen prefix '["net1", "net2"]' net1
    expect_check prefix pass ""
    pf excl NCCL_SOCKET_IFNAME=^eth,docker,lo
    expect_chosen excl '["net1", "net2"]' net1
    pf exact NCCL_SOCKET_IFNAME==net1
    expect_chosen exact '["net1"]' net1
    expect_check exact pass ""
    expect_eq "${L}exact: exit code 0" "$(cat "$T/exact.rc")" 0

    # ... matching nothing: the message lists what exists, and where the value came from
    pf nomatch NCCL_SOCKET_IFNAME=eth9
    expect_check nomatch fail "ifname-no-match"
    expect_msg nomatch ifname-no-match "NCCL_SOCKET_IFNAME=eth9 (from the environment) matches no interface (have: lo, eth0, net1, net2, docker0)"
    expect_eq "${L}nomatch: exit code 3 (spec)" "$(cat "$T/nomatch.rc")" 3
    pf nomatch-exact NCCL_SOCKET_IFNAME==net
    expect_check nomatch-exact fail "ifname-no-match"
    mkdir -p "$ROOT/etc"
    printf '# site\nNCCL_SOCKET_IFNAME=ib\n' >"$ROOT/etc/nccl.conf"
    pf nomatch-conf
    expect_msg nomatch-conf ifname-no-match "NCCL_SOCKET_IFNAME=ib (from /etc/nccl.conf:2) matches no interface"
    rm "$ROOT/etc/nccl.conf"

    # ... a typo: did you mean the interface one or two edits away (a transposition is two)
    pf typo NCCL_SOCKET_IFNAME=eht0
    expect_check typo fail "ifname-no-match"
    expect_msg typo ifname-no-match "matches no interface (have: lo, eth0, net1, net2, docker0): did you mean eth0?"
    expect_eq "${L}typo: the remedy names the fixed value" \
        "$(yq "$T/typo.yaml" "[f['remedy'] for f in check('net.interfaces')['findings']][0].split(' (')[0]")" \
        "set NCCL_SOCKET_IFNAME=eth0 in the pod spec's env"

    # ---- `preflight env` in the pod compares NCCL_SOCKET_IFNAME with the same interfaces;
    # with --env-file (another pod's environment) it does not
    penv() { # NAME [VAR=VALUE...] [-- preflight options]
        local name=$1
        shift
        local vars=() opts=()
        while [ $# -gt 0 ] && [ "$1" != -- ]; do vars+=("$1"); shift; done
        [ "${1:-}" = -- ] && shift && opts=("$@")
        ip netns exec "$POD" timeout 60 env -i PATH="$PATH" HOME=/nonexistent NO_COLOR=1 \
            ASAN_OPTIONS="${ASAN_OPTIONS:-}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-}" "${vars[@]}" \
            "$BIN" env --root "$ROOT" --format yaml --verdict - "${opts[@]}" \
            >"$T/$name.yaml" 2>"$T/$name.err"
        echo $? >"$T/$name.rc"
    }
    envmsg() { yq "$T/$1.yaml" "[f['message'] for f in check('nccl.env').get('findings') or [] if f['code'] == 'ifname-no-match']"; }
    penv envtypo NCCL_SOCKET_IFNAME=eht0
    expect_eq "${L}env: eht0 against the pod's interfaces" "$(envmsg envtypo)" \
        '["NCCL_SOCKET_IFNAME=eht0 (from the environment) matches no interface (have: lo, eth0, net1, net2, docker0): did you mean eth0?"]'
    expect_eq "${L}env: exit code 3 (spec)" "$(cat "$T/envtypo.rc")" 3
    penv envok NCCL_SOCKET_IFNAME=net
    expect_eq "${L}env: a prefix that matches is fine" "$(envmsg envok)" '[]'
    penv envexcl NCCL_SOCKET_IFNAME=^eht
    expect_eq "${L}env: an exclusion list is not a typo" "$(envmsg envexcl)" '[]'
    printf 'NCCL_SOCKET_IFNAME=eht0\n' >"$T/pod.env"
    penv envfile -- --env-file "$T/pod.env"
    expect_eq "${L}env --env-file: not compared with this machine's interfaces" "$(envmsg envfile)" '[]'

    # ---- the selected interface down, without carrier, without an address
    ip -n "$POD" link set net2 down
    pf down NCCL_SOCKET_IFNAME=net2
    expect_check down fail "iface-down"
    expect_msg down iface-down "net2 (selected by NCCL_SOCKET_IFNAME=net2) is down"
    pf down-prefix NCCL_SOCKET_IFNAME=net
    expect_chosen down-prefix '["net1"]' net1
    expect_check down-prefix fail "iface-down"
    ip -n "$POD" link set net2 up
    ip -n "$HOST" link set h-net2 down
    for _ in $(seq 100); do
        ip -n "$POD" -o link show dev net2 | grep -q NO-CARRIER && break
        sleep 0.05
    done
    pf nocarrier NCCL_SOCKET_IFNAME=net2
    expect_check nocarrier fail "iface-down"
    expect_msg nocarrier iface-down "is up without carrier"
    ip -n "$HOST" link set h-net2 up
    links_up "$POD" net2
    ip -n "$POD" addr flush dev net2
    pf noaddr NCCL_SOCKET_IFNAME=net2
    expect_check noaddr fail "iface-no-address"
    expect_msg noaddr iface-no-address "net2 (selected by NCCL_SOCKET_IFNAME=net2) has no IPv4 or IPv6 address"
    ip -n "$POD" addr add 10.203.2.11/24 dev net2

    # ---- MTU against expect.mtu
    pf mtu NCCL_SOCKET_IFNAME=eth0 -- --config "$T/cfg-mtu.yaml"
    expect_check mtu fail "mtu"
    expect_msg mtu mtu "eth0 has MTU 1500, expected 9000 (expect.mtu)"
    pf mtu-ok NCCL_SOCKET_IFNAME=net -- --config "$T/cfg-mtu.yaml"
    expect_check mtu-ok pass ""
    expect_eq "${L}mtu-ok: MTUs in evidence" "$(ev mtu-ok mtu)" '{"net1": 9000, "net2": 9000}'

    # ---- only loopback: NCCL would bootstrap on lo, which no other pod can reach
    NS=$LONE pf lonely
    expect_chosen lonely '["lo"]' lo
    expect_check lonely warn "loopback-only"
}

both_builds "net.interfaces suite" suite
