/**
 * A small stand-in for the `vscode` module: the parts of the API the extension uses, recording
 * what the extension shows and answering its questions the way a test says. setup.ts makes
 * `require('vscode')` return this module.
 */

import * as path from 'path';

type Listener<T> = (value: T) => unknown;

export class Disposable {
  constructor(private readonly fn: () => void = () => undefined) {}
  dispose(): void {
    this.fn();
  }
}

export class EventEmitter<T> {
  private listeners = new Set<Listener<T>>();
  readonly event = (listener: Listener<T>): Disposable => {
    this.listeners.add(listener);
    return new Disposable(() => this.listeners.delete(listener));
  };
  fire(value: T): void {
    for (const listener of [...this.listeners]) {
      listener(value);
    }
  }
  dispose(): void {
    this.listeners.clear();
  }
}

export enum TreeItemCollapsibleState {
  None = 0,
  Collapsed = 1,
  Expanded = 2,
}

export enum ProgressLocation {
  SourceControl = 1,
  Window = 10,
  Notification = 15,
}

export class ThemeIcon {
  constructor(readonly id: string) {}
}

export class TreeItem {
  id?: string;
  description?: string;
  tooltip?: string;
  iconPath?: ThemeIcon;
  contextValue?: string;
  constructor(
    readonly label: string,
    readonly collapsibleState: TreeItemCollapsibleState = TreeItemCollapsibleState.None,
  ) {}
}

export class Uri {
  private constructor(
    readonly scheme: string,
    readonly fsPath: string,
  ) {}
  static file(p: string): Uri {
    return new Uri('file', p);
  }
  static from(parts: { scheme: string; path: string }): Uri {
    return new Uri(parts.scheme, parts.path);
  }
  static parse(value: string): Uri {
    const scheme = new URL(value).protocol.replace(/:$/, '');
    return new Uri(scheme, value.slice(scheme.length + 3));
  }
  static joinPath(base: Uri, ...parts: string[]): Uri {
    return new Uri(base.scheme, path.join(base.fsPath, ...parts));
  }
  get path(): string {
    return this.fsPath;
  }
  toString(): string {
    return `${this.scheme}://${this.fsPath}`;
  }
}

export enum ViewColumn {
  Beside = -2,
}

export class CancellationTokenSource {
  private readonly emitter = new EventEmitter<void>();
  readonly token = {
    isCancellationRequested: false,
    onCancellationRequested: this.emitter.event,
  };
  cancel(): void {
    this.token.isCancellationRequested = true;
    this.emitter.fire();
  }
  dispose(): void {
    this.emitter.dispose();
  }
}

export interface QuickPickItem {
  label: string;
  description?: string;
  detail?: string;
}

export class QuickPick<T extends QuickPickItem> {
  title?: string;
  placeholder?: string;
  items: T[] = [];
  selectedItems: T[] = [];
  ignoreFocusOut = false;
  matchOnDescription = false;
  matchOnDetail = false;
  busy = false;
  visible = false;
  disposed = false;
  private typed = '';
  private readonly accepted = new EventEmitter<void>();
  private readonly hidden = new EventEmitter<void>();
  private readonly changedValue = new EventEmitter<string>();
  readonly onDidAccept = this.accepted.event;
  readonly onDidHide = this.hidden.event;
  readonly onDidChangeValue = this.changedValue.event;

  get value(): string {
    return this.typed;
  }
  /** What a person does: type into the box (each set is one change). */
  set value(text: string) {
    this.typed = text;
    this.changedValue.fire(text);
  }

  show(): void {
    this.visible = true;
    stub.quickPicks.push(this as unknown as QuickPick<QuickPickItem>);
    stub.onQuickPick(this as unknown as QuickPick<QuickPickItem>);
  }
  /** What a person does: pick the item whose label contains `label`, then press Enter. */
  accept(label: string): void {
    const item = this.items.find((i) => i.label.includes(label));
    if (!item) {
      throw new Error(`no item "${label}" in ${this.items.map((i) => i.label).join(', ')}`);
    }
    this.selectedItems = [item];
    this.accepted.fire();
  }
  hide(): void {
    if (this.visible) {
      this.visible = false;
      this.hidden.fire();
    }
  }
  dispose(): void {
    this.visible = false;
    this.disposed = true;
  }
}

export interface Shown {
  level: 'error' | 'warning' | 'information';
  message: string;
  items: string[];
}

/** What the extension showed, and how the test answers. Reset between tests. */
export const stub = {
  messages: [] as Shown[],
  quickPicks: [] as QuickPick<QuickPickItem>[],
  output: [] as string[],
  /** What each output channel holds, by its name. */
  channels: new Map<string, string>(),
  commands: new Map<string, (...args: any[]) => unknown>(),
  executed: [] as { id: string; args: unknown[] }[],
  contentProviders: new Map<string, { provideTextDocumentContent(uri: Uri): string }>(),
  context: new Map<string, unknown>(),
  config: new Map<string, unknown>(),
  folders: [] as { uri: Uri; name: string; index: number }[],
  onQuickPick: (_pick: QuickPick<QuickPickItem>) => undefined as unknown,
  answerQuickPick: (items: QuickPickItem[]): QuickPickItem | undefined => items[0],
  /** The input box's answer; `options` are what the extension asked with (title, placeHolder...). */
  answerInputBox: (_options?: { title?: string; prompt?: string; placeHolder?: string; value?: string }): string | undefined => undefined,
  answerMessage: (_shown: Shown): string | undefined => undefined,
  answerSaveDialog: (_options: unknown): string | undefined => undefined,
  answerOpenDialog: (_options: unknown): string | undefined => undefined,
  webviewProviders: new Map<string, any>(),
  treeProviders: new Map<string, any>(),
  statusBarItems: new Map<string, StatusBarItem>(),
  /** The URLs the extension asked to open in the browser (env.openExternal), and the answer. */
  opened: [] as string[],
  answerOpenExternal: (_url: string): boolean => true,
  clipboard: '',
  uiKind: 1 as UIKind,
  reset(): void {
    this.messages = [];
    this.quickPicks = [];
    this.output = [];
    this.channels.clear();
    this.commands.clear();
    this.executed = [];
    this.contentProviders.clear();
    this.context.clear();
    this.config.clear();
    this.folders = [];
    this.onQuickPick = () => undefined;
    this.answerQuickPick = (items) => items[0];
    this.answerInputBox = () => undefined;
    this.answerMessage = () => undefined;
    this.answerSaveDialog = () => undefined;
    this.answerOpenDialog = () => undefined;
    this.webviewProviders.clear();
    this.treeProviders.clear();
    this.statusBarItems.clear();
    this.opened = [];
    this.answerOpenExternal = () => true;
    this.clipboard = '';
    this.uiKind = UIKind.Desktop;
  },
};

export const StatusBarAlignment = { Left: 1, Right: 2 } as const;

/** A status bar item: what it shows, and whether it is shown. */
export class StatusBarItem {
  text = '';
  tooltip: string | undefined;
  command: string | undefined;
  name: string | undefined;
  visible = false;
  constructor(readonly id: string) {}
  show(): void {
    this.visible = true;
  }
  hide(): void {
    this.visible = false;
  }
  dispose(): void {
    this.visible = false;
    stub.statusBarItems.delete(this.id);
  }
}

function show(level: Shown['level']) {
  return (message: string, ...items: unknown[]): Promise<string | undefined> => {
    const labels = items.filter((i): i is string => typeof i === 'string');
    const shown = { level, message, items: labels };
    stub.messages.push(shown);
    return Promise.resolve(stub.answerMessage(shown));
  };
}

const configurationChanged = new EventEmitter<{ affectsConfiguration(section: string): boolean }>();

export const window = {
  showErrorMessage: show('error'),
  showWarningMessage: show('warning'),
  showInformationMessage: show('information'),
  showQuickPick: <T extends QuickPickItem>(items: T[] | Promise<T[]>): Promise<T | undefined> =>
    Promise.resolve(items).then((list) => stub.answerQuickPick(list) as T | undefined),
  createQuickPick: <T extends QuickPickItem>(): QuickPick<T> => new QuickPick<T>(),
  showInputBox: (options?: { title?: string; prompt?: string; placeHolder?: string }): Promise<string | undefined> =>
    Promise.resolve(stub.answerInputBox(options)),
  showSaveDialog: (options: unknown): Promise<Uri | undefined> => {
    const answer = stub.answerSaveDialog(options);
    return Promise.resolve(answer === undefined ? undefined : Uri.file(answer));
  },
  showOpenDialog: (options: unknown): Promise<Uri[] | undefined> => {
    const answer = stub.answerOpenDialog(options);
    return Promise.resolve(answer === undefined ? undefined : [Uri.file(answer)]);
  },
  createOutputChannel: (name: string) => ({
    name,
    appendLine: (line: string) => stub.output.push(line),
    append: (text: string) => (stub.output.push(text), stub.channels.set(name, (stub.channels.get(name) ?? '') + text)),
    replace: (text: string) => (stub.output.push(text), stub.channels.set(name, text)),
    show: () => undefined,
    dispose: () => undefined,
  }),
  registerWebviewViewProvider: (id: string, provider: unknown): Disposable => {
    stub.webviewProviders.set(id, provider);
    return new Disposable(() => stub.webviewProviders.delete(id));
  },
  createTreeView: (id: string, options: { treeDataProvider: unknown }) => {
    stub.treeProviders.set(id, options.treeDataProvider);
    return { dispose: () => stub.treeProviders.delete(id) };
  },
  withProgress: <R>(_options: unknown, task: () => Promise<R>): Promise<R> => task(),
  createStatusBarItem: (id: string): StatusBarItem => {
    const item = new StatusBarItem(id);
    stub.statusBarItems.set(id, item);
    return item;
  },
};

export const commands = {
  registerCommand: (id: string, fn: (...args: any[]) => unknown): Disposable => {
    if (stub.commands.has(id)) {
      throw new Error(`command ${id} is already registered`);
    }
    stub.commands.set(id, fn);
    return new Disposable(() => stub.commands.delete(id));
  },
  executeCommand: async (id: string, ...args: unknown[]): Promise<unknown> => {
    stub.executed.push({ id, args });
    if (id === 'setContext') {
      stub.context.set(String(args[0]), args[1]);
      return undefined;
    }
    const fn = stub.commands.get(id);
    return fn ? fn(...args) : undefined;
  },
};

export const workspace = {
  getConfiguration: (section: string) => ({
    get: <T>(key: string, fallback?: T): T | undefined =>
      (stub.config.has(`${section}.${key}`) ? stub.config.get(`${section}.${key}`) : fallback) as T | undefined,
  }),
  get workspaceFolders() {
    return stub.folders.length ? stub.folders : undefined;
  },
  onDidChangeConfiguration: configurationChanged.event,
  registerTextDocumentContentProvider: (
    scheme: string,
    provider: { provideTextDocumentContent(uri: Uri): string },
  ): Disposable => {
    stub.contentProviders.set(scheme, provider);
    return new Disposable(() => stub.contentProviders.delete(scheme));
  },
};

export enum UIKind {
  Desktop = 1,
  Web = 2,
}

export const env = {
  get uiKind(): UIKind {
    return stub.uiKind;
  },
  openExternal: (uri: Uri): Promise<boolean> => {
    stub.opened.push(uri.toString());
    return Promise.resolve(stub.answerOpenExternal(uri.toString()));
  },
  clipboard: {
    writeText: (text: string): Promise<void> => {
      stub.clipboard = text;
      return Promise.resolve();
    },
  },
};

/** Change a setting as the Settings editor would, firing onDidChangeConfiguration. */
export function setConfiguration(key: string, value: unknown): void {
  stub.config.set(key, value);
  configurationChanged.fire({ affectsConfiguration: (section: string) => key.startsWith(section) });
}
