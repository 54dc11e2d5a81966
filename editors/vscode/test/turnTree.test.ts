import './setup';

import * as assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import type { Turn } from '../src/protocol';
import { BranchNode, buildTurnTree, treeItem, TurnNode, TurnTreeProvider } from '../src/turnTree';
import { TreeItemCollapsibleState } from './vscode-stub';

function turn(turnId: string, parentTurnId: string | null, extra: Partial<Turn> = {}): Turn {
  // no cost: as a daemon that leaves it out (the footer then says nothing of it)
  return {
    turnId, sessionId: 's', parentTurnId, runId: `r-${turnId}`, prompt: `prompt ${turnId}`, reply: `reply ${turnId}`,
    outcome: 'finished', tokens: { input: 10, output: 5, total: 15, cached: null }, createdAt: '2026-01-01T00:00:00.000+00:00',
    model: null, ...extra,
  } as Turn;
}

describe('the turn tree', () => {
  test("a custom command's turn is named as typed; its tooltip holds the expansion", () => {
    const ran = turn('a', null, { prompt: 'Tidy the imports of every module.', command: { name: 'tidy', arguments: '', source: 'project' } });
    const item = treeItem(buildTurnTree([ran], 'a')[0]);
    assert.equal(item.label, '/tidy');
    assert.match(String(item.tooltip), /^\/tidy\n\nthe command's prompt:\nTidy the imports of every module\./);
  });

  test('a conversation without branches is one flat list, the head marked', () => {
    const nodes = buildTurnTree([turn('a', null), turn('b', 'a'), turn('c', 'b')], 'c') as TurnNode[];
    assert.deepEqual(nodes.map((n) => n.turn.turnId), ['a', 'b', 'c']);
    assert.deepEqual(nodes.map((n) => n.isHead), [false, false, true]);
    assert.ok(nodes.every((n) => n.onHeadPath && n.branches.length === 0));
    const item = treeItem(nodes[2]);
    assert.equal(item.label, 'prompt c');
    assert.equal(item.description, '● head · 15 tokens');
    assert.equal(item.contextValue, 'turn');
    assert.equal(item.collapsibleState, TreeItemCollapsibleState.None);
  });

  test('a fork nests its branches; the abandoned one is marked and folded', () => {
    const turns = [turn('a', null), turn('b', 'a'), turn('c', 'b'), turn('d', 'a', { outcome: 'cancelled', cost: 0.02 }), turn('e', 'd')];
    const nodes = buildTurnTree(turns, 'd') as TurnNode[];
    assert.equal(nodes.length, 1);
    const [abandoned, current] = nodes[0].branches;
    assert.equal(abandoned.onHeadPath, false);
    assert.deepEqual(abandoned.chain.map((n) => n.turn.turnId), ['b', 'c']);
    assert.equal(current.onHeadPath, true);
    assert.deepEqual(current.chain.map((n) => [n.turn.turnId, n.isHead, n.onHeadPath]), [['d', true, true], ['e', false, false]]);
    assert.equal(treeItem(nodes[0]).collapsibleState, TreeItemCollapsibleState.Expanded);
    assert.equal(treeItem(abandoned).label, 'abandoned branch');
    assert.equal(treeItem(abandoned).collapsibleState, TreeItemCollapsibleState.Collapsed);
    assert.equal(treeItem(current).collapsibleState, TreeItemCollapsibleState.Expanded);
    assert.equal(treeItem(current.chain[0]).description, '● head · cancelled · 15 tokens · $0.02');
    assert.equal(treeItem(current.chain[1]).description, 'abandoned · 15 tokens');
  });

  test('turns started over from the beginning are branches at the top', () => {
    const nodes = buildTurnTree([turn('a', null), turn('b', null)], null) as BranchNode[];
    assert.deepEqual(nodes.map((n) => [n.kind, n.first.turnId, n.onHeadPath]), [['branch', 'a', false], ['branch', 'b', false]]);
    assert.deepEqual(buildTurnTree([], null), []);
  });

  test('the provider loads the tree from its source and answers VS Code', async () => {
    const provider = new TurnTreeProvider({ turnTree: async () => ({ turns: [turn('a', null), turn('b', 'a')], head: 'b' }) });
    let changed = 0;
    provider.onDidChangeTreeData(() => changed++);
    await provider.refresh();
    assert.equal(changed, 1);
    const roots = provider.getChildren();
    assert.equal(roots.length, 2);
    assert.deepEqual(provider.getChildren(roots[0]), []);
    const failing = new TurnTreeProvider({ turnTree: async () => { throw new Error('no daemon'); } }, (e) => assert.match(String(e), /no daemon/));
    await failing.refresh();
    assert.deepEqual(failing.getChildren(), []);
  });
});
