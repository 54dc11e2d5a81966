/**
 * Changes another session may have made too. When sessions work in one folder at once, a path a
 * command of each changed at the same time is in both turns' change sets, marked shared with the
 * other session's turn (FileChange's `shared`, `sharedWith`); a restore over such a path answers
 * a conflict with `data.shared` and changes nothing unless forced. Here: the other sessions
 * named (their title, else the start of their id), the mark a change list draws, and the
 * question before a restore overwrites what may be another session's work.
 */

import type { FileChange, SharedWith } from './protocol';
import { Method } from './protocol';
import type { Requester } from './protocolTypes';

/** A shared path of a refused restore (`data.shared` of its -32020). */
export interface SharedPath {
  path: string;
  sharedWith: SharedWith[];
}

/** How many pages of session/list a lookup reads at most. */
const MAX_PAGES = 20;

/** A session's name when its title is not known: the start of its id. */
export function idPrefix(sessionId: string): string {
  return sessionId.slice(0, 8);
}

/** The sessions' titles by id (those not in the store, or untitled, are left out). */
export async function sessionTitles(client: Requester, ids: Iterable<string>): Promise<Map<string, string>> {
  const wanted = new Set(ids);
  const titles = new Map<string, string>();
  let cursor: string | undefined;
  for (let page = 0; page < MAX_PAGES && wanted.size > titles.size; page++) {
    const list = await client.request(Method.list, { limit: 200, ...(cursor ? { cursor } : {}) });
    for (const s of list.sessions) {
      if (wanted.has(s.sessionId) && s.title.trim()) {
        titles.set(s.sessionId, s.title.trim());
      }
    }
    cursor = list.nextCursor;
    if (!cursor) {
      break;
    }
  }
  return titles;
}

/** The sessions a change is shared with: “title”, or `session 1a2b3c4d` when untitled or unknown. */
export function sharedWithText(sharedWith: SharedWith[], titles: Map<string, string>): string {
  const names = [...new Set(sharedWith.map((s) => s.sessionId))].map((id) => {
    const title = titles.get(id);
    return title ? `session “${title}”` : `session ${idPrefix(id)}`;
  });
  return names.join(', ');
}

/** The sessions named by shared changes, for one lookup of their titles. */
export function sharedSessions(items: { sharedWith?: SharedWith[] }[]): string[] {
  return [...new Set(items.flatMap((f) => (f.sharedWith ?? []).map((s) => s.sessionId)))];
}

/** The mark of a shared change in a change list; '' for a change of this session's alone. */
export function sharedMark(file: FileChange, titles: Map<string, string>): string {
  if (!file.shared) {
    return '';
  }
  return `# ${file.path}: shared with ${sharedWithText(file.sharedWith ?? [], titles)} (a command of it ran at the same time)\n`;
}

/** `data.shared` of a refused restore, when it has it. */
export function sharedOf(data: unknown): SharedPath[] | undefined {
  const shared = (data as { shared?: unknown } | undefined)?.shared;
  if (!Array.isArray(shared)) {
    return undefined;
  }
  return shared.filter(
    (s): s is SharedPath => typeof s?.path === 'string' && Array.isArray(s?.sharedWith),
  );
}

/** The question before a restore overwrites paths another session may have changed. */
export function sharedQuestion(shared: SharedPath[], titles: Map<string, string>): string {
  const listed = shared.map((s) => `${s.path} (shared with ${sharedWithText(s.sharedWith, titles)})`).join(', ');
  return (
    `Another session's command ran at the same time as this one's and may have made these changes: ${listed}. ` +
    "Nothing was restored. Restore them anyway, overwriting what may be the other session's work?"
  );
}
