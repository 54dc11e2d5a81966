/**
 * What every feature of the open session shares: the session and its transcript, the turn
 * running in it, the chat view and what is drawn there, the listeners, the way back into a
 * daemon that was restarted, and the question a restore asks before it overwrites files. Each
 * feature (session/*.ts) holds the core and calls on another feature only through `links`,
 * which SessionController wires, so no feature imports another.
 */

import type { CancellationTokenSource } from 'vscode-jsonrpc';

import type { DaemonClient, Log } from '../client';
import { Coalescer } from '../coalescer';
import type { CommandEntry } from '../customCommands';
import { ConnectionLost, DaemonError, messageOf, TrellisError } from '../errors';
import { Attachments, chipText } from '../images';
import { MODE_DESCRIPTIONS, modeText } from '../modes';
import { HISTORY_PAGE } from '../paging';
import { LivePlan, nameFollowedPlans, newestPlan } from '../plan';
import {
  ApprovalMode,
  Budget,
  BudgetStatus,
  Effort,
  ErrorCode,
  McpServer,
  Method,
  PendingRecovery,
  Policy,
  RunningTurn,
  Session,
  Spent,
  Turn,
  TurnResult,
  UsageParams,
} from '../protocol';
import type { Requester } from '../protocolTypes';
import { PromptQueue, QueueEntry, spendText } from '../queue';
import { fromHistory, TranscriptTurn, turnView, TurnView } from '../transcript';
import { sessionTitles, sharedOf, sharedQuestion, sharedSessions } from '../sharing';
import * as vscodeapi from '../vscodeapi';
import { worktreeText } from '../worktrees';

export interface SessionHeader {
  sessionId: string;
  title: string;
  root: string;
  /** Where the session came from ("forked from “…” at turn 3"), when it was forked. */
  lineage?: string;
  /** The session's own worktree ("⎇ trellisd/fix-login → main"), when it works in one. */
  worktree?: string;
  /** The walls of the session's programs in a line ("walls: workspace-write · network off"),
   * and what they hold, a line each, once session/policy answered. */
  walls?: string;
  wallsDetail?: string;
  /** The session's approval mode ("mode: plan"), and what it lets run, once session/policy answered. */
  mode?: string;
  modeDetail?: string;
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
  | { type: 'prepend'; turns: TurnView[]; more: boolean }
  /** The images waiting for the next prompt, a chip each under the prompt box. */
  | { type: 'images'; images: { id: string; text: string }[] }
  /** The effort the next turns ask for ('' : the model's own default). */
  | { type: 'effort'; effort: Effort | '' }
  /** The session's custom commands, for the prompt box's `/` completion (error: why none). */
  | { type: 'commands'; commands: CommandEntry[]; error?: string };

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
  /** **Run this plan** on a planned turn. */
  | { type: 'runPlan'; turnId: string }
  /** The mode in the header: pick another. */
  | { type: 'setMode' }
  /** A child session's "open" link under the task call that started it. */
  | { type: 'openSession'; sessionId: string }
  /** An image pasted into the prompt box (base64), and a chip's remove button. */
  | { type: 'pasteImage'; data: string; mimeType: string }
  | { type: 'dropImage'; id: string }
  /** The effort picker beside the send button ('' : the model's default). */
  | { type: 'effort'; effort: string }
  /** `/` typed first in the prompt box: the session's custom commands, to complete. */
  | { type: 'commands' }
  | { type: 'showLog' };

export interface ChatSink {
  post(message: ToWebview): void;
}

/** Where the chat goes while no view is open: nowhere. */
export const NO_VIEW: ChatSink = { post: () => undefined };

export interface LiveTurn {
  turn: TranscriptTurn;
  source: CancellationTokenSource;
  done: Promise<unknown>;
  /** A turn this window did not start (another window did): followed through its
   * notifications, with no request of ours to answer when it ends. */
  followed?: { settle(): void };
}

export type Listener<T> = (value: T) => void;

/** What one feature asks of another; SessionController wires each to the feature that does it. */
export interface SessionLinks {
  /** Following: draw a turn another window runs, and follow it. */
  follow(running: RunningTurn): void;
  /** Following: whether the followed turn has ended, as the history says. */
  checkFollowed(live: LiveTurn): Promise<void>;
  /** Following: reopen the session to show a turn another window started. */
  catchUp(sessionId: string): Promise<void>;
  /** Following: as catchUp, when a notification names a turn this window does not run. */
  catchUpWith(p: { sessionId: string }): void;
  /** Following: stop watching another window's turn (it runs on in the daemon). */
  leaveFollowed(): void;
  /** Paging: every step's text of turns drawn from the history. */
  fillSteps(turns: Turn[]): Promise<void>;
  /** Recovery: ask keep or revert about a command killed mid-run. */
  offerRecovery(pending: PendingRecovery | undefined): void;
  /** Steering: give the running turn more to go on. */
  steer(text: string): Promise<void>;
  /** Turns: run one turn. */
  turn(prompt: string): Promise<TurnResult | undefined>;
  /** Turns: go on with a paused or interrupted turn. */
  resume(turnId: string): Promise<TurnResult | undefined>;
  /** Sessions: make this daemon the session's writer. */
  takeover(): Promise<Session>;
  /** Walls: read the session's policy again (its walls and approval mode) and draw it. */
  readPolicy(): Promise<unknown>;
  /** Children: the child of the running turn that asks an approval (its name, and the turn
   * drawn under its task call); undefined when the open session asks. */
  childAsking(p: { sessionId: string; turnId: string; runId: string }): Promise<{ name: string; turn: TranscriptTurn; redraw(): void } | undefined>;
}

export class SessionCore {
  session?: Session;
  /** The open session's lineage in words, shown in the view's header. */
  lineage?: string;
  transcript: TranscriptTurn[] = [];
  /** session/history's cursor for the page before the first turn drawn; none: all are drawn. */
  historyCursor?: string;
  live?: LiveTurn;
  /** The client generation the session was opened or reopened under. */
  attached = -1;
  /** Numbers the keys of local turns and the ids of steers. */
  keys = 0;
  view: ChatSink = NO_VIEW;
  readonly coalescer: Coalescer;
  readonly sessionListeners = new Set<Listener<Session | undefined>>();
  readonly runningListeners = new Set<Listener<boolean>>();
  readonly usageListeners = new Set<Listener<UsageParams>>();
  readonly planListeners = new Set<Listener<LivePlan | undefined>>();
  readonly modeListeners = new Set<Listener<ApprovalMode | undefined>>();
  /** The plan in the live spot: the newest planned turn's, or the one a running turn keeps. */
  plan?: LivePlan;
  /** The open session's approval mode, as session/policy said it last (session/modes.ts). */
  mode?: { sessionId: string; approval: ApprovalMode };
  /** The mode the session had before plan mode was switched on in this window (the toggle goes
   * back to it; Run this plan offers it first). */
  modeBeforePlan?: { sessionId: string; approval: ApprovalMode };
  /** The open session's last `session/usage`: its context meter and spend. */
  usage?: UsageParams;
  /** The prompts queued behind the running turn (from any window), first to run first. */
  readonly queue = new PromptQueue();
  /** The session's budget (null: none) and what its turns have spent, once known. */
  budget: Budget | null = null;
  spent?: Spent;
  /** The MCP servers of the user's settings: given to a session again when it is reopened
   * (a daemon started since it was opened has only the config file's and the project's). */
  mcpServers: () => McpServer[] = () => [];
  /** session/open's policy for new sessions, from the user's settings (the walls, the approval mode and the task tool; none: the daemon's). */
  openPolicy: () => Policy | undefined = () => undefined;
  /** The open session's walls as the header shows them (session/walls.ts). */
  walls?: { sessionId: string; text: string; detail: string };
  /** The open session's walls being read: what the session does next waits for it. */
  wallsRead: Promise<unknown> = Promise.resolve();
  /** The images that go with the next prompt (images.ts). */
  readonly attachments = new Attachments();
  /** The effort the next turns ask for (session/turn's effort); undefined: the model's default. */
  effort?: Effort;
  /** Wired by SessionController once every feature is made. */
  links!: SessionLinks;

  constructor(
    readonly client: DaemonClient,
    readonly log: Log,
    readonly showLog: () => void,
    flushIntervalMs: number,
  ) {
    this.coalescer = new Coalescer((key) => this.draw(key), flushIntervalMs);
    this.attachments.onDidChange(() => this.postAttachments());
  }

  /** The chips of the images waiting for the next prompt, and the effort picked. */
  postAttachments(): void {
    this.view.post({ type: 'images', images: this.attachments.items.map((a) => ({ id: a.id, text: chipText(a) })) });
    this.view.post({ type: 'effort', effort: this.effort ?? '' });
  }

  get isRunning(): boolean {
    return this.live !== undefined;
  }

  serversParam(): { mcpServers?: McpServer[] } {
    const mcpServers = this.mcpServers();
    return mcpServers.length ? { mcpServers } : {};
  }

  /** The running turn, if the notification `p` is about it. */
  liveFor(p: { sessionId: string; turnId: string }): LiveTurn | undefined {
    const live = this.live;
    if (!live || this.session?.sessionId !== p.sessionId) {
      return undefined;
    }
    // a followed turn is known by its id; another turn's notifications are not its own
    return live.followed && live.turn.turnId !== p.turnId ? undefined : live;
  }

  /** After the daemon was restarted, reopen the session in the new daemon (once). */
  async ensureAttached(): Promise<void> {
    await this.wallsRead;
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
    this.showHistory(history, historyCursor);
    void this.links.fillSteps(history.filter((t) => t.outcome !== 'running'));
    if (live) {
      this.transcript.push(live);
    }
    this.postReset();
    this.notice('info', 'trellisd was restarted; the session was reopened.');
    this.log.info(`session ${session.sessionId} reopened after trellisd was restarted`);
    if (running && !this.live) {
      this.links.follow(running); // it ran on in the shared daemon
    }
    this.fireSession();
  }

  /** The transcript is `history` (steps to be filled), with `cursor` to the page before it. */
  showHistory(history: Turn[], cursor: string | undefined): void {
    this.transcript = history.map((t) => fromHistory(t));
    nameFollowedPlans(this.transcript);
    this.historyCursor = cursor;
    const sessionId = this.session?.sessionId;
    const planned = sessionId ? newestPlan(sessionId, history) : undefined;
    // a running turn's plan as it streamed stays when the history has none of it yet
    const plan = this.plan;
    const running =
      plan?.sessionId === sessionId &&
      (this.live?.turn.turnId === plan?.turnId || history.some((t) => t.turnId === plan?.turnId && t.outcome === 'running'));
    const streamed = running && planned?.turnId !== plan?.turnId ? plan : undefined;
    const turn = streamed && this.transcript.find((t) => t.turnId === streamed.turnId);
    if (turn) {
      turn.plan ??= streamed.plan;
    }
    this.setPlan(streamed ?? planned);
  }

  /** The plan in the live spot (the Plan view) is `plan`. */
  setPlan(plan: LivePlan | undefined): void {
    this.plan = plan;
    for (const listener of this.planListeners) {
      listener(plan);
    }
  }

  /** The open session's approval mode is `approval`, as the daemon said it. */
  setMode(sessionId: string, approval: ApprovalMode): void {
    const changed = this.mode?.sessionId !== sessionId || this.mode.approval !== approval;
    this.mode = { sessionId, approval };
    if (changed) {
      for (const listener of this.modeListeners) {
        listener(approval);
      }
    }
  }

  requireSession(): Session {
    if (!this.session) {
      throw new TrellisError('No trellisd session is open: start one or reopen one first.');
    }
    return this.session;
  }

  refuseIfRunning(what: string): void {
    if (this.live) {
      throw new TrellisError(`A turn is running: wait for it to end or cancel it before you ${what}.`);
    }
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

  postTurn(turn: TranscriptTurn): void {
    this.coalescer.flush();
    this.view.post({ type: 'turn', turn: turnView(turn) });
  }

  postReset(): void {
    this.coalescer.flush();
    const session = this.session;
    this.postQueue();
    this.postAttachments();
    this.view.post({ type: 'earlier', more: !!this.historyCursor });
    this.view.post({
      type: 'reset',
      session: session ? header(session, this.lineage, this.walls, this.mode) : null,
      turns: this.transcript.map(turnView),
      running: this.isRunning,
    });
  }

  /** The session's title and lineage, drawn again. */
  postHeader(session: Session): void {
    this.view.post({ type: 'session', session: header(session, this.lineage, this.walls, this.mode) });
  }

  postQueue(): void {
    this.view.post({ type: 'queue', queued: [...this.queue.list] });
    const text = this.budget ? spendText(this.budget, this.spent) : undefined;
    this.view.post({ type: 'spend', text: text ?? null });
  }

  /** A budget and what was spent, from an answer that has them. */
  takeSpend(answer: Partial<BudgetStatus>): void {
    if (answer.budget !== undefined) {
      this.budget = answer.budget;
    }
    if (answer.spent) {
      this.spent = answer.spent;
    }
    this.postQueue();
  }

  notice(level: 'info' | 'error', text: string): void {
    this.view.post({ type: 'notice', level, text });
  }

  fireSession(): void {
    for (const listener of this.sessionListeners) {
      listener(this.session);
    }
  }

  fireRunning(): void {
    const running = this.isRunning;
    this.view.post({ type: 'running', running });
    for (const listener of this.runningListeners) {
      listener(running);
    }
  }

  /** An error with what can be done about it: take the session over when another daemon
   * writes it, resume a turn whose daemon died, and always the log. */
  async showError(message: string, error?: unknown, turnId?: string): Promise<void> {
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
        await this.links.takeover();
      } else if (choice === 'Resume Turn' && turnId) {
        await this.links.resume(turnId);
      }
    } catch (failure) {
      void this.showError(messageOf(failure), failure);
    }
  }
}

function header(session: Session, lineage?: string, walls?: SessionCore['walls'], mode?: SessionCore['mode']): SessionHeader {
  return {
    sessionId: session.sessionId,
    title: session.title,
    root: session.root,
    ...(lineage ? { lineage } : {}),
    ...(session.worktree ? { worktree: worktreeText(session.worktree) } : {}),
    ...(walls?.sessionId === session.sessionId ? { walls: walls.text, wallsDetail: walls.detail } : {}),
    ...(mode?.sessionId === session.sessionId ? { mode: modeText(mode.approval), modeDetail: MODE_DESCRIPTIONS[mode.approval] } : {}),
  };
}

/** Run a restore; when files a person changed are in the way, name them and ask before forcing.
 * When they may hold another session's work (a command of it ran at the same time), say so,
 * naming the sessions (`client` looks their titles up), and ask the same. */
export async function overwriting<T>(run: (force: boolean) => Promise<T>, client?: Requester): Promise<T | undefined> {
  try {
    return await run(false);
  } catch (e) {
    const conflict = e instanceof DaemonError && e.code === ErrorCode.conflict ? e.data : undefined;
    const paths = (conflict as { paths?: unknown } | undefined)?.paths;
    if (!Array.isArray(paths)) {
      throw e;
    }
    const shared = sharedOf(conflict);
    const question = shared?.length
      ? sharedQuestion(shared, client ? await sessionTitles(client, sharedSessions(shared)) : new Map())
      : `These files changed since the agent wrote them: ${paths.join(', ')}. Overwrite them?`;
    const answer = await vscodeapi.showWarningMessage(question, 'Overwrite');
    return answer === 'Overwrite' ? run(true) : undefined;
  }
}

/** A text in one line of at most `limit` characters, for the log. */
export function excerpt(text: string, limit = 200): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > limit ? `${flat.slice(0, limit)}…` : flat;
}
