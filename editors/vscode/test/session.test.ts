import './setup';

import * as assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { afterEach, beforeEach, describe, test } from 'node:test';

import { changesText, contentProvider } from '../src/proposed';
import { SessionController } from '../src/session';
import { sessionItems } from '../src/sessionPicker';
import { toolItems } from '../src/toolsView';
import { buildTurnTree, TurnNode } from '../src/turnTree';
import { mcpServerFixture, RecordingView, ScriptLine, stripTags, TestDaemon, testCommand, waitFor } from './daemon';
import { stub, Uri } from './vscode-stub';

let daemon: TestDaemon;
let view: RecordingView;

function controller(script?: ScriptLine[]): SessionController {
  if (script) {
    daemon.setScript(script);
  }
  const c = new SessionController(daemon.client(), daemon.log);
  c.attachView(view);
  return c;
}

beforeEach(() => {
  stub.reset();
  daemon = new TestDaemon();
  view = new RecordingView();
});

afterEach(() => daemon.cleanup());

describe('a session', () => {
  test('a prompt streams its reply into the view as Markdown, then its outcome and tokens', async () => {
    const c = controller([{ text: 'Here is **bold** and `code`:\n\n- one\n- two', holdAfter: 3, holdFile: daemon.hold('rest') }]);
    await c.openSession(daemon.root);
    assert.deepEqual(view.messages[view.messages.length - 1], {
      type: 'reset',
      session: { sessionId: c.session!.sessionId, title: '', root: c.session!.root },
      turns: [],
      running: false,
    });
    const running = c.turn('show me some markdown');
    // The model holds after "Here is **bold** ": the partial reply is drawn while the turn runs.
    const partial = await waitFor('the partial reply', () => /<strong>bold<\/strong>/.test(view.last?.body ?? '') && view.last!);
    assert.equal(partial.outcome, 'running');
    assert.doesNotMatch(partial.body, /<code>|<li>/, 'the held part is not drawn yet');
    daemon.release('rest');
    const result = await running;
    assert.ok(result);
    assert.equal(result.outcome, 'finished');
    const turn = view.last!;
    assert.equal(turn.turnId, result.turnId);
    assert.equal(turn.prompt, 'show me some markdown');
    assert.match(turn.body, /<strong>bold<\/strong>/);
    assert.match(turn.body, /<code>code<\/code>/);
    assert.match(turn.body, /<li>two<\/li>/);
    assert.match(stripTags(turn.footer), /^finished · scripted · \d+ tokens \(\d+ in, 9 out\) · cost unknown$/);
    assert.equal(view.running, false);
    assert.equal(c.session!.head, result.turnId);
    assert.ok(daemon.log.has(new RegExp(`turn ${result.turnId} finished`)));
  });

  test('raw HTML in a reply is shown as text, never as markup', async () => {
    const c = controller([{ text: 'look <script>alert(1)</script> <img src="https://example.com/x.png">' }]);
    await c.openSession(daemon.root);
    await c.turn('<b>bold prompt</b>');
    const turn = view.last!;
    assert.doesNotMatch(turn.body, /<script|<img/);
    assert.match(turn.body, /&lt;script&gt;/);
    assert.equal(turn.prompt, '&lt;b&gt;bold prompt&lt;/b&gt;');
  });

  // The rate and the worst stall are reported, not asserted: speed lives in benchmarks.
  for (const [pace, delayMs] of [
    ['about 1000 tokens a second', 1],
    ['as fast as the daemon streams (thousands a second)', 0],
  ] as const) {
    test(`a fast stream (${pace}) is drawn in batches and never blocks the event loop`, async (t) => {
      const words = Array.from({ length: 3000 }, (_, i) => `w${i}`);
      const c = controller([{ text: words.join(' '), delayMs }]);
      await c.openSession(daemon.root);
      const lag = monitorEventLoopDelay({ resolution: 5 });
      lag.enable();
      const started = Date.now();
      const result = await c.turn('stream fast');
      const seconds = (Date.now() - started) / 1000;
      lag.disable();
      assert.equal(result?.outcome, 'finished');
      assert.match(stripTags(view.last!.body), /w0 w1 w2 .* w2999/s);
      const posts = view.turnPosts;
      const rate = 3000 / seconds;
      const worstMs = lag.max / 1e6;
      t.diagnostic(`${rate.toFixed(0)} tokens/s for ${seconds.toFixed(2)} s: ${posts} draws, worst event-loop stall ${worstMs.toFixed(0)} ms`);
      // One draw per 40 ms at most (plus the start and the end), however many tokens came and
      // however fast: what keeps the editor responsive is the drawing rate, not the token rate.
      assert.ok(posts <= (seconds * 1000) / 40 + 5, `${posts} draws in ${seconds.toFixed(2)} s`);
    });
  }

  test('a failed turn (a refused key) is shown as the daemon said it, with the log one click away', async () => {
    const c = controller([{ error: 'the provider refused the API key (401 Unauthorized)' }]);
    await c.openSession(daemon.root);
    const result = await c.turn('hello');
    assert.equal(result?.outcome, 'error');
    const shown = await waitFor('an error message', () => stub.messages.find((m) => m.level === 'error'));
    assert.match(shown.message, /the turn failed: .*refused the API key \(401 Unauthorized\)/);
    assert.deepEqual(shown.items, ['Show Log']);
    assert.match(view.last!.footer, /turn-error/);
    assert.match(stripTags(view.last!.footer), /refused the API key/);
  });

  test('a key the provider refuses (HTTP 401) is reported in words, not as a crash', async (t) => {
    const http = await import('node:http');
    const requests: string[] = [];
    const server = http.createServer((req, res) => {
      requests.push(`${req.method} ${req.url} ${req.headers.authorization}`);
      res.writeHead(401, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { message: 'Incorrect API key provided: sk-wrong', type: 'invalid_request_error', code: 'invalid_api_key' } }));
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as { port: number };
    try {
      const client = daemon.client({
        initializationOptions: () => ({ provider: 'openai', baseUrl: `http://127.0.0.1:${port}/v1`, apiKey: 'sk-wrong', model: 'gpt-4o-mini' }),
      });
      const c = new SessionController(client, daemon.log);
      c.attachView(view);
      await c.openSession(daemon.root);
      const result = await c.turn('hello');
      assert.equal(result?.outcome, 'error');
      assert.ok(requests.some((r) => r.includes('Bearer sk-wrong')), requests.join('\n'));
      const shown = await waitFor('an error message', () => stub.messages.find((m) => m.level === 'error'));
      assert.match(shown.message, /^trellisd: the turn failed: .*(401|key)/i);
      assert.doesNotMatch(shown.message, /Traceback|sk-wrong/);
      t.diagnostic(`shown: ${shown.message}`);
    } finally {
      server.close();
    }
  });

  test('branching moves the head; the abandoned branch stays in the tree', async () => {
    const c = controller(); // the echo model says which earlier prompts it can see
    await c.openSession(daemon.root);
    const first = await c.turn('first');
    const second = await c.turn('second');
    assert.match(second!.reply, /1 earlier turn\(s\): .first./);
    await c.branch(first!.turnId);
    assert.equal(c.session!.head, first!.turnId);
    assert.deepEqual(view.prompts, ['first'], 'the view shows the path to the new head');
    const third = await c.turn('third');
    assert.match(third!.reply, /1 earlier turn\(s\): .first.\./, 'the model no longer sees "second"');

    const tree = await c.turnTree();
    assert.equal(tree!.turns.length, 3);
    const roots = buildTurnTree(tree!.turns, tree!.head);
    assert.equal(roots.length, 1);
    const root = roots[0] as TurnNode;
    assert.equal(root.turn.prompt, 'first');
    assert.equal(root.branches.length, 2);
    const [abandoned, current] = root.branches;
    assert.equal(abandoned.first.prompt, 'second');
    assert.equal(abandoned.onHeadPath, false);
    assert.equal(current.first.prompt, 'third');
    assert.equal(current.chain[0].isHead, true);

    await c.branch(null);
    assert.equal(c.session!.head, null);
    assert.deepEqual(view.prompts, []);
  });

  test('sessions are listed newest first and reopen with their history', async () => {
    const c = controller();
    const older = await c.openSession(daemon.root, 'older session');
    await c.turn('a question');
    await new Promise((r) => setTimeout(r, 20));
    const newer = await c.openSession(daemon.root, 'newer session');
    const sessions = await c.listSessions();
    assert.deepEqual(
      sessions.slice(0, 2).map((s) => s.sessionId),
      [newer.sessionId, older.sessionId],
    );
    const items = sessionItems(sessions);
    assert.equal(items[1].label, 'older session');
    assert.match(items[1].detail!, /^1 turn · last used just now · /);
    assert.equal(items[1].description, 'project');

    await c.reopenSession(older.sessionId);
    assert.equal(c.session!.sessionId, older.sessionId);
    assert.deepEqual(view.prompts, ['a question']);
    assert.match(stripTags(view.last!.body), /a question/);
  });

  test('a daemon that died is restarted on the next action and the session reopened', async () => {
    const c = controller();
    await c.openSession(daemon.root);
    await c.turn('before the crash');
    const client = c.client;
    process.kill(client.pid!, 'SIGKILL');
    const shown = await waitFor('the crash to be shown', () => stub.messages.find((m) => m.level === 'error'));
    assert.match(shown.message, /connection to trellisd was lost: the daemon was stopped by SIGKILL/);
    const result = await c.turn('after the crash');
    assert.equal(result?.outcome, 'finished');
    assert.match(result!.reply, /1 earlier turn\(s\): .before the crash./, 'the reopened session kept its history');
    assert.ok(view.notices.some((n) => /restarted; the session was reopened/.test(n)));
    assert.deepEqual(view.prompts, ['before the crash', 'after the crash']);
  });

  test('a daemon that dies during a turn ends the turn with a message, and the next turn works', async () => {
    const c = controller([{ text: 'words that will never all arrive here', holdAfter: 1, holdFile: daemon.hold('never') }]);
    await c.openSession(daemon.root);
    const turn = c.turn('slow');
    await waitFor('the first token', () => view.last && stripTags(view.last.body).length > 0);
    process.kill(c.client.pid!, 'SIGKILL');
    assert.equal(await turn, undefined);
    assert.equal(view.last!.outcome, 'error');
    assert.match(stripTags(view.last!.footer), /connection to trellisd was lost/);
    const shown = stub.messages.filter((m) => m.level === 'error');
    assert.equal(shown.length, 1, 'one message for one failure');
    assert.equal(c.isRunning, false);
  });
});

// These use session/steer, session/steered, session/cancel, session/requestApproval and cost.
describe('steering, cancelling, approving', () => {
  test('the input box steers a running turn and shows when the steer was delivered', async () => {
    const c = controller([
      // The first step is held until the steer is queued; the steer reaches the model at step 2.
      { text: 'Looking around first.', holdAfter: 1, holdFile: daemon.hold('steered'), tool: 'list_dir', arguments: { path: '.' } },
      { text: 'Done, as you asked.' },
    ]);
    await c.openSession(daemon.root);
    const turn = c.turn('explore');
    await waitFor('the first token', () => view.last && stripTags(view.last.body).length > 0);
    await c.send('focus on the README');
    daemon.release('steered');
    const result = await turn;
    assert.equal(result?.outcome, 'finished');
    const body = await waitFor('the delivery', () => /steer-delivered/.test(view.last!.body) && view.last!.body);
    assert.match(stripTags(body), /steer focus on the README delivered at step 2/);
    assert.ok(daemon.log.has(/steer steer-\S+ delivered at step 2/));
  });

  test('cancel ends the running turn as cancelled', async () => {
    const words = Array.from({ length: 200 }, (_, i) => `w${i}`).join(' ');
    // The model holds after three words until the turn is cancelled: only the cancel can end it.
    const c = controller([{ text: words, holdAfter: 3, holdFile: daemon.hold('never') }]);
    await c.openSession(daemon.root);
    const turn = c.turn('long');
    await waitFor('the first words', () => view.last && /w2/.test(stripTags(view.last.body)));
    await c.cancel();
    await turn;
    assert.doesNotMatch(stripTags(view.last!.body), /w199/);
    assert.equal(view.last!.outcome, 'cancelled');
    assert.match(stripTags(view.last!.footer), /^cancelled/);
    assert.equal(c.isRunning, false);
  });

  for (const [answer, decision, written] of [
    ['Allow once', 'allowed once', true],
    ['Deny', 'denied', false],
  ] as const) {
    test(`an approval is asked with the tool, its arguments and a summary: ${answer}`, async () => {
      const c = controller([
        { tool: 'write_file', arguments: { path: 'notes.txt', content: 'hello' } },
        { text: 'Finished.' },
      ]);
      stub.onQuickPick = (pick) => setTimeout(() => pick.accept(answer), 50);
      await c.openSession(daemon.root);
      const result = await c.turn('write a note');
      assert.equal(result?.outcome, 'finished');
      const pick = stub.quickPicks[0];
      assert.ok(pick, 'a quick pick was shown');
      assert.match(pick.title!, /allow write_file\?/);
      assert.match(pick.placeholder!, /"path":"notes.txt"/);
      assert.deepEqual(
        pick.items.map((i) => i.label.replace(/^\$\([^)]+\) /, '')),
        ['Allow once', 'Allow always (this session)', 'Allow always (this project)', 'Deny'],
      );
      assert.ok(pick.disposed);
      assert.match(stripTags(view.last!.body), new RegExp(`write_file ${decision}`));
      const fs = await import('node:fs');
      assert.equal(fs.existsSync(`${daemon.root}/notes.txt`), written);
      assert.ok(daemon.log.has(/approval asked: write_file \{"path":"notes.txt"/));
    });
  }

  test('an MCP tool call is approved naming its server and tool; the tools view lists it with the policy', async () => {
    const server = mcpServerFixture();
    const c = controller([{ tool: 'mcp__t__echo', arguments: { text: 'from the server' } }, { text: 'Done.' }]);
    stub.onQuickPick = (pick) => setTimeout(() => pick.accept('Allow once'), 50);
    await c.openSession(daemon.root, undefined, [{ name: 't', command: testCommand().command, args: [server] }]);
    const result = await c.turn('call the server');
    assert.equal(result?.outcome, 'finished');
    assert.match(stub.quickPicks[0].title!, /^trellisd: allow MCP tool echo of server t\? mcp__t__echo wants to exec mcp:t\/echo$/);
    assert.ok(daemon.log.has(/approval asked: mcp__t__echo .*\[MCP server t, tool echo\]/));
    const items = toolItems(await c.tools());
    const echo = items.find((i) => i.label === 'mcp__t__echo');
    assert.equal(echo?.description, 'MCP t · exec · ask · mcp:t/echo');
    assert.equal(items.find((i) => i.label === 'read_file')?.description, 'built-in · read · depends');
    const row = items.find((i) => i.server?.name === 't');
    assert.equal(row?.description, 'session · stdio · running · 8 tool(s)');
    assert.deepEqual(
      items.filter((i) => i.kind === -1).map((i) => i.label),
      ['built-in', 'MCP server t', 'MCP servers'],
    );
  });

  test('an approval for an edit opens the diff editor beside it: the file as it is and as it would be', async () => {
    const fs = await import('node:fs');
    fs.writeFileSync(`${daemon.root}/notes.txt`, 'first line\nold line\n');
    const c = controller([
      { tool: 'edit_file', arguments: { path: 'notes.txt', old: 'old', new: 'new' } },
      { text: 'Edited.' },
    ]);
    stub.onQuickPick = (pick) => setTimeout(() => pick.accept('Deny'), 50);
    await c.openSession(daemon.root);
    await c.turn('edit the note');
    const opened = stub.executed.find((e) => e.id === 'vscode.diff');
    assert.ok(opened, 'the diff editor was opened');
    const [left, right, title] = opened.args as [Uri, Uri, string];
    assert.equal(left.scheme, 'file');
    assert.ok(left.fsPath.endsWith('/notes.txt'), left.fsPath);
    assert.equal(contentProvider.provideTextDocumentContent(right), 'first line\nnew line\n');
    assert.match(title, /^notes\.txt: /);
    assert.equal(fs.readFileSync(`${daemon.root}/notes.txt`, 'utf8'), 'first line\nold line\n');
  });

  test("a turn's changes, its revert, and a branch that restores files, asking before overwriting", async () => {
    const fs = await import('node:fs');
    const c = controller([
      { tool: 'write_file', arguments: { path: 'a.txt', content: 'agent\n' } },
      { text: 'Written.' },
    ]);
    stub.onQuickPick = (pick) => setTimeout(() => pick.accept('Allow once'), 20);
    await c.openSession(daemon.root);
    const result = await c.turn('write a');
    const turnId = result!.turnId;
    const changes = await c.changes(turnId);
    assert.deepEqual(
      changes.map((f) => [f.path, f.status]),
      [['a.txt', 'added']],
    );
    assert.match(changesText(changes), /^--- \/dev\/null\n\+\+\+ b\/a\.txt\n@@ -0,0 \+1 @@\n\+agent\n$/);

    fs.writeFileSync(`${daemon.root}/a.txt`, 'a person\'s edit\n');
    stub.answerMessage = () => undefined; // keep the person's edit
    assert.equal(await c.revert(turnId), undefined);
    assert.match(stub.messages.at(-1)!.message, /changed since the agent wrote them: a\.txt/);
    assert.equal(fs.readFileSync(`${daemon.root}/a.txt`, 'utf8'), "a person's edit\n");

    stub.answerMessage = () => 'Overwrite';
    const back = await c.branch(null, true);
    assert.equal(back.head, null);
    assert.equal(fs.existsSync(`${daemon.root}/a.txt`), false);
    await c.branch(turnId, true);
    assert.equal(fs.readFileSync(`${daemon.root}/a.txt`, 'utf8'), 'agent\n');
    const reverted = await c.revert(turnId);
    assert.deepEqual(reverted, { restored: ['a.txt'], skipped: [], turnId });
    assert.equal(fs.existsSync(`${daemon.root}/a.txt`), false);
  });

  test('"Allow always (this session)" is not asked again for the same action', async () => {
    const c = controller([
      { tool: 'write_file', arguments: { path: 'a.txt', content: 'first' } },
      { tool: 'write_file', arguments: { path: 'a.txt', content: 'second' } },
      { text: 'Written twice.' },
    ]);
    stub.onQuickPick = (pick) => setTimeout(() => pick.accept('Allow always (this session)'), 20);
    await c.openSession(daemon.root);
    const result = await c.turn('write two files');
    assert.equal(result?.outcome, 'finished');
    assert.equal(stub.quickPicks.length, 1);
    const fs = await import('node:fs');
    assert.equal(fs.readFileSync(`${daemon.root}/a.txt`, 'utf8'), 'second');
  });

  test('cancelling a turn that waits for approval withdraws the question', async () => {
    const c = controller([{ tool: 'write_file', arguments: { path: 'never.txt', content: 'x' } }, { text: 'unreached' }]);
    await c.openSession(daemon.root);
    const turn = c.turn('write something');
    const pick = await waitFor('the approval', () => stub.quickPicks[0]);
    await c.cancel();
    await turn;
    assert.ok(pick.disposed, 'the quick pick was closed');
    assert.equal(view.last!.outcome, 'cancelled');
    assert.match(stripTags(view.last!.body), /write_file withdrawn: answered in another window, or the turn ended first/);
    const fs = await import('node:fs');
    assert.equal(fs.existsSync(`${daemon.root}/never.txt`), false);
  });

  test('pause lets the running step finish, ends the turn paused, and resume goes on', async () => {
    const c = controller([
      { text: 'Looking around first.', holdAfter: 1, holdFile: daemon.hold('paused'), tool: 'list_dir', arguments: { path: '.' } },
      { text: 'It is a small project.' },
    ]);
    await c.openSession(daemon.root);
    const turn = c.turn('explore');
    await waitFor('the first token', () => view.last && stripTags(view.last.body).length > 0);
    await c.pause();
    daemon.release('paused');
    const paused = await turn;
    assert.equal(paused?.outcome, 'paused');
    assert.equal(paused?.steps, 1);
    assert.equal(c.isRunning, false);
    const resumed = await c.resume(paused!.turnId);
    assert.equal(resumed?.outcome, 'finished');
    assert.equal(resumed?.runId, paused!.runId);
    assert.match(stripTags(view.last!.body), /It is a small project\./);
  });

  test('step mode pauses the turn after every step', async () => {
    const c = controller([
      { text: 'Looking.', tool: 'list_dir', arguments: { path: '.' } },
      { text: 'Done.' },
    ]);
    await c.openSession(daemon.root);
    assert.equal(c.toggleStepMode(), true);
    const first = await c.turn('walk me through it');
    assert.equal(first?.outcome, 'paused');
    const second = await c.resume(first!.turnId);
    assert.deepEqual([second?.outcome, second?.steps], ['finished', 2]);
  });

  test("a session whose store was changed by hand says its log is broken when reopened", async () => {
    const first = controller();
    const session = await first.openSession(daemon.root);
    await first.turn('remember this');
    const { command, args } = testCommand();
    const python = args[0] === '-m' ? command : 'python3';
    const edit = "import apsw, sys; c = apsw.Connection(sys.argv[1]); c.execute(\"UPDATE step SET text = 'other'\")";
    execFileSync(python, ['-c', edit, daemon.db]);
    const second = controller();
    await second.reopenSession(session.sessionId);
    assert.ok(view.notices.some((n) => /log is broken/.test(n)), view.notices.join('\n'));
    assert.ok(stub.messages.some((m) => /log is broken/.test(m.message)));
  });

  test('a turn whose daemon died can be resumed from the error message', async () => {
    // Held after "one" until the daemon has died; the resumed turn plays the line again.
    const c = controller([{ text: 'one two three four five six', holdAfter: 1, holdFile: daemon.hold('after-death') }]);
    await c.openSession(daemon.root);
    stub.answerMessage = (shown) => (shown.items.includes('Resume Turn') ? 'Resume Turn' : undefined);
    const turn = c.turn('count slowly');
    await waitFor('the first token', () => view.last && stripTags(view.last.body).length > 0);
    const turnId = view.last!.turnId;
    assert.ok(turnId);
    process.kill(c.client.pid!, 'SIGKILL');
    await turn;
    daemon.release('after-death');
    await waitFor('the resumed turn to finish', () => view.turns.get(turnId!)?.outcome === 'finished', 20_000);
    assert.match(stripTags(view.turns.get(turnId!)!.body), /one two three four five six/);
    assert.ok(daemon.log.has(new RegExp(`resuming turn ${turnId}`)));
    assert.equal(c.session!.head, turnId, 'resuming does not move the head');
  });

  test('a session another window writes can be taken over from the error message', async () => {
    const first = controller();
    const session = await first.openSession(daemon.root);
    await first.turn('from the first window');
    const second = controller();
    await second.reopenSession(session.sessionId);
    stub.answerMessage = (shown) => (shown.items.includes('Take Over') ? 'Take Over' : undefined);
    const refused = await second.turn('from the second window');
    assert.equal(refused, undefined);
    const shown = stub.messages.find((m) => m.items.includes('Take Over'));
    assert.ok(shown, 'the refusal offers to take the session over');
    assert.match(shown.message, /pid|writer|another/i);
    await waitFor('the takeover', () => daemon.log.has(/taken over by this window/));
    const result = await second.turn('from the second window, again');
    assert.equal(result?.outcome, 'finished');
  });

  test("each turn's cost is shown (USD, or unknown)", async () => {
    const c = controller([{ text: 'cheap' }]);
    await c.openSession(daemon.root);
    const result = await c.turn('how much');
    assert.ok(result && 'cost' in result, 'the turn result has a cost');
    assert.match(stripTags(view.last!.footer), /· (\$[\d.]+|cost unknown)$/);
    const tree = await c.turnTree();
    assert.ok('cost' in tree!.turns[0], 'the stored turn has a cost');
  });
});

describe('windows sharing one daemon', () => {
  /** A second window on the same shared daemon, with a view of its own. */
  function window(): { c: SessionController; view: RecordingView } {
    const own = new RecordingView();
    const c = new SessionController(daemon.client(), daemon.log);
    c.attachView(own);
    return { c, view: own };
  }

  test("a window that reopens a session follows the turn another window runs, and steers it", async () => {
    daemon.share();
    const first = controller([
      { text: 'one two three four', holdAfter: 2, holdFile: daemon.hold('steered') },
      { text: 'Kept short, as asked.' },
    ]);
    const session = await first.openSession(daemon.root);
    const running = first.turn('count to four');
    await waitFor('the first pieces', () => /one two/.test(stripTags(view.last?.body ?? '')));

    const second = window();
    await second.c.reopenSession(session.sessionId);
    const drawn = second.view.last!;
    assert.equal(drawn.prompt, 'count to four');
    assert.equal(drawn.outcome, 'running');
    assert.match(stripTags(drawn.body), /^\s*one two\s*$/, 'the text streamed so far, once');
    assert.equal(second.view.running, true);
    assert.equal(second.c.isRunning, true);

    await second.c.send('keep it short'); // the input box steers the running turn
    await waitFor('the steer to be queued', () => /keep it short\s*queued/.test(stripTags(second.view.last!.body)));
    daemon.release('steered');
    const result = await running;
    assert.equal(result?.outcome, 'finished');
    const followed = await waitFor('the followed turn to end', () => second.view.last?.outcome === 'finished' && second.view.last);
    assert.match(stripTags(followed.body), /one two three four/);
    assert.match(stripTags(followed.body), /keep it short\s*delivered at step 2/);
    assert.match(stripTags(followed.body), /Kept short, as asked\./);
    assert.match(stripTags(followed.footer), /^finished · scripted · \d+ tokens/);
    assert.equal(second.view.running, false);
    assert.equal(second.c.session!.head, result.turnId);
    assert.match(stripTags(view.last!.body), /keep it short\s*delivered at step 2/, 'the first window sees the steer');
  });

  test('a window closed mid-turn leaves the turn running; reopened, it reattaches and sees the end', async () => {
    daemon.share();
    const client = daemon.client();
    const closing = new SessionController(client, daemon.log);
    closing.attachView(view);
    daemon.setScript([{ text: 'still going after the window closed', holdAfter: 2, holdFile: daemon.hold('closed') }]);
    const session = await closing.openSession(daemon.root);
    const running = closing.turn('outlive the window');
    await waitFor('the first pieces', () => /still going/.test(stripTags(view.last?.body ?? '')));
    closing.dispose(); // the window is reloaded: its extension goes, and its daemon connection
    await client.stop();
    await running;

    const reloaded = window();
    await reloaded.c.reopenSession(session.sessionId);
    assert.equal(reloaded.view.last!.outcome, 'running', 'the turn runs on in the shared daemon');
    assert.match(stripTags(reloaded.view.last!.body), /^\s*still going\s*$/);
    daemon.release('closed');
    const ended = await waitFor('the turn to end', () => reloaded.view.last?.outcome !== 'running' && reloaded.view.last);
    assert.equal(ended.outcome, 'finished');
    assert.match(stripTags(ended.body), /still going after the window closed/);
  });

  test('a turn another window starts in a session open here is shown as it runs', async () => {
    daemon.share();
    const first = controller([{ text: 'Started elsewhere, seen here.', holdAfter: 2, holdFile: daemon.hold('seen') }]);
    const session = await first.openSession(daemon.root);
    const second = window();
    await second.c.reopenSession(session.sessionId); // open here, nothing running yet
    assert.equal(second.view.order.length, 0);
    const running = first.turn('from the first window');
    const shown = await waitFor('the turn in the second window', () => second.view.last?.outcome === 'running' && second.view.last);
    assert.equal(shown.prompt, 'from the first window');
    daemon.release('seen');
    const result = await running;
    const ended = await waitFor('the turn to end here too', () => second.view.last?.outcome === 'finished' && second.view.last);
    assert.equal(stripTags(ended.body).trim(), 'Started elsewhere, seen here.', 'every piece once');
    assert.equal(second.c.session!.head, result?.turnId);
  });

  test("a window that follows another window's turn cancels it; both show it cancelled", async () => {
    daemon.share();
    const first = controller([{ text: 'a b c d e f g h', holdAfter: 3, holdFile: daemon.hold('never') }]);
    const session = await first.openSession(daemon.root);
    const running = first.turn('spell slowly');
    await waitFor('the first pieces', () => /a b/.test(stripTags(view.last?.body ?? '')));
    const second = window();
    await second.c.reopenSession(session.sessionId);
    assert.equal(second.view.last!.outcome, 'running');
    await second.c.cancel();
    const result = await running;
    assert.equal(result?.outcome, 'cancelled');
    assert.equal(view.last!.outcome, 'cancelled');
    await waitFor('the followed turn to show cancelled', () => second.view.last?.outcome === 'cancelled');
    assert.match(stripTags(second.view.last!.footer), /^cancelled/);
    assert.equal(second.c.isRunning, false);
  });

  test('an approval answered in another window closes the question in this one', async () => {
    daemon.share();
    const first = controller([
      { tool: 'write_file', arguments: { path: 'shared.txt', content: 'both saw it' } },
      { text: 'Written.' },
    ]);
    const session = await first.openSession(daemon.root);
    const running = first.turn('write a file');
    const asked = await waitFor('the question in the first window', () => stub.quickPicks[0]);
    const second = window();
    stub.onQuickPick = (pick) => setTimeout(() => pick.accept('Allow once'), 0);
    await second.c.reopenSession(session.sessionId);
    const result = await running;
    assert.equal(result?.outcome, 'finished');
    assert.equal(stub.quickPicks.length, 2, 'the second window was asked too');
    assert.ok(asked.disposed, "the first window's question was closed");
    assert.match(stripTags(view.last!.body), /write_file withdrawn: answered in another window/);
    const fs = await import('node:fs');
    assert.equal(fs.readFileSync(`${daemon.root}/shared.txt`, 'utf8'), 'both saw it');
  });
});

// These use session/turn's queue and budget, session/queued, session/dequeued, session/unqueue
// and session/budget.
describe('queued prompts and budgets', () => {
  test('prompts queued while a turn runs are listed, run in order, and a dropped one never runs', async () => {
    const c = controller([
      { text: 'First answer.', holdAfter: 1, holdFile: daemon.hold('first') },
      { text: 'Second answer.' },
      { text: 'Fourth answer.' },
    ]);
    await c.openSession(daemon.root);
    const first = c.turn('one');
    await waitFor('the first token', () => view.last && stripTags(view.last.body).length > 0);
    const queued = ['two', 'three', 'four'].map((p) => c.queuePrompt(p));
    await waitFor('three queued prompts', () => view.queued.length === 3);
    assert.deepEqual(
      view.queued.map((q) => q.prompt),
      ['two', 'three', 'four'],
    );
    await c.unqueue(view.queued[1].queueId);
    assert.deepEqual(
      view.queued.map((q) => q.prompt),
      ['two', 'four'],
    );
    daemon.release('first');
    await first;
    await Promise.all(queued);
    await waitFor('the queue to empty', () => view.queued.length === 0);
    const turns = await waitFor('the queued turns drawn', () => {
      const shown = view.order.map((k) => view.turns.get(k)!);
      return shown.filter((t) => t.outcome === 'finished').length === 3 && shown;
    });
    assert.deepEqual(
      turns.map((t) => stripTags(t.prompt)),
      ['one', 'two', 'four'],
    );
    assert.match(stripTags(turns[2].body), /Fourth answer/);
    assert.ok(view.notices.some((n) => /dropped from the queue/.test(n)), view.notices.join('\n'));
  });

  test('spend is shown against the budget, and a turn that would pass it is not sent', async () => {
    const c = controller([{ text: 'First answer.' }, { text: 'never sent' }]);
    await c.openSession(daemon.root);
    await c.turn('one');
    const status = await c.setBudget({ tokens: 5 });
    assert.ok(status.spent.tokens > 5);
    assert.equal(view.spend, `spent ${status.spent.tokens} of 5 tokens`);
    const result = await c.turn('two');
    assert.equal(result?.outcome, 'exhausted');
    assert.match(result?.error ?? '', /would pass the session's budget of 5 tokens/);
    assert.match(stripTags(view.last!.footer), /exhausted · /);
    assert.doesNotMatch(stripTags(view.last!.body), /never sent/);
    await c.setBudget(null);
    assert.equal(view.spend, null);
  });
});
