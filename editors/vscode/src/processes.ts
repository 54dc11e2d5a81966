/**
 * The **Processes** view, shown once the open session has one: the session's processes that outlive a call (`start_process`),
 * as session/processes lists them: the command line, running or how it ended, the turn that
 * started it; a stop button on each running one (session/process/stop); and what each printed,
 * live (session/processOutput), in an output channel of its own. The list is read again when the
 * session changes and when a start_process or stop_process call ends; a row says how its process
 * ended as soon as it does (session/processExited). A process's output opened for the first time
 * is read back from the daemon (session/process/output), so what it printed before this window
 * followed the session shows too.
 */

import * as vscode from 'vscode';

import type { Extension } from './features';
import { Method, Process, ProcessExitedParams, ProcessOutputParams } from './protocol';
import type { SessionController } from './session';
import * as vscodeapi from './vscodeapi';

/** The tools whose calls change the list. */
const PROCESS_TOOLS = new Set(['start_process', 'stop_process']);

/** "running", "exited 0", "killed by signal 15". */
export function processState(p: Process): string {
  if (p.running) {
    return 'running';
  }
  if (p.exitCode === null) {
    return 'ended';
  }
  return p.exitCode < 0 ? `killed by signal ${-p.exitCode}` : `exited ${p.exitCode}`;
}

/** The command line as a person types it. */
export function commandLine(argv: readonly string[]): string {
  return argv.map((w) => (w === '' || /[\s"'\\$]/.test(w) ? JSON.stringify(w) : w)).join(' ');
}

export function processItem(p: Process): vscode.TreeItem {
  const item = new vscode.TreeItem(commandLine(p.argv));
  item.id = `process:${p.processId}`;
  const turn = p.turnId ? ` · turn ${p.turnId.slice(0, 8)}` : '';
  item.description = `${processState(p)}${turn}`;
  item.tooltip = `${commandLine(p.argv)}\nin ${p.cwd}\nstarted ${p.startedAt}${p.turnId ? ` by turn ${p.turnId}` : ''}\n${processState(p)}`;
  item.iconPath = new vscode.ThemeIcon(p.running ? 'play-circle' : 'circle-outline');
  item.contextValue = p.running ? 'process-running' : 'process-ended';
  item.command = { command: 'trellisd.showProcessOutput', title: 'Show Output', arguments: [p] };
  return item;
}

export class ProcessTreeProvider implements vscode.TreeDataProvider<Process> {
  private readonly changed = new vscode.EventEmitter<Process | undefined | void>();
  readonly onDidChangeTreeData = this.changed.event;
  processes: Process[] = [];

  show(processes: Process[]): void {
    this.processes = processes;
    this.changed.fire();
  }

  /** A process ended: its row says how (added when the list did not have it yet). */
  exited(p: ProcessExitedParams): void {
    const { sessionId: _, ...ended } = p;
    const at = this.processes.findIndex((q) => q.processId === p.processId);
    this.show(at < 0 ? [...this.processes, ended] : this.processes.map((q, i) => (i === at ? ended : q)));
  }

  getTreeItem(p: Process): vscode.TreeItem {
    return processItem(p);
  }

  getChildren(p?: Process): Process[] {
    return p ? [] : this.processes;
  }

  dispose(): void {
    this.changed.dispose();
  }
}

/** Each process's output channel, made when it first prints or is shown. */
export class ProcessOutputs {
  private readonly channels = new Map<string, vscode.OutputChannel>();
  channel(processId: string, argv?: readonly string[]): vscode.OutputChannel {
    let channel = this.channels.get(processId);
    if (!channel) {
      channel = vscodeapi.createOutputChannel(`trellisd process ${argv ? commandLine(argv).slice(0, 40) : processId.slice(0, 8)}`);
      this.channels.set(processId, channel);
    }
    return channel;
  }

  print(p: ProcessOutputParams, argv?: readonly string[]): void {
    this.channel(p.processId, argv).append(p.text);
  }

  /** The processes whose output was read back from the daemon. */
  private readonly readBack = new Set<string>();

  /** The first time a process's output is opened, what it printed so far (session/process/output)
   * replaces what came live, which it holds: the output of a process started before this window
   * followed the session. */
  async readBackOnce(controller: SessionController, p: Process): Promise<void> {
    const sessionId = controller.session?.sessionId;
    if (!sessionId || this.readBack.has(p.processId)) {
      return;
    }
    this.readBack.add(p.processId);
    const printed = await controller.client.request(Method.processOutputRead, { sessionId, processId: p.processId });
    const gone = printed.dropped > 0 ? `(its first ${printed.dropped} bytes are gone)\n` : '';
    this.channel(p.processId, p.argv).replace(gone + printed.text);
  }

  dispose(): void {
    this.channels.forEach((c) => c.dispose());
    this.channels.clear();
  }
}

/** The open session's processes (none while no session is open). */
export async function listProcesses(controller: SessionController): Promise<Process[]> {
  const session = controller.session;
  if (!session) {
    return [];
  }
  const { processes } = await controller.client.request(Method.processes, { sessionId: session.sessionId });
  return controller.session?.sessionId === session.sessionId ? processes : [];
}

export function registerProcesses({ controller, act, log }: Extension): vscodeapi.Disposable[] {
  const provider = new ProcessTreeProvider();
  const outputs = new ProcessOutputs();
  const view = vscodeapi.createTreeView('trellisd.processes', { treeDataProvider: provider });
  const refresh = async () => {
    const processes = await listProcesses(controller);
    provider.show(processes);
    view.description = processes.length ? `${processes.filter((p) => p.running).length} running` : '';
    // the view shows once the session has a process (the conversation keeps its room until then)
    void vscodeapi.setContext('trellisd.hasProcesses', processes.length > 0);
  };
  const refreshQuietly = () => void refresh().catch((error) => log.warn(`the processes: ${String(error?.message ?? error)}`));
  const stop = async (p?: Process) => {
    const session = controller.session;
    if (!session || !p?.processId) {
      return;
    }
    const ended = await controller.client.request(Method.processStop, { sessionId: session.sessionId, processId: p.processId });
    log.info(`process ${p.processId} (${commandLine(p.argv)}) stopped: ${processState(ended)}`);
    await refresh();
  };
  const showOutput = async (p?: Process) => {
    if (p?.processId) {
      await outputs.readBackOnce(controller, p);
      outputs.channel(p.processId, p.argv).show(true);
    }
  };
  refreshQuietly();
  return [
    provider,
    view,
    outputs,
    controller.onDidChangeSession(refreshQuietly),
    controller.onDidEndToolCall((call) => PROCESS_TOOLS.has(call.tool) && refreshQuietly()),
    controller.onProcessExited((p) => {
      if (p.sessionId === controller.session?.sessionId) {
        provider.exited(p);
        view.description = `${provider.processes.filter((q) => q.running).length} running`;
      }
    }),
    controller.onProcessOutput((p) => {
      if (p.sessionId === controller.session?.sessionId) {
        outputs.print(p, provider.processes.find((q) => q.processId === p.processId)?.argv);
      }
    }),
    vscodeapi.registerCommand('trellisd.refreshProcesses', act('list the processes', refresh)),
    vscodeapi.registerCommand('trellisd.stopProcess', act('stop the process', stop)),
    vscodeapi.registerCommand('trellisd.showProcessOutput', act('show the output', showOutput)),
  ];
}
