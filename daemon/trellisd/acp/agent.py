"""The ACP agent: each ACP method in a few lines over the services, as ``handlers/`` serve
the native ones. Session ids are trellisd's own, so either protocol reopens what the other
made; the turn a prompt runs is the native turn (same runs, steps, events, ledger).

``METHODS`` is the method table: each method's ``Route``, its params type (``wire``) and the
agent's method that serves it. ``TrellisAgent.dispatch`` is the one place a request is served:
its params structured into the typed request (a -32602 naming the field), the handler called,
its typed result written as JSON, and trellisd's errors given their code, message and data.

A ``session/prompt`` sent while the session's turn runs is a steer: it reaches the model at
the next step boundary and its answer is the running turn's. When the turn ends before that
boundary, the steer comes back undelivered and the prompt runs as a turn of its own, unless
the client cancelled meanwhile (then it answers ``cancelled``).
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import functools
import logging
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from ..convert import structure, unstructure
from ..errors import InvalidParams, NotFound, NotRunning, TrellisError
from ..policy import Approval
from ..records import Effort, ProviderChoice, Session, ToolCall, Turn, TurnRef
from ..services import Services
from ..services.hooks import PromptBlocked
from ..services.images import ImageInput
from ..services.recovery import refuse_undecided
from ..services.running import RunningTurn, Snapshot
from ..services.turns import TurnRequest
from . import hello, updates, wire
from .files import ClientFiles
from .notifier import AcpNotifier, proposed_diff
from .rpc import Connection, RpcError
from .terminals import ClientTerminals
from .updates import mode_of

log = logging.getLogger(__name__)

LIST_LIMIT = 50
MODES: dict[str, tuple[Approval, str, str]] = {
    "ask": ("ask", "Ask", "Ask before every write and command"),
    "acceptEdits": (
        "acceptEdits",
        "Accept edits",
        "Write and edit files the policy allows without asking; commands and MCP tools ask",
    ),
    "auto": (
        "auto",
        "Auto",
        "Inside the walls, write files and run commands the policy allows without asking;"
        " protected paths and commands outside the walls still ask",
    ),
    "plan": (
        "plan",
        "Plan",
        "Read, search and make a plan; every write, command and MCP tool is refused until"
        " you switch mode",
    ),
    "read-only": (
        "never",
        "Read-only",
        "Read and search only; writes and commands are refused, and programs run in"
        " read-only walls",
    ),
}
"""The ACP session modes: trellisd's approval modes (``session/mode``; ``auto`` brings
``workspace-write`` walls, ``read-only`` is approval ``never`` inside ``read-only`` walls)."""


MODEL_OPTION = "model"
EFFORT_OPTION = "effort"
EFFORTS: dict[str, Effort | None] = {
    "default": None,
    "low": "low",
    "medium": "medium",
    "high": "high",
}
"""The ``effort`` config option's values: how hard a reasoning model thinks on the session's
next turns (``session/turn``'s ``effort``); ``default`` leaves it to the session's provider
settings, else the model."""
AFTER_A_KILL = (
    "look at what it left, then open the session in a trellisd editor (VS Code or Neovim) to"
    " keep it or revert the turn, or send trellisd's session/recover; then prompt again"
)
"""What an ACP client's user does about a session waiting for a decision (``recovery``)."""


@attrs.frozen
class Route:
    """A method of the table: the type its params structure into, and the name of the
    ``TrellisAgent`` method that serves it."""

    params: type[Any]
    serve: str


METHODS: dict[str, Route] = {
    "initialize": Route(wire.Initialize, "initialize"),
    "authenticate": Route(wire.Authenticate, "authenticate"),
    "session/new": Route(wire.NewSession, "new_session"),
    "session/load": Route(wire.LoadSession, "load_session"),
    "session/resume": Route(wire.ResumeSession, "resume_session"),
    "session/fork": Route(wire.ForkSession, "fork_session"),
    "session/list": Route(wire.ListSessions, "list_sessions"),
    "session/close": Route(wire.CloseSession, "close_session"),
    "session/set_mode": Route(wire.SetSessionMode, "set_session_mode"),
    "session/set_config_option": Route(wire.SetConfigOption, "set_config_option"),
    "session/prompt": Route(wire.Prompt, "prompt"),
}
"""The client's requests."""

NOTIFICATIONS: dict[str, Route] = {"session/cancel": Route(wire.Cancel, "cancel")}
"""The client's notifications."""


class TrellisAgent:
    """The ACP agent over trellisd's services: ``dispatch`` serves the client's methods."""

    def __init__(self, app: Services, notifier: AcpNotifier, shared: bool = False) -> None:
        """``shared``: one window of the shared daemon, whose turns are not all this
        connection's (the daemon asks ``files_for`` whose they are)."""
        self.app, self.notifier, self.shared = app, notifier, shared
        notifier.choices = app.choices
        # The sessions this client created, loaded, resumed or forked: the only ones it may
        # prompt or set, since only for them was it told what the session is and does.
        self.opened: set[str] = set()
        # The stop reason of each session's running turn, once it ends.
        self._turns: dict[str, asyncio.Future[wire.StopReason]] = {}
        self._cancelled: set[str] = set()
        # The effort each session's user chose here (the ``effort`` option), for its next turns.
        self.efforts: dict[str, Effort | None] = {}
        self.conn: Connection | None = None
        self.fs = (False, False)  # whether the client reads and writes files for the agent
        self.terminal = False  # whether the client runs a session's processes in terminals
        # Told of each session this connection serves from now on, and lets go of.
        self.on_follow: Callable[[str], None] = lambda session_id: None
        self.on_leave: Callable[[str], None] = lambda session_id: None
        if not shared:
            app.turns.editor_files = self._editor_files
            app.processes.terminals = self._terminals

    def connect(
        self, conn: Connection, limit: int | None = None, overflow: Callable[[], None] | None = None
    ) -> None:
        """Serve ``conn``; ``limit`` and ``overflow``: as ``notifier.Outbox``'s."""
        self.conn = conn
        self.notifier.connect(conn, limit, overflow)

    async def dispatch(self, method: str, raw: Any, is_notification: bool) -> Any:
        """The ``rpc.Dispatch`` of the connection: a method of the table by its name, its
        params typed, its result written out, trellisd's errors sent once, here, with their
        code, message and data. ``_``-prefixed extension methods are not served (an extension
        notification is ignored)."""
        found = (NOTIFICATIONS if is_notification else METHODS).get(method)
        if found is None:
            if is_notification and method.startswith("_"):
                log.debug("ignored the extension notification %s", method[1:])
                return None
            raise RpcError.method_not_found(method[1:] if method.startswith("_") else method)
        try:
            result = await getattr(self, found.serve)(structure(raw, found.params))
        except TrellisError as exc:
            raise RpcError(int(exc.CODE), exc.message, exc.data or None) from exc
        return None if is_notification else unstructure(result)

    def files_for(self, ref: TurnRef) -> ClientFiles | None:
        """The client's files for a turn that this connection's prompt runs, else None."""
        return self._editor_files(ref) if ref.session_id in self._turns else None

    def _editor_files(self, ref: TurnRef) -> ClientFiles | None:
        read, write = self.fs
        if not (read or write) or self.conn is None:
            return None
        return ClientFiles(self.conn, ref.session_id, read, write)

    def terminals_for(self, session_id: str) -> ClientTerminals | None:
        """The client's terminals for a session this connection's prompt runs, else None."""
        return self._terminals(session_id) if session_id in self._turns else None

    def _terminals(self, session_id: str) -> ClientTerminals | None:
        if not self.terminal or self.conn is None:
            return None
        shown = functools.partial(self.notifier.terminal_started, session_id)
        return ClientTerminals(self.conn, session_id, shown)

    def offered(self, p: wire.Initialize) -> None:
        """What the client offers the agent: its files, its terminals."""
        self.fs = p.files
        self.terminal = p.client_capabilities.terminal

    async def initialize(self, p: wire.Initialize) -> wire.InitializeResult:
        self.offered(p)
        return hello.capabilities()

    async def new_session(self, p: wire.NewSession) -> wire.NewSessionResult:
        # The daemon's default approval is ask; a project file may only make it stricter.
        session = await self.app.sessions.open(p.cwd, None, None, None)
        await self._follow(session, p.mcp_servers)
        self.opened.add(session.session_id)
        created = await self._created(session)
        self._tell_commands(session.session_id)
        return created

    async def load_session(self, p: wire.LoadSession) -> wire.SessionState:
        session_id = p.session_id
        following = session_id in self.notifier.sessions
        session = await self.app.sessions.get(session_id)
        await self._follow(session, p.mcp_servers, join=False)
        turns = await self.app.sessions.history(session_id)
        steps = await self.app.runs.steps(turns[-1].run_id) if turns else []
        if steps and steps[-1].tokens.input:
            self.notifier.follow(session_id, session.root).last_input = steps[-1].tokens.input
        self._join(session, following, replay=True)
        self.opened.add(session_id)
        await self._tell_state(session, turns)
        await self.notifier.flush()
        state = await self._state(session)
        self._tell_commands(session_id)
        return state

    async def resume_session(self, p: wire.ResumeSession) -> wire.SessionState:
        session_id = p.session_id
        following = session_id in self.notifier.sessions
        session = await self.app.sessions.get(session_id)
        await self._follow(session, p.mcp_servers, join=False)
        self._join(session, following, replay=False)
        self.opened.add(session_id)
        await self.notifier.flush()
        state = await self._state(session)
        self._tell_commands(session_id)
        return state

    async def fork_session(self, p: wire.ForkSession) -> wire.NewSessionResult:
        origin = await self.app.sessions.get(p.session_id)
        fork = await self.app.sessions.fork(p.session_id, origin.head)
        await self._follow(fork, p.mcp_servers)
        await self.app.choices.copy(p.session_id, fork.session_id)
        if p.session_id in self.efforts:
            self.efforts[fork.session_id] = self.efforts[p.session_id]
        self.opened.add(fork.session_id)
        created = await self._created(fork)
        self._tell_commands(fork.session_id)
        return created

    async def list_sessions(self, p: wire.ListSessions) -> wire.ListSessionsResult:
        page, after = await self.app.sessions.page(p.cwd, LIST_LIMIT, p.cursor)
        listed = [
            wire.SessionInfo(
                s.session.session_id, s.session.root, s.session.title or None, s.session.updated_at
            )
            for s in page
        ]
        return wire.ListSessionsResult(tuple(listed), after)

    async def set_session_mode(self, p: wire.SetSessionMode) -> wire.Empty:
        session_id, mode_id = p.session_id, p.mode_id
        if mode_id not in MODES:
            modes = ", ".join(MODES)
            raise InvalidParams(f"unknown mode {mode_id!r}; modes: {modes}", field="modeId")
        session = await self._opened(session_id)
        await self.app.sessions.policies.set_mode(session, MODES[mode_id][0])
        await self.notifier.flush()  # its current_mode_update, as every follower's
        return wire.Empty()

    async def set_config_option(self, p: wire.SetConfigOption) -> wire.ConfigOptions:
        session_id, config_id, value = p.session_id, p.config_id, p.value
        session = await self._opened(session_id)
        if config_id == EFFORT_OPTION:
            if not isinstance(value, str) or value not in EFFORTS:
                raise InvalidParams(
                    f"unknown effort {value!r}; efforts: {', '.join(EFFORTS)}",
                    field="value",
                    configId=config_id,
                )
            self.efforts[session_id] = EFFORTS[value]
            return wire.ConfigOptions((await self._state(session)).config_options)
        if config_id != MODEL_OPTION:
            raise InvalidParams(
                f"unknown config option {config_id!r}; options: model, effort", field="configId"
            )
        chosen = (await self.app.choices.of(session_id)).model
        if not isinstance(value, str) or value not in self._models(session, chosen):
            raise InvalidParams(f"unknown model {value!r}", field="value", configId=config_id)
        await self.app.choices.choose_model(session_id, value)
        return wire.ConfigOptions((await self._state(session)).config_options)

    async def authenticate(self, p: wire.Authenticate) -> wire.Empty:
        raise InvalidParams("trellisd needs no authentication: it has no auth methods")

    async def close_session(self, p: wire.CloseSession) -> wire.Empty:
        """Let go of the session: its lease and what this agent keeps of it."""
        session_id = p.session_id
        await self.app.sessions.close(session_id)
        self.on_leave(session_id)
        self.notifier.sessions.pop(session_id, None)
        self.opened.discard(session_id)
        return wire.Empty()

    async def prompt(self, p: wire.Prompt) -> wire.PromptResult:
        session_id, text = p.session_id, wire.prompt_text(p.prompt)
        images = wire.prompt_images(p.prompt)
        if not text.strip():
            raise InvalidParams("the prompt has no text", field="prompt")
        session = await self._opened(session_id)
        refuse_undecided(session, AFTER_A_KILL)
        await self._follow(session, None)
        self._cancelled.discard(session_id)
        command = await self._command(session_id, text)
        if command is not None:  # a command is a turn of its own: after the running one
            while (running := self._running(session_id)) is not None:
                await asyncio.wait([running])
            return wire.PromptResult(await self._turn(session, text, images, command))
        if images and self._running(session_id) is not None:
            raise InvalidParams(
                "images cannot join a running turn as a steer; send them when the turn ends",
                field="prompt",
            )
        while (running := self._running(session_id)) is not None:
            delivered = await self._steer(session_id, text)
            if delivered:
                return wire.PromptResult(await running)
            if delivered is False and session_id in self._cancelled:
                return wire.PromptResult("cancelled")
            if delivered is None:  # the turn is ending: this prompt is the next turn
                await asyncio.wait([running])
        return wire.PromptResult(await self._turn(session, text, images))

    def _running(self, session_id: str) -> asyncio.Future[wire.StopReason] | None:
        """The stop reason of the session's running turn, once it ends: this connection's
        own prompt's, or (on the shared daemon) that of a turn another window started."""
        own = self._turns.get(session_id)
        other = self.app.running.get(session_id) if own is None else None
        if other is None or other.task is None:
            return own
        return asyncio.ensure_future(self._stop_reason(other))

    async def _stop_reason(self, running: RunningTurn) -> wire.StopReason:
        return updates.STOP_REASONS.get(await self.app.turns.outcome(running), "end_turn")

    async def _steer(self, session_id: str, text: str) -> bool | None:
        """``text`` as a steer of the running turn: True once the model got it, False when
        the turn ended first and handed it back, None when the turn had ended already."""
        msg_id = uuid.uuid4().hex
        delivered = self.notifier.await_steer(msg_id)
        try:
            await self.app.turns.steer(session_id, text, msg_id)
        except NotRunning:
            self.notifier.drop_steer(msg_id)
            return None
        log.info("a prompt for session %s came while its turn runs: queued as a steer", session_id)
        return await delivered

    async def _turn(
        self,
        session: Session,
        text: str,
        images: tuple[ImageInput, ...] = (),
        command: tuple[str, str] | None = None,
    ) -> wire.StopReason:
        session_id = session.session_id
        done: asyncio.Future[wire.StopReason] = asyncio.get_running_loop().create_future()
        self._turns[session_id] = done
        try:
            named = await self.app.sessions.name_after(session_id, text)
            if named is not None:
                self.notifier.send(session_id, updates.info(named.title, named.updated_at))
            chosen = await self.app.choices.of(session_id)
            choice = ProviderChoice(model=chosen.model, effort=self.efforts.get(session_id))
            try:
                if command is None:
                    request = TurnRequest(session_id, text, choice, images=images)
                    result = await self.app.turns.turn(request)
                else:  # the command's model and effort win over the session's choice
                    request = TurnRequest(session_id, text, images=images)
                    result = await self.app.commands.turn(request, *command, chosen=choice)
            except PromptBlocked as blocked:  # the person reads why; no turn began
                self.notifier.send(session_id, updates.agent_text(blocked.message))
                await self.notifier.flush()
                done.set_result("refusal")
                return "refusal"
            await self._tell_state(await self.app.sessions.get(session_id), None)
            await self.notifier.flush()
            reason = updates.STOP_REASONS.get(result.outcome)
            if reason is None:
                raise RpcError(
                    -32603,
                    f"the turn ended with {result.outcome}: {result.error or 'no reason given'}",
                    {"outcome": result.outcome, "turnId": result.turn_id, "error": result.error},
                )
            done.set_result(reason)
            return reason
        except Exception as exc:  # a steer waiting on the turn answers with its error too
            done.set_exception(exc)
            done.exception()  # retrieved: nobody need wait on it
            raise
        except BaseException:
            done.set_result("cancelled")
            raise
        finally:
            self._turns.pop(session_id, None)

    async def cancel(self, p: wire.Cancel) -> None:
        session_id = p.session_id
        if session_id in self._turns:
            self._cancelled.add(session_id)
        try:
            await self.app.turns.cancel(session_id)
        except TrellisError as exc:
            log.info("session/cancel of %s: %s", session_id, exc.message)

    # -- helpers --

    def _tell_commands(self, session_id: str) -> None:
        """The session's custom commands, if it has any, as ``available_commands_update``:
        put last, once the answer that tells the client of the session is all that is left
        to send."""
        self.notifier.send(session_id, functools.partial(self._available, session_id))

    async def _available(self, session_id: str) -> list[updates.Update]:
        commands = await self.app.commands.of(session_id)
        return [updates.available_commands(commands)] if commands else []

    async def _command(self, session_id: str, text: str) -> tuple[str, str] | None:
        """The command a prompt runs, ``/name arguments``, and its arguments; None when the
        prompt does not start with the name of one of the session's commands."""
        if not text.startswith("/"):
            return None
        name, *rest = text[1:].split(None, 1) or [""]
        known = {c.name for c in await self.app.commands.of(session_id)}
        return (name, rest[0].strip() if rest else "") if name in known else None

    async def _opened(self, session_id: str) -> Session:
        """The session, if this client created, loaded, resumed or forked it: a client that
        never did was never shown it, and its prompt or mode would act on the session
        unseen (its approvals asked of the windows that follow it, or of none)."""
        session = await self.app.sessions.get(session_id)
        if session_id not in self.opened:
            raise RpcError(
                int(NotFound.CODE),
                f"session {session_id} is not open in this client: create, load or resume it first",
                {"sessionId": session_id},
            )
        return session

    async def _follow(
        self, session: Session, mcp_servers: wire.McpServers | None, join: bool = True
    ) -> None:
        """Serve ``session`` on this connection, its turns offered the tools of
        ``mcp_servers`` (as ``session/open``'s ``mcpServers``: kept while this process
        serves the session, never stored). Without ``join``, its turns reach the client
        once ``_join`` says so."""
        specs = wire.specs(mcp_servers)
        self.notifier.follow(session.session_id, session.root).root = session.root
        if join:
            self.on_follow(session.session_id)
        if specs:
            self.app.sessions.mcp.give(session.session_id, specs)

    def _join(self, session: Session, following: bool, replay: bool) -> None:
        """From this instant the client gets the session's turns; first (queued ahead of
        them, read when their turn to be sent comes) the history when ``replay``, and the
        turn running now as far as it has gone at this instant: its prompt, its committed
        steps, the text its current step streamed and its calls in flight. Taken with no
        await between the snapshot and following, as a native ``session/reopen``'s
        ``running``, so nothing is missing or twice. A client ``following`` the session
        already has the running turn live."""
        session_id = session.session_id
        live = self.app.running.snapshot(session_id) if self.shared and not following else None
        if live is not None:
            followed = self.notifier.follow(session_id, session.root)
            run_id = live.ref.run_id
            followed.last_step[run_id] = max(followed.last_step.get(run_id, 0), live.done)
            for call, output in live.calls:
                ident = updates.tool_call_id(run_id, call.step)
                followed.announced.add(ident)
                followed.output[ident] = output
        self.on_follow(session_id)
        if replay or live is not None:
            instant = self.app.running.starts()
            joined = functools.partial(self._joined, session, replay, live, instant)
            self.notifier.send(session_id, joined)

    async def _joined(
        self, session: Session, replay: bool, live: Snapshot | None, instant: int
    ) -> list[updates.Update]:
        """What ``_join`` queued: the history, then the running turn as far as it had gone
        (``SessionService.joined``)."""
        root = session.root
        out: list[updates.Update] = []
        for shown in await self.app.sessions.joined(session.session_id, replay, live, instant):
            turn, steps, edits = shown.turn, shown.steps, shown.edits
            if live is None or turn.turn_id != live.ref.turn_id:
                out += await self._pictured(turn, updates.replayed(turn, steps, edits, root))
                continue
            done = [s for s in steps if s.step <= live.done]
            partial = updates.replayed(dataclasses.replace(turn, reply=""), done, edits, root)
            out += await self._pictured(turn, partial)
            out += await self._in_flight(live, root)
        return out

    async def _pictured(self, turn: Turn, shown: list[updates.Update]) -> list[updates.Update]:
        """A replayed turn's updates with its images as image blocks of its user message,
        after the prompt's text (an image whose bytes are gone is left out)."""
        blocks: list[updates.Update] = []
        for ref in turn.images:
            try:
                _, data = await self.app.turns.images.fetch(turn.session_id, ref.sha256)
            except NotFound:
                continue
            encoded = base64.b64encode(data).decode("ascii")
            blocks.append(wire.UserMessageChunk(wire.ImageContent(encoded, ref.mime_type)))
        return shown[:1] + blocks + shown[1:]

    async def _in_flight(self, live: Snapshot, root: str) -> list[updates.Update]:
        """The running turn's uncommitted steps at the snapshot: the current step's reasoning
        and text so far and the calls in flight, in step order (the text ahead of its step's
        call)."""
        out: list[tuple[int, int, updates.Update]] = []
        if live.thought and live.step is not None:
            out.append((live.step, 0, updates.agent_thought(live.thought)))
        if live.text and live.step is not None:
            out.append((live.step, 0, updates.agent_text(live.text)))
        for call, output in live.calls:
            made = ToolCall(call.call_id, call.tool, call.arguments)
            diff = [] if output else await asyncio.to_thread(proposed_diff, made, root)
            out.append((call.step, 1, updates.in_flight(live.ref.run_id, call, output, diff)))
        return [update for _, _, update in sorted(out, key=lambda o: (o[0], o[1]))]

    async def _state(self, session: Session) -> wire.SessionState:
        """The session's ``modes`` (the approval modes) and ``configOptions`` (the model)."""
        policy = await self.app.sessions.policies.of(session)
        modes = wire.SessionModeState(
            mode_of(policy.effective_approval),
            tuple(
                wire.SessionMode(mode, name, description)
                for mode, (_, name, description) in MODES.items()
            ),
        )
        chosen = (await self.app.choices.of(session.session_id)).model
        models = self._models(session, chosen)
        option = wire.SelectOption(
            MODEL_OPTION,
            "Model",
            self._model(session, chosen) or models[0],
            tuple(wire.SelectValue(m, m) for m in models),
            category="model",
        )
        effort = wire.SelectOption(
            EFFORT_OPTION,
            "Effort",
            self.efforts.get(session.session_id) or "default",
            tuple(wire.SelectValue(e, e.capitalize()) for e in EFFORTS),
            category="thought_level",
        )
        return wire.SessionState(modes, (option, effort))

    async def _created(self, session: Session) -> wire.NewSessionResult:
        """``session/new``'s and ``session/fork``'s answer: the session and its state."""
        state = await self._state(session)
        return wire.NewSessionResult(session.session_id, state.modes, state.config_options)

    def _model(self, session: Session, chosen: str | None) -> str | None:
        return chosen or self.app.defaults.for_session(session.provider).effective_model

    def _models(self, session: Session, chosen: str | None) -> list[str]:
        """The session's model, the daemon's, and those ``TRELLISD_MODELS`` lists."""
        listed = self.app.settings.daemon.acp_models
        found = [self._model(session, chosen), self.app.defaults.provider.effective_model, *listed]
        models = list(dict.fromkeys(m.strip() for m in found if m and m.strip()))
        return models or ["default"]

    async def _tell_state(self, session: Session, turns: Sequence[Any] | None) -> None:
        """The session's title and usage: the context the last model call took and the
        cost of its turns so far."""
        turns = await self.app.sessions.history(session.session_id) if turns is None else turns
        followed = self.notifier.follow(session.session_id, session.root)
        size = followed.window or self.app.settings.daemon.acp_context_window
        self.notifier.send(session.session_id, updates.info(session.title, session.updated_at))
        self.notifier.send(session.session_id, updates.usage(turns, followed.last_input, size))
