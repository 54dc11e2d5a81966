/**
 * The open session's walls (session/policy's `walls`) and its approval mode: read whenever the
 * session opens, is reopened or changes, and drawn in the chat view's header.
 */

import { messageOf, TrellisError } from '../errors';
import { Method } from '../protocol';
import type { Walls } from '../protocolTypes';
import { wallsDetail, wallsText } from '../walls';
import type { SessionCore } from './core';

const UNWALLED: Walls = { mode: 'off', network: true, writable: [], hidden: [], protected: [], tempBytes: 0, processes: 0 };

export class SessionWalls {
  /** The session whose walls were read last, or are being read. */
  private reading?: string;

  constructor(private readonly core: SessionCore) {
    // read once a session is opened, reopened, forked or imported (a session's walls are its
    // own: a restarted daemon or a renamed session keeps them)
    core.sessionListeners.add((session) => {
      if (session && session.sessionId !== this.reading) {
        this.reading = session.sessionId;
        core.wallsRead = this.refresh().catch((error) => {
          this.reading = undefined;
          core.log.warn(`the walls of session ${session.sessionId}: ${messageOf(error)}`);
        });
      }
    });
  }

  /** Read the open session's walls and draw them; undefined when no session is open. */
  async refresh(): Promise<Walls | undefined> {
    const { core } = this;
    const session = core.session;
    if (!session) {
      return undefined;
    }
    const policy = await core.client.request(Method.policy, { sessionId: session.sessionId });
    // a daemon from before the walls answers none: its programs run unconfined
    const walls: Walls = policy.walls ?? { ...UNWALLED, network: policy.network ?? true };
    if (core.session?.sessionId !== session.sessionId) {
      return walls; // another session was opened meanwhile
    }
    core.setMode(session.sessionId, policy.approval ?? 'ask');
    const text = wallsText(walls);
    const changed = core.walls?.sessionId !== session.sessionId || core.walls.text !== text;
    core.walls = { sessionId: session.sessionId, text, detail: wallsDetail(walls).join('\n') };
    core.postHeader(core.session);
    if (changed) {
      core.log.info(`session ${session.sessionId}: ${text}`);
    }
    return walls;
  }

  /** The open session's walls, as the daemon has them now. */
  async current(): Promise<Walls> {
    const session = this.core.requireSession();
    await this.core.ensureAttached();
    const walls = await this.refresh();
    if (!walls) {
      throw new TrellisError(`Session ${session.sessionId} was closed before its walls were read.`);
    }
    return walls;
  }
}
