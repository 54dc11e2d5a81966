import './setup';

import * as assert from 'node:assert/strict';
import * as http from 'node:http';
import { describe, test } from 'node:test';

import { SessionController } from '../src/session';
import { registerView, sessionOf, withoutToken } from '../src/view';
import { daemonPerTest, features, RecordingView } from './daemon';
import { stub, UIKind } from './vscode-stub';

const daemonOf = daemonPerTest();

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

function get(url: string, cookie?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const request = http.get(url, { agent: false, headers: cookie ? { cookie } : {} }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () =>
        resolve({ status: response.statusCode ?? 0, headers: response.headers, body: Buffer.concat(chunks).toString('utf8') }),
      );
      response.on('error', reject);
    });
    request.on('error', reject);
  });
}

/** The page at `url` as a browser gets it: the token traded for a cookie and a redirect, the
 * redirect followed with the cookie. */
async function browse(url: string): Promise<Answer & { url: string }> {
  const first = await get(url);
  if (first.status < 300 || first.status >= 400) {
    return { ...first, url };
  }
  const cookie = (first.headers['set-cookie'] ?? []).map((c) => c.split(';')[0]).join('; ');
  const next = new URL(String(first.headers.location), url).toString();
  return { ...(await get(next, cookie)), url: next };
}

const PROMPT = 'explain how the parser reads a <frame>';

async function aSession() {
  const daemon = daemonOf();
  daemon.setScript([{ text: 'It reads one frame at a time.' }]);
  const c = new SessionController(daemon.client(), daemon.log);
  c.attachView(new RecordingView());
  registerView(features(c, daemon.log));
  await c.openSession(daemon.root);
  const result = await c.turn(PROMPT);
  assert.equal(result?.outcome, 'finished', result?.error);
  return { daemon, c, open: stub.commands.get('trellisd.openInBrowser')! };
}

describe('Open in Browser', () => {
  test("opens the session's page, which shows its prompt, with a one-time link", async () => {
    const { c, open } = await aSession();
    await open();
    assert.equal(stub.opened.length, 1, 'the browser was asked to open one URL');
    const [url] = stub.opened;
    assert.match(url, new RegExp(`^http://127\\.0\\.0\\.1:\\d+/s/${c.session!.sessionId}\\?token=`));
    const page = await browse(url);
    assert.equal(page.status, 200);
    assert.ok(!page.url.includes('token='), 'the token is traded for a cookie');
    assert.ok(page.body.includes('explain how the parser reads a &lt;frame&gt;'), "the page shows the session's prompt");
    assert.deepEqual(stub.messages, [], 'nothing else is said');

    // the link lets in one browser; the command gives a fresh one each time
    assert.equal((await get(url)).status, 403);
    await open();
    assert.notEqual(stub.opened[1], url);
    assert.equal((await browse(stub.opened[1])).status, 200);
  });

  test('with no session open it says so, and opens nothing', async () => {
    const daemon = daemonOf();
    const c = new SessionController(daemon.client(), daemon.log);
    registerView(features(c, daemon.log));
    await stub.commands.get('trellisd.openInBrowser')!();
    assert.deepEqual(stub.opened, []);
    assert.equal(stub.messages.length, 1);
    assert.equal(stub.messages[0].level, 'information');
    assert.match(stub.messages[0].message, /^No session is open to show in the browser: start a session or reopen one/);
    assert.deepEqual(stub.messages[0].items, ['Reopen Session…']);
  });

  test('when VS Code cannot open the browser, the link is shown and copied on request', async () => {
    const { open } = await aSession();
    stub.answerOpenExternal = () => false;
    stub.answerMessage = (shown) => shown.items.find((i) => i.startsWith('Copy'));
    await open();
    const [url] = stub.opened;
    assert.equal(stub.messages.length, 1);
    assert.equal(stub.messages[0].level, 'warning');
    assert.ok(stub.messages[0].message.includes(url), stub.messages[0].message);
    assert.equal(stub.clipboard, url);
    assert.equal((await browse(stub.clipboard)).status, 200, 'the copied link still lets a browser in');
  });

  test('in VS Code in a browser (code-server) the link is shown, not handed to its port proxy', async () => {
    const { open } = await aSession();
    stub.uiKind = UIKind.Web;
    stub.answerMessage = () => undefined;
    await open();
    assert.deepEqual(stub.opened, [], 'openExternal would send it to /proxy/PORT/, without its path and token');
    assert.equal(stub.messages.length, 1);
    const url = stub.messages[0].message.match(/http:\/\/127\.0\.0\.1:\d+\/s\/\S+\?token=[\w-]+/)?.[0];
    assert.ok(url, stub.messages[0].message);
    assert.match(stub.messages[0].message, /forwarded port/);
    assert.deepEqual(stub.messages[0].items, ['Copy the Link']);
    assert.equal((await browse(url)).status, 200, 'the link shown lets a browser in');
  });

  test('a row of another session opens that session; the log keeps no token', async () => {
    const { daemon, c, open } = await aSession();
    const id = c.session!.sessionId;
    assert.equal(sessionOf(id), id);
    assert.equal(sessionOf({ sessionId: id, title: 't' }), id);
    assert.equal(sessionOf(undefined), undefined);
    await open({ sessionId: id });
    assert.ok(stub.opened[0].includes(`/s/${id}?token=`));
    const token = new URL(stub.opened[0]).searchParams.get('token')!;
    assert.ok(!daemon.log.lines.some((l) => l.includes(token)), 'the token is not written to the log');
    assert.ok(daemon.log.has(/opening session .* in the browser: http:\/\/127\.0\.0\.1:\d+\/s\/.*\?token=…/));
    assert.equal(withoutToken('http://h/s/x?token=abc&b=1'), 'http://h/s/x?token=…&b=1');
  });

  test('an unknown session is said plainly', async () => {
    const daemon = daemonOf();
    const c = new SessionController(daemon.client(), daemon.log);
    registerView(features(c, daemon.log));
    await stub.commands.get('trellisd.openInBrowser')!('0000000000000000');
    assert.deepEqual(stub.opened, []);
    assert.equal(stub.messages[0]?.level, 'error');
    assert.match(stub.messages[0].message, /unknown session/i);
  });
});
