/**
 * The extension's settings (trellisd.*) and what follows from them: the daemon's command line
 * and the initializationOptions it is started with.
 */

import * as os from 'os';
import * as path from 'path';

import type { DaemonCommand } from './client';
import type { InitializationOptions, McpServer, Policy } from './protocol';
import type { ApprovalMode, Network, SandboxMode } from './protocolTypes';
import { APPROVAL_MODES, openPolicy, readNetwork, SANDBOX_MODES } from './walls';

export interface Settings {
  command: string;
  args: string[];
  db: string;
  provider: string;
  model: string;
  baseUrl: string;
  /** The effort picked for new turns ('': the model's own default). */
  effort: string;
  /** session/open's mcpServers for new sessions. */
  mcpServers: McpServer[];
  /** session/open's policy `task` for new sessions: the task tool, which starts child sessions. */
  task: { enabled: boolean; maxConcurrent: number };
  /** session/open's policy for new sessions: the approval mode, the walls' mode and what walled
   * programs may reach; '' and null: the daemon's default. */
  approval: ApprovalMode | '';
  sandbox: SandboxMode | '';
  network: Network | null;
}

export const DEFAULT_SETTINGS: Settings = {
  command: 'trellisd',
  args: [],
  db: '',
  provider: '',
  model: '',
  baseUrl: '',
  effort: '',
  mcpServers: [],
  task: { enabled: false, maxConcurrent: 2 },
  approval: '',
  sandbox: '',
  network: null,
};

/** session/open's policy for a new session: the task tool turned on when the settings say so;
 * undefined leaves the daemon's policy as it is. */
/** session/open's policy for new sessions from every setting that makes one: the walls, the
 * network and the approval mode (`walls.openPolicy`), and the task tool (`sessionPolicy`). */
export function newSessionPolicy(settings: Settings): Policy | undefined {
  const walls = openPolicy(settings);
  const task = sessionPolicy(settings);
  return walls || task ? { ...walls, ...task } : undefined;
}

export function sessionPolicy(settings: Settings): Policy | undefined {
  return settings.task.enabled ? { task: { enabled: true, maxConcurrent: settings.task.maxConcurrent } } : undefined;
}

/** ~ and ~/x become the home folder; anything else is kept as written. */
export function expandHome(value: string): string {
  if (value === '~') {
    return os.homedir();
  }
  if (value.startsWith('~/')) {
    return path.join(os.homedir(), value.slice(2));
  }
  return value;
}

/** Where the daemon runs: 'ssh' (the command is ssh: the arguments after the host are words of
 * the remote shell's command line), 'remote' (`trellisd --remote host`, which quotes them
 * itself), or undefined: this machine. */
export function remoteDaemon(command: string, args: readonly string[]): 'ssh' | 'remote' | undefined {
  if (path.basename(command).replace(/\.exe$/i, '') === 'ssh') {
    return 'ssh';
  }
  return args.some((a) => a === '--remote' || a.startsWith('--remote=')) ? 'remote' : undefined;
}

/** One word for a POSIX shell, as it is: 'it'\''s'. */
function shellQuoted(word: string): string {
  return `'${word.replace(/'/g, "'\\''")}'`;
}

/** The daemon's command line. The store of a daemon on another machine is that machine's path:
 * passed as written, its ~ that machine's home (trellisd expands it). */
export function daemonCommand(settings: Settings, cwd?: string): DaemonCommand {
  const command = expandHome(settings.command.trim() || DEFAULT_SETTINGS.command);
  const args = [...settings.args];
  const db = settings.db.trim();
  if (db) {
    const where = remoteDaemon(command, args);
    args.push('--db', where === 'ssh' ? shellQuoted(db) : where === 'remote' ? db : expandHome(db));
  }
  return { command, args, cwd };
}

export function initializationOptions(settings: Settings, apiKey?: string): InitializationOptions {
  const options: InitializationOptions = {};
  if (settings.provider.trim()) {
    // A name the schema does not list is sent as the user wrote it: the daemon's refusal names it.
    options.provider = settings.provider.trim() as InitializationOptions['provider'];
  }
  if (settings.model.trim()) {
    options.model = settings.model.trim();
  }
  if (settings.baseUrl.trim()) {
    options.baseUrl = settings.baseUrl.trim();
  }
  if (apiKey) {
    options.apiKey = apiKey;
  }
  return options;
}

/** Settings as read from a configuration object, with wrong types replaced by defaults. */
export function readSettings(get: (key: string) => unknown): Settings {
  const text = (key: keyof Settings): string => {
    const value = get(key);
    return typeof value === 'string' ? value : (DEFAULT_SETTINGS[key] as string);
  };
  const args = get('args');
  const servers = get('mcpServers');
  const atOnce = get('task.maxConcurrent');
  const oneOf = <T extends string>(key: keyof Settings, values: readonly T[]): T | '' => {
    const value = get(key);
    return values.includes(value as T) ? (value as T) : '';
  };
  return {
    command: text('command'),
    args: Array.isArray(args) ? args.filter((a): a is string => typeof a === 'string') : [],
    db: text('db'),
    provider: text('provider'),
    model: text('model'),
    baseUrl: text('baseUrl'),
    effort: text('effort'),
    mcpServers: Array.isArray(servers)
      ? servers.filter((s): s is McpServer => typeof s === 'object' && s !== null && typeof s.name === 'string')
      : [],
    task: {
      enabled: get('task.enabled') === true,
      maxConcurrent:
        typeof atOnce === 'number' && Number.isInteger(atOnce) && atOnce >= 1 && atOnce <= 16
          ? atOnce
          : DEFAULT_SETTINGS.task.maxConcurrent,
    },
    approval: oneOf('approval', APPROVAL_MODES),
    sandbox: oneOf('sandbox', SANDBOX_MODES),
    network: readNetwork(get('network')),
  };
}
