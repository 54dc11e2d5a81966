/**
 * Pins: a pinned turn is sent to the model verbatim after compaction, and the prompt cache's
 * breakpoint sits after the last pinned one (session/pin, session/unpin). The turn tree marks
 * pinned turns and pins or unpins from its context menu.
 */

import type { Session } from './protocol';
import { Method } from './protocol';
import type { Requester } from './protocolTypes';

export type { Requester } from './protocolTypes';

/** Pin or unpin a turn of the session; the answer is the Session, with `pinned`. */
export function setPinned(client: Requester, sessionId: string, turnId: string, pinned: boolean): Promise<Session> {
  return client.request(pinned ? Method.pin : Method.unpin, { sessionId, turnId });
}

/** Whether a turn is pinned, as the session says. */
export function isPinned(session: Pick<Session, 'pinned'> | undefined, turnId: string): boolean {
  return session?.pinned?.includes(turnId) ?? false;
}
