/**
 * activate: builds the connection to the daemon, the session controller, the chat view and the
 * turn tree, and registers each feature's commands (one file each). Every command runs through
 * `act` (features.ts), which shows a failure as a message a person understands, with the log one
 * click away.
 */

import * as vscode from 'vscode';

import { childCommands, registerChildren } from './children';
import { DaemonClient, Log } from './client';
import { ChatViewProvider } from './chatView';
import { registerComposer } from './composer';
import { daemonCommand, initializationOptions, newSessionPolicy, readSettings } from './config';
import { registerCustomCommands } from './customCommands';
import { API_KEY_SECRET, registerDaemonCommands } from './daemonCommands';
import { messageOf } from './errors';
import { acting, Extension } from './features';
import { registerHooks } from './hooks';
import { ChannelLog } from './log';
import { registerModes } from './modes';
import { registerPlan } from './planView';
import { registerProcesses } from './processes';
import { registerPrompting, sender } from './prompting';
import { contentProvider, SCHEME } from './proposed';
import { SessionController } from './session';
import { registerSessionStart, sessionStart } from './sessionStart';
import { registerSpending } from './spending';
import { registerTurnCommands } from './turnCommands';
import { TurnTreeProvider } from './turnTree';
import { registerView } from './view';
import * as vscodeapi from './vscodeapi';
import { registerWalls } from './walls';
import { registerWorktrees, worktreeCommands } from './worktrees';

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
  const controller = new SessionController(client, log, showLog);
  controller.mcpServers = () => settings().mcpServers;
  controller.openPolicy = () => newSessionPolicy(settings());
  const ext: Extension = {
    context,
    daemon: client,
    controller,
    log,
    settings,
    showLog,
    act: acting(log, showLog),
    focusChat: () => vscodeapi.executeCommand(`${ChatViewProvider.viewId}.focus`),
  };
  const { act } = ext;

  const starting = sessionStart(ext);
  const send = sender(ext, starting);
  const children = childCommands(ext);
  const tree = new TurnTreeProvider(controller, (error) => log.warn(`the turn tree: ${messageOf(error)}`));
  const chat = new ChatViewProvider(context.extensionUri, controller, {
    send: act('send', send),
    cancel: act('cancel', () => controller.cancel()),
    queue: act('queue a prompt', (text: string) => controller.queuePrompt(text.trim())),
    unqueue: act('drop a queued prompt', (queueId: string) => controller.unqueue(queueId)),
    start: act('start a session', starting.start),
    reopen: act('reopen a session', starting.reopen),
    earlier: act('load earlier turns', () => controller.loadEarlier()),
    openSession: act('open a child session', children.open),
    showLog,
  });

  context.subscriptions.push(
    channel,
    tree,
    { dispose: () => controller.dispose() },
    vscodeapi.registerWebviewViewProvider(ChatViewProvider.viewId, chat),
    vscodeapi.createTreeView('trellisd.turns', { treeDataProvider: tree, showCollapseAll: true }),
    controller.onDidChangeSession(() => void tree.refresh()),
    controller.onDidChangeRunning((running) => void vscodeapi.setContext('trellisd.running', running)),
    vscodeapi.registerTextDocumentContentProvider(SCHEME, contentProvider),
    vscodeapi.registerCommand('trellisd.refreshTurns', () => tree.refresh()),
    vscodeapi.registerCommand('trellisd.loadEarlierTurns', act('load earlier turns', () => controller.loadEarlier())),
    ...registerSpending(ext),
    ...registerSessionStart(ext, starting),
    ...registerPrompting(ext, starting, send),
    ...registerTurnCommands(ext),
    ...registerDaemonCommands(ext, () => tree.refresh()),
    ...registerWorktrees(ext, worktreeCommands(ext, starting.pickFolder)),
    ...registerChildren(ext, children),
    ...registerWalls(ext),
    ...registerPlan(ext),
    ...registerModes(ext),
    ...registerComposer(ext),
    ...registerProcesses(ext),
    ...registerCustomCommands(ext),
    ...registerHooks(ext),
    ...registerView(ext),
  );
  void vscodeapi.setContext('trellisd.running', false);
  log.info(`trellisd extension ${context.extension.packageJSON.version ?? ''} activated`);
  reattach(context, controller, log);
}

/** After a reload the window reattaches to its session, and to the turn still running in the
 * shared daemon, if one is; the session open from now on is remembered for the next reload. */
function reattach(context: vscode.ExtensionContext, controller: SessionController, log: Log): void {
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
