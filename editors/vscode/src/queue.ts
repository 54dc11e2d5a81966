/**
 * The prompts queued behind a session's running turn, as session/queued and session/dequeued
 * tell every window following the session, and the session's spend against its budget in words.
 * No VS Code here: the controller keeps one PromptQueue per open session and draws its entries.
 */

import { Budget, DequeuedParams, Queued, Spent } from './protocol';

export interface QueueEntry {
  queueId: string;
  prompt: string;
}

export class PromptQueue {
  private entries: QueueEntry[] = [];

  /** First to run first. */
  get list(): readonly QueueEntry[] {
    return this.entries;
  }

  /** Replace the list with the daemon's (session/queue). */
  reset(queued: readonly Queued[]): void {
    this.entries = [];
    for (const q of queued) {
      this.add(q);
    }
  }

  /** session/queued: the prompt joins at its position. */
  add(q: Queued): void {
    if (this.entries.some((e) => e.queueId === q.queueId)) {
      return;
    }
    const at = Math.max(0, Math.min(q.position - 1, this.entries.length));
    this.entries.splice(at, 0, { queueId: q.queueId, prompt: q.prompt });
  }

  /** session/dequeued: the prompt left (its turn started, or it was dropped). */
  remove(p: Pick<DequeuedParams, 'queueId'>): void {
    this.entries = this.entries.filter((e) => e.queueId !== p.queueId);
  }

  clear(): void {
    this.entries = [];
  }
}

function usd(value: number): string {
  if (value === 0) {
    return '$0';
  }
  return value < 0.01 ? `$${value.toFixed(4)}` : `$${value.toFixed(2)}`;
}

/** "spent 3000 of 3500 tokens, $0.12 of $1"; "spent 3000 tokens" without a budget. */
export function spendText(budget: Budget | null | undefined, spent: Spent | undefined): string | undefined {
  if (!spent) {
    return undefined;
  }
  const parts = [budget?.tokens ? `${spent.tokens} of ${budget.tokens} tokens` : `${spent.tokens} tokens`];
  if (budget?.usd && spent.usd !== null) {
    parts.push(`${usd(spent.usd)} of ${usd(budget.usd)}`);
  }
  return `spent ${parts.join(', ')}`;
}

/** "tokens=5000 usd=0.5" as a Budget; "off" (or empty) as null; a message for anything else. */
export function parseBudget(text: string): Budget | null | string {
  const words = text.trim().split(/\s+/).filter(Boolean);
  if (words.length === 0 || (words.length === 1 && words[0] === 'off')) {
    return null;
  }
  const budget: Budget = {};
  for (const word of words) {
    const match = /^(tokens|usd)=([0-9]*\.?[0-9]+)$/.exec(word);
    const value = match ? Number(match[2]) : NaN;
    if (!match || !(value > 0)) {
      return `say tokens=N and/or usd=X (or off), not ${word}`;
    }
    if (match[1] === 'tokens') {
      budget.tokens = Math.floor(value);
    } else {
      budget.usd = value;
    }
  }
  return budget;
}
