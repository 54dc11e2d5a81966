/**
 * Change sets: what a turn changed in the files (turn/changes), undoing it (turn/revert), and
 * moving the head with the files put back as they were (session/branch with restoreFiles). A
 * restore that would overwrite files a person changed since, or files another session's command
 * may have changed at the same time, names them and asks first.
 */

import { HISTORY_PAGE } from '../paging';
import { FileChange, Method, Restored, Session } from '../protocol';
import { overwriting, SessionCore } from './core';

export class ChangeSets {
  constructor(private readonly core: SessionCore) {}

  /** Move the head: the next turn follows turnId (null: starts over from nothing); with
   * `restoreFiles`, also put the files back as they were at `turnId`. */
  async branch(turnId: string | null, restoreFiles = false): Promise<Session> {
    const { core } = this;
    const current = core.requireSession();
    core.refuseIfRunning('branch');
    await core.ensureAttached();
    const session = await overwriting((force) =>
      core.client.request(Method.branch, {
        sessionId: current.sessionId,
        turnId,
        ...(restoreFiles ? { restoreFiles, force } : {}),
      }),
      core.client,
    );
    if (!session) {
      return current;
    }
    if (session.files) {
      core.log.info(`branch restored ${session.files.restored.length} file(s)`);
      delete session.files;
    }
    const { turns, nextCursor } = await core.client.request(Method.history, {
      sessionId: session.sessionId,
      limit: HISTORY_PAGE,
    });
    core.session = session;
    core.showHistory(turns, nextCursor);
    core.postReset();
    void core.links.fillSteps(turns);
    core.fireSession();
    core.log.info(`session ${session.sessionId} branched: head is now ${turnId ?? 'before the first turn'}`);
    return session;
  }

  /** What a turn changed in the files. */
  async changes(turnId: string): Promise<FileChange[]> {
    await this.core.ensureAttached();
    return (await this.core.client.request(Method.turnChanges, { turnId })).files;
  }

  /** Undo one turn's changes to the files; undefined when the user kept a conflicting file. */
  async revert(turnId: string): Promise<Restored | undefined> {
    const { core } = this;
    core.requireSession();
    core.refuseIfRunning('revert a turn');
    await core.ensureAttached();
    const result = await overwriting((force) => core.client.request(Method.revert, { turnId, force }), core.client);
    if (result) {
      core.log.info(`turn ${turnId} reverted: ${result.restored.length} file(s) put back`);
    }
    return result;
  }
}
