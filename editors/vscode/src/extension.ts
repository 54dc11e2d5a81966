/**
 * activate: builds the connection to the daemon, the session controller, the chat view and the
 * turn tree, and registers the commands. Every command runs through `act`, which shows a failure
 * as a message a person understands, with the log one click away.
 */

import * as vscode from 'vscode';

import { DaemonClient } from './client';
import { ChatViewProvider } from './chatView';
import { daemonCommand, initializationOptions, readSettings } from './config';
import { messageOf } from './errors';
import type { ContextEntry } from './protocol';
import { ChannelLog } from './log';
import { parseBudget, spendText } from './queue';
import { contentProvider, SCHEME, showChanges } from './proposed';
import { SessionController } from './session';
import { pickTurn, SessionCommands } from './sessionCommands';
import { SessionItem, sessionItems } from './sessionPicker';
import { toolItems } from './toolsView';
import { usageText, usageTooltip } from './usage';
import { formatCost } from './transcript';
import { firstLine, TreeNode, TurnTreeProvider } from './turnTree';
import * as vscodeapi from './vscodeapi';

const API_KEY_SECRET = 'trellisd.apiKey';
/** The session this workspace has open, reopened when the window is reloaded. */
const SESSION_KEY = 'trellisd.session';

let client: DaemonClient | undefined;

export function activate(context: vscode.ExtensionContext): void {
  const channel = vscodeapi.createOutputChannel('trellisd');
  const log = new ChannelLog(channel);
  const showLog = () => channel.show(true);
  const settings = () => readSettings((key) => vscodeapi.getConfiguration('trellisd').get(key));

  client = new DaemonClient({
    command: () => daemonCommand(settings(), vscodeapi.workspaceFolders()[0]?.uri.fsPath),
    initializationOptions: async () =>
      initializationOptions(settings(), (await context.secrets.get(API_KEY_SECRET)) || undefined),
    log,
    clientInfo: { name: 'trellisd-vscode', version: String(context.extension.packageJSON.version ?? '') },
  });
  const daemon = client;
  const controller = new SessionController(daemon, log, showLog);
  controller.mcpServers = () => settings().mcpServers;

  const act =
    <A extends unknown[]>(name: string, fn: (...args: A) => Promise<unknown>) =>
    async (...args: A): Promise<void> => {
      try {
        await fn(...args);
      } catch (error) {
        const message = messageOf(error);
        log.error(`${name}: ${message}`);
        const choice = await vscodeapi.showErrorMessage(message, 'Show Log');
        if (choice === 'Show Log') {
          showLog();
        }
      }
    };

  const focusChat = () => vscodeapi.executeCommand(`${ChatViewProvider.viewId}.focus`);

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

  const startSession = async () => {
    const root = await pickFolder();
    if (!root) {
      return;
    }
    await focusChat();
    await vscodeapi.withProgress('trellisd: starting a session', () => controller.openSession(root, undefined, settings().mcpServers));
  };

  const reopenSession = async () => {
    const sessions = await vscodeapi.withProgress('trellisd: listing sessions', () => controller.listSessions());
    if (sessions.length === 0) {
      void vscodeapi.showInformationMessage('trellisd has no sessions yet: start one first.');
      return;
    }
    const picked = await vscodeapi.showQuickPick<SessionItem>(sessionItems(sessions), {
      title: 'trellisd: reopen a session',
      placeHolder: 'newest first',
      matchOnDescription: true,
      matchOnDetail: true,
    });
    if (picked) {
      await focusChat();
      await controller.reopenSession(picked.sessionId);
    }
  };

  const send = async (text: string) => {
    if (!controller.session) {
      await startSession();
      if (!controller.session) {
        return;
      }
    }
    await controller.send(text);
  };

  /** The most text of an editor sent with a prompt; past it, the daemon reads the file. */
  const CONTEXT_BYTES = 256 * 1024;
  const withText = (entry: ContextEntry, text: string): ContextEntry =>
    Buffer.byteLength(text, 'utf8') <= CONTEXT_BYTES ? { ...entry, text } : entry;

  controller.activeFile = () => {
    const editor = vscodeapi.activeEditor();
    return editor?.scheme === 'file' ? withText({ kind: 'file', path: editor.path }, editor.text) : undefined;
  };

  /** "Ask About Selection…": a prompt about the selected lines (the whole file, with none). */
  const askAboutSelection = async () => {
    const editor = vscodeapi.activeEditor();
    if (editor?.scheme !== 'file') {
      throw new Error('open a file and select the lines to ask about');
    }
    const selection = editor.selection;
    const entry: ContextEntry = selection
      ? withText(
          { kind: 'selection', path: editor.path, range: { startLine: selection.startLine, endLine: selection.endLine } },
          selection.text,
        )
      : withText({ kind: 'file', path: editor.path }, editor.text);
    const what = selection ? `lines ${selection.startLine}–${selection.endLine}` : 'the file';
    const prompt = await vscodeapi.showInputBox({ title: `trellisd: ask about ${what}`, ignoreFocusOut: true });
    if (!prompt?.trim()) {
      return;
    }
    if (!controller.session) {
      await startSession();
      if (!controller.session) {
        return;
      }
    }
    await focusChat();
    await controller.turn(prompt.trim(), [entry]);
  };

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
    await showChanges(turnId, await controller.changes(turnId));
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
            interrupted.map((t) => ({ label: firstLine(t.prompt) || '(empty prompt)', description: t.createdAt, turnId: t.turnId })),
            { title: 'trellisd: resume which interrupted turn?' },
          );
    if (picked) {
      await controller.resume(picked.turnId);
    }
  };

  const registerSessionCommands = (commands: SessionCommands) => [
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

  const tree = new TurnTreeProvider(controller, (error) => log.warn(`the turn tree: ${messageOf(error)}`));
  const chat = new ChatViewProvider(context.extensionUri, controller, {
    send: act('send', send),
    cancel: act('cancel', () => controller.cancel()),
    queue: act('queue a prompt', (text: string) => controller.queuePrompt(text.trim())),
    unqueue: act('drop a queued prompt', (queueId: string) => controller.unqueue(queueId)),
    start: act('start a session', startSession),
    reopen: act('reopen a session', reopenSession),
    earlier: act('load earlier turns', () => controller.loadEarlier()),
    showLog,
  });

  // The context meter and the spend of the open session, after each step; a click compacts it.
  const meter = vscodeapi.createStatusBarItem('trellisd.usage', 'trellisd context and cost');
  meter.command = 'trellisd.compactSession';
  const compactSession = async () => {
    const result = await controller.compact();
    const cost = result.cost === null ? '' : ` (${formatCost(result.cost)})`;
    void vscodeapi.showInformationMessage(
      result.compacted
        ? `trellisd: the first ${result.turns} turn(s) are now sent as a summary${cost}`
        : 'trellisd: nothing to compact; only the newest turn is sent in full',
    );
  };

  context.subscriptions.push(
    meter,
    controller.onDidChangeUsage((usage) => {
      meter.text = usageText(usage);
      meter.tooltip = usageTooltip(usage);
      meter.show();
    }),
    controller.onDidChangeSession((session) => {
      if (!session || controller.usage?.sessionId !== session.sessionId) {
        meter.hide();
      }
    }),
    vscodeapi.registerCommand('trellisd.compactSession', act('compact the session', compactSession)),
    channel,
    tree,
    { dispose: () => controller.dispose() },
    vscodeapi.registerWebviewViewProvider(ChatViewProvider.viewId, chat),
    vscodeapi.createTreeView('trellisd.turns', { treeDataProvider: tree, showCollapseAll: true }),
    controller.onDidChangeSession(() => void tree.refresh()),
    controller.onDidChangeRunning((running) => void vscodeapi.setContext('trellisd.running', running)),
    vscodeapi.registerTextDocumentContentProvider(SCHEME, contentProvider),
    vscodeapi.registerCommand('trellisd.startSession', act('start a session', startSession)),
    vscodeapi.registerCommand('trellisd.reopenSession', act('reopen a session', reopenSession)),
    vscodeapi.registerCommand(
      'trellisd.sendPrompt',
      act('send a prompt', async () => {
        const text = await vscodeapi.showInputBox({
          title: controller.isRunning ? 'trellisd: steer the running turn' : 'trellisd: prompt',
          prompt: controller.isRunning ? 'It reaches the model at its next step.' : undefined,
          ignoreFocusOut: true,
        });
        if (text?.trim()) {
          await send(text);
        }
      }),
    ),
    vscodeapi.registerCommand(
      'trellisd.queuePrompt',
      act('queue a prompt', async () => {
        const text = await vscodeapi.showInputBox({
          title: 'trellisd: queue a prompt',
          prompt: 'It runs after the running turn (and the prompts queued before it).',
          ignoreFocusOut: true,
        });
        if (text?.trim()) {
          await controller.queuePrompt(text.trim());
        }
      }),
    ),
    vscodeapi.registerCommand(
      'trellisd.setBudget',
      act('set the budget', async () => {
        const text = await vscodeapi.showInputBox({
          title: 'trellisd: what this session may spend',
          prompt: 'tokens=N and/or usd=X, or off',
          value: 'tokens=100000',
          ignoreFocusOut: true,
        });
        if (text === undefined) {
          return;
        }
        const budget = parseBudget(text);
        if (typeof budget === 'string') {
          throw new Error(budget);
        }
        const status = await controller.setBudget(budget);
        void vscodeapi.showInformationMessage(`trellisd: ${spendText(status.budget, status.spent)}`);
      }),
    ),
    vscodeapi.registerCommand('trellisd.cancelTurn', act('cancel the turn', () => controller.cancel())),
    vscodeapi.registerCommand('trellisd.askAboutSelection', act('ask about the selection', askAboutSelection)),
    vscodeapi.registerCommand(
      'trellisd.toggleActiveFile',
      act('attach the active file', async () => {
        const on = controller.toggleAttachActiveFile();
        void vscodeapi.setContext('trellisd.attachActiveFile', on);
        void vscodeapi.showInformationMessage(
          on ? 'trellisd: each prompt goes with the active file.' : 'trellisd: prompts go without the active file.',
        );
      }),
    ),
    vscodeapi.registerCommand('trellisd.branchHere', act('branch', branchHere)),
    vscodeapi.registerCommand('trellisd.resumeTurn', act('resume the turn', resumeTurn)),
    vscodeapi.registerCommand('trellisd.showChanges', act('show the changes', showTurnChanges)),
    vscodeapi.registerCommand('trellisd.showTools', act('list the tools', showTools)),
    vscodeapi.registerCommand('trellisd.revertTurn', act('revert the turn', revertTurn)),
    ...registerSessionCommands(new SessionCommands(controller, focusChat, (e) => log.warn(`search: ${messageOf(e)}`))),
    vscodeapi.registerCommand('trellisd.pauseTurn', act('pause the turn', () => controller.pause())),
    vscodeapi.registerCommand(
      'trellisd.toggleStepMode',
      act('toggle step mode', async () => {
        const on = controller.toggleStepMode();
        void vscodeapi.showInformationMessage(
          on ? 'trellisd: step mode: each turn pauses after every step.' : 'trellisd: step mode off.',
        );
      }),
    ),
    vscodeapi.registerCommand('trellisd.takeOver', act('take the session over', () => controller.takeover())),
    vscodeapi.registerCommand('trellisd.refreshTurns', () => tree.refresh()),
    vscodeapi.registerCommand('trellisd.loadEarlierTurns', act('load earlier turns', () => controller.loadEarlier())),
    vscodeapi.registerCommand('trellisd.showLog', showLog),
    vscodeapi.registerCommand(
      'trellisd.restartDaemon',
      act('restart the daemon', async () => {
        if (controller.isRunning) {
          throw new Error('a turn is running: cancel it before you restart the daemon');
        }
        await daemon.stop();
        await daemon.start();
        await tree.refresh();
      }),
    ),
    vscodeapi.registerCommand(
      'trellisd.setApiKey',
      act('set the API key', async () => {
        const key = await vscodeapi.showInputBox({
          title: "trellisd: the model provider's API key",
          prompt: 'Kept in VS Code\'s secret storage and given to the daemon when it starts. Empty: forget it.',
          password: true,
          ignoreFocusOut: true,
        });
        if (key === undefined) {
          return;
        }
        if (key.trim()) {
          await context.secrets.store(API_KEY_SECRET, key.trim());
        } else {
          await context.secrets.delete(API_KEY_SECRET);
        }
        if (!controller.isRunning) {
          await daemon.stop(); // the next action starts it with the new key
        }
      }),
    ),
    vscodeapi.onDidChangeConfiguration((event) => {
      if (event.affectsConfiguration('trellisd') && !controller.isRunning && daemon.isRunning) {
        log.info('the trellisd settings changed: the daemon restarts on the next action');
        void daemon.stop();
      }
    }),
  );
  void vscodeapi.setContext('trellisd.running', false);
  log.info(`trellisd extension ${context.extension.packageJSON.version ?? ''} activated`);
  // After a reload the window reattaches to its session, and to the turn still running in the
  // shared daemon, if one is.
  const remembered = context.workspaceState.get<string>(SESSION_KEY);
  context.subscriptions.push(
    controller.onDidChangeSession((session) => void context.workspaceState.update(SESSION_KEY, session?.sessionId)),
  );
  if (remembered) {
    controller.reopenSession(remembered).then(
      () => log.info(`reopened session ${remembered}, open in this workspace before`),
      (error) => log.warn(`could not reopen session ${remembered}: ${messageOf(error)}`),
    );
  }
}

export async function deactivate(): Promise<void> {
  await client?.close();
  client = undefined;
}
