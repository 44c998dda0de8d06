#!/usr/bin/env bash
# The docs' claims that can be checked, read against the code, as test_explain.sh reads
# docs/checks.md against the check and finding tables: the exit codes (README.md,
# docs/verdict.md, `preflight --help` against cmd/preflight/cli.h and pkg/verdict/verdict.h);
# the Job failure policies (manifests/, the chart's test Job, the chart's README and
# docs/scheduling.md) against those codes; the option table of docs/configuration.md and the
# README's list of options without a variable against each command's --help (which
# cmd/preflight/help.c prints from the table the parser refuses options by); the config
# defaults of docs/configuration.md against pkg/config/config.c; `make bench`'s rank counts;
# and the README's demo excerpt against the command `make demo` runs.
source "$(dirname "$0")/lib.sh"
trap 'rm -rf "$T"' EXIT
S=$PREFLIGHT_SRC

for c in "" run check env log explain install version watch inject report; do
    env -i PATH="$PATH" "$PREFLIGHT" $c --help >"$T/help-${c:-all}.txt" 2>&1
done

# ---- exit codes: the numbers in the code, and what each doc says of them
pyok() { "$@" || notok "$3: the docs test's reader" "exited $?"; }
pyok python3 - "$S" "$T" <<'PY'
import re, sys
src, t = sys.argv[1], sys.argv[2]
def read(p): return open(p).read()
code = read(src + "/cmd/preflight/cli.h") + read(src + "/pkg/verdict/verdict.h")
num = {k: int(v) for k, v in re.findall(r"PF_EXIT_(\w+) = (\d+)", code)}
want = {num["PASS"]: "pass|otherwise", num["FAIL"]: "no class", num["USAGE"]: "usage",
        num["CLASS_SPEC"]: "spec", num["CLASS_NODE"]: "node", num["CLASS_PEER"]: "peer",
        num["UNKNOWN"]: "log"}
print("ok - exit codes in the code: %s" % sorted(want.items()))
docs = {"README.md": read(src + "/README.md"), "docs/verdict.md": read(src + "/docs/verdict.md"),
        "preflight --help": read(t + "/help-all.txt")}
for name, text in docs.items():
    flat = " ".join(text.split())
    bad = [c for c, w in want.items()
           if not re.search(r"`?\b%d\b`?[^0-9.;]{0,40}?(%s)" % (c, w), flat)]
    print(("ok - %s: every exit code with its meaning" % name) if not bad else
          "not ok - %s: exit codes not said as the code has them: %s" % (name, [(c, want[c]) for c in bad]))
    if name != "docs/verdict.md":
        ok = re.search(r"\b%d\b[^.]{0,80}verdict file could not be written" % num["FAIL"], flat)
        print(("ok - %s: exit %d when the verdict file could not be written" % (name, num["FAIL"])) if ok
              else "not ok - %s: does not say that an unwritten verdict exits %d" % (name, num["FAIL"]))

# ---- failure policies: FailJob on what retrying cannot fix, Count on node and peer
failjob = sorted([num["FAIL"], num["USAGE"], num["CLASS_SPEC"]])
count = [[num["CLASS_NODE"]], [num["CLASS_PEER"]]]
import glob
files = sorted(glob.glob(src + "/manifests/*.yaml")) + [src + "/helm/preflight/templates/test-job.yaml"]
seen = 0
for f in files:
    text = read(f)
    for action, values in re.findall(r"action: (\w+)[^\n]*\n(?:[^\n]*\n){0,4}?\s*values: \[([\d, ]+)\]", text):
        vals = [int(x) for x in values.split(",")]
        seen += 1
        right = (action == "FailJob" and vals == failjob) or (action == "Count" and vals in count)
        if not right:
            print("not ok - %s: %s on %s (FailJob on %s, Count on %s)" % (f[len(src)+1:], action, vals, failjob, count))
print(("ok - %d podFailurePolicy rules in manifests/ and the chart: FailJob on %s, Count on 4 and 5" % (seen, failjob))
      if seen >= 3 else "not ok - podFailurePolicy rules found: %d" % seen)
for doc, pat in (("helm/preflight/README.md", r"FailJob`?\s+on exit ([\d, ]+\d)"),
                 ("docs/scheduling.md", r"exit ([\d, ]+\d) of preflight")):
    m = re.search(pat, " ".join(read(src + "/" + doc).split()))
    got = [int(x) for x in m.group(1).split(",")] if m else None
    print(("ok - %s: FailJob on %s" % (doc, got)) if got == failjob else
          "not ok - %s: says FailJob on %s, the policies have %s" % (doc, got, failjob))
PY

# ---- options: docs/configuration.md's table and the README against each command's help
pyok python3 - "$S" "$T" <<'PY'
import re, sys
src, t = sys.argv[1], sys.argv[2]
cmds = ["run", "check", "env", "log", "explain", "install", "version", "watch", "inject", "report"]
def options(text):
    """{--flag: variable or None} of a help's options section"""
    out, cur = {}, None
    if "options [environment variable]" not in text: return out
    sect = text.split("options [environment variable]", 1)[1]
    sect = re.split(r"\n(?:output|exit codes|examples):", sect)[0]
    for line in sect.splitlines():
        m = re.match(r"  (?:-[a-z], )?(--[a-z-]+)", line)
        if m:
            cur = m.group(1); out[cur] = None
        v = re.search(r"\[(PREFLIGHT_[A-Z_]+)", line)
        if v and cur and cur not in ("--help",): out[cur] = v.group(1)
    return out
takes = {}
allopts = options(open(t + "/help-all.txt").read())
for c in cmds:
    for o in options(open(t + "/help-%s.txt" % c).read()):
        takes.setdefault(o, set()).add(c)
for o in ("--help", "--version"):  # every command's, and the binary's
    allopts.pop(o, None); takes.pop(o, None)
conf = open(src + "/docs/configuration.md").read()
rows = re.findall(r"^\| `(-[a-z]`, `)?(--[a-z-]+)[^`]*`(?: \(([a-z, ]+)\))? \| (`(PREFLIGHT_[A-Z_]+)`|—) \|", conf, re.M)
table = {}
for _, flag, named, _, var in rows:
    table[flag] = (set(x.strip() for x in named.split(",")) if named else {"run", "check", "env", "log"}, var or None)
bad = []
for o, var in allopts.items():
    if o not in table: bad.append("%s: no row" % o); continue
    if table[o][1] != var: bad.append("%s: variable %s, help says %s" % (o, table[o][1], var))
    if table[o][0] != takes.get(o, set()): bad.append("%s: commands %s, help says %s" % (o, sorted(table[o][0]), sorted(takes.get(o, set()))))
for o in table:
    if o not in allopts: bad.append("%s: a row, but no such option" % o)
print(("ok - docs/configuration.md: %d options, each with its commands and variable as --help has them" % len(table))
      if not bad else "not ok - docs/configuration.md's option table: %s" % "; ".join(bad))
novar = {o for o, v in allopts.items() if v is None}
for doc in ("README.md", "docs/configuration.md"):
    flat = " ".join(open(src + "/" + doc).read().split())
    m = re.search(r"Every option but (.*?) ha(?:s|ve) an? (?:`PREFLIGHT_\*` )?variable", flat)
    said = set(re.findall(r"`(--[a-z-]+)`", m.group(1))) - {"--help", "--version"} if m else None
    print(("ok - %s: the options without a variable: %s" % (doc, sorted(novar))) if said == novar else
          "not ok - %s: says %s have no variable, --help says %s" % (doc, sorted(said) if said is not None else None, sorted(novar)))
PY

# ---- config defaults: docs/configuration.md's default column against pf_config_defaults
pyok python3 - "$S" <<'PY'
import re, sys
src = sys.argv[1]
c = open(src + "/pkg/config/config.c").read()
tables = {}
for name in re.findall(r"static const struct field (\w+)\[\] = \{", c):
    start = c.index("struct field %s[] = {" % name)
    tables[name] = c[start:c.index("\n};", start)]
fields = {}  # key -> (macro, member, enum names)
def walk(tab, prefix):
    for macro, key, rest in re.findall(r"\b(INT|NUM|BOOL|STR|PATH|ENUM|ENUM_STR|MAP)\(\"(\w+)\", (.*?)\)", tables[tab], re.S):
        parts = [p.strip() for p in rest.split(",")]
        if macro == "MAP": walk(parts[0], prefix + key + ".")
        else: fields[prefix + key] = (macro, parts[0], [p.strip('"') for p in parts[1:]])
walk("top_fields", "")
body = re.search(r"void pf_config_defaults\(.*?\n\}", c, re.S).group(0)
dflt = {m: v.strip() for m, v in re.findall(r"c->(\w+) = ([^;]+);", body)}
dflt.update({m: '"%s"' % v for m, v in re.findall(r'strcpy\(c->(\w+), "([^"]*)"\)', body)})
doc = open(src + "/docs/configuration.md").read().replace("\\|", "/")
checked, bad = 0, []
for key, default in re.findall(r"^\| `([\w.]+)` \| [^|]+\| ([^|]+) \|", doc, re.M):
    if key not in fields: continue
    macro, member, names = fields[key]
    d = default.strip()
    code = dflt.get(member)
    if macro in ("INT", "NUM"):
        v = None if code is None else eval(re.sub(r"(\d)ll\b", r"\1", code))
        if d == "unset": right = v is not None and v < 0
        else:
            m = re.match(r"`([\d.]+)`", d)
            right = m is not None and float(m.group(1)) == (v or 0)
    elif macro == "BOOL": right = d == "`%s`" % ("true" if code == "true" else "false")
    elif macro == "ENUM":
        # unset: 0, the first name; set: a constant naming it (PF_RDMA_AUTO for auto)
        right = (code is None and d == "`%s`" % names[0]) or \
                (code is not None and code.endswith("_" + d.strip("`").upper()))
    elif macro == "ENUM_STR": right = (code is None and d == "unset") or (code is not None and d == "`%s`" % code.strip('"'))
    else: right = (code is None and d in ('`""`', "none: one group")) or (code is not None and d.strip("`") == code.strip('"'))
    checked += 1
    if not right: bad.append("%s: docs %s, code %s" % (key, d, code))
print(("ok - docs/configuration.md: %d defaults as pf_config_defaults sets them" % checked) if not bad and checked >= 20
      else "not ok - docs/configuration.md defaults (%d checked): %s" % (checked, "; ".join(bad)))
PY

# ---- make bench's rank counts
want=$(sed -n 's/.*BENCH_SCALE_N", "\([0-9 ]*\)").*/\1/p' "$S/tests/bench/bench_scale.sh")
said=$(tr '\n' ' ' <"$S/README.md" | sed -n 's/.*`make bench` runs \([0-9,]*\) and \([0-9,]*\) *ranks.*/\1 \2/p' | tr -d ,)
expect_eq "README: make bench's rank counts are bench_scale.sh's default ($want)" "$said" "$want"

# ---- the README's demo excerpt: the header `make demo` prints (scripts/demo.sh's second
# command, on the same fixture, with a real tmpfs at /dev/shm as the demo mounts one)
if need_root "README demo excerpt"; then
    "$FIX/materialize.sh" "$FIX/node-ports-bad" "$T/bad" >/dev/null
    mkdir -p "$T/bad/dev/shm"
    if mount -t tmpfs -o size=16g tmpfs "$T/bad/dev/shm"; then
        : >"$T/demo.yaml"
        env -i PATH="$PATH" "$PREFLIGHT" version | grep -qE '^ *libnccl\.so\.2 +missing' &&
            printf 'policy:\n  findings: {nccl-missing: warn}\n' >"$T/demo.yaml"
        env -i PATH="$PATH" NO_COLOR=1 NCCL_P2P_DISABLE=1 POD_NAME=trainer-5 POD_NAMESPACE=ml \
            PREFLIGHT_COUNTERS_WINDOW=0 NODE_NAME=gpu-node-22 ASAN_OPTIONS="${ASAN_OPTIONS:-}" \
            "$PREFLIGHT" check --root "$T/bad" --config "$T/demo.yaml" >"$T/demo.out" 2>/dev/null
        umount "$T/bad/dev/shm"
        expect_eq "README: the demo excerpt's header is what make demo prints" \
            "$(grep -m1 '^preflight FAIL' "$S/README.md")" "$(head -1 "$T/demo.out")"
        expect_eq "README: the demo excerpt's skip line is what make demo prints" \
            "$(sed -n '/^skip  gpu.devices/,/says why)/p' "$S/README.md" | tr -s ' \n' ' ')" \
            "$(sed -n '/^skip  gpu.devices/,/says why)/p' "$T/demo.out" | tr -s ' \n' ' ')"
    else
        skip "README demo excerpt" "cannot mount a tmpfs"
    fi
fi

# ---- the chart's NOTES.txt: the test pods' logs are the human form, never called YAML
if grep -qE "logs.*\(YAML\)|verdict \(YAML\), and" "$S/helm/preflight/templates/NOTES.txt"; then
    notok "NOTES.txt: the pods' logs are not YAML" "$(grep -n YAML "$S/helm/preflight/templates/NOTES.txt")"
else ok "NOTES.txt: the pods' logs are not called YAML"; fi
check "NOTES.txt: the test's preflight prints the human form (no --format yaml in the chart)" \
    bash -c "! grep -rqE -- '--format.{0,3}yaml|PREFLIGHT_FORMAT' '$S/helm/preflight/templates'"
# the chart README's securityContext row: the template replaces, never merges
check "chart README: securityContext replaces the chart's (as _helpers.tpl does)" \
    bash -c "grep -q 'toYaml \$v.securityContext' '$S/helm/preflight/templates/_helpers.tpl' && grep -q 'replaces (is not merged with)' '$S/helm/preflight/README.md' && ! grep -q 'merged over' '$S/helm/preflight/README.md'"
