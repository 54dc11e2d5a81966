// The extension in a real VS Code: code-server on 127.0.0.1 with the packaged extension
// installed, driven in Debian's Chromium by playwright-core as a person would drive it. It
// starts a session from the command palette, sends prompts and watches the replies stream into
// the chat view, branches from the turn tree, answers an approval, reloads the window while a
// turn runs (the turn goes on in the store's shared daemon, and the reloaded window reattaches
// to it), and saves a screenshot.
// Assertions read the chat webview's DOM and the extension's log file, never pixels.
//
// Environment:
//   CODE_SERVER        the code-server executable (default: code-server 4.100.3 where
//                      .ci/vscode-setup.sh installs it, else `code-server` on PATH)
//   TRELLISD_TEST_CMD  the daemon command (default `python3 -m trellisd`)
//   CHROMIUM           the browser (default /usr/bin/chromium)
//   E2E_KEEP           keep the temporary folder (its path is printed)
//   E2E_ARTIFACTS      where the screenshots go (default editors/vscode/.e2e, ignored by git;
//                      the README's screenshot.png is replaced only by copying one by hand)
//   E2E_SKIP           a regular expression: the checks whose names match it are skipped (for a
//                      daemon without some methods); every check runs when it is not set

import { execFileSync, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

import { chromium } from 'playwright-core';

const here = path.dirname(fileURLToPath(import.meta.url));
const extensionDir = path.resolve(here, '..');
const vsix = path.join(extensionDir, 'trellisd.vsix');
const artifacts = path.resolve(process.env.E2E_ARTIFACTS ?? path.join(extensionDir, '.e2e'));
fs.mkdirSync(artifacts, { recursive: true });
const screenshot = path.join(artifacts, 'screenshot.png');
const started = Date.now();

function elapsed() {
  return `${((Date.now() - started) / 1000).toFixed(1)}s`;
}

function say(message) {
  console.log(`[e2e ${elapsed()}] ${message}`);
}

function which(command) {
  if (path.isAbsolute(command)) {
    return command;
  }
  for (const dir of (process.env.PATH ?? '').split(path.delimiter)) {
    const candidate = path.join(dir, command);
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      return candidate;
    } catch {
      // not here
    }
  }
  throw new Error(`${command} is not on PATH`);
}

function codeServer() {
  if (process.env.CODE_SERVER) {
    return process.env.CODE_SERVER;
  }
  const installed = '/opt/code-server-4.100.3/node_modules/.bin/code-server';
  return fs.existsSync(installed) ? installed : which('code-server');
}

function freePort() {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

async function waitForHttp(url, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      const response = await fetch(url);
      if (response.ok) {
        return;
      }
    } catch {
      // not up yet
    }
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`${url} did not answer within ${timeoutMs} ms`);
}

async function waitForLog(file, pattern, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const text = fs.existsSync(file) ? fs.readFileSync(file, 'utf8') : '';
    const match = text.match(pattern);
    if (match) {
      return match;
    }
    if (Date.now() > deadline) {
      throw new Error(`the extension's log never matched ${pattern}`);
    }
    await new Promise((r) => setTimeout(r, 100));
  }
}

// --- the checks, counted for the closing line ---

const results = [];
const skip = process.env.E2E_SKIP ? new RegExp(process.env.E2E_SKIP) : undefined;

async function check(name, fn) {
  if (skip?.test(name)) {
    say(`skip ${name}`);
    return;
  }
  const t0 = Date.now();
  try {
    await fn();
    results.push({ name, ok: true });
    say(`ok   ${name} (${Date.now() - t0} ms)`);
  } catch (error) {
    results.push({ name, ok: false, error });
    say(`FAIL ${name}: ${error?.stack ?? error}`);
    throw error;
  }
}

// --- setting up ---

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'trellisd-vscode-e2e-'));
const project = path.join(tmp, 'project');
const userData = path.join(tmp, 'user-data');
const extensions = path.join(tmp, 'extensions');
const browserData = path.join(tmp, 'browser');
const extensionLog = path.join(tmp, 'extension.log');
const serverLog = path.join(tmp, 'code-server.log');
const script = path.join(tmp, 'script.jsonl');
fs.mkdirSync(project, { recursive: true });
fs.mkdirSync(path.join(userData, 'User'), { recursive: true });
fs.writeFileSync(path.join(project, 'README.md'), '# demo project\n\nA folder for trying trellisd.\n');

// The scripted model plays one line per model call, in order. A line with holdFile streams
// holdAfter pieces, then waits until that file exists: the test decides when the rest comes,
// so that what it looks at (a partial reply, a steer, a cancel) happens while the turn runs,
// however slow the machine.
// A command that prints a line, then waits until the file named by its argument exists.
const WAITS =
  "const fs = require('fs'); console.log('halfway there');" +
  " const t = setInterval(() => { if (fs.existsSync(process.argv[1])) { clearInterval(t); console.log('all done'); } }, 20);";
const holds = path.join(tmp, 'holds');
fs.mkdirSync(holds);
// A command runs inside the walls, where /tmp is a private one: what it waits for is made where
// it can see it (read-only), outside /tmp.
const wallsSee = fs.mkdtempSync(path.join(fs.existsSync('/var/tmp') ? '/var/tmp' : os.homedir(), 'trellisd-vscode-e2e-'));
const commandHolds = new Set(['command-may-end']);
const hold = (name) => path.join(commandHolds.has(name) ? wallsSee : holds, name);
const release = (name) => fs.writeFileSync(hold(name), '');
const lines = [
  // turn 1: held after "Hello from **trellisd**. ", so that its partial reply can be seen
  { text: 'Hello from **trellisd**. This folder holds:\n\n- `README.md`, a short description\n- nothing else yet', holdAfter: 3, holdFile: hold('first-reply') },
  // turn 2, abandoned by the branch
  { text: 'A second answer, which the branch leaves behind.' },
  // turn 3, on the new branch: asks to write a file, which needs the user's approval
  { text: 'I will write a note. ', tool: 'write_file', arguments: { path: 'notes.txt', content: 'written after approval\n' } },
  { text: 'The note is in `notes.txt`.' },
  // turn 4: held in its first step until the steer is queued; the steer reaches the model at step 2
  { text: 'Reading the README first, and then I will answer you.', holdAfter: 1, holdFile: hold('steer-queued'), tool: 'read_file', arguments: { path: 'README.md' } },
  { text: 'It is a demo project. (Kept short, as you asked.)' },
  // turn 5: held after "1 2 3" until it is cancelled (its hold file is never made)
  { text: Array.from({ length: 60 }, (_, i) => `${i + 1}`).join(' '), holdAfter: 3, holdFile: hold('never') },
  // turn 6: held after "r1 r2 r3" until the window has been reloaded and shows it again
  { text: Array.from({ length: 40 }, (_, i) => `r${i + 1}`).join(' '), holdAfter: 3, holdFile: hold('reloaded') },
  // turn 7: a command that prints a line, then waits until the test has seen it
  { text: 'Running it. ', tool: 'run_command', arguments: { argv: [process.execPath, '-e', WAITS, hold('command-may-end')] } },
  { text: 'The command printed two lines.' },
  // turn 8: asked about the selected lines of the README
  { text: 'Those lines are its title.' },
  // turn 9: sent from the input box with the active file attached
  { text: 'That is the README.' },
  // turn 10: held after "h1" while two prompts are queued behind it; turn 11: the one not dropped
  { text: 'h1 h2 h3', holdAfter: 1, holdFile: hold('queued') },
  { text: 'The queued answer.' },
  // the last turn, in a session over the project once its .trellisd.toml names an MCP server
  { text: 'Asking the server. ', tool: 'mcp__proj__echo', arguments: { text: 'hello from MCP' } },
  { text: 'The server said hello.' },
  // the very last turn: a command that ignores SIGTERM, cancelled while it runs (only a kill
  // ends it), then a turn once the user has decided to keep what it left
  { text: 'Migrating. ', tool: 'run_command', arguments: { argv: ['sh', '-c', 'trap "" TERM; echo migrating; sleep 300'] } },
  { text: 'Going on from what the migration left.' },
  // a session in a worktree of its own: writes a file there, which a merge brings into the checkout
  { text: 'Writing it in the worktree. ', tool: 'write_file', arguments: { path: 'feature.txt', content: 'made in a worktree\n' } },
  { text: 'The feature is in `feature.txt`.' },
  // a parent whose task call starts a child session: the child writes (asked, naming the
  // child), then streams its reply, held after "Listing done:" until the test has seen it
  { tool: 'task', arguments: { prompt: 'write the list' } },
  { text: 'Writing it. ', tool: 'write_file', arguments: { path: 'list.txt', content: 'one\n' } },
  { text: 'Listing done: one item in list.txt.', holdAfter: 2, holdFile: hold('child-text') },
  { text: 'The helper wrote list.txt.' },
  // a command that asks to run outside the walls, allowed once
  {
    text: 'It has to write outside the folder. ',
    tool: 'run_command',
    arguments: { argv: ['sh', '-c', `echo out > ${path.join(tmp, 'outside.txt')}`], escalate: true, reason: 'the shared cache lives outside the project' },
  },
  { text: 'The cache is written.' },
  // plan mode: the model lays out a plan and tries a write, which the mode refuses; run under
  // acceptEdits, the plan's write runs without asking
  {
    tool: 'update_plan',
    arguments: { entries: [{ content: 'read the README', status: 'completed' }, { content: 'write plan.txt', status: 'pending', priority: 'high' }] },
  },
  { tool: 'write_file', arguments: { path: 'plan.txt', content: 'planned\n' } },
  { text: 'The plan is ready.' },
  { text: 'Writing it. ', tool: 'write_file', arguments: { path: 'plan.txt', content: 'planned\n' } },
  { text: 'Done as planned.' },
  // the project's custom command /greet, run from "Run Custom Command…" with the argument Ada
  { text: 'Hello, Ada, from a custom command.' },
];
fs.writeFileSync(script, lines.map((l) => JSON.stringify(l)).join('\n') + '\n');

const [daemonCommand, ...daemonArgs] = (process.env.TRELLISD_TEST_CMD || 'python3 -m trellisd').trim().split(/\s+/);
const settings = {
  'trellisd.command': which(daemonCommand),
  'trellisd.args': daemonArgs,
  'trellisd.db': path.join(tmp, 'store', 'trellisd.db'),
  'trellisd.provider': 'scripted',
  'trellisd.task.enabled': true,
  'telemetry.telemetryLevel': 'off',
  'workbench.startupEditor': 'none',
  'workbench.tips.enabled': false,
  'workbench.enableExperiments': false,
  'workbench.welcomePage.walkthroughs.openOnInstall': false,
  'security.workspace.trust.enabled': false,
  'extensions.autoCheckUpdates': false,
  'extensions.autoUpdate': false,
  'extensions.ignoreRecommendations': true,
  'update.mode': 'none',
  'chat.commandCenter.enabled': false,
  'workbench.colorTheme': 'Default Dark Modern',
  'window.commandCenter': false,
};
fs.writeFileSync(path.join(userData, 'User', 'settings.json'), JSON.stringify(settings, null, 2));
fs.writeFileSync(path.join(tmp, 'config.yaml'), 'auth: none\n');

const server = codeServer();
say(`code-server: ${server}; daemon: ${settings['trellisd.command']} ${daemonArgs.join(' ')}; temp: ${tmp}`);
if (!fs.existsSync(vsix)) {
  throw new Error(`${vsix} is missing: run npm run package first`);
}

// Every window's trellisd attaches to the store's shared daemon, whose socket is in a runtime
// folder of this run's own (short: a socket's path has room for about 100 bytes).
const runtime = fs.mkdtempSync(path.join('/tmp', 'rt'));
const env = {
  ...process.env,
  TRELLISD_SHARED: '1',
  XDG_RUNTIME_DIR: runtime,
  TRELLISD_SCRIPT: script,
  TRELLISD_VSCODE_LOG: extensionLog,
  XDG_CONFIG_HOME: path.join(tmp, 'xdg-config'),
  XDG_DATA_HOME: path.join(tmp, 'xdg-data'),
};

let serverProcess;
let context;
let exitCode = 1;

try {
  await check('the packaged extension installs into code-server', async () => {
    const out = execFileSync(
      server,
      ['--install-extension', vsix, '--extensions-dir', extensions, '--user-data-dir', userData, '--config', path.join(tmp, 'config.yaml')],
      { env, encoding: 'utf8', timeout: 120_000 },
    );
    if (!/successfully installed/i.test(out)) {
      throw new Error(`unexpected output: ${out}`);
    }
  });

  const port = await freePort();
  serverProcess = spawn(
    server,
    [
      '--bind-addr', `127.0.0.1:${port}`,
      '--auth', 'none',
      '--config', path.join(tmp, 'config.yaml'),
      '--user-data-dir', userData,
      '--extensions-dir', extensions,
      '--disable-telemetry',
      '--disable-update-check',
      '--disable-workspace-trust',
      '--disable-getting-started-override',
      '--ignore-last-opened',
      project,
    ],
    { env, stdio: ['ignore', fs.openSync(serverLog, 'a'), fs.openSync(serverLog, 'a')], detached: true },
  );
  await waitForHttp(`http://127.0.0.1:${port}/healthz`, 60_000);
  say(`code-server is up on port ${port}`);

  context = await chromium.launchPersistentContext(browserData, {
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    headless: true,
    viewport: { width: 1440, height: 900 },
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-quic',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
      '--disable-dev-shm-usage',
    ],
  });
  const page = context.pages()[0] ?? (await context.newPage());
  page.setDefaultTimeout(60_000); // a safety net: every wait below is for an event

  const chat = page.frameLocator('iframe.webview.ready').frameLocator('#active-frame');

  const palette = async (command) => {
    // The palette lists extension commands once the extension host has registered them; retry
    // until the command shows, as a person would retype it.
    for (let attempt = 1; ; attempt++) {
      await page.keyboard.press('F1');
      const input = page.locator('.quick-input-widget input.input');
      await input.waitFor({ state: 'visible' });
      await input.press('Control+a');
      await page.keyboard.type(`>${command}`, { delay: 10 });
      const row = page.locator('.quick-input-list .monaco-list-row', { hasText: command }).first();
      try {
        await row.waitFor({ timeout: 5000 });
        await row.click();
        return;
      } catch (error) {
        await page.keyboard.press('Escape');
        if (attempt === 6) {
          throw error;
        }
      }
    }
  };

  // An item of the editor's context menu (Shift+F10), chosen as a keyboard user does: the
  // pointer on it focuses it, Enter runs it (a click there is sometimes not taken as a
  // choice on a busy machine; the focus is, and is waited for). Tried again, as a person would,
  // when the menu closes without acting.
  const contextMenu = async (item, acted) => {
    for (let attempt = 1; ; attempt++) {
      await page.keyboard.press('Shift+F10');
      const row = page.locator('.monaco-menu .action-item', { hasText: item }).first();
      await row.hover();
      await page.locator('.monaco-menu .action-item.focused', { hasText: item }).first().waitFor();
      await page.keyboard.press('Enter');
      try {
        await acted.waitFor({ timeout: 5000 });
        return;
      } catch (error) {
        if (attempt === 6) {
          throw error;
        }
        if (await page.locator('.monaco-menu').first().isVisible()) {
          await page.keyboard.press('Escape');
        }
      }
    }
  };

  const send = async (text) => {
    const prompt = chat.locator('#prompt');
    await prompt.click();
    await prompt.fill(text);
    await prompt.press('Enter');
  };

  await check('the workbench opens the project folder', async () => {
    await page.goto(`http://127.0.0.1:${port}/?folder=${encodeURIComponent(project)}`);
    await page.locator('.monaco-workbench').waitFor({ timeout: 60_000 });
    await page.locator('.explorer-folders-view, .monaco-workbench .part.sidebar').first().waitFor({ timeout: 60_000 });
    await page.locator('.activitybar [aria-label^="trellisd"]').first().waitFor({ timeout: 60_000 });
    await page.locator('.explorer-folders-view .monaco-list-row', { hasText: 'README.md' }).click();
    await page.locator('.tabs-container .tab', { hasText: 'README.md' }).waitFor();
  });

  await check('"trellisd: Start Session" from the command palette opens the chat view on a new session', async () => {
    await palette('trellisd: Start Session');
    await chat.locator('#session-header').waitFor({ state: 'visible', timeout: 60_000 });
    // Widen the side bar, as a person reading a conversation would.
    const sidebar = await page.locator('.part.sidebar').boundingBox();
    if (sidebar) {
      const x = sidebar.x + sidebar.width - 1;
      await page.mouse.move(x, sidebar.y + 300);
      await page.mouse.down();
      await page.mouse.move(x + 260, sidebar.y + 300, { steps: 8 });
      await page.mouse.up();
    }
    await chat.locator('#session-title', { hasText: 'New session' }).waitFor();
    const root = await chat.locator('#session-root').textContent();
    if (!root?.includes('project')) {
      throw new Error(`the header shows ${root}`);
    }
    await waitForLog(extensionLog, /session s-\S+ opened over .*project/);
  });

  await check("the header shows the session's walls, and what they hold in its tooltip", async () => {
    const walls = chat.locator('#session-walls', { hasText: 'walls: workspace-write · network off' });
    await walls.waitFor();
    const detail = (await walls.getAttribute('title')) ?? '';
    if (!/^protected \(read-only in the root\): .*\.git\/hooks/m.test(detail)) {
      throw new Error(`the walls' tooltip says ${JSON.stringify(detail)}`);
    }
    await waitForLog(extensionLog, /session s-\S+: walls: workspace-write · network off/);
  });

  await check('a prompt streams its reply into the chat view, rendered as Markdown', async () => {
    await send('What is in this folder?');
    const turn = chat.locator('section.turn').nth(0);
    // The model holds after "Hello from **trellisd**. ": the partial reply is drawn, as
    // Markdown, while the turn still runs, and the rest is not there yet.
    await turn.locator('.reply strong', { hasText: 'trellisd' }).waitFor();
    await turn.locator('.turn-footer', { hasText: /^running/ }).waitFor();
    const partial = (await turn.locator('.reply').textContent()) ?? '';
    if (partial.includes('README.md')) {
      throw new Error(`the held reply shows its end: ${partial}`);
    }
    say(`partial reply drawn while the turn runs: ${JSON.stringify(partial.trim())}`);
    release('first-reply');
    await turn.locator('.reply strong', { hasText: 'trellisd' }).waitFor();
    await turn.locator('.reply code', { hasText: 'README.md' }).waitFor();
    await turn.locator('.turn-footer', { hasText: /^finished · scripted · \d+ tokens \(\d+ in, \d+ out\) · cost unknown$/ }).waitFor();
    const prompt = await turn.locator('.prompt').textContent();
    if (prompt !== 'What is in this folder?') {
      throw new Error(`the prompt shows as ${prompt}`);
    }
    await chat.locator('#session-title', { hasText: 'What is in this folder?' }).waitFor();
    await waitForLog(extensionLog, /turn t-\S+ finished · scripted · \d+ tokens .*reply: Hello from \*\*trellisd\*\*/);
  });

  await check('a second turn follows the first', async () => {
    await send('And then?');
    await chat.locator('section.turn').nth(1).locator('.turn-footer', { hasText: /^finished/ }).waitFor();
    await chat.locator('section.turn').nth(1).locator('.reply', { hasText: 'which the branch leaves behind' }).waitFor();
  });

  await check('"trellisd: Open in Browser" in VS Code in a browser shows the session\'s link, which leads to its page', async () => {
    // code-server would hand a 127.0.0.1 URL to its port proxy (/proxy/PORT/, without the
    // path and the token), which the view server refuses: the extension shows the link instead.
    await palette('trellisd: Open in Browser');
    await waitForLog(extensionLog, /opening session s-\S+ in the browser: http:\/\/127\.0\.0\.1:\d+\/s\/s-\S+\?token=…/);
    const toast = page.locator('.notification-toast', { hasText: "The session's page is served on 127.0.0.1" });
    await toast.locator('.monaco-button', { hasText: 'Copy the Link' }).waitFor();
    const url = ((await toast.textContent()) ?? '').match(/http:\/\/127\.0\.0\.1:\d+\/s\/s-\w+\?token=[\w-]+/)?.[0];
    if (!url) {
      throw new Error(`no link in the message: ${await toast.textContent()}`);
    }
    // as a browser: the token traded for a cookie and a redirect, followed with the cookie
    const first = await fetch(url, { redirect: 'manual' });
    const cookie = (first.headers.get('set-cookie') ?? '').split(';')[0];
    const next = new URL(first.headers.get('location') ?? '', url);
    const pageText = await (await fetch(next, { headers: { cookie } })).text();
    if (first.status < 300 || first.status >= 400 || next.search.includes('token=') || !pageText.includes('What is in this folder?')) {
      throw new Error(`the link did not lead to the session's page: ${first.status} ${next} ${pageText.slice(0, 300)}`);
    }
    await toast.locator('.monaco-button', { hasText: 'Copy the Link' }).click();
    await toast.waitFor({ state: 'detached' });
  });

  await check('the status bar shows the context meter and the cost after each step', async () => {
    const meter = page.locator('.statusbar-item', { hasText: /ctx \d+% · cost unknown/ }).first();
    await meter.waitFor();
    say(`status bar: ${JSON.stringify((await meter.textContent())?.trim())}`);
  });

  await check('"Branch here" on the first turn in the turn tree moves the head; the second turn stays as abandoned', async () => {
    const first = page.locator('.monaco-list-row', { hasText: 'What is in this folder?' }).first();
    await first.waitFor({ timeout: 30_000 });
    await page.locator('.monaco-list-row', { hasText: 'And then?' }).locator('.label-description', { hasText: 'head' }).waitFor();
    await first.hover();
    await first.locator('.action-label[aria-label="Branch here"]').click();
    const restore = page.locator('.quick-input-widget');
    await restore.locator('.quick-input-title', { hasText: 'restore the files too?' }).waitFor({ timeout: 30_000 });
    await restore.locator('.monaco-list-row', { hasText: 'Leave the files as they are' }).click();
    await waitForLog(extensionLog, /branched: head is now t-/);
    await page.locator('.monaco-list-row', { hasText: 'What is in this folder?' }).locator('.label-description', { hasText: 'head' }).waitFor();
    await page.locator('.monaco-list-row', { hasText: 'And then?' }).locator('.label-description', { hasText: 'abandoned' }).waitFor();
    const turns = await chat.locator('section.turn').count();
    if (turns !== 1) {
      throw new Error(`the chat view shows ${turns} turns after the branch; expected the path to the head (1)`);
    }
  });

  await check('a write needs approval: the quick pick shows the tool, its arguments and a summary; "Allow always (this project)" runs it', async () => {
    await send('Write a note');
    const pick = page.locator('.quick-input-widget');
    await pick.locator('.quick-input-title', { hasText: 'allow write_file?' }).waitFor({ timeout: 30_000 });
    const placeholder = await pick.locator('input.input').getAttribute('placeholder');
    if (!placeholder?.includes('notes.txt')) {
      throw new Error(`the arguments are not shown: ${placeholder}`);
    }
    await chat.locator('.approval', { hasText: 'waiting for your answer' }).waitFor();
    // the diff editor beside the question: the file as it is, and as the write would leave it
    await page.locator('.tab', { hasText: 'notes.txt: what the write would change' }).waitFor({ timeout: 30_000 });
    await page.screenshot({ path: path.join(artifacts, 'approval.png') });
    for (const offered of ['Allow once', 'Allow always (this session)', 'Deny']) {
      await pick.locator('.monaco-list-row', { hasText: offered }).waitFor();
    }
    await pick.locator('.monaco-list-row', { hasText: 'Allow always (this project)' }).click();
    const turn = chat.locator('section.turn').nth(1);
    await turn.locator('.approval', { hasText: 'allowed always for this project' }).waitFor();
    await turn.locator('.tool', { hasText: 'write_file' }).waitFor();
    await turn.locator('.turn-footer', { hasText: /^finished/ }).waitFor();
    await turn.locator('.reply .text code', { hasText: 'notes.txt' }).waitFor();
    await waitForLog(extensionLog, /approval answered: allowAlwaysProject for write_file/);
    const written = fs.readFileSync(path.join(project, 'notes.txt'), 'utf8');
    if (written !== 'written after approval\n') {
      throw new Error(`notes.txt holds ${JSON.stringify(written)}`);
    }
  });

  await check('the conversation is saved as a screenshot', async () => {
    // The view is left as it is: a drag on the sash above the turn tree that lands on the
    // tree's header instead (the layout moved under the mouse) would move the view away.
    await chat.locator('#composer').scrollIntoViewIfNeeded();
    await chat.locator('section.turn').nth(1).locator('.turn-footer').waitFor();
    await page.mouse.move(1000, 600);
    await page.waitForTimeout(300);
    await page.screenshot({ path: screenshot });
    say(`screenshot: ${screenshot}`);
  });
  await check('while a turn runs, the input box steers it and the delivery is shown', async () => {
    await send('What does the README say?');
    const turn = chat.locator('section.turn').nth(2);
    await turn.locator('.reply .text', { hasText: 'Reading' }).waitFor();
    await chat.locator('#send', { hasText: 'Steer' }).waitFor();
    await send('Keep it short');
    // The first step is held until the daemon has queued the steer; then it may end.
    await turn.locator('.steer', { hasText: /Keep it short\s+queued/ }).waitFor();
    await turn.locator('.turn-footer', { hasText: /^running/ }).waitFor();
    release('steer-queued');
    await turn.locator('.steer', { hasText: /Keep it short\s+delivered at step 2/ }).waitFor();
    await turn.locator('.turn-footer', { hasText: /^finished/ }).waitFor();
    await turn.locator('.reply', { hasText: 'Kept short' }).waitFor();
    await waitForLog(extensionLog, /steer steer-\S+ delivered at step 2/);
  });

  await check('"Cancel turn" ends the running turn as cancelled', async () => {
    await send('Count to sixty, slowly');
    const turn = chat.locator('section.turn').nth(3);
    // The model holds after "1 2 3" until the turn is cancelled: only the cancel can end it.
    await turn.locator('.reply .text', { hasText: '3' }).waitFor();
    await turn.locator('.turn-footer', { hasText: /^running/ }).waitFor();
    await chat.locator('#cancel').click();
    await turn.locator('.turn-footer', { hasText: /^cancelled/ }).waitFor();
    await chat.locator('#send', { hasText: 'Send' }).waitFor();
    const text = (await turn.locator('.reply').textContent()) ?? '';
    if (text.includes('60')) {
      throw new Error('the whole reply arrived: nothing was cancelled');
    }
    await page.screenshot({ path: path.join(artifacts, 'steer-and-cancel.png') });
  });

  await check('a window reloaded mid-turn reattaches to the turn, which ran on in the shared daemon', async () => {
    await send('Count on, even through a reload');
    const before = chat.locator('section.turn').nth(4);
    await before.locator('.reply .text', { hasText: 'r3' }).waitFor();
    await before.locator('.turn-footer', { hasText: /^running/ }).waitFor();
    await page.reload();
    await page.locator('.monaco-workbench').waitFor({ timeout: 60_000 });
    // The reloaded window reopens its session: the turn is drawn as far as it has streamed,
    // still running, and goes on streaming once the model goes on.
    const turn = chat.locator('section.turn').nth(4);
    await turn.locator('.prompt', { hasText: 'Count on, even through a reload' }).waitFor({ timeout: 60_000 });
    await turn.locator('.turn-footer', { hasText: /^running/ }).waitFor();
    await chat.locator('#send', { hasText: 'Steer' }).waitFor();
    const text = (await turn.locator('.reply').textContent()) ?? '';
    if (!/r1 r2 r3/.test(text) || text.includes('r40')) {
      throw new Error(`the reattached turn shows ${JSON.stringify(text)}`);
    }
    await waitForLog(extensionLog, /following turn t-\S+, running in trellisd/);
    release('reloaded');
    await turn.locator('.reply .text', { hasText: 'r40' }).waitFor();
    await turn.locator('.turn-footer', { hasText: /^finished · scripted/ }).waitFor();
    await chat.locator('#send', { hasText: 'Send' }).waitFor();
    await waitForLog(extensionLog, /turn t-\S+ finished .*\(followed\)/);
  });

  // --- live tool activity and editor context ---

  // The prompt of a step as the daemon recorded it (the shared daemon's store, read by Python).
  const stepPrompt = (turnPrompt) =>
    execFileSync(
      which(daemonCommand),
      [
        '-c',
        'import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); print(c.execute("SELECT s.prompt FROM step s JOIN run r ON r.id = s.run_id' +
          ' JOIN turn t ON t.id = r.turn_id WHERE t.prompt = ? AND s.n = 1", (sys.argv[2],)).fetchone()[0])',
        settings['trellisd.db'],
        turnPrompt,
      ],
      { env, encoding: 'utf8' },
    );

  await check('a tool call is drawn as it happens, and a command\'s output shows while it runs', async () => {
    await send('Run the slow command');
    const pick = page.locator('.quick-input-widget');
    await pick.locator('.quick-input-title', { hasText: 'allow run_command?' }).waitFor({ timeout: 30_000 });
    await pick.locator('.monaco-list-row', { hasText: 'Allow once' }).click();
    const turn = chat.locator('section.turn').nth(5);
    const call = turn.locator('.tool', { hasText: 'run_command' });
    // The command waits for the test: what it printed is on the screen before it ends.
    await call.locator('.tool-output', { hasText: 'halfway there' }).waitFor();
    await call.locator('.tool-status', { hasText: 'running' }).waitFor();
    await turn.locator('.turn-footer', { hasText: /^running/ }).waitFor();
    if (((await call.locator('.tool-output').textContent()) ?? '').includes('all done')) {
      throw new Error('the output shows its end before the command was let go');
    }
    await page.screenshot({ path: path.join(artifacts, 'live-command.png') });
    release('command-may-end');
    await call.locator('.tool-status', { hasText: 'done' }).waitFor();
    await call.locator('.tool-output', { hasText: 'all done' }).waitFor();
    await turn.locator('.turn-footer', { hasText: /^finished/ }).waitFor();
    if ((await turn.locator('.tool').count()) !== 1) {
      throw new Error('the call is drawn twice');
    }
    await waitForLog(extensionLog, /step 1: run_command running/);
  });

  await check('"Ask About Selection…" in the editor\'s context menu sends the selected lines with the prompt', async () => {
    await page.locator('.tabs-container .tab', { hasText: 'README.md' }).click();
    const editor = page.locator('.editor-instance .monaco-editor .view-lines').first();
    await editor.click();
    await page.keyboard.press('Control+Home');
    await page.keyboard.press('Shift+ArrowDown');
    await page.keyboard.press('Shift+ArrowDown');
    await page.keyboard.press('Shift+End');
    await contextMenu('Ask About Selection', page.locator('.quick-input-widget', { hasText: 'ask about lines 1–3' }));
    const input = page.locator('.quick-input-widget input.input');
    await input.fill('What do these lines say?');
    await input.press('Enter');
    const turn = chat.locator('section.turn').nth(6);
    await turn.locator('.notice', { hasText: 'with lines 1–3 of README.md' }).waitFor();
    await turn.locator('.turn-footer', { hasText: /^finished/ }).waitFor();
    await turn.locator('.reply', { hasText: 'Those lines are its title.' }).waitFor();
    const prompt = stepPrompt('What do these lines say?');
    if (!prompt.includes('<selection path="README.md" lines="1-3">\n# demo project\n\nA folder for trying trellisd.\n</selection>')) {
      throw new Error(`the model was given ${JSON.stringify(prompt)}`);
    }
  });

  await check('with "Attach the Active File" on, a prompt from the input box goes with the active file', async () => {
    await palette('trellisd: Attach the Active File to Prompts (Toggle)');
    await page.locator('.notification-toast', { hasText: 'each prompt goes with the active file' }).waitFor();
    await send('What is this file?');
    const turn = chat.locator('section.turn').nth(7);
    await turn.locator('.notice', { hasText: 'with README.md' }).waitFor();
    await turn.locator('.turn-footer', { hasText: /^finished/ }).waitFor();
    const prompt = stepPrompt('What is this file?');
    if (!prompt.includes('<file path="README.md">\n# demo project\n')) {
      throw new Error(`the model was given ${JSON.stringify(prompt)}`);
    }
    await palette('trellisd: Attach the Active File to Prompts (Toggle)');
    await page.locator('.notification-toast', { hasText: 'prompts go without the active file' }).waitFor();
  });

  await check('prompts queued while a turn runs are listed, one dropped, the other run after it', async () => {
    await send('Hold on a moment');
    const running = chat.locator('section.turn').nth(8);
    await running.locator('.reply .text', { hasText: 'h1' }).waitFor();
    const prompt = chat.locator('#prompt');
    for (const text of ['Then answer this', 'Never mind this one']) {
      await prompt.click();
      await prompt.fill(text);
      await chat.locator('#queue-send').click();
    }
    await chat.locator('#queue li', { hasText: 'Never mind this one' }).waitFor();
    await chat.locator('#queue li', { hasText: 'Then answer this' }).waitFor();
    await chat.locator('#queue li', { hasText: 'Never mind this one' }).locator('button.drop').click();
    await chat.locator('#queue li', { hasText: 'Never mind this one' }).waitFor({ state: 'detached' });
    await waitForLog(extensionLog, /dropped queued prompt q-\S+/);
    release('queued');
    await running.locator('.turn-footer', { hasText: /^finished/ }).waitFor();
    const queued = chat.locator('section.turn', { has: chat.locator('.prompt', { hasText: 'Then answer this' }) });
    await queued.locator('.reply', { hasText: 'The queued answer.' }).waitFor();
    await queued.locator('.turn-footer', { hasText: /^finished/ }).waitFor();
    await chat.locator('#queue').waitFor({ state: 'hidden' });
    if ((await chat.locator('section.turn .prompt', { hasText: 'Never mind this one' }).count()) !== 0) {
      throw new Error('the dropped prompt ran');
    }
    await page.screenshot({ path: path.join(artifacts, 'queue.png') });
  });

  await check("the session's budget is shown against its spend, and a turn that would pass it ends exhausted", async () => {
    await palette("Set the Session's Budget");
    const input = page.locator('.quick-input-widget input.input');
    await input.waitFor({ state: 'visible' });
    await input.fill('tokens=5');
    await input.press('Enter');
    await chat.locator('#session-spend', { hasText: /^spent \d+ of 5 tokens$/ }).waitFor();
    await send('Spend more');
    const turn = chat.locator('section.turn', { has: chat.locator('.prompt', { hasText: 'Spend more' }) });
    await turn.locator('.turn-error', { hasText: /would pass the session's budget of 5 tokens/ }).waitFor();
    await turn.locator('.turn-footer', { hasText: /exhausted · / }).waitFor();
    await palette("Set the Session's Budget");
    await input.waitFor({ state: 'visible' });
    await input.fill('off');
    await input.press('Enter');
    await chat.locator('#session-spend').waitFor({ state: 'hidden' });
  });

  // --- the session's life: fork, rename, export and import, search, delete ---

  const header = async (selector, text) => chat.locator(selector, { hasText: text }).waitFor();
  const pathInput = async (file, button) => {
    // The file dialogs of a remote window ask for a path in a quick input.
    // Its completion would extend a path typed key by key: the path is put in at once.
    // It first lists the folder it starts in (the project's): only then does it keep a path put
    // in, rather than replace it with its own.
    const input = page.locator('.quick-input-widget input.input');
    await page.locator('.quick-input-list .monaco-list-row', { hasText: 'README.md' }).waitFor();
    await input.fill(file);
    const value = await input.inputValue();
    if (value !== file) {
      throw new Error(`the file dialog holds ${value}, not ${file}`);
    }
    await page.locator('.quick-input-widget .monaco-button', { hasText: button }).first().click();
  };
  const exported = path.join(tmp, 'exported.trellisd');

  await check('fork: "Fork from Here" on the first turn opens the fork, whose header names its origin', async () => {
    const first = page.locator('.monaco-list-row', { hasText: 'What is in this folder?' }).first();
    await first.hover();
    await first.locator('.action-label[aria-label="Fork from Here"]').click();
    await header('#session-lineage', 'forked from “What is in this folder?” at turn 1');
    await waitForLog(extensionLog, /session s-\S+ forked at t-\S+ into s-/);
    const turns = await chat.locator('section.turn').count();
    if (turns !== 1) {
      throw new Error(`the fork shows ${turns} turns; expected the path to the forked turn (1)`);
    }
  });

  await check('rename: "trellisd: Rename Session…" changes the title in the header', async () => {
    await palette('trellisd: Rename Session…');
    const input = page.locator('.quick-input-widget input.input');
    await input.waitFor({ state: 'visible' });
    await input.press('Control+a');
    await page.keyboard.type('A fork to try things', { delay: 5 });
    await input.press('Enter');
    await header('#session-title', 'A fork to try things');
    await waitForLog(extensionLog, /renamed to "A fork to try things"/);
  });

  await check('export: "trellisd: Export Session…" writes the file picked in the save dialog', async () => {
    await palette('trellisd: Export Session…');
    await pathInput(exported, /^(OK|Export)$/);
    await page.locator('.notification-toast', { hasText: /trellisd: exported \d+ turns? .* to .*exported\.trellisd/ }).waitFor();
    if (!fs.existsSync(exported)) {
      throw new Error(`${exported} was not written`);
    }
  });

  await check('import: "trellisd: Import Session…" of a session already here offers a copy, then shows it', async () => {
    const title = (await chat.locator('#session-title').textContent()) ?? '';
    await palette('trellisd: Import Session…');
    await pathInput(exported, /^(OK|Import)$/);
    const toast = page.locator('.notification-toast', { hasText: 'already in this store' });
    await toast.locator('.monaco-button', { hasText: 'Import as a Copy' }).click();
    // The session exported is a fork: its copy says both where it was forked from and that it
    // is a copy, so that it is not taken for the fork itself.
    await header('#session-lineage', 'forked from “What is in this folder?” at turn 1 · imported as a copy');
    await header('#session-title', title);
    await waitForLog(extensionLog, /imported from .*exported\.trellisd as a copy/);
  });

  await check('search: "trellisd: Search Sessions…" lists the hits as the user types; the pick reopens it', async () => {
    await palette('trellisd: Search Sessions…');
    const input = page.locator('.quick-input-widget input.input');
    await input.waitFor({ state: 'visible' });
    await page.keyboard.type('demo project', { delay: 20 });
    const hit = page.locator('.quick-input-list .monaco-list-row', { hasText: '«demo»' }).first();
    await hit.waitFor();
    // Every hit is a session one of whose turns says it (the original, and its imported copy
    // when the copy was made of it); the others are not listed.
    const rows = await page.locator('.quick-input-list .monaco-list-row').allTextContents();
    if (!rows.every((r) => r.includes('«demo» «project»'))) {
      throw new Error(`sessions listed for "demo project" that do not say it: ${rows.join(' | ')}`);
    }
    await hit.click();
    await header('#session-title', 'What is in this folder?');
    await chat.locator('section.turn', { hasText: 'Kept short' }).waitFor();
  });

  await check('delete: "trellisd: Delete Session…" asks in a dialog, then the session is gone', async () => {
    await palette('trellisd: Delete Session…');
    await page.locator('.quick-input-list .monaco-list-row', { hasText: 'A fork to try things' }).first().click();
    const dialog = page.locator('.monaco-dialog-box');
    await dialog.locator('.dialog-message-text', { hasText: 'Delete the session “A fork to try things”?' }).waitFor();
    await page.screenshot({ path: path.join(artifacts, 'delete.png') });
    await dialog.locator('.monaco-button', { hasText: 'Delete' }).click();
    await page.locator('.notification-toast', { hasText: 'the session “A fork to try things” was deleted' }).waitFor();
    await waitForLog(extensionLog, /session s-\S+ deleted/);
  });

  await check('remembered approvals: "trellisd: Remembered Approvals…" lists the project\'s grant; revoking it asks first', async () => {
    await palette('trellisd: Remembered Approvals…');
    const row = page.locator('.quick-input-list .monaco-list-row', { hasText: 'write notes.txt' });
    await row.locator('.label-description', { hasText: 'this project' }).waitFor();
    await row.click();
    const dialog = page.locator('.monaco-dialog-box');
    await dialog.locator('.dialog-message-text', { hasText: 'Revoke the approval to write notes.txt (this project)?' }).waitFor();
    await dialog.locator('.monaco-button', { hasText: 'Revoke' }).click();
    await page.locator('.notification-toast', { hasText: 'revoked write notes.txt (this project)' }).waitFor();
    await waitForLog(extensionLog, /revoked write notes\.txt \(project\)/);
    await palette('trellisd: Remembered Approvals…');
    await page.locator('.notification-toast', { hasText: 'no remembered approvals in this session' }).waitFor();
  });

  await check('a long session opens with its newest 50 turns, each step\'s text shown; "Load earlier turns" adds the rest above', async () => {
    // 60 turns of two steps each ("looking at n" calling read_file, then "answer n"), written
    // into the store beside the shared daemon
    execFileSync(
      which(daemonCommand),
      [path.resolve(here, '../../../tests/fixtures/sessions.py'), settings['trellisd.db'], fs.realpathSync(project), '60', 'a long conversation'],
      { env, encoding: 'utf8' },
    );
    await palette('trellisd: Reopen Session…');
    await page.locator('.quick-input-list .monaco-list-row', { hasText: 'a long conversation' }).first().click();
    await header('#session-title', 'a long conversation');
    const newest = chat.locator('section.turn', { hasText: 'question 60' });
    await newest.locator('.reply', { hasText: 'looking at 60' }).waitFor();
    await newest.locator('.reply', { hasText: 'answer 60' }).waitFor();
    const shown = await chat.locator('section.turn').count();
    if (shown !== 50) {
      throw new Error(`the long session opened with ${shown} turns; expected its newest 50`);
    }
    const earlier = chat.locator('#earlier');
    await earlier.waitFor({ state: 'visible' });
    await earlier.click();
    await chat.locator('section.turn').first().locator('.prompt', { hasText: /^question 1$/ }).waitFor();
    const all = await chat.locator('section.turn').count();
    if (all !== 60) {
      throw new Error(`after "Load earlier turns" the session shows ${all} turns; expected 60`);
    }
    await earlier.waitFor({ state: 'hidden' });
    await waitForLog(extensionLog, /loaded 10 earlier turn\(s\) of session s-/);
  });

  await check('pins: "Pin the Turn" in the turn tree\'s context menu marks the turn pinned; "Unpin the Turn" takes it back', async () => {
    const row = page.locator('.monaco-list-row', { hasText: 'question 1' }).first();
    await row.click();
    await contextMenu('Pin the Turn', row.locator('.label-description', { hasText: 'pinned' }));
    await waitForLog(extensionLog, /turn t-\S+ pinned/);
    await row.click();
    await contextMenu('Unpin the Turn', page.locator('.monaco-list-row', { hasText: 'question 1' }).first().locator('.label-description:not(:has-text("pinned"))'));
    await waitForLog(extensionLog, /turn t-\S+ unpinned/);
  });

  await check('fork after a step: "Fork After a Step…" lists the turn\'s steps and opens a fork that keeps the one picked', async () => {
    const row = page.locator('.monaco-list-row', { hasText: 'question 1' }).first();
    await row.click();
    const steps = page.locator('.quick-input-widget .monaco-list-row', { hasText: 'After step 1' });
    await contextMenu('Fork After a Step…', steps.first());
    await page.locator('.quick-input-widget .monaco-list-row', { hasText: 'After step 2' }).waitFor();
    await steps.first().click();
    await header('#session-lineage', 'forked from “a long conversation”');
    await waitForLog(extensionLog, /forked at step 1 of turn t-\S+ into s-/);
    const turn = chat.locator('section.turn').last();
    await turn.locator('.reply', { hasText: 'looking at 1' }).waitFor();
    await turn.locator('.turn-footer', { hasText: /^forked/ }).waitFor();
    const text = (await turn.locator('.reply').textContent()) ?? '';
    if (text.includes('answer 1')) {
      throw new Error(`the fork's copy of the turn shows a step after the one picked: ${JSON.stringify(text)}`);
    }
  });

  await check('MCP: a project server asks to start, its tool call names server and tool, and the tools view lists it', async () => {
    // where the walls let the server read it: a checkout under /tmp is hidden by their own /tmp
    let server = path.resolve(here, '../../../tests/fixtures/mcp_server.py');
    if (['/tmp/', '/run/'].some((hidden) => fs.realpathSync(server).startsWith(hidden))) {
      const copy = path.join(fs.mkdtempSync('/var/tmp/trellisd-fixtures-'), 'mcp_server.py');
      fs.copyFileSync(server, copy);
      server = copy;
    }
    const python = settings['trellisd.command'];
    fs.writeFileSync(
      path.join(project, '.trellisd.toml'),
      `[[mcp]]\nname = "proj"\ncommand = ${JSON.stringify(python)}\nargs = [${JSON.stringify(server)}]\n`,
    );
    await palette('trellisd: Start Session');
    await chat.locator('#session-title', { hasText: 'New session' }).waitFor({ timeout: 60_000 });
    await send('Ask the MCP server');
    const pick = page.locator('.quick-input-widget');
    await pick.locator('.quick-input-title', { hasText: 'start MCP server proj from the project' }).waitFor({ timeout: 60_000 });
    await page.screenshot({ path: path.join(artifacts, 'mcp-start.png') });
    await pick.locator('.monaco-list-row', { hasText: 'Allow once' }).click();
    await pick.locator('.quick-input-title', { hasText: 'allow MCP tool echo of server proj?' }).waitFor({ timeout: 60_000 });
    await pick.locator('.monaco-list-row', { hasText: 'Allow once' }).click();
    const turn = chat.locator('section.turn').nth(0);
    await turn.locator('.tool', { hasText: 'mcp__proj__echo' }).waitFor({ timeout: 60_000 });
    await turn.locator('.turn-footer', { hasText: /^finished/ }).waitFor({ timeout: 60_000 });
    await waitForLog(extensionLog, /approval asked: mcp__proj__echo .*\[MCP server proj, tool echo\]/);
    await palette("trellisd: Show the Model's Tools and MCP Servers");
    // the list draws only the rows in sight: narrow it to the server's tool first
    await pick.locator('input.input').fill('mcp__proj');
    const row = pick.locator('.monaco-list-row', { hasText: 'mcp__proj__echo' }).first();
    await row.waitFor({ timeout: 60_000 });
    const text = (await row.textContent()) ?? '';
    if (!text.includes('MCP proj · exec · ask · mcp:proj/echo')) {
      throw new Error(`the tools view shows: ${text}`);
    }
    await pick.locator('input.input').fill('proj');
    await pick.locator('.monaco-list-row', { hasText: 'project · stdio · running' }).first().waitFor();
    await page.screenshot({ path: path.join(artifacts, 'mcp-tools.png') });
    await page.keyboard.press('Escape');
  });

  await check('a command killed by a cancel asks "Keep" or "Revert" before any turn runs; keeping lets the next one run', async () => {
    await send('Migrate the database');
    const pick = page.locator('.quick-input-widget');
    await pick.locator('.quick-input-title', { hasText: 'run_command' }).waitFor({ timeout: 60_000 });
    await pick.locator('.monaco-list-row', { hasText: 'Allow once' }).click();
    const turn = chat.locator('section.turn', { hasText: 'Migrate the database' });
    // its output: the trap is set, so the cancel's TERM is ignored and the daemon must kill it
    await turn.locator('.tool-output', { hasText: 'migrating' }).waitFor({ timeout: 60_000 });
    await chat.locator('#cancel').click();
    const toast = page.locator('.notification-toast', { hasText: 'a cancelled command was killed mid-run' });
    await toast.waitFor({ timeout: 60_000 });
    await page.screenshot({ path: path.join(artifacts, 'recovery.png') });
    await toast.locator('.monaco-button', { hasText: 'Keep the Files as They Are' }).click();
    await waitForLog(extensionLog, /session s-\S+ recovered: keep/);
    await send('Go on');
    await chat.locator('section.turn', { hasText: 'Go on' }).locator('.turn-footer', { hasText: /^finished/ }).waitFor({ timeout: 60_000 });
  });

  await check('worktree: a session in a new worktree shows its branch, writes there; merge brings the file into the checkout; discard asks first', async () => {
    // the project becomes a git repository with its README on main
    const git = (...args) => execFileSync('git', ['-c', 'user.name=e2e', '-c', 'user.email=e2e@localhost', ...args], { cwd: project, encoding: 'utf8' });
    git('init', '-q', '-b', 'main');
    git('add', 'README.md');
    git('commit', '-q', '-m', 'the README');
    await palette('trellisd: Start a Session in a New Worktree…');
    const input = page.locator('.quick-input-widget input.input');
    await input.waitFor({ state: 'visible' });
    await page.keyboard.type('e2e-feature', { delay: 5 });
    await input.press('Enter');
    await header('#session-worktree', '⎇ trellisd/e2e-feature → main');
    await waitForLog(extensionLog, /session s-\S+ opened over .* in the worktree .*e2e-feature \(trellisd\/e2e-feature\)/);
    await send('Write feature.txt');
    const pick = page.locator('.quick-input-widget');
    await pick.locator('.quick-input-title', { hasText: 'write_file' }).waitFor({ timeout: 60_000 });
    await pick.locator('.monaco-list-row', { hasText: 'Allow once' }).click();
    await chat.locator('section.turn', { hasText: 'Write feature.txt' }).locator('.turn-footer', { hasText: /^finished/ }).waitFor({ timeout: 60_000 });
    if (fs.existsSync(path.join(project, 'feature.txt'))) {
      throw new Error('the worktree session wrote into the checkout');
    }
    await page.screenshot({ path: path.join(artifacts, 'worktree.png') });
    await palette("trellisd: Merge the Session's Worktree into Its Base Branch");
    await page.locator('.notification-toast', { hasText: /merged trellisd\/e2e-feature into main .*feature\.txt, and written into your checkout/ }).waitFor();
    if (fs.readFileSync(path.join(project, 'feature.txt'), 'utf8') !== 'made in a worktree\n') {
      throw new Error('the merge did not write feature.txt into the checkout');
    }
    await palette("trellisd: Discard the Session's Worktree…");
    const dialog = page.locator('.monaco-dialog-box');
    await dialog.locator('.dialog-message-text', { hasText: 'Discard the worktree of this session and its branch trellisd/e2e-feature?' }).waitFor();
    await dialog.locator('.monaco-button', { hasText: 'Discard' }).click();
    await page.locator('.notification-toast', { hasText: 'the branch trellisd/e2e-feature were discarded' }).waitFor();
    await chat.locator('#session-worktree').waitFor({ state: 'hidden' });
  });

  await check('children: a task call shows its child under it as it streams, asks its approval naming it; the child is listed under its parent and opens', async () => {
    await palette('trellisd: Start Session');
    await chat.locator('#session-title', { hasText: 'New session' }).waitFor({ timeout: 60_000 });
    await waitForLog(extensionLog, /session s-\S+ opened over .* with the task tool/);
    await send('Have a helper write the list');
    const pick = page.locator('.quick-input-widget');
    await pick.locator('.quick-input-title', { hasText: 'child session “write the list” asks: allow write_file?' }).waitFor({ timeout: 60_000 });
    await pick.locator('.monaco-list-row', { hasText: 'Allow once' }).click();
    const turn = chat.locator('section.turn', { hasText: 'Have a helper write the list' });
    const child = turn.locator('details.child');
    await child.locator('.child-name', { hasText: 'child session “write the list”' }).waitFor({ timeout: 60_000 });
    await child.locator('.child-body .text', { hasText: 'Listing done:' }).waitFor({ timeout: 60_000 });
    await child.locator('.child-state', { hasText: 'running' }).waitFor();
    await child.locator('.approval', { hasText: 'allowed once' }).waitFor();
    await page.screenshot({ path: path.join(artifacts, 'child-running.png') });
    release('child-text');
    await child.locator('.child-state', { hasText: /^finished/ }).waitFor({ timeout: 60_000 });
    await turn.locator('.turn-footer', { hasText: /^finished/ }).waitFor({ timeout: 60_000 });
    await turn.locator('.reply > .text', { hasText: 'The helper wrote list.txt.' }).waitFor();
    if ((await turn.locator('.reply > .text', { hasText: 'Listing done' }).count()) !== 0) {
      throw new Error("the child's text was drawn as the parent's");
    }
    if (fs.readFileSync(path.join(project, 'list.txt'), 'utf8') !== 'one\n') {
      throw new Error('the child did not write list.txt');
    }
    await child.locator('a.child-open').click();
    await header('#session-lineage', 'child session of “Have a helper write the list”');
    await chat.locator('section.turn', { hasText: 'write the list' }).locator('.turn-footer', { hasText: /^finished/ }).waitFor();
    await palette('trellisd: Reopen Session…');
    const rows = pick.locator('.monaco-list-row');
    await rows.filter({ hasText: '↳ write the list' }).filter({ hasText: 'child of “Have a helper write the list”' }).waitFor({ timeout: 60_000 });
    const labels = await rows.allTextContents();
    const parentAt = labels.findIndex((l) => l.startsWith('Have a helper write the list'));
    if (parentAt < 0 || !labels[parentAt + 1]?.startsWith('↳ write the list')) {
      throw new Error(`the child is not listed under its parent: ${labels.join(' | ')}`);
    }
    await page.screenshot({ path: path.join(artifacts, 'child-listed.png') });
    await page.keyboard.press('Escape');
  });

  await check('an escalation is asked apart: "run OUTSIDE the walls?", the reason, no "always"; allowed once, it runs outside', async () => {
    await palette('trellisd: Start Session');
    await chat.locator('#session-walls', { hasText: 'walls: workspace-write · network off' }).waitFor();
    await send('Write the shared cache');
    const pick = page.locator('.quick-input-widget');
    await pick.locator('.quick-input-title', { hasText: 'run OUTSIDE the walls? sh -c' }).waitFor({ timeout: 60_000 });
    const placeholder = (await pick.locator('input.input').getAttribute('placeholder')) ?? '';
    if (placeholder !== "The model's reason: the shared cache lives outside the project") {
      throw new Error(`the escalation's placeholder says ${JSON.stringify(placeholder)}`);
    }
    const rows = await pick.locator('.monaco-list-row').allTextContents();
    if (rows.length !== 2 || rows.some((row) => /always/i.test(row))) {
      throw new Error(`the escalation offers ${JSON.stringify(rows)}`);
    }
    await chat.locator('.approval.escalation', { hasText: 'waiting for your answer' }).waitFor();
    await page.screenshot({ path: path.join(artifacts, 'escalation.png') });
    await pick.locator('.monaco-list-row', { hasText: 'Run outside the walls, once' }).click();
    const turn = chat.locator('section.turn', { hasText: 'Write the shared cache' });
    await turn.locator('.turn-footer', { hasText: /^finished/ }).waitFor({ timeout: 60_000 });
    await turn.locator('.approval.escalation', { hasText: 'allowed once: it ran outside the walls' }).waitFor();
    await turn.locator('.escalation-reason', { hasText: 'because: the shared cache lives outside the project' }).waitFor();
    if (fs.readFileSync(path.join(tmp, 'outside.txt'), 'utf8') !== 'out\n') {
      throw new Error('the escalated command did not write outside the walls');
    }
    await waitForLog(extensionLog, /escalation answered: allow for run_command/);
  });

  await check('plans: plan mode on, the plan drawn live in the Plan view and on its turn, a write refused plainly; Run this plan writes it', async () => {
    await palette('trellisd: Plan Mode (Toggle)');
    await page.locator('.statusbar-item', { hasText: 'plan mode' }).waitFor();
    await chat.locator('#session-mode', { hasText: 'mode: plan' }).waitFor();
    await send('Plan the file');
    const turn = chat.locator('section.turn', { hasText: 'Plan the file' });
    await turn.locator('.turn-footer', { hasText: /^finished/ }).waitFor({ timeout: 60_000 });
    await turn.locator('.tool-refused-plan', { hasText: 'refused: the session is in plan mode' }).waitFor();
    await turn.locator('.plan-progress', { hasText: 'plan: 1 of 2 done' }).waitFor();
    const entry = page.locator('.monaco-list-row', { hasText: 'write plan.txt' });
    await entry.locator('.label-description', { hasText: 'pending · high priority' }).waitFor();
    if (fs.existsSync(path.join(project, 'plan.txt'))) {
      throw new Error('plan mode let the write through');
    }
    await page.screenshot({ path: path.join(artifacts, 'plan.png') });
    await turn.locator('button.run-plan').click();
    const pick = page.locator('.quick-input-widget');
    await pick.locator('.quick-input-title', { hasText: 'run the plan under which approval mode?' }).waitFor();
    await pick.locator('.monaco-list-row', { hasText: 'acceptEdits' }).click();
    const ran = chat.locator('section.turn', { hasText: 'carries out the plan of turn “Plan the file”' });
    await ran.locator('.turn-footer', { hasText: /^finished/ }).waitFor({ timeout: 60_000 });
    if (fs.readFileSync(path.join(project, 'plan.txt'), 'utf8') !== 'planned\n') {
      throw new Error('the plan run under acceptEdits did not write plan.txt');
    }
    await chat.locator('#session-mode', { hasText: 'mode: acceptEdits' }).waitFor();
    await waitForLog(extensionLog, /running the plan of turn \S+ under the approval mode acceptEdits/);
  });

  await check('custom commands: "Run Custom Command…" lists the project\'s /greet, asks its arguments and runs it; / in the prompt box offers it', async () => {
    const file = path.join(project, '.trellisd', 'commands', 'greet.md');
    fs.mkdirSync(path.dirname(file), { recursive: true });
    fs.writeFileSync(file, '---\ndescription: Greet someone by name\nargument-hint: [name]\n---\nSay hello to $ARGUMENTS.\n');
    await palette('trellisd: Run Custom Command…');
    const pick = page.locator('.quick-input-widget');
    await pick.locator('.quick-input-title', { hasText: 'trellisd: run a custom command' }).waitFor();
    // the list draws only the rows in sight: narrow it to the command first
    await page.keyboard.type('greet', { delay: 10 });
    const row = pick.locator('.monaco-list-row', { hasText: '/greet' });
    await row.locator('.label-description', { hasText: '[name] · project' }).waitFor();
    const rowText = await row.first().textContent();
    if (!rowText?.includes('Greet someone by name')) {
      throw new Error(`the command's row says ${JSON.stringify(rowText)}`);
    }
    await row.first().click();
    await pick.locator('.quick-input-title', { hasText: 'trellisd: /greet' }).waitFor();
    const input = pick.locator('input.input');
    const placeholder = (await input.getAttribute('placeholder')) ?? '';
    if (placeholder !== '[name]') {
      throw new Error(`the arguments' placeholder says ${JSON.stringify(placeholder)}`);
    }
    await page.keyboard.type('Ada', { delay: 10 });
    await input.press('Enter');
    const turn = chat.locator('section.turn', { hasText: '/greet Ada' });
    await turn.locator('.turn-footer', { hasText: /^finished/ }).waitFor({ timeout: 60_000 });
    await turn.locator('.reply', { hasText: 'Hello, Ada, from a custom command.' }).waitFor();
    await waitForLog(extensionLog, /reply: Hello, Ada, from a custom command/);

    // the chat's prompt box: `/` and the start of the name list it; Tab takes it
    const prompt = chat.locator('#prompt');
    await prompt.click();
    await prompt.pressSequentially('/gr', { delay: 20 });
    const offered = chat.locator('#command-list .command[data-command="greet"]');
    await offered.locator('.command-hint', { hasText: '[name]' }).waitFor();
    await offered.locator('.command-source', { hasText: 'project' }).waitFor();
    await page.screenshot({ path: path.join(artifacts, 'custom-command.png') });
    await prompt.press('Tab');
    await chat.locator('#command-list').waitFor({ state: 'hidden' });
    const typed = await prompt.inputValue();
    if (typed !== '/greet ') {
      throw new Error(`Tab left ${JSON.stringify(typed)} in the prompt box`);
    }
    await prompt.fill('');
  });

  await check('a pasted picture goes with the prompt as a chip and shows in its turn; the effort picked is asked for', async () => {
    const png = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==';
    await chat.locator('#prompt').evaluate((el, data) => {
      const bytes = Uint8Array.from(atob(data), (c) => c.charCodeAt(0));
      const clipboard = new DataTransfer();
      clipboard.items.add(new File([bytes], 'shot.png', { type: 'image/png' }));
      el.dispatchEvent(new ClipboardEvent('paste', { clipboardData: clipboard, bubbles: true, cancelable: true }));
    }, png);
    await chat.locator('#images .image-chip', { hasText: 'pasted image · image/png · 70 bytes' }).waitFor();
    await chat.locator('#effort').selectOption('high');
    await send('What is in the picture?');
    const turn = chat.locator('section.turn', { hasText: 'What is in the picture?' });
    await turn.locator('.turn-footer', { hasText: /^finished/ }).waitFor({ timeout: 60_000 });
    await chat.locator('#images').waitFor({ state: 'hidden' });
    await turn.locator('img.turn-image-picture').waitFor();
    await waitForLog(extensionLog, /prompt with 1 image\(s\): pasted image/);
    await waitForLog(extensionLog, /the turn asks for effort high/);
    await turn.locator('.turn-image figcaption', { hasText: 'image/png · 70 bytes' }).waitFor();
    await page.screenshot({ path: path.join(artifacts, 'image.png') });
  });

  exitCode = 0;
} catch (error) {
  if (context) {
    const page = context.pages()[0];
    await page?.screenshot({ path: path.join(artifacts, 'failure.png') }).catch(() => undefined);
    say(`failure screenshot: ${path.join(artifacts, 'failure.png')}`);
    // What the chat view held when the check gave up: the end of its turns, as HTML.
    if (page) {
      const views = await page.locator('iframe.webview.ready').count().catch(() => 0);
      const html = await page
        .frameLocator('iframe.webview.ready')
        .first()
        .frameLocator('#active-frame')
        .locator('#turns')
        .innerHTML({ timeout: 5000 })
        .catch((e) => `(not readable: ${e?.message ?? e})`);
      console.log(`----- chat view (${views} webview frame(s)), end of #turns -----\n${html.slice(-4000)}`);
    }
  }
  for (const [name, file] of [['extension log', extensionLog], ['code-server log (last 60 lines)', serverLog]]) {
    if (fs.existsSync(file)) {
      const text = fs.readFileSync(file, 'utf8').split('\n').slice(-60).join('\n');
      console.log(`----- ${name} -----\n${text}`);
    }
  }
  if (!results.some((r) => !r.ok)) {
    results.push({ name: 'setting up', ok: false, error });
    console.log(error?.stack ?? error);
  }
} finally {
  await context?.close().catch(() => undefined);
  if (serverProcess?.pid) {
    try {
      process.kill(-serverProcess.pid, 'SIGTERM');
    } catch {
      // already gone
    }
  }
  // The shared daemon outlives the windows: stop it, and wait until it has exited (after its
  // turns, which a failed check may have left held).
  for (const name of ['first-reply', 'steer-queued', 'reloaded', 'command-may-end', 'child-text']) {
    release(name);
  }
  try {
    execFileSync(which(daemonCommand), [...daemonArgs, 'stop', '--db', settings['trellisd.db']], { env, encoding: 'utf8', timeout: 60_000 });
  } catch (error) {
    say(`could not stop the shared daemon: ${error}`);
    exitCode = 1;
  }
  fs.rmSync(runtime, { recursive: true, force: true });
  fs.rmSync(wallsSee, { recursive: true, force: true });
  if (!process.env.E2E_KEEP && exitCode === 0) {
    fs.rmSync(tmp, { recursive: true, force: true });
  } else {
    say(`kept ${tmp}`);
  }
}

const passed = results.filter((r) => r.ok).length;
const failed = results.length - passed;
say(`done in ${elapsed()}`);
// last, where a shortened log keeps it: which check failed, and its first line
for (const r of results.filter((r) => !r.ok)) {
  console.log(`e2e failed: ${r.name}: ${String(r.error?.message ?? r.error).split('\n')[0]}`);
}
console.log(`e2e: ${passed} passed, ${failed} failed`);
process.exit(exitCode);
