#!/bin/sh
# Builds bin/preflight-static: fully static, against musl (Debian's musl-tools), so that it
# runs in a scratch image. No dlopen there: NCCL, verbs and Kubernetes reporting say skip.
# libyaml and jansson come from Debian's libyaml.a and libjansson.a (built for glibc;
# scripts/static-compat.c supplies the fortify symbols they need that musl lacks).
# PF_GIT, when set, is the commit shown by `preflight version` (a build without .git).
set -eu
cd "$(dirname "$0")/.."
# musl-gcc (musl-tools) and the static libraries: installed when missing (scripts/deps.sh says
# what it installs; it needs root)
if ! command -v musl-gcc >/dev/null || [ ! -f "$(gcc -print-file-name=libyaml.a)" ]; then
    scripts/deps.sh static || { echo "build-static: musl-gcc missing and not installable (apt-get install musl-tools as root)" >&2; exit 1; }
fi
command -v musl-gcc >/dev/null || { echo "build-static: musl-gcc missing (apt-get install musl-tools)" >&2; exit 1; }
yaml=$(gcc -print-file-name=libyaml.a)
[ -f "$yaml" ] || yaml=/usr/lib/x86_64-linux-gnu/libyaml.a
[ -f "$yaml" ] || { echo "build-static: libyaml.a missing (apt-get install libyaml-dev)" >&2; exit 1; }
jansson=$(gcc -print-file-name=libjansson.a)
[ -f "$jansson" ] || jansson=/usr/lib/x86_64-linux-gnu/libjansson.a
[ -f "$jansson" ] || { echo "build-static: libjansson.a missing (apt-get install libjansson-dev)" >&2; exit 1; }
version=$(sed -n 's/^VERSION *:= *//p' Makefile)
git=${PF_GIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
mkdir -p build/static bin
# libyaml's header lives with glibc's; give musl-gcc only that one header
mkdir -p build/static/include
cp /usr/include/yaml.h build/static/include/
cp /usr/include/jansson.h /usr/include/jansson_config.h build/static/include/
cp -r /usr/include/sodium.h /usr/include/sodium build/static/include/
sodium=$(gcc -print-file-name=libsodium.a)
[ -f "$sodium" ] || sodium=/usr/lib/x86_64-linux-gnu/libsodium.a
[ -f "$sodium" ] || { echo "build-static: libsodium.a missing (apt-get install libsodium-dev)" >&2; exit 1; }
# musl's include path has no kernel headers: hand it Debian's (linux/, asm/, asm-generic/)
mkdir -p build/static/kernel
for d in linux asm-generic; do [ -e "build/static/kernel/$d" ] || ln -s "/usr/include/$d" "build/static/kernel/$d"; done
[ -e build/static/kernel/asm ] || ln -s "/usr/include/$(gcc -dumpmachine)/asm" build/static/kernel/asm
werror=""
[ -n "${CI:-}" ] && werror="-Werror"
# shellcheck disable=SC2046
musl-gcc -std=c11 -O2 -static -DPF_STATIC -DPF_VERSION="\"$version\"" -DPF_GIT="\"$git\"" \
    -Wall -Wextra -Wshadow -Wformat=2 -Wmissing-prototypes -Wstrict-prototypes -Wwrite-strings \
    -Wvla $werror -fno-strict-aliasing -Ibuild/static/include -idirafter build/static/kernel \
    -o bin/preflight-static cmd/preflight/*.c $(ls pkg/*/*.c) scripts/static-compat.c \
    "$yaml" "$jansson" "$sodium" -lm
echo "built bin/preflight-static"
