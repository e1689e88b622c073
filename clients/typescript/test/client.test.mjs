// The client against a real `gatewayd run`: every op, ids, the window, timeouts, errors,
// subscribe, and a daemon restarted under a connected client.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import {
  DECISION_EVENTS,
  GatewaydClient,
  ProtocolError,
  RequestError,
  TimeoutError,
} from "../dist/index.js";
import { Daemon, eventually, makeState, pythonHook } from "./support/daemon.mjs";

const hooks = {
  echo: pythonHook(["agent:echo"], '    event.messages.append(str(event.context.get("n")))'),
  guard: pythonHook(
    ["agent:before_tool_call"],
    [
      '    if event.context.get("toolName") == "rm":',
      '        return {"block": True, "reason": "rm is not allowed"}',
      '    return {"params": {**(event.context.get("params") or {}), "checked": True}}',
    ].join("\n"),
  ),
  greet: pythonHook(["command:hello"], '    event.messages.append(f"Hello, {event.context.get(\'args\')}!")'),
  slow: pythonHook(
    ["agent:slow"],
    '    await asyncio.sleep(float(event.context.get("s", 1)))\n    event.messages.append("slept")',
  ),
  push: pythonHook(
    ["command:push"],
    '    await ctx.gateway.send(event.session_key, event.context.get("args") or "pushed")',
  ),
};

let daemon;
let client;

before(async () => {
  daemon = await new Daemon(makeState(hooks)).start();
  client = await GatewaydClient.connect({ socket: daemon.socket });
});

after(async () => {
  client?.close();
  await daemon?.stop();
  daemon?.cleanup();
});

test("hello: the daemon says who it is, what it serves and its window", () => {
  const hello = client.server;
  assert.equal(hello.daemon.name, "gatewayd");
  assert.ok(hello.ops.includes("trigger") && hello.ops.includes("subscribe"));
  assert.ok(hello.events.includes("message:received"));
  assert.ok(hello.limits.maxInFlight >= 1);
  assert.equal(hello.limits.maxLineBytes, 1048576);
  // The schema the client was generated from names the same decision events as the daemon.
  assert.deepEqual([...DECISION_EVENTS].sort(), [...hello.decisions].sort());
});

test("ping, status, hooks and reload are typed replies", async () => {
  await client.ping();
  const { status } = await client.status();
  assert.equal(status.state, "running");
  assert.equal(typeof status.pid, "number");
  const listed = await client.hooks();
  assert.deepEqual(
    listed.hooks.filter((h) => Object.keys(hooks).includes(h.name)).map((h) => [h.name, h.status]).sort(),
    Object.keys(hooks).sort().map((n) => [n, "ready"]),
  );
  const reload = await client.reload();
  assert.equal(reload.outcome, "ok");
  assert.ok(reload.result.registered >= Object.keys(hooks).length);
});

test("message: a Python hook's reply comes back", async () => {
  const reply = await client.message("agent:main:ts", "/hello Ada");
  assert.deepEqual(reply.messages, ["Hello, Ada!"]);
  assert.equal(reply.command, "hello");
});

test("a decision event's merged result is typed and obeyed", async () => {
  const blocked = await client.decide("agent:before_tool_call", "agent:main:ts", { toolName: "rm", params: {} });
  assert.equal(blocked.result.block, true);
  assert.equal(blocked.result.reason, "rm is not allowed");
  const changed = await client.decide("agent:before_tool_call", "agent:main:ts", {
    toolName: "ls",
    params: { path: "/tmp" },
  });
  assert.deepEqual(changed.result, { params: { path: "/tmp", checked: true } });
  // No handler: the result is there, empty.
  const none = await client.decide("message:sending", "agent:main:ts", { content: "hi" });
  assert.deepEqual(none.result, {});
});

test("trigger without waiting is accepted, and queued", async () => {
  const reply = await client.trigger("agent:echo", "agent:main:ts", { n: 1 }, { wait: false });
  assert.equal(reply.queued, true);
});

test("many requests in flight on one connection: each reply reaches its own call", async () => {
  const n = 200;
  const replies = await Promise.all(
    Array.from({ length: n }, (_, i) => client.trigger("agent:echo", `agent:main:s${i % 7}`, { n: i })),
  );
  replies.forEach((reply, i) => assert.deepEqual(reply.messages, [String(i)]));
  const queued = await Promise.all(
    Array.from({ length: 500 }, (_, i) => client.trigger("agent:echo", "agent:main:bulk", { n: i }, { wait: false })),
  );
  assert.ok(queued.every((r) => r.queued === true));
});

test("the daemon's refusal is a RequestError with its code and message", async () => {
  await assert.rejects(client.trigger("agnet:x", "agent:main:ts"), (err) => {
    assert.ok(err instanceof RequestError);
    assert.equal(err.code, "unknown_event");
    assert.match(err.message, /unknown event type 'agnet'/);
    return true;
  });
  await assert.rejects(client.message("", "hi"), { code: "bad_request" });
  await assert.rejects(client.request("nope", {}), { code: "unknown_op" });
  await client.ping(); // the connection carries on
});

test("a call past its timeout fails alone; the late reply is dropped", async () => {
  await assert.rejects(client.trigger("agent:slow", "agent:main:slow", { s: 1 }, { timeoutMs: 150 }), (err) => {
    assert.ok(err instanceof TimeoutError);
    assert.equal(err.code, "timeout");
    assert.match(err.message, /'trigger' within 150 ms/);
    return true;
  });
  const reply = await client.trigger("agent:echo", "agent:main:ts", { n: "after" });
  assert.deepEqual(reply.messages, ["after"]);
});

test("the window bounds the calls in flight; the rest wait in order", async () => {
  const narrow = await GatewaydClient.connect({ socket: daemon.socket, maxInFlight: 2 });
  try {
    const calls = Array.from({ length: 12 }, (_, i) => narrow.trigger("agent:echo", "agent:main:w", { n: i }));
    assert.equal(narrow.backlog, 10);
    const replies = await Promise.all(calls);
    replies.forEach((reply, i) => assert.deepEqual(reply.messages, [String(i)]));
    assert.equal(narrow.backlog, 0);
  } finally {
    narrow.close();
  }
});

test("subscribe: what a hook sends arrives on the iterator", async () => {
  const sub = await client.subscribe("agent:main:sub");
  try {
    await client.message("agent:main:sub", "/push first");
    await client.message("agent:main:sub", "/push second");
    const got = [];
    for await (const message of sub) {
      got.push(message);
      if (got.length === 2) break;
    }
    assert.deepEqual(
      got.map((m) => [m.sessionKey, m.content]),
      [
        ["agent:main:sub", "first"],
        ["agent:main:sub", "second"],
      ],
    );
  } finally {
    sub.close();
  }
});

test("a restarted daemon: calls in flight fail, later calls wait for the reconnect", async () => {
  const own = new Daemon(makeState(hooks));
  await own.start();
  const c = await GatewaydClient.connect({ socket: own.socket, reconnect: { initialDelayMs: 20, maxDelayMs: 200 } });
  const sub = await c.subscribe("agent:main:r");
  try {
    const connects = [];
    c.on("connect", (hello) => connects.push(hello));
    // A crash: the call in flight fails, saying it may or may not have been done.
    const lost = assert.rejects(c.trigger("agent:slow", "agent:main:r", { s: 5 }), {
      code: "connection_lost",
      message: /with 'trigger' in flight.*may or may not have been done/,
    });
    await new Promise((r) => setTimeout(r, 100));
    await own.kill();
    await lost;
    // A call made while the daemon is down waits for the reconnect.
    const waiting = c.trigger("agent:echo", "agent:main:r", { n: "after restart" }, { timeoutMs: 30_000 });
    await own.start();
    assert.deepEqual((await waiting).messages, ["after restart"]);
    assert.equal(connects.length, 1);
    // The subscription came back by itself.
    await eventually(async () => {
      await c.message("agent:main:r", "/push again");
      return sub.active;
    }, "the subscription to come back");
    const { value } = await sub.next();
    assert.equal(value.content, "again");
  } finally {
    sub.close();
    c.close();
    await own.stop();
    own.cleanup();
  }
});

test("no daemon: connect says so, in the CLI's words", async () => {
  const state = makeState();
  const c = new GatewaydClient({ socket: `${state}/run/none.sock`, reconnect: false });
  await assert.rejects(c.connect(), { code: "not_running", message: `gatewayd is not running (no socket at ${state}/run/none.sock)` });
  await assert.rejects(c.ping(), { code: "not_running" });
  c.close();
  await assert.rejects(c.ping(), { code: "closed" });
});

test("hello's protocol range decides: the error says what to upgrade", async () => {
  // A daemon of another protocol cannot run here: a socket answers hello as one would.
  const { createServer } = await import("node:net");
  const state = makeState();
  for (const [hello, advice] of [
    [{ protocol: 3, minProtocol: 2 }, /upgrade the client \(npm install @gatewayd\/client@latest\)/],
    [{ protocol: 0, minProtocol: 0 }, /upgrade gatewayd \(pip install -U gatewayd\)/],
  ]) {
    const path = `${state}/p${hello.protocol}.sock`;
    const server = createServer((sock) =>
      sock.on("data", (line) => {
        const { id } = JSON.parse(String(line).split("\n")[0]);
        const reply = { id, ok: true, ...hello, daemon: { name: "gatewayd", version: "9.9" }, ops: [], events: [], limits: { maxLineBytes: 1048576, maxInFlight: 8 } };
        sock.write(JSON.stringify(reply) + "\n");
      }),
    );
    await new Promise((r) => server.listen(path, r));
    const c = new GatewaydClient({ socket: path });
    try {
      await assert.rejects(c.connect(), (err) => err instanceof ProtocolError && advice.test(err.message));
      await assert.rejects(c.ping(), { code: "protocol" }); // no retry mends it
      // An upgrade does: the same client connects to a daemon that speaks its protocol.
      await new Promise((r) => server.close(r));
      hello.protocol = 1;
      hello.minProtocol = 1;
      await new Promise((r) => server.listen(path, r));
      assert.equal((await c.connect()).protocol, 1);
      assert.equal(c.connected, true);
    } finally {
      c.close();
      server.close();
    }
  }
});
