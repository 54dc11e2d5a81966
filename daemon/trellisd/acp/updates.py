"""What trellisd's records look like as ACP ``session/update``s: a turn replayed from the
store, a committed step as a tool call, a turn's outcome as a stop reason, and the usage of a
session, each a plain dict in the wire's shape (camelCase, no null fields). Pure functions over
records; nothing here touches the wire."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any

from ..commands import CustomCommand
from ..plans import PlanEntry
from ..policy.layers import Approval
from ..pricing import cost
from ..records import Step, ToolCall, Turn
from ..services.changes import StepEdit
from ..services.running import LiveCall
from ..services.seams import summary_line
from ..vocabulary import Outcome
from . import wire
from .wire import StopReason, ToolKind, ToolStatus

KINDS: dict[str, ToolKind] = {
    "read_file": "read",
    "list_dir": "read",
    "search": "search",
    "write_file": "edit",
    "edit_file": "edit",
    "run_command": "execute",
    "start_process": "execute",  # shown in the client's terminal when it offers one
    "read_process_output": "read",
    "write_process_input": "execute",
    "stop_process": "execute",
    "task": "think",  # a child session: its reply is the call's content
    "update_plan": "think",  # its plan is a ``plan`` update too
}

STOP_REASONS: dict[str, StopReason] = {
    Outcome.FINISHED: "end_turn",
    Outcome.SUCCESS: "end_turn",
    Outcome.FAILURE: "end_turn",
    Outcome.PAUSED: "end_turn",
    Outcome.EXHAUSTED: "max_turn_requests",
    Outcome.CANCELLED: "cancelled",
}
"""A turn's outcome as the stop reason of ``session/prompt``; ``error`` (and ``interrupted``)
answer with a JSON-RPC error instead."""

Update = wire.SessionUpdate
"""A ``session/update``'s ``update``."""
ToolContent = wire.ToolCallContent
"""A tool call's content: a content block, or a diff."""


def text_block(text: str) -> wire.TextContent:
    return wire.TextContent(text)


def tool_content(block: wire.ContentBlock) -> ToolContent:
    return wire.ToolCallBlock(block)


def tool_diff_content(path: str, new_text: str, old_text: str | None = None) -> ToolContent:
    return wire.ToolCallDiff(path, new_text, old_text)


def agent_text(text: str) -> Update:
    return wire.AgentMessageChunk(text_block(text))


def agent_thought(text: str) -> Update:
    return wire.AgentThoughtChunk(text_block(text))


def user_text(text: str) -> Update:
    return wire.UserMessageChunk(text_block(text))


def mode_of(approval: Approval) -> str:
    """The ACP mode a session's approval shows as (``all``, set natively, as ``auto``)."""
    return {"never": "read-only", "all": "auto"}.get(approval, approval)


def current_mode(mode_id: str) -> Update:
    return wire.CurrentModeUpdate(mode_id)


def available_commands(commands: Sequence[CustomCommand]) -> Update:
    """The session's custom commands, each run by a prompt that starts with ``/name``."""
    return wire.AvailableCommandsUpdate(
        tuple(
            wire.AvailableCommand(
                c.name,
                c.description or f"{c.source} command {c.name}",
                None if c.argument_hint is None else wire.CommandInput(c.argument_hint),
            )
            for c in commands
        )
    )


def plan(entries: Sequence[PlanEntry]) -> Update:
    """The turn's whole plan; an entry the model gave no priority is ``medium``."""
    return wire.AgentPlanUpdate(
        tuple(
            wire.AcpPlanEntry(
                e.content,
                e.priority if e.priority in ("high", "low") else "medium",  # type: ignore[arg-type]
                e.status.value,
            )
            for e in entries
        )
    )


def tool_call(
    ident: str,
    title: str,
    kind: ToolKind,
    status: ToolStatus,
    content: Sequence[ToolContent],
    raw_input: dict[str, Any],
    raw_output: str | None = None,
) -> Update:
    """A ``tool_call``: ``content`` and ``raw_output`` when there are any."""
    shown = tuple(content) or None
    return wire.ToolCallStart(ident, title, kind, status, shown, raw_input, raw_output)


def tool_call_update(
    ident: str,
    status: ToolStatus | None = None,
    content: Sequence[ToolContent] | None = None,
    raw_output: str | None = None,
) -> Update:
    """A ``tool_call_update``: the fields that changed (those not None)."""
    shown = None if content is None else tuple(content)
    return wire.ToolCallProgress(ident, status, shown, raw_output)


def tool_call_id(run_id: str, step: int) -> str:
    """A tool call's id over ACP: its run and step, the same live and replayed."""
    return f"{run_id}/{step}"


def title(call: ToolCall) -> str:
    """What the tool call does, in one line: the tool and its path or command."""
    args = call.arguments
    target = args.get("path") or args.get("argv") or args.get("pattern") or args.get("prompt") or ""
    if isinstance(target, list):
        target = " ".join(str(a) for a in target)
    return summary_line(f"{call.name} {target}".strip(), 200)


def failed(result: str | None) -> bool:
    return result is None or result.startswith(("error:", "refused"))


def status_of(step: Step) -> ToolStatus:
    return "failed" if step.decision != "tool" or failed(step.result) else "completed"


def diffs(edits: Iterable[StepEdit], root: str, step: int) -> list[ToolContent]:
    return [
        tool_diff_content(os.path.join(root, e.path), e.new_text, e.old_text)
        for e in edits
        if e.step == step
    ]


def result_content(step: Step, edits: Sequence[StepEdit], root: str) -> list[ToolContent]:
    """A finished tool call's content: the files it wrote as diffs, else its result text."""
    out = diffs(edits, root, step.step)
    if not out and step.result:
        out.append(tool_content(text_block(step.result)))
    return out


def announced(run_id: str, step: int, call: ToolCall, content: list[ToolContent]) -> Update:
    """A tool call about to run (waiting for the user's permission)."""
    kind = KINDS.get(call.name, "other")
    return tool_call(
        tool_call_id(run_id, step), title(call), kind, "pending", content, call.arguments
    )


def finished(run_id: str, step: Step, content: list[ToolContent], known: bool) -> Update:
    """A committed tool step: an update of the call announced before, else the whole call."""
    call = step.tool_call
    assert call is not None
    ident = tool_call_id(run_id, step.step)
    if known:
        return tool_call_update(ident, status_of(step), content or None, step.result)
    kind = KINDS.get(call.name, "other")
    return tool_call(
        ident, title(call), kind, status_of(step), content, call.arguments, step.result
    )


def replayed(
    turn: Turn, steps: Sequence[Step], edits: Sequence[StepEdit], root: str
) -> list[Update]:
    """One turn of the history as the updates a client saw live: the prompt, the steers, the
    reasoning, the text and the tool calls with their final status and content."""
    out: list[Update] = [user_text(turn.prompt)]
    for step in steps:
        if step.step > 1 and step.prompt:
            out.append(user_text(step.prompt))
        if step.thought is not None and step.thought.text:
            out.append(agent_thought(step.thought.text))
        if step.text:
            out.append(agent_text(step.text))
        if step.tool_call is not None:
            out.append(finished(turn.run_id, step, result_content(step, edits, root), False))
    if not steps and turn.reply:
        out.append(agent_text(turn.reply))
    if turn.plan is not None:
        out.append(plan(turn.plan.entries))
    return out


CALL_STATUSES: dict[str, ToolStatus] = {
    "proposed": "pending",
    "running": "in_progress",
    "done": "completed",
    "refused": "failed",
    "failed": "failed",
    "cancelled": "failed",
}
"""A live call's status (``session/toolCall``'s) as a tool call's."""


def in_flight(run_id: str, call: LiveCall, output: str, content: list[ToolContent]) -> Update:
    """A call of a step not committed yet, as a client that joins mid-turn first sees it: its
    status now, and its output so far (else ``content``, a proposed write's diff)."""
    shown = [tool_content(text_block(output))] if output else content
    return tool_call(
        tool_call_id(run_id, call.step),
        title(ToolCall("", call.tool, call.arguments)),
        KINDS.get(call.tool, "other"),
        CALL_STATUSES.get(call.status, "pending"),
        shown,
        call.arguments,
    )


def usage_update(used: int, size: int, spent: float | None) -> Update:
    """The context ``used`` of ``size`` tokens, and what the session cost so far in USD
    (None while a model's price is unknown)."""
    paid = None if spent is None else wire.Cost(float(spent), "USD")
    return wire.UsageUpdate(max(used, 0), size, paid)


def usage(turns: Sequence[Turn], last_input: int | None, size: int) -> Update:
    """The context the last model call took and the session's cost so far (when the price
    table knows the models)."""
    costs = [cost(t.model, t.tokens) for t in turns]
    known = [c for c in costs if c is not None]
    return usage_update(last_input or 0, size, sum(known) if known else None)


def info(title: str, updated_at: str | None) -> Update:
    return wire.SessionInfoUpdate(title or None, updated_at)
