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

export function besideColumn(): vscode.ViewColumn {
  return vscode.ViewColumn.Beside;
}
