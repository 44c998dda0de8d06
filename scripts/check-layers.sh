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
# The meeting returns facts and names no check (docs/design.md, "What the meeting
# concludes"): pkg/rendezvous/*.c holds no string literal "rendezvous" or "collective.tcp"
# outside comments; pkg/run/meet.c and pkg/fleet/agree.c name what it records.
for f in pkg/rendezvous/*.c; do
    while IFS= read -r hit; do
        echo "check-layers: $f:$hit: a check id in the meeting (pkg/run/meet.c and pkg/fleet/agree.c name its facts)"
        bad=1
    done < <(python3 - "$f" <<'PY'
import re, sys
src = open(sys.argv[1]).read()
# blank the comments, keeping line breaks (and string literals, which may hold "/*")
out, i, n = [], 0, len(src)
while i < n:
    if src.startswith("/*", i):
        j = src.find("*/", i + 2)
        j = n if j < 0 else j + 2
        out.append(re.sub(r"[^\n]", " ", src[i:j])); i = j
    elif src.startswith("//", i):
        j = src.find("\n", i)
        j = n if j < 0 else j
        out.append(" " * (j - i)); i = j
    elif src[i] in "\"'":
        q, j = src[i], i + 1
        while j < n and src[j] != q:
            j += 2 if src[j] == "\\" else 1
        out.append(src[i:j + 1]); i = j + 1
    else:
        out.append(src[i]); i += 1
for ln, line in enumerate("".join(out).split("\n"), 1):
    if re.search(r'"(rendezvous|collective\.tcp)"', line):
        print("%d: %s" % (ln, line.strip()))
PY
)
done
# The clock has one owner, pkg/run (docs/design.md, "The waits"): a wait is cut from the time
# left only by pkg/base's helpers and pkg/run/budget.c's table.
while IFS= read -r hit; do
    echo "check-layers: $hit: pf_clampd( outside pkg/base and pkg/run/budget.c (a row of pf_run_waits)"
    bad=1
done < <(grep -rn 'pf_clampd(' pkg cmd --include='*.[ch]' | grep -v -e '^pkg/base/' -e '^pkg/run/budget\.c:' | cut -d: -f1,2)
if [ $bad = 0 ]; then echo "check-layers: ok"; fi
exit $bad
