import './setup';

import * as assert from 'node:assert/strict';
import * as os from 'node:os';
import * as path from 'node:path';
import { describe, test } from 'node:test';

import { daemonCommand, DEFAULT_SETTINGS, initializationOptions, readSettings, remoteDaemon } from '../src/config';

describe('settings', () => {
  test('the daemon command line: command, args, then --db', () => {
    const command = daemonCommand({ ...DEFAULT_SETTINGS, command: '/usr/bin/python3', args: ['-m', 'trellisd'], db: '~/t.db' }, '/work');
    assert.deepEqual(command, { command: '/usr/bin/python3', args: ['-m', 'trellisd', '--db', path.join(os.homedir(), 't.db')], cwd: '/work' });
    assert.deepEqual(daemonCommand({ ...DEFAULT_SETTINGS, command: '  ' }).command, 'trellisd');
  });

  test('a daemon on another machine gets the store as written: ~ is that machine\'s home', () => {
    const remote = daemonCommand({ ...DEFAULT_SETTINGS, args: ['acp', '--remote', 'box'], db: '~/t.db' }, '/work');
    assert.deepEqual(remote, { command: 'trellisd', args: ['acp', '--remote', 'box', '--db', '~/t.db'], cwd: '/work' });
    assert.deepEqual(daemonCommand({ ...DEFAULT_SETTINGS, args: ['--remote=box'], db: '~/t.db' }).args, ['--remote=box', '--db', '~/t.db']);
    // Behind ssh the remote shell reads the words again: the path is quoted as one.
    const ssh = daemonCommand({ ...DEFAULT_SETTINGS, command: '/usr/bin/ssh', args: ['box', 'trellisd'], db: "~/my db's.db" });
    assert.deepEqual(ssh.args, ['box', 'trellisd', '--db', "'~/my db'\\''s.db'"]);
    assert.equal(remoteDaemon('trellisd', []), undefined);
  });

  test('initializationOptions carry only what is set', () => {
    assert.deepEqual(initializationOptions(DEFAULT_SETTINGS), {});
    assert.deepEqual(
      initializationOptions({ ...DEFAULT_SETTINGS, provider: 'openai', model: 'gpt-4o-mini', baseUrl: 'http://127.0.0.1:8000/v1' }, 'sk-x'),
      { provider: 'openai', model: 'gpt-4o-mini', baseUrl: 'http://127.0.0.1:8000/v1', apiKey: 'sk-x' },
    );
  });

  test('values of the wrong type fall back to the defaults', () => {
    const values: Record<string, unknown> = { command: 42, args: ['-m', 7, 'trellisd'], db: '/x.db' };
    assert.deepEqual(readSettings((key) => values[key]), { ...DEFAULT_SETTINGS, args: ['-m', 'trellisd'], db: '/x.db' });
  });
});
