#!/usr/bin/env python3
"""A stranger that finds every TCP port the pods listen on and sits on it, for the e2e tests.

    idle_stranger.py --from NS --seconds S [--per N] [--skip PORT]... POD-NS=IP[,IP...] ...

From network namespace NS it watches each pod's namespace (the listening sockets of
/proc/thread-self/net/tcp, as `ss -ltn` shows them: a port scan that misses nothing) and opens
N idle connections to every listening port it has not seen yet, on the socket's own address
or, for a wildcard listener, on each address given for that pod; it sends nothing and keeps
them open until S seconds have passed. Bounded: 12,000 connections, S <= 180; its own soft
limit of open files is raised to what that needs (at most the hard limit). The ports in
--skip (the rendezvous port, say) are left alone. After each port it prints how many
connections it holds ("idle_stranger: N idle connections open"), at the end what it did.
"""
import argparse
import ctypes
import os
import resource
import signal
import socket
import sys
import time

_libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNET = 0x40000000
MAX_CONNS = 12000  # connections held at most, all ports together


def setns(fd):
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), "setns")


def listening(path):
    out = set()
    try:
        with open(path) as f:
            next(f)
            for line in f:
                p = line.split()
                if p[3] != "0A":  # TCP_LISTEN
                    continue
                ip_hex, port_hex = p[1].split(":")
                port = int(port_hex, 16)
                if len(ip_hex) == 8:
                    ip = socket.inet_ntop(socket.AF_INET, bytes.fromhex(ip_hex)[::-1])
                else:
                    ip = "::" if int(ip_hex, 16) == 0 else None
                out.add((ip, port))
    except OSError:
        pass
    return out


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--from", dest="src", required=True)
    a.add_argument("--seconds", type=float, required=True)
    a.add_argument("--per", type=int, default=3)
    a.add_argument("--skip", type=int, action="append", default=[])
    a.add_argument("pods", nargs="+")
    o = a.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = MAX_CONNS + 256
    if soft < want and (hard == resource.RLIM_INFINITY or soft < hard):
        resource.setrlimit(resource.RLIMIT_NOFILE,
                           (want if hard == resource.RLIM_INFINITY else min(want, hard), hard))
    pods = []
    for spec in o.pods:
        ns, ips = spec.split("=", 1)
        pods.append((ns, ips.split(",")))
    fds = {p[0]: os.open("/var/run/netns/" + p[0], os.O_RDONLY) for p in pods}
    src = os.open("/var/run/netns/" + o.src, os.O_RDONLY)
    held, seen = [], set()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        watch(o, pods, fds, src, held, seen)
    finally:
        print(f"idle_stranger: held {len(held)} idle connections on {len(seen)} listening "
              f"addresses and ports", flush=True)
        for s in held:
            s.close()


def watch(o, pods, fds, src, held, seen):
    end = time.monotonic() + min(o.seconds, 180)
    while time.monotonic() < end and len(held) < MAX_CONNS:
        for ns, ips in pods:
            setns(fds[ns])
            socks = listening("/proc/thread-self/net/tcp") | listening("/proc/thread-self/net/tcp6")
            setns(src)
            for ip, port in sorted(socks, key=str):
                if port in o.skip or ip in ("127.0.0.1", None):
                    continue
                for dst in (ips if ip in ("0.0.0.0", "::") else [ip]):
                    if (ns, dst, port) in seen:
                        continue
                    seen.add((ns, dst, port))
                    print(f"idle_stranger: {o.per} idle connections to {dst}:{port} ({ns})",
                          flush=True)
                    for _ in range(o.per):
                        if len(held) >= MAX_CONNS or time.monotonic() >= end:
                            break
                        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
                        s.settimeout(1)
                        try:
                            s.connect((dst, port))
                            held.append(s)
                        except OSError:
                            s.close()
                    print(f"idle_stranger: {len(held)} idle connections open", flush=True)
        time.sleep(0.05)


if __name__ == "__main__":
    main()
