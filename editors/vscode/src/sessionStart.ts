/** Starting a session over a workspace folder, and reopening one from the list. */

import { underParents } from './children';
import type { Extension } from './features';
import { SessionItem, sessionItems } from './sessionPicker';
import * as vscodeapi from './vscodeapi';

export interface SessionStart {
  /** The workspace folder a new session works over (asked when there are several). */
  pickFolder(): Promise<string | undefined>;
  start(): Promise<void>;
  reopen(): Promise<void>;
}

export function sessionStart({ controller, settings, focusChat }: Extension): SessionStart {
  const pickFolder = async (): Promise<string | undefined> => {
    const folders = vscodeapi.workspaceFolders();
    if (folders.length === 0) {
      throw new Error('open a folder first: a session works over a workspace folder');
    }
    if (folders.length === 1) {
      return folders[0].uri.fsPath;
    }
    const picked = await vscodeapi.showQuickPick(
      folders.map((f) => ({ label: f.name, description: f.uri.fsPath, path: f.uri.fsPath })),
      { title: 'trellisd: start a session over which folder?' },
    );
    return picked?.path;
  };

  const start = async () => {
    const root = await pickFolder();
    if (!root) {
      return;
    }
    await focusChat();
    await vscodeapi.withProgress('trellisd: starting a session', () => controller.openSession(root, undefined, settings().mcpServers));
  };

  const reopen = async () => {
    const sessions = await vscodeapi.withProgress('trellisd: listing sessions', () => controller.listSessions());
    if (sessions.length === 0) {
      void vscodeapi.showInformationMessage('trellisd has no sessions yet: start one first.');
      return;
    }
    const picked = await vscodeapi.showQuickPick<SessionItem>(sessionItems(underParents(sessions)), {
      title: 'trellisd: reopen a session',
      placeHolder: 'newest first, child sessions under their parent',
      matchOnDescription: true,
      matchOnDetail: true,
    });
    if (picked) {
      await focusChat();
      await controller.reopenSession(picked.sessionId);
    }
  };

  return { pickFolder, start, reopen };
}

export function registerSessionStart(ext: Extension, starting: SessionStart): vscodeapi.Disposable[] {
  return [
    vscodeapi.registerCommand('trellisd.startSession', ext.act('start a session', starting.start)),
    vscodeapi.registerCommand('trellisd.reopenSession', ext.act('reopen a session', starting.reopen)),
  ];
}
