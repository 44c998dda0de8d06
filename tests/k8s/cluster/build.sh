#!/usr/bin/env bash
# Builds kcluster (the test control plane and node agent, main.go) once per source and
# prints its path. Cached under $PREFLIGHT_CACHE (default ~/.cache/preflight)/kcluster/KEY,
# KEY = sha256 of go.mod, go.sum and the .go files, and the Go version; Go's own module and
# build caches make a rebuild after a source change incremental. Exit 3: no Go, or a build that
# ran past its bound (the tests skip); 4: the build
# failed (the log's path on stderr).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
command -v go >/dev/null || { echo "go missing (Go >= 1.26 is needed: https://go.dev/dl; Debian 12's golang-go is 1.19)" >&2; exit 3; }
gov=$(go env GOVERSION)
case "$gov" in
    go1.2[6-9]* | go1.[3-9][0-9]* | go[2-9]*) ;;
    *) echo "$gov is too old (Go >= 1.26 is needed for k8s.io/kubernetes v1.37)" >&2; exit 3 ;;
esac
# the release the API server reports at /version (helm checks a chart's kubeVersion against it),
# as Kubernetes' own build stamps it (hack/lib/version.sh): from the k8s.io/kubernetes
# requirement of go.mod
kver=$(sed -n 's/^[[:space:]]*k8s.io\/kubernetes v\([0-9][0-9.]*\).*/\1/p' "$here/go.mod" | head -1)
vpkg=k8s.io/component-base/version
ldx="-X $vpkg.gitVersion=v$kver -X $vpkg.gitMajor=${kver%%.*} -X $vpkg.gitMinor=$(echo "$kver" | cut -d. -f2) -X $vpkg.gitTreeState=clean"
key=$(echo "$ldx" | cat - "$here/go.mod" "$here/go.sum" "$here"/*.go | sha256sum | cut -c1-16)-$(go env GOVERSION)
dir=${PREFLIGHT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/preflight}/kcluster/$key
bin=$dir/kcluster
if [ ! -x "$bin" ]; then
    mkdir -p "$dir"
    exec 9>"$dir/.lock"
    flock 9
    if [ ! -x "$bin" ]; then
        start=$(date +%s)
        # a bound on the build (PREFLIGHT_K8S_BUILD_S, default 2400 s): past it the build is
        # stopped (timeout signals its whole process group), the tests skip and say so, and
        # later calls do not start the same build again until the marker is removed
        limit=${PREFLIGHT_K8S_BUILD_S:-2400}
        if [ -e "$dir/timed-out" ]; then
            echo "kcluster build ran past its bound before ($dir/build.log); remove $dir/timed-out to try again" >&2
            exit 3
        fi
        rc=0
        (cd "$here" && GOFLAGS=-mod=readonly timeout -k 10 "$limit" go build -trimpath -ldflags="-s -w $ldx" -o "$bin.tmp" .) >"$dir/build.log" 2>&1 || rc=$?
        if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
            : >"$dir/timed-out"
            echo "kcluster build ran past ${limit} s (PREFLIGHT_K8S_BUILD_S): $dir/build.log" >&2
            exit 3
        fi
        if [ $rc -ne 0 ]; then
            echo "kcluster build failed: $dir/build.log" >&2
            exit 4
        fi
        mv "$bin.tmp" "$bin"
        echo "kcluster built in $(( $(date +%s) - start )) s" >>"$dir/build.log"
    fi
fi
echo "$bin"
