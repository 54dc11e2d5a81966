/**
 * Running turns: a prompt from the input box (with the active file when asked), a planned turn's
 * plan (session/plan/approve), a turn streamed into the view until it ends, step mode, pausing,
 * resuming a paused or interrupted turn, and cancelling the running one.
 */

import { CancellationToken, CancellationTokenSource } from 'vscode-jsonrpc';

import { DaemonError, messageOf, TrellisError } from '../errors';
import { planTurnText, turnName } from '../plan';
import type { Attachment } from '../images';
import { ApprovalMode, ContextEntry, ErrorCode, Method, TurnResult } from '../protocol';
import type { RequestParams } from '../protocolTypes';
import { pendingFrom } from '../recovery';
import { parseCommand, promptParams } from '../slashCommand';
import { addBlock, contextLine, finish, footerText, fromHistory, TranscriptTurn } from '../transcript';
import { excerpt, LiveTurn, SessionCore } from './core';

export class Turns {
  /** With it on, a prompt from the input box goes with the active editor's file. */
  attachActiveFile = false;

  /** The active editor's file as context; set by the extension (it reads the editor). */
  activeFile: () => ContextEntry | undefined = () => undefined;

  /** Step mode: each turn pauses after every step, and a resume takes one more. */
  stepMode = false;

  constructor(private readonly core: SessionCore) {}

  /** The input box: a prompt starts a turn; while a turn runs, it steers that turn. */
  async send(text: string): Promise<void> {
    const trimmed = text.trim();
    if (!trimmed) {
      return;
    }
    const call = this.core.live ? parseCommand(trimmed) : undefined;
    if (call) {
      throw new TrellisError(`A turn is running: /${call.name} runs as a turn of its own. Queue it, or run it once this turn ends.`);
    }
    if (this.core.live) {
      await this.core.links.steer(trimmed);
    } else {
      const active = this.attachActiveFile ? this.activeFile() : undefined;
      await this.turn(trimmed, active ? [active] : undefined, this.core.attachments.take());
    }
  }

  toggleAttachActiveFile(): boolean {
    this.attachActiveFile = !this.attachActiveFile;
    this.core.log.info(`the active file ${this.attachActiveFile ? 'goes' : 'no longer goes'} with each prompt`);
    return this.attachActiveFile;
  }

  toggleStepMode(): boolean {
    this.stepMode = !this.stepMode;
    this.core.log.info(`step mode ${this.stepMode ? 'on' : 'off'}`);
    return this.stepMode;
  }

  /** Run one turn; the reply streams into the view. Errors are shown, not thrown.
   * `context`: what the editor attaches to the prompt (a selection, a file); `images`: the
   * pictures that go with it (refused ones come back as chips). A `/name args` prompt runs the
   * session's custom command `name` (slashCommand.ts). */
  async turn(prompt: string, context?: ContextEntry[], images: Attachment[] = []): Promise<TurnResult | undefined> {
    const { core } = this;
    const session = core.requireSession();
    if (core.live) {
      throw new TrellisError('A turn is running: steer it or cancel it first.');
    }
    const turn: TranscriptTurn = { key: `local-${++core.keys}`, prompt, blocks: [], outcome: 'running' };
    if (context?.length) {
      const root = session.root.endsWith('/') ? session.root : `${session.root}/`;
      const relative = (p: string) => (p.startsWith(root) ? p.slice(root.length) : p);
      const text = contextLine(context, relative);
      addBlock(turn, { kind: 'notice', level: 'info', text });
      core.log.info(`prompt ${text}`);
    }
    if (images.length) {
      turn.images = images.map((a) => ({ mimeType: a.mimeType, bytes: a.bytes, dataUrl: a.dataUrl }));
      core.log.info(`prompt with ${images.length} image(s): ${images.map((a) => a.label).join(', ')}`);
    }
    core.transcript.push(turn);
    const effort = core.effort;
    if (effort) {
      core.log.info(`the turn asks for effort ${effort}`);
    }
    const result = await this.run(turn, true, async (token) => {
      await core.ensureAttached();
      const stepMode = this.stepMode || undefined;
      const params: RequestParams<'session/turn'> = {
        sessionId: session.sessionId,
        ...promptParams(prompt),
        stepMode,
        ...(context?.length ? { context } : {}),
        // the generated type of the list is `{path} | {data, mimeType}[]`: each entry is either
        ...(images.length ? { images: images.map((a) => a.input) as unknown as RequestParams<'session/turn'>['images'] } : {}),
        ...(effort ? { effort } : {}),
      };
      return core.client.request(Method.turn, params, token);
    });
    if (!result && images.length && /^images/.test(turn.error ?? '')) {
      core.attachments.restore(images); // refused for an image: fix it or remove it, then send again
    }
    return result;
  }

  /** Run the plan of the planned turn `turnId` under `approval` (session/plan/approve): a new
   * turn at the head, streamed as any turn, that records which plan it carries out. The mode
   * becomes the session's, as session/mode would set it. */
  async approvePlan(turnId: string, approval: ApprovalMode): Promise<TurnResult | undefined> {
    const { core } = this;
    const session = core.requireSession();
    if (core.live) {
      throw new TrellisError('A turn is running: wait for it to end or cancel it before you run a plan.');
    }
    const planned = core.transcript.find((t) => t.turnId === turnId);
    const name = planned ? turnName(planned.prompt) : undefined;
    const turn: TranscriptTurn = {
      key: `local-${++core.keys}`,
      prompt: `Carry out the plan of ${planTurnText(turnId, name)}`,
      blocks: [],
      outcome: 'running',
      followsPlan: { turnId, ...(name ? { name } : {}) },
    };
    core.transcript.push(turn);
    core.log.info(`running the plan of turn ${turnId} under the approval mode ${approval}`);
    try {
      return await this.run(turn, true, async (token) => {
        await core.ensureAttached();
        core.setMode(session.sessionId, approval);
        return core.client.request(Method.planApprove, { sessionId: session.sessionId, turnId, approval }, token);
      });
    } finally {
      void core.links.readPolicy().catch(() => undefined);
    }
  }

  /** Pause the running turn: the step it is taking completes, then it ends `paused`. */
  async pause(): Promise<void> {
    const { core } = this;
    const session = core.session;
    if (!core.live || !session) {
      return;
    }
    core.log.info('pausing the running turn');
    const result = await core.client.request(Method.pause, { sessionId: session.sessionId });
    if (!result.pausing) {
      core.log.info('nothing was paused: the turn had ended');
    }
  }

  /** Go on with a turn that was paused or interrupted (its daemon stopped mid-turn), from its last step. */
  async resume(turnId: string): Promise<TurnResult | undefined> {
    const { core } = this;
    const session = core.requireSession();
    core.refuseIfRunning('resume another turn');
    await core.ensureAttached();
    let turn = core.transcript.find((t) => t.turnId === turnId);
    if (!turn) {
      const { turns } = await core.client.request(Method.turns, { sessionId: session.sessionId });
      const stored = turns.find((t) => t.turnId === turnId);
      if (!stored) {
        throw new TrellisError(`turn ${turnId} is not in this session`);
      }
      turn = fromHistory(stored);
      core.transcript.push(turn);
    }
    turn.outcome = 'running';
    turn.error = undefined;
    const resumed = turn;
    core.log.info(`resuming turn ${turnId}`);
    return this.run(resumed, false, (token) =>
      core.client.request(
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
    const { core } = this;
    const session = core.requireSession();
    const source = new CancellationTokenSource();
    let settle: () => void = () => undefined;
    const live: LiveTurn = { turn, source, done: new Promise<void>((r) => (settle = r)) };
    core.live = live;
    core.postTurn(turn);
    core.fireRunning();
    try {
      const result = await request(source.token);
      core.coalescer.flush();
      finish(turn, result);
      core.takeSpend(result);
      if (movesHead && core.session?.sessionId === session.sessionId) {
        core.session.head = result.turnId;
        if (!core.session.title) {
          // the daemon names an untitled session after its first prompt's first line
          core.session.title = turn.prompt.split('\n', 1)[0].slice(0, 60);
          core.postHeader(core.session);
        }
      }
      core.log.info(`turn ${result.turnId} ${footerText(turn)}; reply: ${excerpt(result.reply)}`);
      if (result.outcome === 'error') {
        void core.showError(`trellisd: the turn failed: ${result.error ?? 'the daemon gave no reason'}`);
      }
      if (result.recovery) {
        core.links.offerRecovery({ turnId: result.turnId, runId: result.runId, tool: result.recovery.tool, argv: result.recovery.argv });
      }
      return result;
    } catch (error) {
      core.coalescer.flush();
      const pending = error instanceof DaemonError && error.code === ErrorCode.conflict ? pendingFrom(error.data) : undefined;
      if (pending) {
        // refused until a person decides about a command killed mid-run
        turn.outcome = 'error';
        turn.error = `not run: ${messageOf(error)}`;
        core.log.info(`turn refused: ${messageOf(error)}`);
        core.links.offerRecovery(pending);
      } else if (error instanceof DaemonError && error.code === ErrorCode.requestCancelled) {
        turn.outcome = 'cancelled';
        core.log.info('turn cancelled');
      } else {
        turn.outcome = 'error';
        turn.error = messageOf(error);
        core.log.error(`turn failed: ${turn.error}`);
        void core.showError(turn.error, error, turn.turnId);
      }
      return undefined;
    } finally {
      core.live = undefined;
      source.dispose();
      core.postTurn(turn);
      core.fireRunning();
      core.fireSession();
      settle();
    }
  }

  /** Cancel the running turn; the daemon records it as cancelled and ends it. */
  async cancel(): Promise<void> {
    const { core } = this;
    const live = core.live;
    const session = core.session;
    if (!live || !session) {
      return;
    }
    core.log.info('cancelling the running turn');
    try {
      const result = await core.client.request(Method.cancel, { sessionId: session.sessionId });
      if (!result.cancelled) {
        core.log.info('nothing was cancelled: the turn had ended');
      }
      if (live.followed) {
        await core.links.checkFollowed(live);
      }
    } catch (error) {
      if (error instanceof DaemonError && error.code === ErrorCode.methodNotFound) {
        live.source.cancel(); // a daemon without session/cancel still honours $/cancelRequest
        return;
      }
      throw error;
    }
  }
}
