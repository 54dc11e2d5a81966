/**
 * Getting a session past a command killed mid-run: the keep / revert question is asked once at a
 * time per turn, and the answer is sent (session/recover), asking before a revert overwrites
 * files a person changed since. The question's words are ../recovery.ts's.
 */

import { messageOf } from '../errors';
import { Method, PendingRecovery, RecoverResult, RecoveryDecision } from '../protocol';
import { askRecovery, commandText } from '../recovery';
import { overwriting, SessionCore } from './core';

export class Recovery {
  /** The turns whose recovery question is being asked, so it is asked once at a time. */
  private readonly asking = new Set<string>();

  constructor(private readonly core: SessionCore) {}

  /** Answer the pending decision about a command killed mid-run: keep the files, or revert the
   * turn's changes (asking before overwriting files a person changed since). */
  async recover(decision: RecoveryDecision): Promise<RecoverResult | undefined> {
    const { core } = this;
    const current = core.requireSession();
    await core.ensureAttached();
    const result = await overwriting((force) =>
      core.client.request(Method.recover, {
        sessionId: current.sessionId,
        decision,
        ...(force ? { force } : {}),
      }),
      core.client,
    );
    if (!result) {
      return undefined;
    }
    const files = result.files;
    delete result.files;
    if (core.session?.sessionId === result.sessionId) {
      core.session = result;
      core.fireSession();
    }
    const text =
      decision === 'keep'
        ? 'Kept the files as the killed command left them; the session goes on.'
        : `Reverted the turn's changes${files ? `: ${files.restored.length} file(s) put back` : ''}; the session goes on.`;
    core.notice('info', text);
    core.log.info(`session ${current.sessionId} recovered: ${decision}`);
    return { ...result, ...(files ? { files } : {}) };
  }

  /** Show the keep / revert choice for a command killed mid-run (once at a time per turn). */
  offerRecovery(pending: PendingRecovery | undefined): void {
    const { core } = this;
    if (!pending || this.asking.has(pending.turnId)) {
      return;
    }
    this.asking.add(pending.turnId);
    core.notice('error', `A cancelled command was killed mid-run: ${commandText(pending)}. Keep the files or revert the turn?`);
    core.log.warn(`session ${core.session?.sessionId} needs a decision: ${commandText(pending)} was killed mid-run`);
    void (async () => {
      try {
        const decision = await askRecovery(pending);
        if (decision) {
          await this.recover(decision);
        }
      } catch (error) {
        void core.showError(messageOf(error), error);
      } finally {
        this.asking.delete(pending.turnId);
      }
    })();
  }
}
