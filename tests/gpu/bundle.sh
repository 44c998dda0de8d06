#!/usr/bin/env bash
# Makes the folder tests/gpu/device-check.sh takes to a GPU machine that can fetch nothing:
#   DIR/bin/preflight            a release build of this tree (libc and libm only)
#   DIR/nccl-tests/*_perf        nccl-tests against tests/gpu/minimpi (build-nccl-tests.sh),
#                                when NCCL_TESTS_SRC names an nccl-tests checkout
#   DIR/double/libnccl-double.so the NCCL test double (tests/e2e/nccl-double), for the case of
#                                a rank that never initialises
#   DIR/tools/bin/{ip,dnsmasq,hostname}  this machine's, with the libraries they need under
#                                DIR/tools/lib (RPATH $ORIGIN/../lib; glibc itself is the
#                                GPU machine's), used there only where those tools are missing
#   tests/gpu/bundle.sh [DIR]    # default .gpu (ignored by git)
set -eu
cd "$(dirname "$0")/../.."
DIR=${1:-.gpu}
mkdir -p "$DIR/bin" "$DIR/double" "$DIR/tools/bin" "$DIR/tools/lib"
make -s bin/preflight
cp bin/preflight "$DIR/bin/"
cc -std=c11 -O1 -Wall -Wextra -Werror -shared -fPIC -o "$DIR/double/libnccl-double.so" \
    tests/e2e/nccl-double/nccl.c
if [ -n "${NCCL_TESTS_SRC:-}" ]; then
    tests/gpu/build-nccl-tests.sh "$NCCL_TESTS_SRC" "$DIR/nccl-tests"
fi
command -v patchelf >/dev/null || { echo "bundle.sh: needs patchelf (apt-get install patchelf)" >&2; exit 1; }
glibc='^(libc|libm|libdl|libpthread|librt|libresolv|ld-linux-x86-64)\.so'
for t in ip dnsmasq hostname; do
    p=$(command -v "$t")
    cp "$p" "$DIR/tools/bin/$t"
    patchelf --force-rpath --set-rpath '$ORIGIN/../lib' "$DIR/tools/bin/$t"
    ldd "$p" | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | while read -r lib; do
        b=$(basename "$lib")
        echo "$b" | grep -Eq "$glibc" && continue
        [ -e "$DIR/tools/lib/$b" ] || cp -L "$lib" "$DIR/tools/lib/$b"
    done
done
for l in "$DIR"/tools/lib/*.so*; do patchelf --force-rpath --set-rpath '$ORIGIN' "$l"; done
du -sh "$DIR"
