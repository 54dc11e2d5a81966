/**
 * What a write that asks for approval would make of its file, in VS Code's diff editor beside
 * the approval. The daemon sends the unified diff against the file on disk (`diff` of
 * session/requestApproval); the proposed text is that diff applied to the file, served under the
 * `trellisd-proposed` scheme by a content provider that `extension.ts` registers. A turn's change
 * list is shown the same way, as a read-only `.diff` document.
 */

import * as fs from 'node:fs';
import * as path from 'node:path';

import type { FileChange } from './protocol';
import { sharedMark } from './sharing';
import * as vscodeapi from './vscodeapi';

export const SCHEME = 'trellisd-proposed';

const texts = new Map<string, string>();
let shown = 0;

export const contentProvider = {
  provideTextDocumentContent: (uri: { path: string }): string => texts.get(uri.path) ?? '',
};

/** The root-relative path a unified diff is about (`+++ b/<path>`, or `--- a/<path>`). */
export function diffPath(diff: string): string | undefined {
  const lines = diff.split('\n');
  for (const prefix of ['+++ b/', '--- a/']) {
    const line = lines.find((l) => l.startsWith(prefix));
    if (line) {
      return line.slice(prefix.length);
    }
  }
  return undefined;
}

/** `current` with the unified diff `diff` applied, its hunks in order (as the daemon writes them). */
export function applyDiff(current: string, diff: string): string {
  const old = current.split(/(?<=\n)/).filter((l) => l !== '');
  const out: string[] = [];
  let at = 0;
  let last = '';
  const lines = diff.split('\n');
  if (lines[lines.length - 1] === '') {
    lines.pop();
  }
  for (const line of lines) {
    const hunk = /^@@ -(\d+)(?:,(\d+))? \+\d+(?:,\d+)? @@/.exec(line);
    if (hunk) {
      const start = Number(hunk[1]);
      const upTo = hunk[2] === '0' ? start : start - 1;
      out.push(...old.slice(at, upTo));
      at = upTo;
    } else if (line.startsWith('--- ') || line.startsWith('+++ ')) {
      continue;
    } else if (line.startsWith('\\')) {
      if (last === '+' && out.length) {
        out[out.length - 1] = out[out.length - 1].replace(/\n$/, '');
      }
    } else if (line.startsWith('+')) {
      out.push(line.slice(1) + '\n');
    } else if (line.startsWith('-')) {
      at += 1;
    } else if (line.startsWith(' ')) {
      out.push(old[at] ?? line.slice(1) + '\n');
      at += 1;
    }
    last = line.charAt(0);
  }
  out.push(...old.slice(at));
  return out.join('');
}

/** Open the diff editor beside the approval: the file as it is, and as the write would leave it. */
export async function showProposed(root: string, diff: string): Promise<void> {
  const relative = diffPath(diff);
  if (!relative) {
    return;
  }
  const file = path.join(root, relative);
  let current: string | undefined;
  try {
    current = await fs.promises.readFile(file, 'utf8');
  } catch {
    current = undefined; // a new file: the left side is empty
  }
  shown += 1;
  const key = `/${shown}/${relative}`;
  texts.set(key, applyDiff(current ?? '', diff));
  const left = current === undefined ? vscodeapi.uri(SCHEME, `/${shown}/empty/${relative}`) : vscodeapi.fileUri(file);
  await vscodeapi.executeCommand('vscode.diff', left, vscodeapi.uri(SCHEME, key), `${relative}: what the write would change`, {
    preview: true,
    preserveFocus: true,
    viewColumn: vscodeapi.besideColumn(),
  });
}

/** A turn's change list as one unified diff; a binary or too large file is named only. A change
 * another session may have made too is marked, naming it (by its title in `titles`). */
export function changesText(files: FileChange[], titles: Map<string, string> = new Map()): string {
  if (!files.length) {
    return '# the turn changed no file\n';
  }
  return files
    .map((f) => sharedMark(f, titles) + (f.diff || `# ${f.path} ${f.status} (${f.binary ? 'binary' : 'too large to keep'})\n`))
    .join('');
}

/** Open a turn's changes as a read-only diff document. */
export async function showChanges(turnId: string, files: FileChange[], titles?: Map<string, string>): Promise<void> {
  shown += 1;
  const key = `/${shown}/changes of ${turnId}.diff`;
  texts.set(key, changesText(files, titles));
  await vscodeapi.executeCommand('vscode.open', vscodeapi.uri(SCHEME, key), { preview: true });
}
