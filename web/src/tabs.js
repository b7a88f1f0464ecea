// Tabs over the panels (Run, Sandboxes, Files, Terminal): one panel shows at
// a time, at any width. Emits "tab" (name) after a switch, so a panel that
// measures itself (the terminal) can fit once it is visible.
export function mount(nav, app) {
  const buttons = [...nav.querySelectorAll("[data-tab]")];
  function show(name) {
    for (const b of buttons) {
      const on = b.dataset.tab === name;
      b.setAttribute("aria-selected", String(on));
      const panel = document.querySelector(`[data-panel="${b.dataset.tab}"]`);
      if (panel) panel.hidden = !on;
    }
    app.emit("tab", name);
  }
  for (const b of buttons) b.addEventListener("click", () => show(b.dataset.tab));
  app.showTab = show;
}
