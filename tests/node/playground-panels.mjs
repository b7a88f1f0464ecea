// Drives the playground's side panels (sandboxes, files, terminal) in
// headless Chromium (Debian's, through playwright-core), as a person would:
// clicks, a file chooser, a drop, the keyboard. Reads one JSON config on
// stdin and prints one JSON report on stdout; tests/web/test_playground_panels.py
// sets things up through the APIs before and checks their effects after.
//
// config: {url, key, chromium, shots, sandbox, context, upload: {path, name},
//          drop: {name, text}, doomed: {name, text}}
// report: {steps: {name: "ok" | error}, …observations, requests, websockets,
//          consoleErrors, pageErrors, shots: [paths]}
// Exits 0 once the report is printed (the caller judges it), 2 on a driver failure.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { openPage } from "./browser.mjs";

const cfg = JSON.parse(readFileSync(0, "utf8"));
const origin = new URL(cfg.url).origin;
const report = { steps: {}, shots: [] };
const T = 20000;

async function step(name, fn) {
  try {
    await fn();
    report.steps[name] = "ok";
  } catch (e) {
    report.steps[name] = String(e && e.message || e).split("\n").slice(0, 6).join("\n");
  }
}

let browser;
try {
  const opened = await openPage(cfg.chromium, origin, report, { viewport: { width: 1280, height: 1000 } });
  browser = opened.browser;
  const page = opened.page;
  // The key as the page keeps it (sessionStorage), as if typed into its prompt.
  await opened.context.addInitScript((key) => { if (key) sessionStorage.setItem("sandboxd.apiKey", key); }, cfg.key || "");
  report.websockets = [];
  page.on("websocket", (ws) => report.websockets.push(ws.url()));
  let dialogs = "accept";
  page.on("dialog", (d) => { (report.dialogs = report.dialogs || []).push(d.message()); return dialogs === "accept" ? d.accept() : d.dismiss(); });

  const tid = (id) => `[data-testid="${id}"]`;
  const item = (id) => page.locator(`${tid("sandbox-item")}[data-sandbox-id="${id}"]`);
  const fileRow = (name) => page.locator(`${tid("file-row")}[data-name="${name}"]`);
  const shot = async (name) => {
    const p = join(cfg.shots, name);
    await page.screenshot({ path: p, fullPage: true });
    report.shots.push(p);
  };
  // A page that shows its panels in tabs: open the panel's tab first.
  async function reveal(id) {
    const panel = page.locator("#" + id);
    if (!(await panel.isVisible())) {
      const tab = page.locator(`[aria-controls="${id}"], [data-tab="${id}"], a[href="#${id}"], [data-testid="tab-${id}"]`).first();
      if (await tab.count()) await tab.click();
    }
    await panel.scrollIntoViewIfNeeded();
  }

  await page.goto(cfg.url, { waitUntil: "load", timeout: T });
  await page.locator(tid("sandboxes-panel")).waitFor({ state: "attached", timeout: T });

  await step("list", async () => {
    await reveal("sandboxes");
    await item(cfg.sandbox).waitFor({ timeout: T });
    report.listed = await item(cfg.sandbox).evaluate((li) => ({
      text: li.innerText,
      contexts: [...li.querySelectorAll('[data-testid="sandbox-context"]')].map((c) => ({
        id: c.dataset.contextId, language: c.dataset.language, state: c.dataset.state, text: c.innerText })),
    }));
    await shot("panels-sandboxes.png");
  });

  await step("create", async () => {
    const before = await page.locator(tid("sandbox-item")).evaluateAll((els) => els.map((e) => e.dataset.sandboxId));
    await page.click(tid("sandbox-create"));
    await page.waitForFunction((n) => document.querySelectorAll('[data-testid="sandbox-item"]').length > n, before.length, { timeout: T });
    const after = await page.locator(tid("sandbox-item")).evaluateAll((els) => els.map((e) => e.dataset.sandboxId));
    report.created = after.filter((id) => !before.includes(id));
    const made = report.created[0];
    await page.waitForSelector(`${tid("sandbox-item")}[data-sandbox-id="${made}"][aria-current="true"]`, { timeout: T }).catch(() => {});
    report.createdChosen = await item(made).getAttribute("aria-current");
    report.createStatus = await page.locator(tid("sandboxes-status")).innerText();
  });

  await step("delete", async () => {
    const made = report.created[0];
    dialogs = "dismiss";
    await item(made).locator(tid("sandbox-delete")).click();
    report.keptAfterDismiss = await item(made).count();
    dialogs = "accept";
    await item(made).locator(tid("sandbox-delete")).click();
    await item(made).waitFor({ state: "detached", timeout: T });
    report.deleteStatus = await page.locator(tid("sandboxes-status")).innerText();
  });

  await step("select", async () => {
    await item(cfg.sandbox).locator(tid("sandbox-select")).click();
    await page.waitForSelector(`${tid("files-panel")}[data-sandbox-id="${cfg.sandbox}"]`, { state: "attached", timeout: T });
    // The list marks the choice when it re-renders (a fetch after "sandbox"): wait for it, then read it.
    await page.waitForSelector(`${tid("sandbox-item")}[data-sandbox-id="${cfg.sandbox}"][aria-current="true"]`, { timeout: T }).catch(() => {});
    report.chosen = await item(cfg.sandbox).getAttribute("aria-current");
  });

  // A context clicked in the list becomes the Run tab's target (sandbox and context).
  await step("use-context", async () => {
    await item(cfg.sandbox).locator(`${tid("sandbox-context")}[data-context-id="${cfg.context}"] ${tid("sandbox-context-use")}`).click();
    report.useContextStatus = await page.locator(tid("sandboxes-status")).innerText();
    await reveal("run");
    await page.waitForFunction((id) => {
      const s = document.querySelector('#run [data-testid="context-select"]');
      return s && s.value === id;
    }, cfg.context, { timeout: T });
    report.runTarget = await page.locator(`#run ${tid("sandbox-id")}`).inputValue();
  });

  await step("mkdir", async () => {
    await reveal("files");
    await page.fill(tid("files-mkdir-name"), "docs");
    await page.click(tid("files-mkdir"));
    await fileRow("docs").waitFor({ timeout: T });
    report.folder = await fileRow("docs").evaluate((r) => ({ type: r.dataset.type, kind: r.querySelector('[data-testid="file-type"]').innerText }));
  });

  await step("mkdir-refused", async () => {
    await page.fill(tid("files-mkdir-name"), "../escape");
    await page.click(tid("files-mkdir"));
    await page.waitForSelector(`${tid("files-status")}[data-kind="error"]`, { timeout: T });
    report.refusedStatus = await page.locator(tid("files-status")).innerText();
  });

  await step("upload", async () => {
    await page.setInputFiles(tid("files-upload-input"), cfg.upload.path);
    await fileRow(cfg.upload.name).waitFor({ timeout: T });
    report.uploaded = await fileRow(cfg.upload.name).evaluate((r) => ({ type: r.dataset.type, size: Number(r.dataset.size),
      sizeText: r.querySelector('[data-testid="file-size"]').innerText, kind: r.querySelector('[data-testid="file-type"]').innerText }));
  });

  await step("drop", async () => {
    await fileRow("docs").locator(tid("file-open")).click();
    await page.waitForSelector(`${tid("files-panel")}[data-path="/workspace/docs"]`, { timeout: T });
    await page.locator(tid("files-dropzone")).evaluate((zone, f) => {
      const dt = new DataTransfer();
      dt.items.add(new File([f.text], f.name, { type: "text/plain" }));
      zone.dispatchEvent(new DragEvent("dragover", { dataTransfer: dt, bubbles: true, cancelable: true }));
      zone.dispatchEvent(new DragEvent("drop", { dataTransfer: dt, bubbles: true, cancelable: true }));
    }, cfg.drop);
    await fileRow(cfg.drop.name).waitFor({ timeout: T });
    report.crumbs = await page.locator(tid("files-crumb")).allInnerTexts();
    await page.locator(`${tid("files-crumb")}[data-path="/workspace"]`).click();
    await page.waitForSelector(`${tid("files-panel")}[data-path="/workspace"]`, { timeout: T });
    await fileRow(cfg.upload.name).waitFor({ timeout: T });
    await shot("panels-files.png");
  });

  await step("download", async () => {
    const [dl] = await Promise.all([page.waitForEvent("download", { timeout: T }),
      fileRow(cfg.upload.name).locator(tid("file-download")).click()]);
    report.downloadName = dl.suggestedFilename();
    report.downloadUrl = dl.url();
    report.downloadPath = join(cfg.shots, "downloaded-" + cfg.upload.name);
    await dl.saveAs(report.downloadPath);
  });

  await step("delete-file", async () => {
    await page.setInputFiles(tid("files-upload-input"), { name: cfg.doomed.name, mimeType: "text/plain",
      buffer: Buffer.from(cfg.doomed.text) });
    await fileRow(cfg.doomed.name).waitFor({ timeout: T });
    await fileRow(cfg.doomed.name).locator(tid("file-delete")).click();
    await fileRow(cfg.doomed.name).waitFor({ state: "detached", timeout: T });
    report.filesStatus = await page.locator(tid("files-status")).innerText();
  });

  await step("delete-folder", async () => {
    await page.fill(tid("files-mkdir-name"), "old/deep");
    await page.click(tid("files-mkdir"));
    await fileRow("old").waitFor({ timeout: T });
    await fileRow("old").locator(tid("file-delete")).click();
    await fileRow("old").waitFor({ state: "detached", timeout: T });
    report.folderDialog = report.dialogs[report.dialogs.length - 1];
  });

  const screenText = () => page.locator(`${tid("terminal-screen")} .xterm-rows`).innerText();
  await step("terminal", async () => {
    await reveal("terminal");
    await page.click(tid("terminal-connect"));
    await page.waitForSelector(`${tid("terminal-panel")}[data-state="connected"]`, { timeout: T });
    await page.locator(tid("terminal-screen")).click();
    await page.keyboard.type("echo hi-$((6*7))");
    await page.keyboard.press("Enter");
    await page.waitForFunction(() => {
      const rows = document.querySelector('[data-testid="terminal-screen"] .xterm-rows');
      return rows && /(^|\n)hi-42\s*(\n|$)/.test(rows.innerText);
    }, null, { timeout: T });
    report.terminalText = await screenText();
    await page.locator(tid("terminal-panel")).scrollIntoViewIfNeeded();
    await shot("panels-terminal.png");
  });

  // The shell's idea of its size (stty size → "rows cols"), through a marker
  // the command line itself does not match.
  async function ttySize(marker) {
    await page.locator(tid("terminal-screen")).click();
    await page.keyboard.type(`echo "${marker}:$(stty size):"`);
    await page.keyboard.press("Enter");
    const re = new RegExp(marker + ":(\\d+) (\\d+):");
    await page.waitForFunction((src) => new RegExp(src).test(
      document.querySelector('[data-testid="terminal-screen"] .xterm-rows').innerText), re.source, { timeout: T });
    const m = re.exec(await screenText());
    return { rows: Number(m[1]), cols: Number(m[2]) };
  }

  await step("terminal-size", async () => {
    report.sizeWide = await ttySize("szw");
    report.xtermWide = await page.locator(tid("terminal-screen")).evaluate((s) => s.querySelector(".xterm-rows").children.length);
  });

  await step("terminal-exit", async () => {
    await page.locator(tid("terminal-screen")).click();
    await page.keyboard.type("exit 3");
    await page.keyboard.press("Enter");
    await page.waitForSelector(`${tid("terminal-panel")}[data-state="exited"]`, { timeout: T });
    report.exitStatus = await page.locator(tid("terminal-status")).innerText();
    report.exitCode = await page.locator(tid("terminal-panel")).getAttribute("data-exit-code");
  });

  await step("narrow", async () => {
    await page.setViewportSize({ width: 360, height: 800 });
    report.overflow = [];
    for (const name of ["sandboxes", "files", "terminal"]) {
      await reveal(name);
      await page.waitForTimeout(200); // a layout pass (and the terminal's refit) after the change
      report.overflow.push(...await page.locator(tid(name + "-panel")).evaluate((s) =>
        s.scrollWidth > s.clientWidth + 1 || s.getBoundingClientRect().right > innerWidth + 1
          ? [`${s.dataset.testid}: ${s.scrollWidth} wide in ${s.clientWidth}, right edge ${s.getBoundingClientRect().right}`] : []));
      await shot(`panels-360-${name}.png`);
    }
  });

  await step("terminal-resize", async () => {
    // A new shell at 360 px is narrow; widening the window resizes it live.
    await page.click(tid("terminal-connect"));
    await page.waitForSelector(`${tid("terminal-panel")}[data-state="connected"]`, { timeout: T });
    report.sizeNarrow = await ttySize("szn");
    await page.setViewportSize({ width: 1280, height: 1000 });
    // The refit (and its resize message) follows the window's resize event:
    // ask the shell again until it sees a change, or give up after a few tries.
    for (let i = 0; i < 10; i++) {
      report.sizeWidened = await ttySize("szb" + i);
      if (report.sizeWidened.cols !== report.sizeNarrow.cols) break;
      await page.waitForTimeout(200);
    }
  });

  // A visitor without the key: the page's prompt asks for it, and the list
  // fills once it is given (the panel refreshes on the app's "key" event).
  await step("key-prompt", async () => {
    const fresh = await browser.newContext({ viewport: { width: 1280, height: 1000 } });
    const p2 = await fresh.newPage();
    p2.on("pageerror", (e) => report.pageErrors.push(String(e)));
    await p2.goto(cfg.url, { waitUntil: "load", timeout: T });
    await p2.waitForFunction(() => document.body.dataset.ready === "true", null, { timeout: T });
    // A hidden panel asks nothing: no prompt before its tab is opened.
    report.promptAtLoad = await p2.locator(tid("key-input")).isVisible();
    await p2.locator(`[data-tab="sandboxes"], [data-testid="tab-sandboxes"]`).first().click();
    await p2.locator(tid("key-input")).waitFor({ timeout: T });
    report.listedBeforeKey = await p2.locator(tid("sandbox-item")).count();
    await p2.fill(tid("key-input"), cfg.key);
    await p2.click(tid("key-submit"));
    await p2.locator(`${tid("sandbox-item")}[data-sandbox-id="${cfg.sandbox}"]`).waitFor({ timeout: T });
    report.listedAfterKey = await p2.locator(tid("sandbox-item")).count();
    await fresh.close();
  });

  console.log(JSON.stringify(report));
  await browser.close();
} catch (e) {
  console.error(String(e && e.stack || e));
  console.error(JSON.stringify(report));
  if (browser) await browser.close().catch(() => {});
  process.exit(2);
}
