/**
 * `GatewaydService`: the plugin's service. Started by the runtime once it is initialized (a
 * plugin's `init()` runs before `runtime.messageService` exists), it connects to gatewayd and
 * wraps the message service and the actions (`wrap.ts`). Await
 * `runtime.getServiceLoadPromise("gatewayd")` before the first message to be sure it is in place.
 */
import { Service, type IAgentRuntime } from "@elizaos/core";

import { Bridge } from "./bridge.js";
import { resolveOptions, type GatewaydPluginOptions } from "./options.js";
import { wrapActions, wrapMessageService } from "./wrap.js";

export class GatewaydService extends Service {
  static override serviceType = "gatewayd";
  /** Set by `gatewaydPlugin(options)` on its own subclass. */
  static options: GatewaydPluginOptions = {};
  capabilityDescription = "Posts the runtime's events to gatewayd's hooks and obeys their decisions";
  bridge: Bridge | undefined;

  static override async start(runtime: IAgentRuntime): Promise<GatewaydService> {
    const service = new this(runtime);
    const bridge = new Bridge(runtime, resolveOptions(runtime, this.options));
    service.bridge = bridge;
    wrapMessageService(runtime, bridge);
    wrapActions(runtime, bridge);
    await bridge.start();
    return service;
  }

  static override async stop(runtime: IAgentRuntime): Promise<void> {
    const service = runtime.getService("gatewayd") as GatewaydService | null;
    await service?.stop();
  }

  async stop(): Promise<void> {
    await this.bridge?.stop();
  }
}
