#!/usr/bin/env node
// Validates Kubernetes manifests (multi-document YAML files) against the API schemas, the way
// `kubectl apply --validate=strict` would on a v1.30 cluster:
//   * types, enums, integer formats and required fields with the validators of the npm
//     package kubernetes-models (generated from the Kubernetes OpenAPI spec);
//   * unknown fields (a typo such as `publishNotReadyAdresses`), which those validators let
//     through, by walking each object against the interfaces of the npm package
//     kubernetes-types (also generated from the OpenAPI spec, one interface per schema).
// Usage: NODE_PATH=build/tools/node_modules node tests/k8s/validate.js FILE...
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

function validateDoc(doc) {
  const problems = [];
  if (!doc.apiVersion || !doc.kind) return ["missing apiVersion or kind"];
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
for (const file of process.argv.slice(2)) {
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
