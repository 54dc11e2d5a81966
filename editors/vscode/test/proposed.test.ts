import './setup';

import * as assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { applyDiff, diffPath } from '../src/proposed';

describe('the proposed text of a write', () => {
  test('a diff applied to the file gives what the write would leave', () => {
    const diff = '--- a/a.txt\n+++ b/a.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n@@ -9 +9,2 @@\n-nine\n+9\n+ten\n';
    const current = ['one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine', ''].join('\n');
    assert.equal(applyDiff(current, diff), 'one\nTWO\nthree\nfour\nfive\nsix\nseven\neight\n9\nten\n');
    assert.equal(diffPath(diff), 'a.txt');
  });

  test('a new file, and a last line without a newline', () => {
    assert.equal(applyDiff('', '--- /dev/null\n+++ b/n.txt\n@@ -0,0 +1,2 @@\n+a\n+b\n\\ No newline at end of file\n'), 'a\nb');
    assert.equal(diffPath('--- /dev/null\n+++ b/n.txt\n'), 'n.txt');
  });
});
