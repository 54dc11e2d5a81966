"""Editor context on a prompt: what the editor shows (a file, a selection of it, the
diagnostics of a file), attached to a turn's prompt, and how the model is given it.

The model gets the context before the prompt, in one user message::

    <editor-context>
    <selection path="src/app.py" lines="3-7">
    ...the text...
    </selection>
    </editor-context>

    the prompt

one element per entry, in the order given, named after its kind (``file``, ``selection``,
``diagnostics``), with the root-relative ``path`` and, when the entry has a range, its
``lines``; the text ends with a line break before the closing tag.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

from ..convert import Invalid

ContextKind = Literal["file", "selection", "diagnostics"]


@attrs.frozen
class LineRange:
    """Lines of a file, 1-based and inclusive, as ``read_file`` takes them."""

    start_line: int
    end_line: int

    def __attrs_post_init__(self) -> None:
        if self.start_line < 1 or self.end_line < self.start_line:
            raise Invalid("needs 1 <= startLine <= endLine")


@attrs.frozen
class ContextEntry:
    """One entry as the editor sends it; ``text`` left out, the daemon reads it."""

    kind: ContextKind
    path: str
    range: LineRange | None = None
    text: str | None = None


@attrs.frozen
class Attached:
    """An entry ready for the model: its root-relative path and its text, and whether the
    editor gave the text or the daemon read it."""

    kind: ContextKind
    path: str
    range: LineRange | None
    text: str
    read_by: Literal["editor", "daemon"]

    def detail(self) -> dict[str, Any]:
        """What the run's ``context`` event records of it (the text is in the step's prompt)."""
        out: dict[str, Any] = {"kind": self.kind, "path": self.path, "readBy": self.read_by}
        if self.range is not None:
            out["range"] = {"startLine": self.range.start_line, "endLine": self.range.end_line}
        out["chars"] = len(self.text)
        return out


def frame(prompt: str, attached: list[Attached]) -> str:
    """The prompt with its context before it, as the model sees it."""
    if not attached:
        return prompt
    parts = ["<editor-context>"]
    for entry in attached:
        lines = (
            ""
            if entry.range is None
            else f' lines="{entry.range.start_line}-{entry.range.end_line}"'
        )
        text = entry.text if entry.text.endswith("\n") else entry.text + "\n"
        parts.append(f'<{entry.kind} path="{_quoted(entry.path)}"{lines}>\n{text}</{entry.kind}>')
    parts.append("</editor-context>")
    return "\n".join(parts) + "\n\n" + prompt


def _quoted(path: str) -> str:
    return path.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;")
