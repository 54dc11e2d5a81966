/**
 * The session the editor works in, as one object for the rest of the extension: SessionController
 * makes each feature of the session (session/*.ts: the session's life, turns, steering, the
 * stream, following another window's turn, approvals, change sets, recovery, paging, pins, the
 * queue, spending, worktrees, plans and modes), wires them to each other and to the daemon's notifications, and hands each
 * call to the feature that does it. The features talk to the daemon through DaemonClient and to
 * the chat view through ChatSink; nothing here draws or reads VS Code's UI but through vscodeapi.
 */

import { DaemonClient, DaemonHandlers, Log } from './client';
import type { Attachments } from './images';
import type { LivePlan } from './plan';
import {
  ApprovalMode,
  ApprovalResult,
  Budget,
  BudgetStatus,
  CompactResult,
  ContextEntry,
  CustomCommand,
  Effort,
  ExportResult,
  FileChange,
  Grant,
  Hook,
  McpServer,
  Merged,
  Method,
  Policy,
  ProcessExitedParams,
  ProcessOutputParams,
  RecoverResult,
  RecoveryDecision,
  Restored,
  RevocableGrant,
  Session,
  SessionSummary,
  SessionTools,
  Spent,
  ToolCallParams,
  Turn,
  TurnResult,
  UsageParams,
  Worktree,
} from './protocol';
import type { Walls } from './protocolTypes';
import { PromptQueue } from './queue';
import { Approvals } from './session/approvals';
import { ChangeSets } from './session/changeSets';
import { Children } from './session/children';
import { ChatSink, Listener, NO_VIEW, SessionCore } from './session/core';
import { Following } from './session/following';
import { Modes } from './session/modes';
import { Paging } from './session/paging';
import { pin } from './session/pins';
import { Plans } from './session/plans';
import { Queueing } from './session/queue';
import { Recovery } from './session/recovery';
import { Sessions } from './session/sessions';
import { Spending } from './session/spending';
import { Steering } from './session/steering';
import { Stream } from './session/stream';
import { Turns } from './session/turns';
import { SessionWalls } from './session/walls';
import type { TranscriptTurn } from './transcript';
import { Worktrees } from './session/worktrees';

export type { ChatSink, FromWebview, SessionHeader, ToWebview } from './session/core';

export class SessionController {
  private readonly core: SessionCore;
  private readonly sessions: Sessions;
  private readonly turns: Turns;
  private readonly steering: Steering;
  private readonly following: Following;
  private readonly approvals: Approvals;
  private readonly changeSets: ChangeSets;
  private readonly recovery: Recovery;
  private readonly paging: Paging;
  private readonly queueing: Queueing;
  private readonly spending: Spending;
  private readonly worktrees: Worktrees;
  private readonly sessionWalls: SessionWalls;
  private readonly plans: Plans;
  private readonly modes: Modes;
  private readonly processOutputListeners = new Set<Listener<ProcessOutputParams>>();
  private readonly processExitedListeners = new Set<Listener<ProcessExitedParams>>();
  private readonly callEndedListeners = new Set<Listener<ToolCallParams>>();

  readonly handlers: DaemonHandlers;

  constructor(
    /** The connection the session speaks through. */
    readonly client: DaemonClient,
    log: Log,
    showLog: () => void = () => undefined,
    flushIntervalMs = 40,
  ) {
    const core = (this.core = new SessionCore(client, log, showLog, flushIntervalMs));
    const sessions = (this.sessions = new Sessions(core));
    const turns = (this.turns = new Turns(core));
    const steering = (this.steering = new Steering(core));
    const stream = new Stream(core);
    const children = new Children(core);
    const following = (this.following = new Following(core));
    const approvals = (this.approvals = new Approvals(core));
    this.changeSets = new ChangeSets(core);
    const recovery = (this.recovery = new Recovery(core));
    const paging = (this.paging = new Paging(core));
    const queueing = (this.queueing = new Queueing(core));
    const spending = (this.spending = new Spending(core));
    this.worktrees = new Worktrees(core);
    const sessionWalls = (this.sessionWalls = new SessionWalls(core));
    const plans = (this.plans = new Plans(core));
    const modes = (this.modes = new Modes(core));
    core.links = {
      follow: (running) => following.follow(running),
      checkFollowed: (live) => following.checkFollowed(live),
      catchUp: (sessionId) => following.catchUp(sessionId),
      catchUpWith: (p) => following.catchUpWith(p),
      leaveFollowed: () => following.leaveFollowed(),
      fillSteps: (history) => paging.fillSteps(history),
      offerRecovery: (pending) => recovery.offerRecovery(pending),
      steer: (text) => steering.steer(text),
      turn: (prompt) => turns.turn(prompt),
      resume: (turnId) => turns.resume(turnId),
      takeover: () => sessions.takeover(),
      childAsking: (p) => children.asking(p),
      readPolicy: () => sessionWalls.refresh(),
    };
    this.handlers = {
      // a child's (the task tool's) are drawn under the task call that started it
      token: (p) => children.onToken(p) || stream.onToken(p),
      thought: (p) => stream.onThought(p),
      step: (p) => children.onStep(p) || stream.onStep(p),
      steered: (p) => steering.onSteered(p),
      toolCall: (p) => {
        if (ENDED.has(p.status) && p.sessionId === this.session?.sessionId) {
          this.callEndedListeners.forEach((listener) => listener(p));
        }
        return children.onToolCall(p) || stream.onToolCall(p);
      },
      processOutput: (p) => this.processOutputListeners.forEach((listener) => listener(p)),
      processExited: (p) => this.processExitedListeners.forEach((listener) => listener(p)),
      toolOutput: (p) => children.onToolOutput(p) || stream.onToolOutput(p),
      usage: (p) => spending.onUsage(p),
      queued: (p) => queueing.onQueued(p),
      dequeued: (p) => queueing.onDequeued(p),
      turnEnded: (p) => children.onTurnEnded(p) || following.onTurnEnded(p),
      plan: (p) => plans.onPlan(p),
      modeChanged: (p) => modes.onModeChanged(p),
      requestApproval: (p, token): Promise<ApprovalResult> => approvals.onApproval(p, token),
    };
    client.setHandlers(this.handlers);
  }

  // what the rest of the extension reads and sets

  get session(): Session | undefined {
    return this.core.session;
  }

  /** The open session's lineage in words, shown in the view's header. */
  get lineage(): string | undefined {
    return this.core.lineage;
  }

  /** session/history's cursor for the page before the first turn drawn; none: all are drawn. */
  get historyCursor(): string | undefined {
    return this.core.historyCursor;
  }

  get isRunning(): boolean {
    return this.core.isRunning;
  }

  /** The open session's last `session/usage`: its context meter and spend. */
  get usage(): UsageParams | undefined {
    return this.core.usage;
  }

  /** The prompts queued behind the running turn (from any window), first to run first. */
  get queue(): PromptQueue {
    return this.core.queue;
  }

  /** The session's budget (null: none) and what its turns have spent, once known. */
  get budget(): Budget | null {
    return this.core.budget;
  }

  get spent(): Spent | undefined {
    return this.core.spent;
  }

  /** The MCP servers of the user's settings: given to a session again when it is reopened
   * (a daemon started since it was opened has only the config file's and the project's). */
  get mcpServers(): () => McpServer[] {
    return this.core.mcpServers;
  }

  set mcpServers(servers: () => McpServer[]) {
    this.core.mcpServers = servers;
  }

  /** session/open's policy for the sessions started from now on (the walls, network and
   * approval settings, and the task tool); undefined: the daemon's. */
  get openPolicy(): () => Policy | undefined {
    return this.core.openPolicy;
  }

  set openPolicy(policy: () => Policy | undefined) {
    this.core.openPolicy = policy;
  }

  /** With it on, a prompt from the input box goes with the active editor's file. */
  get attachActiveFile(): boolean {
    return this.turns.attachActiveFile;
  }

  set attachActiveFile(on: boolean) {
    this.turns.attachActiveFile = on;
  }

  /** The active editor's file as context; set by the extension (it reads the editor). */
  get activeFile(): () => ContextEntry | undefined {
    return this.turns.activeFile;
  }

  set activeFile(read: () => ContextEntry | undefined) {
    this.turns.activeFile = read;
  }

  /** Step mode: each turn pauses after every step, and a resume takes one more. */
  get stepMode(): boolean {
    return this.turns.stepMode;
  }

  set stepMode(on: boolean) {
    this.turns.stepMode = on;
  }

  /** The images that go with the next prompt (a chip each under the prompt box). */
  get attachments(): Attachments {
    return this.core.attachments;
  }

  /** The effort the next turns ask for (session/turn's effort); undefined: the model's default. */
  get effort(): Effort | undefined {
    return this.core.effort;
  }

  set effort(effort: Effort | undefined) {
    this.core.effort = effort;
    this.core.postAttachments();
  }

  /** What a process of the open session printed (session/processOutput), as it comes. */
  onProcessOutput(listener: Listener<ProcessOutputParams>): { dispose(): void } {
    return subscribe(this.processOutputListeners, listener);
  }

  /** A process of a followed session ended (session/processExited), however it ended. */
  onProcessExited(listener: Listener<ProcessExitedParams>): { dispose(): void } {
    return subscribe(this.processExitedListeners, listener);
  }

  /** A tool call of the open session's turn ended (done, failed, refused or cancelled). */
  onDidEndToolCall(listener: Listener<ToolCallParams>): { dispose(): void } {
    return subscribe(this.callEndedListeners, listener);
  }

  onDidChangeSession(listener: Listener<Session | undefined>): { dispose(): void } {
    return subscribe(this.core.sessionListeners, listener);
  }

  onDidChangeRunning(listener: Listener<boolean>): { dispose(): void } {
    return subscribe(this.core.runningListeners, listener);
  }

  onDidChangeUsage(listener: Listener<UsageParams>): { dispose(): void } {
    return subscribe(this.core.usageListeners, listener);
  }

  /** The plan in the live spot changed (session/plan, or a session opened with its history). */
  onDidChangePlan(listener: Listener<LivePlan | undefined>): { dispose(): void } {
    return subscribe(this.core.planListeners, listener);
  }

  /** The open session's approval mode changed, or was read. */
  onDidChangeMode(listener: Listener<ApprovalMode | undefined>): { dispose(): void } {
    return subscribe(this.core.modeListeners, listener);
  }

  // the view

  attachView(view: ChatSink): void {
    this.core.view = view;
    this.core.postReset();
  }

  detachView(view: ChatSink): void {
    if (this.core.view === view) {
      this.core.view = NO_VIEW;
      this.core.log.info('the chat view was closed');
    }
  }

  notice(level: 'info' | 'error', text: string): void {
    this.core.notice(level, text);
  }

  /** The window goes (closed, reloaded): a running turn is left to the daemon, which ends it
   * with a daemon of this window's own, and runs it on when the store's daemon is shared. */
  dispose(): void {
    this.core.coalescer.dispose();
    this.following.dispose();
  }

  // sessions (sessions.ts)

  /** With `worktree` (true, or its name), the session works in a git worktree of its own. */
  openSession(root: string, title?: string, mcpServers: McpServer[] = [], worktree?: true | string): Promise<Session> {
    return this.sessions.openSession(root, title, mcpServers, worktree);
  }

  reopenSession(sessionId: string): Promise<Session> {
    return this.sessions.reopenSession(sessionId);
  }

  listSessions(limit?: number): Promise<SessionSummary[]> {
    return this.sessions.listSessions(limit);
  }

  searchSessions(query: string, limit?: number): Promise<SessionSummary[]> {
    return this.sessions.searchSessions(query, limit);
  }

  turnTree(): Promise<{ turns: Turn[]; head: string | null; pinned: string[] } | undefined> {
    return this.sessions.turnTree();
  }

  takeover(): Promise<Session> {
    return this.sessions.takeover();
  }

  tools(): Promise<SessionTools> {
    return this.sessions.tools();
  }

  fork(turnId: string | null, step?: number): Promise<Session> {
    return this.sessions.fork(turnId, step);
  }

  forkAfterStep(turnId: string): Promise<Session | undefined> {
    return this.sessions.forkAfterStep(turnId);
  }

  rename(title: string): Promise<void> {
    return this.sessions.rename(title);
  }

  deleteSession(sessionId: string): Promise<void> {
    return this.sessions.deleteSession(sessionId);
  }

  exportSession(path: string, sessionId?: string): Promise<ExportResult> {
    return this.sessions.exportSession(path, sessionId);
  }

  importSession(path: string, options?: { asNew?: boolean; root?: string }): Promise<Session> {
    return this.sessions.importSession(path, options);
  }

  /** Draw the page of turns before the first one drawn (paging.ts). */
  loadEarlier(): Promise<number> {
    return this.paging.loadEarlier();
  }

  // turns (turns.ts, steering.ts)

  send(text: string): Promise<void> {
    return this.turns.send(text);
  }

  turn(prompt: string, context?: ContextEntry[]): Promise<TurnResult | undefined> {
    return this.turns.turn(prompt, context, this.core.attachments.take());
  }

  toggleAttachActiveFile(): boolean {
    return this.turns.toggleAttachActiveFile();
  }

  toggleStepMode(): boolean {
    return this.turns.toggleStepMode();
  }

  pause(): Promise<void> {
    return this.turns.pause();
  }

  resume(turnId: string): Promise<TurnResult | undefined> {
    return this.turns.resume(turnId);
  }

  cancel(): Promise<void> {
    return this.turns.cancel();
  }

  steer(text: string): Promise<void> {
    return this.steering.steer(text);
  }

  // what the turns changed (changeSets.ts, recovery.ts), pins (pins.ts), approvals (approvals.ts)

  branch(turnId: string | null, restoreFiles?: boolean): Promise<Session> {
    return this.changeSets.branch(turnId, restoreFiles);
  }

  changes(turnId: string): Promise<FileChange[]> {
    return this.changeSets.changes(turnId);
  }

  revert(turnId: string): Promise<Restored | undefined> {
    return this.changeSets.revert(turnId);
  }

  recover(decision: RecoveryDecision): Promise<RecoverResult | undefined> {
    return this.recovery.recover(decision);
  }

  pin(turnId: string, pinned: boolean): Promise<Session> {
    return pin(this.core, turnId, pinned);
  }

  grants(): Promise<Grant[]> {
    return this.approvals.grants();
  }

  /** Take back a remembered approval; a project hook's is a grant of kind hook. */
  revoke(grant: RevocableGrant): Promise<Grant[]> {
    return this.approvals.revoke(grant);
  }

  // custom commands and hooks (customCommands.ts, hooks.ts)

  /** The open session's custom commands (session/commands), by name; read anew each time, as
   * the daemon reads their files. */
  async commands(): Promise<CustomCommand[]> {
    const session = this.core.requireSession();
    await this.core.ensureAttached();
    return (await this.client.request(Method.commands, { sessionId: session.sessionId })).commands;
  }

  /** The hooks in effect for the open session (session/hooks), in the order they run. */
  async hooks(): Promise<Hook[]> {
    const session = this.core.requireSession();
    await this.core.ensureAttached();
    return (await this.client.request(Method.hooks, { sessionId: session.sessionId })).hooks;
  }

  // the session's own worktree (worktrees.ts)

  mergeWorktree(): Promise<Merged> {
    return this.worktrees.merge();
  }

  /** Discard the session's worktree once `confirm` says yes; undefined when it said no. */
  discardWorktree(confirm?: (worktree: Worktree) => Promise<boolean>): Promise<Session | undefined> {
    return this.worktrees.discard(confirm);
  }

  // the walls of the session's programs (walls.ts)

  walls(): Promise<Walls> {
    return this.sessionWalls.current();
  }

  // plans (plans.ts) and the approval mode (modes.ts)

  /** The plan drawn in the live spot: the newest planned turn's, or the running turn's. */
  get plan(): LivePlan | undefined {
    return this.plans.live;
  }

  /** The planned turns of the transcript, newest first. */
  plannedTurns(): TranscriptTurn[] {
    return this.plans.planned();
  }

  /** Run a planned turn's plan under `approval` in a new turn, streamed as any turn. */
  runPlan(turnId: string, approval: ApprovalMode): Promise<TurnResult | undefined> {
    return this.turns.approvePlan(turnId, approval);
  }

  /** The open session's approval mode as last read (undefined until session/policy answered). */
  get mode(): ApprovalMode | undefined {
    return this.modes.current;
  }

  /** The mode the session had before plan mode was switched on here (else ask). */
  get modeBeforePlan(): ApprovalMode {
    return this.modes.beforePlan;
  }

  /** The open session's approval mode, read from the daemon if need be. */
  approvalMode(): Promise<ApprovalMode> {
    return this.modes.known();
  }

  setMode(approval: ApprovalMode): Promise<ApprovalMode> {
    return this.modes.set(approval);
  }

  /** Plan mode on, or off back to the mode before it; the mode the session is in now. */
  togglePlanMode(): Promise<ApprovalMode> {
    return this.modes.togglePlan();
  }

  // the queue (queue.ts) and spending (spending.ts)

  queuePrompt(prompt: string): Promise<void> {
    return this.queueing.queuePrompt(prompt);
  }

  unqueue(queueId: string): Promise<void> {
    return this.queueing.unqueue(queueId);
  }

  setBudget(budget: Budget | null): Promise<BudgetStatus> {
    return this.spending.setBudget(budget);
  }

  compact(): Promise<CompactResult> {
    return this.spending.compact();
  }
}

/** The statuses a tool call ends with. */
const ENDED = new Set<string>(['done', 'failed', 'refused', 'cancelled']);

function subscribe<T>(listeners: Set<Listener<T>>, listener: Listener<T>): { dispose(): void } {
  listeners.add(listener);
  return { dispose: () => listeners.delete(listener) };
}
