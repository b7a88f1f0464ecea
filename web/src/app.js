// What the page's parts share: the API, the current selection and a small
// event bus. Parts: run.js (editor + results), sandboxes.js, files.js,
// terminal.js; each exports mount(root, app).
//   state.sandboxId  the sandbox chosen in the sandbox list (or typed), "" = none
//   state.contextId  the context chosen for runs, "" = the language's default
//   state.language   the language picked
// Events: "sandbox" (id) when the chosen sandbox changes; "changed" (id)
// after something changed a sandbox (a run, an upload) so lists refresh;
// "key" after the visitor entered an API key in the prompt (a call that got
// 401 may wait for it with once("key") and retry: withKey(call) does);
// "tab" (name) after the visible panel changed.
import { createApi } from "./api.js";

export function createApp() {
  const handlers = {};
  return {
    api: createApi(),
    state: { sandboxId: "", contextId: "", language: "python" },
    on(name, fn) { (handlers[name] = handlers[name] || []).push(fn); },
    once(name, fn) {
      const wrapped = (v) => { this.off(name, wrapped); fn(v); };
      this.on(name, wrapped);
    },
    off(name, fn) { handlers[name] = (handlers[name] || []).filter((h) => h !== fn); },
    emit(name, value) { (handlers[name] || []).forEach((fn) => fn(value)); },
    // Runs call() (→ {status, …}) again after each key the prompt takes
    // while it answers 401; gives the 401 back when the prompt is cancelled.
    async withKey(call) {
      let r = await call();
      while (r.status === 401) {
        const key = await new Promise((resolve) => this.once("key", resolve));
        if (!key) break;
        r = await call();
      }
      return r;
    },
    select(id) { this.state.sandboxId = id || ""; this.state.contextId = ""; this.emit("sandbox", this.state.sandboxId); },
  };
}
