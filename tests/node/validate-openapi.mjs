// Validates an OpenAPI document with @seriousme/openapi-schema-validator (the
// official OAS JSON Schemas), then the rules those schemas cannot express:
// every $ref resolves, operationIds are unique, and each path template's
// {params} match the operation's `in: path` parameters.
//
//   node validate-openapi.mjs FILE      (or - / nothing: stdin)
// Prints "valid <version>" and exits 0, or prints the errors and exits 1.
import { readFileSync } from "node:fs";
import { Validator } from "@seriousme/openapi-schema-validator";

const arg = process.argv[2];
const text = readFileSync(!arg || arg === "-" ? 0 : arg, "utf8");
let spec;
try {
  spec = JSON.parse(text);
} catch (e) {
  console.error(`not JSON: ${e.message}`);
  process.exit(1);
}

const validator = new Validator();
const res = await validator.validate(spec);
const errors = res.valid ? [] : res.errors.map((e) => JSON.stringify(e));

function lookup(ref) {
  if (!ref.startsWith("#/")) return undefined;
  return ref
    .slice(2)
    .split("/")
    .map((s) => s.replace(/~1/g, "/").replace(/~0/g, "~"))
    .reduce((o, k) => (o === undefined ? undefined : o[k]), spec);
}

(function walk(node, where) {
  if (Array.isArray(node)) return node.forEach((v, i) => walk(v, `${where}/${i}`));
  if (!node || typeof node !== "object") return;
  if (typeof node.$ref === "string" && lookup(node.$ref) === undefined)
    errors.push(`${where}: $ref ${node.$ref} does not resolve`);
  for (const [k, v] of Object.entries(node)) walk(v, `${where}/${k}`);
})(spec, "#");

const deref = (p) => (p && p.$ref ? lookup(p.$ref) : p);
const seen = new Map();
for (const [path, item] of Object.entries(spec.paths ?? {})) {
  const templated = [...path.matchAll(/\{([^}]+)\}/g)].map((m) => m[1]).sort();
  for (const method of ["get", "put", "post", "delete", "patch", "head", "options", "trace"]) {
    const op = item[method];
    if (!op) continue;
    const where = `${method.toUpperCase()} ${path}`;
    if (!op.operationId) errors.push(`${where}: no operationId`);
    else if (seen.has(op.operationId)) errors.push(`${where}: operationId ${op.operationId} also on ${seen.get(op.operationId)}`);
    else seen.set(op.operationId, where);
    const params = [...(item.parameters ?? []), ...(op.parameters ?? [])].map(deref);
    const inPath = params.filter((p) => p && p.in === "path").map((p) => p.name).sort();
    if (JSON.stringify(inPath) !== JSON.stringify(templated))
      errors.push(`${where}: path parameters ${JSON.stringify(inPath)} do not match the template ${JSON.stringify(templated)}`);
  }
}

if (errors.length) {
  for (const e of errors) console.error(e);
  process.exit(1);
}
console.log(`valid ${validator.version}`);
