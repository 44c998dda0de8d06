#!/usr/bin/env bash
# Builds the nccl-tests that tests/gpu/device-check.sh compares preflight with, from NVIDIA's
# source (github.com/NVIDIA/nccl-tests), with MPI=1 against tests/gpu/minimpi (the GPU machine
# has no MPI; nccl-tests uses MPI only to start and to add up its figures), the CUDA runtime
# linked statically, and libnccl.so.2 taken at run time from LD_LIBRARY_PATH (so the NCCL
# measured is the one preflight loads).
#
#   tests/gpu/build-nccl-tests.sh SRC OUT     # SRC: an nccl-tests checkout; OUT: where the
#                                             # binaries go (all_reduce_perf, ...)
# Knobs: CUDA_HOME (/usr/local/cuda), NCCL_HOME (default: CUDA_HOME, for nccl.h and
# libnccl.so), NVCC_GENCODE (default: sm_90 code and compute_90 PTX: H100/H200 and later).
set -eu
SRC=$(cd "$1" && pwd)
OUT=$(mkdir -p "$2" && cd "$2" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
NCCL_HOME=${NCCL_HOME:-$CUDA_HOME}
GENCODE=${NVCC_GENCODE:--gencode=arch=compute_90,code=sm_90 -gencode=arch=compute_90,code=compute_90}
W=$(mktemp -d /tmp/nccl-tests-build.XXXXXX)
trap 'rm -rf "$W"' EXIT
mkdir -p "$W/mpi/include" "$W/mpi/lib" "$W/build"
cp "$HERE/minimpi/mpi.h" "$W/mpi/include/"
cc -O2 -fPIC -c -o "$W/minimpi.o" "$HERE/minimpi/minimpi.c"
ar rcs "$W/mpi/lib/libmpi.a" "$W/minimpi.o"
# nccl.h and libnccl.so from NCCL_HOME; CUDA_HOME/lib64 may hold both (the CUDA images do)
mkdir -p "$W/nccl/include" "$W/nccl/lib"
cp "$(ls "$NCCL_HOME"/include/nccl.h "$CUDA_HOME"/include/nccl.h 2>/dev/null | head -1)" "$W/nccl/include/"
ln -s "$(ls "$NCCL_HOME"/lib*/libnccl.so "$NCCL_HOME"/lib/libnccl.so 2>/dev/null | head -1)" "$W/nccl/lib/libnccl.so"
bins=""
for t in ${NCCL_TESTS_BINS:-all_reduce all_gather reduce_scatter alltoall}; do bins="$bins $W/build/${t}_perf"; done
make -C "$SRC/src" -j"${JOBS:-2}" MPI=1 MPI_HOME="$W/mpi" NCCL_HOME="$W/nccl" CUDA_HOME="$CUDA_HOME" \
    CUDARTLIB=cudart_static NVCC_GENCODE="$GENCODE" BUILDDIR="$W/build" $bins
for b in $bins; do cp "$b" "$OUT/"; done
( cd "$SRC" && (git describe --tags 2>/dev/null || grep -ho 'NCCL_TESTS_VERSION[^"]*"[^"]*"' src/*.h | head -1) ) >"$OUT/VERSION" 2>/dev/null || true
echo "built:$(cd "$OUT" && ls *_perf | tr '\n' ' ')"
