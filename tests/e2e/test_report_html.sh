#!/usr/bin/env bash
# `preflight report VERDICT --html FILE` in a real headless Chromium (Debian's package), driven
# over the DevTools protocol by tests/e2e/cdp_page.py, the screenshot's pixels read back:
#   crafted  rank 0's verdict of 6 ranks written as docs/verdict.md lays it out
#            (tests/e2e/report_verdict.py): a slow link 1 -> 4, a slow node 3, markup in a pod
#            name, a message and a code. The page loads with no console error, no request and
#            no CSP refusal; the slow link's cell, and only it, is the slow colour; the node's
#            row and column (a cross) are; a fast link is not; no markup of the verdict runs
#            or becomes an element; a click on a header sorts the ranks table.
#   large    2,048 ranks: a pixel block of two ranks shows its slowest link; the ranks table
#            holds a page of rows and sorts over every rank.
#   rates    rank 0's verdict of 64 ranks as a job of more than 48 measured links writes it
#            (linksMeasured, the 48 slowestLinks, every link in linkRates): every probed
#            link's cell as its figure in linkRates says, slow or not (none "not listed"),
#            every unprobed pair neutral; a malformed linkRates entry is an error naming it.
#   run      a real 4-pod `preflight run` (network namespaces, tests/e2e/pods.sh) with one
#            direction of one link shaped by tc (trainer-1 -> trainer-3 at 40 Mbit/s): rank
#            0's verdict's page shows that cell, at its place, in the slow colour, and every
#            cell as the verdict's figures say (the reverse direction, which carries the
#            shaped link's ACKs, may measure slow too: it is shown as measured).
#   many     a real 17-pod run (more than 48 link samples): rank 0's verdict lists every
#            sample in linkRates, and every cell of the page is as its figure there says.
#   bad      a missing file, a file that is not YAML, another apiVersion, a key of the wrong
#            type, no --html, an option report does not take, an unwritable FILE: a clear
#            error naming the input (and the line), exit 2 (1 for the write), no crash.
source "$(dirname "$0")/lib.sh"
E2E="$PREFLIGHT_SRC/tests/e2e"
SLOW='[215, 48, 39]' # the page's slow colour (pkg/report/html_page.c)
SELF='[248, 248, 248]'
NONE='[208, 208, 208]'

# ---- bad input (no browser needed)
printf 'apiVersion: preflight/v1\nkind: Verdict\nchecks: [\n  {id: x\n' >"$T/notyaml.yaml"
printf 'apiVersion: preflight/v2\nkind: Verdict\nverdict: pass\n' >"$T/v2.yaml"
printf 'apiVersion: preflight/v1\nkind: Verdict\nverdict: pass\nranks: 5\n' >"$T/type.yaml"
printf 'apiVersion: preflight/v1\nkind: Verdict\nranks:\n  - {rank: -3}\n' >"$T/rank.yaml"
printf -- '- a\n- b\n' >"$T/seq.yaml"
: >"$T/empty.yaml"
p missing -- report "$T/nope.yaml" --html "$T/x.html"
rc_is missing 2
err_has missing "nope.yaml: No such file or directory"
p notyaml -- report "$T/notyaml.yaml" --html "$T/x.html"
rc_is notyaml 2
err_has notyaml "notyaml.yaml: line 5: not YAML"
p v2 -- report "$T/v2.yaml" --html "$T/x.html"
rc_is v2 2
err_has v2 'v2.yaml: line 1: not a preflight verdict (apiVersion "preflight/v2"'
p type -- report "$T/type.yaml" --html "$T/x.html"
rc_is type 2
err_has type "type.yaml: line 4: ranks is a scalar, expected a sequence"
p rank -- report "$T/rank.yaml" --html "$T/x.html"
rc_is rank 2
err_has rank "rank.yaml: line 4: rank is -3, expected an integer"
p seq -- report "$T/seq.yaml" --html "$T/x.html"
rc_is seq 2
err_has seq "not a preflight verdict (a sequence"
p empty -- report "$T/empty.yaml" --html "$T/x.html"
rc_is empty 2
err_has empty "empty.yaml: empty"
check "bad input: no page written" test ! -e "$T/x.html"
python3 "$E2E/report_verdict.py" 6 "$T/v6.yaml" --slow-link 1,4 --slow-node 3 --evil
p nohtml -- report "$T/v6.yaml"
rc_is nohtml 2
err_has nohtml "--html FILE"
p format -- report "$T/v6.yaml" --html "$T/x.html" --format yaml
rc_is format 2
err_has format "--format is an option of"
p unwritable -- report "$T/v6.yaml" --html /proc/nope/x.html
rc_is unwritable 1
err_has unwritable "--html /proc/nope/x.html"
p stdout -- report "$T/v6.yaml" --html -
rc_is stdout 0
check "--html - writes the page to stdout" grep -q '^<!DOCTYPE html>' "$T/stdout.out"
if grep -qE 'AddressSanitizer|runtime error' "$T"/*.err; then
    notok "bad input: no sanitizer report" "$(grep -lE 'AddressSanitizer|runtime error' "$T"/*.err)"
else ok "bad input: no sanitizer report"; fi

if ! command -v chromium >/dev/null; then
    skip "report in a headless Chromium" "chromium not installed (scripts/deps.sh test)"
    exit 0
fi

# page_ok NAME JSON: no console error, no CSP refusal, no request besides the page
page_ok() {
    local e
    e=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(len(r["errors"]), len(r["requests"]), r["errors"][:2], r["requests"][:2])' "$2")
    if [ "${e%% *}" = 0 ] && [ "$(echo "$e" | cut -d' ' -f2)" = 0 ]; then ok "$1: loads with no console error and no request"
    else notok "$1: loads with no console error and no request" "$e"; fi
}
# jq_eq NAME JSON EXPR EXPECTED: the Python expression over the report r equals EXPECTED
jq_eq() {
    expect_eq "$1" "$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(json.dumps(eval(sys.argv[2])))' "$2" "$3")" "$4"
}

# ---- crafted
p crafted -- report "$T/v6.yaml" --html "$T/v6.html"
rc_is crafted 0
CELLS=()
for f in 0 1 2 3 4 5; do for t in 0 1 2 3 4 5; do CELLS+=(--cell "$f,$t"); done; done
timeout 180 python3 "$E2E/cdp_page.py" "$T/v6.html" "$T/v6.json" --png "$T/v6.png" "${CELLS[@]}" \
    --eval 'pwned=typeof window.pwned' \
    --eval "pod=document.querySelector('#rt tbody').rows[1].cells[1].textContent" \
    --eval "code=document.querySelector('#ct tbody').rows[0].cells[3].textContent.indexOf('code<b>bold</b>') >= 0" \
    --eval "elements=document.querySelectorAll('b, img').length" \
    --eval "scripts=document.scripts.length" \
    --eval "culprit=document.querySelector('#culprits tbody').rows[0].textContent" \
    --eval "byverdict=(function(){document.querySelector('#rt thead th:nth-child(6)').click();return document.querySelector('#rt tbody').rows[0].cells[0].textContent})()" \
    --eval "byrank=(function(){var h=document.querySelector('#rt thead th');h.click();h.click();return document.querySelector('#rt tbody').rows[0].cells[0].textContent})()" \
    >"$T/cdp6.log" 2>&1 || notok "crafted: the browser ran" "$(tail -3 "$T/cdp6.log")"
if [ -s "$T/v6.json" ]; then
    page_ok crafted "$T/v6.json"
    jq_eq "crafted: the slow link 1 -> 4 is the slow colour, at its cell" "$T/v6.json" 'r["cells"]["1,4"]' "$SLOW"
    jq_eq "crafted: its other direction 4 -> 1 is not" "$T/v6.json" 'r["cells"]["4,1"] != '"$SLOW" true
    jq_eq "crafted: the slow node 3 is a cross (its row and column, every other cell of them)" "$T/v6.json" \
        'all(r["cells"]["%d,%d" % (a, b)] == '"$SLOW"' for k in range(6) if k != 3 for a, b in ((3, k), (k, 3)))' true
    jq_eq "crafted: the cells that are neither are not slow" "$T/v6.json" \
        'sorted(k for k, v in r["cells"].items() if v == '"$SLOW"' and "3" not in k)' '["1,4"]'
    jq_eq "crafted: a rank with itself is its own colour" "$T/v6.json" 'r["cells"]["2,2"]' "$SELF"
    jq_eq "crafted: a fast link is green (not slow, not unprobed)" "$T/v6.json" \
        'r["cells"]["0,1"][1] > 120 and r["cells"]["0,1"] != '"$NONE" true
    jq_eq "crafted: the pod name's <script> did not run" "$T/v6.json" 'r["eval"]["pwned"]' '"undefined"'
    jq_eq "crafted: the pod name is shown as written" "$T/v6.json" 'r["eval"]["pod"]' \
        '"trainer-1<script>window.pwned=1</script>"'
    jq_eq "crafted: a finding code with markup is text" "$T/v6.json" 'r["eval"]["code"]' true
    jq_eq "crafted: no element came from the verdict's markup" "$T/v6.json" 'r["eval"]["elements"]' 0
    jq_eq "crafted: the page has its two scripts only (data, code)" "$T/v6.json" 'r["eval"]["scripts"]' 2
    jq_eq "crafted: the culprit with its pod, node and why" "$T/v6.json" 'r["eval"]["culprit"]' \
        '"3trainer-3node-3every link of the node is slow (0.04 Gb/s)"'
    jq_eq "crafted: sorted by verdict, the failing rank comes first" "$T/v6.json" 'r["eval"]["byverdict"]' '"3"'
    jq_eq "crafted: sorted by rank, downwards" "$T/v6.json" 'r["eval"]["byrank"]' '"5"'
fi
# the markup is escaped in the file itself (not only made harmless by the policy)
check "crafted: no <script> of the verdict in the file" \
    test "$(grep -c 'window.pwned=1</script>' "$T/v6.html")" = 0
check "crafted: the page's policy allows nothing from elsewhere" \
    grep -q "default-src 'none'" "$T/v6.html"

# ---- large: 2,048 ranks, two ranks a pixel block (a block shows its slowest link), the ranks
# table a page of 250 rows, sorted over all of them
python3 "$E2E/report_verdict.py" 2048 "$T/v2k.yaml" --slow-link 100,2000 --slow-node 1500 --checks 4
p large -- report "$T/v2k.yaml" --html "$T/v2k.html"
rc_is large 0
timeout 240 python3 "$E2E/cdp_page.py" "$T/v2k.html" "$T/v2k.json" --cell 100,2000 --cell 2000,100 \
    --cell 1500,1501 --cell 1499,1500 --cell 10,11 --cell 10,1000 \
    --eval "rows=document.querySelectorAll('#rt tbody tr').length" \
    --eval "first=(function(){document.querySelector('#rt thead th:nth-child(6)').click();return document.querySelector('#rt tbody tr').cells[0].textContent+' '+document.getElementById('rnav').textContent})()" \
    >"$T/cdp2k.log" 2>&1 || notok "large: the browser ran" "$(tail -3 "$T/cdp2k.log")"
if [ -s "$T/v2k.json" ]; then
    page_ok large "$T/v2k.json"
    jq_eq "large: two ranks a block" "$T/v2k.json" '[r["canvas"]["block"], r["canvas"]["cell"]]' '[2, 1]'
    jq_eq "large: the slow link's block is the slow colour, its mirror is not listed" "$T/v2k.json" \
        '[r["cells"]["100,2000"], r["cells"]["2000,100"]]' "[$SLOW, $NONE]"
    jq_eq "large: the slow node's links are slow, a fast pair not" "$T/v2k.json" \
        '[r["cells"]["1500,1501"] == '"$SLOW"', r["cells"]["1499,1500"] == '"$SLOW"', r["cells"]["10,11"] == '"$SLOW"']' \
        '[true, true, false]'
    jq_eq "large: an unprobed pair is neutral" "$T/v2k.json" 'r["cells"]["10,1000"]' "$NONE"
    jq_eq "large: the ranks table holds one page" "$T/v2k.json" 'r["eval"]["rows"]' 250
    jq_eq "large: sorted by verdict over every rank, the failing one first" "$T/v2k.json" \
        'r["eval"]["first"]' '"1500 previous rows 1-250 of 2048 next"'
fi

# ---- rates: more than 48 links, every one in linkRates (docs/verdict.md); every cell of the
# 64 x 64 heatmap compared with the verdict's figures
python3 "$E2E/report_verdict.py" 64 "$T/v64.yaml" --slow-link 5,40 --slow-node 20 --checks 4 --rates
check "rates: the verdict lists 48 slowest links and every link in linkRates" \
    test "$(yq "$T/v64.yaml" '(lambda e: [len(e["slowestLinks"]), e["linksMeasured"], sum(len(v.split()) for v in e["linkRates"].values())])(check("collective.tcp")["evidence"])')" = "[48, 385, 385]"
p rates -- report "$T/v64.yaml" --html "$T/v64.html"
rc_is rates 0
check "rates: the page counts every link" grep -q "385 links measured" "$T/v64.html"
timeout 240 python3 "$E2E/cdp_page.py" "$T/v64.html" "$T/v64.json" \
    $(for f in $(seq 0 63); do for t in $(seq 0 63); do echo --cell $f,$t; done; done) \
    >"$T/cdp64.log" 2>&1 || notok "rates: the browser ran" "$(tail -3 "$T/cdp64.log")"
if [ -s "$T/v64.json" ]; then
    page_ok rates "$T/v64.json"
    python3 - "$T/v64.yaml" "$T/v64.json" "$SLOW" "$NONE" >"$T/cmp64.txt" <<'PY'
import json, sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
r = json.load(open(sys.argv[2]))
slow_c, none_c = json.loads(sys.argv[3]), json.loads(sys.argv[4])
ev = [c for c in d["checks"] if c["id"] == "collective.tcp"][0]["evidence"]
thr = ev["medianLinkGbps"] / 3
best = {}
for f, v in ev["linkRates"].items():
    for x in v.split():
        t, g = x.split("=")
        k = "%d,%d" % (int(f), int(t))
        best[k] = max(best.get(k, 0), float(g))
bad, slow = [], 0
for f in range(64):
    for t in range(64):
        k = "%d,%d" % (f, t)
        got = r["cells"].get(k)
        if k in best:
            slow += best[k] < thr
            if got == none_c or (got == slow_c) != (best[k] < thr):
                bad.append("%s: %s Gb/s (threshold %.3f) shows %s" % (k, best[k], thr, got))
        elif f != t and got != none_c:
            bad.append("%s: not probed, shows %s" % (k, got))
print("; ".join(bad[:5]) if bad else "same, %d probed, %d slow" % (len(best), slow))
PY
    expect_eq "rates: every cell as linkRates says (slow or not, probed or not)" \
        "$(cat "$T/cmp64.txt")" "same, 385 probed, 13 slow"
fi
sed 's/^\(        "7": \).*/\11=9.3 2=fast/' "$T/v64.yaml" >"$T/badrates.yaml"
p badrates -- report "$T/badrates.yaml" --html "$T/x.html"
rc_is badrates 2
err_has badrates 'linkRates of rank 7: "2=fast" is not DST=GBPS'

# ---- run: a real 4-pod run with one slow link, rank 0's verdict
run_case() {
    need_root "run: a 4-pod run's page" || return
    local c
    for c in ip dnsmasq tc; do
        command -v "$c" >/dev/null || { skip "run: a 4-pod run's page" "$c not installed"; return; }
    done
    source "$E2E/pods.sh"
    N=4 TO=90 SC=run PORT=29870
    trap 'pods_cleanup; rm -rf "$T"' EXIT
    pods_setup "$N" "pfh$$" || { notok "run: set up $N pods"; return; }
    printf 'tcp: {messageBytes: 1048576, iterations: 1}\n' >"$T/small.yaml"
    local ns1 i
    ns1=$(pods_ns 1)
    ip netns exec "$ns1" tc qdisc add dev eth0 root handle 1: htb default 0 &&
        ip netns exec "$ns1" tc class add dev eth0 parent 1: classid 1:10 htb rate 40mbit \
            ceil 40mbit burst 16kb 2>/dev/null &&
        ip netns exec "$ns1" tc filter add dev eth0 parent 1: protocol ip prio 1 u32 \
            match ip dst "$(pods_ip 3)/32" flowid 1:10 ||
        { notok "run: tc on trainer-1 for trainer-3"; return; }
    mkdir -p "$T/run"
    declare -gA RC
    for ((i = 0; i < N; i++)); do pods_run_pod "$i"; done
    pods_wait_all
    ip netns exec "$ns1" tc qdisc del dev eth0 root
    local v="$T/run/v0.yaml"
    [ -s "$v" ] || { notok "run: rank 0's verdict" "none (exit ${RC[0]})"; return; }
    # the shaped link measures slow whatever the host's load (40 Mbit/s against veth pairs that
    # carry Gbit/s); whether rank 0 blames it depends on the load (a starved CPU is not blamed
    # on a link), so the page is compared with the figures, not with the finding
    expect_eq "run: rank 0's verdict lists the link 1 -> 3, every sample under a third of the median" \
        "$(yq "$v" '(lambda e: max(l["gbps"] for l in e["links"] if (l["from"], l["to"]) == (1, 3)) < e["medianLinkGbps"] / 3)(check("collective.tcp")["evidence"])')" True
    p runreport -- report "$v" --html "$T/run.html"
    rc_is runreport 0
    timeout 180 python3 "$E2E/cdp_page.py" "$T/run.html" "$T/run.json" --png "$T/run.png" \
        $(for f in 0 1 2 3; do for t in 0 1 2 3; do echo --cell $f,$t; done; done) >"$T/cdprun.log" 2>&1 ||
        notok "run: the browser ran" "$(tail -3 "$T/cdprun.log")"
    [ -s "$T/run.json" ] || return
    page_ok run "$T/run.json"
    jq_eq "run: the slow link 1 -> 3 is the slow colour, at its cell" "$T/run.json" 'r["cells"]["1,3"]' "$SLOW"
    # every cell as the verdict's figures say: a listed link by its best sample (slow under a
    # third of medianLinkGbps, pkg/collective's ratio), an unlisted pair neutral
    python3 - "$v" "$T/run.json" >"$T/cmp.txt" <<'PY'
import json, sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
r = json.load(open(sys.argv[2]))
ev = [c for c in d["checks"] if c["id"] == "collective.tcp"][0]["evidence"]
thr = ev["medianLinkGbps"] / 3
best = {}
for l in ev["links"]:
    k = "%d,%d" % (l["from"], l["to"])
    best[k] = max(best.get(k, 0), l["gbps"])
bad = []
for f in range(4):
    for t in range(4):
        k = "%d,%d" % (f, t)
        got = r["cells"].get(k)
        slow = got == [215, 48, 39]
        if k in best and slow != (best[k] < thr):
            bad.append("%s: %s Gb/s (threshold %.3f) shows %s" % (k, best[k], thr, got))
        if k not in best and f != t and got != [208, 208, 208]:
            bad.append("%s: not listed, shows %s" % (k, got))
print("; ".join(bad) if bad else "same")
PY
    expect_eq "run: every cell as the verdict's link figures say (slow or not, listed or not)" \
        "$(cat "$T/cmp.txt")" same
}
run_case

# ---- many: a real 17-pod run, more than 48 link samples: rank 0's verdict lists every one in
# linkRates, and the page's every cell is as its figure there says
many_case() {
    need_root "many: a 17-pod run's page" || return
    command -v dnsmasq >/dev/null || { skip "many: a 17-pod run's page" "dnsmasq not installed"; return; }
    source "$E2E/pods.sh"
    pods_cleanup 2>/dev/null
    N=17 TO=120 SC=many PORT=29880
    trap 'pods_cleanup; rm -rf "$T"' EXIT
    pods_setup "$N" "pfm$$" || { notok "many: set up $N pods"; return; }
    printf 'tcp: {messageBytes: 1048576, iterations: 1}\n' >"$T/small.yaml"
    mkdir -p "$T/many"
    declare -gA RC
    local i v="$T/many/v0.yaml"
    for ((i = 0; i < N; i++)); do pods_run_pod "$i"; done
    pods_wait_all
    [ -s "$v" ] || { notok "many: rank 0's verdict" "none (exit ${RC[0]})"; return; }
    expect_eq "many: linkRates lists every sample of more than 48" \
        "$(yq "$v" '(lambda e: sum(len(x.split()) for x in e["linkRates"].values()) == e["linksMeasured"] > 48 and len(e["slowestLinks"]) == 48)(check("collective.tcp")["evidence"])')" True
    p manyreport -- report "$v" --html "$T/many.html"
    rc_is manyreport 0
    timeout 180 python3 "$E2E/cdp_page.py" "$T/many.html" "$T/many.json" \
        $(for f in $(seq 0 16); do for t in $(seq 0 16); do echo --cell $f,$t; done; done) \
        >"$T/cdpmany.log" 2>&1 || notok "many: the browser ran" "$(tail -3 "$T/cdpmany.log")"
    [ -s "$T/many.json" ] || return
    page_ok many "$T/many.json"
    python3 - "$v" "$T/many.json" "$SLOW" "$NONE" >"$T/cmpmany.txt" <<'PY'
import json, sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
r = json.load(open(sys.argv[2]))
slow_c, none_c = json.loads(sys.argv[3]), json.loads(sys.argv[4])
ev = [c for c in d["checks"] if c["id"] == "collective.tcp"][0]["evidence"]
thr = ev["medianLinkGbps"] / 3
best = {}
for f, v in ev["linkRates"].items():
    for x in v.split():
        t, g = x.split("=")
        k = "%d,%d" % (int(f), int(t))
        best[k] = max(best.get(k, 0), float(g))
bad = []
for f in range(17):
    for t in range(17):
        k = "%d,%d" % (f, t)
        got = r["cells"].get(k)
        if k in best:
            if got == none_c or (got == slow_c) != (best[k] < thr):
                bad.append("%s: %s Gb/s (threshold %.3f) shows %s" % (k, best[k], thr, got))
        elif f != t and got != none_c:
            bad.append("%s: not probed, shows %s" % (k, got))
print("; ".join(bad[:5]) if bad else "same")
PY
    expect_eq "many: every cell as linkRates says (slow or not, probed or not)" "$(cat "$T/cmpmany.txt")" same
}
many_case
