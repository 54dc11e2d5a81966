import './setup';

import * as assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { describe, test } from 'node:test';

import * as rpc from 'vscode-jsonrpc';

import type { DaemonClient, DaemonHandlers } from '../src/client';
import { clientRequestType, notificationType, requestType, shutdownType } from '../src/methods';
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

  test('the connection is spoken to through types bound to the schema: a wrong one does not compile', () => {
    // Type checks only: these functions are compiled, never called.
    const daemon = async (client: DaemonClient) => {
      const result = await client.request(Method.turn, { sessionId: 's', prompt: 'p' });
      const outcome: string = result.outcome;
      // @ts-expect-error session/turn answers a TurnResult, whose reply is a string
      const reply: number = (await client.request(Method.turn, { sessionId: 's', prompt: 'p' })).reply;
      // @ts-expect-error session/branch needs the turn to branch at
      await client.request(Method.branch, { sessionId: 's' });
      return [outcome, reply];
    };
    const connection = (c: rpc.MessageConnection) => {
      const pinned: Promise<{ pinned: string[] }> = c.sendRequest(requestType(Method.pin), { sessionId: 's', turnId: 't' });
      // @ts-expect-error session/pin takes a turnId
      void c.sendRequest(requestType(Method.pin), { sessionId: 's' });
      // @ts-expect-error shutdown answers null
      const down: Promise<string> = c.sendRequest(shutdownType);
      c.onNotification(notificationType(Method.token), (p) => p.text.length);
      // @ts-expect-error session/token's text is a string
      c.onNotification(notificationType(Method.token), (p: { text: number }) => p.text);
      // @ts-expect-error no such notification
      c.onNotification(notificationType('session/nothing'), () => undefined);
      c.onRequest(clientRequestType(Method.requestApproval), () => ({ decision: 'deny' as const }));
      // @ts-expect-error an approval is answered with one of the schema's decisions
      c.onRequest(clientRequestType(Method.requestApproval), () => ({ decision: 'maybe' as const }));
      return [pinned, down];
    };
    const handlers: DaemonHandlers = {
      steered: (p) => void p.delivered,
      // @ts-expect-error session/usage is not a step
      usage: (p: { step: number }) => void p.step,
    };
    assert.equal(typeof daemon, 'function');
    assert.equal(typeof connection, 'function');
    assert.ok(handlers.steered);
  });
});
