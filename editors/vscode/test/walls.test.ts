import './setup';

import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, test } from 'node:test';

import { readSettings } from '../src/config';
import { acting, Extension } from '../src/features';
import { SessionController } from '../src/session';
import type { SessionHeader } from '../src/session';
import * as vscodeapi from '../src/vscodeapi';
import { APPROVAL_MODES, networkText, openPolicy, readNetwork, registerWalls, SANDBOX_MODES, wallsDetail, wallsText } from '../src/walls';
import { RecordingView, stripTags, TestDaemon, waitFor } from './daemon';
import { QuickPick, QuickPickItem, stub, Uri } from './vscode-stub';

let daemon: TestDaemon;

const EXTENSION = path.join(__dirname, '..', '..');
const schema = JSON.parse(fs.readFileSync(path.join(EXTENSION, '..', '..', 'protocol', 'schema.json'), 'utf8'));
const manifest = JSON.parse(fs.readFileSync(path.join(EXTENSION, 'package.json'), 'utf8'));

/** A controller whose new sessions get the settings' policy, as the extension makes it. */
function controller(): { c: SessionController; view: RecordingView } {
  const view = new RecordingView();
  const c = new SessionController(daemon.client(), daemon.log);
  c.openPolicy = () => openPolicy(readSettings((key) => vscodeapi.getConfiguration('trellisd').get(key)));
  c.attachView(view);
  const ext = { controller: c, daemon: c.client, log: daemon.log, act: acting(daemon.log, () => undefined) } as unknown as Extension;
  registerWalls(ext);
  return { c, view };
}

function headers(view: RecordingView): SessionHeader[] {
  return view.messages.flatMap((m) => (m.type === 'reset' && m.session ? [m.session] : m.type === 'session' ? [m.session] : []));
}

/** The walls the header shows for `sessionId`, once session/policy answered. */
function wallsShown(view: RecordingView, sessionId: string): Promise<SessionHeader> {
  return waitFor(`the walls in the header of session ${sessionId}`, () => {
    const last = headers(view).at(-1);
    return last?.sessionId === sessionId && last.walls ? last : undefined;
  });
}

interface Asked {
  title?: string;
  placeholder?: string;
  labels: string[];
}

/** Every approval question is recorded and answered with the item whose label has `answer`. */
function answering(answer: string): Asked[] {
  const asked: Asked[] = [];
  stub.onQuickPick = (pick: QuickPick<QuickPickItem>) => {
    asked.push({ title: pick.title, placeholder: pick.placeholder, labels: pick.items.map((i) => i.label) });
    setImmediate(() => pick.accept(answer));
  };
  return asked;
}

beforeEach(() => {
  stub.reset();
  daemon = new TestDaemon();
  stub.folders = [{ uri: Uri.file(daemon.root), name: 'project', index: 0 }];
});

afterEach(() => daemon.cleanup());

describe('the walls of a session, against the daemon', () => {
  test('the header shows the walls: workspace-write by default, read-only when the setting says so', async () => {
    const { c, view } = controller();
    const first = await c.openSession(daemon.root);
    const shown = await wallsShown(view, first.sessionId);
    assert.equal(shown.walls, 'walls: workspace-write · network off');
    assert.match(shown.wallsDetail ?? '', /^writable: .*project/m);
    assert.match(shown.wallsDetail ?? '', /^protected \(read-only in the root\): .*\.git\/hooks/m);
    assert.match(shown.wallsDetail ?? '', /^hidden \(not even readable\): .*\.ssh/m);

    let listed: QuickPickItem[] = [];
    stub.answerQuickPick = (items) => {
      listed = items;
      return undefined;
    };
    await stub.commands.get('trellisd.showWalls')!();
    assert.deepEqual(stub.messages.filter((m) => m.level === 'error'), []);
    assert.equal(listed[0]?.label, '$(shield) walls: workspace-write · network off');
    assert.ok(listed.some((i) => i.label === `$(edit) ${fs.realpathSync(daemon.root)}` && i.description === 'writable'), JSON.stringify(listed));
    assert.ok(listed.some((i) => i.label === '$(lock) .git/hooks'));

    stub.config.set('trellisd.sandbox', 'read-only');
    stub.config.set('trellisd.network', true);
    const second = await c.openSession(daemon.root);
    assert.equal((await wallsShown(view, second.sessionId)).walls, 'walls: read-only · network on');
    const policy = await c.client.request('session/policy', { sessionId: second.sessionId });
    assert.equal(policy.sandbox, 'read-only', 'the setting went with session/open');

    // reopened, a session shows its own walls, whatever the settings say now
    await c.reopenSession(first.sessionId);
    assert.equal((await wallsShown(view, first.sessionId)).walls, 'walls: workspace-write · network off');
    assert.ok(daemon.log.has(/session .*: walls: read-only · network on/));
  });

  test('the approval mode auto is passed with session/open', async () => {
    stub.config.set('trellisd.approval', 'auto');
    const { c } = controller();
    const session = await c.openSession(daemon.root);
    const policy = await c.client.request('session/policy', { sessionId: session.sessionId });
    assert.equal(policy.approval, 'auto');
  });

  test('an escalation is asked apart, with the reason and no always; allowed it runs outside the walls, denied it is refused', async () => {
    const outside = path.join(daemon.dir, 'outside.txt');
    const escalate = {
      tool: 'run_command',
      arguments: { argv: ['sh', '-c', `echo out > ${outside}`], escalate: true, reason: 'write the shared cache' },
    };
    daemon.setScript([escalate, { text: 'Ran it.' }, escalate, { text: 'Refused.' }]);
    const { c, view } = controller();
    await c.openSession(daemon.root);

    const asked = answering('Run outside the walls');
    const allowed = await c.turn('write the cache');
    assert.equal(allowed?.outcome, 'finished');
    assert.equal(fs.readFileSync(outside, 'utf8'), 'out\n', 'it ran outside the walls');
    assert.equal(asked.length, 1);
    assert.equal(asked[0].title, `⚠ trellisd: run OUTSIDE the walls? sh -c 'echo out > ${outside}'`);
    assert.equal(asked[0].placeholder, "The model's reason: write the shared cache");
    assert.deepEqual(asked[0].labels, ['$(circle-slash) Deny', '$(warning) Run outside the walls, once']);
    assert.ok(!asked[0].labels.some((l) => /always/i.test(l)), 'no "always" for a way out');
    const body = stripTags(view.last!.body);
    assert.match(body, /⚠ escalation: run OUTSIDE the walls allowed once: it ran outside the walls/);
    assert.match(body, /because: write the shared cache/);
    assert.ok(view.last!.body.includes('class="approval escalation approval-allow"'));
    assert.ok(daemon.log.has(/escalation asked \(outside the walls\): sh -c .* because: write the shared cache/));

    fs.rmSync(outside);
    const denying = answering('Deny');
    const denied = await c.turn('write the cache again');
    assert.equal(denied?.outcome, 'finished');
    assert.equal(denying.length, 1, 'asked again: an allowed escalation leaves no grant');
    assert.ok(!fs.existsSync(outside), 'a denied escalation runs nothing');
    const again = stripTags(view.last!.body);
    assert.match(again, /⚠ escalation: run OUTSIDE the walls denied/);
    assert.match(again, /refused: the user did not approve/);
  });
});

describe('the walls in words, and their settings', () => {
  test('the modes are the schema\'s, and the settings offer them (and the daemon\'s default)', () => {
    assert.deepEqual([...SANDBOX_MODES], schema.$defs.SandboxMode.enum);
    assert.deepEqual([...APPROVAL_MODES], schema.$defs.ApprovalMode.enum);
    const settings = manifest.contributes.configuration.properties;
    assert.deepEqual(settings['trellisd.sandbox'].enum, ['', ...SANDBOX_MODES]);
    assert.deepEqual(settings['trellisd.approval'].enum, ['', ...APPROVAL_MODES]);
    assert.ok(manifest.contributes.commands.some((c: { command: string }) => c.command === 'trellisd.showWalls'));
  });

  test('one line for the header, whatever the network', () => {
    assert.equal(wallsText({ mode: 'read-only', network: ['pypi.org:443'] }), 'walls: read-only · network pypi.org:443');
    assert.equal(networkText(['a:1', 'b:2', 'c:3', 'd:4']), 'network a:1, b:2 +2 more');
    assert.equal(wallsText({ mode: 'off', network: true }), 'walls: off · programs run unconfined');
    const off = { mode: 'off' as const, network: true, writable: [], hidden: [], protected: [], tempBytes: 0, processes: 0 };
    assert.deepEqual(wallsDetail(off), ['mode: off: programs run with everything you may do, unconfined']);
  });

  test('settings become session/open\'s policy only where set', () => {
    assert.equal(openPolicy({ approval: '', sandbox: '', network: null }), undefined);
    assert.deepEqual(openPolicy({ approval: 'auto', sandbox: 'off', network: false }), { approval: 'auto', sandbox: 'off', network: false });
    assert.deepEqual(readNetwork([' pypi.org:443 ', 7, '']), ['pypi.org:443']);
    assert.equal(readNetwork('yes'), null);
    const values: Record<string, unknown> = { sandbox: 'walls-down', approval: 'auto', network: true };
    const read = readSettings((key) => values[key]);
    assert.deepEqual([read.sandbox, read.approval, read.network], ['', 'auto', true], 'a mode the schema does not know is left to the daemon');
  });
});
