"""A check: a command run in the session root whose exit code says whether the work is done
(``pytest -q`` exiting 0, say). It runs as ``run_command`` does: no shell, its own process
group, inside the session's walls, output capped, killed with its group on timeout or
cancellation."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from ..sandbox.walls import Walls
from .base import ToolFailure
from .command import execute, format_execution


@dataclass(frozen=True)
class CheckResult:
    passed: bool
    exit_code: int | None
    """None when the command timed out or could not be started."""
    output: str
    """What to show the model and the user: the command line, how it ended, its output."""


async def run_check(
    argv: list[str], expect_exit: int, root: Path, timeout: float, walls: Walls | None = None
) -> CheckResult:
    command = shlex.join(argv)
    if not argv:
        return CheckResult(False, None, "the check has no command to run")
    try:
        execution = await execute(argv, root, timeout, walls=walls)
    except ToolFailure as exc:
        return CheckResult(False, None, f"$ {command}\n{exc}")
    passed = not execution.timed_out and execution.exit_code == expect_exit
    return CheckResult(passed, execution.exit_code, format_execution(command, execution, timeout))
