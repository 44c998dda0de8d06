#!/usr/bin/env bash
# Kubernetes reporting and the metrics file, end to end: `preflight run` against a local
# HTTPS server on 127.0.0.1 that plays the API server (certificate from a CA made here with
# openssl; it checks method, path, bearer token and body, and answers 201/200, 403, or
# never). The service-account folder is faked under --root. No real API server runs here.
. "$(dirname "$0")/lib.sh"

for tool in openssl python3; do
    command -v $tool >/dev/null || { skip "report" "$tool missing"; exit 0; }
done
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY

SA=$T/root/var/run/secrets/kubernetes.io/serviceaccount
mkdir -p "$SA" "$T/ca" "$T/other"
TOKEN="eyJhbGciOiJSUzI1NiJ9.test-token-$$"
printf '%s' "$TOKEN" >"$SA/token"
printf 'ml' >"$SA/namespace"

# ---- a CA, a server certificate for 127.0.0.1 signed by it, and an unrelated CA
(
    cd "$T/ca"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 \
        -subj "/CN=preflight-test-ca" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr \
        -subj "/CN=kubernetes" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:kubernetes.default.svc\n' >ext.cnf
    openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt \
        -days 2 -extfile ext.cnf 2>/dev/null
    openssl req -x509 -newkey rsa:2048 -nodes -keyout "$T/other/ca.key" \
        -out "$T/other/ca.crt" -days 2 -subj "/CN=someone-else" 2>/dev/null
) || { notok "report: make test certificates" "openssl failed"; exit 0; }
cp "$T/ca/ca.crt" "$SA/ca.crt"

cat >"$T/server.py" <<'PY'
# A stand-in for the Kubernetes API server: one mode per process.
import json, ssl, sys, time, threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

mode, certdir, portfile, logfile, token = sys.argv[1:6]

class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def handle_one(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n).decode("utf-8") if n else ""
        rec = {"method": self.command, "path": self.path,
               "auth": self.headers.get("Authorization"),
               "ctype": self.headers.get("Content-Type"),
               "ua": self.headers.get("User-Agent"), "body": body}
        with open(logfile, "a") as f:
            f.write(json.dumps(rec) + "\n")
        if mode == "hang":
            time.sleep(30)
            return
        if self.headers.get("Authorization") != "Bearer " + token:
            return self.reply(401, {"kind": "Status", "status": "Failure",
                                    "message": "Unauthorized", "code": 401})
        if mode == "forbidden":
            res = "events" if self.command == "POST" else "pods"
            verb = "create" if self.command == "POST" else "patch"
            return self.reply(403, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                "message": '%s is forbidden: User "system:serviceaccount:ml:default" cannot '
                           '%s resource "%s" in API group "" in the namespace "ml"' % (res, verb, res),
                "reason": "Forbidden", "code": 403})
        if self.path == "/api/v1/nodes/node-a":
            if self.command == "GET":
                self.server.gets = getattr(self.server, "gets", 0) + 1
                return self.reply(200, {"kind": "Node", "metadata": {"name": "node-a",
                    "resourceVersion": str(100 + self.server.gets)},
                    "spec": {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]}})
            self.server.patches = getattr(self.server, "patches", 0) + 1
            if mode == "node409" and self.server.patches == 1:
                return self.reply(409, {"kind": "Status", "reason": "Conflict", "code": 409})
            return self.reply(200, {"kind": "Node", "metadata": {"name": "node-a"}})
        try:
            doc = json.loads(body)
        except ValueError:
            return self.reply(400, {"kind": "Status", "message": "body is not JSON"})
        if self.command == "POST" and self.path == "/api/v1/namespaces/ml/events":
            doc["metadata"]["name"] = doc["metadata"]["generateName"] + "x1y2z"
            return self.reply(201, doc)
        if self.command == "PATCH" and self.path == "/api/v1/namespaces/ml/pods/trainer-0":
            return self.reply(200, {"kind": "Pod", "metadata": doc["metadata"]})
        return self.reply(404, {"kind": "Status", "message": "no route " + self.path})
    def reply(self, code, doc):
        b = json.dumps(doc).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)
    do_POST = do_PATCH = do_GET = handle_one

srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
srv.daemon_threads = True
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(certdir + "/server.crt", certdir + "/server.key")
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
with open(portfile + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
import os
os.rename(portfile + ".tmp", portfile)
threading.Timer(120, srv.shutdown).start()  # never outlives the test
srv.serve_forever()
PY

SERVER_PID=""
stop_server() {
    if [ -n "$SERVER_PID" ]; then
        kill "$SERVER_PID" 2>/dev/null
        wait "$SERVER_PID" 2>/dev/null
        SERVER_PID=""
    fi
}
trap 'stop_server; rm -rf "$T"' EXIT

# start_server MODE: sets PORT, LOG
start_server() {
    stop_server
    LOG=$T/requests-$1.jsonl
    rm -f "$T/port" "$LOG"
    : >"$LOG"
    python3 "$T/server.py" "$1" "$T/ca" "$T/port" "$LOG" "$TOKEN" &
    SERVER_PID=$!
    for _ in $(seq 1 100); do [ -s "$T/port" ] && break; sleep 0.1; done
    PORT=$(cat "$T/port" 2>/dev/null)
    [ -n "$PORT" ]
}

cat >"$T/config.yaml" <<EOF
report:
  events: true
  annotate: true
  metricsFile: $T/metrics/out/metrics.prom
EOF
cat >"$T/config-off.yaml" <<EOF
report:
  metricsFile: $T/metrics/off/metrics.prom
EOF

# run NAME CONFIG [ENV...]: runs `preflight run` as rank 0 of 1; sets RC, SECS, V
run() {
    local name=$1 config=$2
    shift 2
    V=$T/verdict-$name.yaml
    local t0 t1
    t0=$(date +%s.%N)
    env -u KUBERNETES_SERVICE_HOST -u KUBERNETES_SERVICE_PORT \
        POD_NAME=trainer-0 POD_NAMESPACE=ml NODE_NAME=node-a POD_UID=uid-1234 \
        PREFLIGHT_TOKEN=rendezvous-secret "$@" \
        "$PREFLIGHT" run --root "$T/root" --config "$config" --verdict "$V" --format yaml \
        --rank 0 --world-size 1 --coordinator 127.0.0.1 --port 29731 --timeout 60 \
        >"$T/out-$name.txt" 2>&1
    RC=$?
    t1=$(date +%s.%N)
    SECS=$(python3 -c "print(round($t1 - $t0, 2))")
}

# ---- baseline: reporting off; the gate reporting must leave alone
run baseline "$T/config-off.yaml"
BASE_RC=$RC
BASE_VERDICT=$(yq "$V" 'd["verdict"]')
BASE_SECS=$SECS
expect_eq "report: baseline run has no report.kubernetes check" \
    "$(yq "$V" 'check("report.kubernetes") is None')" "True"
check "report: metrics file written with reporting off" test -s "$T/metrics/off/metrics.prom"

# ---- 201/200: the Event and the annotation land
if start_server ok; then
    run ok "$T/config.yaml" KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT="$PORT"
    expect_eq "report ok: exit code unchanged" "$RC" "$BASE_RC"
    expect_eq "report ok: report.kubernetes passes" "$(yq "$V" 'check("report.kubernetes")["status"]')" "pass"
    expect_eq "report ok: message says what was done" \
        "$(yq "$V" '"Event" in check("report.kubernetes")["message"] and "annotation preflight.dev/verdict" in check("report.kubernetes")["message"]')" "True"
    VERDICT=$(yq "$V" 'd["verdict"]')
    expect_eq "report ok: verdict unchanged" "$VERDICT" "$BASE_VERDICT"
    python3 - "$LOG" "$TOKEN" "$VERDICT" >"$T/ok-check.txt" 2>&1 <<'PY'
import json, re, sys
log, token, verdict = sys.argv[1:4]
reqs = [json.loads(l) for l in open(log)]
assert len(reqs) == 2, "want 2 requests, got %d" % len(reqs)
ev, patch = reqs
assert ev["method"] == "POST" and ev["path"] == "/api/v1/namespaces/ml/events", ev["path"]
assert ev["auth"] == "Bearer " + token, "bearer token"
assert ev["ctype"] == "application/json", ev["ctype"]
assert ev["ua"].startswith("preflight/"), ev["ua"]
b = json.loads(ev["body"])
assert b["apiVersion"] == "v1" and b["kind"] == "Event"
assert b["metadata"] == {"generateName": "trainer-0.preflight-", "namespace": "ml"}, b["metadata"]
io = b["involvedObject"]
assert io == {"apiVersion": "v1", "kind": "Pod", "name": "trainer-0", "namespace": "ml",
              "uid": "uid-1234"}, io
want = {"pass": ("PreflightPassed", "Normal"), "warn": ("PreflightWarning", "Warning"),
        "fail": ("PreflightFailed", "Warning")}[verdict]
assert (b["reason"], b["type"]) == want, (b["reason"], b["type"])
assert re.match(re.escape(verdict) + r"( \((spec|node|peer)\))?( on node \S+)?: ", b["message"]), b["message"]
assert len(b["message"].encode()) <= 1024
assert b["source"] == {"component": "preflight", "host": "node-a"}, b["source"]
assert b["count"] == 1 and b["firstTimestamp"].endswith("Z")
assert patch["method"] == "PATCH" and patch["path"] == "/api/v1/namespaces/ml/pods/trainer-0"
assert patch["ctype"] == "application/merge-patch+json", patch["ctype"]
assert patch["auth"] == "Bearer " + token
p = json.loads(patch["body"])
ann = p["metadata"]["annotations"]
assert ann["preflight.dev/verdict"] == verdict, ann
assert re.match(re.escape(verdict) + r"( \((spec|node|peer)\))?( on node \S+)?: ", ann["preflight.dev/summary"]), ann
print("requests ok")
PY
    if grep -q "requests ok" "$T/ok-check.txt"; then ok "report ok: server saw the right method, path, token and bodies"
    else notok "report ok: server saw the right method, path, token and bodies" "$(tail -3 "$T/ok-check.txt" | tr '\n' ' ')"; fi
    check "report ok: token never in the verdict" bash -c "! grep -q 'test-token' '$V'"
    M=$T/metrics/out/metrics.prom
    check "report ok: metrics file holds the verdict" grep -qx "preflight_verdict{pod=\"[^\"]*\",verdict=\"$VERDICT\"} 1" "$M"
    check "report ok: metrics file has HELP and TYPE" grep -qx "# TYPE preflight_duration_seconds gauge" "$M"
    check "report ok: metrics file lists report.kubernetes" \
        grep -q 'preflight_check_status{pod="[^"]*",check="report.kubernetes",status="pass"} 1' "$M"
    check "report ok: metrics file is 0644, no temp file left" \
        bash -c "[ \$(stat -c %a '$M') = 644 ] && [ \$(ls -A '$(dirname "$M")' | wc -l) = 1 ]"
else
    notok "report ok: start the HTTPS server" "no port"
fi

# ---- 403: a warn with the API server's reason, the gate unchanged
if start_server forbidden; then
    run forbidden "$T/config.yaml" KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT="$PORT"
    expect_eq "report 403: exit code unchanged" "$RC" "$BASE_RC"
    expect_eq "report 403: report.kubernetes warns" "$(yq "$V" 'check("report.kubernetes")["status"]')" "warn"
    expect_eq "report 403: codes" "$(yq "$V" 'codes("report.kubernetes")')" '["annotate-forbidden", "events-forbidden"]'
    expect_eq "report 403: message quotes the API server" \
        "$(yq "$V" '"cannot create resource \"events\"" in check("report.kubernetes")["message"]')" "True"
    expect_eq "report 403: remedy names the RBAC rule" \
        "$(yq "$V" '[f for f in check("report.kubernetes")["findings"] if f["code"] == "events-forbidden"][0]["remedy"].startswith("give the pod")')" "True"
    expect_eq "report 403: verdict is at least warn" "$(yq "$V" 'd["verdict"] in ("warn", "fail")')" "True"
else
    notok "report 403: start the HTTPS server" "no port"
fi

# ---- an API server that never answers: bounded, a warn
if start_server hang; then
    run hang "$T/config.yaml" KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT="$PORT"
    expect_eq "report hang: exit code unchanged" "$RC" "$BASE_RC"
    expect_eq "report hang: codes" "$(yq "$V" 'codes("report.kubernetes")')" '["api-timeout", "api-timeout"]'
    within=$(python3 -c "print($SECS <= $BASE_SECS + 5.0 + 3.0)")
    expect_eq "report hang: run ends within the 5 s budget (took ${SECS}s, baseline ${BASE_SECS}s)" "$within" "True"
    over=$(python3 -c "print($SECS >= 4.5)")
    expect_eq "report hang: the budget was used, not cut short" "$over" "True"
else
    notok "report hang: start the HTTPS server" "no port"
fi
stop_server

# ---- nothing listens: api-unreachable
python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])' >"$T/closed"
run closed "$T/config.yaml" KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT="$(cat "$T/closed")"
expect_eq "report closed port: exit code unchanged" "$RC" "$BASE_RC"
expect_eq "report closed port: codes" "$(yq "$V" 'codes("report.kubernetes")')" '["api-unreachable", "api-unreachable"]'

# ---- a server certificate the service-account CA did not sign: TLS refuses
if start_server ok; then
    cp "$T/other/ca.crt" "$SA/ca.crt"
    run badca "$T/config.yaml" KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT="$PORT"
    cp "$T/ca/ca.crt" "$SA/ca.crt"
    expect_eq "report wrong CA: api-unreachable" "$(yq "$V" 'codes("report.kubernetes")')" '["api-unreachable", "api-unreachable"]'
    expect_eq "report wrong CA: nothing reached the handler" "$(wc -l <"$LOG" | tr -d ' ')" "0"

    # ---- no token mounted
    mv "$SA/token" "$T/token.saved"
    run notoken "$T/config.yaml" KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT="$PORT"
    mv "$T/token.saved" "$SA/token"
    expect_eq "report no token: no-service-account" "$(yq "$V" 'codes("report.kubernetes")')" '["no-service-account"]'
    expect_eq "report no token: exit code unchanged" "$RC" "$BASE_RC"

    # ---- libcurl missing: skip with the reason; the override PREFLIGHT_CURL_LIB, and its
    # older name PREFLIGHT_LIBCURL, which still works
    for var in PREFLIGHT_CURL_LIB PREFLIGHT_LIBCURL; do
        run "nocurl-$var" "$T/config.yaml" KUBERNETES_SERVICE_HOST=127.0.0.1 \
            KUBERNETES_SERVICE_PORT="$PORT" "$var=/nonexistent/libcurl-$var.so.4"
        expect_eq "report no libcurl ($var): skip" "$(yq "$V" 'check("report.kubernetes")["status"]')" "skip"
        expect_eq "report no libcurl ($var): reason names the file" \
            "$(yq "$V" '"libcurl cannot be loaded (/nonexistent/libcurl-'"$var"'.so.4" in check("report.kubernetes")["message"]')" "True"
        expect_eq "report no libcurl ($var): exit code unchanged" "$RC" "$BASE_RC"
    done
else
    notok "report wrong CA: start the HTTPS server" "no port"
fi
stop_server

# ---- node marking (report.markNode): the label and the taint that `kubectl label` and
# `kubectl taint` would send, on the pod's own node. The verdict's failure class is not
# produced by `preflight run` here, so the test drives pf_report_mark_node through the unit
# test binary (test_mark_node_live) against this server.
UNIT_REPORT=${PREFLIGHT%/preflight}/tests/report/test_report
mark() { # MODE HOW
    start_server "$1" || return 1
    (cd "$PREFLIGHT_SRC/tests" && PF_TEST_APISERVER_PORT=$PORT PF_TEST_ROOT=$T/root PF_TEST_MARK=$2 \
        "$UNIT_REPORT" >"$T/mark-$1-$2.txt" 2>&1)
}
if [ -x "$UNIT_REPORT" ] && mark node label; then
    expect_eq "markNode label: one merge patch on the node, exactly the label" \
        "$(python3 -c 'import json,sys; print(json.dumps([(r["method"], r["path"], r["ctype"], r["body"]) for r in map(json.loads, open(sys.argv[1]))]))' "$LOG")" \
        '[["PATCH", "/api/v1/nodes/node-a", "application/merge-patch+json", "{\"metadata\":{\"labels\":{\"preflight.dev/unfit\":\"port-down\"}}}"]]'
    check "markNode label: the check says what it did" grep -q "report.node: node node-a labelled preflight.dev/unfit=port-down" "$T/mark-node-label.txt"
    mark node taint
    expect_eq "markNode taint: GET the node, then a strategic merge patch keeping its taints (members in their order), with its resourceVersion" \
        "$(python3 -c 'import json,sys; print(json.dumps([(r["method"], r["ctype"], r["body"]) for r in map(json.loads, open(sys.argv[1]))]))' "$LOG")" \
        '[["GET", "application/json", ""], ["PATCH", "application/strategic-merge-patch+json", "{\"metadata\":{\"resourceVersion\":\"101\"},\"spec\":{\"taints\":[{\"key\":\"nvidia.com/gpu\",\"effect\":\"NoSchedule\"},{\"effect\":\"NoSchedule\",\"key\":\"preflight.dev/unfit\",\"value\":\"port-down\"}]}}"]]'
    check "markNode taint: the check says what it did" grep -q "report.node: node node-a tainted preflight.dev/unfit=port-down:NoSchedule" "$T/mark-node-taint.txt"
    mark node409 taint
    expect_eq "markNode taint: a 409 Conflict reads the node again and patches with the new resourceVersion" \
        "$(python3 -c 'import json,sys; print(json.dumps([(r["method"], json.loads(r["body"])["metadata"]["resourceVersion"] if r["body"] else None) for r in map(json.loads, open(sys.argv[1]))]))' "$LOG")" \
        '[["GET", null], ["PATCH", "101"], ["GET", null], ["PATCH", "102"]]'
    check "markNode taint after 409: done, no finding" bash -c "grep -q 'tainted' '$T/mark-node409-taint.txt' && ! grep -q '^finding' '$T/mark-node409-taint.txt'"
    mark forbidden label
    check "markNode 403: node-forbidden, a warn" grep -q "^finding: node-forbidden labelling node node-a: HTTP 403" "$T/mark-forbidden-label.txt"
else
    skip "report markNode" "build/san/tests/report/test_report missing (make ASAN=1 UBSAN=1 unit-build)"
fi
stop_server

# ---- report.markNode in the config: none | label | taint, anything else a usage error
printf 'report:\n  markNode: taint\n' >"$T/config-mark.yaml"
"$PREFLIGHT" check --config "$T/config-mark.yaml" --root "$T/root" --format yaml --verdict - >/dev/null 2>"$T/err"
check "config report.markNode: taint is accepted" test $? -ne 2
printf 'report:\n  markNode: cordon\n' >"$T/config-mark.yaml"
"$PREFLIGHT" check --config "$T/config-mark.yaml" --root "$T/root" --format yaml --verdict - >/dev/null 2>"$T/err"
expect_eq "config report.markNode: cordon is a usage error naming the key" \
    "$?:$(grep -c 'markNode' "$T/err")" "2:1"

# ---- outside a pod: skip
run outside "$T/config.yaml"
expect_eq "report outside a pod: skip" "$(yq "$V" 'check("report.kubernetes")["status"]')" "skip"

# ---- metrics file that cannot be written: report.metrics warns, gate unchanged
printf 'report:\n  metricsFile: %s/metrics.prom\n' "$SA/token" >"$T/config-badmetrics.yaml"
run badmetrics "$T/config-badmetrics.yaml"
expect_eq "report metrics unwritable: metrics-write-failed" "$(yq "$V" 'codes("report.metrics")')" '["metrics-write-failed"]'
expect_eq "report metrics unwritable: exit code unchanged" "$RC" "$BASE_RC"

# ---- the static build has no dlopen: skip
if [ -x "${PREFLIGHT_STATIC:-}" ] && grep -q "report.kubernetes" "$PREFLIGHT_STATIC"; then
    PREFLIGHT_SAVED=$PREFLIGHT
    PREFLIGHT=$PREFLIGHT_STATIC
    run static "$T/config.yaml" KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT=1
    PREFLIGHT=$PREFLIGHT_SAVED
    expect_eq "report static build: skip" "$(yq "$V" 'check("report.kubernetes")["status"]')" "skip"
    expect_eq "report static build: reason says static" \
        "$(yq "$V" '"static" in check("report.kubernetes")["message"]')" "True"
else
    skip "report static build" "bin/preflight-static missing or older than the report module (make static)"
fi
