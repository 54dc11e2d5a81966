/**
 * Steering the running turn: the text reaches the model at its next step (session/steer), and
 * session/steered says at which step it did, or hands it back when the turn ended first.
 */

import { DaemonError, messageOf } from '../errors';
import { ErrorCode, Method, SteeredParams } from '../protocol';
import { Block, steerDelivered, TranscriptTurn } from '../transcript';
import { excerpt, SessionCore } from './core';

type SteerBlock = Extract<Block, { kind: 'steer' }>;

export class Steering {
  constructor(private readonly core: SessionCore) {}

  /** Steer the running turn: the text reaches the model at its next step. */
  async steer(text: string): Promise<void> {
    const { core } = this;
    const session = core.requireSession();
    const live = core.live;
    if (!live) {
      await core.links.turn(text);
      return;
    }
    const clientMsgId = `steer-${Date.now().toString(36)}-${++core.keys}`;
    const block: SteerBlock = { kind: 'steer', clientMsgId, text, state: 'sending' };
    live.turn.blocks.push(block);
    core.coalescer.mark(live.turn.key);
    try {
      await core.client.request(Method.steer, { sessionId: session.sessionId, text, clientMsgId });
      if (block.state === 'sending') {
        block.state = 'queued';
      }
      core.log.info(`steer ${clientMsgId} queued: ${excerpt(text)}`);
    } catch (error) {
      block.state = 'failed';
      if (error instanceof DaemonError && error.code === ErrorCode.notRunning) {
        block.note = 'the turn had ended: sent as a new prompt';
        core.coalescer.mark(live.turn.key);
        if (live.followed) {
          await core.links.checkFollowed(live);
        }
        await live.done;
        await core.links.turn(text);
        return;
      }
      block.note =
        error instanceof DaemonError && error.code === ErrorCode.methodNotFound
          ? 'this trellisd cannot steer a running turn'
          : `not sent: ${messageOf(error)}`;
      core.log.error(`steer failed: ${messageOf(error)}`);
      void core.showError(messageOf(error));
    }
    core.coalescer.mark(live.turn.key);
  }

  /** session/steered: a steer reached the model at a step, or was handed back undelivered. */
  onSteered(p: SteeredParams): void {
    const { core } = this;
    if (core.session?.sessionId !== p.sessionId) {
      return;
    }
    let owner: TranscriptTurn | undefined;
    let block: SteerBlock | undefined;
    for (let i = core.transcript.length - 1; i >= 0 && !block; i--) {
      const found = core.transcript[i].blocks.find(
        (b): b is SteerBlock => b.kind === 'steer' && b.clientMsgId === p.clientMsgId,
      );
      if (found) {
        owner = core.transcript[i];
        block = found;
      }
    }
    if (!block) {
      const live = core.liveFor(p);
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
      core.view.post({ type: 'draft', text: p.text }); // handed back: the user may send it again
    }
    core.log.info(
      `steer ${block.clientMsgId} ${p.delivered ? `delivered at step ${p.step}` : 'not delivered: the turn ended first'}`,
    );
    core.coalescer.mark(owner!.key);
  }
}
