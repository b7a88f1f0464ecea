// Drives the playground's Run panel in headless Chromium (Debian's, through
// playwright-core) with no network beyond the daemon, and prints one JSON
// report on stdout for tests/web/test_playground_run.py to judge.
//
//   node playground-run.mjs SCENARIO URL SHOTDIR [CHROMIUM] [KEY]
// SCENARIO:
//   languages  each language's sample-free run: {runs: {lang: {texts, json, stdout, error}}}
//   rich       python in a sandbox: a matplotlib figure, a context keeping a variable,
//              Ctrl+Enter, an HTML result, a JSON tree, an error with its traceback
//   narrow     the page at 360 px: {scrollWidth, clientWidth, ...} per panel
//   key        a daemon with an API key: the prompt, then the run after the key
// Exits 0 once the report is printed (the caller judges it), 2 on a driver failure.
import { openPage } from "./browser.mjs";

const [scenario, url, shots, exe = "/usr/bin/chromium", key = ""] = process.argv.slice(2);
const origin = new URL(url).origin;
const report = { shots: [] };

const tid = (id) => `[data-testid="${id}"]`;

async function shot(page, name) {
  const path = `${shots}/${name}.png`;
  await page.screenshot({ path, fullPage: true });
  report.shots.push(path);
}

// Replaces the editor's text (typed as one insertion: no auto-closing).
async function setCode(page, code) {
  await page.click(tid("editor-input"));
  await page.keyboard.press("ControlOrMeta+a");
  await page.keyboard.press("Delete");
  await page.keyboard.insertText(code);
}

// Clicks Run (or presses Ctrl+Enter in the editor) and waits for the result.
async function run(page, how = "click") {
  await page.$eval(tid("results"), (r) => { r.textContent = ""; });
  if (how === "click") await page.click(tid("run-button"));
  else await page.keyboard.press("Control+Enter");
  await page.waitForFunction(() => document.querySelector('[data-testid="results"]').childElementCount > 0,
    null, { timeout: 30000 });
  return page.$eval(tid("results"), (r) => {
    const all = (id) => [...r.querySelectorAll(`[data-testid="${id}"]`)];
    return {
      texts: all("result-text").map((e) => e.textContent),
      json: all("result-json").map((e) => e.textContent),
      stdout: all("stdout").map((e) => e.textContent).join("\n"),
      stderr: all("stderr").map((e) => e.textContent).join("\n"),
      error: all("error").map((e) => e.textContent).join("\n"),
      images: all("result-image").map((e) => ({ src: e.src.slice(0, 22), width: e.naturalWidth, height: e.naturalHeight })),
      html: all("result-html").map((e) => ({ sandbox: e.getAttribute("sandbox"), srcdoc: e.srcdoc })),
      usage: all("usage").map((e) => e.textContent).join(""),
    };
  });
}

async function pick(page, lang, target) {
  await page.selectOption(tid("lang-picker"), lang);
  if (target) await page.selectOption(tid("target"), target);
}

const CODE = {
  python: "import sys\nprint('py-out', 6 * 7)\nprint('py-err', file=sys.stderr)\n2 ** 10",
  javascript: "console.log('js-out', 6 * 7);\n({ answer: 42, list: [1, 2] })",
  perl: "print 'pl-out ', 6 * 7, \"\\n\";\n'pl-' . (40 + 2)",
  ruby: "puts \"rb-out #{6 * 7}\"\n[1, 2, 3].sum * 7",
  shell: "echo sh-out $((6 * 7))\necho sh-err >&2\nexit 3",
};

async function languages(page) {
  report.runs = {};
  for (const lang of Object.keys(CODE)) {
    await pick(page, lang, lang === "shell" ? null : "stateless");
    await setCode(page, CODE[lang]);
    report.runs[lang] = await run(page);
    await shot(page, `run-${lang}`);
  }
  report.shellTargetDisabled = await page.$eval(tid("target"), (s) => s.disabled);
}

async function rich(page) {
  await pick(page, "python", "sandbox");
  await page.fill(tid("sandbox-id"), "web-rich");
  await page.press(tid("sandbox-id"), "Tab");
  // A new context, chosen: a variable set in one run is there in the next.
  await page.click(tid("context-new"));
  await page.waitForFunction(() => document.querySelector('[data-testid="context-select"]').value !== "", null,
    { timeout: 20000 });
  report.contextId = await page.$eval(tid("context-select"), (s) => s.value);
  await setCode(page, "kept = 41");
  report.set = await run(page);
  await setCode(page, "kept + 1");
  report.kept = await run(page);
  // Ctrl+Enter from inside the editor.
  await setCode(page, "print('by-keyboard')");
  report.keyboard = await run(page, "keyboard");
  await setCode(page, "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n" +
    "plt.plot([1, 3, 2])\nplt.title('web test')\nplt.show()");
  report.plot = await run(page);
  await shot(page, "run-matplotlib");
  await setCode(page, "class H:\n    def _repr_html_(self):\n        return '<b id=x>bold</b><script>parent.hacked=1</script>'\nH()");
  report.html = await run(page);
  report.hacked = await page.evaluate(() => window.hacked === 1);
  await setCode(page, "{'a': [1, 2, {'b': None}], 's': 'x'}");
  report.tree = await run(page);
  report.treeNodes = await page.$$eval(`${tid("result-json")} details`, (d) => d.length);
  await setCode(page, "def f():\n    raise ValueError('boom')\nf()");
  report.error = await run(page);
  await shot(page, "run-error");
  report.contextOptions = await page.$$eval(`${tid("context-select")} option`, (o) => o.map((x) => x.value));
  // The example picker: the plot example switches to a sandbox run.
  await page.selectOption(tid("target"), "stateless");
  await page.selectOption(tid("example-picker"), { label: "matplotlib plot" });
  report.exampleTarget = await page.$eval(tid("target"), (s) => s.value);
  report.example = await run(page);
  await page.selectOption(tid("example-picker"), { label: "starter" });
  report.starter = await page.$eval(".cm-content", (e) => e.innerText);
}

async function narrow(page) {
  await page.setViewportSize({ width: 360, height: 740 });
  report.widths = {};
  for (const tab of ["run", "sandboxes", "files", "terminal"]) {
    await page.click(tid(`tab-${tab}`));
    await page.waitForTimeout(150);
    report.widths[tab] = await page.evaluate(() => ({
      scrollWidth: document.documentElement.scrollWidth, bodyScrollWidth: document.body.scrollWidth,
      clientWidth: document.documentElement.clientWidth }));
  }
  await page.click(tid("tab-run"));
  await pick(page, "python", "sandbox");
  await setCode(page, "print('narrow')\n{'k': 'v' * 80}");
  report.narrowRun = await run(page);
  report.widths.afterRun = await page.evaluate(() => ({
    scrollWidth: document.documentElement.scrollWidth, bodyScrollWidth: document.body.scrollWidth,
    clientWidth: document.documentElement.clientWidth }));
  report.runVisible = await page.isVisible(tid("run-button"));
  await shot(page, "narrow-360");
}

async function keyed(page) {
  const dialog = `${tid("key-dialog")}[open]`;
  // Another panel's first call may have met the 401 already: cancel that.
  await page.waitForLoadState("networkidle");
  report.promptOnLoad = await page.$eval(tid("key-dialog"), (d) => d.open);
  if (report.promptOnLoad) await page.click(tid("key-cancel"));
  await pick(page, "javascript", "stateless");
  await setCode(page, "'with-key'");
  // Cancel: the run shows the 401.
  await page.click(tid("run-button"));
  await page.waitForSelector(dialog, { timeout: 20000 });
  await page.click(tid("key-cancel"));
  await page.waitForFunction(() => document.querySelector('[data-testid="results"]').childElementCount > 0,
    null, { timeout: 30000 });
  report.cancelled = await page.$eval(tid("results"), (r) => r.textContent);
  // A wrong key: asked again, saying so; then the right one.
  await page.click(tid("run-button"));
  await page.waitForSelector(dialog, { timeout: 20000 });
  report.promptShown = true;
  await shot(page, "key-prompt");
  await page.fill(tid("key-input"), key + "-wrong");
  await page.click(tid("key-submit"));
  await page.waitForSelector(`${tid("key-error")}:not([hidden])`, { timeout: 20000 });
  report.wrongKeyAskedAgain = await page.$eval(tid("key-dialog"), (d) => d.open);
  await page.fill(tid("key-input"), key);
  await page.click(tid("key-submit"));
  // The refused run waits for the key, then finishes (the panel goes idle).
  await page.waitForFunction(() => document.querySelector('[data-panel="run"]').dataset.state === "idle",
    null, { timeout: 30000 });
  report.afterKey = await page.$eval(tid("results"), (r) => r.textContent);
  report.stored = await page.evaluate(() => sessionStorage.getItem("sandboxd.apiKey"));
  report.promptOpen = await page.$eval(tid("key-dialog"), (d) => d.open);
  await setCode(page, "'second'");
  report.second = await run(page);
}

const scenarios = { languages, rich, narrow, key: keyed };

let browser;
try {
  let page;
  ({ browser, page } = await openPage(exe, origin, report, { viewport: { width: 1200, height: 900 } }));
  await page.goto(url, { waitUntil: "load", timeout: 20000 });
  await page.waitForSelector('body[data-ready="true"]', { timeout: 20000 });
  report.title = await page.title();
  await scenarios[scenario](page);
  console.log(JSON.stringify(report));
  await browser.close();
} catch (e) {
  console.error(String(e && e.stack || e));
  console.error(JSON.stringify(report).slice(0, 4000));
  if (browser) await browser.close().catch(() => {});
  process.exit(2);
}
