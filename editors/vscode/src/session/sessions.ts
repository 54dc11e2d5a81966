/**
 * A session's life: opening and reopening it, listing and searching sessions, its tree for the
 * turn tree, taking it over, forking, renaming, deleting, exporting and importing it, and the
 * tools its model sees.
 */

import { pickStep } from '../forkStep';
import { findOrigin, lineageText } from '../lineage';
import { messageOf, TrellisError } from '../errors';
import { HISTORY_PAGE } from '../paging';
import { sessionTitles } from '../sharing';
import { ExportResult, McpServer, Method, Session, SessionSummary, SessionTools, Turn } from '../protocol';
import type { SessionCore } from './core';

export class Sessions {
  constructor(private readonly core: SessionCore) {}

  /** A new session over `root`; with `worktree` (true, or the worktree's name), in a git
   * worktree of its own on a new branch trellisd/<name>, leaving the checkout as it is. */
  async openSession(root: string, title?: string, mcpServers: McpServer[] = [], worktree?: true | string): Promise<Session> {
    const { core } = this;
    core.links.leaveFollowed();
    core.refuseIfRunning('start another session');
    await core.client.start();
    const policy = core.openPolicy();
    const session = await core.client.request(Method.open, {
      root,
      ...(policy ? { policy } : {}),
      ...(title ? { title } : {}),
      ...(mcpServers.length ? { mcpServers } : {}),
      ...(worktree ? { worktree } : {}),
      ...(policy ? { policy } : {}),
    });
    this.adopt(session, []);
    const where = session.worktree ? ` in the worktree ${session.worktree.path} (${session.worktree.branch})` : '';
    const task = policy?.task?.enabled ? ' with the task tool' : '';
    core.log.info(`session ${session.sessionId} opened over ${session.root}${where}${task}`);
    return session;
  }

  async reopenSession(sessionId: string): Promise<Session> {
    const { core } = this;
    core.links.leaveFollowed();
    core.refuseIfRunning('reopen another session');
    await core.client.start();
    const { history, running, integrity, historyCursor, ...session } = await core.client.request(Method.reopen, {
      sessionId,
      limit: HISTORY_PAGE,
      ...core.serversParam(),
    });
    this.adopt(session, history, historyCursor);
    core.log.info(
      `session ${session.sessionId} reopened with ${history.length} turn(s) of its path${historyCursor ? ' (earlier ones on demand)' : ''}`,
    );
    if (integrity === 'broken') {
      const text = "This session's log is broken: its store was changed outside trellisd.";
      core.view.post({ type: 'notice', level: 'error', text });
      void core.showError(text);
    }
    if (running) {
      core.links.follow(running);
    }
    core.links.offerRecovery(session.recovery);
    return session;
  }

  private adopt(session: Session, history: Turn[], historyCursor?: string): void {
    const { core } = this;
    core.session = session;
    core.lineage = lineageText(session);
    void this.describeLineage(session);
    core.attached = core.client.generation;
    core.showHistory(history, historyCursor);
    void core.links.fillSteps(history.filter((t) => t.outcome !== 'running'));
    core.queue.clear();
    core.budget = null;
    core.spent = undefined;
    core.takeSpend(session);
    core.postReset();
    core.fireSession();
  }

  /** Look the session's origin up and show its lineage in the header. */
  private async describeLineage(session: Session): Promise<void> {
    const { core } = this;
    const parentId = session.parentSessionId;
    if (!session.forkedFrom && !parentId) {
      return;
    }
    try {
      const origin = session.forkedFrom ? await findOrigin(core.client, session.forkedFrom) : undefined;
      const parent = parentId ? (await sessionTitles(core.client, [parentId])).get(parentId) : undefined;
      if (core.session?.sessionId === session.sessionId) {
        core.lineage = lineageText(session, origin, parent);
        core.postHeader(core.session);
        core.log.info(`session ${session.sessionId}: ${core.lineage}`);
        core.fireSession();
      }
    } catch (error) {
      core.log.warn(`the lineage of session ${session.sessionId}: ${messageOf(error)}`);
    }
  }

  async listSessions(limit = 200): Promise<SessionSummary[]> {
    const result = await this.core.client.request(Method.list, { limit });
    return result.sessions;
  }

  /** Sessions whose title, prompts or replies match `query` (session/list {query}), best first. */
  async searchSessions(query: string, limit = 50): Promise<SessionSummary[]> {
    await this.core.client.start();
    const trimmed = query.trim();
    const result = await this.core.client.request(Method.list, { limit, ...(trimmed ? { query: trimmed } : {}) });
    return result.sessions;
  }

  /** The current session's whole tree, for the turn tree view. */
  async turnTree(): Promise<{ turns: Turn[]; head: string | null; pinned: string[] } | undefined> {
    const { core } = this;
    if (!core.session) {
      return undefined;
    }
    await core.ensureAttached();
    const session = core.session;
    const { turns } = await core.client.request(Method.turns, { sessionId: session.sessionId });
    return { turns, head: session.head, pinned: session.pinned ?? [] };
  }

  /** Make this daemon the session's writer, whoever held it (another window, say). */
  async takeover(): Promise<Session> {
    const { core } = this;
    const current = core.requireSession();
    await core.ensureAttached();
    const session = await core.client.request(Method.takeover, { sessionId: current.sessionId });
    core.session = session;
    core.fireSession();
    core.log.info(`session ${session.sessionId} taken over by this window`);
    return session;
  }

  /** Every tool the session's model sees, built-in and MCP, and its MCP servers. */
  async tools(): Promise<SessionTools> {
    const session = this.core.requireSession();
    await this.core.ensureAttached();
    return this.core.client.request(Method.tools, { sessionId: session.sessionId });
  }

  /** Start a new session from `turnId` of this one (null: empty); the view shows the fork.
   * With `step`, the fork's copy of the turn keeps only its first `step` steps. */
  async fork(turnId: string | null, step?: number): Promise<Session> {
    const { core } = this;
    const current = core.requireSession();
    core.refuseIfRunning('fork');
    await core.ensureAttached();
    const fork = await core.client.request(Method.fork, {
      sessionId: current.sessionId,
      turnId,
      ...(step !== undefined ? { step } : {}),
    });
    const where = turnId === null ? 'its start' : step !== undefined ? `step ${step} of turn ${turnId}` : turnId;
    core.log.info(`session ${current.sessionId} forked at ${where} into ${fork.sessionId}`);
    return this.reopenSession(fork.sessionId);
  }

  /** Fork after a step of `turnId`, picked from its steps; undefined when none was picked. */
  async forkAfterStep(turnId: string): Promise<Session | undefined> {
    const { core } = this;
    const current = core.requireSession();
    await core.ensureAttached();
    const { turns } = await core.client.request(Method.turns, { sessionId: current.sessionId });
    const turn = turns.find((t) => t.turnId === turnId);
    if (!turn) {
      throw new TrellisError(`turn ${turnId} is not in this session`);
    }
    const step = await pickStep(core.client, turn);
    return step === undefined ? undefined : this.fork(turnId, step);
  }

  async rename(title: string): Promise<void> {
    const { core } = this;
    const current = core.requireSession();
    await core.ensureAttached();
    const renamed = await core.client.request(Method.rename, { sessionId: current.sessionId, title });
    if (core.session?.sessionId === current.sessionId) {
      core.session.title = renamed?.title ?? title;
      core.postHeader(core.session);
      core.fireSession();
    }
    core.log.info(`session ${current.sessionId} renamed to ${JSON.stringify(title)}`);
  }

  /** Delete a session for good; when it is the open one, the view is emptied. */
  async deleteSession(sessionId: string): Promise<void> {
    const { core } = this;
    const isOpen = core.session?.sessionId === sessionId;
    if (isOpen) {
      core.refuseIfRunning('delete the session');
    }
    await core.client.start();
    await core.client.request(Method.delete, { sessionId });
    if (isOpen && core.session?.sessionId === sessionId) {
      core.session = undefined;
      core.lineage = undefined;
      core.showHistory([], undefined);
      core.postReset();
      core.fireSession();
    }
    core.log.info(`session ${sessionId} deleted`);
  }

  async exportSession(path: string, sessionId?: string): Promise<ExportResult> {
    const { core } = this;
    const id = sessionId ?? core.requireSession().sessionId;
    await core.client.start();
    const result = await core.client.request(Method.export, { sessionId: id, path });
    core.log.info(`session ${id} exported to ${result.path}: ${result.turns} turn(s), ${result.bytes} bytes`);
    return result;
  }

  /** Import a session from a file and show it; `asNew` imports a copy with new ids. */
  async importSession(path: string, options: { asNew?: boolean; root?: string } = {}): Promise<Session> {
    const { core } = this;
    core.refuseIfRunning('import a session');
    await core.client.start();
    const imported = await core.client.request(Method.import, {
      path,
      ...(options.root ? { root: options.root } : {}),
      ...(options.asNew ? { asNew: true } : {}),
    });
    core.log.info(`session ${imported.sessionId} imported from ${path}${options.asNew ? ' as a copy' : ''}`);
    return this.reopenSession(imported.sessionId);
  }
}
