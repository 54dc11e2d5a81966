import './setup';

import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { after, before, describe, test } from 'node:test';

import Ajv2020 from 'ajv/dist/2020';

import { SessionController } from '../src/session';
import { RecordingView, testCommand, TestDaemon, waitFor } from './daemon';
import { stub } from './vscode-stub';

const schemaPath = path.join(__dirname, '..', '..', '..', '..', 'protocol', 'schema.json');

interface Recorded {
  from: 'editor' | 'daemon';
  message: { id?: number | string; method?: string; params?: unknown; result?: unknown; error?: unknown };
}

/** What the extension says and hears in a whole session, checked against protocol/schema.json. */
describe('the wire, against protocol/schema.json', () => {
  let daemon: TestDaemon;
  let recorded: Recorded[] = [];
  const log = () => path.join(daemon.dir, 'wire.jsonl');

  before(async () => {
    stub.reset();
    daemon = new TestDaemon();
    // The first step is held until the steer is queued; the count is held until it is cancelled.
    daemon.setScript([
      { text: 'Looking first. ', holdAfter: 1, holdFile: daemon.hold('steered'), tool: 'write_file', arguments: { path: 'a.txt', content: 'a' } },
      { text: 'Done.' },
      { text: Array.from({ length: 100 }, (_, i) => `n${i}`).join(' '), holdAfter: 4, holdFile: daemon.hold('never') },
    ]);
    const { command, args } = testCommand();
    const proxy = path.join(__dirname, 'recordProxy.js');
    const client = daemon.client({
      command: () => ({
        command: process.execPath,
        args: [proxy, log(), command, ...args, '--db', daemon.db],
        cwd: daemon.root,
        env: { TRELLISD_PROVIDER: 'scripted', TRELLISD_SCRIPT: daemon.script },
      }),
    });
    const view = new RecordingView();
    const c = new SessionController(client, daemon.log);
    c.attachView(view);
    stub.onQuickPick = (pick) => setTimeout(() => pick.accept('Allow once'), 20);

    const session = await c.openSession(daemon.root, 'wire check');
    const first = c.turn('write a file');
    await waitFor('the first token', () => view.last && view.last.body.length > 0);
    await c.send('and say so'); // a steer
    daemon.release('steered');
    await first;
    const second = c.turn('count');
    await waitFor('the count', () => /n3/.test(view.last?.body ?? ''));
    await c.cancel();
    await second;
    await c.branch(null);
    await c.listSessions();
    await c.turnTree();
    await c.reopenSession(session.sessionId);
    await client.stop();
    recorded = fs
      .readFileSync(log(), 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((line) => JSON.parse(line) as Recorded);
  });

  after(() => daemon.cleanup());

  test('every message matches the schema', () => {
    const schema = JSON.parse(fs.readFileSync(schemaPath, 'utf8'));
    const ajv = new Ajv2020({ strict: false, allErrors: true });
    ajv.addSchema(schema);
    const pointer = (...parts: string[]) =>
      `${schema.$id}#/${parts.map((p) => p.replace(/~/g, '~0').replace(/\//g, '~1')).join('/')}`;
    const check = (where: string, ref: string, value: unknown) => {
      const validate = ajv.getSchema(ref);
      assert.ok(validate, `the schema has ${ref}`);
      assert.ok(validate(value), `${where}: ${ajv.errorsText(validate.errors)}\n${JSON.stringify(value)}`);
    };

    const asked = new Map<string, string>(); // `${from}:${id}` -> method
    const methods = new Set<string>();
    let checked = 0;
    for (const { from, message } of recorded) {
      if (message.method !== undefined) {
        const kind = message.id === undefined ? 'notification' : 'request';
        methods.add(`${from} ${kind} ${message.method}`);
        if (kind === 'request') {
          asked.set(`${from}:${message.id}`, message.method);
        }
        const table = from === 'editor' ? (kind === 'request' ? 'requests' : null) : kind === 'request' ? 'clientRequests' : 'notifications';
        if (table && schema[table][message.method] && message.params !== undefined) {
          check(`${from} ${message.method}`, pointer(table, message.method, 'params'), message.params);
          checked++;
        }
      } else {
        const method = asked.get(`${from === 'editor' ? 'daemon' : 'editor'}:${message.id}`);
        assert.ok(method, `an answer to a request that was sent: ${JSON.stringify(message)}`);
        const table = from === 'daemon' ? 'requests' : 'clientRequests';
        if (message.error !== undefined) {
          check(`the error answering ${method}`, pointer('$defs', 'Error'), message.error);
        } else if (schema[table][method]?.result) {
          check(`the answer to ${method}`, pointer(table, method, 'result'), message.result);
        }
        checked++;
      }
    }
    const known = new Set([
      ...Object.keys(schema.requests).map((m) => `editor request ${m}`),
      ...Object.keys(schema.clientRequests).map((m) => `daemon request ${m}`),
      ...Object.keys(schema.notifications).map((m) => `daemon notification ${m}`),
      'editor notification initialized',
      'editor notification exit',
      'editor notification $/cancelRequest',
    ]);
    const unknown = [...methods].filter((m) => !known.has(m));
    assert.deepEqual(unknown, [], 'every method the extension sends or hears is in the protocol');
    for (const expected of [
      'editor request session/open', 'editor request session/turn', 'editor request session/steer',
      'editor request session/cancel', 'editor request session/branch', 'editor request session/history',
      'editor request session/list', 'editor request session/turns', 'editor request session/reopen',
      'daemon request session/requestApproval', 'daemon notification session/token',
      'daemon notification session/step', 'daemon notification session/steered',
    ]) {
      assert.ok(methods.has(expected), `the session used ${expected}`);
    }
    assert.ok(checked > 25, `${checked} messages checked`);
  });
});
