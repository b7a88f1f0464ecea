// The playground's entry: builds the app and mounts its parts.
import { createApp } from "./app.js";
import * as sandboxes from "./sandboxes.js";
import * as files from "./files.js";
import * as terminal from "./terminal.js";

const app = createApp();
window.addEventListener("DOMContentLoaded", () => {
  for (const [id, part] of [["sandboxes", sandboxes], ["files", files], ["terminal", terminal]]) {
    const el = document.getElementById(id);
    if (el) part.mount(el, app);
  }
});
