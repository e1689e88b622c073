// A real `gatewayd run` for the Node tests: a temp state dir, its own socket, hooks written as
// files. The daemon is the repository's (.venv/bin/gatewayd, or $GATEWAYD_BIN).
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "../../../..");
export const GATEWAYD = process.env.GATEWAYD_BIN ?? join(REPO, ".venv", "bin", "gatewayd");

/** A state dir with `hooks` written into it: `{name: {"HOOK.md": text, "handler.py": text}}`. */
export function makeState(hooks = {}, config = "") {
  // Short: a Unix socket path is at most 107 bytes.
  const state = mkdtempSync(join(tmpdir(), "gwd-"));
  for (const [name, files] of Object.entries(hooks)) writeHook(state, name, files);
  if (config) writeFileSync(join(state, "gatewayd.yaml"), config);
  return state;
}

export function writeHook(state, name, files) {
  const dir = join(state, "hooks", name);
  mkdirSync(dir, { recursive: true });
  for (const [file, text] of Object.entries(files)) writeFileSync(join(dir, file), text.replaceAll("{{name}}", name));
}

/** A Python hook on `events` whose handler body is `body` (indented by the caller's 4 spaces). */
export function pythonHook(events, body, { background = false } = {}) {
  const meta = background ? "\n    background: true" : "";
  return {
    "HOOK.md": `---\nname: {{name}}\ndescription: test hook\nmetadata:\n  eliza:\n    events: ${JSON.stringify(events)}${meta}\n---\n`,
    "handler.py": `import asyncio, json, os\n\n\nasync def handler(event, ctx):\n${body}\n`,
  };
}

function ping(path) {
  return new Promise((resolveDone) => {
    const sock = connect({ path });
    let got = "";
    sock.on("connect", () => sock.write('{"id":0,"op":"ping"}\n'));
    sock.on("data", (d) => {
      got += d;
      if (got.includes("\n")) {
        sock.destroy();
        resolveDone(got.includes('"ok": true') || got.includes('"ok":true'));
      }
    });
    sock.on("error", () => resolveDone(false));
  });
}

export class Daemon {
  constructor(state, env = {}) {
    this.state = state;
    this.socket = join(state, "run", "gatewayd.sock");
    this.env = env;
    this.proc = undefined;
    this.log = [];
  }

  /** Start `gatewayd run` and wait until it answers `ping` (30 s at most). */
  async start() {
    const env = { ...process.env, ...this.env, ELIZA_STATE_DIR: this.state, PYTHONUNBUFFERED: "1" };
    for (const key of Object.keys(env)) if (key.startsWith("GATEWAYD_") && !(key in this.env)) delete env[key];
    env.GATEWAYD_HOOKS__LOAD__WATCH ??= "false";
    const proc = spawn(GATEWAYD, ["run", "--log-format", "json"], {
      cwd: this.state,
      env,
      stdio: ["ignore", "ignore", "pipe"],
    });
    this.proc = proc;
    let partial = "";
    proc.stderr.setEncoding("utf8");
    proc.stderr.on("data", (chunk) => {
      const lines = (partial + chunk).split("\n");
      partial = lines.pop();
      for (const line of lines) {
        try {
          this.log.push(JSON.parse(line));
        } catch {
          this.log.push({ event: "stderr", line });
        }
      }
    });
    const exited = new Promise((r) => proc.once("exit", (code) => r(code)));
    this.exited = exited;
    const deadline = Date.now() + 30_000;
    while (Date.now() < deadline) {
      if (proc.exitCode !== null) break;
      if (await ping(this.socket)) return this;
      await new Promise((r) => setTimeout(r, 50));
    }
    proc.kill("SIGKILL");
    throw new Error(`gatewayd did not start (exit ${proc.exitCode}):\n${this.log.map((r) => JSON.stringify(r)).join("\n")}`);
  }

  /** SIGTERM, and wait for the exit (the queue drains first). */
  async stop() {
    if (!this.proc || this.proc.exitCode !== null) return;
    this.proc.kill("SIGTERM");
    await this.exited;
  }

  /** SIGKILL: a crash, nothing drains. */
  async kill() {
    if (!this.proc || this.proc.exitCode !== null) return;
    this.proc.kill("SIGKILL");
    await this.exited;
  }

  /** Log records whose `event` is `name`. */
  records(name) {
    return this.log.filter((r) => r.event === name);
  }

  cleanup() {
    rmSync(this.state, { recursive: true, force: true });
  }
}

/** Poll `check` until it returns a truthy value (10 s at most). */
export async function eventually(check, what = "the condition", timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
