#!/usr/bin/env bash
# gpu.health: each GPU's health through NVML, and the Xid lines of the kernel log.
#
# No GPU and no libnvidia-ml are on this machine. TEST DOUBLE, FOR ERROR HANDLING ONLY:
# tests/e2e/nccl-double/nvml.c exports the NVML calls pkg/dl/nvml.c loads (through
# PREFLIGHT_NVML_LIB) and answers them from tables built from published `nvidia-smi -q`
# captures (tests/e2e/nccl-double/nvml_profiles.h names each source), with faults added by
# DOUBLE_NVML_FAULTS. Passing says preflight reads and judges what NVML answers; the comparison
# with nvidia-smi on a real GPU is tests/gpu/device-check.sh's.
source "$(dirname "$0")/lib.sh"

D="$PREFLIGHT_SRC/tests/e2e/nccl-double"
CC=${CC:-cc}
if ! $CC -std=c11 -O1 -g -Wall -Wextra -Werror -shared -fPIC -o "$T/libnvml-double.so" "$D/nvml.c" \
    2>"$T/cc.err"; then
    notok "health: the NVML double builds" "$(head -c 600 "$T/cc.err")"
    exit 0
fi
ok "health: the NVML double builds"
# the double's functions against NVIDIA's prototypes: nvml.h from the nvidia-nvml-dev-cu12
# wheel, which scripts/nvidia-pypi.sh fetches (tests/run.sh sets NVML_INCLUDE to its folder)
NVML_INCLUDE=${NVML_INCLUDE:-$("$PREFLIGHT_SRC/scripts/nvidia-pypi.sh" nvml 2>/dev/null)}
if [ -f "$NVML_INCLUDE/nvml.h" ]; then
    # -Wno-enum-conversion: the double returns its own enum's values as nvmlReturn_t
    if $CC -std=c11 -O1 -Wall -Wextra -Werror -Wno-enum-conversion -shared -fPIC -DDOUBLE_NVML_H \
        -isystem "$NVML_INCLUDE" -o "$T/libnvml-double-h.so" "$D/nvml.c" 2>"$T/cch.err"; then
        ok "health: the NVML double's signatures are nvml.h's ($NVML_INCLUDE/nvml.h)"
    else
        notok "health: the NVML double's signatures are nvml.h's" "$(grep -m3 error "$T/cch.err")"
    fi
else
    skip "health: the NVML double's signatures against nvml.h" \
        "no $NVML_INCLUDE/nvml.h (scripts/nvidia-pypi.sh fetches it from PyPI's nvidia-nvml-dev-cu12)"
fi
mkdir -p "$T/root"

# gh NAME ROOT [VAR=VALUE...]: `preflight check` with the NVML double (its GPUs on no NVLink
# fabric, so that gpu.fabric is skipped); verdict in $T/NAME/v.yaml
gh() {
    local name=$1 root=$2
    shift 2
    mkdir -p "$T/$name"
    env -i PATH="$PATH" HOME=/nonexistent NO_COLOR=1 \
        ASAN_OPTIONS="${ASAN_OPTIONS:-}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-}" \
        PREFLIGHT_NVML_LIB="$T/libnvml-double.so" DOUBLE_FABRIC=0 "$@" \
        timeout 60 "$PREFLIGHT" check --root "$root" --format yaml \
        >"$T/$name/v.yaml" 2>"$T/$name/err"
    echo $? >"$T/$name/rc"
    if grep -qE 'AddressSanitizer|LeakSanitizer|runtime error:' "$T/$name/err"; then
        notok "health: $name: no sanitizer report" "$(grep -m3 -E 'Sanitizer|runtime error' "$T/$name/err")"
    fi
}
st() { yq "$T/$1/v.yaml" "check('gpu.health')['status'] + ' ' + ','.join(codes('gpu.health'))"; }
ev() { yq "$T/$1/v.yaml" "(lambda e: $2)(check('gpu.health').get('evidence') or {})"; }
unk() { yq "$T/$1/v.yaml" "' | '.join(u['code'] + ': ' + u['missing'] for u in (check('gpu.health').get('evidence') or {}).get('unknown') or [])"; }
fmsg() { yq "$T/$1/v.yaml" "' | '.join(f['message'] for f in check('gpu.health').get('findings') or [])"; }
contains() { # NAME HAYSTACK NEEDLE
    case "$2" in *"$3"*) ok "$1" ;; *) notok "$1" "'$3' not in: $(printf %s "$2" | head -c 400)" ;; esac
}

# ---- healthy captures: H100 SXM (gpud 535.183.01), A100 SXM4 (DCGM#149), GB200
gh h100 "$T/root" DOUBLE_NVML_PROFILE=h100-sxm
expect_eq "health: H100 SXM healthy: pass" "$(st h100)" "pass "
expect_eq "health: H100 SXM: 8 GPUs, 18 of 18 links, bus ids of the capture" \
    "$(ev h100 "[len(e['gpus']), e['gpus'][0]['busId'], e['gpus'][7]['busId'], e['gpus'][3]['nvlink']['active'], e['gpus'][3]['nvlink']['modelHas']]")" \
    '[8, "00000000:53:00.0", "00000000:CA:00.0", 18, 18]'
expect_eq "health: H100 SXM: versions, modes and counters as evidence" \
    "$(ev h100 "[e['driverVersion'], e['cudaVersion'], e['gpus'][0]['persistenceMode'], e['gpus'][0]['migMode'], e['gpus'][0]['eccErrors']['volatileUncorrected'], e['gpus'][0]['remappedRows']['pending'], e['gpus'][0]['clocksEventReasons']]")" \
    '["535.183.01", "12.2", "enabled", "disabled", 0, false, ["idle"]]'
expect_eq "health: H100 SXM: retired pages not supported (rows are remapped instead)" \
    "$(ev h100 "e['gpus'][0]['retiredPages']['pending']")" 'not supported'
expect_eq "health: H100 SXM: the inventory the gang compares" \
    "$(ev h100 "{k: e.get(k) for k in ['model', 'gpuCount', 'nvlinksActive', 'nvlinksSupported', 'nvlinksActiveMin', 'migEnabled', 'persistenceDisabled', 'driverVersion', 'cudaVersion']}")" \
    '{"model": "NVIDIA H100 80GB HBM3", "gpuCount": 8, "nvlinksActive": 144, "nvlinksSupported": 144, "nvlinksActiveMin": 18, "migEnabled": 0, "persistenceDisabled": 0, "driverVersion": "535.183.01", "cudaVersion": "12.2"}'
expect_eq "health: H100 SXM: no /dev/kmsg in the root: could not be read, not 'no Xid'" \
    "$(ev h100 "[e['xid']['state'][:40], 'events' in e['xid']]")" '["could not be read: /dev/kmsg is not in t", false]'
gh a100 "$T/root" DOUBLE_NVML_PROFILE=a100-sxm
expect_eq "health: A100 SXM4: pass, 12 links" \
    "$(st a100) $(ev a100 "e['nvlinksActiveMin']")" "pass  12"
gh gb200 "$T/root" DOUBLE_NVML_PROFILE=gb200
expect_eq "health: GB200: pass, 4 GPUs with 18 links" \
    "$(st gb200) $(ev gb200 "[e['gpuCount'], e['nvlinksActive'], e['nvlinksActiveMin']]")" "pass  [4, 72, 18]"

# ---- fault captures
gh brake "$T/root" DOUBLE_NVML_PROFILE=h100-sxm-powerbrake
expect_eq "health: H100 power brake (gpud 535.161.08): 8 warnings" \
    "$(st brake)" "warn $(printf 'clocks-slowdown,%.0s' 1 2 3 4 5 6 7)clocks-slowdown"
contains "health: power brake: the reason named" "$(fmsg brake)" \
    "GPU 0 (00000000:19:00.0, NVIDIA H100 80GB HBM3): clocks slowed now by HW slowdown, HW power brake slowdown (nvmlDeviceGetCurrentClocksEventReasons 0x88)"
expect_eq "health: a warning is not a failure: exit 0" "$(cat "$T/brake/rc")" 0
gh remap "$T/root" DOUBLE_NVML_PROFILE=h100-remap-pending
expect_eq "health: remapped rows pending (gpud#80): fail" "$(st remap)" \
    "fail ecc-uncorrected,row-remap-pending"
contains "health: remap pending: the counts and the reset" "$(fmsg remap)" \
    "GPU 2 (00000000:75:00.0, NVIDIA H100 80GB HBM3): a row remapping is pending (nvmlDeviceGetRemappedRows: isPending; 4 rows remapped for uncorrectable, 0 for correctable errors): it takes effect only after a GPU reset"
expect_eq "health: remap pending is class node: exit 4" "$(cat "$T/remap/rc")" 4
gh v100 "$T/root" DOUBLE_NVML_PROFILE=v100-nvlink-down
expect_eq "health: V100 links 3 and 5 inactive (azhpc-diagnostics#73): nvlink-inactive" \
    "$(st v100)" "fail nvlink-inactive"
contains "health: V100: the links named" "$(fmsg v100)" \
    "GPU 3 (00000000:09:00.0, Tesla V100-SXM2-32GB): 4 of 6 NVLinks active (inactive: 3, 5); the V100 SXM2 has 6"
expect_eq "health: V100: evidence lists the inactive links" \
    "$(ev v100 "e['gpus'][3]['nvlink']['inactiveLinks']")" '["3", "5"]'

# ---- the A100 PCIe of vllm-backport#62 with its Xid lines in the pod's /dev/kmsg (a regular
# file under --root holding the records as /dev/kmsg gives them, one a line)
mkdir -p "$T/kmsg/dev"
cat >"$T/kmsg/dev/kmsg" <<'EOF'
6,1001,5000000,-;nvidia-modeset: Loading NVIDIA Kernel Mode Setting Driver for UNIX platforms
4,1093,812345678,-;NVRM: Xid (PCI:0000:9c:00): 48, pid=1797828, name=python3, An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer at physical address 0x1234
4,1094,812345679,-;NVRM: Xid (PCI:0000:9c:00): 63, pid='<unknown>', name=<unknown>, Row Remapper: New row marked for remapping, reset gpu to activate.
4,1095,812345680,-;NVRM: Xid (PCI:0000:9c:00): 94, pid=1797828, name=python3, Contained: SM (0x1). RST: No, D-RST: No
4,1096,812345690,-;NVRM: Xid (PCI:0000:1b:00): 13, pid=55, name=python3, Graphics SM Warp Exception
4,1097,812345699,-;NVRM: Xid (PCI:0000:ee:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.
EOF
gh a100ecc "$T/kmsg" DOUBLE_NVML_PROFILE=a100-pcie-ecc
expect_eq "health: A100 PCIe with DBE and pending remap: fail and warn" "$(st a100ecc)" \
    "fail ecc-uncorrected,gpu-xid,row-remap-pending"
contains "health: Xid: GPU 2 named with each Xid once" "$(fmsg a100ecc)" \
    "GPU 2 (00000000:9C:00.0, NVIDIA A100 80GB PCIe), PCI 0000:9c:00: Xid 48 (double-bit ECC error), Xid 63 (row remapping recorded, a reset applies it), Xid 94 (contained uncorrectable ECC error) in the kernel log (/dev/kmsg)"
expect_eq "health: Xid: every line in the evidence, the application's Xid 13 and another pod's GPU too" \
    "$(ev a100ecc "[e['xid']['state'], [(x['xid'], x['gpu']) for x in e['xid']['events']]]")" \
    '["read", [[48, 2], [63, 2], [94, 2], [13, 0], [79, "not in the pod"]]]'
expect_eq "health: A100 PCIe: no NVLink expected (a bridge is optional)" \
    "$(ev a100ecc "[e['gpus'][0]['nvlink']['state'], 'modelHas' in e['gpus'][0]['nvlink']]")" \
    '["not supported", false]'

# ---- more faults on the healthy H100 table
gh faults "$T/root" DOUBLE_NVML_PROFILE=h100-sxm \
    "DOUBLE_NVML_FAULTS=1:remap-failed;4:pcie=8;6:clocks=0x40;7:retire-pending;0:mig"
expect_eq "health: remap failed, x8 link, thermal, pages pending: each found" "$(st faults)" \
    "fail clocks-slowdown,page-retirement-pending,pcie-width-degraded,row-remap-failed"
contains "health: pcie width named" "$(fmsg faults)" \
    "GPU 4 (00000000:97:00.0, NVIDIA H100 80GB HBM3): PCIe link x8, the GPU's maximum is x16"
expect_eq "health: a GPU in MIG mode is evidence here (the gang compares it)" \
    "$(ev faults "[e['gpus'][0]['migMode'], e['migEnabled']]")" '["enabled", 1]'

# ---- an older NVML (before R450/R535): the loader takes nvmlSystemGetCudaDriverVersion and
# nvmlDeviceGetCurrentClocksThrottleReasons, and remapped rows are unknown, not healthy
if $CC -std=c11 -O1 -Wall -Wextra -Werror -shared -fPIC -DDOUBLE_OLD_NVML \
    -o "$T/libnvml-old.so" "$D/nvml.c" 2>"$T/cco.err"; then
    gh old "$T/root" PREFLIGHT_NVML_LIB="$T/libnvml-old.so" DOUBLE_NVML_PROFILE=h100-sxm-powerbrake
    expect_eq "health: older NVML: the throttle-reasons name answers the slowdown" \
        "$(st old)" "$(st brake)"
    expect_eq "health: older NVML: the unversioned CUDA version call answers" \
        "$(ev old "e['cudaVersion']")" "12.2"
    expect_eq "health: older NVML: no nvmlDeviceGetRemappedRows: unknown, no finding" \
        "$(ev old "e['gpus'][0]['remappedRows']['state']")" \
        "unknown: this libnvidia-ml has no nvmlDeviceGetRemappedRows"
else
    notok "health: the older NVML double builds" "$(head -c 400 "$T/cco.err")"
fi

# ---- not supported and unknown answers: neither healthy nor failed
gh perm "$T/root" DOUBLE_NVML_PROFILE=h100-remap-pending "DOUBLE_NVML_FAULTS=all:err=remap:4"
expect_eq "health: remapped rows NO_PERMISSION on the GPU with a pending remap: no remap finding" \
    "$(st perm)" "fail ecc-uncorrected"
expect_eq "health: NO_PERMISSION: unknown in the evidence" \
    "$(ev perm "e['gpus'][2]['remappedRows']['state']")" \
    'unknown: nvmlDeviceGetRemappedRows: NVML_ERROR_NO_PERMISSION'
gh eccperm "$T/root" DOUBLE_NVML_PROFILE=h100-remap-pending "DOUBLE_NVML_FAULTS=all:err=ecc:999"
expect_eq "health: ECC counter unknown: no ecc-uncorrected, the remap still found" \
    "$(st eccperm) $(ev eccperm "e['gpus'][2]['eccErrors']['volatileUncorrected']")" \
    "fail row-remap-pending unknown: nvmlDeviceGetTotalEccErrors: NVML_ERROR_UNKNOWN"
gh nosup "$T/root" DOUBLE_NVML_GPUS=2
expect_eq "health: every call NOT_SUPPORTED: pass, all 'not supported'" \
    "$(st nosup) $(ev nosup "[e['gpus'][1]['eccErrors']['volatileUncorrected'], e['gpus'][1]['nvlink']['state'], e['nvlinksActive'], e.get('model')]")" \
    'pass  ["not supported", "not supported", 0, null]'

# ---- NVML missing: skipped without GPUs, health-unknown (an unknown: no finding, never a
# warning or a failure, docs/checks.md "Unknown") with them
gh nolib "$T/root" PREFLIGHT_NVML_LIB=/nonexistent/libnvidia-ml.so.1
expect_eq "health: no NVML, no GPU: skip" "$(st nolib)" "skip "
mkdir -p "$T/gpus/proc/driver/nvidia/gpus/0000:18:00.0" "$T/gpus/dev"
gh nonode "$T/gpus" PREFLIGHT_NVML_LIB=/nonexistent/libnvidia-ml.so.1
expect_eq "health: no NVML, the driver lists a GPU the pod has no node of: skip" "$(st nonode)" \
    "skip "
: >"$T/gpus/dev/nvidia0"
: >"$T/gpus/dev/nvidiactl"
gh nolibgpu "$T/gpus" PREFLIGHT_NVML_LIB=/nonexistent/libnvidia-ml.so.1
expect_eq "health: no NVML, /dev/nvidia0 in the pod: passes with no finding" "$(st nolibgpu)" \
    "pass "
contains "health: health-unknown: the reason" "$(unk nolibgpu)" \
    "the pod has 1 GPU but their health cannot be read: NVML not available: /nonexistent/libnvidia-ml.so.1 does not load"
gh noinit "$T/gpus" DOUBLE_NVML_FAIL=init
contains "health: nvmlInit fails: named" "$(unk noinit)" \
    "nvmlInit_v2: NVML_ERROR_DRIVER_NOT_LOADED (Driver Not Loaded)"
printf 'int not_nvml(void);\nint not_nvml(void) { return 0; }\n' >"$T/empty.c"
$CC -shared -fPIC -o "$T/libempty.so" "$T/empty.c"
gh nosym "$T/gpus" PREFLIGHT_NVML_LIB="$T/libempty.so"
contains "health: a library without nvmlInit_v2: the symbol named" "$(unk nosym)" \
    "symbol nvmlInit_v2 missing"

# ---- preflight explain knows every code
for code in ecc-uncorrected row-remap-pending row-remap-failed page-retirement-pending \
    nvlink-inactive clocks-slowdown pcie-width-degraded gpu-xid health-unknown; do
    if "$PREFLIGHT" explain "$code" >"$T/explain.out" 2>&1 && grep -q "gpu.health / $code" "$T/explain.out"; then
        ok "health: explain $code"
    else
        notok "health: explain $code" "$(head -c 300 "$T/explain.out")"
    fi
done

# ---- a gang of 4 pods in network namespaces (tests/e2e/pods.sh), every GPU an H100 SXM of the
# healthy capture but GPU 3 of trainer-2, which has 14 of its 18 NVLinks active: trainer-2 is
# named (nvlink-inactive, class node, rank 0's only culprit), the others pass gpu.health. Each
# pod's verdict carries nvlinksActive (144 on 8 healthy H100s, 140 on trainer-2), the count the
# comparison across pods (check `gang`) reads.
gang() {
    need_root "health: gang in network namespaces" || return 0
    local c
    for c in ip dnsmasq python3; do
        command -v "$c" >/dev/null || { skip "health: gang in network namespaces" "$c not installed"; return 0; }
    done
    source "$PREFLIGHT_SRC/tests/e2e/pods.sh"
    N=4 TO=90
    trap 'pods_cleanup; rm -rf "$T"' EXIT
    trap 'exit 1' INT TERM
    pods_setup "$N" "pfh$$" || { notok "health: set up $N pods"; return 0; }
    printf 'tcp: {messageBytes: 65536, iterations: 1}\n' >"$T/small.yaml"
    declare -gA RC
    SC=gang PORT=29881
    mkdir -p "$T/$SC"
    local i
    for ((i = 0; i < N; i++)); do
        local faults=""
        [ "$i" = 2 ] && faults="3:nvlink=14"
        pods_run_pod "$i" env PREFLIGHT_NVML_LIB="$T/libnvml-double.so" DOUBLE_FABRIC=0 \
            DOUBLE_NVML_PROFILE=h100-sxm DOUBLE_NVML_FAULTS="$faults" \
            PREFLIGHT_CUDA_LIB=/nonexistent/libcuda.so.1
    done
    pods_wait_all
    pods_expect gpu.health 2 'codes("gpu.health") == ["nvlink-inactive"]' \
        '"GPU 3 (00000000:86:00.0, NVIDIA H100 80GB HBM3): 14 of 18 NVLinks active (inactive: 14, 15, 16, 17)" in finding("gpu.health", "nvlink-inactive")' \
        'check("gpu.health")["evidence"]["nvlinksActive"] == 140' \
        'check("gpu.health")["evidence"]["nvlinksActiveMin"] == 14' \
        'd["failureClass"] == "node"'
    for i in 0 1 3; do
        pods_expect gpu.health "$i" 'check("gpu.health")["status"] == "pass"' \
            'check("gpu.health")["evidence"]["nvlinksActive"] == 144'
    done
    pods_expect gpu.health 0 'sorted(set(culprits())) == [2]'
    # where the comparison across pods (check `gang`, pkg/fleet/gang.c) is built in, it reads
    # nvlinksActive and names trainer-2 alone as the outlier (140 links against 144)
    pods_expect gang 0 'check("gang") == {} or ("gang-nvlink" in codes("gang") and "trainer-2" in finding("gang", "gang-nvlink") and others(finding("gang", "gang-nvlink"), 2) == [])'
    expect_eq "health: gang: trainer-2 exits 4 (node)" "${RC[2]}" 4
    pods_cleanup
    trap 'rm -rf "$T"' EXIT
}
gang
