#!/usr/bin/env bash
# A resolver that never answers the coordinator's name must not hold the join past its deadline
# (docs/security.md, "A slow resolver never holds the gate"): the joiner resolves rank 0's name
# under the dial's deadline on a thread nobody waits for (pkg/base/resolve.c, pf_resolve_by),
# so the join ends at the join deadline with its own finding (missing-ranks, naming the
# resolver), and the run ends before --timeout, leaving the later stages their reserve.
# Before, getaddrinfo waited out resolv.conf's 30 s and the run's deadline fired inside the
# rendezvous (finding timeout). A real UDP server in the test's own network namespace takes
# every DNS query and answers none; glibc is told to wait 30 s for it.
source "$(dirname "$0")/lib.sh"
need_root "join dns" || exit 0
silent_dns "pfjd$$" "join dns"
EMPTY=$T/empty
mkdir -p "$EMPTY"
s=$(date +%s%N)
ip netns exec "$NS" timeout 90 env -i PATH="$PATH" NO_COLOR=1 ASAN_OPTIONS="${ASAN_OPTIONS:-}" \
    UBSAN_OPTIONS="${UBSAN_OPTIONS:-}" "$PREFLIGHT" run --root "$EMPTY" --timeout 20 \
    --rank 1 --world-size 2 --coordinator rank0.example --port "$(free_port)" \
    --format yaml --verdict "$T/v.yaml" >"$T/out" 2>"$T/err"
rc=$?
ms=$((($(date +%s%N) - s) / 1000000))
silent_dns_asked "join dns: the coordinator's name went to the silent resolver"
# the join deadline is --timeout less the later stages' reserve (about 13 s of 20 here); the
# run's own deadline firing inside the rendezvous (the fault) ends it at 20 s
if [ "$ms" -lt 18000 ]; then ok "join dns: the join ended at its deadline, before --timeout 20 (${ms} ms)"; else
    notok "join dns: the join ended at its deadline, before --timeout 20" "${ms} ms"; fi
expect_eq "join dns: the rendezvous ends with its own finding, not the run's deadline" \
    "$(yq "$T/v.yaml" "','.join(codes('rendezvous'))")" "missing-ranks"
expect_eq "join dns: the finding names the silent resolver" \
    "$(yq "$T/v.yaml" "'resolving rank0.example took longer than the deadline' in check('rendezvous')['message']")" "True"
expect_eq "join dns: exit code 5 (a rank that never met rank 0)" "$rc" 5
