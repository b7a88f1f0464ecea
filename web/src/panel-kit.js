// Small DOM and formatting helpers the three side panels (sandboxes.js,
// files.js, terminal.js) share, so each panel is only its own behaviour.

// el("button", {class: "x", "data-testid": "y", onclick: fn}, "text", child…)
// Attributes starting with "on" become listeners; null/false ones are left out.
export function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on") && typeof value === "function") node.addEventListener(name.slice(2), value);
    else if (name === "text") node.textContent = value;
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

// The panel's frame: a header (title + tools) and a status line that says
// what the panel is doing or what went wrong (role=status: screen readers
// hear it). Returns {section, tools, status(text, kind), kind()}.
export function panelFrame(root, name, title) {
  const tools = el("div", { class: "pk-tools" });
  const line = el("p", { class: "pk-status", role: "status", "data-testid": name + "-status" });
  const section = el("section", { class: "pk-panel pk-" + name, "data-testid": name + "-panel" },
    el("header", { class: "pk-head" }, el("h2", { text: title }), tools), line);
  root.replaceChildren(section);
  function status(text, kind) {
    line.textContent = text || "";
    line.dataset.kind = kind || "info";
  }
  return { section, tools, status, kind: () => line.dataset.kind || "info" };
}

export function button(label, testid, onclick, extra) {
  return el("button", Object.assign({ type: "button", "data-testid": testid, onclick }, extra || {}), label);
}

// 1536 → "1.5 KiB"
export function formatBytes(n) {
  if (typeof n !== "number" || !isFinite(n)) return "";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return (i === 0 ? String(n) : n.toFixed(n < 10 ? 1 : 0)) + " " + units[i];
}

// An ISO string or epoch ms → "3 min ago" / "in 12 min" (the absolute time
// goes into a title attribute by the caller).
export function relativeTime(when, now) {
  const t = typeof when === "number" ? when : Date.parse(when);
  if (!isFinite(t)) return "";
  const s = Math.round((t - (now || Date.now())) / 1000);
  const a = Math.abs(s);
  const text = a < 5 ? "now" : a < 90 ? a + " s" : a < 5400 ? Math.round(a / 60) + " min"
    : a < 129600 ? Math.round(a / 3600) + " h" : Math.round(a / 86400) + " d";
  if (text === "now") return text;
  return s < 0 ? text + " ago" : "in " + text;
}

export function absoluteTime(when) {
  const t = typeof when === "number" ? when : Date.parse(when);
  return isFinite(t) ? new Date(t).toLocaleString() : "";
}

// "a/b c/d" → "a/b%20c/d": each segment escaped, the slashes kept.
export function escapePath(path) {
  return path.split("/").filter((s) => s !== "").map(encodeURIComponent).join("/");
}

// Wraps a panel's refresh for the app's events: it runs now when the panel is
// on screen, else when the panel's tab is shown next ("tab" event; it also
// refreshes on every show, since sandboxes change by themselves). So a hidden
// panel makes no calls: no key prompt at page load for a panel nobody opened.
export function refreshWhenShown(root, app, tab, refresh) {
  const shown = () => (root.checkVisibility ? root.checkVisibility() : root.offsetParent !== null);
  app.on("tab", (name) => { if (name === tab) refresh(); });
  return (...args) => (shown() ? refresh(...args) : undefined);
}

// A failed raw (non-JSON-call) response's message: the API's error body as
// one line when there is one, else "HTTP <status>". A network failure is a
// rejected fetch: pass the error instead, its text is the message.
export async function failure(api, resOrError) {
  if (resOrError instanceof Error) return resOrError.message;
  let body = null;
  try { body = await resOrError.json(); } catch (_) { /* not JSON */ }
  return api.message(body, resOrError.status);
}

// api.json that never throws: a network failure (the daemon stopped, the
// connection dropped) comes back as {ok: false, status: 0, body: {message}}.
export function callJson(api, method, path, body) {
  return api.json(method, path, body).catch((e) => ({ ok: false, status: 0, body: { message: String(e.message || e) } }));
}
