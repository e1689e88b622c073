// The plugin end to end: a real elizaOS AgentRuntime (plugin-sql on PGlite, a stand-in model)
// and a real `gatewayd run` with Python and TypeScript hooks.
import assert from "node:assert/strict";
import { readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";

import { GatewaydClient } from "@gatewayd/client";

import gatewaydElizaPlugin from "../dist/index.js";
import { Daemon, eventually, makeState, pythonHook } from "../../../clients/typescript/test/support/daemon.mjs";
import { modelReply, openRoom, say, startRuntime } from "./support/runtime.mjs";

const RECORD = '    with open(os.path.join(os.environ["ELIZA_STATE_DIR"], "seen.jsonl"), "a") as f:\n' +
  '        f.write(json.dumps({"event": event.key, "sessionKey": event.session_key, **{k: v for k, v in event.context.items() if k not in ("cfg", "workspaceDir")}}, default=str) + "\\n")';

const hooks = {
  guard: pythonHook(
    ["message:received"],
    [
      '    text = event.context.get("content", "")',
      '    if "forbidden" in text:',
      '        return {"block": True, "reason": "no forbidden words"}',
      '    if "swap" in text:',
      '        return {"content": text.replace("swap", "SWAPPED-BY-HOOK")}',
      "    return None",
    ].join("\n"),
  ),
  "ts-seen": {
    "HOOK.md": "---\nname: {{name}}\ndescription: a TypeScript hook\nmetadata:\n  eliza:\n    events: [\"message:received\"]\n---\n",
    "handler.ts": [
      'import type { HookHandler } from "openclaw/hooks";',
      "const handler: HookHandler = async (event) => {",
      '  const text: string = String(event.context.content ?? "");',
      '  if (text.includes("ts-rewrite")) return { content: text.replace("ts-rewrite", "rewritten-in-ts") };',
      "};",
      "export default handler;",
    ].join("\n"),
  },
  tools: pythonHook(
    ["agent:before_tool_call"],
    [
      '    text = (event.context.get("params") or {}).get("content", {}).get("text", "")',
      '    if event.context.get("toolName") == "DELETE_FILE" and "/etc" in text:',
      '        return {"block": True, "reason": "not under /etc"}',
      '    if "tmp" in text:',
      '        return {"params": {"options": {"path": "/tmp/safe"}}}',
      "    return None",
    ].join("\n"),
  ),
  sending: pythonHook(
    ["message:sending"],
    [
      '    text = event.context.get("content", "")',
      '    if "secret" in text:',
      '        return {"cancel": True, "reason": "no secrets out"}',
      '    if "rewrite-me" in text:',
      '        return {"content": "rewritten by a hook"}',
      "    return None",
    ].join("\n"),
  ),
  context: pythonHook(
    ["agent:before_start"],
    '    if "remember" in event.context.get("prompt", ""):\n        return {"prependContext": "The user is called Ada and likes tea."}',
  ),
  remind: pythonHook(["agent:remind"], '    await ctx.gateway.send(event.session_key, event.context.get("text", "reminder"))'),
  recorder: pythonHook(
    ["message:received", "message:sent", "agent:before_start", "agent:end", "agent:before_tool_call", "agent:after_tool_call"],
    RECORD,
  ),
};

const deletions = [];
const deleteFile = {
  name: "DELETE_FILE",
  description: "delete a file",
  similes: [],
  examples: [],
  validate: async () => true,
  handler: async (_rt, message, _state, options, callback) => {
    deletions.push({ text: message.content.text, path: options?.path });
    await callback?.({ text: `deleted ${options?.path ?? "?"}`, actions: ["DELETE_FILE"] });
    return { success: true, text: "deleted" };
  },
};

let daemon;
let runtime;
let model;
let dataDir;
let room;
let control;

function seen() {
  try {
    return readFileSync(join(daemon.state, "seen.jsonl"), "utf8").trim().split("\n").filter(Boolean).map((l) => JSON.parse(l));
  } catch {
    return [];
  }
}

before(async () => {
  daemon = await new Daemon(makeState(hooks)).start();
  ({ runtime, model, dataDir } = await startRuntime({
    // The plugin as a character file names it (the default export), set by the character's settings.
    plugins: [gatewaydElizaPlugin],
    actions: [deleteFile],
    settings: { GATEWAYD_SOCKET: daemon.socket, GATEWAYD_FAIL_MODE: "open" },
  }));
  await runtime.getServiceLoadPromise("gatewayd");
  room = await openRoom(runtime, "ada");
  runtime.registerSendHandler("test", async (_rt, target, content) => delivered.push({ target, content }));
  control = await GatewaydClient.connect({ socket: daemon.socket });
});

const delivered = [];

after(async () => {
  control?.close();
  await runtime?.stop();
  await daemon?.stop();
  daemon?.cleanup();
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
});

async function hookCalls(name) {
  const { hooks: listed } = await control.hooks();
  return listed.find((h) => h.name === name)?.stats?.calls ?? 0;
}

test("a message through the runtime fires a Python and a TypeScript hook, and the reply goes out", async () => {
  const [py, ts] = [await hookCalls("guard"), await hookCalls("ts-seen")];
  model.replies.push(modelReply("Hello Ada"));
  const { replies } = await say(runtime, room, "hi there");
  assert.deepEqual(replies.map((r) => r.text), ["Hello Ada"]);
  assert.equal(await hookCalls("guard"), py + 1);
  assert.equal(await hookCalls("ts-seen"), ts + 1);
  const key = `agent:${runtime.agentId}:${room.roomId}`;
  await eventually(() => seen().some((r) => r.event === "agent:end" && r.sessionKey === key), "agent:end for the run");
  const received = seen().find((r) => r.event === "message:received" && r.content === "hi there");
  assert.equal(received.sessionKey, key);
  assert.equal(received.from, room.entityId);
  await eventually(() => seen().some((r) => r.event === "message:sent" && r.content === "Hello Ada" && r.success), "message:sent");
});

test("the agent's own message is not asked about (the runtime skips it)", async () => {
  const result = await runtime.messageService.handleMessage(runtime, {
    id: crypto.randomUUID(),
    entityId: runtime.agentId,
    agentId: runtime.agentId,
    roomId: room.roomId,
    content: { text: "talking to myself", source: "test" },
    createdAt: Date.now(),
  });
  assert.equal(result.didRespond, false);
  assert.ok(!seen().some((r) => r.content === "talking to myself"));
});

test("a block decision stops the runtime: no model call, no reply, nothing stored", async () => {
  const prompts = model.prompts.length;
  model.replies.push(modelReply("should never be said"));
  const { replies, result } = await say(runtime, room, "this is forbidden");
  assert.deepEqual(replies, []);
  assert.equal(result.didRespond, false);
  assert.equal(model.prompts.length, prompts);
  model.replies.length = 0;
  const memories = await runtime.getMemories({ roomId: room.roomId, tableName: "messages", count: 50 });
  assert.ok(!memories.some((m) => m.content.text?.includes("forbidden")));
});

test("a rewrite changes what the runtime stores and prompts with (Python and TypeScript hooks)", async () => {
  model.replies.push(modelReply("ok"), modelReply("ok"));
  await say(runtime, room, "please swap this");
  assert.match(model.prompts.at(-1), /please SWAPPED-BY-HOOK this/);
  assert.doesNotMatch(model.prompts.at(-1), /please swap this/);
  await say(runtime, room, "a ts-rewrite here");
  assert.match(model.prompts.at(-1), /a rewritten-in-ts here/);
  const texts = (await runtime.getMemories({ roomId: room.roomId, tableName: "messages", count: 50 })).map((m) => m.content.text);
  assert.ok(texts.includes("please SWAPPED-BY-HOOK this"));
  assert.ok(texts.includes("a rewritten-in-ts here"));
});

test("agent:before_start: what a hook prepends reaches the model's prompt", async () => {
  model.replies.push(modelReply("noted"), modelReply("ok"));
  await say(runtime, room, "please remember this");
  assert.match(model.prompts.at(-1), /The user is called Ada and likes tea\./);
  await say(runtime, room, "something else");
  assert.doesNotMatch(model.prompts.at(-1), /likes tea/);
  assert.ok(seen().some((r) => r.event === "agent:before_start" && r.prompt === "please remember this"));
});

test("message:sending: a reply can be cancelled or rewritten", async () => {
  model.replies.push(modelReply("the secret is 42"));
  const cancelled = await say(runtime, room, "tell me");
  assert.deepEqual(cancelled.replies, []);
  model.replies.push(modelReply("please rewrite-me"));
  const rewritten = await say(runtime, room, "again");
  assert.deepEqual(rewritten.replies.map((r) => r.text), ["rewritten by a hook"]);
  await eventually(
    () => seen().some((r) => r.event === "message:sent" && r.success === false && r.reason === "no secrets out"),
    "message:sent for the cancelled reply",
  );
});

test("a tool-call block stops the action; a params change reaches it", async () => {
  model.replies.push(modelReply("deleting", "DELETE_FILE"));
  const blocked = await say(runtime, room, "delete /etc/passwd");
  assert.deepEqual(deletions, []);
  assert.ok(!blocked.replies.some((r) => String(r.text).startsWith("deleted")));
  model.replies.push(modelReply("deleting", "DELETE_FILE"));
  const allowed = await say(runtime, room, "delete the tmp file");
  assert.deepEqual(deletions, [{ text: "delete the tmp file", path: "/tmp/safe" }]);
  assert.ok(allowed.replies.some((r) => r.text === "deleted /tmp/safe"));
  await eventually(
    () => seen().some((r) => r.event === "agent:after_tool_call" && r.toolName === "DELETE_FILE" && r.result?.success === true),
    "agent:after_tool_call",
  );
});

test("a hook's gateway.send arrives in the runtime's room", async () => {
  const key = `agent:${runtime.agentId}:${room.roomId}`;
  await eventually(async () => {
    const reply = await control.trigger("agent:remind", key, { text: "a reminder from a hook" });
    return reply.messages !== undefined && delivered.length > 0;
  }, "the hook's message to reach the room's transport");
  assert.equal(delivered[0].content.text, "a reminder from a hook");
  assert.equal(delivered[0].target.roomId, room.roomId);
  const memories = await runtime.getMemories({ roomId: room.roomId, tableName: "messages", count: 50 });
  assert.ok(memories.some((m) => m.content.text === "a reminder from a hook" && m.entityId === runtime.agentId));
});

test("past maxSubscriptions the least recently active room stops receiving; a message brings it back", async () => {
  const bridge = runtime.getService("gatewayd").bridge;
  const key = (r) => `agent:${runtime.agentId}:${r.roomId}`;
  const other = await openRoom(runtime, "bob");
  bridge.options.maxSubscriptions = 1;
  try {
    model.replies.push(modelReply("hi Bob"));
    await say(runtime, other, "hello from bob");
    await eventually(async () => {
      const before = delivered.length;
      await control.trigger("agent:remind", key(other), { text: "for bob" });
      return eventually(() => delivered.length > before, "bob's delivery", 1_000).then(() => true, () => false);
    }, "bob's room to receive");
    const count = delivered.length;
    await control.trigger("agent:remind", key(room), { text: "for ada, unsubscribed" });
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(delivered.length, count);
    assert.equal(delivered.at(-1).content.text, "for bob");
  } finally {
    bridge.options.maxSubscriptions = 64;
  }
  model.replies.push(modelReply("back"));
  await say(runtime, room, "ada again");
  await eventually(async () => {
    const before = delivered.length;
    await control.trigger("agent:remind", key(room), { text: "for ada again" });
    return eventually(() => delivered.length > before, "ada's delivery", 1_000).then(() => true, () => false);
  }, "ada's room to receive again");
  assert.equal(delivered.at(-1).content.text, "for ada again");
});

test("fail closed: with gatewayd down, a message is refused; fail open: it goes through", async () => {
  const bridge = runtime.getService("gatewayd").bridge;
  await daemon.stop();
  try {
    bridge.options.failMode = "closed";
    model.replies.push(modelReply("not while closed"));
    const refused = await say(runtime, room, "anyone there?");
    assert.deepEqual(refused.replies, []);
    model.replies.length = 0;
    bridge.options.failMode = "open";
    model.replies.push(modelReply("still here"));
    const open = await say(runtime, room, "anyone there now?");
    assert.deepEqual(open.replies.map((r) => r.text), ["still here"]);
  } finally {
    bridge.options.failMode = "open";
    await daemon.start();
  }
  await eventually(() => bridge.client.connected, "the plugin to reconnect");
});

test("gatewayd restarted mid-conversation loses no accepted event", async () => {
  const bridge = runtime.getService("gatewayd").bridge;
  await eventually(() => bridge.client.connected, "the plugin to be connected");
  const before = seen().filter((r) => r.event === "agent:end").length;
  const runs = [];
  for (let i = 0; i < 6; i++) {
    if (i === 2) await daemon.stop(); // down for messages 2 and 3: their events wait
    if (i === 4) await daemon.start();
    model.replies.push(modelReply(`answer ${i}`));
    const { replies } = await say(runtime, room, `message ${i}`);
    assert.deepEqual(replies.map((r) => r.text), [`answer ${i}`]);
    runs.push(i);
  }
  await eventually(() => seen().filter((r) => r.event === "agent:end").length >= before + runs.length, "every run's agent:end", 30_000);
  for (const i of runs) {
    await eventually(
      () => seen().some((r) => r.event === "message:sent" && r.content === `answer ${i}` && r.success),
      `message:sent of answer ${i}`,
    );
  }
  await eventually(() => bridge.pendingPosts === 0, "every event to be accepted", 30_000);
});
