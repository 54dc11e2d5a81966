/** Recovery after a killed command, pins, fork after a step and a followed turn's end, against
 * a fake daemon that answers as protocol/README.md says. */
import './setup';

import * as assert from 'node:assert/strict';
import { beforeEach, describe, test } from 'node:test';

import { DaemonError } from '../src/errors';
import { stepItems } from '../src/forkStep';
import { SessionController } from '../src/session';
import { KEEP, REVERT } from '../src/recovery';
import { buildTurnTree, treeItem, TurnNode } from '../src/turnTree';
import { RecordingView, stripTags, waitFor } from './daemon';
import { FakeClient, pagedSession, pathTurn, session, TOKENS } from './fakeClient';
import { stub } from './vscode-stub';

const LOG = { info: () => undefined, warn: () => undefined, error: () => undefined, daemon: () => undefined };
const PENDING = { turnId: 't-2', runId: 'r-2', tool: 'run_command', argv: ['pytest', '-x'] };

function controller(client: FakeClient): { c: SessionController; view: RecordingView } {
  const c = new SessionController(client.asClient, LOG, () => undefined, 0);
  const view = new RecordingView();
  c.attachView(view);
  return { c, view };
}

beforeEach(() => stub.reset());

describe('a command killed mid-run', () => {
  test('a turn that ends with recovery asks keep or revert, and the answer goes to session/recover', async () => {
    const client = new FakeClient({
      ...pagedSession(1),
      'session/turn': () => ({
        turnId: 't-2', runId: 'r-2', outcome: 'cancelled', reply: '', tokens: TOKENS, steps: 1, cost: null,
        recovery: { required: true, tool: 'run_command', argv: ['pytest', '-x'] },
      }),
      'session/recover': (p) => ({ ...session({ head: 't-2' }), files: p.decision === 'revert' ? { restored: ['a.py'], skipped: [] } : undefined }),
    });
    stub.answerMessage = (shown) => (shown.items.includes(REVERT) ? REVERT : undefined);
    const { c, view } = controller(client);
    await c.reopenSession('s-1');
    await c.turn('run the tests');
    const params = await waitFor('session/recover', () => client.params('session/recover')[0]);
    assert.deepEqual(params, { sessionId: 's-1', decision: 'revert' });
    const asked = stub.messages.find((m) => m.items.includes(KEEP))!;
    assert.match(asked.message, /killed mid-run: pytest -x \(run_command\)/);
    await waitFor('the notice', () => view.notices.some((n) => /Reverted the turn's changes: 1 file\(s\) put back/.test(n)));
  });

  test('a session reopened with a pending decision asks it; revert over changed files asks before forcing', async () => {
    let calls = 0;
    const client = new FakeClient({
      ...pagedSession(2, { recovery: PENDING }),
      'session/recover': (p) => {
        calls++;
        if (!p.force) {
          throw new DaemonError('files changed since the turn wrote them', -32020, { paths: ['a.py'] });
        }
        return { ...session(), files: { restored: ['a.py'], skipped: [] } };
      },
    });
    stub.answerMessage = (shown) => (shown.items.includes(REVERT) ? REVERT : shown.items.includes('Overwrite') ? 'Overwrite' : undefined);
    const { c } = controller(client);
    await c.reopenSession('s-1');
    await waitFor('the forced revert', () => calls === 2);
    assert.deepEqual(client.params('session/recover'), [
      { sessionId: 's-1', decision: 'revert' },
      { sessionId: 's-1', decision: 'revert', force: true },
    ]);
    await waitFor('the session without recovery', () => c.session && !c.session.recovery);
  });

  test('a turn refused with -32020 and data.recovery shows the same choice; keep clears it', async () => {
    const client = new FakeClient({
      ...pagedSession(2),
      'session/turn': () => {
        throw new DaemonError('session s-1 needs a decision: a cancelled command (pytest) was killed mid-run', -32020, {
          sessionId: 's-1',
          recovery: PENDING,
        });
      },
      'session/recover': () => session(),
    });
    stub.answerMessage = (shown) => (shown.items.includes(KEEP) ? KEEP : undefined);
    const { c, view } = controller(client);
    await c.reopenSession('s-1');
    await c.turn('go on');
    assert.match(stripTags(view.last!.body + view.last!.footer), /needs a decision/);
    await waitFor('keep sent', () => client.params('session/recover').length === 1);
    assert.deepEqual(client.params('session/recover')[0], { sessionId: 's-1', decision: 'keep' });
  });
});

describe('pins', () => {
  test('pin and unpin send session/pin and session/unpin; the tree marks the pinned turn', async () => {
    let pinned: string[] = [];
    const client = new FakeClient({
      ...pagedSession(3),
      'session/pin': (p) => ((pinned = [...pinned, p.turnId]), session({ head: 't-3', pinned })),
      'session/unpin': (p) => ((pinned = pinned.filter((t) => t !== p.turnId)), session({ head: 't-3', pinned })),
    });
    const { c } = controller(client);
    await c.reopenSession('s-1');
    await c.pin('t-2', true);
    assert.deepEqual(client.params('session/pin'), [{ sessionId: 's-1', turnId: 't-2' }]);
    const tree = (await c.turnTree())!;
    assert.deepEqual(tree.pinned, ['t-2']);
    const nodes = buildTurnTree(tree.turns, tree.head, tree.pinned) as TurnNode[];
    const item = treeItem(nodes[1]);
    assert.match(String(item.description), /pinned/);
    assert.equal(item.contextValue, 'turn.pinned');
    assert.equal(treeItem(nodes[0]).contextValue, 'turn');
    await c.pin('t-2', false);
    assert.deepEqual(client.params('session/unpin'), [{ sessionId: 's-1', turnId: 't-2' }]);
    assert.deepEqual(c.session!.pinned, []);
  });
});

describe('fork after a step', () => {
  test('the steps are offered; the fork keeps the ones picked and opens', async () => {
    const client = new FakeClient({
      ...pagedSession(2),
      'session/fork': () => session({ sessionId: 's-1', head: 't-2' }),
    });
    let offered: string[] = [];
    stub.answerQuickPick = (items) => ((offered = items.map((i) => i.label)), items.find((i) => i.label === 'After step 1'));
    const { c } = controller(client);
    await c.reopenSession('s-1');
    await c.forkAfterStep('t-2');
    assert.deepEqual(client.params('session/fork'), [{ sessionId: 's-1', turnId: 't-2', step: 1 }]);
    assert.deepEqual(offered, ['Before the first step', 'After step 1', 'After step 2']);
    assert.equal(stepItems([])[0].step, 0);
    assert.equal(client.params('session/reopen').length, 2, 'the fork is opened');
  });
});

describe('a window following a turn another window started', () => {
  test('session/turnEnded ends the turn here with its reply, outcome and cost, without reading the history', async () => {
    const client = new FakeClient({
      ...pagedSession(1),
      'session/reopen': () => ({
        ...session({ head: 't-1' }),
        history: [pathTurn(1), pathTurn(2, { outcome: 'running', reply: '' })],
        running: { sessionId: 's-1', turnId: 't-2', runId: 'r-2', prompt: 'prompt 2', step: 2, text: 'It is ' },
      }),
    });
    const { c, view } = controller(client);
    await c.reopenSession('s-1');
    assert.equal(c.isRunning, true);
    const ref = { sessionId: 's-1', turnId: 't-2', runId: 'r-2' };
    client.handlers.token!({ ...ref, step: 2, text: 'a notes file.' });
    client.handlers.step!({ ...ref, step: 2, decision: 'reply', text: 'It is a notes file.', toolCall: null, result: null } as never);
    assert.equal(c.isRunning, true, 'a reply step alone does not end it');
    client.handlers.turnEnded!({ ...ref, outcome: 'finished', reply: 'It is a notes file.', tokens: TOKENS, cost: 0.0123 });
    assert.equal(c.isRunning, false);
    const turn = view.turns.get('t-2')!;
    assert.equal(turn.outcome, 'finished');
    assert.match(stripTags(turn.body), /It is a notes file\./);
    assert.match(stripTags(turn.footer), /^finished · scripted · 15 tokens .*· \$0\.01/);
    assert.equal(c.session!.head, 't-2');
    assert.equal(client.params('session/history').length, 0, 'no polling of the history');
  });

  test("a turn joined mid-way shows the texts of the steps it committed before, not only the last one", async () => {
    const step = (n: number, text: string) => ({ step: n, decision: 'tool', prompt: null, text, toolCall: null, result: 'x', tokens: TOKENS });
    const client = new FakeClient({
      ...pagedSession(1),
      'session/reopen': () => ({
        ...session({ head: 't-2' }),
        history: [pathTurn(1), pathTurn(2, { outcome: 'running', reply: 'Still looking.' })],
        running: { sessionId: 's-1', turnId: 't-2', runId: 'r-2', prompt: 'prompt 2', step: 3, text: 'It is ' },
      }),
      'run/steps': (p) => ({ steps: p.runId === 'r-2' ? [step(1, 'Let me look.'), step(2, 'Still looking.')] : [] }),
    });
    const { c, view } = controller(client);
    await c.reopenSession('s-1');
    const body = await waitFor('the earlier steps', () => {
      const text = stripTags(view.turns.get('t-2')?.body ?? '');
      return text.includes('Let me look.') && text;
    });
    assert.ok(body.indexOf('Let me look.') < body.indexOf('Still looking.'), body);
    assert.ok(body.indexOf('Still looking.') < body.indexOf('It is'), body);
    assert.equal(body.split('Still looking.').length, 2, 'the reply once');
  });
});
