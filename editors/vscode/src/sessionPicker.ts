/** The quick pick of sessions to reopen: title, folder (and, for a session in a worktree of its
 * own, its branch and base; for a child session, its parent), turns and when last used, newest
 * first. */

import * as path from 'path';
import type { QuickPickItem } from 'vscode';

import type { SessionSummary } from './protocol';
import { worktreeText } from './worktrees';

export interface SessionItem extends QuickPickItem {
  sessionId: string;
}

export function lastUsed(iso: string, now: Date = new Date()): string {
  const then = new Date(iso);
  const seconds = Math.round((now.getTime() - then.getTime()) / 1000);
  if (Number.isNaN(seconds)) {
    return iso;
  }
  if (seconds < 60) {
    return 'just now';
  }
  const minutes = Math.round(seconds / 60);
  if (minutes < 60) {
    return minutes === 1 ? 'a minute ago' : `${minutes} minutes ago`;
  }
  const hours = Math.round(minutes / 60);
  if (hours < 24) {
    return hours === 1 ? 'an hour ago' : `${hours} hours ago`;
  }
  const days = Math.round(hours / 24);
  if (days === 1) {
    return 'yesterday';
  }
  if (days < 30) {
    return `${days} days ago`;
  }
  return then.toISOString().slice(0, 10);
}

export function sessionItems(sessions: SessionSummary[], now: Date = new Date()): SessionItem[] {
  const titles = new Map(sessions.map((s) => [s.sessionId, s.title.trim() || '(untitled session)']));
  return sessions.map((s) => ({
    label: `${s.parentSessionId ? '↳ ' : ''}${s.title.trim() || '(untitled session)'}`,
    description: [path.basename(s.root) || s.root, s.worktree ? worktreeText(s.worktree) : '', lineageNote(s, titles)]
      .filter(Boolean)
      .join(' · '),
    detail: `${s.turns === 1 ? '1 turn' : `${s.turns} turns`} · last used ${lastUsed(s.updatedAt, now)} · ${s.root}`,
    sessionId: s.sessionId,
  }));
}

/** "forked from “title”" for a fork (the origin's title when the list holds it), "imported" for a
 * copy imported with new ids (both for an imported copy of a fork), and "child of “title”" for a
 * session a task call started. */
function lineageNote(session: SessionSummary, titles: Map<string, string>): string {
  const notes: string[] = [];
  if (session.parentSessionId) {
    const parent = titles.get(session.parentSessionId);
    notes.push(parent ? `$(type-hierarchy-sub) child of “${parent}”` : '$(type-hierarchy-sub) a child session');
  }
  if (session.forkedFrom) {
    const origin = titles.get(session.forkedFrom.sessionId);
    notes.push(origin ? `$(repo-forked) forked from “${origin}”` : '$(repo-forked) a fork');
  }
  if (session.importedFrom) {
    notes.push('$(cloud-download) imported');
  }
  return notes.join(' · ');
}
