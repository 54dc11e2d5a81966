/**
 * Custom commands (protocol/commands.md): prompt files of the user's commands folder and of the
 * project's .trellisd/commands/, run by name. **trellisd: Run Custom Command…** lists the open
 * session's (session/commands: name, argument hint, source, description, the settings each runs
 * with), asks for the arguments (the hint as the placeholder) and runs the turn; the chat's
 * prompt box offers them as `/` is typed (chatView.ts, media/chat.js); and a prompt typed as
 * `/name args` anywhere runs the command (slashCommand.ts).
 */

import type { QuickPickItem } from 'vscode';

import type { Extension } from './features';
import type { CustomCommand } from './protocol';
import { commandPrompt } from './slashCommand';
import * as vscodeapi from './vscodeapi';

/** Where commands come from, said when a session has none. */
export const NO_COMMANDS =
  "This session has no custom command: a <name>.md file in the project's .trellisd/commands/, or in the commands folder beside your config.toml, is one.";

/** A command as the prompt box's completion lists it. */
export interface CommandEntry {
  name: string;
  hint: string;
  description: string;
  source: string;
}

export interface CommandItem extends QuickPickItem {
  command: CustomCommand;
}

/** A setting's value as a person reads it: "pytest -q $ARGUMENTS", "$0.5", "30". */
export function settingText(name: string, value: unknown): string {
  if (value === null || value === undefined) {
    return "the session's";
  }
  if (name === 'verify' && Array.isArray(value)) {
    return value.map(String).join(' ');
  }
  if (name === 'budget' && typeof value === 'number') {
    return `$${value}`;
  }
  return typeof value === 'object' ? JSON.stringify(value) : String(value);
}

const SETTINGS = ['verify', 'maxSteps', 'budget', 'model', 'approval', 'effort'] as const;

/** The settings a command runs with, on one line: "verify pytest -q · maxSteps 30"; '' : none. */
export function settingsLine(command: CustomCommand): string {
  const settings = (command.settings ?? {}) as Record<string, unknown>;
  return SETTINGS.filter((name) => settings[name] !== undefined && settings[name] !== null)
    .map((name) => `${name} ${settingText(name, settings[name])}`)
    .join(' · ');
}

/** What a project's command had narrowed: "approval: asked all, runs with the session's (why)". */
export function narrowedLines(command: CustomCommand): string[] {
  return (command.narrowed ?? []).map(
    (n) =>
      `${n.setting}: asked ${settingText(n.setting, n.asked)}, runs with ${settingText(n.setting, n.applied)}` +
      (n.reason ? ` (${n.reason})` : ''),
  );
}

/** "[test path] · project": the argument hint and the source. */
function hintAndSource(command: CustomCommand): string {
  const source = command.shadowsProject ? 'user, over the project’s' : command.source;
  return [command.argumentHint, source].filter(Boolean).join(' · ');
}

/** A command in the quick pick: `/name`, its hint and source, then what it does and runs with. */
export function commandItem(command: CustomCommand): CommandItem {
  const settings = settingsLine(command);
  const narrowed = narrowedLines(command).map((line) => `narrowed ${line}`);
  return {
    label: `/${command.name}`,
    description: hintAndSource(command),
    detail: [command.description, settings, ...narrowed].filter(Boolean).join(' — ') || undefined,
    command,
  };
}

/** The commands as the prompt box's completion lists them. */
export function commandEntries(commands: CustomCommand[]): CommandEntry[] {
  return commands.map((c) => ({
    name: c.name,
    hint: c.argumentHint ?? '',
    description: c.description ?? '',
    source: c.shadowsProject ? 'user' : c.source,
  }));
}

export function registerCustomCommands({ controller, act, focusChat }: Extension): vscodeapi.Disposable[] {
  /** Pick one of the session's commands, type its arguments, and run its turn here. */
  const runCustomCommand = async () => {
    const commands = await vscodeapi.withProgress('trellisd: listing the custom commands', () => controller.commands());
    if (commands.length === 0) {
      void vscodeapi.showInformationMessage(`trellisd: ${NO_COMMANDS}`);
      return;
    }
    const picked = await vscodeapi.showQuickPick(commands.map(commandItem), {
      title: `trellisd: run a custom command (${commands.length})`,
      placeHolder: '/name · argument hint · source (user or project) · what it does',
      matchOnDescription: true,
      matchOnDetail: true,
    });
    if (!picked) {
      return;
    }
    const { name, argumentHint, description } = picked.command;
    const args = await vscodeapi.showInputBox({
      title: `trellisd: /${name}`,
      prompt: [description, 'Enter runs it.'].filter(Boolean).join(' — '),
      placeHolder: argumentHint || 'arguments (none needed)',
      ignoreFocusOut: true,
    });
    if (args === undefined) {
      return;
    }
    await focusChat();
    await controller.turn(commandPrompt(name, args));
  };
  return [vscodeapi.registerCommand('trellisd.runCustomCommand', act('run a custom command', runCustomCommand))];
}
