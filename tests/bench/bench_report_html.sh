#!/usr/bin/env bash
# `preflight report --html` of rank 0's verdict of a 4,096-rank job (tests/e2e/report_verdict.py:
# every rank with 24 checks, 6 probed links a rank, one slow link and one slow node, the links
# as rank 0 writes them above 48: the 48 slowestLinks and every link in linkRates): the time
# to write the page (wall and CPU), its size, the peak RSS, and in a real headless Chromium (tests/e2e/cdp_page.py) the time
# from navigation to the load event and to the end of the page's script (heatmap drawn, ranks
# table built). The aim is under 3 s to the load event; the number is printed, never judged.
set -u
cd "$(dirname "$0")/../.."
BIN=${PREFLIGHT_REL:-bin/preflight}
RANKS=${REPORT_BENCH_RANKS:-4096}
dir=$(mktemp -d /tmp/preflight-bench-report.XXXXXX)
trap 'rm -rf "$dir"' EXIT
python3 tests/e2e/report_verdict.py "$RANKS" "$dir/v.yaml" --slow-link 100,2000 --slow-node 3000 --rates
out=$( { /usr/bin/time -f '%e %U %S %M' "$BIN" report "$dir/v.yaml" --html "$dir/v.html"; } 2>&1 | tail -1)
printf '%-30s %8s %8s %8s %8s %12s %8s %9s\n' "verdict" "YAML MB" "write s" "CPU s" "page MB" "peak RSS MB" "load s" "script s"
if ! command -v chromium >/dev/null; then
    load=- script=-
else
    timeout 300 python3 tests/e2e/cdp_page.py "$dir/v.html" "$dir/r.json" \
        --eval "load=performance.getEntriesByType('navigation')[0].loadEventEnd" >/dev/null 2>&1
    read -r load script < <(python3 -c 'import json,sys; r=json.load(open(sys.argv[1]))
print("%.2f %.2f" % (r["eval"]["load"] / 1000, r["renderMs"] / 1000))' "$dir/r.json" 2>/dev/null || echo "- -")
fi
read -r wall usr sys rss <<<"$out"
awk -v n="$RANKS" -v y="$(stat -c %s "$dir/v.yaml")" -v s="$wall" -v u="$usr" -v k="$sys" -v r="$rss" \
    -v p="$(stat -c %s "$dir/v.html" 2>/dev/null || echo 0)" -v l="$load" -v j="$script" 'BEGIN {
    printf "%-30s %8.1f %8.2f %8.2f %8.2f %12.1f %8s %9s\n", sprintf("%d ranks, %d links", n, n * 6),
        y / 1048576, s, u + k, p / 1048576, r / 1024, l, j }'
