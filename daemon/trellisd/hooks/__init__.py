"""Hooks: programs the user (``config.toml``) or, once approved, a project
(``.trellisd.toml``) names for an event of a session, a turn or a tool call (``spec``), run in
the session's walls with one JSON object on stdin, answering with an exit code and optional
JSON (``run``). ``services.hooks`` decides which run when, and what their answers do."""

from .run import HookRun, run_hook
from .spec import EVENTS, TOOL_EVENTS, HookSpec, ProjectHooks

__all__ = ["EVENTS", "TOOL_EVENTS", "HookRun", "HookSpec", "ProjectHooks", "run_hook"]
