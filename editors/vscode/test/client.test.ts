import './setup';

import * as assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { DaemonClient } from '../src/client';
import { ConnectionLost, DaemonError, StartError } from '../src/errors';
import { ErrorCode, Method } from '../src/protocol';
import { testCommand, TestDaemon, waitFor } from './daemon';

describe('the connection to the daemon', () => {
  let daemon: TestDaemon;

  before(() => {
    daemon = new TestDaemon();
  });
  after(() => daemon.cleanup());

  test('initialize answers as trellisd with a protocol version', async () => {
    const client = daemon.client();
    const result = await client.start();
    assert.equal(result.serverInfo?.name, 'trellisd');
    assert.match(result.capabilities.experimental?.trellisd?.protocolVersion ?? '', /^\d+\.\d+/);
    assert.equal(client.generation, 1);
    await client.stop();
  });

  test('stop sends shutdown and exit, and the daemon exits with code 0', async () => {
    const client = daemon.client();
    await client.start();
    const exited = new Promise<{ code: number | null; expected: boolean }>((resolve) =>
      client.onDidExit((exit) => resolve(exit)),
    );
    await client.stop();
    const exit = await exited;
    assert.equal(exit.code, 0);
    assert.equal(exit.expected, true);
    assert.equal(client.isRunning, false);
  });

  test('a closed client refuses requests and starts no daemon again', async () => {
    const client = daemon.client();
    await client.start();
    await client.close();
    await assert.rejects(client.request(Method.list, {}), (error: unknown) => {
      assert.ok(error instanceof ConnectionLost);
      assert.match(error.message, /closed/);
      return true;
    });
    assert.equal(client.isRunning, false);
    assert.equal(client.generation, 1);
  });

  test('concurrent first requests share one daemon', async () => {
    const client = daemon.client();
    const [a, b] = await Promise.all([
      client.request(Method.open, { root: daemon.root }),
      client.request(Method.list, {}),
    ]);
    assert.ok(a.sessionId);
    assert.ok(Array.isArray(b.sessions));
    assert.equal(client.generation, 1);
    await client.stop();
  });

  test("the daemon's errors keep their code and one-line message", async () => {
    const client = daemon.client();
    await assert.rejects(client.request(Method.reopen, { sessionId: 'no-such-session' }), (error: unknown) => {
      assert.ok(error instanceof DaemonError);
      assert.equal(error.code, ErrorCode.notFound);
      assert.match(error.message, /no-such-session/);
      assert.doesNotMatch(error.message, /Traceback/);
      return true;
    });
    await assert.rejects(client.request(Method.open, { root: 'relative/path' }), (error: unknown) => {
      assert.ok(error instanceof DaemonError);
      assert.equal(error.code, ErrorCode.invalidParams);
      return true;
    });
    await client.stop();
  });

  test('a command that does not exist says to set trellisd.command to an absolute path', async () => {
    const client = new DaemonClient({
      command: () => ({ command: 'trellisd-does-not-exist', args: [] }),
      initializationOptions: () => ({}),
      log: daemon.log,
    });
    await assert.rejects(client.start(), (error: unknown) => {
      assert.ok(error instanceof StartError);
      assert.match(error.message, /"trellisd-does-not-exist" was not found/);
      assert.match(error.message, /trellisd\.command/);
      assert.match(error.message, /PATH/);
      return true;
    });
  });

  test('a daemon that exits at start is reported with its last words from stderr', async () => {
    const { command, args } = testCommand();
    const client = new DaemonClient({
      command: () => ({ command, args: [...args, '--no-such-option'] }),
      initializationOptions: () => ({}),
      log: daemon.log,
    });
    await assert.rejects(client.start(), (error: unknown) => {
      assert.ok(error instanceof StartError, String(error));
      assert.match(error.message, /exited with code 2/);
      assert.match(error.message, /unrecognized arguments: --no-such-option/);
      return true;
    });
    assert.ok(daemon.log.has(/^daemon .*unrecognized arguments/), 'stderr reaches the log');
  });

  test('a program that is not trellisd is refused', async () => {
    const client = new DaemonClient({
      command: () => ({ command: process.execPath, args: ['-e', 'setInterval(() => {}, 1000)'] }),
      initializationOptions: () => ({}),
      log: daemon.log,
      startTimeoutMs: 1500,
    });
    await assert.rejects(client.start(), (error: unknown) => {
      assert.ok(error instanceof StartError);
      assert.match(error.message, /did not answer within/);
      return true;
    });
    assert.equal(client.isRunning, false);
  });

  test('a daemon that died is started again by the next request', async () => {
    const client = daemon.client();
    const exits: boolean[] = [];
    client.onDidExit((exit, wasReady) => exits.push(wasReady && !exit.expected));
    await client.start();
    const pid = client.pid!;
    const session = await client.request(Method.open, { root: daemon.root });
    process.kill(pid, 'SIGKILL');
    await waitFor('the exit to be seen', () => exits.length === 1);
    assert.equal(client.isRunning, false);
    assert.match(client.lastExit?.signal ?? '', /SIGKILL/);
    const reopened = await client.request(Method.reopen, { sessionId: session.sessionId });
    assert.equal(reopened.sessionId, session.sessionId);
    assert.equal(client.generation, 2);
    assert.notEqual(client.pid, pid);
    assert.deepEqual(exits, [true], 'the death was seen once, as unexpected');
    await client.stop();
  });

  test('a request in flight when the daemon dies fails with a message a person understands', async () => {
    // The model holds after "one" and is never released: the turn is in flight until the kill.
    daemon.setScript([{ text: 'one two three four five six seven eight nine ten', holdAfter: 1, holdFile: daemon.hold('never') }]);
    const client = daemon.client();
    const tokens: string[] = [];
    client.setHandlers({ token: (p) => tokens.push(p.text) });
    const session = await client.request(Method.open, { root: daemon.root });
    const turn = client.request(Method.turn, { sessionId: session.sessionId, prompt: 'count' });
    await waitFor('the first token', () => tokens.length > 0);
    process.kill(client.pid!, 'SIGKILL');
    await assert.rejects(turn, (error: unknown) => {
      assert.ok(error instanceof ConnectionLost, String(error));
      assert.match(error.message, /connection to trellisd was lost/);
      assert.match(error.message, /SIGKILL/);
      assert.match(error.message, /started again on your next action/);
      return true;
    });
    await client.stop();
  });
});
