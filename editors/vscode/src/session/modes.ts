/**
 * The session's approval mode: read with its policy (session/walls.ts), set with session/mode,
 * and the plan-mode toggle, which remembers the mode it left so that it can go back to it.
 */

import { messageOf } from '../errors';
import { Method } from '../protocol';
import type { ApprovalMode, ModeChangedParams } from '../protocol';
import type { SessionCore } from './core';

export class Modes {
  constructor(private readonly core: SessionCore) {}

  /** The open session's mode as last read; undefined before session/policy answered. */
  get current(): ApprovalMode | undefined {
    const { mode, session } = this.core;
    return mode && mode.sessionId === session?.sessionId ? mode.approval : undefined;
  }

  /** The open session's mode, read from the daemon when it is not known yet. */
  async known(): Promise<ApprovalMode> {
    this.core.requireSession();
    await this.core.ensureAttached();
    if (!this.current) {
      await this.core.links.readPolicy();
    }
    return this.current ?? 'ask';
  }

  /** The mode the session had before plan mode (ask when this window does not know it). */
  get beforePlan(): ApprovalMode {
    const before = this.core.modeBeforePlan;
    return before && before.sessionId === this.core.session?.sessionId ? before.approval : 'ask';
  }

  /** Set the session's approval mode (session/mode): it holds from the next tool call on. */
  async set(approval: ApprovalMode): Promise<ApprovalMode> {
    const { core } = this;
    const session = core.requireSession();
    const before = await this.known();
    if (approval === 'plan' && before !== 'plan') {
      core.modeBeforePlan = { sessionId: session.sessionId, approval: before };
    }
    const policy = await core.client.request(Method.mode, { sessionId: session.sessionId, approval });
    core.log.info(`session ${session.sessionId}: approval mode ${before} -> ${policy.approval ?? approval}`);
    if (core.session?.sessionId === session.sessionId) {
      core.setMode(session.sessionId, policy.approval ?? approval);
      await core.links.readPolicy(); // auto and never bring walls of their own
    }
    return policy.approval ?? approval;
  }

  /** The open session's mode changed (session/modeChanged), here or in another window, by a
   * plan's approval or a custom command's turn: the header and the status bar show it at
   * once, and the walls (auto and never bring their own) are read again. */
  onModeChanged(p: ModeChangedParams): void {
    const { core } = this;
    const session = core.session;
    const before = this.current;
    if (p.sessionId !== session?.sessionId || before === p.approval) {
      return;
    }
    if (p.approval === 'plan' && before) {
      core.modeBeforePlan = { sessionId: p.sessionId, approval: before };
    }
    core.log.info(`session ${p.sessionId}: approval mode ${before ?? '?'} -> ${p.approval}`);
    core.setMode(p.sessionId, p.approval);
    core.postHeader(session);
    void core.links.readPolicy().catch((error) => core.log.warn(`the walls of session ${p.sessionId}: ${messageOf(error)}`));
  }

  /** Plan mode on, or off again back to the mode before it; the mode the session is in now. */
  async togglePlan(): Promise<ApprovalMode> {
    return this.set((await this.known()) === 'plan' ? this.beforePlan : 'plan');
  }
}
