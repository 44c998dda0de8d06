#!/usr/bin/env bash
# The Dockerfile's promises that can be held without building an image (test_image.sh builds
# it for real, opt-in): the runtime stage's base is Debian 12 (bookworm), it installs
# ca-certificates (the bundle Debian's libcurl reads by default, so an https:// Pushgateway
# needs no caFile) and ships the stripped binary of `make dist`; the static target's binary is
# stripped too. Then `make dist` itself: file(1) says stripped, the .gnu_debuglink names the
# kept symbols, and the stripped binary runs.
source "$(dirname "$0")/lib.sh"
DF=$PREFLIGHT_SRC/Dockerfile
# stage NAME: the lines of the Dockerfile's stage NAME (FROM ... AS NAME up to the next FROM)
stage() { awk -v s="$1" 'toupper($1) == "FROM" { on = (tolower($NF) == s) } on' "$DF"; }
# joined RUN lines (backslash continuations folded) of stage NAME
runs() { stage "$1" | sed -e ':a' -e '/\\$/N; s/\\\n//; ta' | grep -E '^RUN '; }

expect_eq "dockerfile: the runtime image's default base is Debian 12 (bookworm-slim)" \
    "$(sed -n 's/^ARG RUNTIME_IMAGE=//p' "$DF")" "docker.io/library/debian:bookworm-slim"
expect_eq "dockerfile: the runtime stage starts from RUNTIME_IMAGE" \
    "$(stage runtime | awk 'toupper($1) == "FROM" {print $2}')" '${RUNTIME_IMAGE}'
check "dockerfile: the runtime stage installs ca-certificates (libcurl's default bundle)" \
    grep -qE 'apt-get install [^&]*\bca-certificates\b' <<<"$(runs runtime)"
expect_eq "dockerfile: the runtime image ships make dist's stripped binary" \
    "$(stage runtime | awk 'toupper($1) == "COPY" && $NF == "/usr/local/bin/preflight" {print $(NF-1)}')" \
    "/src/bin/dist/preflight"
check "dockerfile: the build stage makes bin/dist/preflight" \
    grep -qE 'make [^&]*bin/dist/preflight' <<<"$(runs build)"
check "dockerfile: the static binary is stripped before the static image copies it" \
    grep -qE 'strip --strip-all bin/preflight-static' <<<"$(runs build-static)"
# the glibc the build stage gives the binary stays at most 2.31 (test_image.sh measures it)
expect_eq "dockerfile: the build stage stays on glibc 2.31 (bullseye) for the training images" \
    "$(sed -n 's/^ARG BUILD_IMAGE=//p' "$DF")" "docker.io/library/debian:bullseye"

# ---- make dist on this tree's bin/preflight (built by `make test`; not rebuilt here)
if [ ! -x "$PREFLIGHT_SRC/bin/preflight" ] || ! make -s -q -C "$PREFLIGHT_SRC" bin/preflight 2>/dev/null; then
    skip "dockerfile: make dist" "bin/preflight not built or not up to date (make)"
    exit 0
fi
if ! make -s -C "$PREFLIGHT_SRC" bin/dist/preflight >"$T/make.log" 2>&1; then
    notok "dockerfile: make dist" "$(tail -c 300 "$T/make.log")"
    exit 0
fi
W=$PREFLIGHT_SRC
f=$(file -b "$W/bin/dist/preflight")
check "dockerfile: file(1) says the shipped binary is stripped ($f)" \
    bash -c '[[ "$1" == *", stripped"* && "$1" != *"not stripped"* ]]' _ "$f"
check "dockerfile: the unstripped build was not (file(1): not stripped)" \
    grep -q "not stripped" <<<"$(file -b "$W/bin/preflight")"
expect_eq "dockerfile: the stripped binary names its symbols' file (.gnu_debuglink)" \
    "$(readelf --string-dump=.gnu_debuglink "$W/bin/dist/preflight" 2>/dev/null | grep -o 'preflight\.debug' | head -1)" \
    "preflight.debug"
check "dockerfile: the stripped binary runs (preflight version)" \
    bash -c 'env -i PATH=/usr/bin:/bin "$1" version >/dev/null 2>&1' _ "$W/bin/dist/preflight"
