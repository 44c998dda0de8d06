#!/usr/bin/env bash
# The Grafana dashboard (helm/preflight/files/grafana-dashboard.json), its every query run by
# a real Prometheus over what real preflight runs pushed to a real Pushgateway. First its
# structure (tests/e2e/dashboard.py check: panel ids, data source, targets, variables,
# tables of instant queries, and the namespace, job, run and freshness filters in every
# query). Then, in the switch namespace of tests/e2e/pods.sh, a Pushgateway scraped by a
# Prometheus (honor_labels, the rules of helm/preflight/files/prometheus-rules.yaml) receives:
#   trainer   a `run` of five pods in namespace ml, each with one rail (net1 on a second
#             bridge, its Multus network-status in a downward-API folder), trainer-4's
#             cluster link throttled to 40 Mbit/s (tc tbf both ways): the slow node
#   solo      a `check` of pod solo-0 in namespace other on node gpu-node-9 (the fixture
#             node-ports-bad: an RDMA port down, a failure of class node), pushed by
#             preflight; what a second such check pushes (caught by a capture server) PUT
#             under job preflight-watch, the group the watch sidecar pushes its verdict's
#             metrics to
#   stale     what a `check` of pod trainer-9 on node node-stale pushes (caught the same way),
#             its preflight_last_run_timestamp_seconds set two days back (no option backdates
#             a run), PUT to its group: a Pushgateway group left from an old job
# Every target is then evaluated as Grafana asks (tests/e2e/dashboard.py eval: variables
# substituted as Grafana's Prometheus data source does, instant or range) with the
# defaults (All, All, the gate, 24 h) and with chosen namespaces, jobs, the watch and 7 d,
# and the rows compared with the verdicts the runs wrote: the heatmap's cells are rank 0's
# links with node-4's the slow ones, the node table one row per node, the failures, lemon
# nodes and culprits those the verdicts name, the stale group in no panel unless the window
# reaches back to it. The test waits for the scrape of all eight
# groups and for the rules' first records (bounded polls), never for a time.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/pods.sh"

DASH=$PREFLIGHT_SRC/helm/preflight/files/grafana-dashboard.json
RULES=$PREFLIGHT_SRC/helm/preflight/files/prometheus-rules.yaml
DPY=$PREFLIGHT_SRC/tests/e2e/dashboard.py
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY no_proxy NO_PROXY

# ---- the structure, and the substitution as Grafana does it
python3 "$DPY" check "$DASH"
sub=$(python3 "$DPY" exprs "$DASH" 'namespace=ml|a.b' "job=\$__all" freshness=3600 run=preflight-watch)
sub=${sub%%$'\n'*}
expect_eq "substitution: a multi-value regex-escaped and joined, All as .*, a custom value verbatim" \
    "$(python3 -c 'import json,sys; e=json.loads(sys.argv[1])["expr"]; print("namespace=~\"(ml|a\\\\.b)\"" in e, "workload=~\".*\"" in e, "< 3600" in e, "job=~\"preflight-watch\"" in e, "$" in e)' "$sub")" \
    "True True True True False"
expect_eq "substitution: \${freshness:text} in a title" \
    "$(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["title"])' "$sub")" "Fleet pass rate (runs of the last 1h)"
if python3 "$DPY" exprs "$DASH" freshness=42 >/dev/null 2>&1; then
    notok "substitution: a value no option has is refused for \${freshness:text}"
else ok "substitution: a value no option has is refused for \${freshness:text}"; fi

# the structure check finds faults: a copy with a duplicate panel id, a query without the
# freshness filter, an unknown variable and a table of a range query
python3 - "$DASH" "$T/bad-dash.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
p = d["panels"]
p[1]["id"] = p[0]["id"]
p[2]["targets"][0]["expr"] = p[2]["targets"][0]["expr"].split(" and on ")[0] + ")"
p[3]["title"] += " $nosuchvar"
t = next(x for x in p if x["type"] == "table")["targets"][0]
t["instant"], t["range"] = False, True
json.dump(d, open(sys.argv[2], "w"))
PY
bad=$(python3 "$DPY" check "$T/bad-dash.json" | grep '^not ok')
expect_eq "structure check: a broken copy fails on the ids, the table's query, the variable, the filters" \
    "$(for k in 'ids unique' 'tables of instant queries' 'variable referenced' 'keeps runs of the last'; do
        grep -c "$k" <<<"$bad"; done | tr '\n' ' ')$(wc -l <<<"$bad")" "1 1 1 1 4"

need_root "the dashboard against prometheus and a pushgateway among pods" || exit 0
for c in ip dnsmasq unshare tc curl prometheus prometheus-pushgateway; do
    command -v "$c" >/dev/null || { skip "the dashboard against prometheus and a pushgateway" "$c not installed"; exit 0; }
done
for fx in node-8gpu-ndr node-ports-bad; do
    "$FIX/materialize.sh" "$FIX/$fx" "$T/$fx" >/dev/null 2>&1 || { notok "materialize $fx"; exit 0; }
done

cleanup() {
    for p in ${PGW_PID:-} ${PROM_PID:-} ${CAP_PID:-}; do kill "$p" 2>/dev/null; done
    pods_cleanup
    [ -n "${KEEP_TMP:-}" ] && echo "# kept $T" || rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
N=5 TO=40 PORT=29770 SC=trainer
pods_setup "$N" "pfd$$" || { notok "set up $N pods (network namespaces, bridge, dnsmasq)"; exit 1; }
SW=$PODS_SW
# one rail a pod: net1, a veth on bridge br1 of the switch, 10.214.1.0/24
ip -n "$SW" link add br1 type bridge && ip -n "$SW" link set br1 up || { notok "rail bridge"; exit 1; }
for ((i = 0; i < N; i++)); do
    ns=$(pods_ns "$i")
    ip link add "${PODS_PREFIX}a$i" netns "$SW" type veth peer name net1 netns "$ns" &&
        ip -n "$SW" link set "${PODS_PREFIX}a$i" master br1 up && ip -n "$ns" link set net1 up &&
        ip -n "$ns" addr add "10.214.1.$((10 + i))/24" dev net1 || { notok "rail of pod $i"; exit 1; }
    ip -n "$ns" -j addr show >"$T/addr$i.json"
    python3 - "$T/addr$i.json" >"$T/ns$i.json" <<'PY'
import json, sys
links = {l["ifname"]: l for l in json.load(open(sys.argv[1]))}
def elem(name, net):
    return {"name": net, "interface": name, "mac": links[name]["address"], "dns": {},
            "ips": [a["local"] for a in links[name].get("addr_info", []) if a["family"] == "inet"]}
print(json.dumps([dict(elem("eth0", "cbr0"), default=True), elem("net1", "ml/rail-a")]))
PY
    python3 "$FIX/gen-podinfo.py" "$T/podinfo$i" "$T/ns$i.json" \
        --annotation k8s.v1.cni.cncf.io/networks=ml/rail-a >/dev/null || { notok "podinfo $i"; exit 1; }
done
ok "set up $N pods with a rail each (network namespaces, two bridges, dnsmasq)"

GP=$(free_port) PP=$(free_port)
[ "$PP" = "$GP" ] && PP=$((GP + 1))
ip netns exec "$SW" prometheus-pushgateway --web.listen-address=":$GP" \
    --persistence.file="$T/pgw.data" >"$T/pgw.log" 2>&1 &
PGW_PID=$!
cat >"$T/prometheus.yml" <<YML
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
YML
ip netns exec "$SW" prometheus --config.file="$T/prometheus.yml" --storage.tsdb.path="$T/tsdb" \
    --web.listen-address="127.0.0.1:$PP" >"$T/prom.log" 2>&1 &
PROM_PID=$!
PROM="http://127.0.0.1:$PP"

# q EXPR: an instant query's result list (or ERROR/DOWN); qwait EXPR [S]: until it has series
q() {
    ip netns exec "$SW" python3 -c '
import json, sys, urllib.parse, urllib.request
try:
    with urllib.request.urlopen(sys.argv[1] + "/api/v1/query?" + urllib.parse.urlencode({"query": sys.argv[2]}), timeout=5) as r:
        print(json.dumps(json.load(r)["data"]["result"]))
except Exception as e:
    print("DOWN: %s" % e)' "$PROM" "$1"
}
qwait() {
    local r="" end=$((SECONDS + ${2:-30}))
    while [ "$SECONDS" -lt "$end" ]; do
        r=$(q "$1")
        case "$r" in "[]" | "" | DOWN*) sleep 0.2 ;; *) echo "$r"; return 0 ;; esac
    done
    echo "${r:-[]}"
    return 1
}
if qwait 'up{job="pushgateway"} == 1' 180 >/dev/null; then ok "prometheus scrapes the pushgateway"; else
    notok "prometheus scrapes the pushgateway" "$(tail -3 "$T/pgw.log" "$T/prom.log" | tr '\n' '|')"
    exit 1
fi

# A capture on 127.0.0.1 (outside the pods' namespaces): answers every PUT 200 and keeps its
# body, PREFIX.N for the Nth: what preflight pushes, to be pushed again changed or elsewhere
cat >"$T/capture.py" <<'PY'
import os, sys
from http.server import BaseHTTPRequestHandler, HTTPServer
prefix, portfile = sys.argv[1:3]
n = [0]
class H(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass
    def do_PUT(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        n[0] += 1
        with open("%s.%d" % (prefix, n[0]), "wb") as f:
            f.write(body)
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()
s = HTTPServer(("127.0.0.1", 0), H)
with open(portfile + ".tmp", "w") as f:
    f.write(str(s.server_address[1]))
os.rename(portfile + ".tmp", portfile)
s.serve_forever()
PY
python3 "$T/capture.py" "$T/body" "$T/capport" &
CAP_PID=$!
for _ in $(seq 100); do [ -s "$T/capport" ] && break; sleep 0.1; done
CAP="http://127.0.0.1:$(cat "$T/capport")"
# pfcheck NAME FIXTURE NS POD NODE URL [WRAP...]: `preflight check` on the fixture tree,
# pushing to URL
pfcheck() {
    local name=$1 fx=$2 ns=$3 pod=$4 node=$5 url=$6
    shift 6
    "$@" env -i PATH="$PATH" HOME=/nonexistent NO_COLOR=1 ASAN_OPTIONS="${ASAN_OPTIONS:-}" \
        UBSAN_OPTIONS="${UBSAN_OPTIONS:-}" POD_NAME="$pod" POD_NAMESPACE="$ns" NODE_NAME="$node" \
        "$PREFLIGHT" check --root "$T/$fx" --format yaml --verdict "$T/$name.yaml" --timeout 20 \
        --pushgateway "$url" >"$T/$name.out" 2>&1
}
# pgput FILE GROUP: FILE PUT to the Pushgateway's group /metrics/GROUP
pgput() {
    [ -s "$1" ] && ip netns exec "$SW" curl -sf -X PUT --data-binary "@$1" "http://127.0.0.1:$GP/metrics/$2"
}

# ---- the stale group first: what a check pushes, its run two days back
pfcheck stale node-8gpu-ndr ml trainer-9 node-stale "$CAP"
old=$(($(date +%s) - 172800))
sed "s/^\(preflight_last_run_timestamp_seconds{[^}]*}\) .*/\1 $old/" "$T/body.1" >"$T/stale.prom"
expect_eq "stale: the exposition's run ended two days ago" \
    "$(grep -c "^preflight_last_run_timestamp_seconds{pod=\"trainer-9\"} $old\$" "$T/stale.prom")" 1
pgput "$T/stale.prom" job/preflight/namespace/ml/pod/trainer-9/node/node-stale &&
    ok "stale: pushed to its group" || notok "stale: pushed to its group"

# ---- solo: a check of a node with an RDMA port down (fails, class node), pushed by
# preflight, and what it pushes under the watch's job
pfcheck solo node-ports-bad other solo-0 gpu-node-9 "http://127.0.0.1:$GP" ip netns exec "$SW"
expect_eq "solo: fails with class node, pushed (report.metrics pass)" \
    "$(yq "$T/solo.yaml" '(d["verdict"], d["failureClass"], check("report.metrics")["status"])')" "('fail', 'node', 'pass')"
pfcheck solowatch node-ports-bad other solo-0 gpu-node-9 "$CAP"
kill "$CAP_PID" 2>/dev/null
pgput "$T/body.2" job/preflight-watch/namespace/other/pod/solo-0/node/gpu-node-9 &&
    ok "solo: its exposition pushed under job preflight-watch" || notok "solo: pushed under job preflight-watch"

for n in stale solo solowatch; do
    if grep -qE 'AddressSanitizer|LeakSanitizer|runtime error:' "$T/$n.out"; then
        notok "$n: no sanitizer report" "$(grep -m1 -E 'Sanitizer|runtime error' "$T/$n.out")"; fi
done

# ---- trainer: five pods, trainer-4's link throttled, a rail each
printf 'tcp: {messageBytes: 1048576, iterations: 2, minBusbwGBps: 0.0001}\npolicy: {findings: {vf-missing: ignore}}\n' >"$T/small.yaml"
ip netns exec "$(pods_ns 4)" tc qdisc add dev eth0 root tbf rate 40mbit burst 16kb latency 500ms &&
    ip netns exec "$SW" tc qdisc add dev "${PODS_PREFIX}v4" root tbf rate 40mbit burst 16kb latency 500ms ||
    notok "tc tbf on trainer-4's link"
mkdir -p "$T/$SC"
for ((i = 0; i < N; i++)); do
    pods_run_pod "$i" env PREFLIGHT_PODINFO="$T/podinfo$i" PREFLIGHT_PUSHGATEWAY="http://10.213.0.1:$GP"
done
pods_wait_all
for ((i = 0; i < N; i++)); do
    if grep -qE 'AddressSanitizer|LeakSanitizer|runtime error:' "$T/$SC/out$i"; then
        notok "trainer-$i: no sanitizer report" "$(grep -m1 -E 'Sanitizer|runtime error' "$T/$SC/out$i")"; fi
    expect_eq "trainer-$i: pushed (report.metrics pass), its rail probed" \
        "$(yq "$T/$SC/v$i.yaml" '(check("report.metrics")["status"], len([r for r in check("net.rails")["evidence"]["rails"] if "gbps" in r["probe"]]))')" \
        "('pass', 1)"
done
# whom rank 0 blames is its judgement under the machine's load (test_pushgateway.sh holds it):
# here the culprits panel is compared with whatever the verdict names
echo "# rank 0's culprits: $(yq "$T/$SC/v0.yaml" '[(c.get("pod"), c.get("reason")) for c in d["culprits"]]')"

if qwait 'count(preflight_info) == 8' 60 >/dev/null; then ok "prometheus holds all 8 groups"; else
    notok "prometheus holds all 8 groups" "$(q 'count by (job, pod) (preflight_info)')"; fi
qwait 'preflight:slow_link:fresh' 30 >/dev/null || notok "the rule preflight:slow_link:fresh records" "$(q 'preflight:slow_link:fresh')"
qwait 'preflight:node_class_failure:fresh{node="node-4"}' 30 >/dev/null ||
    notok "the rule preflight:node_class_failure:fresh records node-4" "$(q 'preflight:node_class_failure:fresh')"
# what the verdicts say: pod -> (node, namespace, verdict as pushed, class)
python3 - "$T" >"$T/expect.json" <<'PY'
import json, sys, yaml
t = sys.argv[1]
out = {}
for name, f in [("trainer-%d" % i, "%s/trainer/v%d.yaml" % (t, i)) for i in range(5)] + [("solo-0", t + "/solo.yaml")]:
    d = yaml.safe_load(open(f))
    v = d["verdict"] if d["verdict"] != "skip" else "pass"
    out[name] = {"node": "gpu-node-9" if name == "solo-0" else "node-" + name[-1],
                 "namespace": "other" if name == "solo-0" else "ml", "verdict": v,
                 "class": d.get("failureClass") if v == "fail" else None}
d = yaml.safe_load(open(t + "/trainer/v0.yaml"))
links = {}
for l in next(c for c in d["checks"] if c["id"] == "collective.tcp")["evidence"]["links"]:
    k = (l["from"], l["to"])
    links[k] = min(links.get(k, 1e30), l["gbps"])
out["links"] = [[a, b, g] for (a, b), g in sorted(links.items())]
# what metrics.c's culprit_kind makes of a reason
def kind(reason):
    if not reason or reason.startswith("slow node"):
        return "node"
    return "rail" if "rail" in reason else "link" if "link" in reason else "node"
out["culprits"] = sorted([c["pod"], c["node"], kind(c.get("reason")), "ml", "trainer"] for c in d["culprits"])
print(json.dumps(out))
PY

# ev NAME [VAR=VALUE]...: every target evaluated, into $T/ev.NAME.json
ev() {
    local name=$1
    shift
    ip netns exec "$SW" python3 "$DPY" eval "$DASH" "$PROM" "$@" >"$T/ev.$name.json" 2>"$T/ev.$name.err" ||
        notok "dashboard eval $name" "$(tail -2 "$T/ev.$name.err")"
}
# pq NAME EXPR: a Python expression over evaluation NAME: r(ID) the result list of panel
# ID's target A (r(ID, "B") another), m(ID) its label sets, v(ID) its values (floats),
# rows(ID, LABEL) the sorted values of LABEL, E the verdicts' expectations
pq() {
    python3 - "$T/ev.$1.json" "$T/expect.json" "$2" <<'PY'
import json, sys
ev = json.load(open(sys.argv[1]))
E = json.load(open(sys.argv[2]))
def r(i, ref="A"):
    x = ev["%d%s" % (i, ref)]
    if "error" in x:
        raise SystemExit("ERROR %s: %s" % (i, x["error"]))
    return x["result"]
def m(i, ref="A"):
    return [s["metric"] for s in r(i, ref)]
def v(i, ref="A"):
    return [float(s["value"][1]) for s in r(i, ref)]
def rows(i, label, ref="A"):
    return sorted(s["metric"].get(label, "-") for s in r(i, ref))
x = eval(sys.argv[3])
print(json.dumps(x, ensure_ascii=False) if isinstance(x, (list, dict)) else x)
PY
}

ev default
# every target evaluates; every one but the NCCL Inspector's (no NCCL here) returns series;
# no series of any panel comes from the stale group
python3 - "$T/ev.default.json" "$T/expect.json" <<'PY'
import json, sys
ev = json.load(open(sys.argv[1]))
E = json.load(open(sys.argv[2]))
for k, x in sorted(ev.items(), key=lambda kv: (int(kv[0][:-1]), kv[0][-1])):
    name = "dashboard: %s '%s'" % (k, x["title"])
    if "error" in x:
        print("not ok - %s evaluates: %s: %s" % (name, x["error"], x["expr"]))
    elif not x["result"] and "nccl_bus_bandwidth_gbs" not in x["expr"] and not (k == "6A" and not E["culprits"]):
        print("not ok - %s returns series: none for %s" % (name, x["expr"]))
    elif "node-stale" in json.dumps(x["result"]) or "trainer-9" in json.dumps(x["result"]):
        print("not ok - %s leaves the stale group out: %s" % (name, json.dumps(x["result"])[:300]))
    else:
        print("ok - %s evaluates, %d series%s, none of the stale group" % (name, len(x["result"]),
              " (no NCCL run here, or no culprit named)" if not x["result"] else ""))
PY

# fleet: pass rate, verdicts and classes as the six fresh gate runs' verdicts give them
expect_eq "pass rate: the share of the six fresh gate runs that passed" \
    "$(pq default 'round(v(1)[0], 6)')" \
    "$(pq default 'round(sum(1 for k, e in E.items() if k not in ("links", "culprits") and e["verdict"] == "pass") / 6, 6)')"
expect_eq "runs by verdict: one count a verdict, as the verdicts say" \
    "$(pq default 'sorted([s["metric"]["verdict"], int(float(s["value"][1]))] for s in r(2))')" \
    "$(pq default 'sorted([k, sum(1 for n, e in E.items() if n not in ("links", "culprits") and e["verdict"] == k)] for k in ("pass", "warn", "fail"))')"
FAILS='[[e["node"], e["class"]] for k, e in E.items() if k not in ("links", "culprits") and e["verdict"] == "fail"]'
expect_eq "failures by class: the failed runs' classes, as the verdicts say (solo-0's node among them)" \
    "$(pq default 'sorted([s["metric"]["class"], int(float(s["value"][1]))] for s in r(3) if float(s["value"][1]) > 0)')" \
    "$(pq default "sorted([c, n] for c, n in __import__('collections').Counter(c for _, c in $FAILS).items())")"

# the node table: one row per node, each row the verdict of the run on it
expect_eq "nodes table: one row per node, the stale node not among them" "$(pq default 'rows(12, "node")')" \
    '["gpu-node-9", "node-0", "node-1", "node-2", "node-3", "node-4"]'
expect_eq "nodes table: each row's verdict, job and pod as the run on the node" \
    "$(pq default 'sorted([s["node"], s["verdict"], s["namespace"], s["workload"], s["pod"]] for s in m(12))')" \
    "$(pq default 'sorted([e["node"], e["verdict"], e["namespace"], "solo" if k == "solo-0" else "trainer", k] for k, e in E.items() if k not in ("links", "culprits"))')"
expect_eq "nodes table: each row's value the seconds since its run ended (0 to the window)" \
    "$(pq default 'all(0 <= x < 86400 for x in v(12))')" True
expect_eq "failures by node and class: one row a failed node (gpu-node-9 with class node among them)" \
    "$(pq default 'sorted([s["node"], s["class"]] for s in m(5))')" "$(pq default "sorted($FAILS)")"

# the heatmap: rank 0's links, one cell each, node-4's the slow ones
expect_eq "heatmap: one cell a link rank 0 listed (rows and columns as the matrix shows them)" \
    "$(pq default 'sorted([s["from"], s["to"]] for s in m(11))')" \
    "$(pq default 'sorted(["ml/trainer · %d · node-%d" % (a, a), "%d · node-%d" % (b, b)] for a, b, g in E["links"])')"
expect_eq "heatmap: each cell the link's slowest round (rank 0's evidence, 0.1 %)" \
    "$(pq default 'all(abs(float(s["value"][1]) - g) <= 1e-3 * g for s in r(11) for a, b, g in E["links"] if (s["metric"]["from_rank"], s["metric"]["to_rank"]) == (str(a), str(b)))')" True
expect_eq "heatmap: every link of node-4 slower than every other link (40 Mbit/s against the veths' Gb/s)" \
    "$(pq default 'max(float(s["value"][1]) for s in r(11) if "node-4" in (s["metric"]["from_node"], s["metric"]["to_node"])) < min(float(s["value"][1]) for s in r(11) if "node-4" not in (s["metric"]["from_node"], s["metric"]["to_node"]))')" True
expect_eq "slowest links table: the slowest is one of node-4's" \
    "$(pq default 'sorted(r(8), key=lambda s: float(s["value"][1]))[0]["metric"]["to_node"] == "node-4" or sorted(r(8), key=lambda s: float(s["value"][1]))[0]["metric"]["from_node"] == "node-4"')" True
expect_eq "culprits table: rank 0's culprits, pod, node, kind and job" \
    "$(pq default 'sorted([s["culprit_pod"], s["culprit_node"], s["kind"], s["namespace"], s["workload"]] for s in m(6))')" \
    "$(pq default 'E["culprits"]')"
expect_eq "lemon nodes: each node a run failed on with class node (gpu-node-9 among them), one job each" \
    "$(pq default 'sorted([s["metric"]["node"], s["value"][1]] for s in r(4))')" \
    "$(pq default "sorted([n, '1'] for n, c in $FAILS if c == 'node')")"
# (whether a fast link also falls under a third of the median depends on the machine's load:
# only node-4's pairs are compared)
expect_eq "slow links: every pair of node-4's links rank 0 probed, one job each" \
    "$(pq default 'sorted([s["metric"]["from_node"], s["metric"]["to_node"], s["value"][1]] for s in r(9) if "node-4" in (s["metric"]["from_node"], s["metric"]["to_node"]))')" \
    "$(pq default 'sorted([list(p) + ["1"] for p in {("node-%d" % a, "node-%d" % b) for a, b, g in E["links"] if 4 in (a, b)}])')"

# the rails: one row a pod, one column its rail; rank 0's median of the network
expect_eq "rails matrix: one row a pod (node · pod), the column its rail" \
    "$(pq default 'sorted([s["row"], s["rail"]] for s in m(13))')" \
    '[["node-0 · trainer-0", "ml/rail-a net1"], ["node-1 · trainer-1", "ml/rail-a net1"], ["node-2 · trainer-2", "ml/rail-a net1"], ["node-3 · trainer-3", "ml/rail-a net1"], ["node-4 · trainer-4", "ml/rail-a net1"]]'
expect_eq "rails matrix: each cell the pod's own probe (its verdict, 0.1 %)" \
    "$(python3 - "$T" <<'PY'
import json, sys, yaml
t = sys.argv[1]
ev = json.load(open(t + "/ev.default.json"))["13A"]["result"]
ok = len(ev) == 5
for s in ev:
    i = int(s["metric"]["pod"][-1])
    d = yaml.safe_load(open("%s/trainer/v%d.yaml" % (t, i)))
    g = next(c for c in d["checks"] if c["id"] == "net.rails")["evidence"]["rails"][0]["probe"]["gbps"]
    ok = ok and abs(float(s["value"][1]) - g) <= 1e-3 * g
print(ok)
PY
)" True
expect_eq "rail medians: one row, ml/trainer's network ml/rail-a, rank 0's median" \
    "$(pq default '[[s["metric"]["namespace"], s["metric"]["workload"], s["metric"]["network"]] for s in r(14)]')" \
    '[["ml", "trainer", "ml/rail-a"]]'
expect_eq "rail medians: the value is rank 0's (0.1 %)" \
    "$(pq default "abs(v(14)[0] - $(yq "$T/$SC/v0.yaml" 'check("net.rails")["evidence"]["networks"][0]["medianGbps"]')) <= 1e-3 * v(14)[0]")" True
expect_eq "busbw over time (range): the five trainers' tcp all-reduce and their floor" \
    "$(pq default '[sorted({s["node"] for s in m(7) if s["backend"] == "tcp"}), len(r(7, "B")) > 0]')" \
    '[["node-0", "node-1", "node-2", "node-3", "node-4"], true]'

# ---- the filters
ev ns_other 'namespace=other'
expect_eq "namespace other: the node table is gpu-node-9's row" "$(pq ns_other 'rows(12, "node")')" '["gpu-node-9"]'
expect_eq "namespace other: no link, rail or culprit of ml" "$(pq ns_other '[len(r(i)) for i in (11, 8, 6, 13, 14, 9)]')" '[0, 0, 0, 0, 0, 0]'
expect_eq "namespace other: the lemon nodes are solo-0's" "$(pq ns_other '[[s["metric"]["node"], s["value"][1]] for s in r(4)]')" '[["gpu-node-9", "1"]]'
expect_eq "namespace other: its one failure, gpu-node-9 with class node" "$(pq ns_other 'sorted([s["node"], s["class"]] for s in m(5))')" '[["gpu-node-9", "node"]]'
expect_eq "namespace other: one run by verdict" "$(pq ns_other 'sum(v(2))')" 1.0
ev ns_ml 'namespace=ml'
expect_eq "namespace ml: the five trainers' nodes" "$(pq ns_ml 'rows(12, "node")')" '["node-0", "node-1", "node-2", "node-3", "node-4"]'
expect_eq "namespace ml: the heatmap as without a filter" "$(pq ns_ml 'len(r(11))')" "$(pq default 'len(r(11))')"
ev multi 'namespace=ml|other'
expect_eq "namespaces ml and other (multi-value): all six nodes" "$(pq multi 'len(rows(12, "node"))')" 6
ev job_solo 'job=solo'
expect_eq "job solo: gpu-node-9 alone, no link" "$(pq job_solo '[rows(12, "node"), len(r(11)), sum(v(2))]')" '[["gpu-node-9"], 0, 1.0]'
ev job_mismatch 'namespace=other' 'job=trainer'
expect_eq "namespace other, job trainer: nothing" "$(pq job_mismatch '[len(r(i)) for i in (1, 2, 12, 11, 13)]')" '[0, 0, 0, 0, 0]'
ev watch 'run=preflight-watch'
expect_eq "runs of the watch: its one group (solo-0), none of the gate's" \
    "$(pq watch '[rows(12, "node"), rows(12, "job"), sum(v(2))]')" '[["gpu-node-9"], ["preflight-watch"], 1.0]'
expect_eq "runs of the gate: solo-0's node once, from the gate's group" \
    "$(pq default '[s["job"] for s in m(12) if s["node"] == "gpu-node-9"]')" '["preflight"]'
# the window reaching back two days brings the stale group back: the filter is what hid it
ev week 'freshness=604800'
expect_eq "runs of the last 7d: the stale node's row is back, its run two days old" \
    "$(pq week '[round(float(s["value"][1]) / 86400) for s in r(12) if s["metric"]["node"] == "node-stale"]')" '[2]'
expect_eq "runs of the last 7d: seven runs by verdict" "$(pq week 'sum(v(2))')" 7.0
expect_eq "runs of the last 7d: the title says so" "$(pq week 'json.load(open(sys.argv[1]))["1A"]["title"]')" "Fleet pass rate (runs of the last 7d)"
