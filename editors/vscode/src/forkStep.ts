/**
 * Fork after a step: a new session whose copy of the turn holds only its first steps (and ends
 * `forked`), so its next turn goes on from there (session/fork with `step`). The steps are read
 * with run/steps and offered in a pick.
 */

import type { QuickPickItem } from 'vscode';

import type { Step, Turn } from './protocol';
import { Method } from './protocol';
import type { Requester } from './protocolTypes';
import { turnPrompt } from './slashCommand';
import * as vscodeapi from './vscodeapi';

export type { Requester } from './protocolTypes';

export interface StepItem extends QuickPickItem {
  /** How many steps the fork's copy of the turn keeps. */
  step: number;
}

function oneLine(text: string, limit = 80): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length > limit ? `${flat.slice(0, limit - 1)}…` : flat;
}

/** What a step did, in a line: its tool call, else its text. */
export function stepLine(step: Step): string {
  if (step.toolCall) {
    const args = Object.values(step.toolCall.arguments ?? {})
      .filter((v) => typeof v === 'string')
      .join(' ');
    return oneLine(`${step.toolCall.name} ${args}`);
  }
  return oneLine(step.text) || `(${step.decision})`;
}

/** One item per step: "after step N" keeps steps 1..N; "before the first step" keeps none. */
export function stepItems(steps: Step[]): StepItem[] {
  return [
    { label: 'Before the first step', description: 'the fork gets the prompt only', step: 0 },
    ...steps.map((s) => ({ label: `After step ${s.step}`, description: stepLine(s), step: s.step })),
  ];
}

/** Ask after which step of `turn` to fork; undefined when dismissed. */
export async function pickStep(client: Requester, turn: Pick<Turn, 'runId' | 'prompt' | 'command'>): Promise<number | undefined> {
  const { steps } = await client.request(Method.runSteps, { runId: turn.runId });
  const picked = await vscodeapi.showQuickPick(stepItems(steps), {
    title: `trellisd: fork “${oneLine(turnPrompt(turn), 40)}” after which step?`,
    matchOnDescription: true,
  });
  return picked?.step;
}
