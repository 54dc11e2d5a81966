/** The daemon itself: the log, restarting it, the API key it is given, and settings that change. */

import type { Extension } from './features';
import * as vscodeapi from './vscodeapi';

export const API_KEY_SECRET = 'trellisd.apiKey';

export function registerDaemonCommands(
  { context, daemon, controller, log, act, showLog }: Extension,
  refreshTurns: () => Promise<unknown>,
): vscodeapi.Disposable[] {
  return [
    vscodeapi.registerCommand('trellisd.showLog', showLog),
    vscodeapi.registerCommand(
      'trellisd.restartDaemon',
      act('restart the daemon', async () => {
        if (controller.isRunning) {
          throw new Error('a turn is running: cancel it before you restart the daemon');
        }
        await daemon.stop();
        await daemon.start();
        await refreshTurns();
      }),
    ),
    vscodeapi.registerCommand(
      'trellisd.setApiKey',
      act('set the API key', async () => {
        const key = await vscodeapi.showInputBox({
          title: "trellisd: the model provider's API key",
          prompt: 'Kept in VS Code\'s secret storage and given to the daemon when it starts. Empty: forget it.',
          password: true,
          ignoreFocusOut: true,
        });
        if (key === undefined) {
          return;
        }
        if (key.trim()) {
          await context.secrets.store(API_KEY_SECRET, key.trim());
        } else {
          await context.secrets.delete(API_KEY_SECRET);
        }
        if (!controller.isRunning) {
          await daemon.stop(); // the next action starts it with the new key
        }
      }),
    ),
    vscodeapi.onDidChangeConfiguration((event) => {
      if (event.affectsConfiguration('trellisd') && !controller.isRunning && daemon.isRunning) {
        log.info('the trellisd settings changed: the daemon restarts on the next action');
        void daemon.stop();
      }
    }),
  ];
}
