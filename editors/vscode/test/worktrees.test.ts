import './setup';

import * as assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, test } from 'node:test';

import type { Extension } from '../src/features';
import { contentProvider } from '../src/proposed';
import { SessionController } from '../src/session';
import { sessionItems } from '../src/sessionPicker';
import { registerTurnCommands } from '../src/turnCommands';
import { registerWorktrees, worktreeCommands } from '../src/worktrees';
import { features, RecordingView, TestDaemon, waitFor } from './daemon';
import { stub, Uri } from './vscode-stub';

let daemon: TestDaemon;

function git(cwd: string, ...args: string[]): string {
  return execFileSync('git', ['-c', 'user.name=Test', '-c', 'user.email=test@example.com', ...args], { cwd, encoding: 'utf8' });
}

/** The project folder as a git repository with one commit on main. */
function makeRepo(root: string): void {
  git(root, 'init', '-q', '-b', 'main');
  git(root, 'add', '-A');
  git(root, 'commit', '-q', '-m', 'start');
}

function controller(view = new RecordingView()): { c: SessionController; view: RecordingView } {
  const c = new SessionController(daemon.client(), daemon.log);
  c.attachView(view);
  return { c, view };
}

/** The extension's features over one controller, their commands registered in the stand-in. */
function extension(c: SessionController): Extension {
  const ext = features(c, daemon.log);
  registerWorktrees(ext, worktreeCommands(ext, async () => daemon.root));
  registerTurnCommands(ext);
  return ext;
}

function run(command: string): Promise<unknown> {
  const fn = stub.commands.get(command);
  assert.ok(fn, `${command} is registered`);
  return Promise.resolve(fn());
}

function lastHeader(v: RecordingView) {
  const headers = v.messages.flatMap((m) => (m.type === 'reset' ? [m.session] : m.type === 'session' ? [m.session] : []));
  return headers.at(-1);
}

function shown(level: 'information' | 'warning' | 'error'): string[] {
  return stub.messages.filter((m) => m.level === level).map((m) => m.message);
}

/** Every approval is answered "Allow once", as a person would. */
function allowOnce(): void {
  stub.onQuickPick = (pick) => void setImmediate(() => pick.accept('Allow once'));
}

beforeEach(() => {
  stub.reset();
  daemon = new TestDaemon();
  stub.folders = [{ uri: Uri.file(daemon.root), name: 'project', index: 0 }];
  makeRepo(daemon.root);
});

afterEach(() => daemon.cleanup());

describe('sessions in a worktree of their own, against the daemon', () => {
  test('start in a new worktree, write there, see the mark; merge into the checkout; discard', async () => {
    daemon.setScript([{ tool: 'write_file', arguments: { path: 'notes.txt', content: 'from the worktree\n' } }, { text: 'Written.' }]);
    const { c, view } = controller();
    extension(c);
    allowOnce();
    stub.answerInputBox = () => 'fix-login';
    await run('trellisd.startWorktreeSession');
    const worktree = c.session?.worktree;
    assert.ok(worktree, shown('error').join('\n'));
    assert.equal(worktree.branch, 'trellisd/fix-login');
    assert.equal(worktree.base, 'main');
    assert.equal(lastHeader(view)?.worktree, '⎇ trellisd/fix-login → main');
    assert.equal(stub.context.get('trellisd.worktree'), true);
    assert.match(shown('information').at(-1)!, /works in .*fix-login \(⎇ trellisd\/fix-login → main\); your checkout is left as it is/);

    const result = await c.turn('write notes.txt');
    assert.equal(result?.outcome, 'finished');
    assert.equal(fs.readFileSync(path.join(worktree.path, 'notes.txt'), 'utf8'), 'from the worktree\n');
    assert.ok(!fs.existsSync(path.join(daemon.root, 'notes.txt')), 'the checkout is left as it is');

    const listed = sessionItems(await c.listSessions());
    assert.equal(listed.length, 1);
    assert.match(listed[0].description!, /⎇ trellisd\/fix-login → main/);

    await run('trellisd.mergeWorktree');
    assert.deepEqual(shown('error'), []);
    assert.match(shown('information').at(-1)!, /^trellisd: merged trellisd\/fix-login into main \([0-9a-f]{8}\): 1 file, notes\.txt, and written into your checkout\.$/);
    assert.equal(fs.readFileSync(path.join(daemon.root, 'notes.txt'), 'utf8'), 'from the worktree\n');
    assert.equal(git(daemon.root, 'branch', '--show-current').trim(), 'main');

    stub.answerMessage = () => undefined; // "Cancel"
    await run('trellisd.discardWorktree');
    assert.match(stub.messages.at(-1)!.message, /^Discard the worktree of this session and its branch trellisd\/fix-login\?$/);
    assert.ok(fs.existsSync(worktree.path), 'kept when the answer is no');

    stub.answerMessage = (m) => (m.items.includes('Discard') ? 'Discard' : undefined);
    await run('trellisd.discardWorktree');
    assert.equal(c.session?.worktree, undefined);
    assert.equal(lastHeader(view)?.worktree, undefined);
    assert.equal(stub.context.get('trellisd.worktree'), false);
    assert.ok(!fs.existsSync(worktree.path), 'the worktree folder is gone');
    assert.equal(git(daemon.root, 'branch', '--list', 'trellisd/fix-login').trim(), '', 'its branch is gone');
    assert.match(shown('information').at(-1)!, /the branch trellisd\/fix-login were discarded/);
    assert.equal(fs.readFileSync(path.join(daemon.root, 'notes.txt'), 'utf8'), 'from the worktree\n', 'what was merged stays');

    await run('trellisd.mergeWorktree');
    assert.match(shown('error').at(-1)!, /not in a worktree of its own: there is no worktree to merge/);
  });

  test('a merge that conflicts names the files and merges nothing', async () => {
    daemon.setScript([{ tool: 'write_file', arguments: { path: 'README.md', content: '# the agent’s README\n' } }, { text: 'Written.' }]);
    const { c } = controller();
    extension(c);
    allowOnce();
    stub.answerInputBox = () => '';
    await run('trellisd.startWorktreeSession');
    assert.match(c.session?.worktree?.branch ?? '', /^trellisd\/[\w.-]+$/, 'a name is made up');
    await c.turn('rewrite the README');
    fs.writeFileSync(path.join(daemon.root, 'README.md'), '# my own README\n');
    git(daemon.root, 'commit', '-q', '-am', 'my README');
    const before = git(daemon.root, 'rev-parse', 'main');

    await run('trellisd.mergeWorktree');
    const error = shown('error').at(-1);
    assert.match(error ?? '', /^Merging session .* into main conflicts in README\.md; nothing was merged\.$/);
    assert.equal(git(daemon.root, 'rev-parse', 'main'), before);
    assert.equal(fs.readFileSync(path.join(daemon.root, 'README.md'), 'utf8'), '# my own README\n');
    assert.ok(c.session?.worktree, 'the worktree stays');
  });

  test('discarding while a turn runs is refused in plain words, without asking', async () => {
    daemon.setScript([{ text: 'working on it', holdFile: daemon.hold('go') }]);
    const { c } = controller();
    extension(c);
    stub.answerInputBox = () => 'busy';
    await run('trellisd.startWorktreeSession');
    const running = c.turn('take your time');
    await waitFor('the turn to run', () => c.isRunning);
    await run('trellisd.discardWorktree');
    assert.deepEqual(shown('error'), ['A turn is running: wait for it to end or cancel it before you discard the worktree.']);
    assert.ok(!stub.messages.some((m) => m.items.includes('Discard')), 'not asked');
    daemon.release('go');
    assert.equal((await running)?.outcome, 'finished');
    assert.ok(fs.existsSync(c.session!.worktree!.path));
  });
});

/** A command's two fifos in a folder git ignores: it says `ready` once under way, then waits for `go`. */
class Gate {
  readonly ready: string;
  readonly go: string;
  constructor(root: string, name: string) {
    const folder = path.join(root, '.gates');
    fs.mkdirSync(folder, { recursive: true });
    fs.appendFileSync(path.join(root, '.git', 'info', 'exclude'), '/.gates/\n');
    this.ready = path.join(folder, `${name}.ready`);
    this.go = path.join(folder, `${name}.go`);
    execFileSync('mkfifo', [this.ready, this.go]);
  }
  script(work: string): string {
    return `${work} && echo > '${this.ready}' && cat '${this.go}' > /dev/null`;
  }
  reached(): Promise<string> {
    return fs.promises.readFile(this.ready, 'utf8');
  }
  release(): Promise<void> {
    return fs.promises.writeFile(this.go, '\n');
  }
  /** Whatever a failed test left waiting on either end goes on. */
  unblock(): void {
    for (const fifo of [this.ready, this.go]) {
      const fd = fs.openSync(fifo, fs.constants.O_RDWR | fs.constants.O_NONBLOCK);
      fs.writeSync(fd, '\n');
      fs.closeSync(fd);
    }
  }
}

describe('two sessions in one folder, against the shared daemon', () => {
  test("a change another session's command may have made is marked, and its revert asks before forcing", async () => {
    daemon.share();
    const gate = new Gate(daemon.root, 'a');
    const shell = (script: string) => ({ tool: 'run_command', arguments: { argv: ['sh', '-c', script] } });
    // The model answers in the order asked: A's command, B's, B's end, A's end.
    daemon.setScript([shell(gate.script('echo a > a.txt')), shell('echo b > b.txt && echo b2 > b2.txt'), { text: 'B is done.' }, { text: 'A is done.' }]);
    const a = controller();
    const b = controller();
    extension(a.c);
    allowOnce();
    const sessionB = await b.c.openSession(daemon.root, 'session B');
    await a.c.openSession(daemon.root, 'session A');
    let turnA, turnB;
    try {
      const runningA = a.c.turn('write a.txt');
      await gate.reached();
      turnB = await b.c.turn('write b.txt and b2.txt');
      await gate.release();
      turnA = await runningA;
    } finally {
      gate.unblock();
    }
    assert.equal(turnA?.outcome, 'finished');
    assert.equal(turnB?.outcome, 'finished');

    await run('trellisd.showChanges');
    const opened = stub.executed.filter((e) => e.id === 'vscode.open').at(-1);
    const text = contentProvider.provideTextDocumentContent(opened!.args[0] as { path: string });
    const marks = text.split('\n').filter((l) => l.startsWith('# '));
    assert.deepEqual(marks, [
      '# b.txt: shared with session “session B” (a command of it ran at the same time)',
      '# b2.txt: shared with session “session B” (a command of it ran at the same time)',
    ]);
    assert.match(text, /\+\+\+ b\/a\.txt\n@@ -0,0 \+1 @@\n\+a\n/);
    const files = await a.c.changes(turnA!.turnId);
    assert.deepEqual(files.find((f) => f.path === 'b.txt')?.sharedWith, [{ sessionId: sessionB.sessionId, turnId: turnB!.turnId }]);

    const onDisk = () => ['a.txt', 'b.txt', 'b2.txt'].filter((n) => fs.existsSync(path.join(daemon.root, n)));
    stub.answerMessage = () => undefined; // closed: nothing is forced
    await run('trellisd.revertTurn');
    const question = stub.messages.at(-1)!;
    assert.deepEqual(question.items, ['Overwrite']);
    assert.equal(
      question.message,
      "Another session's command ran at the same time as this one's and may have made these changes: " +
        'b.txt (shared with session “session B”), b2.txt (shared with session “session B”). ' +
        "Nothing was restored. Restore them anyway, overwriting what may be the other session's work?",
    );
    assert.deepEqual(onDisk(), ['a.txt', 'b.txt', 'b2.txt'], 'nothing was restored');
    const head = a.c.session!.head;
    await a.c.branch(null, true); // back before the first turn, the files restored: the same question
    assert.equal(stub.messages.at(-1)!.message, question.message);
    assert.equal(a.c.session!.head, head, 'declined: the head stays');
    assert.deepEqual(onDisk(), ['a.txt', 'b.txt', 'b2.txt']);

    stub.answerMessage = (m) => (m.items.includes('Overwrite') ? 'Overwrite' : undefined);
    await run('trellisd.revertTurn');
    assert.equal(shown('information').at(-1), 'trellisd: 3 file(s) put back');
    assert.deepEqual(onDisk(), [], 'forced: every file of the turn is put back as it was');
    assert.deepEqual(shown('error'), []);
  });
});
