/**
 * The connection to the daemon: a trellisd child process spoken to in JSON-RPC over its stdin
 * and stdout (LSP base-protocol framing, by vscode-jsonrpc), its stderr copied to the log.
 *
 * The process is started on first use and again on the first use after it exited, so a
 * daemon that died is back on the next action. This module knows nothing of VS Code.
 */

import { ChildProcess, spawn } from 'child_process';
import * as readline from 'readline';
import * as rpc from 'vscode-jsonrpc/node';

import {
  ConnectionLost,
  DaemonError,
  describeExit,
  ExitInfo,
  lastWords,
  StartError,
  TrellisError,
} from './errors';
import { clientRequestType, notificationType, requestType, shutdownType } from './methods';
import {
  ApprovalParams,
  ApprovalResult,
  DequeuedParams,
  InitializationOptions,
  InitializeResult,
  Method,
  ModeChangedParams,
  PlanParams,
  ProcessExitedParams,
  ProcessOutputParams,
  PROTOCOL_NAME,
  PROTOCOL_VERSION,
  Queued,
  SteeredParams,
  StepParams,
  ThoughtParams,
  TokenParams,
  ToolCallParams,
  ToolOutputParams,
  TurnEndedParams,
  UsageParams,
} from './protocol';
import type { RequestMethod, RequestParams, RequestResult } from './protocolTypes';

export interface DaemonCommand {
  command: string;
  args: string[];
  cwd?: string;
  env?: NodeJS.ProcessEnv;
}

export interface Log {
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
  /** A line the daemon wrote to its stderr. */
  daemon(line: string): void;
}

/** What the daemon tells the editor on its own: notifications and its one request. (Properties,
 * not methods, so that a handler of other params is an error, not a bivariant match.) */
export interface DaemonHandlers {
  token?: (params: TokenParams) => void;
  thought?: (params: ThoughtParams) => void;
  processOutput?: (params: ProcessOutputParams) => void;
  processExited?: (params: ProcessExitedParams) => void;
  step?: (params: StepParams) => void;
  steered?: (params: SteeredParams) => void;
  toolCall?: (params: ToolCallParams) => void;
  toolOutput?: (params: ToolOutputParams) => void;
  usage?: (params: UsageParams) => void;
  queued?: (params: Queued) => void;
  dequeued?: (params: DequeuedParams) => void;
  turnEnded?: (params: TurnEndedParams) => void;
  plan?: (params: PlanParams) => void;
  modeChanged?: (params: ModeChangedParams) => void;
  requestApproval?: (params: ApprovalParams, token: rpc.CancellationToken) => Promise<ApprovalResult>;
}

export interface ClientOptions {
  /** Read at each start, so a changed setting applies from the next start on. */
  command(): DaemonCommand;
  initializationOptions(): InitializationOptions | Promise<InitializationOptions>;
  handlers?: DaemonHandlers;
  log: Log;
  clientInfo?: { name: string; version?: string };
  /** How long the daemon may take to answer initialize. */
  startTimeoutMs?: number;
}

/** What LSP's initialize carries besides the schema's initializationOptions. */
interface LspInitializeParams {
  processId: number;
  clientInfo: { name: string; version?: string };
  rootUri: null;
  capabilities: Record<string, never>;
}

const STDERR_TAIL = 30;
const PENDING_RESPONSE_REJECTED = -32097;
const CONNECTION_INACTIVE = -32096;

interface Running {
  process: ChildProcess;
  connection: rpc.MessageConnection;
  /** Settles when the process has exited and its pipes are closed; never rejects. */
  closed: Promise<ExitInfo>;
  /** Set as soon as the process has closed. */
  exit?: ExitInfo;
  stopping: boolean;
}

export class DaemonClient {
  private running?: Running;
  private starting?: Promise<InitializeResult>;
  private stopping?: Promise<void>;
  /** Set by close(): nothing starts a daemon again. */
  private closedForGood = false;
  private result?: InitializeResult;
  private readonly exitListeners = new Set<(exit: ExitInfo, wasReady: boolean) => void>();
  /** Counts successful starts: a session opened under an older generation must be reopened. */
  generation = 0;
  lastExit?: ExitInfo;

  private handlers: DaemonHandlers;

  constructor(private readonly options: ClientOptions) {
    this.handlers = options.handlers ?? {};
  }

  /** Who answers the daemon's notifications and requests, from the next message on. */
  setHandlers(handlers: DaemonHandlers): void {
    this.handlers = handlers;
  }

  get isRunning(): boolean {
    return this.running !== undefined && this.starting === undefined;
  }

  get initializeResult(): InitializeResult | undefined {
    return this.result;
  }

  get pid(): number | undefined {
    return this.running?.process.pid;
  }

  /** Called whenever a daemon process exits, asked to or not; wasReady: it had answered
   * initialize, so it was not a failed start. */
  onDidExit(listener: (exit: ExitInfo, wasReady: boolean) => void): { dispose(): void } {
    this.exitListeners.add(listener);
    return { dispose: () => this.exitListeners.delete(listener) };
  }

  /** Start the daemon unless it runs; concurrent callers share one start. A start asked for
   * while the daemon is being stopped waits for the stop, then starts a new one. */
  start(): Promise<InitializeResult> {
    if (this.closedForGood) {
      return Promise.reject(new ConnectionLost('the trellisd client was closed: nothing more is sent', this.lastExit));
    }
    if (this.stopping) {
      return this.stopping.then(() => this.start());
    }
    if (this.running && !this.starting && this.result) {
      return Promise.resolve(this.result);
    }
    if (!this.starting) {
      this.starting = this.spawnAndInitialize().finally(() => {
        this.starting = undefined;
      });
    }
    return this.starting;
  }

  /** Send a request, starting the daemon first if needed; errors come out translated. The method
   * picks the params and the result (protocolTypes.ts, generated from protocol/schema.json). */
  async request<M extends RequestMethod>(
    method: M,
    params: RequestParams<M>,
    token?: rpc.CancellationToken,
  ): Promise<RequestResult<M>> {
    await this.start();
    const running = this.running;
    if (!running) {
      throw new ConnectionLost(lostMessage(this.lastExit), this.lastExit);
    }
    try {
      return await Promise.race([
        running.connection.sendRequest(requestType(method), params, token),
        running.closed.then((exit): never => {
          throw new ConnectionLost(lostMessage(exit), exit);
        }),
      ]);
    } catch (error) {
      throw this.translate(error, running);
    }
  }

  /** Stop the daemon, and refuse every request from now on instead of starting a new one:
   * the extension is going, and a late request must not leave a daemon behind it. */
  close(timeoutMs = 3000): Promise<void> {
    this.closedForGood = true;
    return this.stop(timeoutMs);
  }

  /** shutdown, exit, and wait for the process to end; kill it if it does not. */
  stop(timeoutMs = 3000): Promise<void> {
    if (!this.stopping) {
      this.stopping = this.shutdown(timeoutMs).finally(() => {
        this.stopping = undefined;
      });
    }
    return this.stopping;
  }

  private async shutdown(timeoutMs: number): Promise<void> {
    await this.starting?.catch(() => undefined);
    const running = this.running;
    if (!running) {
      return;
    }
    running.stopping = true;
    const timeout = (ms: number) => new Promise<'timeout'>((r) => setTimeout(() => r('timeout'), ms));
    try {
      await Promise.race([running.connection.sendRequest(shutdownType), running.closed, timeout(timeoutMs)]);
      await running.connection.sendNotification(Method.exit);
    } catch {
      // the daemon is going anyway
    }
    if ((await Promise.race([running.closed, timeout(timeoutMs)])) === 'timeout') {
      this.options.log.warn('trellisd did not exit when asked; stopping it');
      running.process.kill('SIGTERM');
      if ((await Promise.race([running.closed, timeout(timeoutMs)])) === 'timeout') {
        running.process.kill('SIGKILL');
        await running.closed;
      }
    }
    // exited() runs on the same close; make sure it has before a new start
    await Promise.resolve();
  }

  private async spawnAndInitialize(): Promise<InitializeResult> {
    const { log } = this.options;
    const command = this.options.command();
    const options = await this.options.initializationOptions();
    log.info(`starting ${[command.command, ...command.args].join(' ')}`);
    const running = await this.spawn(command);
    this.running = running;
    // The schema's params, and LSP's that pygls reads besides.
    const initializeParams: RequestParams<typeof Method.initialize> & LspInitializeParams = {
      processId: process.pid,
      clientInfo: this.options.clientInfo ?? { name: 'trellisd-vscode' },
      rootUri: null,
      capabilities: {},
      initializationOptions: options,
    };
    const timeoutMs = this.options.startTimeoutMs ?? 30_000;
    let timer: NodeJS.Timeout | undefined;
    try {
      const result = await Promise.race([
        running.connection.sendRequest(requestType(Method.initialize), initializeParams),
        running.closed.then((exit): never => {
          throw new StartError(startFailure(command, exit));
        }),
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () =>
              reject(
                new StartError(
                  `trellisd did not answer within ${Math.round(timeoutMs / 1000)} s of starting` +
                    ` (${command.command}); is trellisd.command the trellisd daemon?`,
                ),
              ),
            timeoutMs,
          );
        }),
      ]);
      const name = result?.serverInfo?.name;
      if (name !== PROTOCOL_NAME) {
        throw new StartError(
          `${command.command} is not the trellisd daemon: it answered as ${name ?? 'an unnamed server'}`,
        );
      }
      await running.connection.sendNotification(Method.initialized, {});
      this.result = result;
      this.generation += 1;
      const version = result.capabilities?.experimental?.trellisd?.protocolVersion ?? '?';
      if (version !== PROTOCOL_VERSION) {
        log.warn(`trellisd speaks protocol ${version}; this extension was written for ${PROTOCOL_VERSION}`);
      }
      log.info(`trellisd ${result.serverInfo?.version ?? ''} is running (pid ${running.process.pid}, protocol ${version})`);
      return result;
    } catch (error) {
      const diedByItself = running.exit;
      running.stopping = true;
      running.process.kill('SIGKILL');
      await running.closed;
      if (this.running === running) {
        this.running = undefined;
      }
      if (diedByItself) {
        throw new StartError(startFailure(command, diedByItself));
      }
      throw error instanceof TrellisError
        ? error
        : new StartError(`trellisd could not start: ${(error as Error)?.message ?? String(error)}`);
    } finally {
      clearTimeout(timer);
    }
  }

  private async spawn(command: DaemonCommand): Promise<Running> {
    const { log } = this.options;
    let child: ChildProcess;
    try {
      child = spawn(command.command, command.args, {
        cwd: command.cwd,
        env: { ...process.env, ...command.env },
        stdio: ['pipe', 'pipe', 'pipe'],
      });
    } catch (error) {
      throw new StartError(spawnFailure(command, error));
    }
    await new Promise<void>((resolve, reject) => {
      child.once('spawn', resolve);
      child.once('error', (error) => reject(new StartError(spawnFailure(command, error))));
    });
    const stderr: string[] = [];
    readline.createInterface({ input: child.stderr! }).on('line', (line) => {
      stderr.push(line);
      if (stderr.length > STDERR_TAIL) {
        stderr.shift();
      }
      log.daemon(line);
    });
    child.stdin!.on('error', (error) => log.warn(`writing to trellisd failed: ${error.message}`));
    const connection = rpc.createMessageConnection(
      new rpc.StreamMessageReader(child.stdout!),
      new rpc.StreamMessageWriter(child.stdin!),
    );
    this.handle(connection);
    const running: Running = {
      process: child,
      connection,
      stopping: false,
      closed: new Promise<ExitInfo>((resolve) => {
        child.once('close', (code, signal) => {
          const exit: ExitInfo = { code, signal, stderr: [...stderr], expected: running.stopping };
          running.exit = exit;
          resolve(exit);
        });
      }),
    };
    void running.closed.then((exit) => this.exited(running, exit));
    connection.listen();
    return running;
  }

  private handle(connection: rpc.MessageConnection): void {
    const { log } = this.options;
    connection.onNotification(notificationType(Method.token), (p) => this.handlers.token?.(p));
    connection.onNotification(notificationType(Method.thought), (p) => this.handlers.thought?.(p));
    connection.onNotification(notificationType(Method.processOutput), (p) => this.handlers.processOutput?.(p));
    connection.onNotification(notificationType(Method.processExited), (p) => this.handlers.processExited?.(p));
    connection.onNotification(notificationType(Method.step), (p) => this.handlers.step?.(p));
    connection.onNotification(notificationType(Method.steered), (p) => this.handlers.steered?.(p));
    connection.onNotification(notificationType(Method.toolCall), (p) => this.handlers.toolCall?.(p));
    connection.onNotification(notificationType(Method.toolOutput), (p) => this.handlers.toolOutput?.(p));
    connection.onNotification(notificationType(Method.usage), (p) => this.handlers.usage?.(p));
    connection.onNotification(notificationType(Method.queued), (p) => this.handlers.queued?.(p));
    connection.onNotification(notificationType(Method.dequeued), (p) => this.handlers.dequeued?.(p));
    connection.onNotification(notificationType(Method.turnEnded), (p) => this.handlers.turnEnded?.(p));
    connection.onNotification(notificationType(Method.plan), (p) => this.handlers.plan?.(p));
    connection.onNotification(notificationType(Method.modeChanged), (p) => this.handlers.modeChanged?.(p));
    connection.onNotification(notificationType('window/logMessage'), (p) => log.info(`trellisd: ${p?.message}`));
    connection.onNotification(notificationType('window/showMessage'), (p) => log.warn(`trellisd: ${p?.message}`));
    connection.onRequest(clientRequestType(Method.requestApproval), async (p, token) => {
      const ask = this.handlers.requestApproval;
      if (!ask) {
        log.warn(`trellisd asked to approve ${p?.tool}, and nothing here can answer: denied`);
        return { decision: 'deny' };
      }
      return ask(p, token);
    });
    connection.onError(([error]) => log.warn(`trellisd connection: ${error.message}`));
  }

  private exited(running: Running, exit: ExitInfo): void {
    running.connection.dispose();
    const wasReady = this.running === running && this.result !== undefined;
    if (this.running === running) {
      this.running = undefined;
      this.result = undefined;
    }
    this.lastExit = exit;
    const { log } = this.options;
    if (exit.expected) {
      log.info(`trellisd ${describeExit(exit)}`);
    } else {
      log.error(`trellisd ${describeExit(exit)} unexpectedly`);
    }
    for (const listener of this.exitListeners) {
      listener(exit, wasReady);
    }
  }

  private translate(error: unknown, running: Running): unknown {
    if (error instanceof TrellisError) {
      return error;
    }
    if (error instanceof rpc.ResponseError) {
      if (error.code === PENDING_RESPONSE_REJECTED || error.code === CONNECTION_INACTIVE) {
        return new ConnectionLost(lostMessage(this.lastExit), this.lastExit);
      }
      return new DaemonError(error.message, error.code, error.data);
    }
    if (!this.running || this.running !== running) {
      return new ConnectionLost(lostMessage(this.lastExit), this.lastExit);
    }
    return error;
  }
}

export function lostMessage(exit: ExitInfo | undefined): string {
  const words = lastWords(exit);
  return (
    `The connection to trellisd was lost: the daemon ${describeExit(exit)}` +
    (words ? ` (${words})` : '') +
    '. It will be started again on your next action.'
  );
}

function startFailure(command: DaemonCommand, exit: ExitInfo): string {
  const words = lastWords(exit);
  return (
    `trellisd could not start: ${command.command} ${describeExit(exit)}` +
    (words ? `: ${words}` : '') +
    '. Its output is in the "trellisd" log.'
  );
}

function spawnFailure(command: DaemonCommand, error: unknown): string {
  const code = (error as NodeJS.ErrnoException)?.code;
  if (code === 'ENOENT') {
    return (
      `trellisd could not start: the command "${command.command}" was not found.` +
      " Set trellisd.command to the daemon's absolute path: the editor's environment may not" +
      " have your shell's PATH."
    );
  }
  if (code === 'EACCES') {
    return `trellisd could not start: "${command.command}" is not executable (check trellisd.command).`;
  }
  return `trellisd could not start: ${command.command}: ${(error as Error)?.message ?? String(error)}`;
}
