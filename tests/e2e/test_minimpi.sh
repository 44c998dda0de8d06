#!/usr/bin/env bash
# tests/gpu/minimpi, the MPI that nccl-tests is built against for tests/gpu/device-check.sh:
# every call nccl-tests makes, on 1, 2 and 5 real processes, results checked against MPI's
# definitions; and a rank that exits early makes the others fail with a message, not hang.
set -u
cd "$(dirname "$0")/../.." || exit 2
W=$(mktemp -d /tmp/pf-minimpi.XXXXXX)
trap 'rm -rf "$W"' EXIT
FAILED=0
ok() { echo "ok - $1"; }
notok() { echo "not ok - $1${2:+: $2}"; FAILED=1; }
cc -O1 -Wall -Wextra -Werror -fsanitize=address,undefined -o "$W/t" \
    tests/gpu/minimpi/test_minimpi.c tests/gpu/minimpi/minimpi.c || { notok "build"; exit 1; }

for n in 1 2 5; do
    pids=()
    for ((r = 0; r < n; r++)); do
        MINIMPI_RANK=$r MINIMPI_SIZE=$n MINIMPI_SOCK=$W/s$n timeout 60 "$W/t" >"$W/out$n.$r" 2>&1 &
        pids+=($!)
    done
    rc=0
    for p in "${pids[@]}"; do wait "$p" || rc=$?; done
    if [ "$rc" = 0 ] && grep -q "minimpi: $n ranks agree" "$W/out$n.0"; then
        ok "$n ranks: every call gives MPI's result"
    else
        notok "$n ranks" "rc $rc: $(cat "$W"/out$n.* | head -5)"
    fi
done

# rank 1 joins and exits before the first collective: rank 0 says a peer closed, exits 70
MINIMPI_RANK=0 MINIMPI_SIZE=2 MINIMPI_SOCK=$W/e timeout 30 "$W/t" >"$W/e0" 2>&1 &
p0=$!
python3 - "$W/e" <<'PY'
import socket, struct, sys, time
for _ in range(600):
    try:
        s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); break
    except OSError:
        time.sleep(0.05)
s.sendall(struct.pack("i", 1)); s.close()
PY
wait "$p0"
rc=$?
if [ "$rc" = 70 ] && grep -q "a peer closed its socket" "$W/e0"; then
    ok "a peer that leaves early: rank 0 says so and exits 70"
else
    notok "a peer that leaves early" "rc $rc: $(cat "$W/e0")"
fi
MINIMPI_RANK=1 MINIMPI_SIZE=2 MINIMPI_SOCK=$W/none MINIMPI_WAIT_S=1 timeout 30 "$W/t" >"$W/f1" 2>&1
rc=$?
if [ "$rc" = 70 ] && grep -q "rank 0 never listened" "$W/f1"; then
    ok "a rank with no rank 0 says so and exits 70"
else
    notok "a rank with no rank 0" "rc $rc: $(cat "$W/f1")"
fi
MINIMPI_RANK=3 MINIMPI_SIZE=2 MINIMPI_SOCK=$W/x "$W/t" >"$W/g" 2>&1
rc=$?
[ "$rc" = 70 ] && grep -q "MINIMPI_RANK < MINIMPI_SIZE" "$W/g" && ok "a bad rank is refused by name" ||
    notok "a bad rank" "rc $rc: $(cat "$W/g")"
exit "$FAILED"
