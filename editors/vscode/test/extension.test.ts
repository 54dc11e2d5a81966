import './setup';

import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { after, before, describe, test } from 'node:test';

import * as extension from '../src/extension';
import type { TreeNode, TurnTreeProvider } from '../src/turnTree';
import { stripTags, testCommand, TestDaemon, waitFor } from './daemon';
import { setConfiguration, stub, Uri } from './vscode-stub';

const root = path.join(__dirname, '..', '..');
const pkg = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8'));

interface FakeWebview {
  posted: any[];
  html: string;
  send(message: unknown): void;
}

function resolveChat(): FakeWebview {
  const provider = stub.webviewProviders.get('trellisd.chat');
  assert.ok(provider, 'the chat view is registered');
  let receive: (m: unknown) => void = () => undefined;
  const fake: FakeWebview = { posted: [], html: '', send: (m) => receive(m) };
  const webview = {
    options: {},
    cspSource: 'vscode-resource:',
    set html(value: string) {
      fake.html = value;
    },
    asWebviewUri: (uri: Uri) => ({ toString: () => `vscode-resource:${uri.fsPath}` }),
    postMessage: async (message: unknown) => {
      fake.posted.push(message);
      return true;
    },
    onDidReceiveMessage: (fn: (m: unknown) => void) => {
      receive = fn;
      return { dispose: () => undefined };
    },
  };
  provider.resolveWebviewView({ webview, onDidDispose: () => ({ dispose: () => undefined }) });
  return fake;
}

function memento() {
  const values = new Map<string, unknown>();
  return {
    get: <T>(key: string): T | undefined => values.get(key) as T | undefined,
    update: async (key: string, value: unknown) => void (value === undefined ? values.delete(key) : values.set(key, value)),
    keys: () => [...values.keys()],
  };
}

describe('the extension in a stand-in VS Code', () => {
  let daemon: TestDaemon;
  const context = {
    subscriptions: [] as { dispose(): unknown }[],
    extensionUri: Uri.file(root),
    secrets: { get: async () => undefined, store: async () => undefined, delete: async () => undefined },
    workspaceState: memento(),
    extension: { packageJSON: pkg },
  };

  before(() => {
    stub.reset();
    daemon = new TestDaemon();
    const { command, args } = testCommand();
    stub.config.set('trellisd.command', command);
    stub.config.set('trellisd.args', args);
    stub.config.set('trellisd.db', daemon.db);
    stub.config.set('trellisd.provider', 'scripted');
    stub.folders = [{ uri: Uri.file(daemon.root), name: 'project', index: 0 }];
    process.env.TRELLISD_SCRIPT = '';
    process.env.TRELLISD_PROVIDER = '';
    extension.activate(context as any);
  });

  after(async () => {
    await extension.deactivate();
    for (const d of context.subscriptions) {
      d.dispose();
    }
    await daemon.cleanup();
  });

  test('every contributed command is registered, and every registered command contributed', () => {
    const contributed = pkg.contributes.commands.map((c: { command: string }) => c.command).sort();
    assert.deepEqual([...stub.commands.keys()].sort(), contributed);
    const menus = Object.values(pkg.contributes.menus).flat() as { command: string }[];
    assert.ok(menus.every((m) => contributed.includes(m.command)));
    const views = pkg.contributes.views.trellisd.map((v: { id: string }) => v.id);
    assert.deepEqual(views, ['trellisd.chat', 'trellisd.plan', 'trellisd.processes', 'trellisd.turns']);
    assert.ok(fs.existsSync(path.join(root, pkg.contributes.viewsContainers.activitybar[0].icon)));
  });

  test('the settings are described; trellisd.command warns about PATH', () => {
    const properties = pkg.contributes.configuration.properties;
    for (const key of ['trellisd.command', 'trellisd.args', 'trellisd.db', 'trellisd.provider', 'trellisd.model', 'trellisd.baseUrl']) {
      assert.ok(properties[key]?.markdownDescription, `${key} has a description`);
    }
    assert.match(properties['trellisd.command'].markdownDescription, /PATH/);
    assert.match(properties['trellisd.command'].markdownDescription, /absolute path/);
  });

  test("a cloned repository's workspace settings cannot choose the program the extension starts", () => {
    // machine scope: only the user's own settings (or the remote machine's) are read
    const properties = pkg.contributes.configuration.properties;
    assert.equal(properties['trellisd.command'].scope, 'machine');
    assert.equal(properties['trellisd.args'].scope, 'machine');
  });

  test('start a session, type a prompt in the chat view, see the reply; branch from the tree; reopen', async () => {
    const chat = resolveChat();
    assert.match(chat.html, /Content-Security-Policy/);
    chat.send({ type: 'ready' });
    assert.deepEqual(chat.posted.at(-1), { type: 'reset', session: null, turns: [], running: false });

    await stub.commands.get('trellisd.startSession')!();
    const reset = chat.posted.filter((m) => m.type === 'reset').at(-1);
    assert.ok(reset.session?.sessionId, 'the view shows the new session');
    assert.ok(fs.realpathSync(daemon.root) === reset.session.root);

    chat.send({ type: 'send', text: 'hello there' });
    await waitFor('the reply', () => chat.posted.some((m) => m.type === 'turn' && m.turn.outcome === 'finished'));
    const done = chat.posted.filter((m) => m.type === 'turn').at(-1).turn;
    assert.match(stripTags(done.body), /hello there/);
    assert.equal(stub.context.get('trellisd.running'), false);

    chat.send({ type: 'send', text: 'second prompt' });
    await waitFor('the second reply', () => chat.posted.filter((m) => m.type === 'turn' && m.turn.outcome === 'finished').length === 2);

    const tree = stub.treeProviders.get('trellisd.turns') as TurnTreeProvider;
    await waitFor('the tree', () => tree.getChildren().length === 2);
    const first = tree.getChildren()[0] as TreeNode;
    await stub.commands.get('trellisd.branchHere')!(first);
    const afterBranch = chat.posted.filter((m) => m.type === 'reset').at(-1);
    assert.equal(afterBranch.turns.length, 1, 'the view shows the path to the new head');
    await waitFor('the tree to show the head', () => {
      const roots = tree.getChildren() as any[];
      return roots.length === 1 || (roots[0]?.isHead && roots[1]?.onHeadPath === false);
    });

    stub.answerQuickPick = (items) => items.find((i) => i.label === 'hello there');
    await stub.commands.get('trellisd.reopenSession')!();
    const reopened = chat.posted.filter((m) => m.type === 'reset').at(-1);
    assert.equal(reopened.session.sessionId, reset.session.sessionId);
    assert.equal(reopened.turns.length, 1);
    assert.deepEqual(stub.messages.filter((m) => m.level === 'error'), []);
  });

  test('a reloaded window reopens the session it had open', async () => {
    const open = context.workspaceState.get<string>('trellisd.session');
    assert.ok(open, 'the open session is remembered in the workspace');
    await extension.deactivate();
    for (const d of context.subscriptions.splice(0)) {
      d.dispose();
    }
    extension.activate(context as any);
    const chat = resolveChat();
    chat.send({ type: 'ready' });
    const reset = await waitFor('the session to be reopened', () =>
      chat.posted.find((m) => m.type === 'reset' && m.session?.sessionId === open),
    );
    assert.equal(reset.turns.length, 1, 'with its turns');
  });

  test('the status bar shows the context meter and the cost; clicking it compacts the session', async () => {
    const meter = stub.statusBarItems.get('trellisd.usage');
    assert.ok(meter, 'the meter is made');
    assert.equal(meter.command, 'trellisd.compactSession');
    const chat = resolveChat();
    chat.send({ type: 'ready' });
    chat.send({ type: 'send', text: 'one more prompt' });
    await waitFor('the meter to show', () => meter.visible && /ctx \d+%/.test(meter.text));
    assert.match(meter.text, /^\$\(dashboard\) ctx \d+% · cost unknown$/);
    assert.match(String(meter.tooltip), /^Context: \d+ of 128\.0k tokens \(\d+%\)/);
    await waitFor('the turn to end', () => stub.context.get('trellisd.running') === false);

    await stub.commands.get(meter.command)!();
    const told = await waitFor('the compaction to be told', () =>
      stub.messages.find((m) => m.level === 'information' && /summary/.test(m.message)),
    );
    assert.match(told.message, /^trellisd: the first 1 turn\(s\) are now sent as a summary$/);
    assert.ok(stub.output.some((l) => /compacted: the first 1 turn\(s\) now sent as a summary/.test(l)));
    await stub.commands.get(meter.command)!();
    await waitFor('nothing left to compact', () => stub.messages.some((m) => /nothing to compact/.test(m.message)));
  });

  test('a changed setting restarts the daemon at the next action', async () => {
    const lines = () => stub.output.filter((l) => /is running \(pid/.test(l)).length;
    const before = lines();
    setConfiguration('trellisd.model', 'another-model');
    await waitFor('the daemon to stop', () => stub.output.some((l) => /settings changed/.test(l)));
    await stub.commands.get('trellisd.refreshTurns')!();
    await waitFor('a new daemon', () => lines() === before + 1);
  });

  test('a missing daemon command is explained, with the log one click away', async () => {
    setConfiguration('trellisd.command', '/nonexistent/trellisd');
    await new Promise((r) => setTimeout(r, 200));
    await stub.commands.get('trellisd.restartDaemon')!();
    const shown = await waitFor('an error', () => stub.messages.find((m) => m.level === 'error'));
    assert.match(shown.message, /"\/nonexistent\/trellisd" was not found/);
    assert.deepEqual(shown.items, ['Show Log']);
    assert.ok(stub.output.some((l) => /\[error\] restart the daemon: trellisd could not start/.test(l)));
  });
});
