#!/usr/bin/env python3
"""Reads the verdicts of one preflight run made by tests/gpu/device-check.sh (DIR/rank-N/ or,
for tests/gpu/e2e.sh, DIR/pod-N/) and prints one JSON line per rank: collective.nccl's status,
codes and message, the exit code, the wall time, and the verdict's `collectives` entries.
  verdicts.py DIR N TAG             the JSON lines
  verdicts.py --get DIR RANK FIELD  one field of one rank: status, codes, message, transport"""
import json
import os
import sys

import yaml


def rank_dir(d, i):
    for sub in ("rank-%d" % i, "pod-%d" % i):
        if os.path.isdir(os.path.join(d, sub)):
            return os.path.join(d, sub)
    return os.path.join(d, "rank-%d" % i)


def read(d, i, tag=""):
    rd = rank_dir(d, i)
    out = {"kind": "preflight", "tag": tag, "rank": i}
    try:
        out["rc"] = int(open(os.path.join(rd, "rc")).read().strip())
    except (OSError, ValueError):
        pass
    try:
        out["wall"] = float(open(os.path.join(d, "wall")).read().strip())
    except (OSError, ValueError):
        pass
    try:
        v = yaml.safe_load(open(os.path.join(rd, "verdict.yaml")))
    except Exception as e:  # noqa: BLE001 - a missing or broken verdict is itself the finding
        out["error"] = "no verdict: %s" % e
        return out
    out["verdict"] = v.get("verdict")
    c = next((c for c in v.get("checks") or [] if c.get("id") == "collective.nccl"), None) or {}
    out["status"] = c.get("status")
    out["message"] = c.get("message")
    out["codes"] = sorted(f.get("code") for f in c.get("findings") or [])
    ev = c.get("evidence") or {}
    out["evidence"] = {k: ev[k] for k in ev if k in ("transport", "ncclVersion", "ncclWarnings", "commEndSeconds", "gpuFreeSeconds",
                                                      "interfaces", "ncclLog", "deadline")}
    out["failing"] = sorted("%s:%s" % (x.get("id"), x.get("status")) for x in v.get("checks") or []
                            if x.get("status") in ("fail", "warn"))
    out["collectives"] = [x for x in v.get("collectives") or [] if x.get("backend") == "nccl"]
    out["ncclVersion"] = (v.get("environment") or {}).get("ncclVersion")
    return out


def main():
    if sys.argv[1] == "--get":
        r = read(sys.argv[2], int(sys.argv[3]))
        f = sys.argv[4]
        if f == "codes":
            print(",".join(r.get("codes") or []))
        elif f == "transport":
            print(next((c.get("transport") for c in r.get("collectives") or []), ""))
        else:
            print(r.get(f) if r.get(f) is not None else r.get("error", ""))
        return 0
    d, n, tag = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    for i in range(n):
        print(json.dumps(read(d, i, tag)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
