/**
 * The walls every program of a session runs in (protocol/sandbox.md): their mode in the chat
 * view's header (`walls: workspace-write · network off`, the details in its tooltip and in
 * **Show the Session's Walls**), the settings new sessions are opened with (`trellisd.sandbox`,
 * `trellisd.network`, `trellisd.approval`), and the question a command asks to run OUTSIDE them
 * (session/requestApproval with kind `escalate`): louder than an ordinary approval, with the
 * command and the model's reason, and no "always" (a way out is allowed once, each time).
 */

import type { QuickPickItem } from 'vscode';

import type { Settings } from './config';
import type { Extension } from './features';
import type { ApprovalDecision, ApprovalParams } from './protocol';
import type { Network, Policy, SandboxMode, Walls } from './protocolTypes';
import * as vscodeapi from './vscodeapi';

export const SANDBOX_MODES: readonly SandboxMode[] = ['workspace-write', 'read-only', 'off'];

/** The approval modes, walked by the `trellisd.approval` setting and the mode picker (modes.ts). */
export { APPROVAL_MODES } from './protocol';

/** What a walled program may reach, in a few words: `network off`, `network on`, or the list. */
export function networkText(network: Network, limit = 2): string {
  if (network === false) {
    return 'network off';
  }
  if (network === true) {
    return 'network on';
  }
  if (network.length === 0) {
    return 'network off';
  }
  const more = network.length > limit ? ` +${network.length - limit} more` : '';
  return `network ${network.slice(0, limit).join(', ')}${more}`;
}

/** The walls in one line, for the header: `walls: workspace-write · network off`. */
export function wallsText(walls: { mode: SandboxMode; network: Network }): string {
  if (walls.mode === 'off') {
    return 'walls: off · programs run unconfined';
  }
  return `walls: ${walls.mode} · ${networkText(walls.network)}`;
}

function sizeText(bytes: number): string {
  const mib = bytes / (1024 * 1024);
  return Number.isInteger(mib) ? `${mib} MiB` : `${bytes} bytes`;
}

function listText(paths: string[]): string {
  return paths.length ? paths.join(', ') : 'none';
}

/** Everything the walls hold, a line each: what programs may write, what they may not read,
 * the paths of the root that stay read-only, and their bounds. */
export function wallsDetail(walls: Walls): string[] {
  const network =
    walls.network === false
      ? 'off (the session\'s own loopback only)'
      : walls.network === true
        ? "on (the host's network)"
        : `only ${listText(walls.network)}`;
  if (walls.mode === 'off') {
    return ['mode: off: programs run with everything you may do, unconfined'];
  }
  return [
    `mode: ${walls.mode}`,
    `network: ${network}`,
    `writable: ${listText(walls.writable)}`,
    `hidden (not even readable): ${listText(walls.hidden)}`,
    `protected (read-only in the root): ${listText(walls.protected)}`,
    `private /tmp of ${sizeText(walls.tempBytes)} · at most ${walls.processes} processes`,
  ];
}

/** The walls as a list to read: the mode, then each path with what the walls do to it. */
export function wallsItems(walls: Walls): QuickPickItem[] {
  if (walls.mode === 'off') {
    return [{ label: `$(warning) ${wallsText(walls)}`, detail: wallsDetail(walls)[0] }];
  }
  const items: QuickPickItem[] = [{ label: `$(shield) ${wallsText(walls)}`, detail: wallsDetail(walls)[1] }];
  const row = (icon: string, what: string) => (path: string) => ({ label: `${icon} ${path}`, description: what });
  items.push(
    ...walls.writable.map(row('$(edit)', 'writable')),
    ...walls.protected.map(row('$(lock)', 'protected: read-only in the root')),
    ...walls.hidden.map(row('$(eye-closed)', 'hidden: not even readable')),
    { label: `$(server-process) private /tmp of ${sizeText(walls.tempBytes)}`, description: `at most ${walls.processes} processes` },
  );
  return items;
}

// the settings new sessions are opened with

/** `trellisd.network` as written: true, false, a list of host:port, or unset (null). */
export function readNetwork(value: unknown): Network | null {
  if (typeof value === 'boolean') {
    return value;
  }
  if (Array.isArray(value)) {
    return value.filter((v): v is string => typeof v === 'string' && v.trim() !== '').map((v) => v.trim());
  }
  return null;
}

/** session/open's policy from the settings; undefined when they leave it to the daemon. */
export function openPolicy(settings: Pick<Settings, 'approval' | 'sandbox' | 'network'>): Policy | undefined {
  const policy: Policy = {};
  if (settings.approval) {
    policy.approval = settings.approval;
  }
  if (settings.sandbox) {
    policy.sandbox = settings.sandbox;
  }
  if (settings.network !== null) {
    policy.network = settings.network;
  }
  return Object.keys(policy).length ? policy : undefined;
}

// escalations

export function isEscalation(params: ApprovalParams): boolean {
  return params.kind === 'escalate';
}

/** The command that asks to run outside the walls, as the daemon names it. */
export function escalationCommand(params: ApprovalParams): string {
  if (params.command) {
    return params.command;
  }
  const argv = params.arguments?.argv;
  return Array.isArray(argv) ? argv.map(String).join(' ') : params.summary;
}

export function escalationTitle(params: ApprovalParams): string {
  return `⚠ trellisd: run OUTSIDE the walls? ${escalationCommand(params)}`;
}

export function escalationPlaceholder(params: ApprovalParams): string {
  return `The model's reason: ${params.reason?.trim() || '(none given)'}`;
}

/** Deny first, so that Enter alone does not let a command out; allowing is once only. */
export function escalationItems(params: ApprovalParams): (QuickPickItem & { decision: ApprovalDecision })[] {
  const reason = params.reason?.trim() || '(none given)';
  return [
    { label: '$(circle-slash) Deny', description: 'keep it inside the walls; the model is told so', decision: 'deny' },
    {
      label: '$(warning) Run outside the walls, once',
      description: 'unconfined: it may write anywhere you may, read your secrets and reach the network',
      detail: `${escalationCommand(params)} — because: ${reason}`,
      decision: 'allow',
    },
  ];
}

// the command

export function registerWalls({ controller, act }: Extension): vscodeapi.Disposable[] {
  const show = async () => {
    const walls = await controller.walls();
    await vscodeapi.showQuickPick(wallsItems(walls), {
      title: `trellisd: the walls of “${controller.session?.title || 'this session'}”'s programs`,
      matchOnDescription: true,
      matchOnDetail: true,
    });
  };
  return [vscodeapi.registerCommand('trellisd.showWalls', act("show the session's walls", show))];
}
