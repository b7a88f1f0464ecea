// Renders what a run answered, by kind: the ExecutionResult's logs, results
// ({text} / {json}), python's MIME bundles (data, display: image/png as an
// <img>, text/html in a sandboxed iframe), the guest's error with its
// traceback, an API error, and a usage line.
import { jsonTree } from "./jsontree.js";

function el(tag, testid, text) {
  const e = document.createElement(tag);
  if (testid) e.dataset.testid = testid;
  if (text !== undefined) e.textContent = text;
  return e;
}

function block(title, testid, lines, cls) {
  const box = el("div");
  box.className = "out " + (cls || "");
  box.append(el("div", null, title));
  box.lastChild.className = "out-title";
  box.append(el("pre", testid, lines));
  return box;
}

function html(markup) {
  const frame = el("iframe", "result-html");
  frame.setAttribute("sandbox", ""); // no script, no forms, an opaque origin
  frame.setAttribute("referrerpolicy", "no-referrer");
  frame.srcdoc = markup;
  return frame;
}

function image(b64) {
  const img = el("img", "result-image");
  img.alt = "figure";
  img.src = "data:image/png;base64," + b64;
  return img;
}

// The richest kind a MIME bundle carries.
function bundle(b) {
  if (b["image/png"]) return image(b["image/png"]);
  if (b["text/html"]) return html(b["text/html"]);
  if (b["application/json"] !== undefined) return jsonTree(b["application/json"]);
  return el("pre", "result-text", b["text/plain"] || "");
}

function result(r) {
  if (r.json !== undefined) return jsonTree(r.json);
  return el("pre", "result-text", r.text);
}

function error(e) {
  const box = el("div", "error");
  box.className = "out err";
  box.append(el("div", "error-name", e.name + ": " + (e.message || "")));
  box.firstChild.className = "out-title";
  if (e.traceback && e.traceback.length) box.append(el("pre", "error-traceback", e.traceback.join("\n")));
  return box;
}

function bytes(n) {
  return n >= 1 << 20 ? (n / (1 << 20)).toFixed(1) + " MiB" : Math.round(n / 1024) + " KiB";
}

function usage(r) {
  const parts = [r.language, r.engine, (r.durationMs || 0).toFixed(1) + " ms"];
  const u = r.usage || {};
  if (u.fuelConsumed !== undefined) parts.push(`fuel ${u.fuelConsumed.toLocaleString("en")}/${u.fuelLimit.toLocaleString("en")}`);
  if (u.memoryBytes) parts.push("memory " + bytes(u.memoryBytes));
  if (r.context) parts.push(`context ${r.context.id.slice(0, 8)} · run #${r.executionCount}`);
  return el("div", "usage", parts.filter(Boolean).join(" · "));
}

// target: the element to fill; reply: {status, ok, body} from api.json;
// message: api.message for an error body.
export function render(target, reply, message) {
  target.textContent = "";
  const r = reply.body;
  if (!reply.ok || !r || !r.logs) {
    target.append(error({ name: "HTTP " + reply.status, message: message(r, reply.status) }));
    return;
  }
  if (r.logs.stdout.length) target.append(block("stdout", "stdout", r.logs.stdout.join("\n")));
  if (r.logs.stderr.length) target.append(block("stderr", "stderr", r.logs.stderr.join("\n"), "warn"));
  for (const d of r.display || []) target.append(bundle(d));
  // python's last-expression bundle when it is richer than results[]
  // (which already holds its text or JSON).
  if (r.data && (r.data["image/png"] || r.data["text/html"])) target.append(bundle(r.data));
  else for (const x of r.results || []) target.append(result(x));
  if (r.error) target.append(error(r.error));
  target.append(usage(r));
}
