#!/usr/bin/env bash
# `preflight watch` on the real control plane (tests/k8s/cluster: kube-apiserver,
# kube-controller-manager and kube-scheduler v1.37.2). The pods with the watch sidecar are
# admitted by the real API server in namespaces enforcing Pod Security "baseline": a user's
# chart that includes preflight's named templates (tests/k8s/parent-chart, watch.enabled),
# installed with `helm install`, whose StatefulSet the real controller turns into pods, and
# manifests/indexed-job-watch.yaml, whose Job the real Job controller turns into pods; each
# with the native sidecar (initContainer preflight-watch, restartPolicy Always). Then
# `preflight watch` runs here as that sidecar would: its environment resolved from the
# container's env in the pod the API server stored (fieldRefs: name, namespace, uid, node), the
# chart's config from its ConfigMap, a token of the chart's ServiceAccount bound to the pod
# (TokenRequest), the cluster's CA; a real NCCL log with a Socket fallback
# (tests/fixtures/nccl-logs/socket-fallback.log) replayed into the shared folder beside a gate
# verdict that measured RDMA (IB). The Event it posts is read back from the API server (reason,
# type, message, involvedObject) and from `kubectl describe pod` (which finds a pod's Events by
# its uid). RBAC: the chart's Role grants the ServiceAccount create on events and nothing
# else (SubjectAccessReview), and that is all the watch needed: its Event was stored.
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/k8s/cluster.sh
. "$PREFLIGHT_SRC/tests/k8s/cluster.sh"
trap 'k8s_down; [ -n "${KEEP_TMP:-}" ] && echo "# kept $T" || rm -rf "$T"' EXIT
if ! k8s_up; then k8s_unavailable "k8s watch"; exit 0; fi
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY
k() { "$KUBECTL" "$@"; }
M=$PREFLIGHT_SRC/manifests
export KUBECTL
SERVER=$(cat "$KDIR/ready")
APORT=${SERVER##*:}

# ---- admission: the parent chart with the watch, under baseline
for ns in wt wj; do
    k create namespace $ns >/dev/null
    k label namespace $ns pod-security.kubernetes.io/enforce=baseline >/dev/null
done
P=$T/parent
cp -r "$PREFLIGHT_SRC/tests/k8s/parent-chart" "$P"
sed -i "s|file://../../../helm/preflight|file://$PREFLIGHT_SRC/helm/preflight|" "$P/Chart.yaml"
if "$HELM" dependency build "$P" >"$T/dep.out" 2>&1 && "$HELM" install t "$P" -n wt >"$T/install.out" 2>&1; then
    ok "helm install of a chart with preflight's watch (tests/k8s/parent-chart) into a baseline namespace"
else
    notok "helm install of the parent chart (watch.enabled)" "$(tail -2 "$T/dep.out" "$T/install.out" | tr '\n' ' ')"
fi
# ... and manifests/indexed-job-watch.yaml with what it says to apply first
for f in service rbac configmap nccl-env; do k apply -n wj -f "$M/$f.yaml" >/dev/null || notok "manifests/$f.yaml applied"; done
k create secret generic trainer-watched-preflight-token -n wj --from-literal=token=t0k3n >/dev/null
k apply -n wj -f "$M/indexed-job-watch.yaml" >"$T/job.out" 2>&1 || notok "manifests/indexed-job-watch.yaml applied" "$(cat "$T/job.out")"
npods() { [ "$(k get pods -n "$1" -o name 2>/dev/null | wc -l)" -ge "$2" ]; }
k8s_wait 60 npods wt 4 || notok "the StatefulSet's 4 pods created" "$(k get events -n wt -o jsonpath='{range .items[*]}{.reason}: {.message}; {end}' | tail -c 400)"
k8s_wait 60 npods wj 4 || notok "the Job's 4 pods created" "$(k get events -n wj -o jsonpath='{range .items[*]}{.reason}: {.message}; {end}' | tail -c 400)"
sidecar() { # NS: "<pods> <initContainers of each, name:restartPolicy>" as admitted
    k get pods -n "$1" -o json | python3 -c '
import json, sys
items = json.load(sys.stdin)["items"]
shapes = {" ".join("%s:%s" % (c["name"], c.get("restartPolicy", "-")) for c in p["spec"]["initContainers"]) for p in items}
print(len(items), " | ".join(sorted(shapes)))'
}
expect_eq "parent chart: 4 pods admitted under baseline, each with the gate then the native sidecar" \
    "$(sidecar wt)" "4 preflight:- preflight-watch:Always"
expect_eq "manifests/indexed-job-watch.yaml: 4 pods admitted under baseline, each with the gate then the native sidecar" \
    "$(sidecar wj)" "4 preflight:- preflight-watch:Always"
uidenv() { k get pods -n "$1" -o jsonpath='{range .items[*]}{range .spec.initContainers[?(@.name=="preflight-watch")].env[?(@.name=="POD_UID")]}{.valueFrom.fieldRef.fieldPath} {end}{end}'; }
expect_eq "the sidecar of every pod gets its pod's uid (POD_UID from metadata.uid, for the Event's involvedObject)" \
    "$(uidenv wt)$(uidenv wj)" "$(printf 'metadata.uid %.0s' 1 2 3 4 5 6 7 8)"
expect_eq "no pod refused by Pod Security (no FailedCreate Event)" \
    "$(k get events -A --field-selector reason=FailedCreate -o name | wc -l)" 0

# ---- RBAC: what the chart's ServiceAccount may do
SA=system:serviceaccount:wt:t-preflight
sar() {
    printf '{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"user":"%s","groups":["system:serviceaccounts","system:serviceaccounts:wt","system:authenticated"],"resourceAttributes":{"verb":"%s","resource":"%s","namespace":"wt"}}}' \
        "$SA" "$1" "$2" | k create -f - -o jsonpath='{.status.allowed}'
}
expect_eq "SubjectAccessReview: the chart's ServiceAccount may create events, and not get, list or patch pods or update events" \
    "$(sar create events) $(sar get pods) $(sar list pods) $(sar patch pods) $(sar update events) $(sar list events)" \
    "true false false false false false"

# ---- the sidecar's environment, as the kubelet resolves it from the stored pod
POD=t-trainer-0
k get pod $POD -n wt -o json >"$T/pod.json"
python3 - "$T/pod.json" >"$T/watch.env" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
c = next(c for c in p["spec"]["initContainers"] if c["name"] == "preflight-watch")
fields = {"metadata.name": p["metadata"]["name"], "metadata.namespace": p["metadata"]["namespace"],
          "metadata.uid": p["metadata"]["uid"], "spec.nodeName": p["spec"].get("nodeName", "")}
for e in c.get("env", []):
    if e["name"] == "PREFLIGHT_CONFIG":
        continue  # the ConfigMap's file, here at $T/config.yaml
    v = e.get("value")
    if v is None and "fieldRef" in e.get("valueFrom", {}):
        v = fields[e["valueFrom"]["fieldRef"]["fieldPath"]]
    if v is not None:
        print("%s=%s" % (e["name"], v))
PY
k get configmap t-preflight-config -n wt -o jsonpath='{.data.config\.yaml}' >"$T/config.yaml"
ROOT=$T/root
SAD=$ROOT/var/run/secrets/kubernetes.io/serviceaccount
mkdir -p "$SAD"
k create token t-preflight -n wt --bound-object-kind Pod --bound-object-name $POD --duration 10m >"$SAD/token"
cp "$KDIR/ca.crt" "$SAD/ca.crt"
printf wt >"$SAD/namespace"
expect_eq "the token is the chart's ServiceAccount's, bound to the pod" \
    "$(k --kubeconfig=/dev/null --server="$SERVER" --certificate-authority="$KDIR/ca.crt" --token="$(cat "$SAD/token")" auth whoami -o jsonpath='{.status.userInfo.username} {.status.userInfo.extra.authentication\.kubernetes\.io/pod-name[0]}')" \
    "$SA $POD"

# ---- preflight watch: a gate verdict that measured IB with 4 HCAs and GDR, then the trainer's
# NCCL falls back to Socket (a real log, replayed at 20 times its pace)
D=$T/run
mkdir -p "$D"
cat >"$D/verdict.yaml" <<'EOF'
apiVersion: preflight/v1
kind: Verdict
verdict: pass
summary: "14 of 14 checks passed"
environment:
  ncclVersion: "2.21.5"
  ncclNetwork: IB
checks:
- id: collective.nccl
  status: pass
  evidence:
    transport: IB
    hcas: [mlx5_0:1/IB, mlx5_1:1/IB, mlx5_2:1/IB, mlx5_3:1/IB]
collectives:
- backend: nccl
  op: allreduce
  transport: IB
  gpuDirectRdma: true
EOF
# shellcheck disable=SC2046
env $(cat "$T/watch.env") KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT="$APORT" PREFLIGHT_ROOT="$ROOT" \
    python3 "$PREFLIGHT_SRC/tests/e2e/watch_replay.py" drive "$T/out.json" -- \
    "$PREFLIGHT" watch "$D" --config "$T/config.yaml" ++ \
    python3 "$PREFLIGHT_SRC/tests/e2e/watch_replay.py" replay "$D" "$T/rec" 20 0.05 "$FIX/nccl-logs/socket-fallback.log"
python3 -c 'import json,sys; print("\n".join(l for t, l in json.load(open(sys.argv[1]))["lines"]))' "$T/out.json" >"$T/watch.log"
check "watch: its log says the Event was posted" grep -q "Event PreflightFailed posted on pod wt/$POD" "$T/watch.log"
check "watch: no API error (the ServiceAccount's rights sufficed)" bash -c "! grep -qiE 'forbidden|api-error|HTTP 40' '$T/watch.log'"

# the Event as the API server stored it
k get events -n wt -o json >"$T/events.json"
uid=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["metadata"]["uid"])' "$T/pod.json")
ev=$(python3 - "$T/events.json" "$uid" <<'PY'
import json, sys
evs = [e for e in json.load(open(sys.argv[1]))["items"] if (e.get("source") or {}).get("component") == "preflight"]
for e in evs:
    o = e["involvedObject"]
    print(e["reason"], e["type"], o["kind"], o["namespace"], o["name"], o.get("uid") == sys.argv[2],
          "Socket" in e["message"] and "IB" in e["message"], e["metadata"]["name"].startswith(o["name"] + ".preflight-"))
PY
)
# an Event per set of findings (the fewer-NICs warning may come alone first, as PreflightWarning);
# the end of the watch posts none again when nothing changed since the last
expect_eq "the Event stored, once: PreflightFailed, Warning, on the pod (kind, namespace, name, uid), its message says Socket where the gate measured IB" \
    "$(grep '^PreflightFailed' <<<"$ev")" "PreflightFailed Warning Pod wt t-trainer-0 True True True"
expect_eq "no Event stored twice with the same message" \
    "$(python3 -c '
import collections, json, sys
c = collections.Counter(e["message"] for e in json.load(open(sys.argv[1]))["items"] if (e.get("source") or {}).get("component") == "preflight")
print(max(c.values()) if c else 0)' "$T/events.json")" 1
msg=$(python3 -c '
import json, sys
print(next(e["message"] for e in json.load(open(sys.argv[1]))["items"] if e["reason"] == "PreflightFailed"))' "$T/events.json")
echo "# the Event's message: $msg"
check "kubectl describe pod shows the watch's Event (found by the pod's uid)" \
    grep -q "PreflightFailed" <<<"$(k describe pod $POD -n wt)"
