#!/usr/bin/env python3
"""The tables of tests/gpu/device-check.sh, in Markdown for docs/performance.md, from its
results.jsonl: the machine; the all-reduce side by side (preflight, nccl-tests out of place,
torch.distributed) by size, with preflight / nccl-tests; the other collectives; four ranks;
the failure paths; and every preflight run's outcome.
  summary.py RESULTS.jsonl OUTDIR"""
import json
import sys


def load(path):
    out = []
    for line in open(path):
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def human(b):
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= div and b % div == 0:
            return "%d %s" % (b // div, unit)
    return "%d B" % b


def fmt(x, nd=2):
    return "—" if x is None else ("%.*f" % (nd, x))


def pf_entries(rows, tag_prefix, op="allreduce"):
    """preflight's collectives entries of rank 0, by bytes, from runs whose tag starts so"""
    out = {}
    for r in rows:
        if r.get("kind") == "preflight" and r.get("rank") == 0 and r.get("tag", "").startswith(tag_prefix):
            for c in r.get("collectives") or []:
                if c.get("op") == op:
                    out[int(c.get("bytes") or 0)] = (c, r)
    return out


def main():
    rows = load(sys.argv[1])
    m = next((r for r in rows if r.get("kind") == "machine"), {})
    lay = next((r.get("layout") for r in rows if r.get("kind") == "layout"), "?")
    t = m.get("torch") or {}
    pfv = next((r.get("ncclVersion") for r in rows if r.get("kind") == "preflight" and r.get("ncclVersion")), "?")
    print("## GPU device check\n")
    print("Machine: %s, driver %s, CUDA %s (driver), kernel %s; NCCL %s (%s); torch %s (CUDA %s)." % (
        m.get("gpu"), m.get("driver"), m.get("cuda"), m.get("kernel"), pfv, m.get("torchNcclLib") or "?",
        t.get("torch", "—"), t.get("cuda", "—")))
    print("Layout: %s: ranks on the one GPU, told apart as nodes, NET/Socket between them." % lay)
    print("nccl.library without PREFLIGHT_NCCL_LIB: %s\n" % m.get("ncclAuto"))

    def side_by_side(n, pf_prefix, nt_tag, torch_tag):
        pf = pf_entries(rows, pf_prefix)
        nt = {r["bytes"]: r for r in rows if r.get("kind") == "nccl-tests" and r.get("tag") == nt_tag and "bytes" in r}
        tt = {r["bytes"]: r for r in rows if r.get("kind") == "torch" and r.get("tag") == torch_tag}
        sizes = sorted(set(pf) | set(nt) | set(tt))
        if not sizes:
            print("(no all-reduce figures at %d ranks)\n" % n)
            return
        print("### All-reduce, %d ranks: busbw GB/s (time per iteration)\n" % n)
        print("| bytes | preflight | nccl-tests out of place | nccl-tests in place | torch.distributed | preflight / nccl-tests | exact |")
        print("|---:|---:|---:|---:|---:|---:|---|")
        for s in sizes:
            p = pf.get(s, (None, None))[0]
            q = nt.get(s)
            o = tt.get(s)
            ratio = (p["busbwGBps"] / q["busbwGBps"]) if p and q and q.get("busbwGBps") else None
            print("| %s | %s | %s | %s | %s | %s | %s |" % (
                human(s),
                "%s (%s us)" % (fmt(p.get("busbwGBps")), p.get("timeUs")) if p else "—",
                "%s (%s us)" % (fmt(q["busbwGBps"]), q["timeUs"]) if q else "—",
                "%s (%s us)" % (fmt(q["inplaceBusbwGBps"]), q["inplaceTimeUs"]) if q else "—",
                "%s (%s us)" % (fmt(o.get("busbwGBps")), o.get("timeUs")) if o else "—",
                fmt(ratio, 3) + "×" if ratio else "—",
                "preflight %s, nccl-tests #wrong %s, torch %s" % (
                    p.get("correct") if p else "—", q.get("wrong") if q else "—",
                    o.get("correct") if o else "—")))
        print()
        errs = [r for r in rows if r.get("tag") == nt_tag and r.get("error")]
        for e in errs:
            print("nccl-tests %s: error: %s\n" % (nt_tag, e["error"]))

    side_by_side(2, "pf-ar2-", "nt-ar2", "torch-ar2")
    side_by_side(4, "pf-ar4-", "nt-ar4", "torch-ar4")

    print("### Other collectives, 2 ranks, 256 MiB: busbw GB/s\n")
    print("| op | preflight | nccl-tests out of place | preflight / nccl-tests | exact |")
    print("|---|---:|---:|---:|---|")
    for op, nt_op in (("allreduce", "all_reduce"), ("allgather", "all_gather"),
                      ("reducescatter", "reduce_scatter"), ("alltoall", "alltoall")):
        p = next(iter(pf_entries(rows, "pf-coll2", op).values()), (None, None))[0]
        q = next((r for r in rows if r.get("kind") == "nccl-tests" and r.get("op") == nt_op
                  and r.get("tag") in ("nt-%s2" % nt_op, "nt-ar2") and r.get("bytes") == 268435456), None)
        ratio = (p["busbwGBps"] / q["busbwGBps"]) if p and q and q.get("busbwGBps") else None
        print("| %s | %s | %s | %s | %s |" % (op, fmt(p.get("busbwGBps")) if p else "—",
                                          fmt(q["busbwGBps"]) if q else "—",
                                          fmt(ratio, 3) + "×" if ratio else "—",
                                          p.get("correct") if p else "—"))
    print()

    print("### Failure paths\n")
    print("| case | rank | collective.nccl | codes | exit | wall | message |")
    print("|---|---:|---|---|---:|---:|---|")
    for tag, what in (("fail-noinit", "a rank never joins NCCL's init"),
                      ("fail-kill", "a rank killed mid all-reduce"),
                      ("fail-netib", "NCCL_NET=IB, no InfiniBand")):
        for r in rows:
            if r.get("kind") == "preflight" and r.get("tag") == tag:
                print("| %s | %d | %s | %s | %s | %s s | %s |" % (
                    what, r["rank"], r.get("status"), ", ".join(r.get("codes") or []), r.get("rc"),
                    r.get("wall"), (r.get("message") or r.get("error") or "").replace("|", "/")[:300]))
    print()

    print("### Every preflight run\n")
    print("| run | rank | verdict | collective.nccl | transport | exit | wall | not passing |")
    print("|---|---:|---|---|---|---:|---:|---|")
    for r in rows:
        if r.get("kind") == "preflight":
            tr = next((c.get("transport") for c in r.get("collectives") or []), None)
            print("| %s | %d | %s | %s | %s | %s | %s | %s |" % (
                r.get("tag"), r["rank"], r.get("verdict"), r.get("status"), tr, r.get("rc"),
                r.get("wall"), ", ".join(r.get("failing") or []) or r.get("error", "")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
