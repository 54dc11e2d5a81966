"""Hooks: the programs the user's ``config.toml`` and, once approved, a project's
``.trellisd.toml`` name for the events of a session (``hooks.spec``), run here and nowhere
else: the session service, the turn service, the gate, the loop and compaction call in at
each event, and no other module starts a hook's program.

A session's hooks are the config file's (``config``: trusted, the user wrote them) then the
project's (``project``). A project's hook runs code a repository names, so it runs only once
the user has approved its exact command line for that root (and the content of the root's
files it runs), as a project's MCP server starts: the approval is the same kind of record in
the same store (``mcp.servers.Approvals``), its line led by ``hook <event>`` so that no
approval of a server stands for a hook. The first time its event comes in a turn, the editor
is asked (``session/requestApproval``, ``hook`` saying which); declined, it is skipped for the
rest of the session. The events that come outside a turn (``sessionStart``, ``sessionEnd``,
and ``userPromptSubmit``, which runs before its turn begins) run only the project's hooks
already approved; the others are asked about at the start of the session's next turn.

Hooks of one event run one after another, in the order written; the first that blocks ends
the round. Each run is a ``hook`` event of the turn's run where there is one, and a line of
the log always.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from ..convert import structure
from ..errors import Conflict, InvalidParams
from ..hooks import HookRun, HookSpec, ProjectHooks, run_hook
from ..hooks.run import HookAnswer
from ..hooks.spec import program
from ..mcp.pinned import approval_line
from ..mcp.servers import STARTS, Approvals
from ..oneline import summary_line
from ..policy.load import PROJECT_FILE, read_project_file
from ..records import Session, ToolCall, TurnRef
from ..store.facade import AsyncStore
from ..vocabulary import CallStatus, Decision, EventKind
from .policies import Policies

log = logging.getLogger(__name__)

Source = Literal["config", "project"]
State = Literal["approved", "awaiting approval", "declined"]
Ask = Callable[[dict[str, Any]], Awaitable[Decision]]
Record = Callable[[HookRun], Awaitable[None]]
TURNLESS = ("sessionStart", "sessionEnd", "userPromptSubmit")
"""The events that come outside a turn: their project hooks are asked about at a turn."""
STOP_NOTE = "A stop hook asks you to go on before you end the turn: "
RESULT_CHARS = 16 * 1024
HOOK_LINE = "hook "
"""How the approval line of a project's hook starts, its event and a line break after it."""


class PromptBlocked(Conflict):
    """A ``userPromptSubmit`` hook blocked the prompt: the turn never began."""


@dataclass
class Hook:
    """One hook of a session, and whether it may run."""

    spec: HookSpec
    source: Source
    state: State = "approved"

    def detail(self) -> dict[str, Any]:
        return {
            **self.spec.detail(),
            "source": self.source,
            "approved": self.state == "approved",
            "state": self.state,
        }


@dataclass(frozen=True)
class Fired:
    """The runs of one event's hooks, and what they said together."""

    runs: tuple[HookRun, ...] = ()

    @property
    def blocked(self) -> HookRun | None:
        return next((r for r in self.runs if r.answer.blocks), None)

    @property
    def reason(self) -> str:
        blocked = self.blocked
        return "" if blocked is None else blocked.answer.reason or "(no reason given)"

    @property
    def context(self) -> str:
        return "\n\n".join(c for r in self.runs if (c := r.answer.context) is not None)

    @property
    def allowed(self) -> bool:
        return self.blocked is None and any(r.answer.decision == "allow" for r in self.runs)


@dataclass
class _SessionHooks:
    root: Path
    hooks: list[Hook] = field(default_factory=list)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class HookService:
    """Every session's hooks. ``config`` gives the config file's (asked when a session's
    hooks are first needed); ``approvals`` is the user's store of approved project programs;
    ``search_path`` is where a hook's program is looked for to pin its file."""

    def __init__(
        self,
        store: AsyncStore,
        policies: Policies,
        approvals: Approvals,
        config: Callable[[], Sequence[HookSpec]] = lambda: (),
        search_path: str = os.defpath,
    ) -> None:
        self.store, self.policies, self.approvals = store, policies, approvals
        self.config, self.search_path = config, search_path
        self._by_session: dict[str, _SessionHooks] = {}

    async def _of(self, session: Session) -> _SessionHooks:
        known = self._by_session.get(session.session_id)
        if known is not None:
            return known
        root = Path(session.root)
        hooks = [Hook(spec, "config") for spec in self.config()]
        for spec in await asyncio.to_thread(project_hooks, root):
            approved = await self.approvals.approved(str(root), await self._line(spec, root))
            hooks.append(Hook(spec, "project", "approved" if approved else "awaiting approval"))
        made = self._by_session.setdefault(session.session_id, _SessionHooks(root, hooks))
        return made

    async def listed(self, session_id: str) -> dict[str, Any]:
        """``session/hooks``: the hooks in effect, with their source and approval."""
        hooks = await self._of(await self.store.sessions.get(session_id))
        return {"sessionId": session_id, "hooks": [h.detail() for h in hooks.hooks]}

    def revoked(self, root: str, command_line: str) -> None:
        """The root's approval of the project's hooks running ``command_line`` was taken
        back: each is asked about again at its event's next turn."""
        for hooks in self._by_session.values():
            if hooks.root != Path(root):
                continue
            for hook in hooks.hooks:
                if hook.source == "project" and hook.spec.command_line == command_line:
                    hook.state = "awaiting approval"

    def forget(self, session_id: str) -> None:
        """The session is closed: its hooks are read again if it is used again."""
        self._by_session.pop(session_id, None)

    async def _line(self, spec: HookSpec, root: Path) -> str:
        """What the approval of a project's hook covers: its event, its command line and
        the content of the root's files it runs (``mcp.pinned``)."""
        pinned = await asyncio.to_thread(
            approval_line, program(spec.command), root, self.search_path
        )
        return f"{HOOK_LINE}{spec.event}\n{pinned}"

    async def _approved(self, hooks: _SessionHooks, hook: Hook, ask: Ask | None) -> bool:
        if hook.state != "awaiting approval":
            return hook.state == "approved"
        root = str(hooks.root)
        line = await self._line(hook.spec, hooks.root)
        if await self.approvals.approved(root, line):
            hook.state = "approved"
            return True
        if ask is None:
            return False
        spec = hook.spec
        request = {
            "tool": "run_hook",
            "arguments": {"event": spec.event, "command": list(spec.command)},
            "summary": summary_line(
                f"{PROJECT_FILE} wants to run a {spec.event} hook: {spec.command_line}"
            ),
            "hook": {"event": spec.event, "source": "project", "command": spec.command_line},
        }
        decision = await ask(request)
        if decision in STARTS:
            await self.approvals.approve(root, line)
            hook.state = "approved"
            return True
        hook.state = "declined"
        return False

    async def fire(
        self,
        event: str,
        session: Session,
        payload: dict[str, Any],
        *,
        tool: str | None = None,
        ask: Ask | None = None,
        record: Record | None = None,
    ) -> Fired:
        """Run ``event``'s hooks (for a tool event, those matching ``tool``) with
        ``payload``; each run is told to ``record``. A project hook not yet approved is asked
        about through ``ask``; without it, it is left for later."""
        hooks = await self._of(session)
        chosen = [h for h in hooks.hooks if h.spec.event == event and h.spec.matches(tool)]
        if not chosen:
            return Fired()
        walls = await self.policies.walls(session)
        given = {"event": event, "sessionId": session.session_id, "root": session.root}
        runs: list[HookRun] = []
        for hook in chosen:
            async with hooks.lock:
                approved = await self._approved(hooks, hook, ask)
            if not approved:
                continue
            run = await run_hook(hook.spec, {**given, **payload}, hooks.root, walls)
            _log(run, session.session_id)
            if record is not None:
                await record(run)
            runs.append(run)
            if run.answer.blocks:
                break
        return Fired(tuple(runs))

    async def ask_waiting(self, session: Session, ask: Ask) -> None:
        """Ask about the project's hooks of the events outside a turn not yet approved."""
        hooks = await self._of(session)
        for hook in hooks.hooks:
            if hook.spec.event in TURNLESS and hook.state == "awaiting approval":
                async with hooks.lock:
                    await self._approved(hooks, hook, ask)

    async def session_start(self, session: Session, source: str) -> None:
        await self.fire("sessionStart", session, {"source": source})

    async def session_end(self, session: Session, reason: str) -> None:
        await self.fire("sessionEnd", session, {"reason": reason})
        self.forget(session.session_id)

    async def prompt(self, session: Session, prompt: str) -> Fired:
        """``userPromptSubmit``, before the turn begins; ``PromptBlocked`` when a hook blocks
        the prompt, which then never reaches the model nor the session's history."""
        fired = await self.fire("userPromptSubmit", session, {"prompt": prompt})
        blocked = fired.blocked
        if blocked is not None:
            raise PromptBlocked(
                f"a userPromptSubmit hook blocked the prompt: {fired.reason}",
                sessionId=session.session_id,
                hook=blocked.spec.command_line,
                reason=fired.reason,
            )
        return fired

    def for_turn(self, session: Session, ref: TurnRef, ask: Ask) -> TurnHooks:
        return TurnHooks(self, session, ref, ask)


def _log(run: HookRun, session_id: str) -> None:
    spec = run.spec
    if run.timed_out:
        log.warning(
            "session %s: %s hook %s hung past its timeout (%gs): killed; going on",
            session_id,
            spec.event,
            spec.command_line,
            spec.seconds,
        )
    elif run.failed is not None:
        log.warning(
            "session %s: %s hook %s did not run (%s); going on",
            session_id,
            spec.event,
            spec.command_line,
            run.failed,
        )
    elif run.exit_code not in (0, 2):
        log.warning(
            "session %s: %s hook %s exited %s; going on: %s",
            session_id,
            spec.event,
            spec.command_line,
            run.exit_code,
            run.stderr.strip()[:500],
        )
    else:
        log.info(
            "session %s: %s hook %s: %s",
            session_id,
            spec.event,
            spec.command_line,
            run.answer.decision or "continue",
        )


class TurnHooks:
    """The hooks of one turn: what the gate, the loop and compaction call at their events;
    each run recorded as a ``hook`` event of the turn's run."""

    def __init__(self, service: HookService, session: Session, ref: TurnRef, ask: Ask) -> None:
        self.service, self.session, self.ref, self.ask = service, session, ref, ask

    async def record(self, runs: Sequence[HookRun], step: int | None = None) -> None:
        for run in runs:
            await self.service.store.runs.add_event(
                self.ref.run_id, EventKind.HOOK, step, run.detail()
            )

    async def fire(
        self, event: str, step: int | None, payload: dict[str, Any], tool: str | None = None
    ) -> Fired:
        async def record(run: HookRun) -> None:
            await self.record([run], step)

        given = {"turnId": self.ref.turn_id, "runId": self.ref.run_id, **payload}
        if step is not None:
            given["step"] = step
        return await self.service.fire(
            event, self.session, given, tool=tool, ask=self.ask, record=record
        )

    async def waiting(self) -> None:
        await self.service.ask_waiting(self.session, self.ask)

    async def pre_tool(self, call: ToolCall, step: int) -> str | None:
        """``preToolUse``: the reason when a hook blocks the call."""
        fired = await self.fire("preToolUse", step, {"toolCall": _call(call)}, call.name)
        return None if fired.blocked is None else fired.reason

    async def permission(self, call: ToolCall, step: int) -> HookAnswer | None:
        """``permissionRequest``: ``allow`` or ``deny`` decided by a hook, or None: ask."""
        fired = await self.fire("permissionRequest", step, {"toolCall": _call(call)}, call.name)
        if fired.blocked is not None:
            return HookAnswer("deny", fired.reason)
        return HookAnswer("allow") if fired.allowed else None

    async def after_tool(self, call: ToolCall, status: CallStatus, result: str, step: int) -> None:
        payload = {
            "toolCall": _call(call),
            "status": status.value,
            "result": result[-RESULT_CHARS:],
        }
        await self.fire("postToolUse", step, payload, call.name)

    async def stop(self, step: int, asked: int) -> str | None:
        """``stop``: what to tell the model when a hook asks for another step."""
        fired = await self.fire("stop", step, {"stopsAsked": asked})
        return None if fired.blocked is None else STOP_NOTE + fired.reason

    async def before_compact(self, step: int, why: dict[str, object]) -> None:
        await self.fire("preCompact", step, {"why": dict(why)})

    async def after_compact(self, step: int, detail: dict[str, object]) -> None:
        await self.fire("postCompact", step, {"compaction": dict(detail)})

    async def turn_end(self, outcome: str, error: str | None) -> None:
        payload: dict[str, Any] = {"outcome": outcome}
        if error is not None:
            payload["error"] = error
        await self.fire("turnEnd", None, payload)


def _call(call: ToolCall) -> dict[str, Any]:
    return {"id": call.id, "name": call.name, "arguments": call.arguments}


def project_hooks(root: Path) -> tuple[HookSpec, ...]:
    """The ``[[hooks]]`` of ``root/.trellisd.toml``."""
    data = read_project_file(root)
    if data is None:
        return ()
    try:
        return structure(data, ProjectHooks, "").hooks
    except InvalidParams as exc:
        path = root / PROJECT_FILE
        raise InvalidParams(
            f"{path}: {exc.message}", field=f"{path}: {exc.data['field']}"
        ) from None
