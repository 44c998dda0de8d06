#!/usr/bin/env bash
# Fails when an #include crosses the module edges that pkg/README.md allows (its "layers"
# block; "layers-transitional" lists edges accepted until they are removed). Checks every
# pkg/<module>/*.[ch] and cmd/preflight/*.[ch]; prints one line per bad edge.
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
if [ $bad = 0 ]; then echo "check-layers: ok"; fi
exit $bad
