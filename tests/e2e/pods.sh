# "Pods" for the end-to-end tests and the demo (sourced; needs root).
#
# Each pod is a network namespace with one interface, eth0, on a bridge, and runs its command
# in its own UTS namespace under its own hostname. The bridge lives in a namespace of its own
# (the "switch"), so nothing touches the host's interfaces. A real dnsmasq on the bridge
# serves the headless Service's names (trainer-N.trainer.ml.svc.cluster.local), and every pod
# gets a Kubernetes-like /etc/resolv.conf (search domains, ndots:5) and /etc/hosts (its own
# FQDN first, as the kubelet writes it), through `ip netns exec`'s /etc/netns/NAME/ files.
#
#   pods_setup N [PREFIX]     make N pods, trainer-0 .. trainer-N-1 (PREFIX: namespace names)
#   pods_dns_add I            publish trainer-I's name (all are published by pods_setup)
#   pods_dns_del I            withdraw trainer-I's name
#   pod_exec I CMD...         run CMD in pod I (foreground)
#   pod_start I OUT CMD...    run CMD in pod I in the background; its pid in POD_PID[I],
#                             stdout+stderr to OUT
#   pods_cleanup              kill what runs, remove the namespaces and files
#   pod_name I HOST [SUB]     give pod I a launcher's hostname and subdomain (the Service):
#                             its /etc/hosts line and a DNS name HOST.SUB.ml.svc.cluster.local
#                             (without SUB: HOST.ml.svc.cluster.local, a per-pod Service)
#   pod_exec_named I CMD...   pod_exec under the name pod_name gave (trainer-I when none)
#   pod_start_named I OUT CMD...  pod_start under that name
#   pods_need LABEL CMD...    skip LABEL and end the script without root or one of CMD
#   pods_begin N PREFIX [CLEANUP]  the EXIT trap (CLEANUP, default pods_end) and N pods
# Addresses: 10.213.0.1 is the switch (and DNS), pod I is 10.213.0.(10+I). They exist only
# inside these namespaces.

PODS_SVC=trainer
PODS_NS=ml
PODS_DOMAIN="$PODS_SVC.$PODS_NS.svc.cluster.local"
declare -a POD_PID=()

pods_ns() { echo "${PODS_PREFIX}p$1"; }
pods_ip() { echo "10.213.0.$((10 + $1))"; }

pods_setup() {
    local n=$1 i ns
    PODS_PREFIX=${2:-pfr$$}
    PODS_N=$n
    PODS_DIR=$(mktemp -d "/tmp/${PODS_PREFIX}.XXXXXX")
    PODS_SW="${PODS_PREFIX}sw"
    ip netns add "$PODS_SW" || return 1
    ip -n "$PODS_SW" link set lo up
    ip -n "$PODS_SW" link add br0 type bridge
    ip -n "$PODS_SW" addr add 10.213.0.1/24 dev br0
    ip -n "$PODS_SW" link set br0 up
    # a name no pod's hosts file holds: only dnsmasq can answer it (see the wait below)
    printf '10.213.0.1\tpreflight-dns-ready.cluster.local\n' >"$PODS_DIR/svc.hosts"
    for ((i = 0; i < n; i++)); do
        ns=$(pods_ns "$i")
        ip netns add "$ns" || return 1
        ip -n "$ns" link set lo up
        ip link add "${PODS_PREFIX}v$i" netns "$PODS_SW" type veth peer name eth0 netns "$ns"
        ip -n "$PODS_SW" link set "${PODS_PREFIX}v$i" master br0 up
        ip -n "$ns" addr add "$(pods_ip "$i")/24" dev eth0
        ip -n "$ns" link set eth0 mtu 1500 up
        mkdir -p "/etc/netns/$ns"
        printf 'search %s.svc.cluster.local svc.cluster.local cluster.local\nnameserver 10.213.0.1\noptions ndots:5\n' \
            "$PODS_NS" >"/etc/netns/$ns/resolv.conf"
        printf '127.0.0.1\tlocalhost\n%s\t%s-%d.%s\t%s-%d\n' "$(pods_ip "$i")" "$PODS_SVC" "$i" \
            "$PODS_DOMAIN" "$PODS_SVC" "$i" >"/etc/netns/$ns/hosts"
        pods_dns_add "$i" nohup
    done
    # dnsmasq: authoritative for cluster.local (never forwards), names from svc.hosts
    ip netns exec "$PODS_SW" dnsmasq --keep-in-foreground --no-resolv --no-hosts \
        --addn-hosts="$PODS_DIR/svc.hosts" --local=/cluster.local/ --domain-needed \
        --listen-address=10.213.0.1 --bind-interfaces --no-dhcp-interface=br0 \
        --pid-file="$PODS_DIR/dnsmasq.pid" --log-facility="$PODS_DIR/dnsmasq.log" --log-queries \
        --cache-size=0 --neg-ttl=0 --user=root &
    PODS_DNS_PID=$!
    # Ready when dnsmasq itself answers, not a pod's own hosts file (which holds the pod's
    # name): only then has it set its signal handlers, so a SIGHUP (pods_reload_dns)
    # reloads the names instead of killing it. Bounded: 20 s.
    local t
    for t in $(seq 1 200); do
        ip netns exec "$(pods_ns 0)" getent hosts preflight-dns-ready.cluster.local. >/dev/null 2>&1 &&
            return 0
        sleep 0.1
    done
    echo "pods: dnsmasq does not answer (see $PODS_DIR/dnsmasq.log)" >&2
    return 1
}

pods_reload_dns() { [ -n "${PODS_DNS_PID:-}" ] && kill -HUP "$PODS_DNS_PID" 2>/dev/null; true; }

pods_dns_add() {
    printf '%s\t%s-%d.%s\n' "$(pods_ip "$1")" "$PODS_SVC" "$1" "$PODS_DOMAIN" >>"$PODS_DIR/svc.hosts"
    [ "${2:-}" = nohup ] || pods_reload_dns
}

pods_dns_del() {
    grep -v "[[:space:]]$PODS_SVC-$1\.$PODS_DOMAIN\$" "$PODS_DIR/svc.hosts" >"$PODS_DIR/svc.hosts.new"
    mv "$PODS_DIR/svc.hosts.new" "$PODS_DIR/svc.hosts"
    pods_reload_dns
}

pod_exec() {
    local i=$1
    shift
    ip netns exec "$(pods_ns "$i")" unshare --uts sh -c 'hostname "$0" && exec "$@"' \
        "$PODS_SVC-$i" "$@"
}

pod_start() {
    local i=$1 out=$2
    shift 2
    pod_exec "$i" "$@" >"$out" 2>&1 &
    POD_PID[$i]=$!
}

pods_cleanup() {
    local i p
    for p in "${POD_PID[@]}"; do kill -CONT "$p" 2>/dev/null; kill -KILL "$p" 2>/dev/null; done
    [ -n "${PODS_DNS_PID:-}" ] && kill "$PODS_DNS_PID" 2>/dev/null
    for ((i = 0; i < ${PODS_N:-0}; i++)); do
        ip netns pids "$(pods_ns "$i")" 2>/dev/null | xargs -r kill -KILL 2>/dev/null
        ip netns del "$(pods_ns "$i")" 2>/dev/null
        rm -rf "/etc/netns/$(pods_ns "$i")"
    done
    [ -n "${PODS_SW:-}" ] && ip netns del "$PODS_SW" 2>/dev/null
    [ -n "${PODS_DIR:-}" ] && rm -rf "$PODS_DIR"
    wait 2>/dev/null
    true
}

# pods_need LABEL CMD...: what a script of pods needs: root and each CMD; else LABEL is
# skipped and the script ends (exit 0)
pods_need() {
    local label=$1 c
    shift
    need_root "$label" || exit 0
    for c in "$@"; do
        command -v "$c" >/dev/null || { skip "$label" "$c not installed"; exit 0; }
    done
}

# pods_begin N PREFIX [CLEANUP]: traps EXIT to CLEANUP (default pods_end, which a CLEANUP of the
# script's own calls last) and INT and TERM to exit 1, and makes N pods (pods_setup N PREFIX):
# "ok - set up N pods ...", or "not ok" and exit 1
pods_begin() {
    trap "${3:-pods_end}" EXIT
    trap 'exit 1' INT TERM
    pods_setup "$1" "$2" || { notok "set up $1 pods (network namespaces, bridge, dnsmasq)"; exit 1; }
    ok "set up $1 pods (network namespaces, bridge, dnsmasq)"
}

# pods_end: pods_cleanup, and $T removed (kept with KEEP_TMP set)
pods_end() {
    pods_cleanup
    [ -n "${KEEP_TMP:-}" ] && echo "# kept $T" || rm -rf "$T"
}

declare -a POD_HOST=()

pod_name() {
    local i=$1 host=$2 sub=${3:-} fqdn
    POD_HOST[$i]=$host
    if [ -n "$sub" ]; then fqdn="$host.$sub.$PODS_NS.svc.cluster.local"; else fqdn="$host.$PODS_NS.svc.cluster.local"; fi
    # as the kubelet writes it: the FQDN only with a subdomain
    if [ -n "$sub" ]; then
        printf '127.0.0.1\tlocalhost\n%s\t%s\t%s\n' "$(pods_ip "$i")" "$fqdn" "$host" >"/etc/netns/$(pods_ns "$i")/hosts"
    else
        printf '127.0.0.1\tlocalhost\n%s\t%s\n' "$(pods_ip "$i")" "$host" >"/etc/netns/$(pods_ns "$i")/hosts"
    fi
    printf '%s\t%s\n' "$(pods_ip "$i")" "$fqdn" >>"$PODS_DIR/svc.hosts"
    pods_reload_dns
}

pod_exec_named() {
    local i=$1
    shift
    ip netns exec "$(pods_ns "$i")" unshare --uts sh -c 'hostname "$0" && exec "$@"' \
        "${POD_HOST[$i]:-$PODS_SVC-$i}" "$@"
}

pod_start_named() {
    local i=$1 out=$2
    shift 2
    pod_exec_named "$i" "$@" >"$out" 2>&1 &
    POD_PID[$i]=$!
}

# pods_expect CHECK I EXPR...: each Python expression holds over pod I's verdict,
# $T/$SC/vI.yaml (tests/e2e/vexpect.py: a TAP line each; a failing one shows CHECK), and pod
# I's output $T/$SC/outI has no sanitizer report. ${RC[I]} is its exit code.
pods_expect() {
    local shown=$1 i=$2
    shift 2
    local v="$T/$SC/v$i.yaml" name="$SC: trainer-$i"
    if grep -qE 'AddressSanitizer|LeakSanitizer|runtime error:' "$T/$SC/out$i"; then
        notok "$name: no sanitizer report" "$(grep -m1 -E 'Sanitizer|runtime error' "$T/$SC/out$i")"
    fi
    [ -s "$v" ] || { notok "$name verdict written" "no $v (exit ${RC[$i]:-none})"; return; }
    python3 "$PREFLIGHT_SRC/tests/e2e/vexpect.py" "$v" "$name" "$shown" "$@"
}

# pods_run_pod I [CMD-PREFIX...]: pod I's `preflight run` in the background under
# CMD-PREFIX (e.g. `taskset -c 0`, or `env VAR=VALUE`), its rank from the hostname; the
# scenario's $SC, $PORT, $N, $TO and $T/small.yaml; output $T/$SC/outI, verdict
# $T/$SC/vI.yaml, exit code $T/$SC/rcI
pods_run_pod() {
    local i=$1
    shift
    (
        pod_exec "$i" "$@" env POD_NAME="trainer-$i" POD_NAMESPACE=ml NODE_NAME="node-$i" \
            PREFLIGHT_WORLD_SIZE=$N PREFLIGHT_PORT="$PORT" NCCL_SOCKET_IFNAME=eth0 \
            "$PREFLIGHT" run --config "$T/small.yaml" --verdict "$T/$SC/v$i.yaml" \
            --format yaml --timeout "$TO" >>"$T/$SC/out$i" 2>&1
        echo $? >"$T/$SC/rc$i"
    ) &
    POD_PID[$i]=$!
}

# pods_wait_all: waits for pods 0..N-1 started by pods_run_pod; RC[I] is each one's exit
# code ("none" when it wrote none)
pods_wait_all() {
    local i
    for ((i = 0; i < N; i++)); do
        wait "${POD_PID[$i]}" 2>/dev/null
        RC[$i]=$(cat "$T/$SC/rc$i" 2>/dev/null || echo none)
    done
}
