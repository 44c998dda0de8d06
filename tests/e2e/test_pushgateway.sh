#!/usr/bin/env bash
# The push to a Prometheus Pushgateway, end to end, against a real Pushgateway and a real
# Prometheus scraping it (honor_labels, as the Pushgateway README asks), both in the switch
# namespace of tests/e2e/pods.sh: `preflight check` on a fixture tree and a `run` of three
# pods (one with a throttled link) push there; PromQL through Prometheus' HTTP API then finds
# the series with their values and labels, the recording rules of
# helm/preflight/files/prometheus-rules.yaml evaluate, and every panel of the Grafana
# dashboard returns series (its variables' defaults substituted). The rules' promtool unit
# tests run first. Failure paths against stand-ins (a Python server on 127.0.0.1: 401, 500,
# one that never answers; a TLS one whose certificate another CA signed; nothing listening):
# the run keeps its deadline and its verdict, and report.metrics names the URL and the cause.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pods.sh"

RULES=$PREFLIGHT_SRC/helm/preflight/files/prometheus-rules.yaml
DASH=$PREFLIGHT_SRC/helm/preflight/files/grafana-dashboard.json
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY

# ---- the rules alone (promtool)
if command -v promtool >/dev/null; then
    if out=$(promtool check rules "$RULES" 2>&1); then ok "promtool check rules"; else
        notok "promtool check rules" "$(echo "$out" | tail -3 | tr '\n' '|')"; fi
    if out=$(cd "$PREFLIGHT_SRC/tests/prometheus" && promtool test rules rules_test.yaml 2>&1); then
        ok "promtool test rules (lemon node, slow link, busbw floor)"
    else
        notok "promtool test rules" "$(echo "$out" | head -20 | tr '\n' '|')"
    fi
else
    skip "promtool" "not installed (apt-get install prometheus)"
fi

"$FIX/materialize.sh" "$FIX/node-8gpu-ndr" "$T/ndr" >/dev/null 2>&1 ||
    { notok "materialize node-8gpu-ndr"; exit 0; }

# pf NAME [VAR=VALUE...] -- ARGS...: `preflight check` on the fixture, verdict in $T/NAME.yaml,
# exit code and wall milliseconds in $T/NAME.rc and $T/NAME.ms; WRAP runs it elsewhere
pf() {
    local name=$1
    shift
    local vars=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do vars+=("$1"); shift; done
    shift
    local s
    s=$(date +%s%N)
    ${WRAP:-} env -i PATH="$PATH" HOME=/nonexistent NO_COLOR=1 \
        ASAN_OPTIONS="${ASAN_OPTIONS:-}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-}" "${NODE_NCCL[@]}" "${vars[@]}" \
        "$PREFLIGHT" check --root "$T/ndr" --format yaml --verdict "$T/$name.yaml" "$@" \
        >"$T/$name.out" 2>"$T/$name.err"
    echo $? >"$T/$name.rc"
    echo $((($(date +%s%N) - s) / 1000000)) >"$T/$name.ms"
}
checks_but_report() { yq "$T/$1.yaml" 'sorted([c["id"], c["status"]] for c in d["checks"] if c["id"] != "report.metrics")'; }

pf base POD_NAME=probe-0 POD_NAMESPACE=ml NODE_NAME=gpu-node-9 -- --timeout 20
expect_eq "baseline: check passes" "$(cat "$T/base.rc") $(yq "$T/base.yaml" 'd["verdict"]')" "0 pass"
expect_eq "baseline: no push, no report.metrics" "$(yq "$T/base.yaml" 'check("report.metrics")')" "None"

# ---- failure paths, against stand-ins on 127.0.0.1
cat >"$T/standin.py" <<'PY'
# A stand-in Pushgateway: one mode per process; logs each request (method, path, the
# Authorization header) as a JSON line.
import json, ssl, sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
mode, portfile, logfile, certdir = sys.argv[1:5]
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def do_PUT(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n).decode("utf-8", "replace") if n else ""
        with open(logfile, "a") as f:
            f.write(json.dumps({"method": self.command, "path": self.path,
                                "auth": self.headers.get("Authorization"),
                                "ctype": self.headers.get("Content-Type"),
                                "has_verdict": "preflight_verdict{" in body}) + "\n")
        if mode == "slow":
            time.sleep(60)
            return
        code = {"401": 401, "500": 500, "echo": 502}.get(mode, 200)
        msg = {"401": b"Unauthorized\n", "500": b"storage is on fire\n"}.get(mode, b"")
        if mode == "echo":  # a proxy's error page that quotes the request's headers
            msg = ("bad gateway; your request had Authorization: %s (upstream down)\n"
                   % self.headers.get("Authorization")).encode()
        self.send_response(code)
        self.send_header("Content-Length", str(len(msg)))
        self.end_headers()
        self.wfile.write(msg)
    do_POST = do_PUT
s = ThreadingHTTPServer(("127.0.0.1", 0), H)
if mode.startswith("tls"):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(certdir + "/server.crt", certdir + "/server.key")
    s.socket = ctx.wrap_socket(s.socket, server_side=True)
with open(portfile + ".tmp", "w") as f:
    f.write(str(s.server_address[1]))
import os
os.rename(portfile + ".tmp", portfile)
s.serve_forever()
PY

SERVERS=()
# standin MODE: starts one, sets SP to its port (bounded wait: 10 s)
standin() {
    rm -f "$T/port.$1"
    python3 "$T/standin.py" "$1" "$T/port.$1" "$T/log.$1" "$T/ca" &
    SERVERS+=($!)
    for _ in $(seq 100); do [ -s "$T/port.$1" ] && break; sleep 0.1; done
    SP=$(cat "$T/port.$1" 2>/dev/null)
}

mkdir -p "$T/ca" "$T/other" "$T/secrets"
(
    cd "$T/ca" &&
        openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 \
            -subj "/CN=preflight-test-ca" 2>/dev/null &&
        openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr \
            -subj "/CN=pushgateway" 2>/dev/null &&
        printf 'subjectAltName=IP:127.0.0.1\n' >ext.cnf &&
        openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt \
            -days 2 -extfile ext.cnf 2>/dev/null &&
        openssl req -x509 -newkey rsa:2048 -nodes -keyout "$T/other/ca.key" \
            -out "$T/other/ca.crt" -days 2 -subj "/CN=someone-else" 2>/dev/null
) || notok "throwaway CAs (openssl)"
printf 'push-token-%s\n' "$$" >"$T/secrets/token"
printf 'pusher\n' >"$T/secrets/user"
printf 's3cret:with:colons\n' >"$T/secrets/pass"

# cfg NAME URL [AUTH-YAML]: a config with report.pushgateway (and pushgatewayAuth)
cfg() { printf 'report:\n  pushgateway: "%s"\n%s' "$2" "${3:-}" >"$T/$1.cfg"; }

# expect_push_warn NAME CODE TEXT...: a warn CODE in report.metrics whose message has each
# TEXT; the other checks as in the baseline; the exit code 0
expect_push_warn() {
    local name=$1 code=$2
    shift 2
    expect_eq "$name: report.metrics is warn [$code]" \
        "$(yq "$T/$name.yaml" 'check("report.metrics")["status"]') $(yq "$T/$name.yaml" 'codes("report.metrics")')" \
        "warn [\"$code\"]"
    local msg t
    msg=$(yq "$T/$name.yaml" 'check("report.metrics")["findings"][0]["message"]')
    for t in "$@"; do
        case "$msg" in *"$t"*) ok "$name: the warning says '$t'" ;;
        *) notok "$name: the warning says '$t'" "message: $msg" ;; esac
    done
    expect_eq "$name: the other checks as without a push" "$(checks_but_report "$name")" "$(checks_but_report "${BASE:-base}")"
    expect_eq "$name: exit code 0 (never a gate)" "$(cat "$T/$name.rc")" 0
}

standin 401
U401="http://127.0.0.1:$SP"
pf f401 POD_NAME=probe-0 POD_NAMESPACE=ml NODE_NAME=gpu-node-9 -- --timeout 20 --pushgateway "$U401"
expect_push_warn f401 push-failed "$U401/metrics/job/preflight/namespace/ml/pod/probe-0/node/gpu-node-9" "HTTP 401" "after 1 attempt"

standin 500
U500="http://127.0.0.1:$SP"
pf f500 POD_NAME=probe-0 POD_NAMESPACE=ml NODE_NAME=gpu-node-9 -- --timeout 20 --pushgateway "$U500"
expect_push_warn f500 push-failed "$U500/metrics/job/preflight" "HTTP 500" "after 3 attempts" "storage is on fire"
expect_eq "f500: three PUTs reached the server" "$(grep -c '"method": "PUT"' "$T/log.500")" 3

DOWN=$(free_port)
pf fdown POD_NAME=probe-0 POD_NAMESPACE=ml NODE_NAME=gpu-node-9 PREFLIGHT_PUSHGATEWAY="http://127.0.0.1:$DOWN" -- --timeout 20
expect_push_warn fdown push-unreachable "http://127.0.0.1:$DOWN/metrics/job/preflight" "after 3 attempts"

standin slow
pf fslow POD_NAME=probe-0 POD_NAMESPACE=ml NODE_NAME=gpu-node-9 -- --timeout 8 --pushgateway "http://127.0.0.1:$SP"
expect_push_warn fslow push-timeout "http://127.0.0.1:$SP/metrics/job/preflight" "budget"
ms=$(cat "$T/fslow.ms")
# the deadline is 8 s; 3 s more for the sanitizer's exit on a busy machine
if [ "$ms" -lt 11000 ]; then ok "fslow: the run ended within its deadline (${ms} ms, --timeout 8)"; else
    notok "fslow: the run ended within its deadline" "${ms} ms"; fi

standin tls
UTLS="https://127.0.0.1:$SP"
cfg tlsbad "$UTLS" "  pushgatewayAuth:
    caFile: $T/other/ca.crt
    bearerTokenFile: $T/secrets/token
"
pf ftlsbad POD_NAME=probe-0 POD_NAMESPACE=ml NODE_NAME=gpu-node-9 -- --timeout 20 --config "$T/tlsbad.cfg"
expect_push_warn ftlsbad push-unreachable "$UTLS/metrics/job/preflight" "certificate"
expect_eq "ftlsbad: no request got through TLS" "$(cat "$T/log.tls" 2>/dev/null | wc -l)" 0

cfg tlsok "$UTLS" "  pushgatewayAuth:
    caFile: $T/ca/ca.crt
    bearerTokenFile: $T/secrets/token
"
pf ftlsok POD_NAME=probe-0 POD_NAMESPACE=ml NODE_NAME=gpu-node-9 -- --timeout 20 --config "$T/tlsok.cfg"
expect_eq "tls + bearer: report.metrics passes" "$(yq "$T/ftlsok.yaml" 'check("report.metrics")["status"]')" pass
expect_eq "tls + bearer: one PUT of the text format to the pod's group, with the token" \
    "$(python3 -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1])]; print(len(r), r[0]["method"], r[0]["path"], r[0]["auth"], r[0]["ctype"], r[0]["has_verdict"])' "$T/log.tls")" \
    "1 PUT /metrics/job/preflight/namespace/ml/pod/probe-0/node/gpu-node-9 Bearer push-token-$$ text/plain; version=0.0.4; charset=utf-8 True"

cfg basic "$UTLS" "  pushgatewayAuth:
    caFile: $T/ca/ca.crt
    usernameFile: $T/secrets/user
    passwordFile: $T/secrets/pass
"
pf fbasic POD_NAME=probe-0 POD_NAMESPACE=ml NODE_NAME=gpu-node-9 -- --timeout 20 --config "$T/basic.cfg"
expect_eq "tls + basic: report.metrics passes" "$(yq "$T/fbasic.yaml" 'check("report.metrics")["status"]')" pass
expect_eq "tls + basic: the Authorization header" "$(tail -1 "$T/log.tls" | python3 -c 'import json,sys; print(json.load(sys.stdin)["auth"])')" \
    "Basic $(printf 'pusher:s3cret:with:colons' | base64)"

# A reply that quotes the request's headers (a proxy's error page) never shows a credential:
# not the bearer token, not the password, not the base64 of user:password that went out.
standin echo
UECHO="http://127.0.0.1:$SP"
cfg echobearer "$UECHO" "  pushgatewayAuth:
    bearerTokenFile: $T/secrets/token
"
pf fechobearer POD_NAME=probe-0 POD_NAMESPACE=ml NODE_NAME=gpu-node-9 -- --timeout 20 --config "$T/echobearer.cfg"
cfg echobasic "$UECHO" "  pushgatewayAuth:
    usernameFile: $T/secrets/user
    passwordFile: $T/secrets/pass
"
pf fechobasic POD_NAME=probe-0 POD_NAMESPACE=ml NODE_NAME=gpu-node-9 -- --timeout 20 --config "$T/echobasic.cfg"
b64=$(printf 'pusher:s3cret:with:colons' | base64)
for n in fechobearer fechobasic; do
    expect_eq "$n: the proxy's page is quoted (HTTP 502), the credential as ***"         "$(yq "$T/$n.yaml" '"HTTP 502" in check("report.metrics")["findings"][0]["message"] and "Authorization: " in check("report.metrics")["findings"][0]["message"] and "***" in check("report.metrics")["findings"][0]["message"]')" True
    if grep -qF -e "push-token-$$" -e "s3cret" -e "$b64" "$T/$n.yaml" "$T/$n.out" "$T/$n.err"; then
        notok "$n: no credential in the verdict, stdout or stderr" "$(grep -hF -e "push-token-$$" -e s3cret -e "$b64" "$T/$n.yaml" "$T/$n.out" "$T/$n.err" | head -2)"
    else ok "$n: no credential in the verdict, stdout or stderr"; fi
done
# credentials in the URL, in any case of the scheme, are refused, and the error never echoes them
for u in 'HTTPS://user:pw-s3cr3t@gw.example:9091' 'Http://user:pw-s3cr3t@gw.example' 'htps://user:pw-s3cr3t@gw.example'; do
    pf furl -- --timeout 20 --pushgateway "$u"
    expect_eq "--pushgateway $u: a usage error (exit 2)" "$(cat "$T/furl.rc")" 2
    if grep -qF "pw-s3cr3t" "$T/furl.err" "$T/furl.out"; then notok "--pushgateway $u: the password is not echoed" "$(cat "$T/furl.err")"; else
        ok "--pushgateway $u: the password is not echoed"; fi
    cfg urlcfg "$u"
    pf furlcfg -- --timeout 20 --config "$T/urlcfg.cfg"
    expect_eq "report.pushgateway $u: a usage error (exit 2)" "$(cat "$T/furlcfg.rc")" 2
    if grep -qF "pw-s3cr3t" "$T/furlcfg.err" "$T/furlcfg.out"; then notok "report.pushgateway $u: the password is not echoed" "$(cat "$T/furlcfg.err")"; else
        ok "report.pushgateway $u: the password is not echoed"; fi
done

cfg nocred "$UTLS" "  pushgatewayAuth:
    bearerTokenFile: $T/secrets/missing
"
pf fnocred POD_NAME=probe-0 POD_NAMESPACE=ml NODE_NAME=gpu-node-9 -- --timeout 20 --config "$T/nocred.cfg"
expect_push_warn fnocred push-credentials "bearerTokenFile" "$T/secrets/missing"

# the static build has no libcurl: it says so, and keeps its verdict
if [ -x "${PREFLIGHT_STATIC:-}" ]; then
    PREFLIGHT_SAVED=$PREFLIGHT PREFLIGHT=$PREFLIGHT_STATIC
    pf sbase POD_NAME=probe-0 POD_NAMESPACE=ml NODE_NAME=gpu-node-9 -- --timeout 20
    pf fstatic POD_NAME=probe-0 POD_NAMESPACE=ml NODE_NAME=gpu-node-9 -- --timeout 20 --pushgateway "$U401"
    PREFLIGHT=$PREFLIGHT_SAVED
    BASE=sbase expect_push_warn fstatic push-unreachable "$U401/metrics/job/preflight" "static build"
else
    skip "static: the push" "bin/preflight-static not built (make static)"
fi

# --results: nccl-tests' -J layout (no NCCL here: no results, the rest as the writer has it)
pf res POD_NAME=probe-0 POD_NAMESPACE=ml NODE_NAME=gpu-node-9 -- --timeout 20 --results "$T/res.json"
expect_eq "--results: nccl-tests' top-level keys in order, no NCCL results" \
    "$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(list(d), d["version"], d["results"], d["config"]["devices"][0]["hostname"])' "$T/res.json" 2>&1)" \
    "['version', 'start_time', 'args', 'env', 'nccl_version', 'config', 'results', 'out_of_bounds', 'average_bus_bandwidth', 'end_time'] 3 [] gpu-node-9"
pf resbad POD_NAME=probe-0 -- --timeout 20 --results "$T/no/such/dir/res.json"
expect_eq "--results into a missing folder: a warn results-write-failed, exit 0" \
    "$(yq "$T/resbad.yaml" 'codes("report.metrics")') $(cat "$T/resbad.rc")" '["results-write-failed"] 0'

cfg badurl "ftp://x"
pf fbadurl -- --config "$T/badurl.cfg"
expect_eq "report.pushgateway ftp://x: a config error (exit 2)" "$(cat "$T/fbadurl.rc")" 2

for p in "${SERVERS[@]}"; do kill "$p" 2>/dev/null; done
wait 2>/dev/null

# ---- the real Pushgateway and Prometheus, and pods
need_root "pushgateway and prometheus among pods" || exit 0
for c in ip dnsmasq unshare tc prometheus prometheus-pushgateway; do
    command -v "$c" >/dev/null || { skip "pushgateway and prometheus among pods" "$c not installed"; exit 0; }
done

cleanup() {
    for p in ${PGW_PID:-} ${PROM_PID:-}; do kill "$p" 2>/dev/null; done
    pods_cleanup
    [ -n "${KEEP_TMP:-}" ] && echo "# kept $T" || rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
pods_setup 5 "pfg$$" || { notok "set up 5 pods (network namespaces, bridge, dnsmasq)"; exit 1; }
ok "set up 5 pods (network namespaces, bridge, dnsmasq)"
SW=$PODS_SW
GP=$(free_port) PP=$(free_port)
[ "$PP" = "$GP" ] && PP=$((GP + 1))
# the Pushgateway on every address of the switch (the pods reach 10.213.0.1), Prometheus on
# its loopback, scraping it every second and evaluating the rules every second
# (Debian's build persists to /var/lib/prometheus by default: a file of the test's own instead)
ip netns exec "$SW" prometheus-pushgateway --web.listen-address=":$GP" \
    --persistence.file="$T/pgw.data" >"$T/pgw.log" 2>&1 &
PGW_PID=$!
cat >"$T/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - $RULES
scrape_configs:
  - job_name: pushgateway
    honor_labels: true
    static_configs:
      - targets: ['127.0.0.1:$GP']
EOF
ip netns exec "$SW" prometheus --config.file="$T/prometheus.yml" --storage.tsdb.path="$T/tsdb" \
    --web.listen-address="127.0.0.1:$PP" >"$T/prom.log" 2>&1 &
PROM_PID=$!

# q EXPR: Prometheus' instant query; prints the JSON result list (or ERROR: ...)
cat >"$T/q.py" <<'PY'
import json, sys, urllib.parse, urllib.request
port, expr = sys.argv[1], sys.argv[2]
u = "http://127.0.0.1:%s/api/v1/query?%s" % (port, urllib.parse.urlencode({"query": expr}))
try:
    with urllib.request.urlopen(u, timeout=5) as r:
        d = json.load(r)
except Exception as e:
    try:
        d = json.load(e)  # an HTTP error with Prometheus' JSON: a bad expression
    except Exception:
        print("DOWN: %s" % e); sys.exit(0)  # not listening yet
if d.get("status") != "success":
    print("ERROR: %s" % d.get("error")); sys.exit(0)
print(json.dumps(d["data"]["result"], sort_keys=True))
PY
q() { ip netns exec "$SW" python3 "$T/q.py" "$PP" "$1"; }
# qwait EXPR [SECONDS]: polls until EXPR returns series (bounded, default 30 s); prints them
qwait() {
    local r="" end=$((SECONDS + ${2:-30}))
    while [ "$SECONDS" -lt "$end" ]; do
        r=$(q "$1")
        case "$r" in
        ERROR*) echo "$r"; return 1 ;;
        "[]" | "" | DOWN*) ;;
        *) echo "$r"; return 0 ;;
        esac
        sleep 0.2
    done
    echo "${r:-[]}"
    return 1
}
# val JSON: the values of a result list, sorted, space-separated
vals() { python3 -c 'import json,sys; print(" ".join(sorted(s["value"][1] for s in json.loads(sys.argv[1]))))' "$1"; }
label() { python3 -c 'import json,sys; print(" ".join(sorted(s["metric"].get(sys.argv[2], "-") for s in json.loads(sys.argv[1]))))' "$1" "$2"; }

# a machine crowded by other work may take long to start both: up to 3 minutes (a pass
# comes as soon as the first scrape succeeds)
if qwait 'up{job="pushgateway"} == 1' 180 >/dev/null; then ok "prometheus scrapes the pushgateway"; else
    notok "prometheus scrapes the pushgateway" "pushgateway: $(tail -3 "$T/pgw.log" | tr '\n' '|') prometheus: $(tail -3 "$T/prom.log" | tr '\n' '|') up: $(q 'up')"
    exit 1
fi

# ---- `preflight check` pushes: one with plain names, one without a namespace and a node
# name that needs escaping (base64 in the URL, escaped in the exposition)
t0=$(date +%s)
WRAP="ip netns exec $SW" pf c1 POD_NAME=probe-0 POD_NAMESPACE=ml NODE_NAME=gpu-node-9 -- --timeout 20 --pushgateway "http://127.0.0.1:$GP"
ODD='gpu "9"\b/c'
WRAP="ip netns exec $SW" pf c2 POD_NAME=probe-1 "NODE_NAME=$ODD" PREFLIGHT_PUSHGATEWAY="http://127.0.0.1:$GP" -- --timeout 20
t1=$(date +%s)
expect_eq "check: report.metrics passes (HTTP 200)" \
    "$(yq "$T/c1.yaml" 'check("report.metrics")["status"], check("report.metrics")["evidence"]["httpStatus"]')" "('pass', 200)"
r=$(qwait 'preflight_verdict{job="preflight",pod="probe-0"} == 1')
expect_eq "promql: probe-0's verdict is pass, with the grouping key's labels" \
    "$(label "$r" verdict) $(label "$r" namespace) $(label "$r" node) $(label "$r" job)" "pass ml gpu-node-9 preflight"
r=$(qwait 'preflight_last_run_timestamp_seconds{pod="probe-0"}')
v=$(vals "$r")
if python3 -c "import sys; sys.exit(not ($t0 - 1 <= float('$v') <= $t1 + 1))"; then
    ok "promql: preflight_last_run_timestamp_seconds is the run's end ($v)"; else
    notok "promql: preflight_last_run_timestamp_seconds" "$v not in [$t0, $t1]"; fi
r=$(qwait 'count(preflight_check_status{pod="probe-0"} == 1)')
expect_eq "promql: one status per check of the verdict (the push's own check not yet in it)" "$(vals "$r")" \
    "$(yq "$T/c1.yaml" 'len([c for c in d["checks"] if c["id"] != "report.metrics"])')"
r=$(qwait 'preflight_info{pod="probe-1"}')
expect_eq "promql: probe-1 without a namespace, its node name round-trips" \
    "$(label "$r" namespace)|$(label "$r" node)|$(label "$r" workload)" "-|$ODD|probe"

# ---- `preflight run`, five pods, pod 4's link throttled (most links stay fast, so the
# median is a fast one)
printf 'tcp: {messageBytes: 1048576, iterations: 2, minBusbwGBps: 0.0001}\n' >"$T/small.yaml"
ip netns exec "$(pods_ns 4)" tc qdisc add dev eth0 root tbf rate 40mbit burst 16kb latency 500ms &&
    ip netns exec "$SW" tc qdisc add dev "${PODS_PREFIX}v4" root tbf rate 40mbit burst 16kb latency 500ms ||
    notok "tc tbf on trainer-4's link"
declare -a RPID
for i in 0 1 2 3 4; do
    (
        s=$(date +%s%N)
        pod_exec "$i" env POD_NAME="trainer-$i" POD_NAMESPACE=ml NODE_NAME="node-$i" \
            PREFLIGHT_WORLD_SIZE=5 PREFLIGHT_PORT=29710 NCCL_SOCKET_IFNAME=eth0 \
            PREFLIGHT_PUSHGATEWAY="http://10.213.0.1:$GP" \
            "$PREFLIGHT" run --config "$T/small.yaml" --verdict "$T/r$i.yaml" --format yaml \
            --timeout 40 >"$T/r$i.out" 2>&1
        echo "$? $((($(date +%s%N) - s) / 1000000))" >"$T/r$i.res"
    ) &
    RPID[$i]=$!
done
for i in 0 1 2 3 4; do wait "${RPID[$i]}"; done
for i in 0 1 2 3 4; do
    read -r rc ms <"$T/r$i.res"
    expect_eq "run trainer-$i: pushed (report.metrics pass)" "$(yq "$T/r$i.yaml" 'check("report.metrics")["status"]')" pass
    if [ "$ms" -lt 43000 ]; then ok "run trainer-$i: within --timeout 40 (${ms} ms, exit $rc)"; else
        notok "run trainer-$i: within --timeout 40" "${ms} ms"; fi
done
expect_eq "run: trainer-4 is the culprit of rank 0's verdict" "$(yq "$T/r0.yaml" '[c.get("pod") for c in d["culprits"]]')" '["trainer-4"]'
r=$(qwait 'preflight_culprit{pod="trainer-0"}')
expect_eq "promql: rank 0's culprit: pod, node, kind, workload" \
    "$(label "$r" culprit_pod) $(label "$r" culprit_node) $(label "$r" kind) $(label "$r" workload) $(vals "$r")" \
    "trainer-4 node-4 node trainer 1"
r=$(qwait 'preflight_failure_class{pod="trainer-4", class="node"}')
expect_eq "promql: trainer-4 failed with class node on node-4" "$(label "$r" node) $(vals "$r")" "node-4 1"
r=$(qwait 'preflight_collective_busbw_gbps{pod="trainer-0", backend="tcp"}')
if [ "$r" != "[]" ]; then ok "promql: rank 0's tcp busbw is there ($(vals "$r") GB/s)"; else notok "promql: rank 0's tcp busbw"; fi
r=$(qwait 'count(preflight_link_gbps{pod="trainer-0"})')
expect_eq "promql: rank 0's link figures, one series a link it probed" "$(vals "$r")" \
    "$(yq "$T/r0.yaml" 'len({(l["from"], l["to"]) for l in check("collective.tcp")["evidence"]["links"]})')"
# the throttled links run at a hundredth of the others: every one of them is slow (whether a
# fast link also falls under a third of the median depends on the machine's load: not asserted)
r=$(qwait 'preflight:slow_link:fresh{pod="trainer-0"}' 30)
expect_eq "promql: the slow links (recording rule) hold every probed link of node-4" \
    "$(python3 -c 'import json,sys; print(json.dumps(sorted(s["metric"]["from_rank"] + ">" + s["metric"]["to_rank"] for s in json.loads(sys.argv[1]) if "node-4" in (s["metric"]["from_node"], s["metric"]["to_node"]))))' "$r")" \
    "$(yq "$T/r0.yaml" 'sorted({"%d>%d" % (l["from"], l["to"]) for l in check("collective.tcp")["evidence"]["links"] if 4 in (l["from"], l["to"])})')"
r=$(qwait 'preflight:node_class_failure:fresh{node="node-4"}' 30)
expect_eq "promql: the recording rule sees node-4's class-node failure" "$(label "$r" node) $(label "$r" workload)" "node-4 trainer"
r=$(qwait 'preflight:node_class_failure:workloads_24h{node="node-4"}' 30)
expect_eq "promql: one job so far saw node-4 fail (no lemon yet)" "$(vals "$r")" 1

# ---- every dashboard panel's expressions, with the variables' defaults substituted as Grafana
# does (tests/e2e/dashboard.py), evaluate and return series; tests/e2e/test_dashboard.sh
# compares their rows with the verdicts, the filters and a stale group
python3 -c '
import json, sys
for l in sys.stdin:
    t = json.loads(l)
    print("%s\t%s" % (t["title"], t["expr"]))' <<<"$(python3 "$PREFLIGHT_SRC/tests/e2e/dashboard.py" exprs "$DASH")" >"$T/panels.tsv"
n=0
while IFS=$'\t' read -r title expr; do
    n=$((n + 1))
    # no NCCL and no rail here: those panels must still evaluate
    case "$expr" in *nccl_bus_bandwidth_gbs* | *preflight_rail_*) w=2 ;; *) w=20 ;; esac
    r=$(qwait "$expr" "$w")
    case "$r" in
    ERROR*) notok "dashboard: '$title' evaluates" "$r" ;;
    "[]") case "$expr" in
        *nccl_bus_bandwidth_gbs* | *preflight_rail_*) ok "dashboard: '$title' evaluates (no NCCL or rail here: no series)" ;;
        *) notok "dashboard: '$title' returns series" "no series for: $expr" ;;
        esac ;;
    *) ok "dashboard: '$title' returns series" ;;
    esac
done <"$T/panels.tsv"
[ "$n" -ge 15 ] && ok "dashboard: $n expressions checked" || notok "dashboard: expressions" "only $n"
# probe-1 pushed without a namespace: the All of $namespace (.*) keeps it
r=$(q "$(python3 "$PREFLIGHT_SRC/tests/e2e/dashboard.py" exprs "$DASH" | python3 -c 'import json,sys; print(next(t["expr"] for t in map(json.loads, sys.stdin) if t["id"] == 12))')")
expect_eq "dashboard: the nodes table holds probe-1's node, pushed without a namespace" \
    "$(python3 -c 'import json,sys; print([s["metric"].get("namespace", "-") for s in json.loads(sys.argv[1]) if s["metric"].get("pod") == "probe-1"])' "$r")" "['-']"
