"""The pieces of the view drawn from untrusted text: the model's Markdown (raw HTML off,
links only to http, https and mailto), a change's side-by-side diff (``difflib.HtmlDiff``,
which escapes), and the spending chart (inline SVG whose only text is numbers)."""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from markdown_it import MarkdownIt
from markupsafe import Markup, escape

from ..records import Turn

LINK_SCHEMES = ("http://", "https://", "mailto:")


def _link_allowed(url: str) -> bool:
    return url.strip().lower().startswith(LINK_SCHEMES)


_markdown = MarkdownIt("commonmark", {"html": False, "linkify": False}).disable("image")
_markdown.validateLink = _link_allowed  # type: ignore[method-assign]


def markdown(text: str) -> Markup:
    """The model's text as HTML: Markdown with raw HTML shown as text, images left out and
    any link but http, https and mailto kept as text."""
    return Markup(_markdown.render(text))


_HUNK = re.compile(r"^@@ -(\d+)(?:,\d+)? \+(\d+)(?:,\d+)? @@")


@dataclass(frozen=True)
class Hunk:
    """One hunk of a unified diff: where it starts in the file before and after, and its
    lines on each side (context on both)."""

    header: str
    before_start: int
    after_start: int
    before: list[str]
    after: list[str]


def split_diff(unified: str) -> list[Hunk]:
    """A unified diff's hunks, each with its lines before and after."""
    hunks: list[Hunk] = []
    for line in unified.splitlines():
        found = _HUNK.match(line)
        if found:
            before_start, after_start = int(found[1]), int(found[2])
            hunks.append(Hunk(line, max(before_start, 1), max(after_start, 1), [], []))
        elif not hunks or line.startswith("\\"):
            continue
        elif line.startswith("-"):
            hunks[-1].before.append(line[1:])
        elif line.startswith("+"):
            hunks[-1].after.append(line[1:])
        else:
            hunks[-1].before.append(line[1:])
            hunks[-1].after.append(line[1:])
    return hunks


class _NumberedFrom(difflib.HtmlDiff):
    """``HtmlDiff`` numbering each side's lines from where its hunk starts in the file."""

    def __init__(self, hunk: Hunk) -> None:
        super().__init__(tabsize=4, wrapcolumn=90)
        self._first = (hunk.before_start, hunk.after_start)

    def _format_line(self, side: int, flag: bool, linenum: int | str, text: str) -> str:
        if isinstance(linenum, int):  # a wrapped line's continuation has none
            linenum += self._first[side] - 1
        drawn: str = super()._format_line(side, flag, linenum, text)  # type: ignore[misc]
        return drawn


def side_by_side(path: str, unified: str) -> Markup:
    """A change's diff as two-column tables, one a hunk, numbered as the file's lines
    (``difflib.HtmlDiff`` escapes every line)."""
    tables = []
    for n, hunk in enumerate(split_diff(unified)):
        names = (f"{path} before", f"{path} after") if n == 0 else ("", "")
        table = _NumberedFrom(hunk).make_table(hunk.before, hunk.after, *names)
        tables.append(f'<p class="hunk">{escape(hunk.header)}</p>{table}')
    return Markup("".join(tables))


@dataclass(frozen=True)
class Chart:
    """The session's spending, turn by turn in the order they ran: an SVG and its totals."""

    svg: Markup
    tokens: int
    usd: float
    priced: bool


WIDTH, HEIGHT = 720, 120


def spending_chart(turns: list[Turn]) -> Chart:
    """Tokens per turn as bars, money over the session as a line (left scale tokens, right
    scale dollars), drawn here so the page needs no script for it."""
    tokens = [(t.tokens.input or 0) + (t.tokens.output or 0) for t in turns]
    costs = [t.cost or 0.0 for t in turns]
    total_usd = sum(costs)
    most = max(tokens, default=0) or 1
    n = max(len(turns), 1)
    step = WIDTH / n
    bars = "".join(
        f"M{i * step:.2f} {HEIGHT}V{HEIGHT - HEIGHT * v / most:.2f}" for i, v in enumerate(tokens)
    )
    line = []
    running = 0.0
    for i, c in enumerate(costs):
        running += c
        y = HEIGHT - HEIGHT * running / (total_usd or 1)
        line.append(f"{(i + 0.5) * step:.2f},{y:.2f}")
    width = max(min(step * 0.8, 12.0), 0.5)
    svg = (
        f'<svg class="chart" role="img" viewBox="0 -14 {WIDTH + 90} {HEIGHT + 30}"'
        f' xmlns="http://www.w3.org/2000/svg"><title>tokens per turn and money spent so far'
        f"</title>"
        f'<path class="bars" d="{bars}" stroke="#7aa7d8" stroke-width="{width:.2f}"/>'
        f'<polyline class="money" points="{" ".join(line)}" fill="none" stroke="#d0742c"'
        f' stroke-width="2"/>'
        f'<text x="0" y="-3" font-size="11" fill="#555">{most:,} tokens</text>'
        f'<text x="{WIDTH + 4}" y="8" font-size="11" fill="#d0742c">${total_usd:.4f}</text>'
        f'<text x="0" y="{HEIGHT + 13}" font-size="11" fill="#555">turn 1</text>'
        f'<text x="{WIDTH - 60}" y="{HEIGHT + 13}" font-size="11" fill="#555">turn {len(turns)}'
        f"</text></svg>"
    )
    priced = all(t.cost is not None for t in turns)
    return Chart(Markup(svg), sum(tokens), total_usd, priced)
