#!/usr/bin/env bash
# `preflight watch` with a 1,024-rank job's init in one pod: 1,024 NCCL_DEBUG_FILE files (one a
# process, as NCCL_DEBUG_FILE=DIR/nccl.%h.%p makes them) written over WATCH_BENCH_SECONDS
# (default 20: the init of a large job) by a writer of its own. Each rank writes the lines of a
# NCCL 2.21 init with NCCL_DEBUG_SUBSYS=INIT,NET on an 8-NIC node in the formats of
# tests/fixtures/nccl-logs/ib-gdr.log (version, bootstrap, NET/IB with 8 HCAs, GDR per HCA,
# comm lines, 16 ring channels each way, Init COMPLETE, Init timings); rank 1000 falls back to
# Socket. The table: the watch's CPU seconds (user + system) and peak RSS over the whole run,
# and the seconds from the Socket line's write to the watch's line for it. Numbers never
# decide a test; the budget stated in docs/kubernetes.md comes from here.
set -u
cd "$(dirname "$0")/../.."
BIN=${PREFLIGHT_REL:-bin/preflight}
RANKS=${WATCH_BENCH_RANKS:-1024}
SECS=${WATCH_BENCH_SECONDS:-20}
dir=$(mktemp -d /tmp/preflight-bench-watch.XXXXXX)
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/f"
cat >"$dir/gate.yaml" <<'EOF'
apiVersion: preflight/v1
kind: Verdict
verdict: pass
environment: {ncclVersion: 2.21.5, ncclNetwork: IB}
checks:
- id: collective.nccl
  evidence: {transport: IB, hcas: [mlx5_0:1/IB, mlx5_1:1/IB, mlx5_2:1/IB, mlx5_3:1/IB, mlx5_4:1/IB, mlx5_5:1/IB, mlx5_6:1/IB, mlx5_7:1/IB]}
collectives:
- {backend: nccl, gpuDirectRdma: true}
EOF
cp "$dir/gate.yaml" "$dir/f/verdict.yaml"
cat >"$dir/writer.py" <<'PY'
import os, random, sys, time
d, ranks, secs, rec = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
random.seed(1)
def lines(r):
    h, p = "node-%d" % (r // 8), 1000 + r
    pre = "%s:%d:%d [%d] NCCL INFO " % (h, p, p, r % 8)
    pt = "%s:%d:%d [%d] NCCL INFO " % (h, p, p + 30, r % 8)
    hcas = " ".join("[%d]mlx5_%d:1/IB" % (i, i) for i in range(8))
    sock = r == 1000
    out = [pre + "Bootstrap: Using eth0:10.0.%d.%d<0>" % (r // 250, r % 250 + 1),
           pre + "cudaDriverVersion 12040", pre + "NCCL version 2.21.5+cuda12.4"]
    if sock:
        out += [pt + "NET/IB : No device found.", pt + "NET/Socket : Using [0]eth0:10.0.0.1<0>",
                pt + "Using network Socket"]
    else:
        out += [pt + "NET/IB : Using %s [RO]; OOB eth0:10.0.0.1<0>" % hcas, pt + "Using network IB"]
    out += [pt + "ncclCommInitRank comm 0x55d0c8a0 rank %d nranks %d cudaDev %d nvmlDev %d busId 18000 commId 0x5e1f - Init START" % (r, ranks, r % 8, r % 8),
            pt + "Setting affinity for GPU %d to ffff,ffffffff" % (r % 8)]
    if not sock:
        out += [pt + "NET/IB : GPU Direct RDMA Enabled for HCA %d 'mlx5_%d'" % (i, i) for i in range(8)]
    out += [pt + "comm 0x55d0c8a0 rank %d nRanks %d nNodes %d localRanks 8 localRank %d MNNVL 0" % (r, ranks, ranks // 8, r % 8)]
    via = "NET/Socket/0" if sock else "NET/IB/%d/GDRDMA" % (r % 8)
    for c in range(16):
        out.append(pt + "Channel %02d/0 : %d[%d] -> %d[%d] [receive] via %s" % (c, (r - 1) % ranks, (r - 1) % 8, r, r % 8, via))
        out.append(pt + "Channel %02d/0 : %d[%d] -> %d[%d] [send] via %s" % (c, r, r % 8, (r + 1) % ranks, (r + 1) % 8, via))
    out += [pt + "Connected all rings", pt + "Connected all trees",
            pt + "ncclCommInitRank comm 0x55d0c8a0 rank %d nranks %d cudaDev %d nvmlDev %d busId 18000 commId 0x5e1f - Init COMPLETE" % (r, ranks, r % 8, r % 8),
            pt + "Init timings: rank %d nranks %d total %.2f (kernels 0.51, bootstrap 0.22, allgathers 0.01, topo 0.28, graphs 0.04, connections 0.02, rest 0.01)" % (r, ranks, secs)]
    return ["nccl.node-%d.%d" % (r // 8, 1000 + r), out]
procs = [lines(r) for r in range(ranks)]
# every process writes its lines spread over the window, all interleaved
events = []
for name, ls in procs:
    start = random.uniform(0, secs * 0.2)
    step = (secs * 0.8) / len(ls)
    for i, l in enumerate(ls):
        events.append((start + i * step * random.uniform(0.5, 1.0), name, l))
events.sort()
files, t0, r = {}, time.time(), open(rec, "w")
total = 0
for t, name, l in events:
    dt = t0 + t - time.time()
    if dt > 0:
        time.sleep(dt)
    f = files.get(name) or files.setdefault(name, open(os.path.join(d, name), "a"))
    f.write(l + "\n"); f.flush()
    total += len(l) + 1
    if "Using network Socket" in l:
        r.write("%.6f\n" % time.time()); r.flush()
print("%d %d" % (len(events), total))
PY
printf 'watch:\n  windowSeconds: 600\n  stallSeconds: 600\nreport:\n  events: false\n' >"$dir/cfg.yaml"
# the watch started by a driver that timestamps its lines as they come, ends it with SIGTERM
# (as the kubelet ends a native sidecar) and reads its rusage (wait4: CPU, peak RSS)
cat >"$dir/drive.py" <<'PY'
import json, os, signal, subprocess, sys, threading, time
b, d, cfg, writer, ranks, secs, rec = sys.argv[1:8]
w = subprocess.Popen([b, "watch", d, "--config", cfg], stderr=subprocess.PIPE,
                     stdout=subprocess.DEVNULL, text=True)
got = []
th = threading.Thread(target=lambda: [got.append((time.time(), l)) for l in w.stderr])
th.start()
time.sleep(1)
out = subprocess.run(["python3", writer, d, ranks, secs, rec], capture_output=True, text=True).stdout.split()
time.sleep(2)
w.send_signal(signal.SIGTERM)
_, status, ru = os.wait4(w.pid, 0)
th.join()
ws = float(open(rec).read().split()[0])
lat = next(("%.3f" % (t - ws) for t, l in got if "trainer-socket-fallback" in l), "none")
print(out[0], out[1], "%.2f" % ru.ru_utime, "%.2f" % ru.ru_stime, ru.ru_maxrss, lat)
PY
read -r nlines bytes usr sys rss lat < <(python3 "$dir/drive.py" "$BIN" "$dir/f" "$dir/cfg.yaml" "$dir/writer.py" "$RANKS" "$SECS" "$dir/rec")
procs=$(python3 -c 'import yaml,sys; d=yaml.safe_load(open(sys.argv[1])); c=d["checks"][0]; print(len(c["evidence"]["processes"]) + c["evidence"].get("processesNotShown", 0), c["message"])' "$dir/f/watch.yaml")
printf '%-8s %10s %10s %9s %10s %10s %12s %14s\n' ranks lines MiB seconds "cpu s" "cpu %" "peak RSS MB" "socket->report"
awk -v r="$RANKS" -v l="$nlines" -v b="$bytes" -v s="$SECS" -v u="$usr" -v y="$sys" -v m="$rss" -v lat="$lat" 'BEGIN {
    printf "%-8d %10d %10.1f %9d %10.2f %10.1f %12.1f %14s\n", r, l, b / 1048576, s, u + y, 100 * (u + y) / (s + 3), m / 1024, lat }'
echo "watch verdict: $procs"
