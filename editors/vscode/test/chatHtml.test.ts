import './setup';

import * as assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, test } from 'node:test';

import { chatHtml, contentSecurityPolicy, makeNonce } from '../src/chatHtml';

const media = path.join(__dirname, '..', '..', 'media');

describe('the chat view page', () => {
  const nonce = makeNonce();
  const html = chatHtml({
    cspSource: 'https://file+.vscode-resource.vscode-cdn.net',
    nonce,
    scriptUri: 'https://file+.vscode-resource.vscode-cdn.net/ext/media/chat.js',
    styleUri: 'https://file+.vscode-resource.vscode-cdn.net/ext/media/chat.css',
  });

  test('its Content-Security-Policy allows nothing but the extension\'s own files and the nonce\'d script', () => {
    const csp = /<meta http-equiv="Content-Security-Policy" content="([^"]+)">/.exec(html)?.[1];
    assert.ok(csp);
    assert.equal(csp, contentSecurityPolicy({ cspSource: 'https://file+.vscode-resource.vscode-cdn.net', nonce }));
    assert.match(csp, /default-src 'none'/);
    assert.match(csp, new RegExp(`script-src 'nonce-${nonce}'(;|$)`));
    assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval|\*/);
    assert.match(nonce, /^[A-Za-z0-9]{20,}$/);
    assert.notEqual(makeNonce(), nonce);
  });

  test('every script has the nonce, and nothing is loaded from elsewhere', () => {
    const scripts = html.match(/<script[^>]*>/g) ?? [];
    assert.equal(scripts.length, 1);
    assert.ok(scripts.every((s) => s.includes(`nonce="${nonce}"`) && s.includes('src=')));
    assert.doesNotMatch(html, /<script[^>]*>[^<]+<\/script>/, 'no inline script');
    assert.doesNotMatch(html, /\sstyle=|\son[a-z]+=/, 'no inline style or handler');
    const urls = html.match(/(?:src|href)="([^"]+)"/g) ?? [];
    assert.ok(urls.every((u) => u.includes('vscode-resource')), urls.join(' '));
  });

  test('the script and the style need no network', () => {
    const script = fs.readFileSync(path.join(media, 'chat.js'), 'utf8');
    const style = fs.readFileSync(path.join(media, 'chat.css'), 'utf8');
    for (const text of [script, style]) {
      assert.doesNotMatch(text, /https?:\/\/|@import|fetch\(|XMLHttpRequest|WebSocket|eval\(|new Function/);
    }
  });
});
