/**
 * Child sessions (the `task` tool): the session list with each child under its parent, the
 * child's mark wherever a session is listed (`↳ child of “fix the parser”`), and opening a child
 * as an ordinary session: from the link under the task call that started it, or from
 * **Open a Child Session…**, which lists the open session's children. While a parent's turn runs,
 * its children are drawn under its task calls (session/children.ts).
 */

import type { Extension } from './features';
import { Method, SessionSummary } from './protocol';
import { SessionItem, sessionItems } from './sessionPicker';
import * as vscodeapi from './vscodeapi';

/** The sessions in their order, each child moved to just after its parent (when the list holds
 * the parent), its own children after it; children keep their order among themselves. */
export function underParents(sessions: SessionSummary[]): SessionSummary[] {
  const listed = new Set(sessions.map((s) => s.sessionId));
  const children = new Map<string, SessionSummary[]>();
  for (const s of sessions) {
    if (s.parentSessionId && listed.has(s.parentSessionId) && s.parentSessionId !== s.sessionId) {
      children.set(s.parentSessionId, [...(children.get(s.parentSessionId) ?? []), s]);
    }
  }
  const ordered: SessionSummary[] = [];
  const placed = new Set<string>();
  const place = (s: SessionSummary) => {
    if (placed.has(s.sessionId)) {
      return;
    }
    placed.add(s.sessionId);
    ordered.push(s);
    (children.get(s.sessionId) ?? []).forEach(place);
  };
  for (const s of sessions) {
    if (!s.parentSessionId || !listed.has(s.parentSessionId)) {
      place(s);
    }
  }
  sessions.forEach(place); // a cycle the daemon never makes: nothing is lost
  return ordered;
}

/** The children of `parentId` (session/list {parentSessionId}), newest first. */
export async function childSessions(ext: Pick<Extension, 'daemon'>, parentId: string): Promise<SessionSummary[]> {
  await ext.daemon.start();
  const { sessions } = await ext.daemon.request(Method.list, { parentSessionId: parentId, limit: 200 });
  return sessions;
}

export interface ChildCommands {
  /** Open a child session in the chat view, as any session is reopened. */
  open(sessionId: string): Promise<void>;
  /** A quick pick of the open session's children; the one picked is opened. */
  pick(): Promise<void>;
}

export function childCommands(ext: Extension): ChildCommands {
  const { controller, focusChat } = ext;
  const open = async (sessionId: string) => {
    await focusChat();
    await controller.reopenSession(sessionId);
  };
  const pick = async () => {
    const parent = controller.session;
    if (!parent) {
      throw new Error('open a session first: its child sessions are listed');
    }
    const children = await vscodeapi.withProgress('trellisd: listing child sessions', () => childSessions(ext, parent.sessionId));
    if (children.length === 0) {
      void vscodeapi.showInformationMessage(`trellisd: “${parent.title || 'this session'}” has no child sessions: its model started none with the task tool.`);
      return;
    }
    const picked = await vscodeapi.showQuickPick<SessionItem>(sessionItems(children), {
      title: `trellisd: open a child session of “${parent.title || 'this session'}”`,
      placeHolder: 'newest first',
      matchOnDescription: true,
      matchOnDetail: true,
    });
    if (picked) {
      await open(picked.sessionId);
    }
  };
  return { open, pick };
}

export function registerChildren(ext: Extension, commands: ChildCommands): vscodeapi.Disposable[] {
  return [vscodeapi.registerCommand('trellisd.openChildSession', ext.act('open a child session', commands.pick))];
}
