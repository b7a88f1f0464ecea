// The files panel (a stub until it is written): mount(root, app), see app.js.
export function mount(root, app) {
  void app;
  root.textContent = "";
}
