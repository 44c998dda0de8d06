#!/usr/bin/env python3
"""A DRA network driver's node-side part, for the tests' fake nodes (no kubelet plugin runs).

    dra_driver.py NAMESPACE POD POD-NETNS HOST-NETNS DRIVER [SKIP-CLAIM/REQUEST...]

What a DRA network driver (kubernetes-sigs/dranet, driver name "dra.net") does when the kubelet
asks it to prepare a pod's claims (NodePrepareResources): for every device of DRIVER that the
scheduler allocated to the pod's ResourceClaims (status.allocation.devices.results), the
interface its ResourceSlice describes (attributes dra.net/ifName and dra.net/ipv4) is put into
the pod's network namespace, up, with its address (here: one end of a veth whose other end is in
HOST-NETNS), and the claim's status.devices gets an entry for the device with its networkData
(interfaceName, ips, hardwareAddress) and a Ready condition, written through the status
subresource as the driver does (k8s.io/api resource/v1 types.go, AllocatedDeviceStatus and
NetworkDeviceData, at v0.37.2 = Kubernetes v1.37.2). The interface of a device allocated for a
request named in SKIP (claim/request) is left out of the namespace but still reported in
status: a driver that reports a device it did not deliver. The claims are the pod's as the API server stores them: spec.resourceClaims[]
.resourceClaimName, status.resourceClaimStatuses[].resourceClaimName (from templates) and
status.extendedResourceClaimStatus.resourceClaimName (extended resources backed by DRA).
Prints one JSON object: {claim: [[request, device, ifName, ip], ...]}. kubectl: $KUBECTL.
"""
import json
import os
import subprocess
import sys
import time


def kubectl(*args, data=None):
    p = subprocess.run([os.environ["KUBECTL"], *args], input=data, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit("kubectl %s: %s" % (" ".join(args), p.stderr.strip()))
    return p.stdout


def ip(*args):
    subprocess.run(["ip", *args], check=True)


def main():
    ns, pod, podns, hostns, driver = sys.argv[1:6]
    skip = set(sys.argv[6:])
    p = json.loads(kubectl("get", "pod", "-n", ns, pod, "-o", "json"))
    claims = [c["resourceClaimName"] for c in p["spec"].get("resourceClaims") or [] if c.get("resourceClaimName")]
    claims += [c["resourceClaimName"] for c in p["status"].get("resourceClaimStatuses") or [] if c.get("resourceClaimName")]
    ext = (p["status"].get("extendedResourceClaimStatus") or {}).get("resourceClaimName")
    if ext:
        claims.append(ext)
    slices = json.loads(kubectl("get", "resourceslices.v1.resource.k8s.io", "-o", "json"))["items"]
    devs = {}
    for s in slices:
        if s["spec"]["driver"] != driver or s["spec"].get("nodeName") != p["spec"]["nodeName"]:
            continue
        for d in s["spec"].get("devices") or []:
            devs[(s["spec"]["pool"]["name"], d["name"])] = d.get("attributes") or {}
    out = {}
    n = 0
    for c in claims:
        claim = json.loads(kubectl("get", "resourceclaims.v1.resource.k8s.io", "-n", ns, c, "-o", "json"))
        status = []
        for r in ((claim.get("status") or {}).get("allocation") or {}).get("devices", {}).get("results") or []:
            if r["driver"] != driver:
                continue
            a = devs[(r["pool"], r["device"])]
            ifn, addr = a[driver + "/ifName"]["string"], a[driver + "/ipv4"]["string"]
            mac = "02:00:00:00:%02x:%02x" % (os.getpid() % 256, n)
            n += 1
            if "%s/%s" % (c, r["request"]) not in skip:
                ip("link", "add", "h%d-%s" % (n, ifn)[:15], "netns", hostns, "type", "veth", "peer",
                   "name", ifn, "netns", podns)
                ip("-n", podns, "link", "set", ifn, "address", mac)
                ip("-n", podns, "addr", "add", addr, "dev", ifn)
                ip("-n", podns, "link", "set", ifn, "up")
                ip("-n", hostns, "link", "set", "h%d-%s" % (n, ifn)[:15], "up")
            now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
            status.append({"driver": r["driver"], "pool": r["pool"], "device": r["device"],
                           "conditions": [{"type": "Ready", "status": "True", "reason": "NetworkReady",
                                           "message": "", "lastTransitionTime": now}],
                           "networkData": {"interfaceName": ifn, "ips": [addr], "hardwareAddress": mac}})
            out.setdefault(c, []).append([r["request"], "%s/%s/%s" % (r["driver"], r["pool"], r["device"]), ifn, addr])
        if status:
            kubectl("patch", "resourceclaims.v1.resource.k8s.io", "-n", ns, c, "--subresource=status",
                    "--type=merge", "-p", json.dumps({"status": {"devices": status}}))
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main()
