#!/usr/bin/env bash
# Wall time and peak RSS of `preflight check` on the big fixture: 8 GPUs, 8 HCAs, and 16 real
# interfaces (dummy links in a network namespace when root). Targets: < 20 ms, < 8 MiB.
set -u
cd "$(dirname "$0")/../.."
bin=${PREFLIGHT_REL:-bin/preflight}
runs=${BENCH_RUNS:-50}
tmp=$(mktemp -d /tmp/preflight-bench.XXXXXX)
ns=pfbench-$$
cleanup() { ip netns del "$ns" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
tests/fixtures/materialize.sh tests/fixtures/node-8gpu-ndr "$tmp/node" >/dev/null
prefix=()
ifaces="(host interfaces)"
if [ "$(id -u)" -eq 0 ] && ip netns add "$ns" 2>/dev/null; then
    ip -n "$ns" link set lo up
    # dummy links where the kernel has them, else one end of a veth pair each
    kind=dummy
    ip -n "$ns" link add pfbprobe type dummy 2>/dev/null && ip -n "$ns" link del pfbprobe || kind=veth
    for i in $(seq 1 16); do
        if [ $kind = dummy ]; then
            ip -n "$ns" link add "net$i" type dummy
        else
            ip -n "$ns" link add "net$i" type veth peer name "peer$i"
            ip -n "$ns" link set "peer$i" up
        fi
        ip -n "$ns" addr add "10.205.$i.2/24" dev "net$i"
        ip -n "$ns" link set "net$i" mtu 9000 up
    done
    prefix=(ip netns exec "$ns")
    ifaces="16 $kind interfaces + lo"
fi
"${prefix[@]}" python3 - "$runs" "$bin" "$tmp/node" "$ifaces" <<'PY'
import os, statistics, subprocess, sys, time
runs, binary, root, ifaces = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
# PREFLIGHT_COUNTERS_WINDOW=0: `check` otherwise waits 1 s between the two snapshots of the
# port error counters, on purpose (idle time, not work); that wait is not measured here.
env = dict(os.environ, NCCL_SOCKET_IFNAME="net", NCCL_IB_HCA="mlx5", POD_NAME="bench-0",
           PREFLIGHT_COUNTERS_WINDOW="0")
cmd = [binary, "check", "--root", root, "--format", "yaml", "--verdict", root + "/v.yaml"]
# warm the page cache once
subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
walls, rss = [], []
for _ in range(runs):
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    walls.append((time.perf_counter() - t0) * 1000)
# peak RSS of one run, measured by GNU time (a fork of this Python process would count
# Python's own pages in ru_maxrss)
r = subprocess.run(["/usr/bin/time", "-f", "%M"] + cmd, env=env, stdout=subprocess.DEVNULL,
                   stderr=subprocess.PIPE, text=True)
peak_kib = int(r.stderr.strip().splitlines()[-1])
walls.sort()
p50 = statistics.median(walls)
p95 = walls[int(len(walls) * 0.95) - 1]
print(f"{'benchmark':<34} {'value':>10} {'target':>10}  note")
print(f"{'check wall time, median (ms)':<34} {p50:>10.2f} {'< 20':>10}  {runs} runs; {ifaces}")
print(f"{'check wall time, p95 (ms)':<34} {p95:>10.2f} {'< 20':>10}")
print(f"{'check peak RSS (MiB)':<34} {peak_kib/1024:>10.2f} {'< 8':>10}  ru_maxrss (GNU time); libnccl loaded")
PY
