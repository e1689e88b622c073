#!/usr/bin/env node
// The TypeScript client under load, for the benchmarks (bench/ runs it beside a raw-socket
// Python client, in the same run). Prints one JSON line:
//   {"mode", "count", "seconds", "rate", "p50_us", "p99_us"}
//
//   node clients/typescript/bench/driver.mjs --socket PATH --mode pipeline --count 20000
//     N `trigger` with `wait: false` fired at once on one connection (the client's window and
//     write batching do the pipelining); the rate from the first call to the last reply, and no
//     latency (as bench/rawsocket.py: timing each call would be work the baseline does not do).
//   node clients/typescript/bench/driver.mjs --socket PATH --mode roundtrip --count 2000
//     N `message` ops one after another (after 50 untimed ones); latency per op.
// The defaults (session, event, warm-up) are bench/rawsocket.py's, the raw Python baseline.
// Needs the client built (`npm run build -w clients/typescript`).
import { performance } from "node:perf_hooks";
import { parseArgs } from "node:util";

import { GatewaydClient } from "../dist/index.js";

const { values } = parseArgs({
  options: {
    socket: { type: "string" },
    mode: { type: "string", default: "pipeline" },
    count: { type: "string", default: "20000" },
    session: { type: "string", default: "agent:main:bench-connect" },
    event: { type: "string", default: "command:work" },
    text: { type: "string", default: "hello" },
  },
});
const count = Number(values.count);
if (!Number.isInteger(count) || count < 1) throw new Error(`--count must be a positive integer, got ${values.count}`);
if (values.mode !== "pipeline" && values.mode !== "roundtrip") {
  throw new Error(`--mode must be pipeline or roundtrip, got ${values.mode}`);
}

const client = await GatewaydClient.connect({ socket: values.socket, reconnect: false, timeoutMs: 600_000 });
const latencies = new Float64Array(count);
let seconds;
if (values.mode === "pipeline") {
  const context = {};
  const options = { wait: false };
  let done = 0;
  const t0 = performance.now();
  await new Promise((resolve, reject) => {
    const answered = () => {
      if (++done === count) resolve();
    };
    for (let i = 0; i < count; i++) client.trigger(values.event, values.session, context, options).then(answered, reject);
  });
  seconds = (performance.now() - t0) / 1000;
} else {
  for (let i = 0; i < 50; i++) await client.message(values.session, values.text); // warm-up, untimed
  const t0 = performance.now();
  for (let i = 0; i < count; i++) {
    const start = performance.now();
    await client.message(values.session, values.text);
    latencies[i] = performance.now() - start;
  }
  seconds = (performance.now() - t0) / 1000;
}
client.close();
latencies.sort();
const pct = (p) => (values.mode === "pipeline" ? null : Math.round(latencies[Math.min(count - 1, Math.floor(p * count))] * 1000));
console.log(
  JSON.stringify({
    mode: values.mode,
    count,
    seconds: Number(seconds.toFixed(4)),
    rate: Math.round(count / seconds),
    p50_us: pct(0.5),
    p99_us: pct(0.99),
  }),
);
