// The playground's entry: builds the app and mounts its parts, each into
// the element of its id (index.html): run, sandboxes, files, terminal.
import { createApp } from "./app.js";
import * as run from "./run.js";
import * as sandboxes from "./sandboxes.js";
import * as files from "./files.js";
import * as terminal from "./terminal.js";
import * as tabs from "./tabs.js";
import * as keyprompt from "./keyprompt.js";

const app = createApp();
window.addEventListener("DOMContentLoaded", () => {
  // The key prompt first: a panel's first call may already answer 401.
  keyprompt.mount(document.getElementById("key-dialog"), app);
  tabs.mount(document.querySelector("nav.tabs"), app);
  for (const [id, part] of [["run", run], ["sandboxes", sandboxes], ["files", files], ["terminal", terminal]]) {
    const el = document.getElementById(id);
    if (el) part.mount(el, app);
  }
  document.body.dataset.ready = "true";
});
