/**
 * The session the editor works in: opening and reopening it, its turns as they stream, steering
 * and cancelling the running turn, branching, answering approvals, and getting the session back
 * after the daemon was restarted. It talks to the daemon through DaemonClient and to the chat
 * view through ChatSink; nothing here draws or reads VS Code's UI but through vscodeapi.
 */

import { CancellationToken, CancellationTokenSource } from 'vscode-jsonrpc';

import { askApproval, argumentsLine } from './approval';
import { pickStep } from './forkStep';
import { earlierPage, HISTORY_PAGE, stepsOf } from './paging';
import { setPinned } from './pins';
import { askRecovery, commandText, pendingFrom } from './recovery';
import { showProposed } from './proposed';
import { DaemonClient, DaemonHandlers, Log, lostMessage } from './client';
import { Coalescer } from './coalescer';
import { ConnectionLost, DaemonError, messageOf, TrellisError } from './errors';
import { findOrigin, lineageText } from './lineage';
import { PromptQueue, QueueEntry, spendText } from './queue';
import {
  ApprovalParams,
  ApprovalResult,
  Budget,
  BudgetStatus,
  ContextEntry,
  CompactResult,
  DequeuedParams,
  ErrorCode,
  ExportResult,
  FileChange,
  McpServer,
  Grant,
  RevocableGrant,
  Method,
  PendingRecovery,
  Queued,
  RecoverResult,
  RecoveryDecision,
  Restored,
  RunningTurn,
  Session,
  SessionSummary,
  SessionTools,
  Spent,
  Step,
  SteeredParams,
  StepParams,
  TokenParams,
  ToolCallParams,
  ToolOutputParams,
  Turn,
  TurnEndedParams,
  TurnResult,
  UsageParams,
} from './protocol';
import {
  addBlock,
  appendText,
  Block,
  callChanged,
  callEnded,
  callFound,
  callPrinted,
  contextLine,
  finish,
  footerText,
  fromHistory,
  steerDelivered,
  withCommittedSteps,
  withStepTexts,
  TranscriptTurn,
  turnView,
  TurnView,
} from './transcript';
import * as vscodeapi from './vscodeapi';

export interface SessionHeader {
  sessionId: string;
  title: string;
  root: string;
  /** Where the session came from ("forked from “…” at turn 3"), when it was forked. */
  lineage?: string;
}

/** Messages to the chat webview. */
export type ToWebview =
  | { type: 'reset'; session: SessionHeader | null; turns: TurnView[]; running: boolean }
  | { type: 'turn'; turn: TurnView }
  | { type: 'running'; running: boolean }
  | { type: 'notice'; level: 'info' | 'error'; text: string }
  | { type: 'draft'; text: string }
  | { type: 'session'; session: SessionHeader }
  | { type: 'queue'; queued: QueueEntry[] }
  | { type: 'spend'; text: string | null }
  /** Whether older turns than those drawn can be loaded ("Load earlier turns"). */
  | { type: 'earlier'; more: boolean }
  /** Older turns, drawn above the others. */
  | { type: 'prepend'; turns: TurnView[]; more: boolean };

/** Messages from the chat webview. */
export type FromWebview =
  | { type: 'ready' }
  | { type: 'send'; text: string }
  | { type: 'cancel' }
  | { type: 'queue'; text: string }
  | { type: 'unqueue'; queueId: string }
  | { type: 'start' }
  | { type: 'reopen' }
  | { type: 'earlier' }
  | { type: 'showLog' };

export interface ChatSink {
  post(message: ToWebview): void;
}

const NO_VIEW: ChatSink = { post: () => undefined };

interface LiveTurn {
  turn: TranscriptTurn;
  source: CancellationTokenSource;
  done: Promise<unknown>;
  /** A turn this window did not start (another window did): followed through its
   * notifications, with no request of ours to answer when it ends. */
  followed?: { settle(): void };
}

type Listener<T> = (value: T) => void;

export class SessionController {
  session?: Session;
  /** The open session's lineage in words, shown in the view's header. */
  lineage?: string;
  private transcript: TranscriptTurn[] = [];
  /** session/history's cursor for the page before the first turn drawn; none: all are drawn. */
  historyCursor?: string;
  private loadingEarlier?: Promise<number>;
  /** The turns whose recovery question is being asked, so it is asked once at a time. */
  private readonly askingRecovery = new Set<string>();
  private live?: LiveTurn;
  /** The client generation the session was opened or reopened under. */
  private attached = -1;
  private keys = 0;
  /** A reopen is under way to show a turn another window started. */
  private catchingUp = false;
  private catchUpAgain = false;
  private view: ChatSink = NO_VIEW;
  private readonly coalescer: Coalescer;
  private readonly sessionListeners = new Set<Listener<Session | undefined>>();
  private readonly runningListeners = new Set<Listener<boolean>>();
  private readonly usageListeners = new Set<Listener<UsageParams>>();
  /** The open session's last `session/usage`: its context meter and spend. */
  usage?: UsageParams;
  private readonly exitSubscription: { dispose(): void };
  /** The prompts queued behind the running turn (from any window), first to run first. */
  readonly queue = new PromptQueue();
  /** The session's budget (null: none) and what its turns have spent, once known. */
  budget: Budget | null = null;
  spent?: Spent;
  /** The MCP servers of the user's settings: given to a session again when it is reopened
   * (a daemon started since it was opened has only the config file's and the project's). */
  mcpServers: () => McpServer[] = () => [];

  readonly handlers: DaemonHandlers = {
    token: (p) => this.onToken(p),
    step: (p) => this.onStep(p),
    steered: (p) => this.onSteered(p),
    toolCall: (p) => this.onToolCall(p),
    toolOutput: (p) => this.onToolOutput(p),
    usage: (p) => this.onUsage(p),
    queued: (p) => this.onQueued(p),
    dequeued: (p) => this.onDequeued(p),
    turnEnded: (p) => this.onTurnEnded(p),
    requestApproval: (p, token) => this.onApproval(p, token),
  };

  constructor(
    private readonly client: DaemonClient,
    private readonly log: Log,
    private readonly showLog: () => void = () => undefined,
    flushIntervalMs = 40,
  ) {
    client.setHandlers(this.handlers);
    this.coalescer = new Coalescer((key) => this.draw(key), flushIntervalMs);
    this.exitSubscription = client.onDidExit((exit, wasReady) => {
      const live = this.live;
      if (live?.followed) {
        // Whether the turn goes on without us is the daemon's to say: reopening shows it.
        live.turn.error = `${lostMessage(exit)}; reopen the session to see how the turn went on`;
        this.stopFollowing(live, 'interrupted');
      }
      if (!exit.expected && wasReady && !this.live) {
        void this.showError(lostMessage(exit));
      }
    });
  }

  get isRunning(): boolean {
    return this.live !== undefined;
  }

  onDidChangeSession(listener: Listener<Session | undefined>): { dispose(): void } {
    this.sessionListeners.add(listener);
    return { dispose: () => this.sessionListeners.delete(listener) };
  }

  onDidChangeUsage(listener: Listener<UsageParams>): { dispose(): void } {
    this.usageListeners.add(listener);
    return { dispose: () => this.usageListeners.delete(listener) };
  }

  private onUsage(p: UsageParams): void {
    if (p.sessionId !== this.session?.sessionId) {
      return;
    }
    this.usage = p;
    for (const listener of this.usageListeners) {
      listener(p);
    }
  }

  /** Summarize the oldest turns of the session's branch (`session/compact`): from then on they
   * are sent as that summary; the transcript keeps them as they were. */
  async compact(): Promise<CompactResult> {
    const session = this.requireSession();
    this.refuseIfRunning('compact the session');
    await this.ensureAttached();
    const result = await this.client.request(Method.compact, { sessionId: session.sessionId });
    this.log.info(
      result.compacted
        ? `session ${session.sessionId} compacted: the first ${result.turns} turn(s) now sent as a summary`
        : `session ${session.sessionId}: nothing to compact`,
    );
    return result;
  }

  onDidChangeRunning(listener: Listener<boolean>): { dispose(): void } {
    this.runningListeners.add(listener);
    return { dispose: () => this.runningListeners.delete(listener) };
  }

  attachView(view: ChatSink): void {
    this.view = view;
    this.postReset();
  }

  detachView(view: ChatSink): void {
    if (this.view === view) {
      this.view = NO_VIEW;
      this.log.info('the chat view was closed');
    }
  }

  // sessions

  private serversParam(): { mcpServers?: McpServer[] } {
    const mcpServers = this.mcpServers();
    return mcpServers.length ? { mcpServers } : {};
  }

  async openSession(root: string, title?: string, mcpServers: McpServer[] = []): Promise<Session> {
    this.leaveFollowed();
    this.refuseIfRunning('start another session');
    await this.client.start();
    const session = await this.client.request(Method.open, {
      root,
      ...(title ? { title } : {}),
      ...(mcpServers.length ? { mcpServers } : {}),
    });
    this.adopt(session, []);
    this.log.info(`session ${session.sessionId} opened over ${session.root}`);
    return session;
  }

  async reopenSession(sessionId: string): Promise<Session> {
    this.leaveFollowed();
    this.refuseIfRunning('reopen another session');
    await this.client.start();
    const { history, running, integrity, historyCursor, ...session } = await this.client.request(
      Method.reopen,
      { sessionId, limit: HISTORY_PAGE, ...this.serversParam() },
    );
    this.adopt(session, history, historyCursor);
    this.log.info(
      `session ${session.sessionId} reopened with ${history.length} turn(s) of its path${historyCursor ? ' (earlier ones on demand)' : ''}`,
    );
    if (integrity === 'broken') {
      const text = "This session's log is broken: its store was changed outside trellisd.";
      this.view.post({ type: 'notice', level: 'error', text });
      void this.showError(text);
    }
    if (running) {
      this.follow(running);
    }
    this.offerRecovery(session.recovery);
    return session;
  }

  /** Draw the page of turns before the first one drawn (session/history with the cursor);
   * the number of turns added (0: there were none). */
  loadEarlier(): Promise<number> {
    this.loadingEarlier ??= this.fetchEarlier().finally(() => (this.loadingEarlier = undefined));
    return this.loadingEarlier;
  }

  private async fetchEarlier(): Promise<number> {
    const session = this.session;
    const cursor = this.historyCursor;
    if (!session || !cursor) {
      return 0;
    }
    await this.ensureAttached();
    const page = await earlierPage(this.client, session.sessionId, cursor);
    if (this.session?.sessionId !== session.sessionId || this.historyCursor !== cursor) {
      return 0; // another session, or the history was read again meanwhile
    }
    const known = new Set(this.transcript.map((t) => t.turnId));
    const turns = page.turns.filter((t) => !known.has(t.turnId)).map((t) => fromHistory(t));
    this.transcript.unshift(...turns);
    this.historyCursor = page.cursor;
    this.coalescer.flush();
    this.view.post({ type: 'prepend', turns: turns.map(turnView), more: !!page.cursor });
    this.log.info(`loaded ${turns.length} earlier turn(s) of session ${session.sessionId}`);
    void this.fillSteps(page.turns);
    return turns.length;
  }

  /** Every step's text of turns drawn from the history (their reply is the last step's). */
  private async fillSteps(turns: Turn[]): Promise<void> {
    if (!turns.length) {
      return;
    }
    const session = this.session;
    let steps: Map<string, Step[]>;
    try {
      steps = await stepsOf(this.client, turns);
    } catch (error) {
      this.log.warn(`could not read the steps of the history: ${messageOf(error)}`);
      return;
    }
    if (this.session !== session) {
      return;
    }
    for (const turn of turns) {
      const shown = this.transcript.find((t) => t.turnId === turn.turnId);
      const found = steps.get(turn.turnId);
      if (shown && found && shown.outcome !== 'running' && withStepTexts(shown, found)) {
        this.postTurn(shown);
      }
    }
  }

  async listSessions(limit = 200): Promise<SessionSummary[]> {
    const result = await this.client.request(Method.list, { limit });
    return result.sessions;
  }

  /** The current session's whole tree, for the turn tree view. */
  async turnTree(): Promise<{ turns: Turn[]; head: string | null; pinned: string[] } | undefined> {
    if (!this.session) {
      return undefined;
    }
    await this.ensureAttached();
    const session = this.session;
    const { turns } = await this.client.request(Method.turns, { sessionId: session.sessionId });
    return { turns, head: session.head, pinned: session.pinned ?? [] };
  }

  // turns

  /** The input box: a prompt starts a turn; while a turn runs, it steers that turn. */
  async send(text: string): Promise<void> {
    const trimmed = text.trim();
    if (!trimmed) {
      return;
    }
    if (this.live) {
      await this.steer(trimmed);
    } else {
      const active = this.attachActiveFile ? this.activeFile() : undefined;
      await this.turn(trimmed, active ? [active] : undefined);
    }
  }

  /** With it on, a prompt from the input box goes with the active editor's file. */
  attachActiveFile = false;

  /** The active editor's file as context; set by the extension (it reads the editor). */
  activeFile: () => ContextEntry | undefined = () => undefined;

  toggleAttachActiveFile(): boolean {
    this.attachActiveFile = !this.attachActiveFile;
    this.log.info(`the active file ${this.attachActiveFile ? 'goes' : 'no longer goes'} with each prompt`);
    return this.attachActiveFile;
  }

  /** Run one turn; the reply streams into the view. Errors are shown, not thrown.
   * `context`: what the editor attaches to the prompt (a selection, a file). */
  async turn(prompt: string, context?: ContextEntry[]): Promise<TurnResult | undefined> {
    const session = this.requireSession();
    if (this.live) {
      throw new TrellisError('A turn is running: steer it or cancel it first.');
    }
    const turn: TranscriptTurn = { key: `local-${++this.keys}`, prompt, blocks: [], outcome: 'running' };
    if (context?.length) {
      const root = session.root.endsWith('/') ? session.root : `${session.root}/`;
      const relative = (p: string) => (p.startsWith(root) ? p.slice(root.length) : p);
      const text = contextLine(context, relative);
      addBlock(turn, { kind: 'notice', level: 'info', text });
      this.log.info(`prompt ${text}`);
    }
    this.transcript.push(turn);
    return this.run(turn, true, async (token) => {
      await this.ensureAttached();
      const stepMode = this.stepMode || undefined;
      const params = { sessionId: session.sessionId, prompt, stepMode, ...(context?.length ? { context } : {}) };
      return this.client.request(Method.turn, params, token);
    });
  }

  /** Step mode: each turn pauses after every step, and a resume takes one more. */
  stepMode = false;

  toggleStepMode(): boolean {
    this.stepMode = !this.stepMode;
    this.log.info(`step mode ${this.stepMode ? 'on' : 'off'}`);
    return this.stepMode;
  }

  /** Pause the running turn: the step it is taking completes, then it ends `paused`. */
  async pause(): Promise<void> {
    const session = this.session;
    if (!this.live || !session) {
      return;
    }
    this.log.info('pausing the running turn');
    const result = await this.client.request(Method.pause, { sessionId: session.sessionId });
    if (!result.pausing) {
      this.log.info('nothing was paused: the turn had ended');
    }
  }

  /** Go on with a turn that was paused or interrupted (its daemon stopped mid-turn), from its last step. */
  async resume(turnId: string): Promise<TurnResult | undefined> {
    const session = this.requireSession();
    this.refuseIfRunning('resume another turn');
    await this.ensureAttached();
    let turn = this.transcript.find((t) => t.turnId === turnId);
    if (!turn) {
      const { turns } = await this.client.request(Method.turns, { sessionId: session.sessionId });
      const stored = turns.find((t) => t.turnId === turnId);
      if (!stored) {
        throw new TrellisError(`turn ${turnId} is not in this session`);
      }
      turn = fromHistory(stored);
      this.transcript.push(turn);
    }
    turn.outcome = 'running';
    turn.error = undefined;
    const resumed = turn;
    this.log.info(`resuming turn ${turnId}`);
    return this.run(resumed, false, (token) =>
      this.client.request(
        Method.resume,
        { sessionId: session.sessionId, turnId, stepMode: this.stepMode || undefined },
        token,
      ),
    );
  }

  /** Stream a turn's run into the view until it ends; a new turn becomes the head. */
  private async run(
    turn: TranscriptTurn,
    movesHead: boolean,
    request: (token: CancellationToken) => Promise<TurnResult>,
  ): Promise<TurnResult | undefined> {
    const session = this.requireSession();
    const source = new CancellationTokenSource();
    let settle: () => void = () => undefined;
    const live: LiveTurn = { turn, source, done: new Promise<void>((r) => (settle = r)) };
    this.live = live;
    this.postTurn(turn);
    this.fireRunning();
    try {
      const result = await request(source.token);
      this.coalescer.flush();
      finish(turn, result);
      this.takeSpend(result);
      if (movesHead && this.session?.sessionId === session.sessionId) {
        this.session.head = result.turnId;
        if (!this.session.title) {
          // the daemon names an untitled session after its first prompt's first line
          this.session.title = turn.prompt.split('\n', 1)[0].slice(0, 60);
          this.view.post({ type: 'session', session: header(this.session, this.lineage) });
        }
      }
      this.log.info(`turn ${result.turnId} ${footerText(turn)}; reply: ${excerpt(result.reply)}`);
      if (result.outcome === 'error') {
        void this.showError(`trellisd: the turn failed: ${result.error ?? 'the daemon gave no reason'}`);
      }
      if (result.recovery) {
        this.offerRecovery({ turnId: result.turnId, runId: result.runId, tool: result.recovery.tool, argv: result.recovery.argv });
      }
      return result;
    } catch (error) {
      this.coalescer.flush();
      const pending = error instanceof DaemonError && error.code === ErrorCode.conflict ? pendingFrom(error.data) : undefined;
      if (pending) {
        // refused until a person decides about a command killed mid-run
        turn.outcome = 'error';
        turn.error = `not run: ${messageOf(error)}`;
        this.log.info(`turn refused: ${messageOf(error)}`);
        this.offerRecovery(pending);
      } else if (error instanceof DaemonError && error.code === ErrorCode.requestCancelled) {
        turn.outcome = 'cancelled';
        this.log.info('turn cancelled');
      } else {
        turn.outcome = 'error';
        turn.error = messageOf(error);
        this.log.error(`turn failed: ${turn.error}`);
        void this.showError(turn.error, error, turn.turnId);
      }
      return undefined;
    } finally {
      this.live = undefined;
      source.dispose();
      this.postTurn(turn);
      this.fireRunning();
      this.fireSession();
      settle();
    }
  }

  /** Make this daemon the session's writer, whoever held it (another window, say). */
  async takeover(): Promise<Session> {
    const current = this.requireSession();
    await this.ensureAttached();
    const session = await this.client.request(Method.takeover, { sessionId: current.sessionId });
    this.session = session;
    this.fireSession();
    this.log.info(`session ${session.sessionId} taken over by this window`);
    return session;
  }

  /** Steer the running turn: the text reaches the model at its next step. */
  async steer(text: string): Promise<void> {
    const session = this.requireSession();
    const live = this.live;
    if (!live) {
      await this.turn(text);
      return;
    }
    const clientMsgId = `steer-${Date.now().toString(36)}-${++this.keys}`;
    const block: Extract<Block, { kind: 'steer' }> = { kind: 'steer', clientMsgId, text, state: 'sending' };
    live.turn.blocks.push(block);
    this.coalescer.mark(live.turn.key);
    try {
      await this.client.request(Method.steer, { sessionId: session.sessionId, text, clientMsgId });
      if (block.state === 'sending') {
        block.state = 'queued';
      }
      this.log.info(`steer ${clientMsgId} queued: ${excerpt(text)}`);
    } catch (error) {
      block.state = 'failed';
      if (error instanceof DaemonError && error.code === ErrorCode.notRunning) {
        block.note = 'the turn had ended: sent as a new prompt';
        this.coalescer.mark(live.turn.key);
        if (live.followed) {
          await this.checkFollowed(live);
        }
        await live.done;
        await this.turn(text);
        return;
      }
      block.note =
        error instanceof DaemonError && error.code === ErrorCode.methodNotFound
          ? 'this trellisd cannot steer a running turn'
          : `not sent: ${messageOf(error)}`;
      this.log.error(`steer failed: ${messageOf(error)}`);
      void this.showError(messageOf(error));
    }
    this.coalescer.mark(live.turn.key);
  }

  /** Cancel the running turn; the daemon records it as cancelled and ends it. */
  async cancel(): Promise<void> {
    const live = this.live;
    const session = this.session;
    if (!live || !session) {
      return;
    }
    this.log.info('cancelling the running turn');
    try {
      const result = await this.client.request(Method.cancel, { sessionId: session.sessionId });
      if (!result.cancelled) {
        this.log.info('nothing was cancelled: the turn had ended');
      }
      if (live.followed) {
        await this.checkFollowed(live);
      }
    } catch (error) {
      if (error instanceof DaemonError && error.code === ErrorCode.methodNotFound) {
        live.source.cancel(); // a daemon without session/cancel still honours $/cancelRequest
        return;
      }
      throw error;
    }
  }

  /** Move the head: the next turn follows turnId (null: starts over from nothing). */
  /** Move the head; with `restoreFiles`, also put the files back as they were at `turnId`. */
  async branch(turnId: string | null, restoreFiles = false): Promise<Session> {
    const current = this.requireSession();
    this.refuseIfRunning('branch');
    await this.ensureAttached();
    const session = await this.overwriting((force) =>
      this.client.request(Method.branch, {
        sessionId: current.sessionId,
        turnId,
        ...(restoreFiles ? { restoreFiles, force } : {}),
      }),
    );
    if (!session) {
      return current;
    }
    if (session.files) {
      this.log.info(`branch restored ${session.files.restored.length} file(s)`);
      delete session.files;
    }
    const { turns, nextCursor } = await this.client.request(Method.history, {
      sessionId: session.sessionId,
      limit: HISTORY_PAGE,
    });
    this.session = session;
    this.transcript = turns.map((t) => fromHistory(t));
    this.historyCursor = nextCursor;
    this.postReset();
    void this.fillSteps(turns);
    this.fireSession();
    this.log.info(`session ${session.sessionId} branched: head is now ${turnId ?? 'before the first turn'}`);
    return session;
  }

  /** Every tool the session's model sees, built-in and MCP, and its MCP servers. */
  async tools(): Promise<SessionTools> {
    const session = this.requireSession();
    await this.ensureAttached();
    return this.client.request(Method.tools, { sessionId: session.sessionId });
  }

  /** What a turn changed in the files. */
  async changes(turnId: string): Promise<FileChange[]> {
    await this.ensureAttached();
    return (await this.client.request(Method.turnChanges, { turnId })).files;
  }

  /** Undo one turn's changes to the files; undefined when the user kept a conflicting file. */
  async revert(turnId: string): Promise<Restored | undefined> {
    this.requireSession();
    this.refuseIfRunning('revert a turn');
    await this.ensureAttached();
    const result = await this.overwriting((force) => this.client.request(Method.revert, { turnId, force }));
    if (result) {
      this.log.info(`turn ${turnId} reverted: ${result.restored.length} file(s) put back`);
    }
    return result;
  }

  /** Run a restore; when files a person changed are in the way, name them and ask before forcing. */
  private async overwriting<T>(run: (force: boolean) => Promise<T>): Promise<T | undefined> {
    try {
      return await run(false);
    } catch (e) {
      const paths = (e instanceof DaemonError && e.code === ErrorCode.conflict && (e.data as { paths?: unknown })?.paths) || undefined;
      if (!Array.isArray(paths)) {
        throw e;
      }
      const answer = await vscodeapi.showWarningMessage(
        `These files changed since the agent wrote them: ${paths.join(', ')}. Overwrite them?`,
        'Overwrite',
      );
      return answer === 'Overwrite' ? run(true) : undefined;
    }
  }

  // the session's life: fork, rename, delete, export, import, search

  /** Start a new session from `turnId` of this one (null: empty); the view shows the fork.
   * With `step`, the fork's copy of the turn keeps only its first `step` steps. */
  async fork(turnId: string | null, step?: number): Promise<Session> {
    const current = this.requireSession();
    this.refuseIfRunning('fork');
    await this.ensureAttached();
    const fork = await this.client.request(Method.fork, {
      sessionId: current.sessionId,
      turnId,
      ...(step !== undefined ? { step } : {}),
    });
    const where = turnId === null ? 'its start' : step !== undefined ? `step ${step} of turn ${turnId}` : turnId;
    this.log.info(`session ${current.sessionId} forked at ${where} into ${fork.sessionId}`);
    return this.reopenSession(fork.sessionId);
  }

  /** Fork after a step of `turnId`, picked from its steps; undefined when none was picked. */
  async forkAfterStep(turnId: string): Promise<Session | undefined> {
    const current = this.requireSession();
    await this.ensureAttached();
    const { turns } = await this.client.request(Method.turns, { sessionId: current.sessionId });
    const turn = turns.find((t) => t.turnId === turnId);
    if (!turn) {
      throw new TrellisError(`turn ${turnId} is not in this session`);
    }
    const step = await pickStep(this.client, turn);
    return step === undefined ? undefined : this.fork(turnId, step);
  }

  /** Pin a turn (sent verbatim after compaction) or unpin it; the session says which are. */
  async pin(turnId: string, pinned: boolean): Promise<Session> {
    const current = this.requireSession();
    await this.ensureAttached();
    const session = await setPinned(this.client, current.sessionId, turnId, pinned);
    if (this.session?.sessionId === session.sessionId) {
      this.session.pinned = session.pinned ?? [];
      this.fireSession();
    }
    this.log.info(`turn ${turnId} ${pinned ? 'pinned' : 'unpinned'}`);
    return session;
  }

  /** Answer the pending decision about a command killed mid-run: keep the files, or revert the
   * turn's changes (asking before overwriting files a person changed since). */
  async recover(decision: RecoveryDecision): Promise<RecoverResult | undefined> {
    const current = this.requireSession();
    await this.ensureAttached();
    const result = await this.overwriting((force) =>
      this.client.request(Method.recover, {
        sessionId: current.sessionId,
        decision,
        ...(force ? { force } : {}),
      }),
    );
    if (!result) {
      return undefined;
    }
    const files = result.files;
    delete result.files;
    if (this.session?.sessionId === result.sessionId) {
      this.session = result;
      this.fireSession();
    }
    const text =
      decision === 'keep'
        ? 'Kept the files as the killed command left them; the session goes on.'
        : `Reverted the turn's changes${files ? `: ${files.restored.length} file(s) put back` : ''}; the session goes on.`;
    this.notice('info', text);
    this.log.info(`session ${current.sessionId} recovered: ${decision}`);
    return { ...result, ...(files ? { files } : {}) };
  }

  /** Show the keep / revert choice for a command killed mid-run (once at a time per turn). */
  private offerRecovery(pending: PendingRecovery | undefined): void {
    if (!pending || this.askingRecovery.has(pending.turnId)) {
      return;
    }
    this.askingRecovery.add(pending.turnId);
    this.notice('error', `A cancelled command was killed mid-run: ${commandText(pending)}. Keep the files or revert the turn?`);
    this.log.warn(`session ${this.session?.sessionId} needs a decision: ${commandText(pending)} was killed mid-run`);
    void (async () => {
      try {
        const decision = await askRecovery(pending);
        if (decision) {
          await this.recover(decision);
        }
      } catch (error) {
        void this.showError(messageOf(error), error);
      } finally {
        this.askingRecovery.delete(pending.turnId);
      }
    })();
  }

  async rename(title: string): Promise<void> {
    const current = this.requireSession();
    await this.ensureAttached();
    const renamed = await this.client.request(Method.rename, { sessionId: current.sessionId, title });
    if (this.session?.sessionId === current.sessionId) {
      this.session.title = renamed?.title ?? title;
      this.view.post({ type: 'session', session: header(this.session, this.lineage) });
      this.fireSession();
    }
    this.log.info(`session ${current.sessionId} renamed to ${JSON.stringify(title)}`);
  }

  /** The open session's remembered approvals (session/policy's grants). */
  async grants(): Promise<Grant[]> {
    const current = this.requireSession();
    await this.ensureAttached();
    const policy = await this.client.request(Method.policy, { sessionId: current.sessionId });
    return policy.grants ?? [];
  }

  /** Take back a remembered approval: the action is asked for again. */
  async revoke(grant: RevocableGrant): Promise<Grant[]> {
    const current = this.requireSession();
    await this.ensureAttached();
    const policy = await this.client.request(Method.revoke, { sessionId: current.sessionId, grant });
    this.log.info(`revoked ${grant.kind} ${grant.target} (${grant.scope ?? 'session'}) of session ${current.sessionId}`);
    return policy.grants ?? [];
  }

  /** Delete a session for good; when it is the open one, the view is emptied. */
  async deleteSession(sessionId: string): Promise<void> {
    const isOpen = this.session?.sessionId === sessionId;
    if (isOpen) {
      this.refuseIfRunning('delete the session');
    }
    await this.client.start();
    await this.client.request(Method.delete, { sessionId });
    if (isOpen && this.session?.sessionId === sessionId) {
      this.session = undefined;
      this.lineage = undefined;
      this.transcript = [];
      this.historyCursor = undefined;
      this.postReset();
      this.fireSession();
    }
    this.log.info(`session ${sessionId} deleted`);
  }

  async exportSession(path: string, sessionId?: string): Promise<ExportResult> {
    const id = sessionId ?? this.requireSession().sessionId;
    await this.client.start();
    const result = await this.client.request(Method.export, { sessionId: id, path });
    this.log.info(`session ${id} exported to ${result.path}: ${result.turns} turn(s), ${result.bytes} bytes`);
    return result;
  }

  /** Import a session from a file and show it; `asNew` imports a copy with new ids. */
  async importSession(path: string, options: { asNew?: boolean; root?: string } = {}): Promise<Session> {
    this.refuseIfRunning('import a session');
    await this.client.start();
    const imported = await this.client.request(Method.import, {
      path,
      ...(options.root ? { root: options.root } : {}),
      ...(options.asNew ? { asNew: true } : {}),
    });
    this.log.info(`session ${imported.sessionId} imported from ${path}${options.asNew ? ' as a copy' : ''}`);
    return this.reopenSession(imported.sessionId);
  }

  /** Sessions whose title, prompts or replies match `query` (session/list {query}), best first. */
  async searchSessions(query: string, limit = 50): Promise<SessionSummary[]> {
    await this.client.start();
    const trimmed = query.trim();
    const result = await this.client.request(Method.list, { limit, ...(trimmed ? { query: trimmed } : {}) });
    return result.sessions;
  }

  /** Look the session's origin up and show its lineage in the header. */
  private async describeLineage(session: Session): Promise<void> {
    if (!session.forkedFrom) {
      return;
    }
    try {
      const origin = await findOrigin(this.client, session.forkedFrom);
      if (this.session?.sessionId === session.sessionId) {
        this.lineage = lineageText(session, origin);
        this.view.post({ type: 'session', session: header(this.session, this.lineage) });
        this.log.info(`session ${session.sessionId}: ${this.lineage}`);
        this.fireSession();
      }
    } catch (error) {
      this.log.warn(`the lineage of session ${session.sessionId}: ${messageOf(error)}`);
    }
  }

  /** The window goes (closed, reloaded): a running turn is left to the daemon, which ends it
   * with a daemon of this window's own, and runs it on when the store's daemon is shared. */
  dispose(): void {
    this.coalescer.dispose();
    this.exitSubscription.dispose();
  }

  // what the daemon says while a turn runs

  private liveFor(p: { sessionId: string; turnId: string }): LiveTurn | undefined {
    const live = this.live;
    if (!live || this.session?.sessionId !== p.sessionId) {
      return undefined;
    }
    // a followed turn is known by its id; another turn's notifications are not its own
    return live.followed && live.turn.turnId !== p.turnId ? undefined : live;
  }

  /** Follow a turn of the session running in the daemon that this window did not start:
   * draw it as far as it has streamed, then let its notifications carry it on. */
  private follow(running: RunningTurn): void {
    let turn = this.transcript.find((t) => t.turnId === running.turnId);
    if (!turn) {
      // it started as the reopen was answered: not in the history that came with it
      const prompt = running.prompt ?? '';
      turn = { key: running.turnId, turnId: running.turnId, prompt, blocks: [], outcome: 'running' };
      this.transcript.push(turn);
    }
    turn.outcome = 'running';
    turn.error = undefined;
    // The text so far is the current step's; between two steps it is the last committed
    // step's, which the stored reply already holds.
    const stored = turn.blocks.map((b) => (b.kind === 'text' ? b.text : '')).join('');
    const reply = turn.blocks.find((b): b is Extract<Block, { kind: 'text' }> => b.kind === 'text')?.text ?? '';
    if (running.text && !stored.endsWith(running.text)) {
      appendText(turn, running.step ?? 1, running.text);
    }
    // A command still running, calls waiting: drawn as far as they have gone.
    for (const call of running.calls ?? []) {
      callFound(turn, { sessionId: running.sessionId, turnId: running.turnId, runId: running.runId }, call);
    }
    let settle: () => void = () => undefined;
    const done = new Promise<void>((r) => (settle = r));
    this.live = { turn, source: new CancellationTokenSource(), done, followed: { settle } };
    this.log.info(`following turn ${running.turnId}, running in trellisd (started in another window)`);
    this.postTurn(turn);
    this.fireRunning();
    void this.fillFollowed(turn, reply, running);
  }

  /** The texts of the steps a joined turn committed before the one streaming (its stored
   * reply is only the last of them). */
  private async fillFollowed(turn: TranscriptTurn, reply: string, running: RunningTurn): Promise<void> {
    try {
      const { steps } = await this.client.request(Method.runSteps, { runId: running.runId });
      if (this.live?.turn === turn && withCommittedSteps(turn, reply, steps, running.step)) {
        this.coalescer.mark(turn.key);
      }
    } catch (error) {
      this.log.warn(`could not read the steps of turn ${running.turnId}: ${messageOf(error)}`);
    }
  }

  /** Whether the followed turn has ended, as the history says; if so, show how it ended. */
  private async checkFollowed(live: LiveTurn): Promise<void> {
    const session = this.session;
    if (!session || this.live !== live) {
      return;
    }
    const { turns } = await this.client.request(Method.history, {
      sessionId: session.sessionId,
      limit: HISTORY_PAGE,
    });
    const stored = turns.find((t) => t.turnId === live.turn.turnId);
    if (!stored || stored.outcome === 'running' || this.live !== live) {
      return;
    }
    this.endFollowed(live, { ...stored, steps: 0 }, turns[turns.length - 1]?.turnId);
  }

  /** A followed turn ended: its reply, outcome and cost are drawn, and the window is free. */
  private endFollowed(live: LiveTurn, result: TurnResult, head?: string): void {
    this.coalescer.flush();
    finish(live.turn, result);
    if (head && this.session) {
      this.session.head = head;
    }
    this.log.info(`turn ${result.turnId} ${footerText(live.turn)} (followed); reply: ${excerpt(result.reply)}`);
    this.stopFollowing(live, result.outcome);
  }

  /** session/turnEnded: a turn of the session ended, whichever window started it. A turn this
   * window follows is finished from it; one it started ends with its session/turn answer. */
  private onTurnEnded(p: TurnEndedParams): void {
    if (this.session?.sessionId !== p.sessionId) {
      return;
    }
    const live = this.live;
    if (live?.followed && live.turn.turnId === p.turnId) {
      // the model is the one the turn was drawn with (session/turnEnded does not repeat it)
      const result: TurnResult = { ...p, steps: 0, model: live.turn.model ?? null, ...(p.recovery ? { recovery: p.recovery } : {}) };
      // the head moves to a new turn; a resumed turn was the head already
      this.endFollowed(live, result, p.turnId);
      if (p.recovery) {
        this.offerRecovery({ turnId: p.turnId, runId: p.runId, tool: p.recovery.tool, argv: p.recovery.argv });
      }
    }
  }

  /** Stop watching another window's turn (it runs on in the daemon), to open a session. */
  private leaveFollowed(): void {
    if (this.live?.followed) {
      this.stopFollowing(this.live, 'running');
    }
  }

  private stopFollowing(live: LiveTurn, outcome: string): void {
    if (this.live !== live) {
      return;
    }
    live.turn.outcome = outcome;
    this.live = undefined;
    live.source.dispose();
    this.postTurn(live.turn);
    this.fireRunning();
    this.fireSession();
    live.followed?.settle();
  }

  /** A turn another window started in this session: reopen the session, which draws the turn
   * as far as it has streamed (the notifications that came meanwhile are in that text), and
   * follow it from there. */
  private async catchUp(sessionId: string): Promise<void> {
    if (this.catchingUp) {
      this.catchUpAgain = true; // what it reads may be older than what was just said
      return;
    }
    this.catchingUp = true;
    this.log.info(`session ${sessionId}: a turn started in another window; drawing it`);
    try {
      const { history, running, historyCursor, ...session } = await this.client.request(Method.reopen, {
        sessionId,
        limit: HISTORY_PAGE,
      });
      if (this.session?.sessionId !== sessionId || this.live) {
        return;
      }
      this.session = session;
      this.transcript = history.map((t) => fromHistory(t));
      this.historyCursor = historyCursor;
      void this.fillSteps(history.filter((t) => t.turnId !== running?.turnId));
      this.takeSpend(session);
      this.postReset();
      if (running) {
        this.follow(running);
      }
      this.fireSession();
    } finally {
      this.catchingUp = false;
      if (this.catchUpAgain) {
        this.catchUpAgain = false;
        if (!this.live) {
          await this.catchUp(sessionId);
        }
      }
    }
  }

  private catchUpWith(p: { sessionId: string }): void {
    if (!this.live && this.session?.sessionId === p.sessionId) {
      this.catchUp(p.sessionId).catch((error) => this.log.warn(`could not show the turn another window started: ${messageOf(error)}`));
    }
  }

  private onToken(p: TokenParams): void {
    this.catchUpWith(p);
    const live = this.liveFor(p);
    if (!live) {
      return;
    }
    live.turn.turnId ??= p.turnId;
    appendText(live.turn, p.step, p.text);
    this.coalescer.mark(live.turn.key);
  }

  private onStep(p: StepParams): void {
    this.catchUpWith(p);
    const live = this.liveFor(p);
    if (!live) {
      return;
    }
    live.turn.turnId ??= p.turnId;
    if (p.toolCall) {
      // a tool that ran, or one cancelled while it ran or waited for approval
      const result = p.result ?? (p.decision === 'cancelled' ? 'cancelled' : null);
      if (!callEnded(live.turn, p.toolCall.id, result)) {
        addBlock(live.turn, {
          kind: 'tool',
          step: p.step,
          name: p.toolCall.name,
          arguments: p.toolCall.arguments ?? {},
          result,
        });
      }
      this.log.info(`step ${p.step}: ${p.toolCall.name} ${argumentsLine(p.toolCall.arguments ?? {})} -> ${excerpt(p.result ?? '')}`);
      this.coalescer.mark(live.turn.key);
    }
  }

  private onToolCall(p: ToolCallParams): void {
    const live = this.liveFor(p);
    if (!live) {
      return;
    }
    live.turn.turnId ??= p.turnId;
    callChanged(live.turn, p);
    this.log.info(`step ${p.step}: ${p.tool} ${p.status}`);
    this.coalescer.mark(live.turn.key);
  }

  private onToolOutput(p: ToolOutputParams): void {
    const live = this.liveFor(p);
    if (live && callPrinted(live.turn, p.callId, p.text)) {
      this.coalescer.mark(live.turn.key);
    }
  }

  private onSteered(p: SteeredParams): void {
    if (this.session?.sessionId !== p.sessionId) {
      return;
    }
    let owner: TranscriptTurn | undefined;
    let block: Extract<Block, { kind: 'steer' }> | undefined;
    for (let i = this.transcript.length - 1; i >= 0 && !block; i--) {
      const found = this.transcript[i].blocks.find(
        (b): b is Extract<Block, { kind: 'steer' }> => b.kind === 'steer' && b.clientMsgId === p.clientMsgId,
      );
      if (found) {
        owner = this.transcript[i];
        block = found;
      }
    }
    if (!block) {
      const live = this.liveFor(p);
      if (!live) {
        return;
      }
      owner = live.turn;
      block = { kind: 'steer', clientMsgId: p.clientMsgId ?? `steered-${p.step}`, text: p.text, state: 'sending' };
      live.turn.blocks.push(block);
    }
    if (p.delivered && p.step !== null) {
      steerDelivered(owner!, block, p.step);
    } else {
      block.state = 'undelivered';
      block.note = undefined;
    }
    if (!p.delivered) {
      this.view.post({ type: 'draft', text: p.text }); // handed back: the user may send it again
    }
    this.log.info(
      `steer ${block.clientMsgId} ${p.delivered ? `delivered at step ${p.step}` : 'not delivered: the turn ended first'}`,
    );
    this.coalescer.mark(owner!.key);
  }

  private async onApproval(p: ApprovalParams, token: vscodeapi.CancellationToken): Promise<ApprovalResult> {
    const live = this.liveFor(p);
    const block: Extract<Block, { kind: 'approval' }> = {
      kind: 'approval',
      tool: p.tool,
      summary: p.summary,
      arguments: p.arguments ?? {},
      decision: 'pending',
    };
    if (live) {
      addBlock(live.turn, block);
      this.coalescer.mark(live.turn.key);
      this.coalescer.flush();
    }
    const mcp = p.mcp ? ` [MCP server ${p.mcp.server}${p.mcp.tool ? `, tool ${p.mcp.tool}` : ''}]` : '';
    this.log.info(`approval asked: ${p.tool} ${argumentsLine(p.arguments ?? {})} (${p.summary})${mcp}`);
    if (p.diff && this.session) {
      showProposed(this.session.root, p.diff).catch((e) => this.log.info(`could not show the diff: ${e}`));
    }
    const decision = await askApproval(p, token);
    // Withdrawn by the daemon: the turn was cancelled, or the answer came too late.
    block.decision = token.isCancellationRequested ? 'withdrawn' : decision;
    if (live) {
      this.coalescer.mark(live.turn.key);
    }
    this.log.info(`approval ${block.decision === 'withdrawn' ? 'withdrawn by trellisd' : `answered: ${decision}`} for ${p.tool}`);
    return { decision };
  }

  // the view

  private draw(key: string): void {
    for (let i = this.transcript.length - 1; i >= 0; i--) {
      if (this.transcript[i].key === key) {
        this.view.post({ type: 'turn', turn: turnView(this.transcript[i]) });
        return;
      }
    }
  }

  private postTurn(turn: TranscriptTurn): void {
    this.coalescer.flush();
    this.view.post({ type: 'turn', turn: turnView(turn) });
  }

  private postReset(): void {
    this.coalescer.flush();
    const session = this.session;
    this.postQueue();
    this.view.post({ type: 'earlier', more: !!this.historyCursor });
    this.view.post({
      type: 'reset',
      session: session ? header(session, this.lineage) : null,
      turns: this.transcript.map(turnView),
      running: this.isRunning,
    });
  }

  private postQueue(): void {
    this.view.post({ type: 'queue', queued: [...this.queue.list] });
    const text = this.budget ? spendText(this.budget, this.spent) : undefined;
    this.view.post({ type: 'spend', text: text ?? null });
  }

  /** A budget and what was spent, from an answer that has them. */
  private takeSpend(answer: Partial<BudgetStatus>): void {
    if (answer.budget !== undefined) {
      this.budget = answer.budget;
    }
    if (answer.spent) {
      this.spent = answer.spent;
    }
    this.postQueue();
  }

  /** Queue a prompt behind the running turn (from any window): it runs when that turn and the
   * prompts queued before it have run, and is drawn here as it runs. Errors are shown. */
  async queuePrompt(prompt: string): Promise<void> {
    const session = this.requireSession();
    await this.ensureAttached();
    this.log.info(`queueing a prompt: ${excerpt(prompt)}`);
    try {
      const result = await this.client.request(Method.turn, {
        sessionId: session.sessionId,
        prompt,
        queue: true,
      });
      this.takeSpend(result);
      this.log.info(`queued turn ${result.turnId} ended ${result.outcome}`);
      if (!this.live && !this.transcript.some((t) => t.turnId === result.turnId)) {
        await this.catchUp(session.sessionId); // it ran before this window could follow it
      }
      if (result.outcome === 'error' || result.outcome === 'exhausted') {
        void this.showError(`trellisd: the queued turn ended ${result.outcome}: ${result.error ?? 'no reason given'}`);
      }
    } catch (error) {
      if (error instanceof DaemonError && error.code === ErrorCode.requestCancelled) {
        this.notice('info', `Not run: ${messageOf(error)}`);
        this.log.info(`queued prompt not run: ${messageOf(error)}`);
      } else {
        void this.showError(messageOf(error), error);
      }
    }
  }

  /** Drop a queued prompt: it never runs. */
  async unqueue(queueId: string): Promise<void> {
    const session = this.requireSession();
    await this.client.request(Method.unqueue, { sessionId: session.sessionId, queueId });
    this.queue.remove({ queueId });
    this.postQueue();
    this.log.info(`dropped queued prompt ${queueId}`);
  }

  /** What all the session's turns together may spend from now on (null: no budget). */
  async setBudget(budget: Budget | null): Promise<BudgetStatus> {
    const session = this.requireSession();
    await this.ensureAttached();
    const status = await this.client.request(Method.budget, { sessionId: session.sessionId, budget });
    this.takeSpend(status);
    this.log.info(`budget of session ${session.sessionId}: ${spendText(status.budget, status.spent)}`);
    return status;
  }

  private onQueued(p: Queued): void {
    if (this.session?.sessionId !== p.sessionId) {
      return;
    }
    this.queue.add(p);
    this.log.info(`prompt ${p.queueId} queued at ${p.position}: ${excerpt(p.prompt)}`);
    this.postQueue();
  }

  private onDequeued(p: DequeuedParams): void {
    if (this.session?.sessionId !== p.sessionId) {
      return;
    }
    this.queue.remove(p);
    this.log.info(`prompt ${p.queueId} left the queue: ${p.reason}`);
    this.postQueue();
  }

  notice(level: 'info' | 'error', text: string): void {
    this.view.post({ type: 'notice', level, text });
  }

  // session state

  private adopt(session: Session, history: Turn[], historyCursor?: string): void {
    this.session = session;
    this.lineage = lineageText(session);
    void this.describeLineage(session);
    this.attached = this.client.generation;
    this.transcript = history.map((t) => fromHistory(t));
    this.historyCursor = historyCursor;
    void this.fillSteps(history.filter((t) => t.outcome !== 'running'));
    this.queue.clear();
    this.budget = null;
    this.spent = undefined;
    this.takeSpend(session as Partial<BudgetStatus>);
    this.postReset();
    this.fireSession();
  }

  /** After the daemon was restarted, reopen the session in the new daemon (once). */
  private async ensureAttached(): Promise<void> {
    await this.client.start();
    const session = this.session;
    if (!session || this.attached === this.client.generation) {
      return;
    }
    const generation = this.client.generation;
    const { history, running, historyCursor, ...reopened } = await this.client.request(Method.reopen, {
      sessionId: session.sessionId,
      limit: HISTORY_PAGE,
      ...this.serversParam(),
    });
    if (this.session?.sessionId !== session.sessionId) {
      return;
    }
    this.session = reopened;
    this.attached = generation;
    const live = this.live?.turn;
    this.transcript = history.map((t) => fromHistory(t));
    this.historyCursor = historyCursor;
    void this.fillSteps(history.filter((t) => t.outcome !== 'running'));
    if (live) {
      this.transcript.push(live);
    }
    this.postReset();
    this.notice('info', 'trellisd was restarted; the session was reopened.');
    this.log.info(`session ${session.sessionId} reopened after trellisd was restarted`);
    if (running && !this.live) {
      this.follow(running); // it ran on in the shared daemon
    }
    this.fireSession();
  }

  private requireSession(): Session {
    if (!this.session) {
      throw new TrellisError('No trellisd session is open: start one or reopen one first.');
    }
    return this.session;
  }

  private refuseIfRunning(what: string): void {
    if (this.live) {
      throw new TrellisError(`A turn is running: wait for it to end or cancel it before you ${what}.`);
    }
  }

  private fireSession(): void {
    for (const listener of this.sessionListeners) {
      listener(this.session);
    }
  }

  private fireRunning(): void {
    const running = this.isRunning;
    this.view.post({ type: 'running', running });
    for (const listener of this.runningListeners) {
      listener(running);
    }
  }

  /** An error with what can be done about it: take the session over when another daemon
   * writes it, resume a turn whose daemon died, and always the log. */
  private async showError(message: string, error?: unknown, turnId?: string): Promise<void> {
    const actions: string[] = [];
    if (error instanceof DaemonError && error.code === ErrorCode.leaseHeld) {
      actions.push('Take Over');
    }
    if (error instanceof ConnectionLost && turnId) {
      actions.push('Resume Turn');
    }
    actions.push('Show Log');
    const choice = await vscodeapi.showErrorMessage(message, ...actions);
    try {
      if (choice === 'Show Log') {
        this.showLog();
      } else if (choice === 'Take Over') {
        await this.takeover();
      } else if (choice === 'Resume Turn' && turnId) {
        await this.resume(turnId);
      }
    } catch (failure) {
      void this.showError(messageOf(failure), failure);
    }
  }
}

function header(session: Session, lineage?: string): SessionHeader {
  return { sessionId: session.sessionId, title: session.title, root: session.root, ...(lineage ? { lineage } : {}) };
}

function excerpt(text: string, limit = 200): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > limit ? `${flat.slice(0, limit)}…` : flat;
}
