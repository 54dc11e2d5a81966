import './setup';

import * as assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import type { ToolCallParams } from '../src/protocol';
import { bodyHtml, callChanged, callEnded, callPrinted, contextLine, TranscriptTurn } from '../src/transcript';

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
