/**
 * Sessions in a git worktree of their own: starting one (on a new branch trellisd/<name> from
 * the branch checked out, the checkout left as it is), the mark that shows it wherever a session
 * is shown (`⎇ trellisd/fix-login → main`), merging its branch into the base, and discarding it.
 */

import type { Extension } from './features';
import type { Merged, Worktree } from './protocol';
import { MergeConflict } from './session/worktrees';
import * as vscodeapi from './vscodeapi';

/** The mark of a worktree session: its branch and the branch it merges into. */
export function worktreeText(worktree: Worktree): string {
  return `⎇ ${worktree.branch} → ${worktree.base}`;
}

/** A worktree's name as session/open takes it: letters, digits, '-', '_', single dots inside. */
export function checkWorktreeName(name: string): string | undefined {
  if (!name) {
    return undefined;
  }
  if (name.length > 64) {
    return 'at most 64 characters';
  }
  if (!/^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/.test(name)) {
    return "letters, digits, '-' and '_', with single dots inside";
  }
  return undefined;
}

/** What a merge did, in a sentence. */
export function mergedText(branch: string, merged: Merged): string {
  if (merged.paths.length === 0) {
    return `trellisd: ${branch} had nothing new to merge into ${merged.base}.`;
  }
  const files = merged.paths.length === 1 ? '1 file' : `${merged.paths.length} files`;
  const where = merged.checkoutUpdated
    ? 'and written into your checkout'
    : `(${merged.base} is not checked out, so your checkout was left as it is)`;
  return `trellisd: merged ${branch} into ${merged.base} (${merged.commit.slice(0, 8)}): ${files}, ${merged.paths.join(', ')}, ${where}.`;
}

export interface WorktreeCommands {
  start(): Promise<void>;
  merge(): Promise<void>;
  discard(): Promise<void>;
}

export function worktreeCommands({ controller, settings, focusChat }: Extension, pickFolder: () => Promise<string | undefined>): WorktreeCommands {
  const start = async () => {
    const root = await pickFolder();
    if (!root) {
      return;
    }
    const name = await vscodeapi.showInputBox({
      title: 'trellisd: start a session in a new worktree',
      prompt: 'The worktree\'s name (its branch is trellisd/<name>); empty: one is made up',
      placeHolder: 'e.g. fix-login',
      validateInput: (value) => checkWorktreeName(value.trim()),
    });
    if (name === undefined) {
      return;
    }
    await focusChat();
    const session = await vscodeapi.withProgress('trellisd: making a worktree and starting a session', () =>
      controller.openSession(root, undefined, settings().mcpServers, name.trim() || true),
    );
    if (session.worktree) {
      void vscodeapi.showInformationMessage(
        `trellisd: the session works in ${session.worktree.path} (${worktreeText(session.worktree)}); your checkout is left as it is.`,
      );
    }
  };

  const merge = async () => {
    const branch = controller.session?.worktree?.branch;
    try {
      const merged = await vscodeapi.withProgress('trellisd: merging the worktree', () => controller.mergeWorktree());
      void vscodeapi.showInformationMessage(mergedText(branch ?? 'the worktree', merged));
    } catch (error) {
      if (!(error instanceof MergeConflict)) {
        throw error;
      }
      await vscodeapi.showErrorMessage(error.message);
    }
  };

  const discard = async () => {
    let asked: Worktree | undefined;
    const discarded = await controller.discardWorktree((worktree) => {
      asked = worktree;
      return vscodeapi.confirm(
        `Discard the worktree of this session and its branch ${worktree.branch}?`,
        `${worktree.path} is removed with everything in it that was not merged into ${worktree.base}. The session and its turns stay, but cannot work any more.`,
        'Discard',
      );
    });
    if (discarded && asked) {
      void vscodeapi.showInformationMessage(`trellisd: the worktree ${asked.path} and the branch ${asked.branch} were discarded.`);
    }
  };

  return { start, merge, discard };
}

export function registerWorktrees(ext: Extension, commands: WorktreeCommands): vscodeapi.Disposable[] {
  // the chat view's … menu offers merge and discard while the open session has a worktree
  const worktreeContext = (on: boolean) => void vscodeapi.setContext('trellisd.worktree', on);
  worktreeContext(false);
  return [
    ext.controller.onDidChangeSession((session) => worktreeContext(!!session?.worktree)),
    vscodeapi.registerCommand('trellisd.startWorktreeSession', ext.act('start a session in a new worktree', commands.start)),
    vscodeapi.registerCommand('trellisd.mergeWorktree', ext.act('merge the worktree', commands.merge)),
    vscodeapi.registerCommand('trellisd.discardWorktree', ext.act('discard the worktree', commands.discard)),
  ];
}
