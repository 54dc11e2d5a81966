/**
 * The trellisd wire protocol as TypeScript types: the shapes of protocol/schema.json that the
 * extension reads or sends. Fields are camelCase, as on the wire.
 */

import type * as wire from './protocolTypes';
import type { NotificationParams, RequestParams, RequestResult } from './protocolTypes';

export const PROTOCOL_NAME = 'trellisd';
/** The version of protocol/README.md this extension follows. */
export const PROTOCOL_VERSION = '0.1';

export const Method = {
  initialize: 'initialize',
  initialized: 'initialized',
  shutdown: 'shutdown',
  exit: 'exit',
  open: 'session/open',
  reopen: 'session/reopen',
  list: 'session/list',
  history: 'session/history',
  turns: 'session/turns',
  turn: 'session/turn',
  branch: 'session/branch',
  steer: 'session/steer',
  cancel: 'session/cancel',
  resume: 'session/resume',
  pause: 'session/pause',
  compact: 'session/compact',
  takeover: 'session/takeover',
  tools: 'session/tools',
  turnChanges: 'turn/changes',
  revert: 'turn/revert',
  fork: 'session/fork',
  rename: 'session/rename',
  delete: 'session/delete',
  policy: 'session/policy',
  revoke: 'session/revoke',
  export: 'session/export',
  import: 'session/import',
  queue: 'session/queue',
  unqueue: 'session/unqueue',
  budget: 'session/budget',
  recover: 'session/recover',
  pin: 'session/pin',
  unpin: 'session/unpin',
  runSteps: 'run/steps',
  // daemon -> editor
  turnEnded: 'session/turnEnded',
  queued: 'session/queued',
  dequeued: 'session/dequeued',
  token: 'session/token',
  step: 'session/step',
  steered: 'session/steered',
  toolCall: 'session/toolCall',
  toolOutput: 'session/toolOutput',
  usage: 'session/usage',
  requestApproval: 'session/requestApproval',
} as const;

/** JSON-RPC error codes the daemon answers with (protocol/README.md documents each). */
export const ErrorCode = {
  methodNotFound: -32601,
  invalidParams: -32602,
  internal: -32603,
  requestCancelled: -32800,
  notFound: -32010,
  conflict: -32020,
  notRunning: -32021,
  leaseHeld: -32030,
  store: -32040,
} as const;

/** null: the provider reported no figure. */
export type Count = number | null;

export interface Tokens {
  input: Count;
  output: Count;
  total: Count;
  cached: Count;
}

/** A turn's outcomes, as protocol/schema.json's `Outcome` lists them (checked by the tests). */
export const OUTCOMES = [
  'running',
  'finished',
  'error',
  'cancelled',
  'interrupted',
  'exhausted',
  'success',
  'failure',
  'paused',
  'forked',
] as const;

export type Outcome = (typeof OUTCOMES)[number] | string;

/** What a step is (its `decision` field), as the schema's `StepKind` lists them. */
export const STEP_KINDS = ['reply', 'tool', 'error', 'cancelled', 'compaction'] as const;

export interface ProviderChoice {
  name?: string;
  model?: string;
  baseUrl?: string;
  temperature?: number;
  maxTokens?: number;
}

export interface InitializationOptions {
  provider?: string;
  model?: string;
  baseUrl?: string;
  apiKey?: string;
  script?: string;
}

export interface InitializeResult {
  serverInfo?: { name: string; version?: string };
  capabilities: { experimental?: { trellisd?: { protocolVersion?: string } } };
}

export type Session = wire.Session;

/** A command that had to be killed when its turn was cancelled (TurnResult, Turn). */
export type TurnRecovery = wire.TurnRecovery;

/** Session.recovery: until answered with session/recover, no turn runs in the session. */
export type PendingRecovery = wire.Recovery;

export type RecoveryDecision = 'keep' | 'revert';

export type RecoverResult = RequestResult<'session/recover'>;

/** session/turnEnded: a turn of a followed session ended (sent to every window following it). */
export type TurnEndedParams = NotificationParams<'session/turnEnded'>;

/** A step as run/steps gives it. */
export interface Step {
  step: number;
  decision: string;
  prompt: string | null;
  text: string;
  toolCall: ToolCall | null;
  result: string | null;
  tokens: Tokens;
}

export type ForkedFrom = wire.ForkedFrom;

export type SessionSummary = wire.SessionSummary;

export interface SearchMatch {
  turnId: string | null;
  snippet: string;
}

export interface ExportResult {
  path: string;
  bytes: number;
  turns: number;
}

export type Turn = wire.Turn;

export type ReopenResult = RequestResult<'session/reopen'>;

export interface RunningTurn extends TurnRef {
  /** The turn's prompt (older daemons leave it out). */
  prompt?: string;
  /** The step being streamed; null before its first piece. */
  step: number | null;
  text: string;
  /** The calls of the steps not committed yet: where each stands, what it printed so far. */
  calls?: LiveCall[];
}

export interface LiveCall {
  step: number;
  callId: string;
  tool: string;
  arguments: Record<string, unknown>;
  status: CallStatus;
  output: string;
}

export interface PauseResult {
  pausing: boolean;
}

export type SessionList = RequestResult<'session/list'>;

export type TurnResult = wire.TurnResult;

export interface ToolCall {
  id: string;
  name: string;
  arguments: Record<string, unknown>;
}

export interface TurnRef {
  sessionId: string;
  turnId: string;
  runId: string;
}

export interface TokenParams extends TurnRef {
  step: number;
  text: string;
}

export interface StepParams extends TurnRef {
  step: number;
  decision: (typeof STEP_KINDS)[number] | string;
  prompt?: string | null;
  text?: string;
  toolCall?: ToolCall | null;
  result?: string | null;
  tokens: Tokens;
}

export interface SteerResult {
  turnId: string;
  runId: string;
  queued: boolean;
}

export interface SteeredParams extends TurnRef {
  /** The step whose model call carried the steer; null when it was handed back. */
  step: number | null;
  text: string;
  clientMsgId?: string;
  delivered: boolean;
}

/** Where a tool call stands (session/toolCall), as the schema's `CallStatus` lists them. */
export const CALL_STATUSES = ['proposed', 'running', 'done', 'refused', 'failed', 'cancelled'] as const;

export type CallStatus = (typeof CALL_STATUSES)[number];

export interface ToolCallParams extends TurnRef {
  step: number;
  callId: string;
  tool: string;
  arguments: Record<string, unknown>;
  status: CallStatus;
}

/** A running command's output since the previous one of the call. */
export interface ToolOutputParams extends TurnRef {
  step: number;
  callId: string;
  text: string;
}

/** What the editor attaches to a prompt (session/turn's context). */
export interface ContextEntry {
  kind: 'file' | 'selection' | 'diagnostics';
  /** Absolute, inside the session's root, or relative to it. */
  path: string;
  /** Lines, 1-based and inclusive. */
  range?: { startLine: number; endLine: number };
  /** Left out: the daemon reads the file (or the range of it). */
  text?: string;
}

export interface CancelResult {
  cancelled: boolean;
}

export interface ApprovalParams extends TurnRef {
  tool: string;
  arguments: Record<string, unknown>;
  summary: string;
  /** write_file and edit_file: the unified diff against the file on disk now. */
  diff?: string;
  /** An MCP tool's call ({server, tool}), or a project's MCP server asking to start ({server, source, start}). */
  mcp?: { server: string; tool?: string; source?: 'project'; start?: string };
}

/** An MCP server given to session/open: run over stdio, or reached over streamable HTTP. */
export type McpServer = wire.McpServer;

/** One tool the model sees (session/tools). */
export interface ToolInfo {
  name: string;
  description: string;
  source: 'builtin' | 'mcp';
  server?: string;
  kind: 'read' | 'write' | 'exec';
  target?: string;
  policy: 'allow' | 'ask' | 'refuse' | 'depends';
}

export type McpServerState = wire.McpServerState;

export type SessionTools = RequestResult<'session/tools'>;

export type FileChange = wire.FileChange;

export type Restored = wire.Restored;

/** The answers an editor may give to session/requestApproval, as the schema lists them. */
export const APPROVAL_DECISIONS = ['allow', 'allowAlways', 'allowAlwaysProject', 'deny'] as const;

export type ApprovalDecision = (typeof APPROVAL_DECISIONS)[number];

/** A remembered approval (session/policy's grants): what it allows, and where it is kept. */
export interface Grant {
  kind: 'read' | 'write' | 'exec';
  target: string;
  /** policy: given with session/open's policy; session: this session's; project: every session over the root. */
  scope?: 'policy' | 'session' | 'project';
}

/** A grant session/revoke takes back: one of the session's or the project's, not the policy's. */
export type RevocableGrant = RequestParams<'session/revoke'>['grant'];

/** session/policy's answer. */
export type PolicyView = RequestResult<'session/policy'>;

export interface ApprovalResult {
  decision: ApprovalDecision;
}

/** Tokens summed over steps, unknown figures counted as 0 (`session/usage`). */
export interface Spend {
  input: number;
  output: number;
  cached: number;
  total: number;
}

/** `session/usage`: after each step, the branch's context against the window, and the spend so far. */
export interface UsageParams {
  sessionId: string;
  turnId: string;
  contextTokens: number;
  contextWindow: number;
  tokens: { turn: Spend; session: Spend };
  cost: { turn: number | null; session: number | null };
}

/** What `session/compact` did. */
export interface CompactResult {
  compacted: boolean;
  sessionId: string;
  turnId: string;
  step: number | null;
  turns: number;
  summary: string | null;
  tokens: Tokens;
  cost: number | null;
}

export type Budget = wire.Budget;

export type Spent = wire.Spent;

export type BudgetStatus = wire.BudgetStatus;

/** A prompt waiting in a session's queue (session/queued, session/queue). */
export interface Queued {
  sessionId: string;
  queueId: string;
  /** 1: runs when the running turn ends. */
  position: number;
  prompt: string;
  queuedAt: string;
}

export interface DequeuedParams {
  sessionId: string;
  queueId: string;
  reason: 'started' | 'dropped' | 'cancelled' | string;
}

