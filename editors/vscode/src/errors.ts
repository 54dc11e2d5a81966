/**
 * The errors a person can see, each with a message that says what happened in their words.
 *
 *     TrellisError                 anything the extension shows as a message
 *     +-- StartError               the daemon could not be started (not found, exited at once,
 *     |                            not trellisd)
 *     +-- ConnectionLost           the daemon exited while a request was waiting for its answer
 *     +-- DaemonError              the daemon answered with a JSON-RPC error: its message is
 *                                  shown as it is, with its code and data kept
 *
 * Foreign errors (spawn errors, vscode-jsonrpc's ResponseError) are translated once, in
 * client.ts, at the boundary.
 */

export class TrellisError extends Error {
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

export class StartError extends TrellisError {}

export interface ExitInfo {
  code: number | null;
  signal: string | null;
  /** The last lines the daemon wrote to stderr, newest last. */
  stderr: string[];
  /** True when the extension asked the daemon to stop. */
  expected: boolean;
}

export class ConnectionLost extends TrellisError {
  constructor(
    message: string,
    readonly exit: ExitInfo | undefined,
  ) {
    super(message);
  }
}

export class DaemonError extends TrellisError {
  constructor(
    message: string,
    readonly code: number,
    readonly data: unknown,
  ) {
    super(message);
  }
}

/** How an exit reads to a person: "exited with code 2" or "was killed (SIGKILL)". */
export function describeExit(exit: ExitInfo | undefined): string {
  if (!exit) {
    return 'stopped';
  }
  if (exit.signal) {
    return `was stopped by ${exit.signal}`;
  }
  return `exited with code ${exit.code}`;
}

/** The last stderr line worth showing, e.g. argparse's "error: ..." or a traceback's last line. */
export function lastWords(exit: ExitInfo | undefined): string | undefined {
  const lines = (exit?.stderr ?? []).map((line) => line.trim()).filter(Boolean);
  return lines.length ? lines[lines.length - 1] : undefined;
}

/** The message to show for any error thrown by an action. */
export function messageOf(error: unknown): string {
  if (error instanceof TrellisError) {
    return error.message;
  }
  if (error instanceof Error) {
    return `trellisd: ${error.message}`;
  }
  return `trellisd: ${String(error)}`;
}
