/** The chat webview view: draws what SessionController posts, and passes the user's input back. */

import * as vscode from 'vscode';

import { chatHtml, makeNonce } from './chatHtml';
import { pickEffort } from './composer';
import { commandEntries } from './customCommands';
import { messageOf } from './errors';
import { pastedAttachment } from './images';
import type { ChatSink, FromWebview, SessionController, ToWebview } from './session';

export interface ChatActions {
  send(text: string): void;
  cancel(): void;
  queue(text: string): void;
  unqueue(queueId: string): void;
  start(): void;
  reopen(): void;
  earlier(): void;
  openSession(sessionId: string): void;
  showLog(): void;
}

export class ChatViewProvider implements vscode.WebviewViewProvider, ChatSink {
  static readonly viewId = 'trellisd.chat';
  private view?: vscode.WebviewView;

  constructor(
    private readonly extensionUri: vscode.Uri,
    private readonly controller: SessionController,
    private readonly actions: ChatActions,
  ) {}

  resolveWebviewView(view: vscode.WebviewView): void {
    this.view = view;
    const media = vscode.Uri.joinPath(this.extensionUri, 'media');
    view.webview.options = { enableScripts: true, localResourceRoots: [media] };
    view.webview.html = chatHtml({
      cspSource: view.webview.cspSource,
      nonce: makeNonce(),
      scriptUri: view.webview.asWebviewUri(vscode.Uri.joinPath(media, 'chat.js')).toString(),
      styleUri: view.webview.asWebviewUri(vscode.Uri.joinPath(media, 'chat.css')).toString(),
    });
    view.webview.onDidReceiveMessage((message: FromWebview) => this.receive(message));
    view.onDidDispose(() => {
      // A view resolved again (the side bar moved, the window reloaded) replaced this one:
      // the controller keeps drawing into the new one.
      if (this.view === view) {
        this.view = undefined;
        this.controller.detachView(this);
      }
    });
  }

  post(message: ToWebview): void {
    void this.view?.webview.postMessage(message);
  }

  private receive(message: FromWebview): void {
    switch (message?.type) {
      case 'ready':
        this.controller.attachView(this);
        break;
      case 'send':
        this.actions.send(String(message.text ?? ''));
        break;
      case 'cancel':
        this.actions.cancel();
        break;
      case 'queue':
        this.actions.queue(String(message.text ?? ''));
        break;
      case 'unqueue':
        this.actions.unqueue(String(message.queueId ?? ''));
        break;
      case 'start':
        this.actions.start();
        break;
      case 'reopen':
        this.actions.reopen();
        break;
      case 'earlier':
        this.actions.earlier();
        break;
      case 'openSession':
        this.actions.openSession(String(message.sessionId ?? ''));
        break;
      case 'runPlan': // a planned turn's button: the command, which asks the mode
        void vscode.commands.executeCommand('trellisd.runPlan', String(message.turnId ?? ''));
        break;
      case 'setMode': // the mode in the header
        void vscode.commands.executeCommand('trellisd.setMode');
        break;
      case 'pasteImage': // the prompt box's clipboard held a picture
        try {
          const { attachments } = this.controller;
          attachments.add(pastedAttachment(String(message.data ?? ''), String(message.mimeType ?? ''), attachments.nextId()));
        } catch (error) {
          this.controller.notice('error', messageOf(error));
        }
        break;
      case 'dropImage':
        this.controller.attachments.remove(String(message.id ?? ''));
        break;
      case 'effort':
        this.controller.effort = pickEffort(message.effort);
        break;
      case 'commands':
        void this.postCommands();
        break;
      case 'showLog':
        this.actions.showLog();
        break;
    }
  }

  /** The open session's custom commands, for the prompt box to offer as `/` is typed. */
  private async postCommands(): Promise<void> {
    if (!this.controller.session) {
      this.post({ type: 'commands', commands: [], error: 'Start a session first: its custom commands are listed then.' });
      return;
    }
    try {
      this.post({ type: 'commands', commands: commandEntries(await this.controller.commands()) });
    } catch (error) {
      this.post({ type: 'commands', commands: [], error: `Could not list the custom commands: ${messageOf(error)}` });
    }
  }
}
