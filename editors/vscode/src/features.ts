/**
 * What every feature of the extension is built from. `activate` makes one `Extension` and hands it
 * to each feature's `register…`, which returns what it registered, for the context to dispose.
 */

import type * as vscode from 'vscode';

import type { DaemonClient, Log } from './client';
import type { Settings } from './config';
import { messageOf } from './errors';
import type { SessionController } from './session';
import * as vscodeapi from './vscodeapi';

export interface Extension {
  context: vscode.ExtensionContext;
  daemon: DaemonClient;
  controller: SessionController;
  log: Log;
  settings: () => Settings;
  showLog: () => void;
  /** Runs a command, showing a failure as a message a person understands, the log one click away. */
  act: <A extends unknown[]>(name: string, fn: (...args: A) => Promise<unknown>) => (...args: A) => Promise<void>;
  focusChat: () => Thenable<unknown>;
}

/** `act` for a log and a way to show it. */
export function acting(log: Log, showLog: () => void): Extension['act'] {
  return <A extends unknown[]>(name: string, fn: (...args: A) => Promise<unknown>) =>
    async (...args: A): Promise<void> => {
      try {
        await fn(...args);
      } catch (error) {
        const message = messageOf(error);
        log.error(`${name}: ${message}`);
        const choice = await vscodeapi.showErrorMessage(message, 'Show Log');
        if (choice === 'Show Log') {
          showLog();
        }
      }
    };
}
