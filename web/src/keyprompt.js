// The API-key prompt: shown when any call answers 401. The key goes to
// api.js (sessionStorage, sent as Authorization: Bearer), then "key" is
// emitted so the call that was refused can retry ("key" with null on
// Cancel: the caller gives up and shows the 401).
export function mount(dialog, app) {
  const form = dialog.querySelector("form");
  const input = dialog.querySelector("#key-input");
  const error = dialog.querySelector("#key-error");

  app.api.onUnauthorized(() => {
    if (dialog.open) return;
    // A key we already had was refused: say so.
    error.hidden = !app.api.key;
    input.value = "";
    dialog.showModal();
    input.focus();
  });

  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const key = input.value.trim();
    if (!key) return;
    app.api.setKey(key);
    app.emit("key", key);
    dialog.close("ok");
  });
  dialog.querySelector("#key-cancel").addEventListener("click", () => dialog.close());
  // Escape closes the dialog too: every way out but "Use key" is a cancel.
  dialog.addEventListener("close", () => { if (dialog.returnValue !== "ok") app.emit("key", null); dialog.returnValue = ""; });
}
