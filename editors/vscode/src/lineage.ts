/**
 * Where a session came from, in words: "forked from “fix the parser” at turn 3". The origin's
 * title and the turn's place on its path are looked up in the daemon (session/list,
 * session/turns); a deleted origin is said to be deleted (the fork stays whole without it).
 */

import { DaemonError } from './errors';
import { ErrorCode, ForkedFrom, Method, Session, Turn } from './protocol';
import type { Requester } from './protocolTypes';

/** What is known of a fork's origin. */
export interface Origin {
  /** undefined: the origin is not in the store any more. */
  title?: string;
  /** The forked turn's place on the origin's path, 1 for its first turn; 0: before the first. */
  turnNumber?: number;
}

export type { Requester } from './protocolTypes';

/** How many pages of session/list or session/turns a lookup reads at most. */
const MAX_PAGES = 20;

/**
 * The lineage in words. `origin` is what the lookup found of a fork's origin; without it (not
 * looked up yet) a fork is only said to be a fork. A child session (the task tool's) names its
 * parent by `parentTitle` once that is looked up. A copy imported with new ids says so, after
 * its fork lineage when it is a fork too (the copy keeps the origin it was forked from).
 */
export function lineageText(session: Session, origin?: Origin, parentTitle?: string): string | undefined {
  // every imported session names its source; one imported as it was keeps its id
  const copy = session.importedFrom && session.importedFrom.sessionId !== session.sessionId;
  const child = session.parentSessionId
    ? `child session of ${parentTitle?.trim() ? `“${parentTitle.trim()}”` : 'another session'} (its task call started it)`
    : undefined;
  const parts = [child, forkText(session.forkedFrom, origin), copy ? 'imported as a copy' : undefined];
  const text = parts.filter(Boolean).join(' · ');
  return text || undefined;
}

function forkText(from: ForkedFrom | null | undefined, origin: Origin | undefined): string | undefined {
  if (!from) {
    return undefined;
  }
  if (!origin) {
    return 'forked from another session';
  }
  if (origin.title === undefined) {
    return 'forked from a session that was deleted';
  }
  const title = origin.title.trim() || 'an untitled session';
  if (from.turnId === null || origin.turnNumber === 0) {
    return `forked from “${title}” before its first turn`;
  }
  return origin.turnNumber ? `forked from “${title}” at turn ${origin.turnNumber}` : `forked from “${title}”`;
}

/** The number of turns from the first turn to `turnId` in a session's tree (0 for null). */
export function turnNumber(turns: Turn[], turnId: string | null): number | undefined {
  if (turnId === null) {
    return 0;
  }
  const parents = new Map(turns.map((t) => [t.turnId, t.parentTurnId]));
  if (!parents.has(turnId)) {
    return undefined;
  }
  let depth = 0;
  for (let id: string | null | undefined = turnId; id && depth <= parents.size; id = parents.get(id)) {
    depth++;
  }
  return depth;
}

export async function findOrigin(client: Requester, from: ForkedFrom): Promise<Origin> {
  let title: string | undefined;
  let cursor: string | undefined;
  for (let page = 0; page < MAX_PAGES && title === undefined; page++) {
    const list = await client.request(Method.list, { limit: 200, ...(cursor ? { cursor } : {}) });
    title = list.sessions.find((s) => s.sessionId === from.sessionId)?.title;
    cursor = list.nextCursor;
    if (!cursor) {
      break;
    }
  }
  if (title === undefined) {
    return {};
  }
  if (from.turnId === null) {
    return { title, turnNumber: 0 };
  }
  const turns: Turn[] = [];
  cursor = undefined;
  try {
    for (let page = 0; page < MAX_PAGES; page++) {
      const result: { turns: Turn[]; nextCursor?: string } = await client.request(Method.turns, {
        sessionId: from.sessionId,
        ...(cursor ? { cursor } : {}),
      });
      turns.push(...result.turns);
      cursor = result.nextCursor;
      if (!cursor) {
        break;
      }
    }
  } catch (error) {
    if (error instanceof DaemonError && error.code === ErrorCode.notFound) {
      return {}; // deleted between the two requests
    }
    throw error;
  }
  return { title, turnNumber: turnNumber(turns, from.turnId) };
}
