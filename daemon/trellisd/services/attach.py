"""The editor context of a prompt, checked and read: every path must lead inside the session
root (``-32602`` otherwise), sizes are capped, and an entry without its text is read by the
daemon as ``read_file`` reads, under the same policy, so an entry reaches nothing that the
model's ``read_file`` could not."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

from ..agent.attached import Attached, ContextEntry
from ..errors import InvalidParams
from ..policy.layers import Verdict
from ..tools import Action, ReadFile, ToolContext, ToolFailure

MAX_ENTRIES = 20
MAX_ENTRY_BYTES = 256 * 1024  # what read_file answers at most
MAX_TOTAL_BYTES = 1024 * 1024


async def attach(
    entries: tuple[ContextEntry, ...], context: ToolContext, judge: Callable[[Action], Verdict]
) -> list[Attached]:
    """The entries ready for the model, in order; ``judge`` is the session's policy."""
    if len(entries) > MAX_ENTRIES:
        raise InvalidParams(
            f"at most {MAX_ENTRIES} context entries may go with a prompt, not {len(entries)}",
            field="context",
        )
    attached: list[Attached] = []
    total = 0
    for index, entry in enumerate(entries):
        field = f"context[{index}]"
        try:
            real = context.resolve(entry.path, field=f"{field}.path")
        except ToolFailure as exc:
            raise InvalidParams(f"{field}.path: {exc}", field=f"{field}.path") from exc
        path = context.relative(real)
        text = entry.text
        read_by: Literal["editor", "daemon"] = "editor"
        if text is None:
            text = await _read(entry, path, context, judge, field)
            read_by = "daemon"
        size = len(text.encode("utf-8", errors="replace"))
        if size > MAX_ENTRY_BYTES:
            raise InvalidParams(
                f"{field}.text is {size} bytes; an entry may hold at most {MAX_ENTRY_BYTES}",
                field=f"{field}.text",
            )
        total += size
        if total > MAX_TOTAL_BYTES:
            raise InvalidParams(
                f"the context holds more than {MAX_TOTAL_BYTES} bytes; attach less",
                field="context",
            )
        attached.append(Attached(entry.kind, path, entry.range, text, read_by))
    return attached


async def _read(
    entry: ContextEntry,
    path: str,
    context: ToolContext,
    judge: Callable[[Action], Verdict],
    field: str,
) -> str:
    if entry.kind == "diagnostics":
        raise InvalidParams(
            f"{field}.text: diagnostics need their text; the daemon cannot read them",
            field=f"{field}.text",
        )
    if entry.kind == "selection" and entry.range is None:
        raise InvalidParams(
            f"{field}: a selection needs its text or its range", field=f"{field}.range"
        )
    arguments: dict[str, object] = {"path": path}
    if entry.range is not None:
        arguments.update(startLine=entry.range.start_line, endLine=entry.range.end_line)
    tool = ReadFile()
    try:
        verdict = judge(tool.action(arguments, context))
        if verdict.ruling == "refuse":
            raise InvalidParams(
                f"{field}.path: the session's policy refuses reading {path}: {verdict.reason}",
                field=f"{field}.path",
            )
        return await tool.run(arguments, context)
    except ToolFailure as exc:
        raise InvalidParams(f"{field}.path: {exc}", field=f"{field}.path") from exc
