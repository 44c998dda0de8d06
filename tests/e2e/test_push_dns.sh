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
own_netns "pfdns$$"
if [ -z "$HAVE_NS" ]; then skip "push dns" "cannot make a network namespace"; exit 0; fi
mkdir -p "/etc/netns/$NS"
printf 'nameserver 127.0.0.1\noptions timeout:30 attempts:1\n' >"/etc/netns/$NS/resolv.conf"
cleanup() {
    [ -n "${DNS_PID:-}" ] && kill "$DNS_PID" 2>/dev/null
    rm -rf "/etc/netns/$NS"
    del_netns
    rm -rf "$T"
}
trap cleanup EXIT
cat >"$T/silent_dns.py" <<'PY'
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 53))
open(sys.argv[1], "w").write("ready\n")
n = 0
while True:  # take every query, answer none
    s.recvfrom(4096)
    n += 1
    open(sys.argv[1], "w").write("queries %d\n" % n)
PY
ip netns exec "$NS" python3 "$T/silent_dns.py" "$T/dns.state" &
DNS_PID=$!
for _ in $(seq 50); do [ -s "$T/dns.state" ] && break; sleep 0.1; done
EMPTY=$T/empty
mkdir -p "$EMPTY"
s=$(date +%s%N)
ip netns exec "$NS" timeout 60 env -i PATH="$PATH" NO_COLOR=1 ASAN_OPTIONS="${ASAN_OPTIONS:-}" \
    UBSAN_OPTIONS="${UBSAN_OPTIONS:-}" "$PREFLIGHT" check --root "$EMPTY" --timeout 8 \
    --pushgateway http://pushgateway.monitoring.example:9091 --format yaml --verdict "$T/v.yaml" \
    >"$T/out" 2>"$T/err"
rc=$?
ms=$((($(date +%s%N) - s) / 1000000))
case "$(cat "$T/dns.state")" in
    queries*) ok "push dns: the name went to the silent resolver ($(cat "$T/dns.state"))" ;;
    *) notok "push dns: the name went to the silent resolver" "$(cat "$T/dns.state")" ;;
esac
# the deadline is 8 s; 3 s more for the sanitizer's exit on a busy machine
if [ "$ms" -lt 11000 ]; then ok "push dns: the run ended within its deadline (${ms} ms, --timeout 8)"; else
    notok "push dns: the run ended within its deadline" "${ms} ms"; fi
expect_eq "push dns: exit code 0 (a push is never a gate)" "$rc" 0
expect_eq "push dns: report.metrics warns push-timeout, naming the resolution" \
    "$(yq "$T/v.yaml" "check('report.metrics')['status'] + ' ' + ','.join(codes('report.metrics')) + ' ' + str('resolving pushgateway.monitoring.example' in check('report.metrics')['findings'][0]['message'])")" \
    "warn push-timeout True"
