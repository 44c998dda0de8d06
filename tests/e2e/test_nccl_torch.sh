#!/usr/bin/env bash
# nccl.library finds the NCCL a pip-installed PyTorch loads. PyTorch's CUDA wheels carry
# DT_RPATH $ORIGIN/../../nvidia/nccl/lib on torch/lib (pytorch/pytorch
# .ci/manywheel/build_cuda.sh), which the loader takes before ld.so.cache: where torch and the
# nvidia-nccl wheel share a site-packages, that NCCL is the one training uses, even when the
# image also has a system libnccl.so.2 (seen on a GPU machine: torch's venv NCCL 2.28.9 beside
# a system 2.28.3). Built here: a virtual environment under /opt, in a mount namespace of its
# own (a tmpfs on /opt: nothing outside the test is touched), holding the NCCL test double as
# the wheel's libnccl.so.2 and a shared object as torch/lib/libtorch_cuda.so. The double is
# only loaded and asked its version (ncclGetVersion), which is all nccl.library does.
#
# The trust rule (pkg/dl/trust.c, docs/security.md "Libraries preflight picks itself"): a
# tree owned by another uid, or writable by group or others anywhere up to /, is skipped with
# its reason in the evidence, and the system's NCCL (here: the soname through
# LD_LIBRARY_PATH) is the one loaded; an empty file named libtorch_cuda.so proves nothing.
source "$(dirname "$0")/lib.sh"
need_root "nccl torch" || exit 0
command -v unshare >/dev/null || { skip "nccl torch: unshare is not installed"; exit 0; }
CC=${CC:-cc}
if ! $CC -std=c11 -O1 -Wall -Wextra -Werror -shared -fPIC -o "$T/libnccl-double.so" \
    "$PREFLIGHT_SRC/tests/e2e/nccl-double/nccl.c" 2>"$T/cc.err"; then
    notok "nccl torch: the NCCL double builds" "$(head -c 400 "$T/cc.err")"
    exit 0
fi

$CC -shared -fPIC -o "$T/libtorch-standin.so" -x c /dev/null 2>>"$T/cc.err" || {
    notok "nccl torch: a shared object builds" "$(head -c 400 "$T/cc.err")"
    exit 0
}
mkdir -p "$T/sys" && cp "$T/libnccl-double.so" "$T/sys/libnccl.so.2"
SP=/opt/trainer/.venv/lib/python3.12/site-packages

# venv TORCH SETUP VERDICT [SYSTEM]: preflight check with /opt (a tmpfs of mode 0755, root's)
# holding only that virtual environment. TORCH: elf (a shared object), empty (an empty file)
# or no; SETUP: a shell command run after the tree is made (chown, chmod); SYSTEM: a folder
# for LD_LIBRARY_PATH (the system's NCCL), or nothing.
venv() {
    unshare -m sh -c '
        mount -t tmpfs -o mode=0755 none /opt || exit 90
        sp=$6
        mkdir -p "$sp/nvidia/nccl/lib" "$sp/torch/lib"
        cp "$1" "$sp/nvidia/nccl/lib/libnccl.so.2"
        case $2 in
        elf) cp "$7" "$sp/torch/lib/libtorch_cuda.so" ;;
        empty) : >"$sp/torch/lib/libtorch_cuda.so" ;;
        esac
        sh -c "$5" || exit 91
        env -u PREFLIGHT_NCCL_LIB ${8:+LD_LIBRARY_PATH=$8} DOUBLE_NCCL_VERSION=22899 "$3" check \
            --format yaml --verdict "$4" >"$4.out" 2>&1
        exit 0' sh "$T/libnccl-double.so" "$1" "$PREFLIGHT" "$3" "$2" "$SP" "$T/libtorch-standin.so" "${4:-}"
}
msg() { yq "$1" 'check("nccl.library")["message"]'; }
ev() { yq "$1" "check('nccl.library').get('evidence', {}).get('$2', '')"; }
skipped() { yq "$1" "'|'.join(check('nccl.library').get('evidence', {}).get('skipped', []))"; }

if ! venv elf true "$T/with.yaml" || [ ! -s "$T/with.yaml" ]; then
    skip "nccl torch: no private mount namespace with a tmpfs here"
    exit 0
fi
expect_eq "nccl torch: the wheel's NCCL beside torch is the one loaded, whatever ld.so.cache holds" \
    "$(msg "$T/with.yaml")" "NCCL 2.28.99 from $SP/nvidia/nccl/lib/libnccl.so.2 (PyTorch's own: its libraries load it first)"
expect_eq "nccl torch: the evidence names the torch library that loads it" \
    "$(ev "$T/with.yaml" loadedBy)" "$SP/torch/lib/libtorch_cuda.so"
expect_eq "nccl torch: a root-owned tree is trusted, nothing skipped" "$(skipped "$T/with.yaml")" ""

# the same venv without torch: no claim that PyTorch loads it (the soname, or the venv found
# later in the list, whichever this machine has)
venv no true "$T/without.yaml"
case "$(msg "$T/without.yaml")" in
*"PyTorch"*) notok "nccl torch: without torch no PyTorch claim" "$(msg "$T/without.yaml")" ;;
*) ok "nccl torch: without torch no PyTorch claim ($(msg "$T/without.yaml"))" ;;
esac
expect_eq "nccl torch: without torch no loadedBy" "$(ev "$T/without.yaml" loadedBy)" ""

# an empty file named like torch's library is no proof: the system's NCCL is loaded first
venv empty true "$T/empty.yaml" "$T/sys"
expect_eq "nccl torch: an empty libtorch_cuda.so does not put the venv's NCCL ahead of the system's" \
    "$(msg "$T/empty.yaml")" "NCCL 2.28.99 from $T/sys/libnccl.so.2"
case "$(skipped "$T/empty.yaml")" in
*"$SP/nvidia/nccl/lib/libnccl.so.2: not taken as PyTorch's: $SP/torch/lib/libtorch_cuda.so is not torch's library: 0 bytes"*)
    ok "nccl torch: the evidence says the empty torch library proves nothing" ;;
*) notok "nccl torch: the evidence says the empty torch library proves nothing" "$(skipped "$T/empty.yaml")" ;;
esac

# a tree another user owns (with a real shared object as torch's): skipped, the system's NCCL
# loads, and the evidence says which tree and why
venv elf "chown 1000:1000 /opt/trainer" "$T/hostile.yaml" "$T/sys"
expect_eq "nccl torch: a tree owned by uid 1000 is skipped, the system's NCCL loads" \
    "$(msg "$T/hostile.yaml")" "NCCL 2.28.99 from $T/sys/libnccl.so.2"
case "$(skipped "$T/hostile.yaml")" in
*"/opt/trainer is owned by uid 1000 (only root or uid 0, this process, is trusted)"*)
    ok "nccl torch: the evidence names the tree owned by uid 1000 and why it was skipped" ;;
*) notok "nccl torch: the evidence names the tree owned by uid 1000" "$(skipped "$T/hostile.yaml")" ;;
esac

# ... and with no system NCCL at all, the hostile tree is still not loaded (the wheel folders
# after the soname are judged the same way)
venv elf "chown -R 1000:1000 /opt/trainer" "$T/hostile-only.yaml"
case "$(msg "$T/hostile-only.yaml")" in
*"$SP"*) notok "nccl torch: with no other NCCL the hostile tree is still not loaded" "$(msg "$T/hostile-only.yaml")" ;;
*) ok "nccl torch: with no other NCCL the hostile tree is still not loaded" ;;
esac

# root's tree with one folder on the way writable by others (mode 0777, sticky or not)
venv elf "chmod 1777 /opt/trainer/.venv" "$T/writable.yaml" "$T/sys"
expect_eq "nccl torch: a world-writable folder in the tree makes it skipped" \
    "$(msg "$T/writable.yaml")" "NCCL 2.28.99 from $T/sys/libnccl.so.2"
case "$(skipped "$T/writable.yaml")" in
*"/opt/trainer/.venv is writable by its others (mode 1777)"*) ok "nccl torch: the evidence says which folder is writable by others" ;;
*) notok "nccl torch: the evidence says which folder is writable by others" "$(skipped "$T/writable.yaml")" ;;
esac
venv elf "chmod 0775 /opt/trainer/.venv/lib" "$T/group.yaml" "$T/sys"
case "$(skipped "$T/group.yaml")" in
*"/opt/trainer/.venv/lib is writable by its group (mode 0775)"*) ok "nccl torch: a group-writable folder in the tree makes it skipped" ;;
*) notok "nccl torch: a group-writable folder in the tree makes it skipped" "$(skipped "$T/group.yaml")" ;;
esac
