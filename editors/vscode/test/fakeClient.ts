/**
 * A stand-in for DaemonClient that answers from a table of methods, for what a test cannot get
 * from the real daemon: `methods[method](params)` returns the result or throws a DaemonError.
 * `notify` plays a notification to the controller's handlers. Every request is kept in `sent`.
 */

import type { CancellationToken } from 'vscode-jsonrpc';

import type { DaemonClient, DaemonHandlers } from '../src/client';
import { DaemonError } from '../src/errors';
import type { Session, Tokens, Turn } from '../src/protocol';
import type { RequestMethod, RequestParams, RequestResult } from '../src/protocolTypes';

export type Answer = (params: any) => unknown;

export class FakeClient {
  generation = 1;
  handlers: DaemonHandlers = {};
  readonly sent: { method: string; params: any }[] = [];

  constructor(readonly methods: Record<string, Answer> = {}) {}

  get asClient(): DaemonClient {
    return this as unknown as DaemonClient;
  }

  async start(): Promise<void> {}

  setHandlers(handlers: DaemonHandlers): void {
    this.handlers = handlers;
  }

  onDidExit(): { dispose(): void } {
    return { dispose: () => undefined };
  }

  async request<M extends RequestMethod>(
    method: M,
    params: RequestParams<M>,
    _token?: CancellationToken,
  ): Promise<RequestResult<M>> {
    this.sent.push({ method, params });
    const answer = this.methods[method];
    if (!answer) {
      throw new DaemonError(`unknown method ${method}`, -32601, undefined);
    }
    return (await answer(params)) as RequestResult<M>;
  }

  /** The params of each request of `method`, in order. */
  params(method: string): any[] {
    return this.sent.filter((s) => s.method === method).map((s) => s.params);
  }
}

export const TOKENS: Tokens = { input: 10, output: 5, total: 15, cached: null };

export function session(extra: Partial<Session> = {}): Session {
  return {
    sessionId: 's-1',
    root: '/project',
    title: 'a session',
    head: null,
    createdAt: '2026-01-01T00:00:00Z',
    updatedAt: '2026-01-01T00:00:00Z',
    provider: {},
    pinned: [],
    ...extra,
  };
}

/** Turn `n` of a straight path (t-1, t-2, …): its reply is its last step's text. */
export function pathTurn(n: number, extra: Partial<Turn> = {}): Turn {
  return {
    turnId: `t-${n}`,
    sessionId: 's-1',
    parentTurnId: n > 1 ? `t-${n - 1}` : null,
    runId: `r-${n}`,
    prompt: `prompt ${n}`,
    reply: `reply ${n}`,
    outcome: 'finished',
    tokens: TOKENS,
    createdAt: '2026-01-01T00:00:00Z',
    model: 'scripted',
    cost: null,
    ...extra,
  };
}

/** A session of `count` turns on one path, answering session/reopen and session/history in
 * pages as the daemon does (newest first, a cursor naming the first turn of the page), and
 * run/steps with two steps a turn: "looking at N" then the reply. */
export function pagedSession(count: number, extra: Partial<Session> = {}): Record<string, Answer> {
  const turns = Array.from({ length: count }, (_, i) => pathTurn(i + 1));
  const page = (end: number, limit?: number) => {
    const start = limit === undefined ? 0 : Math.max(0, end - limit);
    return { turns: turns.slice(start, end), ...(start > 0 ? { cursor: `before-${start}` } : {}) };
  };
  const head = count ? `t-${count}` : null;
  return {
    'session/reopen': (p) => {
      const { turns: history, cursor } = page(count, p.limit);
      return { ...session({ head, ...extra }), history, ...(cursor ? { historyCursor: cursor } : {}) };
    },
    'session/history': (p) => {
      const end = p.cursor ? Number(String(p.cursor).slice('before-'.length)) : count;
      const { turns: found, cursor } = page(end, p.limit);
      return { turns: found, ...(cursor ? { nextCursor: cursor } : {}) };
    },
    'session/turns': () => ({ turns }),
    'run/steps': (p) => {
      const n = Number(String(p.runId).slice(2));
      return {
        steps: [
          { step: 1, decision: 'tool', prompt: `prompt ${n}`, text: `looking at ${n}`, toolCall: { id: 'c', name: 'read_file', arguments: { path: 'notes.md' } }, result: 'notes', tokens: TOKENS },
          { step: 2, decision: 'reply', prompt: null, text: `reply ${n}`, toolCall: null, result: null, tokens: TOKENS },
        ],
      };
    },
  };
}
