/** The status bar's context meter and spend after each step (a click compacts), and the budget. */

import type { Extension } from './features';
import { parseBudget, spendText } from './queue';
import { formatCost } from './transcript';
import { usageText, usageTooltip } from './usage';
import * as vscodeapi from './vscodeapi';

export function registerSpending({ controller, act }: Extension): vscodeapi.Disposable[] {
  const meter = vscodeapi.createStatusBarItem('trellisd.usage', 'trellisd context and cost');
  meter.command = 'trellisd.compactSession';
  const compactSession = async () => {
    const result = await controller.compact();
    const cost = result.cost === null ? '' : ` (${formatCost(result.cost)})`;
    void vscodeapi.showInformationMessage(
      result.compacted
        ? `trellisd: the first ${result.turns} turn(s) are now sent as a summary${cost}`
        : 'trellisd: nothing to compact; only the newest turn is sent in full',
    );
  };

  return [
    meter,
    controller.onDidChangeUsage((usage) => {
      meter.text = usageText(usage);
      meter.tooltip = usageTooltip(usage);
      meter.show();
    }),
    controller.onDidChangeSession((session) => {
      if (!session || controller.usage?.sessionId !== session.sessionId) {
        meter.hide();
      }
    }),
    vscodeapi.registerCommand('trellisd.compactSession', act('compact the session', compactSession)),
    vscodeapi.registerCommand(
      'trellisd.setBudget',
      act('set the budget', async () => {
        const text = await vscodeapi.showInputBox({
          title: 'trellisd: what this session may spend',
          prompt: 'tokens=N and/or usd=X, or off',
          value: 'tokens=100000',
          ignoreFocusOut: true,
        });
        if (text === undefined) {
          return;
        }
        const budget = parseBudget(text);
        if (typeof budget === 'string') {
          throw new Error(budget);
        }
        const status = await controller.setBudget(budget);
        void vscodeapi.showInformationMessage(`trellisd: ${spendText(status.budget, status.spent)}`);
      }),
    ),
  ];
}
