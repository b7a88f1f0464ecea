// The files panel: the chosen sandbox's /workspace. Browse folders (the
// runtime API's files op "list"), upload (a file input or drag and drop →
// PUT /v1/sandbox/:id/file/workspace/<path>, raw bytes), download (GET of the
// same path with the Authorization header into a blob: the key never goes
// into a URL), delete (op "delete", recursive for a folder), make a folder
// (op "mkdir"). mount(root, app), see app.js. Follows "sandbox" events;
// refreshes on "changed" for its sandbox and emits "changed" after a change.
import { el, panelFrame, button, formatBytes, relativeTime, absoluteTime, escapePath, refreshWhenShown, failure, callJson } from "./panel-kit.js";

const ROOT = "/workspace";

const MIME = {
  py: "Python", js: "JavaScript", mjs: "JavaScript", ts: "TypeScript", rb: "Ruby", sh: "shell script",
  txt: "text", md: "Markdown", json: "JSON", csv: "CSV", html: "HTML", css: "CSS", xml: "XML", yaml: "YAML",
  yml: "YAML", toml: "TOML", png: "PNG image", jpg: "JPEG image", jpeg: "JPEG image", gif: "GIF image",
  svg: "SVG image", pdf: "PDF", zip: "zip archive", tar: "tar archive", gz: "gzip", whl: "Python wheel",
  ipynb: "notebook", bin: "binary", so: "shared library", c: "C source", h: "C header", go: "Go", rs: "Rust",
};

function kindOf(f) {
  if (f.type === "directory") return "folder";
  const dot = f.name.lastIndexOf(".");
  return (dot > 0 && MIME[f.name.slice(dot + 1).toLowerCase()]) || "file";
}

export function mount(root, app) {
  const { api } = app;
  const frame = panelFrame(root, "files", "Files");
  let sandbox = "";
  let cwd = ROOT;
  let seq = 0;

  const crumbs = el("nav", { class: "fs-crumbs", "aria-label": "Folder", "data-testid": "files-path" });
  const input = el("input", { type: "file", multiple: true, class: "pk-hidden-input", "data-testid": "files-upload-input",
    onchange: () => { upload([...input.files].map((f) => ({ file: f, rel: f.name }))); input.value = ""; } });
  const uploadLabel = el("label", { class: "pk-button", "data-testid": "files-upload", title: "Upload files (or drop them here)" },
    "Upload", input);
  const folderName = el("input", { type: "text", placeholder: "new folder", "aria-label": "New folder name",
    "data-testid": "files-mkdir-name", onkeydown: (e) => { if (e.key === "Enter") mkdir(); } });
  const mkdirForm = el("span", { class: "fs-mkdir" }, folderName, button("Make folder", "files-mkdir", mkdir));
  const body = el("tbody");
  const table = el("table", { class: "fs-table", "data-testid": "files-list" },
    el("thead", {}, el("tr", {}, ...["Name", "Type", "Size", "Modified", ""].map((h) => el("th", { scope: "col", text: h })))),
    body);
  const empty = el("p", { class: "pk-note", "data-testid": "files-empty" });
  const drop = el("div", { class: "fs-drop", "data-testid": "files-dropzone" }, crumbs, table, empty);
  frame.tools.append(uploadLabel, mkdirForm, button("Refresh", "files-refresh", () => refresh()));
  frame.section.append(drop);

  function filesOp(body_) {
    return callJson(api, "POST", "/languages/python/sandboxes/" + encodeURIComponent(sandbox) + "/files", body_);
  }

  function fileUrl(path) {
    return "/v1/sandbox/" + encodeURIComponent(sandbox) + "/file/" + escapePath(path);
  }

  function setEnabled() {
    const on = Boolean(sandbox);
    frame.section.classList.toggle("is-off", !on);
    for (const c of frame.tools.querySelectorAll("button, input")) c.disabled = !on;
    uploadLabel.classList.toggle("is-disabled", !on);
    frame.section.dataset.sandboxId = sandbox;
    frame.section.dataset.path = cwd;
  }

  function renderCrumbs() {
    const parts = cwd.slice(ROOT.length).split("/").filter(Boolean);
    const items = [el("button", { type: "button", class: "fs-crumb", "data-testid": "files-crumb", "data-path": ROOT,
      onclick: () => open(ROOT) }, "workspace")];
    let path = ROOT;
    for (const p of parts) {
      path += "/" + p;
      const target = path;
      items.push(el("span", { class: "fs-sep", "aria-hidden": "true" }, "/"),
        el("button", { type: "button", class: "fs-crumb", "data-testid": "files-crumb", "data-path": target,
          onclick: () => open(target) }, p));
    }
    crumbs.replaceChildren(...items);
  }

  function open(path) {
    cwd = path;
    refresh();
  }

  async function refresh(note) {
    setEnabled();
    renderCrumbs();
    const mine = ++seq;
    if (!sandbox) {
      body.replaceChildren();
      empty.textContent = "Choose a sandbox in the list to see its files.";
      frame.status("");
      return;
    }
    frame.section.setAttribute("aria-busy", "true");
    const r = await filesOp({ op: "list", path: cwd });
    if (mine !== seq) return;
    frame.section.removeAttribute("aria-busy");
    if (!r.ok) {
      if (r.status === 404 && cwd !== ROOT) { open(ROOT); return; } // the folder went away
      body.replaceChildren();
      empty.textContent = "";
      frame.status("Cannot list " + cwd + ": " + api.message(r.body, r.status), "error");
      return;
    }
    const files = (r.body.files || []).slice().sort((a, b) =>
      (a.type === "directory" ? 0 : 1) - (b.type === "directory" ? 0 : 1) || a.name.localeCompare(b.name));
    const now = Date.now();
    body.replaceChildren(...files.map((f) => row(f, now)));
    empty.textContent = files.length ? "" : "This folder is empty. Drop files here or use Upload.";
    frame.status(note || "");
  }

  function row(f, now) {
    const path = cwd + "/" + f.name;
    const dir = f.type === "directory";
    const name = dir
      ? el("button", { type: "button", class: "fs-name fs-dir", "data-testid": "file-open", onclick: () => open(path) }, f.name + "/")
      : el("span", { class: "fs-name" }, f.name);
    return el("tr", { "data-testid": "file-row", "data-name": f.name, "data-type": dir ? "directory" : "file",
      "data-size": dir ? null : f.size },
    el("td", {}, name, el("span", { class: "fs-sub", "aria-hidden": "true" }, kindOf(f))),
    el("td", { "data-testid": "file-type" }, kindOf(f)),
    el("td", { class: "fs-num", "data-testid": "file-size", title: dir ? null : f.size + " bytes" }, dir ? "" : formatBytes(f.size)),
    el("td", { title: absoluteTime(f.modifiedAt) }, dir ? "" : relativeTime(f.modifiedAt, now)),
    el("td", { class: "fs-actions" },
      dir ? null : button("Download", "file-download", () => download(path, f.name), { "aria-label": "Download " + f.name }),
      button("Delete", "file-delete", () => remove(path, dir), { class: "pk-danger", "aria-label": "Delete " + f.name })));
  }

  // items: [{file: File, rel: "sub/name"}], rel relative to the folder shown.
  async function upload(items) {
    if (!sandbox || !items.length) return;
    const target = sandbox;
    let done = 0;
    for (const { file, rel } of items) {
      frame.status(`Uploading ${rel} (${done + 1} of ${items.length}, ${formatBytes(file.size)})…`);
      const r = await api.raw("PUT", fileUrl(cwd + "/" + rel), file, { "Content-Type": "application/octet-stream" })
        .catch((e) => e);
      if (!r.ok) {
        frame.status("Cannot upload " + rel + ": " + await failure(api, r), "error");
        app.emit("changed", target);
        return;
      }
      done++;
    }
    app.emit("changed", target);
    await refresh(`Uploaded ${done} file${done === 1 ? "" : "s"}.`);
  }

  async function download(path, name) {
    frame.status("Downloading " + name + "…");
    const r = await api.raw("GET", fileUrl(path)).catch((e) => e);
    if (!r.ok) {
      frame.status("Cannot download " + name + ": " + await failure(api, r), "error");
      return;
    }
    const url = URL.createObjectURL(await r.blob());
    const a = el("a", { href: url, download: name, hidden: true });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60000);
    frame.status("Downloaded " + name + ".");
  }

  async function remove(path, dir) {
    const what = path.slice(ROOT.length + 1);
    if (!window.confirm(dir ? `Delete the folder ${what} and everything in it?` : `Delete ${what}?`)) return;
    const r = await filesOp({ op: "delete", path, recursive: dir });
    if (!r.ok) {
      frame.status("Cannot delete " + what + ": " + api.message(r.body, r.status), "error");
      return;
    }
    app.emit("changed", sandbox);
    await refresh("Deleted " + what + ".");
  }

  async function mkdir() {
    const name = folderName.value.trim().replace(/^\/+|\/+$/g, "");
    if (!sandbox || !name) { folderName.focus(); return; }
    const r = await filesOp({ op: "mkdir", path: cwd + "/" + name, recursive: true });
    if (!r.ok) {
      frame.status("Cannot make " + name + ": " + api.message(r.body, r.status), "error");
      return;
    }
    folderName.value = "";
    app.emit("changed", sandbox);
    await refresh("Made folder " + name + ".");
  }

  // Drag and drop: files, and folders through the entries API (their tree
  // is kept under the folder shown).
  async function entries(item) {
    const entry = item.webkitGetAsEntry ? item.webkitGetAsEntry() : null;
    if (!entry) { const f = item.getAsFile(); return f ? [{ file: f, rel: f.name }] : []; }
    const out = [];
    async function walk(e, prefix) {
      if (e.isFile) {
        out.push({ file: await new Promise((ok, fail) => e.file(ok, fail)), rel: prefix + e.name });
      } else if (e.isDirectory) {
        const reader = e.createReader();
        for (;;) {
          const batch = await new Promise((ok, fail) => reader.readEntries(ok, fail));
          if (!batch.length) break;
          for (const child of batch) await walk(child, prefix + e.name + "/");
        }
      }
    }
    await walk(entry, "");
    return out;
  }

  drop.addEventListener("dragover", (e) => {
    if (!sandbox || !e.dataTransfer || ![...e.dataTransfer.types].includes("Files")) return;
    e.preventDefault();
    e.dataTransfer.dropEffect = "copy";
    drop.classList.add("is-over");
  });
  drop.addEventListener("dragleave", (e) => { if (!drop.contains(e.relatedTarget)) drop.classList.remove("is-over"); });
  drop.addEventListener("drop", async (e) => {
    drop.classList.remove("is-over");
    if (!sandbox || !e.dataTransfer) return;
    e.preventDefault();
    const dt = e.dataTransfer;
    // Read every entry before the first await: the DataTransfer empties then.
    const pending = dt.items && dt.items.length
      ? [...dt.items].filter((i) => i.kind === "file").map(entries)
      : [Promise.resolve([...dt.files].map((f) => ({ file: f, rel: f.name })))];
    upload((await Promise.all(pending)).flat());
  });

  const soon = refreshWhenShown(root, app, "files", () => refresh()); // shown again: code may have written files
  app.on("sandbox", (id) => { sandbox = id || ""; cwd = ROOT; setEnabled(); soon(); });
  app.on("changed", (id) => { if (sandbox && (!id || id === sandbox)) soon(); });
  app.on("key", soon);
  sandbox = app.state.sandboxId || "";
  refresh();
}
