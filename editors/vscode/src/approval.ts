/**
 * Answering session/requestApproval: a quick pick that stays open until answered, showing the
 * tool, its arguments and the daemon's summary. Closing it denies; so does the daemon taking the
 * request back (the turn was cancelled). A command the daemon proposes a rule for
 * (`proposedRule`) may also be allowed by that rule, for the session or for the project: the
 * rule's exact words are in the choice.
 */

import type { QuickPickItem } from 'vscode';

import type { ApprovalDecision, ApprovalParams } from './protocol';
import { ruleText } from './transcript';
import * as vscodeapi from './vscodeapi';
import { escalationItems, escalationPlaceholder, escalationTitle, isEscalation } from './walls';

export interface ApprovalItem extends QuickPickItem {
  decision: ApprovalDecision;
}

export function approvalItems(params: ApprovalParams): ApprovalItem[] {
  return [
    { label: '$(check) Allow once', description: `run ${params.tool} this time`, decision: 'allow' },
    {
      label: '$(check-all) Allow always (this session)',
      description: 'do not ask again for this in this session',
      decision: 'allowAlways',
    },
    {
      label: '$(root-folder) Allow always (this project)',
      description: 'do not ask again for this in any session of this folder',
      decision: 'allowAlwaysProject',
    },
    ...ruleItems(params.proposedRule),
    { label: '$(circle-slash) Deny', description: 'refuse; the model is told so', decision: 'deny' },
  ];
}

/** "Always allow `pytest **` in this session" and "… for this project", when a rule is proposed. */
export function ruleItems(rule: readonly string[] | undefined): ApprovalItem[] {
  if (!rule?.length) {
    return [];
  }
  const words = ruleText(rule);
  const open = rule[rule.length - 1] === '**';
  const detail = open ? `any command that starts with ${ruleText(rule.slice(0, -1))}, whatever follows` : `the command ${words} only`;
  return [
    { label: `$(list-filter) Always allow \`${words}\` in this session`, description: 'save this rule for the session', detail, decision: 'allowRule' },
    {
      label: `$(list-filter) Always allow \`${words}\` for this project`,
      description: 'save this rule for every session of this folder',
      detail,
      decision: 'allowRuleProject',
    },
  ];
}

/** The question's title; `asker` names the child session that asks (the task tool's), if one does. */
export function approvalTitle(params: ApprovalParams, asker?: string): string {
  if (asker) {
    return `trellisd: ${asker} asks: ${approvalTitle(params).replace(/^trellisd: /, '')}`;
  }
  const mcp = params.mcp;
  if (mcp?.start) {
    return `trellisd: start MCP server ${mcp.server} from the project's .trellisd.toml? ${mcp.start}`;
  }
  if (mcp) {
    return `trellisd: allow MCP tool ${mcp.tool} of server ${mcp.server}? ${params.summary}`.trim();
  }
  return `trellisd: allow ${params.tool}? ${params.summary}`.trim();
}

export function argumentsLine(args: Record<string, unknown>, limit = 300): string {
  let text: string;
  try {
    text = JSON.stringify(args);
  } catch {
    text = String(args);
  }
  return text.length > limit ? `${text.slice(0, limit)}…` : text;
}

export function askApproval(params: ApprovalParams, token: vscodeapi.CancellationToken, asker?: string): Promise<ApprovalDecision> {
  const pick = vscodeapi.createQuickPick<ApprovalItem>();
  // a command asking to run outside the walls is asked apart: louder, and never "always"
  const escalation = isEscalation(params);
  pick.title = escalation ? escalationTitle(params) : approvalTitle(params, asker);
  pick.placeholder = escalation ? escalationPlaceholder(params) : `${params.tool} ${argumentsLine(params.arguments)}`;
  pick.items = escalation ? escalationItems(params) : approvalItems(params);
  pick.ignoreFocusOut = true;
  pick.matchOnDescription = true;
  return new Promise<ApprovalDecision>((resolve) => {
    let settled = false;
    const subscriptions: vscodeapi.Disposable[] = [];
    const settle = (decision: ApprovalDecision) => {
      if (settled) {
        return;
      }
      settled = true;
      resolve(decision);
      subscriptions.forEach((s) => s.dispose());
      pick.dispose();
    };
    subscriptions.push(
      pick.onDidAccept(() => settle(pick.selectedItems[0]?.decision ?? 'deny')),
      pick.onDidHide(() => settle('deny')),
      token.onCancellationRequested(() => settle('deny')),
    );
    if (token.isCancellationRequested) {
      settle('deny');
      return;
    }
    pick.show();
  });
}
