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
own_netns "pfjd$$"
if [ -z "$HAVE_NS" ]; then skip "join dns" "cannot make a network namespace"; exit 0; fi
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
ip netns exec "$NS" timeout 90 env -i PATH="$PATH" NO_COLOR=1 ASAN_OPTIONS="${ASAN_OPTIONS:-}" \
    UBSAN_OPTIONS="${UBSAN_OPTIONS:-}" "$PREFLIGHT" run --root "$EMPTY" --timeout 20 \
    --rank 1 --world-size 2 --coordinator rank0.example --port "$(free_port)" \
    --format yaml --verdict "$T/v.yaml" >"$T/out" 2>"$T/err"
rc=$?
ms=$((($(date +%s%N) - s) / 1000000))
case "$(cat "$T/dns.state")" in
    queries*) ok "join dns: the coordinator's name went to the silent resolver ($(cat "$T/dns.state"))" ;;
    *) notok "join dns: the coordinator's name went to the silent resolver" "$(cat "$T/dns.state")" ;;
esac
# the join deadline is --timeout less the later stages' reserve (about 13 s of 20 here); the
# run's own deadline firing inside the rendezvous (the fault) ends it at 20 s
if [ "$ms" -lt 18000 ]; then ok "join dns: the join ended at its deadline, before --timeout 20 (${ms} ms)"; else
    notok "join dns: the join ended at its deadline, before --timeout 20" "${ms} ms"; fi
expect_eq "join dns: the rendezvous ends with its own finding, not the run's deadline" \
    "$(yq "$T/v.yaml" "','.join(codes('rendezvous'))")" "missing-ranks"
expect_eq "join dns: the finding names the silent resolver" \
    "$(yq "$T/v.yaml" "'resolving rank0.example took longer than the deadline' in check('rendezvous')['message']")" "True"
expect_eq "join dns: exit code 5 (a rank that never met rank 0)" "$rc" 5
