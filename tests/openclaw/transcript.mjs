// Reads a session file with OpenClaw's own session-file functions (from an installed `openclaw`
// package's dist/) and prints what OpenClaw makes of it: the header, the entries it does not
// recognize, and the conversation its session manager builds (the branch ending at the last entry).
//
// usage: node transcript.mjs <openclaw package dir> <session file>
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [packageDir, file] = process.argv.slice(2);
const dist = path.join(packageDir, "dist");

function chunkWith(region) {
  const marker = `//#region ${region}\n`;
  for (const name of fs.readdirSync(dist).sort()) {
    if (!name.endsWith(".mjs")) continue;
    const chunk = path.join(dist, name);
    if (fs.readFileSync(chunk, "utf8").includes(marker)) return chunk;
  }
  throw new Error(`no chunk of ${dist} holds ${region}`);
}

async function exported(region, name) {
  const chunk = chunkWith(region);
  const source = fs.readFileSync(chunk, "utf8");
  const line = source.match(/^export \{([^}]*)\};?\s*$/m);
  const mod = await import(pathToFileURL(chunk).href);
  for (const part of (line?.[1] ?? "").split(",")) {
    const [local, alias] = part.trim().split(/\s+as\s+/);
    if (local === name) return mod[alias ?? local];
  }
  throw new Error(`${chunk} does not export ${name}`);
}

const codec = "src/agents/sessions/session-manager-codec.ts";
const entryCodec = "src/config/sessions/session-entry-codec.ts";
const parseSessionEntries = await exported(codec, "parseSessionEntries");
const migrateToCurrentVersion = await exported(codec, "migrateToCurrentVersion");
const buildSessionContext = await exported(codec, "buildSessionContext");
const partitionSessionFileEntries = await exported(entryCodec, "partitionSessionFileEntries");
const findSessionTranscriptHeader = await exported(entryCodec, "findSessionTranscriptHeader");
const assertCurrentSessionTranscriptHeader = await exported(entryCodec, "assertCurrentSessionTranscriptHeader");

const entries = parseSessionEntries(fs.readFileSync(file, "utf8"));
const header = findSessionTranscriptHeader(entries) ?? null;
let current = true;
try {
  assertCurrentSessionTranscriptHeader(header ?? undefined);
} catch {
  current = false;
}
const { fileEntries, opaqueEntries } = partitionSessionFileEntries(entries);
const migrated = migrateToCurrentVersion(fileEntries);
const branch = fileEntries.filter((entry) => entry.type !== "session");
const { messages } = buildSessionContext(branch);
const text = (content) =>
  typeof content === "string" ? content : content.filter((p) => p.type === "text").map((p) => p.text).join("\n");
process.stdout.write(
  JSON.stringify({
    header,
    current,
    migrated,
    opaque: opaqueEntries.map((item) => item.record),
    messages: messages.map((m) => ({ role: m.role, text: text(m.content), timestamp: m.timestamp })),
  }),
);
