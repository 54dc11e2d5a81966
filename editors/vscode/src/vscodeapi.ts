/**
 * Thin wrappers over the VS Code API: the only module the logic imports `vscode` through, so
 * that tests can stand a small fake in for `vscode` and run the logic in plain Node.
 */

import * as vscode from 'vscode';

export type Disposable = vscode.Disposable;
export type CancellationToken = vscode.CancellationToken;

export function showErrorMessage(message: string, ...items: string[]): Thenable<string | undefined> {
  return vscode.window.showErrorMessage(message, ...items);
}

export function showWarningMessage(message: string, ...items: string[]): Thenable<string | undefined> {
  return vscode.window.showWarningMessage(message, ...items);
}

export function showInformationMessage(message: string, ...items: string[]): Thenable<string | undefined> {
  return vscode.window.showInformationMessage(message, ...items);
}

export function showQuickPick<T extends vscode.QuickPickItem>(
  items: T[],
  options: vscode.QuickPickOptions,
): Thenable<T | undefined> {
  return vscode.window.showQuickPick(items, options);
}

export function createQuickPick<T extends vscode.QuickPickItem>(): vscode.QuickPick<T> {
  return vscode.window.createQuickPick<T>();
}

export function showInputBox(options: vscode.InputBoxOptions): Thenable<string | undefined> {
  return vscode.window.showInputBox(options);
}

export function createStatusBarItem(id: string, name: string): vscode.StatusBarItem {
  const item = vscode.window.createStatusBarItem(id, vscode.StatusBarAlignment.Right, 100);
  item.name = name;
  return item;
}

export function createOutputChannel(name: string): vscode.OutputChannel {
  return vscode.window.createOutputChannel(name);
}

export function registerCommand(command: string, callback: (...args: any[]) => unknown): Disposable {
  return vscode.commands.registerCommand(command, callback);
}

export function executeCommand<T>(command: string, ...rest: unknown[]): Thenable<T | undefined> {
  return vscode.commands.executeCommand<T>(command, ...rest);
}

export function setContext(key: string, value: unknown): Thenable<unknown> {
  return vscode.commands.executeCommand('setContext', key, value);
}

export function getConfiguration(section: string): vscode.WorkspaceConfiguration {
  return vscode.workspace.getConfiguration(section);
}

export function onDidChangeConfiguration(
  listener: (e: vscode.ConfigurationChangeEvent) => unknown,
): Disposable {
  return vscode.workspace.onDidChangeConfiguration(listener);
}

export function workspaceFolders(): readonly vscode.WorkspaceFolder[] {
  return vscode.workspace.workspaceFolders ?? [];
}

export function registerWebviewViewProvider(
  viewId: string,
  provider: vscode.WebviewViewProvider,
): Disposable {
  return vscode.window.registerWebviewViewProvider(viewId, provider);
}

export function createTreeView<T>(viewId: string, options: vscode.TreeViewOptions<T>): vscode.TreeView<T> {
  return vscode.window.createTreeView(viewId, options);
}

export function withProgress<R>(title: string, task: () => Promise<R>): Thenable<R> {
  return vscode.window.withProgress(
    { location: vscode.ProgressLocation.Window, title },
    () => task(),
  );
}

export function registerTextDocumentContentProvider(
  scheme: string,
  provider: vscode.TextDocumentContentProvider,
): Disposable {
  return vscode.workspace.registerTextDocumentContentProvider(scheme, provider);
}

export function uri(scheme: string, path: string): vscode.Uri {
  return vscode.Uri.from({ scheme, path });
}

export function fileUri(path: string): vscode.Uri {
  return vscode.Uri.file(path);
}

/** The active text editor as plain values: its file, its text, and the lines the selection
 * covers (1-based, inclusive; none when nothing is selected). */
export interface ActiveEditor {
  path: string;
  scheme: string;
  text: string;
  selection?: { startLine: number; endLine: number; text: string };
}

export function activeEditor(): ActiveEditor | undefined {
  const editor = vscode.window.activeTextEditor;
  if (!editor) {
    return undefined;
  }
  const document = editor.document;
  const active: ActiveEditor = { path: document.uri.fsPath, scheme: document.uri.scheme, text: document.getText() };
  const selection = editor.selection;
  if (!selection.isEmpty) {
    const startLine = selection.start.line + 1;
    // a selection that ends at the start of a line does not take that line
    const endLine = Math.max(startLine, selection.end.character === 0 ? selection.end.line : selection.end.line + 1);
    const lines: string[] = [];
    for (let line = startLine - 1; line < endLine; line++) {
      lines.push(document.lineAt(line).text);
    }
    active.selection = { startLine, endLine, text: `${lines.join('\n')}\n` };
  }
  return active;
}

export function besideColumn(): vscode.ViewColumn {
  return vscode.ViewColumn.Beside;
}

/** A modal question with one action besides Cancel; true when the user chose the action. */
export async function confirm(message: string, detail: string, action: string): Promise<boolean> {
  return (await vscode.window.showWarningMessage(message, { modal: true, detail }, action)) === action;
}

export interface FileDialog {
  title: string;
  /** The folder or file the dialog starts at. */
  defaultPath?: string;
  /** Label: extensions without the dot, as VS Code's dialogs take them. */
  filters?: Record<string, string[]>;
  label?: string;
}

/** The save dialog; the chosen path, or undefined when it was closed. */
export async function showSaveDialog(options: FileDialog): Promise<string | undefined> {
  const uri = await vscode.window.showSaveDialog({
    title: options.title,
    saveLabel: options.label,
    filters: options.filters,
    defaultUri: options.defaultPath ? vscode.Uri.file(options.defaultPath) : undefined,
  });
  return uri?.fsPath;
}

/** The open dialog for one file; its path, or undefined when it was closed. */
export async function showOpenDialog(options: FileDialog): Promise<string | undefined> {
  const uris = await vscode.window.showOpenDialog({
    title: options.title,
    openLabel: options.label,
    filters: options.filters,
    canSelectFiles: true,
    canSelectFolders: false,
    canSelectMany: false,
    defaultUri: options.defaultPath ? vscode.Uri.file(options.defaultPath) : undefined,
  });
  return uris?.[0]?.fsPath;
}

/** VS Code runs in a web browser (code-server, a Codespace), not as a desktop app. */
export function inBrowser(): boolean {
  return vscode.env.uiKind === vscode.UIKind.Web;
}

/** Opens a URL in the user's browser (or with its app); false when VS Code could not. */
export function openExternal(url: string): Thenable<boolean> {
  return vscode.env.openExternal(vscode.Uri.parse(url));
}

export function writeClipboard(text: string): Thenable<void> {
  return vscode.env.clipboard.writeText(text);
}
