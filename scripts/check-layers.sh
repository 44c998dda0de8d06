#!/usr/bin/env bash
# Fails when an #include crosses the module edges that pkg/README.md allows (its "layers"
# block; "layers-transitional" lists edges accepted until they are removed). Checks every
# pkg/<module>/*.[ch] and cmd/preflight/*.[ch]; prints one line per bad edge. Also fails when
# a module but pkg/run reads the clock (below).
set -u
cd "$(dirname "$0")/.."
readme=pkg/README.md
declare -A allow trans known
read_block() { # FENCE-NAME ARRAY-NAME
    local in=0 line mod deps
    while IFS= read -r line; do
        if [ "$line" = "\`\`\`$1" ]; then in=1; continue; fi
        [ $in = 1 ] && [ "$line" = '```' ] && break
        [ $in = 1 ] || continue
        mod=${line%%:*}
        deps=${line#*:}
        [ -n "$mod" ] || continue
        known[$mod]=1
        local -n arr=$2
        arr[$mod]=" ${arr[$mod]:-}$deps "
    done <"$readme"
}
read_block layers allow
read_block layers-transitional trans
bad=0
for dir in pkg/*/ cmd/preflight/; do
    if [ "$dir" = cmd/preflight/ ]; then mod=cmd; else mod=$(basename "$dir"); fi
    if [ -z "${known[$mod]:-}" ]; then
        echo "check-layers: module '$mod' ($dir) is not listed in $readme"
        bad=1
        continue
    fi
    for f in "$dir"*.[ch]; do
        [ -f "$f" ] || continue
        while IFS=: read -r ln dep; do
            [ "$dep" = "$mod" ] && continue
            case "${allow[$mod]:-}" in *" $dep "*) continue ;; esac
            case "${trans[$mod]:-}" in *" $dep "*)
                echo "check-layers: note: $f:$ln: $mod -> $dep (transitional edge)"
                continue ;;
            esac
            echo "check-layers: $f:$ln: $mod -> $dep is not an allowed edge ($readme)"
            bad=1
        done < <(grep -nE '^#include "(\.\./)+(pkg/)?[a-z0-9_]+/' "$f" |
            sed -E 's#^([0-9]+):\#include "(\.\./)+(pkg/)?([a-z0-9_]+)/.*#\1:\4#')
    done
done
# The clock has one owner, pkg/run (docs/design.md, "The waits"): only pkg/run/run.c may name
# the guard's time, and a wait is cut from the time left only by pkg/base's helpers and
# pkg/run/budget.c's table.
while IFS= read -r hit; do
    echo "check-layers: $hit: pf_verdict_guard_remaining outside pkg/run/run.c (pf_ctx_left, pf_run_wait)"
    bad=1
done < <(grep -rnw pf_verdict_guard_remaining pkg cmd --include='*.[ch]' | grep -v '^pkg/run/run\.c:' | cut -d: -f1,2)
while IFS= read -r hit; do
    echo "check-layers: $hit: pf_clampd( outside pkg/base and pkg/run/budget.c (a row of pf_run_waits)"
    bad=1
done < <(grep -rn 'pf_clampd(' pkg cmd --include='*.[ch]' | grep -v -e '^pkg/base/' -e '^pkg/run/budget\.c:' | cut -d: -f1,2)
if [ $bad = 0 ]; then echo "check-layers: ok"; fi
exit $bad
