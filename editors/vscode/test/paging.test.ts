import './setup';

import * as assert from 'node:assert/strict';
import { beforeEach, describe, test } from 'node:test';

import { SessionController } from '../src/session';
import { RecordingView, stripTags, waitFor } from './daemon';
import { FakeClient, pagedSession } from './fakeClient';
import { stub } from './vscode-stub';

function open(count: number): { client: FakeClient; c: SessionController; view: RecordingView } {
  const client = new FakeClient(pagedSession(count));
  const c = new SessionController(client.asClient, { info: () => undefined, warn: () => undefined, error: () => undefined, daemon: () => undefined });
  const view = new RecordingView();
  c.attachView(view);
  return { client, c, view };
}

beforeEach(() => stub.reset());

describe('a long session opens in pages', () => {
  test('a reopen asks for the newest 50 turns, and "Load earlier turns" adds the page before, above them', async () => {
    const { client, c, view } = open(10_000);
    await c.reopenSession('s-1');
    assert.deepEqual(client.params('session/reopen').map((p) => p.limit), [50]);
    assert.equal(client.params('session/history').length, 0, 'the whole history is not read');
    assert.equal(view.order.length, 50);
    assert.equal(view.turns.get(view.order[0])!.turnId, 't-9951');
    assert.equal(view.last!.turnId, 't-10000');
    assert.equal(view.earlier, true, 'older turns are offered');

    assert.equal(await c.loadEarlier(), 50);
    assert.deepEqual(client.params('session/history'), [{ sessionId: 's-1', cursor: 'before-9950', limit: 50 }]);
    assert.equal(view.order.length, 100);
    assert.deepEqual([view.order[0], view.order[49], view.order[50]], ['t-9901', 't-9950', 't-9951']);
    assert.equal(view.earlier, true);
  });

  test('the last page hides "Load earlier turns"; a short session never offers it', async () => {
    const { c, view } = open(60);
    await c.reopenSession('s-1');
    assert.equal(view.earlier, true);
    assert.equal(await c.loadEarlier(), 10);
    assert.equal(view.order.length, 60);
    assert.equal(view.earlier, false);
    assert.equal(await c.loadEarlier(), 0, 'nothing more to load');

    const short = open(10);
    await short.c.reopenSession('s-1');
    assert.equal(short.view.order.length, 10);
    assert.equal(short.view.earlier, false);
  });

  test("a turn from the history shows every step's text, not only its reply (the last step's)", async () => {
    const { c, view } = open(3);
    await c.reopenSession('s-1');
    const body = await waitFor('the steps read', () => {
      const text = stripTags(view.turns.get('t-2')?.body ?? '');
      return text.includes('looking at 2') && text;
    });
    assert.ok(body.indexOf('looking at 2') < body.indexOf('reply 2'), body);
  });
});
