#!/usr/bin/env bash
# manifests/: every file validated against the Kubernetes 1.30 API schemas (types, required
# and unknown fields), the validator itself shown to refuse bad objects, the properties the
# rendezvous depends on, and the ConfigMap's config accepted by preflight.
. "$(dirname "$0")/lib.sh"
. "$PREFLIGHT_SRC/tests/k8s/tools.sh"
if ! k8s_tools; then skip "manifests" "$TOOLS_WHY"; exit 0; fi
M=$PREFLIGHT_SRC/manifests

for f in "$M"/*.yaml; do
    n=$(basename "$f")
    if $VALIDATE "$f" >"$T/val" 2>&1; then ok "manifests/$n: $(grep -c '^ok' "$T/val") objects valid against the API schemas"
    else notok "manifests/$n: API schemas" "$(grep '^error' "$T/val" | head -3 | tr '\n' '|')"; fi
done
for f in "$PREFLIGHT_SRC"/tests/k8s/bad/*.yaml; do
    n=$(basename "$f")
    if $VALIDATE "$f" >"$T/val" 2>&1; then notok "validator refuses tests/k8s/bad/$n" "accepted"
    else ok "validator refuses tests/k8s/bad/$n ($(grep -c '^error' "$T/val") problems)"; fi
done
expect_eq "validator names the misspelt field" \
    "$($VALIDATE "$PREFLIGHT_SRC/tests/k8s/bad/typo.yaml" | grep -c 'unknown field "publishNotReadyAdresses"')" "1"

q() { python3 - "$@" <<'PY'
import json, sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
def get(kind):
    return next(d for d in docs if d["kind"] == kind)
def pod(kind):
    return get(kind)["spec"]["template"]["spec"]
def c(kind, name):
    p = pod(kind)
    return next(x for x in p.get("initContainers", []) + p["containers"] if x["name"] == name)
def env(kind, name="preflight"):
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in c(kind, name)["env"]}
r = eval(sys.argv[2])
print(json.dumps(r, sort_keys=True) if isinstance(r, (list, dict)) else r)
PY
}
expect_eq "service: headless and publishes not-ready pods" \
    "$(q "$M/service.yaml" '[get("Service")["spec"]["clusterIP"], get("Service")["spec"]["publishNotReadyAddresses"]]')" '["None", true]'
for w in statefulset statefulset-training-image indexed-job indexed-job-training-image; do
    f=$M/$w.yaml
    kind=$(q "$f" 'docs[0]["kind"]')
    expect_eq "$w: pods join the headless Service" \
        "$(q "$f" '(get("'"$kind"'")["spec"].get("serviceName") or pod("'"$kind"'").get("subdomain")) == "trainer" and pod("'"$kind"'") and get("'"$kind"'")["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"] == "trainer"')" "True"
    expect_eq "$w: preflight env (downward API, world size, config, token from the Secret)" \
        "$(q "$f" 'sorted(env("'"$kind"'"))')" '["NODE_NAME", "POD_NAME", "POD_NAMESPACE", "POD_UID", "PREFLIGHT_CONFIG", "PREFLIGHT_TIMEOUT", "PREFLIGHT_TOKEN", "PREFLIGHT_WORLD_SIZE"]'
    expect_eq "$w: token from secretKeyRef" "$(q "$f" 'env("'"$kind"'")["PREFLIGHT_TOKEN"]')" '{"secretKeyRef": {"key": "token", "name": "preflight-token"}}'
    expect_eq "$w: IPC_LOCK, /dev/shm in memory, podinfo, verdict shared with the trainer" \
        "$(q "$f" '[c("'"$kind"'", "preflight")["securityContext"]["capabilities"]["add"], [v["emptyDir"]["medium"] for v in pod("'"$kind"'")["volumes"] if v["name"] == "dshm"], sorted(i["path"] for v in pod("'"$kind"'")["volumes"] if v["name"] == "podinfo" for i in v["downwardAPI"]["items"]), [m["mountPath"] for m in c("'"$kind"'", "trainer")["volumeMounts"] if m["name"] == "preflight-verdict"]]')" \
        '[["IPC_LOCK"], ["Memory"], ["annotations", "labels"], ["/run/preflight"]]'
    # added capabilities reach root processes only: IPC_LOCK takes effect as UID 0
    expect_eq "$w: preflight runs as UID 0 with every capability dropped but IPC_LOCK" \
        "$(q "$f" 'c("'"$kind"'", "preflight")["securityContext"]')" \
        '{"capabilities": {"add": ["IPC_LOCK"], "drop": ["ALL"]}, "runAsNonRoot": false, "runAsUser": 0}'
done
for w in statefulset statefulset-training-image; do
    expect_eq "$w: podManagementPolicy Parallel" "$(q "$M/$w.yaml" 'get("StatefulSet")["spec"]["podManagementPolicy"]')" "Parallel"
done
for w in indexed-job indexed-job-training-image; do
    expect_eq "$w: subdomain is the headless Service, all pods at once" \
        "$(q "$M/$w.yaml" '[pod("Job")["subdomain"], get("Job")["spec"]["parallelism"] == get("Job")["spec"]["completions"]]')" '["trainer", true]'
done
for w in statefulset statefulset-training-image indexed-job indexed-job-training-image; do
    f=$M/$w.yaml
    kind=$(q "$f" 'docs[0]["kind"]')
    expect_eq "$w: ServiceAccount of rbac.yaml" "$(q "$f" 'pod("'"$kind"'")["serviceAccountName"]')" "preflight"
    expect_eq "$w: preflight requests the trainer's GPUs, shares its /dev/shm" \
        "$(q "$f" '[c("'"$kind"'", "preflight")["resources"]["limits"] == c("'"$kind"'", "trainer")["resources"]["limits"], [m["mountPath"] for m in c("'"$kind"'", "trainer")["volumeMounts"] if m["name"] == "dshm"]]')" \
        '[true, ["/dev/shm"]]'
    # commented examples for the usual RDMA / SR-IOV resources and the Multus annotation
    check "$w: RDMA and SR-IOV resources and the Multus annotation shown (commented)" \
        bash -c "grep -q '# *rdma/hca_shared_devices_a' '$f' && grep -q '# *intel.com/sriov_rdma' '$f' && grep -q '# *openshift.io/mlnxnics' '$f' && grep -q '# *k8s.v1.cni.cncf.io/networks:' '$f'"
done
expect_eq "rbac: the Role creates events, bound to the preflight ServiceAccount" \
    "$(q "$M/rbac.yaml" '[get("Role")["rules"], get("RoleBinding")["roleRef"]["name"], get("RoleBinding")["subjects"]]')" \
    '[[{"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}], "preflight", [{"kind": "ServiceAccount", "name": "preflight"}]]'
expect_eq "secret: preflight-token with key token" "$(q "$M/secret.yaml" '[get("Secret")["metadata"]["name"], sorted(get("Secret")["stringData"])]')" '["preflight-token", ["token"]]'
for w in statefulset-training-image indexed-job-training-image; do
    kind=$(q "$M/$w.yaml" 'docs[0]["kind"]')
    expect_eq "$w: the trainer mounts the installed binary too (kubectl exec ... preflight check)" \
        "$(q "$M/$w.yaml" '[m["mountPath"] for m in c("'"$kind"'", "trainer")["volumeMounts"] if m["name"] == "preflight-bin"]')" '["/opt/preflight"]'
done
expect_eq "indexed-job: Indexed, restartPolicy Never, FailJob on preflight's exit 1" \
    "$(q "$M/indexed-job.yaml" '[get("Job")["spec"]["completionMode"], pod("Job")["restartPolicy"], get("Job")["spec"]["podFailurePolicy"]["rules"][0]["onExitCodes"]["containerName"], 1 in get("Job")["spec"]["podFailurePolicy"]["rules"][0]["onExitCodes"]["values"]]')" \
    '["Indexed", "Never", "preflight", true]'
expect_eq "training-image mode: install into an emptyDir, then run from it in the trainer's image" \
    "$(q "$M/indexed-job-training-image.yaml" '[c("Job", "preflight-install")["args"], c("Job", "preflight")["command"], c("Job", "preflight")["image"] == c("Job", "trainer")["image"]]')" \
    '[["install", "/opt/preflight"], ["/opt/preflight/preflight", "run"], true]'

# the ConfigMap's config is one preflight accepts
python3 -c 'import sys, yaml; open(sys.argv[2], "w").write(yaml.safe_load(open(sys.argv[1]))["data"]["config.yaml"])' \
    "$M/configmap.yaml" "$T/config.yaml"
mkdir -p "$T/root"
"$PREFLIGHT" check --config "$T/config.yaml" --root "$T/root" --format yaml --verdict - >/dev/null 2>"$T/err"
rc=$?
if [ $rc -ne 2 ]; then ok "configmap: preflight accepts config.yaml"; else notok "configmap: preflight accepts config.yaml" "$(head -2 "$T/err")"; fi
