/**
 * What the daemon says while a turn runs, drawn into the turn: its text as it streams
 * (session/token) and what the model reasons (session/thought, folded), each step as it commits (session/step), and each tool call as it goes
 * (session/toolCall, session/toolOutput). A notification of the open session while no turn is
 * drawn running means another window started one: it is caught up with.
 */

import { argumentsLine } from '../approval';
import { StepParams, ThoughtParams, TokenParams, ToolCallParams, ToolOutputParams, TurnRef } from '../protocol';
import { addBlock, appendText, appendThoughtText, callChanged, callEnded, callPrinted, TranscriptTurn } from '../transcript';
import { excerpt, LiveTurn, SessionCore } from './core';

/** A committed step drawn into `turn`: its tool call's result on the call's block (a block
 * added when the call was not drawn live); false when the step has no tool call. */
export function drawStep(turn: TranscriptTurn, p: StepParams): boolean {
  if (!p.toolCall) {
    return false;
  }
  // a tool that ran, or one cancelled while it ran or waited for approval
  const result = p.result ?? (p.decision === 'cancelled' ? 'cancelled' : null);
  if (!callEnded(turn, p.toolCall.id, result)) {
    addBlock(turn, { kind: 'tool', step: p.step, name: p.toolCall.name, arguments: p.toolCall.arguments ?? {}, result });
  }
  return true;
}

export class Stream {
  constructor(private readonly core: SessionCore) {}

  /** The running turn `p` is about (it takes the turn's id from it); with `catchUp`, a
   * notification of a turn this window does not draw running catches up with it first. */
  private liveTurn(p: TurnRef, catchUp: boolean): LiveTurn | undefined {
    if (catchUp) {
      this.core.links.catchUpWith(p);
    }
    const live = this.core.liveFor(p);
    if (live) {
      live.turn.turnId ??= p.turnId;
    }
    return live;
  }

  onToken(p: TokenParams): void {
    const live = this.liveTurn(p, true);
    if (live) {
      appendText(live.turn, p.step, p.text);
      this.core.coalescer.mark(live.turn.key);
    }
  }

  /** What the model reasons streams folded under its step; a child's is not the parent's. */
  onThought(p: ThoughtParams): void {
    const live = this.liveTurn(p, false);
    if (live) {
      appendThoughtText(live.turn, p.step, p.text);
      this.core.coalescer.mark(live.turn.key);
    }
  }

  onStep(p: StepParams): void {
    const { core } = this;
    const live = this.liveTurn(p, true);
    if (!live) {
      return;
    }
    if (p.toolCall && drawStep(live.turn, p)) {
      core.log.info(`step ${p.step}: ${p.toolCall.name} ${argumentsLine(p.toolCall.arguments ?? {})} -> ${excerpt(p.result ?? '')}`);
      core.coalescer.mark(live.turn.key);
    }
  }

  onToolCall(p: ToolCallParams): void {
    const live = this.liveTurn(p, false);
    if (live) {
      callChanged(live.turn, p);
      this.core.log.info(`step ${p.step}: ${p.tool} ${p.status}`);
      this.core.coalescer.mark(live.turn.key);
    }
  }

  onToolOutput(p: ToolOutputParams): void {
    const live = this.core.liveFor(p);
    if (live && callPrinted(live.turn, p.callId, p.text)) {
      this.core.coalescer.mark(live.turn.key);
    }
  }
}
