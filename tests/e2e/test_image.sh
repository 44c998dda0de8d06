#!/usr/bin/env bash
# The container image (Dockerfile), built for real with podman: a Debian 11 (bullseye) base
# for the build stage and a Debian 12 (bookworm) base for the runtime image, each made with
# debootstrap from Debian's mirror and imported (no other registry is needed), the
# runtime target and the static target built with `podman build --isolation chroot`, then
# each image mounted and its binary run from it (chroot into the image's root, as the image's
# non-root user): `preflight version`, `preflight check` on a fixture tree, `preflight
# install`; the highest GLIBC_ symbol version the binary needs (at most 2.31, so that it runs
# in every current CUDA training image); the image's user and entrypoint; the static binary
# static and running in an otherwise empty root.
#
# Slow (minutes): runs when PREFLIGHT_IMAGE_TEST=1 or CI is set, else says skip. The
# debootstrap tarball is cached in /var/cache/preflight-test (PREFLIGHT_TEST_CACHE) for 30
# days. A mirror that cannot be reached is a skip with the reason; anything else is `not ok`.
# Images, containers and podman's storage live under a temporary folder, removed at the end.
source "$(dirname "$0")/lib.sh"

if [ "${PREFLIGHT_IMAGE_TEST:-}" != 1 ] && [ -z "${CI:-}" ]; then
    skip "image" "builds the image with podman (minutes): set PREFLIGHT_IMAGE_TEST=1 (CI runs it)"
    exit 0
fi
need_root "image" || exit 0
for tool in podman debootstrap objdump readelf file unshare chroot curl; do
    if ! command -v "$tool" >/dev/null; then
        # CI installs them (scripts/deps.sh test): missing there is a failure
        if [ -n "${CI:-}" ]; then notok "image" "$tool missing (scripts/deps.sh test)"; else
            skip "image" "$tool missing (scripts/deps.sh test installs it)"; fi
        exit 0
    fi
done

MIRROR=${PREFLIGHT_DEBIAN_MIRROR:-http://deb.debian.org/debian}
CACHE=${PREFLIGHT_TEST_CACHE:-/var/cache/preflight-test}
SUITE=bullseye         # the build stage's (glibc 2.31)
RUNTIME_SUITE=bookworm # the runtime image's
MAX_GLIBC=2.31
BASE=localhost/preflight-test/debian:$SUITE
RUNTIME_BASE=localhost/preflight-test/debian:$RUNTIME_SUITE
IMG=localhost/preflight-test/preflight:runtime
IMG_STATIC=localhost/preflight-test/preflight:static
UID_IMG=65532

# podman with its own storage under $T: nothing of the machine's podman is read or left over
S=$T/podman
mkdir -p "$S/tmp"
export TMPDIR=$S/tmp
PODMAN=(podman --root "$S/storage" --runroot "$S/run" --storage-driver overlay
    --cgroup-manager cgroupfs --events-backend none)
cleanup() {
    local m
    "${PODMAN[@]}" umount -a >/dev/null 2>&1
    "${PODMAN[@]}" rm -a -f >/dev/null 2>&1
    "${PODMAN[@]}" rmi -a -f >/dev/null 2>&1
    # anything still mounted under $T (deepest first) before the folder goes
    while read -r m; do umount -l "$m" 2>/dev/null; done < <(awk -v t="$T" 'index($2, t) == 1 {print $2}' /proc/mounts | sort -r)
    rm -rf "$T"
}
trap cleanup EXIT

# mirror_down: true when Debian's mirror does not answer (then a failed step is a skip)
mirror_down() {
    ! curl -fsS --max-time 20 -o /dev/null "$MIRROR/dists/$SUITE/Release" 2>"$T/curl.err"
}

# ---- the base images: debootstrap --variant=minbase, cached as a tarball
# base SUITE TAG: the Debian SUITE imported as TAG; 1 (said why) when it cannot be made
base() {
    local tarball start
    tarball=$CACHE/debian-$1-minbase.tar
    if [ -s "$tarball" ] && [ -n "$(find "$tarball" -mtime -30 2>/dev/null)" ]; then
        ok "image: Debian $1 base from the cache ($tarball)"
    else
        start=$SECONDS
        if ! timeout 1200 debootstrap --variant=minbase "$1" "$T/rootfs-$1" "$MIRROR" >"$T/debootstrap.log" 2>&1; then
            if mirror_down || grep -qE "Failed getting release file|Couldn't download|Temporary failure resolving|Could not resolve|Connection (refused|timed out)" "$T/debootstrap.log"; then
                skip "image" "Debian's mirror $MIRROR cannot be reached: $(tail -c 200 "$T/curl.err" "$T/debootstrap.log" 2>/dev/null | grep -v '^==' | tail -1)"
            else
                notok "image: debootstrap $1" "$(tail -3 "$T/debootstrap.log" | tr '\n' '|')"
            fi
            return 1
        fi
        ok "image: debootstrap --variant=minbase $1 ($((SECONDS - start)) s)"
        # the downloaded .debs and package lists are not part of an image
        rm -rf "$T/rootfs-$1/var/cache/apt/archives/"*.deb "$T/rootfs-$1/var/lib/apt/lists/"*
        mkdir -p "$CACHE"
        tar --numeric-owner -C "$T/rootfs-$1" -cf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
        rm -rf "$T/rootfs-$1"
    fi
    if ! "${PODMAN[@]}" import "$tarball" "$2" >"$T/import.log" 2>&1; then
        notok "image: podman import of the base" "$(tail -2 "$T/import.log" | tr '\n' '|')"
        return 1
    fi
}
base "$SUITE" "$BASE" || exit 0
base "$RUNTIME_SUITE" "$RUNTIME_BASE" || exit 0

# ---- podman build: the default (runtime) target, then the static target
build() { # NAME TAG [--target T]
    local name=$1 tag=$2 start=$SECONDS
    shift 2
    if timeout 1200 "${PODMAN[@]}" build --isolation chroot --pull=never \
        --build-arg BUILD_IMAGE="$BASE" --build-arg RUNTIME_IMAGE="$RUNTIME_BASE" \
        --build-arg GIT="$(git -C "$PREFLIGHT_SRC" rev-parse --short HEAD 2>/dev/null || echo unknown)" \
        -t "$tag" "$@" -f "$PREFLIGHT_SRC/Dockerfile" "$PREFLIGHT_SRC" >"$T/build-$name.log" 2>&1; then
        ok "image: podman build $name ($((SECONDS - start)) s)"
        return 0
    fi
    if mirror_down; then
        skip "image" "Debian's mirror $MIRROR cannot be reached during the build: $(tail -1 "$T/curl.err")"
        exit 0
    fi
    notok "image: podman build $name" "$(grep -vE '^(STEP|-->|COMMIT|Getting|Copying|Writing|Storing)' "$T/build-$name.log" | tail -8 | tr '\n' '|')"
    return 1
}
build runtime "$IMG" || exit 0
build static "$IMG_STATIC" --target static || exit 0

# inspect IMAGE FORMAT
inspect() { "${PODMAN[@]}" image inspect --format "$2" "$1"; }
# rootfs IMAGE: a container of IMAGE, mounted read-write; prints the mount point
rootfs() {
    local c
    c=$("${PODMAN[@]}" create "$1") && "${PODMAN[@]}" mount "$c"
}
# in_image ROOT CMD...: runs CMD chrooted into ROOT as the image's user, with its own /proc
in_image() {
    local root=$1
    shift
    env -i PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin HOME=/nonexistent NO_COLOR=1 \
        unshare --fork --pid --mount-proc="$root/proc" \
        chroot --userspec="$UID_IMG:$UID_IMG" "$root" "$@"
}
# glibc_max FILE: the highest GLIBC_x.y symbol version FILE needs
glibc_max() { objdump -T "$1" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -1; }
# statuses VERDICT: "id=status" for each check that reads only the fixture tree, sorted. Left
# out: those that depend on the libraries that load (rdma.verbs, nccl.library) and on the
# process's capabilities (rdma.memlock: root here, UID 65532 in the image).
statuses() {
    python3 -c '
import sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
skip = ("rdma.verbs", "nccl.library", "rdma.memlock")
print(" ".join(sorted("%s=%s" % (c["id"], c["status"]) for c in d["checks"] if c["id"] not in skip)))' "$1"
}

# ---- the runtime image
expect_eq "image: runtime user is $UID_IMG (not root)" "$(inspect "$IMG" '{{.Config.User}}')" "$UID_IMG:$UID_IMG"
entry=$(inspect "$IMG" '{{json .Config.Entrypoint}}')
expect_eq "image: runtime entrypoint is preflight" "$entry" '["/usr/local/bin/preflight"]'
size=$(inspect "$IMG" '{{.Size}}')
ok "image: runtime image is $((size / 1000000)) MB, $(((size - $(inspect "$RUNTIME_BASE" '{{.Size}}')) / 1000000)) MB over its base"
if ! M=$(rootfs "$IMG"); then notok "image: mount the runtime image" "$M"; exit 0; fi
bin=$M/usr/local/bin/preflight
check "image: runtime has /usr/local/bin/preflight" test -x "$bin"
expect_eq "image: the runtime image is Debian 12 (/etc/os-release VERSION_ID)" \
    "$(. "$M/etc/os-release" && echo "$VERSION_ID")" 12
check "image: the runtime image has the CA bundle libcurl reads by default" \
    grep -q "BEGIN CERTIFICATE" "$M/etc/ssl/certs/ca-certificates.crt"
check "image: the runtime binary is stripped (file)" bash -c '[[ "$(file -b "$1")" == *", stripped"* ]]' _ "$bin"

g=$(glibc_max "$bin")
if [ -n "$g" ] && [ "$(printf '%s\n%s\n' "$g" "$MAX_GLIBC" | sort -V | tail -1)" = "$MAX_GLIBC" ]; then
    ok "image: highest glibc symbol version needed is GLIBC_$g (at most $MAX_GLIBC)"
else
    notok "image: highest glibc symbol version needed is at most $MAX_GLIBC" \
        "GLIBC_$g, for: $(objdump -T "$bin" | grep "GLIBC_$g" | awk '{print $NF}' | head -5 | tr '\n' ' ')"
fi
needed=$(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | sort | tr '\n' ' ')
check "image: runtime binary needs glibc's libraries only ($needed)" \
    bash -c "! printf '%s\n' $needed | grep -vqE '^(libc|libdl|libpthread|libm|librt|ld-linux-x86-64)\.so\.[0-9]+$'"

v=$(in_image "$M" /usr/local/bin/preflight version 2>&1)
rc=$?
if [ $rc -eq 0 ] && grep -q "0\.1\.0\|$(sed -n 's/^VERSION *:= *//p' "$PREFLIGHT_SRC/Makefile")" <<<"$v"; then
    ok "image: preflight version runs in the image's root (its glibc), as UID $UID_IMG"
else
    notok "image: preflight version in the image's root" "exit $rc: $(head -c 300 <<<"$v")"
fi
check "image: libcurl loads in the runtime image (Kubernetes Events)" grep -qE 'libcurl\.so\.4 +([0-9]+\.[0-9]+|loads)' <<<"$v"
check "image: libibverbs loads in the runtime image (rdma.verbs)" grep -qE 'libibverbs\.so\.1 +(rdma-core [0-9]|loads)' <<<"$v"

# preflight check on a fixture tree, inside the image, matches the host's build on the same tree
"$FIX/materialize.sh" "$FIX/node-8gpu-ndr" "$M/tmp/ndr" 2>/dev/null
in_image "$M" /usr/local/bin/preflight check --root /tmp/ndr --format yaml --verdict - \
    >"$T/image-check.yaml" 2>"$T/image-check.err"
rc=$?
env -i PATH="$PATH" HOME=/nonexistent "$PREFLIGHT" check --root "$M/tmp/ndr" --format yaml --verdict - >"$T/host-check.yaml" 2>/dev/null
if [ $rc -ne 2 ] && [ $rc -le 5 ] && [ "$(yq "$T/image-check.yaml" 'd["apiVersion"]')" = preflight/v1 ]; then
    ok "image: preflight check on node-8gpu-ndr in the image: verdict $(yq "$T/image-check.yaml" 'd["verdict"]'), exit $rc"
else
    notok "image: preflight check on node-8gpu-ndr in the image" "exit $rc: $(head -c 300 "$T/image-check.err")"
fi
expect_eq "image: its check statuses are the host build's on the same tree" \
    "$(statuses "$T/image-check.yaml" 2>&1)" "$(statuses "$T/host-check.yaml" 2>&1)"

# preflight install, as an initContainer of the training-image mode does, then the copy runs
# in the image and on this machine (a newer glibc: the training image's side)
mkdir -p "$M/tmp/bin" && chmod 1777 "$M/tmp/bin"
if in_image "$M" /usr/local/bin/preflight install /tmp/bin >"$T/install.log" 2>&1 &&
    in_image "$M" /tmp/bin/preflight version >/dev/null 2>&1 &&
    "$M/tmp/bin/preflight" version >/dev/null 2>&1; then
    ok "image: preflight install copies a binary that runs in the image and on $(. /etc/os-release && echo "$PRETTY_NAME")"
else
    notok "image: preflight install" "$(head -c 300 "$T/install.log")"
fi
expect_eq "image: /run/preflight (the default verdict folder) belongs to UID $UID_IMG" \
    "$(stat -c %u "$M/run/preflight" 2>&1)" "$UID_IMG"

# ---- the static image
expect_eq "image: static user is $UID_IMG (not root)" "$(inspect "$IMG_STATIC" '{{.Config.User}}')" "$UID_IMG:$UID_IMG"
expect_eq "image: static entrypoint is preflight" "$(inspect "$IMG_STATIC" '{{json .Config.Entrypoint}}')" '["/preflight"]'
ok "image: static image is $(($(inspect "$IMG_STATIC" '{{.Size}}') / 1000)) kB"
if ! MS=$(rootfs "$IMG_STATIC"); then notok "image: mount the static image" "$MS"; exit 0; fi
check "image: static binary says statically linked (file)" grep -q 'statically linked' <<<"$(file -L "$MS/preflight")"
check "image: static binary is stripped (file)" bash -c '[[ "$(file -bL "$1")" == *", stripped"* ]]' _ "$MS/preflight"
check "image: static binary has no program interpreter (PT_INTERP)" bash -c "! readelf -l '$MS/preflight' | grep -q INTERP"
# the static root is empty but for the binary: give it /proc and a fixture tree
mkdir -p "$MS/proc" "$MS/tmp"
"$FIX/materialize.sh" "$FIX/node-8gpu-ndr" "$MS/tmp/ndr" 2>/dev/null
if in_image "$MS" /preflight version >"$T/static-version.log" 2>&1; then
    ok "image: static preflight version runs in the scratch image's root"
else
    notok "image: static preflight version" "$(head -c 300 "$T/static-version.log")"
fi
in_image "$MS" /preflight check --root /tmp/ndr --format yaml --verdict - >"$T/static-check.yaml" 2>"$T/static-check.err"
rc=$?
if [ $rc -ne 2 ] && [ $rc -le 5 ]; then # pass, or a failure exiting by its class
    expect_eq "image: static check in the scratch image: rdma.verbs and nccl.library skip (no dlopen), the rest as the host build" \
        "$(yq "$T/static-check.yaml" "[check('rdma.verbs')['status'], check('nccl.library')['status']]") $(statuses "$T/static-check.yaml")" \
        "[\"skip\", \"skip\"] $(statuses "$T/host-check.yaml")"
else
    notok "image: static check in the scratch image" "exit $rc: $(head -c 300 "$T/static-check.err")"
fi
