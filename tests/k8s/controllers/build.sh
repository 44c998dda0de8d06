#!/usr/bin/env bash
# Builds the JobSet and Kueue controllers, each its project's own main package
# (sigs.k8s.io/jobset and sigs.k8s.io/kueue/cmd/kueue) at the release its go.mod names:
# jobset/go.mod and kueue/go.mod, two modules because JobSet v0.11.1 is written against
# controller-runtime v0.22 and Kueue v0.17.1 against v0.23, whose webhook builder differs
# (the modules both use are pinned to the same versions, so that Go's build cache compiles them
# once). Copies the CRDs and webhook configurations each module carries at that release beside
# them. Prints the folder: jobset, kueue, jobset-crds/, kueue-crds/, jobset-webhooks.yaml,
# kueue-webhooks.yaml, versions.
# Cached under $PREFLIGHT_CACHE (default ~/.cache/preflight)/kcontrollers/KEY, KEY = sha256 of
# the go.mod and go.sum files and this script, and the Go version. The bound and the exit codes
# are those of tests/k8s/cluster/build.sh: PREFLIGHT_K8S_BUILD_S (default 2400 s) for the two
# builds together; past it the build is stopped, a timed-out marker keeps later calls from
# starting it again, exit 3 (the tests skip); exit 3 also without Go >= 1.26; exit 4: the
# build failed (the log's path on stderr).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
command -v go >/dev/null || { echo "go missing (Go >= 1.26 is needed: https://go.dev/dl; Debian 12's golang-go is 1.19)" >&2; exit 3; }
gov=$(go env GOVERSION)
case "$gov" in
    go1.2[6-9]* | go1.[3-9][0-9]* | go[2-9]*) ;;
    *) echo "$gov is too old (Go >= 1.26 is needed)" >&2; exit 3 ;;
esac
key=$(cat "$here"/jobset/go.mod "$here"/jobset/go.sum "$here"/kueue/go.mod "$here"/kueue/go.sum "$here/build.sh" | sha256sum | cut -c1-16)-$gov
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
        mkdir -p "$dir/bin.tmp"
        GOFLAGS=-mod=readonly timeout -k 10 "$limit" bash -c '
            set -e
            cd "$1/jobset" && go build -trimpath -ldflags="-s -w" -o "$2/bin.tmp/jobset" sigs.k8s.io/jobset
            cd "$1/kueue" && go build -trimpath -ldflags="-s -w" -o "$2/bin.tmp/kueue" sigs.k8s.io/kueue/cmd/kueue
        ' sh "$here" "$dir" >"$dir/build.log" 2>&1 || rc=$?
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
            src=$(cd "$here/$n" && GOFLAGS=-mod=readonly go list -m -f '{{.Dir}}' "$m")
            echo "$m $(cd "$here/$n" && GOFLAGS=-mod=readonly go list -m -f '{{.Version}}' "$m")" >>"$dir/versions"
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
