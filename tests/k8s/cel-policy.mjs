// Evaluates the chart's ValidatingAdmissionPolicies (the CEL of matchConditions, variables
// and validations, as the API server would) against sample admission requests: the token's
// own node or pod against another, preflight's keys against others. The evaluator is the npm
// package @marcbachmann/cel-js (a CEL implementation in JavaScript), not the API server's
// cel-go with Kubernetes' libraries: it shows what the expressions decide, not that an API
// server compiles them (no API server runs here).
// Usage: NODE_PATH=build/tools/node_modules node tests/k8s/cel-policy.mjs RENDER.yaml NODE_KEY
//        ANNOTATION_KEY...
// Prints "ok - ..." / "not ok - ..." lines (TAP-like, as tests/e2e/lib.sh), one per case.
import { createRequire } from "module";
import fs from "fs";
import path from "path";
const require = createRequire(path.join(process.env.NODE_PATH || ".", "x.js"));
const yaml = require("js-yaml");
const { evaluate } = await import(
  path.join(process.env.NODE_PATH, "@marcbachmann/cel-js/lib/index.js")
);

const [render, nodeKey, ...annKeys] = process.argv.slice(2);
const policies = yaml
  .loadAll(fs.readFileSync(render, "utf8"))
  .filter((d) => d && d.kind === "ValidatingAdmissionPolicy");
const clone = (o) => JSON.parse(JSON.stringify(o));

// "allow" / "deny: message" / "skip" (no match), or "error: ..." when an expression fails
// (failurePolicy Fail: the API server would refuse the write)
function decide(policy, request, object, oldObject) {
  const spec = policy.spec;
  const ctx = { request, object, oldObject, variables: {} };
  const res = request.resource.resource;
  const matched = spec.matchConstraints.resourceRules.some(
    (r) => r.resources.includes(res) && r.operations.includes(request.operation)
  );
  if (!matched) return "skip";
  try {
    for (const m of spec.matchConditions || []) if (evaluate(m.expression, ctx) !== true) return "skip";
    for (const v of spec.variables || []) ctx.variables[v.name] = evaluate(v.expression, ctx);
    for (const v of spec.validations) {
      const r = evaluate(v.expression, ctx);
      if (r !== true) return "deny: " + v.message;
    }
  } catch (e) {
    return "error: " + e.message;
  }
  return "allow";
}

let failed = 0;
function expect(name, got, want) {
  const pass = want === "deny" ? got.startsWith("deny:") : got === want;
  if (pass) console.log(`ok - cel ${name} (${got.split(":")[0]})`);
  else {
    console.log(`not ok - cel ${name}: ${got}, expected ${want}`);
    failed++;
  }
}

function sa(policy) {
  const m = policy.spec.matchConditions[0].expression.match(/"([^"]+)"/);
  return m[1];
}
function req(policy, resource, extra) {
  return {
    operation: "UPDATE",
    resource: { group: "", version: "v1", resource },
    userInfo: { username: sa(policy), groups: ["system:serviceaccounts"], ...(extra ? { extra } : {}) },
  };
}

const node = {
  apiVersion: "v1",
  kind: "Node",
  metadata: {
    name: "gpu-07",
    labels: { "kubernetes.io/hostname": "gpu-07", "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3" },
    annotations: { "node.alpha.kubernetes.io/ttl": "0" },
  },
  spec: {
    podCIDR: "10.0.7.0/24",
    podCIDRs: ["10.0.7.0/24"],
    providerID: "aws:///us-east-1a/i-0abc",
    taints: [{ key: "nvidia.com/gpu", value: "present", effect: "NoSchedule" }],
  },
};
const own = { "authentication.kubernetes.io/node-name": ["gpu-07"], "authentication.kubernetes.io/pod-name": ["trainer-3"] };
const other = { "authentication.kubernetes.io/node-name": ["gpu-08"], "authentication.kubernetes.io/pod-name": ["trainer-4"] };

for (const p of policies) {
  const res = p.spec.matchConstraints.resourceRules[0].resources[0];
  if (res === "nodes") {
    const label = clone(node);
    label.metadata.labels[nodeKey] = "rdma-port-down";
    const taint = clone(node);
    taint.spec.taints.push({ key: nodeKey, value: "rdma-port-down", effect: "NoSchedule" });
    expect("node: own node, preflight's label", decide(p, req(p, "nodes", own), label, node), "allow");
    expect("node: own node, preflight's NoSchedule taint", decide(p, req(p, "nodes", own), taint, node), "allow");
    const bare = clone(node);
    delete bare.metadata.labels;
    delete bare.metadata.annotations;
    delete bare.spec.taints;
    const bareLabel = clone(bare);
    bareLabel.metadata.labels = { [nodeKey]: "gpu-missing" };
    const bareTaint = clone(bare);
    bareTaint.spec.taints = [{ key: nodeKey, value: "gpu-missing", effect: "NoSchedule" }];
    expect("node: no labels before, preflight's label", decide(p, req(p, "nodes", own), bareLabel, bare), "allow");
    expect("node: no taints before, preflight's taint", decide(p, req(p, "nodes", own), bareTaint, bare), "allow");
    const retaint = clone(taint);
    retaint.spec.taints[1].value = "gpu-missing";
    expect("node: own node, preflight's taint value replaced", decide(p, req(p, "nodes", own), retaint, taint), "allow");
    const untaint = clone(node);
    expect("node: own node, preflight's taint removed", decide(p, req(p, "nodes", own), untaint, taint), "allow");
    expect("node: another node", decide(p, req(p, "nodes", other), label, node), "deny");
    expect("node: a token without the node claim", decide(p, req(p, "nodes", { "authentication.kubernetes.io/pod-name": ["trainer-3"] }), label, node), "deny");
    expect("node: a token without extra", decide(p, req(p, "nodes", null), label, node), "deny");
    const otherLabel = clone(node);
    otherLabel.metadata.labels["nvidia.com/gpu.product"] = "A100";
    expect("node: another label changed", decide(p, req(p, "nodes", own), otherLabel, node), "deny");
    const dropLabel = clone(label);
    delete dropLabel.metadata.labels["kubernetes.io/hostname"];
    expect("node: another label removed", decide(p, req(p, "nodes", own), dropLabel, node), "deny");
    const noexec = clone(node);
    noexec.spec.taints.push({ key: nodeKey, value: "x", effect: "NoExecute" });
    expect("node: preflight's key as a NoExecute taint", decide(p, req(p, "nodes", own), noexec, node), "deny");
    const dropTaint = clone(taint);
    dropTaint.spec.taints.splice(0, 1);
    expect("node: another taint removed", decide(p, req(p, "nodes", own), dropTaint, node), "deny");
    const addTaint = clone(node);
    addTaint.spec.taints.push({ key: "evil", effect: "NoSchedule" });
    expect("node: another taint added", decide(p, req(p, "nodes", own), addTaint, node), "deny");
    const cordon = clone(label);
    cordon.spec.unschedulable = true;
    expect("node: cordoned", decide(p, req(p, "nodes", own), cordon, node), "deny");
    const ann = clone(node);
    ann.metadata.annotations[nodeKey] = "x";
    expect("node: an annotation", decide(p, req(p, "nodes", own), ann, node), "deny");
    const prov = clone(node);
    prov.spec.providerID = "aws:///us-east-1a/i-0def";
    expect("node: spec.providerID changed", decide(p, req(p, "nodes", own), prov, node), "deny");
    const someone = req(p, "nodes", other);
    someone.userInfo.username = "system:serviceaccount:kube-system:node-controller";
    expect("node: another user is not this policy's business", decide(p, someone, otherLabel, node), "skip");
  } else if (res === "pods") {
    const pod = {
      apiVersion: "v1",
      kind: "Pod",
      metadata: {
        name: "trainer-3",
        namespace: "ml",
        labels: { "app.kubernetes.io/name": "trainer" },
        annotations: { "k8s.v1.cni.cncf.io/networks": "ml/sriov-rdma-a" },
      },
      spec: { containers: [{ name: "trainer", image: "nvcr.io/nvidia/pytorch:24.05-py3" }], nodeName: "gpu-07" },
    };
    const mine = clone(pod);
    for (const k of annKeys) mine.metadata.annotations[k] = "fail";
    expect("pod: own pod, preflight's annotations", decide(p, req(p, "pods", own), mine, pod), "allow");
    const again = clone(mine);
    for (const k of annKeys) again.metadata.annotations[k] = "pass";
    expect("pod: own pod, preflight's annotations rewritten", decide(p, req(p, "pods", own), again, mine), "allow");
    const bare = clone(pod);
    delete bare.metadata.annotations;
    const bareMine = clone(bare);
    bareMine.metadata.annotations = { [annKeys[0]]: "pass" };
    expect("pod: no annotations before", decide(p, req(p, "pods", own), bareMine, bare), "allow");
    const theirs = clone(mine);
    theirs.metadata.name = "trainer-4";
    const theirsOld = clone(pod);
    theirsOld.metadata.name = "trainer-4";
    expect("pod: another pod", decide(p, req(p, "pods", own), theirs, theirsOld), "deny");
    expect("pod: a token without the pod claim", decide(p, req(p, "pods", { "authentication.kubernetes.io/node-name": ["gpu-07"] }), mine, pod), "deny");
    const otherAnn = clone(mine);
    otherAnn.metadata.annotations["k8s.v1.cni.cncf.io/networks"] = "ml/evil";
    expect("pod: another annotation changed", decide(p, req(p, "pods", own), otherAnn, pod), "deny");
    const lab = clone(mine);
    lab.metadata.labels["preflight.dev/service"] = "x";
    expect("pod: a label", decide(p, req(p, "pods", own), lab, pod), "deny");
    const img = clone(mine);
    img.spec.containers[0].image = "evil:latest";
    expect("pod: the spec (an image)", decide(p, req(p, "pods", own), img, pod), "deny");
  }
}
process.exit(failed ? 1 : 0);
