"""The tools of the agent loop, confined to the session root.

Each tool answers ``action()`` (what it is about to do, for the policy) and ``run()`` (do
it, answer with text for the model). See ``base`` for the seam. ``default_tools`` are every
session's; ``task`` (a child session) is added by the turn when the policy turns it on, and
``process_tools`` (processes that outlive a call) over the session's processes.
"""

from __future__ import annotations

from .base import Action, ActionKind, Tool, ToolContext, ToolFailure
from .command import RunCommand
from .edit import EditFile, WriteFile, remove_leftover_writes
from .files import ListDir, ReadFile
from .plan import UpdatePlan
from .processes import ProcessState, ProcessTable, process_tools
from .search import Search
from .task import Children, Task, TaskRequest
from .verify import CheckResult, run_check


def default_tools() -> list[Tool]:
    return [ReadFile(), ListDir(), Search(), WriteFile(), EditFile(), RunCommand(), UpdatePlan()]


__all__ = [
    "Action",
    "ActionKind",
    "CheckResult",
    "Children",
    "EditFile",
    "ListDir",
    "ProcessState",
    "ProcessTable",
    "ReadFile",
    "RunCommand",
    "Search",
    "Task",
    "TaskRequest",
    "Tool",
    "ToolContext",
    "ToolFailure",
    "UpdatePlan",
    "WriteFile",
    "default_tools",
    "process_tools",
    "remove_leftover_writes",
    "run_check",
]
