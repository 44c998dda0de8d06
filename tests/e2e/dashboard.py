#!/usr/bin/env python3
"""The Grafana dashboard helm/preflight/files/grafana-dashboard.json, read as Grafana 11 reads
its dashboard model (schemaVersion 39):

  dashboard.py check DASH            its structure; prints one TAP line a property
  dashboard.py exprs DASH [VAR=VALUE]...
                                     every target's query with the template variables
                                     substituted as Grafana's Prometheus data source does,
                                     one JSON object a line: panel id, title, type, refId,
                                     expr, instant, table; a VALUE "a|b" is a multi-value
                                     selection, "$__all" the All option
  dashboard.py eval DASH URL [VAR=VALUE]...
                                     every target evaluated by the Prometheus at URL as
                                     Grafana asks it: an instant query (now) for an instant
                                     target, a range query over the last 5 minutes at a
                                     15-second step for a range one; prints a JSON object,
                                     "<panel id><refId>": {"title", "result"} or {"error"}

Substitution (grafana/grafana v11, packages/grafana-prometheus/src/datasource.ts:
interpolateQueryExpr, prometheusRegularEscape and prometheusSpecialRegexEscape, their classic
behaviour; templateSrv's ${var:text} format):
a variable with multi or includeAll set gets its value regex-escaped
(prometheusSpecialRegexEscape), several values joined as (a|b), the All option its allValue
verbatim; any other variable its value with backslashes and single quotes escaped;
${var:text} the option's text. $__interval, $__rate_interval, $__range and friends get the
values of a 5-minute range at a 15-second step, as Grafana computes them for a
1-minute-scrape data source."""
import json
import re
import sys

BUILTIN = {"__interval": "15s", "__interval_ms": "15000", "__rate_interval": "1m",
           "__range": "300s", "__range_s": "300", "__range_ms": "300000",
           "__dashboard": "preflight fleet", "__org": "1", "__user": "admin"}
# ${name}, ${name:format}, $name, [[name]]
REF = re.compile(r"\$\{(\w+)(?::(\w+))?\}|\$(\w+)|\[\[(\w+)\]\]")
PANEL_TYPES = {"stat", "bargauge", "table", "timeseries", "heatmap", "state-timeline",
               "status-history", "gauge", "barchart", "text", "row"}
TRANSFORMS = {"organize", "groupingToMatrix", "merge", "joinByField", "seriesToRows",
              "sortBy", "filterFieldsByName", "renameByRegex", "convertFieldType"}


def special_regex_escape(v):
    # prometheusSpecialRegexEscape: \ first, then the regex metacharacters
    v = v.replace("\\", "\\\\\\\\")
    return re.sub(r"([$^*{}\[\]'+?.()|])", r"\\\\\1", v)


def regular_escape(v):
    # prometheusRegularEscape
    return v.replace("\\", "\\\\").replace("'", "\\\\'")


def variables(d):
    return {v["name"]: v for v in d.get("templating", {}).get("list", [])}


def substitute(text, vs, chosen):
    def one(m):
        name = m.group(1) or m.group(3) or m.group(4)
        fmt = m.group(2)
        if name in BUILTIN:
            return BUILTIN[name]
        v = vs.get(name)
        if v is None:
            raise KeyError("unknown variable $%s" % name)
        if v["type"] == "datasource":
            return chosen.get(name, "prometheus")
        value = chosen.get(name)
        if value is None:
            cur = v.get("current", {})
            value = cur.get("value")
            value = "|".join(value) if isinstance(value, list) else value
        if fmt == "text":
            for o in v.get("options", []):
                if o["value"] == value:
                    return o["text"]
            raise KeyError("$%s: no option with the value %s" % (name, value))
        if fmt is not None:
            raise KeyError("${%s:%s}: a format this reader does not know" % (name, fmt))
        if value == "$__all":
            if "allValue" in v:
                return v["allValue"]
            value = "|".join(o["value"] for o in v.get("options", []) if o["value"] != "$__all")
        if v.get("multi") or v.get("includeAll"):
            parts = value.split("|")
            esc = [special_regex_escape(p) for p in parts]
            return esc[0] if len(esc) == 1 else "(" + "|".join(esc) + ")"
        return regular_escape(value)
    return REF.sub(one, text)


def targets(d):
    for p in d["panels"]:
        for t in p.get("targets", []):
            yield p, t


def check(d):
    out = []

    def tap(ok, name, why=""):
        out.append(("ok - " if ok else "not ok - ") + name + ("" if ok else ": " + why))

    vs = variables(d)
    tap(isinstance(d.get("schemaVersion"), int) and d["schemaVersion"] == 39,
        "dashboard: schemaVersion 39 (Grafana 11's model)", str(d.get("schemaVersion")))
    tap(bool(d.get("uid")) and bool(d.get("title")), "dashboard: uid and title")
    ids = [p.get("id") for p in d["panels"]]
    tap(all(isinstance(i, int) for i in ids) and len(set(ids)) == len(ids),
        "dashboard: %d panels, ids unique integers" % len(ids), str(ids))
    bad = []
    for p in d["panels"]:
        why = []
        if p.get("type") not in PANEL_TYPES:
            why.append("type %s" % p.get("type"))
        if p.get("datasource") != {"type": "prometheus", "uid": "${datasource}"}:
            why.append("datasource %s" % p.get("datasource"))
        ts = p.get("targets") or []
        if not ts:
            why.append("no targets")
        refs = [t.get("refId") for t in ts]
        if len(set(refs)) != len(refs) or not all(refs):
            why.append("refIds %s" % refs)
        for t in ts:
            if t.get("datasource") != p.get("datasource"):
                why.append("%s: datasource" % t.get("refId"))
            if not t.get("expr"):
                why.append("%s: no expr" % t.get("refId"))
            if bool(t.get("instant")) == bool(t.get("range")):
                why.append("%s: instant xor range" % t.get("refId"))
            if p.get("type") == "table" and (t.get("format") != "table" or not t.get("instant")):
                why.append("%s: a table's query is an instant one of format table" % t.get("refId"))
            if p.get("type") == "timeseries" and not t.get("range"):
                why.append("%s: a time series' query is a range one" % t.get("refId"))
        for tr in p.get("transformations", []):
            if tr.get("id") not in TRANSFORMS:
                why.append("transformation %s" % tr.get("id"))
            if tr.get("id") == "groupingToMatrix":
                o = tr.get("options", {})
                if not (o.get("rowField") and o.get("columnField") and o.get("valueField")):
                    why.append("groupingToMatrix without rowField, columnField, valueField")
        if why:
            bad.append("%s (%s): %s" % (p.get("id"), p.get("title"), "; ".join(why)))
    tap(not bad, "dashboard: every panel a Grafana panel type, the Prometheus data source, "
        "targets with refIds and exprs; tables of instant queries in format table", " | ".join(bad))
    # panels do not overlap and fit the 24-column grid
    cells, clash = {}, []
    for p in d["panels"]:
        g = p.get("gridPos", {})
        if g.get("x", 0) + g.get("w", 0) > 24:
            clash.append("%s wider than the grid" % p["id"])
        for x in range(g.get("x", 0), g.get("x", 0) + g.get("w", 0)):
            for y in range(g.get("y", 0), g.get("y", 0) + g.get("h", 0)):
                if (x, y) in cells:
                    clash.append("%s over %s" % (p["id"], cells[(x, y)]))
                cells[(x, y)] = p["id"]
    tap(not clash, "dashboard: panels fit the 24-column grid, none over another",
        ", ".join(sorted(set(clash))[:5]))
    # every variable referenced exists (exprs, titles, the variables' own queries)
    texts = [p.get("title", "") for p in d["panels"]] + [t["expr"] for _, t in targets(d)]
    texts += [v.get("definition", "") for v in vs.values()]
    unknown = set()
    for s in texts:
        for m in REF.finditer(s):
            name = m.group(1) or m.group(3) or m.group(4)
            if name not in vs and name not in BUILTIN:
                unknown.add(name)
    tap(not unknown, "dashboard: every variable referenced is defined", ", ".join(sorted(unknown)))
    for name in ("namespace", "job"):
        v = vs.get(name, {})
        tap(v.get("type") == "query" and v.get("includeAll") and v.get("multi") and
            v.get("allValue") == ".*", "dashboard: $%s a query variable, multi, All as .*" % name,
            json.dumps(v)[:200])
    f = vs.get("freshness", {})
    tap(f.get("type") == "custom" and f.get("current", {}).get("value") == "86400" and
        all(re.fullmatch(r"\d+", o["value"]) for o in f.get("options", [])),
        "dashboard: $freshness custom, seconds, 24 h by default", json.dumps(f)[:200])
    # the filters in every query: each pushed family's selector has the namespace and run
    # matchers, every query the job filter and the freshness filter on the pushed series
    fresh = ('(time() - preflight_last_run_timestamp_seconds{job=~"$run", '
             'namespace=~"$namespace"} < $freshness)')
    info = 'preflight_info{job=~"$run", namespace=~"$namespace", workload=~"$job"}'
    bad = []
    for p, t in targets(d):
        e = t["expr"]
        where = "%s %s" % (p["id"], t["refId"])
        sels = re.findall(r"\b((?:preflight_|nccl_)[a-z_]+|preflight:[a-z_0-9:]+)(\{[^}]*\})?", e)
        if not sels:
            bad.append("%s: reads nothing preflight pushes" % where)
        for name, sel in sels:
            if 'namespace=~"$namespace"' not in sel or 'job=~"$run"' not in sel:
                bad.append("%s: %s without the namespace and run filters" % (where, name))
        if any(n.startswith("preflight:") for n, _ in sels):
            if 'workload=~"$job"' not in e or "[${freshness}s]" not in e:
                bad.append("%s: a recorded series without the job filter and the window" % where)
        elif info not in e or fresh not in e:
            bad.append("%s: without the job or the freshness filter" % where)
    tap(not bad, "dashboard: every query filters by $namespace, $job and $run, and keeps "
        "runs of the last $freshness only", " | ".join(bad))
    return out


def evaluate(url, q, now):
    import urllib.error
    import urllib.parse
    import urllib.request
    if q["instant"]:
        u = "%s/api/v1/query?%s" % (url, urllib.parse.urlencode({"query": q["expr"], "time": now}))
    else:
        u = "%s/api/v1/query_range?%s" % (url, urllib.parse.urlencode(
            {"query": q["expr"], "start": now - 300, "end": now, "step": 15}))
    try:
        with urllib.request.urlopen(u, timeout=10) as r:
            d = json.load(r)
    except urllib.error.HTTPError as e:
        d = json.load(e)  # Prometheus' JSON error: a bad expression
    if d.get("status") != "success":
        return {"error": d.get("error", "?")}
    return {"result": d["data"]["result"]}


def main():
    d = json.load(open(sys.argv[2]))
    if sys.argv[1] == "check":
        print("\n".join(check(d)))
        return
    url = None
    if sys.argv[1] == "eval":
        url = sys.argv[3]
        del sys.argv[3]
    chosen = dict(a.split("=", 1) for a in sys.argv[3:])
    if url:
        import time
        now, out, vs = time.time(), {}, variables(d)
        for p, t in targets(d):
            q = {"expr": substitute(t["expr"], vs, chosen), "instant": bool(t.get("instant"))}
            r = evaluate(url, q, now)
            r.update(title=substitute(p["title"], vs, chosen), expr=q["expr"])
            out["%d%s" % (p["id"], t["refId"])] = r
        print(json.dumps(out, sort_keys=True))
        return
    vs = variables(d)
    for p, t in targets(d):
        print(json.dumps({"id": p["id"], "title": substitute(p["title"], vs, chosen),
                          "type": p["type"], "refId": t["refId"],
                          "expr": substitute(t["expr"], vs, chosen),
                          "instant": bool(t.get("instant")), "table": t.get("format") == "table"}))


if __name__ == "__main__":
    main()
