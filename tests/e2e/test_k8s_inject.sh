#!/usr/bin/env bash
# `preflight inject` against a real kube-apiserver (tests/k8s/cluster, with the launchers' CRDs
# of tests/k8s/crds): every launcher manifest of manifests/ stripped of preflight and the
# launchers' published examples, injected, are accepted by server-side apply (dry run, strict
# field validation, the CRDs' CEL rules); and the pipeline of a Job that exists:
# `kubectl get job -o yaml | preflight inject | kubectl replace --force -f -` re-creates it
# gated, and a second pass changes nothing. Opt-in with the other control-plane tests
# (PREFLIGHT_K8S=1).
. "$(dirname "$0")/lib.sh"
# shellcheck source=tests/k8s/cluster.sh
. "$PREFLIGHT_SRC/tests/k8s/cluster.sh"
trap 'k8s_down; rm -rf "$T"' EXIT
if ! k8s_up; then skip "k8s inject" "$K8S_WHY"; exit 0; fi
k() { "$KUBECTL" "$@"; }
for f in "$PREFLIGHT_SRC"/tests/k8s/crds/*.yaml; do
    k apply --server-side -f "$f" >/dev/null 2>&1 || notok "CRD $(basename "$f") installed"
done
k wait --for=condition=Established crd --all --timeout=60s >/dev/null 2>&1 || notok "CRDs established" "not all Established in 60 s"
k create namespace ml >/dev/null

dry() { # NAME FILE [INPUT]: accepted, or refused exactly as its input is (an example may use a
    # field of a newer launcher than the CRD installed here)
    local out in
    if [ -n "${3:-}" ] && ! in=$(k apply --server-side --dry-run=server --field-manager=preflight-test -n ml -f "$3" 2>&1) &&
        out=$(k apply --server-side --dry-run=server --field-manager=preflight-test -n ml -f "$2" 2>&1 | sed 's|out-|in-|g'); then :; fi
    if [ -n "${in:-}" ] && [ "${in}" = "${out:-}" ] && ! grep -q serverside-applied <<<"$in"; then
        ok "$1 injected: refused by the API server exactly as its input is ($(head -c 160 <<<"$in"))"
        return
    fi
    if out=$(k apply --server-side --dry-run=server --field-manager=preflight-test -n ml -f "$2" 2>&1); then
        ok "$1 injected: accepted by the API server ($(grep -c 'serverside-applied' <<<"$out") objects)"
    else
        notok "$1 injected: accepted by the API server" "$(tr '\n' ' ' <<<"$out" | head -c 600)"
    fi
}
for n in indexed-job jobset leaderworkerset mpijob pytorchjob statefulset trainjob volcano-job; do
    python3 "$PREFLIGHT_SRC/tests/e2e/inject_check.py" strip "$PREFLIGHT_SRC/manifests/$n.yaml" "$T/$n.yaml"
    "$PREFLIGHT" inject --watch "$T/$n.yaml" >"$T/$n.out.yaml" 2>/dev/null || notok "manifests/$n.yaml: injected"
    dry "manifests/$n.yaml stripped (--watch)" "$T/$n.out.yaml"
done
for f in "$FIX"/inject/upstream/*.yaml; do
    n=$(basename "$f")
    case $n in # served versions of the CRDs here: tests/fixtures/inject/SOURCES.md
    jobset-max-restarts.yaml) sed 's|^apiVersion: jobset.x-k8s.io/v1alpha1$|apiVersion: jobset.x-k8s.io/v1alpha2|' "$f" >"$T/in-$n" ;;
    trainer-torch-distributed.yaml) sed 's|^kind: ClusterTrainingRuntime$|kind: TrainingRuntime|' "$f" >"$T/in-$n" ;;
    *) cp "$f" "$T/in-$n" ;;
    esac
    "$PREFLIGHT" inject "$T/in-$n" >"$T/out-$n" 2>/dev/null || notok "upstream $n: injected"
    dry "upstream $n" "$T/out-$n" "$T/in-$n"
done

# the pipeline on a Job that exists
cat >"$T/job.yaml" <<'YAML'
apiVersion: batch/v1
kind: Job
metadata:
  name: trainer
spec:
  completionMode: Indexed
  completions: 2
  parallelism: 2
  template:
    spec:
      subdomain: trainer
      restartPolicy: Never
      containers:
        - name: trainer
          image: registry.example.com/trainer:1   # never pulled: no node runs it
YAML
k apply -n ml -f "$T/job.yaml" >/dev/null
uid0=$(k get job trainer -n ml -o jsonpath='{.metadata.uid}')
if out=$(k get job trainer -n ml -o yaml | "$PREFLIGHT" inject 2>"$T/pipe.err" | k replace --force -f - 2>&1); then
    ok "kubectl get job -o yaml | preflight inject | kubectl replace --force -f -: $(tr '\n' ' ' <<<"$out")"
else
    notok "kubectl get | inject | replace --force" "$(tr '\n' ' ' <<<"$out") $(tail -2 "$T/pipe.err")"
fi
expect_eq "the Job re-created, gated: initContainer preflight, podFailurePolicy, a new uid" \
    "$(k get job trainer -n ml -o jsonpath='{.spec.template.spec.initContainers[0].name} {.spec.podFailurePolicy.rules[0].action}'):$([ "$(k get job trainer -n ml -o jsonpath='{.metadata.uid}')" != "$uid0" ] && echo new)" \
    "preflight FailJob:new"
k get job trainer -n ml -o yaml >"$T/gated.yaml"
"$PREFLIGHT" inject "$T/gated.yaml" >"$T/gated2.yaml" 2>/dev/null
check "the gated Job read back: a second inject changes no byte" cmp -s "$T/gated.yaml" "$T/gated2.yaml"
if out=$(k create job plain -n ml --image=registry.example.com/trainer:1 --dry-run=client -o yaml |
    sed 's|^spec:$|spec:\n  completionMode: Indexed\n  completions: 2|' |
    "$PREFLIGHT" inject 2>/dev/null | k apply -n ml -f - 2>&1); then
    ok "kubectl create --dry-run=client -o yaml | preflight inject | kubectl apply -f -: $(tr '\n' ' ' <<<"$out")"
else
    notok "create | inject | apply" "$(tr '\n' ' ' <<<"$out")"
fi
