/**
 * Hooks (protocol/hooks.md): programs the user's config.toml, or once approved a project's
 * .trellisd.toml, names for the events of a session. **trellisd: Show Hooks** lists those in
 * effect for the open session (session/hooks) in the order they run: event, matcher, command
 * line, source and state. A project's approved hook picked there can be revoked after a
 * confirmation (session/revoke, a grant of kind hook): the next session asks again.
 */

import type { QuickPickItem } from 'vscode';

import type { Extension } from './features';
import type { Hook } from './protocol';
import * as vscodeapi from './vscodeapi';

/** The events of a tool call: a hook's matcher counts for these only. */
const TOOL_EVENTS = new Set(['preToolUse', 'permissionRequest', 'postToolUse']);

/** Where hooks come from, said when a session has none. */
export const NO_HOOKS =
  "This session has no hook: [[hooks]] tables of your config.toml, or of the project's .trellisd.toml, name them.";

export interface HookItem extends QuickPickItem {
  hook: Hook;
}

/** The command line of a project's hook as its approval is kept (session/hooks' commandLine). */
export function approvalLine(hook: Hook): string | undefined {
  return hook.commandLine || undefined;
}

/** The program and its arguments as a person types them. */
export function hookCommand(hook: Hook): string {
  return approvalLine(hook) ?? hook.command.map((w) => (w === '' || /[\s"'\\$]/.test(w) ? JSON.stringify(w) : w)).join(' ');
}

/** Whether the hook is one a person can revoke here: a project's approved hook. */
export function revocable(hook: Hook): boolean {
  return hook.source === 'project' && hook.approved && approvalLine(hook) !== undefined;
}

/** A hook in the list: "preToolUse · write_*", then source and state, then its command line. */
export function hookItem(hook: Hook): HookItem {
  const matcher = hook.matcher ?? (TOOL_EVENTS.has(hook.event) ? 'every tool' : undefined);
  return {
    label: [hook.event, matcher].filter(Boolean).join(' · '),
    description: `${hook.source} · ${hook.state} · at most ${hook.timeout} s${revocable(hook) ? ' · pick to revoke' : ''}`,
    detail: hookCommand(hook),
    hook,
  };
}

/** What picking a hook that cannot be revoked here says. */
function aboutHook(hook: Hook): string {
  if (hook.source === 'config') {
    return `trellisd: the ${hook.event} hook is your own, from your config.toml: it runs as written; edit the file to change it.`;
  }
  if (hook.approved) {
    return `trellisd: the project's ${hook.event} hook is approved for this project; this trellisd does not say which approval it is (its command line), so it cannot be revoked here.`;
  }
  if (hook.state === 'declined') {
    return `trellisd: you declined the project's ${hook.event} hook in this session; it is asked about again once the session is closed.`;
  }
  return `trellisd: the project's ${hook.event} hook is asked about the first time its event comes in a turn.`;
}

export function registerHooks({ controller, act }: Extension): vscodeapi.Disposable[] {
  const showHooks = async () => {
    const hooks = await vscodeapi.withProgress('trellisd: listing the hooks', () => controller.hooks());
    if (hooks.length === 0) {
      void vscodeapi.showInformationMessage(`trellisd: ${NO_HOOKS}`);
      return;
    }
    const picked = await vscodeapi.showQuickPick(hooks.map(hookItem), {
      title: `trellisd: the session's hooks (${hooks.length}), in the order they run`,
      placeHolder: 'event · matcher · source · state — command line (a project hook you approved can be revoked)',
      matchOnDescription: true,
      matchOnDetail: true,
    });
    if (!picked) {
      return;
    }
    const { hook } = picked;
    const line = approvalLine(hook);
    if (!line || !revocable(hook)) {
      void vscodeapi.showInformationMessage(aboutHook(hook));
      return;
    }
    const sure = await vscodeapi.confirm(
      `Revoke the approval of the project's ${hook.event} hook?`,
      `${line}\n\nIt no longer runs in this project's sessions until you approve it again: the next session asks.`,
      'Revoke',
    );
    if (sure) {
      await controller.revoke({ kind: 'hook', target: line, scope: 'project' });
      void vscodeapi.showInformationMessage(`trellisd: revoked the project's ${hook.event} hook: ${line}`);
    }
  };
  return [vscodeapi.registerCommand('trellisd.showHooks', act('show the hooks', showHooks))];
}
