#!/usr/bin/env python3
"""Loads an HTML file in a real headless Chromium and reports what a test needs from it.

Talks the Chrome DevTools Protocol over --remote-debugging-pipe (fd 3: commands to the
browser, fd 4: its replies and events, each a JSON message ended by a NUL byte; the
protocol: https://chromedevtools.github.io/devtools-protocol/). No websocket, no package
beyond Python's standard library: the screenshot's PNG is decoded here with zlib
(PNG: https://www.w3.org/TR/png/, filters of section 7.3).

  cdp_page.py PAGE.html OUT.json [--png SHOT.png] [--cell F,T]... [--eval NAME=EXPR]...
              [--width W] [--height H] [--timeout S]

OUT.json: {"errors": [...every console error, uncaught exception, failed request and log
entry of level error, CSP refusals included...], "requests": [URLs other than the page],
"renderMs": the page's own mark, "wallMs": navigation to load event, "canvas": {x, y, w,
h, cell, block}, "cells": {"F,T": [r, g, b]} read back from the screenshot's pixels at the
centre of heatmap cell (sender F, receiver T), "eval": {NAME: value}}.
"""
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zlib


def png_rgb(data):
    """(width, height, rows of bytes RGB or RGBA, bytes per pixel) of an 8-bit PNG."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG")
    pos, idat, w = 8, b"", None
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        pos += 12 + n
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or ctype not in (2, 6) or interlace:
                raise ValueError("PNG of depth %d, colour type %d, interlace %d" % (depth, ctype, interlace))
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        elif kind == b"IEND":
            break
    raw = zlib.decompress(idat)
    stride = w * bpp
    rows, prev = [], bytearray(stride)
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pr = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pr) & 255
        rows.append(line)
        prev = line
    return w, h, rows, bpp


class Browser:
    def __init__(self, timeout):
        exe = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
        if not exe:
            raise FileNotFoundError("no chromium")
        self.profile = tempfile.mkdtemp(prefix="pf-chromium.")
        import fcntl
        # the pipes' ends above fd 9, so that putting them on 3 and 4 in the child clobbers none
        def high(fd):
            h = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
            os.close(fd)
            return h
        to_r, to_w = (high(fd) for fd in os.pipe())      # our commands -> its fd 3
        from_r, from_w = (high(fd) for fd in os.pipe())  # its fd 4 -> us
        def child():
            os.dup2(to_r, 3)  # dup2 leaves 3 and 4 inheritable; every other pipe end is CLOEXEC
            os.dup2(from_w, 4)
        args = [exe, "--headless=new", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
                "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                "--disable-background-networking", "--disable-dev-shm-usage", "--hide-scrollbars",
                "--user-data-dir=" + self.profile, "about:blank"]
        self.proc = subprocess.Popen(args, preexec_fn=child, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, close_fds=False)
        os.close(to_r)
        os.close(from_w)
        self.w, self.r = to_w, from_r
        self.buf, self.next_id, self.events = b"", 1, []
        self.deadline = time.time() + timeout

    def _read(self):
        import select
        while b"\0" not in self.buf:
            left = self.deadline - time.time()
            if left <= 0:
                raise TimeoutError("the browser did not answer in time")
            ready, _, _ = select.select([self.r], [], [], left)
            if not ready:
                continue
            chunk = os.read(self.r, 1 << 20)
            if not chunk:
                raise EOFError("the browser closed its pipe")
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def send(self, method, params=None, session=None):
        mid = self.next_id
        self.next_id += 1
        m = {"id": mid, "method": method, "params": params or {}}
        if session:
            m["sessionId"] = session
        os.write(self.w, json.dumps(m).encode() + b"\0")
        while True:
            r = self._read()
            if r.get("id") == mid:
                if "error" in r:
                    raise RuntimeError("%s: %s" % (method, r["error"]))
                return r.get("result", {})
            self.events.append(r)

    def wait_event(self, method):
        for i, e in enumerate(self.events):
            if e.get("method") == method:
                return self.events.pop(i)
        while True:
            e = self._read()
            if e.get("method") == method:
                return e
            self.events.append(e)

    def close(self):
        try:
            self.send("Browser.close")
        except Exception:
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


def main():
    a = sys.argv[1:]
    page, out = os.path.abspath(a[0]), a[1]
    png, cells, evals, width, height, timeout = None, [], [], 1400, 1000, 120.0
    i = 2
    while i < len(a):
        k, v = a[i], a[i + 1]
        i += 2
        if k == "--png":
            png = v
        elif k == "--cell":
            cells.append(tuple(int(x) for x in v.split(",")))
        elif k == "--eval":
            evals.append(v.split("=", 1))
        elif k == "--width":
            width = int(v)
        elif k == "--height":
            height = int(v)
        elif k == "--timeout":
            timeout = float(v)
    b = Browser(timeout)
    res = {"errors": [], "requests": [], "eval": {}, "cells": {}}
    try:
        t = b.send("Target.createTarget", {"url": "about:blank"})
        s = b.send("Target.attachToTarget", {"targetId": t["targetId"], "flatten": True})["sessionId"]
        for m in ("Runtime.enable", "Log.enable", "Page.enable", "Network.enable"):
            b.send(m, session=s)
        b.send("Emulation.setDeviceMetricsOverride",
               {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}, session=s)
        url = "file://" + page
        t0 = time.time()
        b.send("Page.navigate", {"url": url}, session=s)
        b.wait_event("Page.loadEventFired")
        res["wallMs"] = round((time.time() - t0) * 1000)
        ev = lambda expr: b.send("Runtime.evaluate", {"expression": expr, "returnByValue": True},
                                 session=s).get("result", {}).get("value")
        res["renderMs"] = ev("Number(document.documentElement.dataset.renderMs||-1)")
        res["canvas"] = ev("""(function(){var c=document.getElementById('heat');if(!c)return null;
            c.scrollIntoView();var r=c.getBoundingClientRect();return {x:r.left+scrollX,y:r.top+scrollY,
            w:r.width,h:r.height,cell:+c.dataset.cell,block:+c.dataset.block};})()""")
        for name, expr in evals:
            res["eval"][name] = ev(expr)
        if res["canvas"] and (png or cells):
            c = res["canvas"]
            shot = b.send("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True,
                          "clip": {"x": c["x"], "y": c["y"], "width": c["w"], "height": c["h"],
                                   "scale": 1}}, session=s)
            import base64
            data = base64.b64decode(shot["data"])
            if png:
                with open(png, "wb") as f:
                    f.write(data)
            w, h, rows, bpp = png_rgb(data)
            res["png"] = [w, h]
            for f_, t_ in cells:
                # the canvas's border is 1 CSS pixel; cell (row f, column t) inside it
                x = 1 + (t_ // c["block"]) * c["cell"] + c["cell"] // 2
                y = 1 + (f_ // c["block"]) * c["cell"] + c["cell"] // 2
                if 0 <= x < w and 0 <= y < h:
                    res["cells"]["%d,%d" % (f_, t_)] = list(rows[y][x * bpp:x * bpp + 3])
        # let late events arrive (a script error after load), then collect
        b.send("Runtime.evaluate", {"expression": "1"}, session=s)
    finally:
        for e in b.events:
            m, p = e.get("method"), e.get("params", {})
            if m == "Runtime.exceptionThrown":
                d = p.get("exceptionDetails", {})
                res["errors"].append("exception: %s %s" % (d.get("text"), d.get("exception", {}).get("description", "")))
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert", "warning"):
                res["errors"].append("console.%s: %s" % (p.get("type"), [x.get("value", x.get("description")) for x in p.get("args", [])]))
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") in ("error", "warning"):
                res["errors"].append("log: %s" % p["entry"].get("text"))
            elif m == "Network.requestWillBeSent":
                u = p.get("request", {}).get("url", "")
                if u != "file://" + page and u != "about:blank":
                    res["requests"].append(u)
            elif m == "Network.loadingFailed":
                res["errors"].append("loading failed: %s" % p.get("errorText"))
        b.close()
        with open(out, "w") as f:
            json.dump(res, f)


if __name__ == "__main__":
    main()
