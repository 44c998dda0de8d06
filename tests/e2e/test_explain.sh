#!/usr/bin/env bash
# Every check id and every finding code the code can emit has a `preflight explain` entry:
# the ids and codes are collected from the sources under pkg/ (the string literals passed to
# the functions that add checks and findings), and each must explain with a "Default:"
# line followed by a "Class: spec|node|peer" line (the failure class that decides the exit
# code). Where the call names its check too, the pair "id/code" must explain, so a code
# documented under one check only does not hide its absence under another. A code under two
# checks explains with both sections.
source "$(dirname "$0")/lib.sh"

# collect: prints "kind<TAB>name" lines: "id ID", "code CODE", "pair ID/CODE", and "dynamic
# FILE: CALL" for a code argument that is neither a literal nor a known pass-through
python3 - "$PREFLIGHT_SRC/pkg" >"$T/names" <<'PY'
import glob, os, re, sys

# function -> (index of the check-id argument or None, index of the code argument or None)
ADDERS = {
    "pf_check_add_finding": (None, 1),
    "pf_fleet_finding": (1, 2),  # pkg/fleet: (summary, check, code, ...)
    "finding_for": (None, 3),    # pkg/report/k8s.c
    "render": (1, 2),            # pkg/verdict/guard.c: timeout and interrupted
    "pf_verdict_add_check": (1, None),
    "pf_verdict_guard_update": (1, None),
    # pkg/run (meet.c, pods.c, tcp.c, probes.c, rails.c, gpu.c, summary.c); pkg/rendezvous names
    # no check and no code (scripts/check-layers.sh holds it to that)
    "run_add_finding_text": (1, 2),
    "run_chk": (1, None),
    "run_guard": (1, None),
    "raise_finding": (None, 3),  # pkg/watch/judge.c: (watch, process, bit, code, ...)
    # a code a check could not decide (evidence.unknown) is explained like one it raises
    "pf_check_unknown": (None, 1),
}
# code arguments that pass a code through (checked where the literal is written)
# ("x->code": a finding of rank 0's SUMMARY, whose codes are collected where rank 0 adds them;
# "c->code": a claim of pkg/fleet/agree.c, whose codes are collected from its table below;
# "e.code": a row of pkg/run/meet.c's meet_ends, collected from the table below;
# "d->code": a trait of check gang (pkg/fleet/gang.c), whose codes are collected from its table;
# "f->code": a finding of pkg/watch, collected where raise_finding names it)
PASS_THROUGH = {"code", "forbidden_code", "use", "p[1]", "x->code", "c->code", "e.code", "d->code",
                "f->code"}

def strip_comments(s):
    s = re.sub(r"/\*.*?\*/", " ", s, flags=re.S)
    return re.sub(r"//[^\n]*", " ", s)

def args_at(src, i):
    """The top-level arguments of the call whose '(' is at src[i]."""
    depth, cur, out, j, q = 0, [], [], i, None
    while j < len(src):
        ch = src[j]
        if q:
            cur.append(ch)
            if ch == "\\":
                cur.append(src[j + 1]); j += 1
            elif ch == q:
                q = None
        elif ch in "\"'":
            q = ch; cur.append(ch)
        elif ch in "([{":
            depth += 1
            if depth > 1: cur.append(ch)
        elif ch in ")]}":
            depth -= 1
            if depth == 0:
                out.append("".join(cur).strip()); return out
            cur.append(ch)
        elif ch == "," and depth == 1:
            out.append("".join(cur).strip()); cur = []
        else:
            cur.append(ch)
        j += 1
    return out

seen = set()
def emit(*t):
    if t not in seen:
        seen.add(t); print("\t".join(t))

root = sys.argv[1]
for path in sorted(glob.glob(os.path.join(root, "**", "*.c"), recursive=True)):
    rel = os.path.relpath(path, os.path.dirname(root))
    src = strip_comments(open(path).read())
    # the table of every check (pkg/checks/checks.c): LOCAL(fam, name, ...) is the id
    # "fam.name", STAGE("id", ...), and entries written out: {"id", fn or NULL, PF_MODE_...}
    for m in re.finditer(r'(#define\s+)?\bLOCAL\(\s*([a-z0-9]+)\s*,\s*([a-z0-9]+)\s*,', src):
        if not m.group(1):
            emit("id", m.group(2) + "." + m.group(3))
    for m in re.finditer(r'\bSTAGE\(\s*"([a-z0-9.]+)"', src):
        emit("id", m.group(1))
    for m in re.finditer(r'\{\s*"([a-z0-9.]+)"\s*,\s*(pf_check_\w+|NULL)\s*,\s*PF_MODE_', src):
        emit("id", m.group(1))
    for m in re.finditer(r"\b(%s)\s*\(" % "|".join(ADDERS), src):
        fn = m.group(1)
        # a definition or prototype is not a call
        before = src[max(0, m.start() - 40):m.start()]
        if re.search(r"(void|int|struct pf_\w+ \*|char \*|bool)\s*\**\s*$", before):
            continue
        a = args_at(src, m.end() - 1)
        ci, ki = ADDERS[fn]
        lit = lambda s: re.fullmatch(r'"([^"\\]*)"', s or "")
        check = lit(a[ci]).group(1) if ci is not None and ci < len(a) and lit(a[ci]) else None
        if check:
            emit("id", check)
        if ki is None or ki >= len(a):
            continue
        codes = re.findall(r'"([a-z0-9-]+)"', a[ki])
        if not codes and a[ki] not in PASS_THROUGH:
            emit("dynamic", "%s: %s(..., %s, ...)" % (rel, fn, a[ki]))
        for c in codes:
            emit("code", c)
            if check:
                emit("pair", check + "/" + c)
    # the claims the ranks must agree on (pkg/fleet/agree.c): {.val = fn, .code = "code", ...}
    for m in re.finditer(r'struct claim \w+ = \{\s*\.val = \w+,\s*\.code = "([a-z0-9-]+)"', src):
        emit("code", m.group(1))
        emit("pair", "rendezvous/" + m.group(1))
    # the traits of check gang (pkg/fleet/gang.c): [PF_GANG_X] = {"key", "code", ...}
    for m in re.finditer(r'\[PF_GANG_\w+\]\s*=\s*\{\s*"[A-Za-z]+"\s*,\s*"([a-z0-9-]+)"', src):
        emit("code", m.group(1))
        emit("pair", "gang/" + m.group(1))
    # how this pod's meeting ended (pkg/run/meet.c): {.end = PF_RDV_END_..., .code = "code", ...}
    for m in re.finditer(r"meet_ends\[\]\s*=\s*\{(.*?)\n\};", src, flags=re.S):
        for c in re.findall(r'\.code\s*=\s*"([a-z0-9-]+)"', m.group(1)):
            emit("code", c)
            emit("pair", "rendezvous/" + c)
    # the words of a REJECT (pkg/wire/marks.c): a refused pod's verdict names its finding so
    for m in re.finditer(r'\[PF_WIRE_REFUSED_[A-Z]+\]\s*=\s*"([a-z0-9-]+)"', src):
        emit("code", m.group(1))
        emit("pair", "rendezvous/" + m.group(1))
PY

n_id=$(grep -c '^id' "$T/names")
n_code=$(grep -c '^code' "$T/names")
n_pair=$(grep -c '^pair' "$T/names")
# the collection itself: it must find the known ones, or the test proves nothing
for want in "id	rendezvous" "id	collective.tcp" "id	collective.nccl" "id	rdma.ports" \
    "code	missing-ranks" "code	slow-node" "code	port-down" "code	interrupted" \
    "code	events-forbidden" "pair	rendezvous/timeout" "pair	gang/gang-hca-count"; do
    grep -qxF "$want" "$T/names" || notok "sources: found '${want/	/ }'" "not collected"
done
if [ "$n_id" -ge 15 ] && [ "$n_code" -ge 60 ]; then
    ok "sources: $n_id check ids, $n_code finding codes, $n_pair id/code pairs collected from pkg/"
else
    notok "sources: check ids and finding codes collected from pkg/" "only $n_id ids, $n_code codes"
fi
dyn=$(sed -n 's/^dynamic\t//p' "$T/names")
if [ -z "$dyn" ]; then ok "sources: every finding code argument is a literal or passes one through"
else notok "sources: every finding code argument is a literal or passes one through" \
    "add the helper to this test: $(echo "$dyn" | tr '\n' ';')"; fi

# explain NAME: exit 0, and a section with a 'Default:' line (a check: its heading line); off a
# terminal the markdown is rendered as plain text: 'Default: fail', no markup
bad=""
while IFS=$'\t' read -r kind name; do
    [ "$kind" = dynamic ] && continue
    out=$("$PREFLIGHT" explain "$name" 2>"$T/err")
    rc=$?
    if [ $rc -ne 0 ]; then
        bad="$bad $kind:$name(exit $rc)"
    elif [ "$kind" != id ] && ! grep -q '^Default: ' <<<"$out"; then
        bad="$bad $kind:$name(no Default line)"
    elif [ "$kind" != id ] && [ "$(grep -A1 '^Default: ' <<<"$out" | grep -cE '^Class: (spec|node|peer)$')" \
        != "$(grep -c '^Default: ' <<<"$out")" ]; then
        bad="$bad $kind:$name(no Class line after a Default line)"
    elif [ "$kind" = id ] && ! grep -qxF "$name" <<<"$out"; then
        bad="$bad $kind:$name(no heading)"
    fi
done <"$T/names"
if [ -z "$bad" ]; then
    ok "explain: every check id, finding code and id/code pair emitted in pkg/ is documented"
else
    notok "explain: every check id, finding code and id/code pair emitted in pkg/ is documented" \
        "undocumented:$bad"
fi

# a code under two checks shows every section, each named by its check
out=$("$PREFLIGHT" explain nccl-version-mismatch 2>&1)
for want in "rendezvous / nccl-version-mismatch" "nccl.log / nccl-version-mismatch"; do
    if grep -qF "$want" <<<"$out"; then ok "explain nccl-version-mismatch: shows '$want'"
    else notok "explain nccl-version-mismatch: shows '$want'" "$(head -c 300 <<<"$out")"; fi
done
out=$("$PREFLIGHT" explain timeout 2>&1)
n=$(grep -c '^Default: ' <<<"$out")
for want in "rendezvous / timeout" "collective.tcp / timeout" "collective.nccl / timeout" \
    "preflight / timeout"; do
    if grep -qF "$want" <<<"$out"; then ok "explain timeout: shows '$want'"
    else notok "explain timeout: shows '$want'" "$(head -c 300 <<<"$out")"; fi
done
expect_eq "explain timeout: one Default line a section" "$n" 4
out=$("$PREFLIGHT" explain rendezvous/timeout 2>&1)
expect_eq "explain rendezvous/timeout: that section only" "$(grep -c '^Default: ' <<<"$out")" 1

# every documented code, emitted or not, has exactly one class right after its Default line
python3 - "$PREFLIGHT_SRC/docs/checks" >"$T/classes" <<'PY'
import glob, os, re, sys
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.md"))):
    lines = open(path).read().split("\n")
    check = code = None
    for i, l in enumerate(lines):
        if l.startswith("## `"): check, code = l.split("`")[1], None
        elif l.startswith("### `"): code = l.split("`")[1]
        elif l.startswith("**Default:**") and code:
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            m = re.fullmatch(r"\*\*Class:\*\* (spec|node|peer)", nxt)
            print("%s/%s\t%s" % (check, code, m.group(1) if m else "MISSING(%s)" % os.path.basename(path)))
PY
missing=$(grep -c MISSING "$T/classes")
if [ "$missing" = 0 ] && [ "$(wc -l <"$T/classes")" -ge 90 ]; then
    ok "docs/checks: all $(wc -l <"$T/classes") codes have a Class line after their Default line"
else notok "docs/checks: every code has a Class line after its Default line" \
    "$(grep MISSING "$T/classes" | tr '\n' ' ')"; fi
# explain shows the class, per check where a code has two
expect_eq "explain port-down: class node" "$("$PREFLIGHT" explain port-down | grep '^Class:')" "Class: node"
expect_eq "explain p2p-disabled: class spec" "$("$PREFLIGHT" explain p2p-disabled | grep '^Class:')" "Class: spec"
expect_eq "explain rendezvous/missing-ranks: class peer" \
    "$("$PREFLIGHT" explain rendezvous/missing-ranks | grep '^Class:')" "Class: peer"
expect_eq "explain timeout: rendezvous peer, preflight node" \
    "$("$PREFLIGHT" explain timeout | grep -E '^(Class:|[a-z.]+ / timeout$)' | tr '\n' ' ')" \
    "rendezvous / timeout Class: peer collective.tcp / timeout Class: peer collective.nccl / timeout Class: peer preflight / timeout Class: node "

# every documented code says what evidence it needs (an "**Evidence:**" paragraph in its section
# of docs/checks/*.md), and `preflight explain` prints it: a code without one fails here
python3 - "$PREFLIGHT_SRC/docs/checks" >"$T/evidence" <<'PY'
import glob, os, sys
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.md"))):
    check = code = None
    has = False
    for l in open(path).read().split("\n") + ["### `END`"]:
        if l.startswith("## `") or l.startswith("### `"):
            if code:
                print("%s/%s\t%s" % (check, code, "ok" if has else "MISSING(%s)" % os.path.basename(path)))
            if l.startswith("## `"): check, code = l.split("`")[1], None
            else: code = l.split("`")[1]
            has = False
        elif l.startswith("**Evidence:**") and code:
            has = True
PY
n_ev=$(wc -l <"$T/evidence")
if ! grep -q MISSING "$T/evidence" && [ "$n_ev" -ge 150 ]; then
    ok "docs/checks: all $n_ev codes have an Evidence paragraph"
else notok "docs/checks: every code has an Evidence paragraph" \
    "$n_ev sections; $(grep MISSING "$T/evidence" | tr '\n' ' ')"; fi
# and every code emitted in pkg/ is among them, under the check that emits it where it says
bad=""
while IFS=$'\t' read -r kind name; do
    case $kind in
    code) grep -q "/$name	ok$" "$T/evidence" || bad="$bad $name" ;;
    pair) grep -q "^$name	ok$" "$T/evidence" || bad="$bad $name" ;;
    esac
done <"$T/names"
if [ -z "$bad" ]; then ok "evidence: every finding code emitted in pkg/ has an Evidence paragraph"
else notok "evidence: every finding code emitted in pkg/ has an Evidence paragraph" "missing:$bad"; fi
out=$("$PREFLIGHT" explain no-roce-gid 2>&1)
if grep -q '^Evidence: ' <<<"$out"; then ok "explain no-roce-gid: prints its Evidence paragraph"
else notok "explain no-roce-gid: prints its Evidence paragraph" "$(head -c 300 <<<"$out")"; fi
