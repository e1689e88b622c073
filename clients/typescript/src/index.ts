/**
 * `@gatewayd/client`: the client of gatewayd's control socket (docs/clients.md).
 *
 * ```ts
 * import { GatewaydClient } from "@gatewayd/client";
 * const client = await GatewaydClient.connect();          // the socket the CLI would use
 * const { result } = await client.decide("message:received", "agent:main:main", { content: "hi" });
 * if (result.block) console.log("blocked:", result.reason);
 * ```
 */
export { GatewaydClient, CLIENT_NAME, CLIENT_VERSION } from "./client.js";
export type { CallOptions, ClientOptions, MessageOptions, ReconnectOptions, TriggerOptions } from "./client.js";
export { ConnectionError, GatewaydError, ProtocolError, RequestError, TimeoutError } from "./errors.js";
export * from "./events.js";
export * from "./replies.js";
export { CONFIG_ENV, SOCKET_ENV, STATE_ENV, findSocket, stateDir } from "./socketpath.js";
export type { SocketOptions } from "./socketpath.js";
export { Subscription } from "./subscription.js";
