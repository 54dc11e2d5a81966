/**
 * What goes with the next prompt besides its text: images (**Attach Image…**, a file picker; a
 * picture pasted into the prompt box comes through the chat view) and the effort a reasoning
 * model puts in (the picker beside **Send**, **Set the Reasoning Effort…**, and the
 * `trellisd.effort` setting as its default). Both are sent with session/turn.
 */

import type { Extension } from './features';
import { fileAttachment, IMAGE_EXTENSIONS } from './images';
import { Effort, EFFORTS } from './protocol';
import * as vscodeapi from './vscodeapi';

/** A picker's or a setting's value as an effort; anything else is the model's own default. */
export function pickEffort(value: unknown): Effort | undefined {
  return EFFORTS.includes(value as Effort) ? (value as Effort) : undefined;
}

export const EFFORT_ITEMS: { label: string; description: string; effort?: Effort }[] = [
  { label: 'default', description: "the model's own" },
  { label: 'low', description: 'quick answers, little reasoning', effort: 'low' },
  { label: 'medium', description: 'some reasoning', effort: 'medium' },
  { label: 'high', description: 'the most reasoning, slower and dearer', effort: 'high' },
];

export function registerComposer({ controller, act, settings, focusChat }: Extension): vscodeapi.Disposable[] {
  controller.effort = pickEffort(settings().effort);
  const attach = async () => {
    const root = controller.session?.root ?? vscodeapi.workspaceFolders()[0]?.uri.fsPath ?? '';
    const file = await vscodeapi.showOpenDialog({
      title: 'trellisd: an image for the next prompt',
      label: 'Attach',
      filters: { Images: IMAGE_EXTENSIONS },
      ...(root ? { defaultPath: root } : {}),
    });
    if (file) {
      const { attachments } = controller;
      attachments.add(fileAttachment(file, root, attachments.nextId()));
      void focusChat();
    }
  };
  const setEffort = async () => {
    const current = controller.effort;
    const items = EFFORT_ITEMS.map((item) => ({ ...item, picked: item.effort === current }));
    const chosen = await vscodeapi.showQuickPick(items, { title: 'trellisd: reasoning effort for the next turns' });
    if (chosen) {
      controller.effort = chosen.effort;
    }
  };
  return [
    vscodeapi.registerCommand('trellisd.attachImage', act('attach an image', attach)),
    vscodeapi.registerCommand('trellisd.setEffort', act('set the effort', setEffort)),
    vscodeapi.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration('trellisd.effort')) {
        controller.effort = pickEffort(settings().effort);
      }
    }),
  ];
}
