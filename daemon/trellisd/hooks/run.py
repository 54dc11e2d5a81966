"""Running one hook: its program started without a shell, in its own process group, inside
the session's walls (as ``run_command`` runs), in the window's environment less its secrets
(``tools.environment``), with the event's JSON object on stdin. Its stdout and stderr are read
apart, each to at most ``MAX_OUTPUT_BYTES``; past its timeout everything it started is killed
and the run counts as "go on". Nothing here waits on a thread: the program is an asyncio
subprocess.

What it answers (``HookRun.answer``):

- exit 0: go on; stdout, when it is a JSON object, may carry ``decision`` (``allow``,
  ``deny``, ``block``), ``reason`` and ``context``; other stdout is context for the events that
  take it (``userPromptSubmit``);
- exit 2: block, the reason being its stderr (else its JSON's ``reason``);
- any other exit, a timeout, a program that cannot start: go on, said in the log.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import secrets
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..sandbox.bwrap import WallsUnavailable, confine
from ..sandbox.walls import Walls
from ..tools.command import RUN_MARK, kill_everything
from ..tools.environment import child_environment
from .spec import HookSpec

log = logging.getLogger(__name__)

MAX_OUTPUT_BYTES = 64 * 1024
"""The most of each of stdout and stderr that is read; the rest is dropped."""
LINGER_SECONDS = 1.0
"""How long output may keep coming after the program exits."""
BLOCK_EXIT = 2
DECISIONS = frozenset({"allow", "deny", "block", "continue"})
REASON_CHARS = 4000


@dataclass(frozen=True)
class HookAnswer:
    """What a hook said: ``decision`` ``allow``, ``deny`` or ``block`` (None: go on), why,
    and the context it adds."""

    decision: str | None = None
    reason: str | None = None
    context: str | None = None

    @property
    def blocks(self) -> bool:
        return self.decision in ("deny", "block")


@dataclass(frozen=True)
class HookRun:
    """How one run of a hook ended."""

    spec: HookSpec
    exit_code: int | None  # None: killed at its timeout, or never started
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False
    failed: str | None = None  # why it could not start

    @property
    def answer(self) -> HookAnswer:
        if self.timed_out or self.failed is not None:
            return HookAnswer()
        said = _json(self.stdout)
        reason = said.get("reason")
        reason = reason if isinstance(reason, str) and reason.strip() else None
        context = said.get("context")
        context = context if isinstance(context, str) and context.strip() else None
        if self.exit_code == BLOCK_EXIT:
            why = self.stderr.strip() or reason or "(the hook gave no reason)"
            return HookAnswer("block", why[:REASON_CHARS], context)
        if self.exit_code != 0:
            return HookAnswer()
        decision = said.get("decision")
        decision = decision if decision in DECISIONS and decision != "continue" else None
        if not said and self.stdout.strip():
            context = self.stdout.strip()
        return HookAnswer(decision, None if reason is None else reason[:REASON_CHARS], context)

    def detail(self) -> dict[str, Any]:
        """The ``hook`` event's detail."""
        answer = self.answer
        out: dict[str, Any] = {
            "event": self.spec.event,
            "command": list(self.spec.command),
            "exitCode": self.exit_code,
            "decision": answer.decision or "continue",
            "seconds": round(self.seconds, 3),
        }
        if answer.reason is not None:
            out["reason"] = answer.reason
        if self.timed_out:
            out["timedOut"] = True
        if self.failed is not None:
            out["error"] = self.failed
        return out


def _json(text: str) -> dict[str, Any]:
    stripped = text.strip()
    if not stripped.startswith("{"):
        return {}
    try:
        value = json.loads(stripped)
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


class _Streams(asyncio.SubprocessProtocol):
    """stdout and stderr apart, each bounded; when the program exits and its output ends."""

    def __init__(self) -> None:
        self.out, self.err = bytearray(), bytearray()
        self.exited = asyncio.Event()
        self.ended = asyncio.Event()
        self._open = 2

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        kept = self.out if fd == 1 else self.err
        room = MAX_OUTPUT_BYTES - len(kept)
        if room > 0:
            kept += data[:room]

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        if fd in (1, 2):
            self._open -= 1
            if self._open <= 0:
                self.ended.set()

    def process_exited(self) -> None:
        self.exited.set()


async def run_hook(
    spec: HookSpec, payload: dict[str, Any], cwd: Path, walls: Walls | None
) -> HookRun:
    """Run ``spec`` in ``cwd`` inside ``walls`` (None: unconfined) with ``payload`` on stdin;
    a cancel kills it and is raised again."""
    started = time.monotonic()
    argv = list(spec.command)
    env = {**child_environment(), RUN_MARK: secrets.token_hex(8)}
    data = json.dumps(payload, ensure_ascii=False).encode("utf-8") + b"\n"
    try:
        async with confine(walls or Walls("off", True, cwd), argv, cwd, env) as launch:
            return await _run(spec, launch.argv, launch.env, cwd, data, started)
    except WallsUnavailable as exc:
        return HookRun(spec, None, "", "", time.monotonic() - started, failed=str(exc))


async def _run(
    spec: HookSpec,
    argv: list[str],
    env: dict[str, str],
    cwd: Path,
    data: bytes,
    started: float,
) -> HookRun:
    loop = asyncio.get_running_loop()
    try:
        transport, pipes = await loop.subprocess_exec(
            _Streams,
            *argv,
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        why = f"{spec.command[0]} could not be started: {exc.strerror or exc}"
        return HookRun(spec, None, "", "", time.monotonic() - started, failed=why)
    group, mark = transport.get_pid(), env[RUN_MARK]
    try:
        stdin = transport.get_pipe_transport(0)
        if isinstance(stdin, asyncio.WriteTransport):
            with contextlib.suppress(OSError, RuntimeError):
                stdin.write(data)
                stdin.close()
        timed_out = not await _happens(pipes.exited, spec.seconds)
        if timed_out:
            kill_everything(group, mark)
            await _happens(pipes.exited, LINGER_SECONDS)
        if not await _happens(pipes.ended, LINGER_SECONDS):
            kill_everything(group, mark)
        code = None if timed_out else transport.get_returncode()
        return HookRun(
            spec,
            code,
            pipes.out.decode("utf-8", errors="replace"),
            pipes.err.decode("utf-8", errors="replace"),
            time.monotonic() - started,
            timed_out,
        )
    finally:
        kill_everything(group, mark)
        transport.close()


async def _happens(event: asyncio.Event, seconds: float) -> bool:
    """Whether ``event`` is set within ``seconds``."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await event.wait()
    return event.is_set()
