"""Replays NCCL logs into a folder as NCCL writes them, and drives `preflight watch` on it.

  watch_replay.py replay DIR RECORD SPEED GAP LOG...
      Writes every NCCL line of the LOGs (in their order) into DIR/nccl.<host>.<pid>, the file
      NCCL_DEBUG_FILE=DIR/nccl.%h.%p names (NVIDIA/nccl src/debug.cc): a file appears with its
      process's first line; a bare "NCCL version" line goes to the file of the line before. Lines that carry a timestamp ("[2025-07-21 19:05:29] ...", an ISO
      or "2019-02-11 09:47:49,051" prefix) are paced by it, divided by SPEED; others GAP/SPEED
      seconds apart. Every third line is written in two pieces 50 ms apart (a reader catches
      it half written). RECORD gets one line per NCCL line once it is whole: "<time.time()>
      <file> <line>". Run by test_watch.sh inside `unshare --pid --net` (its own PID and
      network namespaces, like a trainer container of its own).

  watch_replay.py drive OUT -- WATCH-COMMAND... ++ REPLAY-COMMAND...
      Starts the watch, then the replay; timestamps each line the watch prints (stderr) as it
      arrives; when the replay ends waits SETTLE seconds (env SETTLE, default 1.5), sends the
      watch SIGTERM (what the kubelet does to a native sidecar when the trainer ends) and
      writes OUT (JSON): {"lines": [[t, line], ...], "rc": watch's exit code, "replay_rc": ...}.
"""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime

PREFIX = re.compile(r"(?:^|[\s\]:])([A-Za-z0-9][A-Za-z0-9_.-]*):(\d+):\d+ \[-?\d+\] ")
STAMP = re.compile(r"^\[?(\d{4}-\d\d-\d\d)[T ](\d\d:\d\d:\d\d)(?:[.,](\d+))?")


def stamp(line):
    m = STAMP.match(line)
    if not m:
        return None
    t = datetime.strptime(m.group(1) + " " + m.group(2), "%Y-%m-%d %H:%M:%S").timestamp()
    if m.group(3):
        t += float("0." + m.group(3))
    return t


def replay(d, record, speed, gap, logs):
    files, rec = {}, open(record, "a")
    last_stamp, n, last = None, 0, None
    for log in logs:
        for raw in open(log, errors="replace"):
            line = raw.rstrip("\n")
            s = stamp(line)
            if s is not None and last_stamp is not None and s >= last_stamp:
                time.sleep(min(s - last_stamp, 30) / speed)
            elif s is None:
                time.sleep(gap / speed)
            if s is not None:
                last_stamp = s
            m = PREFIX.search(line)
            if "NCCL" not in line or (not m and not last):
                continue
            # NCCL's bare VERSION line (no prefix, src/debug.cc) goes where its process writes
            name = "nccl.%s.%s" % (m.group(1), m.group(2)) if m else last
            last = name
            f = files.get(name)
            if f is None:
                f = files[name] = open(os.path.join(d, name), "a")
            data = line + "\n"
            n += 1
            if n % 3 == 0 and len(data) > 8:
                f.write(data[: len(data) // 2])
                f.flush()
                time.sleep(0.05)
                data = data[len(data) // 2:]
            f.write(data)
            f.flush()
            rec.write("%.6f %s %s\n" % (time.time(), name, line))
            rec.flush()
    for f in files.values():
        f.close()


def drive(out, watch_cmd, replay_cmd):
    lines = []
    w = subprocess.Popen(watch_cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL,
                         text=True, errors="replace")

    def reader():
        for l in w.stderr:
            lines.append([time.time(), l.rstrip("\n")])

    th = threading.Thread(target=reader)
    th.start()
    # the watch is following the folder before the trainer starts (an initContainer)
    t0 = time.time()
    while not lines and time.time() - t0 < 10:
        time.sleep(0.05)
    replay_rc = subprocess.call(replay_cmd) if replay_cmd else 0
    time.sleep(float(os.environ.get("SETTLE", "1.5")))
    if w.poll() is None:
        w.send_signal(signal.SIGTERM)
    try:
        rc = w.wait(timeout=30)
    except subprocess.TimeoutExpired:
        w.kill()
        rc = -9
    th.join()
    json.dump({"lines": lines, "rc": rc, "replay_rc": replay_rc}, open(out, "w"))


if __name__ == "__main__":
    if sys.argv[1] == "replay":
        replay(sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5]), sys.argv[6:])
    elif sys.argv[1] == "drive":
        args = sys.argv[3:]
        i, j = args.index("--"), args.index("++") if "++" in args else len(args)
        drive(sys.argv[2], args[i + 1: j], args[j + 1:])
