// Drives `sandboxd mcp` with the official MCP TypeScript SDK's client over
// the stdio transport, and prints what it saw as one JSON object on stdout
// (tests/mcp/test_mcp_stdio.py asserts on it). A step that throws is
// recorded as {error: message}; the script goes on with the others.
//
// env: SANDBOXD_BIN, SANDBOXD_URL, NODE_DIR (tests/node, with node_modules).
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const sdk = (p) => import(pathToFileURL(join(process.env.NODE_DIR, 'node_modules/@modelcontextprotocol/sdk/dist/esm', p)).href);
const { Client } = await sdk('client/index.js');
const { StdioClientTransport } = await sdk('client/stdio.js');
const { LATEST_PROTOCOL_VERSION } = await sdk('types.js');

const out = { sdkLatest: LATEST_PROTOCOL_VERSION };
const transport = new StdioClientTransport({
  command: process.env.SANDBOXD_BIN,
  args: ['mcp'],
  env: { PATH: process.env.PATH, SANDBOXD_URL: process.env.SANDBOXD_URL },
  stderr: 'inherit',
});
const client = new Client({ name: 'sandboxd-test', version: '1.0.0' });

async function step(name, fn) {
  try {
    out[name] = await fn();
  } catch (e) {
    out[name] = { error: String(e && e.message ? e.message : e) };
  }
}

const call = (name, args, opts) => client.callTool({ name, arguments: args }, undefined, opts);
const text = (res) => res.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
const brief = (res) => ({ isError: !!res.isError, text: text(res) });

await client.connect(transport);
out.serverVersion = client.getServerVersion();
out.capabilities = client.getServerCapabilities();
out.instructions = client.getInstructions();

await step('tools', async () => (await client.listTools()).tools);
await step('sixBySeven', async () => brief(await call('run_code', { language: 'python', code: '6*7' })));

let sandbox = null;
await step('created', async () => {
  const res = await call('create_sandbox', {});
  sandbox = (text(res).match(/Created sandbox ([a-z2-7]+)/) || [])[1] || null;
  return { ...brief(res), sandbox };
});
out.sandbox = sandbox;

await step('stateSet', async () => brief(await call('run_code', { language: 'python', code: 'x = 41', sandbox })));
await step('stateGet', async () => brief(await call('run_code', { language: 'python', code: 'x + 1', sandbox })));
let context = null;
await step('context', async () => {
  const res = await call('create_context', { sandbox, language: 'python' });
  context = (text(res).match(/"id": "([^"]+)"/) || [])[1] || null;
  return { ...brief(res), context };
});
await step('contextSet', async () => brief(await call('run_code', { language: 'python', code: 'y = "kept"', sandbox, context })));
await step('contextGet', async () => brief(await call('run_code', { language: 'python', code: 'y', sandbox, context })));
await step('otherContext', async () => brief(await call('run_code', { language: 'python', code: 'y', sandbox })));
await step('contexts', async () => brief(await call('list_contexts', { sandbox })));

await step('write', async () => brief(await call('write_file', { sandbox, path: 'notes/hello.txt', content: 'hello from mcp\n' })));
await step('catFile', async () => brief(await call('run_command', { sandbox, command: 'cat notes/hello.txt; echo to-stderr >&2; exit 3' })));
await step('readBack', async () => brief(await call('read_file', { sandbox, path: 'notes/hello.txt' })));
await step('list', async () => brief(await call('list_files', { sandbox, recursive: true })));
await step('progress', async () => {
  const seen = [];
  const res = await call('run_command', { sandbox, command: ['bash', '-c', 'for i in 1 2 3; do echo line$i; sleep 0.3; done'] },
    { onprogress: (p) => seen.push(p) });
  return { ...brief(res), notifications: seen };
});
await step('plot', async () => {
  const res = await call('run_code', {
    language: 'python', sandbox,
    code: 'import matplotlib.pyplot as plt\nplt.plot([1, 4, 9])\nplt.show()',
  });
  return { ...brief(res), images: res.content.filter((c) => c.type === 'image') };
});

await step('badLanguage', async () => brief(await call('run_code', { language: 'cobol', code: 'DISPLAY 1' })));
await step('missingSandbox', async () => brief(await call('read_file', { sandbox: 'nosuchsandbox', path: 'a.txt' })));
await step('missingArgument', async () => brief(await call('run_code', { language: 'python' })));
await step('pythonError', async () => brief(await call('run_code', { language: 'python', code: '1/0' })));

await step('templates', async () => (await client.listResourceTemplates()).resourceTemplates);
await step('resources', async () => (await client.listResources()).resources.map((r) => r.uri));
await step('resource', async () => (await client.readResource({ uri: `sandbox://${sandbox}/notes/hello.txt` })).contents);
await step('missingResource', async () => (await client.readResource({ uri: `sandbox://${sandbox}/nope.txt` })).contents);

await step('deleted', async () => brief(await call('delete_sandbox', { sandbox })));
await step('afterDelete', async () => brief(await call('list_sandboxes', {})));

await client.close();
process.stdout.write(JSON.stringify(out) + '\n');
