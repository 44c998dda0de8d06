#!/usr/bin/env bash
# RBAC and the admission policies of the chart, for real (tests/k8s/cluster: kube-apiserver
# v1.37.2 with RBAC and ValidatingAdmissionPolicy): the chart installed with markNode=taint,
# annotate and admissionPolicy=true; SubjectAccessReviews for the ServiceAccount; then a
# pod-bound token of that ServiceAccount (TokenRequest for a pod bound to node rb-a, which
# carries the pod and node claims) used for real requests: what preflight does is allowed
# (post an Event, taint and label its own node with preflight.dev/unfit, annotate its own
# pod), everything else is refused by RBAC or by the policies. Then the trainer container of
# manifests/indexed-job.yaml, as admitted: no token mounted.
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/k8s/cluster.sh
. "$PREFLIGHT_SRC/tests/k8s/cluster.sh"
trap 'k8s_down; rm -rf "$T"' EXIT
if ! k8s_up; then k8s_unavailable "k8s rbac"; exit 0; fi
CHART=$PREFLIGHT_SRC/helm/preflight
k() { "$KUBECTL" "$@"; }
SA=system:serviceaccount:rb:pf-preflight

k create namespace rb >/dev/null
if ! "$HELM" install pf "$CHART" -n rb --set config.report.markNode=taint --set config.report.annotate=true \
    --set rbac.admissionPolicy=true >"$T/install.out" 2>&1; then
    notok "helm install (markNode=taint, annotate, admissionPolicy=true)" "$(tail -2 "$T/install.out" | tr '\n' ' ')"
fi
# SubjectAccessReview: what RBAC grants the ServiceAccount
sar() { # VERB RESOURCE [NS] [SUBRESOURCE]
    printf '{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"user":"%s","groups":["system:serviceaccounts","system:serviceaccounts:rb","system:authenticated"],"resourceAttributes":{"verb":"%s","resource":"%s","namespace":"%s","subresource":"%s"}}}' \
        "$SA" "$1" "$2" "${3:-}" "${4:-}" | k create -f - -o jsonpath='{.status.allowed}'
}
got=""
for q in "create events rb" "patch pods rb" "get pods rb" "get nodes" "patch nodes" \
    "list nodes" "delete pods rb" "create pods rb" "get secrets rb" "list pods default" "patch nodes '' status" \
    "create pods rb exec"; do
    # shellcheck disable=SC2086
    eval "set -- $q"
    got+="$q=$(sar "$@"); "
done
expect_eq "SubjectAccessReview: events, own-namespace pods (get/patch) and nodes (get/patch), nothing else" "$got" \
    "create events rb=true; patch pods rb=true; get pods rb=true; get nodes=true; patch nodes=true; list nodes=false; delete pods rb=false; create pods rb=false; get secrets rb=false; list pods default=false; patch nodes '' status=false; create pods rb exec=false; "

# two nodes, a pod of the ServiceAccount bound to rb-a (no kubelet: nothing runs it), and a
# token bound to that pod
for n in rb-a rb-b; do
    k create -f - >/dev/null <<EOF
{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "$n", "labels": {"kubernetes.io/hostname": "$n"}}}
EOF
done
for p in p0 p1; do
    k create -n rb -f - >/dev/null <<EOF
{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "$p"}, "spec": {"nodeName": "rb-a",
 "serviceAccountName": "pf-preflight", "automountServiceAccountToken": false,
 "containers": [{"name": "preflight", "image": "registry.example.com/preflight:0.1.0"}]}}
EOF
done
tok=$(k create token pf-preflight -n rb --bound-object-kind Pod --bound-object-name p0 --duration 10m)
server=$(cat "$KDIR/ready")
as() { "$KUBECTL" --kubeconfig=/dev/null --server="$server" --certificate-authority="$KDIR/ca.crt" --token="$tok" "$@"; }
expect_eq "the pod-bound token carries the pod's node (authentication.kubernetes.io/node-name)" \
    "$(as auth whoami -o jsonpath='{.status.userInfo.extra.authentication\.kubernetes\.io/node-name[0]} {.status.userInfo.username}')" \
    "rb-a $SA"
allowed() { local n=$1; shift; if out=$(as "$@" 2>&1); then ok "allowed: $n"; else notok "allowed: $n" "$out"; fi; }
denied() {
    local n=$1 why=$2; shift 2
    if out=$(as "$@" 2>&1); then notok "denied: $n" "it was allowed"
    elif grep -qE "$why" <<<"$out"; then ok "denied: $n ($(grep -oE "$why" <<<"$out" | head -1))"
    else notok "denied: $n" "refused, but not by $why: $out"; fi
}
allowed "post an Event on its pod" create -n rb -f - <<'EOF'
{"apiVersion": "v1", "kind": "Event", "metadata": {"name": "p0.preflight"}, "type": "Warning",
 "reason": "PreflightFailed", "message": "node: rdma.verbs/no-device",
 "involvedObject": {"kind": "Pod", "namespace": "rb", "name": "p0", "apiVersion": "v1"}}
EOF
allowed "taint its own node with preflight.dev/unfit" taint node rb-a preflight.dev/unfit=rdma.verbs:NoSchedule
allowed "label its own node preflight.dev/unfit" label node rb-a preflight.dev/unfit=rdma.verbs
allowed "annotate its own pod (preflight.dev/verdict)" annotate pod -n rb p0 preflight.dev/verdict=fail
denied "taint another node" "ValidatingAdmissionPolicy.*denied|only the node its pod runs on" taint node rb-b preflight.dev/unfit=x:NoSchedule
denied "any other label on its own node" "ValidatingAdmissionPolicy.*denied" label node rb-a team=x
denied "any other taint on its own node" "ValidatingAdmissionPolicy.*denied" taint node rb-a dedicated=x:NoSchedule
denied "annotate another pod" "ValidatingAdmissionPolicy.*denied" annotate pod -n rb p1 preflight.dev/verdict=fail
denied "any other annotation on its own pod" "ValidatingAdmissionPolicy.*denied" annotate pod -n rb p0 team=x
denied "read Secrets" "Forbidden|forbidden" get secrets -n rb
denied "list nodes" "Forbidden|forbidden" get nodes
denied "delete a pod" "Forbidden|forbidden" delete pod -n rb p1
denied "create a pod" "Forbidden|forbidden" run x -n rb --image=x
expect_eq "the node's taint and label and the pod's annotation as the API server stores them" \
    "$(k get node rb-a -o jsonpath='{.spec.taints[0].key}={.spec.taints[0].value}:{.spec.taints[0].effect} {.metadata.labels.preflight\.dev/unfit}') $(k get pod -n rb p0 -o jsonpath='{.metadata.annotations.preflight\.dev/verdict}') $(k get events -n rb --field-selector reason=PreflightFailed -o jsonpath='{.items[0].involvedObject.name}')" \
    "preflight.dev/unfit=rdma.verbs:NoSchedule rdma.verbs fail p0"

# the trainer gets no token: manifests/indexed-job.yaml's pod as admitted (ServiceAccount
# admission adds the token to every container unless the pod says no)
k create serviceaccount preflight -n rb >/dev/null
python3 -c '
import json, sys, yaml
d = next(x for x in yaml.safe_load_all(open(sys.argv[1])) if x and x["kind"] == "Job")
print(json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "trainer-0"}, "spec": d["spec"]["template"]["spec"]}))' \
    "$PREFLIGHT_SRC/manifests/indexed-job.yaml" >"$T/trainer.json"
k create --dry-run=server -n rb -f "$T/trainer.json" -o json >"$T/admitted.json" 2>"$T/err" || notok "manifests/indexed-job.yaml's pod admitted" "$(cat "$T/err")"
expect_eq "indexed-job pod as admitted: the token is mounted in preflight alone, not in the trainer" \
    "$(python3 -c '
import json, sys
p = json.load(open(sys.argv[1]))["spec"]
sa = "/var/run/secrets/kubernetes.io/serviceaccount"
print([c["name"] for c in p["initContainers"] + p["containers"] if any(m["mountPath"] == sa for m in c.get("volumeMounts", []))])' "$T/admitted.json")" \
    "['preflight']"
