/**
 * The commands for a session's life: fork from a turn, rename, delete (after a confirmation),
 * export to a file and import from one (VS Code's file dialogs), and search sessions. Each is a
 * function of the controller and the editor's dialogs, registered by extension.ts.
 */

import * as path from 'path';
import type { QuickPickItem } from 'vscode';

import { DaemonError } from './errors';
import { ErrorCode, Grant, SessionSummary, Turn } from './protocol';
import { SessionController } from './session';
import { askRecovery } from './recovery';
import { sessionItems, SessionItem } from './sessionPicker';
import { searchSessions } from './sessionSearch';
import { turnPrompt } from './slashCommand';
import { ruleText, ruleWords } from './transcript';
import { firstLine, TreeNode } from './turnTree';
import * as vscodeapi from './vscodeapi';

/** The extension an exported session is saved with. */
export const EXPORT_EXTENSION = 'trellisd';
const EXPORT_FILTERS = { 'trellisd sessions': [EXPORT_EXTENSION], 'All files': ['*'] };

/** The turn a command acts on: the tree's node it was run on, else one the user picks. */
export async function pickTurn(controller: SessionController, title: string, node?: TreeNode): Promise<{ turnId: string | null } | undefined> {
  if (node?.kind === 'turn') {
    return { turnId: node.turn.turnId };
  }
  const tree = await controller.turnTree();
  if (!tree) {
    throw new Error('no session is open: start one or reopen one first');
  }
  const items: (QuickPickItem & { turnId: string | null })[] = [
    { label: '$(debug-restart) Before the first turn', description: 'start the conversation over', turnId: null },
    ...[...tree.turns].reverse().map((t: Turn) => ({
      label: `${t.turnId === tree.head ? '$(circle-filled) ' : ''}${firstLine(turnPrompt(t)) || '(empty prompt)'}`,
      description: `${t.outcome} · ${t.createdAt.replace('T', ' ').slice(0, 19)}`,
      detail: firstLine(t.reply, 120),
      turnId: t.turnId,
    })),
  ];
  return vscodeapi.showQuickPick(items, { title, matchOnDescription: true, matchOnDetail: true });
}

const GRANT_SCOPES: Record<string, string> = { session: 'this session', project: 'this project', policy: "the session's policy" };

const GRANT_ICONS: Record<string, string> = { exec: '$(terminal)', rule: '$(list-filter)' };

/** What a grant allows in words: `exec pytest -q`, or a rule's words, `rule pytest **`. */
export function grantText(grant: Grant): string {
  return `${grant.kind} ${grant.kind === 'rule' ? ruleText(grant.rule ?? ruleWords(grant.target)) : grant.target}`;
}

/** A remembered approval as the list shows it: what it allows, and where it is kept. */
export function grantItem(grant: Grant): QuickPickItem & { grant: Grant } {
  return {
    label: `${GRANT_ICONS[grant.kind] ?? '$(edit)'} ${grantText(grant)}`,
    description: GRANT_SCOPES[grant.scope ?? 'session'] ?? grant.scope,
    grant,
  };
}

/** A file name from a session's title: "Fix the parser" -> "fix-the-parser.trellisd". */
export function exportFileName(title: string, sessionId: string): string {
  const slug = title
    .toLowerCase()
    .replace(/[^\p{L}\p{N}]+/gu, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 60)
    .replace(/-+$/, '');
  return `${slug || sessionId}.${EXPORT_EXTENSION}`;
}

function bytes(n: number): string {
  if (n < 1024) {
    return `${n} bytes`;
  }
  return n < 1024 * 1024 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

export class SessionCommands {
  constructor(
    private readonly controller: SessionController,
    private readonly focusChat: () => Thenable<unknown>,
    private readonly onError: (error: unknown) => void,
  ) {}

  private folder(): string | undefined {
    return vscodeapi.workspaceFolders()[0]?.uri.fsPath;
  }

  /** A session the command acts on: the open one, else one the user picks. */
  private async pickSession(title: string): Promise<SessionItem | undefined> {
    const sessions: SessionSummary[] = await this.controller.listSessions();
    if (sessions.length === 0) {
      void vscodeapi.showInformationMessage('trellisd has no sessions yet: start one first.');
      return undefined;
    }
    const open = this.controller.session?.sessionId;
    const items = sessionItems(sessions).map((item) =>
      item.sessionId === open ? { ...item, label: `$(circle-filled) ${item.label}`, description: `open · ${item.description}` } : item,
    );
    items.sort((a, b) => Number(b.sessionId === open) - Number(a.sessionId === open));
    return vscodeapi.showQuickPick(items, { title, matchOnDescription: true, matchOnDetail: true });
  }

  readonly fork = async (node?: TreeNode): Promise<void> => {
    const picked = await pickTurn(this.controller, 'trellisd: fork: a new session that goes on from the turn you pick', node);
    if (picked) {
      await this.focusChat();
      await this.controller.fork(picked.turnId);
    }
  };

  /** Fork after a step of the turn (the tree's item, else one the user picks). */
  readonly forkAfterStep = async (node?: TreeNode): Promise<void> => {
    const picked = await pickTurn(this.controller, 'trellisd: fork after a step of which turn?', node);
    if (picked?.turnId) {
      await this.focusChat();
      await this.controller.forkAfterStep(picked.turnId);
    }
  };

  /** Pin or unpin the turn (the tree's item, else one the user picks). */
  readonly pin = async (node: TreeNode | undefined, pinned: boolean): Promise<void> => {
    const picked = await pickTurn(this.controller, `trellisd: ${pinned ? 'pin' : 'unpin'} which turn?`, node);
    if (picked?.turnId) {
      await this.controller.pin(picked.turnId, pinned);
    }
  };

  /** Answer a pending decision about a command killed mid-run. */
  readonly recover = async (): Promise<void> => {
    const pending = this.controller.session?.recovery;
    if (!pending) {
      void vscodeapi.showInformationMessage('trellisd: this session has no decision waiting.');
      return;
    }
    const decision = await askRecovery(pending);
    if (decision) {
      await this.controller.recover(decision);
    }
  };

  readonly rename = async (): Promise<void> => {
    const session = this.controller.session;
    if (!session) {
      throw new Error('no session is open: start one or reopen one first');
    }
    const title = await vscodeapi.showInputBox({
      title: 'trellisd: rename the session',
      value: session.title,
      prompt: 'The new title',
      validateInput: (v) => (v.trim() ? undefined : 'A title cannot be empty'),
    });
    if (title?.trim()) {
      await this.controller.rename(title.trim());
    }
  };

  readonly delete = async (): Promise<void> => {
    const picked = await this.pickSession('trellisd: delete which session?');
    if (!picked) {
      return;
    }
    const name = picked.label.replace(/^\$\([^)]*\) /, '');
    const sure = await vscodeapi.confirm(
      `Delete the session “${name}”?`,
      'Its turns, runs and steps are removed for good. Forks of it are kept. Export it first to keep a copy.',
      'Delete',
    );
    if (sure) {
      await this.controller.deleteSession(picked.sessionId);
      void vscodeapi.showInformationMessage(`trellisd: the session “${name}” was deleted.`);
    }
  };

  /** The open session's remembered approvals; the one picked is revoked after a confirmation. */
  readonly grants = async (): Promise<void> => {
    const grants = await this.controller.grants();
    if (grants.length === 0) {
      void vscodeapi.showInformationMessage('trellisd: no remembered approvals in this session: "Allow always" answers are kept here.');
      return;
    }
    const picked = await vscodeapi.showQuickPick(grants.map(grantItem), {
      title: 'trellisd: remembered approvals (pick one to revoke it)',
      matchOnDescription: true,
    });
    if (!picked) {
      return;
    }
    const what = `${grantText(picked.grant)} (${picked.description})`;
    if (picked.grant.scope === 'policy') {
      void vscodeapi.showInformationMessage(`trellisd: ${what} came with the session's policy; open a session with another policy to drop it.`);
      return;
    }
    const sure = await vscodeapi.confirm(`Revoke the approval to ${what}?`, 'The action will be asked for again.', 'Revoke');
    if (sure) {
      const { kind, target, scope } = picked.grant;
      await this.controller.revoke({ kind, target, scope });
      void vscodeapi.showInformationMessage(`trellisd: revoked ${what}.`);
    }
  };

  readonly export = async (): Promise<void> => {
    const session = this.controller.session;
    let sessionId = session?.sessionId;
    let title = session?.title ?? '';
    if (!sessionId) {
      const picked = await this.pickSession('trellisd: export which session?');
      if (!picked) {
        return;
      }
      sessionId = picked.sessionId;
      title = picked.label;
    }
    const folder = this.folder();
    const file = await vscodeapi.showSaveDialog({
      title: 'trellisd: export the session to a file',
      label: 'Export',
      filters: EXPORT_FILTERS,
      defaultPath: folder ? path.join(folder, exportFileName(title, sessionId)) : undefined,
    });
    if (!file) {
      return;
    }
    const result = await vscodeapi.withProgress('trellisd: exporting the session', () =>
      this.controller.exportSession(file, sessionId),
    );
    void vscodeapi.showInformationMessage(
      `trellisd: exported ${result.turns === 1 ? '1 turn' : `${result.turns} turns`} (${bytes(result.bytes)}) to ${result.path}`,
    );
  };

  readonly import = async (): Promise<void> => {
    const file = await vscodeapi.showOpenDialog({
      title: 'trellisd: import a session from a file',
      label: 'Import',
      filters: EXPORT_FILTERS,
      defaultPath: this.folder(),
    });
    if (!file) {
      return;
    }
    await this.focusChat();
    try {
      await this.controller.importSession(file);
    } catch (error) {
      if (!(error instanceof DaemonError && error.code === ErrorCode.conflict)) {
        throw error;
      }
      const copy = 'Import as a Copy';
      const choice = await vscodeapi.showWarningMessage(`${error.message}. Import it as a copy, with new ids?`, copy);
      if (choice === copy) {
        await this.controller.importSession(file, { asNew: true });
      }
    }
  };

  readonly search = async (): Promise<void> => {
    const sessionId = await searchSessions(this.controller, this.onError);
    if (sessionId) {
      await this.focusChat();
      await this.controller.reopenSession(sessionId);
    }
  };
}
