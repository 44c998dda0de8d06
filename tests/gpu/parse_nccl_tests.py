#!/usr/bin/env python3
"""nccl-tests' table (rank 0's output) as JSON lines, one per size, for
tests/gpu/device-check.sh. The columns are those src/common.cu prints (NCCL_TESTS_VERSION
2.19.6): size count type redop root, then time algbw busbw #wrong out of place, then the same
in place; #wrong is N/A when -c 0. A run that printed no row gives one line with its last
output as the error.
  parse_nccl_tests.py OUTFILE TAG BINARY RANKS"""
import json
import re
import sys

ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\S+)\s+(\S+)\s+(-?\d+)"
                 r"\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\S+)"
                 r"\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\S+)\s*$")


def main():
    path, tag, binary, ranks = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    try:
        text = open(path, errors="replace").read()
    except OSError as e:
        text = "cannot read: %s" % e
    version = re.search(r"nccl-tests version ([\d.]+) nccl-headers=(\d+) nccl-library=(\d+)", text)
    rows = 0
    for line in text.splitlines():
        m = ROW.match(line)
        if not m:
            continue
        rows += 1
        g = m.groups()
        print(json.dumps({
            "kind": "nccl-tests", "tag": tag, "op": binary.replace("_perf", ""), "ranks": ranks,
            "bytes": int(g[0]), "count": int(g[1]), "type": g[2],
            "timeUs": float(g[5]), "algbwGBps": float(g[6]), "busbwGBps": float(g[7]),
            "wrong": g[8], "inplaceTimeUs": float(g[9]), "inplaceAlgbwGBps": float(g[10]),
            "inplaceBusbwGBps": float(g[11]), "inplaceWrong": g[12],
            "version": version.group(1) if version else None,
            "ncclLibrary": version.group(3) if version else None,
        }))
    if not rows:
        print(json.dumps({"kind": "nccl-tests", "tag": tag, "op": binary.replace("_perf", ""),
                          "ranks": ranks, "error": text.strip().splitlines()[-5:] if text.strip() else "no output"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
