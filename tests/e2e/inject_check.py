"""Checks of `preflight inject` output, read with PyYAML (an independent reader of what the
injector writes with libyaml's marks). Prints TAP lines ("ok - ..." / "not ok - ...").

  inject_check.py strip SHIPPED OUT          manifests/ file without its preflight parts
  inject_check.py same SHIPPED INJECTED      the preflight parts of both are the same
  inject_check.py added BEFORE AFTER LABEL   AFTER = BEFORE plus insertions: every line of
                                             BEFORE in order (comments, blank lines), and every
                                             field of BEFORE with the same value
"""
import copy
import difflib
import sys

import yaml

GATE_VOLUMES = {"preflight-sa", "podinfo", "preflight-config", "preflight-verdict",
                "preflight-bin"}
GATE_INITS = {"preflight", "preflight-install", "preflight-watch"}


def docs(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def pod_specs(node, path=""):
    """Every pod spec (a mapping with a containers list), in document order."""
    if isinstance(node, dict):
        if isinstance(node.get("containers"), list):
            yield path, node
        for k, v in node.items():
            yield from pod_specs(v, f"{path}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from pod_specs(v, f"{path}[{i}]")


def job_specs(node):
    """Every batch/v1 JobSpec (a mapping with a pod template and Job fields)."""
    if isinstance(node, dict):
        t = node.get("template")
        if isinstance(t, dict) and isinstance(t.get("spec"), dict) and \
                "containers" in t["spec"] and ("completions" in node or "parallelism" in node or
                                               "podFailurePolicy" in node or
                                               "backoffLimit" in node):
            yield node
        for v in node.values():
            yield from job_specs(v)
    elif isinstance(node, list):
        for v in node:
            yield from job_specs(v)


def strip(d):
    """The manifest as a user would have it before gating it: what `preflight inject` adds,
    taken away."""
    d = copy.deepcopy(d)
    for _, spec in pod_specs(d):
        inits = [c for c in spec.get("initContainers", []) if c.get("name") not in GATE_INITS]
        spec.pop("initContainers", None)
        if inits:
            spec["initContainers"] = inits
        vols = [v for v in spec.get("volumes", []) if v.get("name") not in GATE_VOLUMES]
        spec.pop("volumes", None)
        if vols:
            spec["volumes"] = vols
        for c in spec["containers"]:
            m = [x for x in c.get("volumeMounts", []) if x.get("name") not in GATE_VOLUMES]
            c.pop("volumeMounts", None)
            if m:
                c["volumeMounts"] = m
    for js in job_specs(d):
        js.pop("podFailurePolicy", None)
    kind = d.get("kind")
    if kind == "JobSet":
        d["spec"].pop("failurePolicy", None)
        for rj in d["spec"].get("replicatedJobs", []):
            rj["template"]["spec"].pop("backoffLimit", None)
    if kind in ("TrainingRuntime", "ClusterTrainingRuntime"):
        d["spec"]["template"]["spec"].pop("failurePolicy", None)
        for rj in d["spec"]["template"]["spec"].get("replicatedJobs", []):
            rj["template"]["spec"].pop("backoffLimit", None)
        d["spec"].get("mlPolicy", {}).get("torch", {}).pop("envInjection", None)
    if kind == "Job" and d.get("apiVersion", "").startswith("batch.volcano.sh"):
        d["spec"].pop("policies", None)
        d["spec"].pop("plugins", None)
    return d


def gate(spec):
    return next((c for c in spec.get("initContainers", []) if c.get("name") == "preflight"), None)


def norm(x):
    """Values compared as text: a Quantity 8 and "8" are the same request."""
    if isinstance(x, dict):
        return {k: norm(v) for k, v in x.items()}
    if isinstance(x, list):
        return [norm(v) for v in x]
    return str(x)


def cmd_strip(src, out):
    with open(out, "w") as f:
        yaml.safe_dump_all([strip(d) for d in docs(src)], f, sort_keys=False)


def cmd_same(shipped, injected):
    a, b = docs(shipped), docs(injected)
    name = shipped.split("/")[-1]
    if len(a) != len(b):
        print(f"not ok - {name}: {len(b)} documents after inject, {len(a)} shipped")
        return
    training_image = "training-image" in name
    for da, db in zip(a, b):
        pa, pb = list(pod_specs(da)), list(pod_specs(db))
        for (path, sa), (_, sb) in zip(pa, pb):
            ga, gb = gate(sa), gate(sb)
            where = f"{name} {da['kind']}{path}"
            if ga is None:
                if gb is not None:
                    print(f"not ok - {where}: gated, where the shipped manifest is not")
                else:
                    print(f"ok - {where}: not gated, as shipped (it runs no rank)")
                continue
            if gb is None:
                print(f"not ok - {where}: no initContainer preflight")
                continue
            diffs = []
            env_a = [(e["name"], e.get("value"), e.get("valueFrom")) for e in ga.get("env", [])]
            env_b = [(e["name"], e.get("value"), e.get("valueFrom")) for e in gb.get("env", [])]
            if env_a != env_b:
                diffs.append(f"env {env_b} != {env_a}")
            for k in ("envFrom", "securityContext", "resources", "terminationMessagePolicy"):
                if norm(ga.get(k)) != norm(gb.get(k)):
                    diffs.append(f"{k} {gb.get(k)} != {ga.get(k)}")
            ma = [m for m in ga.get("volumeMounts", []) if m["name"] != "preflight-bin"]
            if norm(ma) != norm(gb.get("volumeMounts")):
                diffs.append(f"volumeMounts {gb.get('volumeMounts')} != {ma}")
            if not training_image and ga.get("args") != gb.get("args"):
                diffs.append(f"args {gb.get('args')} != {ga.get('args')}")
            va = {v["name"]: v for v in sa.get("volumes", []) if v["name"] in GATE_VOLUMES - {"preflight-bin"}}
            vb = {v["name"]: v for v in sb.get("volumes", []) if v["name"] in GATE_VOLUMES}
            if norm(va) != norm(vb):
                diffs.append(f"volumes {sorted(vb)} != {sorted(va)}")
            if diffs:
                print(f"not ok - {where}: the injected gate differs from the shipped one: " +
                      "; ".join(diffs)[:600])
            else:
                print(f"ok - {where}: initContainer preflight (env, envFrom, mounts, "
                      f"securityContext, resources) and its volumes as shipped")
        ja, jb = list(job_specs(da)), list(job_specs(db))
        for i, (x, y) in enumerate(zip(ja, jb)):
            if x.get("podFailurePolicy") != y.get("podFailurePolicy"):
                print(f"not ok - {name} {da['kind']}: Job {i}'s podFailurePolicy "
                      f"{y.get('podFailurePolicy')} != {x.get('podFailurePolicy')}")
            else:
                print(f"ok - {name} {da['kind']}: Job {i}'s podFailurePolicy as shipped")
        fa = da.get("spec", {}).get("failurePolicy") if da["kind"] == "JobSet" else None
        if da["kind"] in ("TrainingRuntime",):
            fa = da["spec"]["template"]["spec"].get("failurePolicy")
            fb = db["spec"]["template"]["spec"].get("failurePolicy")
        elif da["kind"] == "JobSet":
            fb = db["spec"].get("failurePolicy")
        if da["kind"] in ("JobSet", "TrainingRuntime"):
            print(("ok - " if fa == fb else "not ok - ") +
                  f"{name} {da['kind']}: the JobSet's failurePolicy as shipped")
        if da["kind"] == "TrainingRuntime":
            ea = da["spec"]["mlPolicy"]["torch"].get("envInjection")
            eb = db["spec"]["mlPolicy"]["torch"].get("envInjection")
            print(("ok - " if ea == eb else "not ok - ") +
                  f"{name}: mlPolicy.torch.envInjection (PET_* into preflight) as shipped")
        if da.get("apiVersion", "").startswith("batch.volcano.sh"):
            ok = da["spec"].get("policies") == db["spec"].get("policies") and \
                da["spec"].get("plugins") == db["spec"].get("plugins")
            print(("ok - " if ok else "not ok - ") +
                  f"{name}: Volcano policies and plugins (svc, env) as shipped")


def contained(a, b, path, problems):
    """Every field of a is in b with the same value; lists: a's items in b in order."""
    if isinstance(a, dict):
        if not isinstance(b, dict):
            problems.append(f"{path}: a mapping became {type(b).__name__}")
            return
        for k, v in a.items():
            if k not in b:
                problems.append(f"{path}.{k}: gone")
            else:
                contained(v, b[k], f"{path}.{k}", problems)
    elif isinstance(a, list):
        if not isinstance(b, list):
            problems.append(f"{path}: a list became {type(b).__name__}")
            return
        j = 0
        for i, item in enumerate(a):
            while j < len(b):
                p = []
                contained(item, b[j], "", p)
                j += 1
                if not p:
                    break
            else:
                problems.append(f"{path}[{i}]: not found in order")
                return
    elif a != b:
        problems.append(f"{path}: {a!r} became {b!r}")


def cmd_added(before, after, label):
    with open(before) as f:
        x = f.read().splitlines()
    with open(after) as f:
        y = f.read().splitlines()
    ops = [op for op in difflib.SequenceMatcher(None, x, y, autojunk=False).get_opcodes()
           if op[0] != "equal"]
    def subseq(a, b):  # a's characters in b in order (text inserted inside a flow collection)
        it = iter(b)
        return all(c in it for c in a)
    bad = [op for op in ops if op[0] != "insert" and
           not (op[0] == "replace" and subseq("\n".join(x[op[1]:op[2]]), "\n".join(y[op[3]:op[4]])))]
    if bad:
        t, i1, i2, _, _ = bad[0]
        print(f"not ok - {label}: only insertions: a {t} of input lines {i1 + 1}..{i2}: "
              f"{x[i1:i2][:2]}")
    else:
        print(f"ok - {label}: only insertions ({len(ops)} blocks); every input line, comment "
              f"and blank line kept in order")
    a, b = docs(before), docs(after)
    problems = []
    if len(a) != len(b):
        problems.append(f"{len(a)} documents became {len(b)}")
    for i, (da, db) in enumerate(zip(a, b)):
        contained(da, db, f"document {i + 1}", problems)
    if problems:
        print(f"not ok - {label}: every field of the input kept: {problems[:3]}")
    else:
        print(f"ok - {label}: every field of the input kept with its value (PyYAML reads both)")


SERVER_META = ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields",
               "selfLink")


def cmd_server(before, after, label):
    """An object read from the API server: what the server wrote is gone, every other field
    kept with its value."""
    a, b = docs(before), docs(after)
    problems, gone = [], []
    for i, (da, db) in enumerate(zip(a, b)):
        for k in SERVER_META:
            if k in da["metadata"]:
                del da["metadata"][k]
                gone.append(k) if k not in db["metadata"] else problems.append(f"metadata.{k} kept")
        if "status" in da:
            del da["status"]
            gone.append("status") if "status" not in db else problems.append("status kept")
        if da["kind"] == "Job" and da["spec"].get("podReplacementPolicy", "Failed") != "Failed":
            # the server's default, refused beside the podFailurePolicy inject adds
            del da["spec"]["podReplacementPolicy"]
            gone.append("podReplacementPolicy") if "podReplacementPolicy" not in db["spec"] \
                else problems.append("podReplacementPolicy kept")
        if da["kind"] == "Job" and not da["spec"].get("manualSelector"):
            da["spec"].pop("selector", None)
            labels = da["spec"]["template"]["metadata"].get("labels", {})
            for k in ("controller-uid", "batch.kubernetes.io/controller-uid"):
                labels.pop(k, None)
            if "selector" in db["spec"] or "controller-uid" in db["spec"]["template"]["metadata"].get("labels", {}):
                problems.append("the generated selector or controller-uid label kept")
        contained(da, db, f"document {i + 1}", problems)
    if problems:
        print(f"not ok - {label}: {problems[:3]}")
    else:
        print(f"ok - {label}: what the API server wrote removed ({', '.join(gone)}, the Job's "
              f"generated selector), every other field kept with its value")


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "strip":
        cmd_strip(sys.argv[2], sys.argv[3])
    elif cmd == "same":
        cmd_same(sys.argv[2], sys.argv[3])
    elif cmd == "server":
        cmd_server(sys.argv[2], sys.argv[3], sys.argv[4])
    elif cmd == "added":
        cmd_added(sys.argv[2], sys.argv[3], sys.argv[4])
