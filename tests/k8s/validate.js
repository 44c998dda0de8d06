#!/usr/bin/env node
// Validates Kubernetes manifests (multi-document YAML files) against the API schemas, the way
// `kubectl apply --validate=strict` would on a v1.30 cluster:
//   * types, enums, integer formats and required fields with the validators of the npm
//     package kubernetes-models (generated from the Kubernetes OpenAPI spec);
//   * unknown fields (a typo such as `publishNotReadyAdresses`), which those validators let
//     through, by walking each object against the interfaces of the npm package
//     kubernetes-types (also generated from the OpenAPI spec, one interface per schema).
// Custom resources of the training launchers (JobSet, TrainJob, PyTorchJob, MPIJob, Volcano
// Job, LeaderWorkerSet) are validated against the openAPIV3Schema of their CRD, read from the
// CRD YAML files in tests/k8s/crds/ (or --crds DIR), the way the API server's structural
// schema validation would: types, formats, enums, required fields, bounds, patterns, and
// unknown fields (which the API server prunes, or refuses with strict field validation).
// CEL rules (x-kubernetes-validations) are not evaluated: no CEL interpreter here. Every pod
// template inside a custom resource is also validated against the Kubernetes API schemas.
// Usage: NODE_PATH=build/tools/node_modules node tests/k8s/validate.js [--crds DIR] FILE...
// Prints "ok FILE: Kind/name" or "error FILE: Kind/name: /path: problem" per document and
// exits 1 when any document is invalid or of a kind it does not know.
"use strict";
const fs = require("fs");
const path = require("path");
const yaml = require("js-yaml");

const typesRoot = path.dirname(require.resolve("kubernetes-types/package.json"));

// ---- kubernetes-types: module ("core/v1") -> interface -> field -> {type, optional}
const modules = new Map();
function loadModule(mod) {
  if (modules.has(mod)) return modules.get(mod);
  const file = path.join(typesRoot, mod + ".d.ts");
  const m = { ifaces: new Map(), imports: new Map(), aliases: new Set() };
  modules.set(mod, m);
  if (!fs.existsSync(file)) return m;
  const src = fs.readFileSync(file, "utf8").replace(/\/\*[\s\S]*?\*\//g, "");
  for (const im of src.matchAll(/import \{([^}]*)\} from "([^"]+)";/g)) {
    const from = path.posix.join(path.posix.dirname(mod), im[2]);
    for (const name of im[1].split(",").map((s) => s.trim()).filter(Boolean)) m.imports.set(name, from);
  }
  for (const al of src.matchAll(/export type (\w+)\s*=/g)) m.aliases.add(al[1]);
  const re = /export interface (\w+)\s*\{/g;
  let hit;
  while ((hit = re.exec(src))) {
    let depth = 1, i = re.lastIndex;
    const start = i;
    while (depth > 0 && i < src.length) {
      if (src[i] === "{") depth++;
      else if (src[i] === "}") depth--;
      i++;
    }
    const body = src.slice(start, i - 1);
    const fields = new Map();
    let d = 0, cur = "";
    for (const ch of body) {
      if (ch === "{" || ch === "<") d++;
      if (ch === "}" || ch === ">") d--;
      if (ch === ";" && d === 0) {
        const f = cur.trim().match(/^"?([\w$.-]+)"?(\??):\s*([\s\S]+)$/);
        if (f) fields.set(f[1], { optional: f[2] === "?", type: f[3].replace(/\s+/g, " ").trim() });
        cur = "";
      } else {
        cur += ch;
      }
    }
    m.ifaces.set(hit[1], fields);
  }
  return m;
}

// Resolves a type name seen in module mod to [module, interface] or null (a primitive/alias).
function resolve(mod, name) {
  const m = loadModule(mod);
  if (m.ifaces.has(name)) return [mod, name];
  if (m.imports.has(name)) return resolve(m.imports.get(name), name);
  return null;
}

// Fields the API has but kubernetes-types 1.30.0 lacks: NamedRuleWithOperations inlines
// RuleWithOperations (k8s.io/api admissionregistration/v1 types.go), whose resources and scope
// the package's interface drops (kubernetes-models' schema has them, and checks their types).
const MISSING_IN_TYPES = { NamedRuleWithOperations: ["resources", "scope"] };

// Walks value against type text t (in module mod); pushes problems for unknown or missing
// fields.
function walk(value, mod, t, where, problems) {
  if (value === null || value === undefined) return;
  t = t.trim();
  let a = t.match(/^Array<([\s\S]+)>$/);
  if (a) {
    if (Array.isArray(value)) value.forEach((v, i) => walk(v, mod, a[1], where + "/" + i, problems));
    return;
  }
  a = t.match(/^\{\s*\[\w+: string\]:\s*([\s\S]+?);?\s*\}$/);
  if (a) {
    if (typeof value === "object" && !Array.isArray(value))
      for (const k of Object.keys(value)) walk(value[k], mod, a[1], where + "/" + k, problems);
    return;
  }
  if (!/^\w+$/.test(t)) return; // a literal or union: the type validators cover it
  const r = resolve(mod, t);
  if (!r) return;
  const fields = loadModule(r[0]).ifaces.get(r[1]);
  if (typeof value !== "object" || Array.isArray(value)) return; // a type error, reported by kubernetes-models
  for (const k of Object.keys(value)) {
    if (!fields.has(k)) {
      if ((MISSING_IN_TYPES[r[1]] || []).includes(k)) continue;
      problems.push(`${where}/${k}: unknown field "${k}" in ${r[1]}`);
      continue;
    }
    walk(value[k], r[0], fields.get(k).type, where + "/" + k, problems);
  }
  for (const [k, f] of fields)
    if (!f.optional && !(k in value)) problems.push(`${where}: missing required field "${k}" in ${r[1]}`);
}

// apiVersion -> [kubernetes-models module, kubernetes-types module]
function modulesFor(apiVersion) {
  const [group, version] = apiVersion.includes("/") ? apiVersion.split("/") : ["", apiVersion];
  const short = group === "" ? "core" : group.replace(/\.k8s\.io$/, "").replace(/\.authorization$/, "");
  const models = group === "" ? `kubernetes-models/${version}` : `kubernetes-models/${group}/${version}`;
  return [models, `${short}/${version}`];
}

// ---- CRDs: "group/version Kind" -> openAPIV3Schema
const crds = new Map();
function loadCrds(dir) {
  if (!fs.existsSync(dir)) return;
  for (const f of fs.readdirSync(dir).filter((n) => n.endsWith(".yaml")).sort()) {
    for (const d of yaml.loadAll(fs.readFileSync(path.join(dir, f), "utf8"))) {
      if (!d || d.kind !== "CustomResourceDefinition") continue;
      for (const v of d.spec.versions || [])
        if (v.served !== false && v.schema && v.schema.openAPIV3Schema)
          crds.set(`${d.spec.group}/${v.name} ${d.spec.names.kind}`, { schema: v.schema.openAPIV3Schema, file: f });
    }
  }
}

const typeOf = (v) =>
  v === null ? "null" : Array.isArray(v) ? "array" : Number.isInteger(v) ? "integer" : typeof v;

// Validates value against an OpenAPI v3 (structural) schema s; pushes "where: problem".
function checkSchema(value, s, where, problems) {
  if (!s) return;
  const at = where || "/";
  if (value === null) {
    if (!s.nullable && s.type) problems.push(`${at}: null where ${s.type} is wanted`);
    return;
  }
  for (const sub of s.allOf || []) checkSchema(value, sub, where, problems);
  for (const key of ["anyOf", "oneOf"]) {
    if (!s[key] || s["x-kubernetes-int-or-string"]) continue;
    const ok = s[key].filter((sub) => {
      const p = [];
      checkSchema(value, Object.assign({ "x-kubernetes-preserve-unknown-fields": true }, sub), where, p);
      return p.length === 0;
    }).length;
    if (key === "anyOf" ? ok === 0 : ok !== 1) problems.push(`${at}: matches ${ok} of the ${key} schemas`);
  }
  const t = typeOf(value);
  if (s["x-kubernetes-int-or-string"]) {
    if (t !== "integer" && t !== "string") problems.push(`${at}: ${t} where an integer or a string is wanted`);
    return;
  }
  if (s.type) {
    const good = s.type === t || (s.type === "number" && t === "integer");
    if (!good) {
      problems.push(`${at}: ${t} ${JSON.stringify(value).slice(0, 40)} where ${s.type} is wanted`);
      return;
    }
  }
  if (s.enum && !s.enum.some((e) => e === value)) problems.push(`${at}: ${JSON.stringify(value)} is not one of ${JSON.stringify(s.enum)}`);
  if (t === "integer" || t === "number") {
    if (s.format === "int32" && (value < -2147483648 || value > 2147483647)) problems.push(`${at}: ${value} is out of int32 range`);
    if (s.minimum !== undefined && (s.exclusiveMinimum ? value <= s.minimum : value < s.minimum)) problems.push(`${at}: ${value} is below the minimum ${s.minimum}`);
    if (s.maximum !== undefined && (s.exclusiveMaximum ? value >= s.maximum : value > s.maximum)) problems.push(`${at}: ${value} is above the maximum ${s.maximum}`);
  }
  if (t === "string") {
    if (s.minLength !== undefined && value.length < s.minLength) problems.push(`${at}: shorter than ${s.minLength}`);
    if (s.maxLength !== undefined && value.length > s.maxLength) problems.push(`${at}: longer than ${s.maxLength}`);
    let re = null;
    try {
      re = s.pattern ? new RegExp(s.pattern, "u") : null;
    } catch (e) {
      re = null; // an RE2 construct JavaScript lacks: left to the API server
    }
    if (re && !re.test(value)) problems.push(`${at}: "${value}" does not match ${s.pattern}`);
  }
  if (t === "array") {
    if (s.minItems !== undefined && value.length < s.minItems) problems.push(`${at}: fewer than ${s.minItems} items`);
    if (s.maxItems !== undefined && value.length > s.maxItems) problems.push(`${at}: more than ${s.maxItems} items`);
    value.forEach((v, i) => checkSchema(v, s.items, `${where}/${i}`, problems));
  }
  if (t === "object") {
    for (const r of s.required || []) if (!(r in value)) problems.push(`${at}: missing required field "${r}"`);
    const props = s.properties || {};
    const embedded = s["x-kubernetes-embedded-resource"];
    for (const k of Object.keys(value)) {
      if (k in props) checkSchema(value[k], props[k], `${where}/${k}`, problems);
      else if (typeof s.additionalProperties === "object") checkSchema(value[k], s.additionalProperties, `${where}/${k}`, problems);
      else if (s.additionalProperties === true || s["x-kubernetes-preserve-unknown-fields"]) continue;
      else if (embedded && ["apiVersion", "kind", "metadata"].includes(k)) continue;
      else if (where === "" && ["apiVersion", "kind", "metadata"].includes(k)) continue;
      else if (s.properties || s.additionalProperties === false) problems.push(`${where}/${k}: unknown field "${k}"`);
    }
  }
}

// Pod templates inside a custom resource: objects under a key "template" whose spec has
// containers (the pod template of a Job inside a JobSet or TrainingRuntime is itself inside a
// "template": only the innermost one has containers).
function podTemplates(v, where, out) {
  if (!v || typeof v !== "object") return out;
  for (const [k, x] of Object.entries(v)) {
    if (!x || typeof x !== "object") continue;
    if (k === "template" && x.spec && Array.isArray(x.spec.containers)) out.push([where + "/" + k, x]);
    else podTemplates(x, where + "/" + k, out);
  }
  return out;
}

function validatePodTemplate(tpl, where, problems) {
  const { PodTemplateSpec } = require("kubernetes-models/v1");
  try {
    new PodTemplateSpec(tpl).validate();
  } catch (e) {
    problems.push(`${where}: ` + String(e.message || e).replace(/^data/, "").split(", ").join("; "));
  }
  walk(tpl, "core/v1", "PodTemplateSpec", where, problems);
}

function validateDoc(doc) {
  const problems = [];
  if (!doc.apiVersion || !doc.kind) return ["missing apiVersion or kind"];
  const crd = crds.get(`${doc.apiVersion} ${doc.kind}`);
  if (crd) {
    checkSchema(doc, crd.schema, "", problems);
    const meta = doc.metadata || {};
    if (!meta.name && !meta.generateName) problems.push(`/metadata: missing name`);
    for (const [where, tpl] of podTemplates(doc.spec, "/spec", [])) validatePodTemplate(tpl, where, problems);
    return problems;
  }
  const [modelsMod, typesMod] = modulesFor(doc.apiVersion);
  let Model;
  try {
    Model = require(modelsMod)[doc.kind];
  } catch (e) {
    Model = undefined;
  }
  if (!Model) return [`unknown kind ${doc.apiVersion} ${doc.kind}`];
  try {
    new Model(doc).validate();
  } catch (e) {
    problems.push(String(e.message || e).replace(/^data/, "").split(", ").join("; "));
  }
  if (!resolve(typesMod, doc.kind)) problems.push(`no schema for ${doc.apiVersion} ${doc.kind}`);
  else walk(doc, typesMod, doc.kind, "", problems);
  return problems;
}

let bad = 0;
let args = process.argv.slice(2);
let crdDir = path.join(__dirname, "crds");
if (args[0] === "--crds") {
  crdDir = args[1];
  args = args.slice(2);
}
loadCrds(crdDir);
for (const file of args) {
  let docs;
  try {
    docs = yaml.loadAll(fs.readFileSync(file, "utf8"));
  } catch (e) {
    console.log(`error ${file}: YAML: ${e.message.split("\n")[0]}`);
    bad++;
    continue;
  }
  docs = docs.filter((d) => d !== null && d !== undefined);
  if (docs.length === 0) {
    console.log(`error ${file}: no documents`);
    bad++;
  }
  for (const doc of docs) {
    const name = `${doc.kind}/${(doc.metadata && doc.metadata.name) || "?"}`;
    const problems = validateDoc(doc);
    if (problems.length) {
      bad++;
      for (const p of problems) console.log(`error ${file}: ${name}: ${p}`);
    } else {
      console.log(`ok ${file}: ${name}`);
    }
  }
}
process.exit(bad ? 1 : 0);
