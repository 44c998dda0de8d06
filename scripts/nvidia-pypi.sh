#!/bin/sh
# NVIDIA's libraries and headers as ML users install them: the wheels on PyPI, at pinned
# releases, unpacked into a cache folder (no pip install into any Python, no /usr/local/cuda).
#
#   scripts/nvidia-pypi.sh fetch      download and unpack what is missing (says what it fetches)
#   scripts/nvidia-pypi.sh env        print shell assignments for what is there:
#                                     NVIDIA_NCCL_LIB  libnccl.so.2 (nvidia-nccl-cu13)
#                                     NVIDIA_INCLUDE   -isystem flags for nccl.h and cuda.h
#                                     NVIDIA_NVML_INCLUDE  the folder of nvml.h
#   scripts/nvidia-pypi.sh cflags     print NVIDIA_INCLUDE alone (the Makefile's test_dl_abi)
#   scripts/nvidia-pypi.sh nvml       print NVIDIA_NVML_INCLUDE alone
#
# The wheels (PyPI project, version, what the tests use from it):
#   nvidia-nccl-cu13    2.32.3   nvidia/nccl/lib/libnccl.so.2, nvidia/nccl/include/nccl.h
#   nvidia-cuda-runtime 13.5.37  nvidia/cu13/include/cuda.h (and cuda_runtime.h, which nccl.h includes)
#   nvidia-cuda-crt     13.5.37  nvidia/cu13/include/crt/host_config.h (cuda_runtime.h includes it)
#   nvidia-cuda-cccl    13.3.5.0.6  nvidia/cu13/include/nv/target (cuda_fp16.h includes it)
#   nvidia-nvml-dev-cu12 12.9.79 nvidia/nvml_dev/include/nvml.h (NVML_API_VERSION 12), which
#                        test_dl_abi compares pkg/dl/nvml.h with and test_gpu_health.sh
#                        compiles the NVML test double against (its licence does not allow
#                        committing it)
# The cache is $PREFLIGHT_NVIDIA_CACHE (default /var/cache/preflight/nvidia), one folder a
# wheel, named for its project and version, so that a changed pin fetches again.
set -eu
CACHE=${PREFLIGHT_NVIDIA_CACHE:-/var/cache/preflight/nvidia}
WHEELS="nvidia-nccl-cu13==2.32.3 nvidia-cuda-runtime==13.5.37 nvidia-cuda-crt==13.5.37 nvidia-cuda-cccl==13.3.5.0.6 nvidia-nvml-dev-cu12==12.9.79"

dir_of() { # project==version -> its folder in the cache
    echo "$CACHE/$(echo "$1" | sed 's/==/-/')"
}

pip_cmd() {
    for py in python3 /usr/bin/python3; do
        if command -v "$py" >/dev/null 2>&1 && "$py" -m pip --version >/dev/null 2>&1; then
            echo "$py -m pip"
            return 0
        fi
    done
    return 1
}

fetch() {
    missing=""
    for w in $WHEELS; do
        [ -f "$(dir_of "$w")/.done" ] || missing="$missing $w"
    done
    [ -z "$missing" ] && return 0
    pip=$(pip_cmd) || {
        if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
            echo "nvidia-pypi.sh: installing python3-pip (Debian) to download the wheels"
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-pip >/dev/null
            pip=$(pip_cmd)
        else
            echo "nvidia-pypi.sh: no pip to download$missing" >&2
            return 1
        fi
    }
    echo "nvidia-pypi.sh: fetching from PyPI into $CACHE:$missing"
    tmp=$(mktemp -d)
    for w in $missing; do
        d=$(dir_of "$w")
        rm -rf "$d" "$tmp/dl" && mkdir -p "$tmp/dl" "$d"
        # shellcheck disable=SC2086
        $pip download -q --no-deps --only-binary=:all: \
            -d "$tmp/dl" "$w" || {
            echo "nvidia-pypi.sh: could not download $w" >&2
            rm -rf "$tmp" "$d"
            return 1
        }
        unzip -q -o "$tmp"/dl/*.whl -d "$d"
        : >"$d/.done"
    done
    rm -rf "$tmp"
}

# the folder of a project's wheel in the cache, at the version WHEELS pins
dir_for() {
    for w in $WHEELS; do
        case $w in "$1=="*) dir_of "$w" ;; esac
    done
}

env_out() {
    nccl=$(dir_for nvidia-nccl-cu13)
    cuda=$(dir_for nvidia-cuda-runtime)
    crt=$(dir_for nvidia-cuda-crt)
    cccl=$(dir_for nvidia-cuda-cccl)
    nvml=$(dir_for nvidia-nvml-dev-cu12)
    if [ -f "$nccl/.done" ] && [ -f "$nccl/nvidia/nccl/lib/libnccl.so.2" ]; then
        echo "NVIDIA_NCCL_LIB=$nccl/nvidia/nccl/lib/libnccl.so.2"
    fi
    inc=""
    [ -f "$nccl/nvidia/nccl/include/nccl.h" ] && inc="$inc -isystem $nccl/nvidia/nccl/include"
    [ -f "$cuda/nvidia/cu13/include/cuda.h" ] && inc="$inc -isystem $cuda/nvidia/cu13/include"
    [ -f "$crt/nvidia/cu13/include/crt/host_config.h" ] && inc="$inc -isystem $crt/nvidia/cu13/include"
    [ -f "$cccl/nvidia/cu13/include/nv/target" ] && inc="$inc -isystem $cccl/nvidia/cu13/include"
    echo "NVIDIA_INCLUDE='${inc# }'"
    if [ -f "$nvml/nvidia/nvml_dev/include/nvml.h" ]; then
        echo "NVIDIA_NVML_INCLUDE=$nvml/nvidia/nvml_dev/include"
    fi
}

case "${1:-}" in
    fetch) fetch ;;
    env) env_out ;;
    cflags) env_out | sed -n "s/^NVIDIA_INCLUDE='\\(.*\\)'\$/\\1/p" ;;
    nvml) env_out | sed -n "s/^NVIDIA_NVML_INCLUDE=//p" ;;
    *) echo "usage: $0 fetch|env|cflags|nvml" >&2; exit 2 ;;
esac
