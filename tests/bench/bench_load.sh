#!/usr/bin/env bash
# Rank 0 at 4,096, 8,192 and 16,384 ranks: one real `preflight run --rank 0` and every other
# rank simulated by a few processes of tests/bench/rdv_load.py, which speak the rendezvous
# protocol (HELLO, JOIN with its HMAC, ROSTER, the mesh's DHELLOs to rank 0, the steps, the
# SUMMARY) as real ranks do. The data plane is not simulated: one simulated rank fails the
# mesh step, so rank 0 skips the all-reduce and the probes as it does whenever a rank's data
# plane fails, and goes on to the final gather and the summary (docs/performance.md says
# which phases this drives and argues the rest from their measured per-step costs).
# For each N: rank 0's time per stage (its -v line "stages: ..."), its wall time, CPU
# seconds and peak RSS (GNU time), RSS per rank, the ROSTER payload a rank received (mean and
# largest, bytes), and how many simulated ranks got the SUMMARY.
# Numbers never fail the run.
#   BENCH_LOAD_N        ranks per run (default "4096 8192 16384")
#   BENCH_LOAD_WORKERS  simulating processes (default 4)
#   BENCH_LOAD_AS_MIB   rank 0's address-space limit (default 4096): a run past it fails
#                       instead of taking the machine's memory
set -u
cd "$(dirname "$0")/../.." || exit 1
bin=${PREFLIGHT_REL:-$PWD/bin/preflight}
[ -x "$bin" ] || { echo "bench_load: $bin not built (make bin/preflight)"; exit 1; }
[ -x /usr/bin/time ] || { echo "bench_load: GNU time (/usr/bin/time) not installed"; exit 0; }
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
ns=${BENCH_LOAD_N:-4096 8192 16384}
need=$(( $(echo "$ns" | tr ' ' '\n' | sort -n | tail -1) + 256 ))
if [ "$(ulimit -n)" -lt "$need" ]; then
    echo "bench_load: open files $(ulimit -n) < $need: the largest N is left out"
fi
out=$(mktemp /tmp/preflight-bench-load.XXXXXX)
trap 'rm -f "$out"' EXIT
for n in $ns; do
    if [ "$(ulimit -n)" -lt $((n + 256)) ]; then continue; fi
    python3 tests/bench/rdv_load.py drive --binary "$bin" --world "$n" \
        --workers "${BENCH_LOAD_WORKERS:-4}" --as-mib "${BENCH_LOAD_AS_MIB:-4096}" >>"$out" ||
        echo "# N=$n: not every simulated rank got its SUMMARY"
done
python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
print()
print("machine: loopback; rank 0 real, the other ranks simulated (tests/bench/rdv_load.py)")
print()
print("| N | rank 0 wall (s) | meet | agree (+ roster) | collective.tcp (mesh only) | summary | "
      "report | CPU rank 0 (s) | peak RSS rank 0 (MiB) | KiB per rank | roster bytes a rank "
      "(mean / max) | ranks with SUMMARY | verdict |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
f = lambda x, nd=2: "n/a" if x is None else f"{x:.{nd}f}"
for r in rows:
    st = r.get("stages", {})
    rss = r.get("rss0_mib")
    per = rss * 1024 / r["n"] if rss else None
    print(f"| {r['n']} | {f(r.get('wall0'))} | {f(st.get('meet'))} | {f(st.get('agree'))} | "
          f"{f(st.get('collective.tcp'))} | {f(st.get('summary'))} | {f(st.get('report'))} | "
          f"{f(r.get('cpu0_s'))} | {f(rss, 1)} | {f(per, 1)} | "
          f"{f(r['rosterBytes'] / r['rosters'] if r.get('rosters') else None, 0)} / "
          f"{r.get('rosterMax', 'n/a')} | {r.get('done')} of {r['n'] - 1} | "
          f"{r.get('verdict')} (rc {r.get('rc0')}){' killed' if r.get('killed') else ''} |")
PY
