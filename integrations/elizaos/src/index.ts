/**
 * `@gatewayd/plugin-elizaos`: an elizaOS 1.7 agent's events go to gatewayd's hooks, and the
 * hooks' decisions are obeyed (docs/clients.md).
 *
 * ```ts
 * import { gatewaydPlugin } from "@gatewayd/plugin-elizaos";
 * const runtime = new AgentRuntime({ character, plugins: [sqlPlugin, gatewaydPlugin({ failMode: "closed" })] });
 * ```
 *
 * or, by name in a character file: `"plugins": ["@gatewayd/plugin-elizaos"]`, with the
 * settings `GATEWAYD_SOCKET`, `GATEWAYD_FAIL_MODE`, ... (`options.ts`).
 */
import type { Plugin } from "@elizaos/core";

import { events } from "./mapping.js";
import { gatewaydContext } from "./provider.js";
import type { GatewaydPluginOptions } from "./options.js";
import { GatewaydService } from "./service.js";

export { Bridge } from "./bridge.js";
export { EVENT_MAP } from "./mapping.js";
export type { FailMode, GatewaydPluginOptions } from "./options.js";
export { GatewaydService } from "./service.js";

/** The plugin, with `options` over the runtime's settings. */
export function gatewaydPlugin(options: GatewaydPluginOptions = {}): Plugin {
  const service = class extends GatewaydService {
    static override options = options;
  };
  return {
    name: "gatewayd",
    description: "Runs the agent's messages, replies and actions through gatewayd's hooks",
    services: [service],
    providers: [gatewaydContext],
    events,
  };
}

/** The plugin with the runtime's settings alone (for `"plugins": ["@gatewayd/plugin-elizaos"]`). */
export const gatewaydElizaPlugin: Plugin = gatewaydPlugin();
export default gatewaydElizaPlugin;
