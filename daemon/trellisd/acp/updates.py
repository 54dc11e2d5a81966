"""What trellisd's records look like as ACP ``session/update``s: a turn replayed from the
store, a committed step as a tool call, a turn's outcome as a stop reason, and the usage of a
session. Pure functions over records; nothing here touches the wire."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from typing import Any, Literal

from acp import schema
from acp.helpers import (
    start_tool_call,
    text_block,
    tool_content,
    tool_diff_content,
    update_agent_message_text,
    update_tool_call,
    update_user_message_text,
)

from ..pricing import cost
from ..records import Step, ToolCall, Turn
from ..services.changes import StepEdit
from ..services.seams import summary_line
from ..vocabulary import Outcome

StopReason = Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]
ToolStatus = Literal["pending", "in_progress", "completed", "failed"]
ToolKind = Literal["read", "edit", "delete", "move", "search", "execute", "think", "fetch", "other"]

KINDS: dict[str, ToolKind] = {
    "read_file": "read",
    "list_dir": "read",
    "search": "search",
    "write_file": "edit",
    "edit_file": "edit",
    "run_command": "execute",
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

CONTEXT_WINDOW = 128_000
"""The context window ``usage_update`` reports as ``size`` when ``TRELLISD_CONTEXT_WINDOW``
does not name the model's."""

ToolContent = schema.ContentToolCallContent | schema.FileEditToolCallContent


def context_window(env: dict[str, str] | None = None) -> int:
    value = (os.environ if env is None else env).get("TRELLISD_CONTEXT_WINDOW", "")
    return int(value) if value.isdigit() and int(value) > 0 else CONTEXT_WINDOW


def tool_call_id(run_id: str, step: int) -> str:
    """A tool call's id over ACP: its run and step, the same live and replayed."""
    return f"{run_id}/{step}"


def title(call: ToolCall) -> str:
    """What the tool call does, in one line: the tool and its path or command."""
    args = call.arguments
    target = args.get("path") or args.get("argv") or args.get("pattern") or ""
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


def announced(run_id: str, step: int, call: ToolCall, content: list[ToolContent]) -> Any:
    """A tool call about to run (waiting for the user's permission)."""
    return start_tool_call(
        tool_call_id(run_id, step),
        title(call),
        kind=KINDS.get(call.name, "other"),
        status="pending",
        content=content or None,
        raw_input=call.arguments,
    )


def finished(run_id: str, step: Step, content: list[ToolContent], known: bool) -> Any:
    """A committed tool step: an update of the call announced before, else the whole call."""
    call = step.tool_call
    assert call is not None
    if known:
        return update_tool_call(
            tool_call_id(run_id, step.step),
            status=status_of(step),
            content=content or None,
            raw_output=step.result,
        )
    return start_tool_call(
        tool_call_id(run_id, step.step),
        title(call),
        kind=KINDS.get(call.name, "other"),
        status=status_of(step),
        content=content or None,
        raw_input=call.arguments,
        raw_output=step.result,
    )


def replayed(turn: Turn, steps: Sequence[Step], edits: Sequence[StepEdit], root: str) -> list[Any]:
    """One turn of the history as the updates a client saw live: the prompt, the steers, the
    text and the tool calls with their final status and content."""
    out: list[Any] = [update_user_message_text(turn.prompt)]
    for step in steps:
        if step.step > 1 and step.prompt:
            out.append(update_user_message_text(step.prompt))
        if step.text:
            out.append(update_agent_message_text(step.text))
        if step.tool_call is not None:
            out.append(finished(turn.run_id, step, result_content(step, edits, root), False))
    if not steps and turn.reply:
        out.append(update_agent_message_text(turn.reply))
    return out


def usage(turns: Sequence[Turn], last_input: int | None, size: int) -> schema.UsageUpdate:
    """The context the last model call took and the session's cost so far (when the price
    table knows the models)."""
    costs = [cost(t.model, t.tokens) for t in turns]
    known = [c for c in costs if c is not None]
    return schema.UsageUpdate(
        session_update="usage_update",
        used=max(last_input or 0, 0),
        size=size,
        cost=schema.Cost(amount=sum(known), currency="USD") if known else None,
    )


def info(title: str, updated_at: str | None) -> schema.SessionInfoUpdate:
    return schema.SessionInfoUpdate(
        session_update="session_info_update", title=title or None, updated_at=updated_at
    )
