/**
 * The tools view (session/tools): every tool the model sees, built-in and MCP, with what the
 * session's policy says of it, grouped by source, and the session's MCP servers with their state.
 */

import type { QuickPickItem } from 'vscode';

import type { McpServerState, SessionTools, ToolInfo } from './protocol';

export interface ToolItem extends QuickPickItem {
  tool?: ToolInfo;
  server?: McpServerState;
}

/** The separator kind of a QuickPickItem (vscode.QuickPickItemKind.Separator). */
export const SEPARATOR = -1;

export function toolDescription(tool: ToolInfo): string {
  const source = tool.source === 'mcp' ? `MCP ${tool.server}` : 'built-in';
  return [source, tool.kind, tool.policy, tool.target].filter(Boolean).join(' · ');
}

export function serverDescription(server: McpServerState): string {
  const skipped = server.skipped ? ` (${server.skipped} left out)` : '';
  return `${server.source} · ${server.transport} · ${server.state} · ${server.tools} tool(s)${skipped}`;
}

export function toolItems(result: SessionTools): ToolItem[] {
  const items: ToolItem[] = [];
  const group = (label: string, tools: ToolInfo[]) => {
    if (tools.length === 0) {
      return;
    }
    items.push({ label, kind: SEPARATOR });
    for (const tool of tools) {
      items.push({ label: tool.name, description: toolDescription(tool), detail: tool.description, tool });
    }
  };
  group('built-in', result.tools.filter((t) => t.source === 'builtin'));
  for (const server of result.servers) {
    group(`MCP server ${server.name}`, result.tools.filter((t) => t.source === 'mcp' && t.server === server.name));
  }
  if (result.servers.length) {
    items.push({ label: 'MCP servers', kind: SEPARATOR });
    for (const server of result.servers) {
      items.push({
        label: `$(server) ${server.name}`,
        description: serverDescription(server),
        detail: [server.commandLine ?? server.url, server.error].filter(Boolean).join(' — '),
        server,
      });
    }
  }
  return items;
}
