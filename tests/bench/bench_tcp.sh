#!/usr/bin/env bash
# The TCP all-reduce, the link probes and the rendezvous, measured on loopback:
#  (a) busbw of `preflight run` (2 and 4 ranks, 64 MiB float32 sum) against OpenMPI's
#      MPI_Allreduce over its TCP transport (tests/bench/mpi_allreduce.c); target >= 1.5x;
#  (b) the link probe's Gb/s (verdict evidence) against iperf3 on the same path; target 0.9x;
#  (c) the rendezvous of 256 ranks: from the start of the last process to rank 0's roster;
#      target < 0.5 s.
# Prints a markdown table. Numbers never fail the run; a tool that is missing gives "n/a".
#   BENCH_RDV_RANKS (256), BENCH_REPEAT (3: best of) tune it.
set -u
cd "$(dirname "$0")/../.."
bin=${PREFLIGHT_REL:-$PWD/bin/preflight}
[ -x "$bin" ] || { echo "bench_tcp: $bin not built (make bin/preflight)"; exit 1; }
tmp=$(mktemp -d /tmp/preflight-bench-tcp.XXXXXX)
cleanup() { rm -rf "$tmp"; }
trap cleanup EXIT
# 256 ranks: rank 0 holds a connection per rank, every rank a few data sockets
ulimit -n 8192 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

mpi_bin=""
if command -v mpicc >/dev/null && command -v mpirun >/dev/null &&
    mpicc -O2 -o "$tmp/mpi_allreduce" tests/bench/mpi_allreduce.c 2>"$tmp/mpicc.log"; then
    mpi_bin=$tmp/mpi_allreduce
fi

python3 - "$bin" "$tmp" "$mpi_bin" <<'PY'
import json, os, re, shutil, socket, subprocess, sys, threading, time
import yaml

binary, tmp, mpi_bin = sys.argv[1], sys.argv[2], sys.argv[3]
repeat = int(os.environ.get("BENCH_REPEAT", "3"))
rdv_ranks = int(os.environ.get("BENCH_RDV_RANKS", "256"))
MSG = 64 << 20


def free_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def write_config(path, msg_bytes, iters, timeout):
    with open(path, "w") as f:
        f.write(f"messageBytes: {msg_bytes}\n")
        f.write(f"tcp: {{messageBytes: {msg_bytes}, iterations: {iters}}}\n")
        f.write(f"rendezvous: {{timeoutSeconds: {timeout}}}\n")
        f.write("report: {events: false}\n")


def rank_cmd(cfg, rank, n, port, verdict):
    return [binary, "run", "--config", cfg, "--rank", str(rank), "--world-size", str(n),
            "--coordinator", "127.0.0.1", "--port", str(port), "--format", "yaml",
            "--verdict", verdict, "--timeout", "300"]


def rank_env(rank):
    env = dict(os.environ, POD_NAME=f"bench-{rank}", NODE_NAME="loopback", NO_COLOR="1")
    for k in ("PREFLIGHT_RANK", "PREFLIGHT_WORLD_SIZE", "PREFLIGHT_COORDINATOR", "PREFLIGHT_PORT",
              "RANK", "WORLD_SIZE", "MASTER_ADDR", "JOB_COMPLETION_INDEX", "PREFLIGHT_TOKEN"):
        env.pop(k, None)
    return env


def preflight_run(n, msg_bytes=MSG, iters=5):
    """One multi-process `preflight run` on loopback; rank 0's verdict (a dict) or None."""
    d = os.path.join(tmp, f"run{n}")
    os.makedirs(d, exist_ok=True)
    cfg = os.path.join(d, "config.yaml")
    write_config(cfg, msg_bytes, iters, 60)
    port = free_port()
    procs = []
    for r in range(n):
        v = os.path.join(d, f"v{r}.yaml")
        procs.append(subprocess.Popen(rank_cmd(cfg, r, n, port, v), env=rank_env(r),
                                      stdout=subprocess.DEVNULL, stderr=open(v + ".log", "w")))
    for p in procs:
        try:
            p.wait(timeout=240)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    try:
        with open(os.path.join(d, "v0.yaml")) as f:
            return yaml.safe_load(f)
    except Exception:
        return None


def tcp_collective(v):
    for c in (v or {}).get("collectives") or []:
        if c.get("backend") == "tcp":
            return c
    return None


def check(v, cid):
    for c in (v or {}).get("checks") or []:
        if c.get("id") == cid:
            return c
    return None


def mpi_busbw(n):
    if not mpi_bin:
        return None
    cmd = ["mpirun", "--allow-run-as-root", "--oversubscribe", "--mca", "pml", "ob1",
           "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", "lo", "-np", str(n),
           mpi_bin, str(MSG), "5"]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=300).stdout
    except Exception:
        return None
    m = re.search(r"busbw=([0-9.]+) correct=(\d)", out)
    return float(m.group(1)) if m and m.group(2) == "1" else None


def iperf3(bidir):
    if not shutil.which("iperf3"):
        return None
    port = free_port()
    srv = subprocess.Popen(["iperf3", "-s", "-1", "-B", "127.0.0.1", "-p", str(port)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        out = None
        for _ in range(50):  # the server needs a moment to listen
            time.sleep(0.1)
            cmd = ["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", "5", "-J"]
            if bidir:
                cmd.append("--bidir")
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
            if r.returncode == 0:
                out = json.loads(r.stdout)
                break
        if not out:
            return None
        e = out["end"]
        if bidir:  # per direction, as the probe measures one link while both run
            a = e["sum_received"]["bits_per_second"]
            b = e.get("sum_received_bidir_reverse", {}).get("bits_per_second", a)
            return (a + b) / 2 / 1e9
        return e["sum_received"]["bits_per_second"] / 1e9
    except Exception:
        return None
    finally:
        srv.kill()
        srv.wait()


def rendezvous(n):
    """Seconds from the start of the last rank's process to rank 0's roster, and rank 0's
    own lastArrivalToRosterSeconds; (None, None) when it did not complete."""
    d = os.path.join(tmp, f"rdv{n}")
    os.makedirs(d, exist_ok=True)
    cfg = os.path.join(d, "config.yaml")
    write_config(cfg, 4096, 1, 120)
    port = free_port()
    ev_joined = threading.Event()  # all but the last are in
    ev_roster = threading.Event()
    t_roster = [None]

    procs = []
    v0 = os.path.join(d, "v0.yaml")
    p0 = subprocess.Popen(rank_cmd(cfg, 0, n, port, v0), env=rank_env(0),
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, bufsize=1)
    procs.append(p0)

    def reader():
        for line in p0.stderr:
            if re.search(rf"\({n - 1} of {n}\)", line):
                ev_joined.set()
            if "ranks in the run" in line and t_roster[0] is None:
                t_roster[0] = time.monotonic()
                ev_roster.set()

    th = threading.Thread(target=reader, daemon=True)
    th.start()
    for r in range(1, n - 1):
        procs.append(subprocess.Popen(rank_cmd(cfg, r, n, port, os.path.join(d, f"v{r}.yaml")),
                                      env=rank_env(r), stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL))
    ok = ev_joined.wait(180)
    last = None
    if ok:
        time.sleep(0.5)  # let the machine settle: the last arrival alone is measured
        t_start = time.monotonic()
        last = subprocess.Popen(rank_cmd(cfg, n - 1, n, port, os.path.join(d, f"v{n - 1}.yaml")),
                                env=rank_env(n - 1), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        procs.append(last)
        ok = ev_roster.wait(60)
    for p in procs:
        try:
            p.wait(timeout=240)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
    if not ok or t_roster[0] is None:
        return None, None
    inner = None
    try:
        with open(v0) as f:
            v = yaml.safe_load(f)
        inner = (check(v, "rendezvous") or {}).get("evidence", {}).get("lastArrivalToRosterSeconds")
    except Exception:
        pass
    return t_roster[0] - t_start, inner


def fmt(x, unit=""):
    return "n/a" if x is None else f"{x:.3f}{unit}"


def ratio(a, b):
    return "n/a" if a is None or b is None or b == 0 else f"{a / b:.2f}x"


rows = []
links = []
for n in (2, 4):
    best = None
    for _ in range(repeat):
        v = preflight_run(n)
        c = tcp_collective(v)
        if c and c.get("correct"):
            bw = float(c.get("busbwGBps", 0))
            best = bw if best is None or bw > best else best
        ev = (check(v, "collective.tcp") or {}).get("evidence", {})
        # two ranks: one link each way, both busy at once, as in `iperf3 --bidir`
        if n == 2 and ev.get("medianLinkGbps") is not None:
            links.append(float(ev["medianLinkGbps"]))
    mpi = None
    for _ in range(repeat):
        m = mpi_busbw(n)
        if m is not None and (mpi is None or m > mpi):
            mpi = m
    rows.append((f"all-reduce busbw, {n} ranks, 64 MiB (GB/s)", fmt(best), fmt(mpi, " (OpenMPI tcp)"),
                 ratio(best, mpi), ">= 1.5x"))

probe = max(links) if links else None
ip_uni = iperf3(False)
ip_bi = iperf3(True)
rows.append(("link probe, median link (Gb/s)", fmt(probe), fmt(ip_bi, " (iperf3 --bidir, per direction)"),
             ratio(probe, ip_bi), ">= 0.9x"))
rows.append(("", "", fmt(ip_uni, " (iperf3, one direction)"), ratio(probe, ip_uni), ""))

t_last, t_inner = rendezvous(rdv_ranks)
rows.append((f"rendezvous, {rdv_ranks} ranks: last start -> roster (s)", fmt(t_last), "", "",
             "< 0.5 s"))
rows.append((f"rendezvous, {rdv_ranks} ranks: last JOIN -> roster at rank 0 (s)", fmt(t_inner),
             "", "", ""))

print(f"machine: {os.cpu_count()} cores, loopback; best of {repeat}")
print()
print("| benchmark | preflight | reference | ratio | target |")
print("|---|---:|---:|---:|---|")
for r in rows:
    print("| " + " | ".join(r) + " |")
PY
