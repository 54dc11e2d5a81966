/**
 * The commands about a turn of the open session, run from the turn tree or the palette: branch,
 * resume, its changes, revert, the tools, and the session commands (fork, pin, rename, ...).
 */

import type { Extension } from './features';
import { messageOf } from './errors';
import { showChanges } from './proposed';
import { pickTurn, SessionCommands } from './sessionCommands';
import { sessionTitles, sharedSessions } from './sharing';
import { turnPrompt } from './slashCommand';
import { toolItems } from './toolsView';
import { firstLine, TreeNode } from './turnTree';
import * as vscodeapi from './vscodeapi';

export function registerTurnCommands({ controller, act, focusChat, log }: Extension): vscodeapi.Disposable[] {
  /** The branch command asks whether the files go back too. */
  const branchTo = async (turnId: string | null) => {
    const choice = await vscodeapi.showQuickPick(
      [
        { label: 'Restore the files', description: 'put the files the turns changed back as they were there', restore: true },
        { label: 'Leave the files as they are', description: 'move the conversation only', restore: false },
      ],
      { title: 'trellisd: branch: restore the files too?' },
    );
    if (choice) {
      await controller.branch(turnId, choice.restore);
    }
  };

  const branchHere = async (node?: TreeNode) => {
    const picked = await pickTurn(controller, 'trellisd: branch here: the next prompt follows the turn you pick', node);
    if (picked) {
      await branchTo(picked.turnId);
    }
  };

  /** The turn a command is about: the tree item it was run on, else the head. */
  const turnOf = (node?: TreeNode): string => {
    const turnId = node?.kind === 'turn' ? node.turn.turnId : controller.session?.head;
    if (!turnId) {
      throw new Error('no turn to show: the conversation has no turn yet');
    }
    return turnId;
  };

  const showTurnChanges = async (node?: TreeNode) => {
    const turnId = turnOf(node);
    const files = await controller.changes(turnId);
    const others = sharedSessions(files);
    await showChanges(turnId, files, others.length ? await sessionTitles(controller.client, others) : undefined);
  };

  const showTools = async () => {
    const result = await vscodeapi.withProgress('trellisd: listing the tools', () => controller.tools());
    await vscodeapi.showQuickPick(toolItems(result), {
      title: `trellisd: the model's tools (${result.tools.length}) and MCP servers (${result.servers.length})`,
      placeHolder: 'name · source · kind · what the policy says',
      matchOnDescription: true,
      matchOnDetail: true,
    });
  };

  const revertTurn = async (node?: TreeNode) => {
    const result = await controller.revert(turnOf(node));
    if (result) {
      void vscodeapi.showInformationMessage(`trellisd: ${result.restored.length} file(s) put back`);
    }
  };

  const resumeTurn = async (node?: TreeNode) => {
    if (node?.kind === 'turn') {
      await controller.resume(node.turn.turnId);
      return;
    }
    const tree = await controller.turnTree();
    if (!tree) {
      throw new Error('no session is open: start one or reopen one first');
    }
    const interrupted = tree.turns.filter((t) => t.outcome === 'interrupted' || t.outcome === 'paused').reverse();
    if (interrupted.length === 0) {
      void vscodeapi.showInformationMessage('trellisd: no turn of this session is paused or was interrupted.');
      return;
    }
    const picked =
      interrupted.length === 1
        ? { turnId: interrupted[0].turnId }
        : await vscodeapi.showQuickPick(
            interrupted.map((t) => ({ label: firstLine(turnPrompt(t)) || '(empty prompt)', description: t.createdAt, turnId: t.turnId })),
            { title: 'trellisd: resume which interrupted turn?' },
          );
    if (picked) {
      await controller.resume(picked.turnId);
    }
  };

  const commands = new SessionCommands(controller, focusChat, (e) => log.warn(`search: ${messageOf(e)}`));
  return [
    vscodeapi.registerCommand('trellisd.branchHere', act('branch', branchHere)),
    vscodeapi.registerCommand('trellisd.resumeTurn', act('resume the turn', resumeTurn)),
    vscodeapi.registerCommand('trellisd.showChanges', act('show the changes', showTurnChanges)),
    vscodeapi.registerCommand('trellisd.showTools', act('list the tools', showTools)),
    vscodeapi.registerCommand('trellisd.revertTurn', act('revert the turn', revertTurn)),
    vscodeapi.registerCommand('trellisd.forkHere', act('fork', commands.fork)),
    vscodeapi.registerCommand('trellisd.forkAfterStep', act('fork after a step', commands.forkAfterStep)),
    vscodeapi.registerCommand('trellisd.pinTurn', act('pin the turn', (node?: TreeNode) => commands.pin(node, true))),
    vscodeapi.registerCommand('trellisd.unpinTurn', act('unpin the turn', (node?: TreeNode) => commands.pin(node, false))),
    vscodeapi.registerCommand('trellisd.recoverSession', act('decide about the killed command', commands.recover)),
    vscodeapi.registerCommand('trellisd.renameSession', act('rename the session', commands.rename)),
    vscodeapi.registerCommand('trellisd.deleteSession', act('delete a session', commands.delete)),
    vscodeapi.registerCommand('trellisd.showGrants', act('show the remembered approvals', commands.grants)),
    vscodeapi.registerCommand('trellisd.exportSession', act('export the session', commands.export)),
    vscodeapi.registerCommand('trellisd.importSession', act('import a session', commands.import)),
    vscodeapi.registerCommand('trellisd.searchSessions', act('search sessions', commands.search)),
  ];
}
