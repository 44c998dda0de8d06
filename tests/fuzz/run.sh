#!/usr/bin/env bash
# Runs every fuzz target (built by `make fuzz-build` into build/fuzz/).
#   tests/fuzz/run.sh SECONDS   each target for SECONDS on a copy of its seed corpus
#   tests/fuzz/run.sh 0         replay the seed corpora only (regression)
# Prints "ok - <target>" or "not ok - <target>" per target.
set -u
cd "$(dirname "$0")/../.."
secs=${1:-30}
rc=0
for src in tests/fuzz/fuzz_*.c; do
    name=$(basename "$src" .c)
    bin=build/fuzz/$name
    seeds=tests/fuzz/corpus/$name
    [ -x "$bin" ] || { echo "not ok - $name: not built"; rc=1; continue; }
    mkdir -p "$seeds"
    if [ "$secs" = 0 ]; then
        if "$bin" -runs=0 "$seeds" >build/fuzz/$name.log 2>&1; then
            echo "ok - $name (seeds replayed: $(ls "$seeds" | wc -l))"
        else
            echo "not ok - $name"; tail -30 build/fuzz/$name.log; rc=1
        fi
    else
        work=build/fuzz/corpus-$name
        mkdir -p "$work"
        cp -n "$seeds"/* "$work"/ 2>/dev/null || true
        if "$bin" -max_total_time="$secs" -max_len=65536 -timeout=10 -rss_limit_mb=2048 \
            -artifact_prefix=build/fuzz/$name- "$work" >build/fuzz/$name.log 2>&1; then
            execs=$(grep -oE 'stat::number_of_executed_units: *[0-9]+' build/fuzz/$name.log | grep -oE '[0-9]+$')
            echo "ok - $name (${secs}s, $(grep -oE '#[0-9]+' build/fuzz/$name.log | tail -1 | tr -d '#') runs)"
        else
            echo "not ok - $name (crash: see build/fuzz/$name.log and build/fuzz/$name-*)"
            tail -40 build/fuzz/$name.log; rc=1
        fi
    fi
done
exit $rc
