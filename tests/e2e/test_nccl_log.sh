#!/usr/bin/env bash
# `preflight log FILE...` on NCCL_DEBUG=INFO logs shaped like NCCL's own output
# (tests/fixtures/nccl-logs/: InfiniBand with GDRDMA, RoCE, a Socket fallback among IB ranks,
# Socket only, aws-ofi-nccl/Libfabric, the NET-plugin lines of newer NCCL, a kubectl --prefix
# log of two pods mixed with the framework's output, WARN lines with NCCL's timestamp, a
# version mismatch, a bare VERSION-level line, a log with no NCCL lines): the check nccl.log,
# its findings, its evidence per process, the exit code; several files, stdin, and
# expect.transport from the config.
source "$(dirname "$0")/lib.sh"

L="$FIX/nccl-logs"

# plog NAME [ARGS...]: `preflight log` with YAML on stdout into $T/NAME.yaml, exit code $T/NAME.rc
plog() {
    local name=$1
    shift
    env -i PATH="$PATH" HOME=/nonexistent NO_COLOR=1 \
        ASAN_OPTIONS="${ASAN_OPTIONS:-}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-}" \
        "$PREFLIGHT" log --format yaml --verdict - "$@" >"$T/$name.yaml" 2>"$T/$name.err"
    echo $? >"$T/$name.rc"
}
# q NAME EXPR: a Python expression over the verdict `d`, with c = check('nccl.log') and
# p = its evidence's processes
q() { yq "$T/$1.yaml" "(lambda c, p: $2)(check('nccl.log'), (check('nccl.log').get('evidence') or {}).get('processes') or [])"; }
# expect_log NAME STATUS CODES RC
expect_log() {
    expect_eq "log: $1: nccl.log is $2 [$3], exit $4" \
        "$(q "$1" "c['status'] + ' [' + ','.join(codes('nccl.log')) + ']'") $(cat "$T/$1.rc")" "$2 [$3] $4"
}

plog ib "$L/ib-gdr.log"
expect_log ib pass "" 0
expect_eq "log: ib: two processes, IB, GPUDirect RDMA, 4 HCAs each" \
    "$(q ib "[(x['host'], x['pid'], x['network'], x['gpuDirectRdma'], len(x['hcas'])) for x in p]")" \
    '[["node-a", 2101, "IB", true, 4], ["node-b", 3307, "IB", true, 4]]'
expect_eq "log: ib: version, CUDA, bootstrap interface" \
    "$(q ib "[p[0]['ncclVersion'], p[0]['cuda'], p[0]['bootstrap'], d['environment']['ncclVersion']]")" \
    '["2.21.5", "12.4", "eth0:10.0.1.11", "2.21.5"]'
expect_eq "log: ib: NET channels counted, GDRDMA among them" "$(q ib "p[0]['netChannels']")" "2 (2 GDRDMA)"

plog roce "$L/roce.log"
expect_log roce pass "" 0
expect_eq "log: roce: RoCE ports and OOB interface" \
    "$(q roce "[p[0]['hcas'], p[0]['interfaces'], p[0]['gpuDirectRdma']]")" \
    '[["mlx5_2:1/RoCE", "mlx5_3:1/RoCE"], ["net1:192.168.10.21"], true]'

plog fallback "$L/socket-fallback.log"
expect_log fallback fail socket-fallback 4
expect_eq "log: fallback: the Socket rank is named, with its interface and why it fails" \
    "$(q fallback "c['findings'][0]['message']")" \
    "trainer-1:81 used NET/Socket (eth0:10.244.2.7) for inter-node traffic: other ranks of this job use RDMA"
expect_eq "log: fallback: networks per process" "$(q fallback "[x['network'] for x in p]")" '["IB", "Socket"]'

# sockets everywhere and nothing that says RDMA was meant (NET/IB's "No device found" is what
# net_ib.cc prints on every host without HCAs): unknown, not socket-fallback
plog sockonly "$L/socket-only.log"
expect_log sockonly pass "" 0
expect_eq "log: socket only: unknown socket-fallback, citing NET/IB's 'No device found'" \
    "$(q sockonly "[u['code'] for u in c['evidence']['unknown']] + [any('NET/IB found no device; whether RDMA was meant' in u['missing'] for u in c['evidence']['unknown'])]")" \
    '["socket-fallback", true]'
printf 'expect: {transport: IB}\n' >"$T/ib.yaml"
plog sockexpect --config "$T/ib.yaml" "$L/socket-only.log"
expect_log sockexpect fail socket-fallback 4
expect_eq "log: socket only, expect.transport IB: says so" \
    "$(q sockexpect "c['findings'][0]['message'].endswith('expect.transport says RDMA')")" True

plog plugin "$L/plugin-assigned.log"
expect_log plugin pass "" 0
expect_eq "log: newer NCCL's 'Assigned NET plugin Socket to comm' names the network" \
    "$(q plugin "p[0]['network']")" "Socket"

plog ofi "$L/aws-ofi.log"
expect_log ofi pass "" 0
expect_eq "log: aws-ofi-nccl: Libfabric, provider efa, GDRDMA" \
    "$(q ofi "[p[0]['network'], p[0]['ofiProvider'], p[0]['gpuDirectRdma']]")" '["Libfabric", "efa", true]'

plog kubectl "$L/kubectl-prefix.log"
expect_log kubectl warn no-gdr 0
expect_eq "log: kubectl --prefix: pods, devices and GDR per process; other lines ignored" \
    "$(q kubectl "[(x['pod'], x['cudaDevs'], x['gpuDirectRdma']) for x in p]")" \
    '[["llm-worker-0", ["0", "1"], true], ["llm-worker-1", ["0", "1"], false]]'
expect_eq "log: kubectl --prefix: the no-gdr finding names the pod" \
    "$(q kubectl "c['findings'][0]['message']")" \
    "llm-worker-1:43 (pod llm-worker-1) used IB without GPUDirect RDMA (0 of 2 network channels via GDRDMA)"
expect_eq "log: kubectl --prefix: a --timestamps line still counts" "$(q kubectl "p[1]['network']")" "IB"
expect_eq "log: kubectl --prefix: NCCL lines and all lines" \
    "$(q kubectl "[c['evidence']['ncclLines'], c['evidence']['lines']]")" "[13, 15]"

plog warn "$L/warn.log"
expect_log warn warn nccl-warn 0
expect_eq "log: WARN lines kept as file:line message, timestamp or not" \
    "$(q warn "[w.split(' NET/IB')[0].split(' [Proxy')[0] for w in p[0]['warnings']]")" \
    '["transport/net_ib.cc:1696", "proxy.cc:1520"]'
expect_eq "log: WARN: the count is in the finding" "$(q warn "'logged 2 NCCL WARN' in c['findings'][0]['message']")" True

plog mismatch "$L/version-mismatch.log"
expect_log mismatch fail nccl-version-mismatch,nccl-warn 3
expect_eq "log: version mismatch: both versions and who runs them" \
    "$(q mismatch "[f['message'] for f in c['findings'] if f['code'] == 'nccl-version-mismatch'][0]")" \
    "ranks run different NCCL versions (2.18.3, 2.21.5): ws-0:100 2.21.5, ws-1:200 2.18.3"
expect_eq "log: version mismatch: environment lists both, no single ncclVersion" \
    "$(q mismatch "[sorted(d['environment']['ncclVersions']), 'ncclVersion' in d['environment']]")" \
    '[["2.18.3", "2.21.5"], false]'

# IB between two hosts, and no channel line and no "GPU Direct RDMA" line (a subsystem filter
# without INIT): GPUDirect RDMA is unknown, not no-gdr
cat >"$T/ib-nochan.log" <<'L'
node-a:11:11 [0] NCCL INFO NCCL version 2.21.5+cuda12.4
node-a:11:11 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.1.11<0>
node-a:11:11 [0] NCCL INFO Using network IB
node-b:12:12 [0] NCCL INFO NCCL version 2.21.5+cuda12.4
node-b:12:12 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.1.12<0>
node-b:12:12 [0] NCCL INFO Using network IB
L
plog ibnochan "$T/ib-nochan.log"
expect_eq "log: IB without channel lines: no finding, no-gdr unknown on each host" \
    "$(q ibnochan "[codes('nccl.log'), sorted(u['code'] for u in c['evidence'].get('unknown') or []), all('logged no channel line' in u['missing'] for u in c['evidence'].get('unknown') or [])]")" \
    '[[], ["no-gdr", "no-gdr"], true]'

plog bare "$L/version-bare.log"
expect_log bare pass "" 0
expect_eq "log: a bare VERSION-level line gives the version" "$(q bare "d['environment']['ncclVersion']")" "2.21.5"

plog none "$L/not-nccl.log"
# nothing NCCL wrote: unknown, exit 6 (neither 0, a pass, nor a class of failure)
expect_log none skip "" 6
expect_eq "log: no NCCL lines: unknown names what is missing" \
    "$(q none "[u['code'] for u in c['evidence']['unknown']] + ['no NCCL line found' in c['evidence']['unknown'][0]['missing']]")" \
    '["socket-fallback", true]'
env -i PATH="$PATH" HOME=/nonexistent NO_COLOR=1 ASAN_OPTIONS="${ASAN_OPTIONS:-}" \
    UBSAN_OPTIONS="${UBSAN_OPTIONS:-}" "$PREFLIGHT" log "$L/not-nccl.log" >"$T/none.txt" 2>&1
expect_eq "log: no NCCL lines: the human form says UNKNOWN, never PASS, exit 6" \
    "$? $(head -1 "$T/none.txt" | cut -d: -f1)" "6 preflight UNKNOWN"
expect_eq "log: no NCCL lines: the reason asks for NCCL_DEBUG=INFO" \
    "$(q none "'NCCL_DEBUG=INFO' in c['message']")" True

# several files (one per rank, as `kubectl logs` of each pod) and stdin
plog files "$L/ib-gdr.log" "$L/version-bare.log" "$L/socket-fallback.log"
expect_log files fail socket-fallback 4
expect_eq "log: three files: listed in the evidence, processes of all of them" \
    "$(q files "[len(c['evidence']['files']), len([x for x in p if x.get('pid')])]")" "[3, 4]"
env -i PATH="$PATH" NO_COLOR=1 ASAN_OPTIONS="${ASAN_OPTIONS:-}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-}" \
    "$PREFLIGHT" log --format yaml --verdict - - <"$L/aws-ofi.log" >"$T/stdin.yaml" 2>"$T/stdin.err"
echo $? >"$T/stdin.rc"
expect_log stdin pass "" 0
plog missing "$T/does-not-exist.log"
expect_eq "log: a missing file is a usage error (exit 2)" "$(cat "$T/missing.rc")" 2
check "log: a missing file: the message names it" grep -q "does-not-exist.log" "$T/missing.err"
plog nofile
expect_eq "log: no file is a usage error (exit 2)" "$(cat "$T/nofile.rc")" 2

# launcher decorations (made up, one line of each): torchrun [defaultN]: and [rankN]:, ANSI
# colours, CRLF, srun -l "N: ", docker compose "name_1  | ", syslog, Ray "(pid=, ip=)" with
# " [repeated Nx across cluster]", an ISO timestamp; the merged-NIC list form
plog launch "$L/launchers.log"
expect_log launch fail nccl-warn,no-gdr,socket-fallback 4 # node class
expect_eq "log: launchers: hosts and their networks through every prefix" \
    "$(q launch "[(h['name'], h['network'], h['transportClass']) for h in c['evidence']['hosts']]")" \
    '[["tr-0", "IB", "rdma"], ["tr-1", "IB", "rdma"], ["tr-2", "IBext_v8", "rdma"], ["tr-3", "AWS Libfabric", "socket"]]'
expect_eq "log: launchers: merged NICs give each port and link layer" \
    "$(q launch "c['evidence']['hosts'][0]['hcas']")" '["mlx5_2:1/RoCE", "mlx5_3:1/RoCE", "mlx5_4:1/IB"]'
expect_eq "log: launchers: pods from compose and Ray, GDR disabled per HCA" \
    "$(q launch "[p[3].get('pod'), p[4].get('pod'), c['evidence']['hosts'][2]['gdrDisabledHcas']]")" \
    '["worker_1", "10.0.0.9", ["mlx5_0"]]'
expect_eq "log: launchers: WARN kinds" "$(q launch "c['evidence']['job']['warningsByKind']")" \
    '{"connection-refused": 1}'
env -i PATH="$PATH" NO_COLOR=1 ASAN_OPTIONS="${ASAN_OPTIONS:-}" UBSAN_OPTIONS="${UBSAN_OPTIONS:-}" \
    "$PREFLIGHT" log --format human "$L/launchers.log" >"$T/human.txt" 2>&1
check "log: human summary: a table row per host, then the findings" \
    grep -q "^tr-2 .* IBext_v8 .* rdma .* no " "$T/human.txt"
check "log: human summary: the job line" grep -q "^inter-node: IB, IBext_v8, AWS Libfabric;" "$T/human.txt"

# What a WARN proves follows from who printed it (NVIDIA/nccl src/transport/net_ib.cc
# ncclIbTest, and the ib_plugin.c of the RDMA/SHARP plugin in NVIDIA/nccl#1405): a completion
# error of the IB transport ran on a connected IB queue pair, so its process used IB, never
# Socket, even with no network line; read beside another IB host of a real log, no host fell
# back. A WARN of the socket transport (net_socket.cc) makes no Socket process either.
plog ibwarn "$L/real/nccl-1405-ib-plugin-completion-warn.log" "$L/real/nccl-1412-ib-no-gdr-2.22.log"
expect_eq "log: an IB completion WARN is IB, not a socket fallback" \
    "$(q ibwarn "[sorted(set(codes('nccl.log'))), [(x['name'], x['transport']) for x in c['evidence']['hosts']]]")" \
    '[["nccl-warn", "no-gdr"], [["kp-ddp-worker-0", "IB"], ["swat1-04", "IB"]]]'
cat >"$T/sockwarn.log" <<'LOG'
node-a:11:11 [0] NCCL INFO NCCL version 2.21.5+cuda12.4
node-a:11:11 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA

node-b:12:60 [0] transport/net_socket.cc:470 NCCL WARN NET/Socket : message truncated : receiving 1024 bytes instead of 32
node-b:12:12 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [send] via NET/IB/0/GDRDMA

node-c:13:60 [0] misc/socket.cc:50 NCCL WARN socketProgress: Connection closed by remote peer node-a<45678>
LOG
plog sockwarn "$T/sockwarn.log"
expect_eq "log: a socket-layer WARN makes no Socket host (node-c: unknown, not socket-fallback)" \
    "$(q sockwarn "[sorted(set(codes('nccl.log'))), [(x['name'], x['transport']) for x in c['evidence']['hosts']]]")" \
    '[["nccl-warn"], [["node-a", "IB"], ["node-b", "IB"], ["node-c", "none"]]]'

# Lines NCCL wrote stay NCCL's whatever the poster did around them: prose glued to the
# host:pid:tid prefix (NCCL's <host> holds no ':', src/debug.cc), a prefix cut down to its
# pid:tid or [dev], an editor's line numbers before a bare version line
cat >"$T/pasted.log" <<'LOG'
The error is:node-a:11:11 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.5<0>
see "node-a:11:11 [0] NCCL INFO NCCL version 2.21.5+cuda12.4
12  NCCL version 2.20.5+cuda12.4
13 node-b:12:12 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.6<0>
22:22 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [send] via NET/IB/0/GDRDMA
and some prose mentioning NCCL INFO is not a line of NCCL
LOG
plog pasted "$T/pasted.log"
expect_eq "log: glued prose, a cut prefix, a numbered version line: every NCCL line read" \
    "$(q pasted "[c['evidence']['ncclLines'], [x['name'] for x in c['evidence']['hosts']], sorted(d['environment']['ncclVersions'])]")" \
    '[5, ["node-a", "node-b", "pasted.log"], ["2.20.5", "2.21.5"]]'

# Real samples of what a finding must not infer from absent evidence (sources in
# real/SOURCES.md). A job on InfiniBand whose only net line is the IB transport's completion
# WARN (transport/net_ib.cc, wrapped by the page it was pasted on), read beside another IB host:
# IB, never a socket fallback.
plog realibwarn "$L/real/ml-engineering-ib-completion-warn-wrapped.log" "$L/real/nccl-1412-ib-no-gdr-2.22.log"
expect_eq "log: real IB completion WARN (net_ib.cc:1296) beside an IB host: IB, no socket-fallback" \
    "$(q realibwarn "['socket-fallback' in codes('nccl.log'), [(x['name'], x['transport']) for x in c['evidence']['hosts']], [x.get('ibCompletionWarn') for x in p if x.get('host') == 'node-2']]")" \
    '[false, [["node-2", "IB"], ["swat1-04", "IB"]], [true]]'
# Two hosts of a real IB job where only one logged the completion WARN (an RDMA/SHARP plugin's
# ib_plugin.c, format "NET/IB : Got completion"): that host is IB, the other is unknown, and
# nobody fell back to Socket
plog real252 "$L/real/nccl-tests-252-ib-plugin-completion-two-hosts.log"
expect_eq "log: real two-host IB completion WARN: kolyoz2 IB, kolyoz1 none, no socket-fallback" \
    "$(q real252 "[sorted(set(codes('nccl.log'))), [(x['name'], x['transport']) for x in c['evidence']['hosts']], 'socket-fallback' in [u['code'] for u in c['evidence'].get('unknown') or []]]")" \
    '[["nccl-warn"], [["kolyoz1", "none"], ["kolyoz2", "IB"]], false]'
# A RoCE job's socket-layer WARN (misc/socket.cc "Net : Connection closed by remote peer", the
# proxy's connection) makes no Socket process, and the poster's mangled prefixes
# ("host :22337:...", "host22337:22400") are not read as other processes
plog real914 "$L/real/nccl-914-roce-socket-warn-2.13.4.log"
expect_eq "log: real socket-layer WARN on a RoCE job: kinds counted, no Socket host, one process" \
    "$(q real914 "[c['evidence']['job']['warningsByKind'], [(x['name'], x['transport']) for x in c['evidence']['hosts']], [(x['host'], x['pid']) for x in p]]")" \
    '[{"connection-closed": 1, "system-error": 2}, [["host", "none"]], [["host", 22337]]]'
# aws-ofi-nccl over HPE Slingshot's cxi provider (nccl_net_ofi_init's "Selected Provider is"),
# with a bare version line and one line of a rank glued behind another rank's cut line (two
# processes writing one pipe): Libfabric over cxi is RDMA on both hosts. The glued line is read
# as its first writer's; the second rank's part of it is lost (where its host name starts is
# not in the bytes: "...P2P/CUMEM/rex3006c0s1b1n0:2538025:..."), its own later lines name it.
plog realcxi "$L/real/alcf-polaris-cxi-ofi-glued-lines-2.20.5.log"
expect_eq "log: real aws-ofi-nccl over cxi: RDMA on both hosts, provider cxi, no socket finding" \
    "$(q realcxi "[sorted(set(codes('nccl.log'))), sorted(set(h['transportClass'] for h in c['evidence']['hosts'])), sorted(set(x.get('ofiProvider') for x in p if x.get('network')))]")" \
    '[[], ["rdma"], ["cxi"]]'
expect_eq "log: real glued lines: every process read, no host invented from the glued line" \
    "$(q realcxi "sorted((x['host'], x['pid']) for x in p)")" \
    '[["x3006c0s13b1n0", 508126], ["x3006c0s13b1n0", 508127], ["x3006c0s1b1n0", 2538025]]'

# Real logs (tests/fixtures/nccl-logs/real/, sources in SOURCES.md): every line of NAME.expect
# (status, finding codes, multi-node, hosts, ranks, versions, NVLS, WARN kinds, the codes left
# unknown where the file says so, and per host transport, class, GPUDirect RDMA and HCAs) must be
# what `preflight log` reads in NAME.log.
for f in "$L"/real/*.log; do
    n=$(basename "$f" .log)
    plog "real-$n" "$f"
    python3 - "$T/real-$n.yaml" "${f%.log}.expect" "$n" <<'PY'
import sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
c = [x for x in d['checks'] if x['id'] == 'nccl.log'][0]
e = c.get('evidence') or {}
j = e.get('job') or {}
got = ['status: %s' % c['status'],
       'codes: %s' % ','.join(sorted(set(f['code'] for f in c.get('findings') or []))),
       'multiNode: %s' % str(j.get('multiNode')).lower(),
       'hosts: %s' % j.get('hosts'),
       'ranks: %s' % (j.get('ranks') or '-'),
       'versions: %s' % ','.join(j.get('ncclVersions') or []),
       'nvls: %s' % str(j.get('nvls')).lower(),
       'warnings: %s' % ','.join('%s=%s' % kv for kv in sorted((j.get('warningsByKind') or {}).items())),
       'unknown: %s' % ','.join(sorted(set(u['code'] for u in e.get('unknown') or [])))]
for h in e.get('hosts') or []:
    g = h.get('gpuDirectRdma')
    got.append('host %s: transport=%s class=%s gdr=%s hcas=%s' % (
        h['name'], h['transport'], h['transportClass'], '-' if g is None else str(g).lower(),
        ','.join(h.get('hcas') or []) or '-'))
want = [l.rstrip('\n') for l in open(sys.argv[2]) if l.strip()]
for w in want:
    key = w.split(':', 1)[0]
    g = [x for x in got if x.split(':', 1)[0] == key]
    ok = g and g[0].rstrip() == w.rstrip()
    print('%s - log: real %s: %s%s' % ('ok' if ok else 'not ok', sys.argv[3], w.rstrip(),
                                       '' if ok else ' (got %r)' % (g[0] if g else None)))
if len([x for x in got if x.startswith('host ')]) != len([w for w in want if w.startswith('host ')]):
    print('not ok - log: real %s: host count differs' % sys.argv[3])
PY
done
