// Runs OpenClaw's own hook discovery, eligibility and loader (from an installed `openclaw`
// package's dist/) on the cases of a JSON file, and prints what OpenClaw decided for each.
//
// usage: node oracle.mjs <openclaw package dir> <cases.json>
//
// The dist/ chunk names carry content hashes, so each module is found by the source file its
// bundler region marker names (`//#region src/hooks/loader.ts`), and each function by the name
// its export line gives it.
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [packageDir, casesFile] = process.argv.slice(2);
const dist = path.join(packageDir, "dist");

function chunkWith(region) {
  const marker = `//#region ${region}\n`;
  for (const name of fs.readdirSync(dist).sort()) {
    if (!name.endsWith(".mjs")) continue;
    const file = path.join(dist, name);
    if (fs.readFileSync(file, "utf8").includes(marker)) return file;
  }
  throw new Error(`no chunk of ${dist} holds ${region}`);
}

async function exported(region, name) {
  const file = chunkWith(region);
  const source = fs.readFileSync(file, "utf8");
  const line = source.match(/^export \{([^}]*)\};?\s*$/m);
  const mod = await import(pathToFileURL(file).href);
  if (name in mod) return mod[name];
  for (const part of (line?.[1] ?? "").split(",")) {
    const [local, alias] = part.trim().split(/\s+as\s+/);
    if (local === name) return mod[alias ?? local];
  }
  throw new Error(`${file} does not export ${name}`);
}

const buildWorkspaceHookStatus = await exported("src/hooks/hooks-status.ts", "buildWorkspaceHookStatus");
const loadWorkspaceHookEntries = await exported("src/hooks/workspace.ts", "loadWorkspaceHookEntries");
const shouldIncludeHook = await exported("src/hooks/config.ts", "shouldIncludeHook");
const { prepareInternalHooks } = await import(pathToFileURL(chunkWith("src/hooks/loader.ts")).href);
const handlers = globalThis[Symbol.for("openclaw.internalHookHandlers")];

const cases = JSON.parse(fs.readFileSync(casesFile, "utf8"));
const out = [];
const baseEnv = { ...process.env };
for (const item of cases) {
  for (const key of Object.keys(process.env)) if (!(key in baseEnv)) delete process.env[key];
  Object.assign(process.env, baseEnv, item.env ?? {});
  const opts = {
    config: item.config,
    managedHooksDir: item.managedHooksDir,
    bundledHooksDir: item.bundledHooksDir,
  };
  const messages = [];
  const write = process.stderr.write.bind(process.stderr);
  const swrite = process.stdout.write.bind(process.stdout);
  process.stderr.write = (chunk, ...rest) => (messages.push(String(chunk)), true);
  process.stdout.write = (chunk, ...rest) => (messages.push(String(chunk)), true);
  let status, registered = {}, error = null;
  try {
    const entries = loadWorkspaceHookEntries(item.workspaceDir, opts);
    const loaderEligible = new Map(
      entries.map((entry) => [entry.hook.filePath, shouldIncludeHook({ entry, config: item.config })]),
    );
    status = buildWorkspaceHookStatus(item.workspaceDir, { ...opts, entries }).hooks.map((hook) => ({
      name: hook.name,
      source: hook.source,
      filePath: hook.filePath,
      handlerPath: hook.handlerPath ?? null,
      hookKey: hook.hookKey,
      events: hook.events,
      always: hook.always,
      requirementsSatisfied: hook.requirementsSatisfied,
      enabledByConfig: hook.enabledByConfig,
      loadable: hook.loadable,
      // What the loader itself decides (enable policy and runtime requirements): the status
      // view normalizes `os` names (`Linux`, `macos`), the loader compares them as written.
      included: loaderEligible.get(hook.filePath) ?? null,
      blockedReason: hook.blockedReason ?? null,
      missing: hook.missing,
    }));
    const prepared = await prepareInternalHooks(item.config, item.workspaceDir, {
      ...opts,
      failureMode: "best-effort",
    });
    prepared.commit();
    for (const [key, list] of handlers) {
      registered[key] = list.map((fn) => fn.oracleHook ?? "<untagged>");
    }
  } catch (exc) {
    error = String(exc?.stack ?? exc);
  } finally {
    process.stderr.write = write;
    process.stdout.write = swrite;
  }
  out.push({ id: item.id, status, registered, error, log: messages.join("") });
}
process.stdout.write(JSON.stringify(out));
