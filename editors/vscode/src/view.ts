/**
 * Open in Browser: the session's read-only page (protocol/view.md). `session/view` starts the
 * daemon's view server on 127.0.0.1 at its first call and answers with the page's URL, which
 * carries a one-time token: the first browser to bring it is let in, with a cookie. The URL is
 * opened with `env.openExternal`; when VS Code cannot open it, it is shown, to be copied.
 *
 * VS Code in a web browser (code-server) hands a 127.0.0.1 URL to its port proxy instead
 * (`/proxy/PORT/`, without the page's path and token), whose requests the view server refuses:
 * there the link is shown, to be opened on the machine the daemon runs on or through a
 * forwarded port.
 */

import type { Extension } from './features';
import type { Requester } from './protocolTypes';
import * as vscodeapi from './vscodeapi';

/** What is said when no session is open to show. */
export const NO_SESSION = 'No session is open to show in the browser: start a session or reopen one first.';

/** The session of a command's argument (a session id, or a row that has one), else undefined. */
export function sessionOf(arg: unknown): string | undefined {
  if (typeof arg === 'string' && arg) {
    return arg;
  }
  const id = (arg as { sessionId?: unknown } | undefined)?.sessionId;
  return typeof id === 'string' && id ? id : undefined;
}

/** The URL of a session's page, with a fresh one-time token. */
export async function sessionPage(client: Requester, sessionId: string): Promise<string> {
  return (await client.request('session/view', { sessionId })).url;
}

/** The URL without its token, for the log: the token is a key to the page until it is used. */
export function withoutToken(url: string): string {
  return url.replace(/([?&])token=[^&#]*/, '$1token=…');
}

export function registerView({ controller, daemon, act, log }: Extension): vscodeapi.Disposable[] {
  const open = async (arg?: unknown): Promise<void> => {
    const sessionId = sessionOf(arg) ?? controller.session?.sessionId;
    if (!sessionId) {
      const reopen = 'Reopen Session…';
      if ((await vscodeapi.showInformationMessage(NO_SESSION, reopen)) === reopen) {
        await vscodeapi.executeCommand('trellisd.reopenSession');
      }
      return;
    }
    const url = await sessionPage(daemon, sessionId);
    log.info(`opening session ${sessionId} in the browser: ${withoutToken(url)}`);
    if (vscodeapi.inBrowser()) {
      await offer(url, `The session's page is served on 127.0.0.1 of the machine the daemon runs on: open ${url} there, or through a forwarded port (ssh -L) with the same number. The link lets in one browser.`);
    } else if (!(await vscodeapi.openExternal(url))) {
      await offer(url, `VS Code could not open the browser. The session's page is at ${url} (the link lets in one browser).`);
    }
  };
  const offer = async (url: string, message: string): Promise<void> => {
    const copy = 'Copy the Link';
    if ((await vscodeapi.showWarningMessage(message, copy)) === copy) {
      await vscodeapi.writeClipboard(url);
    }
  };
  return [vscodeapi.registerCommand('trellisd.openInBrowser', act('open the session in the browser', open))];
}
