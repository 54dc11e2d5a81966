import './setup';

import * as assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import type { Turn } from '../src/protocol';
import {
  addBlock,
  appendText,
  bodyHtml,
  finish,
  footerHtml,
  footerText,
  formatCost,
  fromHistory,
  steerDelivered,
  TranscriptTurn,
  turnView,
} from '../src/transcript';

const tokens = { input: 1200, output: 34, total: 1234, cached: null };

function live(): TranscriptTurn {
  return { key: 'k', prompt: 'p', blocks: [], outcome: 'running' };
}

describe('the transcript', () => {
  test('pieces of one step join into one text block; a new step starts a new block', () => {
    const turn = live();
    appendText(turn, 1, 'Hello ');
    appendText(turn, 1, '**world**');
    appendText(turn, 2, 'again');
    assert.equal(turn.blocks.length, 2);
    assert.equal(bodyHtml(turn), '<div class="text"><p>Hello <strong>world</strong></p>\n</div><div class="text"><p>again</p>\n</div>');
  });

  test('a block is rendered again after it grew', () => {
    const turn = live();
    appendText(turn, 1, '# Title');
    assert.match(bodyHtml(turn), /<h1>Title<\/h1>/);
    appendText(turn, 1, ' and more');
    assert.match(bodyHtml(turn), /<h1>Title and more<\/h1>/);
  });

  test('raw HTML, scripts and remote images never become markup', () => {
    const turn = live();
    appendText(turn, 1, '<script>x()</script> <img src=x onerror=y> ![pic](https://example.com/p.png) [a](javascript:alert(1))');
    const html = bodyHtml(turn);
    assert.doesNotMatch(html, /<(script|img)\b|<[^>]*onerror|href="javascript/);
    assert.match(html, /<a href="https:\/\/example.com\/p.png" title="image">pic<\/a>/);
  });

  test('the footer says outcome, tokens and cost', () => {
    assert.equal(footerText({ outcome: 'finished', tokens, cost: 0.00123, model: 'gpt-4o-mini' }), 'finished · gpt-4o-mini · 1,234 tokens (1,200 in, 34 out) · $0.0012');
    assert.equal(footerText({ outcome: 'finished', tokens: { ...tokens, cached: 1000 }, cost: 1.5 }), 'finished · 1,234 tokens (1,200 in, 1,000 cached, 34 out) · $1.50');
    assert.equal(footerText({ outcome: 'error', tokens: { input: null, output: null, total: null, cached: null }, cost: null }), 'error · tokens unknown · cost unknown');
    assert.equal(footerText({ outcome: 'finished', tokens: { input: 5, output: null, total: null, cached: null } }), 'finished · ? tokens (5 in, ? out)');
    assert.equal(formatCost(undefined), undefined, 'a daemon that gives no cost: nothing is said about it');
    assert.equal(formatCost(0), '$0');
  });

  test("an error is shown with the turn's footer", () => {
    const turn = { ...live(), outcome: 'error', error: 'the provider refused the key <401>' };
    assert.match(footerHtml(turn), /<div class="turn-error">the provider refused the key &lt;401&gt;<\/div>/);
    assert.match(footerHtml(live()), /running…/);
  });

  test('the result of the turn is trusted when pieces were missed', () => {
    const turn = live();
    appendText(turn, 1, 'Hel');
    finish(turn, { turnId: 't1', runId: 'r1', outcome: 'finished', reply: 'Hello', tokens, steps: 1, model: null, cost: null });
    assert.equal(turn.turnId, 't1');
    assert.equal(turn.outcome, 'finished');
    assert.match(bodyHtml(turn), /Hello/);
  });

  test('steers, tool calls and approvals are drawn in the order they happened', () => {
    const turn = live();
    appendText(turn, 1, 'Looking.');
    turn.blocks.push({ kind: 'approval', tool: 'write_file', summary: 'write_file wants to write a.txt', arguments: { path: 'a.txt' }, decision: 'allowAlways' });
    turn.blocks.push({ kind: 'tool', step: 1, name: 'write_file', arguments: { path: 'a.txt' }, result: 'created a.txt (1 bytes)\nmore' });
    turn.blocks.push({ kind: 'steer', clientMsgId: 'c1', text: 'use <b>', state: 'delivered', step: 2 });
    turn.blocks.push({ kind: 'steer', clientMsgId: 'c2', text: 'late', state: 'undelivered' });
    const html = bodyHtml(turn);
    const order = ['Looking.', 'allowed always for this session', 'created a.txt (1 bytes)', 'use &lt;b&gt;', 'delivered at step 2', 'not delivered'];
    let at = -1;
    for (const text of order) {
      const next = html.indexOf(text);
      assert.ok(next > at, `${text} comes after the previous block`);
      at = next;
    }
    assert.doesNotMatch(html, /more/, 'a tool result shows its first line');
  });

  test('a waiting steer stays last; once delivered it stands where its step begins', () => {
    const turn = live();
    appendText(turn, 1, 'Reading ');
    const steer = { kind: 'steer' as const, clientMsgId: 'c1', text: 'be brief', state: 'queued' as const };
    turn.blocks.push(steer);
    appendText(turn, 1, 'the README');
    addBlock(turn, { kind: 'tool', step: 1, name: 'read_file', arguments: { path: 'README.md' }, result: '# demo' });
    assert.deepEqual(turn.blocks.map((b) => b.kind), ['text', 'tool', 'steer']);
    assert.equal((turn.blocks[0] as { text: string }).text, 'Reading the README');
    steerDelivered(turn, steer, 2);
    appendText(turn, 2, 'Briefly: a demo.');
    assert.deepEqual(turn.blocks.map((b) => b.kind), ['text', 'tool', 'steer', 'text']);
    assert.match(bodyHtml(turn), /be brief<\/span> <span class="steer-note">delivered at step 2/);
  });

  test('a stored turn becomes a transcript turn', () => {
    const stored: Turn = {
      turnId: 't', sessionId: 's', parentTurnId: null, runId: 'r', prompt: 'q', reply: 'a',
      outcome: 'interrupted', tokens, createdAt: '2026-01-01T00:00:00.000+00:00',
      error: 'the daemon running this turn stopped before it ended', model: null, cost: null,
    };
    const turn = fromHistory(stored);
    assert.equal(turn.key, 't');
    assert.match(footerHtml(turn), /stopped before it ended/);
    assert.deepEqual(fromHistory({ ...stored, reply: '' }).blocks, []);
  });

  test("a custom command's turn shows as typed, its expansion folded under it", () => {
    const stored: Turn = {
      turnId: 't', sessionId: 's', parentTurnId: null, runId: 'r', prompt: 'Say hello to Ada <warmly>, at length.',
      reply: 'Hello!', outcome: 'finished', tokens, createdAt: '2026-01-01T00:00:00.000+00:00', model: null, cost: null,
      command: { name: 'greet', arguments: 'Ada', source: 'user' },
    };
    const turn = fromHistory(stored);
    assert.equal(turn.prompt, '/greet Ada');
    assert.equal(turn.expansion, 'Say hello to Ada <warmly>, at length.');
    const view = turnView(turn);
    assert.match(view.prompt, /^\/greet Ada<details class="command-expansion"><summary>/);
    assert.match(view.prompt, /Say hello to Ada &lt;warmly&gt;, at length\.<\/div><\/details>$/);

    const plain = fromHistory({ ...stored, prompt: '/greet Bob', command: undefined });
    assert.equal(plain.prompt, '/greet Bob');
    assert.equal(turnView(plain).prompt, '/greet Bob'); // a prompt of words: nothing folded
  });
});
