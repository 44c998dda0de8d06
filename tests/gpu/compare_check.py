#!/usr/bin/env python3
"""`preflight check`'s view of the GPUs (environment.gpus, gpu.devices' evidence) set against
nvidia-smi on the same machine: count, PCI bus ids, models, UUIDs and the driver version.
Prints one line per fact and exits 1 on any difference.
  compare_check.py VERDICT.yaml [VERDICT-WITH-NCCL_MNNVL_ENABLE=1.yaml]
The second verdict's gpu.fabric (NVML's fabric state) is printed beside nvidia-smi -q's
Fabric section."""
import subprocess
import sys

import yaml


def bus(b):
    # nvidia-smi: 00000000:2A:00.0; sysfs and preflight: 0000:2a:00.0
    b = b.strip().lower()
    dom, rest = b.split(":", 1) if b.count(":") == 2 else ("0", b)
    return "%04x:%s" % (int(dom, 16), rest)


def main():
    v = yaml.safe_load(open(sys.argv[1]))
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=pci.bus_id,name,uuid,driver_version",
                              "--format=csv,noheader"], capture_output=True, text=True).stdout
    except OSError as e:
        print("nvidia-smi: %s" % e)
        return 1
    want = []
    for line in smi.strip().splitlines():
        b, name, uuid, drv = [x.strip() for x in line.split(",")]
        want.append({"busId": bus(b), "model": name, "uuid": uuid, "driver": drv})
    dev = next((c for c in v.get("checks") or [] if c.get("id") == "gpu.devices"), {})
    ev = dev.get("evidence") or {}
    have = {g.get("busId"): g for g in ev.get("gpus") or (v.get("environment") or {}).get("gpus") or []}
    bad = 0
    print("gpu.devices: %s: %s" % (dev.get("status"), dev.get("message")))
    if len(have) != len(want):
        print("MISMATCH count: preflight %d, nvidia-smi %d" % (len(have), len(want)))
        bad += 1
    else:
        print("count: %d on both" % len(want))
    for w in want:
        h = have.get(w["busId"])
        if not h:
            print("MISMATCH %s: nvidia-smi has it, preflight does not" % w["busId"])
            bad += 1
            continue
        for k in ("model", "uuid"):
            if (h.get(k) or "") != w[k]:
                print("MISMATCH %s %s: preflight %r, nvidia-smi %r" % (w["busId"], k, h.get(k), w[k]))
                bad += 1
            else:
                print("%s %s: %s on both" % (w["busId"], k, w[k]))
        if h.get("devNode") is not None:
            print("%s devNode: %s inPod %s" % (w["busId"], h.get("devNode"), h.get("inPod")))
    drv = ev.get("driverVersion")
    if want and drv != want[0]["driver"]:
        print("MISMATCH driver: preflight %r, nvidia-smi %r" % (drv, want[0]["driver"]))
        bad += 1
    elif want:
        print("driver: %s on both" % drv)
    for c in v.get("checks") or []:
        if c.get("id") in ("gpu.fabric", "topology.locality", "nccl.library", "sys.shm"):
            print("%s: %s: %s" % (c["id"], c.get("status"), c.get("message")))
    if len(sys.argv) > 2:
        try:
            v2 = yaml.safe_load(open(sys.argv[2]))
            f = next((c for c in v2.get("checks") or [] if c.get("id") == "gpu.fabric"), {})
            print("gpu.fabric with NCCL_MNNVL_ENABLE=1: %s: %s %s" % (f.get("status"), f.get("message"),
                                                                  f.get("evidence") or ""))
        except Exception as e:  # noqa: BLE001
            print("gpu.fabric with NCCL_MNNVL_ENABLE=1: no verdict: %s" % e)
        q = subprocess.run(["nvidia-smi", "-q"], capture_output=True, text=True).stdout.splitlines()
        for i, line in enumerate(q):
            if line.strip().startswith("Fabric"):
                print("nvidia-smi -q: " + " / ".join(x.strip() for x in q[i:i + 6]))
                break
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
