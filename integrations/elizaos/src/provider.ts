/**
 * `GATEWAYD_CONTEXT`: the provider that puts into the prompt what gatewayd's `agent:before_start`
 * hooks returned as `prependContext` for the message being answered (asked at `RUN_STARTED`,
 * `mapping.ts`). elizaOS builds its prompt from providers; this one adds nothing when no hook
 * returned anything.
 */
import type { IAgentRuntime, Memory, Provider, ProviderResult } from "@elizaos/core";

import type { Bridge } from "./bridge.js";

export const gatewaydContext: Provider = {
  name: "GATEWAYD_CONTEXT",
  description: "Context gatewayd's agent:before_start hooks prepend to this turn",
  position: -100,
  get: async (runtime: IAgentRuntime, message: Memory): Promise<ProviderResult> => {
    const service = runtime.getService("gatewayd") as { bridge?: Bridge } | null;
    const text = message.id ? service?.bridge?.turns.prepended(message.id) : undefined;
    return text ? { text, values: { gatewaydContext: text } } : { text: "" };
  },
};
