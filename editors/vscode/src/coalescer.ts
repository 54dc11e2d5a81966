/**
 * Batches view updates. A fast stream sends a notification per token (a thousand a second);
 * posting each to the webview, and rendering Markdown for each, would freeze the editor.
 * Instead a turn is marked dirty and drawn at most once per interval: 40 ms, or longer when
 * drawing itself takes long (four times the last drawing time, at most 250 ms).
 */

export interface Timers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
  now(): number;
}

const realTimers: Timers = {
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
  now: () => performance.now(),
};

export class Coalescer {
  private readonly dirty = new Set<string>();
  private timer: unknown;
  private interval: number;

  constructor(
    private readonly draw: (key: string) => void,
    private readonly minIntervalMs = 40,
    private readonly maxIntervalMs = 250,
    private readonly timers: Timers = realTimers,
  ) {
    this.interval = minIntervalMs;
  }

  /** The next drawing of key happens within the interval. */
  mark(key: string): void {
    this.dirty.add(key);
    if (this.timer === undefined) {
      this.timer = this.timers.setTimeout(() => {
        this.timer = undefined;
        this.flush();
      }, this.interval);
    }
  }

  /** Draw every dirty key now (before anything that must come after them, e.g. a turn's end). */
  flush(): void {
    if (this.timer !== undefined) {
      this.timers.clearTimeout(this.timer);
      this.timer = undefined;
    }
    if (this.dirty.size === 0) {
      return;
    }
    const keys = [...this.dirty];
    this.dirty.clear();
    const started = this.timers.now();
    for (const key of keys) {
      this.draw(key);
    }
    const took = this.timers.now() - started;
    this.interval = Math.min(this.maxIntervalMs, Math.max(this.minIntervalMs, took * 4));
  }

  get currentIntervalMs(): number {
    return this.interval;
  }

  dispose(): void {
    if (this.timer !== undefined) {
      this.timers.clearTimeout(this.timer);
      this.timer = undefined;
    }
    this.dirty.clear();
  }
}
