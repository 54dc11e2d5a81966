import './setup';

import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as path from 'node:path';
import { describe, test } from 'node:test';

import { ChatViewProvider } from '../src/chatView';
import { registerComposer } from '../src/composer';
import { EFFORTS, Method } from '../src/protocol';
import type { FromWebview, ToWebview } from '../src/session';
import { SessionController } from '../src/session';
import { features, stripTags, daemonPerTest, WatchedView as BaseView } from './daemon';
import { stub, Uri } from './vscode-stub';

const schema = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', '..', '..', 'protocol', 'schema.json'), 'utf8'));
const manifest = JSON.parse(fs.readFileSync(path.join(__dirname, '..', '..', 'package.json'), 'utf8'));

/** A 1×1 PNG. */
const PNG = Buffer.from('iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==', 'base64');

/** The chat view, with the chips under the prompt box as last posted. */
class WatchedView extends BaseView {
  /** The chips under the prompt box, as last posted. */
  get chips(): string[] {
    const last = this.messages.filter((m): m is Extract<ToWebview, { type: 'images' }> => m.type === 'images').at(-1);
    return last ? last.images.map((i) => i.text) : [];
  }
}

/** The chat view as the webview's script talks to it: what it posts in, what it is sent. */
function chatOf(c: SessionController): { chat: ChatViewProvider; from: (m: FromWebview) => void } {
  const chat = new ChatViewProvider(Uri.file('/ext') as never, c, {} as never);
  const from = (m: FromWebview) => (chat as unknown as { receive(m: FromWebview): void }).receive(m);
  return { chat, from };
}

/** An OpenAI-compatible model server on 127.0.0.1 that streams one reply and keeps each
 * request's body. */
async function modelServer(): Promise<{ url: string; bodies: unknown[]; close(): void }> {
  const bodies: unknown[] = [];
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => (body += chunk));
    req.on('end', () => {
      if (req.method !== 'POST') {
        res.writeHead(404).end(); // the models list: the daemon's own table then
        return;
      }
      bodies.push(JSON.parse(body));
      res.writeHead(200, { 'content-type': 'text/event-stream' });
      const chunk = (delta: object, finish: string | null = null) =>
        `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', model: 'gpt-4o-mini', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
      res.write(chunk({ role: 'assistant', content: 'A small ' }));
      res.write(chunk({ content: 'red square.' }));
      res.write(chunk({}, 'stop'));
      res.write(`data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', choices: [], usage: { prompt_tokens: 90, completion_tokens: 4, total_tokens: 94 } })}\n\n`);
      res.end('data: [DONE]\n\n');
    });
  });
  server.on('connection', (socket) => socket.setNoDelay(true));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address() as { port: number };
  return { url: `http://127.0.0.1:${port}/v1`, bodies, close: () => server.close() };
}

const daemonOf = daemonPerTest();

describe('images with a prompt', () => {
  test('an image attached from a file and one pasted go with the prompt, and show in the turn, also after a reopen', async () => {
    const daemon = daemonOf();
    const server = await modelServer();
    try {
      const client = daemon.client({
        initializationOptions: () => ({ provider: 'openai', baseUrl: server.url, apiKey: 'sk-test', model: 'gpt-4o-mini' }),
      });
      const c = new SessionController(client, daemon.log);
      const view = new WatchedView();
      c.attachView(view);
      registerComposer(features(c, daemon.log));
      await c.openSession(daemon.root);
      fs.writeFileSync(path.join(daemon.root, 'shot.png'), PNG);
      stub.answerOpenDialog = () => path.join(daemon.root, 'shot.png');
      await stub.commands.get('trellisd.attachImage')!();
      const { from } = chatOf(c);
      from({ type: 'pasteImage', data: PNG.toString('base64'), mimeType: 'image/png' });
      assert.deepEqual(view.chips, [`shot.png · image/png · ${PNG.length} bytes`, `pasted image · image/png · ${PNG.length} bytes`]);
      from({ type: 'pasteImage', data: PNG.toString('base64'), mimeType: 'image/png' });
      from({ type: 'dropImage', id: c.attachments.items[2].id });
      assert.equal(view.chips.length, 2, 'a chip removed does not go');

      const result = await c.turn('what is in these?');
      assert.equal(result?.outcome, 'finished', result?.error);
      assert.deepEqual(view.chips, [], 'the chips went with the prompt');
      const sent = JSON.stringify(server.bodies[0]);
      const dataUrl = `data:image/png;base64,${PNG.toString('base64')}`;
      assert.equal(sent.split(dataUrl).length - 1, 2, 'both images reached the model');
      assert.match(view.last!.body, /<img class="turn-image-picture" src="data:image\/png;base64,/);

      const { turns } = await client.request(Method.turns, { sessionId: c.session!.sessionId });
      assert.deepEqual(turns[0].images?.map((i) => [i.mimeType, i.bytes]), [['image/png', PNG.length], ['image/png', PNG.length]]);

      // reopened in another window: the turn shows both, type, size and picture (session/image)
      const other = new SessionController(daemon.client({ initializationOptions: () => ({ provider: 'openai', baseUrl: server.url, apiKey: 'sk-test' }) }), daemon.log);
      const seen = new WatchedView();
      other.attachView(seen);
      await other.reopenSession(c.session!.sessionId);
      await seen.until(() => (seen.last?.body.match(/<img class="turn-image-picture"/g) ?? []).length === 2);
      assert.match(stripTags(seen.last!.body), new RegExp(`image/png · ${PNG.length} bytes`));
    } finally {
      server.close();
    }
  });

  test('an image the daemon refuses is named in the turn and comes back as a chip', async () => {
    const daemon = daemonOf();
    daemon.setScript([{ text: 'never said' }]);
    const c = new SessionController(daemon.client(), daemon.log);
    const view = new WatchedView();
    c.attachView(view);
    await c.openSession(daemon.root);
    const { from } = chatOf(c);
    from({ type: 'pasteImage', data: Buffer.from('not a picture at all').toString('base64'), mimeType: 'image/png' });
    const result = await c.turn('look');
    assert.equal(result, undefined);
    assert.match(stripTags(view.last!.footer), /images\[0\]/, 'the refusal names the image');
    const shown = stub.messages.find((m) => m.level === 'error');
    assert.match(shown?.message ?? '', /^images\[0\]/);
    assert.equal(view.chips.length, 1, 'the refused image is back under the prompt box');
    from({ type: 'pasteImage', data: '', mimeType: 'text/plain' });
    assert.ok(view.notices.some((n) => /not a PNG, JPEG, GIF or WebP image/.test(n)), view.notices.join('\n'));
  });
});

describe('thoughts and effort', () => {
  test('a thought streams folded under its step, is drawn so after a reopen, and its tokens are counted', async () => {
    const daemon = daemonOf();
    daemon.setScript([{ thought: 'The README is the place to look first.', text: 'It is a small project.' } as never]);
    const c = new SessionController(daemon.client(), daemon.log);
    const view = new WatchedView();
    c.attachView(view);
    await c.openSession(daemon.root);
    const result = await c.turn('what is this?');
    assert.equal(result?.outcome, 'finished', result?.error);
    const body = view.last!.body;
    assert.match(body, /<details class="thought" data-fold="[^"]+"><summary>.*thought.*8 words.*<\/summary><div class="thought-text">The README is the place to look first\.<\/div><\/details><div class="text">/);
    assert.doesNotMatch(body, /<details class="thought"[^>]* open/, 'folded: unfolded by a click');
    assert.match(view.last!.footer, /\d+ reasoning\)/, 'reasoning tokens are shown with the tokens');

    const other = new SessionController(daemon.client(), daemon.log);
    const seen = new WatchedView();
    other.attachView(seen);
    await other.reopenSession(c.session!.sessionId);
    await seen.until(() => /class="thought"/.test(seen.last?.body ?? ''));
    assert.match(seen.last!.body, /<div class="thought-text">The README is the place to look first\.<\/div><\/details><div class="text"><p>It is a small project\./);
  });

  test('the effort picked beside Send reaches the turn: the run records it', async () => {
    const daemon = daemonOf();
    daemon.setScript([{ text: 'one' }, { text: 'two' }]);
    const c = new SessionController(daemon.client(), daemon.log);
    const view = new WatchedView();
    c.attachView(view);
    stub.config.set('trellisd.effort', 'low');
    registerComposer({ ...features(c, daemon.log), settings: () => ({ ...features(c, daemon.log).settings(), effort: 'low' }) });
    await c.openSession(daemon.root);
    assert.equal(c.effort, 'low', 'the setting is the picker default');
    const { from } = chatOf(c);
    from({ type: 'effort', effort: 'high' });
    assert.ok(view.messages.some((m) => m.type === 'effort' && m.effort === 'high'));
    const high = await c.turn('think hard');
    from({ type: 'effort', effort: '' });
    const plain = await c.turn('think as you like');
    const effortOf = async (runId: string) => {
      const { events } = await c.client.request(Method.runEvents, { runId });
      return events.find((e) => e.kind === 'model')?.detail.effort;
    };
    assert.equal(await effortOf(high!.runId), 'high');
    assert.equal(await effortOf(plain!.runId) ?? null, null, 'default: none asked for');
  });

  test('the effort picker and the provider list follow the schema', () => {
    assert.deepEqual([...EFFORTS], schema.$defs.Effort.enum);
    assert.deepEqual(manifest.contributes.configuration.properties['trellisd.effort'].enum, ['', ...EFFORTS]);
    assert.ok(manifest.contributes.configuration.properties['trellisd.provider'].enum.includes('openai-responses'));
  });
});
