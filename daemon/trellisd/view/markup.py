"""The pieces of the view drawn from untrusted text: the model's Markdown (raw HTML off,
links only to http, https and mailto), a change's side-by-side diff (``difflib.HtmlDiff``,
which escapes), and the spending chart (inline SVG whose only text is numbers)."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from markdown_it import MarkdownIt
from markupsafe import Markup

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


def split_diff(unified: str) -> tuple[list[str], list[str]]:
    """The lines before and after of a unified diff's hunks (context on both sides), each
    hunk headed by its ``@@`` line on both sides."""
    before: list[str] = []
    after: list[str] = []
    in_hunk = False
    for line in unified.splitlines():
        if line.startswith("@@"):
            in_hunk = True
            before.append(line)
            after.append(line)
        elif not in_hunk or line.startswith("\\"):
            continue
        elif line.startswith("-"):
            before.append(line[1:])
        elif line.startswith("+"):
            after.append(line[1:])
        else:
            before.append(line[1:])
            after.append(line[1:])
    return before, after


def side_by_side(path: str, unified: str) -> Markup:
    """A change's diff as a two-column table (``difflib.HtmlDiff`` escapes every line)."""
    before, after = split_diff(unified)
    table = difflib.HtmlDiff(tabsize=4, wrapcolumn=90).make_table(
        before, after, f"{path} before", f"{path} after"
    )
    return Markup(table)


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
