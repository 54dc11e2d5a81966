"""``run_command``: run a program under the session root and answer with its output.

The program is started without a shell (the model gives ``argv``, a list of strings), in a
new session and so its own process group, with stdin closed: the daemon's stdin and stdout
are the wire and never reach a child. stdout and stderr are captured together, as they
interleave; past ``MAX_OUTPUT_BYTES`` the middle is dropped, keeping the start and the end
(where a test runner prints its summary), and the result says so.

The program runs with its window's environment less its secrets (see ``environment``),
plus a variable that marks it and every process it starts as this call's
(``TRELLISD_RUN``). When the call ends (the program exited, its timeout passed, or the
turn was cancelled: then ``CancelledError`` is re-raised), everything it started is killed
(SIGKILL): its process group, its session, and any process that still carries the mark,
which finds a child that left the session with ``setsid``. A cancel first asks the program to
stop (SIGTERM to its group) and gives it ``CANCEL_GRACE_SECONDS`` to end; a program still
running then is killed mid-run, and the context's ``killed`` is told (``ToolContext``): what
it left behind needs a person to look at it. A background ``sleep 301 &``
does not outlive the call. Only a process that both leaves the session and clears its
environment escapes, and inside the walls not even that: they die with bwrap.

The program runs inside the session's walls (``sandbox``): it may write the root (less its
protected paths), a ``/tmp`` of its own and the named caches, cannot read the secrets, and
reaches the network only as the policy says. If the walls cannot be built it does not run.
A command the model asked to escalate runs without them, once a person has approved it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import shlex
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import attrs

from ..convert import Invalid
from ..sandbox.bwrap import Launch, WallsUnavailable, confine
from ..sandbox.walls import Walls
from . import arguments as args
from .base import Action, ToolContext, ToolFailure
from .environment import child_environment

DEFAULT_TIMEOUT = 60.0
MAX_TIMEOUT = 600.0
MAX_OUTPUT_BYTES = 32 * 1024
RUN_MARK = "TRELLISD_RUN"
"""The variable that marks a call's processes; its value is unique to the call."""
LINGER_SECONDS = 1.0
"""How long output may keep flowing after the program exits, from processes it started,
and how long a killed program has to be gone."""
CANCEL_GRACE_SECONDS = 2.0
"""How long a cancelled program has to end after SIGTERM before it is killed."""


@dataclass(frozen=True)
class Execution:
    """How a program ended: ``exit_code`` is None when it was killed for its timeout."""

    exit_code: int | None
    output: str
    timed_out: bool
    dropped: int
    """How many bytes of output were dropped from the middle."""
    swept: tuple[str, ...] = ()
    """The protected paths the program created, taken away after it ended (``sandbox``)."""
    moved_to: Path | None = None
    """Where they were moved; None: removed."""


class _Capture:
    """The first and last ``limit / 2`` bytes of a stream, and how many were dropped."""

    def __init__(self, limit: int) -> None:
        self.half = limit // 2
        self.head = bytearray()
        self.tail = bytearray()
        self.dropped = 0

    def add(self, chunk: bytes) -> None:
        room = self.half - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        self.tail += chunk
        if len(self.tail) > self.half:
            excess = len(self.tail) - self.half
            self.dropped += excess
            del self.tail[:excess]

    def text(self) -> str:
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        if not self.dropped:
            return head + tail
        return f"{head}\n[cut: {self.dropped} bytes of output left out here]\n{tail}"


class _Collector(asyncio.SubprocessProtocol):
    """Gathers the output as it comes and notes when the program exits and when the output
    ends (which is later if the program leaves processes behind that hold it open)."""

    def __init__(self, capture: _Capture, listener: Callable[[bytes], None] | None) -> None:
        self.capture, self.listener = capture, listener
        self.exited = asyncio.Event()
        self.output_ended = asyncio.Event()

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        self.capture.add(data)
        if self.listener is not None:
            self.listener(data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self.output_ended.set()

    def process_exited(self) -> None:
        self.exited.set()


async def execute(
    argv: list[str],
    cwd: Path,
    timeout: float,
    listener: Callable[[bytes], None] | None = None,
    killed: Callable[[], None] | None = None,
    walls: Walls | None = None,
) -> Execution:
    """Run ``argv`` in ``cwd`` inside ``walls`` (None: unconfined), kill everything it
    started after ``timeout`` seconds; when cancelled, ask it to stop (SIGTERM) and kill it
    after ``CANCEL_GRACE_SECONDS``, telling ``killed`` if it had to. ``listener`` is given
    the output as it comes. Raises ``ToolFailure`` when the program cannot be started,
    inside its walls or at all."""
    env = {**child_environment(), RUN_MARK: secrets.token_hex(8)}
    try:
        async with confine(walls or Walls("off", True, cwd), argv, cwd, env) as launch:
            execution = await _execute(launch, argv, cwd, timeout, listener, killed)
            swept = tuple(launch.sweep())
            return replace(execution, swept=swept, moved_to=launch.moved_to)
    except WallsUnavailable as exc:
        raise ToolFailure(str(exc)) from None


async def _execute(
    launch: Launch,
    argv: list[str],
    cwd: Path,
    timeout: float,
    listener: Callable[[bytes], None] | None,
    killed: Callable[[], None] | None,
) -> Execution:
    capture = _Capture(MAX_OUTPUT_BYTES)
    loop = asyncio.get_running_loop()
    mark = launch.env[RUN_MARK]
    starting = asyncio.ensure_future(
        loop.subprocess_exec(
            lambda: _Collector(capture, listener),
            *launch.argv,
            cwd=cwd,
            env=launch.env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    )
    cancelled = False
    while not starting.done():
        try:
            await asyncio.shield(starting)
        except asyncio.CancelledError:
            cancelled = True  # it may run already: once started, it is stopped as below
        except Exception:
            pass  # raised again by ``result``
    try:
        transport, collector = starting.result()
    except OSError as exc:
        raise asyncio.CancelledError() if cancelled else _unstarted(argv, exc) from exc

    group = transport.get_pid()
    try:
        if cancelled:
            raise asyncio.CancelledError()
        timed_out = not await _happens(collector.exited, timeout)
        if timed_out:
            kill_everything(group, mark)
            await _happens(collector.exited, LINGER_SECONDS)
        if not await _happens(collector.output_ended, LINGER_SECONDS):
            kill_everything(group, mark)
            await _happens(collector.output_ended, LINGER_SECONDS)
        exit_code = None if timed_out else transport.get_returncode()
        return Execution(exit_code, capture.text(), timed_out, capture.dropped)
    except asyncio.CancelledError:
        walled = launch.walls.confined
        if not await _stops_when_asked(group, mark, walled, collector.exited) and killed:
            killed()
        kill_everything(group, mark)
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.shield(_happens(collector.exited, LINGER_SECONDS))
        raise
    finally:
        kill_everything(group, mark)
        transport.close()


def _unstarted(argv: list[str], exc: OSError) -> ToolFailure:
    if isinstance(exc, FileNotFoundError):
        return ToolFailure(f"{argv[0]}: command not found")
    if isinstance(exc, PermissionError):
        return ToolFailure(f"{argv[0]}: permission denied (is it executable?)")
    return ToolFailure(f"{argv[0]} could not be started: {exc.strerror or exc}")


async def _stops_when_asked(group: int, mark: str, walled: bool, exited: asyncio.Event) -> bool:
    """SIGTERM to the process group (inside walls: to every process of the call but bwrap,
    which would end the walls and all in them at once), then up to
    ``CANCEL_GRACE_SECONDS`` for the program to end (a cancel that comes meanwhile cuts the
    wait short); whether it ended."""
    if exited.is_set():
        return True
    if walled:
        needle = f"{RUN_MARK}={mark}".encode()
        for pid in running_pids():
            if belongs_to_run(pid, -1, needle) and process_name(pid) != "bwrap":
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGTERM)
    else:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGTERM)
    try:
        return await asyncio.shield(_happens(exited, CANCEL_GRACE_SECONDS))
    except asyncio.CancelledError:
        return exited.is_set()


async def _happens(event: asyncio.Event, seconds: float) -> bool:
    """Wait up to ``seconds`` for ``event``; whether it happened."""
    try:
        await asyncio.wait_for(event.wait(), seconds)
    except TimeoutError:
        return False
    return True


def kill_everything(leader: int, mark: str) -> None:
    """Kill (SIGKILL) the process group and the session that ``leader`` started, and every
    process whose environment carries ``RUN_MARK=mark``, until none is left (a process may
    fork while the others die; a few rounds catch its children)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(leader, signal.SIGKILL)
    needle = f"{RUN_MARK}={mark}".encode()
    for _ in range(5):
        found = [pid for pid in running_pids() if belongs_to_run(pid, leader, needle)]
        if not found:
            return
        for pid in found:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def running_pids() -> list[int]:
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    me = os.getpid()
    return [int(n) for n in names if n.isdigit() and int(n) != me]


def process_name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as f:
            return f.read().strip()
    except OSError:
        return ""


def belongs_to_run(pid: int, leader: int, needle: bytes) -> bool:
    """Whether ``pid`` runs in ``leader``'s session or group or carries the mark; a zombie
    (already dead, waiting for its parent) does not count."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
        if fields[0] == b"Z":
            return False
        if int(fields[2]) == leader or int(fields[3]) == leader:
            return True
        with open(f"/proc/{pid}/environ", "rb") as f:
            return needle in f.read().split(b"\0")
    except (OSError, IndexError, ValueError):
        return False


def format_execution(command: str, execution: Execution, timeout: float) -> str:
    if execution.timed_out:
        status = (
            f"the command did not finish within {timeout:g} seconds and was killed, with the"
            " processes it started"
        )
    elif execution.exit_code is not None and execution.exit_code < 0:
        status = f"killed by signal {_signal_name(-execution.exit_code)}"
    else:
        status = f"exit code {execution.exit_code}"
    output = execution.output if execution.output else "(no output)"
    text = f"$ {command}\n{status}\n{output}"
    if execution.swept:
        names = ", ".join(execution.swept)
        where = "removed" if execution.moved_to is None else f"moved to {execution.moved_to}"
        text = (
            f"refused: the command created protected paths ({names}); they were {where}, as"
            f" the walls keep them read-only\n{text}"
        )
    return text


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return str(number)


@attrs.frozen
class RunCommandArguments:
    argv: tuple[str, ...] = args.strings()
    cwd: str | None = args.optional_text()  # the root when left out
    timeout: float | None = args.seconds(MAX_TIMEOUT)
    escalate: bool = attrs.field(default=False, metadata={"must": "be true or false"})
    reason: str | None = args.optional_text()

    def __attrs_post_init__(self) -> None:
        if self.escalate and not self.reason:
            raise Invalid("must say why the command needs to run outside the walls", "reason")

    @property
    def seconds(self) -> float:
        return DEFAULT_TIMEOUT if self.timeout is None else self.timeout


class RunCommand:
    name = "run_command"
    description = (
        "Run a program under the session root, without a shell: argv is the program and its "
        "arguments as a list of strings (for pipes or redirections, run ['sh', '-c', '...']). "
        "stdout and stderr come back together with the exit code; a long output is cut in "
        f"the middle. Optional cwd is a folder relative to the root; optional timeout is in "
        f"seconds (default {DEFAULT_TIMEOUT:g}, at most {MAX_TIMEOUT:g}). The program runs "
        "inside walls: it may write only the root and a /tmp of its own, secrets are hidden, "
        "and the network may be cut. If a command truly needs to run outside them, set "
        "escalate to true and say why in reason: a person is always asked."
    )
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "argv": {"type": "array", "items": {"type": "string"}, "minItems": 1},
            "cwd": {"type": "string", "description": "a folder relative to the root"},
            "timeout": {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_TIMEOUT},
            "escalate": {
                "type": "boolean",
                "description": "run outside the walls; a person must approve",
            },
            "reason": {"type": "string", "description": "why escalate is needed"},
        },
        "required": ["argv"],
    }

    def action(self, arguments: dict[str, Any], context: ToolContext) -> Action:
        given, _ = self._arguments(arguments, context)
        return Action(
            "exec", shlex.join(given.argv), escalate=given.escalate, argv=tuple(given.argv)
        )

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> str:
        given, cwd = self._arguments(arguments, context)
        if not cwd.is_dir():
            raise ToolFailure(f"cwd {given.cwd} is not a folder")
        killed = context.killed
        walls = context.walls
        if walls is not None and given.escalate:  # the gate asked a person first
            walls = walls.unconfined()
        execution = await execute(
            list(given.argv),
            cwd,
            given.seconds,
            context.output,
            None if killed is None else lambda: killed(self.name, given.argv),
            walls,
        )
        text = format_execution(shlex.join(given.argv), execution, given.seconds)
        if execution.swept:
            raise ToolFailure(text)
        return text

    def _arguments(
        self, arguments: dict[str, Any], context: ToolContext
    ) -> tuple[RunCommandArguments, Path]:
        given = args.read(arguments, RunCommandArguments)
        if any("\x00" in a for a in given.argv):
            raise ToolFailure("argv must not contain a NUL character")
        if given.argv[0].startswith("mcp:"):  # the policy's name for an MCP tool's call
            raise ToolFailure("a command may not start with 'mcp:'; call the MCP tool instead")
        folder = context.resolve(given.cwd, field="cwd") if given.cwd else context.real_root
        return given, folder
