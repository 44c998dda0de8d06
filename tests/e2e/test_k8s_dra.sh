#!/usr/bin/env bash
# DRA through the real API (tests/k8s/cluster: kube-apiserver, kube-controller-manager and
# kube-scheduler v1.37.2, resource.k8s.io/v1 served, DynamicResourceAllocation GA and on): the
# test publishes a DeviceClass and a ResourceSlice for its fake node's drivers (a network driver
# "dra.net" with four RDMA NICs, a GPU driver "gpu.nvidia.com" with eight GPUs), and creates
# through resource.k8s.io/v1 a ResourceClaim (two NICs, one request each), a
# ResourceClaimTemplate (two GPUs) and a DeviceClass with an extendedResourceName (a NIC asked
# for as a container limit). The real resourceclaim controller makes the template's claim and
# the real scheduler allocates all of them and binds the pod. The test node agent then plays
# the kubelet: the DRA network driver's prepare step (dra_driver.py: the allocated NICs into the
# pod's network namespace, status.devices[].networkData written), the projected token of the
# chart's ServiceAccount (rbac.readClaims=true), kube-proxy's ClusterIP 10.96.0.1:443
# (netns_forward.py), and runs `preflight check` in the pod's network namespace with
# PREFLIGHT_READ_CLAIMS=true as the chart sets it. What net.multus reports is compared with the
# allocation the API server stored (read back with kubectl). A second pod whose driver did not
# deliver one NIC fails with attachment-missing, class node (exit 4), in its
# initContainerStatuses. A third pod, of a chart installed without rbac.readClaims: the real
# RBAC refuses the read (HTTP 403), the evidence says so, and nothing fails for it.
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/k8s/cluster.sh
. "$PREFLIGHT_SRC/tests/k8s/cluster.sh"
cleanup() {
    k8s_down
    local n p
    # what kubelet.sh made: the pods' network namespaces, the forwarders
    for p in $(cat "$T/fwd-pids" 2>/dev/null); do kill "$p" 2>/dev/null; done
    for n in $(cat "$T/netns" 2>/dev/null); do ip netns del "$n" 2>/dev/null; done
    rm -rf "$T"
}
trap cleanup EXIT
need_root "k8s dra" || exit 0
command -v ip >/dev/null || { skip "k8s dra" "ip (iproute2) not installed"; exit 0; }
if ! k8s_up; then k8s_unavailable "k8s dra"; exit 0; fi
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY
k() { "$KUBECTL" "$@"; }
NS=dra
export KUBECTL T KDIR PREFLIGHT PREFLIGHT_SRC
APORT=$(sed -n 's|^https://127.0.0.1:\([0-9]*\)$|\1|p' "$KDIR/ready")
export APORT

expect_eq "the API server serves resource.k8s.io/v1 (DynamicResourceAllocation is GA and locked on in v1.37)" \
    "$(k api-versions | grep -c '^resource.k8s.io/v1$')" 1
k create namespace $NS >/dev/null
k label namespace $NS pod-security.kubernetes.io/enforce=baseline >/dev/null
if ! "$HELM" install pf "$PREFLIGHT_SRC/helm/preflight" -n $NS --set rbac.readClaims=true --set test.enabled=false \
    >"$T/install.out" 2>&1; then
    notok "helm install (rbac.readClaims=true)" "$(tail -2 "$T/install.out" | tr '\n' ' ')"
fi
expect_eq "the chart's Role with readClaims: create events, get pods, get resourceclaims" \
    "$(k get role pf-preflight -n $NS -o jsonpath='{range .rules[*]}{.apiGroups[0]}/{.resources[0]}:{.verbs[*]} {end}')" \
    "/events:create /pods:get resource.k8s.io/resourceclaims:get "

# the command the node agent runs in place of the preflight initContainer: the kubelet's and
# the driver's steps, then preflight (env: the pod's, POD_NAME and POD_NAMESPACE by fieldRef)
cat >"$T/kubelet.sh" <<'EOF'
set -e
pn=pfd$$
hn=pfh$$
ip netns add $pn && ip netns add $hn
echo "$pn $hn" >>"$T/netns"
ip -n $pn link set lo up
# the DRA network driver's NodePrepareResources: the allocated NICs into the pod's namespace
skip=$(cat "$T/skip-$POD_NAME" 2>/dev/null || true)
python3 "$PREFLIGHT_SRC/tests/e2e/dra_driver.py" "$POD_NAMESPACE" "$POD_NAME" $pn $hn dra.net $skip \
    >"$T/prepared-$POD_NAME.json"
# the projected volume preflight-sa: a token bound to this pod, the cluster's CA, the namespace
sa=$PF_POD_ROOT/var/run/secrets/kubernetes.io/serviceaccount
mkdir -p "$sa" "$PF_POD_ROOT/dev/shm" "$PF_POD_ROOT/proc/sys/net/ipv4"
printf '32768\t60999\n' >"$PF_POD_ROOT/proc/sys/net/ipv4/ip_local_port_range"
"$KUBECTL" create token pf-preflight -n "$POD_NAMESPACE" --bound-object-kind Pod \
    --bound-object-name "$POD_NAME" --duration 10m >"$sa/token"
cp "$KDIR/ca.crt" "$sa/ca.crt"
printf '%s' "$POD_NAMESPACE" >"$sa/namespace"
# kube-proxy: the kubernetes Service's ClusterIP in the pod's namespace
ip -n $pn addr add 10.96.0.1/32 dev lo
python3 "$PREFLIGHT_SRC/tests/e2e/netns_forward.py" /var/run/netns/$pn 10.96.0.1 443 127.0.0.1 "$APORT" \
    "$T/fwd-$POD_NAME" >"$T/fwd-$POD_NAME.log" 2>&1 </dev/null &
echo $! >>"$T/fwd-pids"   # (its output not the node agent's pipe: the agent waits for that to close)
for _ in $(seq 1 100); do [ -s "$T/fwd-$POD_NAME" ] && break; sleep 0.1; done
printf 'podinfo:\n  waitSeconds: 2\n' >"$T/cfg.yaml"
rc=0
ip netns exec $pn timeout 60 env -i PATH="$PATH" HOME=/nonexistent NO_COLOR=1 \
    ASAN_OPTIONS="${ASAN_OPTIONS:-}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-}" \
    KUBERNETES_SERVICE_HOST=10.96.0.1 KUBERNETES_SERVICE_PORT=443 \
    POD_NAME="$POD_NAME" POD_NAMESPACE="$POD_NAMESPACE" PREFLIGHT_READ_CLAIMS="$PREFLIGHT_READ_CLAIMS" \
    "$PREFLIGHT" check --root "$PF_POD_ROOT" --config "$T/cfg.yaml" --format yaml \
    --verdict "$T/verdict-$POD_NAME.yaml" \
    >"$T/out-$POD_NAME" 2>"$T/err-$POD_NAME" || rc=$?
exit $rc
EOF
if ! k8s_agent dra dra-node "bash $T/kubelet.sh" --labels pool=dra --gpus 0; then
    notok "dra: the node agent serves its Node" "$(tail -2 "$T/agent-dra.log" | tr '\n' ' ')"
    exit 0
fi

# the drivers' DeviceClasses and ResourceSlices (what their controllers would publish)
k apply -f - >"$T/apply.out" 2>&1 <<'EOF' || notok "dra: DeviceClasses and ResourceSlices created (resource.k8s.io/v1)" "$(cat "$T/apply.out")"
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: dranet}
spec:
  selectors: [{cel: {expression: 'device.driver == "dra.net" && device.attributes["dra.net"].rdma == true'}}]
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: rdma-nic}
spec:
  selectors: [{cel: {expression: 'device.driver == "dra.net" && device.attributes["dra.net"].rdma == true'}}]
  extendedResourceName: example.com/rdma-nic
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.nvidia.com}
spec:
  selectors: [{cel: {expression: 'device.driver == "gpu.nvidia.com"'}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: dra-node-dra.net}
spec:
  driver: dra.net
  nodeName: dra-node
  pool: {name: dra-node, generation: 1, resourceSliceCount: 1}
  devices:
  - {name: pci-0000-0c-00-0, attributes: {dra.net/ifName: {string: rdma0}, dra.net/ipv4: {string: 10.210.0.11/24}, dra.net/rdma: {bool: true}}}
  - {name: pci-0000-0d-00-0, attributes: {dra.net/ifName: {string: rdma1}, dra.net/ipv4: {string: 10.210.1.11/24}, dra.net/rdma: {bool: true}}}
  - {name: pci-0000-8c-00-0, attributes: {dra.net/ifName: {string: rdma2}, dra.net/ipv4: {string: 10.210.2.11/24}, dra.net/rdma: {bool: true}}}
  - {name: pci-0000-8d-00-0, attributes: {dra.net/ifName: {string: rdma3}, dra.net/ipv4: {string: 10.210.3.11/24}, dra.net/rdma: {bool: true}}}
  - {name: pci-0000-91-00-0, attributes: {dra.net/ifName: {string: rdma4}, dra.net/ipv4: {string: 10.210.4.11/24}, dra.net/rdma: {bool: true}}}
  - {name: pci-0000-92-00-0, attributes: {dra.net/ifName: {string: rdma5}, dra.net/ipv4: {string: 10.210.5.11/24}, dra.net/rdma: {bool: true}}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: dra-node-gpu.nvidia.com}
spec:
  driver: gpu.nvidia.com
  nodeName: dra-node
  pool: {name: dra-node, generation: 1, resourceSliceCount: 1}
  devices:
  - {name: gpu-0}
  - {name: gpu-1}
  - {name: gpu-2}
  - {name: gpu-3}
EOF
# pod NAME CLAIM: a pod with a ResourceClaim of its own (CLAIM, two NICs), the template's GPUs
# and one NIC as an extended resource, all three given to its preflight initContainer
pod() {
    k create -n $NS -f - >"$T/create-$1.out" 2>&1 <<EOF || notok "dra: pod $1 and its claim created" "$(cat "$T/create-$1.out")"
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: $2}
spec:
  devices:
    requests:
    - {name: nic0, exactly: {deviceClassName: dranet}}
    - {name: nic1, exactly: {deviceClassName: dranet}}
---
apiVersion: v1
kind: Pod
metadata: {name: $1}
spec:
  nodeSelector: {pool: dra}
  restartPolicy: Never
  serviceAccountName: pf-preflight
  automountServiceAccountToken: false
  resourceClaims:
  - {name: rdma, resourceClaimName: $2}
  - {name: gpus, resourceClaimTemplateName: two-gpus}
  initContainers:
  - name: preflight
    image: registry.example.com/preflight:0.1.0
    args: [check]
    env:
    - {name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
    - {name: POD_NAMESPACE, valueFrom: {fieldRef: {fieldPath: metadata.namespace}}}
    - {name: PREFLIGHT_READ_CLAIMS, value: "true"}
    resources:
      claims: [{name: rdma}, {name: gpus}]
      limits: {example.com/rdma-nic: 1}
  containers:
  - name: trainer
    image: registry.example.com/trainer:1
    resources:
      claims: [{name: rdma}, {name: gpus}]
EOF
}
k create -n $NS -f - >"$T/tmpl.out" 2>&1 <<'EOF' || notok "dra: ResourceClaimTemplate created (resource.k8s.io/v1)" "$(cat "$T/tmpl.out")"
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: two-gpus}
spec:
  spec:
    devices:
      requests:
      - {name: gpus, exactly: {deviceClassName: gpu.nvidia.com, allocationMode: ExactCount, count: 2}}
EOF

# ---- the pod whose driver delivered every NIC
pod worker-0 worker-0-rdma
done0() { [ -n "$(k get pod worker-0 -n $NS -o jsonpath='{.status.initContainerStatuses[0].state.terminated.exitCode}' 2>/dev/null)" ]; }
if ! k8s_wait 90 done0; then
    notok "dra: worker-0 scheduled and its preflight run" "$(k get pod worker-0 -n $NS -o jsonpath='{.status.conditions}') $(k get events -n $NS -o jsonpath='{range .items[*]}{.reason}: {.message}; {end}' | tail -c 600)"
fi
# what the API server stored: every claim of the pod and its allocation
python3 - "$T/stored.json" <<'PY'
import json, os, subprocess, sys
k = lambda *a: json.loads(subprocess.check_output([os.environ["KUBECTL"], *a, "-o", "json"]))
p = k("get", "pod", "-n", "dra", "worker-0")
names = [c["resourceClaimName"] for c in p["spec"]["resourceClaims"] if c.get("resourceClaimName")]
names += [c["resourceClaimName"] for c in p["status"].get("resourceClaimStatuses") or [] if c.get("resourceClaimName")]
ext = (p["status"].get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
out = {"claims": names, "extended": ext, "node": p["spec"].get("nodeName"), "results": {}}
for n in names + ([ext] if ext else []):
    c = k("get", "resourceclaims.v1.resource.k8s.io", "-n", "dra", n)
    out["results"][n] = sorted("%s/%s/%s/%s" % (r["request"], r["driver"], r["pool"], r["device"])
                               for r in c["status"]["allocation"]["devices"]["results"])
json.dump(out, open(sys.argv[1], "w"), sort_keys=True)
PY
S=$T/stored.json
V=$T/verdict-worker-0.yaml
expect_eq "dra: the real scheduler bound worker-0 to the node whose ResourceSlices it allocated from" \
    "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["node"])' "$S")" dra-node
expect_eq "dra: the resourceclaim controller made the template's claim (status.resourceClaimStatuses), the scheduler the extended resource's (status.extendedResourceClaimStatus)" \
    "$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(len(d["claims"]), d["claims"][1].startswith("worker-0-gpus-"), bool(d["extended"]))' "$S")" "2 True True"
expect_eq "dra: allocated: two NICs and two GPUs of the published slices, one NIC for the extended resource" \
    "$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(sorted(len(v) for v in d["results"].values()), sorted({r.split("/")[1] for v in d["results"].values() for r in v}))' "$S")" \
    "[1, 2, 2] ['dra.net', 'gpu.nvidia.com']"
[ -f "$V" ] || notok "dra: worker-0's verdict written" "$(tail -5 "$T/err-worker-0" 2>/dev/null) $(tail -3 "$T/agent-dra.log")"
expect_eq "dra: worker-0: net.multus passes, exit 0 in status.initContainerStatuses" \
    "$(yq "$V" "check('net.multus')['status']") $(k get pod worker-0 -n $NS -o jsonpath='{.status.initContainerStatuses[0].state.terminated.exitCode}')" "pass 0"
# preflight's reading against the API server's: every claim read through resource.k8s.io/v1,
# every allocated device listed with its claim/request, each NIC on the interface the driver
# reported in status.devices[].networkData
expect_eq "dra: the claims preflight read are the pod's, through resource.k8s.io/v1" \
    "$(yq "$V" "sorted(check('net.multus')['evidence']['dra']['claims'])")" \
    "$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps(sorted(c + " (resource.k8s.io/v1)" for c in d["claims"] + [d["extended"]])))' "$S")"
expect_eq "dra: the devices preflight reports are the allocation the API server stored (claim/request driver/pool/device)" \
    "$(yq "$V" "sorted(a['name'] + ' ' + a['device'] for a in check('net.multus')['evidence']['attachments'])")" \
    "$(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
print(json.dumps(sorted("%s/%s %s" % (c, r.split("/")[0], "/".join(r.split("/")[1:])) for c, v in d["results"].items() for r in v)))' "$S")"
expect_eq "dra: each NIC on the interface, with the address, that status.devices[].networkData holds" \
    "$(yq "$V" "sorted('%s %s %s' % (a['device'], a['interface'], a['present']) for a in check('net.multus')['evidence']['attachments'] if a.get('interface'))")" \
    "$(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
print(json.dumps(sorted("%s %s True" % (x[1], x[2]) for v in d.values() for x in v)))' "$T/prepared-worker-0.json")"
nics=$(python3 -c 'import json,sys; print(sum(len(v) for v in json.load(open(sys.argv[1])).values()))' "$T/prepared-worker-0.json")
expect_eq "dra: the message counts every NIC of the three claims" \
    "$(yq "$V" "check('net.multus')['message'].split(':')[0]")" "$nics of $nics attachments present"

# ---- a pod whose driver did not deliver one NIC: reported in status, absent from the pod
echo worker-1-rdma/nic1 >"$T/skip-worker-1"   # the driver does not deliver this request's NIC
k delete pod worker-0 -n $NS --wait=false >/dev/null
pod worker-1 worker-1-rdma
done1() { [ -n "$(k get pod worker-1 -n $NS -o jsonpath='{.status.initContainerStatuses[0].state.terminated.exitCode}' 2>/dev/null)" ]; }
k8s_wait 90 done1 || notok "dra: worker-1 scheduled and its preflight run" "$(k get pod worker-1 -n $NS -o jsonpath='{.status.conditions}')"
V1=$T/verdict-worker-1.yaml
lost=$(python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
print(" ".join("%s/%s %s" % (c, x[0], x[2]) for c, v in d.items() for x in v if c + "/" + x[0] == "worker-1-rdma/nic1"))' "$T/prepared-worker-1.json")
expect_eq "dra: worker-1: net.multus fails [attachment-missing], exit 4 (node) in status.initContainerStatuses" \
    "$(yq "$V1" "[check('net.multus')['status'], codes('net.multus')]") $(k get pod worker-1 -n $NS -o jsonpath='{.status.initContainerStatuses[0].state.terminated.exitCode}')" \
    '["fail", ["attachment-missing"]] 4'
expect_eq "dra: worker-1: the finding names the claim, request and interface the API server holds ($lost)" \
    "$(yq "$V1" "[f['message'].split(' promises')[0] + ' ' + f['message'].split('promises interface ')[1].split(',')[0] for f in check('net.multus')['findings']]")" \
    "[\"dra ${lost% *} (ResourceClaim status) ${lost##* }\"]"

# ---- the chart without rbac.readClaims: the same read is refused by the real RBAC, said in the
# evidence, and nothing fails for it
k create namespace dra-off >/dev/null
"$HELM" install pf "$PREFLIGHT_SRC/helm/preflight" -n dra-off --set test.enabled=false >"$T/install-off.out" 2>&1 ||
    notok "helm install (defaults)" "$(tail -2 "$T/install-off.out" | tr '\n' ' ')"
k create -n dra-off -f - >"$T/create-off.out" 2>&1 <<'YAML' || notok "dra: pod worker-2 created" "$(cat "$T/create-off.out")"
apiVersion: v1
kind: Pod
metadata: {name: worker-2}
spec:
  nodeSelector: {pool: dra}
  restartPolicy: Never
  serviceAccountName: pf-preflight
  automountServiceAccountToken: false
  initContainers:
  - name: preflight
    image: registry.example.com/preflight:0.1.0
    env:
    - {name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
    - {name: POD_NAMESPACE, valueFrom: {fieldRef: {fieldPath: metadata.namespace}}}
    - {name: PREFLIGHT_READ_CLAIMS, value: "true"}
  containers:
  - {name: trainer, image: registry.example.com/trainer:1}
YAML
done2() { [ -n "$(k get pod worker-2 -n dra-off -o jsonpath='{.status.initContainerStatuses[0].state.terminated.exitCode}' 2>/dev/null)" ]; }
k8s_wait 90 done2 || notok "dra: worker-2 scheduled and its preflight run" "$(k get pod worker-2 -n dra-off -o jsonpath='{.status.conditions}')"
V2=$T/verdict-worker-2.yaml
expect_eq "dra: without rbac.readClaims the API server refuses the pod's read (HTTP 403), the evidence says so, net.multus does not fail" \
    "$(yq "$V2" "[check('net.multus')['status'] != 'fail', 'HTTP 403' in check('net.multus')['evidence']['dra']['error'], 'rbac.readClaims' in check('net.multus')['evidence']['dra']['error']]")" \
    "[true, true, true]"
