/**
 * The chat view's HTML. Its Content-Security-Policy allows nothing remote: the style and the one
 * script come from the extension's media folder, the script only with this page's nonce, and
 * no inline script, inline style, frame, font or connection from anywhere else.
 */

import { randomBytes } from 'crypto';

export interface ChatPage {
  cspSource: string;
  nonce: string;
  scriptUri: string;
  styleUri: string;
}

export function makeNonce(): string {
  return randomBytes(18).toString('base64').replace(/[^A-Za-z0-9]/g, '');
}

export function contentSecurityPolicy(page: Pick<ChatPage, 'cspSource' | 'nonce'>): string {
  return [
    "default-src 'none'",
    `img-src ${page.cspSource} data:`,
    `style-src ${page.cspSource}`,
    `font-src ${page.cspSource}`,
    `script-src 'nonce-${page.nonce}'`,
    "base-uri 'none'",
    "form-action 'none'",
  ].join('; ');
}

export function chatHtml(page: ChatPage): string {
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${contentSecurityPolicy(page)}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" href="${page.styleUri}">
<title>trellisd</title>
</head>
<body>
<header id="session-header" hidden>
  <div id="session-title"></div>
  <div id="session-root"></div>
  <div id="session-lineage" hidden></div>
  <div id="session-worktree" hidden></div>
  <div id="session-walls" hidden></div>
  <button id="session-mode" type="button" hidden title="Set the session's approval mode"></button>
  <div id="session-spend" hidden></div>
</header>
<div id="empty">
  <p>No session is open. A session keeps a branchable conversation with the coding agent about this folder.</p>
  <button id="start" type="button">Start a session</button>
  <button id="reopen" type="button" class="secondary">Reopen a session…</button>
</div>
<button id="earlier" type="button" class="secondary" hidden>Load earlier turns</button>
<main id="turns" aria-live="polite"></main>
<div id="notice" role="status" hidden></div>
<section id="queue" aria-label="Queued prompts" hidden>
  <div class="queue-title">Queued: they run when the running turn ends</div>
  <ol id="queue-list"></ol>
</section>
<footer id="composer">
  <ul id="command-list" role="listbox" aria-label="Custom commands (Up and Down choose, Tab or Enter takes one, Escape closes)" hidden></ul>
  <textarea id="prompt" rows="3" aria-label="Prompt" placeholder="Ask about this folder (Enter sends, Shift+Enter starts a new line, / runs a custom command)"></textarea>
  <ul id="images" aria-label="Images for the next prompt" hidden></ul>
  <div id="buttons">
    <select id="effort" aria-label="Reasoning effort" title="How hard a reasoning model thinks in the next turns">
      <option value="">effort: default</option>
      <option value="low">effort: low</option>
      <option value="medium">effort: medium</option>
      <option value="high">effort: high</option>
    </select>
    <button id="send" type="button">Send</button>
    <button id="queue-send" type="button" class="secondary" hidden title="Run it after the running turn">Queue</button>
    <button id="cancel" type="button" class="secondary" hidden>Cancel turn</button>
  </div>
</footer>
<script nonce="${page.nonce}" src="${page.scriptUri}"></script>
</body>
</html>`;
}
