// A real elizaOS AgentRuntime, offline: @elizaos/plugin-sql on embedded PGlite in a temp dir, and
// a stand-in model registered as a plugin's `models` (no LLM is called: each TEXT_LARGE call
// answers with the next reply the test queued, in core's XML reply format).
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

import { AgentRuntime, ChannelType, ModelType, stringToUuid } from "@elizaos/core";
import sqlPlugin from "@elizaos/plugin-sql";

/** Core's reply format: `actions` is REPLY for a plain answer, or an action's name. */
export function modelReply(text, actions = "REPLY") {
  return `<response><thought>stand-in</thought><actions>${actions}</actions><providers></providers><text>${text}</text></response>`;
}

export class StandInModel {
  constructor() {
    this.replies = [];
    this.prompts = [];
  }

  plugin(actions) {
    return {
      name: "stand-in-model",
      description: "canned model output for tests",
      priority: 1000,
      models: {
        [ModelType.TEXT_SMALL]: async () => "<response><action>RESPOND</action></response>",
        [ModelType.TEXT_LARGE]: async (_rt, params) => {
          this.prompts.push(params.prompt);
          return this.replies.shift() ?? modelReply("(no reply queued)");
        },
        [ModelType.TEXT_EMBEDDING]: async () => new Array(384).fill(0.01),
      },
      actions,
      // What a transport's message looks like to the model (plugin-bootstrap's RECENT_MESSAGES
      // does this in a full agent): the prompt shows the text the runtime has for the message.
      providers: [
        {
          name: "CURRENT_MESSAGE",
          description: "the message being answered",
          get: async (_rt, message) => ({ text: `Current message: ${message.content.text}` }),
        },
      ],
    };
  }
}

/** A runtime with `plugins` (after plugin-sql and the stand-in model), initialized. */
export async function startRuntime({ plugins, actions = [], settings = {} }) {
  const dataDir = mkdtempSync(join(tmpdir(), "eliza-pglite-"));
  const model = new StandInModel();
  const runtime = new AgentRuntime({
    character: {
      name: "Gwen",
      bio: ["a test agent"],
      settings: { PGLITE_DATA_DIR: dataDir, ...settings },
    },
    plugins: [model.plugin(actions), ...plugins],
  });
  // initialize() looks the agent up before it migrates: migrate first on a fresh database.
  await runtime.registerPlugin(sqlPlugin);
  await runtime.runPluginMigrations();
  await runtime.initialize({ skipMigrations: true });
  return { runtime, model, dataDir };
}

/** A DM room with one user, as a transport would set it up. */
export async function openRoom(runtime, name, source = "test") {
  const roomId = stringToUuid(`room-${name}-${runtime.agentId}`);
  const entityId = stringToUuid(`user-${name}`);
  const worldId = stringToUuid(`world-${name}`);
  await runtime.ensureConnection({
    entityId,
    roomId,
    worldId,
    userName: name,
    name,
    source,
    type: ChannelType.DM,
    channelId: `chan-${name}`,
  });
  return { roomId, entityId, worldId, source };
}

/** Send `text` into `room` through the runtime's message service; the replies it delivered. */
export async function say(runtime, room, text) {
  const replies = [];
  const result = await runtime.messageService.handleMessage(
    runtime,
    {
      id: crypto.randomUUID(),
      entityId: room.entityId,
      agentId: runtime.agentId,
      roomId: room.roomId,
      worldId: room.worldId,
      content: { text, source: room.source, channelType: ChannelType.DM },
      createdAt: Date.now(),
    },
    async (content) => {
      replies.push(content);
      return [];
    },
  );
  return { replies, result };
}
