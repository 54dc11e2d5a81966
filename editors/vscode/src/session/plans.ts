/**
 * Plans: session/plan drawn as it comes (the live spot, and the mark on its turn in the
 * transcript), whichever window runs the turn; the planned turns of the transcript, for **Run
 * this plan**.
 */

import { LivePlan, turnName } from '../plan';
import type { PlanParams } from '../protocol';
import type { TranscriptTurn } from '../transcript';
import type { SessionCore } from './core';

export class Plans {
  constructor(private readonly core: SessionCore) {}

  /** session/plan: a turn of the session replaced its plan. */
  onPlan(p: PlanParams): void {
    const { core } = this;
    // a turn another window started is drawn by catching up with it, then followed
    core.links.catchUpWith(p);
    if (core.session?.sessionId !== p.sessionId) {
      return;
    }
    const live = core.liveFor(p);
    if (live) {
      live.turn.turnId ??= p.turnId;
    }
    const turn = core.transcript.find((t) => t.turnId === p.turnId) ?? live?.turn;
    const plan = { step: p.step, entries: p.entries };
    if (turn) {
      turn.plan = plan;
      core.coalescer.mark(turn.key);
    }
    const done = p.entries.filter((e) => e.status === 'completed').length;
    core.log.info(`turn ${p.turnId} plan at step ${p.step}: ${done} of ${p.entries.length} done`);
    core.setPlan({ sessionId: p.sessionId, turnId: p.turnId, name: turn ? turnName(turn.prompt) : undefined, plan });
  }

  /** The planned turns drawn in the transcript, newest first. */
  planned(): TranscriptTurn[] {
    return this.core.transcript.filter((t) => t.plan && t.turnId && t.outcome !== 'running').reverse();
  }

  /** The plan in the live spot, if it is the open session's. */
  get live(): LivePlan | undefined {
    const plan = this.core.plan;
    return plan && plan.sessionId === this.core.session?.sessionId ? plan : undefined;
  }
}
