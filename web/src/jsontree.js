// A JSON value as a collapsible tree: objects and arrays are <details>
// (open for the first two levels), leaves are typed spans.
function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

function leaf(value) {
  const type = value === null ? "null" : typeof value;
  return el("span", "j-" + type, type === "string" ? JSON.stringify(value) : String(value));
}

function node(key, value, depth) {
  const row = el("div", "j-row");
  if (key !== null) row.append(el("span", "j-key", key + ": "));
  if (value === null || typeof value !== "object") {
    row.append(leaf(value));
    return row;
  }
  const isArray = Array.isArray(value);
  const keys = Object.keys(value);
  const details = el("details", "j-node");
  details.open = depth < 2;
  const summary = el("summary");
  if (key !== null) summary.append(el("span", "j-key", key + ": "));
  summary.append(el("span", "j-brace", isArray ? `Array(${keys.length})` : `{${keys.length}}`));
  details.append(summary);
  const body = el("div", "j-body");
  for (const k of keys) body.append(node(isArray ? k : JSON.stringify(k), value[k], depth + 1));
  details.append(body);
  return details;
}

export function jsonTree(value) {
  const root = el("div", "json-tree");
  root.dataset.testid = "result-json";
  root.append(node(null, value, 0));
  return root;
}
