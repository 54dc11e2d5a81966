"""``trellisd run``: one turn with nobody at an editor, as a CI job or a cluster job runs it.

The run opens the store and the daemon's own services in this process (no daemon is started
or attached to), opens a session over the root (or continues one), runs one turn through
``TurnService`` as ``session/turn`` does, and ends with the turn's outcome as the exit code
(``ExitCode``). The model's text is written to stderr as it streams, with a line for each tool
call; with ``--json`` one result object (``HeadlessResult``) goes to stdout. With ``--export``
the session is written to a session file, whatever the outcome, to be imported into a
person's store with its lineage.

Nobody answers approvals: what would ask the editor (``session/requestApproval``) is
pre-answered by ``--approval``: ``never`` (the default) refuses it as a denied approval is
refused, so the model is told and goes on; ``all`` allows it once. This names the person's
answer, not the policy's ``approval`` mode: a policy that refuses an action refuses it here too.

Ctrl-C (SIGINT) or SIGTERM cancels the turn through ``session/cancel``'s path: the turn
records ``cancelled``, the session is exported when asked, and the process exits 130. A second
one ends the process at once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import Any, Literal, TextIO

from . import services, wire
from .agent.steering import Steer
from .config import ProviderSettings
from .config_file import Settings
from .edge import end_process
from .errors import TrellisError
from .oneline import summary_line
from .plans import PlanEntry
from .policy.layers import Approval as Mode
from .providers import make_provider
from .providers.base import Provider
from .records import Budget, Spend, Step, ToolCall, TurnRef, TurnResult, Worktree
from .services import Services
from .services.queue import Queued
from .services.settings import WindowSettings, use_window
from .services.turns import TurnRequest
from .tools.processes import ProcessState
from .vocabulary import CallStatus, Decision, Outcome, PlanStatus

log = logging.getLogger(__name__)

Approval = Literal["never", "all"]
"""What the person pre-answers to every question a turn would ask: refuse, or allow once."""

TOOL_LINE_CHARS = 200


class ExitCode(IntEnum):
    """How ``trellisd run`` ends: its turn's outcome, or what kept the turn from running."""

    FINISHED = 0  # the turn finished; with --verify, its check passed
    ERROR = 1  # the provider or the store failed, the session could not be used
    USAGE = 2  # a mistake in the command line or the settings: nothing ran
    VERIFY_FAILED = 3  # --verify never passed before the steps ran out
    EXHAUSTED = 4  # the budget (--budget-usd) or, without --verify, the steps ran out
    CANCELLED = 130  # Ctrl-C (SIGINT) or SIGTERM: the turn was cancelled and recorded


OUTCOME_CODES = {
    Outcome.FINISHED: ExitCode.FINISHED,
    Outcome.SUCCESS: ExitCode.FINISHED,
    Outcome.FAILURE: ExitCode.VERIFY_FAILED,
    Outcome.EXHAUSTED: ExitCode.EXHAUSTED,
    Outcome.CANCELLED: ExitCode.CANCELLED,
}
"""Every other outcome (``error``; ``paused`` and ``interrupted`` cannot end a run) is an error."""


@dataclass(frozen=True)
class HeadlessRun:
    """What ``trellisd run`` was asked: the prompt, the session (a new one over ``root``, or
    ``session_id`` continued), the turn's bounds and check, who answers approvals, and the
    file to export the session to."""

    prompt: str
    root: Path | None = None
    session_id: str | None = None
    verify: tuple[str, ...] = ()
    max_steps: int | None = None
    budget_usd: float | None = None
    approval: Approval = "never"
    export: Path | None = None
    worktree: bool | str | None = None
    """The new session's own git worktree (``session/open``'s ``worktree``): True, or its
    name."""

    def turn(self, session_id: str) -> TurnRequest:
        verify = (list(self.verify), 0) if self.verify else None
        budget = None if self.budget_usd is None else Budget(usd=self.budget_usd)
        return TurnRequest(
            session_id, self.prompt, max_steps=self.max_steps, verify=verify, budget=budget
        )


@dataclass(frozen=True)
class HeadlessResult:
    """How the run ended; ``to_json`` is the ``--json`` object (``protocol/headless.md``).
    ``error`` says what went wrong, on stderr; ``export_failed``: the turn ran but its session
    could not be written to the file asked for."""

    outcome: Outcome
    session_id: str | None = None
    turn_id: str | None = None
    reply: str | None = None
    spent: Spend | None = None
    paths: tuple[str, ...] = ()
    head_hash: str | None = None
    error: str | None = None
    export_failed: bool = False
    worktree: Worktree | None = None

    @property
    def exit_code(self) -> ExitCode:
        if self.export_failed:
            return ExitCode.ERROR
        return OUTCOME_CODES.get(self.outcome, ExitCode.ERROR)

    def to_json(self) -> dict[str, Any]:
        return {
            "outcome": self.outcome.value,
            "sessionId": self.session_id,
            "turnId": self.turn_id,
            "reply": self.reply,
            "spent": None if self.spent is None else wire.spent(self.spent),
            "paths": list(self.paths),
            "headHash": self.head_hash,
            "worktree": None if self.worktree is None else wire.to_wire(self.worktree),
        }


class Unattended:
    """The turn's notifier with nobody at an editor: the model's text to ``out`` as it
    streams, a line for each tool call that runs or is refused, and every question answered
    as ``approval`` says."""

    def __init__(self, out: TextIO, approval: Approval) -> None:
        self.out, self.approval = out, approval
        self._mid_line = False  # the text written last did not end its line

    def say(self, text: str) -> None:
        """``text`` on a line of its own."""
        self._end_line()
        self.out.write(text + "\n")
        self.out.flush()

    def _end_line(self) -> None:
        if self._mid_line:
            self.out.write("\n")
            self._mid_line = False

    def token(self, turn: TurnRef, step: int, text: str) -> None:
        if text:
            self.out.write(text)
            self.out.flush()
            self._mid_line = not text.endswith("\n")

    def thought(self, turn: TurnRef, step: int, text: str) -> None:
        """The run's output is the reply; what the model reasoned is in its steps."""

    def step(self, turn: TurnRef, step: Step) -> None:
        self._end_line()
        self.out.flush()

    def tool_call(self, turn: TurnRef, step: int, call: ToolCall, status: CallStatus) -> None:
        if status in (CallStatus.RUNNING, CallStatus.REFUSED):
            arguments = json.dumps(call.arguments, ensure_ascii=False)
            shown = summary_line(f"{call.name} {arguments}", TOOL_LINE_CHARS)
            self.say(f"[{'tool' if status == CallStatus.RUNNING else 'refused'}] {shown}")

    def child_started(
        self, turn: TurnRef, step: int, call: ToolCall, child_session_id: str
    ) -> None:
        self.say(f"[child] session {child_session_id} started by {call.name}")

    async def ask_approval(self, turn: TurnRef, request: dict[str, Any]) -> Decision:
        summary = summary_line(str(request.get("summary", "")), TOOL_LINE_CHARS)
        if self.approval == "all":
            self.say(f"[approved] {summary} (allowed once: --approval all)")
            return Decision.ALLOW
        self.say(f"[denied] {summary} (nobody to ask: --approval all would allow it)")
        return Decision.DENY

    def tool_output(self, turn: TurnRef, step: int, call: ToolCall, text: str) -> None:
        """A command's output is in its step (``run/steps``), not in the run's log."""

    def process_output(self, session_id: str, process_id: str, text: str) -> None:
        """A process's output is read by the model (``read_process_output``)."""

    def process_exited(self, state: ProcessState) -> None:
        """How a process ended is the model's to read (``read_process_output``)."""

    def steered(self, turn: TurnRef, step: int | None, steer: Steer, delivered: bool) -> None:
        """Nobody steers a headless turn."""

    def usage(self, turn: TurnRef, figures: dict[str, Any]) -> None:
        """What was spent is in the result."""

    def plan(self, turn: TurnRef, step: int, entries: tuple[PlanEntry, ...]) -> None:
        done = sum(1 for e in entries if e.status == PlanStatus.COMPLETED)
        now = next((e.content for e in entries if e.status == PlanStatus.IN_PROGRESS), None)
        doing = "" if now is None else f"; now: {now}"
        self.say(summary_line(f"[plan] {done} of {len(entries)} done{doing}", TOOL_LINE_CHARS))

    def forked(self, origin_id: str, fork_id: str) -> None:
        """A headless turn never runs in a fork."""

    def queued(self, entry: Queued, position: int) -> None:
        """A headless turn is never queued."""

    def dequeued(self, entry: Queued, reason: str) -> None:
        """A headless turn is never queued."""

    def mode_changed(self, session_id: str, approval: Mode) -> None:
        """A headless run's mode is the one it was started with (``--approval``)."""

    def turn_ended(self, turn: TurnRef, result: TurnResult) -> None:
        self._end_line()
        self.out.flush()


class Headless:
    """One ``trellisd run``: ``run`` does it, ``interrupt`` (from a signal) cancels it."""

    def __init__(
        self,
        db: str | Path,
        settings: Settings,
        request: HeadlessRun,
        out: TextIO,
        providers: Callable[[ProviderSettings], Provider] = make_provider,
    ) -> None:
        self.db, self.settings, self.request = db, settings, request
        self.notifier = Unattended(out, request.approval)
        self.providers = providers
        self.app: Services | None = None
        self.session_id: str | None = None
        self.interrupted = False
        self._turn: asyncio.Future[TurnResult] | None = None
        self._cancelling: asyncio.Task[None] | None = None

    def interrupt(self) -> None:
        """Cancel the turn (or, before it starts, run none); a second call ends the process
        at once."""
        if self.interrupted:
            end_process(ExitCode.CANCELLED)
        self.interrupted = True
        self.notifier.say("[cancelling] the turn stops and is recorded (again: stop at once)")
        if self._turn is not None and not self._turn.done():
            self._cancelling = asyncio.ensure_future(self._cancel())

    async def _cancel(self) -> None:
        """``session/cancel``'s path once the turn runs: a turn still starting (its run being
        begun in the store) is cancelled as soon as it is registered as running."""
        assert self.app is not None and self.session_id is not None
        while self._turn is not None and not self._turn.done():
            if self.app.running.get(self.session_id) is not None:
                await self.app.turns.cancel(self.session_id)
                return
            await asyncio.sleep(0.01)

    async def run(self) -> HeadlessResult:
        # Programs the model starts (and the check) run in this process's environment, less
        # its secrets, as those of an editor's window do.
        use_window(WindowSettings(self.settings.provider, self.settings))
        try:
            self.app = await services.start(self.db, self.settings, self.notifier, self.providers)
        except TrellisError as exc:
            return HeadlessResult(Outcome.ERROR, error=exc.message)
        try:
            result = await self._session_turn(self.app)
            return await self._exported(self.app, result)
        finally:
            await self.app.close()

    async def _session_turn(self, app: Services) -> HeadlessResult:
        request = self.request
        if self.interrupted:  # while the store was being opened
            return HeadlessResult(Outcome.CANCELLED, request.session_id)
        try:
            if request.session_id is not None:
                session = await app.sessions.get(request.session_id)
            else:
                root = Path.cwd() if request.root is None else request.root
                session = await app.sessions.open(
                    str(root), None, None, None, worktree=request.worktree
                )
        except TrellisError as exc:
            return HeadlessResult(Outcome.ERROR, request.session_id, error=exc.message)
        self.session_id = sid = session.session_id
        if self.interrupted:
            return HeadlessResult(Outcome.CANCELLED, sid, head_hash=session.head_hash)
        self._turn = asyncio.ensure_future(app.turns.turn(request.turn(sid)))
        try:
            ended = await self._turn
        except TrellisError as exc:
            return HeadlessResult(Outcome.ERROR, sid, error=exc.message)
        finally:
            if self._cancelling is not None:
                await self._cancelling
        _, spent = await app.budgets.status(sid)
        changed = await app.changes.turn(ended.turn_id)
        return HeadlessResult(
            ended.outcome,
            sid,
            ended.turn_id,
            ended.reply,
            spent,
            tuple(c.path for c in changed),
            ended.head_hash,
            ended.error,
            worktree=session.worktree,
        )

    async def _exported(self, app: Services, result: HeadlessResult) -> HeadlessResult:
        """``result``, after the session was exported to the file asked for, if any."""
        file = self.request.export
        if file is None or result.session_id is None:
            return result
        try:
            done = await app.archive.export(result.session_id, str(file.absolute()))
        except TrellisError as exc:
            error = f"the session could not be exported: {exc.message}"
            if result.error is not None:  # the turn's own comes first
                error = f"{result.error}; and {error}"
            return dataclasses.replace(result, error=error, export_failed=True)
        self.notifier.say(f"[exported] session {result.session_id} to {done.path}")
        return result


def run_headless(
    db: str | Path, settings: Settings, request: HeadlessRun, as_json: bool
) -> ExitCode:
    """``trellisd run`` in this process: the turn's text on stderr, the result on stdout with
    ``as_json``, and the exit code. Ctrl-C and SIGTERM cancel the turn."""
    headless = Headless(db, settings, request, sys.stderr)
    with asyncio.Runner() as runner:
        loop = runner.get_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, headless.interrupt)
        result = runner.run(headless.run())
    if result.error is not None:
        print(f"trellisd run: {result.outcome.value}: {result.error}", file=sys.stderr)
    if as_json:
        print(json.dumps(result.to_json(), ensure_ascii=False), flush=True)
    return result.exit_code
