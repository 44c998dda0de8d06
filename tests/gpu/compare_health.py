#!/usr/bin/env python3
"""gpu.health's evidence (what preflight read through NVML) set against nvidia-smi on the same
machine, GPU by GPU: name, persistence and MIG mode, volatile ECC counts, remapped rows, PCIe
width, NVLinks active (`nvidia-smi nvlink -s`), the active clock event reasons, driver and CUDA
versions. Writes nvidia-smi -q beside it (NVIDIA-SMI-Q.txt next to the verdict) and prints one
line per fact, "same" or "DIFFERS"; exits 1 on a difference in a fact that does not move while
the GPU is idle (counts, modes, widths, links), 0 otherwise, 77 without nvidia-smi.
  compare_health.py VERDICT.yaml"""
import os
import re
import subprocess
import sys

import yaml


def run(args):
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        return "ERROR %s" % e


def bus(b):
    # nvidia-smi and NVML: 00000000:2A:00.0
    b = b.strip().lower()
    dom, rest = b.split(":", 1) if b.count(":") == 2 else ("0", b)
    return "%08x:%s" % (int(dom, 16), rest)


def smi_value(v):
    v = v.strip()
    if v in ("[N/A]", "N/A", "[Not Supported]"):
        return "not supported"
    if v in ("Enabled", "Yes"):
        return "enabled"
    if v in ("Disabled", "No"):
        return "disabled"
    try:
        return int(v)
    except ValueError:
        return v


def main():
    if not sys.argv[1:]:
        print(__doc__)
        return 2
    if "ERROR" in run(["nvidia-smi", "-L"])[:6]:
        print("skipped: no nvidia-smi")
        return 77
    v = yaml.safe_load(open(sys.argv[1]))
    chk = next((c for c in v.get("checks", []) if c["id"] == "gpu.health"), None)
    if not chk or chk.get("status") == "skip":
        print("gpu.health did not run: %s" % (chk or {}).get("message"))
        return 1
    ev = chk.get("evidence") or {}
    with open(os.path.join(os.path.dirname(os.path.abspath(sys.argv[1])), "NVIDIA-SMI-Q.txt"), "w") as f:
        f.write(run(["nvidia-smi", "-q"]))
    fields = ["pci.bus_id", "name", "persistence_mode", "mig.mode.current",
              "ecc.errors.uncorrected.volatile.total", "ecc.errors.corrected.volatile.total",
              "pcie.link.width.max", "pcie.link.width.current", "driver_version"]
    smi = {}
    for line in run(["nvidia-smi", "--query-gpu=" + ",".join(fields),
                     "--format=csv,noheader,nounits"]).strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == len(fields):
            smi[bus(parts[0])] = dict(zip(fields, parts))
    rows = {}
    for line in run(["nvidia-smi", "--query-remapped-rows=gpu_bus_id,remapped_rows.correctable,"
                     "remapped_rows.uncorrectable,remapped_rows.pending,remapped_rows.failure",
                     "--format=csv,noheader"]).strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) == 5:
            rows[bus(parts[0])] = parts[1:]
    # nvidia-smi nvlink -s: "GPU 0: NAME (UUID: ...)" then "Link N: 26.562 GB/s" or "<inactive>"
    links, cur = {}, None
    for line in run(["nvidia-smi", "nvlink", "-s"]).splitlines():
        m = re.match(r"GPU (\d+):", line)
        if m:
            cur = int(m.group(1))
            links[cur] = [0, 0]
        elif cur is not None and re.match(r"\s+Link \d+:", line):
            links[cur][0] += 1
            links[cur][1] += 0 if "inactive" in line else 1
    differs = 0

    def show(gpu, what, ours, theirs, stable=True):
        nonlocal differs
        same = str(ours) == str(theirs)
        if not same and stable:
            differs += 1
        print("GPU %s %-28s preflight %-24s nvidia-smi %-24s %s" % (
            gpu, what, ours, theirs, "same" if same else ("DIFFERS" if stable else "differs (moves)")))

    smi_driver = next(iter(smi.values()), {}).get("driver_version", "?")
    show("-", "driver", ev.get("driverVersion"), smi_driver)
    cuda = re.search(r"CUDA Version\s*:\s*(\S+)", run(["nvidia-smi", "-q"]))
    show("-", "CUDA", ev.get("cudaVersion"), cuda.group(1) if cuda else "?")
    for g in ev.get("gpus") or []:
        b = bus(g.get("busId", "0:0"))
        s = smi.get(b)
        i = g.get("index")
        if not s:
            show(i, "bus id", g.get("busId"), "not listed")
            continue
        show(i, "name", g.get("name"), s["name"])
        show(i, "persistence", g.get("persistenceMode"), smi_value(s["persistence_mode"]))
        show(i, "MIG", g.get("migMode"), smi_value(s["mig.mode.current"]))
        ecc = g.get("eccErrors") or {}
        show(i, "ECC uncorrected (volatile)", ecc.get("volatileUncorrected"),
             smi_value(s["ecc.errors.uncorrected.volatile.total"]))
        show(i, "ECC corrected (volatile)", ecc.get("volatileCorrected"),
             smi_value(s["ecc.errors.corrected.volatile.total"]), stable=False)
        pw = g.get("pcieLinkWidth") or {}
        show(i, "PCIe width max", pw.get("max"), smi_value(s["pcie.link.width.max"]))
        show(i, "PCIe width current", pw.get("current"), smi_value(s["pcie.link.width.current"]),
             stable=False)
        rr = g.get("remappedRows") or {}
        if b in rows:
            cor, unc, pend, fail = rows[b]
            show(i, "remapped rows cor/unc", "%s/%s" % (rr.get("correctable"), rr.get("uncorrectable")),
                 "%s/%s" % (smi_value(cor), smi_value(unc)))
            show(i, "remap pending", rr.get("pending"), {"enabled": True, "disabled": False}.get(
                smi_value(pend), smi_value(pend)))
            show(i, "remap failure", rr.get("failureOccurred"), {"enabled": True, "disabled": False}.get(
                smi_value(fail), smi_value(fail)))
        nl = g.get("nvlink") or {}
        if i in links:
            show(i, "NVLinks active/listed", "%s/%s" % (nl.get("active"), nl.get("supported")),
                 "%d/%d" % (links[i][1], links[i][0]))
        else:
            show(i, "NVLinks", nl.get("state", nl.get("active")), "none listed")
        print("GPU %s %-28s preflight %s" % (i, "clock event reasons", g.get("clocksEventReasons")))
    print("inventory: %s" % ev.get("inventory"))
    print("xid: %s" % (ev.get("xid") or {}).get("state"))
    print("findings: %s" % [(f["code"], f["message"]) for f in chk.get("findings") or []])
    return 1 if differs else 0


if __name__ == "__main__":
    sys.exit(main())
