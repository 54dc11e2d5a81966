"""The view's HTML, drawn from templates with every string escaped (Jinja2 autoescape): the
sessions list, a session's page (its turn tree, the turns' summaries, the plan, the spending
chart, the log's verdict), a turn's heavy parts (steps, events, diffs) and the whole session
as one self-contained report. The page's CSS and script are package files put inline, each
allowed by its hash in the Content-Security-Policy, so nothing else can run or style."""

from __future__ import annotations

import base64
import hashlib
import json
from collections import defaultdict
from dataclasses import dataclass
from importlib import resources
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from ..plans import Plan
from ..records import Session, SessionSummary, Turn
from ..store.chain import LogVerdict
from .markup import markdown, side_by_side, spending_chart
from .reader import TurnDetail

_static = resources.files(__package__).joinpath("static")
CSS = _static.joinpath("view.css").read_text(encoding="utf-8")
JS = _static.joinpath("view.js").read_text(encoding="utf-8")


def source_hash(text: str) -> str:
    """A CSP source naming ``text`` by its SHA-256, as the browser hashes an inline element."""
    digest = hashlib.sha256(text.encode("utf-8")).digest()
    return f"'sha256-{base64.b64encode(digest).decode()}'"


_own = f"script-src {source_hash(JS)}; style-src {source_hash(CSS)}; img-src data:"
PAGE_POLICY = (
    f"default-src 'none'; {_own}; connect-src 'self'; form-action 'self'; base-uri 'none';"
    " frame-ancestors 'none'"
)
"""The served pages' policy: their own script and style, fragments fetched from here."""
REPORT_POLICY = f"default-src 'none'; {_own}; form-action 'none'; base-uri 'none'"
"""The report's policy (a meta tag): nothing but its own inline script and style."""

MAX_DEPTH = 16


@dataclass(frozen=True)
class Row:
    """A turn as a row of the tree: its number (in the order the turns began), how far its
    branch is indented, and whether it is on the path to the head."""

    turn: Turn
    number: int
    depth: int
    on_head: bool

    @property
    def depth_class(self) -> str:
        return f"d{min(self.depth, MAX_DEPTH)}"


def head_path(turns: list[Turn], head: str | None) -> set[str]:
    parents = {t.turn_id: t.parent_turn_id for t in turns}
    path: set[str] = set()
    at = head
    while at is not None and at not in path:
        path.add(at)
        at = parents.get(at)
    return path


def tree_rows(turns: list[Turn], head: str | None) -> list[Row]:
    """The tree as rows: a turn, then the branches that leave it (each indented one more),
    then the turn that goes on from it on its own line (on the head's path when one is)."""
    numbers = {t.turn_id: n for n, t in enumerate(turns, 1)}
    children: dict[str | None, list[Turn]] = defaultdict(list)
    for t in turns:
        parent = t.parent_turn_id if t.parent_turn_id in numbers else None
        children[parent].append(t)
    on_head = head_path(turns, head)
    rows: list[Row] = []
    stack: list[tuple[Turn, int]] = []
    roots = children[None]
    for i, root in reversed(list(enumerate(roots))):
        stack.append((root, 0 if i == 0 else 1))
    while stack:
        turn, depth = stack.pop()
        rows.append(Row(turn, numbers[turn.turn_id], depth, turn.turn_id in on_head))
        kids = children.get(turn.turn_id, [])
        if not kids:
            continue
        main = next((k for k in kids if k.turn_id in on_head), kids[0])
        stack.append((main, depth))
        for kid in reversed([k for k in kids if k is not main]):
            stack.append((kid, depth + 1))
    return rows


def current_plan(turns: list[Turn], head: str | None) -> tuple[Turn, Plan] | None:
    """The plan of the newest turn on the head's path that made one."""
    by_id = {t.turn_id: t for t in turns}
    at = by_id.get(head) if head is not None else None
    seen: set[str] = set()
    while at is not None and at.turn_id not in seen:
        seen.add(at.turn_id)
        if at.plan is not None and at.plan.entries:
            return at, at.plan
        at = by_id.get(at.parent_turn_id) if at.parent_turn_id is not None else None
    return None


def first_line(text: str, limit: int = 90) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _tokens(turn: Turn) -> int:
    return (turn.tokens.input or 0) + (turn.tokens.output or 0)


_env = Environment(
    loader=PackageLoader("trellisd.view", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
    undefined=StrictUndefined,
    keep_trailing_newline=True,
)
_env.filters["markdown"] = markdown
_env.filters["first_line"] = first_line
_env.filters["tokens"] = _tokens
_env.filters["pretty"] = lambda value: json.dumps(value, indent=1, ensure_ascii=False)
_env.globals["side_by_side"] = side_by_side
_env.globals["css"] = Markup(CSS)
_env.globals["js"] = Markup(JS)


def _render(name: str, **values: Any) -> str:
    return _env.get_template(name).render(**values)


def sessions_page(found: list[SessionSummary], query: str | None, cursor: str | None) -> str:
    return _render("sessions.html", found=found, query=query or "", cursor=cursor)


def session_page(
    session: Session,
    turns: list[Turn],
    details: dict[str, TurnDetail] | None = None,
    verdict: LogVerdict | None = None,
) -> str:
    """A session's page; with ``details`` (every turn's) and ``verdict``, the report: all in
    the one file. Without, the served page, whose turns and verdict are fetched when shown."""
    return _render(
        "session.html",
        session=session,
        rows=tree_rows(turns, session.head),
        turns=turns,
        numbers={t.turn_id: n for n, t in enumerate(turns, 1)},
        plan=current_plan(turns, session.head),
        chart=spending_chart(turns),
        details=details,
        verdict=verdict,
        report=details is not None,
        policy=REPORT_POLICY,
    )


def turn_fragment(detail: TurnDetail) -> str:
    """A turn's steps, events, plan and change set, as the page inserts them on opening it."""
    return _render("turn.html", d=detail)


def verdict_fragment(verdict: LogVerdict) -> str:
    return _render("verdict.html", verdict=verdict)


def error_page(status: int, message: str) -> str:
    return _render("error.html", status=status, message=message)
