#!/usr/bin/env python3
"""Extracts from NVIDIA/nccl's source, at every release tag, the INFO/WARN format strings of
the lines `preflight log` (pkg/nccllog) interprets, into formats.tsv next to this script.

Usage: tests/nccl-formats/extract.py NCCL_GIT_DIR [OFI_GIT_DIR [OUT.tsv]]

NCCL_GIT_DIR is a clone (or bare mirror) of https://github.com/NVIDIA/nccl with its tags;
OFI_GIT_DIR (optional) one of https://github.com/aws/aws-ofi-nccl, the net plugin whose
NCCL_OFI_INFO lines ("NET/OFI " + format) the reader reads too (release tags v1.0.0 on; their
rows name the file "aws-ofi-nccl:PATH").
NCCL's code is read with `git show TAG:PATH` and never copied into this repository: only the
format strings of the calls below are kept, one row per format and contiguous range of tags:

    first_tag  last_tag  file  level  key  format  args

level is INFO, WARN (NCCL's WARN(...) and aws-ofi-nccl's NCCL_OFI_WARN(...) whose format
string names one of the reader's WARN kinds, WARN_KEYS), DEFINE (the VERSION_STRING macro) or
PIECE (a part (s)(n)printf builds of a line logged whole, e.g. the device list of NET/IB :
Using); key names the reader's rule the line falls under (see KEYS, WARN_KEYS); format is the concatenated string literals of the call with any macro
between them written as {NAME} (e.g. {STR(NCCL_MAJOR)}, {PRIx64}); args are the call's
arguments after the format, as written, joined by ' ; '. Tags are the release tags vX.Y.Z-N
from v2.3.7-1 on (pre-releases and other tags are left out). Regenerate after a new NCCL
release with:

    fetch github:NVIDIA/nccl   (or git clone --mirror https://github.com/NVIDIA/nccl)
    fetch github:aws/aws-ofi-nccl
    tests/nccl-formats/extract.py /path/to/nccl.git /path/to/aws-ofi-nccl.git

and commit the new formats.tsv; tests/nccl-formats/render.py (run by tests/e2e/test_nccl_formats.sh)
renders every row and checks how `preflight log` reads it.
"""
import os
import re
import subprocess
import sys

# The reader's rules: key -> regex over the format string (first match wins, in this order).
# A key ending in "-ignored" is a line the reader knows and must not take for a transport.
KEYS = [
    ("version", r"^NCCL version |^%s$"),  # the VERSION_STRING define, INFO("%s", VERSION_STRING)
    ("channel", r"^(Channel|Ring) %0?2d.* via "),
    ("collnet-channel", r"^CollNet %0?2d.* via COLLNET"),
    ("using-network", r"^Using network |^Using internal Network "),
    ("assigned-net", r"^Assigned NET plugin "),
    ("net-ib-using", r"^NET/(IB|%s) ?: ?Using|^NET/IB: \["),
    ("net-ib-none", r"^NET/(IB|%s) ?: ?No device found"),
    ("param-env", r"^(NCCL_IB_DISABLE |NCCL_HOSTID |%s )set by environment to"),
    ("net-socket-using", r"^NET/Socket ?: ?Using|^NET : Using interface"),
    ("bootstrap-using", r"^Bootstrap ?: ?Using"),
    ("gdr", r"GPU Direct RDMA (Enabled|Disabled)"),
    ("nic-distance", r"NIC distance"),
    ("comm-init", r"Init COMPLETE|nranks %d|nRanks %d"),
    ("nnodes", r"nNodes %d|localRanks %d"),
    ("init-timings", r"^Init timings"),
    ("channels-count", r"coll channels, "),
    ("nvls-cap", r"NVLS multicast support"),
    ("nvls-head", r"^NVLS Head"),  # sprintf'd, then INFO("%s", line)
    ("nvls-comm", r"^NVLS comm "),
    ("connected-nvls", r"^Connected NVLS"),
    ("connected-collnet", r"Connected CollNet"),
    ("collnet-plugin", r"^Loaded collnet plugin"),
    ("connected-rings", r"^Connected all (rings|trees)"),
    ("mnnvl-ignored", r"MNNVL"),
    ("ras-ignored", r"^RAS client listening socket"),
    ("bootstrap-timings-ignored", r"^Bootstrap timings"),
    ("gin-ignored", r"^(NET/)?GIN|GIN plugin|ncclGin"),
    ("rma-ignored", r"^RMA |RMA plugin"),
    ("ofi-provider", r"^NET/OFI Selected [Pp]rovider is "),
    ("ofi-libfabric-ignored", r"^NET/OFI Using Libfabric"),
]
KEY_RES = [(k, re.compile(r)) for k, r in KEYS]

# The reader's kinds of WARN lines (warn_kind in pkg/nccllog/lines.c, first match wins, in this
# order): key "warn-KIND" -> regex over the format string. A WARN format none of them matches
# ("other") is left out: the reader counts it but gives it no meaning.
WARN_KEYS = [
    ("warn-connection-refused", r"(?i)connection refused"),
    ("warn-connection-closed",
     r"(?i)closed by remote|connection closed|connection reset|remote process exited"),
    ("warn-timeout", r"(?i)timeout|timed out"),
    ("warn-ibverbs", r"ibv_|libibverbs|Got completion|NET/IB"),
    ("warn-cuda", r"(?i)cuda failure|cuda error|cuda ipc|(?-i:cudaIpc|Failed to CUDA )"),
    ("warn-shm", r"/dev/shm|(?i:shared memory)|shm_open| shm "),
    ("warn-plugin", r"NET/OFI|(?i:plugin)"),
    ("warn-system-error", r"(?i)system error|socket|connect|unreachable|^Net : |(?-i:Call to .* failed)"),
]


def warn_text(f, fmt):
    """fmt with the macro NCCL stringizes into it: ibvwrap's {name} is the ibv_* function,
    SYSCHECK's a system call (src/misc/ibvwrap.cc, src/include/checks.h)."""
    return fmt.replace("{name}", "ibv_modify_qp" if "ibvwrap" in f else "poll")

WARN_RES = [(k, re.compile(r)) for k, r in WARN_KEYS]

TAG_RE = re.compile(r"^v(\d+)\.(\d+)\.(\d+)-(\d+)$")
SRC_RE = re.compile(r"\.(c|cc|cu|cpp|h|hpp)$")
CALL_RE = re.compile(r"(?<![A-Za-z0-9_])(INFO|WARN|VERSION_STRING|s?n?printf|NCCL_OFI_INFO|NCCL_OFI_WARN)\b")
OFI_TAG_RE = re.compile(r"^v(\d+)\.(\d+)\.(\d+)(-aws)?$")
# pieces of a line NCCL builds with (s)(n)printf before logging it with INFO("...%s...", line)
PIECE_KEYS = [
    ("nvls-head", re.compile(r"^NVLS Head")),
    ("dev-list", re.compile(r"^ ?\[%d\](=\{|%s:%(d|s))|^\[%d\] %s:%d/")),
]


def git(gitdir, *args):
    return subprocess.run(["git", "--git-dir", gitdir, *args], check=True,
                          capture_output=True).stdout


def release_tags(gitdir):
    tags = []
    for t in git(gitdir, "tag").decode().split():
        m = TAG_RE.match(t)
        if m and tuple(map(int, m.groups()[:3])) >= (2, 3, 7):
            tags.append((tuple(map(int, m.groups())), t))
    return [t for _, t in sorted(tags)]


def literal_end(s, i):
    """s[i] opens a string or character literal: the index after it."""
    j = i + 1
    while j < len(s) and s[j] != s[i]:
        j += 2 if s[j] == "\\" else 1
    return j + 1


def ofi_tags(gitdir):
    tags = []
    for t in git(gitdir, "tag").decode().split():
        m = OFI_TAG_RE.match(t)
        if m and int(m.group(1)) >= 1:
            tags.append((tuple(map(int, m.groups()[:3])), m.group(4) or "", t))
    return [t for *_, t in sorted(tags)]


def scan(gitdir, tags, prefix, dirs, present, nccl):
    """Adds the formats of every tag into present: (file, level, key, fmt, args) -> indexes."""
    for ti, tag in enumerate(tags):
        files = git(gitdir, "ls-tree", "-r", "--name-only", tag, "--", *dirs).decode().split("\n")
        n = 0
        for f in files:
            if not SRC_RE.search(f):
                continue
            text = git(gitdir, "show", "%s:%s" % (tag, f)).decode("utf-8", "replace")
            for level, fmt, args in calls(text):
                if nccl != fmt.startswith("NET/OFI "):
                    k = key_of(level, fmt, args, f)
                else:
                    k = None
                if k:
                    s = present.setdefault((prefix + f, level, k, fmt, args), set())
                    n += ti not in s
                    s.add(ti)
        sys.stderr.write("%s: %d formats\n" % (tag, n))


def strip_comments(s):
    out, i, n = [], 0, len(s)
    while i < n:
        c = s[i]
        if c in "\"'":
            j = literal_end(s, i)
            out.append(s[i:j])
            i = j
        elif s.startswith("//", i):
            j = s.find("\n", i)
            i = n if j < 0 else j
        elif s.startswith("/*", i):
            j = s.find("*/", i + 2)
            out.append(" ")
            i = n if j < 0 else j + 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def split_args(s, i):
    """s[i] == '(': the call's arguments as text and the index after ')' (None if unbalanced)."""
    depth, args, cur, n = 0, [], [], len(s)
    while i < n:
        c = s[i]
        if c in "\"'":
            j = literal_end(s, i)
            cur.append(s[i:j])
            i = j
            continue
        if c == "(":
            depth += 1
            if depth == 1:
                i += 1
                continue
        elif c == ")":
            depth -= 1
            if depth == 0:
                args.append("".join(cur).strip())
                return args, i + 1
        elif c == "," and depth == 1:
            args.append("".join(cur).strip())
            cur = []
            i += 1
            continue
        cur.append(c)
        i += 1
    return None, n


TOKEN_RE = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([A-Za-z_][A-Za-z0-9_]*(?:\([A-Za-z0-9_]*\))?))')


def literal(arg):
    """The string of a concatenation of literals and macros, or None when arg is no such thing."""
    out, pos, lits = [], 0, 0
    while pos < len(arg):
        m = TOKEN_RE.match(arg, pos)
        if not m or m.end() == pos:
            return None
        if m.group(1) is not None:
            out.append(bytes(m.group(1), "utf-8").decode("unicode_escape"))
            lits += 1
        else:
            out.append("{%s}" % m.group(2))
        pos = m.end()
        if arg[pos:].strip() == "":
            break
    return "".join(out) if lits else None


def calls(text):
    text = strip_comments(text)
    for m in CALL_RE.finditer(text):
        name = m.group(1)
        if name == "VERSION_STRING":
            d = re.match(r"[ \t]*((?:[^\n\\]|\\\n)*)", text[m.end():])
            if text[:m.start()].rstrip().endswith("#define"):
                fmt = literal(d.group(1).replace("\\\n", " "))
                if fmt:
                    yield "DEFINE", fmt, ""
            continue
        j = m.end()
        while j < len(text) and text[j] in " \t\n":
            j += 1
        if j >= len(text) or text[j] != "(":
            continue
        if text[:m.start()].rstrip().endswith("#define"):
            continue
        args, _ = split_args(text, j)
        if not args:
            continue
        fi = {"INFO": 1, "NCCL_OFI_INFO": 1, "WARN": 0, "NCCL_OFI_WARN": 0, "sprintf": 1, "snprintf": 2}.get(name)
        if fi is None:
            continue
        if len(args) <= fi:
            continue
        fmt = literal(args[fi])
        if fmt is None:
            continue
        rest = " ; ".join(re.sub(r"\s+", " ", a) for a in args[fi + 1:])
        if name == "NCCL_OFI_INFO":  # its macro prefixes "NET/OFI " (include/nccl_ofi_log.h)
            name, fmt = "INFO", "NET/OFI " + fmt
        elif name == "NCCL_OFI_WARN":  # and NCCL_OFI_WARN too, at level WARN
            name, fmt = "WARN", "NET/OFI " + fmt
        yield ("PIECE" if "printf" in name else name), fmt, rest


def key_of(level, fmt, args, f=""):
    if level == "DEFINE":
        return "version" if fmt.startswith("NCCL version ") else None
    if fmt == "%s":
        return "version" if "VERSION_STRING" in args else None
    if level == "WARN":
        for k, r in WARN_RES:
            if r.search(warn_text(f, fmt).split("\n")[0]):
                return k
        return None
    if level == "PIECE":
        for k, r in PIECE_KEYS:
            if r.search(fmt):
                return k
        return None
    for k, r in KEY_RES:
        if r.search(fmt):
            return k
    return None


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    gitdir = sys.argv[1]
    ofi = sys.argv[2] if len(sys.argv) > 3 or (len(sys.argv) == 3 and
                                                not sys.argv[2].endswith(".tsv")) else None
    out = sys.argv[-1] if sys.argv[-1].endswith(".tsv") else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "formats.tsv")
    tags = release_tags(gitdir)
    if not tags:
        sys.exit("extract.py: no release tags v2.3.7-1 or later in %s" % gitdir)
    present = {}  # (file, level, key, fmt, args) -> indexes of the tags that have it
    scan(gitdir, tags, "", ["src"], present, True)
    otags = ofi_tags(ofi) if ofi else []
    opresent = {}
    if ofi:
        scan(ofi, otags, "aws-ofi-nccl:", ["src", "include"], opresent, False)
    esc = lambda s: s.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")
    out_rows = []
    for ident, idx, tg in [(i, x, tags) for i, x in present.items()] + \
            [(i, x, otags) for i, x in opresent.items()]:
        idx = sorted(idx)
        start = prev = idx[0]
        for i in idx[1:] + [None]:  # contiguous ranges of tags
            if i is not None and i == prev + 1:
                prev = i
                continue
            out_rows.append((ident[2], tg[start], ident, tg[prev]))
            if i is not None:
                start = prev = i
    with open(out, "w") as o:
        o.write("# from https://github.com/NVIDIA/nccl release tags %s..%s%s by "
                "tests/nccl-formats/extract.py; do not edit\n" % (
                    tags[0], tags[-1], " and https://github.com/aws/aws-ofi-nccl %s..%s" % (
                        otags[0], otags[-1]) if otags else ""))
        o.write("# first_tag\tlast_tag\tfile\tlevel\tkey\tformat\targs\n")
        order = {t: i for i, t in enumerate(tags + otags)}
        for key, start, ident, last in sorted(out_rows, key=lambda r: (r[0], order[r[1]], r[2])):
            f, level, k, fmt, args = ident
            o.write("\t".join([start, last, f, level, k, esc(fmt), esc(args)]) + "\n")


if __name__ == "__main__":
    main()
