#!/usr/bin/env bash
# `make bench`: every benchmark, each printing its table. Numbers never decide a test.
set -u
cd "$(dirname "$0")/../.."
export PREFLIGHT_REL="$PWD/bin/preflight"
rc=0
for b in tests/bench/bench_*.sh; do
    [ -f "$b" ] || continue
    echo
    echo "### $(basename "$b" .sh)"
    bash "$b" || rc=1
done
exit $rc
