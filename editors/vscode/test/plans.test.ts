import './setup';

import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, test } from 'node:test';

import { approvalItems, ruleItems } from '../src/approval';
import { MODE_DESCRIPTIONS, modeItems, registerModes, RUN_MODES } from '../src/modes';
import { LivePlan, planMarksHtml, progressText, refusedByPlanMode } from '../src/plan';
import { planDescription, PlanNode, PlanTreeProvider, registerPlan } from '../src/planView';
import { APPROVAL_MODES, ApprovalMode, ApprovalParams, PLAN_STATUSES } from '../src/protocol';
import { SessionController } from '../src/session';
import { grantItem } from '../src/sessionCommands';
import { ruleText } from '../src/transcript';
import { registerTurnCommands } from '../src/turnCommands';
import { features, stripTags, TestDaemon, WatchedView } from './daemon';
import { QuickPick, QuickPickItem, stub, TreeItem, Uri } from './vscode-stub';

const EXTENSION = path.join(__dirname, '..', '..');
const schema = JSON.parse(fs.readFileSync(path.join(EXTENSION, '..', '..', 'protocol', 'schema.json'), 'utf8'));
const manifest = JSON.parse(fs.readFileSync(path.join(EXTENSION, 'package.json'), 'utf8'));

let daemon: TestDaemon;

/** Settles with the first value `subscribe` reports that `probe` accepts (or the current one). */
function next<T>(subscribe: (listener: (value: T) => void) => { dispose(): void }, probe: (value: T) => boolean, now?: T): Promise<T> {
  if (now !== undefined && probe(now)) {
    return Promise.resolve(now);
  }
  return new Promise((resolve) => {
    const subscription = subscribe((value) => {
      if (probe(value)) {
        subscription.dispose();
        resolve(value);
      }
    });
  });
}

/** A controller with the plan, mode and turn commands registered, as activate makes them. */
function controller(): { c: SessionController; view: WatchedView } {
  const view = new WatchedView();
  const c = new SessionController(daemon.client(), daemon.log);
  c.attachView(view);
  const ext = features(c, daemon.log);
  registerPlan(ext);
  registerModes(ext);
  registerTurnCommands(ext);
  return { c, view };
}

function modeShown(c: SessionController, mode: ApprovalMode): Promise<ApprovalMode | undefined> {
  return next<ApprovalMode | undefined>((l) => c.onDidChangeMode(l), (m) => m === mode, c.mode);
}

function planShown(c: SessionController, probe: (plan: LivePlan) => boolean): Promise<LivePlan | undefined> {
  return next<LivePlan | undefined>((l) => c.onDidChangePlan(l), (p) => !!p && probe(p), c.plan);
}

/** The Plan view's rows as a person reads them: label, description and icon. */
function planRows(): { label: string; description?: string; icon?: string }[] {
  const provider = stub.treeProviders.get('trellisd.plan') as PlanTreeProvider;
  return provider.getChildren().map((node: PlanNode) => {
    const item = provider.getTreeItem(node) as unknown as TreeItem;
    return { label: item.label, description: item.description, icon: item.iconPath?.id };
  });
}

beforeEach(() => {
  stub.reset();
  daemon = new TestDaemon();
  stub.folders = [{ uri: Uri.file(daemon.root), name: 'project', index: 0 }];
});

afterEach(() => daemon.cleanup());

const PLAN = {
  tool: 'update_plan',
  arguments: {
    entries: [
      { content: 'read the README', status: 'completed' },
      { content: 'write notes.txt', status: 'pending', priority: 'high' },
    ],
    explanation: 'first read, then write',
  },
};
const DONE = { tool: 'update_plan', arguments: { entries: PLAN.arguments.entries.map((e) => ({ ...e, status: 'completed' })) } };
const WRITE = { tool: 'write_file', arguments: { path: 'notes.txt', content: 'notes\n' } };

describe('plan mode, against the daemon', () => {
  test('a write refused by plan mode is drawn refused, plainly, with no error shown', async () => {
    daemon.setScript([WRITE, { text: 'I may only plan.' }]);
    const { c, view } = controller();
    c.openPolicy = () => ({ approval: 'plan' });
    await c.openSession(daemon.root);
    await modeShown(c, 'plan');
    await view.until(() => view.header?.mode === 'mode: plan');
    assert.equal(view.header?.modeDetail, MODE_DESCRIPTIONS.plan);
    const status = stub.statusBarItems.get('trellisd.mode');
    assert.equal(status?.text, '$(checklist) plan mode');
    assert.ok(status?.visible);

    const result = await c.turn('write the notes');
    assert.equal(result?.outcome, 'finished');
    assert.ok(!fs.existsSync(path.join(daemon.root, 'notes.txt')), 'plan mode wrote nothing');
    const body = stripTags(view.last!.body);
    assert.match(body, /write_file .* refused: the session is in plan mode → refused by the session's policy: .*plan mode/);
    assert.deepEqual(stub.messages.filter((m) => m.level === 'error'), [], 'no error popup for a refusal');

    // any mode is set from the list, each with its line: here auto, which brings its walls
    let offered: QuickPickItem[] = [];
    stub.answerQuickPick = (items) => {
      offered = items;
      return items.find((i) => i.label === 'auto');
    };
    await stub.commands.get('trellisd.setMode')!();
    assert.deepEqual(offered.map((i) => [i.label, i.detail]), APPROVAL_MODES.map((m) => [m === 'plan' ? '$(check) plan' : m, MODE_DESCRIPTIONS[m]]));
    const policy = await c.client.request('session/policy', { sessionId: c.session!.sessionId });
    assert.equal(policy.approval, 'auto');
    await view.until(() => view.header?.mode === 'mode: auto' && view.header.walls === 'walls: workspace-write · network off');
    assert.equal(stub.statusBarItems.get('trellisd.mode')?.text, '$(shield) auto');
  });
});

describe('plans, modes and rules, against the daemon', () => {
  test('plan mode toggled on, a plan drawn live and refused writes; Run this plan; a rule saved; the plan after reopen', async () => {
    daemon.setScript([
      PLAN,
      WRITE,
      { text: 'Planned: first read, then write.' },
      WRITE,
      DONE,
      { text: 'Wrote the notes.' },
      { tool: 'run_command', arguments: { argv: ['echo', 'one'] } },
      { tool: 'run_command', arguments: { argv: ['echo', 'two'] } },
      { text: 'Ran both.' },
    ]);
    const { c, view } = controller();
    const session = await c.openSession(daemon.root);
    await modeShown(c, 'ask');

    // the toggle: plan mode on, off (back to ask), on again
    const toggle = stub.commands.get('trellisd.togglePlanMode')!;
    await toggle();
    assert.equal((await c.client.request('session/policy', { sessionId: session.sessionId })).approval, 'plan');
    await view.until(() => view.header?.mode === 'mode: plan');
    await toggle();
    assert.equal((await c.client.request('session/policy', { sessionId: session.sessionId })).approval, 'ask');
    assert.equal(stub.statusBarItems.get('trellisd.mode')?.text, '$(shield) ask');
    await toggle();
    assert.equal((await c.client.request('session/policy', { sessionId: session.sessionId })).approval, 'plan');

    // the planned turn: its plan drawn live, the write refused plainly
    // (session/plan comes before the turn's answer, on the same pipe)
    const drawnLive: LivePlan[] = [];
    c.onDidChangePlan((p) => p && drawnLive.push(p));
    const planned = await c.turn('plan the notes');
    assert.equal(planned?.outcome, 'finished');
    assert.deepEqual(drawnLive.map((p) => [p.turnId, p.plan.entries.length]), [[planned!.turnId, 2]]);
    assert.equal(c.plan?.turnId, planned!.turnId);
    assert.deepEqual(planRows(), [
      { label: 'read the README', description: 'completed', icon: 'pass-filled' },
      { label: 'write notes.txt', description: 'pending · high priority', icon: 'circle-large-outline' },
    ]);
    assert.ok(!fs.existsSync(path.join(daemon.root, 'notes.txt')));
    const first = view.last!;
    assert.match(stripTags(first.body), /refused: the session is in plan mode/);
    assert.match(stripTags(first.footer), /plan: 1 of 2 done/);
    assert.ok(first.footer.includes(`data-run-plan="${planned!.turnId}"`), 'Run this plan on the planned turn');
    assert.deepEqual(stub.messages.filter((m) => m.level === 'error'), []);

    // Run this plan, under acceptEdits: the write runs without asking
    let offered: string[] = [];
    stub.answerQuickPick = (items) => {
      offered = items.map((i) => i.label);
      return items.find((i) => (i as QuickPickItem & { mode?: string }).mode === 'acceptEdits');
    };
    const asked: string[][] = [];
    stub.onQuickPick = (pick: QuickPick<QuickPickItem>) => {
      asked.push(pick.items.map((i) => i.label));
      setImmediate(() => pick.accept('Deny'));
    };
    await stub.commands.get('trellisd.runPlan')!(planned!.turnId);
    assert.deepEqual(offered, ['ask', 'acceptEdits', 'auto'], 'ask first: the mode before plan mode');
    assert.deepEqual(asked, [], 'acceptEdits asks nothing for a write');
    assert.equal(fs.readFileSync(path.join(daemon.root, 'notes.txt'), 'utf8'), 'notes\n');
    const ran = view.last!;
    assert.match(stripTags(ran.footer), /carries out the plan of turn “plan the notes”/);
    assert.match(stripTags(ran.footer), /plan: 2 of 2 done/);
    const turns = (await c.client.request('session/turns', { sessionId: session.sessionId })).turns;
    const carried = turns.find((t) => t.followsPlan);
    assert.equal(carried?.followsPlan?.turnId, planned!.turnId);
    assert.equal((await c.client.request('session/policy', { sessionId: session.sessionId })).approval, 'acceptEdits');
    await modeShown(c, 'acceptEdits');

    // a command asks; the rule answer lets the next matching command run unasked
    const questions: { title?: string; labels: string[] }[] = [];
    stub.onQuickPick = (pick: QuickPick<QuickPickItem>) => {
      questions.push({ title: pick.title, labels: pick.items.map((i) => i.label) });
      setImmediate(() => pick.accept('Always allow `echo **` in this session'));
    };
    const echoed = await c.turn('echo twice');
    assert.equal(echoed?.outcome, 'finished');
    assert.equal(questions.length, 1, 'the second echo ran unasked');
    assert.ok(questions[0].labels.includes('$(list-filter) Always allow `echo **` for this project'));
    const body = stripTags(view.last!.body);
    assert.match(body, /allowed always for this session by a rule echo \*\*/);
    assert.match(body, /run_command \{"argv":\["echo","two"\]\} done/);

    // the grants list names the rule by its words, and revokes it by its target
    let listed: QuickPickItem[] = [];
    stub.answerQuickPick = (items) => {
      listed = items;
      return items.find((i) => i.label.includes('rule'));
    };
    stub.answerMessage = (shown) => (shown.message.startsWith('Revoke the approval to rule echo **') ? 'Revoke' : undefined);
    await stub.commands.get('trellisd.showGrants')!();
    assert.ok(listed.some((i) => i.label === '$(list-filter) rule echo **' && i.description === 'this session'), JSON.stringify(listed));
    const grants = (await c.client.request('session/policy', { sessionId: session.sessionId })).grants ?? [];
    assert.ok(!grants.some((g) => g.kind === 'rule'), 'the rule was revoked');

    // reopened in another controller: the newest plan in the live spot, each planned turn marked
    stub.reset();
    stub.folders = [{ uri: Uri.file(daemon.root), name: 'project', index: 0 }];
    const again = controller();
    await again.c.reopenSession(session.sessionId);
    const reopened = again.c.plan;
    assert.equal(reopened?.turnId, carried!.turnId);
    assert.ok(reopened?.plan.entries.every((e) => e.status === 'completed'));
    assert.match(planDescription(reopened), /^2 of 2 done · turn “.+”$/);
    const marks = again.view.order.map((k) => stripTags(again.view.turns.get(k)!.footer));
    assert.match(marks[0], /plan: 1 of 2 done/);
    assert.match(marks[1], /carries out the plan of turn “plan the notes”/);
    assert.match(marks[1], /plan: 2 of 2 done/);
  });

  test('a window following another window\'s turn draws its plan live', async () => {
    daemon.share();
    daemon.setScript([PLAN, { text: 'Planned.', holdAfter: 0, holdFile: daemon.hold('end') }]);
    const one = controller();
    const session = await one.c.openSession(daemon.root);
    const other = new SessionController(daemon.client(), daemon.log);
    const otherView = new WatchedView();
    other.attachView(otherView);
    await other.reopenSession(session.sessionId);

    const followed = planShown(other, (p) => p.plan.entries.length === 2);
    const running = one.c.turn('plan in one window');
    const plan = await followed;
    assert.deepEqual(plan?.plan.entries.map((e) => e.content), ['read the README', 'write notes.txt']);
    daemon.release('end');
    const result = await running;
    assert.equal(plan?.turnId, result?.turnId);
    await otherView.until(() => /plan: 1 of 2 done/.test(stripTags(otherView.last?.footer ?? '')));
  });

  test("a mode set in one window shows in the other's header and status bar, walls and all", async () => {
    daemon.share();
    const one = new SessionController(daemon.client(), daemon.log);
    one.attachView(new WatchedView());
    const session = await one.openSession(daemon.root);
    const { c: other, view: otherView } = controller(); // its status bar item is the one drawn
    await other.reopenSession(session.sessionId);
    await modeShown(other, 'ask');

    await one.setMode('plan');
    await modeShown(other, 'plan');
    await otherView.until(() => otherView.header?.mode === 'mode: plan');
    assert.equal(stub.statusBarItems.get('trellisd.mode')?.text, '$(checklist) plan mode');
    assert.equal(other.modeBeforePlan, 'ask', 'its plan toggle goes back to the mode before');

    await one.setMode('auto'); // auto brings workspace-write walls: the other reads them again
    await otherView.until(() => otherView.header?.mode === 'mode: auto' && /workspace-write/.test(otherView.header.walls ?? ''));
    assert.equal(stub.statusBarItems.get('trellisd.mode')?.text, '$(shield) auto');
  });
});

describe('plans, modes and rules in words', () => {
  test('the vocabularies are the schema\'s; each mode has its line, and the commands and the view are contributed', () => {
    assert.deepEqual([...APPROVAL_MODES], schema.$defs.ApprovalMode.enum);
    assert.deepEqual([...PLAN_STATUSES], schema.$defs.PlanStatus.enum);
    assert.deepEqual(Object.keys(MODE_DESCRIPTIONS).sort(), [...APPROVAL_MODES].sort());
    assert.deepEqual(modeItems(APPROVAL_MODES, 'plan').map((i) => i.label), ['all', 'auto', 'acceptEdits', 'ask', '$(check) plan', 'never']);
    assert.deepEqual(modeItems(RUN_MODES, undefined, 'auto').map((i) => [i.label, i.description]), [['auto', 'default'], ['ask', ''], ['acceptEdits', '']]);
    const commands = manifest.contributes.commands.map((c: { command: string }) => c.command);
    for (const command of ['trellisd.runPlan', 'trellisd.setMode', 'trellisd.togglePlanMode']) {
      assert.ok(commands.includes(command), command);
    }
    assert.ok(manifest.contributes.views.trellisd.some((v: { id: string }) => v.id === 'trellisd.plan'));
  });

  test('a plan\'s progress and marks: each entry with its status and priority, Run this plan once the turn ended', () => {
    const plan = { step: 2, entries: [{ content: 'a <b>', status: 'completed' as const }, { content: 'b', status: 'in_progress' as const, priority: 'low' as const }] };
    assert.equal(progressText(plan.entries), '1 of 2 done');
    const ended = planMarksHtml({ turnId: 't1', outcome: 'finished', plan });
    assert.match(stripTags(ended), /^plan: 1 of 2 done Run this plan● a <b>◐ b low$/);
    assert.ok(ended.includes('data-run-plan="t1"'));
    assert.ok(!planMarksHtml({ turnId: 't1', outcome: 'running', plan }).includes('data-run-plan'), 'not while it runs');
    assert.equal(stripTags(planMarksHtml({ outcome: 'finished', followsPlan: { turnId: '0123456789ab' } })), 'carries out the plan of turn 01234567');
    assert.ok(refusedByPlanMode("refused by the session's policy: write_file notes.txt is refused: the session is in plan mode, where …"));
    assert.ok(!refusedByPlanMode('refused: the user did not approve'));
    const view = new PlanTreeProvider();
    view.show({ sessionId: 's', turnId: 't1', name: 'lay it out', plan });
    assert.deepEqual(view.getChildren().map((n) => (view.getTreeItem(n) as unknown as TreeItem).description), ['completed', 'in progress · low priority']);
    assert.equal(planDescription(view.plan), '1 of 2 done · turn “lay it out”');
  });

  test('a proposed rule is offered by its exact words, for the session and the project; none without one', () => {
    const params = { sessionId: 's', turnId: 't', runId: 'r', tool: 'run_command', arguments: { argv: ['npm', 'run', 'test', '--', '--watch'] }, summary: 'run npm' } as ApprovalParams;
    assert.deepEqual(approvalItems(params).map((i) => i.decision), ['allow', 'allowAlways', 'allowAlwaysProject', 'deny']);
    const items = approvalItems({ ...params, proposedRule: ['npm', 'run', 'test', '**'] });
    assert.deepEqual(items.map((i) => i.decision), ['allow', 'allowAlways', 'allowAlwaysProject', 'allowRule', 'allowRuleProject', 'deny']);
    assert.equal(items[3].label, '$(list-filter) Always allow `npm run test **` in this session');
    assert.equal(items[4].label, '$(list-filter) Always allow `npm run test **` for this project');
    assert.equal(items[3].detail, 'any command that starts with npm run test, whatever follows');
    assert.deepEqual(ruleItems([]), []);
    assert.equal(ruleText(['git', 'commit message', '**']), 'git "commit message" **');
    const rule = grantItem({ kind: 'rule', scope: 'project', target: '["pytest","**"]', rule: ['pytest', '**'] });
    assert.equal(rule.label, '$(list-filter) rule pytest **');
    assert.equal(rule.description, 'this project');
    assert.equal(grantItem({ kind: 'rule', target: '["make","test"]' }).label, '$(list-filter) rule make test');
  });
});
