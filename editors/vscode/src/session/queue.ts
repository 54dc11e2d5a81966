/**
 * Prompts queued behind the running turn: queueing one (session/turn with queue), dropping one
 * (session/unqueue), and the queue as session/queued and session/dequeued tell every window
 * following the session.
 */

import { DaemonError, messageOf } from '../errors';
import { DequeuedParams, ErrorCode, Method, Queued } from '../protocol';
import { promptParams } from '../slashCommand';
import { excerpt, SessionCore } from './core';

export class Queueing {
  constructor(private readonly core: SessionCore) {}

  /** Queue a prompt behind the running turn (from any window): it runs when that turn and the
   * prompts queued before it have run, and is drawn here as it runs. Errors are shown. A
   * `/name args` prompt queues the custom command `name`. */
  async queuePrompt(prompt: string): Promise<void> {
    const { core } = this;
    const session = core.requireSession();
    await core.ensureAttached();
    core.log.info(`queueing a prompt: ${excerpt(prompt)}`);
    try {
      const result = await core.client.request(Method.turn, {
        sessionId: session.sessionId,
        ...promptParams(prompt),
        queue: true,
      });
      core.takeSpend(result);
      core.log.info(`queued turn ${result.turnId} ended ${result.outcome}`);
      if (!core.live && !core.transcript.some((t) => t.turnId === result.turnId)) {
        await core.links.catchUp(session.sessionId); // it ran before this window could follow it
      }
      if (result.outcome === 'error' || result.outcome === 'exhausted') {
        void core.showError(`trellisd: the queued turn ended ${result.outcome}: ${result.error ?? 'no reason given'}`);
      }
    } catch (error) {
      if (error instanceof DaemonError && error.code === ErrorCode.requestCancelled) {
        core.notice('info', `Not run: ${messageOf(error)}`);
        core.log.info(`queued prompt not run: ${messageOf(error)}`);
      } else {
        void core.showError(messageOf(error), error);
      }
    }
  }

  /** Drop a queued prompt: it never runs. */
  async unqueue(queueId: string): Promise<void> {
    const { core } = this;
    const session = core.requireSession();
    await core.client.request(Method.unqueue, { sessionId: session.sessionId, queueId });
    core.queue.remove({ queueId });
    core.postQueue();
    core.log.info(`dropped queued prompt ${queueId}`);
  }

  onQueued(p: Queued): void {
    const { core } = this;
    if (core.session?.sessionId !== p.sessionId) {
      return;
    }
    core.queue.add(p);
    core.log.info(`prompt ${p.queueId} queued at ${p.position}: ${excerpt(p.prompt)}`);
    core.postQueue();
  }

  onDequeued(p: DequeuedParams): void {
    const { core } = this;
    if (core.session?.sessionId !== p.sessionId) {
      return;
    }
    core.queue.remove(p);
    core.log.info(`prompt ${p.queueId} left the queue: ${p.reason}`);
    core.postQueue();
  }
}
