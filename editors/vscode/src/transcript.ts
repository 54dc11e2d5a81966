/**
 * The conversation as the chat view shows it: turns made of blocks (reply text, tool calls,
 * steers, approvals, notices), and their HTML. Pure: no VS Code, no daemon.
 */

import { imagesHtml, ShownImage, shownImages } from './images';
import { escapeHtml, renderMarkdown } from './markdown';
import { planMarksHtml, refusedByPlanMode } from './plan';
import { turnPrompt } from './slashCommand';
import { appendThought, reasoningText, stepBlocks, ThoughtBlock, thoughtHtml } from './thoughts';
import type { ApprovalDecision, CallStatus, ContextEntry, LiveCall, Plan, Step, Tokens, ToolCallParams, Turn, TurnRef, TurnResult } from './protocol';

export type SteerState = 'sending' | 'queued' | 'delivered' | 'undelivered' | 'failed';

export type Block =
  | { kind: 'text'; step: number; text: string; html?: string }
  | {
      kind: 'tool';
      step: number;
      name: string;
      arguments: Record<string, unknown>;
      result: string | null;
      /** Live calls (session/toolCall): the call's id, where it stands, what it printed so far. */
      callId?: string;
      status?: CallStatus;
      output?: string;
      /** A `task` call's child session, once it started: drawn under the call. */
      child?: ChildRun;
    }
  | { kind: 'steer'; clientMsgId: string; text: string; state: SteerState; step?: number; note?: string }
  | {
      kind: 'approval';
      tool: string;
      summary: string;
      arguments: Record<string, unknown>;
      decision: ApprovalDecision | 'pending' | 'withdrawn';
      /** A command that asked to run outside the walls, and the model's reason. */
      escalate?: { command: string; reason: string };
      /** The rule an allowRule or allowRuleProject answer saved (the approval's proposedRule). */
      rule?: string[];
    }
  | { kind: 'notice'; level: 'info' | 'error'; text: string }
  /** What the model reasoned in a step's call: drawn folded under the step. */
  | ThoughtBlock;

export interface TranscriptTurn {
  /** Stable in the view: the turn id once known, a local key before. */
  key: string;
  turnId?: string;
  /** As the user typed it: `/name arguments` for a turn that ran a custom command. */
  prompt: string;
  /** A custom command's turn: the prompt the command expanded to (what the model was sent). */
  expansion?: string;
  blocks: Block[];
  outcome: string;
  tokens?: Tokens;
  cost?: number | null;
  model?: string | null;
  error?: string;
  /** The turn's last plan (update_plan), and the planned turn whose plan it carries out. */
  plan?: Plan;
  followsPlan?: { turnId: string; name?: string };
  /** The images the prompt carried (Turn.images), with their pictures once read. */
  images?: ShownImage[];
}

/** A child session a `task` call started, as the parent's view shows it: its turn (its text,
 * tool calls and approvals as they stream, its outcome when it ends) and how to open it. */
export interface ChildRun {
  sessionId: string;
  /** The child's one turn; its prompt is the task call's until the daemon says it. */
  turn: TranscriptTurn;
}

/** "“count the files”", or the start of the child's id while its prompt is not known. */
export function childName(child: ChildRun): string {
  const prompt = child.turn.prompt.replace(/\s+/g, ' ').trim();
  if (!prompt) {
    return `child session ${child.sessionId.slice(0, 8)}`;
  }
  return `child session “${prompt.length > 60 ? `${prompt.slice(0, 60)}…` : prompt}”`;
}

/** The child under its task call: a line saying where it stands, with a link that opens it,
 * and what it streamed, folded (open while it runs). */
export function childHtml(child: ChildRun): string {
  const turn = child.turn;
  const state = turn.outcome === 'running' ? 'running…' : footerText(turn);
  const error = turn.error ? `<div class="turn-error">${escapeHtml(turn.error)}</div>` : '';
  return (
    `<details class="child child-${escapeHtml(turn.outcome)}" data-child-session="${escapeHtml(child.sessionId)}"${turn.outcome === 'running' ? ' open' : ''}>` +
    `<summary><span class="child-name">${escapeHtml(childName(child))}</span>` +
    ` <span class="child-state">${escapeHtml(state)}</span>` +
    ` <a href="#" class="child-open" data-open-session="${escapeHtml(child.sessionId)}">open</a></summary>` +
    `<div class="child-body">${bodyHtml(turn)}${error}</div></details>`
  );
}

export function fromHistory(turn: Turn): TranscriptTurn {
  // The reply is the last step's text; the steps' texts replace it once read (withStepTexts).
  return {
    key: turn.turnId,
    turnId: turn.turnId,
    prompt: turnPrompt(turn),
    ...(turn.command ? { expansion: turn.prompt } : {}),
    blocks: turn.reply ? [{ kind: 'text', step: 1, text: turn.reply }] : [],
    outcome: turn.outcome,
    tokens: turn.tokens,
    cost: turn.cost,
    model: turn.model,
    error: turn.error,
    ...(turn.plan ? { plan: turn.plan } : {}),
    ...(turn.followsPlan ? { followsPlan: { turnId: turn.followsPlan.turnId } } : {}),
    ...(turn.images?.length ? { images: shownImages(turn.images) } : {}),
  };
}

/** A turn drawn from the history with its reply (the last step's text) shows every step's
 * text instead, in order, each under its thought (folded), once its steps are read; false when
 * that changes nothing. */
export function withStepTexts(turn: TranscriptTurn, steps: Step[]): boolean {
  const texts: Block[] = steps.flatMap(stepBlocks);
  const drawn = turn.blocks.filter((b) => b.kind === 'text' || b.kind === 'thought');
  const same = (a: Block, b: Block) => a.kind === b.kind && (a as { text: string }).text === (b as { text: string }).text;
  if (!texts.length || (drawn.length === texts.length && drawn.every((b, i) => same(b, texts[i])))) {
    return false;
  }
  turn.blocks = [...texts, ...turn.blocks.filter((b) => b.kind !== 'text' && b.kind !== 'thought')];
  return true;
}

/** A running turn joined mid-way, drawn with its stored reply (the last committed step's
 * text): the committed steps' texts take the reply's place once read, so that the earlier
 * steps show too. `current`: the step being streamed (null: between steps). False when
 * nothing changed (the reply is not the last committed step's: an older daemon's). */
export function withCommittedSteps(turn: TranscriptTurn, reply: string, steps: Step[], current: number | null): boolean {
  const committed = steps.filter((s) => s.text && (current === null || s.step < current));
  if (committed.length < 2 && reply) {
    return false; // the reply is all there is
  }
  const at = turn.blocks.findIndex((b) => b.kind === 'text');
  const first = at >= 0 ? (turn.blocks[at] as Extract<Block, { kind: 'text' }>) : undefined;
  const blocks: Block[] = committed.map((s) => ({ kind: 'text', step: s.step, text: s.text }));
  if (reply) {
    if (committed[committed.length - 1].text !== reply || first?.text !== reply) {
      return false;
    }
    turn.blocks.splice(at, 1, ...blocks);
  } else if (committed.length) {
    turn.blocks.unshift(...blocks);
  } else {
    return false;
  }
  return true;
}

function pendingSteer(block: Block | undefined): boolean {
  return block?.kind === 'steer' && (block.state === 'sending' || block.state === 'queued');
}

/** Where the next block goes: before the steers still waiting, which stay last until the
 * model gets them. */
function insertionPoint(turn: TranscriptTurn): number {
  let i = turn.blocks.length;
  while (i > 0 && pendingSteer(turn.blocks[i - 1])) {
    i--;
  }
  return i;
}

/** Append a streamed piece: to the last text block of the same step, else a new block. */
export function appendText(turn: TranscriptTurn, step: number, text: string): void {
  const at = insertionPoint(turn);
  const last = turn.blocks[at - 1];
  if (last && last.kind === 'text' && last.step === step) {
    last.text += text;
    last.html = undefined;
  } else {
    turn.blocks.splice(at, 0, { kind: 'text', step, text });
  }
}

/** Append a streamed piece of a step's reasoning (session/thought), before the step's text. */
export function appendThoughtText(turn: TranscriptTurn, step: number, text: string): void {
  appendThought(turn.blocks, insertionPoint(turn), step, text);
}

/** Add a tool call, an approval or a notice where it happened. */
export function addBlock(turn: TranscriptTurn, block: Block): void {
  turn.blocks.splice(insertionPoint(turn), 0, block);
}

/** A steer the model got: it goes where the step that carries it begins, which is now (the
 * daemon announces a delivery before that step's first piece). */
export function steerDelivered(turn: TranscriptTurn, block: Extract<Block, { kind: 'steer' }>, step: number): void {
  turn.blocks = turn.blocks.filter((b) => b !== block);
  block.state = 'delivered';
  block.step = step;
  block.note = undefined;
  turn.blocks.push(block);
}

type ToolBlock = Extract<Block, { kind: 'tool' }>;

function findCall(turn: TranscriptTurn, callId: string): ToolBlock | undefined {
  return turn.blocks.find((b): b is ToolBlock => b.kind === 'tool' && b.callId === callId);
}

/** A tool call changed status: drawn when the model proposes it, then updated in place. */
export function callChanged(turn: TranscriptTurn, p: ToolCallParams): void {
  const block = findCall(turn, p.callId);
  if (block) {
    block.status = p.status;
    return;
  }
  addBlock(turn, {
    kind: 'tool',
    step: p.step,
    name: p.tool,
    arguments: p.arguments ?? {},
    result: null,
    callId: p.callId,
    status: p.status,
  });
}

/** A call of a running turn as a reopen found it: drawn (or redrawn) with its output so far. */
export function callFound(turn: TranscriptTurn, ref: TurnRef, call: LiveCall): void {
  callChanged(turn, { ...ref, step: call.step, callId: call.callId, tool: call.tool, arguments: call.arguments, status: call.status });
  const block = findCall(turn, call.callId);
  if (block && call.output) {
    block.output = call.output.slice(0, OUTPUT_LIMIT);
  }
}

/** The most output a call shows; the daemon caps it per call well below this. */
const OUTPUT_LIMIT = 64 * 1024;

/** A running command printed `text`; false when the call is not drawn here. */
export function callPrinted(turn: TranscriptTurn, callId: string, text: string): boolean {
  const block = findCall(turn, callId);
  if (!block) {
    return false;
  }
  const output = (block.output ?? '') + text;
  block.output = output.length > OUTPUT_LIMIT ? output.slice(0, OUTPUT_LIMIT) : output;
  return true;
}

/** The call's step is committed: its result goes on the block drawn live; false when none is. */
export function callEnded(turn: TranscriptTurn, callId: string, result: string | null): boolean {
  const block = findCall(turn, callId);
  if (!block) {
    return false;
  }
  block.result = result;
  return true;
}

/** "with lines 3–7 of src/app.py, notes.txt": what the editor attached to a prompt. */
export function contextLine(context: ContextEntry[], relative: (path: string) => string = (p) => p): string {
  const parts = context.map((entry) => {
    const path = relative(entry.path);
    if (entry.kind === 'diagnostics') {
      return `the diagnostics of ${path}`;
    }
    return entry.range ? `lines ${entry.range.startLine}–${entry.range.endLine} of ${path}` : path;
  });
  return `with ${parts.join(', ')}`;
}

export function finish(turn: TranscriptTurn, result: TurnResult): void {
  turn.turnId = result.turnId;
  turn.outcome = result.outcome;
  turn.tokens = result.tokens;
  turn.cost = result.cost;
  turn.model = result.model;
  turn.error = result.error;
  // The reply is the last step's text (the earlier steps' texts are drawn as they streamed).
  const texts = turn.blocks.filter((b): b is Extract<Block, { kind: 'text' }> => b.kind === 'text');
  const last = texts[texts.length - 1];
  if (!result.reply || last?.text === result.reply) {
    return;
  }
  if (!texts.length) {
    // nothing streamed here (the view was attached late): the reply stands for the turn
    turn.blocks.splice(insertionPoint(turn), 0, { kind: 'text', step: 1, text: result.reply });
  } else if (result.reply.startsWith(last.text) || last.text === '') {
    last.text = result.reply; // the last pieces were missed
    last.html = undefined;
  }
}

export function formatCount(n: number | null | undefined): string {
  return n === null || n === undefined ? '?' : n.toLocaleString('en-US');
}

export function formatCost(cost: number | null | undefined): string | undefined {
  if (cost === undefined) {
    return undefined;
  }
  if (cost === null) {
    return 'cost unknown';
  }
  if (cost === 0) {
    return '$0';
  }
  return cost < 0.01 ? `$${cost.toFixed(4)}` : `$${cost.toFixed(2)}`;
}

export function formatTokens(tokens: Tokens | undefined): string | undefined {
  if (!tokens) {
    return undefined;
  }
  if (tokens.total === null && tokens.input === null && tokens.output === null) {
    return 'tokens unknown';
  }
  const cached = tokens.cached ? `, ${formatCount(tokens.cached)} cached` : '';
  const reasoning = reasoningText(tokens, formatCount);
  return `${formatCount(tokens.total)} tokens (${formatCount(tokens.input)} in${cached}, ${formatCount(tokens.output)} out${reasoning})`;
}

/** "finished · gpt-4o-mini · 120 tokens (100 in, 20 out) · $0.0012" */
export function footerText(turn: Pick<TranscriptTurn, 'outcome' | 'tokens' | 'cost' | 'model'>): string {
  return [turn.outcome, turn.model, formatTokens(turn.tokens), formatCost(turn.cost)].filter(Boolean).join(' · ');
}

function compactJson(value: unknown, limit = 400): string {
  let text: string;
  try {
    text = JSON.stringify(value);
  } catch {
    text = String(value);
  }
  return text.length > limit ? `${text.slice(0, limit)}…` : text;
}

export function prettyJson(value: unknown): string {
  try {
    return JSON.stringify(value, null, 2);
  } catch {
    return String(value);
  }
}

const STEER_NOTES: Record<SteerState, string> = {
  sending: 'sending…',
  queued: 'queued: it reaches the model at its next step',
  delivered: 'delivered',
  undelivered: 'not delivered: the turn ended first (it is back in the input box)',
  failed: 'not sent',
};

const DECISIONS: Record<ApprovalDecision | 'pending' | 'withdrawn', string> = {
  pending: 'waiting for your answer',
  withdrawn: 'withdrawn: answered in another window, or the turn ended first',
  allow: 'allowed once',
  allowAlways: 'allowed always for this session',
  allowAlwaysProject: 'allowed always for this project',
  allowRule: 'allowed always for this session by a rule',
  allowRuleProject: 'allowed always for this project by a rule',
  deny: 'denied',
};

/** A rule's words as a person types them: `pytest **`, a word with spaces quoted. */
export function ruleText(rule: readonly string[]): string {
  return rule.map((w) => (w === '' || /[\s"'\\]/.test(w) ? JSON.stringify(w) : w)).join(' ');
}

/** A rule grant's target is its pattern as a JSON array (session/policy, session/revoke). */
export function ruleWords(target: string): string[] {
  try {
    const words: unknown = JSON.parse(target);
    return Array.isArray(words) ? words.map(String) : [target];
  } catch {
    return [target];
  }
}

export function blockHtml(block: Block, turnKey = ''): string {
  switch (block.kind) {
    case 'thought':
      return thoughtHtml(block, turnKey);
    case 'text':
      block.html ??= renderMarkdown(block.text);
      return `<div class="text">${block.html}</div>`;
    case 'tool': {
      const result = block.result === null ? '' : firstLine(block.result);
      const status = block.status
        ? ` <span class="tool-status tool-status-${block.status}">${escapeHtml(block.status)}</span>`
        : '';
      const output = block.output ? `<pre class="tool-output">${escapeHtml(block.output)}</pre>` : '';
      // refused by plan mode: said plainly, as what the mode is for, not as a failure
      const planMode = refusedByPlanMode(block.result)
        ? ' <span class="tool-refused-plan">refused: the session is in plan mode</span>'
        : '';
      return (
        `<div class="tool"><span class="tool-name">${escapeHtml(block.name)}</span>` +
        ` <code class="tool-args">${escapeHtml(compactJson(block.arguments))}</code>` +
        status +
        planMode +
        (result ? ` <span class="tool-result">→ ${escapeHtml(result)}</span>` : '') +
        output +
        (block.child ? childHtml(block.child) : '') +
        '</div>'
      );
    }
    case 'steer': {
      const note =
        block.note ??
        (block.state === 'delivered' && block.step !== undefined
          ? `delivered at step ${block.step}`
          : STEER_NOTES[block.state]);
      return (
        `<div class="steer steer-${block.state}" data-client-msg-id="${escapeHtml(block.clientMsgId)}">` +
        `<span class="steer-label">steer</span> <span class="steer-text">${escapeHtml(block.text)}</span>` +
        ` <span class="steer-note">${escapeHtml(note)}</span></div>`
      );
    }
    case 'approval':
      if (block.escalate) {
        return escalationHtml(block, block.escalate);
      }
      return (
        `<div class="approval approval-${block.decision}">` +
        `<div class="approval-head"><span class="approval-tool">${escapeHtml(block.tool)}</span>` +
        ` <span class="approval-decision">${escapeHtml(DECISIONS[block.decision])}</span>` +
        (block.rule && (block.decision === 'allowRule' || block.decision === 'allowRuleProject')
          ? ` <code class="approval-rule">${escapeHtml(ruleText(block.rule))}</code>`
          : '') +
        '</div>' +
        `<div class="approval-summary">${escapeHtml(block.summary)}</div>` +
        `<pre class="approval-args">${escapeHtml(prettyJson(block.arguments))}</pre></div>`
      );
    case 'notice':
      return `<div class="notice notice-${block.level}">${escapeHtml(block.text)}</div>`;
  }
}

/** An escalation: drawn apart from an ordinary approval, with the command and the reason. */
function escalationHtml(block: Extract<Block, { kind: 'approval' }>, escalate: { command: string; reason: string }): string {
  const decision = block.decision === 'allow' || block.decision === 'allowAlways' || block.decision === 'allowAlwaysProject'
    ? 'allowed once: it ran outside the walls'
    : DECISIONS[block.decision];
  return (
    `<div class="approval escalation approval-${block.decision}">` +
    `<div class="approval-head"><span class="escalation-label">⚠ escalation: run OUTSIDE the walls</span>` +
    ` <span class="approval-decision">${escapeHtml(decision)}</span></div>` +
    `<pre class="escalation-command">${escapeHtml(escalate.command)}</pre>` +
    `<div class="escalation-reason">because: ${escapeHtml(escalate.reason || '(no reason given)')}</div></div>`
  );
}

export function bodyHtml(turn: TranscriptTurn): string {
  return turn.blocks.map((b) => blockHtml(b, turn.key)).join('');
}

export function footerHtml(turn: TranscriptTurn): string {
  const error = turn.error ? `<div class="turn-error">${escapeHtml(turn.error)}</div>` : '';
  const footer = turn.outcome === 'running' ? 'running…' : footerText(turn);
  return `${planMarksHtml(turn)}${error}<div class="turn-footer outcome-${escapeHtml(turn.outcome)}">${escapeHtml(footer)}</div>`;
}

/** What the webview needs to draw or redraw one turn. */
export interface TurnView {
  key: string;
  turnId?: string;
  prompt: string;
  body: string;
  footer: string;
  outcome: string;
}

/** A custom command's expansion under the prompt that named it, folded. */
export function expansionHtml(expansion: string | undefined): string {
  return expansion === undefined
    ? ''
    : `<details class="command-expansion"><summary>the command's prompt</summary><div class="expansion">${escapeHtml(expansion)}</div></details>`;
}

export function turnView(turn: TranscriptTurn): TurnView {
  return {
    key: turn.key,
    turnId: turn.turnId,
    prompt: escapeHtml(turn.prompt) + expansionHtml(turn.expansion),
    body: imagesHtml(turn.images) + bodyHtml(turn),
    footer: footerHtml(turn),
    outcome: turn.outcome,
  };
}

function firstLine(text: string, limit = 160): string {
  const line = text.split('\n', 1)[0];
  return line.length > limit ? `${line.slice(0, limit)}…` : line;
}
