"""The services' ``Notifier`` for an ACP client: a running turn's tokens, steps, steers and
approval questions become ``session/update`` notifications and ``session/request_permission``
requests.

Updates leave through one ``Outbox`` in the order they happened; an update that needs the
store first (a finished tool call with the files it wrote) waits its turn in the same queue,
so the client never sees a tool call finish before the text that came ahead of it. Text
streamed while the client is being written to joins the chunk not sent yet. A prompt
``flush``es the outbox before it answers.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shlex
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from ..agent.steering import Steer
from ..changes import read_content
from ..convert import structure, unstructure
from ..daemon_settings import DEFAULT_APPROVAL_TIMEOUT
from ..errors import InvalidParams
from ..plans import PlanEntry
from ..policy.layers import Approval
from ..policy.rules import ANY
from ..records import Step, ToolCall, TurnRef, TurnResult
from ..services.changes import ChangeService
from ..services.choices import ChoiceService
from ..services.queue import Queued
from ..tools.base import ToolContext
from ..tools.edit import proposed
from ..tools.processes import ProcessState
from ..vocabulary import ApprovalKind, CallStatus, Decision
from . import updates, wire

log = logging.getLogger(__name__)

OPTIONS = (
    wire.PermissionOption("allow", "Allow once", "allow_once"),
    wire.PermissionOption("allowAlways", "Always allow", "allow_always"),
    wire.PermissionOption("deny", "Reject", "reject_once"),
    wire.PermissionOption("denyAlways", "Always reject", "reject_always"),
)
"""The four ACP answers: ``allow`` and ``allowAlways`` are trellisd's decisions (the second
leaves a grant); ``deny`` is ``deny``; ``denyAlways`` is ``deny``, and the same request is
denied without asking from then on, kept with the session in the store (``acp_choices``)."""
ONCE_OPTIONS = (
    wire.PermissionOption("allow", "Allow once, outside the walls", "allow_once"),
    wire.PermissionOption("deny", "Reject", "reject_once"),
)
"""An escalation's answers (a command that asks to run outside the walls): a person decides
each time, so nothing is offered for always."""

DECISIONS = {
    "allow": Decision.ALLOW,
    "allowAlways": Decision.ALLOW_ALWAYS,
    "allowRule": Decision.ALLOW_RULE,
    "deny": Decision.DENY,
    "denyAlways": Decision.DENY,
}


def permission_options(request: dict[str, Any]) -> tuple[wire.PermissionOption, ...]:
    """The answers offered for a native approval request: with a ``proposedRule``, the
    ``allow_always`` option saves that rule (``allowRule``) and its name says the rule
    (``Always allow `pytest …```); an escalation's are ``ONCE_OPTIONS``."""
    if request.get("kind") == ApprovalKind.ESCALATE.value:
        return ONCE_OPTIONS  # a way out is asked each time
    rule = request.get("proposedRule")
    if not rule:
        return OPTIONS
    words = [str(word) for word in rule]
    shown = f"{shlex.join(words[:-1])} …" if words[-1] == ANY else shlex.join(words)
    always = wire.PermissionOption("allowRule", f"Always allow `{shown}`", "allow_always")
    return tuple(always if o.kind == "allow_always" else o for o in OPTIONS)


class Peer(Protocol):
    """What the notifier needs of the ACP connection (``rpc.Connection``)."""

    async def notify(self, method: str, params: Any) -> None: ...

    async def request(self, method: str, params: Any) -> Any: ...


Produce = Callable[[], Awaitable[list[updates.Update]]]


@dataclass
class _Text:
    """Streamed text not sent yet: pieces that come while the client is being written to
    join it, so a fast model costs fewer, larger chunks (as native ``session/token``s).
    ``thought``: the model's reasoning (an ``agent_thought_chunk``), not its reply."""

    text: str
    thought: bool = False


class Outbox:
    """``session/update``s sent one after the other, in the order they were put. With
    ``limit``, a client that lets more than ``limit`` updates wait is given up on: ``overflow``
    is called once and nothing more is put (a window of the shared daemon that stopped
    reading must not hold the daemon's memory)."""

    def __init__(
        self, peer: Peer, limit: int | None = None, overflow: Callable[[], None] | None = None
    ) -> None:
        self.peer, self.limit, self.overflow = peer, limit, overflow
        self.broken = False
        self._items: deque[tuple[str, updates.Update | Produce | _Text]] = deque()
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._task = asyncio.ensure_future(self._send_all())

    def put(self, session_id: str, update: updates.Update | Produce | _Text) -> None:
        if self.broken:
            return
        if self.limit is not None and len(self._items) >= self.limit:
            self.broken = True
            self._items.clear()
            if self.overflow is not None:
                self.overflow()
            return
        self._items.append((session_id, update))
        self._idle.clear()
        self._wake.set()

    def put_text(self, session_id: str, text: str, thought: bool = False) -> None:
        if self._items:
            last_session, last = self._items[-1]
            if last_session == session_id and isinstance(last, _Text) and last.thought == thought:
                last.text += text
                return
        self.put(session_id, _Text(text, thought))

    async def flush(self) -> None:
        """Wait until everything put so far is sent."""
        await self._idle.wait()

    async def close(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    async def _send_all(self) -> None:
        while True:
            await self._wake.wait()
            while self._items:
                session_id, item = self._items.popleft()
                try:
                    if isinstance(item, _Text):
                        chunk = updates.agent_thought if item.thought else updates.agent_text
                        found = [chunk(item.text)]
                    else:
                        found = await item() if callable(item) else [item]
                    for update in found:
                        told = wire.SessionNotification(session_id, update)
                        await self.peer.notify("session/update", unstructure(told))
                except Exception:  # a closed pipe or a failed store read: logged, not fatal
                    log.exception("could not send a session/update")
            self._wake.clear()
            self._idle.set()


@dataclass
class Followed:
    """What the agent keeps of a session it serves: its root, the tool calls it announced
    and the requests the user rejected for good, the last model call's input tokens."""

    root: str
    announced: set[str] = field(default_factory=set)
    rejected: set[str] = field(default_factory=set)
    last_step: dict[str, int] = field(default_factory=dict)
    last_input: int | None = None
    output: dict[str, str] = field(default_factory=dict)  # running calls' output so far
    running: str | None = None  # the call running now
    terminals: dict[str, str] = field(default_factory=dict)  # a call's terminal, by call
    window: int | None = None  # the model's context window, as the last step's usage said


class AcpNotifier:
    def __init__(
        self,
        changes: Callable[[], ChangeService],
        approval_timeout: float = DEFAULT_APPROVAL_TIMEOUT,
    ) -> None:
        self._changes = changes
        self.approval_timeout = approval_timeout  # seconds an approval waits for the client
        self.outbox: Outbox | None = None
        self.peer: Peer | None = None
        self.sessions: dict[str, Followed] = {}
        self.choices: ChoiceService | None = None  # where "reject always" is kept
        self._steers: dict[str, asyncio.Future[bool]] = {}

    def connect(
        self, peer: Peer, limit: int | None = None, overflow: Callable[[], None] | None = None
    ) -> None:
        self.peer, self.outbox = peer, Outbox(peer, limit, overflow)

    def follow(self, session_id: str, root: str) -> Followed:
        followed = self.sessions.get(session_id)
        if followed is None:
            followed = self.sessions[session_id] = Followed(root)
        return followed

    def send(self, session_id: str, update: updates.Update | Produce) -> None:
        if self.outbox is not None:
            self.outbox.put(session_id, update)

    async def flush(self) -> None:
        if self.outbox is not None:
            await self.outbox.flush()

    def await_steer(self, client_msg_id: str) -> asyncio.Future[bool]:
        """Resolves True once the steer is delivered to the model, False when it is handed
        back undelivered (the turn ended first)."""
        future = self._steers[client_msg_id] = asyncio.get_running_loop().create_future()
        return future

    def drop_steer(self, client_msg_id: str) -> None:
        self._steers.pop(client_msg_id, None)

    # -- the services' Notifier --

    def token(self, turn: TurnRef, step: int, text: str) -> None:
        if self.outbox is not None:
            self.outbox.put_text(turn.session_id, text)

    def thought(self, turn: TurnRef, step: int, text: str) -> None:
        if self.outbox is not None:
            self.outbox.put_text(turn.session_id, text, thought=True)

    def step(self, turn: TurnRef, step: Step) -> None:
        followed = self.follow(turn.session_id, "")
        followed.last_step[turn.run_id] = step.step
        if step.tokens.input:
            followed.last_input = step.tokens.input
        if step.tool_call is None:
            return
        known = updates.tool_call_id(turn.run_id, step.step) in followed.announced
        followed.output.pop(updates.tool_call_id(turn.run_id, step.step), None)
        terminal = followed.terminals.pop(updates.tool_call_id(turn.run_id, step.step), None)

        async def produce() -> list[updates.Update]:
            edits = await self._changes().step_edits(turn.turn_id) if step.result else []
            content = updates.result_content(step, edits, followed.root)
            if terminal is not None:  # the process it started stays shown
                content.insert(0, wire.ToolCallTerminal(terminal))
            return [updates.finished(turn.run_id, step, content, known)]

        self.send(turn.session_id, produce)

    def tool_call(self, turn: TurnRef, step: int, call: ToolCall, status: CallStatus) -> None:
        """A call is announced (``pending``) as soon as the model made it, and is
        ``in_progress`` while it runs; its step, once committed, finishes it. A call overtaken
        by a cancel has no step: it ends ``failed`` here."""
        followed = self.follow(turn.session_id, "")
        ident = updates.tool_call_id(turn.run_id, step)
        if status == CallStatus.PROPOSED:
            if ident not in followed.announced:
                followed.announced.add(ident)

                async def produce() -> list[updates.Update]:
                    content = await asyncio.to_thread(proposed_diff, call, followed.root)
                    return [updates.announced(turn.run_id, step, call, content)]

                self.send(turn.session_id, produce)
        elif status == CallStatus.RUNNING:
            followed.running = ident
            self.send(turn.session_id, updates.tool_call_update(ident, status="in_progress"))
        elif status == CallStatus.CANCELLED and ident in followed.announced:
            followed.output.pop(ident, None)
            self.send(turn.session_id, updates.tool_call_update(ident, status="failed"))

    def child_started(
        self, turn: TurnRef, step: int, call: ToolCall, child_session_id: str
    ) -> None:
        """ACP has no place for a child session: its reply becomes the call's content."""

    def plan(self, turn: TurnRef, step: int, entries: tuple[PlanEntry, ...]) -> None:
        self.send(turn.session_id, updates.plan(entries))

    def tool_output(self, turn: TurnRef, step: int, call: ToolCall, text: str) -> None:
        """A running command's output so far, as the call's content (ACP replaces it)."""
        followed = self.follow(turn.session_id, "")
        ident = updates.tool_call_id(turn.run_id, step)
        shown = followed.output[ident] = followed.output.get(ident, "") + text
        content = [updates.tool_content(updates.text_block(shown))]
        self.send(turn.session_id, updates.tool_call_update(ident, content=content))

    def process_output(self, session_id: str, process_id: str, text: str) -> None:
        """ACP has no update for a process that outlives its call: the model reads its output
        (``read_process_output``); a client that offers terminals shows it in one."""

    def process_exited(self, state: ProcessState) -> None:
        """ACP has no update for it either: a process in the client's terminal ends there, and
        the client has its exit status from the terminal (``terminal/wait_for_exit``)."""

    def terminal_started(self, session_id: str, terminal_id: str) -> None:
        """The session's running call (``start_process``) started a process in the client's
        terminal ``terminal_id``: the call shows it, live, from now on."""
        followed = self.follow(session_id, "")
        if followed.running is None:
            return
        followed.terminals[followed.running] = terminal_id
        shown = [wire.ToolCallTerminal(terminal_id)]
        self.send(session_id, updates.tool_call_update(followed.running, content=shown))

    def usage(self, turn: TurnRef, figures: dict[str, Any]) -> None:
        """After each step: the context the branch holds against the model's window, and
        what the session cost so far (None while a model's price is unknown)."""
        followed = self.follow(turn.session_id, "")
        followed.window = int(figures["contextWindow"])
        spent = figures["cost"]["session"]
        used = int(figures["contextTokens"] or 0)
        self.send(turn.session_id, updates.usage_update(used, followed.window, spent))

    def queued(self, entry: Queued, position: int) -> None:
        """Nothing to tell: ACP has no queue (a prompt sent while a turn runs is a steer), and
        only this agent's own prompts run in its process."""

    def dequeued(self, entry: Queued, reason: str) -> None:
        """As ``queued``."""

    def mode_changed(self, session_id: str, approval: Approval) -> None:
        """The session's mode changed, by this client's ``session/set_mode`` or elsewhere (a
        window's ``session/mode``, a plan's approval, a custom command's mode for its turn): a
        ``current_mode_update`` for a session this client opened (not a child session it
        only hears of)."""
        followed = self.sessions.get(session_id)
        if followed is not None and followed.root:
            self.send(session_id, updates.current_mode(updates.mode_of(approval)))

    def turn_ended(self, turn: TurnRef, result: TurnResult) -> None:
        """Nothing to tell: ACP ends a turn with the ``session/prompt`` answer (its stop
        reason), and has no notification for a turn another client started."""

    def steered(self, turn: TurnRef, step: int | None, steer: Steer, delivered: bool) -> None:
        future = self._steers.pop(steer.client_msg_id or "", None)
        if future is not None and not future.done():
            future.set_result(delivered)

    def forked(self, origin_id: str, fork_id: str) -> None:
        """Turns asked over ACP never run in a fork of their own (no ``onConflict``)."""

    async def ask_approval(self, turn: TurnRef, request: dict[str, Any]) -> Decision:
        followed = self.follow(turn.session_id, "")
        summary = str(request.get("summary", ""))
        if summary in followed.rejected or await self._rejected(turn.session_id, summary):
            return Decision.DENY
        number = followed.last_step.get(turn.run_id, 0) + 1
        call = ToolCall("", str(request.get("tool", "")), dict(request.get("arguments") or {}))
        ident = updates.tool_call_id(turn.run_id, number)
        if ident not in followed.announced:  # else announced, with its diff, when proposed
            followed.announced.add(ident)
            content = await asyncio.to_thread(proposed_diff, call, followed.root)
            self.send(turn.session_id, updates.announced(turn.run_id, number, call, content))
        await self.flush()
        if self.peer is None:
            return Decision.TIMEOUT
        tool_call = wire.PermissionToolCall(ident, summary, updates.KINDS.get(call.name, "other"))
        asking = wire.RequestPermission(turn.session_id, tool_call, permission_options(request))
        asked = self.peer.request("session/request_permission", unstructure(asking))
        try:
            answer = await asyncio.wait_for(asked, self.approval_timeout)
        except TimeoutError:
            return Decision.TIMEOUT
        except Exception as exc:  # the client answered with an error: nothing was approved
            log.info("the client did not answer the permission request: %s", exc)
            return Decision.DENY
        option = chosen(answer)
        if option is None:
            return Decision.DENY  # cancelled: the prompt turn is being cancelled
        if option == "denyAlways":
            followed.rejected.add(summary)
            if self.choices is not None:
                await self.choices.reject(turn.session_id, summary)
        return DECISIONS.get(option, Decision.DENY)  # ``running`` says ``in_progress``

    async def _rejected(self, session_id: str, summary: str) -> bool:
        """Whether the user rejected ``summary`` for good in this session, in any window."""
        if self.choices is None:
            return False
        return summary in (await self.choices.of(session_id)).rejected


def chosen(answer: Any) -> str | None:
    """The option a ``session/request_permission`` answer selected; None when the client
    cancelled the request or answered with something that is not an ACP outcome."""
    try:
        return structure(answer, wire.PermissionAnswer).chosen
    except InvalidParams:
        return None


def proposed_diff(call: ToolCall, root: str) -> list[updates.ToolContent]:
    """The diff a ``write_file`` or ``edit_file`` call would make, read from the disk now."""
    if not root:
        return []
    context = ToolContext(Path(root))
    found = proposed(call.name, call.arguments, context)
    if found is None:
        return []
    path, data = found
    before = read_content(context, context.relative(path))
    old = None if before is None or before.data is None else before.data.decode("utf-8", "replace")
    new = data.decode("utf-8", "replace")
    return [updates.tool_diff_content(str(path), new, old)]
