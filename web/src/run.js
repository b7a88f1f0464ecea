// The Run panel: language picker, where to run (stateless, or in a context
// of a sandbox), the editor, Run (button and Ctrl/Cmd+Enter), the results.
//   stateless: POST /execute/<lang>
//   sandbox:   POST /languages/<lang>/sandboxes/<id>/execute {code, contextId?, display}
// Shell has no kernel, so no contexts: it always runs stateless.
import { createEditor } from "./editor.js";
import { render } from "./results.js";
import { EXAMPLES, LANGUAGES, SAMPLES } from "./samples.js";
import { mountContexts } from "./contexts.js";

const TEMPLATE = `
<div class="toolbar">
  <label>Language <select data-testid="lang-picker" name="language"></select></label>
  <label>Example <select data-testid="example-picker" name="example"></select></label>
  <label>Run <select data-testid="target" name="target">
    <option value="stateless">once (stateless)</option>
    <option value="sandbox">in a sandbox</option>
  </select></label>
  <span class="where" data-testid="where" hidden>
    <label>Sandbox <input data-testid="sandbox-id" name="sandbox" value="playground" spellcheck="false"
      autocomplete="off" pattern="[A-Za-z0-9._\\-]{1,63}"></label>
    <label>Context <select data-testid="context-select" name="context"></select></label>
    <button type="button" data-testid="context-new" class="secondary">New context</button>
  </span>
  <button type="button" data-testid="run-button" class="primary" title="Ctrl/Cmd+Enter">Run ▶</button>
</div>
<div class="editor" data-testid="editor"></div>
<div class="status" data-testid="run-status" aria-live="polite"></div>
<div class="results" data-testid="results"></div>`;

export function mount(root, app) {
  root.innerHTML = TEMPLATE;
  const $ = (id) => root.querySelector(`[data-testid="${id}"]`);
  const picker = $("lang-picker"), examples = $("example-picker"), target = $("target");
  const where = $("where"), sandbox = $("sandbox-id");
  const runButton = $("run-button"), status = $("run-status"), results = $("results");
  const drafts = Object.assign({}, SAMPLES); // the code per language, kept across switches
  let running = false;

  for (const l of LANGUAGES) picker.append(new Option(l, l));
  picker.value = app.state.language;
  const editor = createEditor($("editor"), { language: app.state.language, doc: drafts[app.state.language], onRun: run });
  const contexts = mountContexts({ select: $("context-select"), button: $("context-new"), status }, app);

  function fillExamples() {
    examples.textContent = "";
    examples.append(new Option("starter", ""));
    (EXAMPLES[app.state.language] || []).forEach((x, i) => examples.append(new Option(x.name, String(i))));
  }
  examples.addEventListener("change", () => {
    const x = examples.value === "" ? null : EXAMPLES[app.state.language][Number(examples.value)];
    editor.set(x ? x.code : SAMPLES[app.state.language]);
    if (x && x.sandbox) target.value = "sandbox";
    syncTarget();
    editor.focus();
  });

  const stateless = () => target.value === "stateless" || app.state.language === "shell";

  function syncTarget() {
    const shell = app.state.language === "shell";
    target.disabled = shell;
    if (shell) target.value = "stateless";
    where.hidden = stateless();
    if (!stateless()) contexts.load(sandbox.value.trim());
  }

  picker.addEventListener("change", () => {
    drafts[app.state.language] = editor.get();
    app.state.language = picker.value;
    app.state.contextId = "";
    editor.setLanguage(picker.value);
    editor.set(drafts[picker.value]);
    fillExamples();
    syncTarget();
  });
  target.addEventListener("change", syncTarget);
  // A typed id is the page's chosen sandbox too (Files, Terminal follow).
  sandbox.addEventListener("change", () => { if (sandbox.checkValidity()) app.select(sandbox.value.trim()); });
  // A sandbox chosen in the Sandboxes panel becomes the run's target.
  app.on("sandbox", (id) => {
    if (!id) return;
    sandbox.value = id;
    if (app.state.language !== "shell") target.value = "sandbox";
    syncTarget();
  });

  async function run() {
    if (running) return;
    const lang = app.state.language, id = sandbox.value.trim();
    const body = { code: editor.get() };
    let path = `/execute/${lang}`;
    if (!stateless()) {
      if (!sandbox.checkValidity() || !id) {
        status.textContent = "Sandbox ids are 1 to 63 of A-Z a-z 0-9 . _ -";
        return;
      }
      if (app.state.sandboxId !== id) app.select(id);
      path = `/languages/${lang}/sandboxes/${encodeURIComponent(id)}/execute`;
      if (app.state.contextId) body.contextId = app.state.contextId;
      if (lang === "python") body.display = true; // figures and rich results as MIME bundles
    }
    running = true;
    runButton.disabled = true;
    root.dataset.state = "running";
    status.textContent = stateless() ? `Running ${lang}…` : `Running ${lang} in ${id}…`;
    try {
      const reply = await app.withKey(() => app.api.json("POST", path, body));
      render(results, reply, app.api.message);
      status.textContent = reply.ok ? (reply.body.error ? "Finished with an error" : "Done") : "Refused";
      if (!stateless() && reply.ok) {
        app.emit("changed", id);
        contexts.load(id);
      }
    } catch (e) {
      status.textContent = "Network error: " + e.message;
    } finally {
      running = false;
      runButton.disabled = false;
      root.dataset.state = "idle";
    }
  }

  runButton.addEventListener("click", run);
  // Ctrl/Cmd+Enter outside the editor too (the editor's own keymap took it
  // when focus is there).
  root.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey) && !e.defaultPrevented) {
      e.preventDefault();
      run();
    }
  });
  fillExamples();
  syncTarget();
  root.dataset.state = "idle";
}
