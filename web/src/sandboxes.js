// The sandboxes panel: every sandbox the runtime and bridge APIs serve
// (GET /sandboxes), each with its contexts and its state; choose one (the
// files panel, the terminal and Run follow it), create one (POST /v1/sandbox),
// delete one (DELETE /v1/sandbox/:id, after a confirm). mount(root, app), see
// app.js. Events: listens to "changed" and "sandbox"; clicking a context sets
// app.state.contextId and emits "context" (id).
import { el, panelFrame, button, relativeTime, absoluteTime, refreshWhenShown, failure, callJson } from "./panel-kit.js";

const PAGE = 100;

export function mount(root, app) {
  const { api } = app;
  const frame = panelFrame(root, "sandboxes", "Sandboxes");
  const list = el("ul", { class: "sbx-list", "data-testid": "sandbox-list" });
  const more = el("p", { class: "pk-note", "data-testid": "sandboxes-more" });
  frame.section.append(list, more);
  frame.tools.append(
    button("New sandbox", "sandbox-create", create, { title: "POST /v1/sandbox" }),
    button("Refresh", "sandboxes-refresh", () => refresh()));

  let seq = 0; // answers to an older refresh are dropped

  async function refresh(note) {
    const mine = ++seq;
    frame.section.setAttribute("aria-busy", "true");
    const r = await callJson(api, "GET", "/sandboxes?limit=" + PAGE);
    if (mine !== seq) return;
    frame.section.removeAttribute("aria-busy");
    if (!r.ok) {
      frame.status("Cannot list sandboxes: " + api.message(r.body, r.status), "error");
      return;
    }
    const items = r.body.sandboxes || [];
    render(items);
    more.textContent = r.body.total > items.length ? `Showing ${items.length} of ${r.body.total}.` : "";
    frame.section.dataset.count = String(items.length);
    // A note replaces the line; a plain refresh keeps what the last action said, but not an old error.
    if (note || !items.length) frame.status(note || "No sandboxes yet: create one, or run code in a sandbox.");
    else if (frame.kind() === "error") frame.status("");
  }

  function render(items) {
    const now = Date.now();
    list.replaceChildren(...items.map((s) => row(s, now)));
  }

  function row(s, now) {
    const chosen = s.id === app.state.sandboxId;
    const contexts = s.contexts || [];
    const meta = el("span", { class: "sbx-meta" },
      el("span", { title: "created " + absoluteTime(s.createdAt) }, "created " + relativeTime(s.createdAt, now)),
      el("span", { title: "last used " + absoluteTime(s.lastUsed) }, "used " + relativeTime(s.lastUsed, now)),
      s.expiresAt ? el("span", { title: "expires " + absoluteTime(s.expiresAt), "data-testid": "sandbox-expires" },
        "expires " + relativeTime(s.expiresAt, now)) : null,
      el("span", { "data-testid": "sandbox-context-count" },
        contexts.length + (contexts.length === 1 ? " context" : " contexts")));
    return el("li", { class: "sbx-item" + (chosen ? " is-chosen" : ""), "data-testid": "sandbox-item",
      "data-sandbox-id": s.id, "aria-current": chosen ? "true" : null },
    el("div", { class: "sbx-line" },
      el("button", { type: "button", class: "sbx-pick", "data-testid": "sandbox-select",
        title: "Choose this sandbox for files, terminal and runs", onclick: () => app.select(s.id) },
      el("code", { text: s.id })),
      button("Delete", "sandbox-delete", () => remove(s.id), { class: "pk-danger", "aria-label": "Delete sandbox " + s.id })),
    meta,
    contexts.length ? el("ul", { class: "sbx-contexts" }, ...contexts.map((c) => contextRow(s.id, c))) : null);
  }

  function contextRow(sandboxId, c) {
    const chosen = sandboxId === app.state.sandboxId && c.id === app.state.contextId;
    const state = c.resident ? "running" : c.snapshot && !c.snapshot.stale ? "saved" : "idle";
    return el("li", { class: "sbx-context" + (chosen ? " is-chosen" : ""), "data-testid": "sandbox-context",
      "data-context-id": c.id, "data-language": c.language, "data-state": state },
    el("button", { type: "button", class: "sbx-pick", title: "Run in this context", "data-testid": "sandbox-context-use", onclick: () => chooseContext(sandboxId, c) },
      el("span", { class: "sbx-lang", text: c.language }), " ", el("code", { text: c.id })),
    el("span", { class: "sbx-meta" },
      el("span", { "data-testid": "context-executions" }, (c.executions || 0) + (c.executions === 1 ? " run" : " runs")),
      el("span", { class: "sbx-state sbx-state-" + state, title: stateTitle(state) }, state),
      c.cwd && c.cwd !== "/workspace" ? el("span", { text: c.cwd }) : null));
  }

  function stateTitle(state) {
    return { running: "its interpreter is resident", saved: "its interpreter is stopped; its state is journaled and comes back on the next run",
      idle: "no interpreter now" }[state];
  }

  // Runs go to this context when it is of the Run tab's language (the
  // language is the Run tab's to change); either way its sandbox is chosen.
  // select() first: it clears contextId, and the Run tab's context list,
  // reloaded on "sandbox", keeps the id set here.
  function chooseContext(sandboxId, c) {
    app.select(sandboxId);
    if (c.language === app.state.language) {
      app.state.contextId = c.id;
      app.emit("context", c.id);
      frame.status(`Runs in ${c.language} now go to context ${c.id}.`);
    } else {
      frame.status(`Chose ${sandboxId}; pick ${c.language} in the Run tab to run in this context.`);
    }
  }

  async function create() {
    frame.status("Creating a sandbox…");
    const r = await callJson(api, "POST", "/v1/sandbox", {});
    if (!r.ok || !r.body || !r.body.id) {
      frame.status("Cannot create a sandbox: " + api.message(r.body, r.status), "error");
      return;
    }
    app.select(r.body.id);
    await refresh("Created sandbox " + r.body.id + ".");
  }

  async function remove(id) {
    if (!window.confirm("Delete sandbox " + id + " with its files, contexts and terminals?")) return;
    frame.status("Deleting " + id + "…");
    const r = await api.raw("DELETE", "/v1/sandbox/" + encodeURIComponent(id)).catch((e) => e);
    if (!r.ok) {
      frame.status("Cannot delete " + id + ": " + await failure(api, r), "error");
      return;
    }
    if (app.state.sandboxId === id) app.select("");
    await refresh("Deleted sandbox " + id + ".");
  }

  const soon = refreshWhenShown(root, app, "sandboxes", () => refresh());
  app.on("changed", soon);
  app.on("sandbox", soon);
  app.on("key", soon); // a key typed into the prompt after a 401
  soon();
}
