#!/usr/bin/env bash
# How `preflight run` scales with the number of pods: N real processes on loopback (one
# rendezvous port for rank 0, an ephemeral data port for every rank), for each N printing
#   - the wall time from the start of the last process to the exit of the last one,
#   - the time per stage at rank 0, from the moments its progress lines arrive,
#   - peak RSS of rank 0 and of the median other rank (GNU time: wait4 here would count this
#     script's own RSS at the fork, the same for every rank),
#   - rank 0's verdict, the fleet verdict, and the false culprits: nothing is throttled, so
#     every culprit and every slow-link or slow-node finding is false.
# The run (at least 1,024 processes) takes a few minutes on two cores, most of it starting
# the processes.
# Numbers never fail the run. Every rank is in one process group that is killed at the end,
# so nothing outlives the script, also when a run hangs or the script is interrupted.
#   BENCH_SCALE_N       ranks per run, a list (default "1024 2048")
#   BENCH_SCALE_TIMEOUT preflight's --timeout for each run, seconds (default 300, Kueue's
#                       default waitForPodsReady); the script kills what is left 30 s later
#   BENCH_SCALE_BYTES   the all-reduce's message size (default 1 MiB: N processes share the
#                       machine's memory; the probes size themselves from the measured rate)
#   BENCH_SCALE_WRAP0   a command that rank 0 runs under, e.g. "perf record -g -o /tmp/p0.data --"
#                       (its RSS is then the wrapper's)
set -u
cd "$(dirname "$0")/../.."
bin=${PREFLIGHT_REL:-$PWD/bin/preflight}
[ -x "$bin" ] || { echo "bench_scale: $bin not built (make bin/preflight)"; exit 1; }
tmp=$(mktemp -d /tmp/preflight-bench-scale.XXXXXX)
cleanup() {
    # the process group of the run in flight, if the driver could not end it itself
    if [ -s "$tmp/pgid" ]; then kill -KILL -- "-$(cat "$tmp/pgid")" 2>/dev/null; fi
    [ -n "${KEEP_TMP:-}" ] && echo "kept $tmp" || rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
# rank 0 holds a connection per rank; every rank a few data sockets and its listeners
want=$((4 * 1024 + 256))
ulimit -n "$want" 2>/dev/null || ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
echo "open files: $(ulimit -n)"

/usr/bin/python3 - "$bin" "$tmp" <<'PY'
import os, re, shlex, signal, socket, statistics, subprocess, sys, threading, time
import yaml

binary, tmp = sys.argv[1], sys.argv[2]
ns = [int(x) for x in os.environ.get("BENCH_SCALE_N", "1024 2048").split()]
timeout = int(os.environ.get("BENCH_SCALE_TIMEOUT", "300"))
msg_bytes = int(os.environ.get("BENCH_SCALE_BYTES", str(1 << 20)))
wrap0 = shlex.split(os.environ.get("BENCH_SCALE_WRAP0", ""))
signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))


def free_port():
    """A port p with p+1 free too (the GPU stage listens on the port after rank 0's)."""
    for _ in range(100):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.bind(("127.0.0.1", 0))
        p = s.getsockname()[1]
        s.close()
        t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            t.bind(("127.0.0.1", p + 1))
            return p
        except OSError:
            continue
        finally:
            t.close()
    raise RuntimeError("no free port pair")


gnu_time = "/usr/bin/time" if os.access("/usr/bin/time", os.X_OK) else None


def rank_rss(d, r, ru):
    """Peak RSS of rank r in MiB: GNU time's figure, else wait4's (an upper bound)."""
    try:
        with open(os.path.join(d, f"rss{r}")) as f:
            return int(f.read().split()[-1]) / 1024.0  # KiB -> MiB
    except (OSError, ValueError, IndexError):
        return ru.ru_maxrss / 1024.0


def rank_env(rank):
    env = dict(os.environ, POD_NAME=f"scale-{rank}", NODE_NAME=f"node-{rank}", NO_COLOR="1")
    for k in ("PREFLIGHT_RANK", "PREFLIGHT_WORLD_SIZE", "PREFLIGHT_COORDINATOR", "PREFLIGHT_PORT",
              "RANK", "WORLD_SIZE", "MASTER_ADDR", "JOB_COMPLETION_INDEX", "PREFLIGHT_TOKEN"):
        env.pop(k, None)
    return env


# rank 0's progress lines that end a stage: (stage, pattern)
MARKS = [("join", None),  # the last "joined ... (N of N)" line
         ("roster", re.compile(r"ranks in the run after")),
         ("mesh", re.compile(r"tcp all-reduce: ")),
         ("allreduce+probes", re.compile(r"link probes: |NCCL: |collective\.nccl"))]


def run(n):
    d = os.path.join(tmp, f"n{n}")
    os.makedirs(d)
    cfg = os.path.join(d, "config.yaml")
    with open(cfg, "w") as f:
        f.write(f"tcp: {{messageBytes: {msg_bytes}, iterations: 1}}\n")
        f.write(f"rendezvous: {{timeoutSeconds: {timeout}}}\n")
        f.write("report: {events: false}\n")
    port = free_port()

    def cmd(r):
        # GNU time forks the rank from a small process and reports its own peak: ru_maxrss
        # from this script's wait4 would be at least this script's RSS at the fork (Linux
        # keeps the peak of the memory image that exec replaced), the same for every rank
        timer = [gnu_time, "-f", "%M", "-o", os.path.join(d, f"rss{r}")] if gnu_time else []
        return timer + (wrap0 if r == 0 else []) + [binary, "run", "--config", cfg, "--rank", str(r), "--world-size", str(n),
                "--coordinator", "127.0.0.1", "--port", str(port), "--format", "yaml",
                "--verdict", os.path.join(d, f"v{r}.yaml"), "--timeout", str(timeout)]

    marks = {}
    joined_re = re.compile(rf"\({n} of {n}\)")
    t_begin = time.monotonic()
    p0 = subprocess.Popen(cmd(0), env=rank_env(0), stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True, bufsize=1, process_group=0)
    pgid = p0.pid
    with open(os.path.join(tmp, "pgid"), "w") as f:
        f.write(str(pgid))
    log0 = open(os.path.join(d, "rank0.log"), "w")

    def reader():
        for line in p0.stderr:
            now = time.monotonic()
            log0.write(f"{now - t_begin:9.3f} {line}")
            if joined_re.search(line):
                marks["join"] = now
            for name, pat in MARKS[1:]:
                if pat.search(line) and name not in marks:
                    marks[name] = now

    th = threading.Thread(target=reader, daemon=True)
    th.start()
    pids = {p0.pid: 0}
    for r in range(1, n):
        p = subprocess.Popen(cmd(r), env=rank_env(r), stdout=subprocess.DEVNULL,
                             stderr=open(os.path.join(d, f"rank{r}.log"), "w"),
                             process_group=pgid)
        pids[p.pid] = r
    t_last_start = time.monotonic()
    rss, rc, t_exit = {}, {}, {}
    hard = t_last_start + timeout + 30
    left = dict(pids)
    while left:
        pid, status, ru = os.wait4(-1, os.WNOHANG)
        if pid == 0:
            if time.monotonic() > hard:
                break
            time.sleep(0.05)
            continue
        r = left.pop(pid, None)
        if r is None:
            continue
        t_exit[r] = time.monotonic()
        rss[r] = rank_rss(d, r, ru)
        rc[r] = os.waitstatus_to_exitcode(status)
    killed = len(left)
    if left:
        os.killpg(pgid, signal.SIGKILL)
        for pid in list(left):
            os.waitpid(pid, 0)
    os.remove(os.path.join(tmp, "pgid"))
    th.join(5)
    log0.close()

    res = {"n": n, "killed": killed}
    res["wall"] = max(t_exit.values()) - t_last_start if t_exit else None
    prev = t_last_start
    res["stages"] = []
    for name, _ in MARKS:
        t = marks.get(name)
        res["stages"].append((name, None if t is None else t - prev))
        if t is not None:
            prev = t
    res["stages"].append(("gpu+report", t_exit[0] - prev if 0 in t_exit else None))
    res["rss0"] = rss.get(0)
    others = [rss[r] for r in rss if r != 0]
    res["rss_med"] = statistics.median(others) if others else None
    res["rss_max"] = max(others) if others else None
    res["nonzero_rc"] = sum(1 for r in rc.values() if r not in (0,))
    res["rc0"] = rc.get(0)
    v = None
    try:
        with open(os.path.join(d, "v0.yaml")) as f:
            v = yaml.safe_load(f)
    except Exception:
        pass
    res["verdict"] = (v or {}).get("verdict", "none")
    res["fleet"] = ((v or {}).get("fleet") or {}).get("verdict", "none")
    culprits = (v or {}).get("culprits") or []
    res["culprits"] = len(culprits)
    codes = {}
    ar = None
    for c in (v or {}).get("checks") or []:
        if c.get("id") in ("rendezvous", "collective.tcp"):
            for fd in c.get("findings") or []:
                codes[fd.get("code")] = codes.get(fd.get("code"), 0) + 1
        if c.get("id") == "collective.tcp":
            ar = (c.get("evidence") or {}).get("secondsThisRank")
    res["codes"] = codes
    res["false"] = res["culprits"] + codes.get("slow-link", 0) + codes.get("slow-node", 0)
    res["probe_line"] = ""
    try:
        with open(os.path.join(d, "rank0.log")) as f:
            for line in f:
                if "link probes: " in line:
                    res["probe_line"] = line.split("link probes: ", 1)[1].strip()
    except OSError:
        pass
    # the all-reduce ran 1 checked + 1 timed iteration: about 2x its time at rank 0
    res["allreduce"] = 2 * ar if ar is not None else None
    return res


def f(x, unit="", nd=2):
    return "n/a" if x is None else f"{x:.{nd}f}{unit}"


rows = []
for n in ns:
    t0 = time.monotonic()
    r = run(n)
    rows.append(r)
    print(f"# N={n}: done in {time.monotonic() - t0:.1f} s"
          f"{' (killed %d ranks)' % r['killed'] if r['killed'] else ''}", flush=True)

print()
print(f"machine: {os.cpu_count()} cores, loopback; all-reduce {msg_bytes} bytes x (1+1); "
      f"--timeout {timeout}")
print()
print("| N | last start -> last exit (s) | join | roster | mesh | all-reduce + probes "
      "(all-reduce alone) | GPU stage + report | RSS rank 0 (MiB) | RSS median rank (max) "
      "| exit != 0 | rank 0 / fleet verdict | false culprits | tcp/rendezvous findings |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---|")
for r in rows:
    st = dict(r["stages"])
    codes = ", ".join(f"{k} x{v}" for k, v in sorted(r["codes"].items())) or "none"
    print(f"| {r['n']} | {f(r['wall'])} | {f(st['join'])} | {f(st['roster'])} | "
          f"{f(st['mesh'])} | {f(st['allreduce+probes'])} ({f(r['allreduce'], nd=3)}) | "
          f"{f(st['gpu+report'])} | {f(r['rss0'], nd=1)} | {f(r['rss_med'], nd=1)} "
          f"({f(r['rss_max'], nd=1)}) | {r['nonzero_rc']} | {r['verdict']} / {r['fleet']} | "
          f"{r['false']} | {codes} |")
print()
for r in rows:
    print(f"N={r['n']} link probes: {r['probe_line'] or 'n/a'}")
PY
