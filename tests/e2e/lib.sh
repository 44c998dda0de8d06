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

# ---- running the binary under test, for the scripts that drive the command line
# (test_cli.sh, test_security.sh). $BIN is the binary (default $PREFLIGHT); $L, when set,
# prefixes every test name (test_cli.sh runs its suite once per build).

# p NAME [VAR=VALUE...] -- ARGS...: runs $BIN in $T with a clean environment (PATH, HOME
# /nonexistent, NO_COLOR, the sanitizer options, then VAR=VALUE...), 60 s at most; stdout,
# stderr and the exit code go to $T/NAME.{out,err,rc}
p() {
    local name=$1
    shift
    local vars=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do vars+=("$1"); shift; done
    shift
    (cd "$T" && timeout 60 env -i PATH="$PATH" HOME=/nonexistent NO_COLOR=1 \
        ASAN_OPTIONS="${ASAN_OPTIONS:-}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-}" "${vars[@]}" \
        "${BIN:-$PREFLIGHT}" "$@" >"$T/$name.out" 2>"$T/$name.err")
    echo $? >"$T/$name.rc"
}
# rc_is NAME CODE: the exit code of run NAME
rc_is() { expect_eq "${L:-}$1: exit code $2" "$(cat "$T/$1.rc")" "$2"; }
# err_has / err_lacks / out_has NAME TEXT: TEXT (fixed string) on run NAME's stderr / stdout
err_has() {
    if grep -qF -- "$2" "$T/$1.err"; then ok "${L:-}$1: stderr says '$2'"; else
        notok "${L:-}$1: stderr says '$2'" "stderr: $(head -c 400 "$T/$1.err")"
    fi
}
err_lacks() {
    if grep -qF -- "$2" "$T/$1.err"; then notok "${L:-}$1: stderr does not say '$2'" "it does"; else
        ok "${L:-}$1: stderr does not say '$2'"
    fi
}
out_has() {
    if grep -qF -- "$2" "$T/$1.out"; then ok "${L:-}$1: stdout says '$2'"; else
        notok "${L:-}$1: stdout says '$2'" "stdout: $(head -c 400 "$T/$1.out")"
    fi
}
# wait_for_text FILE REGEX [SECONDS]: until REGEX (grep -E) matches a line of FILE; SECONDS
# (default 20) at most, looked at every 0.1 s
wait_for_text() {
    local k
    for ((k = 0; k < ${3:-20} * 10; k++)); do
        grep -qE -- "$2" "$1" 2>/dev/null && return 0
        sleep 0.1
    done
    return 1
}

# ---- a network namespace of the script's own, with lo up, for `preflight run` (rank 0
# listens on a port): own_netns NAME makes it as root with ip and sets NS=NAME and HAVE_NS=1;
# without, HAVE_NS stays empty and the cases that need it skip. del_netns, in the script's
# cleanup, removes it.
own_netns() {
    NS=$1
    HAVE_NS=
    if [ "$(id -u)" -eq 0 ] && command -v ip >/dev/null && ip netns add "$NS" 2>/dev/null; then
        ip -n "$NS" link set lo up
        HAVE_NS=1
    fi
}
del_netns() {
    if [ -n "${HAVE_NS:-}" ]; then ip netns del "$NS" 2>/dev/null; fi
    return 0
}

# links_up NS IFACE...: waits (bounded: 5 s an interface) until each interface in namespace NS
# is operationally UP (carrier seen and IFF_RUNNING set, which the kernel does shortly after
# the link comes up)
links_up() {
    local ns=$1 i
    shift
    for i in "$@"; do
        for _ in $(seq 100); do
            ip -n "$ns" -o link show dev "$i" | grep -q 'state UP' && break
            sleep 0.05
        done
    done
}

# both_builds NAME FUNCTION: runs FUNCTION against the sanitizer build (BIN=$PREFLIGHT, L=""),
# then against bin/preflight-static (L="static: ") when it is built, else skips "static: NAME"
both_builds() {
    L="" BIN=$PREFLIGHT
    "$2"
    if [ -x "${PREFLIGHT_STATIC:-}" ]; then
        L="static: " BIN=$PREFLIGHT_STATIC
        "$2"
    else
        skip "static: $1" "bin/preflight-static not built (make static)"
    fi
}

# free_port: prints a free loopback port p with p + 1 free as well (a run's data mesh and GPU
# stage listen next to its rendezvous port). Both are tried with SO_REUSEADDR, as preflight
# binds them: a port held only by connections in TIME_WAIT (thousands of them after a large
# run on the same machine) is free for preflight, and must not make the search fail.
free_port() {
    python3 -c 'import socket, sys
def bindable(p):
    t = socket.socket(); t.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        t.bind(("127.0.0.1", p)); return True
    except OSError:
        return False
    finally:
        t.close()
for _ in range(500):
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close()
    if p < 65535 and bindable(p + 1):
        print(p); break
else:
    sys.exit("free_port: no two free loopback ports in a row after 500 tries")'
}

# ---- the node's NCCL: a fixture node with GPUs needs a libnccl.so.2 that loads, or
# nccl.library fails it (nccl-missing). tests/run.sh sets PREFLIGHT_NCCL_LIB to NCCL's PyPI
# wheel (scripts/nvidia-pypi.sh); a script that runs preflight under `env -i` passes it on with
# "${NODE_NCCL[@]}" (empty where no NCCL is at hand, and the cases that need one skip).
NODE_NCCL=()
if [ -n "${PREFLIGHT_NCCL_LIB:-}" ]; then NODE_NCCL=(PREFLIGHT_NCCL_LIB="$PREFLIGHT_NCCL_LIB"); fi

# ---- a resolver that never answers: silent_dns NAME LABEL makes the script's own network
# namespace NAME (own_netns) whose resolv.conf names 127.0.0.1 and tells glibc to wait 30 s for
# it (options timeout:30 attempts:1), and runs a real UDP server on 127.0.0.1:53 there that
# takes every query and answers none; $T/dns.state says "ready", then "queries N". Without a
# namespace it skips LABEL and the script ends (exit 0). Sets the EXIT trap: the server is
# stopped, the namespace and its /etc/netns folder removed, $T removed.
silent_dns() {
    own_netns "$1"
    if [ -z "$HAVE_NS" ]; then skip "$2" "cannot make a network namespace"; exit 0; fi
    mkdir -p "/etc/netns/$NS"
    printf 'nameserver 127.0.0.1\noptions timeout:30 attempts:1\n' >"/etc/netns/$NS/resolv.conf"
    trap silent_dns_cleanup EXIT
    cat >"$T/silent_dns.py" <<'PY'
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 53))
open(sys.argv[1], "w").write("ready\n")
n = 0
while True:  # take every query, answer none
    s.recvfrom(4096)
    n += 1
    open(sys.argv[1], "w").write("queries %d\n" % n)
PY
    ip netns exec "$NS" python3 "$T/silent_dns.py" "$T/dns.state" &
    DNS_PID=$!
    for _ in $(seq 50); do [ -s "$T/dns.state" ] && break; sleep 0.1; done
}
silent_dns_cleanup() {
    [ -n "${DNS_PID:-}" ] && kill "$DNS_PID" 2>/dev/null
    rm -rf "/etc/netns/$NS"
    del_netns
    rm -rf "$T"
}

# silent_dns_asked LABEL: ok when the name went to silent_dns's server (it took a query)
silent_dns_asked() {
    case "$(cat "$T/dns.state")" in
        queries*) ok "$1 ($(cat "$T/dns.state"))" ;;
        *) notok "$1" "$(cat "$T/dns.state")" ;;
    esac
}
