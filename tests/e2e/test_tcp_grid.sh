#!/usr/bin/env bash
# collective.tcp's grid all-reduce, which the stage runs from 64 ranks: 67 `preflight run`
# ranks on 127.0.0.1 (a free port), a grid of 7 rows of 9 with the 4 ranks of the partial
# last row folded into the row above (docs/tcp-allreduce.md). Every rank exits 0, names the
# algorithm in its evidence, and its result is exact (no wrong-result, no peer-lost); rank
# 0's TCP entry says correct. Timing decides nothing here: any slow-link finding on a shared
# host is a warning, which does not change the exit code.
source "$(dirname "$0")/lib.sh"

N=67
EMPTY=$T/empty # a root with nothing in it: the local checks have nothing to look at
mkdir -p "$EMPTY"
port=$(free_port)
printf 'tcp: {messageBytes: 262144, iterations: 1}\n' >"$T/grid.yaml"
for r in $(seq 0 $((N - 1))); do
    (
        cd "$T" && timeout 300 env -i PATH="$PATH" HOME=/nonexistent NO_COLOR=1 \
            ASAN_OPTIONS="${ASAN_OPTIONS:-}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-}" \
            "$PREFLIGHT" run --root "$EMPTY" --config "$T/grid.yaml" --rank "$r" \
            --world-size "$N" --coordinator 127.0.0.1 --port "$port" --timeout 240 \
            --format yaml --verdict "$T/grid-$r.yaml" >"$T/grid-$r.out" 2>&1
        echo $? >"$T/grid-$r.rc"
    ) &
done
wait

rcs=$(for r in $(seq 0 $((N - 1))); do cat "$T/grid-$r.rc"; done | sort | uniq -c | awk '{print $2 "x" $1}')
expect_eq "every rank exits 0" "$rcs" "0x$N"
if grep -lqE 'AddressSanitizer|LeakSanitizer|runtime error:' "$T"/grid-*.out; then
    notok "no sanitizer report" "$(grep -h -m1 -E 'Sanitizer|runtime error' "$T"/grid-*.out | head -1)"
else
    ok "no sanitizer report"
fi
expect_eq "rank 0 says the algorithm as it starts" \
    "$(grep -c 'tcp all-reduce: 67 ranks, 0.25 MiB float32 sum (grid 7x9 + 4 folded)' "$T/grid-0.out")" 1
algos=$(python3 - "$T" "$N" <<'PY'
import sys, yaml
t, n = sys.argv[1], int(sys.argv[2])
seen = set()
for r in range(n):
    with open(f"{t}/grid-{r}.yaml") as f:
        d = yaml.safe_load(f)
    c = [c for c in d["checks"] if c["id"] == "collective.tcp"][0]
    codes = [x["code"] for x in c.get("findings") or []]
    bad = [x for x in codes if x in ("wrong-result", "peer-lost")]
    seen.add((c["evidence"].get("algorithm"), tuple(bad)))
print(sorted(seen))
PY
)
expect_eq "every rank: algorithm grid 7x9 + 4 folded, no wrong-result, no peer-lost" \
    "$algos" "[('grid 7x9 + 4 folded', ())]"
expect_eq "rank 0: the TCP entry is for 67 ranks, correct" \
    "$(yq "$T/grid-0.yaml" '[(c["ranks"], c["correct"]) for c in d["collectives"] if c["backend"] == "tcp"]')" \
    '[[67, true]]'
