/**
 * Approvals: session/requestApproval drawn into the running turn and asked of the user (with the
 * proposed diff of a write), and the approvals the session remembers (session/policy's grants),
 * which can be taken back (session/revoke).
 */

import { argumentsLine, askApproval } from '../approval';
import { ApprovalParams, ApprovalResult, Grant, Method, RevocableGrant } from '../protocol';
import { showProposed } from '../proposed';
import { addBlock, Block, ruleText, ruleWords } from '../transcript';
import * as vscodeapi from '../vscodeapi';
import { escalationCommand, isEscalation } from '../walls';
import type { SessionCore } from './core';

export class Approvals {
  constructor(private readonly core: SessionCore) {}

  /** Ask the user; the answer is the daemon's, or 'deny' when the question was closed. */
  async onApproval(p: ApprovalParams, token: vscodeapi.CancellationToken): Promise<ApprovalResult> {
    const { core } = this;
    const live = core.liveFor(p);
    const child = live ? undefined : await core.links.childAsking(p);
    const block: Extract<Block, { kind: 'approval' }> = {
      kind: 'approval',
      tool: p.tool,
      summary: p.summary,
      arguments: p.arguments ?? {},
      decision: 'pending',
      ...(isEscalation(p) ? { escalate: { command: escalationCommand(p), reason: p.reason ?? '' } } : {}),
      ...(p.proposedRule?.length ? { rule: p.proposedRule } : {}),
    };
    const redraw = () => (child ? child.redraw() : live && core.coalescer.mark(live.turn.key));
    const turn = child?.turn ?? live?.turn;
    if (turn) {
      addBlock(turn, block);
      redraw();
      core.coalescer.flush();
    }
    const mcp = p.mcp ? ` [MCP server ${p.mcp.server}${p.mcp.tool ? `, tool ${p.mcp.tool}` : ''}]` : '';
    const asker = child ? `${child.name} asks: ` : '';
    const asked = block.escalate ? `escalation asked (outside the walls): ${block.escalate.command} because: ${block.escalate.reason}` : 'approval asked:';
    const rule = block.rule ? ` [rule proposed: ${ruleText(block.rule)}]` : '';
    core.log.info(`${asked} ${asker}${p.tool} ${argumentsLine(p.arguments ?? {})} (${p.summary})${mcp}${rule}`);
    if (p.diff && core.session) {
      showProposed(core.session.root, p.diff).catch((e) => core.log.info(`could not show the diff: ${e}`));
    }
    const decision = await askApproval(p, token, child?.name);
    // Withdrawn by the daemon: the turn was cancelled, or the answer came too late.
    block.decision = token.isCancellationRequested ? 'withdrawn' : decision;
    redraw();
    core.log.info(`${block.escalate ? 'escalation' : 'approval'} ${block.decision === 'withdrawn' ? 'withdrawn by trellisd' : `answered: ${decision}`} for ${p.tool}`);
    return { decision };
  }

  /** The open session's remembered approvals (session/policy's grants). */
  async grants(): Promise<Grant[]> {
    const { core } = this;
    const current = core.requireSession();
    await core.ensureAttached();
    const policy = await core.client.request(Method.policy, { sessionId: current.sessionId });
    return policy.grants ?? [];
  }

  /** Take back a remembered approval: the action is asked for again. */
  async revoke(grant: RevocableGrant): Promise<Grant[]> {
    const { core } = this;
    const current = core.requireSession();
    await core.ensureAttached();
    const policy = await core.client.request(Method.revoke, { sessionId: current.sessionId, grant });
    const what = grant.kind === 'rule' ? ruleText(ruleWords(grant.target)) : grant.target;
    core.log.info(`revoked ${grant.kind} ${what} (${grant.scope ?? 'session'}) of session ${current.sessionId}`);
    return policy.grants ?? [];
  }
}
