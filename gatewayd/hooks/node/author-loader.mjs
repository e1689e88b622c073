// Module resolution hook of the Node worker, registered with module.register() on Nodes that lack
// the in-thread module.registerHooks(): maps the author specifiers ("gatewayd/hooks", "eve/hooks")
// to define.mjs; every other specifier resolves as usual. worker.mjs passes both in `data`.

let target = null;
let specifiers = new Set();

export async function initialize(data) {
  target = data.url;
  specifiers = new Set(data.specifiers);
}

export async function resolve(specifier, context, nextResolve) {
  if (specifiers.has(specifier)) return { url: target, shortCircuit: true };
  return nextResolve(specifier, context);
}
