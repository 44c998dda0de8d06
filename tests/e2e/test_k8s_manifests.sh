#!/usr/bin/env bash
# Every file in manifests/ applied to a real kube-apiserver (tests/k8s/cluster: v1.37.2)
# with server-side apply, dry run and strict field validation, after the launchers' CRDs of
# tests/k8s/crds (the released YAML each project publishes, descriptions dropped; sources and
# versions in tests/k8s/crds/SOURCES.md) are installed: the API server then checks the
# schemas, the CRDs' CEL rules (x-kubernetes-validations) and its own admission, which the
# offline validator of test_manifests.sh cannot. Kueue's CRDs are not installed: no manifest
# holds a Kueue object (the queue is a label). The launchers' webhooks do not run.
# The chart with monitoring on (a PrometheusRule) is applied the same way.
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/k8s/cluster.sh
. "$PREFLIGHT_SRC/tests/k8s/cluster.sh"
trap 'k8s_down; rm -rf "$T"' EXIT
if ! k8s_up; then k8s_unavailable "k8s manifests"; exit 0; fi
k() { "$KUBECTL" "$@"; }
for f in "$PREFLIGHT_SRC"/tests/k8s/crds/*.yaml; do
    if out=$(k apply --server-side -f "$f" 2>&1); then ok "CRD $(basename "$f" .yaml) installed"
    else notok "CRD $(basename "$f" .yaml) installed" "$out"; fi
done
ncrd=$(ls "$PREFLIGHT_SRC"/tests/k8s/crds/*.yaml | wc -l)
est() { [ "$(k get crd -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Established")].status}{"\n"}{end}' | grep -c True)" -ge "$ncrd" ]; }
check "the $ncrd CRDs are Established" k8s_wait 60 est
k create namespace ml >/dev/null
for f in "$PREFLIGHT_SRC"/manifests/*.yaml; do
    n=$(basename "$f" .yaml)
    if out=$(k apply --server-side --dry-run=server --field-manager=preflight-test -n ml -f "$f" 2>&1); then
        ok "manifests/$n.yaml: accepted by the API server ($(grep -c 'serverside-applied' <<<"$out") objects)"
    else
        notok "manifests/$n.yaml: accepted by the API server" "$(tr '\n' ' ' <<<"$out")"
    fi
done
# and one unknown field is refused, so that the checks above could fail
python3 -c '
import json, sys, yaml
d = next(x for x in yaml.safe_load_all(open(sys.argv[1])) if x and x["kind"] == "Job")
d["spec"]["backoffLimitPerIndexx"] = 1
print(json.dumps(d))' "$PREFLIGHT_SRC/manifests/indexed-job.yaml" >"$T/bad.json"
# (server-side apply refuses a field its schema lacks: "field not declared in schema")
if out=$(k apply --server-side --dry-run=server -n ml -f "$T/bad.json" 2>&1); then
    notok "a misspelt field is refused (strict validation)" "accepted"
else
    why=$(grep -o '[^ ]*backoffLimitPerIndexx[^,]*' <<<"$out" | head -1)
    check "a misspelt field is refused (strict validation): ${why:-$out}" grep -q 'backoffLimitPerIndexx: field not declared in schema' <<<"$out"
fi
# the dashboard's ConfigMap goes to Grafana's namespace (values-monitoring.yaml: monitoring),
# the rest to the release's, as helm install puts them
k create namespace monitoring >/dev/null
"$HELM" template pf "$PREFLIGHT_SRC/helm/preflight" -n ml -f "$PREFLIGHT_SRC/tests/k8s/values-monitoring.yaml" | python3 -c '
import sys, yaml
docs = [d for d in yaml.safe_load_all(sys.stdin) if d]
for d in docs:
    d["metadata"].setdefault("namespace", "ml")
yaml.safe_dump_all(docs, sys.stdout)' >"$T/mon.yaml"
if out=$(k apply --server-side --dry-run=server -f "$T/mon.yaml" 2>&1); then
    ok "chart with monitoring (PrometheusRule, dashboard ConfigMap): accepted by the API server"
else notok "chart with monitoring: accepted by the API server" "$(tr '\n' ' ' <<<"$out" | cut -c1-600)"; fi
