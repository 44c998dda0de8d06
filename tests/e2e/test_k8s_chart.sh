#!/usr/bin/env bash
# The chart against a real kube-apiserver with Pod Security admission (tests/k8s/cluster:
# Kubernetes v1.37.2 from its Go modules): `helm install` of each documented set of values
# into namespaces enforcing privileged, baseline and restricted, and the test Job's pod
# (as `helm template` renders it for those values) created with server-side dry-run, which
# runs every admission plugin. The result must be the table in docs/kubernetes.md ("Pod
# Security admission"). Then `helm test` of the default install in the baseline namespace
# (with the --timeout its notes print),
# run by the real Job controller and scheduler on two fake nodes whose test node agent runs
# a check of the pod's env (the Secret's token, world size, coordinator, completion index,
# the downward-API labels file) in place of preflight: no kubelet or container runtime runs
# here.
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/k8s/cluster.sh
. "$PREFLIGHT_SRC/tests/k8s/cluster.sh"
trap 'k8s_down; rm -rf "$T"' EXIT
if ! k8s_up; then k8s_unavailable "k8s chart"; exit 0; fi
CHART=$PREFLIGHT_SRC/helm/preflight
k() { "$KUBECTL" "$@"; }

for lvl in privileged baseline restricted; do
    k create namespace "ps-$lvl" >/dev/null
    k label namespace "ps-$lvl" "pod-security.kubernetes.io/enforce=$lvl" >/dev/null
done
# the rows of the table: the label in docs/kubernetes.md, then the helm values
declare -a rows=(
    "defaults|"
    "\`ipcLock=true\`|--set ipcLock=true"
    "\`trainingImage=…\` (install container)|--set trainingImage=registry.example.com/train:1"
    "\`config.report.markNode=taint\`, \`rbac.admissionPolicy=true\`|--set config.report.markNode=taint --set rbac.admissionPolicy=true"
    "\`rbac.readClaims=true\`|--set rbac.readClaims=true"
    "\`config.report.pushgateway=…\`|--set config.report.pushgateway=http://prometheus-pushgateway.monitoring:9091"
)
: >"$T/table"
i=0
for row in "${rows[@]}"; do
    label=${row%%|*}; args=${row#*|}
    line="| $label |"
    for lvl in privileged baseline restricted; do
        rel=v$i-${lvl:0:4}
        # shellcheck disable=SC2086
        if ! "$HELM" install "$rel" "$CHART" -n "ps-$lvl" $args >"$T/install.out" 2>&1; then
            notok "helm install $label into $lvl" "$(tail -2 "$T/install.out" | tr '\n' ' ')"
        fi
        # shellcheck disable=SC2086
        "$HELM" template "$rel" "$CHART" -n "ps-$lvl" $args | python3 -c '
import json, sys, yaml
j = next(d for d in yaml.safe_load_all(sys.stdin) if d and d["kind"] == "Job")
t = j["spec"]["template"]
print(json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "admission-probe", "labels": t["metadata"].get("labels", {})}, "spec": t["spec"]}))' >"$T/pod.json"
        if k create --dry-run=server -n "ps-$lvl" -f "$T/pod.json" >"$T/create.out" 2>&1; then
            line+=" admitted |"
        elif grep -q "violates PodSecurity" "$T/create.out"; then
            line+=" refused |"
            echo "# $label in $lvl: $(grep -o 'violates PodSecurity.*' "$T/create.out" | head -1)"
        else
            line+=" error |"
            echo "# $label in $lvl: $(tail -1 "$T/create.out")"
        fi
    done
    echo "$line" >>"$T/table"
    i=$((i + 1))
done
sed 's/^/# /' "$T/table"
# the documented table: the rows after the header "| values | `privileged` | ..."
awk '/^\| values \| `privileged` \| `baseline` \| `restricted` \|$/ {t = 1; getline; next}
     t && /^\|/ {print; next} t {exit}' "$PREFLIGHT_SRC/docs/kubernetes.md" >"$T/doc"
check "pod security: the table in docs/kubernetes.md is what the API server admits ($(wc -l <"$T/doc") rows)" \
    diff "$T/doc" "$T/table"
expect_eq "pod security: the default install's pod is admitted under baseline and restricted" \
    "$(sed -n 1p "$T/table")" "| defaults | admitted | admitted | admitted |"

# helm test of the default install under baseline, on two fake nodes (one pod per node)
cat >"$T/pf.sh" <<'EOF'
missing=
[ -n "$PREFLIGHT_TOKEN" ] || missing="$missing PREFLIGHT_TOKEN"
[ "$PREFLIGHT_WORLD_SIZE" = 2 ] || missing="$missing PREFLIGHT_WORLD_SIZE=$PREFLIGHT_WORLD_SIZE"
case "$PREFLIGHT_COORDINATOR" in pt-preflight-test-0.pt-preflight:29400) ;; *) missing="$missing PREFLIGHT_COORDINATOR=$PREFLIGHT_COORDINATOR" ;; esac
[ -n "$JOB_COMPLETION_INDEX" ] || missing="$missing JOB_COMPLETION_INDEX"
[ -n "$NODE_NAME" ] && [ -n "$POD_NAME" ] && [ "$POD_NAMESPACE" = ps-baseline ] || missing="$missing POD_*/NODE_NAME"
grep -q '^batch.kubernetes.io/job-completion-index=' "$PF_POD_ROOT/etc/podinfo/labels" || missing="$missing podinfo/labels"
[ -z "$missing" ] && exit 0
echo "spec: missing$missing" >"$PF_TERMINATION_LOG"; exit 3
EOF
if ! k8s_agent chart "ht-0,ht-1" "sh $T/pf.sh"; then
    notok "helm test: the node agent serves its 2 Nodes" "$(tail -2 "$T/agent-chart.log" | tr '\n' ' ')"
    exit 0
fi
"$HELM" install pt "$CHART" -n ps-baseline >"$T/pt.out" 2>&1 || notok "helm install pt" "$(tail -2 "$T/pt.out")"
# the command the chart's NOTES.txt prints: helm waits 5 minutes unless told, the Job may run
# timeoutSeconds (600 s) and its pods' start
htest=$(sed -n 's/^ *\(helm test pt .*\)$/\1/p' "$T/pt.out")
expect_eq "helm install's notes tell helm test to wait past the Job's deadline" "$htest" "helm test pt -n ps-baseline --timeout 900s"
s=$(date +%s)
if "$HELM" test pt -n ps-baseline --timeout 900s >"$T/test.out" 2>&1; then
    ok "helm test of the default install under baseline: the Job's 2 pods scheduled one per node and passed ($(( $(date +%s) - s )) s)"
else
    notok "helm test of the default install under baseline" "$(tail -3 "$T/test.out" | tr '\n' ' '); $(k get pods -n ps-baseline -o jsonpath='{range .items[*]}{.metadata.name} {.status.phase} {.spec.nodeName} {.status.containerStatuses[0].state.terminated.message}; {end}')"
fi
expect_eq "helm test: its pods ran on both nodes, one each" \
    "$(k get pods -n ps-baseline -l batch.kubernetes.io/job-name=pt-preflight-test -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' | sort | tr '\n' ' ')" "ht-0 ht-1 "
