import './setup';

import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, test } from 'node:test';

import type { Process } from '../src/protocol';
import { commandLine, processItem, processState, ProcessTreeProvider, registerProcesses } from '../src/processes';
import { SessionController } from '../src/session';
import { features, RecordingView, daemonPerTest } from './daemon';
import { QuickPick, QuickPickItem, stub } from './vscode-stub';

const daemonOf = daemonPerTest();

/** Settles once `probe` holds, checked each time `subscribe` reports. */
function when(subscribe: (listener: () => void) => { dispose(): void }, probe: () => boolean): Promise<void> {
  if (probe()) {
    return Promise.resolve();
  }
  return new Promise((resolve) => {
    const subscription = subscribe(() => {
      if (probe()) {
        subscription.dispose();
        resolve();
      }
    });
  });
}

describe('the Processes view', () => {
  test("a process a turn started is listed with its output, and stopped from the view", async () => {
    const daemon = daemonOf();
    const argv = ['sh', '-c', 'echo serving on 8000; exec cat'];
    daemon.setScript([{ tool: 'start_process', arguments: { argv } }, { text: 'The server runs.' }]);
    const c = new SessionController(daemon.client(), daemon.log);
    c.attachView(new RecordingView());
    registerProcesses(features(c, daemon.log));
    const provider = stub.treeProviders.get('trellisd.processes') as ProcessTreeProvider;
    const rows = () => provider.getChildren().map((p) => processItem(p));
    const asked: string[] = [];
    stub.onQuickPick = (pick: QuickPick<QuickPickItem>) => {
      asked.push(pick.title ?? '');
      setImmediate(() => (pick as unknown as { accept(label: string): void }).accept('Allow once'));
    };
    await c.openSession(daemon.root);
    const printed = new Promise<void>((resolve) => {
      const s = c.onProcessOutput((p) => /serving on 8000/.test(p.text) && (s.dispose(), resolve()));
    });
    const result = await c.turn('start the dev server');
    assert.equal(result?.outcome, 'finished', result?.error);
    assert.equal(asked.length, 1, 'start_process is asked as a command is');
    await when((l) => provider.onDidChangeTreeData(l), () => provider.getChildren().some((p) => p.running));
    const [row] = rows();
    assert.equal(row.label, commandLine(argv));
    assert.match(String(row.description), new RegExp(`^running · turn ${result!.turnId.slice(0, 8)}`));
    assert.equal(row.contextValue, 'process-running', 'a running process has the stop button');
    assert.equal(stub.context.get('trellisd.hasProcesses'), true, 'the view shows once the session has a process');

    await printed;
    assert.ok(stub.output.join('').includes('serving on 8000'), 'its output is in its output channel');

    await stub.commands.get('trellisd.stopProcess')!(provider.getChildren()[0]);
    const [ended] = provider.getChildren();
    assert.equal(ended.running, false);
    assert.equal(rows()[0].contextValue, 'process-ended');
    assert.match(String(rows()[0].description), /^(killed by signal 15|exited)/);
  });

  test('output opened after the fact is read back, and a row says how its process ended as it ends', async () => {
    const daemon = daemonOf();
    const go = path.join(daemon.root, 'go');
    const argv = ['sh', '-c', `echo serving on 8000; echo ready; while [ ! -e ${go} ]; do sleep 0.05; done; exit 3`];
    daemon.setScript([{ tool: 'start_process', arguments: { argv } }, { text: 'The server runs.' }]);
    const c = new SessionController(daemon.client(), daemon.log);
    c.attachView(new RecordingView());
    stub.onQuickPick = (pick: QuickPick<QuickPickItem>) => {
      setImmediate(() => (pick as unknown as { accept(label: string): void }).accept('Allow once'));
    };
    await c.openSession(daemon.root);
    const printed = new Promise<void>((resolve) => {
      const s = c.onProcessOutput((p) => /ready/.test(p.text) && (s.dispose(), resolve()));
    });
    const result = await c.turn('start the dev server');
    assert.equal(result?.outcome, 'finished', result?.error);
    await printed; // printed before the Processes view was there to take it

    registerProcesses(features(c, daemon.log));
    const provider = stub.treeProviders.get('trellisd.processes') as ProcessTreeProvider;
    await when((l) => provider.onDidChangeTreeData(l), () => provider.getChildren().length === 1);
    const [p] = provider.getChildren();
    const channel = `trellisd process ${commandLine(argv).slice(0, 40)}`;
    assert.equal(stub.channels.get(channel), undefined, 'nothing came live to this view');
    await stub.commands.get('trellisd.showProcessOutput')!(p);
    assert.equal(stub.channels.get(channel), 'serving on 8000\nready\n', 'what it printed, read back');

    fs.writeFileSync(go, '');
    await when((l) => provider.onDidChangeTreeData(l), () => !provider.getChildren()[0].running);
    const row = processItem(provider.getChildren()[0]);
    assert.match(String(row.description), /^exited 3 · turn /);
    assert.equal(row.contextValue, 'process-ended');
  });

  test('how a process ended reads in words', () => {
    const p: Process = { processId: 'p', argv: ['npm', 'run', 'dev server'], cwd: '/p', startedAt: '', turnId: null, running: false, exitCode: -9 };
    assert.equal(processState(p), 'killed by signal 9');
    assert.equal(processState({ ...p, exitCode: 0 }), 'exited 0');
    assert.equal(processState({ ...p, running: true, exitCode: null }), 'running');
    assert.equal(commandLine(p.argv), 'npm run "dev server"');
  });
});
