import './setup';

import * as assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { Coalescer, Timers } from '../src/coalescer';

class FakeTimers implements Timers {
  time = 0;
  private pending: { at: number; fn: () => void; id: number }[] = [];
  private ids = 0;
  setTimeout(fn: () => void, ms: number): unknown {
    const id = ++this.ids;
    this.pending.push({ at: this.time + ms, fn, id });
    return id;
  }
  clearTimeout(handle: unknown): void {
    this.pending = this.pending.filter((p) => p.id !== handle);
  }
  now(): number {
    return this.time;
  }
  advance(ms: number): void {
    const until = this.time + ms;
    for (;;) {
      this.pending.sort((a, b) => a.at - b.at);
      const next = this.pending[0];
      if (!next || next.at > until) {
        break;
      }
      this.pending.shift();
      this.time = next.at;
      next.fn();
    }
    this.time = until;
  }
}

describe('the coalescer', () => {
  test('a thousand marks in a second draw about 25 times, the latest state each time', () => {
    const timers = new FakeTimers();
    const drawn: string[] = [];
    const c = new Coalescer((key) => drawn.push(key), 40, 250, timers);
    for (let ms = 0; ms < 1000; ms++) {
      c.mark('turn');
      timers.advance(1);
    }
    timers.advance(100);
    assert.ok(drawn.length >= 24 && drawn.length <= 26, `${drawn.length} draws`);
  });

  test('flush draws at once and cancels the pending timer', () => {
    const timers = new FakeTimers();
    const drawn: string[] = [];
    const c = new Coalescer((key) => drawn.push(key), 40, 250, timers);
    c.mark('a');
    c.mark('b');
    c.mark('a');
    c.flush();
    assert.deepEqual(drawn, ['a', 'b']);
    timers.advance(100);
    assert.deepEqual(drawn, ['a', 'b'], 'nothing more to draw');
  });

  test('slow drawing stretches the interval, up to a limit', () => {
    const timers = new FakeTimers();
    const c = new Coalescer(() => (timers.time += 30), 40, 250, timers);
    c.mark('a');
    c.flush();
    assert.equal(c.currentIntervalMs, 120);
    const slow = new Coalescer(() => (timers.time += 500), 40, 250, timers);
    slow.mark('a');
    slow.flush();
    assert.equal(slow.currentIntervalMs, 250);
  });
});
