#!/usr/bin/env bash
# The command line as a user meets it: exit codes 0/1/2, --help, unknown commands and flags,
# every flag's PREFLIGHT_* variable and the flag overriding it, config files with mistakes
# (file, line and key named), --strict and policy.failOn, --verdict - and FILE, the verdict
# written atomically on SIGTERM/SIGINT and at --timeout, `explain` for every check id and
# finding code in docs/checks.md, and `version`. Runs against the sanitizer build and
# bin/preflight-static.
source "$(dirname "$0")/lib.sh"

cleanup() {
    del_netns
    [ -n "${KEEP_TMP:-}" ] && echo "# kept $T" || rm -rf "$T"
}
trap cleanup EXIT
own_netns "pfl$$c" # lib.sh: $NS, and $HAVE_NS when it could be made

EMPTY=$T/empty # a root with nothing in it
mkdir -p "$EMPTY"
CONF=$T/conf-root # /etc/nccl.conf sets NCCL_SHM_DISABLE=1
mkdir -p "$CONF/etc"
printf 'NCCL_SHM_DISABLE=1\n' >"$CONF/etc/nccl.conf"

# p, rc_is, err_has, out_has: lib.sh ($BIN, $L: the build under test and its label)
# usage NAME TEXT ARGS...: exit 2, TEXT on stderr, and the pointer to --help
usage() {
    local name=$1 text=$2
    shift 2
    p "$name" -- "$@"
    rc_is "$name" 2
    err_has "$name" "$text"
    err_has "$name" "try 'preflight --help'"
}
yamlv() { yq "$T/$1" "$2" 2>/dev/null; }

suite() {
    # ---- help and usage errors
    local h
    for h in --help -h help; do
        p "help$h" -- "$h"
        rc_is "help$h" 0
        out_has "help$h" "usage: preflight <command> [options]"
    done
    p help-opts -- --help
    for h in --config --verdict --root --format --strict --timeout --rank --world-size \
        --coordinator --port --env-file PREFLIGHT_CONFIG PREFLIGHT_VERDICT PREFLIGHT_ROOT \
        PREFLIGHT_TIMEOUT PREFLIGHT_RANK PREFLIGHT_WORLD_SIZE PREFLIGHT_COORDINATOR \
        PREFLIGHT_PORT PREFLIGHT_TOKEN; do
        grep -qF -- "$h" "$T/help-opts.out" || notok "$L--help lists $h"
    done
    ok "$L--help lists every option and variable"
    p nocmd --
    rc_is nocmd 2
    err_has nocmd "usage: preflight <command>"
    usage badcmd "unknown command 'frobnicate'" frobnicate
    usage badflag "unknown option '--frobnicate'" check --frobnicate
    usage badflag2 "unknown option '--token'" check --token=x
    usage novalue "--root needs a value" check --root
    usage strictval "--strict takes no value" check --strict=yes
    usage badformat "--format: expected human, yaml or json, found \"xml\"" check --format xml
    usage badtimeout "--timeout: expected seconds (a number above 0), found \"0\"" check --timeout 0
    usage badtimeout2 "--timeout: expected seconds (a number above 0), found \"soon\"" check --timeout=soon
    usage badrank "--rank: expected an integer in 0..1048576, found \"-1\"" run --rank -1
    usage badworld "--world-size: expected an integer in 1..1048576, found \"0\"" run --world-size 0
    usage badport "--port: expected an integer in 1..65535, found \"70000\"" run --port 70000
    usage extra "unexpected argument 'extra'" check extra
    usage envfile "--env-file is an option of 'preflight env', not of 'check'" check --env-file x
    usage noexplain "explain needs a check id or finding code" explain
    # the same checks on the variables
    p envtimeout PREFLIGHT_TIMEOUT=soon -- env --root "$EMPTY"
    rc_is envtimeout 2
    err_has envtimeout 'PREFLIGHT_TIMEOUT: expected seconds (a number above 0), found "soon"'
    p envport PREFLIGHT_PORT=http -- env --root "$EMPTY"
    rc_is envport 2
    err_has envport 'PREFLIGHT_PORT: expected an integer in 1..65535, found "http"'
    p envrank PREFLIGHT_RANK=x PREFLIGHT_WORLD_SIZE=y -- env --root "$EMPTY"
    rc_is envrank 2
    err_has envrank 'PREFLIGHT_RANK: expected an integer'

    # ---- each command's own help, --version, did-you-mean
    local c
    for c in run check env explain log install inject watch version report; do
        p "help-$c" -- "$c" --help
        rc_is "help-$c" 0
        out_has "help-$c" "usage: preflight $c"
        out_has "help-$c" "examples:"
        p "helpcmd-$c" -- help "$c"
        check "${L}'help $c' is '$c --help'" cmp -s "$T/help-$c.out" "$T/helpcmd-$c.out"
    done
    out_has help-run "--coordinator HOST[:PORT]"
    check "${L}check --help: no rendezvous options" bash -c "! grep -q -- '--coordinator' '$T/help-check.out'"
    out_has help-env "--env-file FILE"
    out_has help-explain "--list"
    check "${L}help lines fit 80 columns" bash -c "! cat '$T'/help*.out | grep -qE '^.{81}'"
    p version-flag -- --version
    rc_is version-flag 0
    check "${L}--version: one line 'preflight X.Y.Z (git ...)'" \
        bash -c "[ \$(wc -l <'$T/version-flag.out') = 1 ] && grep -qE '^preflight [0-9]+\.[0-9]+\.[0-9]+ \(git ' '$T/version-flag.out'"
    usage typo-cmd "unknown command 'chek' (did you mean 'check'?)" chek
    usage typo-flag "unknown option '--formt' (did you mean '--format'?)" check --formt yaml
    usage typo-help "no command 'chekc' (did you mean 'check'?)" help chekc
    usage ambiguous "option '--ver' is ambiguous (--verdict, --verbose, --version)" check --ver
    usage coord-port "--coordinator: \"host:99999\": port must be 1..65535" run --coordinator host:99999
    usage coord-host "--coordinator: \"a/b:1\": '/' cannot be in a host name" run --coordinator a/b:1
    usage coord-empty "--coordinator: \":29400\": expected HOST[:PORT]" run --coordinator :29400
    p coord-env PREFLIGHT_COORDINATOR=host:0 -- run --root "$EMPTY"
    rc_is coord-env 2
    err_has coord-env 'PREFLIGHT_COORDINATOR: "host:0": port must be 1..65535'
    usage dash-human "--verdict - puts the YAML verdict on stdout, so --format human cannot" \
        env --root "$EMPTY" --verdict - --format human
    usage dash-json "--verdict - puts the YAML verdict on stdout, so --format json cannot" \
        env --root "$EMPTY" --verdict - --format json
    p dash-human-env PREFLIGHT_FORMAT=human -- env --root "$EMPTY" --verdict -
    rc_is dash-human-env 2
    err_has dash-human-env "PREFLIGHT_FORMAT human cannot"
    usage list-elsewhere "--list is an option of 'preflight explain', not of 'check'" check --list

    # ---- an option the command does not take is refused, naming the commands that take it
    usage check-rank "--rank is an option of 'preflight run', not of 'check'" \
        check --rank 3 --world-size 4 --coordinator foo
    usage check-dry "--dry-run is an option of 'preflight run', not of 'check'" check --dry-run
    usage env-results "--results is an option of 'preflight run' or 'preflight check', not of 'env'" \
        env --results x.json
    usage install-format "--format is an option of" install --format yaml /tmp
    usage version-v "--verbose is an option of" version -v
    # every option of the overview: refused by each command whose own help does not list it
    # (the help and the refusal read one table, cmd/preflight/help.c)
    local cmd opt val refused=0 wrong=""
    for cmd in run check env log explain install version watch inject report; do
        while read -r opt; do
            [ "$opt" = --help ] || [ "$opt" = --version ] && continue
            grep -qE -- "^  (-v, )?$opt( |\$)" "$T/help-$cmd.out" && continue
            case "$opt" in # a valid value, so that only the command can refuse it
            --format) val=yaml ;; --rank | --world-size | --port | --timeout) val=1 ;;
            --pushgateway) val=http://h:1 ;; --strict | --verbose | --dry-run | --list | --watch) val="" ;;
            *) val=x ;;
            esac
            p refuse -- "$cmd" "$opt" ${val:+"$val"} $(case "$cmd" in install | watch | inject | report) echo /tmp ;; esac)
            if [ "$(cat "$T/refuse.rc")" = 2 ] && grep -qF -- "$opt is an option of" "$T/refuse.err"; then
                refused=$((refused + 1))
            else wrong+=" $cmd$opt"; fi
        done < <(sed -n '/^options/,/^output/p' "$T/help-opts.out" | grep -oE -- '^  (-v, )?--[a-z-]+' | sed 's/^  //; s/^-v, //' | sort -u)
    done
    expect_eq "${L}every option a command's help does not list is refused ($refused refusals)" "$wrong" ""
    check "${L}at least 40 command/option pairs refused" test "$refused" -ge 40

    # ---- --format json: the same document as the YAML verdict of the same run
    p json-check -- check --root "$EMPTY" --format json --verdict "$T/json-check.yaml"
    rc_is json-check 0
    expect_eq "${L}check --format json equals its YAML verdict" "$(python3 -c '
import json, sys, yaml
j = json.load(open(sys.argv[1])); y = yaml.safe_load(open(sys.argv[2]))
print(j == y and j["kind"] == "Verdict" and len(j["checks"]) > 5)' "$T/json-check.out" "$T/json-check.yaml" 2>&1)" True
    local c2
    for c2 in env log; do
        if [ $c2 = log ]; then printf 'no NCCL here\n' >"$T/nolog.txt"; set -- log "$T/nolog.txt"; else set -- env; fi
        p "json-$c2" -- "$@" --root "$EMPTY" --format json --verdict "$T/json-$c2.yaml"
        expect_eq "${L}$c2 --format json equals its YAML verdict" "$(python3 -c '
import json, sys, yaml
print(json.load(open(sys.argv[1])) == yaml.safe_load(open(sys.argv[2])))' "$T/json-$c2.out" "$T/json-$c2.yaml" 2>&1)" True
    done
    p json-dry PREFLIGHT_FORMAT=json -- run --root "$EMPTY" --dry-run --rank 1 --world-size 2 \
        --coordinator trainer-0.trainer
    p yaml-dry -- run --root "$EMPTY" --dry-run --rank 1 --world-size 2 --coordinator trainer-0.trainer
    expect_eq "${L}run --dry-run: JSON (PREFLIGHT_FORMAT=json) equals the YAML" "$(python3 -c '
import json, sys, yaml
j = json.load(open(sys.argv[1])); print(j == yaml.safe_load(open(sys.argv[2])), j["identity"]["rank"])' "$T/json-dry.out" "$T/yaml-dry.out" 2>&1)" "True 1"
    p version-yaml -- version --format yaml
    p version-json -- version --format json
    expect_eq "${L}version --format yaml and json: one document, the version and 4 libraries" \
        "$(python3 -c '
import json, sys, yaml
j = json.load(open(sys.argv[1])); y = yaml.safe_load(open(sys.argv[2]))
print(j == y, j["version"], len(j["libraries"]), j["verdictSchema"])' "$T/version-json.out" "$T/version-yaml.out" 2>&1)" \
        "True $(sed -n 's/^preflight \([^ ]*\) .*/\1/p' "$T/version-flag.out") 4 preflight/v1"
    if command -v jq >/dev/null; then
        expect_eq "${L}check --format json | jq .kind" "$(jq -r .kind "$T/json-check.out")" Verdict
    fi

    # ---- a verdict that cannot be written: exit 1 (docs/security.md), said on stderr
    p unwritable -- check --root "$EMPTY" --verdict /proc/v.yaml
    rc_is unwritable 1
    err_has unwritable "verdict not written: cannot write /proc/v.yaml"
    check "${L}unwritable: stdout does not say 'verdict written'" bash -c "! grep -q 'verdict written' '$T/unwritable.out'"

    # ---- config keys a command does not act on are named on stderr
    printf 'report:\n  events: true\n  markNode: taint\n  resultsFile: /tmp/r.json\n' >"$T/report.cfg"
    p cfg-check -- check --root "$EMPTY" --config "$T/report.cfg" --verdict "$T/cfg-check.yaml"
    rc_is cfg-check 0
    err_has cfg-check "report.cfg: report.events, report.markNode are not used by 'preflight check'"
    p cfg-env -- env --root "$EMPTY" --config "$T/report.cfg"
    err_has cfg-env "report.events, report.markNode, report.resultsFile are not used by 'preflight env'"
    p cfg-none -- check --root "$EMPTY"
    err_lacks cfg-none "not used by"

    # ---- PREFLIGHT_FORMAT, PREFLIGHT_STRICT, PREFLIGHT_VERBOSE, and the flags over them
    p v-format PREFLIGHT_FORMAT=yaml -- env --root "$EMPTY"
    expect_eq "${L}PREFLIGHT_FORMAT=yaml: YAML on stdout" "$(yamlv v-format.out "d['kind']")" Verdict
    p v-format-flag PREFLIGHT_FORMAT=yaml -- env --root "$EMPTY" --format human
    out_has v-format-flag "preflight PASS: "
    p v-format-bad PREFLIGHT_FORMAT=xml -- env --root "$EMPTY"
    rc_is v-format-bad 2
    err_has v-format-bad 'PREFLIGHT_FORMAT: expected human, yaml or json, found "xml"'
    p v-strict NCCL_DEBUG=TRACE PREFLIGHT_STRICT=1 -- env --root "$EMPTY"
    rc_is v-strict 3 # debug-verbose is a spec finding: exit 3 under --strict
    p v-strict-off NCCL_DEBUG=TRACE PREFLIGHT_STRICT=false -- env --root "$EMPTY"
    rc_is v-strict-off 0
    p v-strict-bad PREFLIGHT_STRICT=maybe -- env --root "$EMPTY"
    rc_is v-strict-bad 2
    err_has v-strict-bad 'PREFLIGHT_STRICT: expected 1 or 0 (true or false), found "maybe"'
    p v-verbose PREFLIGHT_VERBOSE=1 -- env --root "$EMPTY"
    check "${L}PREFLIGHT_VERBOSE=1: no folded skip line" bash -c "! grep -q '(-v says why)' '$T/v-verbose.out'"
    p v-envfile PREFLIGHT_ENV_FILE="$T/missing.env" -- env --root "$EMPTY"
    rc_is v-envfile 2
    err_has v-envfile "$T/missing.env"

    # ---- exit codes: 0 pass, 0 warn, 1 fail; --strict and policy.failOn: warn
    p pass -- env --root "$EMPTY" --format yaml
    rc_is pass 0
    expect_eq "${L}pass: verdict pass" "$(yamlv pass.out "d['verdict']")" pass
    p warn NCCL_DEBUG=TRACE -- env --root "$EMPTY" --format yaml
    rc_is warn 0
    expect_eq "${L}warn: verdict warn" "$(yamlv warn.out "d['verdict']")" warn
    p strict NCCL_DEBUG=TRACE -- env --root "$EMPTY" --strict
    rc_is strict 3 # debug-verbose: spec
    printf 'policy:\n  failOn: warn\n' >"$T/failon-warn.yaml"
    printf 'policy:\n  failOn: fail\n' >"$T/failon-fail.yaml"
    p failon NCCL_DEBUG=TRACE -- env --root "$EMPTY" --config "$T/failon-warn.yaml"
    rc_is failon 3
    p failon-pass -- env --root "$EMPTY" --config "$T/failon-warn.yaml"
    rc_is failon-pass 0
    p fail NCCL_P2P_DISABLE=1 -- env --root "$EMPTY" --format yaml
    rc_is fail 3 # p2p-disabled: spec
    expect_eq "${L}fail: verdict fail" "$(yamlv fail.out "d['verdict']")" fail
    printf 'policy:\n  findings:\n    p2p-disabled: ignore\n' >"$T/ignore.yaml"
    p ignore NCCL_P2P_DISABLE=1 -- env --root "$EMPTY" --config "$T/ignore.yaml" --format yaml
    rc_is ignore 0
    expect_eq "${L}ignore: the finding is dropped" "$(yamlv ignore.out "codes('nccl.env')")" "[]"

    # ---- each variable honoured, and its flag overriding it
    p v-config NCCL_DEBUG=TRACE PREFLIGHT_CONFIG="$T/failon-warn.yaml" -- env --root "$EMPTY"
    rc_is v-config 3
    p v-config-flag NCCL_DEBUG=TRACE PREFLIGHT_CONFIG="$T/failon-warn.yaml" -- \
        env --root "$EMPTY" --config "$T/failon-fail.yaml"
    rc_is v-config-flag 0
    p v-config-bad PREFLIGHT_CONFIG="$T/missing.yaml" -- env --root "$EMPTY"
    rc_is v-config-bad 2
    err_has v-config-bad "$T/missing.yaml"

    p v-root PREFLIGHT_ROOT="$CONF" -- env --format yaml
    expect_eq "${L}v-root: /etc/nccl.conf read under PREFLIGHT_ROOT" \
        "$(yamlv v-root.out "'shm-disabled' in codes('nccl.env')")" True
    p v-root-flag PREFLIGHT_ROOT="$CONF" -- env --format yaml --root "$EMPTY"
    expect_eq "${L}v-root-flag: --root wins" "$(yamlv v-root-flag.out "codes('nccl.env')")" "[]"

    p v-verdict PREFLIGHT_VERDICT="$T/env-verdict.yaml" -- env --root "$EMPTY" --format yaml
    expect_eq "${L}v-verdict: written where PREFLIGHT_VERDICT says" \
        "$(yamlv env-verdict.yaml "d['kind']")" Verdict
    p v-verdict-flag PREFLIGHT_VERDICT="$T/env-verdict2.yaml" -- env --root "$EMPTY" \
        --verdict "$T/flag-verdict.yaml"
    check "${L}v-verdict-flag: --verdict wins" test -f "$T/flag-verdict.yaml" -a ! -e "$T/env-verdict2.yaml"

    p v-timeout-flag PREFLIGHT_TIMEOUT=soon -- env --root "$EMPTY" --timeout 30
    rc_is v-timeout-flag 0
    p v-port-flag PREFLIGHT_PORT=http PREFLIGHT_RANK=x -- run --root "$EMPTY" --dry-run \
        --port 29400 --rank 1 --world-size 2 --coordinator trainer-0.trainer
    rc_is v-port-flag 0

    # rank, world size, coordinator and port reach the rendezvous (in a namespace of its own)
    if [ -n "$HAVE_NS" ]; then
        rdv() { # NAME [VAR=VALUE...] -- ARGS...: `preflight run` in $NS, YAML on stdout
            local name=$1
            shift
            local vars=()
            while [ $# -gt 0 ] && [ "$1" != -- ]; do vars+=("$1"); shift; done
            shift
            ip netns exec "$NS" timeout 60 env -i PATH="$PATH" HOME=/nonexistent NO_COLOR=1 \
                ASAN_OPTIONS="${ASAN_OPTIONS:-}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-}" \
                "${vars[@]}" "$BIN" run --root "$EMPTY" --format yaml --verdict - "$@" \
                >"$T/$name.out" 2>"$T/$name.err"
            echo $? >"$T/$name.rc"
        }
        rv() { yamlv "$1.out" "check('rendezvous')['evidence']['$2']"; }
        rdv r-env PREFLIGHT_RANK=1 PREFLIGHT_WORLD_SIZE=3 PREFLIGHT_COORDINATOR=127.0.0.1 \
            PREFLIGHT_PORT=29411 -- --timeout 2
        expect_eq "${L}r-env: rank, world size, coordinator, port from PREFLIGHT_*" \
            "$(rv r-env rank) $(rv r-env worldSize) $(rv r-env coordinator) $(rv r-env port)" \
            "1 3 127.0.0.1 29411"
        rdv r-flag PREFLIGHT_RANK=1 PREFLIGHT_WORLD_SIZE=3 PREFLIGHT_COORDINATOR=127.0.0.1 \
            PREFLIGHT_PORT=29411 -- --timeout 2 --rank 2 --world-size 4 \
            --coordinator localhost --port 29412
        expect_eq "${L}r-flag: the flags win" \
            "$(rv r-flag rank) $(rv r-flag worldSize) $(rv r-flag coordinator) $(rv r-flag port)" \
            "2 4 localhost 29412"
        rdv r-one -- --rank 0 --world-size 1 --timeout 30
        rc_is r-one 0
        expect_eq "${L}r-one: world size 1 in the pod map" "$(yamlv r-one.out "d['pod']['worldSize']")" 1

        # ---- the verdict on SIGTERM, SIGINT and at the deadline: exists, parses, says why
        local sig
        for sig in TERM INT; do
            rm -f "$T/sig.yaml"
            ip netns exec "$NS" env -i PATH="$PATH" NO_COLOR=1 ASAN_OPTIONS="${ASAN_OPTIONS:-}" \
                "$BIN" run --root "$EMPTY" --rank 0 --world-size 2 --port 29420 \
                --verdict "$T/sig.yaml" >/dev/null 2>"$T/sig$sig.err" &
            local pid=$!
            for _ in $(seq 600); do
                grep -q "waiting for 1 of 2 ranks" "$T/sig$sig.err" && break
                sleep 0.05
            done
            kill -"$sig" "$pid"
            wait "$pid"
            echo $? >"$T/sig$sig.rc"
            rc_is "sig$sig" 4 # interrupted: node (drained, deleted)
            expect_eq "${L}SIG$sig: verdict file parses and fails" "$(yamlv sig.yaml "d['verdict']")" fail
            expect_eq "${L}SIG$sig: says why" \
                "$(yamlv sig.yaml "[(f['code'], 'stopped by SIGTERM or SIGINT while waiting for 1 of 2 ranks' in f['message']) for f in check('rendezvous')['findings']]")" \
                '[["interrupted", true]]'
            expect_eq "${L}SIG$sig: local checks kept" "$(yamlv sig.yaml "check('nccl.env')['status']")" pass
            check "${L}SIG$sig: no temporary file left" bash -c "! ls -A '$T' | grep -qE '^[.]pf[.]|[.]tmp[.]'"
        done
        # the stages keep within --timeout by themselves: the rendezvous gives up in time
        rdv deadline -- --rank 0 --world-size 2 --port 29421 --timeout 2
        rc_is deadline 5 # missing-ranks: peer
        expect_eq "${L}deadline: the rendezvous gives up within --timeout" \
            "$(yamlv deadline.out "[f['code'] for f in check('rendezvous')['findings']]")" \
            '["missing-ranks"]'
        # a process stuck past the deadline (stopped, as if hung in a driver call): the
        # deadline's verdict is written as soon as it runs again
        rm -f "$T/stuck.yaml"
        ip netns exec "$NS" env -i PATH="$PATH" NO_COLOR=1 ASAN_OPTIONS="${ASAN_OPTIONS:-}" \
            "$BIN" run --root "$EMPTY" --rank 0 --world-size 2 --port 29423 --timeout 5 \
            --verdict "$T/stuck.yaml" >/dev/null 2>"$T/stuck.err" &
        pid=$!
        for _ in $(seq 200); do
            grep -q "waiting for 1 of 2 ranks" "$T/stuck.err" && break
            sleep 0.05
        done
        kill -STOP "$pid"
        sleep 6
        kill -CONT "$pid"
        wait "$pid"
        echo $? >"$T/stuck.rc"
        rc_is stuck 5 # rendezvous/timeout: peer
        expect_eq "${L}stuck: the deadline's verdict" \
            "$(yamlv stuck.yaml "[(f['code'], 'deadline of 5 s (--timeout) reached while waiting for 1 of 2 ranks' in f['message']) for f in check('rendezvous')['findings']]")" \
            '[["timeout", true]]'
        expect_eq "${L}stuck: durationSeconds is the deadline" "$(yamlv stuck.yaml "d['durationSeconds']")" 5.0
        err_has stuck "deadline reached; verdict written (fail)"
        rm -f "$T/deadline.yaml"
        ip netns exec "$NS" timeout 60 env -i PATH="$PATH" ASAN_OPTIONS="${ASAN_OPTIONS:-}" \
            PREFLIGHT_TIMEOUT=2 "$BIN" run --root "$EMPTY" --rank 0 --world-size 2 --port 29422 \
            --verdict "$T/deadline.yaml" >/dev/null 2>"$T/deadline2.err"
        expect_eq "${L}deadline (PREFLIGHT_TIMEOUT): verdict file fails" "$(yamlv deadline.yaml "d['verdict']")" fail
        expect_eq "${L}deadline (PREFLIGHT_TIMEOUT): run lasted the deadline" \
            "$(yamlv deadline.yaml "d['durationSeconds'] >= 1")" True
    else
        skip "${L}rendezvous variables, SIGTERM and --timeout" "needs root and ip netns"
    fi

    # ---- config files with mistakes: exit 2 naming file, line and key
    cfg() { # NAME TEXT EXPECTED-STDERR
        printf '%b' "$2" >"$T/$1.yaml"
        p "cfg-$1" -- env --root "$EMPTY" --config "$T/$1.yaml"
        rc_is "cfg-$1" 2
        err_has "cfg-$1" "$T/$1.yaml:$3"
    }
    cfg unknown 'expect:\n  mtus: 9000\n' "2: expect.mtus: unknown key (did you mean 'mtu'?)"
    cfg unknown-top 'expects:\n  mtu: 9000\n' "1: expects: unknown key (did you mean 'expect'?)"
    cfg wrongtype 'expect:\n  mtu: lots\n' '2: expect.mtu: expected an integer, found "lots"'
    cfg wrongtype-map 'expect: 5\n' "1: expect"
    cfg badvalue '# policy\npolicy:\n  failOn: sometimes\n' '3: policy.failOn: "sometimes" is not one of: fail, warn'
    cfg badvalue-rdma 'expect:\n  rdma: maybe\n' "2: expect.rdma"
    cfg badstatus 'policy:\n  findings:\n    p2p-disabled: loud\n' "3: policy.findings.p2p-disabled"
    cfg notyaml 'expect: [1\n' "2: not valid YAML"
    p cfg-env PREFLIGHT_CONFIG="$T/unknown.yaml" -- env --root "$EMPTY"
    rc_is cfg-env 2
    err_has cfg-env "$T/unknown.yaml:2: expect.mtus: unknown key"

    # ---- --verdict - and FILE
    p dash -- env --root "$EMPTY" --verdict -
    expect_eq "${L}--verdict -: YAML on stdout" "$(yamlv dash.out "d['apiVersion']")" preflight/v1
    p file -- env --root "$EMPTY" --verdict "$T/out/sub/v.yaml" --format human
    expect_eq "${L}--verdict FILE: folders created, file parses" "$(yamlv out/sub/v.yaml "d['verdict']")" pass
    out_has file "verdict written to $T/out/sub/v.yaml"
    check "${L}--verdict FILE: no temporary file left" bash -c "[ \$(ls '$T/out/sub' | wc -l) = 1 ]"
    p unwritable -- env --root "$EMPTY" --verdict /proc/version/v.yaml
    expect_eq "${L}unwritable verdict path: exit code 1" "$(cat "$T/unwritable.rc")" 1
    err_has unwritable "/proc/version/v.yaml"
    p human -- env --root "$EMPTY" --format human
    check "${L}--format human: not YAML" bash -c "! grep -q '^apiVersion:' '$T/human.out'"
    # human on stdout whether or not it is a terminal (kubectl exec without -t, kubectl logs)
    p auto -- env --root "$EMPTY"
    out_has auto "preflight PASS: "
    check "${L}stdout not a terminal: still the human form" bash -c "! grep -q '^apiVersion:' '$T/auto.out'"

    # ---- explain: every check id and finding code in docs/checks.md
    local ids codes n=0 bad=""
    ids=$(sed -nE 's/^## `([a-z0-9.]+)`.*/\1/p' "$PREFLIGHT_SRC/docs/checks.md" | sort -u)
    codes=$(sed -nE 's/^### `([a-z0-9-]+)`.*/\1/p' "$PREFLIGHT_SRC/docs/checks.md" | sort -u)
    for h in $ids $codes; do
        n=$((n + 1))
        p explain -- explain "$h"
        if [ "$(cat "$T/explain.rc")" != 0 ] || ! grep -qF -- "$h" "$T/explain.out" ||
            ! grep -qiE 'remedy|default|why' "$T/explain.out"; then
            bad="$bad $h"
        fi
    done
    if [ "$n" -lt 50 ]; then
        notok "${L}explain: every id and code in docs/checks.md" "only $n found in docs/checks.md"
    elif [ -n "$bad" ]; then
        notok "${L}explain: every id and code in docs/checks.md" "failed for:$bad"
    else
        ok "${L}explain: all $n ids and codes in docs/checks.md"
    fi
    p explain-code -- explain iface-down
    out_has explain-code "net.multus"
    out_has explain-code "net.interfaces"
    p explain-none -- explain no-such-code
    rc_is explain-none 2
    err_has explain-none "no check or finding code named 'no-such-code'"

    # explain renders the markdown: plain text off a terminal, case-insensitive, --list
    p explain-upper -- explain P2P-DISABLED
    rc_is explain-upper 0
    out_has explain-upper "nccl.env / p2p-disabled"
    out_has explain-upper "Default: fail"
    check "${L}explain: no markdown markup off a terminal" \
        bash -c "! grep -qE '\\*\\*|^#|\`' '$T/explain-upper.out'"
    check "${L}explain: lines fit 80 columns" bash -c "! grep -qE '^.{81}' '$T/explain-upper.out'"
    p explain-cols COLUMNS=50 -- explain port-down
    check "${L}explain: COLUMNS=50 respected" bash -c "! grep -qE '^.{51}' '$T/explain-cols.out'"
    p explain-typo -- explain P2P-DISABLD
    rc_is explain-typo 2
    err_has explain-typo "did you mean 'p2p-disabled'?"
    p explain-list -- explain --list
    rc_is explain-list 0
    out_has explain-list "rdma.ports: port-down, port-not-linkup"
    out_has explain-list "nccl.env: "

    # ---- version
    p version -- version
    rc_is version 0
    out_has version "preflight "
    out_has version "verdict schema preflight/v1"
    for h in libcuda.so.1 libnccl.so.2 libibverbs.so.1 libcurl.so.4; do
        grep -qF "$h" "$T/version.out" || notok "${L}version lists $h"
    done
    if [ "$L" = "static: " ]; then
        out_has version "not in this build (static binary: no dlopen)"
    else
        check "${L}version: each library shows its file or is missing with the reason" \
            bash -c "[ \$(grep -cE '^  lib[a-z]+\.so\.[0-9] +(.* \(/.*\)|missing \()' '$T/version.out') = 4 ]"
        # the versions are what the libraries themselves report (asked here through ctypes)
        for q in "libnccl.so.2 ncclGetVersion" "libcurl.so.4 curl_version"; do
            set -- $q
            want=$(python3 - "$1" "$2" <<'PY' 2>/dev/null
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
if sys.argv[2] == "ncclGetVersion":
    v = ctypes.c_int()
    lib.ncclGetVersion(ctypes.byref(v))
    v = v.value
    print("%d.%d.%d" % ((v // 10000, v % 10000 // 100, v % 100) if v >= 20900 else (v // 1000, v % 1000 // 100, v % 100)))
else:
    lib.curl_version.restype = ctypes.c_char_p
    print(lib.curl_version().decode().split()[0].split("/")[1])
PY
)
            if [ -z "$want" ]; then
                skip "${L}version: $1's version" "$1 does not load here"
            else
                check "${L}version: $1 $want as $2 reports it" grep -qE "^  $1 +$want \(/" "$T/version.out"
            fi
        done
    fi
}

both_builds "command-line suite" suite
