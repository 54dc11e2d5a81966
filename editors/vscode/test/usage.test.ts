import './setup';

import * as assert from 'node:assert/strict';
import { test } from 'node:test';

import { UsageParams } from '../src/protocol';
import { contextPercent, shortTokens, usageText, usageTooltip } from '../src/usage';

const spend = (total: number, cached = 0) => ({ input: total - 10, output: 10, cached, total });

function usage(contextTokens: number, contextWindow: number, cost: number | null): UsageParams {
  return {
    sessionId: 's-1',
    turnId: 't-1',
    contextTokens,
    contextWindow,
    tokens: { turn: spend(1500, 400), session: spend(12_345, 9000) },
    cost: { turn: cost, session: cost === null ? null : cost * 3 },
  };
}

test('the meter shows the share of the window and the session cost', () => {
  assert.equal(usageText(usage(15_400, 128_000, 0.002)), '$(dashboard) ctx 12% · $0.0060');
  assert.equal(usageText(usage(0, 200_000, null)), '$(dashboard) ctx 0% · cost unknown');
  assert.equal(contextPercent(usage(10, 0, null)), 0);
});

test('the tooltip spells the context, the turn and the session out', () => {
  const lines = usageTooltip(usage(15_400, 128_000, 0.002)).split('\n');
  assert.equal(lines[0], 'Context: 15.4k of 128.0k tokens (12%)');
  assert.equal(lines[1], 'This turn: 1,500 tokens (400 cached) · $0.0020');
  assert.equal(lines[2], 'This session: 12,345 tokens (9,000 cached) · $0.0060');
  assert.equal(shortTokens(1_050_000), '1.05M');
  assert.equal(shortTokens(950), '950');
});
