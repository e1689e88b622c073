// gatewayd's Node worker: loads the JS/TS hooks of one generation and runs their handlers.
//
// Started by gatewayd/hooks/node/worker.py with `--fd N`, a Unix socket to the daemon, and
// `--parent-fd M`, the read end of a pipe whose write end only the daemon holds. Each message on
// the socket, both ways, is one line of UTF-8 JSON:
//
//   <- {op: "load", id, timeoutMs, hook: {id, name, file, export, tag, events}}
//   -> {op: "importing", id}                 (as that load's import begins: loads run one at a time)
//   -> {id, ok: true, export, rss, events?, description?} | {id, ok: false, error, stuck?}
//   <- {op: "call", id, hook, cfg? | cfgKept?, event: {type, action, sessionKey, timestamp, messages, context}}
//   -> {id, ok: true, messages?, changed?, removed?, result?, resultError?} | {id, ok: false, error}
//   <- {op: "begin", id}                     -> {id, ok: true, stale, rss}
//   <- {op: "drop", id, hooks: [hook id]}    -> {id, ok: true}
//   <- {op: "ping", id}                      -> {id, pong: true}
//   -> {op: "log", hook, level, text}        (a hook's output, unsolicited: console.*, process.stdout
//                                             and process.stderr, fs writes to fd 1 and 2)
//   -> {op: "ready", node, pid, inplace}     (once, when the worker can take requests)
//   -> {op: "gateway", id, call, method, args}  (a hook used its gateway handle; `call`: the id
//                                             of the call whose code did, null outside one)
//   <- {op: "gateway", id, ok: true, value} | {op: "gateway", id, ok: false, error}
//
// Replies are batched: those finished during one run of the microtask queue go out in one write
// after it (process.nextTick), so the daemon reads a batch of calls and gets their answers back in
// one write as well. A log line, `importing` and `ready` are written at once, with what is queued
// before them (they must reach the daemon even if the next thing the worker runs never yields).
// Calls run concurrently, each as soon as its line is read. A line that is not JSON is answered
// with an error for its id (the daemon writes `op` and `id` first), the channel goes on.
//
// The handler gets OpenClaw's InternalHookEvent: {type, action, sessionKey, context, timestamp
// (a Date), messages}, and `{gateway}` as its second argument. After it returns, the whole `messages` array and every top-level context
// key whose JSON changed (or that was added or deleted) go back to the daemon, with what the
// handler returned (`result`: an object of result fields, or null). `cfg` (the hook's view of the
// config, the same JSON call after call) travels beside the event, once: the worker keeps it per
// hook, and later calls say `cfgKept` until it changes. It becomes `context.cfg`, a copy of it made
// when the handler first reads it (most never do); it is not compared nor sent back, since the
// daemon never takes a handler's cfg.
//
// Reloading in place (`inplace` in the ready frame: Node's module.registerHooks, 22.15+/23.5+):
// every load of a generation imports its handlers with the generation's `tag` in the URL
// (`handler.ts?gatewayd-load=7`), and the resolve hook below gives every file the handler's graph
// reaches outside a node_modules directory the same tag, so each generation gets a module graph
// of its own, read from disk, relative imports included (ESM modules cannot be unloaded, so the
// daemon replaces a worker that has piled up too many: see runtime.py). `begin`, sent before a
// generation's loads, empties require()'s cache of everything outside node_modules (CommonJS
// is cached by path, not by URL), and reports `stale`: the node_modules files loaded so far that
// changed on disk since, which only a fresh worker can load anew. `drop` forgets a replaced
// generation's handlers. Without registerHooks the daemon starts a fresh worker per generation.
//
// Imports run one at a time, each announced (`importing`) and bounded here by `timeoutMs`: an
// import that never settles is answered `stuck` and the next one starts; one that loops never
// yields, and the daemon, which knows which import began last, kills the worker for it.
//
// Everything this process starts dies with the daemon: a watchdog thread reads the parent pipe
// (every 100 ms: it is non-blocking, so that a hook's process.exit() can end the thread), which
// ends only when the daemon closes it or dies (kill -9 included), however busy the main thread
// is; it then kills the detached children the hooks started (each its own process group) and this
// process's group (the worker and the other children). The daemon kills a worker the same way, by
// closing the pipe. The socket ending does the same from the main thread.
//
// The gateway handle (define.mjs's `gateway`, also every handler's `ctx.gateway`, its second
// argument) sends each use to the daemon with the id of the call whose code made it, found by an
// AsyncLocalStorage: so a send a handler starts later (from a timer) is still caused by that
// call's event, and the daemon bounds the chain (hooks.maxDepth) as for a Python handler.
//
// A single-file hook (`events: true` in its load) default-exports `defineHook({events: {...}})`:
// entry number N is registered as hook `<id>.N` and called with `(event, ctx)`, where `ctx` is
// Eve's HookContext shape: {agent: {name}, channel: {kind}, session: {id}}, and `gateway` (gatewayd/hooks/define.py
// makes the same for Python). The author specifiers "gatewayd/hooks" and "eve/hooks" resolve to
// define.mjs: in the resolve hook below, or, without registerHooks, through author-loader.mjs
// (module.register), registered on the first such load.

import net from "node:net";
import module from "node:module";
import fs, { statSync } from "node:fs";
import childProcess from "node:child_process";
import { Worker } from "node:worker_threads";
import { AsyncLocalStorage } from "node:async_hooks";
import { format } from "node:util";
import { fileURLToPath, pathToFileURL } from "node:url";
import { gateway } from "./define.mjs";

const current = new AsyncLocalStorage(); // the hook whose code is running
const calling = new AsyncLocalStorage(); // the id of the call whose code is running
const handlers = new Map(); // hook id -> {name, fn}
const cfgs = new Map(); // hook id (a call's `hook`) -> the cfg its calls get (see the header)
const argument = (name) => Number(process.argv[process.argv.indexOf(name) + 1]);
const fd = argument("--fd");
const channel = new net.Socket({ fd, readable: true, writable: true });

// Lines to write, joined into one write once the microtasks running now have run (or at once:
// sendNow): the replies of calls that finish without waiting for I/O, all of those read in one
// chunk, go out together, with no extra turn of the event loop (setImmediate) before them.
let outbox = [];

function flush() {
  if (outbox.length === 0) return;
  const text = outbox.length === 1 ? `${outbox[0]}\n` : `${outbox.join("\n")}\n`;
  outbox = [];
  channel.write(text);
}

function send(message) {
  if (outbox.push(JSON.stringify(message)) === 1) process.nextTick(flush);
}

function sendNow(message) {
  outbox.push(JSON.stringify(message));
  flush();
}

// -- the gateway handle (see the header) -----------------------------------------------------

const asked = new Map(); // gateway request id -> {resolve, reject}
let lastAsked = 0;

globalThis[Symbol.for("gatewayd.gateway")] = (method, args) =>
  new Promise((resolve, reject) => {
    const id = ++lastAsked;
    asked.set(id, { resolve, reject });
    send({ op: "gateway", id, call: calling.getStore() ?? null, hook: current.getStore() ?? null, method, args });
  });

function answered(message) {
  const waiting = asked.get(message.id);
  if (waiting === undefined) return;
  asked.delete(message.id);
  if (message.ok) waiting.resolve(message.value);
  else waiting.reject(new Error(message.error));
}

// -- everything this process starts dies with the daemon (see the header) ---------------------

const MAX_DETACHED = 1024; // detached children remembered at once; more are not killed
const detached = new Int32Array(new SharedArrayBuffer(4 * MAX_DETACHED)); // pids, 0: free slot
const END_ALL = `
  for (const pid of detached) if (pid > 0) try { process.kill(-pid, "SIGKILL"); } catch {}
  try { process.kill(-process.pid, "SIGKILL"); } catch {}
  process.kill(process.pid, "SIGKILL");
`;
const endAll = new Function("detached", "process", END_ALL);

// The parent pipe comes non-blocking: the watchdog reads it every WATCH_MS, sleeping in between
// on `exiting`, so that a hook's process.exit() is not held up by a thread blocked in read()
// (Node joins its threads on exit): the exit wakes it and it ends without killing anything.
const WATCH_MS = 100;
const exiting = new Int32Array(new SharedArrayBuffer(4));
if (process.argv.includes("--parent-fd")) {
  const watchdog = new Worker(
    `const { workerData: { fd, detached, exiting } } = require("node:worker_threads");
     const { readSync } = require("node:fs");
     const byte = Buffer.alloc(1);
     for (;;) {
       try { if (readSync(fd, byte, 0, 1, null) === 0) break; }
       catch (err) {
         if (err.code === "EAGAIN") Atomics.wait(exiting, 0, 0, ${WATCH_MS});
         else if (err.code !== "EINTR") break;
       }
       if (Atomics.load(exiting, 0)) break;
     }
     if (!Atomics.load(exiting, 0)) { ${END_ALL} }`,
    { eval: true, workerData: { fd: argument("--parent-fd"), detached, exiting } },
  );
  watchdog.unref();
  process.on("exit", () => {
    Atomics.store(exiting, 0, 1);
    Atomics.notify(exiting, 0);
  });
}

// A detached child is a process group of its own: remembered until it exits.
const spawnChild = childProcess.ChildProcess.prototype.spawn;
childProcess.ChildProcess.prototype.spawn = function (options) {
  const outcome = spawnChild.call(this, options);
  const pid = this.pid;
  if (options?.detached && pid > 0) {
    const slot = detached.indexOf(0);
    if (slot >= 0) {
      detached[slot] = pid;
      this.once("exit", () => Atomics.compareExchange(detached, slot, pid, 0));
    }
  }
  return outcome;
};

// -- a fresh module graph per generation (see the header) ----------------------------------------

const TAG = "gatewayd-load";
const TAGGED = /[?&]gatewayd-load=([^&#]+)/;
const IN_NODE_MODULES = /[\\/]node_modules[\\/]/;
const stamps = new Map(); // node_modules file path -> "mtime size" when first loaded
const inplace = typeof module.registerHooks === "function";
const AUTHOR_SPECIFIERS = ["gatewayd/hooks", "eve/hooks"];
const DEFINE_URL = new URL("./define.mjs", import.meta.url).href;
const OWN_DIR = new URL("./", import.meta.url).href;
const subscriptions = new Map(); // single-file hook id -> the handler ids of its entries

function stampOf(path) {
  try {
    const st = statSync(path);
    return `${st.mtimeMs} ${st.size}`;
  } catch {
    return "gone";
  }
}

function withTag(url, tag) {
  return `${url}${url.includes("?") ? "&" : "?"}${TAG}=${tag}`;
}

if (inplace) {
  module.registerHooks({
    resolve(specifier, context, nextResolve) {
      if (AUTHOR_SPECIFIERS.includes(specifier)) return { url: DEFINE_URL, shortCircuit: true };
      const resolved = nextResolve(specifier, context);
      const url = resolved.url;
      if (!url.startsWith("file:")) return resolved;
      if (IN_NODE_MODULES.test(url)) {
        const path = fileURLToPath(url.replace(/[?#].*$/, ""));
        if (!stamps.has(path)) stamps.set(path, stampOf(path));
        return resolved;
      }
      // require() caches by path whatever the URL says: `begin` handles CommonJS.
      const parent = context.parentURL === undefined ? null : TAGGED.exec(context.parentURL);
      if (parent === null || TAGGED.test(url) || context.conditions.includes("require")) return resolved;
      return { ...resolved, url: withTag(url, parent[1]) };
    },
  });
}

function begin(message) {
  const cache = module.createRequire(import.meta.url).cache;
  for (const path of Object.keys(cache)) {
    if (!IN_NODE_MODULES.test(path)) delete cache[path];
    else if (!stamps.has(path)) stamps.set(path, stampOf(path));
  }
  const stale = [];
  for (const [path, stamp] of stamps) if (stampOf(path) !== stamp) stale.push(path);
  return { id: message.id, ok: true, stale, rss: process.memoryUsage.rss() };
}

function describe(err) {
  if (err instanceof Error) {
    const text = `${err.name || "Error"}: ${err.message}`;
    // The innermost frame in the hook's own code: not in this worker's files (define.mjs).
    const frames = [...(err.stack ?? "").matchAll(/(file:\/\/[^\s)]+?):(\d+):(\d+)/g)];
    const frame = frames.find((f) => !f[1].startsWith(OWN_DIR)) ?? frames[0];
    if (frame === undefined) return text;
    let where = frame[1];
    try {
      where = fileURLToPath(where.replace(/[?#].*$/, ""));
    } catch {}
    return `${text} (at ${where}:${frame[2]}:${frame[3]})`;
  }
  return `thrown value: ${format(err)}`;
}

// A hook's output becomes log frames naming the hook, so its lines reach the daemon's log as its
// own, never raw (a bare line, or one forged to look like the daemon's): console.*, and what it
// writes to process.stdout, process.stderr or fds 1 and 2. What still reaches fd 1 or 2 (a
// child process's output, Node's own) is read by the daemon and logged too.
function output(level, text) {
  sendNow({ op: "log", hook: current.getStore() ?? null, level, text });
}
for (const [method, level] of [
  ["log", "info"], ["info", "info"], ["debug", "debug"], ["warn", "warning"], ["error", "error"],
]) {
  console[method] = (...args) => output(level, format(...args));
}
const LEVEL_OF_FD = { 1: "info", 2: "warning" };

const bytesOf = (data) =>
  ArrayBuffer.isView(data) ? Buffer.from(data.buffer, data.byteOffset, data.byteLength) : Buffer.from(data);

// The text of a write, less one final line break (a log line is a line).
function written(data, encoding) {
  const text = typeof data === "string" ? data : bytesOf(data).toString(typeof encoding === "string" ? encoding : "utf8");
  return text.endsWith("\n") ? text.slice(0, -1) : text;
}

for (const [stream, level] of [[process.stdout, "info"], [process.stderr, "warning"]]) {
  stream.write = (chunk, encoding, callback) => {
    if (typeof encoding === "function") callback = encoding;
    output(level, written(chunk, encoding));
    if (typeof callback === "function") process.nextTick(callback);
    return true;
  };
}

const { writeSync, write } = fs;
fs.writeSync = function (target, data, ...rest) {
  const level = LEVEL_OF_FD[target];
  if (level === undefined) return writeSync.call(this, target, data, ...rest);
  const [text, bytes] = sliceWritten(data, rest);
  output(level, text);
  return bytes;
};
fs.write = function (target, data, ...rest) {
  const level = LEVEL_OF_FD[target];
  if (level === undefined) return write.call(this, target, data, ...rest);
  const callback = rest.pop();
  const [text, bytes] = sliceWritten(data, rest);
  output(level, text);
  if (typeof callback === "function") process.nextTick(callback, null, bytes, data);
};
module.syncBuiltinESMExports(); // `import { writeSync } from "node:fs"` sees these too

// writeSync(fd, buffer, offset?, length?, position?) or (fd, string, position?, encoding?):
// the text written and its length in bytes.
function sliceWritten(data, rest) {
  if (typeof data === "string") {
    const encoding = typeof rest[1] === "string" ? rest[1] : "utf8";
    return [written(data), Buffer.byteLength(data, encoding)];
  }
  const bytes = bytesOf(data);
  const offset = typeof rest[0] === "number" ? rest[0] : 0;
  const length = typeof rest[1] === "number" ? rest[1] : bytes.length - offset;
  const part = bytes.subarray(offset, offset + length);
  return [written(part), part.length];
}

// A stray rejection or throw in a hook's background work is logged, never fatal to the others.
process.on("unhandledRejection", (reason) => {
  sendNow({ op: "log", hook: current.getStore() ?? null, level: "error", text: `unhandled rejection: ${describe(reason)}` });
});
process.on("uncaughtException", (err) => {
  sendNow({ op: "log", hook: current.getStore() ?? null, level: "error", text: `uncaught exception: ${describe(err)}` });
});

function pickExport(mod, wanted) {
  const fallbackObject = mod.default !== null && typeof mod.default === "object" ? mod.default : {};
  if (wanted && wanted !== "default") {
    for (const value of [mod[wanted], fallbackObject[wanted]]) {
      if (typeof value === "function") return [value, wanted];
    }
    throw new Error(`export '${wanted}' is not a function (exports: ${exportNames(mod)}); fix metadata.export`);
  }
  // `default`, then a named `handler`; a CommonJS `module.exports = {handler}` counts too.
  for (const [value, name] of [
    [mod.default, "default"], [mod.handler, "handler"], [fallbackObject.handler, "handler"], [fallbackObject.default, "default"],
  ]) {
    if (typeof value === "function") return [value, name];
  }
  throw new Error(
    `exports neither a default function nor a 'handler' function (exports: ${exportNames(mod)}); ` +
    "add `export default async (event) => { ... }` or name the function in metadata.export",
  );
}

function exportNames(mod) {
  const names = Object.keys(mod).filter((name) => name !== "module.exports");
  return names.length ? names.join(", ") : "none";
}

async function load(hook) {
  const url = withTag(pathToFileURL(hook.file).href, hook.tag);
  const mod = await current.run(hook.name, () => import(url));
  const [fn, name] = pickExport(mod, hook.export);
  handlers.set(hook.id, { name: hook.name, fn });
  return name;
}

let authorApi = inplace; // with registerHooks, the resolve hook above maps the specifiers

// Make `import { defineHook } from "gatewayd/hooks"` resolve on a Node without registerHooks.
function provideAuthorApi() {
  if (authorApi) return;
  authorApi = true;
  if (typeof module.register === "function") {
    module.register("./author-loader.mjs", {
      parentURL: import.meta.url,
      data: { url: DEFINE_URL, specifiers: AUTHOR_SPECIFIERS },
    });
  }
}

async function loadEvents(hook) {
  provideAuthorApi();
  const url = withTag(pathToFileURL(hook.file).href, hook.tag);
  const mod = await current.run(hook.name, () => import(url));
  const definition = mod.default;
  const events = definition !== null && typeof definition === "object" ? definition.events : undefined;
  if (events === null || typeof events !== "object" || Array.isArray(events)) {
    throw new Error(
      `its default export is not a defineHook({ events }) definition (exports: ${exportNames(mod)}); ` +
      'write `export default defineHook({ events: { "session.started"(event, ctx) { ... } } })` ' +
      'with `import { defineHook } from "gatewayd/hooks"`, or move the file out of the hook root if it is a helper',
    );
  }
  const names = [];
  for (const [name, fn] of Object.entries(events)) {
    if (typeof fn !== "function") throw new Error(`events["${name}"] is ${fn === null ? "null" : typeof fn}, not a function`);
    names.push(name);
  }
  const ids = names.map((_, entry) => `${hook.id}.${entry}`);
  names.forEach((name, i) => handlers.set(ids[i], { name: hook.name, fn: events[name], self: events, eve: true }));
  subscriptions.set(hook.id, ids);
  const description = typeof definition.description === "string" ? definition.description : "";
  return { export: "events", events: names, description };
}

// Eve's HookContext for one event: the agent (the event's agentId, else <id> of agent:<id>:...,
// else main), the channel it came through, and the session (its key).
function hookContext(wire, context) {
  const key = typeof wire.sessionKey === "string" ? wire.sessionKey : "";
  const parts = key.split(":");
  let agent = parts.length > 2 && parts[0] === "agent" && parts[1] ? parts[1] : "main";
  if (typeof context.agentId === "string" && context.agentId) agent = context.agentId;
  let kind; // undefined without a channel, as Eve's optional `kind`
  for (const value of [context.channelId, context.commandSource, context.metadata?.provider]) {
    if (typeof value === "string" && value) {
      kind = value;
      break;
    }
  }
  return { agent: { name: agent }, channel: { kind }, session: { id: key } };
}

// The top-level keys of `after` whose JSON differs from `before`'s (the context as it came, parsed
// again), and those it no longer has, into `reply`; `cfg` is not compared when it came apart.
function diff(after, before, cfgApart, reply) {
  let changed;
  for (const key of Object.keys(after)) {
    if (cfgApart && key === "cfg") continue;
    const text = JSON.stringify(after[key]);
    if (!Object.hasOwn(before, key) || text !== JSON.stringify(before[key])) {
      (changed ??= {})[key] = text === undefined ? null : JSON.parse(text);
    }
  }
  if (changed !== undefined) reply.changed = changed;
  let removed;
  for (const key of Object.keys(before)) if (!Object.hasOwn(after, key)) (removed ??= []).push(key);
  if (removed !== undefined) reply.removed = removed;
}

// Whether `context` (the object the handler got) still reads as `text`, its JSON as it came:
// one JSON.stringify of the whole, `cfg` hidden from it first (the handler has returned).
function unchanged(context, text, cfgApart) {
  if (cfgApart && Object.hasOwn(context, "cfg")) Object.defineProperty(context, "cfg", { enumerable: false });
  return JSON.stringify(context) === text;
}

// `context.cfg`: a copy of `template`, made when first read; what a handler assigns replaces it.
function lazyCfg(context, template) {
  let value;
  let made = false;
  Object.defineProperty(context, "cfg", {
    configurable: true,
    enumerable: true,
    get() {
      if (!made) {
        value = structuredClone(template);
        made = true;
      }
      return value;
    },
    set(given) {
      value = given;
      made = true;
    },
  });
}

// Whether the handler left `messages` as it came: the same array, holding the same strings.
function sameMessages(messages, before) {
  if (messages.length !== before.length) return false;
  for (let i = 0; i < before.length; i++) if (messages[i] !== before[i]) return false;
  return true;
}

async function call(message) {
  const handler = handlers.get(message.hook);
  if (handler === undefined) return { id: message.id, ok: false, error: `no hook ${message.hook} in this worker` };
  const wire = message.event;
  const context = wire.context !== null && typeof wire.context === "object" ? wire.context : {};
  const messages = Array.isArray(wire.messages) ? wire.messages : [];
  const given = messages.slice();
  const event = {
    type: wire.type,
    action: wire.action,
    sessionKey: wire.sessionKey,
    context,
    timestamp: new Date(wire.timestamp),
    messages,
  };
  const before = JSON.stringify(context);
  let cfg = message.cfg;
  if (cfg !== undefined) cfgs.set(message.hook, cfg);
  else if (message.cfgKept) cfg = cfgs.get(message.hook);
  const cfgApart = cfg !== undefined;
  if (cfgApart) lazyCfg(context, cfg);
  let value;
  try {
    value = await calling.run(message.id, () => current.run(handler.name, () =>
      handler.eve
        ? handler.fn.call(handler.self, event, { ...hookContext(wire, context), gateway })
        : handler.fn(event, { gateway })));
  } catch (err) {
    return { id: message.id, ok: false, error: describe(err) };
  }
  // What changed goes back, and only that: a handler that changed nothing is answered {id, ok}.
  const reply = { id: message.id, ok: true };
  const after = event.context !== null && typeof event.context === "object" ? event.context : {};
  if (after !== context || !unchanged(context, before, cfgApart)) diff(after, JSON.parse(before), cfgApart, reply);
  const out = event.messages;
  if (!Array.isArray(out)) reply.messages = [];
  else if (out !== messages || !sameMessages(out, given)) {
    reply.messages = out.map((m) => (typeof m === "string" ? m : format(m)));
  }
  // What it returned (an object of result fields, e.g. {block: true}), as JSON: the daemon merges
  // the event's declared fields of it as it does a Python handler's return value. A value that
  // is no JSON is said so (resultError), never the handler's failure: its messages still count.
  if (value !== undefined && value !== null) {
    try {
      const text = JSON.stringify(value);
      if (text !== undefined && nestedPast(text, MAX_RESULT_DEPTH)) reply.resultError = `nested deeper than ${MAX_RESULT_DEPTH} levels`;
      else if (text !== undefined) reply.result = JSON.parse(text);
    } catch (err) {
      reply.resultError = `not JSON: ${describe(err)}`;
    }
  }
  return reply;
}

const MAX_RESULT_DEPTH = 64; // as gatewayd/hooks/results.py's MAX_DEPTH

// Whether JSON `text` nests deeper than `limit` arrays and objects.
function nestedPast(text, limit) {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92) i++; // a backslash: skip the escaped character
      else if (c === 34) inString = false;
    } else if (c === 34) inString = true;
    else if (c === 123 || c === 91) {
      if (++depth > limit) return true;
    } else if (c === 125 || c === 93) depth--;
  }
  return false;
}

// Loads run one at a time (see the header): the daemon knows which import a blocked worker is in.
let loads = Promise.resolve();

function importOne(message) {
  sendNow({ op: "importing", id: message.id });
  let timer;
  const stuck = new Promise((resolve) => {
    timer = setTimeout(resolve, message.timeoutMs ?? 10000, STUCK);
  });
  const loading = message.hook.events ? loadEvents(message.hook) : load(message.hook).then((name) => ({ export: name }));
  return Promise.race([loading, stuck])
    .then((loaded) => {
      if (loaded === STUCK) send({ id: message.id, ok: false, stuck: true, error: "import did not settle" });
      else send({ id: message.id, ok: true, ...loaded, rss: process.memoryUsage.rss() });
    }, (err) => send({ id: message.id, ok: false, error: describe(err) }))
    .finally(() => clearTimeout(timer));
}
const STUCK = Symbol("stuck");

async function handle(message) {
  switch (message.op) {
    case "load":
      loads = loads.then(() => importOne(message));
      break;
    case "begin":
      send(begin(message));
      break;
    case "drop":
      for (const id of message.hooks) {
        handlers.delete(id);
        cfgs.delete(id);
        for (const entry of subscriptions.get(id) ?? []) {
          handlers.delete(entry);
          cfgs.delete(entry);
        }
        subscriptions.delete(id);
      }
      send({ id: message.id, ok: true });
      break;
    case "ping":
      send({ id: message.id, pong: true });
      break;
    default:
      send({ id: message.id, ok: false, error: `unknown op ${message.op}` });
  }
}

// Lines in: each handled as it is read, a call at once (the hot path: no detour).
const MAX_LINE = 64 << 20; // as the daemon's MAX_FRAME
const LINE_ID = /^\{"op":"[a-z]+","id":(\d+)/;
let partial = [];
let partialSize = 0;

function received(line) {
  let message;
  try {
    message = JSON.parse(line);
  } catch (err) {
    const id = LINE_ID.exec(line);
    if (id !== null) send({ id: Number(id[1]), ok: false, error: `the worker could not read the request: ${describe(err)}` });
    else sendNow({ op: "log", hook: null, level: "error", text: `the worker could not read a line: ${describe(err)}` });
    return;
  }
  const failed = (err) => send({ id: message.id, ok: false, error: describe(err) });
  if (message.op === "call") call(message).then(send, failed);
  else if (message.op === "gateway") answered(message);
  else handle(message).catch(failed);
}

channel.setEncoding("utf8");
channel.on("data", (chunk) => {
  let end = chunk.indexOf("\n");
  if (end < 0) {
    partial.push(chunk);
    partialSize += chunk.length;
    if (partialSize > MAX_LINE) {
      sendNow({ op: "log", hook: null, level: "error", text: `a request of over ${MAX_LINE} characters: the worker ends` });
      endAll(detached, process);
    }
    return;
  }
  let start = 0;
  if (partial.length) {
    partial.push(chunk.slice(0, end));
    const line = partial.join("");
    partial = [];
    partialSize = 0;
    received(line);
    start = end + 1;
    end = chunk.indexOf("\n", start);
  }
  while (end >= 0) {
    received(chunk.slice(start, end));
    start = end + 1;
    end = chunk.indexOf("\n", start);
  }
  if (start < chunk.length) {
    const rest = chunk.slice(start);
    partial.push(rest);
    partialSize = rest.length;
  }
});
// The daemon closed its end (it stopped or retired this generation): nothing left to do, and
// nothing this process started stays behind.
channel.on("end", () => endAll(detached, process));
channel.on("error", () => endAll(detached, process));
if (process.argv.includes("--warm-typescript")) await import("./warm.ts");
sendNow({ op: "ready", node: process.version, pid: process.pid, inplace });
