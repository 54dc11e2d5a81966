"""The lives of the processes that outlive a tool call (``tools.processes``): started by a
turn's ``start_process``, listed by ``session/processes``, stopped by ``stop_process`` or
``session/process/stop``, and in any case when their session is closed or deleted and when the
daemon ends.

A process runs as ``run_command``'s programs do (the window's environment less its secrets,
the session's walls, a ``TRELLISD_RUN`` mark of its own), under a guard (``tools/guard.py``)
that the kernel tells when the daemon dies, even by ``kill -9``: the guard then stops the
program and kills everything it started. No process outlives its daemon.

What it prints (stdout and stderr together) is kept in a ring of ``RING_BYTES``: older bytes
are dropped, and offsets stay absolute, so an offset means the same byte however much was
dropped since. It is also sent as it comes, coalesced as a tool call's output is, to every
window following the session (``Notifier.process_output``), and when the process ends, however
it ends, they are told so (``Notifier.process_exited``), after the last of its output. An
editor opened later reads the ring (``output``) without moving the model's place in it. A
session may have at most ``MAX_RUNNING`` processes running at once; the model is told so when
it asks for one more.

Where the editor offers terminals (ACP's ``terminal`` capability: ``terminals`` gives a
session's), a process runs in one of the editor's terminals instead, so the editor shows it:
the same walled command line, in the same environment (the editor's own, with what the window's
environment less its secrets sets over it, and the secrets it drops set empty). The editor
keeps its output; what it printed since the last look is taken into the ring when the model
reads it and when it ends. Such a process takes no input; stopping it (and the session's
close, and the daemon's end) kills and releases its terminal.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import secrets
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

from ..agent.activity import OutputFeed
from ..errors import NotFound
from ..sandbox.bwrap import WallsUnavailable, confine
from ..sandbox.walls import Walls
from ..store.db import now
from ..tools import guard
from ..tools.base import ToolFailure
from ..tools.command import RUN_MARK, kill_everything
from ..tools.environment import child_environment, window_variables
from ..tools.processes import Printed, ProcessState
from .seams import Notifier

log = logging.getLogger(__name__)

GUARD = Path(guard.__file__).resolve()
MAX_RUNNING = 8
"""How many processes a session may have running at once."""
KEPT_ENDED = 8
"""How many ended processes a session keeps (their output readable) besides its running ones."""
RING_BYTES = 1024 * 1024
OVERLAP_PROBE = 256
"""How much of the start of a terminal's output is looked for in what it held before."""
STOP_SECONDS = guard.GRACE_SECONDS + 3.0
"""How long a stop waits for the guard to end the process before killing it from here."""


PIPES: dict[str, Any] = {
    "stdin": subprocess.PIPE,
    "stdout": subprocess.PIPE,
    "stderr": subprocess.STDOUT,  # together, as they interleave
    "start_new_session": True,  # the guard leads a session of its own
}


def guarded(argv: list[str]) -> list[str]:
    """``argv`` run under the guard, tied to this daemon."""
    return [sys.executable, "-I", str(GUARD), str(os.getpid()), "--", *argv]


class Ring:
    """The last ``limit`` bytes of a stream, at absolute offsets."""

    def __init__(self, limit: int = RING_BYTES) -> None:
        self.limit = limit
        self.data = bytearray()
        self.start = 0  # the offset of data[0]

    @property
    def end(self) -> int:
        return self.start + len(self.data)

    def add(self, chunk: bytes) -> None:
        self.data += chunk
        excess = len(self.data) - self.limit
        if excess > 0:
            del self.data[:excess]
            self.start += excess

    def since(self, offset: int, most: int) -> tuple[bytes, int, int]:
        """The bytes from ``offset`` (at most ``most``), where they start, and how many
        bytes from ``offset`` on were dropped before them."""
        offset = min(offset, self.end)
        dropped = max(0, self.start - offset)
        first = offset + dropped
        return bytes(self.data[first - self.start : first - self.start + most]), first, dropped


class _Pipes(asyncio.SubprocessProtocol):
    def __init__(self, process: Process) -> None:
        self.process = process
        self.exited = asyncio.Event()
        self.output_ended = asyncio.Event()

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        self.process.printed(data)

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd == 1:
            self.output_ended.set()

    def process_exited(self) -> None:
        self.exited.set()


@dataclass(frozen=True)
class TerminalHeld:
    """What an editor's terminal holds: its output (the start cut when ``truncated``), and
    once it ended its exit code (minus the signal that killed it; None: not told)."""

    text: str
    truncated: bool
    ended: bool
    exit_code: int | None


class Terminals(Protocol):
    """A session's terminals in the editor (ACP's ``terminal/*``)."""

    async def create(self, argv: list[str], cwd: str, env: dict[str, str], limit: int) -> str: ...

    async def output(self, terminal_id: str) -> TerminalHeld: ...

    async def wait_for_exit(self, terminal_id: str) -> int | None: ...

    async def kill(self, terminal_id: str) -> None: ...

    async def release(self, terminal_id: str) -> None: ...


@dataclass
class Process:
    state: ProcessState
    feed: OutputFeed
    ring: Ring = field(default_factory=Ring)
    read_to: int = 0  # where the model's last read ended
    transport: asyncio.SubprocessTransport | None = None
    pipes: _Pipes | None = None
    life: asyncio.Task[None] | None = None
    started: asyncio.Future[None] | None = None  # done once it runs, or could not start
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    terminal: tuple[Terminals, str] | None = None  # the editor's terminal it runs in
    seen: str = ""  # what the terminal held at the last look
    on_end: Callable[[ProcessState], None] | None = None  # told once, when it ended

    def printed(self, data: bytes) -> None:
        self.ring.add(data)
        self.feed.add(data)

    async def look(self) -> None:
        """Take into the ring what the editor's terminal printed since the last look."""
        if self.terminal is None:
            return
        terminals, terminal_id = self.terminal
        try:
            held = await terminals.output(terminal_id)
        except Exception as exc:  # released, or the editor gone: what was taken stays
            log.info("the terminal of process %s was not read: %s", self.state.process_id, exc)
            return
        new = _after(self.seen, held.text, held.truncated)
        self.seen = held.text
        if new:
            self.printed(new.encode())

    def since(self, offset: int, most: int) -> Printed:
        """What it printed from ``offset`` (at most ``most`` bytes). What waits to be sent to
        the editor is sent first, so a piece sent after this read follows on from its end."""
        self.feed.flush()
        data, first, dropped = self.ring.since(offset, most)
        following = first + len(data)
        text = data.decode("utf-8", errors="replace")
        return Printed(self.state, text, first, following, dropped, following < self.ring.end)

    def ended_with(self, exit_code: int | None) -> None:
        self.state = replace(self.state, running=False, exit_code=exit_code)
        self.feed.close()
        self.ended.set()
        if self.on_end is not None:
            self.on_end(self.state)


class ProcessService:
    """Every session's processes in this daemon."""

    def __init__(self, notifier: Notifier, max_running: int = MAX_RUNNING) -> None:
        self.notifier = notifier
        self.max_running = max_running
        self._of: dict[str, dict[str, Process]] = {}
        # The editor's terminals for a session's processes, where its protocol has them (ACP).
        self.terminals: Callable[[str], Terminals | None] = lambda session_id: None

    def list(self, session_id: str) -> list[ProcessState]:
        """The session's processes, the oldest first."""
        return [p.state for p in self._of.get(session_id, {}).values()]

    def _get(self, session_id: str, process_id: str) -> Process:
        process = self._of.get(session_id, {}).get(process_id)
        if process is None:
            raise NotFound(
                f"session {session_id} has no process {process_id}",
                sessionId=session_id,
                processId=process_id,
            )
        return process

    def state(self, session_id: str, process_id: str) -> ProcessState:
        return self._get(session_id, process_id).state

    async def start(
        self,
        session_id: str,
        turn_id: str | None,
        argv: tuple[str, ...],
        cwd: Path,
        walls: Walls | None,
    ) -> ProcessState:
        """Start ``argv`` in ``cwd`` inside ``walls`` (None: none) for the session; a
        ``ToolFailure`` when the session has as many running as it may, or it cannot start."""
        processes = self._of.setdefault(session_id, {})
        running = [p for p in processes.values() if p.state.running]
        if len(running) >= self.max_running:
            names = ", ".join(p.state.process_id for p in running)
            raise ToolFailure(
                f"refused: this session already has {len(running)} processes running ({names}),"
                f" the most it may; stop one with stop_process first"
            )
        process_id = f"p{secrets.token_hex(3)}"
        state = ProcessState(
            process_id, session_id, argv, str(cwd), now(), turn_id, running=True, exit_code=None
        )

        def send(text: str) -> None:
            self.notifier.process_output(session_id, process_id, text)

        process = Process(state, OutputFeed(send, limit=2**62), on_end=self.notifier.process_exited)
        started = process.started = asyncio.get_running_loop().create_future()
        terminals = self.terminals(session_id)
        life = self._live if terminals is None else functools.partial(self._in_terminal, terminals)
        process.life = asyncio.ensure_future(life(process, walls, started))
        processes[process_id] = process  # listed (and stopped with its session) at once
        try:
            await asyncio.shield(started)  # a ToolFailure when it could not start
        except ToolFailure:
            del processes[process_id]
            raise
        self._forget_ended(session_id)
        return process.state

    async def _live(
        self, process: Process, walls: Walls | None, started: asyncio.Future[None]
    ) -> None:
        state = process.state
        cwd = Path(state.cwd)
        env = {**child_environment(), RUN_MARK: secrets.token_hex(8)}
        loop = asyncio.get_running_loop()
        try:
            async with confine(walls or Walls("off", True, cwd), state.argv, cwd, env) as launch:
                try:
                    transport, pipes = await loop.subprocess_exec(
                        lambda: _Pipes(process),
                        *guarded(launch.argv),
                        cwd=cwd,
                        env=launch.env,
                        **PIPES,
                    )
                except OSError as exc:
                    raise ToolFailure(f"{state.argv[0]} could not be started: {exc}") from exc
                process.transport, process.pipes = transport, pipes
                started.set_result(None)
                try:
                    await pipes.exited.wait()
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(pipes.output_ended.wait(), 1.0)
                finally:
                    kill_everything(transport.get_pid(), launch.env[RUN_MARK])
                    transport.close()
                    process.ended_with(transport.get_returncode())
                swept = launch.sweep()
                if swept:
                    log.warning(
                        "process %s created protected paths, taken away: %s",
                        state.process_id,
                        ", ".join(swept),
                    )
        except WallsUnavailable as exc:
            _fail(started, process, ToolFailure(str(exc)))
        except ToolFailure as exc:
            _fail(started, process, exc)
        except asyncio.CancelledError:
            _fail(started, process, ToolFailure("the process was stopped as it started"))
            raise
        except Exception as exc:  # logged: the process's end must not go unnoticed
            log.exception("process %s failed", state.process_id)
            _fail(started, process, ToolFailure(f"the process could not run: {exc}"))

    async def _in_terminal(
        self,
        terminals: Terminals,
        process: Process,
        walls: Walls | None,
        started: asyncio.Future[None],
    ) -> None:
        state = process.state
        cwd = Path(state.cwd)
        env = {**child_environment(), RUN_MARK: secrets.token_hex(8)}
        # The editor's terminal starts from the editor's own environment: set empty there
        # what the window's environment holds and a program must not see.
        dropped = {name: "" for name in window_variables() if name not in env}
        try:
            async with confine(walls or Walls("off", True, cwd), state.argv, cwd, env) as launch:
                try:
                    terminal_id = await terminals.create(
                        launch.argv, state.cwd, {**dropped, **launch.env}, RING_BYTES
                    )
                except Exception as exc:
                    raise ToolFailure(f"the editor did not start {state.argv[0]}: {exc}") from exc
                process.terminal = (terminals, terminal_id)
                started.set_result(None)
                try:
                    exit_code = await terminals.wait_for_exit(terminal_id)
                except Exception as exc:
                    log.info("process %s: its terminal ended: %s", state.process_id, exc)
                    exit_code = None
                await process.look()
                process.ended_with(exit_code)
        except WallsUnavailable as exc:
            _fail(started, process, ToolFailure(str(exc)))
        except ToolFailure as exc:
            _fail(started, process, exc)

    async def read(self, session_id: str, process_id: str, since: int | None, most: int) -> Printed:
        """What the model reads: from ``since`` (None: where its last read ended)."""
        process = self._get(session_id, process_id)
        printed = await self.output(
            session_id, process_id, process.read_to if since is None else since, most
        )
        process.read_to = printed.next
        return printed

    async def output(self, session_id: str, process_id: str, since: int, most: int) -> Printed:
        """What the process printed from ``since`` (at most ``most`` bytes); the model's place
        in the ring stays where it is."""
        return (await self.opened(session_id, process_id)).since(since, most)

    async def opened(self, session_id: str, process_id: str) -> Process:
        """The process, what its editor's terminal printed since the last look taken in, for
        an editor that opens it late to read (``Process.since``) at the instant it answers."""
        process = self._get(session_id, process_id)
        await process.look()
        return process

    def write(self, session_id: str, process_id: str, text: str) -> ProcessState:
        process = self._get(session_id, process_id)
        if process.terminal is not None:
            raise ToolFailure(
                f"process {process_id} runs in the editor's terminal, which takes no input"
            )
        stdin = None if process.transport is None else process.transport.get_pipe_transport(0)
        if not process.state.running or stdin is None or stdin.is_closing():
            raise ToolFailure(f"process {process_id} has ended: {process.state.status()}")
        assert isinstance(stdin, asyncio.WriteTransport)
        stdin.write(text.encode())
        return process.state

    async def stop(self, session_id: str, process_id: str) -> ProcessState:
        """Ask the process to end, kill it and what it started if it does not in time; how
        it ended. An ended one is answered as it is."""
        process = self._get(session_id, process_id)
        await _stop(process)
        return process.state

    async def close(self, session_id: str) -> None:
        """Stop every process of the session and forget them: it is closed or deleted."""
        processes = self._of.pop(session_id, {})
        await asyncio.gather(*(_stop(p) for p in processes.values()))

    async def close_all(self) -> None:
        """The daemon ends: every process ends with it, all asked at once."""
        await asyncio.gather(*(self.close(session_id) for session_id in list(self._of)))

    def _forget_ended(self, session_id: str) -> None:
        processes = self._of.get(session_id, {})
        ended = [pid for pid, p in processes.items() if not p.state.running]
        for pid in ended[: max(0, len(ended) - KEPT_ENDED)]:
            del processes[pid]


def _fail(started: asyncio.Future[None], process: Process, failure: ToolFailure) -> None:
    if not started.done():
        started.set_exception(failure)
    if not process.ended.is_set():
        process.ended_with(None)


async def _stop(process: Process) -> None:
    if process.started is not None and not process.started.done():  # stopped as it starts
        with contextlib.suppress(Exception):
            await asyncio.shield(process.started)
    if process.terminal is not None:
        await _stop_terminal(process, *process.terminal)
        return
    transport = process.transport
    if process.ended.is_set() or transport is None:
        return
    guard = transport.get_pid()
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(guard, signal.SIGTERM)
    try:
        await asyncio.wait_for(asyncio.shield(process.ended.wait()), STOP_SECONDS)
    except TimeoutError:
        log.warning("process %s did not end when asked: killed", process.state.process_id)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(guard, signal.SIGKILL)
        await process.ended.wait()


async def _stop_terminal(process: Process, terminals: Terminals, terminal_id: str) -> None:
    """Kill the terminal's command, wait for its end, and let the editor free the terminal
    (it stays drawn where a tool call shows it)."""
    with contextlib.suppress(Exception):
        if not process.ended.is_set():
            await terminals.kill(terminal_id)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(process.ended.wait()), STOP_SECONDS)
        await terminals.release(terminal_id)
    if not process.ended.is_set():
        process.ended_with(None)


def _after(seen: str, held: str, truncated: bool) -> str:
    """What ``held`` (a terminal's output now) adds to ``seen`` (it at the last look). The
    client cuts the start of what it holds: then where ``held`` starts is looked for in
    ``seen`` (by its first ``OVERLAP_PROBE`` characters); where nothing of ``seen`` is left
    in it, all of ``held`` is new."""
    if held.startswith(seen):
        return held[len(seen) :]
    if truncated and seen:
        probe = held[:OVERLAP_PROBE]
        at = seen.find(probe)
        while at >= 0:
            if held.startswith(seen[at:]):
                return held[len(seen) - at :]
            at = seen.find(probe, at + 1)
    return held


@dataclass(frozen=True)
class SessionProcesses:
    """One session's processes as one turn's tools reach them (``tools.ProcessTable``)."""

    service: ProcessService
    session_id: str
    turn_id: str | None

    def state(self, process_id: str) -> ProcessState:
        try:
            return self.service.state(self.session_id, process_id)
        except NotFound:
            raise ToolFailure(self._unknown(process_id)) from None

    def _unknown(self, process_id: str) -> str:
        known = [p.process_id for p in self.service.list(self.session_id)]
        there = ", ".join(known) if known else "none"
        return f"no process {process_id} in this session (its processes: {there})"

    async def start(self, argv: tuple[str, ...], cwd: Path, walls: Walls | None) -> ProcessState:
        return await self.service.start(self.session_id, self.turn_id, argv, cwd, walls)

    async def read(self, process_id: str, since: int | None, most: int) -> Printed:
        self.state(process_id)
        return await self.service.read(self.session_id, process_id, since, most)

    def write(self, process_id: str, text: str) -> ProcessState:
        self.state(process_id)
        return self.service.write(self.session_id, process_id, text)

    async def stop(self, process_id: str) -> ProcessState:
        self.state(process_id)
        return await self.service.stop(self.session_id, process_id)
