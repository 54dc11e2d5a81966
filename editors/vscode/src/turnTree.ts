/**
 * The turn tree view: every turn of the session (session/turns), the head marked, abandoned
 * branches kept visible. A run of turns with one follower each is shown flat; where a turn has
 * several followers, each follower starts a branch nested under it.
 */

import * as vscode from 'vscode';

import type { Turn } from './protocol';
import { turnPrompt } from './slashCommand';
import { formatCost, formatCount } from './transcript';

/** The outcomes of a turn that session/resume continues (its tree item offers Resume). */
const RESUMABLE = new Set<string>(['interrupted', 'paused']);

export interface TurnNode {
  kind: 'turn';
  turn: Turn;
  isHead: boolean;
  onHeadPath: boolean;
  /** Pinned (session/pin): sent verbatim after compaction. */
  pinned: boolean;
  branches: BranchNode[];
}

export interface BranchNode {
  kind: 'branch';
  first: Turn;
  index: number;
  onHeadPath: boolean;
  chain: TurnNode[];
}

export type TreeNode = TurnNode | BranchNode;

export function buildTurnTree(turns: Turn[], head: string | null, pinned: readonly string[] = []): TreeNode[] {
  const pins = new Set(pinned);
  const byId = new Map(turns.map((t) => [t.turnId, t]));
  const children = new Map<string | null, Turn[]>();
  for (const turn of turns) {
    const parent = turn.parentTurnId !== null && byId.has(turn.parentTurnId) ? turn.parentTurnId : null;
    const list = children.get(parent) ?? [];
    list.push(turn);
    children.set(parent, list);
  }
  const headPath = new Set<string>();
  for (let id = head; id !== null && byId.has(id) && !headPath.has(id); ) {
    headPath.add(id);
    id = byId.get(id)!.parentTurnId;
  }

  const branch = (first: Turn, index: number): BranchNode => ({
    kind: 'branch',
    first,
    index,
    onHeadPath: headPath.has(first.turnId),
    chain: chain(first),
  });

  const chain = (start: Turn): TurnNode[] => {
    const nodes: TurnNode[] = [];
    for (let turn: Turn | undefined = start; turn; ) {
      const node: TurnNode = {
        kind: 'turn',
        turn,
        isHead: turn.turnId === head,
        onHeadPath: headPath.has(turn.turnId),
        pinned: pins.has(turn.turnId),
        branches: [],
      };
      nodes.push(node);
      const next: Turn[] = children.get(turn.turnId) ?? [];
      if (next.length === 1) {
        turn = next[0];
      } else {
        node.branches = next.map((t, i) => branch(t, i + 1));
        turn = undefined;
      }
    }
    return nodes;
  };

  const roots = children.get(null) ?? [];
  if (roots.length === 1) {
    return chain(roots[0]);
  }
  return roots.map((t, i) => branch(t, i + 1));
}

export function childrenOf(node: TreeNode): TreeNode[] {
  return node.kind === 'turn' ? node.branches : node.chain;
}

/** Whether the head is in this node's subtree (so it is shown expanded). */
export function holdsHead(node: TreeNode): boolean {
  return node.kind === 'turn' ? node.branches.some((b) => b.onHeadPath) : node.onHeadPath;
}

export function firstLine(text: string, limit = 60): string {
  const line = text.trim().split('\n', 1)[0] ?? '';
  return line.length > limit ? `${line.slice(0, limit - 1)}…` : line;
}

export function turnDescription(node: TurnNode): string {
  const turn = node.turn;
  const parts: string[] = [];
  if (node.isHead) {
    parts.push('● head');
  } else if (!node.onHeadPath) {
    parts.push('abandoned');
  }
  if (node.pinned) {
    parts.push('pinned');
  }
  if (turn.outcome !== 'finished') {
    parts.push(turn.outcome);
  }
  if (turn.tokens?.total !== null && turn.tokens?.total !== undefined) {
    parts.push(`${formatCount(turn.tokens.total)} tokens`);
  }
  const cost = formatCost(turn.cost);
  if (cost) {
    parts.push(cost);
  }
  return parts.join(' · ');
}

export function treeItem(node: TreeNode): vscode.TreeItem {
  const state = (hasChildren: boolean) =>
    !hasChildren
      ? vscode.TreeItemCollapsibleState.None
      : holdsHead(node)
        ? vscode.TreeItemCollapsibleState.Expanded
        : vscode.TreeItemCollapsibleState.Collapsed;
  if (node.kind === 'branch') {
    const item = new vscode.TreeItem(node.onHeadPath ? 'current branch' : 'abandoned branch', state(true));
    item.id = `branch:${node.first.turnId}/${node.onHeadPath ? 'h' : ''}`;
    item.description = firstLine(turnPrompt(node.first));
    item.iconPath = new vscode.ThemeIcon('git-branch');
    item.contextValue = 'branch';
    return item;
  }
  const turn = node.turn;
  const named = turnPrompt(turn);
  const item = new vscode.TreeItem(firstLine(named) || '(empty prompt)', state(node.branches.length > 0));
  // The id carries the node's shape: VS Code keeps a known id's expansion, and a turn that just
  // became a fork must open where the head is.
  item.id = `${turn.turnId}/${node.branches.length}/${holdsHead(node) ? 'h' : ''}`;
  item.description = turnDescription(node);
  const prompt = turn.command ? `${named}\n\nthe command's prompt:\n${turn.prompt}` : turn.prompt;
  item.tooltip = `${prompt}\n\n${firstLine(turn.reply, 300)}\n\n${turn.outcome} · turn ${turn.turnId}`;
  item.iconPath = new vscode.ThemeIcon(
    node.pinned ? 'pinned' : node.isHead ? 'circle-filled' : node.onHeadPath ? 'circle-outline' : 'circle-small',
  );
  // `turn`, `turn-paused`…, and `.pinned` after it for a pinned turn (the menus read both).
  item.contextValue = (RESUMABLE.has(turn.outcome) ? `turn-${turn.outcome}` : 'turn') + (node.pinned ? '.pinned' : '');
  return item;
}

export interface TurnSource {
  /** The current session's turns and head, or undefined when no session is open. */
  turnTree(): Promise<{ turns: Turn[]; head: string | null; pinned?: string[] } | undefined>;
}

export class TurnTreeProvider implements vscode.TreeDataProvider<TreeNode> {
  private readonly changed = new vscode.EventEmitter<TreeNode | undefined | void>();
  readonly onDidChangeTreeData = this.changed.event;
  private roots: TreeNode[] = [];

  constructor(
    private readonly source: TurnSource,
    private readonly onError: (error: unknown) => void = () => undefined,
  ) {}

  async refresh(): Promise<void> {
    try {
      const tree = await this.source.turnTree();
      this.roots = tree ? buildTurnTree(tree.turns, tree.head, tree.pinned) : [];
    } catch (error) {
      this.onError(error);
    }
    this.changed.fire();
  }

  getTreeItem(node: TreeNode): vscode.TreeItem {
    return treeItem(node);
  }

  getChildren(node?: TreeNode): TreeNode[] {
    return node ? childrenOf(node) : this.roots;
  }

  dispose(): void {
    this.changed.dispose();
  }
}
