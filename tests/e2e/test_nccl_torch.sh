#!/usr/bin/env bash
# nccl.library finds the NCCL a pip-installed PyTorch loads. PyTorch's CUDA wheels carry
# DT_RPATH $ORIGIN/../../nvidia/nccl/lib on torch/lib (pytorch/pytorch
# .ci/manywheel/build_cuda.sh), which the loader takes before ld.so.cache: where torch and the
# nvidia-nccl wheel share a site-packages, that NCCL is the one training uses, even when the
# image also has a system libnccl.so.2 (seen on a GPU machine: torch's venv NCCL 2.28.9 beside
# a system 2.28.3). Built here: a virtual environment under /opt, in a mount namespace of its
# own (a tmpfs on /opt: nothing outside the test is touched), holding the NCCL test double as
# the wheel's libnccl.so.2 and an empty torch/lib/libtorch_cuda.so. The double is only loaded
# and asked its version (ncclGetVersion), which is all nccl.library does.
source "$(dirname "$0")/lib.sh"
need_root "nccl torch" || exit 0
command -v unshare >/dev/null || { skip "nccl torch: unshare is not installed"; exit 0; }
CC=${CC:-cc}
if ! $CC -std=c11 -O1 -Wall -Wextra -Werror -shared -fPIC -o "$T/libnccl-double.so" \
    "$PREFLIGHT_SRC/tests/e2e/nccl-double/nccl.c" 2>"$T/cc.err"; then
    notok "nccl torch: the NCCL double builds" "$(head -c 400 "$T/cc.err")"
    exit 0
fi

# venv WITH_TORCH VERDICT: preflight check with /opt holding only that virtual environment
venv() {
    unshare -m sh -c '
        mount -t tmpfs none /opt || exit 90
        sp=/opt/trainer/.venv/lib/python3.12/site-packages
        mkdir -p "$sp/nvidia/nccl/lib" "$sp/torch/lib"
        cp "$1" "$sp/nvidia/nccl/lib/libnccl.so.2"
        [ "$2" = yes ] && : >"$sp/torch/lib/libtorch_cuda.so"
        env -u PREFLIGHT_NCCL_LIB DOUBLE_NCCL_VERSION=22899 "$3" check --format yaml \
            --verdict "$4" >"$4.out" 2>&1
        exit 0' sh "$T/libnccl-double.so" "$1" "$PREFLIGHT" "$2"
}

if ! venv yes "$T/with.yaml" || [ ! -s "$T/with.yaml" ]; then
    skip "nccl torch: no private mount namespace with a tmpfs here"
    exit 0
fi
msg=$(yq "$T/with.yaml" 'check("nccl.library")["message"]')
ev=$(yq "$T/with.yaml" 'check("nccl.library").get("evidence", {}).get("loadedBy", "")')
expect_eq "nccl torch: the wheel's NCCL beside torch is the one loaded, whatever ld.so.cache holds" \
    "$msg" "NCCL 2.28.99 from /opt/trainer/.venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2 (PyTorch's own: its libraries load it first)"
expect_eq "nccl torch: the evidence names the torch library that loads it" "$ev" \
    "/opt/trainer/.venv/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so"

# the same venv without torch: no claim that PyTorch loads it (the soname, or the venv found
# later in the list, whichever this machine has)
venv no "$T/without.yaml"
msg=$(yq "$T/without.yaml" 'check("nccl.library")["message"]')
ev=$(yq "$T/without.yaml" 'check("nccl.library").get("evidence", {}).get("loadedBy", "")')
case "$msg" in
*"PyTorch"*) notok "nccl torch: without torch no PyTorch claim" "$msg" ;;
*) ok "nccl torch: without torch no PyTorch claim ($msg)" ;;
esac
expect_eq "nccl torch: without torch no loadedBy" "$ev" ""
