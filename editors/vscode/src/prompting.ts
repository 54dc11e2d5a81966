/**
 * Prompting: sending (a steer while a turn runs; `/name args` runs a custom command, `/` alone
 * in **Send Prompt…** picks one), queueing, asking about the selection, the active file sent
 * along, and the running turn's controls (cancel, pause, step mode, take over).
 */

import type { Extension } from './features';
import type { ContextEntry } from './protocol';
import type { SessionStart } from './sessionStart';
import * as vscodeapi from './vscodeapi';

/** The most text of an editor sent with a prompt; past it, the daemon reads the file. */
const CONTEXT_BYTES = 256 * 1024;

const withText = (entry: ContextEntry, text: string): ContextEntry =>
  Buffer.byteLength(text, 'utf8') <= CONTEXT_BYTES ? { ...entry, text } : entry;

/** Sends a prompt, starting a session first when none is open. */
export function sender({ controller }: Extension, starting: SessionStart): (text: string) => Promise<void> {
  return async (text: string) => {
    if (!controller.session) {
      await starting.start();
      if (!controller.session) {
        return;
      }
    }
    await controller.send(text);
  };
}

export function registerPrompting(
  { controller, act, focusChat }: Extension,
  starting: SessionStart,
  send: (text: string) => Promise<void>,
): vscodeapi.Disposable[] {
  controller.activeFile = () => {
    const editor = vscodeapi.activeEditor();
    return editor?.scheme === 'file' ? withText({ kind: 'file', path: editor.path }, editor.text) : undefined;
  };

  /** "Ask About Selection…": a prompt about the selected lines (the whole file, with none). */
  const askAboutSelection = async () => {
    const editor = vscodeapi.activeEditor();
    if (editor?.scheme !== 'file') {
      throw new Error('open a file and select the lines to ask about');
    }
    const selection = editor.selection;
    const entry: ContextEntry = selection
      ? withText(
          { kind: 'selection', path: editor.path, range: { startLine: selection.startLine, endLine: selection.endLine } },
          selection.text,
        )
      : withText({ kind: 'file', path: editor.path }, editor.text);
    const what = selection ? `lines ${selection.startLine}–${selection.endLine}` : 'the file';
    const prompt = await vscodeapi.showInputBox({ title: `trellisd: ask about ${what}`, ignoreFocusOut: true });
    if (!prompt?.trim()) {
      return;
    }
    if (!controller.session) {
      await starting.start();
      if (!controller.session) {
        return;
      }
    }
    await focusChat();
    await controller.turn(prompt.trim(), [entry]);
  };

  return [
    vscodeapi.registerCommand(
      'trellisd.sendPrompt',
      act('send a prompt', async () => {
        const text = await vscodeapi.showInputBox({
          title: controller.isRunning ? 'trellisd: steer the running turn' : 'trellisd: prompt',
          prompt: controller.isRunning
            ? 'It reaches the model at its next step.'
            : '/name and its arguments run a custom command; / alone lists them.',
          ignoreFocusOut: true,
        });
        if (text?.trim() === '/') {
          await vscodeapi.executeCommand('trellisd.runCustomCommand'); // the box cannot complete: pick one
        } else if (text?.trim()) {
          await send(text);
        }
      }),
    ),
    vscodeapi.registerCommand(
      'trellisd.queuePrompt',
      act('queue a prompt', async () => {
        const text = await vscodeapi.showInputBox({
          title: 'trellisd: queue a prompt',
          prompt: 'It runs after the running turn (and the prompts queued before it).',
          ignoreFocusOut: true,
        });
        if (text?.trim()) {
          await controller.queuePrompt(text.trim());
        }
      }),
    ),
    vscodeapi.registerCommand('trellisd.cancelTurn', act('cancel the turn', () => controller.cancel())),
    vscodeapi.registerCommand('trellisd.askAboutSelection', act('ask about the selection', askAboutSelection)),
    vscodeapi.registerCommand(
      'trellisd.toggleActiveFile',
      act('attach the active file', async () => {
        const on = controller.toggleAttachActiveFile();
        void vscodeapi.setContext('trellisd.attachActiveFile', on);
        void vscodeapi.showInformationMessage(
          on ? 'trellisd: each prompt goes with the active file.' : 'trellisd: prompts go without the active file.',
        );
      }),
    ),
    vscodeapi.registerCommand('trellisd.pauseTurn', act('pause the turn', () => controller.pause())),
    vscodeapi.registerCommand(
      'trellisd.toggleStepMode',
      act('toggle step mode', async () => {
        const on = controller.toggleStepMode();
        void vscodeapi.showInformationMessage(
          on ? 'trellisd: step mode: each turn pauses after every step.' : 'trellisd: step mode off.',
        );
      }),
    ),
    vscodeapi.registerCommand('trellisd.takeOver', act('take the session over', () => controller.takeover())),
  ];
}
