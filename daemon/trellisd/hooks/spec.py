"""A hook as the config file and a project's ``.trellisd.toml`` write it::

[[hooks]]
event = "preToolUse"            # one of EVENTS
matcher = "write_*"             # tool events only: a tool name or an fnmatch glob of names
command = ["python3", "hooks/guard.py"]   # the program and its arguments, no shell
timeout = 10                    # seconds, default 30, at most 600
"""

from __future__ import annotations

import fnmatch
import shlex
from collections.abc import Sequence
from typing import Any, ClassVar

import attrs

from ..convert import Invalid
from ..mcp.spec import McpServerSpec
from ..vocabulary import HookEvent

EVENTS = tuple(e.value for e in HookEvent)
TOOL_EVENTS = frozenset({"preToolUse", "permissionRequest", "postToolUse"})
"""The events of one tool call: the only ones a ``matcher`` narrows."""
DEFAULT_TIMEOUT_SECONDS = 30.0
MAX_TIMEOUT_SECONDS = 600.0
MAX_WORD_CHARS = 8192


def _event(_: Any, attribute: attrs.Attribute[Any], value: str) -> None:
    if value not in EVENTS:
        raise Invalid.of(attribute, f"must be one of {', '.join(EVENTS)}")


def _argv(_: Any, attribute: attrs.Attribute[Any], value: tuple[str, ...]) -> None:
    if not value or not value[0]:
        raise Invalid.of(attribute, "must name a program: a list of strings, program first")
    try:
        program(value)  # an MCP server's command and arguments are bounded the same way
    except Invalid as exc:
        at = exc.field.removeprefix("args")
        index = f"[{int(at[1:-1]) + 1}]" if at.startswith("[") else "[0]"
        raise Invalid.of(attribute, exc.problem, index) from None


def program(argv: Sequence[str]) -> McpServerSpec:
    """``argv`` as a program the approval of a project's programs covers (``mcp.pinned``)."""
    return McpServerSpec("hook", argv[0], tuple(argv[1:]))


def _matcher(_: Any, attribute: attrs.Attribute[Any], value: str | None) -> None:
    if value is not None and (not value or len(value) > MAX_WORD_CHARS):
        raise Invalid.of(attribute, "must be a tool name or a glob of tool names")


@attrs.frozen
class HookSpec:
    """One ``[[hooks]]`` table; unknown keys are refused (a typo must not pass)."""

    closed: ClassVar[str] = "hook"

    event: str = attrs.field(validator=_event)
    command: tuple[str, ...] = attrs.field(
        validator=_argv, metadata={"must": "be a list of strings, the program first"}
    )
    matcher: str | None = attrs.field(default=None, validator=_matcher)
    timeout: float | None = None

    def __attrs_post_init__(self) -> None:
        if self.timeout is not None and not 0 < self.timeout <= MAX_TIMEOUT_SECONDS:
            limit = f"{MAX_TIMEOUT_SECONDS:g}"
            raise Invalid(f"must be a number of seconds above 0, at most {limit}", "timeout")

    @property
    def command_line(self) -> str:
        return shlex.join(self.command)

    @property
    def seconds(self) -> float:
        return DEFAULT_TIMEOUT_SECONDS if self.timeout is None else self.timeout

    def matches(self, tool: str | None) -> bool:
        """Whether the hook runs for a call of ``tool`` (``fnmatch``, case-sensitive: ``*``
        any characters, ``?`` one, ``[...]`` a set); the events of no tool ignore it."""
        if self.event not in TOOL_EVENTS or self.matcher is None:
            return True
        return tool is not None and fnmatch.fnmatchcase(tool, self.matcher)

    def detail(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "event": self.event,
            "command": list(self.command),
            "commandLine": self.command_line,
        }
        if self.matcher is not None:
            out["matcher"] = self.matcher
        out["timeout"] = self.seconds
        return out


@attrs.frozen
class ProjectHooks:
    """The ``[[hooks]]`` tables of a project's ``.trellisd.toml``; its other keys are other
    settings'."""

    hooks: tuple[HookSpec, ...] = attrs.field(
        default=(), metadata={"must": "be a list of [[hooks]] tables"}
    )
