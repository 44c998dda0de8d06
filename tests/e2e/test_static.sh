#!/usr/bin/env bash
# The local-check end-to-end scripts (test_rdma.sh, test_nccl_env.sh) once more against the
# fully static bin/preflight-static, each line prefixed "static: "; and the checks that need
# dlopen (rdma.verbs, nccl.library) saying skip with the reason there. (test_multus.sh,
# test_netif.sh and test_cli.sh loop over both binaries themselves.)
source "$(dirname "$0")/lib.sh"

if [ ! -x "${PREFLIGHT_STATIC:-}" ]; then
    skip "static: local checks" "bin/preflight-static not built (make static)"
    exit 0
fi

for t in test_rdma test_nccl_env; do
    out=$T/$t.out
    PREFLIGHT=$PREFLIGHT_STATIC bash "$PREFLIGHT_SRC/tests/e2e/$t.sh" >"$out" 2>&1
    rc=$?
    grep -E '^(ok|not ok|skip) ' "$out" | sed 's/^\(ok\|not ok\|skip\) - /\1 - static: /'
    if [ $rc -ne 0 ] && ! grep -qE '^not ok ' "$out"; then
        notok "static: $t" "exited $rc: $(tail -c 300 "$out")"
    fi
done

# what a static binary cannot do is a skip with the reason, never a failure
r=$T/ndr
"$FIX/materialize.sh" "$FIX/node-8gpu-ndr" "$r" 2>/dev/null
env -i PATH="$PATH" HOME=/nonexistent "$PREFLIGHT_STATIC" check --root "$r" --format yaml \
    --verdict - >"$T/ndr.yaml" 2>"$T/ndr.err"
for id in rdma.verbs nccl.library; do
    expect_eq "static: $id is skip, saying why" \
        "$(yq "$T/ndr.yaml" "[check('$id')['status'], 'static' in check('$id')['message']]")" \
        '["skip", true]'
done
check "static: ldd finds no shared libraries" \
    bash -c "! ldd '$PREFLIGHT_STATIC' 2>&1 | grep -q '=>'"
