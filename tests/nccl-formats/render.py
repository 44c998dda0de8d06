#!/usr/bin/env python3
"""Renders every NCCL format string of formats.tsv (extracted from NVIDIA/nccl's source by
extract.py) into NCCL_DEBUG=INFO lines and checks what `preflight log` read in them.

    render.py logs OUTDIR     writes OUTDIR/VARIANT-N.log and OUTDIR/expect.json
    render.py check OUTDIR    compares OUTDIR/VARIANT-N.yaml (`preflight log --format yaml
                              --verdict -` of each log) with expect.json; exit 1 on a mismatch

Each row becomes one NCCL process (its own host and pid), so each rendered line is judged alone:
the process's evidence (network, HCAs, interfaces, ranks, GPUDirect RDMA, NET channels, NVLS,
CollNet, version) and its host's transport must be what the line means, as NCCL's source at that
tag says. Values are realistic (rank 3 of 16, mlx5_0, eth0:10.0.0.5) and follow the call's
arguments where they matter (2.21+ prints comm->nChannels as the CollNet channel count). Lines
are written with NCCL's prefix `host:pid:tid [dev] NCCL INFO` and under launcher prefixes and
colour codes (VARIANTS).

WARN rows (NCCL's WARN and aws-ofi-nccl's NCCL_OFI_WARN formats the reader gives a kind) become
NCCL's WARN line `host:pid:tid [dev] FILE:LINE NCCL WARN msg` after the blank line NCCL writes
first (src/debug.cc): `FILE:LINE (func)` from 2.30.7, with the default `[%F %T] ` timestamp in
front from 2.26.2 (NCCL_DEBUG_TIMESTAMP_LEVELS defaults to WARN there); aws-ofi-nccl passes its
__PRETTY_FUNCTION__ as the file. The process's warnings list, its host's warningsByKind and the
host's nccl-warn finding must name the line and the kind its format string means.
"""
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from extract import warn_text  # noqa: E402  the macro NCCL stringizes into a WARN
CHUNK = 200  # processes per log: preflight's evidence lists the first 256
VERSION = "2.21.5"

# how a launcher or collector wraps NCCL's line; {l} is NCCL's own line
VARIANTS = {
    "plain": "{l}",
    "ompi": "[1,{r}]<stdout>:{l}",
    "kubectl": "[pod/trainer-{r}/main] {l}",
    "colour": "\x1b[0;36m{l}\x1b[0m",
    "torchrun": "[default{r}]:{l}",
}


def load():
    rows = []
    with open(os.path.join(HERE, "formats.tsv")) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            t = line.rstrip("\n").split("\t")
            un = lambda s: s.replace("\\t", "\t").replace("\\n", "\n").replace("\\\\", "\\")
            rows.append(dict(first=t[0], last=t[1], file=t[2], level=t[3], key=t[4],
                             fmt=un(t[5]), args=[a.strip() for a in un(t[6]).split(" ; ")]
                             if t[6] else []))
    return rows


CONV = re.compile(r"%(%|[-+ #0]*\d*(?:\.\d+)?(?:hh|h|ll|l|z|t|j)?[diouxXfspc])")


def str_value(row, before, arg):
    """A realistic string for %s, from the text before it and the argument's expression."""
    f, fmt, b = row["file"], row["fmt"], before
    if "VERSION_STRING" in arg:
        return "NCCL version %s+cuda12.4" % VERSION
    if b.endswith("COLLNET/"):
        return "SHARP"
    if b.endswith("NET/"):
        return "IB"
    if b.endswith("P2P/"):
        return "CUMEM"
    if row["key"] == "dev-list":  # " [%d]%s:%d/%s", " [%d]%s:%s", "[%d] %s:%d/%s%s"
        if b.endswith("]") or b.endswith("] "):
            return "mlx5_0" if "net_ib" in f else "eth0"
        if b.endswith("/"):
            return "IB"
        return "10.0.0.5<0>" if b.endswith(":") else ""
    if b.endswith("rovider is ") or b.endswith("fabric is "):  # aws-ofi-nccl
        return "efa"
    if b.endswith("Bootstrap: Using "):
        return "mlx5_0"
    if b.endswith("Using network ") or b.endswith("internal Network "):
        return "IB"
    if b.endswith("Assigned NET plugin "):
        return "IBext_v8"
    if b.endswith("Loaded collnet plugin "):
        return "SHARP"
    if b.endswith("plugin ") or b.endswith("backend "):
        return "gin_ib"
    if b.endswith("Using") and ("net_ib" in f):
        return " [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE"
    if b.endswith("Using") and ("socket" in f or "bootstrap" in f):
        return " [0]eth0:10.0.0.5<0>" if "socket" in f else " eth0:10.0.0.5<0>"
    if b.endswith("Using ") and "bootstrap" in f:
        return "eth0"
    if b.endswith("OOB "):
        return "eth0"
    if re.search(r"OOB %s:$", b):
        return "10.0.0.5<0>"
    if b.endswith("Using interface "):
        return "eth0:10.0.0.5<0>" if "sideband" not in fmt else "eth0"
    if b.endswith("Using interface eth0:") or b.endswith("interface eth0:10.0.0.5<0>:"):
        return "10.0.0.5<0>"
    if b.endswith(" ") and fmt[len(b):].startswith("%s; OOB"):
        return "[RO]"
    if re.search(r"HCA (%d )?'?$", b) or b.endswith("HCA "):
        return "mlx5_0"
    if b.endswith("/") and "NET/IB: [" in fmt:
        return "IB"
    if "NET/IB: [" in fmt and b.endswith("] "):
        return "mlx5_0"
    if "NET/IB: [" in fmt and b.endswith(":") and "provider" in fmt[len(b):]:
        return "uverbs0"
    if b.endswith("provider="):
        return "Mlx5"
    if b.endswith("pciPath="):
        return "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0"
    if b.endswith("NCCL_HOSTID set by environment to "):
        return "node-7"
    if "set by environment" in fmt and b == "":
        return "NCCL_IB_DISABLE"
    if "comm %p" in fmt and b in ("", "[Rank 3] "):
        return "ncclCommInitRank"
    if "Init timings - " in b:
        return "ncclCommInitRank"
    if b.endswith("support is "):
        return ""
    if b.endswith("mode "):
        return "Default"
    if b.endswith(" - ") and "COMPLETE" in fmt:
        return "Init"
    if b.endswith("socket at "):
        return "127.0.0.1<28028>"
    if "gpuNetMsg" in arg:
        return ("GPU/0-1 (rank 3) - NET/0-0 (distance 3 <= 4, read 1, mode Default)"
                if "Enabled" in fmt else "GPU/0-1 (rank 3) - NET/0-0 (distance 5 > 4)")
    if "disableEnv" in arg or "levelEnv" in arg:
        return "NCCL_P2P_LEVEL"
    if b.endswith("rack serial "):
        return "1234"
    return ""


ARG_VALUES = {"comm->nChannels": 16, "comm->collNetChannels": 16, "comm->nvlsChannels": 16,
              "comm->p2pnChannels": 32, "comm->p2pnChannelsPerPeer": 2}


def warn_str_value(row, before, arg):
    """A realistic string for a WARN's %s: what the argument names, no word of another kind."""
    a, b = arg, before
    if "strerror" in a:
        return "No route to host"
    if "ibvWcStatusStr" in a or "wc->status" in a or "wcs[" in a:
        return "transport retry counter exceeded"
    if "ibvAsyncEventStr" in a or "event" in a.lower():
        return "local catastrophic error"
    if "cudaGetErrorString" in a or "cuGetErrorString" in a or "errStr" in a:
        return "an illegal memory access was encountered"
    if "fi_strerror" in a:
        return "Input/output error"
    if "ncclGetErrorString" in a:
        return "invalid usage"
    if "SocketToString" in a or "addr" in a.lower() or b.endswith("to ") or b.endswith("from "):
        return "10.0.0.6<43521>"
    if "devName" in a or "ibv_get_device_name" in a or "dev" in a.lower():
        return "mlx5_0"
    if "path" in a.lower() or "name" in a.lower() or "file" in a.lower():
        return "nccl-AbCdEf"
    if "env" in a.lower() or b.endswith("NCCL_"):
        return "NCCL_IB_HCA"
    if "func" in a.lower() or "__" in a:
        return "ncclProxyConnect"
    return "x"


def num_value(row, before, arg, conv):
    if arg in ARG_VALUES:
        return ARG_VALUES[arg]
    b = before
    if conv.endswith("f"):
        return 1.25
    if conv.endswith("p"):
        return "0x55d0c8a3e0f0"
    for word, v in (("nranks ", 16), ("nRanks ", 16), ("nNodes ", 2), ("localRanks ", 8),
                    ("localRank ", 3), ("rank ", 3), ("Rank ", 3), ("cudaDev ", 3), ("nvmlDev ", 3),
                    ("busId ", 0x1B000), ("busId 0x", 0x1B000), ("commId 0x", 0x7D9F3A2B1C),
                    ("Channel ", 0), ("Ring ", 0), ("CollNet ", 0), (" -> ", 11), (": ", 3),
                    ("dev ", 3), ("GPU ", 3), ("HCA ", 0), ("Head ", 0), ("[", 3)):
        if b.endswith(word):
            return v
    return 1


def render(row):
    """NCCL's message for row (without NCCL's prefix)."""
    fmt = row["fmt"]
    fmt = (fmt.replace("{STR(NCCL_MAJOR)}", VERSION.split(".")[0])
              .replace("{STR(NCCL_MINOR)}", VERSION.split(".")[1])
              .replace("{STR(NCCL_PATCH)}", VERSION.split(".")[2])
              .replace("{NCCL_SUFFIX}", "").replace("{STR(CUDA_MAJOR)}", "12")
              .replace("{STR(CUDA_MINOR)}", "4"))
    if row["level"] == "WARN":
        fmt = warn_text(row["file"], fmt)
    fmt = re.sub(r"\{PRI([diuxX])(8|16|32|64)\}", r"l\1", fmt)
    fmt = re.sub(r"\{[A-Za-z_()0-9]*\}", "", fmt)
    out, pos, ai = [], 0, 0
    for m in CONV.finditer(fmt):
        out.append(fmt[pos:m.start()])
        pos = m.end()
        conv = m.group(1)
        if conv == "%":
            out.append("%")
            continue
        arg = row["args"][ai] if ai < len(row["args"]) else ""
        ai += 1
        before = fmt[:m.start()]
        if conv.endswith("s"):
            out.append(warn_str_value(row, before, arg) if row["level"] == "WARN" else
                       str_value(row, before, arg))
        elif conv.endswith("c"):
            out.append("x")
        else:
            v = num_value(row, before, arg, conv)
            pc = re.sub(r"(hh|h|ll|l|z|t|j)", "", conv).replace("u", "d").replace("i", "d")
            out.append(v if isinstance(v, str) else ("%" + pc) % v)
    out.append(fmt[pos:])
    return "".join(out)


def expect(row, msg):
    """What `preflight log` must read in msg: process and host evidence (None: absent)."""
    k, e = row["key"], {}
    none = dict(transport="none", netChannels=None, nvls=False, collnet=False)
    if k == "version":
        e.update(none, ncclVersion=VERSION)
    elif k == "channel":
        m = re.search(r" via (\S+)", msg)
        via = m.group(1)
        if via.startswith("NET/"):
            e.update(network="IB", netChannels="1 (0 GDRDMA)", transport="IB", transportClass="rdma")
        elif via.startswith("P2P/"):
            e.update(none, p2p=1)
        else:  # SHM/..., 2.3-2.5's "direct shared memory"
            e.update(none, shm=1)
    elif k == "collnet-channel":
        e.update(collnet=True, netChannels=None)
    elif k in ("using-network",):
        e.update(network="IB", transport="IB", transportClass="rdma")
    elif k == "assigned-net":
        e.update(network="IBext_v8", transport="IBext_v8", transportClass="rdma")
    elif k == "net-ib-using":
        if "sideband" in msg:
            e.update(hcas=None)
        elif msg.startswith("NET/IB: ["):
            e.update(hcas=["mlx5_0:1/IB"])
        else:
            e.update(hcas=["mlx5_0:1/IB", "mlx5_1:1/RoCE"], interfaces=["eth0:10.0.0.5"])
    elif k == "net-ib-none":
        e.update(transport="Socket", transportClass="socket")
    elif k == "net-socket-using":
        if "threads" in msg:
            e.update(none, interfaces=None)
        else:
            e.update(none, interfaces=["eth0:10.0.0.5"])
    elif k == "bootstrap-using":  # 2.24+'s "Bootstrap: Using mlx5_0:1": the OOB net device
        e.update(none, bootstrap="eth0:10.0.0.5" if "<" in msg else "mlx5_0:1")
    elif k == "gdr":
        e.update(none, gpuDirectRdma="Enabled" in msg)
    elif k in ("comm-init", "nnodes"):
        e.update(none, ranks="3" if re.search(r"(?<![A-Za-z])[Rr]ank %d", row["fmt"]) else None)
        if row["fmt"].startswith("NVLS "):  # NVLS buffers or multicast groups set up
            e.update(nvls=True)
    elif k == "init-timings":
        e.update(none, ranks="3")
    elif k == "channels-count":
        # 2.20 prints comm->collNetChannels; 2.21 on print comm->nChannels there: no CollNet
        e.update(none, collnet=row["args"][1:2] == ["comm->collNetChannels"],
                 nvls="nvls channels" in msg)
    elif k in ("nvls-head", "nvls-comm", "connected-nvls"):
        e.update(none, nvls=True)
    elif k == "connected-collnet":
        e.update(none, collnet=True)
    elif k == "ofi-provider":  # aws-ofi-nccl over EFA: libfabric, RDMA
        e.update(ofiProvider="efa", transport="Libfabric", transportClass="rdma")
    elif k == "collnet-plugin":
        e.update(none, sharp=True)
    elif k == "param-env":
        e.update(none, ncclHostId="node-7" if "NCCL_HOSTID" in msg else None)
    else:  # nvls-cap, connected-rings, *-ignored: understood, no transport
        e.update(none, network=None, hcas=None, interfaces=None, gpuDirectRdma=None)
    return e


def lines_of(rows):
    """(row, message, extra bare lines) for every row; dev-list pieces go inside their line."""
    out = []
    for r in rows:
        msg = render(r)
        if r["level"] == "WARN":  # the reader reads a WARN's first line: NCCL's own ends with \n
            msg = msg.split("\n")[0].strip()
            out.append((r, msg, dict(warnKind=r["key"][len("warn-"):])))
            continue
        if r["key"] == "dev-list":
            if "net_ib" in r["file"]:
                body = msg if msg.endswith("}") or "/" in msg else msg + "/IB"
                if "={" in r["fmt"] and not msg.endswith("}"):
                    continue  # the opening " [%d]={" alone: rendered with its entries below
                msg = "NET/IB : Using%s%s [RO]; OOB eth0:10.0.0.5<0>" % (
                    "" if body.startswith(" ") else " [0]={", body + ("" if body.startswith(" ") else "}"))
                rr = dict(r, key="net-ib-using")
                out.append((rr, msg, {"hcas": ["mlx5_0:1/IB"], "interfaces": ["eth0:10.0.0.5"]}))
            else:
                what = "NET/Socket : Using" if "socket" in r["file"] else "Bootstrap : Using"
                out.append((dict(r, key="dev-list"), what + msg,
                            {"interfaces": ["eth0:10.0.0.5"]} if "Socket" in what else
                            {"bootstrap": "eth0:10.0.0.5"}))
            continue
        if r["key"] == "nvls-head":  # then " %2d" for each node's head rank
            msg += "  0  8"
        out.append((r, msg, expect(r, msg)))
        if r["key"] == "channel" and "P2P/%s" in r["fmt"]:  # 2.2x's P2P/MNNVL across nodes
            out.append((r, msg.replace("P2P/CUMEM", "P2P/MNNVL"), expect(r, msg)))
    return out


def tag_version(tag):
    if not tag.startswith("v2."):  # an aws-ofi-nccl tag: NCCL of its time
        return VERSION
    return re.match(r"v(\d+\.\d+\.\d+)", tag).group(1)


def vtuple(v):
    return tuple(int(x) for x in v.split("."))


def warn_where(row, ver):
    """What NCCL writes between [dev] and NCCL WARN: FILE:LINE, FILE:LINE (func) from 2.30.7;
    aws-ofi-nccl logs its __PRETTY_FUNCTION__ as the file."""
    if row["file"].startswith("aws-ofi-nccl:"):
        return "int nccl_net_ofi_rdma_init(const char*, bool, int*):1234"
    f = row["file"][4:] if row["file"].startswith("src/") else row["file"]
    return "%s:%d%s" % (f, 321, " (ncclProxyConnect)" if vtuple(ver) >= (2, 30, 7) else "")


def cmd_logs(outdir):
    rows = load()
    items = lines_of(rows)
    os.makedirs(outdir, exist_ok=True)
    exp = {}
    for vname, wrap in VARIANTS.items():
        for c in range(0, len(items), CHUNK):
            name = "%s-%d" % (vname, c // CHUNK)
            with open(os.path.join(outdir, name + ".log"), "w") as f:
                for i, (r, msg, e) in enumerate(items[c:c + CHUNK]):
                    n = c + i
                    host, pid = "fmt%03d" % n, 1000 + n
                    w = lambda l: f.write(wrap.format(l=l, r=n) + "\n")
                    ver = tag_version(r["first"])
                    e = dict(e, ncclVersion=ver)
                    if r["level"] == "DEFINE":  # NCCL_DEBUG=VERSION's bare line, then an INFO
                        w("%s:%d:%d [0] NCCL INFO cudaDriverVersion 12040" % (host, pid, pid + 7))
                        w(msg.replace(VERSION, ver))
                    elif r["level"] == "WARN":
                        w("%s:%d:%d [3] NCCL INFO NCCL version %s+cuda12.4" % (host, pid, pid + 7,
                                                                              ver))
                        where = warn_where(r, ver)
                        f.write("\n")  # NCCL's WARN starts with a newline
                        w("%s%s:%d:%d [3] %s NCCL WARN %s" % (
                            "[2026-11-26 22:49:32] " if vtuple(ver) >= (2, 26, 2) else "",
                            host, pid, pid + 7, where, msg))
                        e = dict(e, warning=where + " " + msg)
                    elif r["key"] == "version":
                        w("%s:%d:%d [3] NCCL INFO %s" % (host, pid, pid + 7,
                                                         msg.replace(VERSION, ver)))
                    else:  # the process's version first: some lines mean what their tag says
                        w("%s:%d:%d [3] NCCL INFO NCCL version %s+cuda12.4" % (host, pid, pid + 7,
                                                                              ver))
                        w("%s:%d:%d [3] NCCL INFO %s" % (host, pid, pid + 7, msg))
                    exp.setdefault(name, []).append(
                        dict(host=host, pid=pid, row="%s..%s %s %s: %s" % (
                            r["first"], r["last"], r["file"], r["key"], r["fmt"]), line=msg,
                             expect=e))
    with open(os.path.join(outdir, "expect.json"), "w") as f:
        json.dump(exp, f, indent=1)
    print("%d formats, %d lines, %d logs" % (len(rows), len(items), len(exp)))


def cmd_check(outdir):
    import yaml
    exp = json.load(open(os.path.join(outdir, "expect.json")))
    bad = total = 0
    for name, procs in exp.items():
        d = yaml.safe_load(open(os.path.join(outdir, name + ".yaml")))
        c = [x for x in d["checks"] if x["id"] == "nccl.log"][0]
        ev = c.get("evidence") or {}
        byproc = {(p.get("host"), p.get("pid")): p for p in ev.get("processes") or []}
        byhost = {h.get("name"): h for h in ev.get("hosts") or []}
        for x in procs:
            total += 1
            p = byproc.get((x["host"], x["pid"]), {})
            h = byhost.get(x["host"], {})
            got = {}
            for k, want in x["expect"].items():
                if k == "warnKind":  # host's warningsByKind and nccl-warn finding
                    v = h.get("warningsByKind")
                    want = {want: 1}
                    f = "logged 1 NCCL WARN (1 %s): %s" % (want and x["expect"]["warnKind"],
                                                           x["expect"]["warning"])
                    fs = [y.get("message", "") for y in c.get("findings") or []
                          if y.get("code") == "nccl-warn" and
                          re.search(r"\b%s\b" % x["host"], y.get("message", ""))]
                    if len(fs) != 1 or not fs[0].endswith(f):
                        got["nccl-warn finding"] = (fs, "... " + f)
                elif k == "warning":
                    v, want = p.get("warnings"), [want]
                elif k in ("transport", "transportClass", "sharp"):
                    v = h.get(k)
                elif k in ("p2p", "shm"):
                    m = re.search(r"p2p (\d+), shm (\d+)", h.get("channels", ""))
                    v = int(m.group(1 if k == "p2p" else 2)) if m else None
                elif k in ("nvls", "collnet"):
                    v = bool(p.get(k) or h.get(k))
                else:
                    v = p.get(k)
                if v != want:
                    got[k] = (v, want)
            if got:
                bad += 1
                print("MISMATCH %s: %s\n  line: %r\n  %s" % (
                    name, x["row"], x["line"],
                    ", ".join("%s: got %r want %r" % (k, a, b) for k, (a, b) in got.items())))
    print("%d of %d rendered lines read as NCCL's source means" % (total - bad, total))
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("logs", "check"):
        sys.exit(__doc__)
    sys.exit(cmd_logs(sys.argv[2]) if sys.argv[1] == "logs" else cmd_check(sys.argv[2]))
