#!/usr/bin/env bash
# What check gang costs rank 0 (pkg/fleet/gang.c) at 1,024 to 16,384 ranks, in one process:
# tests/bench/gang_scale.c built against the release objects (make bin/preflight first).
# The whole rank 0 with gang inside is measured by bench_load.sh.
set -u
cd "$(dirname "$0")/../.." || exit 1
[ -f build/rel/pkg/fleet/gang.o ] || { echo "bench_gang: build/rel not built (make bin/preflight)"; exit 1; }
out=$(mktemp /tmp/preflight-bench-gang.XXXXXX)
trap 'rm -f "$out"' EXIT
cc -std=c11 -O2 -o "$out" tests/bench/gang_scale.c build/rel/pkg/fleet/*.o build/rel/pkg/wire/*.o \
    build/rel/pkg/base/*.o build/rel/pkg/verdict/*.o build/rel/pkg/explain/*.o \
    build/rel/pkg/collective/*.o -Wl,-Bstatic -lyaml -ljansson -lsodium -Wl,-Bdynamic -ldl -lpthread -lm ||
    { echo "bench_gang: cannot build the driver"; exit 1; }
"$out" ${BENCH_GANG_N:-1024 4096 16384}
