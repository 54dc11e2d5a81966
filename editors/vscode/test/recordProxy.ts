/**
 * Stands between the extension and the real daemon and writes down every message that passes,
 * so a test can check them against protocol/schema.json:
 *
 *     node recordProxy.js LOG.jsonl COMMAND [ARGS...]
 *
 * Each line of LOG is {"from": "editor" | "daemon", "message": {...}}.
 */

import { spawn } from 'child_process';
import * as fs from 'fs';

/** Splits a byte stream into LSP base-protocol frames and parses each body as JSON. */
export class FrameReader {
  private buffer = Buffer.alloc(0);

  constructor(private readonly onMessage: (message: unknown) => void) {}

  push(chunk: Buffer): void {
    this.buffer = Buffer.concat([this.buffer, chunk]);
    for (;;) {
      const end = this.buffer.indexOf('\r\n\r\n');
      if (end < 0) {
        return;
      }
      const headers = this.buffer.subarray(0, end).toString('ascii');
      const length = Number(/content-length:\s*(\d+)/i.exec(headers)?.[1]);
      if (!Number.isFinite(length)) {
        throw new Error(`a frame without Content-Length: ${headers}`);
      }
      if (this.buffer.length < end + 4 + length) {
        return;
      }
      const body = this.buffer.subarray(end + 4, end + 4 + length).toString('utf8');
      this.buffer = this.buffer.subarray(end + 4 + length);
      this.onMessage(JSON.parse(body));
    }
  }
}

function main(): void {
  const [log, command, ...args] = process.argv.slice(2);
  const write = (from: string) => (message: unknown) =>
    fs.appendFileSync(log, `${JSON.stringify({ from, message })}\n`);
  const child = spawn(command, args, { stdio: ['pipe', 'pipe', 'inherit'] });
  const fromEditor = new FrameReader(write('editor'));
  const fromDaemon = new FrameReader(write('daemon'));
  process.stdin.on('data', (chunk: Buffer) => {
    fromEditor.push(chunk);
    child.stdin.write(chunk);
  });
  process.stdin.on('end', () => child.stdin.end());
  child.stdout.on('data', (chunk: Buffer) => {
    fromDaemon.push(chunk);
    process.stdout.write(chunk);
  });
  child.on('exit', (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
}

if (require.main === module) {
  main();
}
