#!/usr/bin/env bash
# Every verdict reads back as written: `preflight check` on every node fixture under
# tests/fixtures (GPUs with PCI bus ids such as 0000:07:00.0, HCAs, SR-IOV VFs, podinfo),
# each verdict read by PyYAML's YAML 1.1 reader, by libyaml (CSafeLoader) and checked against
# the YAML 1.2 core schema (tests/e2e/yamlcheck.py). A control document with an unquoted PCI
# address shows the checker does catch a base-60 misread.
source "$(dirname "$0")/lib.sh"

cat >"$T/control.yaml" <<'Y'
apiVersion: preflight/v1
kind: Verdict
environment: {gpus: [{busId: 0000:07:00.0}], driverVersion: 565.57.01, hca: 010, x: 1e3}
Y
out=$(python3 "$PREFLIGHT_SRC/tests/e2e/yamlcheck.py" "$T/control.yaml")
expect_eq "control: an unquoted PCI address, an octal and a 1.2-only float are caught" \
    "$(grep -c 'reads as' <<<"$out")" 3

n=0
for dir in "$FIX"/*/; do
    name=$(basename "$dir")
    case "$name" in golden | nccl-logs) continue ;; esac
    r=$T/root-$name
    "$FIX/materialize.sh" "$dir" "$r" 2>/dev/null || { notok "$name: materialize"; continue; }
    # a pod's view: the fixture's podinfo (if any) and SR-IOV variables of sriov fixtures
    extra=()
    [ -d "$r/etc/podinfo" ] && extra+=(PREFLIGHT_PODINFO="$r/etc/podinfo")
    [ -f "$dir/env" ] && while read -r l; do extra+=("$l"); done <"$dir/env"
    env -i PATH="$PATH" HOME=/nonexistent NO_COLOR=1 \
        ASAN_OPTIONS="${ASAN_OPTIONS:-}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-}" \
        NCCL_SOCKET_IFNAME=eth0 NCCL_IB_HCA==mlx5_0:1 NCCL_DEBUG=INFO "${extra[@]}" \
        "$PREFLIGHT" check --root "$r" --format yaml --verdict "$T/$name.yaml" >/dev/null 2>"$T/$name.err"
    if [ ! -s "$T/$name.yaml" ]; then
        notok "$name: a verdict is written" "$(tail -c 300 "$T/$name.err")"
        continue
    fi
    p=$(python3 "$PREFLIGHT_SRC/tests/e2e/yamlcheck.py" "$T/$name.yaml")
    expect_eq "$name: every scalar of the verdict reads back as written" "$p" ""
    n=$((n + 1))
done
check "verdicts of at least 10 fixture nodes were checked ($n)" test "$n" -ge 10

# the GPU bus ids of the 8-GPU fixture are strings after a YAML 1.1 load
expect_eq "node-8gpu-ndr: environment.gpus[].busId are the strings written" \
    "$(yq "$T/node-8gpu-ndr.yaml" "' '.join(sorted(g['busId'] for g in d['environment']['gpus']))")" \
    "$(ls "$FIX/node-8gpu-ndr/proc/driver/nvidia/gpus" | sort | tr '\n' ' ' | sed 's/ $//')"

# `preflight env` writes a verdict too
env -i PATH="$PATH" HOME=/nonexistent NCCL_IB_GID_INDEX=03 NCCL_P2P_LEVEL=0 NCCL_SOCKET_IFNAME=yes \
    ASAN_OPTIONS="${ASAN_OPTIONS:-}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-}" \
    "$PREFLIGHT" env --format yaml --verdict "$T/env.yaml" >/dev/null 2>&1
expect_eq "env: every scalar of the verdict reads back as written" \
    "$(python3 "$PREFLIGHT_SRC/tests/e2e/yamlcheck.py" "$T/env.yaml")" ""
