/**
 * The "trellisd" log: the extension's own lines and the daemon's stderr, in an OutputChannel
 * the user can open, and also appended to a file when TRELLISD_VSCODE_LOG names one (for tests
 * and bug reports).
 */

import * as fs from 'fs';

import type { Log } from './client';

export interface LineSink {
  appendLine(line: string): void;
}

export class ChannelLog implements Log {
  constructor(
    private readonly channel: LineSink,
    private file: string | undefined = process.env.TRELLISD_VSCODE_LOG || undefined,
  ) {}

  info(message: string): void {
    this.write('info', message);
  }

  warn(message: string): void {
    this.write('warn', message);
  }

  error(message: string): void {
    this.write('error', message);
  }

  daemon(line: string): void {
    this.write('daemon', line);
  }

  private write(level: string, message: string): void {
    const line = `${new Date().toISOString()} [${level}] ${message}`;
    this.channel.appendLine(line);
    if (this.file) {
      try {
        fs.appendFileSync(this.file, `${line}\n`);
      } catch {
        this.file = undefined; // an unwritable file must not break the extension
      }
    }
  }
}
