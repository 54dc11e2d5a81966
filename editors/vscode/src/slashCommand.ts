/**
 * A prompt that runs a custom command (protocol/commands.md): `/name` alone, or followed by
 * white space and its arguments, goes to session/turn as `command` and `arguments` instead of
 * `prompt`; the daemon expands the command's file into the turn's prompt (an unknown name is
 * its -32602). Any other prompt (`/usr/bin is missing`) is sent as written. A turn that ran a
 * command is named as it was typed (`turnPrompt`), its expansion kept at hand.
 */

export interface CommandCall {
  /** What follows `/`. */
  name: string;
  /** What follows the name ('' : none). */
  arguments: string;
}

/** A command's name as the daemon takes it, then the arguments after white space. */
const CALL = /^\/([a-z0-9][a-z0-9_-]*)(?:\s+([\s\S]*))?$/;

/** The command a prompt runs, or undefined for a prompt of words. */
export function parseCommand(prompt: string): CommandCall | undefined {
  const match = CALL.exec(prompt.trim());
  return match ? { name: match[1], arguments: (match[2] ?? '').trim() } : undefined;
}

/** The prompt that runs `name` with `args`, as a person would type it. */
export function commandPrompt(name: string, args: string): string {
  return args.trim() ? `/${name} ${args.trim()}` : `/${name}`;
}

/** How a turn is named: `/name arguments` for a turn that ran a custom command (Turn.command),
 * whose prompt is the command's expansion; its prompt otherwise. */
export function turnPrompt(turn: { prompt: string; command?: { name: string; arguments: string } }): string {
  return turn.command ? commandPrompt(turn.command.name, turn.command.arguments) : turn.prompt;
}

/** session/turn's prompt, or the command and arguments a `/name args` prompt stands for. */
export function promptParams(prompt: string): { prompt: string } | { command: string; arguments: string } {
  const call = parseCommand(prompt);
  return call ? { command: call.name, arguments: call.arguments } : { prompt };
}
