// The terminal panel: xterm.js over the bridge's PTY WebSocket
// (GET /v1/sandbox/:id/pty, docs/bridge/pty.md). Server → page: the replay
// and live output as binary frames, {"type":"ready"}, {"type":"exit",
// code, signal?} then close 1000, {"type":"error", message}. Page → server:
// keys as binary frames, {"type":"resize", cols, rows} as text. The key goes
// as ?token= (app.api.wsUrl): a browser cannot set headers on a WebSocket.
// mount(root, app), see app.js; follows "sandbox" events (a new sandbox
// disconnects the old one's terminal; its shell keeps running server-side).
import { Terminal } from "@xterm/xterm";
import { FitAddon } from "@xterm/addon-fit";
import { el, panelFrame, button } from "./panel-kit.js";

const CLOSE_REASONS = {
  1006: "the connection was lost",
  1008: "the terminal printed faster than this page read; reconnect to replay",
  1011: "the terminal could not be started",
};

export function mount(root, app) {
  const { api } = app;
  const frame = panelFrame(root, "terminal", "Terminal");
  const label = el("span", { class: "term-sandbox", "data-testid": "terminal-sandbox" });
  const connectBtn = button("Connect", "terminal-connect", connect);
  const disconnectBtn = button("Disconnect", "terminal-disconnect", () => disconnect("Disconnected; the shell keeps running. Connect to resume it."));
  const screen = el("div", { class: "term-screen", "data-testid": "terminal-screen" });
  frame.tools.append(label, connectBtn, disconnectBtn);
  frame.section.append(screen);

  const encoder = new TextEncoder();
  let term = null;
  let fit = null;
  let ws = null;
  let sandbox = app.state.sandboxId || "";

  function setState(state, text, kind) {
    frame.section.dataset.state = state; // idle | connecting | connected | exited | closed | error
    frame.status(text, kind);
    connectBtn.disabled = !sandbox || state === "connecting" || state === "connected";
    disconnectBtn.disabled = !(state === "connecting" || state === "connected");
    label.textContent = sandbox ? sandbox : "";
  }

  function send(obj) {
    if (ws && ws.readyState === WebSocket.OPEN) ws.send(typeof obj === "string" ? obj : JSON.stringify(obj));
  }

  function ensureTerminal() {
    if (term) return;
    term = new Terminal({ cursorBlink: true, convertEol: false, scrollback: 5000, fontSize: 13,
      fontFamily: "ui-monospace, SFMono-Regular, Menlo, Consolas, 'DejaVu Sans Mono', monospace" });
    fit = new FitAddon();
    term.loadAddon(fit);
    term.open(screen);
    term.onData((d) => { if (ws && ws.readyState === WebSocket.OPEN) ws.send(encoder.encode(d)); });
    term.onBinary((d) => {
      if (!ws || ws.readyState !== WebSocket.OPEN) return;
      ws.send(Uint8Array.from(d, (ch) => ch.charCodeAt(0) & 255));
    });
    term.onResize(({ cols, rows }) => send({ type: "resize", cols, rows }));
    // A panel that appears (a tab, a wider window) refits the terminal.
    new ResizeObserver(() => refit()).observe(screen);
    window.addEventListener("resize", refit);
  }

  function refit() {
    if (!fit || !screen.offsetParent) return; // hidden: no size to fit to
    try { fit.fit(); } catch (_) { /* not laid out yet */ }
  }

  function connect() {
    if (!sandbox) return;
    disconnect();
    ensureTerminal();
    refit();
    term.reset();
    const path = "/v1/sandbox/" + encodeURIComponent(sandbox) + "/pty?cols=" + term.cols + "&rows=" + term.rows;
    const sock = new WebSocket(api.wsUrl(path));
    sock.binaryType = "arraybuffer";
    ws = sock;
    let exited = false;
    setState("connecting", "Connecting to " + sandbox + "…");
    sock.onmessage = (ev) => {
      if (ws !== sock) return;
      if (typeof ev.data !== "string") { term.write(new Uint8Array(ev.data)); return; }
      let msg = null;
      try { msg = JSON.parse(ev.data); } catch (_) { return; }
      if (msg.type === "ready") {
        setState("connected", "Connected: a bash shell in " + sandbox + "'s /workspace.");
        send({ type: "resize", cols: term.cols, rows: term.rows });
        term.focus();
      } else if (msg.type === "exit") {
        exited = true;
        const how = msg.signal ? "was killed by " + msg.signal : "exited with code " + msg.code;
        frame.section.dataset.exitCode = String(msg.code);
        term.write("\r\n\x1b[2m[the shell " + how + "]\x1b[0m\r\n");
        setState("exited", "The shell " + how + ". Connect to start a new one.", msg.code === 0 ? "info" : "error");
      } else if (msg.type === "error") {
        frame.status("Terminal: " + msg.message, "error");
      }
    };
    sock.onclose = (ev) => {
      if (ws !== sock) return;
      ws = null;
      if (exited) return;
      if (frame.section.dataset.state === "connecting") {
        setState("error", "Cannot open a terminal on " + sandbox + " (" + (CLOSE_REASONS[ev.code] || "code " + ev.code) +
          "). Is the API key right, and does the sandbox exist?", "error");
      } else {
        setState("closed", "Disconnected: " + (CLOSE_REASONS[ev.code] || ev.reason || "code " + ev.code) + ".", "error");
      }
    };
  }

  function disconnect(note) {
    const sock = ws;
    ws = null;
    if (sock) sock.close(1000);
    if (note !== undefined) setState("idle", note);
  }

  app.on("tab", (name) => { if (name === "terminal") refit(); });
  app.on("sandbox", (id) => {
    if (id === sandbox) return;
    const was = Boolean(ws);
    disconnect();
    sandbox = id || "";
    if (term) term.reset();
    setState("idle", !sandbox ? "Choose a sandbox to open its terminal."
      : (was ? "Switched sandbox. " : "") + "Connect to open a shell in " + sandbox + ".");
  });

  setState("idle", sandbox ? "Connect to open a shell in " + sandbox + "." : "Choose a sandbox to open its terminal.");
}
