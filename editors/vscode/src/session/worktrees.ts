/**
 * A session's own git worktree (session/open's worktree): merging its branch into the branch it
 * started from (session/worktree/merge), and discarding it with what it holds
 * (session/worktree/discard). Both are refused while a turn of the session runs.
 */

import { DaemonError, TrellisError } from '../errors';
import { ErrorCode, Merged, Method, Session, Worktree } from '../protocol';
import type { SessionCore } from './core';

/** A merge the daemon refused with the files in the way (`data.paths`): nothing was merged. */
export class MergeConflict extends TrellisError {
  constructor(
    message: string,
    readonly paths: string[],
  ) {
    super(message);
  }
}

export class Worktrees {
  constructor(private readonly core: SessionCore) {}

  /** The open session, which must have a worktree; `what` is what the user asked for. */
  private worktreeSession(what: string): Session & { worktree: NonNullable<Session['worktree']> } {
    const session = this.core.requireSession();
    const { worktree } = session;
    if (!worktree) {
      throw new TrellisError(`This session works in ${session.root} itself, not in a worktree of its own: there is no worktree to ${what}.`);
    }
    this.core.refuseIfRunning(`${what} the worktree`);
    return { ...session, worktree };
  }

  /** Merge the session's branch into its base; a conflict throws MergeConflict with the paths. */
  async merge(): Promise<Merged> {
    const { core } = this;
    const session = this.worktreeSession('merge');
    await core.ensureAttached();
    let merged: Merged;
    try {
      merged = await core.client.request(Method.worktreeMerge, { sessionId: session.sessionId });
    } catch (error) {
      const paths = error instanceof DaemonError && error.code === ErrorCode.conflict ? (error.data as { paths?: unknown })?.paths : undefined;
      if (error instanceof DaemonError && Array.isArray(paths)) {
        // the daemon's words name the files and say that nothing was merged
        const said = error.message.charAt(0).toUpperCase() + error.message.slice(1);
        throw new MergeConflict(`${said}.`, paths.map(String));
      }
      throw error;
    }
    core.log.info(
      `session ${session.sessionId}: ${session.worktree.branch} merged into ${merged.base} at ${merged.commit}: ${merged.paths.length} file(s)` +
        (merged.checkoutUpdated ? ', written into the checkout' : ''),
    );
    return merged;
  }

  /** Remove the session's worktree and its branch, with what was not merged; the session stays.
   * `confirm` is asked first (once nothing refuses it); undefined when it said no. */
  async discard(confirm: (worktree: Worktree) => Promise<boolean> = async () => true): Promise<Session | undefined> {
    const { core } = this;
    const session = this.worktreeSession('discard');
    if (!(await confirm(session.worktree))) {
      return undefined;
    }
    core.refuseIfRunning('discard the worktree');
    await core.ensureAttached();
    const discarded = await core.client.request(Method.worktreeDiscard, { sessionId: session.sessionId });
    if (core.session?.sessionId === session.sessionId) {
      core.session = { ...core.session, ...discarded };
      delete core.session.worktree;
      core.postHeader(core.session);
      core.fireSession();
    }
    core.log.info(`session ${session.sessionId}: worktree ${session.worktree.path} and branch ${session.worktree.branch} discarded`);
    return discarded;
  }
}
