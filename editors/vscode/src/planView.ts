/**
 * The **Plan** view beside the conversation: the live plan (the running turn's as session/plan
 * replaces it, else the newest planned turn's), an entry a row with its status icon and its
 * priority; and **Run this plan** (the view's title, a planned turn's button in the chat view, the
 * palette), which asks which mode the plan runs under and runs it in a new turn.
 */

import * as vscode from 'vscode';

import type { Extension } from './features';
import { RUN_MODES, modeItems } from './modes';
import { entryDescription, LivePlan, planTurnText, progressText, STATUS_ICONS } from './plan';
import type { ApprovalMode, PlanEntry } from './protocol';
import type { SessionController } from './session';
import * as vscodeapi from './vscodeapi';

export interface PlanNode {
  index: number;
  entry: PlanEntry;
}

export function planItem(node: PlanNode): vscode.TreeItem {
  const item = new vscode.TreeItem(node.entry.content);
  item.id = `plan:${node.index}:${node.entry.status}`;
  item.description = entryDescription(node.entry);
  item.tooltip = `${node.index + 1}. ${node.entry.content}\n${entryDescription(node.entry)}`;
  item.iconPath = new vscode.ThemeIcon(STATUS_ICONS[node.entry.status]);
  item.contextValue = `planEntry-${node.entry.status}`;
  return item;
}

/** The view's description: whose plan it is and how far it has come. */
export function planDescription(plan: LivePlan | undefined): string {
  return plan ? `${progressText(plan.plan.entries)} · ${planTurnText(plan.turnId, plan.name)}` : '';
}

export class PlanTreeProvider implements vscode.TreeDataProvider<PlanNode> {
  private readonly changed = new vscode.EventEmitter<PlanNode | undefined | void>();
  readonly onDidChangeTreeData = this.changed.event;
  private nodes: PlanNode[] = [];

  /** The plan drawn now. */
  plan?: LivePlan;

  show(plan: LivePlan | undefined): void {
    this.plan = plan;
    this.nodes = plan ? plan.plan.entries.map((entry, index) => ({ index, entry })) : [];
    this.changed.fire();
  }

  getTreeItem(node: PlanNode): vscode.TreeItem {
    return planItem(node);
  }

  getChildren(node?: PlanNode): PlanNode[] {
    return node ? [] : this.nodes;
  }

  dispose(): void {
    this.changed.dispose();
  }
}

/** The planned turn to run: the one given, else one picked (the newest first, Enter takes it). */
async function pickPlanned(controller: SessionController, turnId?: unknown): Promise<string | undefined> {
  if (typeof turnId === 'string' && turnId) {
    return turnId;
  }
  const planned = controller.plannedTurns();
  if (!planned.length) {
    throw new Error('No turn of this session made a plan yet: a turn in plan mode lays one out.');
  }
  if (planned.length === 1) {
    return planned[0].turnId;
  }
  const picked = await vscodeapi.showQuickPick(
    planned.map((t) => ({
      label: planTurnText(t.turnId!, t.prompt.replace(/\s+/g, ' ').trim().slice(0, 60)),
      description: `plan: ${progressText(t.plan!.entries)}`,
      turnId: t.turnId!,
    })),
    { title: 'trellisd: run the plan of which turn?' },
  );
  return picked?.turnId;
}

/** The mode the plan runs under: the mode before plan mode first (else ask). */
export async function pickRunMode(controller: SessionController): Promise<ApprovalMode | undefined> {
  const before = controller.modeBeforePlan;
  const first = RUN_MODES.includes(before) ? before : 'ask';
  const picked = await vscodeapi.showQuickPick(modeItems(RUN_MODES, undefined, first), {
    title: 'trellisd: run the plan under which approval mode?',
    placeHolder: 'The session keeps this mode after the plan is run',
    matchOnDetail: true,
  });
  return picked?.mode;
}

export function registerPlan({ controller, act, focusChat }: Extension): vscodeapi.Disposable[] {
  const provider = new PlanTreeProvider();
  const view = vscodeapi.createTreeView('trellisd.plan', { treeDataProvider: provider });
  const draw = (plan: LivePlan | undefined) => {
    provider.show(plan);
    view.description = planDescription(plan);
    void vscodeapi.setContext('trellisd.hasPlan', !!plan);
  };
  const run = async (turnId?: unknown) => {
    const planned = await pickPlanned(controller, turnId);
    const approval = planned ? await pickRunMode(controller) : undefined;
    if (planned && approval) {
      void focusChat();
      await controller.runPlan(planned, approval);
    }
  };
  draw(controller.plan);
  return [
    provider,
    view,
    controller.onDidChangePlan(draw),
    vscodeapi.registerCommand('trellisd.runPlan', act('run the plan', run)),
  ];
}
