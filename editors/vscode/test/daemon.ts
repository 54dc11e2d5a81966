/**
 * The real daemon for tests: its command comes from TRELLISD_TEST_CMD (default
 * `python3 -m trellisd`), it answers with the scripted provider, and it keeps its store in a
 * temporary folder that also holds the session's workspace folder.
 */

import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import { afterEach, beforeEach } from 'node:test';

import { ClientOptions, DaemonClient, Log } from '../src/client';
import { DEFAULT_SETTINGS } from '../src/config';
import { acting, Extension } from '../src/features';
import type { ChatSink, SessionController, ToWebview } from '../src/session';
import type { TurnView } from '../src/transcript';
import { stub } from './vscode-stub';

/** The repository's MCP server fixture, where a program inside the walls can read it: the
 * walls give every program a /tmp (and /run) of its own, so a checkout under /tmp would hide
 * it; then a copy under /var/tmp, made once. */
export function mcpServerFixture(): string {
  const file = path.resolve(__dirname, '../../../../tests/fixtures/mcp_server.py');
  const real = fs.realpathSync(file);
  if (!['/tmp/', '/run/'].some((hidden) => real.startsWith(hidden))) {
    return file;
  }
  if (!fixtureCopy) {
    const folder = fs.mkdtempSync('/var/tmp/trellisd-fixtures-');
    fixtureCopy = path.join(folder, 'mcp_server.py');
    fs.copyFileSync(real, fixtureCopy);
    process.on('exit', () => fs.rmSync(folder, { recursive: true, force: true }));
  }
  return fixtureCopy;
}
let fixtureCopy: string | undefined;

export function testCommand(): { command: string; args: string[] } {
  const words = (process.env.TRELLISD_TEST_CMD || 'python3 -m trellisd').trim().split(/\s+/);
  return { command: words[0], args: words.slice(1) };
}

/** How a line streams: delayMs before each piece; holdAfter pieces, then a wait until holdFile exists. */
interface Pace {
  delayMs?: number;
  holdAfter?: number;
  holdFile?: string;
}

export type ScriptLine =
  | ({ text: string } & Pace)
  | ({ tool: string; arguments: Record<string, unknown>; text?: string } & Pace)
  | { error: string };

export class MemoryLog implements Log {
  readonly lines: string[] = [];
  info(message: string): void {
    this.lines.push(`info ${message}`);
  }
  warn(message: string): void {
    this.lines.push(`warn ${message}`);
  }
  error(message: string): void {
    this.lines.push(`error ${message}`);
  }
  daemon(line: string): void {
    this.lines.push(`daemon ${line}`);
  }
  has(pattern: RegExp): boolean {
    return this.lines.some((l) => pattern.test(l));
  }
}

export class TestDaemon {
  readonly dir: string;
  readonly db: string;
  readonly root: string;
  readonly log = new MemoryLog();
  /** The scripted model's replies (a JSON-lines file), if set. */
  script?: string;
  /** Set by share(): the runtime folder where the store's shared daemon has its socket. */
  private runtime?: string;
  private readonly clients: DaemonClient[] = [];

  constructor(script?: ScriptLine[]) {
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'trellisd-vscode-test-'));
    this.db = path.join(this.dir, 'store', 'trellisd.db');
    this.root = path.join(this.dir, 'project');
    fs.mkdirSync(this.root, { recursive: true });
    fs.writeFileSync(path.join(this.root, 'README.md'), '# a small project\n');
    if (script) {
      this.setScript(script);
    }
  }

  /** A file a script line can hold on (holdFile): the model waits until release(name) makes it. */
  hold(name: string): string {
    return path.join(this.dir, `hold-${name}`);
  }

  release(name: string): void {
    fs.writeFileSync(this.hold(name), '');
  }

  /** The scripted model's replies, one model call a line, for daemons started from now on. */
  setScript(lines: ScriptLine[]): void {
    this.script = path.join(this.dir, `script-${Date.now()}-${Math.random().toString(36).slice(2)}.jsonl`);
    fs.writeFileSync(this.script, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');
  }

  /** Clients made from now on attach to the store's one shared daemon, as editor windows do,
   * instead of each starting a daemon of its own. cleanup() stops it. */
  share(): void {
    // short: a Unix socket's path has room for about 100 bytes
    this.runtime = fs.mkdtempSync(path.join('/tmp', 'rt'));
  }

  client(options: Partial<ClientOptions> = {}): DaemonClient {
    const { command, args } = testCommand();
    // Standalone unless shared: a test's daemon never outlives it in a shared daemon's place.
    const shared = this.runtime
      ? { TRELLISD_SHARED: '1', XDG_RUNTIME_DIR: this.runtime }
      : { TRELLISD_SHARED: '0' };
    const client = new DaemonClient({
      command: () => ({
        command,
        args: [...args, '--db', this.db],
        cwd: this.root,
        env: { TRELLISD_PROVIDER: 'scripted', TRELLISD_SCRIPT: this.script ?? '', TRELLISD_LOG: 'info', ...shared },
      }),
      initializationOptions: () => ({}),
      log: this.log,
      startTimeoutMs: 20_000,
      ...options,
    });
    this.clients.push(client);
    return client;
  }

  async cleanup(): Promise<void> {
    const daemons = new Set(this.clients.map((c) => sharedDaemonPid(c)).filter((pid) => pid !== undefined));
    // closed, not stopped: a request still on its way (a window catching up) starts nothing
    await Promise.all(this.clients.map((c) => c.close(2000)));
    for (const pid of daemons) {
      process.kill(pid, 'SIGTERM');
      await waitFor(`the shared daemon (pid ${pid}) to exit`, () => !alive(pid), 20_000);
    }
    fs.rmSync(this.dir, { recursive: true, force: true });
    if (this.runtime) {
      fs.rmSync(this.runtime, { recursive: true, force: true });
    }
  }
}

/** The pid of the shared daemon a client attached to, from its initialize answer. */
function sharedDaemonPid(client: DaemonClient): number | undefined {
  const experimental = client.initializeResult?.capabilities?.experimental as
    | { trellisd?: { daemon?: { pid: number; shared: boolean } } }
    | undefined;
  const daemon = experimental?.trellisd?.daemon;
  return daemon?.shared ? daemon.pid : undefined;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** A chat view that keeps what it was sent and draws it the way chat.js would. */
export class RecordingView implements ChatSink {
  readonly messages: ToWebview[] = [];
  readonly turns = new Map<string, TurnView>();
  order: string[] = [];
  running = false;
  notices: string[] = [];
  queued: { queueId: string; prompt: string }[] = [];
  spend: string | null = null;
  /** "Load earlier turns" is offered. */
  earlier = false;

  post(message: ToWebview): void {
    this.messages.push(message);
    switch (message.type) {
      case 'reset':
        this.turns.clear();
        this.order = [];
        for (const turn of message.turns) {
          this.draw(turn);
        }
        this.running = message.running;
        break;
      case 'turn':
        this.draw(message.turn);
        break;
      case 'prepend':
        this.order = [...message.turns.map((t) => t.key).filter((k) => !this.turns.has(k)), ...this.order];
        for (const turn of message.turns) {
          this.turns.set(turn.key, turn);
        }
        this.earlier = message.more;
        break;
      case 'earlier':
        this.earlier = message.more;
        break;
      case 'running':
        this.running = message.running;
        break;
      case 'notice':
        this.notices.push(message.text);
        break;
      case 'queue':
        this.queued = message.queued;
        break;
      case 'spend':
        this.spend = message.text;
        break;
    }
  }

  private draw(turn: TurnView): void {
    if (!this.turns.has(turn.key)) {
      this.order.push(turn.key);
    }
    this.turns.set(turn.key, turn);
  }

  /** The session header drawn last (null: no session). */
  get header() {
    const headers = this.messages.flatMap((m) => (m.type === 'reset' ? [m.session] : m.type === 'session' ? [m.session] : []));
    return headers.at(-1);
  }

  get last(): TurnView | undefined {
    return this.turns.get(this.order[this.order.length - 1]);
  }

  get turnPosts(): number {
    return this.messages.filter((m) => m.type === 'turn').length;
  }

  get prompts(): string[] {
    return this.order.map((k) => this.turns.get(k)!.prompt);
  }
}

/** A chat view that can be waited on: each post is checked against what a test waits for. */
export class WatchedView extends RecordingView {
  private waiters: { probe: () => boolean; resolve: () => void }[] = [];

  override post(message: ToWebview): void {
    super.post(message);
    this.waiters = this.waiters.filter((w) => !(w.probe() && (w.resolve(), true)));
  }

  /** Settles once `probe` holds after a post (or at once, if it holds now). */
  until(probe: () => boolean): Promise<void> {
    return probe() ? Promise.resolve() : new Promise((resolve) => this.waiters.push({ probe, resolve }));
  }
}

/** What activate hands each feature, over one controller and no window: the default settings,
 * commands that show their failure as in VS Code, the chat focused by doing nothing. */
export function features(c: SessionController, log: Log): Extension {
  return {
    controller: c,
    daemon: c.client,
    log,
    settings: () => DEFAULT_SETTINGS,
    showLog: () => undefined,
    act: acting(log, () => undefined),
    focusChat: async () => undefined,
  } as unknown as Extension;
}

export async function waitFor<T>(
  what: string,
  probe: () => T | undefined | false | null,
  timeoutMs = 15_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = probe();
    if (value) {
      return value;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    }
    await new Promise((r) => setTimeout(r, 10));
  }
}

export function stripTags(html: string): string {
  return html
    .replace(/<[^>]+>/g, '')
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&');
}

/** A daemon of its own for each test of the file (and the stand-in's state reset): the getter
 * gives the current test's. */
export function daemonPerTest(): () => TestDaemon {
  let daemon: TestDaemon | undefined;
  beforeEach(() => {
    stub.reset();
    daemon = new TestDaemon();
  });
  afterEach(async () => {
    await daemon?.cleanup();
  });
  return () => daemon!;
}
