#!/usr/bin/env bash
# collective.tcp's floor: `tcp.minBusbwGBps` in the config. Two `preflight run` ranks on
# 127.0.0.1 (a free port): a floor no TCP stack reaches gives `below-threshold` (warn) on both
# ranks' verdicts, naming the measured busbw, the floor and the config key, with
# `expectedMinBusbwGBps` and `rule` in the TCP collectives entry; exit 0, and 1 under --strict.
# A tiny floor gives no finding; no floor, no expectedMinBusbwGBps.
source "$(dirname "$0")/lib.sh"

EMPTY=$T/empty # a root with nothing in it: the local checks have nothing to look at
mkdir -p "$EMPTY"


# pair NAME CONFIG-TEXT [ARGS...]: ranks 0 and 1 of a world of two; verdicts in
# $T/NAME-{0,1}.yaml, exit codes in $T/NAME-{0,1}.rc
pair() {
    local name=$1 port r
    printf '%b' "$2" >"$T/$name.yaml"
    shift 2
    port=$(free_port)
    for r in 0 1; do
        (
            cd "$T" && timeout 90 env -i PATH="$PATH" HOME=/nonexistent NO_COLOR=1 \
                ASAN_OPTIONS="${ASAN_OPTIONS:-}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-}" \
                "$PREFLIGHT" run --root "$EMPTY" --config "$T/$name.yaml" --rank "$r" \
                --world-size 2 --coordinator 127.0.0.1 --port "$port" --timeout 60 \
                --format yaml --verdict "$T/$name-$r.yaml" "$@" >"$T/$name-$r.out" 2>&1
            echo $? >"$T/$name-$r.rc"
        ) &
    done
    wait
    for r in 0 1; do
        if grep -qE 'AddressSanitizer|LeakSanitizer|runtime error:' "$T/$name-$r.out"; then
            notok "$name rank $r: no sanitizer report" "$(grep -m1 -E 'Sanitizer|runtime error' "$T/$name-$r.out")"
        fi
    done
}
v() { yq "$T/$1.yaml" "$2" 2>&1; }
tcp_entry='[c for c in d["collectives"] if c["backend"] == "tcp"][0]'
tcp_findings='[(f["code"], f["status"]) for f in check("collective.tcp").get("findings") or []]'

# ---- a floor no TCP stack reaches
pair high 'tcp: {messageBytes: 1048576, iterations: 2, minBusbwGBps: 100000}\n'
for r in 0 1; do
    expect_eq "high floor, rank $r: exit 0 (warn)" "$(cat "$T/high-$r.rc")" 0
    expect_eq "high floor, rank $r: verdict warn" "$(v "high-$r" 'd["verdict"]')" warn
    expect_eq "high floor, rank $r: below-threshold, warn" "$(v "high-$r" "$tcp_findings")" \
        '[["below-threshold", "warn"]]'
    expect_eq "high floor, rank $r: expectedMinBusbwGBps and rule in the TCP entry" \
        "$(v "high-$r" "[$tcp_entry[k] for k in ('expectedMinBusbwGBps', 'rule')]")" \
        '[100000.0, "tcp.minBusbwGBps = 100000 GB/s"]'
done
# the message names the measured busbw (as in the collectives entry), the floor and the key
msg=$(v high-0 '[f["message"] for f in check("collective.tcp")["findings"]][0]')
busbw=$(v high-0 "'%.3f' % $tcp_entry['busbwGBps']")
want="all-reduce busbw $busbw GB/s among 2 ranks is below 100000 GB/s (tcp.minBusbwGBps)"
expect_eq "high floor: the message names measured, expected and the rule" "$msg" "$want"
expect_eq "high floor: the finding's remedy comes from docs/checks.md" \
    "$(v high-0 '"tcp.minBusbwGBps" in check("collective.tcp")["findings"][0]["remedy"]')" True

pair strict 'tcp: {messageBytes: 1048576, iterations: 2, minBusbwGBps: 100000}\n' --strict
for r in 0 1; do
    # an empty root proves no spec fault (its missing files are unknown), so the warning that
    # --strict counts is below-threshold's, class peer
    expect_eq "high floor --strict, rank $r: exit 5 (below-threshold's class, peer)" "$(cat "$T/strict-$r.rc")" 5
done

# ---- a floor any TCP stack reaches
pair tiny 'tcp: {messageBytes: 1048576, iterations: 2, minBusbwGBps: 0.000001}\n'
for r in 0 1; do
    expect_eq "tiny floor, rank $r: exit 0" "$(cat "$T/tiny-$r.rc")" 0
    expect_eq "tiny floor, rank $r: no below-threshold" \
        "$(v "tiny-$r" "[c for c, s in $tcp_findings if c == 'below-threshold']")" '[]'
    expect_eq "tiny floor, rank $r: expectedMinBusbwGBps in the TCP entry" \
        "$(v "tiny-$r" "$tcp_entry['expectedMinBusbwGBps']")" 1e-06
done

# ---- no floor: nothing expected
pair none 'tcp: {messageBytes: 1048576, iterations: 2}\n'
expect_eq "no floor: exit 0" "$(cat "$T/none-0.rc") $(cat "$T/none-1.rc")" "0 0"
expect_eq "no floor: no expectedMinBusbwGBps, no rule" \
    "$(v none-0 "[k in $tcp_entry for k in ('expectedMinBusbwGBps', 'rule')]")" '[false, false]'
