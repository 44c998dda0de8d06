#!/usr/bin/env bash
# nccl.env end to end: `preflight env` and `preflight check` on NCCL_* variables from the
# environment, /etc/nccl.conf under --root and --env-file, against fixture HCAs.
. "$(dirname "$0")/lib.sh"

ROOT="$FIX/nccl-hcas"       # mlx5_0 mlx5_1 mlx5_10 mlx5_11; /etc/nccl.conf sets NCCL_SHM_DISABLE=1
EMPTY="$T/empty-root"
mkdir -p "$EMPTY"

# penv ROOT OUT [VAR=VALUE...]: `preflight env` in a clean environment; the YAML goes to OUT,
# the exit code to OUT.rc
penv() {
    local root=$1 out=$2; shift 2
    env -i PATH="$PATH" HOME="$T" ASAN_OPTIONS="${ASAN_OPTIONS:-}" \
        UBSAN_OPTIONS="${UBSAN_OPTIONS:-}" NO_COLOR=1 "$@" \
        "$PREFLIGHT" env --root "$root" --format yaml >"$out" 2>"$out.err"
    echo $? >"$out.rc"
}
codes_of() { yq "$1" 'codes("nccl.env")'; }
has_code() { codes_of "$1" | grep -q "\"$2\""; }
rc_of() { cat "$1.rc"; }

# a variable a plugin NCCL loads reads is not "ignored by NCCL": the example tuner's
# NCCL_TUNER_CONFIG_FILE (NVIDIA/nccl ext-tuner/example) is recorded as the plugin's; an unknown
# name while a plugin is loaded is unknown (the plugin may read it), a warning without one
penv "$EMPTY" "$T/tuner.yaml" NCCL_TUNER_PLUGIN=/opt/tuner/libnccl-tuner-example.so \
    NCCL_TUNER_CONFIG_FILE=/opt/tuner/nccl_tuner.conf NCCL_TUNER_MYSETTING=1
expect_eq "env: a tuner plugin's variables: pass, none unknown-variable" \
    "$(yq "$T/tuner.yaml" '[check("nccl.env")["status"], codes("nccl.env"), [u["code"] for u in check("nccl.env")["evidence"]["unknown"]], len(check("nccl.env")["evidence"]["readByPlugins"])]')" \
    '["pass", [], ["unknown-variable"], 1]'
penv "$EMPTY" "$T/noplugin.yaml" NCCL_TUNER_MYSETTING=1
expect_eq "env: the same unknown name without a plugin: unknown-variable" \
    "$(codes_of "$T/noplugin.yaml")" '["unknown-variable"]'

# 1. no NCCL variables: pass
penv "$EMPTY" "$T/clean.yaml"
expect_eq "no variables: pass" "$(yq "$T/clean.yaml" 'check("nccl.env")["status"]')" pass
expect_eq "no variables: exit 0" "$(rc_of "$T/clean.yaml")" 0

# 2. P2P
penv "$EMPTY" "$T/p2p.yaml" NCCL_P2P_DISABLE=1
check "NCCL_P2P_DISABLE=1: p2p-disabled" has_code "$T/p2p.yaml" p2p-disabled
expect_eq "NCCL_P2P_DISABLE=1: exit 3 (spec)" "$(rc_of "$T/p2p.yaml")" 3
penv "$EMPTY" "$T/p2p-hex.yaml" NCCL_P2P_DISABLE=0x1
check "NCCL_P2P_DISABLE=0x1 is 1 to NCCL: p2p-disabled" has_code "$T/p2p-hex.yaml" p2p-disabled
penv "$EMPTY" "$T/p2p-true.yaml" NCCL_P2P_DISABLE=true
expect_eq "NCCL_P2P_DISABLE=true: invalid-value only" "$(codes_of "$T/p2p-true.yaml")" '["invalid-value"]'
penv "$EMPTY" "$T/p2p-loc.yaml" NCCL_P2P_LEVEL=LOC
check "NCCL_P2P_LEVEL=LOC: p2p-disabled" has_code "$T/p2p-loc.yaml" p2p-disabled
penv "$EMPTY" "$T/p2p-node.yaml" NCCL_P2P_LEVEL=NODE NCCL_NET_GDR_LEVEL=PHB
expect_eq "NCCL_P2P_LEVEL=NODE invalid, PHB fine" "$(codes_of "$T/p2p-node.yaml")" '["invalid-value"]'

# 3. /etc/nccl.conf under the root, and the environment winning over it
penv "$ROOT" "$T/conf.yaml"
check "nccl.conf NCCL_SHM_DISABLE=1: shm-disabled" has_code "$T/conf.yaml" shm-disabled
check "message names /etc/nccl.conf" grep -q "from /etc/nccl.conf" "$T/conf.yaml"
expect_eq "origin in evidence" \
    "$(yq "$T/conf.yaml" 'check("nccl.env")["evidence"]["variables"]["NCCL_SHM_DISABLE"]["origin"]')" \
    /etc/nccl.conf:2
penv "$ROOT" "$T/conf-env.yaml" NCCL_SHM_DISABLE=0
check "environment wins over nccl.conf" bash -c "! grep -q shm-disabled '$T/conf-env.yaml'"

# 4. sockets per thread
penv "$EMPTY" "$T/s64.yaml" NCCL_SOCKET_NTHREADS=8 NCCL_NSOCKS_PERTHREAD=8
expect_eq "8 x 8 = 64 is fine" "$(codes_of "$T/s64.yaml")" '[]'
penv "$EMPTY" "$T/s72.yaml" NCCL_SOCKET_NTHREADS=8 NCCL_NSOCKS_PERTHREAD=9
check "8 x 9 = 72: socket-thread-product" has_code "$T/s72.yaml" socket-thread-product
expect_eq "8 x 9: fail" "$(yq "$T/s72.yaml" 'check("nccl.env")["status"]')" fail
penv "$EMPTY" "$T/s17.yaml" NCCL_SOCKET_NTHREADS=17
expect_eq "17 threads: warn" "$(yq "$T/s17.yaml" '[f["status"] for f in check("nccl.env")["findings"] if f["code"]=="socket-thread-product"]')" '["warn"]'

# 5. IB disabled with and without HCAs
penv "$ROOT" "$T/ib.yaml" NCCL_IB_DISABLE=1 NCCL_SHM_DISABLE=0
expect_eq "IB_DISABLE=1 with HCAs: fail" "$(yq "$T/ib.yaml" '[f["status"] for f in check("nccl.env")["findings"] if f["code"]=="ib-disabled"]')" '["fail"]'
penv "$EMPTY" "$T/ib-none.yaml" NCCL_IB_DISABLE=1
expect_eq "IB_DISABLE=1 without HCAs: warn" "$(yq "$T/ib-none.yaml" '[f["status"] for f in check("nccl.env")["findings"] if f["code"]=="ib-disabled"]')" '["warn"]'
penv "$ROOT" "$T/ib-true.yaml" NCCL_IB_DISABLE=true NCCL_SHM_DISABLE=0
expect_eq "IB_DISABLE=true: invalid-value, IB not disabled" "$(codes_of "$T/ib-true.yaml")" '["invalid-value"]'
check "IB_DISABLE=true says IB is NOT disabled" \
    grep -q "IB is NOT disabled" <(yq "$T/ib-true.yaml" 'check("nccl.env")["findings"][0]["message"]')
penv "$ROOT" "$T/net-socket.yaml" NCCL_NET=socket NCCL_SHM_DISABLE=0
check "NCCL_NET=socket with HCAs: ib-disabled" has_code "$T/net-socket.yaml" ib-disabled

# 6. HCA lists
penv "$ROOT" "$T/hca9.yaml" NCCL_IB_HCA=mlx5_9 NCCL_SHM_DISABLE=0
check "NCCL_IB_HCA=mlx5_9: hca-no-match" has_code "$T/hca9.yaml" hca-no-match
check "hca-no-match lists what exists" grep -q "have: mlx5_0, mlx5_1, mlx5_10, mlx5_11" "$T/hca9.yaml"
penv "$ROOT" "$T/hca1.yaml" NCCL_IB_HCA=mlx5_1 NCCL_SHM_DISABLE=0
expect_eq "mlx5_1 also selects mlx5_10, mlx5_11: warn" "$(yq "$T/hca1.yaml" '[f["status"] for f in check("nccl.env")["findings"] if f["code"]=="hca-no-match"]')" '["warn"]'
expect_eq "mlx5_1 selects 3 devices" "$(yq "$T/hca1.yaml" 'check("nccl.env")["evidence"]["selectedHcas"]')" '["mlx5_1", "mlx5_10", "mlx5_11"]'
penv "$ROOT" "$T/hca1x.yaml" NCCL_IB_HCA==mlx5_1:1,mlx5_0 NCCL_SHM_DISABLE=0
expect_eq "=mlx5_1:1,mlx5_0: exact, no finding" "$(codes_of "$T/hca1x.yaml")" '[]'
penv "$ROOT" "$T/hcax.yaml" NCCL_IB_HCA="^=mlx5_0,mlx5_1,mlx5_10,mlx5_11" NCCL_SHM_DISABLE=0
check "exclusion of every HCA: hca-no-match" has_code "$T/hcax.yaml" hca-no-match

# 7. names
penv "$EMPTY" "$T/names.yaml" NCCL_SOCKET_IFNAMES=eth0 NCCL_ASYNC_ERROR_HANDLING=1 NCCL_IB_GDR_LEVEL=PHB
check "NCCL_SOCKET_IFNAMES: did you mean" grep -q "did you mean NCCL_SOCKET_IFNAME?" "$T/names.yaml"
expect_eq "unknown + obsolete, PyTorch's alias not flagged" "$(codes_of "$T/names.yaml")" '["obsolete-variable", "unknown-variable"]'
check "PyTorch alias noted in evidence" grep -q "TORCH_NCCL_ASYNC_ERROR_HANDLING" "$T/names.yaml"

# 8. integers and debug levels
penv "$EMPTY" "$T/octal.yaml" NCCL_IB_TIMEOUT=010 NCCL_IB_RETRY_CNT=08
expect_eq "010 octal, 08 invalid" "$(codes_of "$T/octal.yaml")" '["invalid-value", "octal-value"]'
penv "$EMPTY" "$T/trace.yaml" NCCL_DEBUG=TRACE
check "NCCL_DEBUG=TRACE: debug-verbose" has_code "$T/trace.yaml" debug-verbose
penv "$EMPTY" "$T/infoall.yaml" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ALL
check "INFO + SUBSYS ALL: debug-verbose" has_code "$T/infoall.yaml" debug-verbose
penv "$EMPTY" "$T/info.yaml" NCCL_DEBUG=info NCCL_DEBUG_SUBSYS=INIT,NET
expect_eq "INFO with a few subsystems: fine" "$(codes_of "$T/info.yaml")" '[]'
penv "$EMPTY" "$T/loud.yaml" NCCL_DEBUG=LOUD NCCL_SOCKET_FAMILY=ipv4
expect_eq "bad debug level and family: invalid-value" "$(codes_of "$T/loud.yaml")" '["invalid-value", "invalid-value"]'

# 9. secrets are masked
penv "$EMPTY" "$T/secret.yaml" NCCL_FAKE_TOKEN=hunter2
check "secret value masked" bash -c "! grep -q hunter2 '$T/secret.yaml'"

# 10. --env-file: origin is file:line
cat >"$T/job.env" <<'EOF'
# training job
export NCCL_IB_HCA="mlx5_9"
NCCL_SOCKET_IFNAME=net1
EOF
env -i PATH="$PATH" ASAN_OPTIONS="${ASAN_OPTIONS:-}" "$PREFLIGHT" env --env-file "$T/job.env" \
    --root "$ROOT" --format yaml >"$T/file.yaml" 2>&1
check "--env-file: hca-no-match" has_code "$T/file.yaml" hca-no-match
check "--env-file: message names file:line" grep -q "from $T/job.env:2" "$T/file.yaml"
# the file is the pod's environment, not a file NCCL reads: the remedy points at the pod spec
expect_eq "--env-file: the remedy points at the pod spec's env, not at the file" \
    "$(yq "$T/file.yaml" '[("is the pod'"'"'s environment" in f["remedy"], "pod spec'"'"'s env" in f["remedy"], "NCCL reads it from" in f["remedy"]) for f in check("nccl.env")["findings"] if f["code"]=="hca-no-match"]')" \
    '[[true, true, false]]'

# 11. policy moves p2p-disabled to warn: exit 0
printf 'policy:\n  findings:\n    p2p-disabled: warn\n' >"$T/policy.yaml"
penv "$EMPTY" "$T/pol.yaml" NCCL_P2P_DISABLE=1 PREFLIGHT_CONFIG="$T/policy.yaml"
env -i PATH="$PATH" ASAN_OPTIONS="${ASAN_OPTIONS:-}" NCCL_P2P_DISABLE=1 "$PREFLIGHT" env \
    --config "$T/policy.yaml" --root "$EMPTY" --format yaml >"$T/pol.yaml" 2>&1
expect_eq "policy p2p-disabled: warn -> exit 0" "$?" 0

# 12. `check` mode looks NCCL_TOPO_FILE up under the root
pcheck() {
    local out=$1; shift
    env -i PATH="$PATH" HOME="$T" ASAN_OPTIONS="${ASAN_OPTIONS:-}" NO_COLOR=1 "$@" \
        "$PREFLIGHT" check --root "$ROOT" --format yaml >"$out" 2>"$out.err"
}
pcheck "$T/topo-missing.yaml" NCCL_TOPO_FILE=/opt/topo/missing.xml NCCL_SHM_DISABLE=0
check "check: topo-file-missing" has_code "$T/topo-missing.yaml" topo-file-missing
pcheck "$T/topo-ok.yaml" NCCL_TOPO_FILE=/opt/topo/ndv5-topo.xml NCCL_SHM_DISABLE=0
expect_eq "check: existing topo file is fine" "$(codes_of "$T/topo-ok.yaml")" '[]'
penv "$EMPTY" "$T/topo-env.yaml" NCCL_TOPO_FILE=/opt/topo/missing.xml
expect_eq "env mode does not look files up" "$(codes_of "$T/topo-env.yaml")" '[]'

# 13. config files read as NCCL's setEnvFile (src/misc/param.cc) reads them: NCCL_CONF_FILE,
# else $HOME/.nccl.conf, then /etc/nccl.conf; the first to set a variable wins. A base image
# that bakes NCCL_IB_DISABLE=1 into /etc/nccl.conf is a silent fallback to sockets: the
# finding names the file and line.
BAKED=$T/baked-root
cp -a "$ROOT" "$BAKED"
mkdir -p "$BAKED$T"
printf '# base image defaults\nNCCL_IB_DISABLE=1\nNCCL_SOCKET_IFNAME=eth0\nNCCL_DEBUG=WARN # quiet\nNCCL_P2P_LEVEL = NVL\n' \
    >"$BAKED/etc/nccl.conf"
penv "$BAKED" "$T/baked.yaml"
expect_eq "baked /etc/nccl.conf: ib-disabled fails" \
    "$(yq "$T/baked.yaml" '[f["status"] for f in check("nccl.env")["findings"] if f["code"]=="ib-disabled"]')" '["fail"]'
check "baked: the message names /etc/nccl.conf:2" grep -q "NCCL_IB_DISABLE=1 (from /etc/nccl.conf:2)" "$T/baked.yaml"
check "baked: the remedy says NCCL reads it from /etc/nccl.conf" \
    grep -q "NCCL reads it from /etc/nccl.conf" "$T/baked.yaml"
expect_eq "baked: NCCL_SOCKET_IFNAME's origin is /etc/nccl.conf:3" \
    "$(yq "$T/baked.yaml" 'check("nccl.env")["evidence"]["variables"]["NCCL_SOCKET_IFNAME"]["origin"]')" /etc/nccl.conf:3
expect_eq "baked: a '#' after a value is part of it, as NCCL reads it" \
    "$(yq "$T/baked.yaml" 'check("nccl.env")["evidence"]["variables"]["NCCL_DEBUG"]["value"]')" "WARN # quiet"
expect_eq "baked: 'NCCL_P2P_LEVEL = NVL' sets a name with a blank, which NCCL never reads (conf-blanks)" \
    "$(yq "$T/baked.yaml" '[f["message"].split(": NCCL does")[0] for f in check("nccl.env")["findings"] if f["code"]=="conf-blanks"]')" \
    '["\"NCCL_P2P_LEVEL \" (from /etc/nccl.conf:5)"]'
check "baked: the name with a blank is not also an unknown-variable" \
    bash -c "! grep -q 'unknown-variable' '$T/baked.yaml'"
# quotes and blanks NCCL keeps (setEnvFile copies the text after '=' verbatim)
QUOTED=$T/quoted-root
cp -a "$ROOT" "$QUOTED"
printf 'NCCL_IB_HCA="=mlx5_0,mlx5_1"\nNCCL_IB_DISABLE="1"\nNCCL_SOCKET_IFNAME=eth0 \n' >"$QUOTED/etc/nccl.conf"
penv "$QUOTED" "$T/quoted.yaml"
expect_eq "quoted: conf-quotes for both quoted values, conf-blanks for the trailing blank" \
    "$(yq "$T/quoted.yaml" 'sorted(f["code"] + " " + f["message"].split(" (from")[0] for f in check("nccl.env")["findings"] if f["code"].startswith("conf-"))')" \
    '["conf-blanks NCCL_SOCKET_IFNAME=\"eth0 \"", "conf-quotes NCCL_IB_DISABLE=\"1\"", "conf-quotes NCCL_IB_HCA=\"=mlx5_0,mlx5_1\""]'
expect_eq "quoted: NCCL_IB_HCA names its line, its first entry \"=mlx5_0 and the unquoted remedy" \
    "$(yq "$T/quoted.yaml" '[("from /etc/nccl.conf:1" in f["message"], "first entry is \"\"=mlx5_0\"" in f["message"], f["remedy"].startswith("write NCCL_IB_HCA==mlx5_0,mlx5_1 without quotes")) for f in check("nccl.env")["findings"] if f["code"] == "conf-quotes" and "NCCL_IB_HCA" in f["message"]]')" \
    '[[true, true, true]]'
expect_eq "quoted: NCCL_IB_DISABLE=\"1\" is read as 0" \
    "$(yq "$T/quoted.yaml" 'any("reads the number at its start, 0" in f["message"] for f in check("nccl.env")["findings"])')" True
# Windows line ends: NCCL before 2.30.3 keeps the '\r' in each value (setEnvFile)
CRLF=$T/crlf-root
cp -a "$ROOT" "$CRLF"
printf 'NCCL_IB_HCA==mlx5_0,mlx5_1\r\nNCCL_SOCKET_IFNAME=eth0\r\n' >"$CRLF/etc/nccl.conf"
penv "$CRLF" "$T/crlf.yaml"
expect_eq "crlf: one conf-crlf for the file, naming its first variable and line" \
    "$(yq "$T/crlf.yaml" '[f["message"].split(": NCCL")[0] + " " + str("from /etc/nccl.conf:1" in f["message"]) for f in check("nccl.env")["findings"] if f["code"] == "conf-crlf"]')" \
    '["/etc/nccl.conf has Windows line ends (CR LF) True"]'
# ~/.nccl.conf comes before /etc/nccl.conf; NCCL_CONF_FILE replaces ~/.nccl.conf only
printf 'NCCL_IB_DISABLE=0\n' >"$BAKED$T/.nccl.conf"
penv "$BAKED" "$T/home.yaml"
expect_eq "~/.nccl.conf wins over /etc/nccl.conf" \
    "$(yq "$T/home.yaml" 'check("nccl.env")["evidence"]["variables"]["NCCL_IB_DISABLE"]["origin"]')" "$T/.nccl.conf:1"
printf 'NCCL_SOCKET_IFNAME=net1\n' >"$BAKED/site.conf"
penv "$BAKED" "$T/conffile.yaml" NCCL_CONF_FILE=/site.conf
expect_eq "NCCL_CONF_FILE replaces ~/.nccl.conf, /etc/nccl.conf is still read" \
    "$(yq "$T/conffile.yaml" '[check("nccl.env")["evidence"]["variables"][n]["origin"] for n in ("NCCL_SOCKET_IFNAME", "NCCL_IB_DISABLE")]')" \
    '["/site.conf:1", "/etc/nccl.conf:2"]'

# 14. NCCL_NET unset while RDMA is meant to run: advice, never a finding. NCCL compares NCCL_NET
# with each net plugin's name (strcasecmp in src/plugin/net.cc ncclNetInit) and fails the
# communicator when none initializes, instead of falling back to sockets.
advice_of() { yq "$1" 'check("nccl.env")["evidence"].get("advice", [""])[0]'; }
penv "$ROOT" "$T/adv-ok.yaml" NCCL_IB_HCA==mlx5_0 NCCL_SHM_DISABLE=0
expect_eq "advice: NCCL_IB_HCA matching, NCCL_NET unset: no finding, pass" \
    "$(yq "$T/adv-ok.yaml" '[check("nccl.env")["status"], codes("nccl.env")]')" '["pass", []]'
check "advice: evidence says NCCL_NET=IB" \
    grep -q "NCCL_NET is not set although NCCL_IB_HCA is set: set NCCL_NET=IB" <(advice_of "$T/adv-ok.yaml")
env -i PATH="$PATH" HOME="$T" ASAN_OPTIONS="${ASAN_OPTIONS:-}" NO_COLOR=1 NCCL_IB_HCA==mlx5_0 \
    NCCL_SHM_DISABLE=0 "$PREFLIGHT" env --root "$ROOT" --format human >"$T/adv.txt" 2>&1
expect_eq "advice: human form exits 0" "$?" 0
check "advice: human form prints it as advice" \
    grep -q '^advice: nccl.env: NCCL_NET is not set .*NCCL_NET=IB' "$T/adv.txt"
check "advice: human form has no warning" bash -c "! grep -qi '^warn' '$T/adv.txt'"
penv "$ROOT" "$T/adv-miss.yaml" NCCL_IB_HCA=mlx5_9 NCCL_SHM_DISABLE=0
expect_eq "advice: hca-no-match's remedy says NCCL_NET=IB fails loudly" \
    "$(yq "$T/adv-miss.yaml" '["NCCL_NET=IB in the pod spec" in f["remedy"] for f in check("nccl.env")["findings"] if f["code"]=="hca-no-match"]')" \
    "[true]"
penv "$ROOT" "$T/adv-set.yaml" NCCL_IB_HCA=mlx5_9 NCCL_SHM_DISABLE=0 NCCL_NET=IB
expect_eq "advice: none once NCCL_NET is set" \
    "$(yq "$T/adv-set.yaml" '["advice" in check("nccl.env")["evidence"]] + ["NCCL_NET=IB" in f["remedy"] for f in check("nccl.env")["findings"]]')" \
    "[false, false]"
printf 'expect:\n  transport: OFI\n' >"$T/ofi.yaml"
penv "$EMPTY" "$T/adv-ofi.yaml" PREFLIGHT_CONFIG="$T/ofi.yaml"
check "advice: expect.transport OFI names NCCL_NET=OFI" \
    grep -q "although expect.transport is OFI: set NCCL_NET=OFI" <(advice_of "$T/adv-ofi.yaml")
penv "$EMPTY" "$T/adv-none.yaml"
expect_eq "advice: none without a sign of RDMA" \
    "$(yq "$T/adv-none.yaml" '"advice" in check("nccl.env")["evidence"]')" False

# 15. settings NCCL releases changed: `preflight env` loads no NCCL, so the messages say from
# which release a rule applies; `check` with no loadable libnccl.so.2 says the same
penv "$EMPTY" "$T/ver-fifo.yaml" NCCL_WORK_FIFO_DEPTH=131072 NCCL_IB_ADDR_FAMILY=AF_INET6
expect_eq "env: NCCL_WORK_FIFO_DEPTH renamed, NCCL_IB_ADDR_FAMILY fine" \
    "$(codes_of "$T/ver-fifo.yaml")" '["nccl-setting-renamed"]'
check "env: the message names the release and the successor" \
    grep -q "NCCL 2.22 and later do not read it (NCCL 2.22 replaced it with NCCL_WORK_FIFO_BYTES" \
    <(yq "$T/ver-fifo.yaml" 'check("nccl.env")["findings"][0]["message"]')
penv "$EMPTY" "$T/ver-gid.yaml" NCCL_IB_GID_INDEX=3
expect_eq "env: a fixed NCCL_IB_GID_INDEX: gid-index-fixed" "$(codes_of "$T/ver-gid.yaml")" \
    '["gid-index-fixed"]'
penv "$EMPTY" "$T/ver-gid-auto.yaml" NCCL_IB_GID_INDEX=-1
expect_eq "env: NCCL_IB_GID_INDEX=-1 is the automatic choice" "$(codes_of "$T/ver-gid-auto.yaml")" '[]'
pcheck "$T/ver-check.yaml" NCCL_CUDA_PATH=/usr/local/cuda/lib64 NCCL_SHM_DISABLE=0 \
    PREFLIGHT_NCCL_LIB=/nonexistent/libnccl.so.2
expect_eq "check without NCCL: NCCL_CUDA_PATH obsolete" "$(codes_of "$T/ver-check.yaml")" \
    '["nccl-setting-obsolete"]'
