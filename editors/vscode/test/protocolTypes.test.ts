import './setup';

import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { describe, test } from 'node:test';

import { Method, PROTOCOL_VERSION } from '../src/protocol';
import { Requester, SCHEMA_PROTOCOL_VERSION } from '../src/protocolTypes';

const extension = path.join(__dirname, '..', '..');

describe('the typed client, generated from protocol/schema.json', () => {
  test('src/protocolTypes.ts is what the generator writes from the schema now', () => {
    const check = spawnSync(process.execPath, [path.join(extension, 'scripts', 'gen-protocol.mjs'), '--check'], {
      encoding: 'utf8',
    });
    assert.equal(check.status, 0, check.stderr);
    assert.equal(SCHEMA_PROTOCOL_VERSION, PROTOCOL_VERSION);
  });

  test('the method picks the params and the result: a wrong one does not compile', async () => {
    const sent: { method: string; params: unknown }[] = [];
    const client = {
      request: async (method: string, params: unknown) => {
        sent.push({ method, params });
        return { sessions: [] };
      },
    } as unknown as Requester;
    // Each @ts-expect-error fails the build when its line compiles: the types bind the method.
    const typed = async () => {
      const list = await client.request(Method.list, { limit: 5 });
      const count: number = list.sessions.length;
      // @ts-expect-error session/list takes no prompt
      await client.request(Method.list, { prompt: 'x' });
      // @ts-expect-error session/turn needs a sessionId
      await client.request(Method.turn, { prompt: 'x' });
      // @ts-expect-error session/open answers a Session, not a list of turns
      const turns: { turns: unknown[] } = await client.request(Method.open, { root: '/p' });
      // @ts-expect-error no such method
      await client.request('session/nothing', {});
      return [count, turns];
    };
    await typed();
    assert.deepEqual(
      sent.map((s) => s.method),
      ['session/list', 'session/list', 'session/turn', 'session/open', 'session/nothing'],
    );
  });
});
