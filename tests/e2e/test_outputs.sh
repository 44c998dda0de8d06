#!/usr/bin/env bash
# What the outputs say, beyond the verdict's checks: --results of a run without GPUs carries
# the TCP all-reduce (nccl-tests' -J layout, marked as preflight's own); a run without
# PREFLIGHT_TOKEN warns on the screen; `preflight log` widens its HOST column to COLUMNS,
# shows the NCCL_DEBUG hint of a file without NCCL lines without -v, and refuses logs of
# different jobs given together while reading one job's files split by host.
source "$(dirname "$0")/lib.sh"
trap 'rm -rf "$T"' EXIT

EMPTY=$T/empty
mkdir -p "$EMPTY"
RL="$FIX/nccl-logs/real"

# ---- a TCP-only run of two ranks on the loopback: --results and the token warning
PORT=$((20000 + $$ % 20000))
run2() { # NAME TOKEN: ranks 0 and 1, verdicts $T/NAME.r0.yaml, results $T/NAME.json
    local name=$1 token=$2 r
    PORT=$((PORT + 1))
    for r in 0 1; do
        (cd "$T" && timeout 60 env -i PATH="$PATH" HOME=/nonexistent NO_COLOR=1 \
            ASAN_OPTIONS="${ASAN_OPTIONS:-}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-}" \
            ${token:+PREFLIGHT_TOKEN=$token} "$PREFLIGHT" run --root "$EMPTY" --rank $r \
            --world-size 2 --coordinator 127.0.0.1:$PORT --timeout 40 \
            --verdict "$T/$name.r$r.yaml" $([ $r = 0 ] && echo --results "$T/$name.json") \
            >"$T/$name.r$r.out" 2>"$T/$name.r$r.err"
        echo $? >"$T/$name.r$r.rc") &
    done
    wait
}
run2 open ""
expect_eq "run without GPUs: rank 0 passes or warns (exit 0)" "$(cat "$T/open.r0.rc")" 0
expect_eq "--results: one result, the TCP all-reduce, marked as preflight's, its figures the verdict's" \
    "$(python3 - "$T/open.json" "$T/open.r0.yaml" <<'PY' 2>&1
import json, sys, yaml
j = json.load(open(sys.argv[1])); v = yaml.safe_load(open(sys.argv[2]))
tcp = [c for c in v["collectives"] if c["backend"] == "tcp"][0]
r = j["results"]
print(len(r), r[0]["experiment_name"], r[0]["backend"], r[0]["size"] == tcp["bytes"],
      r[0]["out_of_place"]["bus_bw"] == tcp["busbwGBps"],
      abs(r[0]["out_of_place"]["time"] - tcp["timeSeconds"] * 1e6) <= 500,  # YAML: 3 decimals
      j["average_bus_bandwidth"]["bandwidth"] == tcp["busbwGBps"], j["out_of_bounds"]["okay"])
PY
)" "1 preflight_tcp_all_reduce tcp True True True True True"
check "no token: the warning on stdout" grep -q "^warning: PREFLIGHT_TOKEN is not set: the rendezvous was not authenticated" "$T/open.r0.out"
check "no token: the warning on stderr" grep -q "preflight: warning: PREFLIGHT_TOKEN is not set" "$T/open.r1.err"
run2 sealed s3cr3t-token
expect_eq "with a token: exit 0 on both ranks" "$(cat "$T/sealed.r0.rc") $(cat "$T/sealed.r1.rc")" "0 0"
check "with a token: no warning" bash -c "! grep -q 'PREFLIGHT_TOKEN is not set' '$T/sealed.r0.out' '$T/sealed.r0.err'"

# ---- preflight log
plog() { # NAME [VAR=VALUE...] -- ARGS...
    local name=$1
    shift
    local vars=()
    while [ $# -gt 0 ] && [ "$1" != -- ]; do vars+=("$1"); shift; done
    shift
    env -i PATH="$PATH" HOME=/nonexistent NO_COLOR=1 ASAN_OPTIONS="${ASAN_OPTIONS:-}" \
        UBSAN_OPTIONS="${UBSAN_OPTIONS:-}" "${vars[@]}" "$PREFLIGHT" log "$@" \
        >"$T/$name.out" 2>"$T/$name.err"
    echo $? >"$T/$name.rc"
}
# HOST: pod names of 28 characters, which differ only at the end
sed 's/llm-worker/llama3-70b-pretrain-worker/g' "$FIX/nccl-logs/kubectl-prefix.log" >"$T/long.log"
plog wide COLUMNS=200 -- "$T/long.log"
check "log, COLUMNS=200: whole host names" grep -qE '^llama3-70b-pretrain-worker-1 +1 ' "$T/wide.out"
plog narrow COLUMNS=80 -- "$T/long.log"
expect_eq "log, COLUMNS=80: names cut in the middle, still distinct, HOST 22 wide" \
    "$(grep -oE '^llama3-70b[^ ]*' "$T/narrow.out" | sort -u | tr '\n' ' ')$(grep -cE '^HOST {19}PROCS' "$T/narrow.out")" \
    "llama3-70b...-worker-0 llama3-70b...-worker-1 1"
# a file without any NCCL line: unknown (6), and the hint is on the screen without -v
printf 'Epoch 0: loss 11.02\nstep 1 loss 10.9\n' >"$T/plain.log"
plog plain -- "$T/plain.log"
expect_eq "log without NCCL lines: exit 6" "$(cat "$T/plain.rc")" 6
check "log without NCCL lines: the NCCL_DEBUG=INFO hint without -v" grep -q "NCCL_DEBUG=INFO" "$T/plain.out"
# two jobs given together: refused, naming both files
plog twojobs -- "$RL/nccl-1189-h20-two-hosts-collnet-zero.log" "$RL/nccl-tests-179-socket-two-nodes.log"
expect_eq "log of two 4-rank jobs: a usage error (exit 2)" "$(cat "$T/twojobs.rc")" 2
check "log of two jobs: rank 0 named with both processes and files" grep -qF \
    "rank 0 of a 4-rank communicator is held by H20-GPU-05:1789224 in $RL/nccl-1189-h20-two-hosts-collnet-zero.log and by manolinux:3319 in $RL/nccl-tests-179-socket-two-nodes.log" "$T/twojobs.err"
plog sizes -- "$RL/nccl-1412-init-timings-2.22.log" "$RL/nccl-1189-h20-two-hosts-collnet-zero.log"
expect_eq "log of a 16-rank and a 4-rank job: a usage error (exit 2)" "$(cat "$T/sizes.rc")" 2
check "log of two sizes: both named" grep -qF "is of a job of 16 ranks and $RL/nccl-1189-h20-two-hosts-collnet-zero.log of a job of 4 ranks" "$T/sizes.err"
# one job split by host into two files (as `kubectl logs` of each pod), and a file twice: read
grep '^H20-GPU-05' "$RL/nccl-1189-h20-two-hosts-collnet-zero.log" >"$T/h05.log"
grep -v '^H20-GPU-05' "$RL/nccl-1189-h20-two-hosts-collnet-zero.log" >"$T/h06.log"
plog split -- "$T/h05.log" "$T/h06.log"
plog whole -- "$RL/nccl-1189-h20-two-hosts-collnet-zero.log"
expect_eq "log of one job in two files: read as the whole file is (same exit code)" \
    "$(cat "$T/split.rc")" "$(cat "$T/whole.rc")"
check "log of one job in two files: not refused" bash -c "! grep -q 'not of one job' '$T/split.err'"
plog twice -- "$RL/nccl-1189-h20-two-hosts-collnet-zero.log" "$RL/nccl-1189-h20-two-hosts-collnet-zero.log"
expect_eq "log of the same file twice: one job" "$(cat "$T/twice.rc")" "$(cat "$T/whole.rc")"
