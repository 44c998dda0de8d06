#!/usr/bin/env python3
"""Writes rank 0's verdict of a job of N ranks as docs/verdict.md lays it out (the keys and
shapes pkg/verdict/emit.c, pkg/run/summary.c and pkg/fleet/rails.c write): for the HTML
report's tests and its bench.

  report_verdict.py N OUT [--slow-link F,T] [--slow-node K] [--evil] [--all-pairs]
                        [--checks C] [--rates]

Links: every rank probes the next three ranks and is probed by them (6 links a rank, as the
probe plan does for a large job), or every ordered pair with --all-pairs; about 9 Gb/s each,
0.04 Gb/s for the slow link and for every link of the slow node. A slow node is named a
culprit. --evil puts markup in the pod names, a message and a finding code. C checks a rank
(default 24). --rates writes the links as rank 0 does in a job of more than 48 measured links
(pkg/run/summary.c): linksMeasured, the 48 slowestLinks and every link in linkRates."""
import json
import sys


def q(s):
    return json.dumps(s)  # a JSON string is a YAML double-quoted scalar


def main():
    a = sys.argv[1:]
    n, out = int(a[0]), a[1]
    slow_link, slow_node, evil, all_pairs, nchecks, rates_form = None, None, False, False, 24, False
    i = 2
    while i < len(a):
        if a[i] == "--slow-link":
            slow_link = tuple(int(x) for x in a[i + 1].split(","))
            i += 2
        elif a[i] == "--slow-node":
            slow_node = int(a[i + 1])
            i += 2
        elif a[i] == "--checks":
            nchecks = int(a[i + 1])
            i += 2
        elif a[i] == "--evil":
            evil, i = True, i + 1
        elif a[i] == "--rates":
            rates_form, i = True, i + 1
        elif a[i] == "--all-pairs":
            all_pairs, i = True, i + 1
        else:
            raise SystemExit("unknown argument " + a[i])

    def pod(r):
        if evil and r == 1:
            return "trainer-1<script>window.pwned=1</script>"
        return "trainer-%d" % r

    pairs = []
    if all_pairs:
        pairs = [(f, t) for f in range(n) for t in range(n) if f != t]
    else:
        for f in range(n):
            for k in (1, 2, 3):
                if k < n:
                    pairs.append((f, (f + k) % n))
                    pairs.append(((f + k) % n, f))
        if slow_link:
            pairs.append(slow_link)
        pairs = sorted(set(pairs))

    def rate(f, t):
        if (f, t) == slow_link or slow_node in (f, t):
            return 0.04
        return round(9.0 + ((f * 7 + t * 13) % 10) / 10.0, 3)

    L = []
    w = L.append
    w("apiVersion: preflight/v1")
    w("kind: Verdict")
    w("verdict: %s" % ("fail" if slow_node is not None else "warn" if slow_link else "pass"))
    if slow_node is not None:
        w("failureClass: node")
    w("summary: %s" % q("1 of %d checks failed: collective.tcp" % nchecks))
    w('generatedAt: "2026-11-21T14:00:00Z"')
    w("durationSeconds: 3.2")
    w("pod: {name: %s, namespace: ml, node: node-0, rank: 0, worldSize: %d}" % (q(pod(0)), n))
    w("environment:")
    w("  kernel: Linux 6.1.0-13-amd64")
    w("  hostname: trainer-0")
    w("checks:")
    w("  - id: collective.tcp")
    w("    status: %s" % ("fail" if slow_node is not None else "warn" if slow_link else "pass"))
    w("    message: %s" % q("all-reduce of 16 MiB among %d ranks over TCP (eth0): busbw 1.100 GB/s" % n))
    w("    findings:")
    if slow_link:
        w("      - {code: slow-link, status: warn, message: %s, remedy: %s}" % (
            q("the link from rank %d (%s) to rank %d (%s) runs at 0.04 Gb/s" % (
                slow_link[0], pod(slow_link[0]), slow_link[1], pod(slow_link[1]))),
            q("look at the path between the two nodes")))
    if slow_node is not None:
        w("      - {code: slow-node, status: fail, message: %s, remedy: %s}" % (
            q("rank %d (%s): every link at 0.04 Gb/s" % (slow_node, pod(slow_node))),
            q("look at the node's NIC")))
    if evil:
        w("      - {code: %s, status: warn, message: %s, remedy: x}" % (
            q("code<b>bold</b>"), q("<img src=x onerror=\"window.pwned=2\"> & \u2028 </script>")))
    if not slow_link and slow_node is None and not evil:
        L[-1] = "    findings: []"
    w("    evidence:")
    w("      interface: eth0")
    rates = sorted(rate(f, t) for f, t in pairs)
    med = rates[len(rates) // 2] if len(rates) % 2 else (rates[len(rates) // 2 - 1] + rates[len(rates) // 2]) / 2
    w("      medianLinkGbps: %s" % round(med, 3))
    if rates_form and len(pairs) > 48:
        w("      linksMeasured: %d" % len(pairs))
        w("      slowestLinks:")
        for f, t in sorted(pairs, key=lambda p: rate(*p))[:48]:
            w("        - {from: %d, to: %d, gbps: %s}" % (f, t, rate(f, t)))
        w("      linkRates:")
        by = {}
        for f, t in pairs:
            by.setdefault(f, []).append("%d=%s" % (t, rate(f, t)))
        for f in sorted(by):
            w("        %s: %s" % (q(str(f)), " ".join(by[f])))
    else:
        w("      links:")
        for f, t in pairs:
            w("        - {from: %d, to: %d, gbps: %s}" % (f, t, rate(f, t)))
    w("  - id: net.rails")
    w("    status: pass")
    w("    message: %s" % q("2 of 2 rail probes to the ring neighbour went through: net1 95.2 Gb/s, net2 96 Gb/s"))
    w("    findings: []")
    w("    evidence:")
    w("      rails:")
    for k in (1, 2):
        w("        - network: rail-%d" % k)
        w("          interface: net%d" % k)
        w("          address: 10.%d.0.10/24" % k)
        w("          mtu: 9000")
        w("          up: true")
        w("          probe: {to: %s, gbps: %s}" % (q("rank 1 (%s) at 10.%d.0.11" % (pod(1), k)), 95.2 + k))
    w("      networks:")
    for k in (1, 2):
        w("        - {name: rail-%d, pods: %d, probed: %d, subnet: 10.%d.0.0/24, mtu: 9000, medianGbps: %s}"
          % (k, n, n, k, 95.0 + k))
    ids = ["collective.tcp", "net.rails"] + ["check.%02d" % c for c in range(max(0, nchecks - 2))]
    for c in ids[2:]:
        w("  - {id: %s, status: pass, message: %s, findings: []}" % (c, q("fine")))
    w("collectives:")
    w("  - {backend: tcp, op: allreduce, bytes: 16777216, ranks: %d, transport: TCP, algbwGBps: 0.6, busbwGBps: 1.1, correct: true}" % n)
    w("culprits:" + ("" if slow_node is not None else " []"))
    if slow_node is not None:
        w("  - {rank: %d, pod: %s, node: node-%d, reason: %s}" % (
            slow_node, q(pod(slow_node)), slow_node, q("every link of the node is slow (0.04 Gb/s)")))
    w("ranks:")
    for r in range(n):
        bad = r == slow_node
        w("  - rank: %d" % r)
        w("    pod: %s" % q(pod(r)))
        w("    node: node-%d" % r)
        w("    address: 10.213.%d.%d" % (r // 200, 10 + r % 200))
        w("    state: joined")
        w("    tcpSeconds: %s" % (0.41 + (r % 7) / 100))
        w("    verdict: %s" % ("fail" if bad else "pass"))
        w("    checksPassed: %d" % (nchecks - 1 if bad else nchecks))
        w("    checks:")
        for c in ids:
            if c == "collective.tcp" and bad:
                w("      - {id: %s, status: fail, findings: [slow-node]}" % c)
            else:
                w("      - {id: %s, status: pass, findings: []}" % c)
    with open(out, "w") as f:
        f.write("\n".join(L) + "\n")


if __name__ == "__main__":
    main()
