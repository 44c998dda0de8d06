#!/usr/bin/env bash
# net.multus with the pod's networks given otherwise than by Multus (pkg/k8s/attach.h):
#   GKE multi-networking: `preflight check` in a network namespace holding the interfaces of
#     an A3 Ultra pod (eth0 on "default", eth1 on "gvnic-1", eth2..eth9 on "rdma-0".."rdma-7"),
#     the downward-API folder holding GKE's annotations as the kubelet writes them
#     (tests/fixtures/attach/gke-*.json, gen-podinfo.py): all present, one missing, an address
#     lost, expect.networks naming GKE networks (no wait for Multus), no metadata at all;
#   device plugins: the EFA device plugin's resource from a pod spec's limits
#     (tests/fixtures/attach/efa-pod.json) against node-efa's verbs devices, and the RDMA
#     shared device plugin's (rdma-shared-pod.json) against node-8gpu-ndr's.
# Each asserts the check's status, finding codes and the exit code.
source "$(dirname "$0")/lib.sh"

need_root "attachments in a network namespace" || exit 0
command -v ip >/dev/null || { skip "attachments in a network namespace" "ip (iproute2) not installed"; exit 0; }

POD=pfl$$a
HOST=pfl$$b
cleanup() {
    ip netns del "$POD" 2>/dev/null
    ip netns del "$HOST" 2>/dev/null
    [ -n "${KEEP_TMP:-}" ] && echo "# kept $T" || rm -rf "$T"
}
trap cleanup EXIT
ip netns add "$POD" || { notok "create network namespace $POD"; exit 1; }
ip netns add "$HOST" || { notok "create network namespace $HOST"; exit 1; }
ip -n "$POD" link set lo up

# veth NAME MTU ADDR/LEN: NAME in the pod, its peer on the node's side, both up
veth() {
    ip link add "h-$1" netns "$HOST" type veth peer name "$1" netns "$POD" || return 1
    ip -n "$HOST" link set "h-$1" mtu "$2" up
    ip -n "$POD" link set "$1" mtu "$2"
    ip -n "$POD" addr add "$3" dev "$1"
    ip -n "$POD" link set "$1" up
}
# the addresses gke-interface-status.json lists
veth eth0 1460 10.124.3.17/24 && veth eth1 8244 192.168.1.17/24 || { notok "create veths"; exit 1; }
for i in 0 1 2 3 4 5 6 7; do
    veth "eth$((i + 2))" 8896 "192.168.$((10 + i)).17/24" || { notok "create veths"; exit 1; }
done
links_up "$POD" eth0 eth1 eth2 eth3 eth4 eth5 eth6 eth7 eth8 eth9

ROOT=$T/root
mkdir -p "$ROOT/dev/shm" "$ROOT/proc/sys/net/ipv4"
printf '32768\t60999\n' >"$ROOT/proc/sys/net/ipv4/ip_local_port_range"
PI=$ROOT/etc/podinfo
GKE_IFS=$(cat "$FIX/attach/gke-interfaces.json")
GKE_ST=$(cat "$FIX/attach/gke-interface-status.json")

# podinfo [gen-podinfo options]: DIR/annotations and DIR/labels as the kubelet writes them
podinfo() {
    rm -rf "${PI:?}"
    echo '[]' | python3 "$FIX/gen-podinfo.py" "$PI" - --key none "$@"
}
gke() {
    podinfo --annotation networking.gke.io/default-interface=eth0 \
        --annotation "networking.gke.io/interfaces=$GKE_IFS" "$@"
}

# pf NAME ROOT CONFIG [VAR=VALUE...]: `preflight check` in the pod's namespace
pf() {
    local name=$1 root=$2 cfg=$3
    shift 3
    ip netns exec "$POD" timeout 60 env -i PATH="$PATH" HOME=/nonexistent NO_COLOR=1 \
        ASAN_OPTIONS="${ASAN_OPTIONS:-}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-}" "$@" \
        "$PREFLIGHT" check --root "$root" --config "$cfg" --format yaml --verdict - \
        >"$T/$name.yaml" 2>"$T/$name.err"
    echo $? >"$T/$name.rc"
}
st() { yq "$T/$1.yaml" "(check('$2') or {}).get('status')"; }
codes_() { yq "$T/$1.yaml" "','.join(sorted(f['code'] for f in (check('$2') or {}).get('findings') or []))"; }
expect_check() { expect_eq "$1: $2 is $3 [$4]" "$(st "$1" "$2") [$(codes_ "$1" "$2")]" "$3 [$4]"; }
expect_msg() {
    expect_eq "$1: $3 message names '$4'" \
        "$(yq "$T/$1.yaml" "any('''$4''' in f['message'] for f in (check('$2') or {}).get('findings') or [] if f['code'] == '$3')")" \
        True
}
# net_ok NAME: no check of the network family fails (the exit code may come from others)
net_ok() {
    expect_eq "$1: no net.* check fails" \
        "$(yq "$T/$1.yaml" "[c['id'] for c in d['checks'] if c['status'] == 'fail' and c['id'].startswith('net.')]")" "[]"
}

printf 'podinfo:\n  waitSeconds: 2\n' >"$T/cfg.yaml"
printf 'expect:\n  networks: [rdma-0, rdma-7, gvnic-1]\npodinfo:\n  waitSeconds: 30\n' >"$T/cfg-expect.yaml"

# ---- GKE: every interface present, with the addresses interface-status lists
gke --annotation "networking.gke.io/interface-status=$GKE_ST"
pf gke-ok "$ROOT" "$T/cfg-expect.yaml"
expect_check gke-ok net.multus pass ""
net_ok gke-ok
expect_eq "gke-ok: message" "$(yq "$T/gke-ok.yaml" "check('net.multus')['message'].split(':')[0]")" \
    "9 of 9 attachments present"
expect_eq "gke-ok: evidence names source and interface" \
    "$(yq "$T/gke-ok.yaml" "[(a['source'], a['name'], a['interface'], a['present']) for a in check('net.multus')['evidence']['attachments'] if a['name'] == 'rdma-3']")" \
    '[["gke", "rdma-3", "eth5", true]]'
expect_eq "gke-ok: expect.networks met by GKE networks, no wait for Multus" \
    "$(yq "$T/gke-ok.yaml" "check('net.multus')['evidence'].get('waitedSeconds')")" None
rails=$(yq "$T/gke-ok.yaml" "check('net.multus')['evidence']['attachments'][0].get('default')")
expect_eq "gke-ok: the cluster network is marked, not checked" "$rails" True

# ---- one interface missing: the finding names the source, the network and the interface
ip -n "$POD" link del eth5
pf gke-missing "$ROOT" "$T/cfg.yaml"
expect_check gke-missing net.multus fail "attachment-missing"
expect_msg gke-missing net.multus attachment-missing "gke rdma-3 (annotation networking.gke.io/interfaces) promises interface eth5"
expect_eq "gke-missing: the verdict fails, class node" \
    "$(yq "$T/gke-missing.yaml" "[d['verdict'], d['failureClass']]")" '["fail", "node"]'
expect_eq "gke-missing: exit code not 0" "$([ "$(cat "$T/gke-missing.rc")" != 0 ] && echo yes)" yes
# ... and an address the status lists, gone
ip -n "$POD" addr del 192.168.12.17/24 dev eth4
pf gke-noip "$ROOT" "$T/cfg.yaml"
expect_check gke-noip net.multus fail "attachment-missing,ip-missing"
expect_msg gke-noip net.multus ip-missing "eth4 (gke rdma-2) does not hold 192.168.12.17"

# ---- a GKE network expected that the pod did not get
printf 'expect:\n  networks: [rdma-8]\npodinfo:\n  waitSeconds: 1\n' >"$T/cfg-rdma8.yaml"
pf gke-notasked "$ROOT" "$T/cfg-rdma8.yaml"
expect_msg gke-notasked net.multus network-missing "network rdma-8 is not attached (attached: gvnic-1 (gke), rdma-0 (gke)"

# ---- an annotation that is not GKE's shape
podinfo --annotation 'networking.gke.io/interfaces=[{"interfaceName":"eth1"}]'
pf gke-bad "$ROOT" "$T/cfg.yaml"
expect_check gke-bad net.multus fail "annotation-invalid"
expect_msg gke-bad net.multus annotation-invalid "annotation networking.gke.io/interfaces: annotation networking.gke.io/interfaces element 1"

# ---- no metadata: the namespace's devices listed, no false failure
podinfo
pf none "$ROOT" "$T/cfg.yaml"
expect_check none net.multus skip ""
net_ok none
expect_eq "none: evidence lists the namespace's netdevs with addresses" \
    "$(yq "$T/none.yaml" "[(n['name'], n['addresses'][0]) for n in check('net.multus')['evidence']['namespace']['netdevs'] if n['name'] == 'eth2']")" \
    '[["eth2", "192.168.10.17/24"]]'
expect_eq "none: evidence lists no RDMA device (the root has none)" \
    "$(yq "$T/none.yaml" "check('net.multus')['evidence']['namespace']['rdma']")" '[]'
expect_eq "none: message says no attachment metadata was found" \
    "$(yq "$T/none.yaml" "check('net.multus')['message'].startswith('no attachment metadata found')")" True

# ---- device plugins: the resources of a pod spec's limits against the verbs devices
# resources FILE: "name=count,..." of the extended resources in the container's limits
resources() {
    python3 -c 'import json,sys
l = json.load(open(sys.argv[1]))["resources"]["limits"]
print(",".join("%s=%s" % (k, v) for k, v in sorted(l.items()) if "/" in k and not k.startswith("nvidia.com/")))' "$1"
}
podinfo
EFA=$T/efa
bash "$FIX/materialize.sh" "$FIX/node-efa" "$EFA" 2>/dev/null
mkdir -p "$EFA/proc/sys/net/ipv4" && printf '32768\t60999\n' >"$EFA/proc/sys/net/ipv4/ip_local_port_range"
EFA_RES=$(resources "$FIX/attach/efa-pod.json")
expect_eq "efa: the pod spec's resource" "$EFA_RES" "vpc.amazonaws.com/efa=32"
pf efa-short "$EFA" "$T/cfg.yaml" PREFLIGHT_DEVICE_RESOURCES="$EFA_RES"
expect_check efa-short net.multus fail "attachment-missing"
expect_msg efa-short net.multus attachment-missing "vpc.amazonaws.com/efa=32 (PREFLIGHT_DEVICE_RESOURCES, the pod's limits) promises 32 EFA devices, the pod holds 2 (efa_0, efa_1"
pf efa-ok "$EFA" "$T/cfg.yaml" PREFLIGHT_DEVICE_RESOURCES=vpc.amazonaws.com/efa=2
expect_check efa-ok net.multus pass ""
rm -f "$EFA/dev/infiniband/uverbs1"
pf efa-lost "$EFA" "$T/cfg.yaml" PREFLIGHT_DEVICE_RESOURCES=vpc.amazonaws.com/efa=2
expect_msg efa-lost net.multus attachment-missing "promises 2 EFA devices, the pod holds 1 (efa_0"

# the RDMA shared device plugin's resource on an NDR node (mlx5 HCAs, /dev/infiniband/uverbsN)
IB=$T/ib
bash "$FIX/materialize.sh" "$FIX/node-8gpu-ndr" "$IB" 2>/dev/null
mkdir -p "$IB/proc/sys/net/ipv4" && printf '32768\t60999\n' >"$IB/proc/sys/net/ipv4/ip_local_port_range"
IB_RES=$(resources "$FIX/attach/rdma-shared-pod.json")
expect_eq "ib: the pod spec's resource" "$IB_RES" "rdma/hca_shared_devices_a=1"
pf ib-ok "$IB" "$T/cfg.yaml" PREFLIGHT_DEVICE_RESOURCES="$IB_RES"
expect_check ib-ok net.multus pass ""
expect_eq "ib-ok: evidence lists the verbs devices the pod holds" \
    "$(yq "$T/ib-ok.yaml" "check('net.multus')['evidence']['attachments'][0]['devices'][0]")" mlx5_0
rm -rf "$IB/dev/infiniband"
pf ib-none "$IB" "$T/cfg.yaml" PREFLIGHT_DEVICE_RESOURCES="$IB_RES"
expect_check ib-none net.multus fail "attachment-missing"
expect_msg ib-none net.multus attachment-missing "rdma/hca_shared_devices_a=1 (PREFLIGHT_DEVICE_RESOURCES, the pod's limits) promises 1 RDMA device, the pod holds 0 (none"

# ---- DRA: the pod and its ResourceClaims read from a stand-in API server (kapi_standin.py)
# serving the samples of tests/fixtures/attach at the paths a real API server serves them
command -v openssl >/dev/null || { skip "dra" "openssl not installed"; exit 0; }
mkdir -p "$T/ca"
(
    cd "$T/ca"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 \
        -subj "/CN=preflight-test-ca" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr \
        -subj "/CN=kubernetes" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:kubernetes.default.svc\n' >ext.cnf
    openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt \
        -days 2 -extfile ext.cnf 2>/dev/null
) || { notok "dra: make test certificates" "openssl failed"; exit 0; }
SA=$ROOT/var/run/secrets/kubernetes.io/serviceaccount
mkdir -p "$SA"
TOKEN="eyJhbGciOiJSUzI1NiJ9.attach-$$"
printf '%s' "$TOKEN" >"$SA/token"
printf 'ml' >"$SA/namespace"
cp "$T/ca/ca.crt" "$SA/ca.crt"
veth rdma0 9000 10.210.1.11/24 && veth rdma1 9000 10.210.2.11/24 || { notok "dra: create veths"; exit 1; }
links_up "$POD" rdma0 rdma1

SERVER_PID=""
stop_server() { [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null; SERVER_PID=""; }
trap 'stop_server; cleanup' EXIT
# serve NAME ROUTES-JSON: starts the stand-in in the pod's namespace; sets PORT, LOG
serve() {
    stop_server
    LOG=$T/requests-$1.jsonl
    : >"$LOG"
    rm -f "$T/port"
    printf '%s' "$2" >"$T/routes-$1.json"
    ip netns exec "$POD" python3 "$PREFLIGHT_SRC/tests/e2e/kapi_standin.py" "$T/ca" "$T/port" \
        "$LOG" "$TOKEN" "$T/routes-$1.json" &
    SERVER_PID=$!
    for _ in $(seq 1 100); do [ -s "$T/port" ] && break; sleep 0.1; done
    PORT=$(cat "$T/port" 2>/dev/null)
    [ -n "$PORT" ]
}
requests() { python3 -c 'import json,sys; print(" ".join(json.loads(l)["path"] + ("" if json.loads(l)["auth"] else "(no token)") for l in open(sys.argv[1])))' "$LOG"; }
P=/api/v1/namespaces/ml/pods/worker-0
C=/apis/resource.k8s.io
ROUTES_OK="{\"$P\": [200, \"$FIX/attach/pod-dra.json\"],
  \"$C/v1/namespaces/ml/resourceclaims/worker-0-rdma-x7k2p\": [200, \"$FIX/attach/dranet-claim-rdma.json\"],
  \"$C/v1beta1/namespaces/ml/resourceclaims/shared-gpus\": [200, \"$FIX/attach/gpu-claim-v1beta1.json\"]}"
podinfo
printf 'worker-0' >"$PI/name"
printf 'ml' >"$PI/namespace"
printf 'expect:\n  networks: [worker-0-rdma-x7k2p]\npodinfo:\n  waitSeconds: 30\n' >"$T/cfg-dra.yaml"
kenv() { echo KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT="$PORT" PREFLIGHT_READ_CLAIMS=true; }

if serve ok "$ROUTES_OK"; then
    pf dra-ok "$ROOT" "$T/cfg-dra.yaml" $(kenv)
    expect_check dra-ok net.multus pass ""
    expect_eq "dra-ok: the requests a real API server answers, in order, with the token" "$(requests)" \
        "$P $C/v1/namespaces/ml/resourceclaims/worker-0-rdma-x7k2p $C/v1/namespaces/ml/resourceclaims/shared-gpus $C/v1beta2/namespaces/ml/resourceclaims/shared-gpus $C/v1beta1/namespaces/ml/resourceclaims/shared-gpus"
    expect_eq "dra-ok: message" "$(yq "$T/dra-ok.yaml" "check('net.multus')['message']")" \
        "2 of 2 attachments present: worker-0-rdma-x7k2p/nic0 on rdma0, worker-0-rdma-x7k2p/nic1 on rdma1 (no Multus network-status)"
    expect_eq "dra-ok: claims read, with their API version" \
        "$(yq "$T/dra-ok.yaml" "check('net.multus')['evidence']['dra']['claims']")" \
        '["worker-0-rdma-x7k2p (resource.k8s.io/v1)", "shared-gpus (resource.k8s.io/v1beta1)"]'
    expect_eq "dra-ok: the GPU claim's device listed, not judged" \
        "$(yq "$T/dra-ok.yaml" "[a['device'] for a in check('net.multus')['evidence']['attachments'] if 'interface' not in a]")" \
        '["gpu.nvidia.com/gpu-node-1/gpu-0"]'
    expect_eq "dra-ok: expect.networks met by the claim, no wait for Multus" \
        "$(yq "$T/dra-ok.yaml" "check('net.multus')['evidence'].get('waitedSeconds')")" None

    # `run` reads the claims once per pod: net.multus reads them, the rails stage uses what it
    # read (docs/security.md, "Reading claims": 5 s in all). Two ranks in this namespace (the
    # rails stage runs only with another pod), each reading the same pod through the stand-in:
    # every path is asked twice, once per rank (before: four times, net.multus and rails each)
    : >"$LOG"
    rport=$(free_port)
    pids=
    for r in 0 1; do
        ip netns exec "$POD" timeout 60 env -i PATH="$PATH" HOME=/nonexistent NO_COLOR=1 \
            ASAN_OPTIONS="${ASAN_OPTIONS:-}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-}" $(kenv) \
            PREFLIGHT_TOKEN=dra-run-token \
            "$PREFLIGHT" run --root "$ROOT" --config "$T/cfg-dra.yaml" --format yaml --verdict - \
            --rank $r --world-size 2 --coordinator 127.0.0.1 --port "$rport" --timeout 40 \
            >"$T/dra-run$r.yaml" 2>"$T/dra-run$r.err" &
        pids+=" $!"
    done
    wait $pids
    counts=$(python3 -c 'import collections, json, sys
c = collections.Counter(json.loads(l)["path"] for l in open(sys.argv[1]))
print(" ".join("%s=%d" % (p, n) for p, n in sorted(c.items())))' "$LOG")
    expect_eq "dra-run: two ranks read the pod and each claim once each" "$counts" \
        "$P=2 $C/v1/namespaces/ml/resourceclaims/shared-gpus=2 $C/v1/namespaces/ml/resourceclaims/worker-0-rdma-x7k2p=2 $C/v1beta1/namespaces/ml/resourceclaims/shared-gpus=2 $C/v1beta2/namespaces/ml/resourceclaims/shared-gpus=2"
    # the rails stage still has the claim's two rails, from what net.multus read
    for r in 0 1; do
        expect_eq "dra-run: rank $r's rails stage has the claim's rails" \
            "$(yq "$T/dra-run$r.yaml" "sorted(x['interface'] for x in check('net.rails').get('evidence', {}).get('rails', []))" 2>&1)" \
            '["rdma0", "rdma1"]'
    done

    # the driver reports a device not Ready (a condition of type Ready, status False)
    python3 - "$FIX/attach/dranet-claim-rdma.json" "$T/claim-notready.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c["status"]["devices"][1]["conditions"][0].update(
    status="False", reason="NetworkDeviceError", message="failed to move rdma1 into the pod")
json.dump(c, open(sys.argv[2], "w"))
PY
    ROUTES_NR=${ROUTES_OK/$FIX\/attach\/dranet-claim-rdma.json/$T\/claim-notready.json}
    if serve notready "$ROUTES_NR"; then
        pf dra-notready "$ROOT" "$T/cfg.yaml" $(kenv)
        expect_check dra-notready net.multus fail "attachment-missing"
        expect_msg dra-notready net.multus attachment-missing "dra worker-0-rdma-x7k2p/nic1: the driver reports device dra.net/gpu-node-1/pci-0000-91-00-0 not Ready (NetworkDeviceError: failed to move rdma1 into the pod)"
    fi

    # one device's interface gone from the namespace
    serve ok2 "$ROUTES_OK" || notok "dra: restart the stand-in API server" "no port"
    ip -n "$POD" link del rdma1
    pf dra-missing "$ROOT" "$T/cfg.yaml" $(kenv)
    expect_check dra-missing net.multus fail "attachment-missing"
    expect_msg dra-missing net.multus attachment-missing "dra worker-0-rdma-x7k2p/nic1 (ResourceClaim status) promises interface rdma1"
else
    notok "dra: start the stand-in API server" "no port"
fi

# the ServiceAccount may not read the pod: said in the evidence, no false failure
if serve forbidden "{\"$P\": [403, \"$FIX/attach/README\"]}"; then
    pf dra-forbidden "$ROOT" "$T/cfg.yaml" $(kenv)
    expect_check dra-forbidden net.multus skip ""
    expect_eq "dra-forbidden: evidence says why no claim was read" \
        "$(yq "$T/dra-forbidden.yaml" "'HTTP 403' in check('net.multus')['evidence']['dra']['error']")" True
    expect_eq "dra-forbidden: the namespace's devices listed" \
        "$(yq "$T/dra-forbidden.yaml" "'rdma0' in [n['name'] for n in check('net.multus')['evidence']['namespace']['netdevs']]")" True
    # not asked to (PREFLIGHT_READ_CLAIMS unset): no request at all
    : >"$LOG"
    pf dra-off "$ROOT" "$T/cfg.yaml" KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT="$PORT"
    expect_eq "dra-off: no request without PREFLIGHT_READ_CLAIMS" "$(requests)" ""
    expect_check dra-off net.multus skip ""
else
    notok "dra: start the stand-in API server (forbidden)" "no port"
fi
stop_server
