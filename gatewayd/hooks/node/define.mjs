// `defineHook` for single-file JS/TS hooks (gatewayd/hooks/filescan.py says which files are hooks).
//
//   import { defineHook } from "gatewayd/hooks";   // also "eve/hooks", so Eve hooks load as they are
//   export default defineHook({
//     events: {
//       async "session.started"(event, ctx) { console.info("started", ctx.session.id); },
//       "*"(event) { ... },
//     },
//   });
//
// The worker (worker.mjs) resolves both specifiers to this file, so no package is installed and
// nothing is built. It checks the definition now, so a mistake fails at import with the entry named.

export function defineHook(definition) {
  if (definition === null || typeof definition !== "object" || Array.isArray(definition)) {
    throw new TypeError("defineHook takes an object: defineHook({ events: { \"session.started\"(event, ctx) { ... } } })");
  }
  const { events } = definition;
  if (events === null || typeof events !== "object" || Array.isArray(events)) {
    throw new TypeError("defineHook: `events` must be an object of event name -> function, e.g. { \"session.started\"(event, ctx) { ... } }");
  }
  for (const [name, fn] of Object.entries(events)) {
    if (typeof fn !== "function") {
      throw new TypeError(`defineHook: events["${name}"] is ${fn === null ? "null" : typeof fn}, not a function`);
    }
  }
  return definition;
}

// What a hook may ask of the gateway: the methods of Python's `ctx.gateway` (docs/hooks.md). Every
// handler also gets it as `ctx.gateway`, its second argument. In gatewayd's Node worker each use
// goes to the daemon (worker.mjs sets the function under GATEWAY); anywhere else it fails.
//
//   await gateway.send(sessionKey, text, { channel })            -> true when a client took it
//   await gateway.deliver(sessionKey, text, { senderId, channel, wait }) -> { messages, command }
const GATEWAY = Symbol.for("gatewayd.gateway");

function ask(method, args) {
  const request = globalThis[GATEWAY];
  if (typeof request !== "function") {
    return Promise.reject(new Error(`gateway.${method}: no gateway here (only a hook run by gatewayd's Node worker has one)`));
  }
  return request(method, args);
}

export const gateway = Object.freeze({
  send(sessionKey, text, options = {}) {
    return ask("send", { sessionKey, text, channel: options.channel });
  },
  deliver(sessionKey, text, options = {}) {
    return ask("deliver", { sessionKey, text, senderId: options.senderId, channel: options.channel, wait: options.wait });
  },
});
