// Opens the bridge's OpenAPI viewer in headless Chromium (Debian's, driven by
// playwright-core) with no network beyond the daemon: every request to
// another origin is aborted and recorded. Prints one JSON report on stdout:
//   {state, title, h1, operations: [{id, method, path}], responses, blocked,
//    requests, consoleErrors, pageErrors, statusText}
// and writes a screenshot.
//
//   node openapi-viewer.mjs URL SCREENSHOT.png [CHROMIUM] [refuse-spec]
// refuse-spec: openapi.json is answered 401 by the harness (the viewer's
// error path).
// Exits 0 once the report is printed (the caller judges it), 2 on a driver failure.
import { openPage } from "./browser.mjs";

const [url, shot, exe = "/usr/bin/chromium", mode = ""] = process.argv.slice(2);
const origin = new URL(url).origin;
const report = {};

let browser;
try {
  let page;
  ({ browser, page } = await openPage(exe, origin, report, {
    // refuse-spec: the harness answers openapi.json itself.
    route: (route, u) => mode === "refuse-spec" && new URL(u).pathname.endsWith("/openapi.json")
      ? route.fulfill({ status: 401, contentType: "application/json",
        body: JSON.stringify({ error: "Unauthorized", code: "unauthorized" }) })
      : undefined,
  }));
  await page.goto(url, { waitUntil: "load", timeout: 20000 });
  await page.waitForFunction(() => document.body.dataset.state !== "loading", null, { timeout: 20000 });
  Object.assign(report, await page.evaluate(() => ({
    state: document.body.dataset.state,
    title: document.title,
    h1: document.getElementById("title").textContent,
    statusText: (document.getElementById("status") || {}).textContent || "",
    operations: [...document.querySelectorAll("details.op[data-operation-id]")].map((d) => ({
      id: d.dataset.operationId, method: d.dataset.method, path: d.dataset.path })),
    responses: document.querySelectorAll("tr.response").length,
    leaks: (document.body.innerText.match(/\[object \w+\]|\bundefined\b/g) || []).length,
  })));
  // Open the exec operation, so the screenshot shows a rendered card.
  const exec = page.locator('details[data-operation-id="execCommand"]');
  if (await exec.count()) {
    await exec.evaluate((d) => { d.open = true; });
    report.execText = await exec.innerText();
    await exec.scrollIntoViewIfNeeded();
  }
  await page.screenshot({ path: shot, fullPage: false });
  console.log(JSON.stringify(report));
  await browser.close();
} catch (e) {
  console.error(String(e && e.stack || e));
  if (browser) await browser.close().catch(() => {});
  process.exit(2);
}
