// Shared by the browser tests: Debian's Chromium through playwright-core,
// headless, with no network beyond the page's own origin (every other
// request is aborted and recorded in report.blocked; every request's URL in
// report.requests, and "METHOD url" in report.calls) and console/page
// errors collected.
import { chromium } from "playwright-core";

const ARGS = ["--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-component-update",
  "--disable-default-apps", "--disable-sync", "--metrics-recording-only", "--no-default-browser-check"];

// → {browser, context, page}. report gets blocked, requests, calls,
// consoleErrors, pageErrors. route(route, url) may answer a request itself (return a
// promise) or return undefined to let the default rule decide.
export async function openPage(exe, origin, report, { viewport = { width: 1280, height: 900 }, route } = {}) {
  Object.assign(report, { blocked: [], requests: [], calls: [], consoleErrors: [], pageErrors: [] });
  const args = [...ARGS];
  if (process.getuid && process.getuid() === 0) args.push("--no-sandbox");
  const browser = await chromium.launch({ executablePath: exe, headless: true, args });
  const context = await browser.newContext({ viewport, serviceWorkers: "block" });
  await context.route("**/*", (r) => {
    const u = r.request().url();
    report.requests.push(u);
    report.calls.push(r.request().method() + " " + u);
    const own = route && route(r, u);
    if (own) return own;
    if (u.startsWith(origin + "/")) return r.continue();
    report.blocked.push(u);
    return r.abort("blockedbyclient");
  });
  const page = await context.newPage();
  page.on("console", (m) => { if (m.type() === "error") report.consoleErrors.push(m.text()); });
  page.on("pageerror", (e) => report.pageErrors.push(String(e)));
  return { browser, context, page };
}
