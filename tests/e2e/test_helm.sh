#!/usr/bin/env bash
# The Helm chart: `helm lint` and `helm template` with each tests/k8s/values-*.yaml, renders
# compared exactly with tests/k8s/golden/helm-*.yaml (PF_UPDATE_GOLDEN=1 rewrites them), every
# rendered object validated against the Kubernetes 1.30 API schemas, values.schema.json
# refusing bad values, the random token, the named templates from a parent chart, and the
# rendered config accepted by preflight itself, the ServiceAccount token mounted by the preflight
# container alone, and the admission policies (their CEL evaluated by an npm CEL library against
# sample requests). No cluster here: `helm install`, `helm test`, Pod Security and the
# policies as an API server enforces them are in test_k8s_chart.sh and test_k8s_rbac.sh.
. "$(dirname "$0")/lib.sh"
. "$PREFLIGHT_SRC/tests/k8s/tools.sh"
if ! k8s_tools; then skip "helm" "$TOOLS_WHY"; exit 0; fi
CHART=$PREFLIGHT_SRC/helm/preflight
K=$PREFLIGHT_SRC/tests/k8s
GOLD=$K/golden

# the Secret's random token differs per render: the default render shows it as "UkFORE9N"
# (base64 of RANDOM); the other values files give a token
mask() {
    if [ "$1" = default ]; then sed -E 's/^(  token: )"[A-Za-z0-9+/=]{44}"$/\1"UkFORE9N"/'; else cat; fi
}
mkdir -p "$T/emptyroot"

if out=$("$HELM" lint --strict "$CHART" 2>&1); then ok "helm lint --strict (defaults)"; else notok "helm lint --strict (defaults)" "$(echo "$out" | grep -E 'ERROR|WARN' | head -3)"; fi

for vf in "$K"/values-*.yaml; do
    name=$(basename "$vf" .yaml); name=${name#values-}
    if out=$("$HELM" lint --strict "$CHART" -f "$vf" 2>&1); then ok "helm lint $name"; else notok "helm lint $name" "$(echo "$out" | grep -E 'ERROR|WARN' | head -3)"; fi
    r=$T/render-$name.yaml
    if ! "$HELM" template pf "$CHART" -n ml -f "$vf" 2>"$T/err" | mask "$name" >"$r"; then
        notok "helm template $name" "$(head -3 "$T/err")"; continue
    fi
    if [ "${PF_UPDATE_GOLDEN:-}" = 1 ]; then cp "$r" "$GOLD/helm-$name.yaml"; fi
    if diff -u "$GOLD/helm-$name.yaml" "$r" >"$T/diff" 2>&1; then ok "helm template $name matches golden"
    else notok "helm template $name matches golden" "$(head -20 "$T/diff" | tr '\n' '|') (PF_UPDATE_GOLDEN=1 to accept)"; fi
    if $VALIDATE "$r" >"$T/val" 2>&1; then ok "helm template $name: $(grep -c '^ok' "$T/val") objects valid against the API schemas"
    else notok "helm template $name: API schemas" "$(grep '^error' "$T/val" | head -3 | tr '\n' '|')"; fi
    # the rendered config is one preflight accepts (exit 2 would be a config error)
    python3 -c '
import sys, yaml
for d in yaml.safe_load_all(open(sys.argv[1])):
    if d and d.get("kind") == "ConfigMap" and "config.yaml" in d["data"]:
        open(sys.argv[2], "w").write(d["data"]["config.yaml"])' "$r" "$T/config-$name.yaml"
    "$PREFLIGHT" check --config "$T/config-$name.yaml" --root "$T/emptyroot" --format yaml --verdict - >/dev/null 2>"$T/err"
    rc=$?
    if [ $rc -ne 2 ]; then ok "helm $name: preflight accepts the rendered config"; else notok "helm $name: preflight accepts the rendered config" "$(head -2 "$T/err")"; fi
done

# ---- specific properties of the renders
D=$T/render-default.yaml; X=$T/render-training-image.yaml; E=$T/render-existing-secret.yaml
q() { python3 - "$@" <<'PY'
import json, sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
def get(kind, name=None):
    for d in docs:
        if d["kind"] == kind and (name is None or d["metadata"]["name"] == name):
            return d
    return None
r = eval(sys.argv[2])
print(json.dumps(r) if isinstance(r, (list, dict)) else r)
PY
}
expect_eq "helm: Service is headless" "$(q "$D" 'get("Service")["spec"]["clusterIP"]')" "None"
expect_eq "helm: Service publishes not-ready pods" "$(q "$D" 'get("Service")["spec"]["publishNotReadyAddresses"]')" "True"
expect_eq "helm: test Job is a helm test hook" "$(q "$D" 'get("Job")["metadata"]["annotations"]["helm.sh/hook"]')" "test"
expect_eq "helm: test Job is Indexed with worldSize pods" \
    "$(q "$D" '[get("Job")["spec"][k] for k in ("completionMode","completions","parallelism")]')" '["Indexed", 2, 2]'
expect_eq "helm: test Job pods use the Service as subdomain and carry its selector label" \
    "$(q "$D" 'get("Job")["spec"]["template"]["spec"]["subdomain"] == get("Service")["metadata"]["name"] and all(get("Job")["spec"]["template"]["metadata"]["labels"][k] == v for k, v in get("Service")["spec"]["selector"].items())')" "True"
expect_eq "helm: podFailurePolicy: spec (3, and 1, 2) fails the Job, node (4) and peer (5) count" \
    "$(q "$D" '[(r["action"], r["onExitCodes"]["values"]) for r in get("Job")["spec"]["podFailurePolicy"]["rules"] if "onExitCodes" in r and r["onExitCodes"]["containerName"] == "preflight"]')" \
    '[["FailJob", [1, 2, 3]], ["Count", [4]], ["Count", [5]]]'
expect_eq "helm: default container securityContext is what Pod Security restricted admits" \
    "$(q "$D" 'get("Job")["spec"]["template"]["spec"]["containers"][0]["securityContext"]')" \
    '{"runAsNonRoot": true, "runAsUser": 65532, "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"}}'
expect_eq "helm: the preflight container writes its reason to the termination log" \
    "$(q "$D" 'get("Job")["spec"]["template"]["spec"]["containers"][0]["terminationMessagePolicy"]')" "FallbackToLogsOnError"
expect_eq "helm: test pods one per node (podAntiAffinity on kubernetes.io/hostname, the test Job's pods)" \
    "$(q "$D" 'get("Job")["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]')" \
    '[{"labelSelector": {"matchLabels": {"batch.kubernetes.io/job-name": "pf-preflight-test"}}, "topologyKey": "kubernetes.io/hostname"}]'
expect_eq "helm: no ClusterRole unless markNode asks" "$(q "$D" 'get("ClusterRole")')" "None"
expect_eq "helm: the token Secret is kept by helm (resource-policy keep)" \
    "$(q "$D" 'get("Secret")["metadata"]["annotations"]["helm.sh/resource-policy"]')" "keep"
check "helm: Chart.yaml states kubeVersion >=1.26 (podFailurePolicy on by default)" grep -qx 'kubeVersion: ">=1.26.0-0"' "$CHART/Chart.yaml"
if "$HELM" template pf "$CHART" --kube-version 1.25.9 >/dev/null 2>"$T/err"; then notok "helm: refuses Kubernetes 1.25" "rendered"
else check "helm: refuses Kubernetes 1.25 (kubeVersion)" grep -q "kubeVersion" "$T/err"; fi
C=$T/render-cluster.yaml
expect_eq "helm cluster: fullnameOverride names every object" \
    "$(q "$C" 'sorted(set(d["metadata"]["name"].split("-")[0] for d in docs))')" '["fabric"]'
expect_eq "helm cluster: priority class, scheduler, runtime class, pod security context, pull secret" \
    "$(q "$C" '[get("Job")["spec"]["template"]["spec"].get(k) for k in ("priorityClassName", "schedulerName", "runtimeClassName", "securityContext", "imagePullSecrets")]')" \
    '["training-high", "volcano", "nvidia", {"fsGroup": 2000}, [{"name": "regcred"}]]'
expect_eq "helm cluster: container securityContext replaced by the value" \
    "$(q "$C" 'get("Job")["spec"]["template"]["spec"]["containers"][0]["securityContext"]["capabilities"]["add"]')" '["IPC_LOCK", "NET_RAW"]'
expect_eq "helm cluster: the NCCL ConfigMap, then envFrom, read by preflight" \
    "$(q "$C" '[get("ConfigMap", "fabric-check-nccl")["data"], get("Job")["spec"]["template"]["spec"]["containers"][0]["envFrom"]]')" \
    '[{"NCCL_IB_HCA": "=mlx5_0,mlx5_1", "NCCL_SOCKET_IFNAME": "net1"}, [{"configMapRef": {"name": "fabric-check-nccl"}}, {"secretRef": {"name": "site-env"}}]]'
expect_eq "helm cluster: extra volume and mount" \
    "$(q "$C" '[[v["name"] for v in get("Job")["spec"]["template"]["spec"]["volumes"]][-1], get("Job")["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][-1]]')" \
    '["topo", {"mountPath": "/etc/nccl", "name": "topo", "readOnly": true}]'
expect_eq "helm cluster: Kueue queue on the Job, labels and Multus on the pods" \
    "$(q "$C" '[get("Job")["metadata"]["labels"]["kueue.x-k8s.io/queue-name"], get("Job")["spec"]["template"]["metadata"]["labels"]["team"], get("Job")["spec"]["template"]["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"]]')" \
    '["team-a", "ml-platform", "ml/sriov-rdma-a"]'
expect_eq "helm cluster: markNode taint: a ClusterRole get/patch nodes bound to the ServiceAccount" \
    "$(q "$C" '[get("ClusterRole")["rules"], get("ClusterRoleBinding")["subjects"]]')" \
    '[[{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}], [{"kind": "ServiceAccount", "name": "fabric-check", "namespace": "ml"}]]'
expect_eq "helm cluster: the user's affinity kept, the one-per-node podAntiAffinity added" \
    "$(q "$C" 'sorted(get("Job")["spec"]["template"]["spec"]["affinity"])')" '["nodeAffinity", "podAntiAffinity"]'
expect_eq "helm: coordinator is index 0 of the test Job" \
    "$(q "$D" '[e["value"] for e in get("Job")["spec"]["template"]["spec"]["containers"][0]["env"] if e["name"] == "PREFLIGHT_COORDINATOR"][0]')" \
    "pf-preflight-test-0.pf-preflight:29400"
tok=$("$HELM" template pf "$CHART" | python3 -c '
import base64, sys, yaml
for d in yaml.safe_load_all(sys.stdin):
    if d and d["kind"] == "Secret": print(base64.b64decode(d["data"]["token"]).decode())')
tok2=$("$HELM" template pf "$CHART" | grep -E '^  token: ')
tok3=$("$HELM" template pf "$CHART" | grep -E '^  token: ')
check "helm: random token is 32 letters and digits" bash -c "[[ '$tok' =~ ^[A-Za-z0-9]{32}$ ]]"
check "helm: random token differs per install" test "$tok2" != "$tok3"
expect_eq "helm: a given token is used" \
    "$(q "$X" '__import__("base64").b64decode(get("Secret")["data"]["token"]).decode()')" "fixed-token-for-the-golden-render"
expect_eq "helm: training image mode copies the binary in, then runs it in the training image" \
    "$(q "$X" '[(c["name"], c["image"], c.get("command"), c["args"]) for c in get("Job")["spec"]["template"]["spec"]["initContainers"] + get("Job")["spec"]["template"]["spec"]["containers"]]')" \
    '[["preflight-install", "registry.example.com/preflight:0.1.0", null, ["install", "/opt/preflight"]], ["preflight", "nvcr.io/nvidia/pytorch:24.05-py3", ["/opt/preflight/preflight"], ["run"]]]'
expect_eq "helm: GPUs and RDMA requested" \
    "$(q "$X" 'get("Job")["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]')" \
    '{"cpu": "4", "memory": "8Gi", "nvidia.com/gpu": 8, "rdma/hca_shared_devices_a": 1}'
expect_eq "helm: Multus annotation" \
    "$(q "$X" 'get("Job")["spec"]["template"]["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"]')" "ml/sriov-rdma-a, ml/sriov-rdma-b"
expect_eq "helm: annotate adds patch on pods to the Role" \
    "$(q "$X" 'get("Role")["rules"]')" '[{"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}, {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "patch"]}]'
expect_eq "helm: the device plugins' resources of the limits in PREFLIGHT_DEVICE_RESOURCES" \
    "$(q "$X" '[e["value"] for e in get("Job")["spec"]["template"]["spec"]["containers"][0]["env"] if e["name"] == "PREFLIGHT_DEVICE_RESOURCES"]')" '["rdma/hca_shared_devices_a=1"]'
expect_eq "helm: no claims read by default (no PREFLIGHT_READ_CLAIMS, no resourceclaims in the Role)" \
    "$(q "$D" '[[e for e in get("Job")["spec"]["template"]["spec"]["containers"][0]["env"] if e["name"] == "PREFLIGHT_READ_CLAIMS"], [r for r in get("Role")["rules"] if "resourceclaims" in r["resources"]]]')" '[[], []]'
"$HELM" template pf "$CHART" -n ml --set rbac.readClaims=true >"$T/render-claims.yaml" 2>"$T/err"
expect_eq "helm: rbac.readClaims: get on pods and resourceclaims, PREFLIGHT_READ_CLAIMS=true" \
    "$(q "$T/render-claims.yaml" '[get("Role")["rules"][1:], [e["value"] for e in get("Job")["spec"]["template"]["spec"]["containers"][0]["env"] if e["name"] == "PREFLIGHT_READ_CLAIMS"]]')" \
    '[[{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}, {"apiGroups": ["resource.k8s.io"], "resources": ["resourceclaims"], "verbs": ["get"]}], ["true"]]'
expect_eq "helm: no list rights by default (config.rendezvous.explainMissing unset)" \
    "$(q "$D" '[r for r in get("Role")["rules"] if "list" in r["verbs"]]')" '[]'
"$HELM" template pf "$CHART" -n ml --set config.rendezvous.explainMissing=true \
    --set config.report.events=false >"$T/render-explain.yaml" 2>"$T/err"
expect_eq "helm: config.rendezvous.explainMissing: list on pods and events, the setting in the config" \
    "$(q "$T/render-explain.yaml" '[get("Role")["rules"][1:], yaml.safe_load(get("ConfigMap")["data"]["config.yaml"])["rendezvous"]["explainMissing"]]')" \
    '[[{"apiGroups": [""], "resources": ["pods", "events"], "verbs": ["list"]}], true]'
expect_eq "helm: config.rendezvous.explainMissing alone mounts the token in the preflight container" \
    "$(q "$T/render-explain.yaml" '[v["name"] for v in get("Job")["spec"]["template"]["spec"]["volumes"] if v["name"] == "preflight-sa"]')" '["preflight-sa"]'
expect_eq "helm: existing Secret: none rendered, pods read it" \
    "$(q "$E" '[get("Secret"), [e["valueFrom"]["secretKeyRef"]["name"] for e in get("Job")["spec"]["template"]["spec"]["containers"][0]["env"] if e["name"] == "PREFLIGHT_TOKEN"]]')" '[null, ["my-rendezvous-token"]]'
expect_eq "helm: no RBAC, own ServiceAccount" \
    "$(q "$E" '[get("Role"), get("ServiceAccount"), get("Job")["spec"]["template"]["spec"]["serviceAccountName"]]')" '[null, null, "trainer"]'
expect_eq "helm: rendezvous port follows service.port" \
    "$(q "$E" 'yaml.safe_load(get("ConfigMap")["data"]["config.yaml"])["rendezvous"]["port"]')" "31000"

# ---- the API token reaches the preflight container alone, and the admission policies. No API
# server runs here: these check the renders; the policies' CEL is evaluated by an npm CEL
# library (tests/k8s/cel-policy.mjs), not by an API server.
# preflight's keys and token folder, read from its source (pkg/report/report.h)
hdr() { python3 -c '
import re, sys
src = open(sys.argv[1]).read()
print(re.search(r"#define " + sys.argv[2] + r"\s+(?:\\\n\s*)?\"([^\"]+)\"", src).group(1))' "$PREFLIGHT_SRC/pkg/report/report.h" "$1"; }
NODE_KEY=$(hdr PF_REPORT_NODE_KEY); SA_DIR=$(hdr PF_REPORT_SA_DIR)
ANN_KEYS="$(hdr PF_REPORT_ANNOTATION) $(hdr PF_REPORT_ANNOTATION_SUMMARY) $(hdr PF_REPORT_ANNOTATION_CLASS)"
expect_eq "helm: preflight's keys read from pkg/report/report.h" "$NODE_KEY|$SA_DIR|$ANN_KEYS" \
    "preflight.dev/unfit|/var/run/secrets/kubernetes.io/serviceaccount|preflight.dev/verdict preflight.dev/summary preflight.dev/failure-class"
for r in "$T"/render-*.yaml; do
    n=$(basename "$r" .yaml); n=${n#render-}
    if [ "$n" = existing-secret ]; then # report.events false, no annotate, no markNode: no API use
        expect_eq "helm $n: no API use: the pod automounts no token and no container mounts one" \
            "$(python3 "$K/tokenmounts.py" "$r" "$SA_DIR")" "Job: automount=False mounts= files= exp=[]"
        continue
    fi
    expect_eq "helm $n: the pod automounts no token; the preflight container alone mounts token, ca.crt and namespace (read-only, expiring) at $SA_DIR" \
        "$(python3 "$K/tokenmounts.py" "$r" "$SA_DIR")" "Job: automount=False mounts=preflight(ro) files=ca.crt,namespace,token exp=[3600]"
done
expect_eq "helm: the ServiceAccount automounts no token" "$(q "$D" 'get("ServiceAccount").get("automountServiceAccountToken")')" "False"
for api in events=true annotate=true markNode=label; do
    "$HELM" template pf "$CHART" -n ml --set config.report.events=false --set "config.report.$api" >"$T/api.yaml" 2>"$T/err"
    expect_eq "helm: $api alone mounts the token into the preflight container" \
        "$(python3 "$K/tokenmounts.py" "$T/api.yaml" "$SA_DIR")" "Job: automount=False mounts=preflight(ro) files=ca.crt,namespace,token exp=[3600]"
done
expect_eq "helm: markNode taint: the policy limits the ServiceAccount's node writes, in the CEL preflight's taint key" \
    "$(q "$C" '[get("ValidatingAdmissionPolicy")["spec"]["matchConditions"][0]["expression"], get("ValidatingAdmissionPolicyBinding")["spec"]["policyName"] == get("ValidatingAdmissionPolicy")["metadata"]["name"], get("ValidatingAdmissionPolicy")["spec"]["failurePolicy"], get("ValidatingAdmissionPolicy")["spec"]["variables"][0]["expression"], "authentication.kubernetes.io/node-name" in yaml.safe_dump(get("ValidatingAdmissionPolicy")["spec"])]')" \
    '["request.userInfo.username == \"system:serviceaccount:ml:fabric-check\"", true, "Fail", "'"'$NODE_KEY'"'", true]'
expect_eq "helm: annotate: the policy limits the ServiceAccount's pod writes, in the CEL preflight's annotation keys" \
    "$(q "$X" '[[p["spec"]["matchConstraints"]["resourceRules"][0]["resources"] for p in docs if p["kind"] == "ValidatingAdmissionPolicy"], get("ValidatingAdmissionPolicy")["spec"]["variables"][0]["expression"]]')" \
    "[[[\"pods\"]], \"[$(for k in $ANN_KEYS; do printf "'%s', " "$k"; done | sed 's/, $//')]\"]"
apcount() { "$HELM" template pf "$CHART" -n ml --set config.report.markNode=label "$@" 2>&1 | grep -c '^kind: ValidatingAdmissionPolicy$'; }
expect_eq "helm: rbac.admissionPolicy auto: rendered when the cluster serves admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy, not otherwise; false: never; true: always" \
    "$(apcount) $(apcount --api-versions admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy) $(apcount --set rbac.admissionPolicy=false --api-versions admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy) $(apcount --set rbac.admissionPolicy=true)" \
    "0 1 0 1"
if cel_tools; then
    "$HELM" template pf "$CHART" -n ml --set config.report.markNode=taint --set config.report.annotate=true \
        --set rbac.admissionPolicy=true >"$T/policies.yaml" 2>"$T/err"
    # shellcheck disable=SC2086
    $CEL_POLICY "$T/policies.yaml" "$NODE_KEY" $ANN_KEYS
else
    skip "helm: admission policies' CEL evaluated" "$TOOLS_WHY"
fi

# ---- values.schema.json refuses bad values
for bad in "$K"/bad-values/*.yaml; do
    n=$(basename "$bad" .yaml)
    if "$HELM" template pf "$CHART" -f "$bad" >/dev/null 2>"$T/err"; then notok "helm schema refuses $n" "rendered anyway"
    elif grep -q "schema" "$T/err"; then ok "helm schema refuses $n"
    else notok "helm schema refuses $n" "$(head -2 "$T/err")"; fi
done

# ---- the named templates from a user's chart (this chart as a file:// dependency)
P=$T/parent
cp -r "$K/parent-chart" "$P"
sed -i "s|file://../../../helm/preflight|file://$CHART|" "$P/Chart.yaml"
if "$HELM" dependency build "$P" >"$T/err" 2>&1 && "$HELM" template t "$P" -n ml 2>>"$T/err" >"$T/render-parent.yaml"; then
    [ "${PF_UPDATE_GOLDEN:-}" = 1 ] && cp "$T/render-parent.yaml" "$GOLD/helm-parent-chart.yaml"
    if diff -u "$GOLD/helm-parent-chart.yaml" "$T/render-parent.yaml" >"$T/diff"; then ok "helm parent chart: render matches golden"
    else notok "helm parent chart: render matches golden" "$(head -20 "$T/diff" | tr '\n' '|')"; fi
    if $VALIDATE "$T/render-parent.yaml" >"$T/val" 2>&1; then ok "helm parent chart: objects valid against the API schemas"
    else notok "helm parent chart: API schemas" "$(grep '^error' "$T/val" | head -3 | tr '\n' '|')"; fi
    P2=$T/render-parent.yaml
    expect_eq "helm parent chart: preflight initContainer with the pod count and GPUs, then the watch" \
        "$(q "$P2" '[(c["name"], [e["value"] for e in c["env"] if e["name"] == "PREFLIGHT_WORLD_SIZE"], c["resources"]["limits"]) for c in get("StatefulSet")["spec"]["template"]["spec"]["initContainers"]]')" \
        '[["preflight", ["4"], {"nvidia.com/gpu": 8}], ["preflight-watch", [], {"cpu": "200m", "memory": "64Mi"}]]'
    expect_eq "helm parent chart: the watch is a native sidecar on the shared folder" \
        "$(q "$P2" '[(c["restartPolicy"], c["args"], [m["mountPath"] for m in c["volumeMounts"] if m["name"] == "preflight-verdict"]) for c in get("StatefulSet")["spec"]["template"]["spec"]["initContainers"] if c["name"] == "preflight-watch"]')" \
        '[["Always", ["watch", "/run/preflight"], ["/run/preflight"]]]'
    expect_eq "helm parent chart: the trainer logs NCCL INIT,NET at INFO into the shared folder, one file a process" \
        "$(q "$P2" '[get("StatefulSet")["spec"]["template"]["spec"]["containers"][0]["env"], get("StatefulSet")["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]]')" \
        '[[{"name": "NCCL_DEBUG", "value": "INFO"}, {"name": "NCCL_DEBUG_SUBSYS", "value": "INIT,NET"}, {"name": "NCCL_DEBUG_FILE", "value": "/run/preflight/nccl.%h.%p"}], [{"name": "preflight-verdict", "mountPath": "/run/preflight", "readOnly": false}]]'
    expect_eq "helm parent chart: the pod automounts no token; preflight and its watch alone mount it, not the trainer" \
        "$(python3 "$K/tokenmounts.py" "$P2" "$SA_DIR")" "StatefulSet: automount=False mounts=preflight(ro),preflight-watch(ro) files=ca.crt,namespace,token exp=[3600]"
    expect_eq "helm parent chart: pods carry the Service's selector label" \
        "$(q "$P2" 'all(get("StatefulSet")["spec"]["template"]["metadata"]["labels"].get(k) == v for k, v in get("Service")["spec"]["selector"].items())')" "True"
else
    notok "helm parent chart: render" "$(head -3 "$T/err")"
fi

# ---- NOTES.txt, rendered through a copy of the chart (helm template does not print notes):
# `helm test --logs` reads Pod hooks only, so the notes point at the test Job's pods instead
N=$T/notes-chart
cp -r "$CHART" "$N"
cp "$N/templates/NOTES.txt" "$N/notes.txt"
cat >"$N/templates/zz-notes.yaml" <<'TPL'
apiVersion: v1
kind: ConfigMap
metadata: {name: notes}
data:
  notes: {{ tpl (.Files.Get "notes.txt") . | quote }}
TPL
if "$HELM" template pf "$N" -n ml --show-only templates/zz-notes.yaml >"$T/notes.yaml" 2>"$T/err"; then
    python3 -c 'import sys, yaml; print(yaml.safe_load(open(sys.argv[1]))["data"]["notes"])' "$T/notes.yaml" >"$T/notes.txt"
    check "helm NOTES: helm test, then the test Job's pods' logs" \
        grep -q 'logs -l job-name=pf-preflight-test --prefix --tail=-1' "$T/notes.txt"
    check "helm NOTES: the command given is helm test without --logs (it cannot read a Job's pods)" \
        bash -c "grep -qE '^ +helm test pf -n ml --timeout 900s\$' '$T/notes.txt' && ! grep -qE '^ +helm test .*--logs' '$T/notes.txt'"
    check "helm NOTES: names the headless Service and the token Secret" \
        bash -c "grep -q 'Headless Service: pf-preflight ' '$T/notes.txt' && grep -q 'Secret pf-preflight-token' '$T/notes.txt'"
else
    notok "helm NOTES: render" "$(head -3 "$T/err")"
fi
check "helm chart has a README" test -s "$CHART/README.md"
