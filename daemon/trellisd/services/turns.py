"""Turns: running one (or resuming an interrupted one), steering it, cancelling it.

A turn's outcome is recorded whatever happens to the editor: the loop commits each step, and
the end of the turn (``_end``) records the outcome and hands back undelivered steers before
the request answers.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..agent.attached import Attached, ContextEntry, frame
from ..agent.budget import Budgeted, Ledger
from ..agent.context import Sent, conversation, opening, prompt_message, replay
from ..agent.instructions import InstructionFile, Instructions, gather
from ..agent.loop import TurnEnd, TurnPlan, run_turn
from ..agent.steering import Steer
from ..config import ProviderSettings
from ..daemon_settings import DEFAULT_MAX_STEPS
from ..errors import Conflict, LeaseHeld, NotRunning, StaleHead, TrellisError
from ..hooks import HookRun
from ..mcp import McpServers
from ..plans import Plan
from ..policy import Policy, PolicySpec
from ..pricing import cost
from ..providers import close_provider, make_provider
from ..providers.base import Provider, ProviderError
from ..records import (
    ANY_HEAD,
    Budget,
    Compacted,
    ExpectHead,
    ProviderChoice,
    Session,
    Step,
    Tokens,
    Turn,
    TurnRef,
    TurnResult,
)
from ..store.facade import AsyncStore
from ..store.recoveries import NEEDED
from ..tools import (
    Task,
    TaskRequest,
    Tool,
    ToolContext,
    default_tools,
    process_tools,
    remove_leftover_writes,
)
from ..tools.base import EditorFiles
from ..vocabulary import Decision, EventKind, Outcome, StepKind
from .attach import attach
from .budgets import BudgetService
from .changes import ChangeService, approval_diff
from .context import ContextWindows, UsageSink, keeper_for, spent
from .hooks import HookService, TurnHooks
from .images import GivenImage, ImageInput, Images, check, refuse_model
from .policies import Policies
from .processes import ProcessService, SessionProcesses
from .recovery import refuse_undecided
from .running import Running, RunningTurn
from .seams import Activity, Check, Gate, Notifier, Recorder
from .settings import Defaults
from .tasks import ChildSessions, Within
from .titles import title_of
from .worktrees import WorktreeService

log = logging.getLogger(__name__)

CANCEL_WAIT_SECONDS = 2.0
RESUMABLE = (Outcome.PAUSED, Outcome.INTERRUPTED, Outcome.ERROR)
PLAN_MODE_NOTE = (
    "<mode>The session is in plan mode: read and search as you need, and lay out the work"
    " with update_plan. Every write, edit, command and MCP tool is refused in this mode;"
    " end with the plan, which the user runs when they approve it.</mode>\n\n"
)
"""What the model is told before a prompt given in plan mode."""


@dataclass(frozen=True)
class FollowedPlan:
    """The plan a turn carries out (``session/plan/approve``) and the turn that made it."""

    turn_id: str
    plan: Plan


@dataclass(frozen=True)
class _Start:
    """Where a turn starts: its session, its run, the model and what the model sees first."""

    session: Session
    ref: TurnRef
    settings: ProviderSettings
    messages: list[Any]  # the system message, then the turn's own: its prompt, its steps
    prompt: str
    max_steps: int | None = None
    verify: tuple[list[str], int] | None = None
    first_step: int = 1
    instruction_files: tuple[InstructionFile, ...] = ()
    step_mode: bool = False
    held: tuple[Steer, ...] = ()  # steers kept while the turn was paused
    attached: tuple[Attached, ...] = ()  # the editor context given with the prompt
    path: tuple[Turn, ...] = ()  # the turns before it, sent after the system (``keeper_for``)
    budget: Budget | None = None  # what this turn may spend (its session's budget aside)
    within: Within | None = None  # a child's turn: its parent's ledger, the tools it may use
    follows: FollowedPlan | None = None  # the plan it carries out
    images: tuple[GivenImage, ...] = ()  # the images given with the prompt, to keep
    sent: Sent | None = None  # the path's images sent again, by SHA-256
    hooked: tuple[HookRun, ...] = ()  # the userPromptSubmit hooks run before it began
    command: Mapping[str, Any] | None = None  # the custom command it runs (``services.commands``)


@dataclass(frozen=True)
class TurnRequest:
    """A turn asked of a session, whichever protocol asked it.

    ``choice``: the model and its settings laid over the session's; ``max_steps`` and
    ``verify`` (argv, expected exit code): a bounded turn and its check; ``step_mode``: pause
    after every step; ``expect_head``: the head the turn must follow (``StaleHead``
    otherwise); ``fork_on_conflict``: on ``StaleHead`` or ``LeaseHeld``, run it in a new fork
    instead; ``context``: what the editor attached to the prompt; ``budget``: what this turn
    may spend; ``within``: a child session's turn (``services.tasks``); ``follows``: the plan
    it carries out (``services.plans``); ``images``: the images given with the prompt;
    ``command``: the custom command whose expansion the prompt is, recorded in the run."""

    session_id: str
    prompt: str
    choice: ProviderChoice = ProviderChoice()
    max_steps: int | None = None
    verify: tuple[list[str], int] | None = None
    step_mode: bool = False
    expect_head: ExpectHead = ANY_HEAD
    fork_on_conflict: bool = False
    context: tuple[ContextEntry, ...] = ()
    budget: Budget | None = None
    within: Within | None = None
    follows: FollowedPlan | None = None
    images: tuple[ImageInput, ...] = ()
    command: Mapping[str, Any] | None = None


class TurnService:
    def __init__(
        self,
        store: AsyncStore,
        defaults: Defaults,
        running: Running,
        policies: Policies,
        notifier: Notifier,
        providers: Callable[[ProviderSettings], Provider] = make_provider,
        changes: ChangeService | None = None,
        mcp: McpServers | None = None,
        max_steps: int = DEFAULT_MAX_STEPS,
        worktrees: WorktreeService | None = None,
        processes: ProcessService | None = None,
        hooks: HookService | None = None,
    ) -> None:
        self.store, self.defaults, self.running = store, defaults, running
        self.hooks = hooks  # the programs the user and the project run at a turn's events
        self.processes = processes  # the processes a turn's calls start (``start_process``)
        self.worktrees = worktrees  # a task's child in a worktree of its own
        self.max_steps = max_steps  # of a turn that names none (``TRELLISD_MAX_STEPS``)
        self.changes, self.mcp = changes, mcp
        self.policies, self.notifier = policies, notifier
        self._make_provider = providers
        self._providers: dict[ProviderSettings, Provider] = {}
        # The editor's files for a turn's file tools, where its protocol has them (ACP).
        self.editor_files: Callable[[TurnRef], EditorFiles | None] = lambda ref: None
        self.context_windows = ContextWindows()
        self.budgets = BudgetService(store)
        self.images = Images(store)

    async def close(self) -> None:
        """Let go of the providers' pooled connections."""
        providers, self._providers = list(self._providers.values()), {}
        for provider in providers:
            await close_provider(provider)

    def _provider(self, settings: ProviderSettings) -> Provider:
        provider = self._providers.get(settings)
        if provider is None:
            provider = self._providers[settings] = self._make_provider(settings)
        return provider

    async def turn(self, request: TurnRequest) -> TurnResult:
        """Run ``request``'s turn after the session's head; it answers when the turn ends.
        An untitled session is named after the prompt (``title_of``)."""
        session_id, prompt = request.session_id, request.prompt
        self.running.refuse(session_id, "start another")
        session = await self.store.sessions.get(session_id)
        refuse_undecided(session)
        attached = await self._attach(session, request.context)
        settings = self.defaults.for_session(session.provider).merged(request.choice, "turn")
        refuse_model(settings.effective_model, len(request.images))
        given = await self._images(session, request.images)
        path = await self.store.sessions.history(session_id)
        own = sum(g.ref.bytes for g in given)
        sent = await self.images.of_path(session_id, path, settings.effective_model, own)
        told = await self._instructions(session)
        hooked = None if self.hooks is None else await self.hooks.prompt(session, prompt)
        self.running.refuse(session_id, "start another")
        try:
            turn_id, run_id, _ = await self.store.runs.begin(
                session_id, prompt, settings.effective_model, request.expect_head, title_of(prompt)
            )
        except (StaleHead, LeaseHeld):
            if not request.fork_on_conflict:
                raise
            return await self._in_fork(request)
        ref = TurnRef(session_id, turn_id, run_id)
        framed = frame(prompt, attached)
        if hooked is not None and hooked.context:
            framed = f"{framed}\n\n<hook-context>\n{hooked.context}\n</hook-context>"
        if (await self.policies.of(session)).effective_approval == "plan":
            framed = PLAN_MODE_NOTE + framed
        images = [g.image() for g in given]
        messages = conversation(session.root, [], framed, told.text, images)  # path: the keeper's
        return await self._run(
            _Start(
                session,
                ref,
                settings,
                messages,
                framed,
                request.max_steps,
                request.verify,
                instruction_files=told.files,
                step_mode=request.step_mode,
                attached=tuple(attached),
                path=tuple(path),
                budget=request.budget,
                within=request.within,
                follows=request.follows,
                images=tuple(given),
                sent=sent,
                hooked=() if hooked is None else hooked.runs,
                command=request.command,
            )
        )

    async def child_turn(
        self, session: Session, request: TaskRequest, within: Within
    ) -> TurnResult:
        """The turn of a child session the ``task`` tool started (``services.tasks``)."""
        budget = None if request.budget_usd is None else Budget(usd=request.budget_usd)
        return await self.turn(
            TurnRequest(
                session.session_id,
                request.prompt,
                max_steps=request.max_steps,
                budget=budget,
                within=within,
            )
        )

    async def child_policy(self, parent: Session) -> PolicySpec | None:
        """What a child of ``parent`` is opened with: its policy, in the mode the user set."""
        return await self.policies.spec(parent)

    async def _attach(self, session: Session, context: tuple[ContextEntry, ...]) -> list[Attached]:
        """The editor context, checked and read under the session's policy."""
        if not context:
            return []
        policy = await self.policies.of(session)
        tools = ToolContext(Path(session.root), may_read=policy.may_read)
        return await attach(context, tools, policy.check)

    async def _images(self, session: Session, inputs: tuple[ImageInput, ...]) -> list[GivenImage]:
        """The prompt's images, read and checked under the session's policy."""
        if not inputs:
            return []
        policy = await self.policies.of(session)
        tools = ToolContext(Path(session.root), may_read=policy.may_read)
        return await check(inputs, tools, policy.check)

    async def _instructions(self, session: Session) -> Instructions:
        """The session's standing instructions with the root's AGENTS.md, read now."""
        policy = await self.policies.of(session)
        context = ToolContext(Path(session.root), may_read=policy.may_read)
        return await asyncio.to_thread(gather, session.instructions, context)

    async def _in_fork(self, request: TurnRequest) -> TurnResult:
        """The turn, run in a fork of the session taken at ``expect_head``, or (with no
        expectation) at the last turn of its path that has ended."""
        session_id, at = request.session_id, request.expect_head
        if at is ANY_HEAD:
            ended = [
                t for t in await self.store.sessions.history(session_id) if t.outcome != "running"
            ]
            at = ended[-1].turn_id if ended else None
        fork = await self.store.sessions.fork(session_id, at)
        self.notifier.forked(session_id, fork.session_id)
        log.info("session %s moved on: the turn runs in its fork %s", session_id, fork.session_id)
        result = await self.turn(
            dataclasses.replace(
                request, session_id=fork.session_id, expect_head=ANY_HEAD, fork_on_conflict=False
            )
        )
        return dataclasses.replace(result, session_id=fork.session_id, forked_from=fork.forked_from)

    async def outcome(self, running: RunningTurn) -> str:
        """The outcome of the running turn ``running`` (whichever window started it), once
        it has ended and recorded it."""
        if running.task is not None:
            await asyncio.wait([running.task])
        turns = await self.store.sessions.turns(running.ref.session_id)
        return next((t.outcome for t in turns if t.turn_id == running.ref.turn_id), "")

    async def resume(self, session_id: str, turn_id: str, step_mode: bool = False) -> TurnResult:
        """Continue a turn that stopped before it ended (``paused``, ``interrupted`` by a
        crash, or ``error``: a full disk, a provider that failed), under the same run, from
        its last committed step, with the steers held while it was paused."""
        self.running.refuse(session_id, "resume a turn")
        session = await self.store.sessions.get(session_id)
        refuse_undecided(session)
        turn = await self.store.sessions.turn(session_id, turn_id)
        if turn.outcome not in RESUMABLE:
            raise Conflict(
                f"turn {turn_id} is {turn.outcome}, not paused, interrupted or error; only a"
                " turn that stopped before it ended can be resumed",
                turnId=turn_id,
                outcome=turn.outcome,
            )
        path = await self.store.sessions.history_to(session_id, turn.parent_turn_id)
        steps = await self.store.runs.steps(turn.run_id)
        told = await self._instructions(session)
        self.running.refuse(session_id, "resume a turn")
        await self.store.runs.resume(turn.run_id)
        removed = await asyncio.to_thread(remove_leftover_writes, Path(session.root))
        if removed:
            log.info("removed %d file(s) that interrupted writes left", len(removed))
        ref = TurnRef(session_id, turn_id, turn.run_id)
        first = len(steps) + 1
        held = tuple(
            Steer(d["text"], d.get("clientMsgId"))
            for d in await self.store.runs.held_steers(turn.run_id)
        )
        await self.store.runs.add_event(turn.run_id, EventKind.RESUMED, first, {"fromStep": first})
        if steps and steps[-1].decision == StepKind.REPLY and not held:
            await self.store.runs.finish(turn.run_id, Outcome.FINISHED, None)
            return await self._result(ref, TurnEnd(Outcome.FINISHED))
        settings = self.defaults.for_session(session.provider)
        prompt = opening(steps) or turn.prompt  # the first call's prompt holds the editor context
        model = settings.effective_model
        own = await self.images.of_turn(session_id, turn, model)
        sent = await self.images.of_path(
            session_id, path, model, sum(len(i.data) for i in own.values())
        )
        system = conversation(session.root, [], prompt, told.text)[0]
        messages = [system, prompt_message(prompt, turn.images, own), *replay(steps)]
        return await self._run(
            _Start(
                session,
                ref,
                settings,
                messages,
                prompt,
                first_step=first,
                instruction_files=told.files,
                step_mode=step_mode,
                held=held,
                path=tuple(path),
                sent=sent,
            )
        )

    async def compact(self, session_id: str) -> Compacted:
        """Compact the session's branch now (``session/compact``): the oldest turns of the
        path to its head, all but the newest, summarized into a step of the head turn."""
        self.running.refuse(session_id, "compact it")
        session = await self.store.sessions.get(session_id)
        path = await self.store.sessions.history(session_id)
        if not path:
            raise Conflict(f"session {session_id} has no turns to compact", sessionId=session_id)
        await self.store.leases.claim(session_id)
        head = path[-1]
        ref = TurnRef(session_id, head.turn_id, head.run_id)
        settings = self.defaults.for_session(session.provider)
        try:
            provider = self._provider(settings)
        except ProviderError as exc:
            raise TrellisError(str(exc), sessionId=session_id) from exc
        told = await self._instructions(session)
        recorder = Recorder(self.store, head.run_id)
        system = conversation(session.root, [], "", told.text)[0]
        keeper = await keeper_for(
            self.store,
            self.context_windows,
            settings,
            provider,
            recorder,
            system,
            path,
            [],
            session.pinned,
        )
        keeper.hooks = self._turn_hooks(session, ref)
        number = len(await self.store.runs.steps(head.run_id)) + 1
        made: list[Step] = []

        async def commit(step: Step) -> None:
            await recorder.add_step(step)
            made.append(step)
            self.notifier.step(ref, step)

        self.running.refuse(session_id, "compact it")
        self.running.start(ref).done = number - 1  # the head turn's steps so far
        try:
            await keeper.compact(keeper.head(), number, commit, {"onDemand": True})
        except ProviderError as exc:
            raise TrellisError(
                f"compacting session {session_id} failed: {exc}", sessionId=session_id
            ) from exc
        finally:
            self.running.end(session_id)
        if not made:
            return Compacted(session_id, head.turn_id, None, 0, None, Tokens(), None)
        step, summary = made[0], keeper.summary
        assert summary is not None
        spent_here = cost(provider.model, step.tokens)
        return Compacted(
            session_id,
            head.turn_id,
            step.step,
            summary.turns,
            summary.text,
            step.tokens,
            spent_here,
        )

    async def steer(
        self, session_id: str, text: str, client_msg_id: str | None
    ) -> tuple[TurnRef, bool]:
        """Queue a steer for the running turn; False with it when ``client_msg_id`` was
        already queued in this turn (it is not delivered twice)."""
        running = self.running.get(session_id)
        steer = Steer(text, client_msg_id)
        if running is None:
            paused = await self._paused(session_id)
            if paused is not None:
                return paused, await self.store.runs.hold_steer(paused.run_id, steer.detail())
            await self.store.leases.claim(session_id)  # names another writer, if any
            raise NotRunning(
                f"session {session_id} has no running turn to steer; send a turn instead",
                sessionId=session_id,
            )
        return running.ref, running.inbox.put(steer)

    async def _paused(self, session_id: str) -> TurnRef | None:
        """The session's head turn, when it is paused."""
        session = await self.store.sessions.get(session_id)
        if session.head is None:
            return None
        turn = await self.store.sessions.turn(session_id, session.head)
        if turn.outcome != Outcome.PAUSED:
            return None
        return TurnRef(session_id, turn.turn_id, turn.run_id)

    async def pause(self, session_id: str) -> TurnRef | None:
        """Ask the session's running turn to stop at its next step boundary; None when
        nothing was running."""
        running = self.running.get(session_id)
        if running is None:
            await self.store.leases.claim(session_id)  # names another writer, if any
            return None
        running.pause_requested = True
        return running.ref

    async def cancel(self, session_id: str) -> TurnRef | None:
        """Stop the session's running turn; None when nothing was running."""
        running = self.running.get(session_id)
        if running is None:
            await self.store.leases.claim(session_id)  # names another writer, if any
            return None
        if running.task is not None:
            running.cancelled_by_request = True
            running.task.cancel()
            await asyncio.wait([running.task], timeout=CANCEL_WAIT_SECONDS)
        return running.ref

    async def _run(self, start: _Start) -> TurnResult:
        ref = start.ref
        running = self.running.start(ref, start.prompt)
        running.step_mode, running.done = start.step_mode, start.first_step - 1
        for steer in start.held:
            running.inbox.put(steer)
        end = TurnEnd(Outcome.ERROR)
        unanswered = False  # the request fails: the followers still hear how the turn ended
        hooks = self._turn_hooks(start.session, ref)
        try:
            model = start.settings.describe()
            model["instructionFiles"] = [f.detail() for f in start.instruction_files]
            await self.store.runs.add_event(ref.run_id, EventKind.MODEL, None, model)
            await self.images.keep(ref.run_id, list(start.images))
            if start.attached:
                entries = [a.detail() for a in start.attached]
                await self.store.runs.add_event(
                    ref.run_id, EventKind.CONTEXT, 1, {"entries": entries}
                )
            if start.follows is not None:
                followed = start.follows
                detail = {
                    "turnId": followed.turn_id,
                    "entries": [e.to_wire() for e in followed.plan.entries],
                }
                await self.store.runs.add_event(ref.run_id, EventKind.PLAN_APPROVED, None, detail)
            if start.command is not None:
                await self.store.runs.add_event(
                    ref.run_id, EventKind.COMMAND, None, dict(start.command)
                )
            if hooks is not None:
                await hooks.record(start.hooked, 1)
                await hooks.waiting()
            end = await self._drive(start, running, hooks)
        except asyncio.CancelledError:
            end = TurnEnd(Outcome.CANCELLED)
            if not running.cancelled_by_request:
                unanswered = True
                raise
            # session/cancel: the turn's own request answers with the cancelled turn.
            task = asyncio.current_task()
            if task is not None:
                task.uncancel()
        except TrellisError as exc:  # e.g. the session was taken over mid-turn
            end = TurnEnd(Outcome.ERROR, exc.message)
            unanswered = True
            raise
        finally:
            self.running.end(ref.session_id)
            await self._end(running, end)
            if hooks is not None:
                await _turn_end(hooks, end)
            if unanswered:
                try:
                    await self._result(ref, end)
                except Exception as exc:  # the request's own error is what it answers
                    log.warning("could not tell the followers how a turn ended: %s", exc)
        return await self._result(ref, end)

    async def _end(self, running: RunningTurn, end: TurnEnd) -> None:
        ref = running.ref
        for steer in running.inbox.close():
            if end.outcome == Outcome.PAUSED:  # kept for the resumed step
                await self.store.runs.add_event(
                    ref.run_id, EventKind.STEER_HELD, None, steer.detail()
                )
                continue
            try:
                await self.store.runs.add_event(
                    ref.run_id, EventKind.STEER_RETURNED, None, steer.detail()
                )
            except TrellisError as exc:
                log.warning("could not record a returned steer: %s", exc.message)
            self.notifier.steered(ref, None, steer, False)
        if running.killed is not None and end.outcome == Outcome.CANCELLED:
            tool, argv = running.killed
            detail = {"tool": tool, "argv": list(argv)}
            try:  # the session waits for a person's decision from now on
                await self.store.runs.add_event(ref.run_id, NEEDED, None, detail)
            except TrellisError as exc:
                log.warning("could not record that a killed command needs a decision: %s", exc)
        await self.store.runs.finish(ref.run_id, end.outcome, end.error)

    async def _result(self, ref: TurnRef, end: TurnEnd) -> TurnResult:
        """The ended turn's answer; every window following the session is told it first."""
        turn = await self.store.sessions.turn(ref.session_id, ref.turn_id)
        summary = await self.store.runs.summary(ref.run_id)
        session = await self.store.sessions.get(ref.session_id)
        result = TurnResult(
            ref.turn_id,
            ref.run_id,
            end.outcome,
            turn.reply,
            turn.tokens,
            summary.steps,
            end.error,
            turn.model,
            session.head_hash,
            recovery=turn.recovery,
            cost=turn.cost,
        )
        self.notifier.turn_ended(ref, result)
        return result

    def _ask_start(
        self, ref: TurnRef, what: str
    ) -> Callable[[dict[str, Any]], Awaitable[Decision]]:
        """How the turn asks whether a program a project names may run (an MCP server's
        start, a hook: ``request[what]["start"]`` or ``["command"]``), the answer recorded."""

        async def ask(request: dict[str, Any]) -> Decision:
            decision = await self.notifier.ask_approval(ref, request)
            named = request[what]
            detail = {
                "tool": request["tool"],
                "action": {"kind": "exec", "target": named.get("start") or named["command"]},
                "decision": decision.value,
            }
            await self.store.runs.add_event(ref.run_id, EventKind.APPROVAL, None, detail)
            return decision

        return ask

    def _turn_hooks(self, session: Session, ref: TurnRef) -> TurnHooks | None:
        if self.hooks is None:
            return None
        return self.hooks.for_turn(session, ref, self._ask_start(ref, "hook"))

    async def _mcp_tools(self, session: Session, ref: TurnRef) -> list[Tool]:
        """The tools of the session's MCP servers, started now if they are not running; a
        project's server not yet approved is asked about first."""
        if self.mcp is None:
            return []
        walls = await self.policies.walls(session)
        servers = await self.mcp.of(session.session_id, session.root, walls)
        if not servers.servers:
            return []
        ask = self._ask_start(ref, "mcp")

        async def note(detail: dict[str, Any]) -> None:
            await self.store.runs.add_event(ref.run_id, EventKind.MCP, None, detail)

        return list(await servers.tools(ask, note))

    async def _tools(
        self,
        session: Session,
        ref: TurnRef,
        policy: Policy,
        ledger: Ledger | None,
        within: Within | None,
    ) -> list[Tool]:
        """The turn's tools: the built-in ones, the session's processes' and its MCP
        servers'; a child's, those it was given; ``task`` too when the policy turns it on
        (never in a child)."""
        tools: list[Tool] = [*default_tools()]
        if self.processes is not None:
            table = SessionProcesses(self.processes, session.session_id, ref.turn_id)
            tools += process_tools(table)
        tools += await self._mcp_tools(session, ref)
        if within is not None:
            return [t for t in tools if t.name in within.tools]
        task = policy.effective_task
        if task.enabled:
            names = tuple(t.name for t in tools)
            children = ChildSessions(
                self,
                self.store,
                self.notifier,
                session,
                ledger,
                names,
                task.max_concurrent,
                self.worktrees,
            )
            tools.append(Task(children))
        return tools

    async def _drive(
        self, start: _Start, running: RunningTurn, hooks: TurnHooks | None = None
    ) -> TurnEnd:
        session, settings = start.session, start.settings
        try:
            provider = self._provider(settings)
        except ProviderError as exc:
            return TurnEnd(Outcome.ERROR, str(exc))
        within = start.within
        parent = None if within is None else within.ledger
        ledger = await self.budgets.ledger(session.session_id, provider.model, start.budget, parent)
        if ledger is not None:
            provider = Budgeted(provider, ledger)
        policy = await self.policies.of(session)
        walls = await self.policies.walls(session)
        root, ref = Path(session.root), running.ref
        context = ToolContext(
            root,
            may_read=policy.may_read,
            editor=self.editor_files(ref),
            killed=running.had_to_kill,
            walls=walls,
        )
        watch = None if self.changes is None else self.changes.watch(ref, context)
        settle = None if watch is None else watch.settle
        verify = start.verify
        check = None if verify is None else Check(self.store, ref, root, *verify, settle, walls)
        recorder = Recorder(self.store, ref.run_id)
        path = list(start.path)
        keeper = await keeper_for(
            self.store,
            self.context_windows,
            settings,
            provider,
            recorder,
            start.messages[0],
            path,
            [ref.run_id],
            session.pinned,
            start.sent,
        )
        keeper.hooks = hooks
        messages = keeper.head() + start.messages[1:]
        spend = await spent(self.store, ref.session_id, ref.turn_id)
        sink = UsageSink(self.notifier, ref, keeper, provider.model, spend)
        plan = TurnPlan(
            messages=messages,
            provider=provider,
            tools=await self._tools(session, ref, policy, ledger, within),
            context=context,
            gate=Gate(
                self.store,
                self.policies,
                self.notifier,
                ref,
                lambda call: approval_diff(call, context),
                walls,
                hooks,
            ),
            watch=watch,
            check=check,
            temperature=settings.temperature,
            max_tokens=settings.max_tokens,
            effort=settings.effort,
            max_steps=self.max_steps if start.max_steps is None else start.max_steps,
            inbox=running.inbox,
            first_step=start.first_step,
            pause=running.pausing,
            activity=Activity(self.notifier, ref, self.store),
            keeper=keeper,
            hooks=hooks,
        )
        try:
            return await run_turn(plan, recorder, sink, start.prompt)
        finally:
            if watch is not None:
                await watch.settle()  # the change set is whole before the turn ends


async def _turn_end(hooks: TurnHooks, end: TurnEnd) -> None:
    """``turnEnd``, once the outcome is recorded; a hook that fails does not fail the turn."""
    try:
        await hooks.turn_end(end.outcome.value, end.error)
    except TrellisError as exc:
        log.warning("the turnEnd hooks could not be recorded: %s", exc.message)
