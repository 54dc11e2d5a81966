/**
 * A session's history in pages: a session opens with its newest turns (session/reopen with
 * `limit`), and "Load earlier turns" fetches the page before them (session/history with the
 * cursor), so a session of thousands of turns opens as fast as one of ten. Each turn of a page
 * shows every step's text (run/steps), not only its reply, which is the last step's.
 */

import type { Step, Turn } from './protocol';
import { Method } from './protocol';
import type { Requester } from './protocolTypes';

/** Turns a page holds: what a session opens with, and what each "Load earlier turns" adds. */
export const HISTORY_PAGE = 50;

export type { Requester } from './protocolTypes';

export interface HistoryPage {
  turns: Turn[];
  /** The page before this one, when there is one. */
  cursor?: string;
}

/** The page of the session's path before `cursor` (session/history), oldest first. */
export async function earlierPage(client: Requester, sessionId: string, cursor: string): Promise<HistoryPage> {
  const page = await client.request(Method.history, {
    sessionId,
    cursor,
    limit: HISTORY_PAGE,
  });
  return { turns: page.turns, ...(page.nextCursor ? { cursor: page.nextCursor } : {}) };
}

/** Each turn's steps (run/steps), by turn id; a turn whose steps could not be read is left out
 * (it is shown with its reply). */
export async function stepsOf(client: Requester, turns: Turn[]): Promise<Map<string, Step[]>> {
  const found = new Map<string, Step[]>();
  await Promise.all(
    turns.map(async (turn) => {
      try {
        const { steps } = await client.request(Method.runSteps, { runId: turn.runId });
        found.set(turn.turnId, steps);
      } catch {
        // an older store, a run being written: the reply stands for it
      }
    }),
  );
  return found;
}
