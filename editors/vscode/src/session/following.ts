/**
 * Following a turn this window did not start (another window did, or it ran on in the shared
 * daemon while this window reloaded): it is drawn as far as it has streamed, its notifications
 * carry it on, and session/turnEnded, or the history, says how it ended.
 */

import { CancellationTokenSource } from 'vscode-jsonrpc';

import { lostMessage } from '../client';
import { messageOf } from '../errors';
import { HISTORY_PAGE } from '../paging';
import { Method, RunningTurn, TurnEndedParams, TurnResult } from '../protocol';
import { appendText, appendThoughtText, Block, callFound, finish, footerText, TranscriptTurn, withCommittedSteps } from '../transcript';
import { excerpt, LiveTurn, SessionCore } from './core';

export class Following {
  /** A reopen is under way to show a turn another window started. */
  private catchingUp = false;
  private catchUpAgain = false;
  private readonly exitSubscription: { dispose(): void };

  constructor(private readonly core: SessionCore) {
    this.exitSubscription = core.client.onDidExit((exit, wasReady) => {
      const live = core.live;
      if (live?.followed) {
        // Whether the turn goes on without us is the daemon's to say: reopening shows it.
        live.turn.error = `${lostMessage(exit)}; reopen the session to see how the turn went on`;
        this.stopFollowing(live, 'interrupted');
      }
      if (!exit.expected && wasReady && !core.live) {
        void core.showError(lostMessage(exit));
      }
    });
  }

  dispose(): void {
    this.exitSubscription.dispose();
  }

  /** Follow a turn of the session running in the daemon that this window did not start:
   * draw it as far as it has streamed, then let its notifications carry it on. */
  follow(running: RunningTurn): void {
    const { core } = this;
    let turn = core.transcript.find((t) => t.turnId === running.turnId);
    if (!turn) {
      // it started as the reopen was answered: not in the history that came with it
      const prompt = running.prompt ?? '';
      turn = { key: running.turnId, turnId: running.turnId, prompt, blocks: [], outcome: 'running' };
      if (core.plan?.turnId === running.turnId) {
        turn.plan = core.plan.plan; // its plan came before the reopen that shows it
      }
      core.transcript.push(turn);
    }
    turn.outcome = 'running';
    turn.error = undefined;
    // The text so far is the current step's; between two steps it is the last committed
    // step's, which the stored reply already holds.
    const stored = turn.blocks.map((b) => (b.kind === 'text' ? b.text : '')).join('');
    const reply = turn.blocks.find((b): b is Extract<Block, { kind: 'text' }> => b.kind === 'text')?.text ?? '';
    const drawnThought = turn.blocks.some((b) => b.kind === 'thought' && b.step === running.step);
    if (running.thought && running.step !== null && !drawnThought) {
      appendThoughtText(turn, running.step, running.thought); // what it reasoned so far, folded
    }
    if (running.text && !stored.endsWith(running.text)) {
      appendText(turn, running.step ?? 1, running.text);
    }
    // A command still running, calls waiting: drawn as far as they have gone.
    for (const call of running.calls ?? []) {
      callFound(turn, { sessionId: running.sessionId, turnId: running.turnId, runId: running.runId }, call);
    }
    let settle: () => void = () => undefined;
    const done = new Promise<void>((r) => (settle = r));
    core.live = { turn, source: new CancellationTokenSource(), done, followed: { settle } };
    core.log.info(`following turn ${running.turnId}, running in trellisd (started in another window)`);
    core.postTurn(turn);
    core.fireRunning();
    void this.fillFollowed(turn, reply, running);
  }

  /** The texts of the steps a joined turn committed before the one streaming (its stored
   * reply is only the last of them). */
  private async fillFollowed(turn: TranscriptTurn, reply: string, running: RunningTurn): Promise<void> {
    const { core } = this;
    try {
      const { steps } = await core.client.request(Method.runSteps, { runId: running.runId });
      if (core.live?.turn === turn && withCommittedSteps(turn, reply, steps, running.step)) {
        core.coalescer.mark(turn.key);
      }
    } catch (error) {
      core.log.warn(`could not read the steps of turn ${running.turnId}: ${messageOf(error)}`);
    }
  }

  /** Whether the followed turn has ended, as the history says; if so, show how it ended. */
  async checkFollowed(live: LiveTurn): Promise<void> {
    const { core } = this;
    const session = core.session;
    if (!session || core.live !== live) {
      return;
    }
    const { turns } = await core.client.request(Method.history, {
      sessionId: session.sessionId,
      limit: HISTORY_PAGE,
    });
    const stored = turns.find((t) => t.turnId === live.turn.turnId);
    if (!stored || stored.outcome === 'running' || core.live !== live) {
      return;
    }
    this.endFollowed(live, { ...stored, steps: 0 }, turns[turns.length - 1]?.turnId);
  }

  /** A followed turn ended: its reply, outcome and cost are drawn, and the window is free. */
  private endFollowed(live: LiveTurn, result: TurnResult, head?: string): void {
    const { core } = this;
    core.coalescer.flush();
    finish(live.turn, result);
    if (head && core.session) {
      core.session.head = head;
    }
    core.log.info(`turn ${result.turnId} ${footerText(live.turn)} (followed); reply: ${excerpt(result.reply)}`);
    this.stopFollowing(live, result.outcome);
  }

  /** session/turnEnded: a turn of the session ended, whichever window started it. A turn this
   * window follows is finished from it; one it started ends with its session/turn answer. */
  onTurnEnded(p: TurnEndedParams): void {
    const { core } = this;
    if (core.session?.sessionId !== p.sessionId) {
      return;
    }
    const live = core.live;
    if (live?.followed && live.turn.turnId === p.turnId) {
      // the model is the one the turn was drawn with (session/turnEnded does not repeat it)
      const result: TurnResult = { ...p, steps: 0, model: live.turn.model ?? null, ...(p.recovery ? { recovery: p.recovery } : {}) };
      // the head moves to a new turn; a resumed turn was the head already
      this.endFollowed(live, result, p.turnId);
      if (p.recovery) {
        core.links.offerRecovery({ turnId: p.turnId, runId: p.runId, tool: p.recovery.tool, argv: p.recovery.argv });
      }
    }
  }

  /** Stop watching another window's turn (it runs on in the daemon), to open a session. */
  leaveFollowed(): void {
    if (this.core.live?.followed) {
      this.stopFollowing(this.core.live, 'running');
    }
  }

  private stopFollowing(live: LiveTurn, outcome: string): void {
    const { core } = this;
    if (core.live !== live) {
      return;
    }
    live.turn.outcome = outcome;
    core.live = undefined;
    live.source.dispose();
    core.postTurn(live.turn);
    core.fireRunning();
    core.fireSession();
    live.followed?.settle();
  }

  /** A notification of the open session while no turn is drawn running: another window started
   * one, which is drawn by catching up. */
  catchUpWith(p: { sessionId: string }): void {
    const { core } = this;
    if (!core.live && core.session?.sessionId === p.sessionId) {
      this.catchUp(p.sessionId).catch((error) => core.log.warn(`could not show the turn another window started: ${messageOf(error)}`));
    }
  }

  /** A turn another window started in this session: reopen the session, which draws the turn
   * as far as it has streamed (the notifications that came meanwhile are in that text), and
   * follow it from there. */
  async catchUp(sessionId: string): Promise<void> {
    const { core } = this;
    if (this.catchingUp) {
      this.catchUpAgain = true; // what it reads may be older than what was just said
      return;
    }
    this.catchingUp = true;
    core.log.info(`session ${sessionId}: a turn started in another window; drawing it`);
    try {
      const { history, running, historyCursor, ...session } = await core.client.request(Method.reopen, {
        sessionId,
        limit: HISTORY_PAGE,
      });
      if (core.session?.sessionId !== sessionId || core.live) {
        return;
      }
      core.session = session;
      core.showHistory(history, historyCursor);
      void core.links.fillSteps(history.filter((t) => t.turnId !== running?.turnId));
      core.takeSpend(session);
      core.postReset();
      if (running) {
        this.follow(running);
      }
      core.fireSession();
    } finally {
      this.catchingUp = false;
      if (this.catchUpAgain) {
        this.catchUpAgain = false;
        if (!core.live) {
          await this.catchUp(sessionId);
        }
      }
    }
  }
}
