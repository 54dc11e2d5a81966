/**
 * A cancelled command that had to be killed mid-run leaves the session waiting for a person:
 * keep the workspace as the command left it, or revert the turn's changes (session/recover).
 * This module words the choice and asks it; session/recovery.ts sends the answer.
 */

import type { PendingRecovery, RecoveryDecision, TurnRecovery } from './protocol';
import * as vscodeapi from './vscodeapi';

export const KEEP = 'Keep the Files as They Are';
export const REVERT = "Revert the Turn's Changes";

/** What was killed, as a person reads it: `pytest -x tests` (run_command). */
export function commandText(recovery: Pick<TurnRecovery, 'tool' | 'argv'>): string {
  const argv = recovery.argv?.length ? recovery.argv.join(' ') : recovery.tool;
  return argv === recovery.tool ? argv : `${argv} (${recovery.tool})`;
}

export function recoveryQuestion(recovery: Pick<PendingRecovery, 'tool' | 'argv'>): string {
  return (
    `trellisd: a cancelled command was killed mid-run: ${commandText(recovery)}. ` +
    'The workspace may be half-changed; no turn runs until you decide. Keep the files as they are, or revert the turn?'
  );
}

/** The refusal of a turn while a decision is pending (-32020 with data.recovery), if it is one. */
export function pendingFrom(data: unknown): PendingRecovery | undefined {
  const recovery = (data as { recovery?: unknown } | undefined)?.recovery as PendingRecovery | undefined;
  return recovery && typeof recovery === 'object' && typeof recovery.turnId === 'string' ? recovery : undefined;
}

/** Ask keep or revert; undefined when the question was dismissed (the session still waits). */
export async function askRecovery(recovery: Pick<PendingRecovery, 'tool' | 'argv'>): Promise<RecoveryDecision | undefined> {
  const answer = await vscodeapi.showWarningMessage(recoveryQuestion(recovery), KEEP, REVERT);
  return answer === KEEP ? 'keep' : answer === REVERT ? 'revert' : undefined;
}
