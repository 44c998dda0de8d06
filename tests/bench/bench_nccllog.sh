#!/usr/bin/env bash
# `preflight log` on a 1 GiB NCCL log made from the real logs of tests/fixtures/nccl-logs/real/
# (generated in /tmp at bench time, removed after): lines per second and peak RSS. The reader is
# one pass with bounded memory, so the peak RSS must not grow with the file.
set -u
cd "$(dirname "$0")/../.."
BIN=${PREFLIGHT_REL:-bin/preflight}
SIZE_MB=${NCCLLOG_BENCH_MB:-1024}
dir=$(mktemp -d /tmp/preflight-bench-nccllog.XXXXXX)
trap 'rm -rf "$dir"' EXIT
cat tests/fixtures/nccl-logs/real/*.log >"$dir/seed.log"
# double until the size is reached (the same hosts again and again, as a long job's log)
want=$((SIZE_MB * 1024 * 1024))
cp "$dir/seed.log" "$dir/big.log"
while [ $(($(stat -c %s "$dir/big.log") * 2)) -le "$want" ]; do
    cat "$dir/big.log" "$dir/big.log" >"$dir/next.log" && mv "$dir/next.log" "$dir/big.log"
done
head -c $((want - $(stat -c %s "$dir/big.log"))) "$dir/big.log" >>"$dir/big.log.tail"
cat "$dir/big.log.tail" >>"$dir/big.log" && rm -f "$dir/big.log.tail"
lines=$(wc -l <"$dir/big.log")
bytes=$(stat -c %s "$dir/big.log")
out=$( { /usr/bin/time -f '%e %M' "$BIN" log --format yaml --verdict "$dir/v.yaml" "$dir/big.log" >/dev/null; } 2>&1 | tail -1)
secs=${out% *}
rss=${out#* }
printf '%-28s %12s %10s %14s %12s\n' "input" "lines" "seconds" "lines/s" "peak RSS MB"
awk -v l="$lines" -v b="$bytes" -v s="$secs" -v r="$rss" 'BEGIN {
    printf "%-28s %12d %10.2f %14.0f %12.1f\n", sprintf("%.0f MiB of real logs", b / 1048576), l, s,
        (s > 0 ? l / s : 0), r / 1024 }'
