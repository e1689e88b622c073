// The floor of a Python <-> Node call: a Node process that answers each JSON line it reads on a
// Unix socket (inherited as fd N: `node pipe_echo.mjs N`) with a small JSON line of its own, as
// parsed and built objects (JSON.parse, JSON.stringify), nothing else. bench/nodepipe.py is the
// Python side; the daemon's Node worker does the same trip plus the hook's call.

import net from "node:net";

const channel = new net.Socket({ fd: Number(process.argv[2]), readable: true, writable: true });
let pending = "";
channel.setEncoding("utf8");
channel.on("data", (chunk) => {
  pending += chunk;
  let end;
  while ((end = pending.indexOf("\n")) >= 0) {
    const message = JSON.parse(pending.slice(0, end));
    pending = pending.slice(end + 1);
    channel.write(`${JSON.stringify({ id: message.id, ok: true, messages: [] })}\n`);
  }
});
channel.on("end", () => process.exit(0));
channel.on("error", () => process.exit(1));
