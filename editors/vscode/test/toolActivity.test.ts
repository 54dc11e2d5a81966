import './setup';

import * as assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import type { ToolCallParams } from '../src/protocol';
import { bodyHtml, callChanged, callEnded, callFound, callPrinted, contextLine, TranscriptTurn } from '../src/transcript';

const ref = { sessionId: 's', turnId: 't', runId: 'r' };

function call(status: ToolCallParams['status'], callId = 'c1'): ToolCallParams {
  return { ...ref, step: 1, callId, tool: 'run_command', arguments: { argv: ['make'] }, status };
}

describe('live tool calls in the transcript', () => {
  test('a call is drawn when proposed, changes status in place, shows its output, then its result', () => {
    const turn: TranscriptTurn = { key: 'k', prompt: 'p', blocks: [], outcome: 'running' };
    callChanged(turn, call('proposed'));
    assert.match(bodyHtml(turn), /run_command.*tool-status-proposed">proposed</);
    callChanged(turn, call('running'));
    assert.ok(callPrinted(turn, 'c1', 'building <a>\n'));
    assert.ok(callPrinted(turn, 'c1', 'built\n'));
    const running = bodyHtml(turn);
    assert.match(running, /tool-status-running">running</);
    assert.match(running, /<pre class="tool-output">building &lt;a&gt;\nbuilt\n<\/pre>/);
    callChanged(turn, call('done'));
    assert.ok(callEnded(turn, 'c1', '$ make\nexit code 0'));
    assert.equal(turn.blocks.length, 1);
    assert.match(bodyHtml(turn), /tool-status-done">done<.*→ \$ make/);
    assert.equal(callPrinted(turn, 'other', 'x'), false);
    assert.equal(callEnded(turn, 'other', null), false);
  });

  test('a reopen mid-command draws the running call with its output so far, once, and the notifications carry it on', () => {
    const turn: TranscriptTurn = { key: 'k', prompt: 'p', blocks: [], outcome: 'running' };
    const live = { step: 1, callId: 'c1', tool: 'run_command', arguments: { argv: ['make'] }, status: 'running' as const, output: 'halfway\n' };
    callFound(turn, ref, live);
    callFound(turn, ref, live); // a second reopen of the same turn
    callFound(turn, ref, { ...live, step: 2, callId: 'c2', status: 'proposed', output: '' });
    assert.equal(turn.blocks.length, 2);
    assert.match(bodyHtml(turn), /tool-status-running">running<.*<pre class="tool-output">halfway\n<\/pre>.*tool-status-proposed/);
    callPrinted(turn, 'c1', 'all done\n');
    callChanged(turn, call('done'));
    assert.match(bodyHtml(turn), /tool-status-done">done<.*<pre class="tool-output">halfway\nall done\n<\/pre>/);
  });

  test('the context line names what the editor attached, relative to the root', () => {
    const line = contextLine(
      [
        { kind: 'selection', path: '/p/src/a.ts', range: { startLine: 3, endLine: 7 } },
        { kind: 'file', path: '/p/notes.txt' },
      ],
      (p) => p.replace('/p/', ''),
    );
    assert.equal(line, 'with lines 3–7 of src/a.ts, notes.txt');
  });
});
