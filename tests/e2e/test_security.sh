#!/usr/bin/env bash
# File safety and hostile inputs (docs/security.md, "Threat model and file safety"):
# - a full file system (a small tmpfs, filled): the old verdict survives intact, stderr says
#   the write failed, on the normal path and in the signal handler;
# - symlinks planted at the temporary names older versions used and at the targets
#   (verdict, metrics file, install): the symlinks' targets are untouched;
# - a config nested half a megabyte deep under --timeout 2: a usage error at once;
# - 300-byte secret names: masked in the verdict and absent from errors;
# - a 250-byte verdict file name works (normal path and signal path); `install ""` exits 2;
# - SIGTERM at random moments: 100 runs of two ranks on loopback, rank 1 signalled after a
#   delay of 0-2 s drawn from a fixed seed; every verdict file is complete YAML and agrees
#   with the exit code; and SIGTERM during `check`.
# Every command is bounded with `timeout`. Needs root for tmpfs and network namespaces; the
# cases that need them skip without.
source "$(dirname "$0")/lib.sh"

BIN=$PREFLIGHT
# the 100 signalled runs use the release build when there is one (the sanitizer build takes
# about three times as long to start); every other case runs the sanitizer build
BINR=${PREFLIGHT_REL:-$PREFLIGHT}
[ -x "$BINR" ] || BINR=$PREFLIGHT
MNT=$T/full
cleanup() {
    mountpoint -q "$MNT" 2>/dev/null && umount "$MNT"
    del_netns
    [ -n "${KEEP_TMP:-}" ] && echo "# kept $T" || rm -rf "$T"
}
trap cleanup EXIT
own_netns "pfs$$s" # lib.sh: $NS, and $HAVE_NS when it could be made
EMPTY=$T/empty
mkdir -p "$EMPTY"

# p, rc_is, err_has, err_lacks: lib.sh ($BIN, the sanitizer build; 60 s at most)
same() { # NAME FILE EXPECTED-CONTENT-FILE
    if cmp -s "$2" "$3"; then ok "$1"; else notok "$1" "$2 differs from $3"; fi
}
no_temp() { # NAME FOLDER: no temporary file left (".pf.*", or the older "*.tmp.*")
    if ls -A "$2" | grep -qE '^[.]pf[.]|[.]tmp[.]'; then
        notok "$1" "left: $(ls -A "$2" | tr '\n' ' ')"
    else ok "$1"; fi
}

printf 'apiVersion: preflight/v1\nkind: Verdict\nverdict: pass\nsummary: an older run\n' >"$T/old.yaml"

# ---- a full file system
if [ "$(id -u)" -eq 0 ] && mkdir -p "$MNT" && mount -t tmpfs -o size=256k tmpfs "$MNT"; then
    cp "$T/old.yaml" "$MNT/v.yaml"
    head -c 1M /dev/zero >"$MNT/fill" 2>/dev/null # fills it; dd would say the same
    p full -- env --root "$EMPTY" --verdict "$MNT/v.yaml" --format human
    rc_is full 1
    same "full: the old verdict is intact" "$MNT/v.yaml" "$T/old.yaml"
    err_has full "verdict not written: cannot write $MNT/v.yaml (write: No space left on device); the file there is left as it was"
    if grep -q "verdict written" "$T/full.out"; then notok "full: stdout does not say 'verdict written'"; else
        ok "full: stdout does not say 'verdict written'"; fi
    no_temp "full: no temporary file left" "$MNT"
    # the signal handler's write on a full file system (rank 0 waiting for a rank 1)
    if [ -n "$HAVE_NS" ]; then
        ip netns exec "$NS" timeout 60 env -i PATH="$PATH" ASAN_OPTIONS="${ASAN_OPTIONS:-}" \
            "$BIN" run --root "$EMPTY" --rank 0 --world-size 2 --port 29440 \
            --verdict "$MNT/v.yaml" >/dev/null 2>"$T/fullsig.err" &
        pid=$!
        wait_for_text "$T/fullsig.err" "waiting for 1 of 2 ranks"
        kill -TERM "$pid"
        wait "$pid"
        echo $? >"$T/fullsig.rc"
        rc_is fullsig 1
        same "fullsig: the old verdict is intact" "$MNT/v.yaml" "$T/old.yaml"
        err_has fullsig "stopped by a signal; verdict NOT written (write: no space left on device): any verdict file there is left as it was"
        err_lacks fullsig "verdict written ("
        no_temp "fullsig: no temporary file left" "$MNT"
    else
        skip "fullsig: SIGTERM on a full file system" "needs root and ip netns"
    fi
    umount "$MNT"
else
    skip "full: a full file system" "needs root and tmpfs"
fi

# ---- symlinks planted where temporary files were (<path>.tmp.<pid>) and at the targets.
# `sh -c '... $$ ...; exec preflight'` knows the pid preflight will have.
echo "precious" >"$T/victim"
cp "$T/victim" "$T/victim.orig"
mkdir -p "$T/plant"
(cd "$T/plant" && timeout 60 env -i PATH="$PATH" ASAN_OPTIONS="${ASAN_OPTIONS:-}" BIN="$BIN" \
    EMPTY="$EMPTY" VICTIM="$T/victim" sh -c \
    'ln -s "$VICTIM" "v.yaml.tmp.$$"; exec "$BIN" env --root "$EMPTY" --verdict v.yaml' \
    >/dev/null 2>"$T/plant.err")
same "planted verdict temporary name: the symlink's target is untouched" "$T/victim" "$T/victim.orig"
expect_eq "planted verdict temporary name: the verdict is written" \
    "$(yq "$T/plant/v.yaml" "d['kind']")" Verdict
ln -s "$T/victim" "$T/plant/target.yaml"
p plant-target -- env --root "$EMPTY" --verdict "$T/plant/target.yaml"
same "symlink at the verdict path: its target is untouched" "$T/victim" "$T/victim.orig"
check "symlink at the verdict path: replaced by the verdict" test -f "$T/plant/target.yaml" -a ! -L "$T/plant/target.yaml"
# metrics file: `run` of one rank writes it at the end
if [ -n "$HAVE_NS" ]; then
    mkdir -p "$T/mplant"
    printf 'report: {metricsFile: %s/mplant/m.prom}\n' "$T" >"$T/metrics.yaml"
    ln -s "$T/victim" "$T/mplant/m.prom"
    (cd "$T/mplant" && ip netns exec "$NS" timeout 60 env -i PATH="$PATH" \
        ASAN_OPTIONS="${ASAN_OPTIONS:-}" BIN="$BIN" EMPTY="$EMPTY" VICTIM="$T/victim" \
        CONF="$T/metrics.yaml" sh -c \
        'ln -s "$VICTIM" "m.prom.tmp.$$"; exec "$BIN" run --root "$EMPTY" --rank 0 --world-size 1 --config "$CONF" --verdict v.yaml' \
        >/dev/null 2>"$T/mplant.err")
    same "planted metrics temporary name and symlink at the metrics path: target untouched" \
        "$T/victim" "$T/victim.orig"
    if grep -q '^preflight_' "$T/mplant/m.prom" 2>/dev/null && [ ! -L "$T/mplant/m.prom" ]; then
        ok "metrics file written in place of the symlink"
    else notok "metrics file written in place of the symlink" "$(head -c 300 "$T/mplant.err")"; fi
else
    skip "planted metrics temporary name" "needs root and ip netns"
fi
mkdir -p "$T/iplant"
ln -s "$T/victim" "$T/iplant/preflight"
(cd "$T/iplant" && timeout 60 env -i PATH="$PATH" ASAN_OPTIONS="${ASAN_OPTIONS:-}" BIN="$BIN" \
    VICTIM="$T/victim" sh -c 'ln -s "$VICTIM" ".preflight.tmp.$$"; exec "$BIN" install .' \
    >"$T/iplant.out" 2>"$T/iplant.err")
same "planted install temporary name and symlink at DIR/preflight: target untouched" \
    "$T/victim" "$T/victim.orig"
check "install: DIR/preflight is the binary, mode 0755" \
    bash -c "cmp -s '$T/iplant/preflight' '$BIN' && [ \$(stat -c %a '$T/iplant/preflight') = 755 ]"
rm -f "$T/iplant"/.preflight.tmp.* # the planted one
no_temp "install: no temporary file of its own left" "$T/iplant"

# ---- targets that are not regular files: a device node, a FIFO, /dev/stdout, a symlink to a
# device. Each is written in place and stays what it was (a rename over it would put a regular
# file where the device was). The device is a private node in $T, never the real /dev/null.
if [ "$(id -u)" -eq 0 ] && mknod "$T/null" c 1 3 2>/dev/null; then
    p devnull -- check --root "$EMPTY" --verdict "$T/null"
    check "verdict to a device node: still a character device" test -c "$T/null"
    err_lacks devnull "verdict not written"
    ln -s "$T/null" "$T/null-link"
    p devlink -- check --root "$EMPTY" --verdict "$T/null-link"
    check "verdict to a symlink to a device: the symlink stays" test -L "$T/null-link"
    check "verdict to a symlink to a device: its target is still a device" test -c "$T/null"
    if [ -n "$HAVE_NS" ]; then
        printf 'report: {metricsFile: %s/null}\n' "$T" >"$T/metrics-null.yaml"
        (cd "$T" && ip netns exec "$NS" timeout 60 env -i PATH="$PATH" \
            ASAN_OPTIONS="${ASAN_OPTIONS:-}" "$BIN" run --root "$EMPTY" --rank 0 --world-size 1 \
            --config "$T/metrics-null.yaml" --verdict "$T/null-link" >/dev/null 2>"$T/mnull.err")
        check "metrics file and verdict of run to a device: still a character device" test -c "$T/null"
        if grep -q 'cannot write' "$T/mnull.err"; then
            notok "metrics file to a device: no write error" "$(head -c 300 "$T/mnull.err")"
        else ok "metrics file to a device: no write error"; fi
    else
        skip "metrics file to a device" "needs ip netns"
    fi
else
    skip "verdict to a device node" "needs root for mknod"
fi
mkfifo "$T/fifo"
(timeout 60 cat "$T/fifo" >"$T/fifo.got") &
FIFO_READER=$!
p fifo -- check --root "$EMPTY" --verdict "$T/fifo"
wait "$FIFO_READER"
check "verdict to a FIFO: still a FIFO" test -p "$T/fifo"
expect_eq "verdict to a FIFO: the reader got the YAML verdict" "$(yq "$T/fifo.got" "d['kind']")" Verdict
p fifo-noreader -- check --root "$EMPTY" --verdict "$T/fifo" --timeout 10
check "verdict to a FIFO nobody reads: still a FIFO, no wait" test -p "$T/fifo"
err_has fifo-noreader "verdict not written: cannot write $T/fifo"
# /dev/stdout in a mount namespace of its own with a private /dev (the machine's is never
# at stake): stdout redirected to a file, then a pipe
if [ "$(id -u)" -eq 0 ] && command -v unshare >/dev/null; then
    timeout 60 unshare --mount --propagation private env -i PATH="$PATH" \
        ASAN_OPTIONS="${ASAN_OPTIONS:-}" BIN="$BIN" EMPTY="$EMPTY" T="$T" bash -c '
        mount -t tmpfs none /dev || exit 9
        ln -s /proc/self/fd/1 /dev/stdout
        "$BIN" check --root "$EMPTY" --verdict /dev/stdout >"$T/stdout.got" 2>"$T/stdout.err"
        "$BIN" check --root "$EMPTY" --verdict /dev/stdout 2>>"$T/stdout.err" | cat >"$T/stdout.pipe"
        if [ -L /dev/stdout ]; then echo symlink; else ls -l /dev/stdout; fi' >"$T/stdout.kind" 2>&1
    expect_eq "verdict to /dev/stdout: /dev/stdout is still the symlink" "$(cat "$T/stdout.kind")" symlink
    expect_eq "verdict to /dev/stdout redirected to a file: the YAML is there" \
        "$(grep -c '^kind: Verdict$' "$T/stdout.got")" 1
    expect_eq "verdict to /dev/stdout through a pipe: the YAML is there" \
        "$(grep -c '^kind: Verdict$' "$T/stdout.pipe")" 1
else
    skip "verdict to /dev/stdout" "needs root and unshare"
fi

# ---- --timeout holds for inputs that never end: `log` of /dev/zero and of a FIFO nobody
# writes to, `env --env-file` and `check --config` of such a FIFO. Each ends by its deadline
# with a usage error naming the input (exit 2: the input is at fault, not the node); `timeout
# 60` around each (lib.sh's p) would say 124 had it hung.
mkfifo "$T/never"
p log-zero -- log /dev/zero --timeout 3
rc_is log-zero 2
err_has log-zero "log: /dev/zero: no end of the file by the deadline"
p log-fifo -- log "$T/never" --timeout 3
rc_is log-fifo 2
err_has log-fifo "log: $T/never: nothing to read by the deadline"
p env-fifo -- env --env-file "$T/never" --timeout 3
rc_is env-fifo 2
err_has env-fifo "--env-file $T/never: nothing to read within"
p config-fifo -- check --root "$EMPTY" --config "$T/never" --timeout 3 --verdict "$T/cf.yaml"
rc_is config-fifo 2
err_has config-fifo "--config $T/never: nothing to read within"
# a FIFO with a writer is read as a file
(printf 'policy:\n  failOn: fail\n' >"$T/never") &
p config-fifo-ok -- check --root "$EMPTY" --config "$T/never" --timeout 10 --verdict "$T/cf2.yaml"
wait
rc_is config-fifo-ok 0

# ---- a deeply nested config under --timeout 2: bounded, a usage error naming file and line
python3 -c "import sys; n=250000; sys.stdout.write('expect: ' + '['*n + ']'*n + '\n')" >"$T/deep.yaml"
start=$(date +%s%N)
p deep -- check --root "$EMPTY" --config "$T/deep.yaml" --timeout 2 --verdict "$T/deep-v.yaml"
took_ms=$((($(date +%s%N) - start) / 1000000))
echo "# deep-nesting config: $took_ms ms"
rc_is deep 2
err_has deep "$T/deep.yaml:1: nested more than 32 levels deep"
# the bound is generous for a loaded machine: before the limit this took minutes
check "deep: ended well within 10 s" test "$took_ms" -lt 10000
printf 'expect: &e {hcas: 1}\npolicy: {findings: *e}\n' >"$T/alias.yaml"
p alias -- check --root "$EMPTY" --config "$T/alias.yaml"
rc_is alias 2
err_has alias "alias.yaml:2: alias *e: aliases are not allowed"

# ---- secret names longer than 255 bytes
LONG=$(printf 'A%.0s' $(seq 300))
printf 'NCCL_%s_TOKEN=hunter2-in-nccl\nMY_%s_TOKEN=hunter2-in-mine\nNCCL_DEBUG=INFO\n' \
    "$LONG" "$LONG" >"$T/secrets.env"
p secret -- env --root "$EMPTY" --env-file "$T/secrets.env" --verdict "$T/secret.yaml" --format yaml
rc_is secret 0
check "long secret name, env --env-file: the value is not in the verdict file" bash -c "! grep -q hunter2 '$T/secret.yaml'"
check "long secret name, env --env-file: the value is not on stdout or stderr" bash -c "! grep -q hunter2 '$T/secret.out' '$T/secret.err'"
p secret-check "NCCL_${LONG}_TOKEN=hunter2-in-nccl" "MY_${LONG}_TOKEN=hunter2-in-mine" -- \
    check --root "$EMPTY" --verdict "$T/secret-check.yaml" --format yaml
check "long secret name, check: the value is not in the verdict file" bash -c "! grep -q hunter2 '$T/secret-check.yaml' '$T/secret-check.out'"
expect_eq "long secret name, check: masked in ncclEnv" \
    "$(yq "$T/secret-check.yaml" "d['environment']['ncclEnv']['NCCL_${LONG}_TOKEN']")" '***'
printf 'NCCL_DEBUG=INFO\nMY_%s_TOKEN hunter2-no-equals\n' "$LONG" >"$T/bad1.env"
p bad1 -- env --root "$EMPTY" --env-file "$T/bad1.env"
rc_is bad1 2
err_has bad1 "bad1.env:2: expected KEY=VALUE"
err_lacks bad1 "hunter2"
printf 'MY_%s_TOKEN hunter2-in-name=x\n' "$LONG" >"$T/bad2.env"
p bad2 -- env --root "$EMPTY" --env-file "$T/bad2.env"
rc_is bad2 2
err_has bad2 "bad2.env:1: the text before '=' is not a variable name"
err_lacks bad2 "hunter2"

# ---- a 250-byte verdict file name; install ""
NAME250=$(printf 'v%.0s' $(seq 250))
p long -- env --root "$EMPTY" --verdict "$T/$NAME250"
rc_is long 0
expect_eq "250-byte verdict file name: written" "$(yq "$T/$NAME250" "d['kind']")" Verdict
if [ -n "$HAVE_NS" ]; then
    rm -f "$T/$NAME250"
    ip netns exec "$NS" timeout 60 env -i PATH="$PATH" ASAN_OPTIONS="${ASAN_OPTIONS:-}" \
        "$BIN" run --root "$EMPTY" --rank 0 --world-size 2 --port 29441 \
        --verdict "$T/$NAME250" >/dev/null 2>"$T/longsig.err" &
    pid=$!
    wait_for_text "$T/longsig.err" "waiting for 1 of 2 ranks"
    kill -TERM "$pid"
    wait "$pid"
    expect_eq "250-byte verdict file name: written on SIGTERM" \
        "$(yq "$T/$NAME250" "[f['code'] for f in check('rendezvous')['findings']]")" '["interrupted"]'
fi
p install-empty -- install ""
rc_is install-empty 2
err_has install-empty "install needs a folder"

# ---- SIGTERM at random moments of `run` (two ranks) and of `check`
if [ -n "$HAVE_NS" ]; then
    printf 'tcp: {messageBytes: 65536, iterations: 1}\n' >"$T/small.yaml"
    RANDOM=4242 # the delays are the same on every run of this script
    trials=${PREFLIGHT_SIGTERM_TRIALS:-100}
    parallel=5
    : >"$T/trials.txt"
    # trial I DELAY_MS: ranks 0 and 1 on port 29500+I; rank 1 gets SIGTERM after DELAY_MS
    trial() {
        local d=$T/trial$1 port=$((29500 + $1)) p0 p1 rc0 rc1
        mkdir -p "$d"
        cp "$T/old.yaml" "$d/r1.yaml" # an older verdict: a kill before the guard exists keeps it
        # no `timeout` wrapper here: the signal must reach preflight itself, as a kubelet's
        # reaches a container's first process (`ip netns exec` and `env` exec it); the
        # watchdog below bounds the trial instead
        local run=(ip netns exec "$NS" env -i PATH="$PATH" "$BINR" run --root "$EMPTY"
            --world-size 2 --coordinator 127.0.0.1 --port "$port" --config "$T/small.yaml"
            --timeout 5)
        "${run[@]}" --rank 0 --verdict "$d/r0.yaml" >/dev/null 2>"$d/r0.err" &
        p0=$!
        "${run[@]}" --rank 1 --verdict "$d/r1.yaml" >/dev/null 2>"$d/r1.err" &
        p1=$!
        (sleep 30 && kill -KILL "$p0" "$p1") 2>/dev/null &
        local dog=$!
        sleep "$(printf '%d.%03d' $(($2 / 1000)) $(($2 % 1000)))"
        kill -TERM "$p1" 2>/dev/null
        wait "$p1"
        rc1=$?
        wait "$p0"
        rc0=$?
        kill "$dog" 2>/dev/null
        echo "$d $2 $rc0 $rc1" >>"$T/trials.txt"
    }
    start=$(date +%s)
    i=0
    while [ $i -lt "$trials" ]; do
        for _ in $(seq $parallel); do
            [ $i -lt "$trials" ] || break
            trial $i $((RANDOM % 2001)) &
            i=$((i + 1))
        done
        wait
    done
    echo "# $trials signalled runs in $(($(date +%s) - start)) s ($BINR)"
    # every verdict file: complete YAML, and what the exit code says
    python3 - "$T/trials.txt" >"$T/trials.out" <<'PY'
import os, sys, yaml
bad = []
stats = {"interrupted": 0, "completed": 0, "before-guard": 0}
early = []
n = 0
for line in open(sys.argv[1]):
    d, delay, rc0, rc1 = line.split()
    rc0, rc1 = int(rc0), int(rc1)
    n += 1
    def load(f):
        try:
            with open(os.path.join(d, f)) as fh:
                v = yaml.safe_load(fh)
        except Exception as e:
            return None, "%s: does not parse: %s" % (f, e)
        if not isinstance(v, dict) or v.get("kind") != "Verdict" or v.get("verdict") not in ("pass", "warn", "fail"):
            return None, "%s: not a complete verdict" % f
        return v, None
    def codes(v):
        return [x["code"] for c in v.get("checks", []) for x in (c.get("findings") or [])]
    v1, e = load("r1.yaml")
    if e:
        bad.append("%s (delay %s ms): %s" % (d, delay, e)); continue
    if v1.get("summary") == "an older run":
        # SIGTERM before the handler existed (exec, dynamic loader): the process dies by
        # the signal and the older file stays whole
        if rc1 != 143:
            bad.append("%s: old verdict kept but exit code %d" % (d, rc1))
        stats["before-guard"] += 1
        early.append(int(delay))
    elif rc1 == 0:
        if v1["verdict"] == "fail" or "interrupted" in codes(v1):
            bad.append("%s: exit 0 with verdict %s" % (d, v1["verdict"]))
        stats["completed"] += 1
    elif rc1 in (1, 3, 4, 5):
        # stopped by the signal (or, on a slow machine, by its own --timeout): the exit code
        # is the verdict's failure class (3 spec, 4 node, 5 peer; 1 unclassified)
        want = {"spec": 3, "node": 4, "peer": 5}.get(v1.get("failureClass"), 1)
        if v1["verdict"] != "fail" or not {"interrupted", "timeout"} & set(codes(v1)) or rc1 != want:
            bad.append("%s (delay %s ms): exit 1, verdict %s, codes %s" % (d, delay, v1["verdict"], codes(v1)))
        stats["interrupted"] += 1
    else:
        bad.append("%s (delay %s ms): rank 1 exit code %d" % (d, delay, rc1))
    v0, e = load("r0.yaml")
    if e:
        bad.append("%s (delay %s ms): %s" % (d, delay, e)); continue
    want0 = {"spec": 3, "node": 4, "peer": 5}.get(v0.get("failureClass"), 1)
    if (rc0 == 0) != (v0["verdict"] in ("pass", "warn")) or rc0 not in (0, want0):
        bad.append("%s (delay %s ms): rank 0 exit %d, verdict %s" % (d, delay, rc0, v0["verdict"]))
    for f in os.listdir(d):
        if f.startswith(".pf.") or ".tmp." in f:
            bad.append("%s: temporary file %s left" % (d, f))
print("runs %d: %s (before the guard: delays %s ms)" % (n, ", ".join("%s %d" % kv for kv in stats.items()), sorted(early)))
for b in bad:
    print("BAD " + b)
PY
    cat "$T/trials.out" | sed 's/^/# /'
    expect_eq "SIGTERM at random moments of run: $trials runs recorded" "$(wc -l <"$T/trials.txt")" "$trials"
    expect_eq "SIGTERM at random moments of run: every verdict complete and agreeing with its exit code" \
        "$(grep -c '^BAD' "$T/trials.out")" 0
    check "SIGTERM at random moments of run: some runs interrupted, some completed" \
        grep -qE 'interrupted [1-9].*completed [1-9]|completed [1-9].*interrupted [1-9]' "$T/trials.out"

    # `check` takes a fraction of a second: 20 signals over its first 0.6 s
    : >"$T/checks.txt"
    for i in $(seq 20); do
        d=$T/check$i
        mkdir -p "$d"
        cp "$T/old.yaml" "$d/v.yaml"
        # as in the run trials, no `timeout` wrapper: GNU timeout 9.1 can die of the signal
        # between its fork and recording the child's pid (exit 143) and leave preflight to
        # finish unsignalled, a verdict that disagrees with an exit code preflight never
        # gave. The signal goes to preflight itself; a watchdog bounds the trial.
        env -i PATH="$PATH" "$BINR" check --root "$EMPTY" --verdict "$d/v.yaml" \
            >/dev/null 2>"$d/err" &
        pid=$!
        (sleep 30 && kill -KILL "$pid") 2>/dev/null &
        dog=$!
        delay=$((RANDOM % 600))
        sleep "$(printf '0.%03d' "$delay")"
        kill -TERM "$pid" 2>/dev/null
        wait "$pid"
        echo "$d $delay 0 $?" >>"$T/checks.txt"
        kill "$dog" 2>/dev/null
    done
    python3 - "$T/checks.txt" >"$T/checks.out" <<'PY'
import sys, yaml
for line in open(sys.argv[1]):
    d, delay, _, rc = line.split()
    rc = int(rc)
    try:
        v = yaml.safe_load(open(d + "/v.yaml"))
        ok = isinstance(v, dict) and v.get("kind") == "Verdict"
    except Exception:
        ok = False
    if not ok:
        print("BAD %s: verdict does not parse" % d); continue
    codes = [x["code"] for c in v.get("checks", []) for x in (c.get("findings") or [])]
    if v.get("summary") == "an older run":
        good = rc == 143
    elif rc in (1, 3, 4, 5):
        want = {"spec": 3, "node": 4, "peer": 5}.get(v.get("failureClass"), 1)
        good = v["verdict"] == "fail" and "interrupted" in codes and rc == want
    else:
        good = rc == 0 and v["verdict"] in ("pass", "warn")
    print(("ok" if good else "BAD") + " %s delay %s ms: exit %d, verdict %s" % (d, delay, rc, v.get("verdict")))
PY
    expect_eq "SIGTERM during check: every verdict complete and agreeing with its exit code" \
        "$(grep -c '^BAD' "$T/checks.out")" 0
    grep '^BAD' "$T/checks.out" | sed 's/^/# /'
else
    skip "SIGTERM at random moments" "needs root and ip netns"
fi
