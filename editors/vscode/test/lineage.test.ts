import './setup';

import * as assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { DaemonError } from '../src/errors';
import { findOrigin, lineageText, Requester, turnNumber } from '../src/lineage';
import type { Session, SessionSummary, Turn } from '../src/protocol';
import { exportFileName } from '../src/sessionCommands';
import { sessionItems } from '../src/sessionPicker';
import { searchItems } from '../src/sessionSearch';

function session(extra: Partial<SessionSummary> = {}): SessionSummary {
  return {
    sessionId: 's-1', root: '/home/me/project', title: 'fix the parser', head: null, turns: 2,
    createdAt: '2026-01-01T00:00:00Z', updatedAt: '2026-01-01T00:00:00Z', provider: {}, pinned: [], ...extra,
  };
}

function turn(turnId: string, parentTurnId: string | null): Turn {
  return {
    turnId, sessionId: 's-1', parentTurnId, runId: `r-${turnId}`, prompt: turnId, reply: '', outcome: 'finished',
    tokens: { input: null, output: null, total: null, cached: null }, createdAt: '2026-01-01T00:00:00Z',
    model: null, cost: null,
  };
}

describe("a session's lineage", () => {
  const fork: Session = session({ sessionId: 's-2', forkedFrom: { sessionId: 's-1', turnId: 'b' } });

  test('a fork names its origin and the turn it was forked at; a deleted origin is said to be gone', () => {
    assert.equal(lineageText(fork, { title: 'fix the parser', turnNumber: 2 }), 'forked from “fix the parser” at turn 2');
    assert.equal(lineageText(fork, {}), 'forked from a session that was deleted');
    const empty = session({ forkedFrom: { sessionId: 's-1', turnId: null } });
    assert.equal(lineageText(empty, { title: '', turnNumber: 0 }), 'forked from “an untitled session” before its first turn');
    assert.equal(lineageText(session()), undefined);
    assert.equal(lineageText(session({ importedFrom: { sessionId: 's-9', importedAt: '2026-01-01T00:00:00Z', headHash: null, exportedAt: null } })), 'imported as a copy');
    // imported as it was: it keeps its id, and is no copy
    const same = session({ importedFrom: { sessionId: 's-9', importedAt: '2026-01-01T00:00:00Z', headHash: 'h', exportedAt: '2026-01-01T00:00:00Z' } });
    assert.equal(lineageText({ ...same, sessionId: 's-9' }), undefined);
  });

  test('an imported copy of a fork says both: what it was forked from, and that it is a copy', () => {
    const copy = { ...fork, sessionId: 's-3', importedFrom: { sessionId: 's-2', importedAt: '2026-01-02T00:00:00Z', headHash: null, exportedAt: null } };
    assert.equal(
      lineageText(copy, { title: 'fix the parser', turnNumber: 2 }),
      'forked from “fix the parser” at turn 2 · imported as a copy',
    );
    assert.equal(lineageText(copy, {}), 'forked from a session that was deleted · imported as a copy');
  });

  test('before its origin is looked up, a fork is not said to have lost it', () => {
    assert.equal(lineageText(fork), 'forked from another session');
  });

  test("a turn's number is its place on the path from the first turn, whatever the branches", () => {
    const turns = [turn('a', null), turn('b', 'a'), turn('x', 'a'), turn('c', 'b')];
    assert.equal(turnNumber(turns, 'a'), 1);
    assert.equal(turnNumber(turns, 'x'), 2);
    assert.equal(turnNumber(turns, 'c'), 3);
    assert.equal(turnNumber(turns, null), 0);
    assert.equal(turnNumber(turns, 'gone'), undefined);
  });

  test("the origin is looked up across pages of session/list and session/turns", async () => {
    const asked: [string, any][] = [];
    const client: Requester = {
      request: async <R>(method: string, params: any): Promise<R> => {
        asked.push([method, params]);
        if (method === 'session/list') {
          return (params.cursor
            ? { sessions: [session({ sessionId: 's-1', title: 'the origin' })] }
            : { sessions: [session({ sessionId: 's-7' })], nextCursor: 'p2' }) as R;
        }
        return (params.cursor
          ? { turns: [turn('b', 'a')] }
          : { turns: [turn('a', null)], nextCursor: 't2' }) as R;
      },
    };
    assert.deepEqual(await findOrigin(client, { sessionId: 's-1', turnId: 'b' }), { title: 'the origin', turnNumber: 2 });
    assert.deepEqual(asked.map(([m, p]) => `${m} ${p.cursor ?? ''}`.trim()), [
      'session/list', 'session/list p2', 'session/turns', 'session/turns t2',
    ]);
  });

  test('an origin deleted meanwhile is gone, not an error', async () => {
    const client: Requester = {
      request: async <R>(method: string): Promise<R> => {
        if (method === 'session/list') {
          return { sessions: [session()] } as R;
        }
        throw new DaemonError('unknown session s-1', -32010, undefined);
      },
    };
    assert.deepEqual(await findOrigin(client, { sessionId: 's-1', turnId: 'b' }), {});
    assert.deepEqual(await findOrigin({ request: async <R>() => ({ sessions: [] }) as R }, { sessionId: 's-1', turnId: null }), {});
  });

  test('the session list says which sessions are forks, and of what', () => {
    const items = sessionItems([
      session({ sessionId: 's-2', title: 'try another way', forkedFrom: { sessionId: 's-1', turnId: 'b' } }),
      session(),
      session({ sessionId: 's-3', title: 'orphan', forkedFrom: { sessionId: 's-0', turnId: null } }),
      session({
        sessionId: 's-4', title: 'try another way', forkedFrom: { sessionId: 's-1', turnId: 'b' },
        importedFrom: { sessionId: 's-2', importedAt: '2026-01-02T00:00:00Z', headHash: null, exportedAt: null },
      }),
    ]);
    assert.equal(items[0].description, 'project · $(repo-forked) forked from “fix the parser”');
    assert.equal(items[1].description, 'project');
    assert.equal(items[2].description, 'project · $(repo-forked) a fork');
    assert.equal(items[3].description, 'project · $(repo-forked) forked from “fix the parser” · $(cloud-download) imported');
  });
});

describe('search results and exports', () => {
  test('every hit is shown (the daemon matched it), with the snippet that matched', () => {
    const items = searchItems('parser', [
      session({ match: { turnId: 't-3', snippet: 'the [parser]\n reads   frames' } }),
      session({ sessionId: 's-2', title: 'other' }),
    ]);
    assert.ok(items.every((i) => i.alwaysShow));
    assert.equal(items[0].detail, '$(search) the [parser] reads frames');
    assert.match(items[1].detail ?? '', /^2 turns · last used /);
    assert.match(searchItems('', [session({ match: { turnId: null, snippet: 'x' } })])[0].detail ?? '', /^2 turns/);
  });

  test("an export's file is named after the session's title", () => {
    assert.equal(exportFileName('Fix the parser: frames!', 's-1'), 'fix-the-parser-frames.trellisd');
    assert.equal(exportFileName('  ', 's-1'), 's-1.trellisd');
    assert.equal(exportFileName('Ünïcode títle', 's-1'), 'ünïcode-títle.trellisd');
  });
});
