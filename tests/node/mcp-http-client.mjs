// A real MCP client (the official TypeScript SDK's Client over its
// StreamableHTTPClientTransport) driven by the tests of the daemon's /mcp
// endpoint (tests/mcp/test_mcp_http.py).
//
//   node mcp-http-client.mjs URL [KEY] < steps.json
//
// steps.json: a list of {"op": "list"} | {"op": "call", "name", "args",
// "progress": bool, "save": {"name", "pattern"}} | {"op": "listResources"} |
// {"op": "readResource", "uri"} | {"op": "terminate"}. "save" keeps the
// first group of pattern matched in the result's text as ${name}, which
// later steps' argument strings (and uri) may use. Prints one JSON object: {sessionId, protocol,
// server, results: [...]}, each result {ok: true, value, progress} or
// {ok: false, error, code}. A connect failure prints {connectError, code}.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, key] = process.argv.slice(2);
const steps = JSON.parse(await new Promise((resolve) => {
  let text = "";
  process.stdin.on("data", (d) => { text += d; });
  process.stdin.on("end", () => resolve(text || "[]"));
}));

const headers = key ? { Authorization: `Bearer ${key}` } : {};
const transport = new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers } });
const client = new Client({ name: "sandboxd-tests", version: "1.0.0" });

try {
  await client.connect(transport);
} catch (e) {
  console.log(JSON.stringify({ connectError: String(e && e.message || e), code: e && e.code }));
  process.exit(0);
}

const saved = {};
const fill = (v) => {
  if (typeof v === "string") return v.replace(/\$\{(\w+)\}/g, (_, n) => saved[n] ?? "");
  if (Array.isArray(v)) return v.map(fill);
  if (v && typeof v === "object") return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, fill(x)]));
  return v;
};
const textOf = (value) => (value.content || []).filter((c) => c.type === "text").map((c) => c.text).join("\n");

async function run(step) {
  let progress = 0;
  const options = step.progress ? { onprogress: () => { progress += 1; } } : {};
  switch (step.op) {
    case "list": return { value: await client.listTools() };
    case "call": {
      const value = await client.callTool({ name: step.name, arguments: fill(step.args || {}) }, undefined, options);
      if (step.save) {
        const m = textOf(value).match(new RegExp(step.save.pattern));
        if (m) saved[step.save.name] = m[1];
      }
      return { value, progress };
    }
    case "listResources": return { value: await client.listResources() };
    case "readResource": return { value: await client.readResource({ uri: fill(step.uri) }) };
    case "terminate": await transport.terminateSession(); return { value: null };
    default: throw new Error(`unknown step ${step.op}`);
  }
}

const out = {
  sessionId: transport.sessionId,
  protocol: transport.protocolVersion,
  server: client.getServerVersion(),
  results: [],
};
for (const step of steps) {
  try {
    out.results.push({ ok: true, ...(await run(step)) });
  } catch (e) {
    out.results.push({ ok: false, error: String(e && e.message || e), code: e && e.code });
  }
}
await client.close();
console.log(JSON.stringify(out));
