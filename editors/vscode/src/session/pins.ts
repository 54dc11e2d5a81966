/**
 * Pinning a turn of the open session (sent verbatim after compaction) or unpinning it; the
 * session's answer says which turns are pinned, and the turn tree draws them.
 */

import { setPinned } from '../pins';
import { Session } from '../protocol';
import type { SessionCore } from './core';

export async function pin(core: SessionCore, turnId: string, pinned: boolean): Promise<Session> {
  const current = core.requireSession();
  await core.ensureAttached();
  const session = await setPinned(core.client, current.sessionId, turnId, pinned);
  if (core.session?.sessionId === session.sessionId) {
    core.session.pinned = session.pinned ?? [];
    core.fireSession();
  }
  core.log.info(`turn ${turnId} ${pinned ? 'pinned' : 'unpinned'}`);
  return session;
}
