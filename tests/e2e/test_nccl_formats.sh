#!/usr/bin/env bash
# `preflight log` against NCCL's own format strings: every INFO line the reader interprets, as
# NVIDIA/nccl's source writes it at each release tag v2.3.7-1..v2.30.7-1, and aws-ofi-nccl's
# NET/OFI provider lines v1.0.0..v1.21.1, and every WARN format (NCCL's WARN, aws-ofi-nccl's
# NCCL_OFI_WARN) the reader gives a kind (tests/nccl-formats/formats.tsv, made by extract.py),
# rendered with realistic values under NCCL's prefix (WARN: its blank line, file:line, 2.26+'s
# timestamp) and under Open MPI, kubectl --prefix, torchrun prefixes and colour codes
# (tests/nccl-formats/render.py); then the meanings the source gives some lines: 2.21+'s
# "collnet channels" is the ring count, NVLS Head lines, 2.5's NCCL_IB_DISABLE with NET/Socket,
# nNodes before host names, MNNVL / RAS / GIN / RMA / Bootstrap timings lines that name no
# transport, WARN kinds of real lines.
source "$(dirname "$0")/lib.sh"

R="$PREFLIGHT_SRC/tests/nccl-formats/render.py"
plog() {
    local name=$1
    shift
    env -i PATH="$PATH" HOME=/nonexistent NO_COLOR=1 \
        ASAN_OPTIONS="${ASAN_OPTIONS:-}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-}" \
        "$PREFLIGHT" log --format yaml --verdict - "$@" >"$T/$name.yaml" 2>"$T/$name.err"
    echo $? >"$T/$name.rc"
}
q() { yq "$T/$1.yaml" "(lambda c, j: $2)(check('nccl.log'), (check('nccl.log').get('evidence') or {}).get('job') or {})"; }

mkdir -p "$T/fmt"
check "formats: render.py renders every row of formats.tsv" python3 "$R" logs "$T/fmt"
for f in "$T"/fmt/*.log; do
    plog "fmt/$(basename "$f" .log)" "$f"
done
check "formats: every rendered line of every tag is read as NCCL's source means" \
    python3 "$R" check "$T/fmt"

# 2.21 to 2.30 print comm->nChannels as the CollNet channel count (src/init.cc): no CollNet
cat >"$T/collnet.log" <<'L'
node-a:11:11 [0] NCCL INFO NCCL version 2.27.7+cuda12.9
node-a:11:11 [0] NCCL INFO comm 0x5610 rank 0 nRanks 16 nNodes 2 localRanks 8 localRank 0 MNNVL 0
node-a:11:11 [0] NCCL INFO 16 coll channels, 16 collnet channels, 0 nvls channels, 32 p2p channels, 32 p2p channels per peer
node-a:11:11 [0] NCCL INFO Channel 00/0 : 0[0] -> 8[0] [send] via NET/IB/0/GDRDMA
L
plog collnet "$T/collnet.log"
expect_eq "formats: 2.27's 'collnet channels' is no CollNet" "$(q collnet "[j['collnet'], c['status']]")" '[false, "pass"]'
sed 's/2\.27\.7/2.20.5/' "$T/collnet.log" >"$T/collnet220.log"
plog collnet220 "$T/collnet220.log"
expect_eq "formats: 2.20's 'collnet channels' is CollNet's own count" "$(q collnet220 "j['collnet']")" True

# NVLS Head lines (src/graph/connect.cc, 2.18+): NVLS trees were set up
cat >"$T/nvls.log" <<'L'
node-a:11:11 [0] NCCL INFO NCCL version 2.21.5+cuda12.4
node-a:11:11 [0] NCCL INFO NVLS Head  0:  0  8
node-a:11:11 [0] NCCL INFO NVLS Head  1:  1  9
L
plog nvls "$T/nvls.log"
expect_eq "formats: NVLS Head lines mean NVLS" "$(q nvls "j['nvls']")" True

# 2.5: NCCL_IB_DISABLE=1 and NET/Socket, no "Using network" line, two hosts: sockets between nodes
cat >"$T/ibdisable.log" <<'L'
node-a:11:11 [0] NCCL INFO NCCL version 2.5.6+cuda10.1
node-a:11:11 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.
node-a:11:11 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.5<0>
node-b:12:12 [0] NCCL INFO NCCL version 2.5.6+cuda10.1
node-b:12:12 [0] NCCL INFO NCCL_IB_DISABLE set by environment to 1.
node-b:12:12 [0] NCCL INFO NET/Socket : Using [0]eth0:10.0.0.6<0>
L
plog ibdisable "$T/ibdisable.log"
# a socket job, and nothing in the log says RDMA was meant: socket-fallback is unknown, not a
# warning, and the message says so
expect_eq "formats: 2.5 NCCL_IB_DISABLE + NET/Socket on two hosts is a socket job, socket-fallback unknown on each host" \
    "$(q ibdisable "[c['status'], sorted(set(h['transport'] for h in c['evidence']['hosts'])), [u['code'] for u in c['evidence']['unknown']], 'unknown socket-fallback: ' in c['message']]")" \
    '["pass", ["Socket"], ["socket-fallback", "socket-fallback"], true]'

# nNodes 1 outranks host names: pods with their own host names on one node, NET/Socket channels
# (P2P and SHM off) are no fallback
cat >"$T/onenode.log" <<'L'
pod-a:11:11 [0] NCCL INFO NCCL version 2.23.4+cuda12.6
pod-a:11:11 [0] NCCL INFO comm 0x5610 rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0
pod-a:11:11 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] [send] via NET/Socket/0
pod-b:12:12 [1] NCCL INFO NCCL version 2.23.4+cuda12.6
pod-b:12:12 [1] NCCL INFO comm 0x5620 rank 1 nRanks 2 nNodes 1 localRanks 2 localRank 1 MNNVL 0
pod-b:12:12 [1] NCCL INFO Channel 00/0 : 0[0] -> 1[1] [receive] via NET/Socket/0
L
plog onenode "$T/onenode.log"
expect_eq "formats: nNodes 1 is one node whatever the host names: no socket-fallback" \
    "$(q onenode "[c['status'], j['multiNode'], codes('nccl.log')]")" '["pass", false, []]'

# NCCL's node identity is hostname + boot_id, or NCCL_HOSTID when set (src/misc/utils.cc):
# pods with their own host names and one NCCL_HOSTID are one node to NCCL
cat >"$T/hostid.log" <<'L'
pod-a:11:11 [0] NCCL INFO NCCL version 2.18.5+cuda12.2
pod-a:11:11 [0] NCCL INFO NCCL_HOSTID set by environment to node-7
pod-a:11:11 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] [send] via NET/Socket/0
pod-b:12:12 [1] NCCL INFO NCCL version 2.18.5+cuda12.2
pod-b:12:12 [1] NCCL INFO NCCL_HOSTID set by environment to node-7
pod-b:12:12 [1] NCCL INFO Channel 00/0 : 0[0] -> 1[1] [receive] via NET/Socket/0
L
plog hostid "$T/hostid.log"
expect_eq "formats: one NCCL_HOSTID for every process is one node: no socket-fallback" \
    "$(q hostid "[c['status'], j['multiNode'], c['evidence']['processes'][0].get('ncclHostId')]")" '["pass", false, "node-7"]'
sed '0,/node-7/! s/node-7/node-8/' "$T/hostid.log" >"$T/hostid2.log"
plog hostid2 "$T/hostid2.log"
expect_eq "formats: two NCCL_HOSTIDs are two nodes: sockets between them, socket-fallback unknown" \
    "$(q hostid2 "[c['status'], j['multiNode'], [u['code'] for u in c['evidence']['unknown']]]")" '["pass", true, ["socket-fallback", "socket-fallback"]]'

# newer lines that name no transport: MNNVL, RAS, GIN, RMA, Bootstrap timings, P2P/MNNVL
cat >"$T/newer.log" <<'L'
node-a:11:11 [0] NCCL INFO NCCL version 2.30.7+cuda13.0
node-a:11:11 [0] NCCL INFO MNNVL busId 0x1b000 fabric UUID 1.2 cliqueId 0x7 state 3 healthMask 0x0
node-a:11:11 [0] NCCL INFO RAS client listening socket at ::1<28028>
node-a:11:11 [0] NCCL INFO GIN/Plugin: Assigned plugin GIN_IB type 1 to comm
node-a:11:11 [0] NCCL INFO Assigned RMA plugin rma_ib to comm
node-a:11:11 [0] NCCL INFO Bootstrap timings total 0.001 (create 0.000, send 0.000, recv 0.000, ring 0.000, delay 0.000)
node-a:11:11 [0] NCCL INFO Channel 00/0 : 0[0] -> 4[0] via P2P/MNNVL
node-b:12:12 [0] NCCL INFO NCCL version 2.30.7+cuda13.0
node-b:12:12 [0] NCCL INFO Channel 00/0 : 4[0] -> 0[0] via P2P/MNNVL
L
plog newer "$T/newer.log"
expect_eq "formats: MNNVL, RAS, GIN, RMA, Bootstrap timings name no transport" \
    "$(q newer "[c['status'], j['transports'], codes('nccl.log')]")" '["pass", [], []]'

# a bare version line behind a colour code or a launcher prefix is its process's version
printf '\033[1;32m[1,0]<stdout>:node-a:11:11 [0] NCCL INFO cudaDriverVersion 12040\033[0m\n\033[1;32m[1,0]<stdout>:NCCL version 2.19.3+cuda12.3\033[0m\n' >"$T/bare.log"
plog bare "$T/bare.log"
expect_eq "formats: bare version behind colour and Open MPI prefix" \
    "$(q bare "c['evidence']['processes'][0].get('ncclVersion')")" '2.19.3'


# WARN lines whose format names their kind (NVIDIA/nccl src/include/checks.h SYSCHECK's "Call to
# NAME failed", src/include/socket.h's "Net : ...", src/include/shm.h's shm_open, transport/p2p.cc's
# CUDA IPC handle), under 2.26+'s default "[%F %T] " WARN timestamp and 2.30.7's "(func)"
cat >"$T/warns.log" <<'L'
node-a:11:11 [0] NCCL INFO NCCL version 2.30.7+cuda13.0

[2026-11-26 10:00:01] node-a:11:12 [0] misc/socket.cc:120 (ncclSocketPoll) NCCL WARN Call to poll failed : Bad file descriptor
node-b:12:12 [0] NCCL INFO NCCL version 2.10.3+cuda11.4

node-b:12:12 [0] include/socket.h:420 NCCL WARN Net : No interface found in the same subnet as remote address 10.0.0.6<43521>

node-b:12:12 [0] include/shm.h:32 NCCL WARN shm_open failed to open nccl-shm-recv-3 : No such file or directory
node-c:13:13 [0] NCCL INFO NCCL version 2.8.4+cuda11.2

node-c:13:13 [0] transport/p2p.cc:231 NCCL WARN failed to open CUDA IPC handle : 201 invalid device context
node-c:13:13 [0] misc/ibvwrap.cc:262 NCCL WARN Call to ibv_modify_qp failed with error No such device
L
plog warns "$T/warns.log"
expect_eq "formats: WARN kinds of SYSCHECK, Net :, shm_open, CUDA IPC and ibv_* failures" \
    "$(q warns "[h.get('warningsByKind') for h in c['evidence']['hosts']]")" \
    '[{"system-error": 1}, {"system-error": 1, "shm": 1}, {"ibverbs": 1, "cuda": 1}]'
expect_eq "formats: a timestamped 2.30 WARN keeps its process and file:line (func)" \
    "$(q warns "c['evidence']['processes'][0].get('warnings')")" \
    '["misc/socket.cc:120 (ncclSocketPoll) Call to poll failed : Bad file descriptor"]'
