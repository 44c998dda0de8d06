#!/usr/bin/env bash
# rdma.verbs without an RDMA NIC: on the node-roce fixture (two HCAs in sysfs, reached through
# --root) libibverbs either does not load (PREFLIGHT_IBVERBS_LIB pointing nowhere) or, the
# real one of this machine, lists no device. The first is verbs-unavailable, naming the HCAs;
# the second skips, because libibverbs reads the real /sys and /dev, not the root prefix. A pod
# without HCAs skips. Opening a device, allocating a PD and registering memory need a
# real NIC and are not exercised here.
source "$(dirname "$0")/lib.sh"

"$FIX/materialize.sh" "$FIX/node-roce" "$T/roce" >/dev/null 2>&1 || { notok "verbs: materialize node-roce"; exit 0; }
mkdir -p "$T/empty"
pv() { # NAME ROOT [VAR=VALUE...]
    local name=$1 root=$2
    shift 2
    env -i PATH="$PATH" HOME=/nonexistent NO_COLOR=1 PREFLIGHT_COUNTERS_WINDOW=0 \
        ASAN_OPTIONS="${ASAN_OPTIONS:-}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-}" "$@" \
        "$PREFLIGHT" check --root "$root" --format yaml --verdict - >"$T/$name.yaml" 2>"$T/$name.err"
}
sv() { yq "$T/$1.yaml" "check('rdma.verbs')['status'] + ' [' + ','.join(codes('rdma.verbs')) + ']'"; }
mv_() { yq "$T/$1.yaml" "' | '.join([check('rdma.verbs')['message']] + [f['message'] for f in check('rdma.verbs').get('findings') or []])"; }

pv nolib "$T/roce" PREFLIGHT_IBVERBS_LIB=/nonexistent/libibverbs.so.1
expect_eq "verbs: libibverbs missing with HCAs present: verbs-unavailable" "$(sv nolib)" "fail [verbs-unavailable]"
case "$(mv_ nolib)" in
*"libibverbs does not load"*mlx5_0*) ok "verbs: libibverbs missing: the message names the library and the HCAs" ;;
*) notok "verbs: libibverbs missing: message" "$(mv_ nolib)" ;;
esac
pv nohca "$T/empty" PREFLIGHT_IBVERBS_LIB=/nonexistent/libibverbs.so.1
expect_eq "verbs: no HCAs: skip" "$(sv nohca)" "skip []"
if ldconfig -p 2>/dev/null | grep -q 'libibverbs\.so\.1' && [ ! -d /sys/class/infiniband ]; then
    # the HCAs come from the root prefix, which libibverbs does not read: not judged
    pv nodev "$T/roce"
    expect_eq "verbs: libibverbs that lists no device under a root prefix: skip" "$(sv nodev)" "skip []"
    case "$(mv_ nodev)" in
    *"lists no device"*"root prefix $T/roce"*) ok "verbs: lists no device: says so and names the root prefix" ;;
    *) notok "verbs: lists no device: message" "$(mv_ nodev)" ;;
    esac
else
    skip "verbs: libibverbs that lists no device" "needs libibverbs.so.1 and no real HCA"
fi
