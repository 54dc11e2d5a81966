"""``session/tools``: every tool the model of a session sees, with where it comes from and
what the session's policy says of it, and the session's MCP servers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..mcp import McpServers
from ..mcp.tools import McpTool
from ..policy import Policy
from ..store.facade import AsyncStore
from ..tools import Task, ToolContext, default_tools
from ..tools.base import Action
from ..tools.processes import ReadProcessOutput, StartProcess, StopProcess, WriteProcessInput
from .policies import Policies

KINDS = {
    "read_file": "read",
    "list_dir": "read",
    "search": "read",
    "write_file": "write",
    "edit_file": "write",
    "run_command": "exec",
    "task": "exec",  # a child session may write and run what the policy lets it
    "update_plan": "none",  # touches nothing the policy judges: runs in every mode
    "start_process": "exec",
    "write_process_input": "exec",  # judged as running the process's command line again
    "read_process_output": "none",
    "stop_process": "none",
}


PROCESS_TOOLS = (StartProcess, ReadProcessOutput, WriteProcessInput, StopProcess)
"""The tools over a session's processes (``process_tools``), offered with every turn."""


class ToolService:
    def __init__(self, store: AsyncStore, policies: Policies, mcp: McpServers) -> None:
        self.store, self.policies, self.mcp = store, policies, mcp

    async def of(self, session_id: str) -> dict[str, Any]:
        """The session's tools; its MCP servers are started (but a project's server not yet
        approved waits for a turn to ask)."""
        session = await self.store.sessions.get(session_id)
        policy = await self.policies.of(session)
        servers = await self.mcp.of(session_id, session.root, await self.policies.walls(session))
        found = await servers.tools()
        context = ToolContext(Path(session.root))
        tools = [_builtin(t.name, t.description, policy) for t in default_tools()]
        tools += [_builtin(t.name, t.description, policy) for t in PROCESS_TOOLS]
        if policy.effective_task.enabled:  # a child session: it acts under the same policy
            tools.append({**_builtin(Task.name, Task.description, policy), "policy": "depends"})
        tools += [_mcp(t, policy, context) for t in found]
        return {"sessionId": session_id, "tools": tools, "servers": servers.detail()}


def _builtin(name: str, description: str, policy: Policy) -> dict[str, Any]:
    kind = KINDS.get(name, "exec")
    refusing = policy.effective_approval in ("never", "plan")
    ruling = "refuse" if kind not in ("read", "none") and refusing else "depends"
    if kind == "none":
        ruling = "allow"
    return {
        "name": name,
        "description": description,
        "source": "builtin",
        "kind": kind,
        "policy": ruling,
    }


def _mcp(tool: McpTool, policy: Policy, context: ToolContext) -> dict[str, Any]:
    action: Action = tool.action({}, context)
    return {
        "name": tool.name,
        "description": tool.description,
        "source": "mcp",
        "server": tool.server,
        "kind": action.kind,
        "target": action.target,
        "policy": policy.check(action).ruling,
    }
