# Shared helpers for the end-to-end scripts (sourced). Each test prints one TAP-like line:
# "ok - name", "not ok - name: why" or "skip - name: why"; tests/run.sh counts them.
# $PREFLIGHT is the sanitizer build under test; $PREFLIGHT_SRC the repository.
set -u
: "${PREFLIGHT:?run through tests/run.sh or set PREFLIGHT}"
: "${PREFLIGHT_SRC:=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
FIX="$PREFLIGHT_SRC/tests/fixtures"
T=$(mktemp -d /tmp/preflight-e2e.XXXXXX)
trap 'rm -rf "$T"' EXIT

ok() { echo "ok - $1"; }
notok() { echo "not ok - $1${2:+: $2}"; }
skip() { echo "skip - $1${2:+: $2}"; }

# check NAME CONDITION-COMMAND...: ok when the command succeeds
check() {
    local name=$1; shift
    if "$@"; then ok "$name"; else notok "$name" "failed: $*"; fi
}

# yq FILE EXPR: evaluates a Python expression over the YAML document `d`; prints the result
# (lists and dicts as JSON). Example: yq v.yaml 'd["verdict"]'
# Every verdict read this way is also checked to read back as written under YAML 1.1 and 1.2
# (yamlcheck.py): a problem prints a "not ok" line on stderr, which the test's log counts.
yq() {
    python3 - "$1" "$2" <<'PY'
import json, os, sys, yaml
sys.path.insert(0, os.path.join(os.environ.get("PREFLIGHT_SRC", "."), "tests", "e2e"))
with open(sys.argv[1]) as f:
    text = f.read()
d = yaml.safe_load(text)
if isinstance(d, dict) and d.get("apiVersion") == "preflight/v1" and d.get("kind") == "Verdict":
    import yamlcheck
    for p in yamlcheck.problems(text):
        print("\nnot ok - verdict reads back as written: %s: %s" % (sys.argv[1], p), file=sys.stderr)
def check(cid):
    for c in d.get("checks", []):
        if c["id"] == cid:
            return c
    return None
def codes(cid):
    c = check(cid)
    return sorted(x["code"] for x in (c or {}).get("findings", []) or [])
r = eval(sys.argv[2])
print(json.dumps(r) if isinstance(r, (list, dict)) else r)
PY
}

# expect_eq NAME ACTUAL EXPECTED
expect_eq() {
    if [ "$2" = "$3" ]; then ok "$1"; else notok "$1" "expected '$3', got '$2'"; fi
}

need_root() {
    [ "$(id -u)" -eq 0 ] || { skip "$1" "needs root"; return 1; }
}
