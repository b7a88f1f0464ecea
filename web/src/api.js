// The page's one way to the daemon: same origin, the API key (when auth is
// on) kept in sessionStorage — never in a URL that a proxy would log, except
// the WebSocket's ?token= (browsers cannot set headers on a WebSocket).
const KEY_SLOT = "sandboxd.apiKey";

export function createApi() {
  let key = sessionStorage.getItem(KEY_SLOT) || "";
  const listeners = [];

  function headers(extra) {
    const h = Object.assign({}, extra || {});
    if (key) h["Authorization"] = "Bearer " + key;
    return h;
  }

  // fetch with the key; a 401 tells the listeners (the key prompt).
  async function raw(method, path, body, extraHeaders) {
    const res = await fetch(path, { method, headers: headers(extraHeaders), body });
    if (res.status === 401) listeners.forEach((fn) => fn(res));
    return res;
  }

  // JSON in, JSON out: {status, ok, body} (body null when not JSON).
  async function json(method, path, body) {
    const res = await raw(method, path, body === undefined ? undefined : JSON.stringify(body),
      body === undefined ? {} : { "Content-Type": "application/json" });
    let parsed = null;
    try { parsed = await res.json(); } catch (_) { /* not JSON */ }
    return { status: res.status, ok: res.ok, body: parsed };
  }

  // An error body of any of the three APIs as one line.
  function message(body, status) {
    if (!body) return "HTTP " + status;
    const e = body.error;
    if (e && typeof e === "object") return e.message || JSON.stringify(e);
    return body.message || e || body.code || "HTTP " + status;
  }

  function wsUrl(path) {
    const u = new URL(path, location.href);
    u.protocol = u.protocol === "https:" ? "wss:" : "ws:";
    if (key) u.searchParams.set("token", key);
    return u.toString();
  }

  return {
    raw, json, message, wsUrl,
    get key() { return key; },
    setKey(k) { key = k || ""; if (key) sessionStorage.setItem(KEY_SLOT, key); else sessionStorage.removeItem(KEY_SLOT); },
    onUnauthorized(fn) { listeners.push(fn); },
  };
}
