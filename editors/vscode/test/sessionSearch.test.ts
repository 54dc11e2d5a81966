import './setup';

import * as assert from 'node:assert/strict';
import { beforeEach, describe, test } from 'node:test';

import type { SessionSummary } from '../src/protocol';
import { searchSessions } from '../src/sessionSearch';
import { waitFor } from './daemon';
import { QuickPick, QuickPickItem, stub } from './vscode-stub';

function hit(sessionId: string, title: string, snippet?: string): SessionSummary {
  return {
    sessionId, root: '/p', title, head: null, turns: 1, createdAt: '2026-01-01T00:00:00Z',
    updatedAt: '2026-01-01T00:00:00Z', provider: {}, pinned: [], ...(snippet ? { match: { turnId: 't', snippet } } : {}),
  };
}

/** A searcher whose answers the test gives, one query at a time. */
class HeldSearcher {
  readonly queries: string[] = [];
  private readonly answers = new Map<number, (s: SessionSummary[]) => void>();
  searchSessions(query: string): Promise<SessionSummary[]> {
    this.queries.push(query);
    const n = this.queries.length - 1;
    return new Promise((resolve) => this.answers.set(n, resolve));
  }
  answer(n: number, sessions: SessionSummary[]): void {
    this.answers.get(n)!(sessions);
  }
}

describe('searching sessions', () => {
  let pick: QuickPick<QuickPickItem & { sessionId?: string }> | undefined;
  beforeEach(() => {
    stub.reset();
    pick = undefined;
    stub.onQuickPick = (p) => (pick = p);
  });

  test('the list is asked as the user types, after the last key, and shows what matched', async () => {
    const searcher = new HeldSearcher();
    const picked = searchSessions(searcher, () => undefined, 5);
    assert.ok(pick, 'the search is shown');
    assert.deepEqual(searcher.queries, [''], 'it opens on the recent sessions');
    searcher.answer(0, [hit('s-1', 'recent one')]);
    await waitFor('the recent sessions', () => pick!.items.length === 1);

    pick!.value = 'p';
    pick!.value = 'pa';
    pick!.value = 'parser';
    await waitFor('the query', () => searcher.queries.length === 2);
    assert.deepEqual(searcher.queries, ['', 'parser'], 'one question for the words typed together');
    assert.equal(pick!.busy, true);
    searcher.answer(1, [hit('s-2', 'fix it', 'the «parser» reads'), hit('s-3', 'other', 'a parser')]);
    await waitFor('the hits', () => pick!.items.length === 2);
    assert.equal(pick!.busy, false);
    assert.deepEqual(pick!.items.map((i) => i.detail), ['$(search) the «parser» reads', '$(search) a parser']);

    pick!.accept('other');
    assert.equal(await picked, 's-3');
    assert.ok(pick!.disposed);
  });

  test("an older query's late answer never replaces a newer one's", async () => {
    const searcher = new HeldSearcher();
    const picked = searchSessions(searcher, () => undefined, 1);
    pick!.value = 'old';
    await waitFor('the first query', () => searcher.queries.length === 2);
    pick!.value = 'new';
    await waitFor('the second query', () => searcher.queries.length === 3);
    searcher.answer(2, [hit('s-new', 'new hit', 'new')]);
    await waitFor('the new hits', () => pick!.items.length === 1);
    searcher.answer(1, [hit('s-old', 'old hit', 'old'), hit('s-x', 'x', 'old')]);
    searcher.answer(0, []);
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(pick!.items.map((i) => i.label), ['new hit']);
    assert.equal(pick!.busy, false);
    pick!.hide();
    assert.equal(await picked, undefined);
  });

  test('a failed search is reported and leaves the list empty', async () => {
    const errors: unknown[] = [];
    const picked = searchSessions({ searchSessions: () => Promise.reject(new Error('no store')) }, (e) => errors.push(e), 1);
    await waitFor('the error', () => errors.length === 1);
    assert.deepEqual(pick!.items, []);
    pick!.hide();
    assert.equal(await picked, undefined);
  });
});
