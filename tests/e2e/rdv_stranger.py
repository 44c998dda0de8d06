#!/usr/bin/env python3
"""A stranger on preflight's rendezvous and data ports, for tests/e2e/test_adversary.sh.

It speaks the wire format of pkg/wire/wire.c: a 16-byte header (magic "PFRV", version,
type, flags, a zero byte, sequence number and payload length, big-endian), a payload of fields
([u8 key length][key][u32 value length][value]) and, with flag 0x01, an HMAC-SHA256 keyed with
the run's token over "PFRVmac" + a direction byte, rank 0's nonce, the joiner's nonce, the
header and the payload's SHA-256 (protocol version 2). Protocol version 3: a rank's ROSTER
lists every rank in the run ("out": the ranks not in it, or "in": a bitmap) but holds the
records {rank, ip, port, pod, node} of the ranks it dials only (roster_decode). Protocol
version 4: a JOIN names its job (jobKind, jobNamespace, jobName, jobUid; absent: unknown).

Subcommands (every one bounded in count and in time; targets are addresses the test owns):
  join     connect to rank 0, read its HELLO, send a JOIN claiming a rank, with a MAC made
           from a wrong token (or none), and print rank 0's answer
  proxy    forward one joiner's connection to rank 0 and save the first frame the joiner
           sends (its JOIN) to a file
  replay   connect to rank 0, read its HELLO, send a saved frame byte for byte
  flood    open many connections that stay idle, send garbage, or start a JOIN that claims a
           large payload, send most of it and then trickle one byte a second
  cpu      CPU seconds (utime + stime) a process spends over a wall-clock window
  rss      sample a process's VmRSS and VmHWM until it exits
  fakeroot listen at rank 0's address for a while and answer every JOIN with a REJECT
           without MAC (what a stale DNS record or a reused pod IP can put there)
  freeport print a TCP port that is free on 127.0.0.1
"""
import argparse
import errno
import hashlib
import hmac
import json
import os
import selectors
import socket
import struct
import sys
import time

MAGIC = b"PFRV"
PROTO = 4  # 2: the MAC covers the payload's SHA-256 (docs/security.md); 3: per-rank rosters;
# 4: a JOIN names its job (jobKind, jobNamespace, jobName, jobUid)
HDR = 16
MACLEN = 32
NONCE = 16
F_MAC = 0x01
T_HELLO, T_JOIN, T_REJECT, T_ROSTER = 1, 2, 3, 4
T_DHELLO = 8
TYPE_NAMES = {1: "HELLO", 2: "JOIN", 3: "REJECT", 4: "ROSTER", 5: "STEP", 6: "RESULT",
              7: "SUMMARY", 8: "DHELLO"}
DIR_TO_ROOT = 0
MAX_JOIN = 256 << 10

MAX_CONNS = 5000  # no subcommand opens more connections at once than this
MAX_SECONDS = 180  # nor runs longer than this


def header(ftype, flags, seq, length):
    return MAGIC + bytes([PROTO, ftype, flags, 0]) + struct.pack(">II", seq, length)


def field(key, val):
    if isinstance(val, int):
        val = str(val)
    if isinstance(val, str):
        val = val.encode()
    k = key.encode()
    return bytes([len(k)]) + k + struct.pack(">I", len(val)) + val


def fields_decode(p):
    out, i = [], 0
    while i < len(p):
        kl = p[i]
        i += 1
        key = p[i:i + kl].decode("ascii", "replace")
        i += kl
        (vl,) = struct.unpack(">I", p[i:i + 4])
        i += 4
        out.append((key, p[i:i + vl]))
        i += vl
    return out


def mac(token, direction, nonce_s, nonce_c, hdr, payload):
    h = hmac.new(token.encode(), digestmod=hashlib.sha256)
    h.update(b"PFRVmac" + bytes([direction]))
    h.update(nonce_s)
    h.update(nonce_c)
    h.update(hdr)
    h.update(hashlib.sha256(payload).digest())
    return h.digest()


def roster_decode(payload, ranks=True):
    """A ROSTER payload (pkg/rendezvous/roster.c): {"run", "n", "world", "ranks": the ranks in
    the run in order (only with ranks: O(world) to list), "peers": {rank: {"ip", "port",
    "pod", "node"}} for the records sent}."""
    ro = {"run": b"", "n": 0, "world": 0, "ranks": [], "peers": {}}
    out = inn = None
    for k, v in fields_decode(payload):
        if k in ("n", "world"):
            ro[k] = int(v)
        elif k == "run":
            ro["run"] = v
        elif k == "out":
            out = {struct.unpack(">I", v[i:i + 4])[0] for i in range(0, len(v) - 3, 4)}
        elif k == "in":
            inn = v
        elif k == "m":
            m = dict(fields_decode(v))
            ro["peers"][int(m.get("rank", b"-1"))] = {
                "ip": m.get("ip", b"").decode(), "port": int(m.get("port", b"0")),
                "pod": m.get("pod", b"").decode(), "node": m.get("node", b"").decode()}
    if not ranks:
        pass
    elif out is not None:
        ro["ranks"] = [r for r in range(ro["world"]) if r not in out]
    elif inn is not None:
        ro["ranks"] = [r for r in range(ro["world"]) if inn[r // 8] >> (r % 8) & 1]
    return ro


def frame_size(buf):
    """Size of the complete frame at the start of buf, 0 when more bytes are needed, -1 when
    the bytes are not a preflight frame."""
    if buf[:min(4, len(buf))] != MAGIC[:min(4, len(buf))]:
        return -1
    if len(buf) < HDR:
        return 0
    (length,) = struct.unpack(">I", buf[12:16])
    total = HDR + length + (MACLEN if buf[6] & F_MAC else 0)
    return total if len(buf) >= total else 0


def recv_frame(s, deadline):
    """One frame from a blocking socket: (type, fields, raw bytes) or None at the deadline or
    at the end of the stream."""
    buf = b""
    while True:
        n = frame_size(buf)
        if n < 0:
            return None
        if n > 0:
            raw = buf[:n]
            length = struct.unpack(">I", raw[12:16])[0]
            try:
                fl = fields_decode(raw[HDR:HDR + length])
            except (struct.error, IndexError):
                fl = []
            return raw[5], fl, raw
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        s.settimeout(left)
        try:
            b = s.recv(65536)
        except (socket.timeout, OSError):
            return None
        if not b:
            return None
        buf += b


def connect(to, src=None, timeout=5.0):
    host, port = to.rsplit(":", 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if src:
        s.bind((src, 0))
    s.settimeout(timeout)
    s.connect((host, int(port)))
    return s


def describe(fr):
    if fr is None:
        return "no answer (connection closed or nothing within the wait)"
    t, fl, _ = fr
    text = ", ".join(f"{k}={v.decode('utf-8', 'replace')}" for k, v in fl
                     if k in ("code", "message"))
    return f"{TYPE_NAMES.get(t, t)}" + (f" ({text})" if text else "")


def cmd_join(a):
    s = connect(a.to, a.src)
    hello = recv_frame(s, time.monotonic() + 5)
    if hello is None or hello[0] != T_HELLO:
        print(f"join: no HELLO from {a.to}: {describe(hello)}")
        return 1
    hf = dict(hello[1])
    nonce_s = hf.get("nonce", b"\0" * NONCE)
    version = hf.get("version", b"0").decode()
    nonce_c = os.urandom(NONCE)
    payload = b"".join([
        field("nonce", nonce_c), field("rank", a.rank), field("world", a.world),
        field("proto", PROTO), field("version", version), field("pod", a.pod),
        field("node", a.node), field("dataIp", ""), field("dataPort", 9),
        field("digest", ""), field("ncclVersion", ""),
    ])
    flags = 0 if a.no_mac else F_MAC
    hdr = header(T_JOIN, flags, 0, len(payload))
    tail = b"" if a.no_mac else mac(a.token, DIR_TO_ROOT, nonce_s, nonce_c, hdr, payload)
    s.sendall(hdr + payload + tail)
    ans = recv_frame(s, time.monotonic() + a.wait)
    print(f"join: claimed rank {a.rank} as {a.pod} from {s.getsockname()[0]}; "
          f"rank 0 answered: {describe(ans)}")
    s.close()
    return 0


def cmd_proxy(a):
    """Relays joiner <-> rank 0 until both ends close or --seconds pass; saves the first
    joiner -> rank 0 frame."""
    host, port = a.listen.rsplit(":", 1)
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((host, int(port)))
    ls.listen(8)
    print(f"proxy: listening on {a.listen}", flush=True)
    end = time.monotonic() + min(a.seconds, MAX_SECONDS)
    sel = selectors.DefaultSelector()
    sel.register(ls, selectors.EVENT_READ, ("listen", None))
    pairs, up, saved = 0, b"", False
    down_seen = {}  # joiner socket -> where its downstream stands
    held = []  # (release time, socket, bytes): what rank 0 sent after its HELLO, held back
    while time.monotonic() < end:
        now = time.monotonic()
        for item in [h for h in held if h[0] <= now]:
            held.remove(item)
            try:
                item[1].sendall(item[2])
            except OSError:
                pass
        for key, _ in sel.select(timeout=0.05 if held else 0.2):
            kind, other = key.data
            if kind == "listen":
                c, _ = ls.accept()
                if pairs >= a.max_pairs:
                    c.close()
                    continue
                pairs += 1
                try:
                    r = connect(a.to)
                except OSError as e:
                    print(f"proxy: connect {a.to}: {e}", flush=True)
                    c.close()
                    continue
                sel.register(c, selectors.EVENT_READ, ("up", r))
                sel.register(r, selectors.EVENT_READ, ("down", c))
                continue
            s = key.fileobj
            try:
                b = s.recv(65536)
            except OSError:
                b = b""
            if not b and kind == "down" and any(h[1] is other for h in held):
                continue  # rank 0 closed: deliver what is held first
            if not b:
                for x in (s, other):
                    try:
                        sel.unregister(x)
                    except (KeyError, ValueError):
                        pass
                    x.close()
                continue
            if kind == "up" and not saved:
                up += b
                n = frame_size(up)
                if n > 0:
                    with open(a.capture + ".tmp", "wb") as f:
                        f.write(up[:n])
                    os.rename(a.capture + ".tmp", a.capture)
                    saved = True
                    print(f"proxy: saved a {TYPE_NAMES.get(up[5], up[5])} frame of {n} bytes",
                          flush=True)
            if kind == "down" and a.hold_after_hello > 0:
                # rank 0's HELLO goes through at once; what follows it in the next
                # --hold-after-hello seconds is held back until then (once per joiner)
                d = down_seen.get(other)
                if d is None:
                    end_hello = HDR + struct.unpack(">I", b[12:16])[0] if len(b) >= HDR else 0
                    d = down_seen[other] = {"pos": 0, "end": end_hello, "until": None}
                cut = max(0, min(len(b), d["end"] - d["pos"]))
                d["pos"] += len(b)
                b, later = b[:cut], b[cut:]
                if later:
                    if d["until"] is None:
                        d["until"] = time.monotonic() + a.hold_after_hello
                        print(f"proxy: holding what rank 0 sends after its HELLO for "
                              f"{a.hold_after_hello:g} s", flush=True)
                    if time.monotonic() < d["until"] or any(h[1] is other for h in held):
                        held.append((d["until"], other, later))
                    else:
                        b += later
            try:
                if b:
                    other.sendall(b)
            except OSError:
                pass
    print(f"proxy: done ({pairs} connection(s) relayed)", flush=True)
    return 0 if saved else 1


def cmd_replay(a):
    with open(a.frame, "rb") as f:
        raw = f.read()
    s = connect(a.to, a.src)
    hello = recv_frame(s, time.monotonic() + 5)
    if hello is None or hello[0] != T_HELLO:
        print(f"replay: no HELLO from {a.to}: {describe(hello)}")
        return 1
    s.sendall(raw)
    ans = recv_frame(s, time.monotonic() + a.wait)
    print(f"replay: sent a saved {TYPE_NAMES.get(raw[5], raw[5])} frame of {len(raw)} bytes "
          f"from {s.getsockname()[0]}; rank 0 answered: {describe(ans)}")
    s.close()
    return 0


class Conn:
    __slots__ = ("s", "out", "connected", "next_trickle", "opened_at")


def cmd_flood(a):
    """Keeps up to --count connections open to --to in one of three modes:
    idle (sends nothing), garbage (random bytes and an HTTP request), slow (a JOIN header
    claiming --claim bytes, --fill of them at once, then one byte a second). With --reopen a
    connection the other side closes is opened again, up to --count * 2 openings in all."""
    count = min(a.count, MAX_CONNS)
    end = time.monotonic() + min(a.seconds, MAX_SECONDS)
    budget = (a.budget or count * 2) if a.reopen else count
    host, port = a.to.rsplit(":", 1)
    addr = (host, int(port))
    sel = selectors.DefaultSelector()
    fill = memoryview(bytes(a.fill))  # shared by every connection: slices copy nothing
    st = {"opened": 0, "connected": 0, "closedByPeer": 0, "connectFailed": 0, "bytesSent": 0,
          "maxOpen": 0, "mode": a.mode}
    live = set()
    said_ready = False

    def first_bytes():
        """What a connection sends at once: a list of chunks."""
        if a.mode == "slow":
            claim = min(a.claim, MAX_JOIN)
            return [memoryview(header(T_JOIN, F_MAC, 0, claim)),
                    fill[:max(0, min(a.fill, claim - 1))]]
        if a.mode == "garbage":
            return [memoryview(os.urandom(1024) + b"GET / HTTP/1.1\r\nHost: x\r\n\r\n" +
                               b"\xff" * 4096)]
        return []

    def open_one():
        """Opens one more connection; False when no more can be opened (descriptors)."""
        try:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        except OSError as e:
            st["connectFailed"] += 1
            st["error"] = str(e)
            return False
        s.setblocking(False)
        if a.src:
            s.bind((a.src, 0))
        c = Conn()
        c.s, c.out, c.connected, c.next_trickle = s, first_bytes(), False, 0.0
        c.opened_at = time.monotonic()
        st["opened"] += 1
        e = s.connect_ex(addr)
        if e not in (0, errno.EINPROGRESS):
            st["connectFailed"] += 1
            st["error"] = os.strerror(e)
            s.close()
            return True
        sel.register(s, selectors.EVENT_READ | selectors.EVENT_WRITE, c)
        live.add(c)
        return True

    def close(c, by_peer):
        if c not in live:
            return
        live.discard(c)
        try:
            sel.unregister(c.s)
        except (KeyError, ValueError):
            pass
        c.s.close()
        if by_peer:
            st["closedByPeer"] += 1

    while time.monotonic() < end:
        while len(live) < count and st["opened"] < budget and time.monotonic() < end:
            if not open_one():
                budget = st["opened"]  # out of descriptors: hold what is open
                break
            if st["opened"] % 256 == 0:
                break  # let the selector run between bursts of connects
        st["maxOpen"] = max(st["maxOpen"], len(live))
        if not said_ready and sum(1 for c in live if c.connected) >= count:
            print(f"flood: {count} connections open", flush=True)
            said_ready = True
        if not live and st["opened"] >= budget:
            break
        now = time.monotonic()
        for key, ev in sel.select(timeout=0.1):
            c = key.data
            if c not in live:
                continue
            if not c.connected and ev & selectors.EVENT_WRITE:
                if c.s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                    st["connectFailed"] += 1
                    close(c, False)
                    continue
                c.connected = True
                st["connected"] += 1
            if ev & selectors.EVENT_READ:
                try:
                    b = c.s.recv(65536)
                except BlockingIOError:
                    b = None
                except OSError:
                    b = b""
                if b == b"":
                    close(c, True)
                    continue
            while ev & selectors.EVENT_WRITE and c.out:
                try:
                    n = c.s.send(c.out[0])
                except BlockingIOError:
                    break
                except OSError:
                    close(c, True)
                    break
                st["bytesSent"] += n
                c.out[0] = c.out[0][n:]
                if len(c.out[0]):
                    break
                c.out.pop(0)
            if c not in live:
                continue
            if not c.out:
                sel.modify(c.s, selectors.EVENT_READ, c)
        if a.mode == "slow":  # one byte a second on every connection that sent its fill
            for c in list(live):
                if c.connected and not c.out and now >= c.next_trickle:
                    c.next_trickle = now + 1.0
                    try:
                        st["bytesSent"] += c.s.send(b"\0")
                    except BlockingIOError:
                        pass
                    except OSError:
                        close(c, True)
    st["openAtEnd"] = len(live)
    for c in list(live):
        close(c, False)
    print("flood: " + json.dumps(st), flush=True)
    return 0


def proc_cpu(pid):
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    # fields 14 and 15 of stat (utime, stime); parts[0] is field 3
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


def cmd_cpu(a):
    """CPU seconds over the next --seconds of wall time (less if the process ends sooner)."""
    t0 = time.monotonic()
    try:
        c0 = proc_cpu(a.pid)
    except OSError:
        print("cpu: gone 0 0")
        return 1
    c1, t1 = c0, t0
    while time.monotonic() - t0 < min(a.seconds, MAX_SECONDS):
        time.sleep(0.1)
        try:
            c1, t1 = proc_cpu(a.pid), time.monotonic()
        except OSError:
            break
    wall = t1 - t0
    print(f"cpu: {c1 - c0:.2f} {wall:.2f} {100 * (c1 - c0) / wall if wall > 0 else 0:.0f}")
    return 0


def cmd_rss(a):
    """Samples VmRSS and VmHWM (KiB) until the process exits or --seconds pass; prints the
    last VmHWM and the highest VmRSS seen."""
    hwm = rss = 0
    end = time.monotonic() + min(a.seconds, MAX_SECONDS)
    while time.monotonic() < end:
        try:
            with open(f"/proc/{a.pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        hwm = max(hwm, int(line.split()[1]))
                    elif line.startswith("VmRSS:"):
                        rss = max(rss, int(line.split()[1]))
        except (OSError, ValueError):
            break
        time.sleep(a.interval)
    print(f"rss: {hwm} {rss}")
    return 0


def cmd_freeport(_a):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    print(s.getsockname()[1])
    s.close()
    return 0


def cmd_fakeroot(a):
    host, port = a.listen.rsplit(":", 1)
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((host, int(port)))
    ls.listen(16)
    print(f"fakeroot: listening on {a.listen} for {a.seconds} s", flush=True)
    end = time.monotonic() + min(a.seconds, MAX_SECONDS)
    answered = 0
    while time.monotonic() < end and answered < 1000:
        ls.settimeout(max(0.05, end - time.monotonic()))
        try:
            c, _ = ls.accept()
        except (socket.timeout, OSError):
            continue
        hello = b"".join([field("nonce", os.urandom(NONCE)), field("run", os.urandom(NONCE)),
                          field("proto", PROTO), field("version", a.version),
                          field("auth", "hmac-sha256"), field("world", a.world)])
        try:
            c.sendall(header(T_HELLO, 0, 0, len(hello)) + hello)
            join = recv_frame(c, time.monotonic() + 3)
            if join is not None and join[0] == T_JOIN:
                rej = field("code", "auth-failed") + field("message", "rank 0 refused this pod")
                c.sendall(header(T_REJECT, 0, 1, len(rej)) + rej)
                answered += 1
        except OSError:
            pass
        c.close()
    ls.close()
    print(f"fakeroot: answered {answered} JOINs with a REJECT without MAC", flush=True)
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    j = sub.add_parser("join")
    j.add_argument("--to", required=True)
    j.add_argument("--src")
    j.add_argument("--rank", type=int, required=True)
    j.add_argument("--world", type=int, required=True)
    j.add_argument("--pod", default="")
    j.add_argument("--node", default="")
    j.add_argument("--token", default="not-the-run-token")
    j.add_argument("--no-mac", action="store_true")
    j.add_argument("--wait", type=float, default=3.0)
    x = sub.add_parser("proxy")
    x.add_argument("--listen", required=True)
    x.add_argument("--to", required=True)
    x.add_argument("--capture", required=True)
    x.add_argument("--seconds", type=float, default=60)
    x.add_argument("--max-pairs", type=int, default=4)
    x.add_argument("--hold-after-hello", type=float, default=0)
    r = sub.add_parser("replay")
    r.add_argument("--to", required=True)
    r.add_argument("--src")
    r.add_argument("--frame", required=True)
    r.add_argument("--wait", type=float, default=3.0)
    fl = sub.add_parser("flood")
    fl.add_argument("--to", required=True)
    fl.add_argument("--src")
    fl.add_argument("--count", type=int, required=True)
    fl.add_argument("--mode", choices=("idle", "garbage", "slow"), default="idle")
    fl.add_argument("--claim", type=int, default=MAX_JOIN)
    fl.add_argument("--fill", type=int, default=0)
    fl.add_argument("--seconds", type=float, default=10)
    fl.add_argument("--reopen", action="store_true")
    fl.add_argument("--budget", type=int, default=0)
    c = sub.add_parser("cpu")
    c.add_argument("--pid", type=int, required=True)
    c.add_argument("--seconds", type=float, default=3)
    m = sub.add_parser("rss")
    m.add_argument("--pid", type=int, required=True)
    m.add_argument("--seconds", type=float, default=60)
    m.add_argument("--interval", type=float, default=0.1)
    fr = sub.add_parser("fakeroot")
    fr.add_argument("--listen", required=True)
    fr.add_argument("--seconds", type=float, default=5)
    fr.add_argument("--world", type=int, default=2)
    fr.add_argument("--version", default="0.1.0")
    sub.add_parser("freeport")
    a = p.parse_args()
    return {"join": cmd_join, "proxy": cmd_proxy, "replay": cmd_replay, "flood": cmd_flood,
            "cpu": cmd_cpu, "rss": cmd_rss, "freeport": cmd_freeport, "fakeroot": cmd_fakeroot}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
