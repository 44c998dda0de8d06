"""Python expressions over one verdict, a TAP line each (the e2e scripts' `expect`).

    python3 vexpect.py VERDICT NAME CHECK EXPR...

Each EXPR is evaluated with the verdict as `d` and these helpers; it passes when it is True.
CHECK is the check whose status, codes and finding messages a failing line shows.
  check(id)           the check's map ({} when absent)
  codes(id)           its finding codes, sorted, but those in $VEXPECT_IGNORE_CODES (spaces)
  finding(id, code)   the messages of its findings with that code, joined by " | "
  culprits()          the culprits' ranks, sorted
  others(text, me)    the trainer-N named in text as subjects ("rank R (trainer-N)" after the
                      start, "; " or ": "), other than trainer-me
"""
import json
import os
import re
import sys

import yaml

path, name, shown, exprs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
with open(path) as f:
    d = yaml.safe_load(f)
ignored = set(os.environ.get("VEXPECT_IGNORE_CODES", "").split())


def check(cid):
    return next((c for c in d.get("checks", []) if c["id"] == cid), {})


def codes(cid):
    return sorted(x["code"] for x in (check(cid).get("findings") or []) if x["code"] not in ignored)


def finding(cid, code):
    return " | ".join(x.get("message", "") for x in check(cid).get("findings") or []
                      if x["code"] == code)


def culprits():
    return sorted(c.get("rank") for c in d.get("culprits") or [])


def others(text, me):
    return sorted(set(int(m) for m in re.findall(r"(?:^|; |: )rank \d+ \(trainer-(\d+)\)", text))
                  - {me})


for e in exprs:
    try:
        r, err = eval(e), ""
    except Exception as x:  # a failing expression is a failed line, not a crash
        r, err = False, repr(x)
    if r is True:
        print(f"ok - {name}: {e}")
    else:
        got = {"verdict": d.get("verdict"),
               shown: [check(shown).get("status"), check(shown).get("message"), codes(shown)],
               "culprits": culprits(),
               "failing": [c["id"] for c in d.get("checks", []) if c.get("status") == "fail"],
               "findings": [x.get("message") for x in check(shown).get("findings") or []]}
        print(f"not ok - {name}: {e}: {err or r} ({json.dumps(got)[:1500]})")
