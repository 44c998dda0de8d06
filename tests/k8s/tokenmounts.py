"""Where a pod's ServiceAccount token goes. Usage: tokenmounts.py FILE TOKEN_DIR
Prints, for each pod template in the YAML documents of FILE (Jobs, StatefulSets, ... and the
launchers' custom resources, at any depth):
  KIND: automount=<pod-level automountServiceAccountToken> mounts=<containers mounting
  TOKEN_DIR, (ro) or (rw)> files=<paths of those volumes> exp=<token expirationSeconds>
Used by tests/e2e/test_helm.sh and test_manifests.sh."""
import sys

import yaml


def pods(node):
    """Every pod spec under node (a dict with containers)."""
    if isinstance(node, dict):
        if isinstance(node.get("containers"), list):
            yield node
            return
        for v in node.values():
            yield from pods(v)
    elif isinstance(node, list):
        for v in node:
            yield from pods(v)


def describe(p, token_dir):
    cs = p.get("initContainers", []) + p["containers"]
    vols = {m["name"] for c in cs for m in c.get("volumeMounts", []) if m["mountPath"].rstrip("/") == token_dir}
    who = []
    for c in cs:
        ms = [m for m in c.get("volumeMounts", []) if m["name"] in vols]
        if ms:
            who.append(c["name"] + ("(ro)" if all(m.get("readOnly") for m in ms) else "(rw)"))
    files, exp = [], []
    for v in p.get("volumes", []):
        if v["name"] not in vols:
            continue
        for s in v.get("projected", {}).get("sources", []):
            if "serviceAccountToken" in s:
                files.append(s["serviceAccountToken"]["path"])
                exp.append(s["serviceAccountToken"].get("expirationSeconds"))
            for k in ("configMap", "downwardAPI"):
                files += [i["path"] for i in s.get(k, {}).get("items", [])]
    return "automount=%s mounts=%s files=%s exp=%s" % (
        p.get("automountServiceAccountToken"), ",".join(who), ",".join(sorted(files)), exp)


def main():
    for d in yaml.safe_load_all(open(sys.argv[1])):
        if not d or d.get("kind") in (None, "ConfigMap", "Secret"):
            continue
        for p in pods(d.get("spec", {})):
            sa = p.get("serviceAccountName")
            print("%s%s: %s" % (d["kind"], "" if len(sys.argv) < 4 else "(%s)" % sa, describe(p, sys.argv[2])))


if __name__ == "__main__":
    main()
