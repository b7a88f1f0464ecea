// What the page's parts share: the API, the current selection and a small
// event bus. Parts: run.js (editor + results), sandboxes.js, files.js,
// terminal.js; each exports mount(root, app).
//   state.sandboxId  the sandbox chosen in the sandbox list (or typed), "" = none
//   state.contextId  the context chosen for runs, "" = the language's default
//   state.language   the language picked
// Events: "sandbox" (id) when the chosen sandbox changes; "changed" (id)
// after something changed a sandbox (a run, an upload) so lists refresh.
import { createApi } from "./api.js";

export function createApp() {
  const handlers = {};
  return {
    api: createApi(),
    state: { sandboxId: "", contextId: "", language: "python" },
    on(name, fn) { (handlers[name] = handlers[name] || []).push(fn); },
    emit(name, value) { (handlers[name] || []).forEach((fn) => fn(value)); },
    select(id) { this.state.sandboxId = id || ""; this.state.contextId = ""; this.emit("sandbox", this.state.sandboxId); },
  };
}
