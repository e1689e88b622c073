/**
 * Where the daemon listens, found by the rules of the `gatewayd` CLI (gatewayd/client.py), first
 * found wins:
 *
 * 1. the `socket` option (the CLI's `--socket PATH`);
 * 2. `$GATEWAYD_GATEWAY__CONTROL__SOCKET` (the env override of `gateway.control.socket`);
 * 3. `gateway.control.socket` in the config file: the `config` option (`--config`), else
 *    `$GATEWAYD_CONFIG`, else `$ELIZA_STATE_DIR/gatewayd.yaml` (a named file must exist; the
 *    default one may be absent);
 * 4. `$ELIZA_STATE_DIR/run/gatewayd.sock` (the state dir defaults to `~/.eliza`).
 *
 * `~` is expanded in every path, as the CLI does.
 */
import { existsSync, readFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";

import { GatewaydError } from "./errors.js";
import { parse as parseYaml } from "yaml";

export const STATE_ENV = "ELIZA_STATE_DIR";
export const CONFIG_ENV = "GATEWAYD_CONFIG";
export const SOCKET_ENV = "GATEWAYD_GATEWAY__CONTROL__SOCKET";

export interface SocketOptions {
  /** The socket path (the CLI's `--socket`): wins over every other rule. */
  socket?: string | undefined;
  /** The config file (the CLI's `--config`); it must exist when named. */
  config?: string | undefined;
  /** The environment to read (default `process.env`). */
  env?: NodeJS.ProcessEnv | undefined;
}

function expandUser(path: string): string {
  if (path === "~") return homedir();
  if (path.startsWith("~/")) return join(homedir(), path.slice(2));
  return path;
}

/** The state dir: `$ELIZA_STATE_DIR` or `~/.eliza`. */
export function stateDir(env: NodeJS.ProcessEnv = process.env): string {
  const raw = env[STATE_ENV];
  return raw ? expandUser(raw) : join(homedir(), ".eliza");
}

/** `gateway.control.socket` from the config file in use, if it sets one. */
function configSocket(explicit: string | undefined, env: NodeJS.ProcessEnv): string | undefined {
  const named = explicit || env[CONFIG_ENV];
  const path = named ? expandUser(named) : join(stateDir(env), "gatewayd.yaml");
  if (!named && !existsSync(path)) return undefined;
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    const why = (err as NodeJS.ErrnoException).code ?? String(err);
    throw new GatewaydError("config", `cannot read the config file ${path}: ${why}`);
  }
  if (!text.includes("socket")) return undefined; // cannot set it: spare the YAML parse
  let data: unknown;
  try {
    data = parseYaml(text);
  } catch (err) {
    throw new GatewaydError(
      "config",
      `${path}: not valid YAML: ${(err as Error).message} (run \`gatewayd config check\`)`,
    );
  }
  let value: unknown = data;
  for (const key of ["gateway", "control", "socket"]) {
    value = value !== null && typeof value === "object" ? (value as Record<string, unknown>)[key] : undefined;
  }
  if (value === undefined || value === null || value === "") return undefined;
  if (typeof value !== "string") {
    throw new GatewaydError(
      "config",
      `${path}: gateway.control.socket must be a path, got ${JSON.stringify(value)} (run \`gatewayd config check\`)`,
    );
  }
  return value;
}

/** The daemon's socket path by the CLI's rules (see the module comment). */
export function findSocket(options: SocketOptions = {}): string {
  const env = options.env ?? process.env;
  const fromEnv = env[SOCKET_ENV];
  const configured =
    options.socket || (fromEnv && fromEnv !== "null" ? fromEnv : undefined) || configSocket(options.config, env);
  if (configured) return expandUser(configured);
  return join(stateDir(env), "run", "gatewayd.sock");
}
