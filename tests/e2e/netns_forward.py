#!/usr/bin/env python3
"""What kube-proxy does for the `kubernetes` Service, for a pod's network namespace in the tests.

    netns_forward.py NETNS-PATH LISTEN-IP LISTEN-PORT TARGET-IP TARGET-PORT READY-FILE

Listens on LISTEN-IP:LISTEN-PORT inside the network namespace NETNS-PATH (/var/run/netns/NAME;
LISTEN-IP must be an address of that namespace, e.g. 10.96.0.1 on its lo, the ClusterIP of the
`kubernetes` Service) and relays every connection, byte for byte, to TARGET-IP:TARGET-PORT in
the namespace it was started in (the test control plane's kube-apiserver on 127.0.0.1). TLS
passes through untouched: the client checks the API server's own certificate (whose SANs name
10.96.0.1). The listening socket is made inside the pod's namespace (setns(2) on this thread,
then back), the outgoing ones outside: a socket keeps the namespace it was made in. Writes
READY-FILE once listening; runs until killed.
"""
import ctypes
import os
import socket
import sys
import threading

_libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWNET = 0x40000000


def setns(fd):
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        raise OSError(ctypes.get_errno(), "setns")


def pipe(a, b):
    try:
        while True:
            d = a.recv(65536)
            if not d:
                break
            b.sendall(d)
    except OSError:
        pass
    for s in (a, b):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def relay(c, target):
    try:
        u = socket.create_connection(target, timeout=10)
        u.settimeout(None)
    except OSError:
        c.close()
        return
    threading.Thread(target=pipe, args=(c, u), daemon=True).start()
    pipe(u, c)
    c.close()
    u.close()


def main():
    if len(sys.argv) != 7:
        sys.exit(__doc__)
    ns, lip, lport, tip, tport, ready = sys.argv[1:]
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    pod = os.open(ns, os.O_RDONLY)
    setns(pod)
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind((lip, int(lport)))
    ls.listen(64)
    setns(home)  # back: the connections out are made in the test's namespace
    os.close(pod)
    os.close(home)
    with open(ready, "w") as f:
        f.write("%s:%s\n" % (lip, lport))
    while True:
        c, _ = ls.accept()
        threading.Thread(target=relay, args=(c, (tip, int(tport))), daemon=True).start()


if __name__ == "__main__":
    main()
