/**
 * Opening a long session in the extension's SessionController, against the real daemon (not a
 * test: tests/bench/bench_editor_open.py --vscode runs it):
 *
 *     node out/test/benchOpen.js STORE.db ROUNDS
 *
 * Reopens the store's one session ROUNDS times (the daemon already running) and prints, as
 * JSON, the milliseconds from the reopen to the chat view's drawn turns, and to their steps'
 * text; and how many turns were drawn.
 */

import './setup';

import { DaemonClient } from '../src/client';
import { SessionController } from '../src/session';
import { MemoryLog, RecordingView, stripTags, testCommand, waitFor } from './daemon';

async function main(): Promise<void> {
  const [db, roundsText] = process.argv.slice(2);
  const rounds = Number(roundsText || 5);
  const { command, args } = testCommand();
  const log = new MemoryLog();
  const client = new DaemonClient({
    command: () => ({ command, args: [...args, '--db', db], env: { TRELLISD_SHARED: '0', TRELLISD_PROVIDER: 'scripted' } }),
    initializationOptions: () => ({}),
    log,
    startTimeoutMs: 60_000,
  });
  const controller = new SessionController(client, log, () => undefined, 0);
  const [session] = await controller.listSessions(1);
  const drawn: number[] = [];
  const filled: number[] = [];
  let shown = 0;
  for (let i = 0; i < rounds; i++) {
    const view = new RecordingView();
    controller.attachView(view);
    const t0 = performance.now();
    await controller.reopenSession(session.sessionId);
    drawn.push(performance.now() - t0);
    const newest = `question ${session.turns}`;
    await waitFor(
      'the steps',
      () => {
        const turn = [...view.turns.values()].find((t) => t.prompt === newest);
        return turn && stripTags(turn.body).includes(`looking at ${session.turns}`);
      },
      120_000,
    );
    filled.push(performance.now() - t0);
    shown = view.order.length;
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  console.log(JSON.stringify({ drawn: median(drawn), steps: median(filled), min: Math.min(...drawn), shown }));
  controller.dispose();
  await client.close(5000);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
