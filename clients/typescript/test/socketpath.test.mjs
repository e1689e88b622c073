// findSocket: the CLI's rules (gatewayd/client.py), first found wins.
import assert from "node:assert/strict";
import { mkdtempSync, writeFileSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";

import { findSocket } from "../dist/index.js";

const state = mkdtempSync(join(tmpdir(), "gwd-paths-"));
const env = (extra = {}) => ({ ELIZA_STATE_DIR: state, ...extra });
const config = (name, text) => {
  const path = join(state, name);
  writeFileSync(path, text);
  return path;
};

test("no setting: <state>/run/gatewayd.sock, the state dir from $ELIZA_STATE_DIR or ~/.eliza", () => {
  assert.equal(findSocket({ env: env() }), join(state, "run", "gatewayd.sock"));
  assert.equal(findSocket({ env: {} }), join(homedir(), ".eliza", "run", "gatewayd.sock"));
});

test("the socket option wins over the env, which wins over the config", () => {
  const cfg = config("a.yaml", "gateway:\n  control:\n    socket: /from/config.sock\n");
  const e = env({ GATEWAYD_GATEWAY__CONTROL__SOCKET: "/from/env.sock", GATEWAYD_CONFIG: cfg });
  assert.equal(findSocket({ socket: "/explicit.sock", env: e }), "/explicit.sock");
  assert.equal(findSocket({ env: e }), "/from/env.sock");
  // "null" in the env is no value: the config decides.
  assert.equal(findSocket({ env: { ...e, GATEWAYD_GATEWAY__CONTROL__SOCKET: "null" } }), "/from/config.sock");
});

test("the config file: the config option, then $GATEWAYD_CONFIG, then <state>/gatewayd.yaml", () => {
  const named = config("named.yaml", "gateway:\n  control:\n    socket: ~/named.sock\n");
  const fromEnv = config("env.yaml", "gateway: {control: {socket: /env-config.sock}}\n");
  assert.equal(findSocket({ config: named, env: env({ GATEWAYD_CONFIG: fromEnv }) }), join(homedir(), "named.sock"));
  assert.equal(findSocket({ env: env({ GATEWAYD_CONFIG: fromEnv }) }), "/env-config.sock");
  const own = mkdtempSync(join(tmpdir(), "gwd-paths-"));
  writeFileSync(join(own, "gatewayd.yaml"), "gateway:\n  control:\n    socket: /default-config.sock\n");
  assert.equal(findSocket({ env: { ELIZA_STATE_DIR: own } }), "/default-config.sock");
  // A config that does not set it: the default.
  const other = config("other.yaml", "hooks:\n  decisionTimeoutMs: 100\n");
  assert.equal(findSocket({ config: other, env: env() }), join(state, "run", "gatewayd.sock"));
});

test("a named config that cannot be read, or sets the socket wrong, is an error naming the file", () => {
  const missing = join(state, "missing.yaml");
  assert.throws(() => findSocket({ config: missing, env: env() }), {
    code: "config",
    message: `cannot read the config file ${missing}: ENOENT`,
  });
  const bad = config("bad.yaml", "gateway:\n  control:\n    socket: [1, 2]\n");
  assert.throws(() => findSocket({ config: bad, env: env() }), {
    message: `${bad}: gateway.control.socket must be a path, got [1,2] (run \`gatewayd config check\`)`,
  });
  const broken = config("broken.yaml", "gateway: {control: {socket: \n");
  assert.throws(() => findSocket({ config: broken, env: env() }), { message: /broken\.yaml: not valid YAML/ });
});
