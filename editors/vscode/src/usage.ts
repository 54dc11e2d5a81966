/**
 * The context meter and the spend, as the status bar shows them, from the daemon's
 * `session/usage`: pure functions, tested without VS Code.
 */

import { Spend, UsageParams } from './protocol';
import { formatCost } from './transcript';

/** A number of tokens the short way: 950, 12.3k, 1.05M. */
export function shortTokens(n: number): string {
  if (n >= 1_000_000) {
    return `${(n / 1_000_000).toFixed(2)}M`;
  }
  if (n >= 1000) {
    return `${(n / 1000).toFixed(1)}k`;
  }
  return String(Math.floor(n));
}

/** The share of the model's context window the branch fills, in whole percent. */
export function contextPercent(usage: UsageParams): number {
  return usage.contextWindow > 0 ? Math.round((100 * usage.contextTokens) / usage.contextWindow) : 0;
}

/** The status bar's text: "$(dashboard) ctx 12% · $0.0123". */
export function usageText(usage: UsageParams): string {
  return `$(dashboard) ctx ${contextPercent(usage)}% · ${formatCost(usage.cost.session)}`;
}

/** "12 cached" and, once a provider reported them, ", 40 reasoning". */
function spendParts(spend: Spend): string {
  const reasoning = spend.reasoning ? `, ${spend.reasoning.toLocaleString('en-US')} reasoning` : '';
  return `${spend.cached.toLocaleString('en-US')} cached${reasoning}`;
}

/** The status bar's tooltip: the meter and the spend in full. */
export function usageTooltip(usage: UsageParams): string {
  const { turn, session } = usage.tokens;
  return [
    `Context: ${shortTokens(usage.contextTokens)} of ${shortTokens(usage.contextWindow)} tokens (${contextPercent(usage)}%)`,
    `This turn: ${turn.total.toLocaleString('en-US')} tokens (${spendParts(turn)}) · ${formatCost(usage.cost.turn)}`,
    `This session: ${session.total.toLocaleString('en-US')} tokens (${spendParts(session)}) · ${formatCost(usage.cost.session)}`,
    'Click to compact the session: its oldest turns are sent as a summary.',
  ].join('\n');
}
