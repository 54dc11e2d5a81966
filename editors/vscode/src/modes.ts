/**
 * The session's approval mode (protocol/plans.md): each mode in a line, the mode in the chat
 * view's header and in the status bar, **Set the Session's Approval Mode…** (session/mode, any
 * mode), and the plan-mode toggle, which switches the session to `plan` and back to the mode it
 * had before. The mode is the session's, kept by the daemon: it holds after a restart and in
 * every window.
 */

import type { QuickPickItem } from 'vscode';

import type { Extension } from './features';
import { APPROVAL_MODES, ApprovalMode } from './protocol';
import * as vscodeapi from './vscodeapi';

/** What each mode lets run without asking, in a line. */
export const MODE_DESCRIPTIONS: Record<ApprovalMode, string> = {
  all: 'never asks: whatever the rules allow runs',
  auto: 'what the walls hold runs without asking; protected paths, MCP tools and escalations ask',
  acceptEdits: 'writes inside the folder run without asking; commands and MCP tools ask',
  ask: 'asks before every write and command (unless remembered)',
  plan: 'read and plan only: every write, command and MCP tool call is refused until you run the plan',
  never: 'read-only: every write and command is refused',
};

/** The modes a plan may run under (Run this plan). */
export const RUN_MODES: readonly ApprovalMode[] = ['ask', 'acceptEdits', 'auto'];

/** "mode: plan", for the header. */
export function modeText(mode: ApprovalMode): string {
  return `mode: ${mode}`;
}

export interface ModeItem extends QuickPickItem {
  mode: ApprovalMode;
}

/** Each mode with its line; `current` marked, `first` (if any) at the top. */
export function modeItems(modes: readonly ApprovalMode[], current?: ApprovalMode, first?: ApprovalMode): ModeItem[] {
  const ordered = first && modes.includes(first) ? [first, ...modes.filter((m) => m !== first)] : [...modes];
  return ordered.map((mode) => ({
    label: `${mode === current ? '$(check) ' : ''}${mode}`,
    description: [mode === current ? 'now' : '', mode === first ? 'default' : ''].filter(Boolean).join(' · '),
    detail: MODE_DESCRIPTIONS[mode],
    mode,
  }));
}

/** The status bar item's text and tooltip for the open session's mode. */
export function modeStatus(mode: ApprovalMode): { text: string; tooltip: string } {
  return mode === 'plan'
    ? { text: '$(checklist) plan mode', tooltip: `trellisd: plan mode: ${MODE_DESCRIPTIONS.plan}. Click to leave it.` }
    : { text: `$(shield) ${mode}`, tooltip: `trellisd: approval mode ${mode}: ${MODE_DESCRIPTIONS[mode]}. Click for plan mode.` };
}

export function registerModes({ controller, act, log }: Extension): vscodeapi.Disposable[] {
  const status = vscodeapi.createStatusBarItem('trellisd.mode', "trellisd: the session's approval mode");
  status.command = 'trellisd.togglePlanMode';
  const draw = (mode: ApprovalMode | undefined) => {
    if (!mode || !controller.session) {
      status.hide();
      return;
    }
    Object.assign(status, modeStatus(mode));
    status.show();
  };
  const setMode = async () => {
    const current = await controller.approvalMode();
    const picked = await vscodeapi.showQuickPick(modeItems(APPROVAL_MODES, current), {
      title: `trellisd: the approval mode of “${controller.session?.title || 'this session'}”`,
      placeHolder: 'What runs without asking, from the next tool call on',
      matchOnDetail: true,
    });
    if (picked && picked.mode !== current) {
      await controller.setMode(picked.mode);
    }
  };
  const toggle = async () => {
    const mode = await controller.togglePlanMode();
    log.info(`plan mode ${mode === 'plan' ? 'on' : `off: back to ${mode}`}`);
  };
  return [
    status,
    controller.onDidChangeMode(draw),
    controller.onDidChangeSession(() => draw(controller.mode)),
    vscodeapi.registerCommand('trellisd.setMode', act("set the session's approval mode", setMode)),
    vscodeapi.registerCommand('trellisd.togglePlanMode', act('switch plan mode', toggle)),
  ];
}
