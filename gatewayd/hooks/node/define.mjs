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
