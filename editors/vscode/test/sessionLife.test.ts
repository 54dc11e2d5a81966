import './setup';

import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, test } from 'node:test';

import { DaemonError } from '../src/errors';
import type { Turn } from '../src/protocol';
import { SessionController } from '../src/session';
import { SessionCommands } from '../src/sessionCommands';
import { mcpServerFixture, RecordingView, TestDaemon, testCommand, waitFor } from './daemon';
import { stub, Uri } from './vscode-stub';

let daemon: TestDaemon;
let view: RecordingView;

function controller(d: TestDaemon = daemon, v: RecordingView = view): SessionController {
  const c = new SessionController(d.client(), d.log);
  c.attachView(v);
  return c;
}

function commands(c: SessionController): SessionCommands {
  return new SessionCommands(c, async () => undefined, (e) => assert.fail(String(e)));
}

async function history(c: SessionController, sessionId: string): Promise<Turn[]> {
  const client = c.client;
  return (await client.request('session/history', { sessionId })).turns;
}

function lastHeader(v: RecordingView) {
  const headers = v.messages.flatMap((m) => (m.type === 'reset' ? [m.session] : m.type === 'session' ? [m.session] : []));
  return headers.at(-1);
}

beforeEach(() => {
  stub.reset();
  daemon = new TestDaemon();
  view = new RecordingView();
  stub.folders = [{ uri: Uri.file(daemon.root), name: 'project', index: 0 }];
});

afterEach(() => daemon.cleanup());

describe("a session's life, against the daemon", () => {
  test('fork from a turn: the view shows the fork, its header where it came from; the origin is untouched', async () => {
    const c = controller();
    const origin = await c.openSession(daemon.root);
    const first = await c.turn('first question');
    await c.turn('second question');
    await commands(c).fork({ kind: 'turn', turn: { turnId: first!.turnId } } as any);
    const fork = c.session!;
    assert.notEqual(fork.sessionId, origin.sessionId);
    assert.deepEqual(fork.forkedFrom, { sessionId: origin.sessionId, turnId: first!.turnId });
    const reset = view.messages.filter((m) => m.type === 'reset').at(-1) as Extract<typeof view.messages[number], { type: 'reset' }>;
    assert.equal(reset.turns.length, 1, 'the fork shows the path to the forked turn');
    await waitFor('the lineage', () => lastHeader(view)?.lineage === 'forked from “first question” at turn 1');
    assert.equal((await history(c, origin.sessionId)).length, 2, 'the origin keeps both turns');
    const next = await c.turn('a different second');
    assert.match(next!.reply, /first question/);
    assert.doesNotMatch(next!.reply, /second question/);
  });

  test('rename: the header shows the new title', async () => {
    const c = controller();
    await c.openSession(daemon.root);
    stub.answerInputBox = () => 'A better title';
    await commands(c).rename();
    assert.equal(c.session!.title, 'A better title');
    assert.equal(lastHeader(view)?.title, 'A better title');
    assert.equal((await c.listSessions())[0].title, 'A better title');
  });

  test('delete asks first: kept when the answer is no; gone, and the view emptied, when yes', async () => {
    const c = controller();
    const doomed = await c.openSession(daemon.root, 'doomed');
    const asked: string[] = [];
    stub.answerQuickPick = (items) => items.find((i) => i.label.includes('doomed'));
    stub.answerMessage = (shown) => (asked.push(shown.message), undefined);
    await commands(c).delete();
    assert.deepEqual(asked, ['Delete the session “doomed”?']);
    assert.equal((await c.listSessions()).length, 1);

    stub.answerMessage = (shown) => (shown.items.includes('Delete') ? 'Delete' : undefined);
    await commands(c).delete();
    assert.equal(c.session, undefined);
    assert.equal(lastHeader(view), null);
    assert.deepEqual(await c.listSessions(), []);
    await assert.rejects(c.reopenSession(doomed.sessionId), (e) => e instanceof DaemonError && e.code === -32010);
  });

  test('"Allow always (this project)" holds in a new session of the folder; the grants list revokes it', async () => {
    daemon.setScript([
      { tool: 'write_file', arguments: { path: 'a.txt', content: 'first' } },
      { text: 'Written.' },
      { tool: 'write_file', arguments: { path: 'a.txt', content: 'second' } },
      { text: 'Written again.' },
    ]);
    const c = controller();
    stub.onQuickPick = (pick) => setTimeout(() => pick.accept('Allow always (this project)'), 20);
    await c.openSession(daemon.root, 'first');
    await c.turn('write a');
    await c.openSession(daemon.root, 'second');
    await c.turn('write a again');
    assert.equal(stub.quickPicks.length, 1, 'asked once: the project grant holds in the second session');
    assert.equal(fs.readFileSync(path.join(daemon.root, 'a.txt'), 'utf8'), 'second');

    const listed: string[] = [];
    stub.answerQuickPick = (items) => (listed.push(...items.map((i) => `${i.label} · ${i.description}`)), items[0]);
    stub.answerMessage = (shown) => (shown.items.includes('Revoke') ? 'Revoke' : undefined);
    await commands(c).grants();
    assert.deepEqual(listed, ['$(edit) write a.txt · this project']);
    assert.deepEqual(await c.grants(), []);
    assert.ok(daemon.log.has(/revoked write a.txt \(project\)/));
  });

  test('export to a file, import into another store; again: refused, then as a copy', async () => {
    const c = controller();
    const session = await c.openSession(daemon.root, 'worth keeping');
    await c.turn('first');
    await c.turn('second');
    const file = path.join(daemon.dir, 'kept.trellisd');
    let offered: any;
    stub.answerSaveDialog = (options) => ((offered = options), file);
    await commands(c).export();
    assert.equal(offered.defaultUri.fsPath, path.join(daemon.root, 'worth-keeping.trellisd'));
    assert.ok(fs.statSync(file).size > 0);
    assert.match(stub.messages.at(-1)!.message, /^trellisd: exported 2 turns \(.+\) to .*kept\.trellisd$/);

    const other = new TestDaemon();
    try {
      const otherView = new RecordingView();
      const d = controller(other, otherView);
      stub.answerOpenDialog = () => file;
      await commands(d).import();
      assert.equal(d.session!.sessionId, session.sessionId);
      assert.deepEqual(
        (await history(d, session.sessionId)).map((t) => [t.prompt, t.reply]),
        (await history(c, session.sessionId)).map((t) => [t.prompt, t.reply]),
      );
      stub.answerMessage = (shown) => (shown.items.includes('Import as a Copy') ? 'Import as a Copy' : undefined);
      await commands(d).import();
      assert.notEqual(d.session!.sessionId, session.sessionId);
      assert.equal(d.session!.importedFrom?.sessionId, session.sessionId);
      assert.match(stub.messages.find((m) => m.level === 'warning')!.message, /already in this store/);
      assert.equal(lastHeader(otherView)?.lineage, 'imported as a copy');
    } finally {
      await other.cleanup();
    }
  });

  test('search finds sessions by the words of their turns, with the snippet that matched', async () => {
    const c = controller();
    await c.openSession(daemon.root, 'gardening');
    await c.turn('when to plant tulips');
    await c.openSession(daemon.root, 'cooking');
    await c.turn('how long to boil an egg');
    const hits = await c.searchSessions('tulips');
    assert.deepEqual(hits.map((h) => h.title), ['gardening']);
    assert.match(hits[0].match!.snippet, /«tulips»/);
    assert.equal((await c.searchSessions('')).length, 2, 'no words: every session, newest first');
  });

  test("a reopened session gets the settings' MCP servers again, as a new one gets them", async () => {
    const c = controller();
    const session = await c.openSession(daemon.root);
    const { command } = testCommand();
    const server = { name: 'proj', command, args: [mcpServerFixture(), 'stdio'] };
    c.mcpServers = () => [server];
    await c.reopenSession(session.sessionId);
    const client = c.client;
    const tools = await client.request('session/tools', { sessionId: session.sessionId });
    assert.deepEqual(
      tools.servers.map((s) => [s.name, s.source]),
      [['proj', 'session']],
    );
  });
});
