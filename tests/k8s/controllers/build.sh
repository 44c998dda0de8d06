#!/usr/bin/env bash
# Builds the JobSet and Kueue controllers (their own main packages, sigs.k8s.io/jobset and
# sigs.k8s.io/kueue/cmd/kueue, at the releases go.mod names; one go.mod, so that the modules
# both use compile once) and copies the CRDs and webhook configurations each module carries
# at that release beside them. Prints the folder: jobset, kueue, jobset-crds/, kueue-crds/,
# jobset-webhooks.yaml, kueue-webhooks.yaml, versions.
# Cached under $PREFLIGHT_CACHE (default ~/.cache/preflight)/kcontrollers/KEY, KEY = sha256 of
# go.mod, go.sum and this script, and the Go version. The bound and the exit codes are those of
# tests/k8s/cluster/build.sh: PREFLIGHT_K8S_BUILD_S (default 2400 s) per build; past it the
# build is stopped, a timed-out marker keeps later calls from starting it again, exit 3 (the
# tests skip); exit 3 also without Go >= 1.26; exit 4: the build failed (the log's path on
# stderr).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
command -v go >/dev/null || { echo "go missing (Go >= 1.26 is needed: https://go.dev/dl; Debian 12's golang-go is 1.19)" >&2; exit 3; }
gov=$(go env GOVERSION)
case "$gov" in
    go1.2[6-9]* | go1.[3-9][0-9]* | go[2-9]*) ;;
    *) echo "$gov is too old (Go >= 1.26 is needed)" >&2; exit 3 ;;
esac
key=$(cat "$here/go.mod" "$here/go.sum" "$here/build.sh" | sha256sum | cut -c1-16)-$gov
dir=${PREFLIGHT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/preflight}/kcontrollers/$key
if [ ! -e "$dir/done" ]; then
    mkdir -p "$dir"
    exec 9>"$dir/.lock"
    flock 9
    if [ ! -e "$dir/done" ]; then
        start=$(date +%s)
        limit=${PREFLIGHT_K8S_BUILD_S:-2400}
        if [ -e "$dir/timed-out" ]; then
            echo "JobSet/Kueue controllers' build ran past its bound before ($dir/build.log); remove $dir/timed-out to try again" >&2
            exit 3
        fi
        rc=0
        (cd "$here" && GOFLAGS=-mod=readonly timeout -k 10 "$limit" go build -trimpath -ldflags="-s -w" \
            -o "$dir/bin.tmp/" sigs.k8s.io/jobset sigs.k8s.io/kueue/cmd/kueue) >"$dir/build.log" 2>&1 || rc=$?
        if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
            : >"$dir/timed-out"
            echo "JobSet/Kueue controllers' build ran past ${limit} s (PREFLIGHT_K8S_BUILD_S): $dir/build.log" >&2
            exit 3
        fi
        if [ $rc -ne 0 ]; then
            echo "JobSet/Kueue controllers' build failed: $dir/build.log" >&2
            exit 4
        fi
        # the CRDs and webhook configurations of the same module versions, as their
        # repositories keep them (the release YAML is made from these by kustomize)
        : >"$dir/versions"
        for m in sigs.k8s.io/jobset sigs.k8s.io/kueue; do
            n=${m##*/}
            src=$(cd "$here" && GOFLAGS=-mod=readonly go list -m -f '{{.Dir}}' "$m")
            echo "$m $(cd "$here" && GOFLAGS=-mod=readonly go list -m -f '{{.Version}}' "$m")" >>"$dir/versions"
            rm -rf "$dir/$n-crds"
            mkdir -p "$dir/$n-crds"
            cp "$src"/config/components/crd/bases/*.yaml "$dir/$n-crds/"
            cp "$src/config/components/webhook/manifests.yaml" "$dir/$n-webhooks.yaml"
        done
        chmod -R u+w "$dir"
        mv "$dir/bin.tmp/jobset" "$dir/bin.tmp/kueue" "$dir/"
        rmdir "$dir/bin.tmp"
        echo "JobSet and Kueue controllers built in $(( $(date +%s) - start )) s" >>"$dir/build.log"
        : >"$dir/done"
    fi
fi
echo "$dir"
