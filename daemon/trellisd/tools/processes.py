"""Processes that outlive a tool call: ``start_process`` starts a program (a dev server, a
watcher) that runs on after the call and the turn, ``read_process_output`` reads what it
printed since an offset, ``write_process_input`` types into it and ``stop_process`` stops it.

The tools are thin: what a process is, where it runs and how long it lives is the
``ProcessTable`` seam's (``services.processes``). A process is judged by the policy exactly as
``run_command`` is (the same exec action of its command line, escalation included), and so is
writing to its input (it may make the program run anything); reading its output and stopping
it touch nothing.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from . import arguments as args
from .base import Action, ToolContext, ToolFailure
from .command import RunCommand

if TYPE_CHECKING:
    from ..sandbox.walls import Walls

READ_BYTES = 32 * 1024
"""The most of a process's output one ``read_process_output`` answers with."""


@dataclass(frozen=True)
class ProcessState:
    """A process as it stands: ``exit_code`` is None while it runs (and when it could not be
    told); ``turn_id`` is the turn whose call started it."""

    process_id: str
    session_id: str
    argv: tuple[str, ...]
    cwd: str
    started_at: str
    turn_id: str | None
    running: bool
    exit_code: int | None

    @property
    def command(self) -> str:
        return shlex.join(self.argv)

    def status(self) -> str:
        if self.running:
            return "still running"
        if self.exit_code is None:
            return "ended"
        if self.exit_code < 0:
            return f"ended: killed by signal {-self.exit_code}"
        return f"ended with exit code {self.exit_code}"


@dataclass(frozen=True)
class Printed:
    """What a process printed from ``since`` (absolute byte offsets) up to ``next``;
    ``dropped`` bytes before ``since`` were asked for but are gone from its ring."""

    state: ProcessState
    text: str
    since: int
    next: int
    dropped: int
    more: bool
    """More is kept past ``next``: read again from there."""


class ProcessTable(Protocol):
    """A session's processes, as the tools of one of its turns reach them."""

    def state(self, process_id: str) -> ProcessState:
        """The process, or a ``ToolFailure`` naming the ones there are."""
        ...

    async def start(
        self, argv: tuple[str, ...], cwd: Path, walls: Walls | None
    ) -> ProcessState: ...

    async def read(self, process_id: str, since: int | None, most: int) -> Printed:
        """From ``since`` (None: from the last offset read), at most ``most`` bytes."""
        ...

    def write(self, process_id: str, text: str) -> ProcessState: ...

    async def stop(self, process_id: str) -> ProcessState: ...


@attrs.frozen
class StartProcessArguments:
    argv: tuple[str, ...] = args.strings()
    cwd: str | None = args.optional_text()
    escalate: bool = attrs.field(default=False, metadata={"must": "be true or false"})
    reason: str | None = args.optional_text()


@attrs.frozen
class ProcessRef:
    process_id: str = args.text()


@attrs.frozen
class ReadArguments:
    process_id: str = args.text()
    since: int | None = attrs.field(default=None, metadata={"must": "be a whole number"})

    def __attrs_post_init__(self) -> None:
        if self.since is not None and self.since < 0:
            raise ToolFailure("since must be 0 or more")


@attrs.frozen
class WriteArguments:
    process_id: str = args.text()
    text: str = args.text()


_COMMAND = RunCommand()  # how a command line is judged, and its argv and cwd checked


def _exec(
    argv: tuple[str, ...], given: StartProcessArguments | None, context: ToolContext
) -> Action:
    """The action ``run_command`` would be for the same command line."""
    arguments: dict[str, Any] = {"argv": list(argv)}
    if given is not None:
        arguments.update(
            {k: v for k, v in attrs.asdict(given).items() if k != "argv" and v not in (None, False)}
        )
    return _COMMAND.action(arguments, context)


class StartProcess:
    name = "start_process"
    description = (
        "Start a program that keeps running after this call (a dev server, a watcher, a REPL),"
        " without a shell: argv is the program and its arguments. Answers at once with its"
        " processId; read what it prints with read_process_output, type into it with"
        " write_process_input, end it with stop_process. It runs inside the same walls as"
        " run_command and lives until stopped or until the session ends. Optional cwd is a"
        " folder relative to the root; escalate and reason as for run_command."
    )
    parameters: dict[str, Any] = {  # run_command's, but for its timeout
        **RunCommand.parameters,
        "properties": {
            k: v for k, v in RunCommand.parameters["properties"].items() if k != "timeout"
        },
    }

    def __init__(self, table: ProcessTable) -> None:
        self.table = table

    def action(self, arguments: dict[str, Any], context: ToolContext) -> Action:
        given = args.read(arguments, StartProcessArguments)
        return _exec(given.argv, given, context)

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> str:
        given = args.read(arguments, StartProcessArguments)
        _exec(given.argv, given, context)  # the same checks as the policy's
        cwd = context.resolve(given.cwd, field="cwd") if given.cwd else context.real_root
        if not cwd.is_dir():
            raise ToolFailure(f"cwd {given.cwd} is not a folder")
        walls = context.walls
        if walls is not None and given.escalate:  # the gate asked a person first
            walls = walls.unconfined()
        state = await self.table.start(given.argv, cwd, walls)
        text = (
            f"started process {state.process_id}: $ {state.command}\n"
            f"It runs on after this call. Read its output with read_process_output"
            f" {{processId: {state.process_id!r}}}; stop it with stop_process when done."
        )
        if walls is not None and walls.confined and walls.network is not True:
            text += _network_note(walls)
        return text


def _network_note(walls: Walls) -> str:
    """What a walled process's network lets the session's other commands reach."""
    if walls.loopback is not None and walls.loopback.problem is None:
        return (
            "\nIts walls give the session a loopback of its own: the session's other commands"
            " reach the ports it listens on at 127.0.0.1; the host and other sessions do not."
        )
    return (
        "\nIts walls give it a network of its own: other commands cannot reach the"
        " ports it listens on (the session's network is not turned on)."
    )


class ReadProcessOutput:
    name = "read_process_output"
    description = (
        "What a process started with start_process printed (stdout and stderr together)"
        " since the byte offset since (left out: since your last read of it), whether it"
        " still runs, and its exit code once it ended. The answer names the offset to read"
        " from next. Older output past 1 MiB is dropped."
    )
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "processId": {"type": "string"},
            "since": {"type": "integer", "minimum": 0, "description": "a byte offset"},
        },
        "required": ["processId"],
    }

    def __init__(self, table: ProcessTable) -> None:
        self.table = table

    def action(self, arguments: dict[str, Any], context: ToolContext) -> None:
        self.table.state(args.read(arguments, ReadArguments).process_id)

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> str:
        given = args.read(arguments, ReadArguments)
        printed = await self.table.read(given.process_id, given.since, READ_BYTES)
        state = printed.state
        lines = [f"process {state.process_id} ($ {state.command}): {state.status()}"]
        if printed.dropped:
            lines.append(f"[{printed.dropped} bytes before offset {printed.since} were dropped]")
        lines.append(f"output from offset {printed.since} to {printed.next}:")
        lines.append(printed.text if printed.text else "(nothing new)")
        if printed.more:
            lines.append(f"[more output follows: read again with since {printed.next}]")
        else:
            lines.append(f"[next offset: {printed.next}]")
        return "\n".join(lines)


class WriteProcessInput:
    name = "write_process_input"
    description = (
        "Write text to the standard input of a process started with start_process (add a"
        ' "\\n" to end a line). Judged as running its command again.'
    )
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {"processId": {"type": "string"}, "text": {"type": "string"}},
        "required": ["processId", "text"],
    }

    def __init__(self, table: ProcessTable) -> None:
        self.table = table

    def action(self, arguments: dict[str, Any], context: ToolContext) -> Action:
        given = args.read(arguments, WriteArguments)
        return _exec(self.table.state(given.process_id).argv, None, context)

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> str:
        given = args.read(arguments, WriteArguments)
        state = self.table.write(given.process_id, given.text)
        return f"wrote {len(given.text.encode())} bytes to process {state.process_id}"


class StopProcess:
    name = "stop_process"
    description = (
        "Stop a process started with start_process: it is asked to end (SIGTERM), then"
        " killed with everything it started. Answers with how it ended."
    )
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {"processId": {"type": "string"}},
        "required": ["processId"],
    }

    def __init__(self, table: ProcessTable) -> None:
        self.table = table

    def action(self, arguments: dict[str, Any], context: ToolContext) -> None:
        self.table.state(args.read(arguments, ProcessRef).process_id)

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> str:
        state = await self.table.stop(args.read(arguments, ProcessRef).process_id)
        return f"process {state.process_id} ($ {state.command}) {state.status()}"


def process_tools(table: ProcessTable) -> list[Any]:
    """The four tools over one session's processes."""
    return [
        StartProcess(table),
        ReadProcessOutput(table),
        WriteProcessInput(table),
        StopProcess(table),
    ]
