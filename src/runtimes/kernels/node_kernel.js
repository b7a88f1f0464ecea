'use strict';
// sandboxd JavaScript/TypeScript kernel (see docs/kernel-protocol.md).
//
// Run as: /usr/bin/node [--max-old-space-size=N] node_kernel.js once|repl
// fd 3 is the control socket (newline-delimited JSON), read and written with blocking
// synchronous calls so that it never becomes an event-loop handle: when a cell's promise is
// pending and nothing else is, the loop goes idle and 'beforeExit' reports the
// never-settled promise. fd 1/2 carry guest output. CommonJS, Node 18+.

const fs = require('fs');
const path = require('path');
const vm = require('vm');
const Module = require('module');
const { pathToFileURL } = require('url');
const { Buffer } = require('buffer');
const acorn = require(path.join(__dirname, 'vendor', 'acorn.js'));

// Built-ins the kernel relies on, captured before guest code can replace the globals.
const kJSON = { stringify: JSON.stringify, parse: JSON.parse };
const kPromise = Promise;
const kSetImmediate = setImmediate;

const CTL_FD = 3;
const MODE = process.argv[2] || 'once';
const SANDBOX_FILE = '<sandbox>';
const IMPORT_FN = '__sandboxd_import__';
const FN_SETTER = '__sandboxd_set_functions__';
const DEFAULT_RESULT_LIMIT = 65536;
const STACK_LIMIT = 8192;
const ESBUILD = '/usr/bin/esbuild';
const NEVER_SETTLED = 'Execution did not complete: a promise never settled ' +
  '(timers and indefinitely pending promises are unsupported)';
const WORKSPACE_ROOT = (() => {
  let root = process.env.SANDBOX_WORKSPACE_ROOT || '/workspace';
  while (root.length > 1 && root.endsWith('/')) root = root.slice(0, -1);
  return root;
})();
const KERNEL_FILE = __filename;

if (MODE !== 'once' && MODE !== 'repl') {
  fs.writeSync(2, 'usage: node_kernel.js once|repl\n');
  process.exit(2);
}

// ---------------------------------------------------------------------------
// Synchronous I/O helpers.

const sleepCell = new Int32Array(new SharedArrayBuffer(4));
function sleepMs(ms) { Atomics.wait(sleepCell, 0, 0, ms); }

function writeAllSync(fd, data) {
  const buf = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
  let off = 0;
  while (off < buf.length) {
    try {
      off += fs.writeSync(fd, buf, off, buf.length - off);
    } catch (e) {
      if (e.code === 'EAGAIN') { sleepMs(1); continue; }
      if (e.code === 'EINTR') continue;
      throw e;
    }
  }
}

// A line source: bytes read but not yet returned as lines, and how to read more. The
// control socket is one; the boot warm-up feeds its sample requests through another, so
// that a pool member's one real request runs no code for the first time (first runs of
// Buffer.concat/toString and fs.readSync/writeSync cost ~0.4 ms after an idle pause).
function lineSource(read) { return { pending: Buffer.alloc(0), chunk: Buffer.allocUnsafe(65536), read }; }
const ctlIn = lineSource((buf) => fs.readSync(CTL_FD, buf, 0, buf.length, null));

function readLineSync(src) {
  for (;;) {
    const nl = src.pending.indexOf(10);
    if (nl >= 0) {
      const line = src.pending.subarray(0, nl).toString('utf8');
      src.pending = src.pending.subarray(nl + 1);
      return line;
    }
    let n;
    try {
      n = src.read(src.chunk);
    } catch (e) {
      if (e.code === 'EAGAIN') { sleepMs(2); continue; }
      if (e.code === 'EINTR') continue;
      if (e.code === 'ECONNRESET') return null;
      throw e;
    }
    if (n === 0) return null;
    if (src.pending.length === 0) {
      // The usual case, a whole line in one read: decoded straight from the chunk, without
      // Buffer.concat's copy (a pool member's request after an idle pause: ~10 us of ~400).
      // The chunk holds stale bytes past n, so only a newline before n counts.
      const nl = src.chunk.indexOf(10);
      if (nl >= 0 && nl < n) {
        if (nl + 1 < n) src.pending = Buffer.from(src.chunk.subarray(nl + 1, n));  // a copy: chunk is reused
        return src.chunk.toString('utf8', 0, nl);
      }
    }
    src.pending = Buffer.concat([src.pending, src.chunk.subarray(0, n)]);
  }
}

function sendTo(fd, line) { writeAllSync(fd, line + '\n'); }
function send(line) { sendTo(CTL_FD, line); }

// ---------------------------------------------------------------------------
// fd 3 must not leak into processes the guest spawns. Node has no fcntl(), so every spawn
// (async and sync) gets an explicit fd 3 = /dev/null unless the guest chose its own fd 3.

(function protectControlFd() {
  let devnull;
  try { devnull = fs.openSync('/dev/null', 'r+'); } catch { return; }  // opened O_CLOEXEC
  function fixStdio(options) {
    if (!options || !Array.isArray(options.stdio) || options.stdio.length > CTL_FD) return;
    while (options.stdio.length < CTL_FD) options.stdio.push({ type: 'ignore' });
    options.stdio.push({ type: 'fd', fd: devnull });
  }
  try {
    const { Process } = process.binding('process_wrap');
    const spawn = Process.prototype.spawn;
    Process.prototype.spawn = function (options) { fixStdio(options); return spawn.call(this, options); };
  } catch { /* best effort */ }
  try {
    const binding = process.binding('spawn_sync');
    const spawnSync = binding.spawn;
    binding.spawn = function (options) { fixStdio(options); return spawnSync.call(this, options); };
  } catch { /* best effort */ }
})();

// ---------------------------------------------------------------------------
// Formatting helpers.

const hasToWellFormed = typeof String.prototype.toWellFormed === 'function';
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;
function wellFormed(s) {
  return hasToWellFormed ? s.toWellFormed() : s.replace(LONE_SURROGATE, '\ufffd');
}

function jsonReplacer(_key, value) {
  if (typeof value === 'bigint') return `${value}n`;
  if (typeof value === 'string') return wellFormed(value);
  return value;
}

function safeString(v) {
  try { return String(v); } catch {
    try { return Object.prototype.toString.call(v); } catch { return '[object]'; }
  }
}

function quote(s) {
  return "'" + s.replace(/\\/g, '\\\\').replace(/'/g, "\\'") + "'";
}

function formatLogArg(a) {
  if (typeof a === 'string') return a;
  if (typeof a === 'bigint') return `${a}n`;
  try {
    const s = kJSON.stringify(a, jsonReplacer);
    if (s !== undefined) return s;
  } catch { /* circular etc. */ }
  return safeString(a);
}

function utf8Length(s) { return Buffer.byteLength(s, 'utf8'); }

function limitText(limit) {
  return limit % 1024 === 0 ? `${limit / 1024} KiB` : `${limit} bytes`;
}

// Returns null (no result) or {kind: 'text'|'json', payload: string}; a json payload is
// already compact JSON text.
function mapResult(v) {
  if (v === undefined) return null;
  if (typeof v === 'string') return { kind: 'text', payload: quote(v) };
  if (typeof v === 'bigint') return { kind: 'text', payload: `${v}n` };
  if (v === null) return { kind: 'text', payload: 'null' };
  if (typeof v === 'object') {
    try {
      const s = kJSON.stringify(v, jsonReplacer);
      if (typeof s === 'string') return { kind: 'json', payload: s };
    } catch { /* circular, throwing toJSON ... fall back to text */ }
  }
  return { kind: 'text', payload: safeString(v) };
}

const FRAME_RE = /^\s+at /;
const STOP_FRAME_RE = /\bnode:vm\b|node:internal\/vm/;
function cleanStack(stack) {
  let lines = stack.split('\n');
  // V8 decorates compile errors: "<sandbox>:LINE", source line, carets, "", then the error.
  const deco = new RegExp(`^${SANDBOX_FILE}:(\\d+)$`).exec(lines[0]);
  let where = null;
  if (deco) {
    const blank = lines.indexOf('');
    if (blank > 0) { lines = lines.slice(blank + 1); where = `    at ${SANDBOX_FILE}:${deco[1]}`; }
  }
  const out = [];
  for (const line of lines) {
    if (FRAME_RE.test(line)) {
      if (line.includes(KERNEL_FILE) || STOP_FRAME_RE.test(line)) break;
      if (line.includes('node:internal/')) continue;
    }
    out.push(line);
  }
  if (where && !out.some((l) => FRAME_RE.test(l))) out.push(where);
  return out.join('\n');
}

function mapError(e) {
  if ((typeof e === 'object' && e !== null) || typeof e === 'function') {
    let name, message, stack;
    try { name = e.name; } catch { /* ignore */ }
    if (typeof name !== 'string' || !name) {
      try { name = (e.constructor && e.constructor.name) || 'Error'; } catch { name = 'Error'; }
    }
    try { message = e.message === undefined ? '' : safeString(e.message); } catch { message = ''; }
    try { stack = e.stack; } catch { /* ignore */ }
    let traceback = [];
    if (typeof stack === 'string' && stack) {
      traceback = cleanStack(stack).slice(0, STACK_LIMIT).split('\n').map(wellFormed);
    }
    return { name: wellFormed(String(name)), message: wellFormed(message), traceback };
  }
  return { name: 'Error', message: wellFormed(safeString(e)), traceback: [] };
}

function errorResponseLine(err) {
  return kJSON.stringify({ results: [], error: err, cwd: confinedCwd() });
}

function confinedCwd() {
  let cwd;
  try { cwd = process.cwd(); } catch { return WORKSPACE_ROOT; }
  if (cwd === WORKSPACE_ROOT || cwd.startsWith(WORKSPACE_ROOT === '/' ? '/' : WORKSPACE_ROOT + '/')) return cwd;
  return WORKSPACE_ROOT;
}

// ---------------------------------------------------------------------------
// Guest globals: console, fs, require, dynamic import.

function installConsole() {
  const out = (...args) => writeAllSync(1, args.map(formatLogArg).join(' ') + '\n');
  const err = (...args) => writeAllSync(2, args.map(formatLogArg).join(' ') + '\n');
  const c = globalThis.console;
  c.log = out; c.info = out; c.debug = out; c.dir = (v) => out(v);
  c.warn = err; c.error = err; c.trace = err;
  c.assert = (cond, ...args) => {
    if (!cond) err(...(args.length ? ['Assertion failed:', ...args] : ['Assertion failed']));
  };
}

// process.stdout/stderr are created lazily; remember whether the guest did so, so that their
// queued writes can be awaited before answering.
const guestStreams = [];
function trackStdStreams() {
  for (const name of ['stdout', 'stderr']) {
    const desc = Object.getOwnPropertyDescriptor(process, name);
    if (!desc || typeof desc.get !== 'function') continue;
    let stream = null;
    Object.defineProperty(process, name, {
      configurable: true,
      enumerable: desc.enumerable,
      get() {
        if (stream === null) { stream = desc.get.call(process); guestStreams.push(stream); }
        return stream;
      },
    });
  }
}

const requireCache = new Map();
function cwdRequire() {
  let dir;
  try { dir = process.cwd(); } catch { dir = WORKSPACE_ROOT; }
  let req = requireCache.get(dir);
  if (!req) {
    req = Module.createRequire(path.join(dir, SANDBOX_FILE));
    requireCache.set(dir, req);
  }
  return req;
}
function sandboxRequire(id) { return cwdRequire()(id); }
sandboxRequire.resolve = (id, opts) => cwdRequire().resolve(id, opts);
sandboxRequire.cache = require.cache;

function sandboxImport(specifier, options) {
  const spec = String(specifier);
  let target = spec;
  if (spec === '.' || spec === '..' || spec.startsWith('./') || spec.startsWith('../') || spec.startsWith('/')) {
    target = pathToFileURL(path.resolve(process.cwd(), spec)).href;
  } else if (!spec.includes(':') && !Module.builtinModules.includes(spec)) {
    try { target = pathToFileURL(cwdRequire().resolve(spec)).href; } catch { /* let import() fail */ }
  }
  return options === undefined ? import(target) : import(target, options);
}

function installGlobals() {
  const define = (name, value, enumerable) => Object.defineProperty(globalThis, name, {
    value, writable: true, configurable: true, enumerable,
  });
  define('fs', fs, false);
  define('require', sandboxRequire, false);
  Object.defineProperty(globalThis, IMPORT_FN, { value: sandboxImport, enumerable: false });
}

// ---------------------------------------------------------------------------
// Source preparation: last-expression capture, top-level await, REPL hoisting.

const PARSE_OPTIONS = {
  ecmaVersion: 'latest', sourceType: 'script', allowAwaitOutsideFunction: true,
  allowReturnOutsideFunction: false, allowHashBang: true,
};
const FUNCTION_TYPES = new Set(['FunctionDeclaration', 'FunctionExpression', 'ArrowFunctionExpression']);
const SKIP_KEYS = new Set(['type', 'start', 'end', 'loc', 'range']);

function parse(code) {
  try { return acorn.parse(code, PARSE_OPTIONS); } catch { return null; }
}

function patternNames(node, out) {
  if (!node) return;
  switch (node.type) {
    case 'Identifier': out.push(node.name); break;
    case 'ObjectPattern':
      for (const p of node.properties) patternNames(p.type === 'RestElement' ? p.argument : p.value, out);
      break;
    case 'ArrayPattern': for (const el of node.elements) patternNames(el, out); break;
    case 'RestElement': patternNames(node.argument, out); break;
    case 'AssignmentPattern': patternNames(node.left, out); break;
    default: break;
  }
}

// Builds the runnable source. Returns {source, isAsync, hasResult}.
function prepare(code, ast, hoist) {
  const edits = [];  // {start, end, text}
  let hasTLA = false;
  const nestedVars = [];  // var declarations outside functions but not top-level statements

  function scan(node, fnDepth, isTopStatement) {
    if (FUNCTION_TYPES.has(node.type)) fnDepth++;
    if (node.type === 'ImportExpression') {
      edits.push({ start: node.start, end: node.source.start, text: IMPORT_FN + '(' });
    } else if (fnDepth === 0) {
      if (node.type === 'AwaitExpression' || (node.type === 'ForOfStatement' && node.await)) hasTLA = true;
      if (node.type === 'VariableDeclaration' && node.kind === 'var' && !isTopStatement) nestedVars.push(node);
      if ((node.type === 'ForStatement' && node.init && node.init.type === 'VariableDeclaration') ||
          ((node.type === 'ForInStatement' || node.type === 'ForOfStatement') && node.left.type === 'VariableDeclaration')) {
        (node.init || node.left).forHead = true;
      }
    }
    for (const key in node) {
      if (SKIP_KEYS.has(key)) continue;
      const val = node[key];
      if (Array.isArray(val)) {
        for (const el of val) if (el && typeof el.type === 'string') scan(el, fnDepth, false);
      } else if (val && typeof val.type === 'string') {
        scan(val, fnDepth, false);
      }
    }
  }
  for (const stmt of ast.body) scan(stmt, 0, true);

  const body = ast.body;
  const last = body.length ? body[body.length - 1] : null;
  const hasResult = !!last && last.type === 'ExpressionStatement';
  if (code.startsWith('#!')) edits.push({ start: 0, end: 2, text: '//' });

  if (!hasTLA) {
    // A classic script: its completion value is the last expression statement's value, and
    // let/const/class/function declarations land in the global scope by themselves.
    return { source: applyEdits(code, edits), isAsync: false, hasResult };
  }

  const hoisted = new Set();
  const functions = [];
  const declToAssignment = (decl) => {
    for (const d of decl.declarations) {
      const names = [];
      patternNames(d.id, names);
      names.forEach((n) => hoisted.add(n));
    }
    if (decl.forHead) {
      edits.push({ start: decl.start, end: decl.declarations[0].start, text: '' });
    } else {
      edits.push({ start: decl.start, end: decl.declarations[0].start, text: 'void (' });
      const lastDecl = decl.declarations[decl.declarations.length - 1];
      edits.push({ start: lastDecl.end, end: lastDecl.end, text: ')' });
    }
  };
  if (hoist) {
    for (const stmt of body) {
      if (stmt.type === 'VariableDeclaration') {
        declToAssignment(stmt);
      } else if (stmt.type === 'FunctionDeclaration') {
        hoisted.add(stmt.id.name);
        functions.push(stmt.id.name);
      } else if (stmt.type === 'ClassDeclaration') {
        hoisted.add(stmt.id.name);
        edits.push({ start: stmt.start, end: stmt.start, text: `${stmt.id.name} = ` });
        edits.push({ start: stmt.end, end: stmt.end, text: ';' });
      }
    }
    for (const decl of nestedVars) declToAssignment(decl);
  }
  if (hasResult) {
    const exprEnd = code[last.end - 1] === ';' ? last.end - 1 : last.end;
    edits.push({ start: last.start, end: last.start, text: 'return [(' });
    edits.push({ start: exprEnd, end: exprEnd, text: ')]' });
  }
  if (functions.length) {
    // Function declarations stay in place (hoisted inside the wrapper) and are copied to
    // the global variables before the first statement after the directive prologue.
    const first = body.find((stmt) => !(stmt.type === 'ExpressionStatement' && typeof stmt.directive === 'string'));
    edits.push({ start: first.start, end: first.start, text: `${FN_SETTER}(${functions.join(', ')});`, first: true });
  }
  let prefix = '';
  if (hoisted.size) prefix += `var ${[...hoisted].join(', ')}; `;
  let suffix;
  if (functions.length) {
    const params = functions.map((_, i) => `v${i}`);
    prefix += `(async (${FN_SETTER}) => {`;
    suffix = `\n})((${params.join(', ')}) => { ${functions.map((n, i) => `${n} = v${i};`).join(' ')} })`;
  } else {
    prefix += '(async () => {';
    suffix = '\n})()';
  }
  return { source: prefix + applyEdits(code, edits) + suffix, isAsync: true, hasResult };
}

function applyEdits(code, edits) {
  if (!edits.length) return code;
  edits.sort((a, b) => a.start - b.start || (b.first ? 1 : 0) - (a.first ? 1 : 0) || a.end - b.end);
  let out = '';
  let pos = 0;
  for (const e of edits) {
    out += code.slice(pos, e.start) + e.text;
    pos = Math.max(pos, e.end);
  }
  return out + code.slice(pos);
}

class GuestSyntaxError extends Error {}

function stripTypes(code) {
  const cp = require('child_process');
  const r = cp.spawnSync(ESBUILD, ['--loader=ts', '--log-level=error', '--color=false'], {
    input: code, encoding: 'utf8', maxBuffer: 64 << 20, env: { PATH: '/usr/bin:/bin' },
  });
  if (r.error) throw new Error(`TypeScript stripping failed: ${r.error.message}`);
  if (r.status !== 0) {
    const lines = String(r.stderr || '').split('\n');
    let message = 'TypeScript syntax error';
    let where = null;
    for (const line of lines) {
      const m = /\[ERROR\]\s*(.*)$/.exec(line);
      if (m && message === 'TypeScript syntax error') message = m[1];
      const l = /<stdin>:(\d+):(\d+)/.exec(line);
      if (l && !where) where = `${l[1]}:${Number(l[2]) + 1}`;
    }
    const err = new GuestSyntaxError(message);
    err.name = 'SyntaxError';
    err.stack = `SyntaxError: ${message}` + (where ? `\n    at ${SANDBOX_FILE}:${where}` : '');
    throw err;
  }
  return r.stdout;
}

// ---------------------------------------------------------------------------
// Running a cell.

let current = null;  // the cell in progress: {done, fail(err), idle()}

const SCRIPT_OPTIONS = { filename: SANDBOX_FILE, displayErrors: false };

// The fast path: code that is one expression and nothing else needs no rewriting (no
// await, no import(), no hashbang) and its result is the script's completion value, so
// acorn (~0.2 ms even warmed up) is not needed. V8 decides: the code compiles as a
// script, and so does "(" code "\n)". Both token streams are the same (a script and a
// parenthesis both start in expression-or-statement position), a compiling script has
// balanced parentheses, so the first "(" closes at the last ")": the tokens are exactly
// one Expression. As a script they then are one ExpressionStatement — unless they start
// with what makes a statement something else ({ function async class let, and / for a
// comment or <!-- that could hide one): those take the full path. For TypeScript this
// means V8, not acorn, decides that the code is JavaScript (esbuild is not run): the two
// differ only on syntax acorn does not know yet. Returns the compiled script or null.
const EXPRESSION_START = /^[ \t\r\n]*(?:([A-Za-z_$][\w$]*)|[0-9'"`(\[!~+.]|-(?!->))/;
const STATEMENT_WORDS = new Set(['function', 'async', 'class', 'let',
  'const', 'var', 'if', 'for', 'while', 'do', 'try', 'switch', 'throw', 'return']);
// Code that is almost surely several statements (a ";", a line starting with a statement
// word) goes straight to acorn: a failed check costs a SyntaxError (~0.07 ms, a quarter
// of acorn's work on short code). These filters only ever choose the full path.
const STATEMENT_LINE = /\n[ \t]*(?:const|let|var|if|for|while|do|try|switch|throw|return)\b/;
function singleExpression(code) {
  if (code.includes(';') || code.includes('await') || code.includes('import') || STATEMENT_LINE.test(code)) return null;
  const start = EXPRESSION_START.exec(code);
  if (!start || (start[1] !== undefined && STATEMENT_WORDS.has(start[1]))) return null;
  try {
    new vm.Script(`(${code}\n)`, SCRIPT_OPTIONS);  // eslint-disable-line no-new
    return new vm.Script(code, SCRIPT_OPTIONS);
  } catch {
    return null;
  }
}

function runGuest(req) {
  pristineCwd = null;
  let code = typeof req.code === 'string' ? req.code : '';
  const simple = singleExpression(code);
  if (simple) return { value: simple.runInThisContext({ displayErrors: false }), isAsync: false, hasResult: true };
  let ast = parse(code);
  if (!ast && req.typescript) {
    code = stripTypes(code);
    ast = parse(code);
  }
  if (!ast) {
    // acorn refused it: let V8 report its own SyntaxError ("Illegal return statement" ...);
    // if V8 accepts it after all, run it and use the completion value.
    const script = new vm.Script(code, SCRIPT_OPTIONS);
    return { value: script.runInThisContext({ displayErrors: false }), isAsync: false, hasResult: true };
  }
  const prep = prepare(code, ast, MODE === 'repl');
  const script = new vm.Script(prep.source, SCRIPT_OPTIONS);
  const value = script.runInThisContext({ displayErrors: false });
  return { value, isAsync: prep.isAsync, hasResult: prep.hasResult };
}

function sameEnv(env) {
  const have = Object.keys(process.env);
  const want = Object.keys(env);
  if (have.length !== want.length) return false;
  for (let i = 0; i < have.length; i++) {
    const v = env[want[i]];
    if (have[i] !== want[i] || typeof v !== 'string' || process.env[have[i]] !== v) return false;
  }
  return true;
}

// The cwd the boot warm-up left with an empty process.env, as long as no guest code has run
// since (runGuest clears it; a guest's timers can only run after a runGuest): a request
// with an empty env and this cwd then needs neither the env check (an enumeration of
// environ through the C++ interceptor) nor process.chdir (a no-op that drops Node's cwd
// cache, so the answer's process.cwd() would be a getcwd): ~25 us of a pool member's ~400
// after an idle pause.
let pristineCwd = null;

function isEmptyObject(o) {
  for (const _ in o) return false;  // eslint-disable-line no-unused-vars
  return true;
}

function applyEnvAndCwd(req) {
  const env = req.env && typeof req.env === 'object' ? req.env : {};
  if (pristineCwd !== null && req.cwd === pristineCwd && isEmptyObject(env)) return;
  // Each process.env write is a setenv(3) through a C++ interceptor: an env
  // that already is the requested one, keys in the same order, is left alone
  // (the usual cases: a stateless request's {} after the warm-up's, a context's env
  // cell after cell).
  if (!sameEnv(env)) {
    for (const k of Object.keys(process.env)) delete process.env[k];
    for (const [k, v] of Object.entries(env)) {
      try { process.env[k] = String(v); } catch { /* invalid name */ }
    }
  }
  if (typeof req.cwd === 'string' && req.cwd) process.chdir(req.cwd);
}

async function flushGuestStreams() {
  for (const s of guestStreams) {
    if (s && s.writableLength > 0 && !s.destroyed) {
      await new kPromise((resolve) => {
        s.once('drain', resolve);
        s.once('error', resolve);
        s.once('close', resolve);
      });
    }
  }
}

function runCell(req) {
  return new kPromise((resolve) => {
    const limit = Number.isInteger(req.resultLimit) && req.resultLimit > 0 ? req.resultLimit : DEFAULT_RESULT_LIMIT;
    const cell = { done: false };
    current = cell;

    let outcome = null;
    const finish = async (result) => {
      if (outcome) {
        // A failure reported while draining (unhandled rejection...) beats a success.
        if (result.error !== undefined && outcome.error === undefined && !cell.done) outcome = result;
        return;
      }
      outcome = result;
      // Let pending microtasks and rejection checks run, and queued stream writes drain.
      await new kPromise((r) => kSetImmediate(r));
      try { await flushGuestStreams(); } catch { /* ignore */ }
      cell.done = true;
      if (current === cell) current = null;
      let line;
      if (outcome.error !== undefined) {
        line = errorResponseLine(outcome.error);
      } else {
        let mapped = null;
        let err = null;
        if (outcome.hasResult) {
          try { mapped = mapResult(outcome.value); } catch (e) { err = mapError(e); }
        }
        if (mapped && utf8Length(mapped.payload) > limit) {
          err = { name: 'ExecutionLimitError', message: `Result limit exceeded (${limitText(limit)})`, traceback: [] };
        }
        if (err) {
          line = errorResponseLine(err);
        } else if (!mapped) {
          line = kJSON.stringify({ results: [], error: null, cwd: confinedCwd() });
        } else {
          const entry = mapped.kind === 'json'
            ? `{"json":${mapped.payload}}`
            : `{"text":${kJSON.stringify(wellFormed(mapped.payload))}}`;
          line = `{"results":[${entry}],"error":null,"cwd":${kJSON.stringify(confinedCwd())}}`;
        }
      }
      resolve(line);
    };
    cell.fail = (e) => { finish({ error: mapError(e) }); };
    cell.idle = () => {
      finish({ error: { name: 'Error', message: NEVER_SETTLED, traceback: [] } });
    };

    try {
      applyEnvAndCwd(req);
    } catch (e) {
      finish({ error: mapError(e) });
      return;
    }
    let run;
    try {
      run = runGuest(req);
    } catch (e) {
      finish({ error: mapError(e) });
      return;
    }
    if (!run.isAsync) {
      finish({ value: run.value, hasResult: run.hasResult });
      return;
    }
    kPromise.resolve(run.value).then(
      (arr) => finish({ value: run.hasResult && Array.isArray(arr) ? arr[0] : undefined, hasResult: run.hasResult }),
      (e) => finish({ error: mapError(e) }),
    );
  });
}

function reportBackground(kind, e) {
  const err = mapError(e);
  const text = err.traceback.length ? err.traceback.join('\n') : `${err.name}: ${err.message}`;
  try { writeAllSync(2, `${kind}: ${text}\n`); } catch { /* ignore */ }
}

process.on('uncaughtException', (e) => {
  if (current && !current.done) current.fail(e);
  else reportBackground('Uncaught', e);
});
process.on('unhandledRejection', (reason) => {
  if (current && !current.done) current.fail(reason);
  else reportBackground('Unhandled rejection', reason);
});
// process.exit() in guest code: answer the cell before the process goes away.
process.on('exit', (code) => {
  if (!current || current.done) return;
  current.done = true;
  const error = code ? { name: 'Error', message: `process.exit(${code}) called`, traceback: [] } : null;
  try { send(kJSON.stringify({ results: [], error, cwd: confinedCwd() })); } catch { /* ignore */ }
});
process.on('beforeExit', () => {
  if (current && !current.done) current.idle();
});

// Reads one line from src and writes its answer to fd. Resolves to 'eof', 'blank' (nothing
// answered) or 'answered'. The boot warm-up runs exactly this, on other descriptors.
function serveOne(src, fd) {
  const line = readLineSync(src);
  if (line === null) return kPromise.resolve('eof');
  if (!line.trim()) return kPromise.resolve('blank');
  let req;
  try {
    req = kJSON.parse(line);
    if (!req || typeof req !== 'object' || Array.isArray(req)) throw new Error('request must be an object');
  } catch (e) {
    sendTo(fd, errorResponseLine({ name: 'EngineError', message: `bad request: ${e.message}`, traceback: [] }));
    return kPromise.resolve('answered');
  }
  return runCell(req).then((resp) => { sendTo(fd, resp); return 'answered'; });
}

function serveNext() {
  serveOne(ctlIn, CTL_FD).then((what) => {
    if (what === 'answered' && MODE === 'once') {
      // Wait for the daemon's kill (or EOF), the event loop blocked so that no guest timer
      // runs after the answer: exiting by itself, the kernel freed its memory right when
      // the daemon woke to read the answer, on the same CPU (docs/kernel-protocol.md).
      while (readLineSync(ctlIn) !== null) { /* nothing more is served */ }
      process.exit(0);
    }
    if (what === 'eof') process.exit(0);
    kSetImmediate(serveNext);
  });
}

installConsole();
trackStdStreams();
installGlobals();
// Warm up the real path (reading the line, request parse, acorn, vm compile, answer,
// writing it) so the first request pays no lazy loading, then announce readiness. A
// once-mode kernel serves one request, all of it in V8's interpreter: repeating the
// warm-up feeds the inline caches and gets the hot functions (acorn's above all)
// baseline-compiled before the request, not during it. The samples read from a string
// (and /dev/null, for fs.readSync) and answer into /dev/null.
// The samples have the daemon's request shape (fields in its order; the empty env of a
// stateless request: the boot environment is replaced before any guest code runs anyway)
// and take the three ways through runGuest: the single-expression fast path, acorn
// without and with top-level await. None of them leaves anything behind. Then the first
// (single-expression) sample runs alone WARMUP_EXTRA_RUNS times more, ~20 us each: the
// parts every request shares (reading, JSON, env and cwd, vm, the setImmediate turn, the
// answer) then have more optimized code, which cuts a member's request after an idle pause
// by ~50 us of ~400 for ~2 ms more boot CPU (120 runs cycling the three samples instead
// cost ~6-11 ms more for the same gain).
const WARMUP_CODE = ['1+1', ';1+1', 'await 1'];
const WARMUP_RUNS = 20;
const WARMUP_EXTRA_RUNS = 100;
async function warmUp() {
  let fd;
  try { fd = fs.openSync('/dev/null', 'r+'); } catch { return; }
  const cwd = process.cwd();
  const samples = WARMUP_CODE.map((code) => kJSON.stringify({
    code, env: {}, cwd, resultLimit: DEFAULT_RESULT_LIMIT, typescript: true, replay: false,
  }) + '\n');
  let n = 0;
  const nextSample = () => (n < WARMUP_RUNS ? samples[n++ % samples.length] : samples[0]);
  const src = lineSource((buf) => fs.readSync(fd, buf, 0, buf.length, null) + buf.write(nextSample()));
  try {
    const runs = WARMUP_RUNS + WARMUP_EXTRA_RUNS;
    for (let i = 0; i < runs; i++) {
      // The second half runs the pristine path, which a request like the samples takes.
      if (i >= runs / 2) pristineCwd = cwd;
      await serveOne(src, fd);
    }
  } finally {
    fs.closeSync(fd);
  }
  // The samples leave process.env empty and the cwd where it was, and nothing else
  // (test_the_warm_up_leaves_nothing_behind).
  pristineCwd = cwd;
}
warmUp().then(() => {
  send('{"ready":true}');
  serveNext();
});
