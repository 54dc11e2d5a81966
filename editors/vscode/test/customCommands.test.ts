import './setup';

import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { after, before, describe, test } from 'node:test';

import { ChatViewProvider } from '../src/chatView';
import { registerCustomCommands } from '../src/customCommands';
import { hookItem, registerHooks } from '../src/hooks';
import { DaemonError } from '../src/errors';
import { Hook, Method } from '../src/protocol';
import { SessionController } from '../src/session';
import { registerPrompting } from '../src/prompting';
import { parseCommand } from '../src/slashCommand';
import { daemonPerTest, features, MemoryLog, RecordingView, stripTags, WatchedView } from './daemon';
import { FakeClient, pagedSession } from './fakeClient';
import { QuickPickItem, stub, Uri } from './vscode-stub';

const daemonOf = daemonPerTest();

/** The daemons of this file read the user's config (its commands folder, its hooks) here. */
let config: string;
const xdgBefore = process.env.XDG_CONFIG_HOME;
before(() => {
  config = fs.mkdtempSync(path.join(fs.realpathSync(process.env.TMPDIR || '/tmp'), 'trellisd-vscode-config-'));
  process.env.XDG_CONFIG_HOME = config;
});
after(() => {
  fs.rmSync(config, { recursive: true, force: true });
  if (xdgBefore === undefined) {
    delete process.env.XDG_CONFIG_HOME;
  } else {
    process.env.XDG_CONFIG_HOME = xdgBefore;
  }
});

function write(file: string, text: string): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, text);
}

/** A project command and a user's command, as a person writes them. */
function writeCommands(root: string): void {
  write(
    path.join(root, '.trellisd', 'commands', 'greet.md'),
    '---\ndescription: Greet someone by name\nargument-hint: [name]\nmaxSteps: 3\n---\nSay hello to $ARGUMENTS in one line.\n',
  );
  write(path.join(config, 'trellisd', 'commands', 'tidy.md'), '---\ndescription: Tidy the README\n---\nTidy README.md.\n');
}

/** The prompt the daemon recorded for the session's newest turn (the command's expansion). */
async function storedPrompt(c: SessionController): Promise<string> {
  const { turns } = await c.client.request(Method.turns, { sessionId: c.session!.sessionId });
  return turns.at(-1)!.prompt;
}

describe('custom commands', () => {
  test('Run Custom Command… lists the commands, asks for the arguments and runs the turn', async () => {
    const daemon = daemonOf();
    writeCommands(daemon.root);
    daemon.setScript([{ text: 'Hello, Ada.' }]);
    const c = new SessionController(daemon.client(), daemon.log);
    const view = new RecordingView();
    c.attachView(view);
    registerCustomCommands(features(c, daemon.log));
    await c.openSession(daemon.root);
    let listed: QuickPickItem[] = [];
    stub.answerQuickPick = (items) => {
      listed = items;
      return items.find((i) => i.label === '/greet');
    };
    let asked: { placeHolder?: string; title?: string } = {};
    stub.answerInputBox = (options) => {
      asked = options ?? {};
      return 'Ada';
    };
    await stub.commands.get('trellisd.runCustomCommand')!();

    assert.deepEqual(
      listed.map((i) => [i.label, i.description]),
      [
        ['/greet', '[name] · project'],
        ['/tidy', 'user'],
      ],
    );
    assert.equal(listed[0].detail, 'Greet someone by name — maxSteps 3');
    assert.equal(asked.placeHolder, '[name]', 'the argument hint is the placeholder');
    assert.equal(asked.title, 'trellisd: /greet');
    assert.deepEqual(stub.messages, [], 'nothing went wrong');
    assert.equal(view.last?.prompt.includes('/greet Ada'), true, 'the turn reads as typed');
    assert.equal(view.last?.outcome, 'finished');
    assert.match(stripTags(view.last!.body), /Hello, Ada\./);
    assert.equal(await storedPrompt(c), 'Say hello to Ada in one line.', "the daemon ran the command's prompt");

    // reloaded, the window draws the turn as typed still, the expansion folded under it
    const reloaded = new SessionController(daemon.client(), daemon.log);
    const again = new RecordingView();
    reloaded.attachView(again);
    await reloaded.reopenSession(c.session!.sessionId);
    assert.match(again.last!.prompt, /^\/greet Ada<details class="command-expansion">/);
    assert.match(stripTags(again.last!.prompt), /Say hello to Ada in one line\./);
  });

  test('a /name prompt runs the command; an unknown name shows the daemon\'s error', async () => {
    const daemon = daemonOf();
    writeCommands(daemon.root);
    daemon.setScript([{ text: 'The README is tidy.' }]);
    const c = new SessionController(daemon.client(), daemon.log);
    const view = new RecordingView();
    c.attachView(view);
    await c.openSession(daemon.root);

    await c.send('/tidy');
    assert.equal(view.last?.outcome, 'finished');
    assert.equal(await storedPrompt(c), 'Tidy README.md.');

    await c.send('/no-such-command now');
    assert.equal(view.last?.outcome, 'error');
    assert.match(view.last!.footer + view.last!.body, /no-such-command/);
    assert.ok(
      stub.messages.some((m) => m.level === 'error' && /no-such-command/.test(m.message)),
      stub.messages.map((m) => m.message).join('\n'),
    );
  });

  test('Send Prompt… runs a /name prompt as the command, and / alone picks one', async () => {
    const daemon = daemonOf();
    writeCommands(daemon.root);
    daemon.setScript([{ text: 'Hello, Grace.' }, { text: 'Tidied.' }]);
    const c = new SessionController(daemon.client(), daemon.log);
    const view = new RecordingView();
    c.attachView(view);
    const ext = features(c, daemon.log);
    registerCustomCommands(ext);
    registerPrompting(ext, {} as never, (text) => c.send(text));
    await c.openSession(daemon.root);
    const answers = ['/', 'Grace', '/tidy'];
    stub.answerInputBox = () => answers.shift();
    stub.answerQuickPick = (items) => items.find((i) => i.label === '/greet');

    await stub.commands.get('trellisd.sendPrompt')!();
    assert.equal(await storedPrompt(c), 'Say hello to Grace in one line.', '/ alone: the command picked, its arguments asked');
    await stub.commands.get('trellisd.sendPrompt')!();
    assert.equal(await storedPrompt(c), 'Tidy README.md.');
    assert.deepEqual(view.prompts.map(stripTags), ['/greet Grace', '/tidy']);
    assert.deepEqual(stub.messages, []);
  });

  test('while a turn runs, a /name prompt is not a steer: it is queued as the command', async () => {
    const daemon = daemonOf();
    writeCommands(daemon.root);
    daemon.setScript([{ text: 'First answer.', holdAfter: 1, holdFile: daemon.hold('first') }, { text: 'Tidied.' }]);
    const c = new SessionController(daemon.client(), daemon.log);
    const view = new WatchedView();
    c.attachView(view);
    await c.openSession(daemon.root);
    const first = c.turn('look around');
    await view.until(() => stripTags(view.last?.body ?? '').length > 0);

    await assert.rejects(c.send('/tidy'), /A turn is running: \/tidy runs as a turn of its own/);
    const queued = c.queuePrompt('/tidy');
    await view.until(() => view.queued.length === 1);
    daemon.release('first');
    await first;
    await queued;
    await view.until(() => view.queued.length === 0 && view.last?.outcome === 'finished' && /Tidied/.test(view.last.body));
    assert.equal(await storedPrompt(c), 'Tidy README.md.', 'the queued turn ran the command');
  });

  test("the chat's prompt box is given the session's commands to offer as / is typed", async () => {
    const daemon = daemonOf();
    writeCommands(daemon.root);
    const c = new SessionController(daemon.client(), daemon.log);
    const chat = new ChatViewProvider(Uri.file(daemon.root) as never, c, {} as never);
    const posted: { type: string; commands?: unknown; error?: string }[] = [];
    let receive: (message: unknown) => void = () => undefined;
    let answered: () => void = () => undefined;
    const answer = () => new Promise<void>((resolve) => (answered = resolve));
    chat.resolveWebviewView({
      webview: {
        options: {},
        cspSource: 'vscode-resource:',
        html: '',
        asWebviewUri: (uri: Uri) => uri,
        postMessage: async (message: { type: string }) => {
          posted.push(message);
          if (message.type === 'commands') {
            answered();
          }
          return true;
        },
        onDidReceiveMessage: (fn: (message: unknown) => void) => ((receive = fn), { dispose: () => undefined }),
      },
      onDidDispose: () => ({ dispose: () => undefined }),
    } as never);

    let answering = answer();
    receive({ type: 'commands' });
    await answering;
    assert.match(String(posted.at(-1)?.error), /Start a session first/, 'no session: the box says why there is none');

    await c.openSession(daemon.root);
    answering = answer();
    receive({ type: 'commands' });
    await answering;
    assert.deepEqual(posted.at(-1), {
      type: 'commands',
      commands: [
        { name: 'greet', hint: '[name]', description: 'Greet someone by name', source: 'project' },
        { name: 'tidy', hint: '', description: 'Tidy the README', source: 'user' },
      ],
    });
  });

  test('a prompt is a command only as /name, alone or before white space', () => {
    assert.deepEqual(parseCommand('/fix-tests unit  tests/a.py'), { name: 'fix-tests', arguments: 'unit  tests/a.py' });
    assert.deepEqual(parseCommand('  /tidy\n'), { name: 'tidy', arguments: '' });
    assert.deepEqual(parseCommand('/greet\nAda'), { name: 'greet', arguments: 'Ada' });
    assert.equal(parseCommand('/usr/bin is missing'), undefined);
    assert.equal(parseCommand('/Greet Ada'), undefined);
    assert.equal(parseCommand('please /greet Ada'), undefined);
  });
});

describe('hooks', () => {
  test("Show Hooks lists the session's hooks: event, matcher, command line, source and state", async () => {
    const daemon = daemonOf();
    write(path.join(config, 'trellisd', 'config.toml'), '[[hooks]]\nevent = "turnEnd"\ncommand = ["notify-send", "trellisd", "turn ended"]\n');
    write(
      path.join(daemon.root, '.trellisd.toml'),
      '[[hooks]]\nevent = "preToolUse"\nmatcher = "write_*"\ncommand = ["python3", "hooks/guard.py"]\ntimeout = 10\n',
    );
    write(path.join(daemon.root, 'hooks', 'guard.py'), 'import sys\nsys.exit(0)\n');
    const c = new SessionController(daemon.client(), daemon.log);
    registerHooks(features(c, daemon.log));
    await c.openSession(daemon.root);
    let listed: QuickPickItem[] = [];
    stub.answerQuickPick = (items) => {
      listed = items;
      return items.find((i) => i.label.startsWith('preToolUse'));
    };
    await stub.commands.get('trellisd.showHooks')!();

    assert.deepEqual(
      listed.map((i) => [i.label, i.description, i.detail]),
      [
        ['turnEnd', 'config · approved · at most 30 s', "notify-send trellisd 'turn ended'"],
        ['preToolUse · write_*', 'project · awaiting approval · at most 10 s', 'python3 hooks/guard.py'],
      ],
    );
    const [shown] = stub.messages;
    assert.equal(shown?.level, 'information');
    assert.match(shown.message, /project's preToolUse hook is asked about the first time its event comes in a turn/);
  });

  test("revoking a project hook's approval sends session/revoke with its command line; the daemon's error is shown", async () => {
    const approved: Hook & { commandLine: string } = {
      event: 'preToolUse',
      command: ['python3', 'hooks/guard.py'],
      timeout: 30,
      source: 'project',
      approved: true,
      state: 'approved',
      commandLine: 'python3 hooks/guard.py',
    };
    let refuse = true;
    const client = new FakeClient({
      ...pagedSession(0),
      'session/hooks': (p) => ({ sessionId: p.sessionId, hooks: [approved] }),
      'session/revoke': () => {
        if (refuse) {
          throw new DaemonError('grant.kind: not one of read, write, exec, rule', -32602, undefined);
        }
        return { grants: [] };
      },
    });
    const log = new MemoryLog();
    const c = new SessionController(client.asClient, log);
    registerHooks(features(c, log));
    await c.reopenSession('s-1');
    stub.answerQuickPick = (items) => items[0];
    stub.answerMessage = (shown) => (shown.items.includes('Revoke') ? 'Revoke' : undefined);

    await stub.commands.get('trellisd.showHooks')!();
    assert.deepEqual(client.params('session/revoke'), [
      { sessionId: 's-1', grant: { kind: 'hook', target: 'python3 hooks/guard.py', scope: 'project' } },
    ]);
    const [asked, failed] = stub.messages;
    assert.equal(asked.message, "Revoke the approval of the project's preToolUse hook?", 'asked first');
    assert.equal(failed.level, 'error');
    assert.match(failed.message, /grant\.kind: not one of/);

    refuse = false;
    stub.messages = [];
    await stub.commands.get('trellisd.showHooks')!();
    assert.equal(stub.messages.at(-1)?.message, "trellisd: revoked the project's preToolUse hook: python3 hooks/guard.py");
    assert.ok(log.has(/revoked hook python3 hooks\/guard\.py \(project\) of session s-1/));
  });

  test('a project hook approved for the project offers Revoke; the others do not', () => {
    const hook: Hook = { event: 'preToolUse', command: ['python3', 'guard.py'], commandLine: '', timeout: 30, source: 'project', approved: true, state: 'approved' };
    assert.doesNotMatch(String(hookItem(hook).description), /revoke/, 'no command line to revoke by');
    const line = { ...hook, commandLine: 'python3 guard.py' };
    assert.match(String(hookItem(line).description), /pick to revoke$/);
    assert.doesNotMatch(String(hookItem({ ...line, approved: false, state: 'awaiting approval' }).description), /revoke/);
    assert.doesNotMatch(String(hookItem({ ...line, source: 'config' }).description), /revoke/);
    assert.equal(hookItem({ ...hook, event: 'postToolUse' }).label, 'postToolUse · every tool');
  });
});
