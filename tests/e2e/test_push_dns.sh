#!/usr/bin/env bash
# A resolver that never answers the Pushgateway's name must not hold the gate
# (docs/security.md, "A push never fails or delays the gate"): preflight resolves the name
# under the push's budget on a thread nobody waits for, and hands libcurl the address, so
# libcurl's own resolver thread (which curl_easy_cleanup joins) never runs. A real UDP server
# in the test's own network namespace takes every DNS query and answers none; glibc is told
# to wait 30 s for it (resolv.conf `options timeout:30 attempts:1`). `check --timeout 8` must
# end within its deadline with report.metrics a warning (push-timeout), never a failed run.
source "$(dirname "$0")/lib.sh"
need_root "push dns" || exit 0
silent_dns "pfdns$$" "push dns"
EMPTY=$T/empty
mkdir -p "$EMPTY"
s=$(date +%s%N)
ip netns exec "$NS" timeout 60 env -i PATH="$PATH" NO_COLOR=1 ASAN_OPTIONS="${ASAN_OPTIONS:-}" \
    UBSAN_OPTIONS="${UBSAN_OPTIONS:-}" "$PREFLIGHT" check --root "$EMPTY" --timeout 8 \
    --pushgateway http://pushgateway.monitoring.example:9091 --format yaml --verdict "$T/v.yaml" \
    >"$T/out" 2>"$T/err"
rc=$?
ms=$((($(date +%s%N) - s) / 1000000))
silent_dns_asked "push dns: the name went to the silent resolver"
# the deadline is 8 s; 3 s more for the sanitizer's exit on a busy machine
if [ "$ms" -lt 11000 ]; then ok "push dns: the run ended within its deadline (${ms} ms, --timeout 8)"; else
    notok "push dns: the run ended within its deadline" "${ms} ms"; fi
expect_eq "push dns: exit code 0 (a push is never a gate)" "$rc" 0
expect_eq "push dns: report.metrics warns push-timeout, naming the resolution" \
    "$(yq "$T/v.yaml" "check('report.metrics')['status'] + ' ' + ','.join(codes('report.metrics')) + ' ' + str('resolving pushgateway.monitoring.example' in check('report.metrics')['findings'][0]['message'])")" \
    "warn push-timeout True"
