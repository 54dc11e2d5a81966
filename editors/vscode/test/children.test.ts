import './setup';

import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, test } from 'node:test';

import { childCommands, registerChildren, underParents } from '../src/children';
import { DEFAULT_SETTINGS, sessionPolicy } from '../src/config';
import type { Extension } from '../src/features';
import type { SessionSummary } from '../src/protocol';
import { SessionController } from '../src/session';
import { sessionItems } from '../src/sessionPicker';
import { features, RecordingView, stripTags, TestDaemon, waitFor } from './daemon';
import { QuickPickItem, stub } from './vscode-stub';

let daemon: TestDaemon;

/** A controller whose new sessions offer the task tool, as with trellisd.task.enabled on. */
function controller(view = new RecordingView()): { c: SessionController; view: RecordingView } {
  const c = new SessionController(daemon.client(), daemon.log);
  c.openPolicy = () => sessionPolicy({ ...DEFAULT_SETTINGS, task: { enabled: true, maxConcurrent: 2 } });
  c.attachView(view);
  return { c, view };
}

function extension(c: SessionController): Extension {
  const ext = features(c, daemon.log);
  registerChildren(ext, childCommands(ext));
  return ext;
}

/** The parent turn's own text: its body without the child drawn under the task call. */
function ownText(body: string): string {
  return stripTags(body.replace(/<details class="child[\s\S]*?<\/details>/g, ''));
}

/** What the view shows under the task call: the child's line and its text. */
function childText(body: string): string {
  const found = /<details class="child[\s\S]*?<\/details>/.exec(body);
  return found ? stripTags(found[0]) : '';
}

beforeEach(() => {
  stub.reset();
  daemon = new TestDaemon();
});

afterEach(() => daemon.cleanup());

describe('child sessions (the task tool), against the daemon', () => {
  test("a child's text and outcome show under its task call, it is listed under its parent, and it opens", async () => {
    daemon.setScript([
      { tool: 'task', arguments: { prompt: 'count the files' } },
      { text: 'There are two files in the folder.', holdAfter: 2, holdFile: daemon.hold('child') },
      { text: 'The helper counted two files.' },
    ]);
    const { c, view } = controller();
    const ext = extension(c);
    const parent = await c.openSession(daemon.root, 'how many files?');

    const turn = c.turn('how many files are there?');
    const running = await waitFor('the child to stream under the task call', () => {
      const body = view.last?.body ?? '';
      return childText(body).includes('There are') ? body : undefined;
    });
    assert.match(childText(running), /child session “count the files” running…/);
    assert.doesNotMatch(childText(running), /two files/, 'held after two pieces');
    assert.match(running, /data-open-session="s-[0-9a-f]+"/, 'the child can be opened from its line');
    assert.equal(ownText(running).includes('There are'), false, "the child's text is not the parent's");
    assert.equal(view.last?.outcome, 'running');

    daemon.release('child');
    const result = await turn;
    assert.equal(result?.outcome, 'finished');
    assert.equal(result?.reply, 'The helper counted two files.');
    const body = view.last!.body;
    assert.match(childText(body), /child session “count the files” finished · \d+ tokens/);
    assert.match(childText(body), /There are two files in the folder\./);
    assert.match(ownText(body), /The helper counted two files\./);
    // the child's reply is the call's result, and nowhere else the parent's
    assert.equal(ownText(body).split('There are two files in the folder.').length, 2);
    assert.match(ownText(body), /→ There are two files in the folder\./);
    assert.equal(daemon.log.has(/^error /), false, daemon.log.lines.join('\n'));

    // listed under its parent
    const sessions = await c.listSessions();
    const child = sessions.find((s) => s.parentSessionId === parent.sessionId);
    assert.ok(child, 'the child is listed');
    const items = sessionItems(underParents(sessions));
    assert.deepEqual(
      items.map((i) => i.sessionId),
      [parent.sessionId, child.sessionId],
    );
    assert.match(items[1].label, /^↳ /);
    assert.match(items[1].description!, /child of “how many files\?”/);

    // Open a Child Session… lists the open session's children and opens the one picked
    let offered: QuickPickItem[] = [];
    stub.answerQuickPick = (list) => {
      offered = list;
      return list[0];
    };
    await stub.commands.get('trellisd.openChildSession')!();
    assert.deepEqual(stub.messages.filter((m) => m.level === 'error'), []);
    assert.deepEqual(
      offered.map((i) => (i as QuickPickItem & { sessionId: string }).sessionId),
      [child.sessionId],
    );
    assert.equal(c.session?.sessionId, child.sessionId);
    assert.equal(c.session?.parentSessionId, parent.sessionId);
    assert.deepEqual(view.prompts, ['count the files']);
    assert.match(stripTags(view.last!.body), /There are two files in the folder\./);
    await waitFor('the header to name the parent', () => view.header?.lineage?.includes('how many files?'));
    assert.match(view.header!.lineage!, /^child session of “how many files\?”/);

    // and back to the parent, then the child again from its link
    await c.reopenSession(parent.sessionId);
    await childCommands(ext).open(child.sessionId);
    assert.equal(c.session?.sessionId, child.sessionId);
  });

  test("a child's approval is asked naming the child, and drawn under its task call", async () => {
    daemon.setScript([
      { tool: 'task', arguments: { prompt: 'write the notes' } },
      { tool: 'write_file', arguments: { path: 'notes.txt', content: 'from the child\n' } },
      { text: 'Written.' },
      { text: 'The helper wrote the notes.' },
    ]);
    const { c, view } = controller();
    const titles: string[] = [];
    stub.onQuickPick = (pick) => {
      titles.push(pick.title ?? '');
      setImmediate(() => (pick as unknown as { accept(label: string): void }).accept('Allow once'));
    };
    await c.openSession(daemon.root, 'notes');

    const result = await c.turn('have the notes written');

    assert.equal(result?.outcome, 'finished');
    assert.equal(fs.readFileSync(path.join(daemon.root, 'notes.txt'), 'utf8'), 'from the child\n');
    assert.equal(titles.length, 1);
    assert.match(titles[0], /^trellisd: child session “write the notes” asks: allow write_file\?/);
    const body = view.last!.body;
    assert.match(childText(body), /write_file[\s\S]*allowed once/);
    assert.match(childText(body), /finished/);
    assert.doesNotMatch(ownText(body), /allowed once/, "the child's question is not drawn as the parent's");
  });
});

describe('the session list with children under their parents', () => {
  const summary = (sessionId: string, parentSessionId?: string): SessionSummary => ({
    sessionId, root: '/p', title: sessionId, head: null, turns: 1, createdAt: '2026-01-01T00:00:00Z',
    updatedAt: '2026-01-01T00:00:00Z', provider: {}, pinned: [], ...(parentSessionId ? { parentSessionId } : {}),
  });

  test('each child follows its parent; a child whose parent is not listed stays where it was', () => {
    const listed = [summary('c2', 'p'), summary('q'), summary('c1', 'p'), summary('p'), summary('orphan', 'gone'), summary('g', 'c1')];
    assert.deepEqual(
      underParents(listed).map((s) => s.sessionId),
      ['q', 'p', 'c2', 'c1', 'g', 'orphan'],
    );
  });
});
