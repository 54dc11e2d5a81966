/**
 * Search sessions: a quick pick that asks the daemon (session/list {query}) as the user types,
 * a short pause after the last key, and shows the sessions that match, best first, each with the
 * text that matched. An answer to an older query never replaces a newer one's.
 */

import type { QuickPick } from 'vscode';

import type { SessionSummary } from './protocol';
import { SessionItem, sessionItems } from './sessionPicker';
import * as vscodeapi from './vscodeapi';

export interface SessionSearcher {
  searchSessions(query: string): Promise<SessionSummary[]>;
}

/** The items for a query's answer: the daemon's ranking kept, each with its snippet. */
export function searchItems(query: string, sessions: SessionSummary[], now: Date = new Date()): SessionItem[] {
  const items = sessionItems(sessions, now);
  return items.map((item, i) => {
    const snippet = sessions[i].match?.snippet;
    return {
      ...item,
      // The daemon matched these: the quick pick must not filter them again by their label.
      alwaysShow: true,
      ...(query.trim() && snippet ? { detail: `$(search) ${flatten(snippet)}` } : {}),
    };
  });
}

function flatten(text: string): string {
  return text.replace(/\s+/g, ' ').trim();
}

/**
 * Show the search; resolves with the picked session's id, or undefined when the user closed it.
 * `delayMs`: how long after the last key the daemon is asked.
 */
export function searchSessions(
  searcher: SessionSearcher,
  onError: (error: unknown) => void,
  delayMs = 150,
): Promise<string | undefined> {
  const pick: QuickPick<SessionItem> = vscodeapi.createQuickPick<SessionItem>();
  pick.title = 'trellisd: search sessions';
  pick.placeholder = 'Words from a title, a prompt or a reply';
  pick.matchOnDescription = true;
  pick.matchOnDetail = true;
  let asked = 0;
  let timer: ReturnType<typeof setTimeout> | undefined;

  const ask = async (query: string) => {
    const mine = ++asked;
    pick.busy = true;
    try {
      const sessions = await searcher.searchSessions(query);
      if (mine === asked) {
        pick.items = searchItems(query, sessions);
      }
    } catch (error) {
      if (mine === asked) {
        pick.items = [];
        onError(error);
      }
    } finally {
      if (mine === asked) {
        pick.busy = false;
      }
    }
  };

  return new Promise((resolve) => {
    let done = false;
    const finish = (sessionId: string | undefined) => {
      if (done) {
        return;
      }
      done = true;
      if (timer) {
        clearTimeout(timer);
      }
      resolve(sessionId);
      pick.dispose();
    };
    pick.onDidChangeValue((value) => {
      if (timer) {
        clearTimeout(timer);
      }
      timer = setTimeout(() => void ask(value), delayMs);
    });
    pick.onDidAccept(() => finish(pick.selectedItems[0]?.sessionId));
    pick.onDidHide(() => finish(undefined));
    pick.show();
    void ask('');
  });
}
