/**
 * A turn's plan in words (protocol/plans.md): each entry's status and priority, how far the plan
 * has come ("plan: 3 of 5 done"), the mark a planned turn carries in the chat view (with its
 * **Run this plan** button), and the mark of a turn that carries out another turn's plan. Pure:
 * no VS Code, no daemon.
 */

import { escapeHtml } from './markdown';
import type { Plan, PlanEntry, PlanStatus, Turn } from './protocol';
import { turnPrompt } from './slashCommand';

/** The plan drawn in the live spot (the Plan view): the newest planned turn's, or the one
 * streaming now. */
export interface LivePlan {
  sessionId: string;
  turnId: string;
  /** The planned turn's prompt in a line, when it is drawn. */
  name?: string;
  plan: Plan;
}

/** What a turn of the transcript knows of plans: its own last plan, and the plan it carries out. */
export interface PlanMarks {
  turnId?: string;
  outcome: string;
  plan?: Plan;
  /** session/plan/approve's turn: the planned turn, named by its prompt when it is drawn. */
  followsPlan?: { turnId: string; name?: string };
}

/** The codicon of a status, for the Plan view. */
export const STATUS_ICONS: Record<PlanStatus, string> = {
  pending: 'circle-large-outline',
  in_progress: 'sync',
  completed: 'pass-filled',
};

/** The mark of a status in the chat view's text. */
const STATUS_MARKS: Record<PlanStatus, string> = { pending: '○', in_progress: '◐', completed: '●' };

export const STATUS_WORDS: Record<PlanStatus, string> = {
  pending: 'pending',
  in_progress: 'in progress',
  completed: 'completed',
};

/** "3 of 5 done". */
export function progressText(entries: readonly PlanEntry[]): string {
  const done = entries.filter((e) => e.status === 'completed').length;
  return `${done} of ${entries.length} done`;
}

/** An entry's status and priority in words: "in progress · high priority". */
export function entryDescription(entry: PlanEntry): string {
  return [STATUS_WORDS[entry.status], entry.priority ? `${entry.priority} priority` : ''].filter(Boolean).join(' · ');
}

/** A turn's prompt in one line of at most `limit` characters. */
export function turnName(prompt: string, limit = 60): string {
  const line = prompt.replace(/\s+/g, ' ').trim();
  return line.length > limit ? `${line.slice(0, limit - 1)}…` : line;
}

/** "turn “lay out the fix”", or the start of its id when its prompt is not known. */
export function planTurnText(turnId: string, name?: string): string {
  return name ? `turn “${name}”` : `turn ${turnId.slice(0, 8)}`;
}

/** The newest turn of `history` that made a plan, as the live spot shows it. */
export function newestPlan(sessionId: string, history: readonly Turn[]): LivePlan | undefined {
  for (let i = history.length - 1; i >= 0; i--) {
    const turn = history[i];
    if (turn.plan) {
      return { sessionId, turnId: turn.turnId, name: turnName(turnPrompt(turn)), plan: turn.plan };
    }
  }
  return undefined;
}

/** Names the planned turn of each turn that carries out a plan, where the transcript has it. */
export function nameFollowedPlans(turns: readonly (PlanMarks & { prompt: string })[]): void {
  const prompts = new Map(turns.filter((t) => t.turnId).map((t) => [t.turnId, t.prompt]));
  for (const turn of turns) {
    const followed = turn.followsPlan;
    const prompt = followed ? prompts.get(followed.turnId) : undefined;
    if (followed && prompt !== undefined) {
      followed.name = turnName(prompt);
    }
  }
}

/** The marks under a turn in the chat view: its plan ("plan: 3 of 5 done", the entries folded,
 * and **Run this plan** once the turn has ended), and the plan it carries out. */
export function planMarksHtml(turn: PlanMarks): string {
  let html = '';
  if (turn.followsPlan) {
    const planned = planTurnText(turn.followsPlan.turnId, turn.followsPlan.name);
    html += `<div class="turn-follows-plan" data-follows-plan="${escapeHtml(turn.followsPlan.turnId)}">carries out the plan of ${escapeHtml(planned)}</div>`;
  }
  const plan = turn.plan;
  if (plan) {
    const entries = plan.entries
      .map(
        (e) =>
          `<li class="plan-entry plan-${e.status}"><span class="plan-status" title="${STATUS_WORDS[e.status]}">${STATUS_MARKS[e.status]}</span> ` +
          `${escapeHtml(e.content)}${e.priority ? ` <span class="plan-priority plan-priority-${e.priority}">${e.priority}</span>` : ''}</li>`,
      )
      .join('');
    const run =
      turn.turnId && turn.outcome !== 'running'
        ? ` <button type="button" class="secondary run-plan" data-run-plan="${escapeHtml(turn.turnId)}" title="Run this plan in a new turn, under the mode you choose">Run this plan</button>`
        : '';
    html +=
      `<details class="turn-plan"><summary><span class="plan-progress">plan: ${progressText(plan.entries)}</span>${run}</summary>` +
      `<ol class="plan-entries">${entries}</ol></details>`;
  }
  return html;
}

/** Whether a tool result is a refusal of plan mode (the model reads why; the call is drawn refused). */
export function refusedByPlanMode(result: string | null | undefined): boolean {
  return !!result && /^refused\b/.test(result) && /\bplan mode\b/.test(result);
}
