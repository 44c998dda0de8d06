#!/usr/bin/env bash
# Where preflight's own settings come from (docs/security.md, "NCCL's config files are NCCL's
# input"): its flags, its environment and its config file, never a line of NCCL's config
# files. A line of /etc/nccl.conf, $HOME/.nccl.conf or NCCL_CONF_FILE that names a
# PREFLIGHT_* setting (PREFLIGHT_CURL_LIB: a library preflight would dlopen as root, holding
# the ServiceAccount token), an identity variable or LD_LIBRARY_PATH is not taken; NCCL's own
# lines still are (nccl.env still reads NCCL_SHM_DISABLE from the file).
# The "hostile library" is a real shared object built here whose constructor writes a marker
# file: the marker shows whether it was loaded.
source "$(dirname "$0")/lib.sh"
CC=${CC:-cc}

cat >"$T/evil.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
__attribute__((constructor)) static void loaded(void)
{
    const char *m = getenv("PF_TEST_MARK");
    FILE *f = fopen(m ? m : "/nonexistent", "w");
    if (f) {
        fputs("loaded\n", f);
        fclose(f);
    }
}
C
if ! $CC -shared -fPIC -o "$T/evil.so" "$T/evil.c"; then
    skip "nccl.conf cases" "no C compiler to build the marker library"
    exit 0
fi

for where in etc home conffile; do
    R=$T/root-$where
    mkdir -p "$R/etc" "$R/home/u"
    lines=$(printf 'NCCL_SHM_DISABLE=1\nPREFLIGHT_CURL_LIB=%s\nPREFLIGHT_LIBCURL=%s\nPREFLIGHT_PUSHGATEWAY=http://127.0.0.1:9/\nPOD_NAME=hijacked\nLD_LIBRARY_PATH=%s\nKUBERNETES_SERVICE_HOST=127.0.0.1\n' \
        "$T/evil.so" "$T/evil.so" "$T")
    vars=()
    case $where in
        etc) printf '%s\n' "$lines" >"$R/etc/nccl.conf" ;;
        home) printf '%s\n' "$lines" >"$R/home/u/.nccl.conf"; vars=(HOME=/home/u) ;;
        conffile) printf '%s\n' "$lines" >"$R/etc/other.conf"; vars=(NCCL_CONF_FILE=/etc/other.conf) ;;
    esac
    rm -f "$T/mark-$where"
    # the Pushgateway comes from the real environment, so that libcurl is loaded: from the
    # default soname, never from the file's PREFLIGHT_CURL_LIB
    (cd "$T" && timeout 60 env -i PATH="$PATH" NO_COLOR=1 POD_NAME=real-pod \
        ASAN_OPTIONS="${ASAN_OPTIONS:-}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-}" \
        PF_TEST_MARK="$T/mark-$where" PREFLIGHT_PUSHGATEWAY=http://127.0.0.1:9/ "${vars[@]}" \
        "$PREFLIGHT" check --root "$R" --format yaml --verdict - >"$T/$where.yaml" 2>"$T/$where.err")
    if [ -e "$T/mark-$where" ]; then
        notok "$where: PREFLIGHT_CURL_LIB from NCCL's config file is not loaded" "the library ran"
    else ok "$where: PREFLIGHT_CURL_LIB from NCCL's config file is not loaded"; fi
    expect_eq "$where: the pod's name is the environment's" "$(yq "$T/$where.yaml" 'd["pod"]["name"]')" real-pod
    expect_eq "$where: NCCL's own line is still read (shm-disabled)" \
        "$(yq "$T/$where.yaml" "'shm-disabled' in codes('nccl.env')")" True
    expect_eq "$where: no PREFLIGHT_* or identity variable in nccl.env's view" \
        "$(yq "$T/$where.yaml" "sorted(k for k in (check('nccl.env')['evidence'].get('variables') or {}) if not k.startswith('NCCL_'))")" "[]"
done
