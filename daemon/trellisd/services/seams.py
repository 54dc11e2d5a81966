"""What a running turn's loop is plugged into: the gate in front of its tools, a bounded
turn's check, the recorder of its steps, and the sink that tells the editor."""

from __future__ import annotations

import shlex
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

from ..agent.steering import Steer
from ..hooks.run import HookAnswer
from ..oneline import summary_line as summary_line  # also the ACP adapter's
from ..plans import PlanEntry
from ..policy.layers import MODE_LAYER, Approval
from ..policy.rules import Grant, Rule, proposed_rule
from ..records import Step, ToolCall, TurnRef, TurnResult
from ..sandbox.bwrap import WallsUnavailable, builder
from ..sandbox.walls import Walls
from ..store.facade import AsyncStore
from ..tools.base import Action
from ..tools.processes import ProcessState
from ..tools.verify import run_check
from ..vocabulary import ApprovalKind, CallStatus, Decision, EventKind
from .policies import Policies
from .queue import Queued

CHECK_TIMEOUT_SECONDS = 600.0
WALLED_CALLS = ("run_command", "start_process")
"""The calls that start a program in the walls: their ``sandbox`` event says which walls."""
CHECK_OUTPUT_CHARS = 4000


class Notifier(Protocol):
    """How the services tell the editor what happens while a turn runs."""

    def token(self, turn: TurnRef, step: int, text: str) -> None: ...

    def thought(self, turn: TurnRef, step: int, text: str) -> None:
        """A piece of what the model reasons in step ``step``'s call, as it streams."""
        ...

    def step(self, turn: TurnRef, step: Step) -> None: ...

    def steered(self, turn: TurnRef, step: int | None, steer: Steer, delivered: bool) -> None: ...

    def tool_call(self, turn: TurnRef, step: int, call: ToolCall, status: CallStatus) -> None: ...

    def tool_output(self, turn: TurnRef, step: int, call: ToolCall, text: str) -> None: ...

    def process_output(self, session_id: str, process_id: str, text: str) -> None:
        """What a session's process (``start_process``) printed since its last piece."""
        ...

    def process_exited(self, state: ProcessState) -> None:
        """A session's process ended, by itself or stopped (by the model, the editor, the
        session's close): after the last piece of its output."""
        ...

    def child_started(
        self, turn: TurnRef, step: int, call: ToolCall, child_session_id: str
    ) -> None:
        """A ``task`` call started the child session ``child_session_id`` (after ``forked``
        made the parent's followers follow it, before its turn's first notification)."""
        ...

    def usage(self, turn: TurnRef, figures: dict[str, Any]) -> None:
        """After a step: the context's size and window, the tokens and cost so far."""
        ...

    def plan(self, turn: TurnRef, step: int, entries: tuple[PlanEntry, ...]) -> None:
        """Step ``step``'s ``update_plan`` call replaced the turn's plan (recorded first)."""
        ...

    def forked(self, origin_id: str, fork_id: str) -> None:
        """A turn asked of ``origin_id`` runs in its fork ``fork_id`` (``onConflict``), or a
        turn of ``origin_id`` started the child session ``fork_id`` (the ``task`` tool):
        whoever follows the origin is told of that session's turn, and asked its approvals,
        too."""
        ...

    def queued(self, entry: Queued, position: int) -> None:
        """A prompt joined its session's queue at ``position`` (1: runs next)."""
        ...

    def dequeued(self, entry: Queued, reason: str) -> None:
        """A prompt left its session's queue: ``started``, ``dropped`` or ``cancelled``."""
        ...

    def mode_changed(self, session_id: str, approval: Approval) -> None:
        """The session's approval mode changed (``session/mode``, a plan's approval, a custom
        command's mode for its turn, ACP's ``set_mode``), from whichever window."""
        ...

    def turn_ended(self, turn: TurnRef, result: TurnResult) -> None:
        """The turn ended (its last step is committed) and is about to answer: every window
        following the session is told how, the one that started it too."""
        ...

    async def ask_approval(self, turn: TurnRef, request: dict[str, Any]) -> Decision:
        """Ask the editor (``session/requestApproval``) about ``request`` (tool, arguments,
        summary); its decision, or ``timeout`` when it gave none in time."""
        ...


class GateHooks(Protocol):
    """The hooks the gate runs (``services.hooks``)."""

    async def pre_tool(self, call: ToolCall, step: int) -> str | None:
        """``preToolUse``: the reason when a hook blocks the call."""
        ...

    async def permission(self, call: ToolCall, step: int) -> HookAnswer | None:
        """``permissionRequest``: a hook's ``allow`` or ``deny``; None: ask the person."""
        ...


class Gate:
    """The session's policy in front of every tool call; asks the editor when it says ask,
    with the diff ``preview`` gives for a call that writes a file. ``hooks`` run first
    (``preToolUse``) and before the person is asked (``permissionRequest``)."""

    def __init__(
        self,
        store: AsyncStore,
        policies: Policies,
        notifier: Notifier,
        ref: TurnRef,
        preview: Callable[[ToolCall], Awaitable[str | None]] | None = None,
        walls: Walls | None = None,
        hooks: GateHooks | None = None,
    ) -> None:
        self.store, self.policies, self.notifier, self.ref = store, policies, notifier, ref
        self.preview = preview
        self.walls = walls
        self.hooks = hooks

    async def _refusal(
        self,
        call: ToolCall,
        action: Action,
        step: int,
        layer: str | None,
        rule: str | None,
        reason: str,
    ) -> None:
        detail = {
            "tool": call.name,
            "action": {"kind": action.kind, "target": action.target},
            "layer": layer,
            "rule": rule,
            "reason": reason,
        }
        if layer == MODE_LAYER:  # the approval mode refused it (``plan``)
            detail["mode"] = rule
        await self.store.runs.add_event(self.ref.run_id, EventKind.REFUSAL, step, detail)

    async def admit(self, call: ToolCall, action: Action, step: int) -> str | None:
        session_id = self.ref.session_id
        if self.hooks is not None:
            blocked = await self.hooks.pre_tool(call, step)
            if blocked is not None:
                await self._refusal(call, action, step, "hook", "preToolUse", blocked)
                return f"refused by a preToolUse hook: {blocked}"
        verdict = self.policies.check(session_id, action)
        if verdict.ruling == "refuse":
            await self._refusal(call, action, step, verdict.layer, verdict.rule, verdict.reason)
            return f"refused by the session's policy: {verdict.reason}"
        if verdict.ruling == "ask":
            hooks = None if action.escalate else self.hooks  # no hook lets a call out of the walls
            decided = None if hooks is None else await hooks.permission(call, step)
            if decided is not None and decided.blocks:
                reason = decided.reason or "(no reason given)"
                await self._refusal(call, action, step, "hook", "permissionRequest", reason)
                return f"refused by a permissionRequest hook: {reason}"
            refused = None if decided is not None else await self._ask(call, action, step)
            if refused is not None:
                return refused
        if action.kind == "exec" and call.name in WALLED_CALLS and self.walls is not None:
            walls = self.walls.unconfined() if action.escalate else self.walls
            sandbox = await recorded(walls)
            detail = {"tool": call.name, "command": action.target, "sandbox": sandbox}
            await self.store.runs.add_event(self.ref.run_id, EventKind.SANDBOX, step, detail)
        return None

    async def _ask(self, call: ToolCall, action: Action, step: int) -> str | None:
        """Ask the editor; the refusal to give the model, or None when allowed. An
        escalation (a command outside the walls) is asked as ``kind: "escalate"`` with the
        model's reason, and an "allow always" answer to it allows this once: no grant. A
        command asked about proposes a rule (``proposedRule``), which ``allowRule`` and
        ``allowRuleProject`` save instead of the exact command."""
        request: dict[str, Any] = {"tool": call.name, "arguments": call.arguments}
        if action.escalate:
            reason = str(call.arguments.get("reason") or "")
            request["kind"] = ApprovalKind.ESCALATE.value
            request["command"] = action.target
            request["reason"] = reason
            request["summary"] = summary_line(
                f"{call.name} asks to run {action.target} OUTSIDE the walls: {reason}"
            )
        else:
            request["kind"] = ApprovalKind.TOOL.value
            request["summary"] = summary_line(f"{call.name} wants to {action.kind} {action.target}")
        rule = None if action.escalate else _proposed(call, action)
        if rule is not None:
            request["proposedRule"] = list(rule)
        diff = None if self.preview is None or action.kind != "write" else await self.preview(call)
        if diff is not None:
            request["diff"] = diff
        if action.target.startswith("mcp:"):  # an MCP tool's call: say which
            server, _, tool = action.target.removeprefix("mcp:").partition("/")
            request["mcp"] = {"server": server, "tool": tool}
        decision = await self.notifier.ask_approval(self.ref, request)
        detail: dict[str, Any] = {
            "tool": call.name,
            "action": {"kind": action.kind, "target": action.target},
            "decision": decision.value,
        }
        if action.escalate:
            detail["kind"] = ApprovalKind.ESCALATE.value
            detail["reason"] = request["reason"]
        saved = rule if decision in RULE_DECISIONS else None
        if saved is not None:
            detail["rule"] = list(saved)
        await self.store.runs.add_event(self.ref.run_id, EventKind.APPROVAL, step, detail)
        if decision in ALWAYS_DECISIONS and not action.escalate:
            project = decision in (Decision.ALLOW_ALWAYS_PROJECT, Decision.ALLOW_RULE_PROJECT)
            grant: Grant = action if saved is None else saved
            await self.policies.grant(self.ref.session_id, grant, project)
        elif decision not in ALLOWED_DECISIONS:
            await self._refusal(
                call, action, step, "approval", decision.value, "the user did not approve it"
            )
            return (
                f"refused: the user did not approve this {action.kind} ({decision.value});"
                " do not try it again this way"
            )
        return None


RULE_DECISIONS = (Decision.ALLOW_RULE, Decision.ALLOW_RULE_PROJECT)
"""Answers that save the proposed rule; with none proposed, they save the exact action, as
``allowAlways`` and ``allowAlwaysProject`` do."""
ALWAYS_DECISIONS = (Decision.ALLOW_ALWAYS, Decision.ALLOW_ALWAYS_PROJECT, *RULE_DECISIONS)
ALLOWED_DECISIONS = (Decision.ALLOW, *ALWAYS_DECISIONS)


def _proposed(call: ToolCall, action: Action) -> Rule | None:
    """The rule a ``run_command`` approval proposes (``policy.rules``), if any."""
    if call.name != "run_command" or action.kind != "exec" or action.argv is None:
        return None
    return proposed_rule(action.argv)


class Check:
    """A bounded turn's check, run in the session root."""

    def __init__(
        self,
        store: AsyncStore,
        ref: TurnRef,
        root: Path,
        argv: list[str],
        expect_exit: int,
        settle: Callable[[], Awaitable[None]] | None = None,
        walls: Walls | None = None,
    ) -> None:
        self.store, self.ref, self.root = store, ref, root
        self.argv, self.expect_exit = argv, expect_exit
        self.settle = settle  # what the last command changed is recorded before the check runs
        self.walls = walls

    async def run(self, step: int) -> str | None:
        if self.settle is not None:
            await self.settle()
        result = await run_check(
            self.argv, self.expect_exit, self.root, CHECK_TIMEOUT_SECONDS, self.walls
        )
        output = result.output[-CHECK_OUTPUT_CHARS:]
        detail = {
            "argv": self.argv,
            "expectExit": self.expect_exit,
            "exitCode": result.exit_code,
            "passed": result.passed,
            "output": output,
        }
        if self.walls is not None:
            detail["sandbox"] = await recorded(self.walls)
        await self.store.runs.add_event(self.ref.run_id, EventKind.CHECK, step, detail)
        if result.passed:
            return None
        return (
            f"The check {shlex.join(self.argv)} failed (exit {result.exit_code}, expected"
            f" {self.expect_exit}):\n{output}\nFix the problem and try again."
        )


async def recorded(walls: Walls) -> dict[str, Any]:
    """What a step's record says of the walls a program is about to run in: the mode, the
    network and what builds them (``via``: bubblewrap, or Landlock where it cannot); left
    without ``via`` when nothing can build them (the program will not run, saying why)."""
    try:
        via = await builder(walls)
    except WallsUnavailable:
        via = None
    return walls.record() if via is None else {**walls.record(), "via": via}


class Recorder:
    """Commits the run's steps and events to the store."""

    def __init__(self, store: AsyncStore, run_id: str) -> None:
        self.store, self.run_id = store, run_id

    async def add_step(self, step: Step) -> None:
        await self.store.runs.add_step(self.run_id, step)

    async def add_event(self, kind: EventKind, step: int | None, detail: dict[str, Any]) -> None:
        await self.store.runs.add_event(self.run_id, kind, step, detail)


class Sink:
    """Tells the editor about one turn."""

    def __init__(self, notifier: Notifier, ref: TurnRef) -> None:
        self.notifier, self.ref = notifier, ref

    def token(self, step: int, text: str) -> None:
        self.notifier.token(self.ref, step, text)

    def thought(self, step: int, text: str) -> None:
        self.notifier.thought(self.ref, step, text)

    def step(self, step: Step) -> None:
        self.notifier.step(self.ref, step)

    def steered(self, step: int, steer: Steer, delivered: bool) -> None:
        self.notifier.steered(self.ref, step, steer, delivered)


class Activity:
    """Tells the editor about one turn's tool calls as they happen, and keeps its plan."""

    def __init__(self, notifier: Notifier, ref: TurnRef, store: AsyncStore) -> None:
        self.notifier, self.ref, self.store = notifier, ref, store

    def call(self, step: int, call: ToolCall, status: CallStatus) -> None:
        self.notifier.tool_call(self.ref, step, call, status)

    def output(self, step: int, call: ToolCall, text: str) -> None:
        self.notifier.tool_output(self.ref, step, call, text)

    def child(self, step: int, call: ToolCall, session_id: str) -> None:
        self.notifier.child_started(self.ref, step, call, session_id)

    async def plan(self, step: int, entries: tuple[PlanEntry, ...]) -> None:
        """The turn's plan is the ``plan`` event's (its last), committed before it is told."""
        detail = {"entries": [e.to_wire() for e in entries]}
        await self.store.runs.add_event(self.ref.run_id, EventKind.PLAN, step, detail)
        self.notifier.plan(self.ref, step, entries)
