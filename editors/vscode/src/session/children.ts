/**
 * Child sessions of the running turn (the `task` tool): the daemon tells every window following
 * the parent of each child's tokens, steps, tool calls and end, under the child's own sessionId.
 * Those are drawn under the parent's task call that started the child, never into the parent's
 * own text; the child's approvals name the child. A notification of a session that is neither
 * the open one nor a child of its running turn is left alone.
 */

import { messageOf } from '../errors';
import { Method, StepParams, TokenParams, ToolCallParams, ToolOutputParams, TurnEndedParams, TurnRef } from '../protocol';
import { appendText, Block, callChanged, callPrinted, ChildRun, childName, finish, TranscriptTurn } from '../transcript';
import type { SessionCore } from './core';
import { drawStep } from './stream';

type ToolBlock = Extract<Block, { kind: 'tool' }>;

interface Child {
  run: ChildRun;
  /** The parent's turn the child was started by. */
  parent: TranscriptTurn;
  /** Settles once the child's prompt was looked up (or could not be). */
  described: Promise<void>;
}

export class Children {
  /** The children seen while this window drew their parent's turn, by session id. */
  private readonly children = new Map<string, Child>();
  /** Sessions found not to be a child of the open session: their notifications are left alone. */
  private readonly strangers = new Set<string>();

  constructor(private readonly core: SessionCore) {}

  /** Whether `p` is about a session other than the open one (drawn here if it is a child). */
  private foreign(p: { sessionId: string }): boolean {
    return !!this.core.session && this.core.session.sessionId !== p.sessionId;
  }

  /** The child `p` is about, first seen now if the open session has a turn running. */
  private childOf(p: TurnRef): Child | undefined {
    const known = this.children.get(p.sessionId);
    if (known || this.strangers.has(p.sessionId)) {
      return known;
    }
    const { core } = this;
    const live = core.live;
    const parentId = core.session?.sessionId;
    if (!live || !parentId) {
      return undefined;
    }
    for (const [id, earlier] of this.children) {
      if (earlier.parent !== live.turn && earlier.run.turn.outcome !== 'running') {
        this.children.delete(id); // a child of a turn that has ended: nothing more comes of it
      }
    }
    const turn: TranscriptTurn = { key: p.sessionId, turnId: p.turnId, prompt: '', blocks: [], outcome: 'running' };
    const child: Child = { run: { sessionId: p.sessionId, turn }, parent: live.turn, described: Promise.resolve() };
    this.children.set(p.sessionId, child);
    child.described = this.describe(child, parentId);
    this.place(child);
    core.log.info(`child session ${p.sessionId} of session ${parentId} started`);
    return child;
  }

  /** The child's prompt, from the daemon, and whether it is the parent's child at all. */
  private async describe(child: Child, parentId: string): Promise<void> {
    const { core } = this;
    const sessionId = child.run.sessionId;
    try {
      const [{ sessions }, { turns }] = await Promise.all([
        core.client.request(Method.list, { parentSessionId: parentId, limit: 200 }),
        core.client.request(Method.history, { sessionId, limit: 1 }),
      ]);
      if (!sessions.some((s) => s.sessionId === sessionId)) {
        this.leave(child);
        return;
      }
      const first = turns.find((t) => t.turnId === child.run.turn.turnId) ?? turns[0];
      if (first) {
        child.run.turn.prompt = first.prompt;
      }
      this.place(child);
      this.redraw(child);
    } catch (error) {
      core.log.warn(`could not look up child session ${sessionId}: ${messageOf(error)}`);
    }
  }

  /** A session that is not a child of the open one (a fork another window follows, say). */
  private leave(child: Child): void {
    const sessionId = child.run.sessionId;
    this.children.delete(sessionId);
    this.strangers.add(sessionId);
    const block = this.taskCalls(child.parent).find((b) => b.child === child.run);
    if (block) {
      block.child = undefined;
      this.core.coalescer.mark(child.parent.key);
    }
  }

  private taskCalls(turn: TranscriptTurn): ToolBlock[] {
    return turn.blocks.filter((b): b is ToolBlock => b.kind === 'tool' && b.name === 'task');
  }

  /** Put the child under the task call that started it: the one whose prompt is the child's,
   * else the first running call without a child yet (the child's prompt is not known yet). */
  private place(child: Child): void {
    const calls = this.taskCalls(child.parent);
    const prompt = child.run.turn.prompt;
    const now = calls.find((b) => b.child === child.run);
    const started = (b: ToolBlock) => !!b.child && b.child.turn.prompt === String(b.arguments.prompt ?? '');
    const target =
      (prompt ? calls.find((b) => String(b.arguments.prompt ?? '') === prompt && (b === now || !started(b))) : undefined) ??
      now ??
      calls.find((b) => !b.child && b.status === 'running') ??
      calls.find((b) => !b.child);
    if (!target || target === now) {
      return;
    }
    const displaced = target.child;
    target.child = child.run;
    if (now) {
      now.child = displaced;
    }
    this.redraw(child);
  }

  private redraw(child: Child): void {
    if (!this.taskCalls(child.parent).some((b) => b.child === child.run)) {
      this.place(child); // its call was not drawn yet when the child began
    }
    this.core.coalescer.mark(child.parent.key);
  }

  onToken(p: TokenParams): boolean {
    const child = this.foreign(p) ? this.childOf(p) : undefined;
    if (child) {
      appendText(child.run.turn, p.step, p.text);
      this.redraw(child);
    }
    return this.foreign(p);
  }

  onStep(p: StepParams): boolean {
    const child = this.foreign(p) ? this.childOf(p) : undefined;
    if (child && drawStep(child.run.turn, p)) {
      this.redraw(child);
    }
    return this.foreign(p);
  }

  onToolCall(p: ToolCallParams): boolean {
    const child = this.foreign(p) ? this.childOf(p) : undefined;
    if (child) {
      callChanged(child.run.turn, p);
      this.redraw(child);
    }
    return this.foreign(p);
  }

  onToolOutput(p: ToolOutputParams): boolean {
    const child = this.foreign(p) ? this.childOf(p) : undefined;
    if (child && callPrinted(child.run.turn, p.callId, p.text)) {
      this.redraw(child);
    }
    return this.foreign(p);
  }

  onTurnEnded(p: TurnEndedParams): boolean {
    const child = this.foreign(p) ? this.childOf(p) : undefined;
    if (child) {
      finish(child.run.turn, { ...p, steps: 0, model: null });
      this.core.log.info(`child session ${p.sessionId} ended ${p.outcome}`);
      this.redraw(child);
    }
    return this.foreign(p);
  }

  /** An approval a child asks: who asks (named by its prompt), and where its question is
   * drawn (under the task call). Undefined for the open session's own approvals. */
  async asking(p: TurnRef): Promise<{ name: string; turn: TranscriptTurn; redraw(): void } | undefined> {
    const child = this.foreign(p) ? this.childOf(p) : undefined;
    if (!child) {
      return undefined;
    }
    await child.described;
    if (this.children.get(p.sessionId) !== child) {
      return undefined;
    }
    return { name: childName(child.run), turn: child.run.turn, redraw: () => this.redraw(child) };
  }
}
