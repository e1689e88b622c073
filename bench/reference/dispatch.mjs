// The TypeScript reference design of Eliza/OpenClaw internal hooks, in plain node (no packages):
// a Map from event key to a list of handlers; triggering an event looks up the specific key
// (`type:action`), then the type, then '*', and awaits each handler in turn inside a try/catch.
// No queue, no per-session ordering, no timeouts: the caller awaits the dispatch inline.
//
//   node bench/reference/dispatch.mjs --events 50000 --handlers 1,10 --runs 5 --warmup 1
//
// Prints one JSON line: {"node": "v20...", "events": N, "rates": {"1": [events/s, ...], ...}}.
//
// With --serve (no --runs): warms up each handler count, prints {"node": "v20..."}, then runs one
// measurement per line read from stdin (a handler count) and prints {"rate": events/s} for it, so
// that a caller can interleave node's rounds with its own (bench/dispatch.py).

import { performance } from "node:perf_hooks";
import { createInterface } from "node:readline";

const handlers = new Map();

function registerInternalHook(eventKey, handler) {
  if (!handlers.has(eventKey)) handlers.set(eventKey, []);
  handlers.get(eventKey).push(handler);
}

function clearInternalHooks() {
  handlers.clear();
}

function createInternalHookEvent(type, action, sessionKey, context = {}) {
  return { type, action, sessionKey, context, timestamp: new Date(), messages: [] };
}

async function triggerInternalHook(event) {
  const specific = handlers.get(`${event.type}:${event.action}`) ?? [];
  const general = handlers.get(event.type) ?? [];
  const any = handlers.get("*") ?? [];
  const all = [...specific, ...general, ...any];
  if (all.length === 0) return;
  for (const handler of all) {
    try {
      await handler(event);
    } catch (err) {
      console.error(`Hook error [${event.type}:${event.action}]:`, err);
    }
  }
}

function parseArgs(argv) {
  const args = { events: 50000, handlers: [1, 10], runs: 5, warmup: 1, serve: false };
  for (let i = 0; i < argv.length; i += 2) {
    const [name, value] = [argv[i], argv[i + 1]];
    if (name === "--serve") {
      args.serve = true;
      i -= 1;
    } else if (name === "--events") args.events = Number(value);
    else if (name === "--handlers") args.handlers = value.split(",").map(Number);
    else if (name === "--runs") args.runs = Number(value);
    else if (name === "--warmup") args.warmup = Number(value);
    else throw new Error(`unknown argument ${name}`);
  }
  return args;
}

async function measure(events) {
  const start = performance.now();
  for (let i = 0; i < events; i++) {
    await triggerInternalHook(createInternalHookEvent("message", "received", "agent:main:bench"));
  }
  return events / ((performance.now() - start) / 1000);
}

const noop = async (_event) => {};

function useHandlers(count) {
  clearInternalHooks();
  for (let i = 0; i < count; i++) registerInternalHook("message:received", noop);
}

async function serve(args) {
  for (const count of args.handlers) {
    useHandlers(count);
    for (let i = 0; i < args.warmup; i++) await measure(args.events);
  }
  process.stdout.write(JSON.stringify({ node: process.version }) + "\n");
  for await (const line of createInterface({ input: process.stdin })) {
    useHandlers(Number(line));
    process.stdout.write(JSON.stringify({ rate: await measure(args.events) }) + "\n");
  }
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  if (args.serve) return serve(args);
  const rates = {};
  for (const count of args.handlers) {
    useHandlers(count);
    for (let i = 0; i < args.warmup; i++) await measure(args.events);
    rates[count] = [];
    for (let i = 0; i < args.runs; i++) rates[count].push(await measure(args.events));
  }
  process.stdout.write(JSON.stringify({ node: process.version, events: args.events, rates }) + "\n");
}

await main();
