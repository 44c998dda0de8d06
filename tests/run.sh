#!/usr/bin/env bash
# Runs the unit tests (cmocka binaries), the end-to-end scripts and the fuzz regression,
# and ends with one line: "tests: N passed, M failed, K skipped".
#   tests/run.sh [unit|e2e|fuzz|all] [name-filter]
set -u
cd "$(dirname "$0")/.."
what=${1:-all}
filter=${2:-}
B=build/san
export PREFLIGHT="$PWD/$B/preflight"          # sanitizer build: what the tests exercise
export PREFLIGHT_REL="$PWD/bin/preflight"       # release build (ldd, bench)
export PREFLIGHT_STATIC="$PWD/bin/preflight-static"
export PREFLIGHT_SRC="$PWD"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export NO_COLOR=1
# NVIDIA's NCCL from PyPI (scripts/nvidia-pypi.sh, fetched by scripts/deps.sh test): the
# library preflight loads wherever a test does not choose one itself, as on a machine where
# the training image ships NCCL
eval "$(scripts/nvidia-pypi.sh env)"
export NVIDIA_NCCL_LIB
# nvml.h (the same script): test_gpu_health.sh compiles the NVML double against it
if [ -z "${NVML_INCLUDE:-}" ] && [ -n "${NVIDIA_NVML_INCLUDE:-}" ]; then
    export NVML_INCLUDE="$NVIDIA_NVML_INCLUDE"
fi
if [ -z "${PREFLIGHT_NCCL_LIB:-}" ] && [ -n "${NVIDIA_NCCL_LIB:-}" ]; then
    export PREFLIGHT_NCCL_LIB="$NVIDIA_NCCL_LIB"
fi
passed=0 failed=0 skipped=0
failures=()
log=$(mktemp -d /tmp/preflight-tests.XXXXXX)
# The scripts' python3 is Debian's (deps.sh installs python3-yaml for it), not a version
# manager's shim that may come first on PATH and costs a fork chain on every call.
if [ -x /usr/bin/python3 ]; then
    mkdir -p "$log/bin" && ln -sf /usr/bin/python3 "$log/bin/python3" && export PATH="$log/bin:$PATH"
fi

count_tap() { # file name
    local p f s
    p=$(grep -cE '^ok ' "$1" || true)
    f=$(grep -cE '^not ok ' "$1" || true)
    s=$(grep -cE '^skip ' "$1" || true)
    passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
    if [ "$f" -gt 0 ]; then
        while read -r line; do failures+=("$2: $line"); done < <(grep -E '^not ok ' "$1")
    fi
}

if [ "$what" = unit ] || [ "$what" = all ]; then
    # one binary per source, tests/unit/<module>/test_*.c -> $B/tests/<module>/test_* (a
    # binary left from a source that moved or went is not run)
    for src in tests/unit/test_*.c tests/unit/*/test_*.c; do
        [ -f "$src" ] || continue
        t=$B/tests/${src#tests/unit/}
        t=${t%.c}
        name=$(basename "$t")
        if [ ! -x "$t" ]; then
            [ -n "$filter" ] && [[ "$name" != *"$filter"* ]] && continue
            echo "== unit $name: $t is not built (make ASAN=1 UBSAN=1 unit-build)"
            failed=$((failed + 1)); failures+=("$name: not built")
            continue
        fi
        [ -n "$filter" ] && [[ "$name" != *"$filter"* ]] && continue
        echo "== unit $name"
        out="$log/$name.log"
        (cd tests && CMOCKA_MESSAGE_OUTPUT=stdout "../$t") >"$out" 2>&1
        rc=$?
        p=$(sed -nE 's/^\[  PASSED  \] ([0-9]+) test.*/\1/p' "$out" | tail -1)
        f=$(sed -nE 's/^\[  FAILED  \] ([0-9]+) test.*/\1/p' "$out" | tail -1)
        p=${p:-0}; f=${f:-0}
        if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then f=1; fi
        passed=$((passed + p)); failed=$((failed + f))
        if [ "$f" -gt 0 ]; then failures+=("$name"); cat "$out"; else echo "   $p passed"; fi
    done
fi

if [ "$what" = e2e ] || [ "$what" = all ]; then
    for t in tests/e2e/test_*.sh; do
        [ -f "$t" ] || continue
        name=$(basename "$t" .sh)
        [ -n "$filter" ] && [[ "$name" != *"$filter"* ]] && continue
        echo "== e2e $name"
        out="$log/$name.log"
        start=$(date +%s)
        timeout 900 bash "$t" >"$out" 2>&1
        rc=$?
        count_tap "$out" "$name"
        if [ $rc -ne 0 ] && ! grep -qE '^not ok ' "$out"; then
            failed=$((failed + 1)); failures+=("$name: exited $rc")
        fi
        if [ $rc -ne 0 ] || grep -qE '^not ok ' "$out"; then cat "$out"; else
            echo "   $(grep -cE '^ok ' "$out") passed, $(grep -cE '^skip ' "$out") skipped ($(( $(date +%s) - start )) s)"
            grep -E '^skip ' "$out" | sed 's/^/   /'
        fi
    done
fi

if [ "$what" = fuzz ] || [ "$what" = all ]; then
    if ls tests/fuzz/fuzz_*.c >/dev/null 2>&1; then
        echo "== fuzz regression (seed corpora)"
        if make -s -j"$(nproc)" fuzz-regress >"$log/fuzz.log" 2>&1; then
            n=$(grep -c '^ok ' "$log/fuzz.log" || true); passed=$((passed + n)); echo "   $n passed"
        else
            failed=$((failed + 1)); failures+=("fuzz regression"); cat "$log/fuzz.log"
        fi
    fi
fi

echo
if [ ${#failures[@]} -gt 0 ]; then
    echo "failures:"; printf '  %s\n' "${failures[@]}"
fi
echo "tests: $passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
