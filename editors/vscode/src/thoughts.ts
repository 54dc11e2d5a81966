/**
 * What the model reasoned in a step's call (session/thought as it streams, a step's `thought`
 * when steps are read from the store), drawn folded under its step: a line saying so, unfolded
 * by a click. Pure: no VS Code, no daemon.
 */

import { escapeHtml } from './markdown';
import type { Step, Tokens } from './protocol';

export interface ThoughtBlock {
  kind: 'thought';
  step: number;
  text: string;
}

/** A streamed piece of step `step`'s reasoning: added to the step's thought drawn last, else a
 * new thought at `at` (where the turn's next block goes). */
export function appendThought(blocks: object[], at: number, step: number, text: string): void {
  const last = blocks[at - 1] as ThoughtBlock | undefined;
  if (last?.kind === 'thought' && last.step === step) {
    last.text += text;
  } else {
    const block: ThoughtBlock = { kind: 'thought', step, text };
    blocks.splice(at, 0, block);
  }
}

/** A step read from the store as blocks: its thought (folded), then its text. */
export function stepBlocks(step: Step): ({ kind: 'text'; step: number; text: string } | ThoughtBlock)[] {
  return [
    ...(step.thought ? [{ kind: 'thought', step: step.step, text: step.thought } satisfies ThoughtBlock] : []),
    ...(step.text ? [{ kind: 'text' as const, step: step.step, text: step.text }] : []),
  ];
}

/** "thought · 42 words", folded; its fold is kept by the view under `data-fold` as it redraws. */
export function thoughtHtml(block: ThoughtBlock, turnKey: string): string {
  const words = block.text.trim() ? block.text.trim().split(/\s+/).length : 0;
  return (
    `<details class="thought" data-fold="thought-${escapeHtml(turnKey)}-${block.step}">` +
    `<summary><span class="thought-label">thought</span> <span class="thought-size">${words} word${words === 1 ? '' : 's'}</span></summary>` +
    `<div class="thought-text">${escapeHtml(block.text)}</div></details>`
  );
}

/** ", 12 reasoning" when the provider reported reasoning tokens (of the output). */
export function reasoningText(tokens: Pick<Tokens, 'reasoning'> | undefined, count: (n: number) => string): string {
  return tokens?.reasoning ? `, ${count(tokens.reasoning)} reasoning` : '';
}
