#!/usr/bin/env bash
# `preflight check --root` on the materialized node fixtures: exit codes and the GPU/RDMA
# checks' statuses and finding codes in the YAML verdict; config expectations and policy; a
# uverbs node with no driver (ENXIO) and one the user may not open (EACCES); a low memlock
# limit without CAP_IPC_LOCK; and a trace showing that umadN/issmN are never opened.
source "$(dirname "$0")/lib.sh"

MINE='["gpu.devices", "rdma.devices", "rdma.ports", "rdma.memlock", "rdma.gpudirect"]'
chmod 755 "$T"

# mat FIXTURE: materializes a fixture into $T/FIXTURE and prints the path
mat() {
    rm -rf "${T:?}/$1"
    "$FIX/materialize.sh" "$FIX/$1" "$T/$1" 2>/dev/null || { echo "materialize $1 failed" >&2; return 1; }
    echo "$T/$1"
}

# pf NAME ROOT [ARGS...]: runs `preflight check` with a clean environment; the verdict goes to
# $T/NAME.yaml, the exit code to $T/NAME.rc (prefix with WRAP=... to run under a wrapper)
pf() {
    local name=$1 root=$2
    shift 2
    # shellcheck disable=SC2086
    env -i PATH="$PATH" HOME=/nonexistent NO_COLOR=1 \
        ASAN_OPTIONS="${ASAN_OPTIONS:-}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-}" "${NODE_NCCL[@]}" \
        ${WRAP:-} "$PREFLIGHT" check --root "$root" --format yaml --verdict - "$@" \
        >"$T/$name.yaml" 2>"$T/$name.err"
    echo $? >"$T/$name.rc"
}

rc() { cat "$T/$1.rc"; }
st() { yq "$T/$1.yaml" "check('$2')['status']"; }
cd_() { yq "$T/$1.yaml" "','.join(codes('$2'))"; }

# expect_check NAME ID STATUS CODES
expect_check() {
    local got
    got="$(st "$1" "$2") [$(cd_ "$1" "$2")]"
    expect_eq "$1: $2 is $3 [$4]" "$got" "$3 [$4]"
}

# expect_healthy_rc NAME: 0, unless a check outside GPU/RDMA fails on this machine (then skip)
expect_healthy_rc() {
    local r others
    r=$(rc "$1")
    if [ "$r" = 0 ]; then ok "$1: exit code 0"; return; fi
    others=$(yq "$T/$1.yaml" "[c['id'] for c in d['checks'] if c['status'] == 'fail' and c['id'] not in $MINE]")
    if [ "$others" != "[]" ]; then
        skip "$1: exit code 0" "exit $r from checks outside GPU/RDMA: $others"
    else
        notok "$1: exit code 0" "exit $r; $(head -c 300 "$T/$1.err")"
    fi
}

expect_rc() { expect_eq "$1: exit code $2" "$(rc "$1")" "$2"; }

# ---- healthy fixtures
r=$(mat node-8gpu-ndr) || exit 1
pf ndr "$r"
expect_healthy_rc ndr
expect_check ndr gpu.devices pass ""
expect_check ndr rdma.devices pass ""
expect_check ndr rdma.ports pass ""
expect_check ndr rdma.gpudirect pass ""
# libibverbs reads the real /sys and /dev, never the root prefix: with no real device it
# must not judge the fixture's HCAs (skip, naming the prefix), unless a library lists devices
if [ "$(yq "$T/ndr.yaml" "check('rdma.verbs')['evidence'].get('devices') is None")" = True ]; then
    expect_eq "ndr: rdma.verbs skips under a root prefix it cannot see" \
        "$(yq "$T/ndr.yaml" "[check('rdma.verbs')['status'], 'root prefix $r' in check('rdma.verbs')['message']]")" \
        '["skip", true]'
fi
expect_eq "ndr: 8 GPUs in evidence" "$(yq "$T/ndr.yaml" "check('gpu.devices')['evidence']['count']")" 8
expect_eq "ndr: driver version" "$(yq "$T/ndr.yaml" "check('gpu.devices')['evidence']['driverVersion']")" 550.90.07
expect_eq "ndr: 8 HCAs usable" "$(yq "$T/ndr.yaml" "check('rdma.devices')['evidence']['usable']")" 8
expect_eq "ndr: mlx5_7 PCI address and NUMA node" \
    "$(yq "$T/ndr.yaml" "[(h['pciAddress'], h['numaNode']) for h in check('rdma.devices')['evidence']['hcas'] if h['name'] == 'mlx5_7']")" \
    '[["0000:dc:00.0", 1]]'
expect_eq "ndr: port rates" "$(yq "$T/ndr.yaml" "sorted(set(p['rateGbps'] for p in check('rdma.ports')['evidence']['ports']))")" "[400.0]"
expect_eq "ndr: environment lists the HCAs" "$(yq "$T/ndr.yaml" "len(d['environment']['hcas'])")" 8

r=$(mat node-roce) || exit 1
pf roce "$r"
expect_healthy_rc roce
expect_check roce rdma.ports pass ""
expect_check roce rdma.gpudirect pass ""
expect_eq "roce: RoCE v2 GID and netdev" \
    "$(yq "$T/roce.yaml" "[(p['roce']['gidIndex'], p['roce']['netdev']) for p in check('rdma.ports')['evidence']['ports']]")" \
    '[[3, "net1"], [3, "net2"]]'
expect_eq "roce: dma-buf path" "$(yq "$T/roce.yaml" "check('rdma.gpudirect')['evidence']['dmabuf']")" True

r=$(mat cpu-node) || exit 1
pf cpu "$r"
expect_healthy_rc cpu
expect_check cpu gpu.devices skip ""
expect_check cpu rdma.devices skip ""
expect_check cpu rdma.ports skip ""
expect_check cpu rdma.gpudirect skip ""
# the settings HPE documents for NCCL over Slingshot (HewlettPackard/shs-ccl-docs: NCCL_NET=OFI,
# FI_PROVIDER=cxi through aws-ofi-nccl) and a cxi device: no verbs device, but not TCP-only
mkdir -p "$r/sys/class/cxi/cxi0"
WRAP="env NCCL_NET=OFI FI_PROVIDER=cxi" pf cxi "$r"
expect_check cxi rdma.devices skip ""
expect_eq "cxi: rdma.devices says unknown, not TCP-only" \
    "$(yq "$T/cxi.yaml" "[('TCP-only' in check('rdma.devices')['message'].replace('not TCP-only', '')), [u['code'] for u in check('rdma.devices')['evidence']['unknown']]]")" \
    '[false, ["no-rdma-devices"]]'

# ---- broken fixtures
r=$(mat node-ports-bad) || exit 1
pf ports-bad "$r"
expect_rc ports-bad 4
expect_eq "ports-bad: verdict fail" "$(yq "$T/ports-bad.yaml" "d['verdict']")" fail
expect_check ports-bad rdma.ports fail "port-down,port-down,port-not-linkup,port-not-linkup,port-rate"
expect_eq "ports-bad: the 200 Gb/sec port is a warning naming mlx5_3" \
    "$(yq "$T/ports-bad.yaml" "[(f['status'], 'mlx5_3' in f['message']) for f in check('rdma.ports')['findings'] if f['code'] == 'port-rate']")" \
    '[["warn", true]]'
expect_eq "ports-bad: remedy filled from the docs" \
    "$(yq "$T/ports-bad.yaml" "all(f.get('remedy') for f in check('rdma.ports')['findings'])")" True

r=$(mat node-no-devinfiniband) || exit 1
pf nodev "$r"
expect_rc nodev 3
# the pod was given none of the node's HCAs: rdma_cm is not asked for them
expect_check nodev rdma.devices fail "uverbs-missing"

r=$(mat node-garbage) || exit 1
pf garbage "$r"
# every file of this tree is empty or not in its writer's form: nothing read proves a fault,
# so nothing fails (each check says what it could not read, below)
expect_rc garbage 0
# empty or unparsable files are unknown (evidence.unknown), never a finding: port files, a GID
# type not in the kernel's form, a Device Minor that is no number, an empty uverbsN/ibdev, a
# kernel release and a driver version line that do not parse
expect_check garbage rdma.ports pass ""
expect_check garbage gpu.devices pass ""
expect_check garbage rdma.devices pass ""
expect_check garbage rdma.gpudirect pass ""
while IFS='|' read -r chk code needle; do
    expect_eq "garbage: $chk: unknown $code names '$needle'" \
        "$(yq "$T/garbage.yaml" "any(u['code'] == '$code' and '$needle' in u['missing'] for u in check('$chk')['evidence']['unknown'])")" True
done <<'EOF'
rdma.ports|no-roce-gid|gid_attrs/types/0 holds "RoCE v9"
gpu.devices|gpu-count|Device Minor is "zero", not a number
rdma.devices|uverbs-missing|uverbs0/ibdev is empty or unreadable
rdma.gpudirect|no-gpudirect|kernel release "not-a-version" does not parse
EOF
expect_eq "garbage: the empty state file is named as unknown" \
    "$(yq "$T/garbage.yaml" "any(u['code'] == 'port-down' and '/sys/class/infiniband/mlx5_0/ports/1/state is empty' in u['missing'] for u in check('rdma.ports')['evidence']['unknown'])")" True

# ---- config expectations and policy
r=$(mat node-roce) || exit 1
printf 'expect:\n  hcas: 8\n' >"$T/hcas8.yaml"
pf roce-hcas8 "$r" --config "$T/hcas8.yaml"
expect_rc roce-hcas8 4
expect_check roce-hcas8 rdma.devices fail "hca-count"
printf 'expect:\n  minPortRateGbps: 400\n' >"$T/rate400.yaml"
pf roce-rate400 "$r" --config "$T/rate400.yaml"
expect_rc roce-rate400 4
expect_check roce-rate400 rdma.ports fail "port-rate,port-rate"

r=$(mat node-8gpu-ndr) || exit 1
printf 'expect:\n  gpusPerPod: 4\n' >"$T/gpus4.yaml"
pf ndr-gpus4 "$r" --config "$T/gpus4.yaml"
expect_rc ndr-gpus4 4
expect_check ndr-gpus4 gpu.devices fail "gpu-count"

r=$(mat cpu-node) || exit 1
printf 'expect:\n  rdma: required\n' >"$T/required.yaml"
pf cpu-required "$r" --config "$T/required.yaml"
expect_rc cpu-required 4
expect_check cpu-required rdma.devices fail "no-rdma-devices"

r=$(mat node-ports-bad) || exit 1
printf 'expect:\n  rdma: none\n' >"$T/none.yaml"
pf ports-bad-none "$r" --config "$T/none.yaml"
expect_check ports-bad-none rdma.ports skip ""
expect_check ports-bad-none rdma.devices skip ""

# rdma_cm missing is a warning: exit 0, 1 under --strict, 1 when the policy makes it fail
r=$(mat node-8gpu-ndr) || exit 1
rm "$r/dev/infiniband/rdma_cm"
pf nocm "$r"
expect_check nocm rdma.devices warn "rdma-cm-missing"
expect_healthy_rc nocm
pf nocm-strict "$r" --strict
expect_rc nocm-strict 3
printf 'policy:\n  findings:\n    rdma-cm-missing: fail\n' >"$T/cmfail.yaml"
pf nocm-policy "$r" --config "$T/cmfail.yaml"
expect_rc nocm-policy 3
expect_check nocm-policy rdma.devices fail "rdma-cm-missing"

# ---- a uverbs node with no driver behind it (a char major that /proc/devices does not list)
if need_root "uverbs with no driver (ENXIO)"; then
    major=$(awk '/^Character devices:/{c=1; next} /^Block devices:/{c=0} c{print $1}' /proc/devices |
        sort -n | awk 'BEGIN{for(m=234;m<=254;m++) free[m]=1} {delete free[$1]} END{for(m=234;m<=254;m++) if(m in free){print m; exit}}')
    if [ -z "$major" ]; then
        skip "uverbs with no driver (ENXIO)" "no free char major in 234-254"
    else
        r=$(mat node-8gpu-ndr) || exit 1
        rm "$r/dev/infiniband/uverbs3"
        mknod -m 0666 "$r/dev/infiniband/uverbs3" c "$major" 0
        pf enxio "$r"
        expect_rc enxio 4
        expect_check enxio rdma.devices fail "uverbs-unopenable"
        expect_eq "enxio: message names mlx5_3 and ENXIO" \
            "$(yq "$T/enxio.yaml" "[('mlx5_3' in f['message'], 'ENXIO' in f['message']) for f in check('rdma.devices')['findings']]")" \
            '[[true, true]]'
    fi
fi

# ---- a uverbs node the user may not open (EACCES), run as nobody
if need_root "uverbs not allowed (EACCES)"; then
    r=$(mat node-8gpu-ndr) || exit 1
    chmod 0600 "$r"/dev/infiniband/uverbs*
    WRAP="setpriv --reuid=65534 --regid=65534 --clear-groups" pf eacces "$r"
    expect_rc eacces 3
    expect_eq "eacces: every HCA unopenable with EACCES" \
        "$(yq "$T/eacces.yaml" "sorted(set((f['code'], 'EACCES' in f['message']) for f in check('rdma.devices')['findings']))")" \
        '[["uverbs-unopenable", true]]'
    expect_eq "eacces: 8 findings" "$(yq "$T/eacces.yaml" "len(check('rdma.devices')['findings'])")" 8
fi

# ---- memlock: a 64 KiB limit without CAP_IPC_LOCK
if need_root "memlock-low"; then
    NOLOCK="prlimit --memlock=65536:65536 setpriv --inh-caps=-ipc_lock --bounding-set=-ipc_lock"
    r=$(mat node-8gpu-ndr) || exit 1
    WRAP=$NOLOCK pf memlock "$r"
    expect_rc memlock 3
    expect_check memlock rdma.memlock fail "memlock-low"
    expect_eq "memlock: soft limit and capability in evidence" \
        "$(yq "$T/memlock.yaml" "[check('rdma.memlock')['evidence']['soft'], check('rdma.memlock')['evidence']['capIpcLock']]")" \
        '[65536, false]'
    r=$(mat cpu-node) || exit 1
    WRAP=$NOLOCK pf memlock-cpu "$r"
    expect_check memlock-cpu rdma.memlock pass "" # no RDMA device: nothing registers memory
    r=$(mat node-8gpu-ndr) || exit 1
    WRAP="prlimit --memlock=65536:65536" pf memlock-cap "$r"
    expect_check memlock-cap rdma.memlock pass ""
    expect_eq "memlock: IPC_LOCK dropped from the bounding set: no bounding-set note" \
        "$(yq "$T/memlock.yaml" "check('rdma.memlock')['evidence'].get('capIpcLockBounding')")" None
    # a non-root user with IPC_LOCK in the bounding set (as Kubernetes runs a non-root
    # container whose securityContext adds it): not effective, and the message says why
    WRAP="prlimit --memlock=65536:65536 setpriv --reuid=65534 --regid=65534 --clear-groups" \
        pf memlock-nonroot "$r"
    expect_check memlock-nonroot rdma.memlock fail "memlock-low"
    expect_eq "memlock: non-root with IPC_LOCK only in the bounding set: names the UID and runAsUser: 0" \
        "$(yq "$T/memlock-nonroot.yaml" "[check('rdma.memlock')['evidence'].get('capIpcLockBounding'), 'runs as UID 65534' in check('rdma.memlock')['findings'][0]['message'] and 'runAsUser: 0' in check('rdma.memlock')['findings'][0]['message']]")" \
        '[true, true]'
fi

# ---- only uverbsN is ever opened: never umadN or issmN
if command -v strace >/dev/null; then
    r=$(mat node-8gpu-ndr) || exit 1
    WRAP="strace -f -qq -e trace=open,openat -o $T/trace.txt" pf traced "$r"
    if grep -q 'uverbs0", O_RDWR' "$T/trace.txt"; then
        ok "trace: uverbs0 opened read-write"
        if grep -E '/dev/infiniband/(issm|umad)' "$T/trace.txt" >"$T/bad.txt"; then
            notok "trace: umadN and issmN never opened" "$(head -1 "$T/bad.txt")"
        else
            ok "trace: umadN and issmN never opened"
        fi
    else
        notok "trace: uverbs0 opened read-write" "not in the trace: $(head -c 300 "$T/traced.err")"
    fi
else
    skip "trace: umadN and issmN never opened" "strace not installed"
fi

# ---- AWS p4d whose EFA devices rdma-core's udev rules named rdmapXsY (fixtures/gen-p4d.sh):
# EFA by its driver, so a healthy pod passes (link layer Unknown, no rdma_cm, rdma.efa runs
# with the plugin where the loader looks); a PCIe link trained at x8 is named
r=$(mat node-p4d-efa) || exit 1
mkdir -p "$r/usr/lib/x86_64-linux-gnu" && : >"$r/usr/lib/x86_64-linux-gnu/libnccl-net.so"
pf p4d "$r"
MINE='["gpu.devices", "rdma.devices", "rdma.ports", "rdma.memlock", "rdma.gpudirect", "rdma.efa"]'
expect_healthy_rc p4d
expect_check p4d rdma.devices pass ""
expect_check p4d rdma.ports pass ""
expect_check p4d rdma.efa pass ""
expect_eq "p4d: rdmap16s27 is EFA by its driver" \
    "$(yq "$T/p4d.yaml" "[check('rdma.devices')['evidence']['hcas'][0][k] for k in ('name', 'provider', 'providerFrom')]")" \
    '["rdmap16s27", "efa", "driver efa"]'
echo 8 >"$r/sys/bus/pci/devices/0000:20:1b.0/current_link_width"
echo '1: DOWN' >"$r/sys/class/infiniband/rdmap144s27/ports/1/state"
pf p4d-bad "$r"
expect_check p4d-bad rdma.devices warn "pcie-link-degraded"
expect_check p4d-bad rdma.ports fail "port-down"
expect_rc p4d-bad 4
