/**
 * Each method of the protocol as a vscode-jsonrpc message type bound to the params and the result
 * that protocolTypes.ts (generated from protocol/schema.json) gives it, as
 * vscode-languageserver-protocol's `ProtocolRequestType` binds LSP's: the connection is only ever
 * spoken to through these, so a wrong params or result type does not compile.
 */

import * as rpc from 'vscode-jsonrpc';

import type {
  ClientRequestMethod,
  ClientRequestParams,
  ClientRequestResult,
  NotificationMethod,
  NotificationParams,
  RequestMethod,
  RequestParams,
  RequestResult,
} from './protocolTypes';

/** A request the editor sends. */
export function requestType<M extends RequestMethod>(method: M): rpc.RequestType<RequestParams<M>, RequestResult<M>, unknown> {
  return new rpc.RequestType(method);
}

/** `shutdown`, sent without params (LSP's way). */
export const shutdownType = new rpc.RequestType0<RequestResult<'shutdown'>, unknown>('shutdown');

/** A request the daemon sends the editor (session/requestApproval). */
export function clientRequestType<M extends ClientRequestMethod>(
  method: M,
): rpc.RequestType<ClientRequestParams<M>, ClientRequestResult<M>, unknown> {
  return new rpc.RequestType(method);
}

/** A notification the daemon sends. */
export function notificationType<M extends NotificationMethod>(method: M): rpc.NotificationType<NotificationParams<M>> {
  return new rpc.NotificationType(method);
}
