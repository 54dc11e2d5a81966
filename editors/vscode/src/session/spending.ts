/**
 * What the open session spends: its context against the model's window and its cost after each
 * step (session/usage), compacting its oldest turns into a summary (session/compact), and its
 * budget (session/budget).
 */

import { Budget, BudgetStatus, CompactResult, Method, UsageParams } from '../protocol';
import { spendText } from '../queue';
import type { SessionCore } from './core';

export class Spending {
  constructor(private readonly core: SessionCore) {}

  onUsage(p: UsageParams): void {
    const { core } = this;
    if (p.sessionId !== core.session?.sessionId) {
      return;
    }
    core.usage = p;
    for (const listener of core.usageListeners) {
      listener(p);
    }
  }

  /** Summarize the oldest turns of the session's branch (`session/compact`): from then on they
   * are sent as that summary; the transcript keeps them as they were. */
  async compact(): Promise<CompactResult> {
    const { core } = this;
    const session = core.requireSession();
    core.refuseIfRunning('compact the session');
    await core.ensureAttached();
    const result = await core.client.request(Method.compact, { sessionId: session.sessionId });
    core.log.info(
      result.compacted
        ? `session ${session.sessionId} compacted: the first ${result.turns} turn(s) now sent as a summary`
        : `session ${session.sessionId}: nothing to compact`,
    );
    return result;
  }

  /** What all the session's turns together may spend from now on (null: no budget). */
  async setBudget(budget: Budget | null): Promise<BudgetStatus> {
    const { core } = this;
    const session = core.requireSession();
    await core.ensureAttached();
    const status = await core.client.request(Method.budget, { sessionId: session.sessionId, budget });
    core.takeSpend(status);
    core.log.info(`budget of session ${session.sessionId}: ${spendText(status.budget, status.spent)}`);
    return status;
  }
}
