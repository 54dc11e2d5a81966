import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, test } from 'node:test';

import { APPROVAL_DECISIONS, CALL_STATUSES, ErrorCode, Method, OUTCOMES, STEP_KINDS } from '../src/protocol';

const schemaPath = path.join(__dirname, '..', '..', '..', '..', 'protocol', 'schema.json');
const schema = JSON.parse(fs.readFileSync(schemaPath, 'utf8'));
const defs = schema.$defs;

/** The extension's copies of the protocol's words are those of protocol/schema.json. */
describe('the vocabulary, against protocol/schema.json', () => {
  test('outcomes', () => {
    assert.deepEqual([...OUTCOMES], defs.Outcome.enum);
  });

  test('step kinds', () => {
    assert.deepEqual([...STEP_KINDS], defs.StepKind.enum);
  });

  test('tool call statuses', () => {
    assert.deepEqual([...CALL_STATUSES], defs.CallStatus.enum);
  });

  test('approval decisions the editor may send', () => {
    const answer = schema.clientRequests['session/requestApproval'].result.properties.decision.enum;
    assert.deepEqual([...APPROVAL_DECISIONS], answer);
    for (const decision of APPROVAL_DECISIONS) {
      assert.ok(defs.Decision.enum.includes(decision), decision);
    }
  });

  test('every method the extension names is one of the protocol', () => {
    const known = new Set([
      ...Object.keys(schema.requests),
      ...Object.keys(schema.clientRequests),
      ...Object.keys(schema.notifications),
      'initialized',
      'exit',
    ]);
    for (const [name, method] of Object.entries(Method)) {
      assert.ok(known.has(method), `Method.${name} (${method}) is not in protocol/schema.json`);
    }
  });

  test('error codes', () => {
    for (const [name, code] of Object.entries(ErrorCode)) {
      assert.ok(defs.Error.properties.code.enum.includes(code), `${name} (${code})`);
    }
  });
});
