/**
 * `Turns`: what one run of the runtime needs from gatewayd between the moments the plugin sees:
 * the message's text (known when the message service is entered, needed as `prompt` when
 * `RUN_STARTED` asks `agent:before_start`) and what its hooks returned to prepend (needed when
 * the runtime composes the prompt, by the `GATEWAYD_CONTEXT` provider). Keyed by message id,
 * dropped at `RUN_ENDED`, and bounded: a run that never ends (a runtime that throws) cannot grow
 * it past `MAX_TURNS`.
 */
const MAX_TURNS = 1_000;

interface Turn {
  prompt?: string;
  prepend?: string;
}

export class Turns {
  private readonly turns = new Map<string, Turn>();

  private turn(messageId: string): Turn {
    let turn = this.turns.get(messageId);
    if (turn === undefined) {
      if (this.turns.size >= MAX_TURNS) this.turns.delete(this.turns.keys().next().value as string);
      turn = {};
      this.turns.set(messageId, turn);
    }
    return turn;
  }

  /** The inbound text of message `messageId`, as the runtime will see it. */
  begin(messageId: string, prompt: string): void {
    this.turn(messageId).prompt = prompt;
  }

  prompt(messageId: string): string | undefined {
    return this.turns.get(messageId)?.prompt;
  }

  /** What `agent:before_start` hooks returned to prepend for this message's run. */
  prepend(messageId: string, text: string): void {
    this.turn(messageId).prepend = text;
  }

  prepended(messageId: string): string | undefined {
    return this.turns.get(messageId)?.prepend;
  }

  end(messageId: string): void {
    this.turns.delete(messageId);
  }
}
