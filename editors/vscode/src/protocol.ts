/**
 * The trellisd wire protocol as the extension names it: the method names and error codes, the
 * schema's enumerations as lists the code can walk (the tests check each against
 * protocol/schema.json), and the shapes of protocolTypes.ts (generated from the schema) under
 * the names the extension uses. Fields are camelCase, as on the wire.
 */

import type * as wire from './protocolTypes';

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
  runEvents: 'run/events',
  worktreeMerge: 'session/worktree/merge',
  worktreeDiscard: 'session/worktree/discard',
  mode: 'session/mode',
  planApprove: 'session/plan/approve',
  image: 'session/image',
  processes: 'session/processes',
  processStop: 'session/process/stop',
  commands: 'session/commands',
  hooks: 'session/hooks',
  processOutputRead: 'session/process/output',
  // daemon -> editor
  turnEnded: 'session/turnEnded',
  queued: 'session/queued',
  dequeued: 'session/dequeued',
  token: 'session/token',
  thought: 'session/thought',
  processOutput: 'session/processOutput',
  processExited: 'session/processExited',
  step: 'session/step',
  steered: 'session/steered',
  toolCall: 'session/toolCall',
  toolOutput: 'session/toolOutput',
  usage: 'session/usage',
  plan: 'session/plan',
  modeChanged: 'session/modeChanged',
  requestApproval: 'session/requestApproval',
} as const satisfies Record<string, wire.RequestMethod | wire.NotificationMethod | wire.ClientRequestMethod | 'initialized' | 'exit'>;

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
] as const satisfies readonly wire.Outcome[];

/** What a step is (its `decision` field), as the schema's `StepKind` lists them. */
export const STEP_KINDS = ['reply', 'tool', 'error', 'cancelled', 'compaction'] as const satisfies readonly wire.StepKind[];

/** Where a tool call stands (session/toolCall), as the schema's `CallStatus` lists them. */
export const CALL_STATUSES = [
  'proposed',
  'running',
  'done',
  'refused',
  'failed',
  'cancelled',
] as const satisfies readonly wire.CallStatus[];

/** The answers an editor may give to session/requestApproval, as the schema lists them. */
export const APPROVAL_DECISIONS = [
  'allow',
  'allowAlways',
  'allowAlwaysProject',
  'allowRule',
  'allowRuleProject',
  'deny',
] as const satisfies readonly ApprovalDecision[];

/** The session's approval modes, as the schema's `ApprovalMode` lists them (checked by the tests). */
export const APPROVAL_MODES = ['all', 'auto', 'acceptEdits', 'ask', 'plan', 'never'] as const satisfies readonly wire.ApprovalMode[];

/** Where an entry of a plan stands, as the schema's `PlanStatus` lists them. */
export const PLAN_STATUSES = ['pending', 'in_progress', 'completed'] as const satisfies readonly wire.PlanStatus[];

// The shapes below are protocolTypes.ts's (generated from protocol/schema.json), under the names
// the extension uses; none is written by hand.

export type {
  ApprovalMode,
  Budget,
  BudgetStatus,
  CallStatus,
  Count,
  CustomCommand,
  Effort,
  FileChange,
  ImageRef,
  ForkedFrom,
  McpServer,
  McpServerState,
  Merged,
  Outcome,
  Plan,
  PlanEntry,
  PlanStatus,
  Policy,
  Process,
  ProviderChoice,
  Queued,
  Restored,
  Session,
  SessionSummary,
  SharedWith,
  Spent,
  Step,
  Tokens,
  ToolCall,
  Turn,
  TurnRecovery,
  TurnRef,
  TurnResult,
  Worktree,
} from './protocolTypes';

/** Session.recovery: until answered with session/recover, no turn runs in the session. */
export type PendingRecovery = wire.Recovery;

export type RecoveryDecision = wire.RequestParams<'session/recover'>['decision'];

export type RecoverResult = wire.RequestResult<'session/recover'>;

/** What `initialize` gives the daemon: the user's choice of provider and its key. */
export type InitializationOptions = NonNullable<wire.RequestParams<'initialize'>['initializationOptions']>;

export type InitializeResult = wire.RequestResult<'initialize'>;

/** Why a session is a hit of session/list with a query. */
export type SearchMatch = NonNullable<wire.SessionSummary['match']>;

export type ExportResult = wire.RequestResult<'session/export'>;

export type ReopenResult = wire.RequestResult<'session/reopen'>;

/** A turn running in the daemon when the session was reopened (another window's, say). */
export type RunningTurn = NonNullable<ReopenResult['running']>;

/** A call of a running turn's uncommitted steps: where it stands, what it printed so far. */
export type LiveCall = NonNullable<RunningTurn['calls']>[number];

export type PauseResult = wire.RequestResult<'session/pause'>;

export type SessionList = wire.RequestResult<'session/list'>;

export type SteerResult = wire.RequestResult<'session/steer'>;

export type CancelResult = wire.RequestResult<'session/cancel'>;

/** How hard a reasoning model thinks, as the schema's `Effort` lists it (checked by the tests). */
export const EFFORTS = ['low', 'medium', 'high'] as const satisfies readonly wire.Effort[];

/** An image given with a prompt (session/turn's images): a file under the root, or its bytes.
 * (Written out: the generated type of the list reads `{path} | {data, mimeType}[]`.) */
export type ImageInput = { path: string } | { data: string; mimeType: wire.ImageType };

/** What the editor attaches to a prompt (session/turn's context). */
export type ContextEntry = NonNullable<wire.RequestParams<'session/turn'>['context']>[number];

export type SessionTools = wire.RequestResult<'session/tools'>;

/** One tool the model sees (session/tools). */
export type ToolInfo = SessionTools['tools'][number];

/** A remembered approval (session/policy's grants): what it allows, and where it is kept. */
export type Grant = NonNullable<wire.Policy['grants']>[number];

/** A grant session/revoke takes back: one of the session's or the project's, not the policy's. */
export type RevocableGrant = wire.RequestParams<'session/revoke'>['grant'];

/** A hook in effect for a session (session/hooks), in the order the hooks of its event run. */
export type Hook = wire.RequestResult<'session/hooks'>['hooks'][number];

/** session/policy's answer. */
export type PolicyView = wire.RequestResult<'session/policy'>;

/** What `session/compact` did. */
export type CompactResult = wire.RequestResult<'session/compact'>;

export type ApprovalParams = wire.ClientRequestParams<'session/requestApproval'>;

export type ApprovalResult = wire.ClientRequestResult<'session/requestApproval'>;

export type ApprovalDecision = ApprovalResult['decision'];

export type TokenParams = wire.NotificationParams<'session/token'>;

/** A piece of what the model reasons in a step's call, as it streams. */
export type ThoughtParams = wire.NotificationParams<'session/thought'>;

/** What a session's process printed since the previous one of it. */
export type ProcessOutputParams = wire.NotificationParams<'session/processOutput'>;

/** A session's process ended (by itself or stopped): the process as it ended. */
export type ProcessExitedParams = wire.NotificationParams<'session/processExited'>;

export type ImageResult = wire.RequestResult<'session/image'>;

export type StepParams = wire.NotificationParams<'session/step'>;

export type SteeredParams = wire.NotificationParams<'session/steered'>;

export type ToolCallParams = wire.NotificationParams<'session/toolCall'>;

/** A running command's output since the previous one of the call. */
export type ToolOutputParams = wire.NotificationParams<'session/toolOutput'>;

/** `session/usage`: after each step, the branch's context against the window, and the spend so far. */
export type UsageParams = wire.NotificationParams<'session/usage'>;

/** Tokens summed over steps, unknown figures counted as 0 (`session/usage`). */
export type Spend = UsageParams['tokens']['turn'];

/** session/turnEnded: a turn of a followed session ended (sent to every window following it). */
export type TurnEndedParams = wire.NotificationParams<'session/turnEnded'>;

export type DequeuedParams = wire.NotificationParams<'session/dequeued'>;

/** session/plan: a turn's plan as its update_plan call left it (sent to every window following the session). */
export type PlanParams = wire.NotificationParams<'session/plan'>;

/** session/modeChanged: a followed session's approval mode changed, in this window or another. */
export type ModeChangedParams = wire.NotificationParams<'session/modeChanged'>;

/** What session/plan/approve takes: the planned turn and the mode its plan runs under. */
export type PlanApproveParams = wire.RequestParams<'session/plan/approve'>;
